// nodeorder: binpack (fullest node that fits first) or spread (emptiest first) on the node axis,
// scored on the task's GPUs, or on CPU for pods without GPUs, as KAI's node placement does.
// The default comes from config (plugins.nodeorder.node); a pod may choose with the annotation
// tessera.dev/node-policy. Scores are integers in [0, 1e6]: no floating-point ties.
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
    ssn.addPrePredicateFn(name_, [](const framework::SessionJob&, const framework::SessionTask& task)
                                     -> std::optional<std::string> {
      const std::string* v = task.pod().meta.annotation(api::keys::kNodePolicy);
      if (v && *v != "binpack" && *v != "spread")
        return "Pod " + task.info->key + ": annotation " + api::keys::kNodePolicy + ": unknown value \"" + *v +
               "\" (valid: binpack, spread)";
      return std::nullopt;
    });
    ssn.addNodeOrderFn(name_, [this](const framework::SessionTask& task, const framework::SessionNode& node) {
      const Policy policy = policyOf(task);
      const api::Resources& req = task.request();
      const bool byGpu = req.milliGpu > 0;
      const int64_t total = byGpu ? node.info->allocatable.milliGpu : node.info->allocatable.milliCpu;
      if (total <= 0) return int64_t{0};
      const int64_t idle = byGpu ? node.idle.milliGpu : node.idle.milliCpu;
      const int64_t want = byGpu ? req.milliGpu : req.milliCpu;
      const int64_t freeAfter = std::max<int64_t>(0, idle - want);
      const int64_t usedAfter = total - freeAfter;
      return policy == Policy::Binpack ? usedAfter * kMaxScore / total : freeAfter * kMaxScore / total;
    });
  }

 private:
  /// The task's policy; remembered for the last task, since it is asked once per node.
  Policy policyOf(const framework::SessionTask& task) {
    if (lastTask_ == task.info) return lastPolicy_;
    lastTask_ = task.info;
    const std::string* v = task.pod().meta.annotation(api::keys::kNodePolicy);
    lastPolicy_ = v ? (*v == "spread" ? Policy::Spread : Policy::Binpack) : args_.node;
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
