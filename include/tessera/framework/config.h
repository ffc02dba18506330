#pragma once
/// The scheduler configuration (config/tessera.yaml holds the defaults). The daemon's config file
/// and a scenario's `config` map share this shape; a scenario's map is merged over the defaults.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/gpu_request.h"
#include "tessera/api/result.h"

namespace tessera::framework {

class Plugin;
class Action;
class Registry;

/// A validated configuration: actions and plugins instantiated with their typed arguments.
/// The pod grouper's settings (config key podGrouper; docs/workloads.md#queue-and-priority).
struct PodGrouperConfig {
  /// Priority class of a generated PodGroup whose workload and pods name none: by workload kind
  /// ("PyTorchJob", "Deployment", "Pod"), else by category ("training", "inference").
  std::map<std::string, std::string> defaultPriorityClass;
};

/// The cluster's GPU-sharing settings (config key gpuSharing; docs/gpu-sharing.md, "Per-node
/// settings"); a node's labels or annotations override them for that node.
struct GpuSharingConfig {
  int32_t splitCount = 10;             ///< fractional pods on one GPU at most (HAMi deviceSplitCount)
  int64_t memoryScalingMilli = 1000;   ///< a GPU's memory counts this many thousandths times (HAMi deviceMemoryScaling)
  /// A GPU's compute counts this many thousandths times: the compute of the shares on one GPU
  /// (api::gpuComputeMilli) adds up to at most this (HAMi deviceCoreScaling).
  int64_t coreScalingMilli = 1000;
  /// Sizes of shares that do not give them (HAMi defaultMem, defaultCores): read when the daemon
  /// starts (the cache parses pods with them), not on a reload.
  api::GpuShareDefaults defaults;
};

struct Config {
  std::string schedulerName = "tessera";
  /// The SchedulingShard this scheduler serves (docs/sharding.md; `tessera run --shard` wins);
  /// empty: unsharded, every node. Read at start: a reload may not change it.
  std::string shard;
  PodGrouperConfig podGrouper;
  GpuSharingConfig gpuSharing;
  api::Duration schedulePeriod{1000};
  /// Actions in run order.
  std::vector<std::shared_ptr<Action>> actions;
  /// Enabled plugins in tier order (callbacks are consulted in this order).
  std::vector<std::shared_ptr<Plugin>> plugins;
  /// Plugin names grouped by tier, as configured.
  std::vector<std::vector<std::string>> tiers;
};

/// The default configuration text (config/tessera.yaml, compiled in).
const std::string& defaultConfigYaml();

/// Builds a Config from a JSON/YAML-derived object merged over the defaults (JSON merge patch:
/// maps merge, other values replace). Errors name the key ("plugins.nodeorder.node: ...").
api::Result<Config> loadConfig(const Registry& registry, const nlohmann::json* overrides);
/// Same, from YAML text (a config file).
api::Result<Config> loadConfigYaml(const Registry& registry, const std::string& yamlText);

}  // namespace tessera::framework
