#pragma once
// Shared by the framework, plugins and actions unit tests: a small cluster written as YAML
// manifests on the embedded MemoryCluster, a cache started on it, and a session over its snapshot.
// Header-only; needs tessera_framework (and so tessera_cache and tessera_api) only.
#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/convert.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/config.h"
#include "tessera/framework/plugin.h"
#include "tessera/framework/session.h"

namespace tessera::testing {

/// Parses YAML manifests (several documents separated by "---") into JSON; fails the test on error.
inline std::vector<nlohmann::json> manifests(const std::string& yaml) {
  auto docs = api::yamlToJson(yaml);
  if (!docs.ok()) FAIL("bad test YAML: " << docs.error().message);
  std::vector<nlohmann::json> out;
  for (auto& d : *docs)
    if (!d.is_null()) out.push_back(std::move(d));
  return out;
}

/// A Node manifest with cpu, memory and GPUs allocatable, Ready.
inline std::string nodeYaml(const std::string& name, const std::string& cpu, const std::string& gpus,
                            const std::string& extraMeta = "", const std::string& extraStatus = "") {
  return "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n" + extraMeta +
         "status:\n  allocatable: {cpu: \"" + cpu + "\", memory: 64Gi, pods: \"110\", nvidia.com/gpu: \"" + gpus +
         "\"}\n  conditions: [{type: Ready, status: \"True\"}]\n" + extraStatus;
}

/// The embedded cluster with a virtual clock, and a cache over it (started by start()).
struct TestCluster {
  api::FakeClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  std::unique_ptr<cache::Cache> cache;

  /// Creates every manifest in `yaml`. Namespaced objects default to namespace "default".
  void create(const std::string& yaml) {
    for (auto& obj : manifests(yaml)) {
      auto kind = api::kindOf(obj);
      if (!kind.ok()) FAIL(kind.error().message);
      if (api::kindInfo(*kind).namespaced && !obj["metadata"].contains("namespace"))
        obj["metadata"]["namespace"] = "default";
      auto created = cluster.create(*kind, obj);
      if (!created.ok()) FAIL("creating " << api::describeObject(obj) << ": " << created.error().message);
    }
  }

  void start(cache::CacheOptions options = {}) {
    cache = std::make_unique<cache::Cache>(cluster, clock, options);
    auto st = cache->start();
    if (!st.ok()) FAIL("starting the cache: " << st.error().message);
  }

  std::shared_ptr<const cache::Snapshot> snapshot() { return cache->snapshot(); }
};

/// A Config holding exactly the given plugins (in order) and no actions.
inline framework::Config configWith(std::vector<std::shared_ptr<framework::Plugin>> plugins) {
  framework::Config cfg;
  cfg.plugins = std::move(plugins);
  return cfg;
}

/// Index of the task `podKey` ("ns/name") in `job`, or -1.
inline int taskIndex(const framework::SessionJob& job, const std::string& podKey) {
  for (size_t i = 0; i < job.tasks.size(); ++i)
    if (job.tasks[i].info->key == podKey) return static_cast<int>(i);
  return -1;
}

/// The session task of pod `podKey` in job `jobKey`; fails the test when absent.
inline framework::SessionTask& taskOf(framework::Session& ssn, const std::string& jobKey, const std::string& podKey) {
  const int j = ssn.findJob(jobKey);
  if (j < 0) FAIL("no job " << jobKey);
  const int t = taskIndex(ssn.jobs()[j], podKey);
  if (t < 0) FAIL("no task " << podKey << " in job " << jobKey);
  return ssn.task(j, t);
}

/// Index of node `name`; fails the test when absent.
inline int nodeIndex(const framework::Session& ssn, const std::string& name) {
  const int n = ssn.findNode(name);
  if (n < 0) FAIL("no node " << name);
  return n;
}

/// A hook's verdict as tests compare it: nullopt when the check passed, else its reason.
inline std::optional<std::string> rejection(const api::Status& verdict) {
  if (verdict.ok()) return std::nullopt;
  return verdict.error().message;
}

}  // namespace tessera::testing
