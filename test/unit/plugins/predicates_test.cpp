// predicates: the matrix of node filters, one pod against one node per case: taints and
// tolerations (every effect, Equal / Exists, empty key, no effect), required node affinity (every
// operator, matchFields, empty terms, OR of terms, AND inside one), nodeSelector, node state
// (NotReady, cordoned and the unschedulable toleration), host ports (protocol, hostIP wildcard,
// pods placed this cycle) and max pods.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tessera/framework/args.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"
#include "tessera/plugins/factories.h"
#include "support/test_cluster.h"

namespace {

using tessera::framework::Session;
using tessera::testing::TestCluster;

std::shared_ptr<tessera::framework::Plugin> predicates() {
  tessera::framework::Args args("plugins.predicates", nullptr);
  auto p = tessera::plugins::makePredicates(args);
  REQUIRE(p.ok());
  return std::move(p).value();
}

struct NodeSpec {
  std::string labels = "{zone: z1, gpu-count: \"8\"}";
  std::string spec = "{}";
  std::string ready = "\"True\"";  // empty: no Ready condition at all
  std::string maxPods = "110";
};

std::string nodeManifest(const NodeSpec& n) {
  return "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: " + n.labels + "}\nspec: " + n.spec +
         "\nstatus:\n  allocatable: {cpu: \"16\", memory: 64Gi, pods: \"" + n.maxPods +
         "\", nvidia.com/gpu: \"4\"}\n  conditions: [" +
         (n.ready.empty() ? "" : "{type: Ready, status: " + n.ready + "}") + "]\n";
}

/// A pod named `name` in namespace t; `spec` lines go under spec (two-space indent), `ports` is
/// the container's ports list.
std::string podManifest(const std::string& name, const std::string& spec, const std::string& ports = "[]",
                        const std::string& rest = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t}\nspec:\n  schedulerName: tessera\n" +
         (spec.empty() ? "" : "  " + spec + "\n") +
         "  containers: [{name: c, image: busybox, ports: " + ports + ", resources: {requests: {cpu: 100m}}}]\n" + rest;
}

struct Verdict {
  bool fits = false;
  std::string reason;
};

/// Runs the predicates for pod "t/p" (from `podYaml`) against node n1, with `others` on the cluster
/// and `placeFirst` (pod names) allocated onto n1 in this session before asking.
Verdict run(const NodeSpec& node, const std::string& podYaml, const std::string& others = "",
            const std::vector<std::string>& placeFirst = {}) {
  TestCluster c;
  c.create(nodeManifest(node));
  if (!others.empty()) c.create(others);
  c.create(podYaml);
  c.start();
  auto cfg = tessera::testing::configWith({predicates()});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  const int n = tessera::testing::nodeIndex(ssn, "n1");
  tessera::framework::Statement stmt(ssn);
  for (const auto& name : placeFirst) stmt.allocate(tessera::testing::taskOf(ssn, "Pod/t/" + name, "t/" + name), n);
  Verdict v;
  v.fits = ssn.predicate(tessera::testing::taskOf(ssn, "Pod/t/p", "t/p"), ssn.nodes()[n], v.reason);
  return v;
}

struct Case {
  const char* name;
  NodeSpec node;
  std::string podSpec;  // one line under spec
  bool fits;
  std::string reason;  // substring when it does not fit
};

void runCases(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const Verdict v = run(c.node, podManifest("p", c.podSpec));
      INFO("reason: " << v.reason);
      CHECK(v.fits == c.fits);
      if (!c.fits) CHECK_THAT(v.reason, Catch::Contains(c.reason));
    }
  }
}

NodeSpec tainted(const std::string& taints) {
  NodeSpec n;
  n.spec = "{taints: " + taints + "}";
  return n;
}

std::string affinity(const std::string& terms) {
  return "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: " + terms +
         "}}}";
}

const std::string kReservedNoSchedule = "[{key: gpu, value: reserved, effect: NoSchedule}]";
const std::string kReservedNoExecute = "[{key: gpu, value: reserved, effect: NoExecute}]";

}  // namespace

TEST_CASE("a plain pod fits a plain Ready node", "[predicates]") {
  const Verdict v = run(NodeSpec{}, podManifest("p", ""));
  CHECK(v.fits);
  CHECK(v.reason.empty());
}

