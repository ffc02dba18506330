// nodeorder: binpack (fullest first) and spread (emptiest first) on the node axis, scored by the
// pod's GPUs, or by CPU for a pod without GPUs; the config default and the per-pod annotation
// tessera.dev/node-policy; an invalid annotation is a pre-predicate reason.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/framework/args.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"
#include "tessera/plugins/factories.h"
#include "support/test_cluster.h"

namespace {

using tessera::framework::Session;
using tessera::testing::TestCluster;

std::shared_ptr<tessera::framework::Plugin> nodeorder(const std::string& policy) {
  nlohmann::json a = {{"node", policy}};
  tessera::framework::Args args("plugins.nodeorder", &a);
  auto p = tessera::plugins::makeNodeOrder(args);
  REQUIRE(p.ok());
  REQUIRE(args.finish().ok());
  return std::move(p).value();
}

std::string pod(const std::string& name, const std::string& requests, const std::string& node = "",
                const std::string& annotations = "{}") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t, annotations: " + annotations +
         "}\nspec:\n  schedulerName: tessera\n" + (node.empty() ? "" : "  nodeName: " + node + "\n") +
         "  containers: [{name: c, image: busybox, resources: {requests: " + requests + "}}]\n" +
         (node.empty() ? "" : "status: {phase: Running}\n");
}

/// Three nodes whose GPU order and CPU order disagree:
///   a: 4 GPUs, 3 in use;  CPU 16, 2 in use
///   b: 4 GPUs, 0 in use;  CPU 16, 14 in use
///   c: 8 GPUs, 4 in use;  CPU 16, 8 in use
void cluster(TestCluster& c, const std::string& pendingAnnotations = "{}") {
  c.create(tessera::testing::nodeYaml("a", "16", "4"));
  c.create(tessera::testing::nodeYaml("b", "16", "4"));
  c.create(tessera::testing::nodeYaml("c", "16", "8"));
  c.create(pod("on-a", "{cpu: \"2\", nvidia.com/gpu: \"3\"}", "a"));
  c.create(pod("on-b", "{cpu: \"14\"}", "b"));
  c.create(pod("on-c", "{cpu: \"8\", nvidia.com/gpu: \"4\"}", "c"));
  c.create(pod("gpu-pod", "{cpu: \"1\", nvidia.com/gpu: \"1\"}", "", pendingAnnotations));
  c.create(pod("cpu-pod", "{cpu: \"1\"}", "", pendingAnnotations));
  c.start();
}

struct Scores {
  std::vector<std::pair<std::string, int64_t>> byNode;  // node -> score
  std::vector<std::string> order() const {              // best first; ties by name
    auto s = byNode;
    std::stable_sort(s.begin(), s.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    std::vector<std::string> out;
    for (const auto& [n, v] : s) out.push_back(n);
    return out;
  }
  int64_t of(const std::string& n) const {
    for (const auto& [name, v] : byNode)
      if (name == n) return v;
    FAIL("no node " << n);
    return 0;
  }
};

Scores scores(Session& ssn, const std::string& podName) {
  const auto& task = tessera::testing::taskOf(ssn, "Pod/t/" + podName, "t/" + podName);
  Scores s;
  for (const auto& n : ssn.nodes()) {
    const int64_t v = ssn.nodeScore(task, n);
    CHECK(v >= 0);
    CHECK(v <= 1'000'000);
    s.byNode.emplace_back(n.name(), v);
  }
  return s;
}

using Order = std::vector<std::string>;

}  // namespace

TEST_CASE("binpack and spread by GPU for GPU pods", "[nodeorder]") {
  TestCluster c;
  cluster(c);
  SECTION("binpack: fullest GPU node first") {
    auto cfg = tessera::testing::configWith({nodeorder("binpack")});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    const Scores s = scores(ssn, "gpu-pod");
    CHECK(s.order() == Order{"a", "c", "b"});
    CHECK(s.of("a") == 1'000'000);  // the node is full afterwards
  }
  SECTION("spread: emptiest GPU node first") {
    auto cfg = tessera::testing::configWith({nodeorder("spread")});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    const Scores s = scores(ssn, "gpu-pod");
    CHECK(s.order() == Order{"b", "c", "a"});
    CHECK(s.of("a") == 0);
  }
}

TEST_CASE("binpack and spread by CPU for pods without GPUs", "[nodeorder]") {
  TestCluster c;
  cluster(c);
  SECTION("binpack: fullest CPU node first") {
    auto cfg = tessera::testing::configWith({nodeorder("binpack")});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    CHECK(scores(ssn, "cpu-pod").order() == Order{"b", "c", "a"});
  }
  SECTION("spread: emptiest CPU node first") {
    auto cfg = tessera::testing::configWith({nodeorder("spread")});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    CHECK(scores(ssn, "cpu-pod").order() == Order{"a", "c", "b"});
  }
}

