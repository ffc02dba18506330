// PodSecurity (issue 18, item 7): every pod shape the webhook injects, rendered by the real
// mutation, against the Pod Security Standards' `baseline` rules (test/support/pod_security.h), and
// the binder's GPU reservation pod against `restricted`. The checker itself is tested rule by rule
// first, so that an empty list of violations means something.
#include <functional>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/pod_security.h"
#include "tessera/binder/gpu_binding.h"
#include "tessera/webhook/admission.h"

namespace {

using nlohmann::json;
using tessera::testing::baselineViolations;
using tessera::testing::restrictedViolations;
namespace wh = tessera::webhook;

/// A pod that passes `restricted`: the pod runs as non-root with RuntimeDefault seccomp, every
/// container drops ALL and forbids escalation.
json restrictedPod(json annotations = json::object()) {
  const json sc = {{"allowPrivilegeEscalation", false}, {"capabilities", {{"drop", json::array({"ALL"})}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "nb"}, {"namespace", "ml"}, {"annotations", std::move(annotations)}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"securityContext",
             {{"runAsNonRoot", true}, {"runAsUser", 1000}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
            {"initContainers", {{{"name", "fetch"}, {"image", "busybox"}, {"securityContext", sc}}}},
            {"containers",
             {{{"name", "main"}, {"image", "pytorch"}, {"securityContext", sc}},
              {{"name", "side"}, {"image", "busybox"}, {"securityContext", sc}}}},
            {"volumes", {{{"name", "data"}, {"emptyDir", json::object()}}}}}}};
}

/// An ordinary pod: no securityContext at all (what most workloads look like; `baseline` holds).
json plainPod(json annotations) {
  json pod = restrictedPod(std::move(annotations));
  pod["spec"].erase("securityContext");
  for (const char* list : {"initContainers", "containers"})
    for (auto& c : pod["spec"][list]) c.erase("securityContext");
  return pod;
}

json mutated(const json& pod, const wh::Options& options = {}) {
  wh::Decision d = wh::reviewPod("CREATE", pod, nullptr, true, options, [] { return std::string("x7k2p"); });
  INFO(d.message);
  REQUIRE(d.allowed);
  REQUIRE(d.hasPatch());
  return pod.patch(json::parse(d.patch));
}

bool hasViolation(const std::vector<std::string>& violations, const std::string& prefix) {
  for (const auto& v : violations)
    if (v.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

bool preloaded(const json& container) {
  for (const auto& e : container.value("env", json::array()))
    if (e.value("name", "") == "LD_PRELOAD") return true;
  return false;
}

/// The pod shapes the webhook injects: annotations and the backend they get.
struct Shape {
  const char* name;
  json annotations;
  bool hard;
};
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> kShapes = {
      {"hard fraction", {{"gpu-fraction", "0.5"}}, true},
      {"hard memory", {{"gpu-memory", "4096"}}, true},
      {"hard multi-device", {{"gpu-fraction", "0.25"}, {"gpu-fraction-num-devices", "2"}}, true},
      {"hard, compute limit", {{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-cores", "30"}}, true},
      {"none", {{"gpu-fraction", "0.5"}, {"tessera.dev/isolation", "none"}}, false},
  };
  return kShapes;
}

}  // namespace

TEST_CASE("pod security: the checker finds each baseline rule") {
  const json good = plainPod({{"gpu-fraction", "0.5"}});
  REQUIRE(baselineViolations(good).empty());
  struct Case {
    const char* rule;
    std::function<void(json&)> breakIt;
  };
  const Case cases[] = {
      {"host namespaces", [](json& p) { p["spec"]["hostNetwork"] = true; }},
      {"host namespaces", [](json& p) { p["spec"]["hostPID"] = true; }},
      {"host namespaces", [](json& p) { p["spec"]["hostIPC"] = true; }},
      {"hostPath volumes",
       [](json& p) {
         p["spec"]["volumes"].push_back({{"name", "h"}, {"hostPath", {{"path", "/"}}}});
       }},
      {"privileged", [](json& p) { p["spec"]["containers"][1]["securityContext"]["privileged"] = true; }},
      {"capabilities",
       [](json& p) { p["spec"]["initContainers"][0]["securityContext"]["capabilities"]["add"] = {"SYS_ADMIN"}; }},
      {"hostPorts",
       [](json& p) {
         p["spec"]["containers"][0]["ports"] = {{{"containerPort", 80}, {"hostPort", 80}}};
       }},
      {"sysctls",
       [](json& p) {
         p["spec"]["securityContext"]["sysctls"] = {{{"name", "kernel.msgmax"}, {"value", "1"}}};
       }},
      {"seccomp", [](json& p) { p["spec"]["securityContext"]["seccompProfile"]["type"] = "Unconfined"; }},
      {"seccomp",
       [](json& p) { p["spec"]["containers"][0]["securityContext"]["seccompProfile"]["type"] = "Unconfined"; }},
      {"procMount", [](json& p) { p["spec"]["containers"][0]["securityContext"]["procMount"] = "Unmasked"; }},
      {"AppArmor",
       [](json& p) { p["spec"]["containers"][0]["securityContext"]["appArmorProfile"]["type"] = "Unconfined"; }},
      {"AppArmor",
       [](json& p) {
         p["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/main"] = "unconfined";
       }},
      {"SELinux", [](json& p) { p["spec"]["securityContext"]["seLinuxOptions"]["type"] = "spc_t"; }},
      {"SELinux", [](json& p) { p["spec"]["containers"][0]["securityContext"]["seLinuxOptions"]["user"] = "root"; }},
      {"hostProcess", [](json& p) { p["spec"]["securityContext"]["windowsOptions"]["hostProcess"] = true; }},
  };
  for (const auto& c : cases) {
    json bad = good;
    c.breakIt(bad);
    INFO(c.rule << ": " << bad.dump());
    const auto v = baselineViolations(bad);
    CHECK(v.size() == 1);
    CHECK(hasViolation(v, c.rule));
  }
  // What baseline allows: default capabilities, safe sysctls, RuntimeDefault, an allowed SELinux type.
  json fine = good;
  fine["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = {"NET_BIND_SERVICE", "CHOWN"};
  fine["spec"]["securityContext"]["sysctls"] = {{{"name", "net.ipv4.ip_local_port_range"}, {"value", "1024 65535"}}};
  fine["spec"]["securityContext"]["seLinuxOptions"]["type"] = "container_t";
  fine["spec"]["containers"][0]["ports"] = {{{"containerPort", 80}}};
  CHECK(baselineViolations(fine).empty());
}

TEST_CASE("pod security: the checker finds each rule restricted adds") {
  const json good = restrictedPod();
  INFO(joined(restrictedViolations(good)));
  REQUIRE(restrictedViolations(good).empty());
  struct Case {
    const char* rule;
    std::function<void(json&)> breakIt;
  };
  const Case cases[] = {
      {"volume types",
       [](json& p) {
         p["spec"]["volumes"].push_back({{"name", "n"}, {"nfs", {{"server", "x"}}}});
       }},
      {"allowPrivilegeEscalation",
       [](json& p) { p["spec"]["containers"][1]["securityContext"].erase("allowPrivilegeEscalation"); }},
      {"runAsNonRoot", [](json& p) { p["spec"]["securityContext"].erase("runAsNonRoot"); }},
      {"runAsNonRoot", [](json& p) { p["spec"]["initContainers"][0]["securityContext"]["runAsNonRoot"] = false; }},
      {"runAsUser", [](json& p) { p["spec"]["containers"][0]["securityContext"]["runAsUser"] = 0; }},
      {"seccomp", [](json& p) { p["spec"]["securityContext"].erase("seccompProfile"); }},
      {"capabilities", [](json& p) { p["spec"]["containers"][0]["securityContext"].erase("capabilities"); }},
      {"capabilities",
       [](json& p) { p["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = {"CHOWN"}; }},
  };
  for (const auto& c : cases) {
    json bad = good;
    c.breakIt(bad);
    INFO(c.rule << ": " << bad.dump());
    const auto v = restrictedViolations(bad);
    CHECK_FALSE(v.empty());
    CHECK(hasViolation(v, c.rule));
    CHECK(baselineViolations(bad).empty());  // each of these is restricted's alone
  }
}

TEST_CASE("pod security: every pod shape the webhook injects passes baseline") {
  for (const Shape& s : shapes()) {
    for (bool generated : {false, true}) {
      json pod = plainPod(s.annotations);
      if (generated) {
        pod["metadata"].erase("name");
        pod["metadata"]["generateName"] = "nb-";
      }
      const json out = mutated(pod);
      INFO(s.name << (generated ? " (generateName)" : "") << ": " << out.dump());
      // Really injected: the check below is about the wired pod, not an untouched one.
      CHECK(preloaded(out["spec"]["containers"][0]) == s.hard);
      CHECK((out["spec"]["initContainers"][0]["name"] == "tessera-interposer") == s.hard);
      const auto v = baselineViolations(out);
      INFO(joined(v));
      CHECK(v.empty());
    }
  }
}

TEST_CASE("pod security: a restricted pod stays restricted after the webhook wires it") {
  // The interposer's init container carries its own restricted securityContext, and emptyDir is
  // an allowed volume type: a namespace enforcing `restricted` admits hard pods.
  for (const Shape& s : shapes()) {
    const json out = mutated(restrictedPod(s.annotations));
    INFO(s.name << ": " << out.dump());
    const auto v = restrictedViolations(out);
    INFO(joined(v));
    CHECK(v.empty());
  }
  // Without a pod-level securityContext, the injected init container still passes on its own.
  json plain = mutated(plainPod({{"gpu-fraction", "0.5"}}));
  json onlyCopier = plain;
  onlyCopier["spec"]["initContainers"] = json::array({plain["spec"]["initContainers"][0]});
  onlyCopier["spec"]["containers"] = json::array();
  INFO(onlyCopier.dump());
  CHECK(restrictedViolations(onlyCopier).empty());
}

TEST_CASE("pod security: what does not pass baseline, and fails the check") {
  // The hostPath layout (--interposer-source host-path) is what the default replaced: both volumes.
  wh::Options hostPath;
  hostPath.interposerSource = wh::InterposerSource::HostPath;
  const auto v = baselineViolations(mutated(plainPod({{"gpu-fraction", "0.5"}}), hostPath));
  INFO(joined(v));
  CHECK(v == std::vector<std::string>{"hostPath volumes: spec.volumes[1] tessera-interposer",
                                      "hostPath volumes: spec.volumes[2] tessera-regions"});
  // mps shares the MPS control daemon's pipe directory of the node: a hostPath, necessarily
  // (docs/isolation.md, "PodSecurity": mps pods need a namespace at the `privileged` level).
  wh::Options mps;
  mps.isolation = tessera::api::Isolation::Mps;
  for (const char* ann : {"gpu-fraction", "gpu-memory"}) {
    const auto m =
        baselineViolations(mutated(plainPod({{ann, std::string(ann) == "gpu-memory" ? "2048" : "0.5"}}), mps));
    INFO(joined(m));
    CHECK(m == std::vector<std::string>{"hostPath volumes: spec.volumes[1] tessera-mps-pipe"});
  }
}

TEST_CASE("pod security: the GPU reservation pod passes restricted") {
  tessera::binder::GpuBindingOptions options;
  const json pod = tessera::binder::GpuBinding::reservationPod(options, "g-1a2b", "node-3");
  INFO(pod.dump());
  CHECK(pod["spec"]["nodeName"] == "node-3");
  CHECK(pod["spec"]["containers"][0]["args"] == json::array({"reserve"}));
  const auto v = restrictedViolations(pod);
  INFO(joined(v));
  CHECK(v.empty());
  // Each part of its securityContext is needed.
  json noPodContext = pod;
  noPodContext["spec"].erase("securityContext");
  CHECK(hasViolation(restrictedViolations(noPodContext), "runAsNonRoot"));
  CHECK(hasViolation(restrictedViolations(noPodContext), "seccomp"));
  json noContainerContext = pod;
  noContainerContext["spec"]["containers"][0].erase("securityContext");
  CHECK(hasViolation(restrictedViolations(noContainerContext), "allowPrivilegeEscalation"));
  CHECK(hasViolation(restrictedViolations(noContainerContext), "capabilities"));
}
