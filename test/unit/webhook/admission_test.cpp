// The webhook's admission logic without HTTP: which pods are touched, what the patch does to the pod
// (applied with nlohmann's RFC 6902 implementation), idempotence, validation messages, and
// malformed AdmissionReviews answered 400.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tessera/webhook/admission.h"

namespace {

using nlohmann::json;
using namespace tessera::webhook;
using tessera::api::Isolation;

SuffixSource fixedSuffix() {
  return [] { return std::string("x7k2p"); };
}

json gpuPod(json annotations, const std::string& name = "train") {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"namespace", "ml"}, {"annotations", std::move(annotations)}}},
      {"spec",
       {{"schedulerName", "tessera"},
        {"initContainers", {{{"name", "setup"}, {"image", "busybox"}}}},
        {"containers",
         {{{"name", "main"}, {"image", "pytorch"}, {"env", {{{"name", "A"}, {"value", "1"}}}}},
          {{"name", "side"}, {"image", "busybox"}, {"volumeMounts", {{{"name", "data"}, {"mountPath", "/data"}}}}}}},
        {"volumes", {{{"name", "data"}, {"emptyDir", json::object()}}}}}}};
  if (!name.empty()) pod["metadata"]["name"] = name;
  return pod;
}

/// Reviews a CREATE and applies the patch; REQUIREs it was allowed.
json mutated(const json& pod, const Options& o = {}) {
  Decision d = reviewPod("CREATE", pod, nullptr, true, o, fixedSuffix());
  INFO(d.message);
  REQUIRE(d.allowed);
  return pod.patch(json::parse(d.patch));
}

const json* envVar(const json& container, const std::string& name) {
  if (!container.contains("env")) return nullptr;
  for (const auto& e : container["env"])
    if (e.value("name", "") == name) return &e;
  return nullptr;
}

std::string base64Decode(const std::string& s) {
  static const std::string kTable = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t buf = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    buf = (buf << 6) | static_cast<uint32_t>(kTable.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xff);
    }
  }
  return out;
}

json review(const std::string& path, const json& request, const Options& o = {}) {
  json body = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
  HttpAnswer a = handleRequest("POST", path, body.dump(), o, fixedSuffix());
  INFO(a.body);
  REQUIRE(a.status == 200);
  json out = json::parse(a.body);
  CHECK(out["apiVersion"] == "admission.k8s.io/v1");
  CHECK(out["kind"] == "AdmissionReview");
  CHECK(out["response"]["uid"] == request["uid"]);
  return out["response"];
}

