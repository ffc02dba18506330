#pragma once
/// Factories of the built-in plugins; registered by name from src/app/plugins.def.
#include <memory>

#include "tessera/api/result.h"
#include "tessera/framework/args.h"
#include "tessera/framework/plugin.h"

namespace tessera::plugins {

using PluginResult = api::Result<std::shared_ptr<framework::Plugin>>;

/// gang: all-or-nothing on minMember; invalid or missing PodGroups; gang readiness.
PluginResult makeGang(framework::Args& args);
/// priority: job order by PriorityClass value (higher first); task order by task-priority label.
PluginResult makePriority(framework::Args& args);
/// predicates: node state, nodeSelector, required node affinity, taints/tolerations, host ports, max pods.
PluginResult makePredicates(framework::Args& args);
/// nodeorder: binpack or spread on the node axis (config default, tessera.dev/node-policy per pod).
PluginResult makeNodeOrder(framework::Args& args);

/// proportion: hierarchical queues, fair-share division, queue order, capacity checks, reclaim rules.
PluginResult makeProportion(framework::Args& args);
/// timeaware: queues' usage over a sliding window adjusts over-quota weights (off unless enabled).
PluginResult makeTimeAware(framework::Args& args);
/// gpushare: GPU-sharing annotations (validation), nodes able to host GPU shares, GPU model filters.
PluginResult makeGpuShare(framework::Args& args);
/// topology: topology-aware placement (required / preferred Topology levels, domain bin-packing).
PluginResult makeTopology(framework::Args& args);

}  // namespace tessera::plugins
