#pragma once
// Shared by the action tests: YAML builders for queues, pods and PodGroups, and an Env that runs
// chosen actions over a small embedded cluster and returns the session's decisions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"

namespace tessera::testing::actions {

using tessera::framework::Config;
using tessera::framework::Session;
using tessera::framework::SessionResult;

inline const char* kClasses = R"(
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

/// A queue with a GPU quota (no limit), under `parent` when given.
inline std::string queue(const std::string& name, const std::string& gpuQuota, const std::string& parent = "") {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: " + name + "}\nspec:\n" +
         (parent.empty() ? "" : "  parentQueue: " + parent + "\n") + "  resources:\n    gpu: {quota: \"" + gpuQuota +
         "\", limit: \"-1\", overQuotaWeight: \"1\"}\n    cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: "
         "\"1\"}\n    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";
}

/// A pod of queue `q`; running on `node` when given (started a day ago). `group`: PodGroup name.
inline std::string pod(const std::string& name, const std::string& q, int gpus, const std::string& node = "",
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

inline std::string group(const std::string& name, const std::string& q, int minMember) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: t}\nspec: {minMember: " + std::to_string(minMember) + ", queue: " + q +
         ", priorityClassName: train}\n---\n";
}

inline Config config(const std::string& yaml) {
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

inline std::string node(const std::string& name, int gpus) {
  return tessera::testing::nodeYaml(name, "64", std::to_string(gpus)) + "---\n";
}

inline std::vector<std::string> evicted(const SessionResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.evictions) out.push_back(e.podKey);
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string pipelinedTo(const SessionResult& r, const std::string& podKey) {
  for (const auto& p : r.pipelined)
    if (p.podKey == podKey) return p.node;
  return "";
}

}  // namespace tessera::testing::actions