json createRequest(const json& pod) {
  return {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
          {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
          {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
          {"namespace", "ml"},
          {"operation", "CREATE"},
          {"object", pod}};
}

}  // namespace

TEST_CASE("webhook: pods that are not ours, or ask for no GPU share, are allowed untouched") {
  json other = gpuPod({{"gpu-fraction", "0.5"}});
  other["spec"]["schedulerName"] = "default-scheduler";
  Decision d = reviewPod("CREATE", other, nullptr, true, {}, fixedSuffix());
  CHECK(d.allowed);
  CHECK_FALSE(d.hasPatch());
  // Not ours: not even validated.
  other["metadata"]["annotations"]["gpu-fraction"] = "1.5";
  CHECK(reviewPod("CREATE", other, nullptr, true, {}, fixedSuffix()).allowed);
  json noSched = gpuPod({{"gpu-fraction", "0.5"}});
  noSched["spec"].erase("schedulerName");
  CHECK_FALSE(reviewPod("CREATE", noSched, nullptr, true, {}, fixedSuffix()).hasPatch());

  json whole = gpuPod({{"tessera.dev/gpu-policy", "spread"}});
  d = reviewPod("CREATE", whole, nullptr, true, {}, fixedSuffix());
  CHECK(d.allowed);
  CHECK_FALSE(d.hasPatch());
  // Another scheduler name configured.
  Options o;
  o.schedulerName = "tessera-b";
  CHECK_FALSE(reviewPod("CREATE", gpuPod({{"gpu-fraction", "0.5"}}), nullptr, true, o, fixedSuffix()).hasPatch());
  // DELETE and CONNECT are not reviewed.
  CHECK(reviewPod("DELETE", json(), nullptr, true, {}, fixedSuffix()).allowed);
}

TEST_CASE("webhook: bad GPU annotations are refused with a message naming the key") {
  struct Case {
    json annotations;
    std::string message;
  };
  const Case cases[] = {
      {{{"gpu-fraction", "1.5"}},
       "annotation gpu-fraction: \"1.5\" is out of range: must be below 1 (request whole GPUs with nvidia.com/gpu)"},
      {{{"gpu-fraction", "half"}}, "annotation gpu-fraction: \"half\" is not a number between 0 and 1 (exclusive)"},
      {{{"gpu-memory", "-4"}}, "annotation gpu-memory: \"-4\" is not a positive integer number of MiB"},
      {{{"gpu-fraction-num-devices", "2"}}, "annotation gpu-fraction-num-devices needs gpu-fraction or gpu-memory"},
      {{{"gpu-fraction", "0.5"}, {"gpu-fraction-num-devices", "99999999999999999999"}},
       "annotation gpu-fraction-num-devices: \"99999999999999999999\" is too large: at most 1024"},
      {{{"gpu-fraction", "0.5"}, {"gpu-fraction-num-devices", "0"}},
       "annotation gpu-fraction-num-devices: \"0\" is not an integer of at least 1"},
      {{{"gpu-fraction", "0.5"}, {"gpu-fraction-num-devices", "2x"}},
       "annotation gpu-fraction-num-devices: \"2x\" is not an integer of at least 1"},
      {{{"gpu-memory", "2199023255552"}}, "annotation gpu-memory: \"2199023255552\" is too large: at most 1099511627776"},
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/isolation", "soft"}},
       "annotation tessera.dev/isolation: \"soft\" is not a known isolation backend (valid: hard, mps, none)"},
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-cores", "150"}},
       "annotation tessera.dev/gpu-cores: \"150\" is too large: at most 100"},
      {{{"tessera.dev/gpu-cores", "100"}},  // alone, 100: no share to derive (50 alone is a 0.5 share)
       "annotation tessera.dev/gpu-cores needs gpu-fraction or gpu-memory (a pod with whole GPUs has all of their "
       "compute)"},
      {{{"tessera.dev/gpu-policy", "pack"}},
       "annotation tessera.dev/gpu-policy: \"pack\" is not a known policy (valid: binpack, spread)"},
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-configmap", "Bad_Name"}},
       "annotation tessera.dev/gpu-configmap: \"Bad_Name\" is not a valid ConfigMap name (lower-case letters, digits, "
       "'-' and '.', at most 253)"},
  };
  for (const auto& c : cases) {
    INFO(c.annotations.dump());
    for (bool mutate : {true, false}) {
      Decision d = reviewPod("CREATE", gpuPod(c.annotations), nullptr, mutate, {}, fixedSuffix());
      CHECK_FALSE(d.allowed);
      CHECK(d.code == 422);
      CHECK(d.message == c.message);
      CHECK_FALSE(d.hasPatch());
    }
  }
  // A fraction with a whole-GPU request.
  json both = gpuPod({{"gpu-fraction", "0.5"}});
  both["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  Decision d = reviewPod("CREATE", both, nullptr, true, {}, fixedSuffix());
  CHECK_FALSE(d.allowed);
  CHECK(d.message == "annotation gpu-fraction cannot be combined with a whole nvidia.com/gpu request (1)");
  // A pod the converter refuses (a bad quantity) is refused with the converter's message.
  json badQty = gpuPod({{"gpu-fraction", "0.5"}});
  badQty["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "lots"}}}};
  d = reviewPod("CREATE", badQty, nullptr, true, {}, fixedSuffix());
  CHECK_FALSE(d.allowed);
  CHECK(d.message.find("spec.containers[0].resources.requests.cpu") != std::string::npos);
}

TEST_CASE("webhook: hard isolation wiring, ConfigMap envFrom in every container, idempotent") {
  json pod = gpuPod({{"gpu-fraction", "0.25"}});
  json out = mutated(pod);
  // No generated name: the pod has a name, the binder uses <name>-tessera-gpu.
  CHECK_FALSE(out["metadata"]["annotations"].contains("tessera.dev/gpu-configmap"));
  // The library comes from an init container, first, before the pod's own (they are preloaded too).
  const json& inits = out["spec"]["initContainers"];
  REQUIRE(inits.size() == 2);
  const json& copier = inits[0];
  CHECK(copier["name"] == "tessera-interposer");
  CHECK(copier["image"] == "ghcr.io/tessera-sched/tessera-interposer:latest");
  CHECK(copier["imagePullPolicy"] == "IfNotPresent");
  CHECK(copier["command"] ==
        json::array({"cp", "/opt/tessera/lib/libtessera-cuda.so", "/tessera-interposer/libtessera-cuda.so"}));
  CHECK(copier["volumeMounts"] ==
        json::array({{{"name", "tessera-interposer"}, {"mountPath", "/tessera-interposer"}}}));
  CHECK(copier["securityContext"]["runAsUser"] == 65532);
  CHECK_FALSE(copier.contains("env"));  // not wired: the library does not exist yet when it runs
  CHECK_FALSE(copier.contains("envFrom"));
  CHECK(inits[1]["name"] == "setup");
  for (const char* list : {"initContainers", "containers"}) {
    for (const auto& c : out["spec"][list]) {
      if (c["name"] == "tessera-interposer") continue;
      INFO(c["name"]);
      REQUIRE(c.contains("envFrom"));
      CHECK(c["envFrom"] == json::array({{{"configMapRef", {{"name", "train-tessera-gpu"}}}}}));
      REQUIRE(envVar(c, "LD_PRELOAD"));
      CHECK((*envVar(c, "LD_PRELOAD"))["value"] == "/usr/local/tessera/lib/libtessera-cuda.so");
      // Pod-level accounting: every container names the same file in the same per-pod folder.
      REQUIRE(envVar(c, "TESSERA_ISOLATION_REGION"));
      CHECK((*envVar(c, "TESSERA_ISOLATION_REGION"))["value"] == "/run/tessera/gpu.region");
      REQUIRE(envVar(c, "TESSERA_POD_UID"));
      CHECK((*envVar(c, "TESSERA_POD_UID"))["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid");
      CHECK((*envVar(c, "TESSERA_POD_NAMESPACE"))["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace");
      CHECK((*envVar(c, "TESSERA_POD_NAME"))["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name");
      CHECK((*envVar(c, "TESSERA_CONTAINER_NAME"))["value"] == c["name"]);
      int mounted = 0;
      for (const auto& m : c["volumeMounts"]) {
        if (m["name"] == "tessera-interposer") {
          ++mounted;
          CHECK(m["mountPath"] == "/usr/local/tessera/lib");
          CHECK(m["readOnly"] == true);
        } else if (m["name"] == "tessera-regions") {
          ++mounted;
          CHECK(m["mountPath"] == "/run/tessera");
          CHECK_FALSE(m.contains("subPathExpr"));  // the emptyDir is the pod's own
          CHECK(m["readOnly"] == false);
        }
      }
      CHECK(mounted == 2);
    }
  }
  // The user's env and mounts are kept.
  CHECK((*envVar(out["spec"]["containers"][0], "A"))["value"] == "1");
  CHECK(out["spec"]["containers"][1]["volumeMounts"][0]["name"] == "data");
  // emptyDirs, no hostPath (PodSecurity baseline; pod_security_test.cpp).
  const json& vols = out["spec"]["volumes"];
  REQUIRE(vols.size() == 3);
  CHECK(vols[1] == json{{"name", "tessera-interposer"}, {"emptyDir", json::object()}});
  CHECK(vols[2] == json{{"name", "tessera-regions"}, {"emptyDir", json::object()}});
  // A second pass adds nothing.
  Decision again = reviewPod("CREATE", out, nullptr, true, {}, fixedSuffix());
  CHECK(again.allowed);
  CHECK(again.patch == "[]");
  // A pod without init containers gets the list; the image follows --interposer-image.
  json bare = gpuPod({{"gpu-fraction", "0.25"}});
  bare["spec"].erase("initContainers");
  Options o;
  o.interposerImage = "registry.example/tessera-interposer:0.2.0";
  json bareOut = mutated(bare, o);
  REQUIRE(bareOut["spec"]["initContainers"].size() == 1);
  CHECK(bareOut["spec"]["initContainers"][0]["image"] == "registry.example/tessera-interposer:0.2.0");
  CHECK(reviewPod("CREATE", bareOut, nullptr, true, o, fixedSuffix()).patch == "[]");
  // Not for mps or none.
  json none = mutated(gpuPod({{"gpu-fraction", "0.5"}, {"tessera.dev/isolation", "none"}}));
  CHECK(none["spec"]["initContainers"].size() == 1);
}

TEST_CASE("webhook: a compute share alone (tessera.dev/gpu-cores) is a GPU share: allowed and wired") {
  json out = mutated(gpuPod({{"tessera.dev/gpu-cores", "30"}}));
  const json& c = out["spec"]["containers"][0];
  REQUIRE(envVar(c, "LD_PRELOAD"));
  REQUIRE(envVar(c, "TESSERA_ISOLATION_REGION"));
  CHECK(c["envFrom"] == json::array({{{"configMapRef", {{"name", "train-tessera-gpu"}}}}}));
}

TEST_CASE("webhook: hard isolation with --interposer-source host-path: the node folders, as before") {
  Options o;
  o.interposerSource = InterposerSource::HostPath;
  json out = mutated(gpuPod({{"gpu-fraction", "0.25"}}), o);
  REQUIRE(out["spec"]["initContainers"].size() == 1);  // no copier: the DaemonSet installed the library
  const json& vols = out["spec"]["volumes"];
  REQUIRE(vols.size() == 3);
  CHECK(vols[1] == json{{"name", "tessera-interposer"},
                        {"hostPath", {{"path", "/usr/local/tessera/lib"}, {"type", "Directory"}}}});
  CHECK(vols[2] ==
        json{{"name", "tessera-regions"}, {"hostPath", {{"path", "/var/lib/tessera/regions"}, {"type", "Directory"}}}});
  for (const auto& c : out["spec"]["containers"])
    for (const auto& m : c["volumeMounts"])
      if (m["name"] == "tessera-regions") CHECK(m["subPathExpr"] == "$(TESSERA_POD_UID)");
  CHECK(reviewPod("CREATE", out, nullptr, true, o, fixedSuffix()).patch == "[]");

  // The region folder follows --region-dir; a pod without volumes gets both.
  json pod = gpuPod({{"gpu-fraction", "0.5"}});
  pod["spec"].erase("volumes");
  pod["spec"]["containers"][1].erase("volumeMounts");
  o.regionHostDir = "/srv/tessera/regions/";
  json out2 = mutated(pod, o);
  REQUIRE(out2["spec"]["volumes"].size() == 2);
  CHECK(out2["spec"]["volumes"][1]["hostPath"]["path"] == "/srv/tessera/regions");
  CHECK(out2["spec"]["containers"][1]["volumeMounts"].size() == 2);
  CHECK(reviewPod("CREATE", out2, nullptr, true, o, fixedSuffix()).patch == "[]");
}

TEST_CASE("webhook: hard isolation: a pod without volumes gets both; a clash at /run/tessera is refused") {
  json pod = gpuPod({{"gpu-fraction", "0.5"}});
  pod["spec"].erase("volumes");
  pod["spec"]["containers"][1].erase("volumeMounts");
  json out = mutated(pod);
  REQUIRE(out["spec"]["volumes"].size() == 2);
  CHECK(out["spec"]["volumes"][1]["emptyDir"] == json::object());
  CHECK(out["spec"]["containers"][1]["volumeMounts"].size() == 2);
  CHECK(reviewPod("CREATE", out, nullptr, true, {}, fixedSuffix()).patch == "[]");
  // A mount of the user's where the region folder goes is refused with a message.
  json clash = gpuPod({{"gpu-fraction", "0.5"}});
  clash["spec"]["containers"][0]["volumeMounts"] = {{{"name", "run"}, {"mountPath", "/run/tessera"}}};
  Decision d = reviewPod("CREATE", clash, nullptr, true, {}, fixedSuffix());
  CHECK_FALSE(d.allowed);
  CHECK(d.message ==
        "container main: volume run is already mounted at /run/tessera, where the hard isolation backend mounts "
        "tessera-regions");
}

TEST_CASE("webhook: a pod with generateName gets a generated ConfigMap name in its annotations") {
  json pod = gpuPod({{"gpu-memory", "4096"}}, "");
  pod["metadata"]["generateName"] = "sweep-";
  json out = mutated(pod);
  CHECK(out["metadata"]["annotations"]["tessera.dev/gpu-configmap"] == "sweep-x7k2p-tessera-gpu");
  CHECK(out["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"] == "sweep-x7k2p-tessera-gpu");
  // Idempotent: the second pass finds the annotation and reuses it.
  CHECK(reviewPod("CREATE", out, nullptr, true, {}, [] { return std::string("other"); }).patch == "[]");
  // No annotations map at all.
  json bare = gpuPod(json::object(), "");
  bare["metadata"]["generateName"] = "job-";
  bare["metadata"]["annotations"] = {{"gpu-fraction", "0.5"}};
  bare["metadata"].erase("annotations");
  bare["metadata"]["annotations"] = {{"gpu-fraction", "0.5"}};
  CHECK(mutated(bare)["metadata"]["annotations"]["tessera.dev/gpu-configmap"] == "job-x7k2p-tessera-gpu");
  // A user-chosen ConfigMap name is used as is.
  json chosen = gpuPod({{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-configmap", "my-gpu-env"}}, "");
  chosen["metadata"]["generateName"] = "job-";
  CHECK(mutated(chosen)["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"] == "my-gpu-env");
  // A very long generateName is cut so the ConfigMap name stays within 253 characters.
  json longName = gpuPod({{"gpu-fraction", "0.5"}}, "");
  longName["metadata"]["generateName"] = std::string(250, 'a');
  const std::string cm = mutated(longName)["metadata"]["annotations"]["tessera.dev/gpu-configmap"];
  CHECK(cm.size() == 253);
}

TEST_CASE("webhook: mps wiring from the portion; none adds only the ConfigMap") {
  Options mps;
  mps.isolation = Isolation::Mps;
  json out = mutated(gpuPod({{"gpu-fraction", "0.333"}}), mps);
  const json& c = out["spec"]["containers"][0];
  CHECK((*envVar(c, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))["value"] == "34");  // 33.3 % rounded up
  CHECK((*envVar(c, "CUDA_MPS_PIPE_DIRECTORY"))["value"] == "/tmp/nvidia-mps");
  CHECK(envVar(c, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == nullptr);  // from the ConfigMap (binder)
  CHECK(envVar(c, "LD_PRELOAD") == nullptr);
  CHECK(out["spec"]["volumes"][1] ==
        json{{"name", "tessera-mps-pipe"}, {"hostPath", {{"path", "/tmp/nvidia-mps"}, {"type", "Directory"}}}});
  CHECK(c["volumeMounts"][0] ==
        json{{"name", "tessera-mps-pipe"}, {"mountPath", "/tmp/nvidia-mps"}, {"readOnly", false}});
  CHECK(reviewPod("CREATE", out, nullptr, true, mps, fixedSuffix()).patch == "[]");

  json mem = mutated(gpuPod({{"gpu-memory", "2048"}, {"gpu-fraction-num-devices", "2"}}), mps);
  const json& m = mem["spec"]["containers"][0];
  CHECK((*envVar(m, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"))["value"] == "0=2048M,1=2048M");
  CHECK(envVar(m, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == nullptr);  // from the ConfigMap (binder)

  // The per-pod annotation overrides the default backend.
  json none = mutated(gpuPod({{"gpu-fraction", "0.5"}, {"tessera.dev/isolation", "none"}}));
  const json& n = none["spec"]["containers"][0];
  CHECK(n["envFrom"] == json::array({{{"configMapRef", {{"name", "train-tessera-gpu"}}}}}));
  CHECK(n["env"].size() == 1);  // only the user's A=1
  CHECK(none["spec"]["volumes"].size() == 1);
  json hardOverride = mutated(gpuPod({{"gpu-fraction", "0.5"}, {"tessera.dev/isolation", "hard"}}), mps);
  CHECK(envVar(hardOverride["spec"]["containers"][0], "LD_PRELOAD") != nullptr);
  // A custom interposer folder (trailing slash tolerated).
  Options custom;
  custom.interposerDir = "/opt/tessera/lib/";
  json c2 = mutated(gpuPod({{"gpu-fraction", "0.5"}}), custom);
  CHECK((*envVar(c2["spec"]["containers"][0], "LD_PRELOAD"))["value"] == "/opt/tessera/lib/libtessera-cuda.so");
}

TEST_CASE("webhook: existing env, envFrom and mounts of the user") {
  json pod = gpuPod({{"gpu-fraction", "0.5"}});
  json& c = pod["spec"]["containers"][0];
  c["env"].push_back({{"name", "LD_PRELOAD"}, {"value", "/usr/lib/libjemalloc.so"}});
  c["env"].push_back({{"name", "TESSERA_ISOLATION_REGION"}, {"value", "/dev/shm/mine.region"}});
  c["envFrom"] = json::array({{{"secretRef", {{"name", "creds"}}}}});
  json out = mutated(pod);
  const json& oc = out["spec"]["containers"][0];
  CHECK((*envVar(oc, "LD_PRELOAD"))["value"] == "/usr/local/tessera/lib/libtessera-cuda.so:/usr/lib/libjemalloc.so");
  CHECK((*envVar(oc, "TESSERA_ISOLATION_REGION"))["value"] == "/dev/shm/mine.region");
  CHECK(oc["envFrom"] ==
        json::array({{{"secretRef", {{"name", "creds"}}}}, {{"configMapRef", {{"name", "train-tessera-gpu"}}}}}));
  CHECK(reviewPod("CREATE", out, nullptr, true, {}, fixedSuffix()).patch == "[]");

  json fromSecret = gpuPod({{"gpu-fraction", "0.5"}});
  fromSecret["spec"]["containers"][0]["env"].push_back(
      {{"name", "LD_PRELOAD"}, {"valueFrom", {{"configMapKeyRef", {{"name", "x"}, {"key", "y"}}}}}});
  Decision d = reviewPod("CREATE", fromSecret, nullptr, true, {}, fixedSuffix());
  CHECK_FALSE(d.allowed);
  CHECK(
      d.message ==
      "container main: env LD_PRELOAD is set with valueFrom; the hard isolation backend must add "
      "/usr/local/tessera/lib/libtessera-cuda.so to it (set it as a plain value, or use tessera.dev/isolation: none)");

  json clash = gpuPod({{"gpu-fraction", "0.5"}});
  clash["spec"]["containers"][1]["volumeMounts"].push_back({{"name", "libs"}, {"mountPath", "/usr/local/tessera/lib"}});
  d = reviewPod("CREATE", clash, nullptr, true, {}, fixedSuffix());
  CHECK_FALSE(d.allowed);
  CHECK(d.message ==
        "container side: volume libs is already mounted at /usr/local/tessera/lib, where the hard isolation backend "
        "mounts tessera-interposer");
}

TEST_CASE("webhook: UPDATE validates only changed GPU annotations and never patches") {
  json old = gpuPod({{"gpu-fraction", "7"}});  // created while the webhook was down
  json now = old;
  now["metadata"]["labels"] = {{"x", "y"}};
  CHECK(reviewPod("UPDATE", now, &old, true, {}, fixedSuffix()).allowed);
  json good = gpuPod({{"gpu-fraction", "0.5"}});
  json bad = good;
  bad["metadata"]["annotations"]["gpu-fraction"] = "2";
  Decision d = reviewPod("UPDATE", bad, &good, true, {}, fixedSuffix());
  CHECK_FALSE(d.allowed);
  CHECK(d.message.find("annotation gpu-fraction: \"2\"") == 0);
  json fine = good;
  fine["metadata"]["annotations"]["gpu-fraction"] = "0.25";
  d = reviewPod("UPDATE", fine, &good, true, {}, fixedSuffix());
  CHECK(d.allowed);
  CHECK_FALSE(d.hasPatch());
}

TEST_CASE("webhook: AdmissionReview round trip on /mutate and /validate") {
  json pod = gpuPod({{"gpu-fraction", "0.5"}}, "");
  pod["metadata"]["generateName"] = "nb-";
  pod["metadata"].erase("namespace");  // the request's namespace applies
  json r = review("/mutate", createRequest(pod));
  CHECK(r["allowed"] == true);
  CHECK(r["patchType"] == "JSONPatch");
  json ops = json::parse(base64Decode(r["patch"].get<std::string>()));
  json out = pod.patch(ops);
  CHECK(out["metadata"]["annotations"]["tessera.dev/gpu-configmap"] == "nb-x7k2p-tessera-gpu");
  CHECK_FALSE(out["metadata"].contains("namespace"));  // the patch does not touch it

  json v = review("/validate", createRequest(pod));
  CHECK(v["allowed"] == true);
  CHECK_FALSE(v.contains("patch"));

  json badPod = gpuPod({{"gpu-fraction", "0"}});
  json denied = review("/validate", createRequest(badPod));
  CHECK(denied["allowed"] == false);
  CHECK(denied["status"]["code"] == 422);
  CHECK(denied["status"]["message"] ==
        "annotation gpu-fraction: \"0\" is out of range: must be above 0 (at least 0.001)");
  json deniedM = review("/mutate", createRequest(badPod));
  CHECK(deniedM["allowed"] == false);
  CHECK_FALSE(deniedM.contains("patch"));

  // Subresources and other kinds pass untouched.
  json binding = createRequest(pod);
  binding["subResource"] = "binding";
  CHECK_FALSE(review("/mutate", binding).contains("patch"));
  json cm = createRequest({{"metadata", {{"name", "x"}}}});
  cm["kind"] = {{"group", ""}, {"version", "v1"}, {"kind", "ConfigMap"}};
  CHECK(review("/mutate", cm)["allowed"] == true);
  // DELETE carries no object.
  json del = createRequest(pod);
  del["operation"] = "DELETE";
  del.erase("object");
  CHECK(review("/validate", del)["allowed"] == true);

  // The summary line names the pod and the outcome.
  json body = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", createRequest(badPod)}};
  HttpAnswer a = handleRequest("POST", "/validate", body.dump(), {}, fixedSuffix());
  CHECK(a.summary ==
        "validate CREATE Pod ml/train: denied: annotation gpu-fraction: \"0\" is out of range: must be "
        "above 0 (at least 0.001)");
}

TEST_CASE("webhook: malformed requests are answered 400 with what is wrong, never a crash") {
  struct Case {
    std::string body;
    std::string message;
  };
  const json goodRequest = createRequest(gpuPod({{"gpu-fraction", "0.5"}}));
  auto with = [&](const char* key, json value) {
    json r = goodRequest;
    if (value.is_discarded()) r.erase(key);
    else r[key] = std::move(value);
    return json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", r}}.dump();
  };
  const json removed = json(json::value_t::discarded);
  const Case cases[] = {
      {"", "the body is not valid JSON"},
      {"{\"apiVersion\": ", "the body is not valid JSON"},
      {"[1,2]", "expected a JSON object, got a list"},
      {R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}})",
       "apiVersion: \"admission.k8s.io/v1beta1\" is not supported (only admission.k8s.io/v1; set "
       "admissionReviewVersions: [v1])"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod"})", "kind: \"Pod\" (expected AdmissionReview)"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "request: required (an object)"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[]})",
       "request: required (an object)"},
      {with("uid", removed), "request.uid: required (a non-empty string)"},
      {with("uid", 42), "request.uid: required (a non-empty string)"},
      {with("uid", ""), "request.uid: required (a non-empty string)"},
      {with("operation", removed), "request.operation: required"},
      {with("object", removed), "request.object: required for CREATE (an object)"},
      {with("object", "pod"), "request.object: required for CREATE (an object)"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    HttpAnswer a = handleRequest("POST", "/mutate", c.body, {}, fixedSuffix());
    CHECK(a.status == 400);
    CHECK(a.body == "malformed AdmissionReview: " + c.message + "\n");
  }
  CHECK(handleRequest("POST", "/nope", "{}", {}, fixedSuffix()).status == 404);
  CHECK(handleRequest("GET", "/mutate", "", {}, fixedSuffix()).status == 405);
  CHECK(handleRequest("GET", "/healthz", "", {}, fixedSuffix()).status == 200);
}

TEST_CASE("webhook: odd JSON types inside a pod never crash the review") {
  const json base = gpuPod({{"gpu-fraction", "0.5"}});
  const json oddValues[] = {nullptr, 1, "x", json::array(), json::object(), json::array({1, "a", nullptr}), true};
  const char* paths[] = {"/metadata",
                         "/metadata/annotations",
                         "/metadata/name",
                         "/spec",
                         "/spec/containers",
                         "/spec/containers/0",
                         "/spec/containers/0/env",
                         "/spec/containers/0/env/0",
                         "/spec/containers/0/envFrom",
                         "/spec/containers/1/volumeMounts",
                         "/spec/volumes",
                         "/spec/initContainers",
                         "/spec/schedulerName",
                         "/metadata/annotations/gpu-fraction"};
  int reviewed = 0;
  for (const char* p : paths)
    for (const auto& v : oddValues) {
      json pod = base;
      pod[json::json_pointer(p)] = v;
      for (bool mutate : {true, false}) {
        Decision d = reviewPod("CREATE", pod, nullptr, mutate, {}, fixedSuffix());
        if (d.allowed && d.hasPatch()) CHECK_NOTHROW(pod.patch(json::parse(d.patch)));  // the patch applies
        ++reviewed;
      }
    }
  CHECK(reviewed == 14 * 7 * 2);
}

TEST_CASE("webhook: base64 (RFC 4648 test vectors) and random suffixes") {
  CHECK(base64Encode("") == "");
  CHECK(base64Encode("f") == "Zg==");
  CHECK(base64Encode("fo") == "Zm8=");
  CHECK(base64Encode("foo") == "Zm9v");
  CHECK(base64Encode("foob") == "Zm9vYg==");
  CHECK(base64Encode("fooba") == "Zm9vYmE=");
  CHECK(base64Encode("foobar") == "Zm9vYmFy");
  CHECK(base64Encode(std::string("\xff\x00\x80", 3)) == "/wCA");
  auto a = randomSuffixes(7), b = randomSuffixes(7);
  const std::string s = a();
  CHECK(s.size() == 5);
  CHECK(s == b());
  CHECK(s.find_first_not_of("bcdfghjklmnpqrstvwxz2456789") == std::string::npos);
}
