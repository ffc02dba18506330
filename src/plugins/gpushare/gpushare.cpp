// gpushare: the node-side checks of GPU sharing and GPU model filters. Pods whose GPU annotations
// are invalid are not placed (the reason names the annotation); fractional pods need nodes with
// GPUs, and gpu-memory requests a node whose nvidia.com/gpu.memory label says how big its GPUs
// are; tessera.dev/use-gpu-type / avoid-gpu-type match nvidia.com/gpu.product. Where the share goes
// within a node (which GPU group) is the session's choice, scored by nodeorder's GPU axis.
#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "tessera/api/log.h"
#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"
#include "tessera/plugins/gpu_topology.h"

namespace tessera::plugins {
namespace {

class GpuSharePlugin final : public framework::Plugin {
 public:
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    ssn.addPrePredicateFn(name_, [](const framework::SessionJob&, const framework::SessionTask& task) -> api::Status {
      if (task.gpuSpecInvalid) return api::makeError(task.info->gpuSpecError);
      return api::Status::success();
    });
    ssn.addPredicateFn(name_, [this](const framework::SessionTask& task, const framework::SessionNode& node,
                                     std::string& reason) {
      const api::PodGpuSpec* spec = task.info->gpuSpec.get();
      if (!spec) return true;
      if (spec->filtersGpuTypes()) {
        const std::string* product = node.node().meta.label(api::keys::kNodeGpuProductLabel);
        auto listed = [&](const std::vector<std::string>& list) {
          return product && std::find(list.begin(), list.end(), *product) != list.end();
        };
        if (!spec->useGpuTypes.empty() && !listed(spec->useGpuTypes)) {
          reason = std::string("GPU model not in ") + api::keys::kUseGpuType;
          return false;
        }
        if (listed(spec->avoidGpuTypes)) {
          reason = std::string("GPU model in ") + api::keys::kAvoidGpuType;
          return false;
        }
      }
      if (!spec->shared()) return true;
      if (node.info->migMode) {
        reason = std::string("GPUs in MIG mode (") + api::keys::kNodeGpuMode + ": mig) take no GPU shares";
        return false;
      }
      if (node.info->allocatable.milliGpu < 1000) {
        reason = "no GPUs";
        return false;
      }
      if (!node.info->gpuLabelError.empty()) {
        reason = std::string("invalid node label ") + api::keys::kNodeGpuMemoryLabel;
        return false;
      }
      if (spec->memoryMiB > 0) {
        if (node.info->gpuMemoryMiB <= 0) {
          reason = std::string("no node label ") + api::keys::kNodeGpuMemoryLabel + " (needed by " +
                   api::keys::kGpuMemory + " requests)";
          return false;
        }
        if (spec->memoryMiB * 1000 > node.gpuCapacity) {  // the GPU's memory times its memory scaling
          reason = std::string("GPU memory smaller than the ") + api::keys::kGpuMemory + " request";
          return false;
        }
      }
      // Under hard isolation the interposer limits a fraction to its share of the GPU's memory,
      // which only the node label tells (else the binder would have to refuse the bind).
      if (spec->hardIsolation && node.info->gpuMemoryMiB <= 0) {
        reason = std::string("no node label ") + api::keys::kNodeGpuMemoryLabel +
                 " (hard GPU isolation limits a fraction to its share of the GPU's memory)";
        return false;
      }
      if (spec->numDevices * int64_t{1000} > node.info->allocatable.milliGpu) {
        reason = std::string("fewer GPUs than ") + api::keys::kGpuFractionNumDevices;
        return false;
      }
      return !spec->filtersGpuUuids() || uuidRulesAllow(*spec, node, reason);
    });
    // Intra-node GPU topology: requests of several GPUs prefer nodes where they fit inside one
    // NVLink island of free GPUs, best fit first (docs/gpu-sharing.md, "Intra-node GPU topology").
    ssn.addNodeOrderFn(name_, [this](const framework::SessionTask& task, const framework::SessionNode& node) {
      return topologyScore(task, node);
    });
  }

 private:
  /// Above any binpack/spread score (at most 1e6 per plugin): an NVLink island beats fullness.
  static constexpr int64_t kOneIsland = 3'000'000;

  struct CachedTopology {
    std::string resourceVersion;
    std::shared_ptr<const plugins::gputopo::GpuTopology> topology;  ///< null: none or invalid
  };

  const plugins::gputopo::GpuTopology* topologyOf(const api::Node& node) {
    CachedTopology& c = topologies_[node.meta.name];
    if (c.resourceVersion == node.meta.resourceVersion && !c.resourceVersion.empty()) return c.topology.get();
    c.resourceVersion = node.meta.resourceVersion;
    c.topology.reset();
    auto t = plugins::gputopo::nodeGpuTopology(node);
    if (!t.ok()) {
      log::warning("gpushare: ", t.error().message, " (the node's GPU topology is ignored)");
    } else if (*t) {
      c.topology = std::make_shared<const plugins::gputopo::GpuTopology>(std::move(**t));
    }
    return c.topology.get();
  }

