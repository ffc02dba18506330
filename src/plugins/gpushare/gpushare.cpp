// gpushare: the node-side checks of GPU sharing and GPU model filters. Pods whose GPU annotations
// are invalid are not placed (the reason names the annotation); fractional pods need nodes with
// GPUs, and gpu-memory requests a node whose nvidia.com/gpu.memory label says how big its GPUs
// are; tessera.dev/use-gpu-type / avoid-gpu-type match nvidia.com/gpu.product. Where the share goes
// within a node (which GPU group) is the session's choice, scored by nodeorder's GPU axis.
#include <algorithm>
#include <string>

#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

class GpuSharePlugin final : public framework::Plugin {
 public:
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    ssn.addPrePredicateFn(name_, [](const framework::SessionJob&, const framework::SessionTask& task)
                                     -> std::optional<std::string> {
      if (!task.info->gpuSpecError.empty()) return task.info->gpuSpecError;
      return std::nullopt;
    });
    ssn.addPredicateFn(name_, [](const framework::SessionTask& task, const framework::SessionNode& node,
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
        if (spec->memoryMiB > node.info->gpuMemoryMiB) {
          reason = std::string("GPU memory smaller than the ") + api::keys::kGpuMemory + " request";
          return false;
        }
      }
      if (spec->numDevices * int64_t{1000} > node.info->allocatable.milliGpu) {
        reason = std::string("fewer GPUs than ") + api::keys::kGpuFractionNumDevices;
        return false;
      }
      return true;
    });
  }

 private:
  std::string name_ = "gpushare";
};

}  // namespace

PluginResult makeGpuShare(framework::Args&) {
  return std::shared_ptr<framework::Plugin>(std::make_shared<GpuSharePlugin>());
}

}  // namespace tessera::plugins