TEST_CASE("taints and tolerations", "[predicates]") {
  runCases({
      {"NoSchedule, not tolerated", tainted(kReservedNoSchedule), "", false, "untolerated taint gpu=reserved:NoSchedule"},
      {"NoExecute, not tolerated", tainted(kReservedNoExecute), "", false, "untolerated taint gpu=reserved:NoExecute"},
      {"PreferNoSchedule is only a preference", tainted("[{key: gpu, value: reserved, effect: PreferNoSchedule}]"),
       "", true, ""},
      {"Equal with key, value and effect", tainted(kReservedNoSchedule),
       "tolerations: [{key: gpu, operator: Equal, value: reserved, effect: NoSchedule}]", true, ""},
      {"Equal is the default operator", tainted(kReservedNoSchedule), "tolerations: [{key: gpu, value: reserved}]",
       true, ""},
      {"Equal with another value", tainted(kReservedNoSchedule),
       "tolerations: [{key: gpu, operator: Equal, value: shared, effect: NoSchedule}]", false,
       "untolerated taint gpu=reserved:NoSchedule"},
      {"Equal with another effect", tainted(kReservedNoSchedule),
       "tolerations: [{key: gpu, operator: Equal, value: reserved, effect: NoExecute}]", false, "untolerated taint"},
      {"Equal tolerates NoExecute", tainted(kReservedNoExecute),
       "tolerations: [{key: gpu, value: reserved, effect: NoExecute, tolerationSeconds: 60}]", true, ""},
      {"Exists with the key, any value", tainted(kReservedNoExecute), "tolerations: [{key: gpu, operator: Exists}]",
       true, ""},
      {"Exists with another key", tainted(kReservedNoSchedule), "tolerations: [{key: cpu, operator: Exists}]", false,
       "untolerated taint gpu=reserved:NoSchedule"},
      {"Exists with an empty key tolerates everything",
       tainted("[{key: a, value: x, effect: NoSchedule}, {key: b, effect: NoExecute}]"),
       "tolerations: [{operator: Exists}]", true, ""},
      {"Exists with an empty key and an effect tolerates only that effect",
       tainted("[{key: a, value: x, effect: NoSchedule}, {key: b, effect: NoExecute}]"),
       "tolerations: [{operator: Exists, effect: NoSchedule}]", false, "untolerated taint b:NoExecute"},
      {"a toleration without effect tolerates every effect of its key",
       tainted("[{key: gpu, value: reserved, effect: NoSchedule}, {key: gpu, value: reserved, effect: NoExecute}]"),
       "tolerations: [{key: gpu, operator: Equal, value: reserved}]", true, ""},
      {"a taint without value and Equal with empty value", tainted("[{key: dedicated, effect: NoSchedule}]"),
       "tolerations: [{key: dedicated, operator: Equal, effect: NoSchedule}]", true, ""},
      {"a taint without value is named by its key", tainted("[{key: dedicated, effect: NoSchedule}]"), "", false,
       "untolerated taint dedicated:NoSchedule"},
      {"two taints, one tolerated: the other is named",
       tainted("[{key: gpu, value: reserved, effect: NoSchedule}, {key: team, value: a, effect: NoExecute}]"),
       "tolerations: [{key: gpu, operator: Exists}]", false, "untolerated taint team=a:NoExecute"},
  });
}

