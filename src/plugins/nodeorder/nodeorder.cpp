// nodeorder: binpack (fullest node that fits first) or spread (emptiest first) on the node axis,
// scored on the task's GPUs, or on CPU for pods without GPUs, as KAI's node placement does.
// The default comes from config (plugins.nodeorder.node); a pod may choose with the annotation
// tessera.dev/node-policy. Scores are integers in [0, 1e6]: no floating-point ties.
#include <algorithm>
#include <string>

#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

enum class Policy { Binpack, Spread };

struct NodeOrderArgs {
  Policy node = Policy::Binpack;
  Policy gpu = Policy::Binpack;
};

constexpr int64_t kMaxScore = 1'000'000;

class NodeOrderPlugin final : public framework::Plugin {
 public:
  explicit NodeOrderPlugin(NodeOrderArgs args) : args_(args) {}
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    lastTask_ = nullptr;  // task pointers of an earlier snapshot may be reused
    ssn.setSpreadPlacement(args_.node == Policy::Spread || args_.gpu == Policy::Spread);
    ssn.addNodeOrderFn(name_, [this](const framework::SessionTask& task, const framework::SessionNode& node) {
      const Policy policy = policyOf(task);
      if (task.sharesGpu()) return shareScore(task, node, policy);
      const api::Resources& req = task.nodeRequest();
      const bool byGpu = req.milliGpu > 0;
      const int64_t total = byGpu ? node.info->allocatable.milliGpu : node.info->allocatable.milliCpu;
      if (total <= 0) return int64_t{0};
      const int64_t idle = byGpu ? node.idle.milliGpu : node.idle.milliCpu;
      const int64_t want = byGpu ? req.milliGpu : req.milliCpu;
      const int64_t freeAfter = std::max<int64_t>(0, idle - want);
      const int64_t usedAfter = total - freeAfter;
      return policy == Policy::Binpack ? usedAfter * kMaxScore / total : freeAfter * kMaxScore / total;
    });
    // GPU axis: which GPU group of the chosen node a fractional pod joins.
    ssn.addGpuOrderFn(name_, [this](const framework::SessionTask& task, const framework::SessionNode& node,
                                    int group) -> int64_t {
      api::GpuPolicy p = task.info->gpuSpec ? task.info->gpuSpec->gpuPolicy : api::GpuPolicy::Unset;
      const Policy policy = p == api::GpuPolicy::Unset ? args_.gpu : p == api::GpuPolicy::Spread ? Policy::Spread
                                                                                                 : Policy::Binpack;
      if (group < 0) return policy == Policy::Spread ? 2 * kMaxScore : 0;  // a whole idle GPU
      const framework::SessionGpuGroup& g = node.gpuGroups[group];
      if (g.capacity <= 0) return 0;
      const int64_t usedAfter = std::min(g.capacity, g.used + cache::gpuUnitsOn(*task.info->gpuSpec, *node.info));
      const int64_t fill = usedAfter * kMaxScore / g.capacity;
      return policy == Policy::Binpack ? kMaxScore + fill : kMaxScore - fill;
    });
  }

 private:
  /// Node axis for a fractional pod: the node's GPU load, shared GPUs counted by how full their
  /// groups are, after placing the pod's share.
  int64_t shareScore(const framework::SessionTask& task, const framework::SessionNode& node, Policy policy) {
    const int64_t total = node.info->allocatable.milliGpu;
    if (total <= 0) return 0;
    int64_t load = total - node.idle.milliGpu;  // whole GPUs in use, groups included
    for (const auto& g : node.gpuGroups)
      if (g.capacity > 0) load -= 1000 - g.used * 1000 / g.capacity;  // a group counts by its fill
    load += task.request().milliGpu;
    load = std::clamp<int64_t>(load, 0, total);
    return policy == Policy::Binpack ? load * kMaxScore / total : (total - load) * kMaxScore / total;
  }

  /// The task's policy; remembered for the last task, since it is asked once per node.
  Policy policyOf(const framework::SessionTask& task) {
    if (lastTask_ == task.info) return lastPolicy_;
    lastTask_ = task.info;
    // tessera.dev/node-policy, validated with the other GPU annotations (plugin gpushare).
    const api::GpuPolicy p = task.info->gpuSpec ? task.info->gpuSpec->nodePolicy : api::GpuPolicy::Unset;
    lastPolicy_ = p == api::GpuPolicy::Unset ? args_.node : p == api::GpuPolicy::Spread ? Policy::Spread : Policy::Binpack;
    return lastPolicy_;
  }

  std::string name_ = "nodeorder";
  NodeOrderArgs args_;
  const cache::TaskInfo* lastTask_ = nullptr;
  Policy lastPolicy_ = Policy::Binpack;
};

}  // namespace

PluginResult makeNodeOrder(framework::Args& args) {
  NodeOrderArgs a;
  a.node = args.getEnum("node", "binpack", {"binpack", "spread"}) == "spread" ? Policy::Spread : Policy::Binpack;
  a.gpu = args.getEnum("gpu", "binpack", {"binpack", "spread"}) == "spread" ? Policy::Spread : Policy::Binpack;
  return std::shared_ptr<framework::Plugin>(std::make_shared<NodeOrderPlugin>(a));
}

}  // namespace tessera::plugins