TEST_CASE("the tessera.dev/node-policy annotation overrides the config", "[nodeorder]") {
  SECTION("spread on a binpack scheduler") {
    TestCluster c;
    cluster(c, "{tessera.dev/node-policy: spread}");
    auto cfg = tessera::testing::configWith({nodeorder("binpack")});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    CHECK(scores(ssn, "gpu-pod").order() == Order{"b", "c", "a"});
    CHECK(scores(ssn, "cpu-pod").order() == Order{"a", "c", "b"});
  }
  SECTION("binpack on a spread scheduler") {
    TestCluster c;
    cluster(c, "{tessera.dev/node-policy: binpack}");
    auto cfg = tessera::testing::configWith({nodeorder("spread")});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    CHECK(scores(ssn, "gpu-pod").order() == Order{"a", "c", "b"});
    CHECK(scores(ssn, "cpu-pod").order() == Order{"b", "c", "a"});
  }
  SECTION("only the annotated pod is affected") {
    TestCluster c;
    cluster(c);
    c.create(pod("spreader", "{cpu: \"1\", nvidia.com/gpu: \"1\"}", "", "{tessera.dev/node-policy: spread}"));
    auto cfg = tessera::testing::configWith({nodeorder("binpack")});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    // Alternate between the two pods: the policy must follow the pod asked about.
    for (int i = 0; i < 2; ++i) {
      CHECK(scores(ssn, "spreader").order() == Order{"b", "c", "a"});
      CHECK(scores(ssn, "gpu-pod").order() == Order{"a", "c", "b"});
    }
  }
}

TEST_CASE("an invalid node-policy annotation is a pre-predicate reason (plugin gpushare)", "[nodeorder]") {
  TestCluster c;
  cluster(c, "{tessera.dev/node-policy: fullest}");
  c.create(pod("good", "{cpu: \"1\"}", "", "{tessera.dev/node-policy: spread}"));
  nlohmann::json none = nlohmann::json::object();
  tessera::framework::Args gargs("plugins.gpushare", &none);
  auto gpushare = tessera::plugins::makeGpuShare(gargs);
  REQUIRE(gpushare.ok());
  auto cfg = tessera::testing::configWith({nodeorder("binpack"), std::move(gpushare).value()});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  const auto& bad = tessera::testing::taskOf(ssn, "Pod/t/gpu-pod", "t/gpu-pod");
  auto reason = tessera::testing::rejection(ssn.prePredicate(ssn.jobs()[bad.job], bad));
  REQUIRE(reason);
  CHECK_THAT(*reason, Catch::Contains("t/gpu-pod"));
  CHECK_THAT(*reason, Catch::Contains("tessera.dev/node-policy"));
  CHECK_THAT(*reason, Catch::Contains("\"fullest\""));
  CHECK_THAT(*reason, Catch::Contains("binpack, spread"));
  const auto& good = tessera::testing::taskOf(ssn, "Pod/t/good", "t/good");
  CHECK(ssn.prePredicate(ssn.jobs()[good.job], good).ok());
}

TEST_CASE("scores follow this cycle's placements", "[nodeorder]") {
  TestCluster c;
  cluster(c);
  c.create(pod("big", "{cpu: \"1\", nvidia.com/gpu: \"2\"}"));
  auto cfg = tessera::testing::configWith({nodeorder("spread")});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  CHECK(scores(ssn, "gpu-pod").order() == Order{"b", "c", "a"});
  tessera::framework::Statement stmt(ssn);
  stmt.allocate(tessera::testing::taskOf(ssn, "Pod/t/big", "t/big"), tessera::testing::nodeIndex(ssn, "b"));
  // b now has 2 of 4 GPUs free (1 of 4 after the pod), c 4 of 8 (3 of 8): c is the emptiest.
  CHECK(scores(ssn, "gpu-pod").order() == Order{"c", "b", "a"});
  stmt.discard();
  CHECK(scores(ssn, "gpu-pod").order() == Order{"b", "c", "a"});
}

TEST_CASE("a GPU pod scores nothing on a node without GPUs", "[nodeorder]") {
  TestCluster c;
  c.create(tessera::testing::nodeYaml("cpu-only", "16", "0"));
  c.create(pod("gpu-pod", "{cpu: \"1\", nvidia.com/gpu: \"1\"}"));
  c.start();
  auto cfg = tessera::testing::configWith({nodeorder("binpack")});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  CHECK(scores(ssn, "gpu-pod").of("cpu-only") == 0);
}