TEST_CASE("required node affinity", "[predicates]") {
  // Node n1 has labels zone=z1, gpu-count=8.
  auto expr = [](const std::string& e) { return affinity("[{matchExpressions: [" + e + "]}]"); };
  const NodeSpec n;
  runCases({
      {"In, value listed", n, expr("{key: zone, operator: In, values: [z2, z1]}"), true, ""},
      {"In, value not listed", n, expr("{key: zone, operator: In, values: [z2]}"), false, "node affinity"},
      {"In, label absent", n, expr("{key: rack, operator: In, values: [r1]}"), false, "node affinity"},
      {"NotIn, value not listed", n, expr("{key: zone, operator: NotIn, values: [z2]}"), true, ""},
      {"NotIn, value listed", n, expr("{key: zone, operator: NotIn, values: [z1]}"), false, "node affinity"},
      {"NotIn, label absent", n, expr("{key: rack, operator: NotIn, values: [r1]}"), true, ""},
      {"Exists, present", n, expr("{key: zone, operator: Exists}"), true, ""},
      {"Exists, absent", n, expr("{key: rack, operator: Exists}"), false, "node affinity"},
      {"DoesNotExist, absent", n, expr("{key: rack, operator: DoesNotExist}"), true, ""},
      {"DoesNotExist, present", n, expr("{key: zone, operator: DoesNotExist}"), false, "node affinity"},
      {"Gt, greater", n, expr("{key: gpu-count, operator: Gt, values: [\"4\"]}"), true, ""},
      {"Gt, equal", n, expr("{key: gpu-count, operator: Gt, values: [\"8\"]}"), false, "node affinity"},
      {"Gt, smaller", n, expr("{key: gpu-count, operator: Gt, values: [\"16\"]}"), false, "node affinity"},
      {"Lt, smaller", n, expr("{key: gpu-count, operator: Lt, values: [\"16\"]}"), true, ""},
      {"Lt, equal", n, expr("{key: gpu-count, operator: Lt, values: [\"8\"]}"), false, "node affinity"},
      {"Gt, label not an integer", n, expr("{key: zone, operator: Gt, values: [\"1\"]}"), false, "node affinity"},
      {"Gt, label absent", n, expr("{key: rack, operator: Gt, values: [\"1\"]}"), false, "node affinity"},
      {"Gt, negative bound", n, expr("{key: gpu-count, operator: Gt, values: [\"-3\"]}"), true, ""},
      {"matchFields metadata.name In", n,
       affinity("[{matchFields: [{key: metadata.name, operator: In, values: [n1]}]}]"), true, ""},
      {"matchFields metadata.name In another", n,
       affinity("[{matchFields: [{key: metadata.name, operator: In, values: [n2]}]}]"), false, "node affinity"},
      {"matchFields metadata.name NotIn", n,
       affinity("[{matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]}]"), false, "node affinity"},
      {"an empty term matches nothing", n, affinity("[{}]"), false, "node affinity"},
      {"terms are ORed: the second matches", n,
       affinity("[{matchExpressions: [{key: zone, operator: In, values: [z9]}]}, "
                "{matchExpressions: [{key: zone, operator: In, values: [z1]}]}]"),
       true, ""},
      {"terms are ORed: an empty term does not match but another does", n,
       affinity("[{}, {matchExpressions: [{key: zone, operator: Exists}]}]"), true, ""},
      {"expressions in a term are ANDed", n,
       expr("{key: zone, operator: In, values: [z1]}, {key: gpu-count, operator: Gt, values: [\"100\"]}"), false,
       "node affinity"},
      {"expressions and fields in a term are ANDed", n,
       affinity("[{matchExpressions: [{key: zone, operator: In, values: [z1]}], "
                "matchFields: [{key: metadata.name, operator: In, values: [n2]}]}]"),
       false, "node affinity"},
  });
}

TEST_CASE("nodeSelector", "[predicates]") {
  const NodeSpec n;
  runCases({
      {"label matches", n, "nodeSelector: {zone: z1}", true, ""},
      {"every label must match", n, "nodeSelector: {zone: z1, gpu-count: \"8\"}", true, ""},
      {"another value", n, "nodeSelector: {zone: z2}", false, "node selector"},
      {"one of two labels differs", n, "nodeSelector: {zone: z1, gpu-count: \"4\"}", false, "node selector"},
      {"label absent", n, "nodeSelector: {rack: r1}", false, "node selector"},
  });
}

TEST_CASE("node state: NotReady, cordoned and the unschedulable toleration", "[predicates]") {
  NodeSpec notReady;
  notReady.ready = "\"False\"";
  NodeSpec unknown;
  unknown.ready = "\"Unknown\"";
  NodeSpec noCondition;
  noCondition.ready = "";
  NodeSpec cordoned;
  cordoned.spec = "{unschedulable: true}";
  runCases({
      {"NotReady", notReady, "", false, "node not ready"},
      {"Ready Unknown", unknown, "", false, "node not ready"},
      {"no Ready condition", noCondition, "", false, "node not ready"},
      {"NotReady is not tolerated away", notReady, "tolerations: [{operator: Exists}]", false, "node not ready"},
      {"cordoned", cordoned, "", false, "cordoned"},
      {"cordoned, unschedulable toleration", cordoned,
       "tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]", true, ""},
      {"cordoned, tolerate everything", cordoned, "tolerations: [{operator: Exists}]", true, ""},
      {"cordoned, toleration of another effect", cordoned,
       "tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoExecute}]", false,
       "cordoned"},
  });
}

