// stalegangeviction at the session level: a gang running below its minMember is evicted whole
// once it has been so for longer than gracePeriod. The action object remembers since when each
// gang is stale across sessions (a restart, i.e. a new action object, starts counting again);
// a gang that recovers is forgotten.
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

struct Stale {
  TestCluster c;
  Config cfg = config("actions: [stalegangeviction]\nactionArgs:\n  stalegangeviction: {gracePeriod: 60s}\n");
  void start(int running) {
    std::string y = queue("q", "8") + group("g", "q", 3);
    for (int i = 0; i < running; ++i) y += pod("g-" + std::to_string(i), "q", 1, "n1", "train", "g");
    for (int i = running; i < 3; ++i) y += pod("g-" + std::to_string(i), "q", 1, "", "train", "g");
    c.create(node("n1", 8) + kClasses + y);
    c.start();
  }
  SessionResult cycle(Config& with) {
    Session ssn(c.snapshot(), with, c.clock);
    ssn.open();
    ssn.runActions();
    return ssn.close();
  }
  SessionResult cycle() { return cycle(cfg); }
  void advance(int64_t seconds) { c.clock.advance(tessera::api::Duration{seconds * 1000}); }
};

TEST_CASE("stale gang: evicted whole only after the grace period", "[actions][stalegang]") {
  Stale s;
  s.start(2);  // 2 of minMember 3 running, the third pending (and not placed: no allocate here)
  CHECK(s.cycle().evictions.empty());  // first seen stale now
  s.advance(30);
  CHECK(s.cycle().evictions.empty());  // 30s < 60s
  s.advance(29);
  CHECK(s.cycle().evictions.empty());  // 59s < 60s
  s.advance(1);
  auto r = s.cycle();                  // 60s: not less than the grace period
  CHECK(evicted(r) == std::vector<std::string>{"t/g-0", "t/g-1"});
  REQUIRE_FALSE(r.evictions.empty());
  CHECK_THAT(r.evictions[0].reason, Catch::Contains("stale gang: 2/3 pods running"));
}

TEST_CASE("stale gang: the memory is the action object's", "[actions][stalegang]") {
  Stale s;
  s.start(2);
  CHECK(s.cycle().evictions.empty());
  s.advance(120);
  // A new action object (a restarted scheduler) has not seen the gang before: it starts counting.
  Config fresh = config("actions: [stalegangeviction]\nactionArgs:\n  stalegangeviction: {gracePeriod: 60s}\n");
  CHECK(s.cycle(fresh).evictions.empty());
  // The original one has: 120s > 60s.
  CHECK(s.cycle().evictions.size() == 2);
}

TEST_CASE("stale gang: a gang at its minMember, or not running at all, is not stale", "[actions][stalegang]") {
  SECTION("at minMember") {
    Stale s;
    s.start(3);
    s.cycle();
    s.advance(600);
    CHECK(s.cycle().evictions.empty());
  }
  SECTION("nothing running") {
    Stale s;
    s.start(0);
    s.cycle();
    s.advance(600);
    CHECK(s.cycle().evictions.empty());
  }
}

}  // namespace
