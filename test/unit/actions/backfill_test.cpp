// backfill at the session level: places jobs that fit on idle resources as they are now, never
// on releasing resources or room pipelined this cycle, and pipelines nothing.
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

TEST_CASE("backfill: idle resources only, never releasing ones", "[actions][backfill]") {
  // n1's 4 GPUs are held by a terminating pod (releasing). A 1-GPU pod that fits only there is
  // neither bound nor pipelined by backfill (allocate would pipeline it); with n2 idle it is bound
  // on n2.
  const std::string leaving =
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: leaving\n  namespace: t\n  labels: {tessera.dev/queue: q}\n"
      "  deletionTimestamp: \"2026-01-01T00:00:30Z\"\nspec:\n  schedulerName: tessera\n  nodeName: n1\n"
      "  containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: \"4\"}, limits: "
      "{nvidia.com/gpu: \"4\"}}}]\nstatus: {phase: Running}\n---\n";
  SECTION("only releasing room: nothing") {
    Env e("backfill");
    auto r = e.run(node("n1", 4), queue("q", "8") + leaving + pod("small", "q", 1));
    CHECK(r.binds.empty());
    CHECK(r.pipelined.empty());
  }
  SECTION("idle room elsewhere: bound there") {
    Env e("backfill");
    auto r = e.run(node("n1", 4) + node("n2", 1), queue("q", "8") + leaving + pod("small", "q", 1));
    REQUIRE(r.binds.size() == 1);
    CHECK(r.binds[0].node == "n2");
    CHECK(r.pipelined.empty());
  }
  SECTION("allocate pipelines the big job; backfill does not take its room") {
    // allocate pipelines big (4 GPUs) onto n1's releasing GPUs and binds small-a on n2's idle GPU;
    // backfill then finds no idle room for small-b (n1's room is promised to big).
    Env e("allocate, backfill");
    auto r = e.run(node("n1", 4) + node("n2", 1),
                   queue("q", "8") + leaving + pod("big", "q", 4, "", "train", "", "2025-12-31T00:00:00Z") +
                       pod("small-a", "q", 1, "", "train", "", "2025-12-31T00:00:01Z") +
                       pod("small-b", "q", 1, "", "train", "", "2025-12-31T00:00:02Z"));
    CHECK(pipelinedTo(r, "t/big") == "n1");
    REQUIRE(r.binds.size() == 1);
    CHECK(r.binds[0].podKey == "t/small-a");
    CHECK(pipelinedTo(r, "t/small-b").empty());
  }
}

}  // namespace