TEST_CASE("host ports", "[predicates]") {
  // On n1: a running pod holding 8080/TCP on every address and 9090/TCP on 10.0.0.1.
  const std::string running =
      podManifest("holder", "nodeName: n1",
                  "[{containerPort: 80, hostPort: 8080}, {containerPort: 90, hostPort: 9090, hostIP: 10.0.0.1}]",
                  "status: {phase: Running}\n");
  struct PortCase {
    const char* name;
    std::string ports;
    bool fits;
  };
  const std::vector<PortCase> cases{
      {"same port and protocol", "[{containerPort: 1, hostPort: 8080}]", false},
      {"same port, explicit TCP", "[{containerPort: 1, hostPort: 8080, protocol: TCP}]", false},
      {"same port, UDP", "[{containerPort: 1, hostPort: 8080, protocol: UDP}]", true},
      {"another port", "[{containerPort: 1, hostPort: 8081}]", true},
      {"container port only", "[{containerPort: 8080}]", true},
      {"a specific address against a wildcard", "[{containerPort: 1, hostPort: 8080, hostIP: 10.0.0.7}]", false},
      {"two different specific addresses", "[{containerPort: 1, hostPort: 9090, hostIP: 10.0.0.2}]", true},
      {"the same specific address", "[{containerPort: 1, hostPort: 9090, hostIP: 10.0.0.1}]", false},
      {"0.0.0.0 against a specific address", "[{containerPort: 1, hostPort: 9090, hostIP: 0.0.0.0}]", false},
      {"no address against a specific address", "[{containerPort: 1, hostPort: 9090}]", false},
      {"one clashing port among several", "[{containerPort: 1, hostPort: 7000}, {containerPort: 2, hostPort: 8080}]",
       false},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const Verdict v = run(NodeSpec{}, podManifest("p", "", c.ports), running);
      INFO("reason: " << v.reason);
      CHECK(v.fits == c.fits);
      if (!c.fits) CHECK_THAT(v.reason, Catch::Contains("in use"));
    }
  }
  SECTION("the reason names the port") {
    const Verdict v = run(NodeSpec{}, podManifest("p", "", "[{containerPort: 1, hostPort: 8080}]"), running);
    CHECK(v.reason == "host port 8080/TCP in use");
  }
  SECTION("a pod of another scheduler holds its ports too") {
    const std::string foreign =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: f, namespace: t}\nspec:\n  schedulerName: default-scheduler\n"
        "  nodeName: n1\n  containers: [{name: c, image: busybox, ports: [{containerPort: 1, hostPort: 6000}]}]\n"
        "status: {phase: Running}\n";
    CHECK_FALSE(run(NodeSpec{}, podManifest("p", "", "[{containerPort: 1, hostPort: 6000}]"), foreign).fits);
  }
  SECTION("a finished pod holds no ports") {
    const std::string done = podManifest("done", "nodeName: n1", "[{containerPort: 1, hostPort: 6000}]",
                                         "status: {phase: Succeeded}\n");
    CHECK(run(NodeSpec{}, podManifest("p", "", "[{containerPort: 1, hostPort: 6000}]"), done).fits);
  }
  SECTION("ports of pods placed this cycle count") {
    const std::string pending = podManifest("first", "", "[{containerPort: 1, hostPort: 6000}]");
    const std::string p = podManifest("p", "", "[{containerPort: 1, hostPort: 6000}]");
    CHECK(run(NodeSpec{}, p, pending).fits);
    const Verdict v = run(NodeSpec{}, p, pending, {"first"});
    CHECK_FALSE(v.fits);
    CHECK(v.reason == "host port 6000/TCP in use");
  }
}

TEST_CASE("max pods", "[predicates]") {
  NodeSpec two;
  two.maxPods = "2";
  auto runningPod = [](const std::string& name, const std::string& phase = "Running") {
    return podManifest(name, "nodeName: n1", "[]", "status: {phase: " + phase + "}\n");
  };
  SECTION("room for one more") { CHECK(run(two, podManifest("p", ""), runningPod("a")).fits); }
  SECTION("full") {
    const Verdict v = run(two, podManifest("p", ""), runningPod("a") + "---\n" + runningPod("b"));
    CHECK_FALSE(v.fits);
    CHECK_THAT(v.reason, Catch::Contains("too many pods"));
  }
  SECTION("finished pods do not count") {
    CHECK(run(two, podManifest("p", ""), runningPod("a") + "---\n" + runningPod("b", "Succeeded")).fits);
  }
  SECTION("pods placed this cycle count") {
    const Verdict v = run(two, podManifest("p", ""), runningPod("a") + "---\n" + podManifest("q", ""), {"q"});
    CHECK_FALSE(v.fits);
    CHECK_THAT(v.reason, Catch::Contains("too many pods"));
  }
}
