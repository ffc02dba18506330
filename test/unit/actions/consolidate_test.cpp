// consolidate at the session level: a pending preemptible job makes room by moving preemptible
// pods to other nodes, only when every moved pod is placed again elsewhere (its room reserved
// there, not reported to the binder) and at most maxConsolidationPreemptees pods move.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "unit/framework/test_cluster.h"
#include "unit/framework/test_registry.h"

namespace {

using tessera::framework::Config;
using tessera::framework::Session;
using tessera::framework::SessionResult;
using tessera::testing::TestCluster;

const char* kClasses = R"(
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: train}
value: 50
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: build-preemptible}
value: 75
---
)";

std::string queue(const std::string& name, const std::string& gpuQuota) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: " + name +
         "}\nspec:\n  resources:\n    gpu: {quota: \"" + gpuQuota +
         "\", limit: \"-1\", overQuotaWeight: \"1\"}\n    cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: "
         "\"1\"}\n    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";
}

/// A pod of queue `q`; running on `node` when given (started a day ago). `group`: PodGroup name.
std::string pod(const std::string& name, const std::string& q, int gpus, const std::string& node = "",
                const std::string& cls = "train", const std::string& group = "", const std::string& created = "") {
  std::string y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: t\n  labels: {tessera.dev/queue: " + q + "}\n";
  if (!group.empty()) y += "  annotations: {pod-group-name: " + group + "}\n";
  if (!created.empty()) y += "  creationTimestamp: \"" + created + "\"\n";
  y += "spec:\n  schedulerName: tessera\n  priorityClassName: " + cls + "\n";
  if (!node.empty()) y += "  nodeName: " + node + "\n";
  y += "  containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: \"" + std::to_string(gpus) +
       "\"}, limits: {nvidia.com/gpu: \"" + std::to_string(gpus) + "\"}}}]\n";
  if (!node.empty()) y += "status: {phase: Running, startTime: \"2025-12-31T00:00:00Z\"}\n";
  return y + "---\n";
}

std::string group(const std::string& name, const std::string& q, int minMember) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: t}\nspec: {minMember: " + std::to_string(minMember) + ", queue: " + q +
         ", priorityClassName: train}\n---\n";
}

Config config(const std::string& yaml) {
  auto cfg = tessera::framework::loadConfigYaml(tessera::testing::testRegistry(), yaml);
  if (!cfg.ok()) FAIL(cfg.error().message);
  return std::move(cfg).value();
}

struct Env {
  TestCluster c;
  Config cfg;
  explicit Env(const std::string& actions) : cfg(config("actions: [" + actions + "]\n")) {}
  SessionResult run(const std::string& nodes, const std::string& yaml) {
    c.create(nodes + kClasses + yaml);
    c.start();
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    ssn.runActions();
    return ssn.close();
  }
};

std::string node(const std::string& name, int gpus) {
  return tessera::testing::nodeYaml(name, "64", std::to_string(gpus)) + "---\n";
}

std::vector<std::string> evicted(const SessionResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.evictions) out.push_back(e.podKey);
  std::sort(out.begin(), out.end());
  return out;
}

std::string pipelinedTo(const SessionResult& r, const std::string& podKey) {
  for (const auto& p : r.pipelined)
    if (p.podKey == podKey) return p.node;
  return "";
}

std::string recreated(const std::string& name, const std::string& node, int gpus = 1) {
  return pod(name, "q", gpus, node);
}

TEST_CASE("consolidate: moves a pod when it can be re-placed, and only then", "[actions][consolidate]") {
  // n1 (4 GPUs) runs one 1-GPU pod, n2 (2 GPUs) has 1 GPU free. A 4-GPU preemptible pod fits only
  // on n1 if its pod moves to n2: one eviction, the claimant pipelined on n1, nothing bound.
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + pod("mover", "q", 1, "n1") +
                                                    pod("stayer", "q", 1, "n2") + pod("big", "q", 4));
  CHECK(evicted(r) == std::vector<std::string>{"t/mover"});
  CHECK(pipelinedTo(r, "t/big") == "n1");
  CHECK(r.binds.empty());  // the reserved room on n2 is not a bind
  CHECK_THAT(r.evictions[0].reason, Catch::Contains("moved to make room for pod t/big"));
}

TEST_CASE("consolidate: refuses when a victim cannot be re-placed", "[actions][consolidate]") {
  // Same, but n2 is full: the pod could not run elsewhere, so nothing is evicted.
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + pod("mover", "q", 1, "n1") +
                                                    pod("s1", "q", 1, "n2") + pod("s2", "q", 1, "n2") +
                                                    pod("big", "q", 4));
  CHECK(r.evictions.empty());
  CHECK(r.pipelined.empty());
}

TEST_CASE("consolidate: two victims may not share one free slot", "[actions][consolidate]") {
  // n1 (4 GPUs) runs two 1-GPU pods; n2 (2 GPUs) has only 1 GPU free. Both pods must move for the
  // 4-GPU pod, but only one can be re-placed: the first one's room is reserved, so the second
  // finds none, and the whole attempt is rolled back.
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + pod("m1", "q", 1, "n1") +
                                                    pod("m2", "q", 1, "n1") + pod("s1", "q", 1, "n2") +
                                                    pod("big", "q", 4));
  CHECK(r.evictions.empty());
  CHECK(r.pipelined.empty());
}

TEST_CASE("consolidate: at most maxConsolidationPreemptees pods move", "[actions][consolidate]") {
  // n1 (4 GPUs) runs two 1-GPU pods, n2 (4 GPUs) two more: the 4-GPU pod needs two moves.
  const std::string objects = queue("q", "8") + pod("p1", "q", 1, "n1") + pod("p2", "q", 1, "n1") +
                              pod("p3", "q", 1, "n2") + pod("p4", "q", 1, "n2") + pod("big", "q", 4);
  SECTION("1: refused") {
    TestCluster c;
    c.create(node("n1", 4) + node("n2", 4) + kClasses + objects);
    c.start();
    Config cfg = config("actions: [consolidate]\nactionArgs:\n  consolidate: {maxConsolidationPreemptees: 1}\n");
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    ssn.runActions();
    auto r = ssn.close();
    CHECK(r.evictions.empty());
  }
  SECTION("2: exactly enough") {
    TestCluster c;
    c.create(node("n1", 4) + node("n2", 4) + kClasses + objects);
    c.start();
    Config cfg = config("actions: [consolidate]\nactionArgs:\n  consolidate: {maxConsolidationPreemptees: 2}\n");
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    ssn.runActions();
    auto r = ssn.close();
    CHECK(r.evictions.size() == 2);
    CHECK_FALSE(pipelinedTo(r, "t/big").empty());
  }
}

TEST_CASE("consolidate: never for a non-preemptible job", "[actions][consolidate]") {
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2),
                 "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: build}\nvalue: 100\n---\n" +
                     queue("q", "8") + pod("mover", "q", 1, "n1") + pod("stayer", "q", 1, "n2") +
                     pod("big", "q", 4, "", "build"));
  CHECK(r.evictions.empty());
}

}  // namespace