  /// The GPUs known to be free on the node: every device but those its GPU groups hold (their
  /// reservation pods' UUIDs, matched against the topology's `gpus`). Unknown when some GPU is used
  /// by something else (a whole-GPU pod: the device plugin chose it, the API does not say which).
  static std::optional<std::vector<int>> freeDevices(const framework::SessionNode& node,
                                                     const plugins::gputopo::GpuTopology& topo) {
    const int total = static_cast<int>(node.info->allocatable.milliGpu / 1000);
    std::vector<bool> held(static_cast<size_t>(std::max(total, topo.gpuCount)), false);
    int known = 0;
    for (const auto& g : node.gpuGroups) {
      if (!g.info || g.info->uuid.empty()) continue;
      auto it = std::find(topo.uuids.begin(), topo.uuids.end(), g.info->uuid);
      if (it == topo.uuids.end()) return std::nullopt;
      held[static_cast<size_t>(it - topo.uuids.begin())] = true;
      ++known;
    }
    // Session-opened groups take idle GPUs too (idle.milliGpu already excludes them).
    const int idle = static_cast<int>(node.idle.milliGpu / 1000);
    const int opened = static_cast<int>(std::count_if(node.gpuGroups.begin(), node.gpuGroups.end(),
                                                      [](const framework::SessionGpuGroup& g) { return g.opened != 0; }));
    if (opened > 0 || idle + known != total) return std::nullopt;
    std::vector<int> free;
    for (int i = 0; i < total; ++i)
      if (!held[static_cast<size_t>(i)]) free.push_back(i);
    return free;
  }

  /// tessera.dev/use-gpu-uuid and nouse-gpu-uuid on a node: a GPU group on an allowed GPU (its
  /// reservation pod reported the UUID), or a GPU the node lists (tessera.dev/gpu-topology `gpus`)
  /// that is allowed, held by no group and not excluded. A node that does not list its GPUs may
  /// take an avoiding pod (the binder checks the GPU the device plugin gives), never a pinned one.
  /// Which group the share then takes is the session's (it joins only allowed groups).
  bool uuidRulesAllow(const api::PodGpuSpec& spec, const framework::SessionNode& node, std::string& reason) {
    std::vector<std::string> held;
    for (const auto& g : node.gpuGroups) {
      if (!g.info || g.info->uuid.empty()) continue;
      if (g.capacity > 0 && spec.gpuUuidAllowed(g.info->uuid)) return true;
      held.push_back(g.info->uuid);
    }
    const bool pinned = !spec.useGpuUuids.empty();
    const char* rule = pinned ? api::keys::kUseGpuUuid : api::keys::kNoUseGpuUuid;
    const plugins::gputopo::GpuTopology* topo = topologyOf(node.node());
    if (!topo || topo->uuids.empty()) {
      if (!pinned) return true;
      reason = std::string("GPU UUIDs not listed (annotation ") + plugins::gputopo::kGpuTopologyAnnotation +
               ", gpus), needed by " + rule;
      return false;
    }
    const auto& excluded = node.info->excludedGpuUuids;
    for (const std::string& u : topo->uuids)
      if (spec.gpuUuidAllowed(u) && std::find(held.begin(), held.end(), u) == held.end() &&
          std::find(excluded.begin(), excluded.end(), u) == excluded.end())
        return true;
    reason = pinned ? std::string("no usable GPU in ") + rule : std::string("every usable GPU in ") + rule;
    return false;
  }

  int64_t topologyScore(const framework::SessionTask& task, const framework::SessionNode& node) {
    int k = static_cast<int>(task.nodeRequest().milliGpu / 1000);
    if (task.sharesGpu()) k = task.info->gpuSpec->numDevices;
    if (k < 2 || node.node().meta.annotations.empty()) return 0;
    const plugins::gputopo::GpuTopology* topo = topologyOf(node.node());
    if (!topo) return 0;
    auto free = freeDevices(node, *topo);
    if (!free) return 0;
    auto choice = plugins::gputopo::chooseGpus(*topo, *free, k);
    if (!choice) return 0;
    return (choice->islandsUsed == 1 ? kOneIsland : 0) + std::clamp<int64_t>(choice->score * 1000, -900'000, 900'000);
  }

  std::string name_ = "gpushare";
  std::map<std::string, CachedTopology> topologies_;  ///< by node name, kept across sessions
};

}  // namespace

PluginResult makeGpuShare(framework::Args&) {
  return std::shared_ptr<framework::Plugin>(std::make_shared<GpuSharePlugin>());
}

}  // namespace tessera::plugins
