#include "tessera/app/pipeline.h"

namespace tessera::app {

Pipeline::Pipeline(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock,
                   const framework::Config& config, PipelineOptions options)
    : cache_(cache), config_(config), synchronous_(options.synchronous) {
  if (options.groupPods) {
    grouper_ = std::make_unique<grouper::Grouper>(client);
    cache.holdUngroupedPods(true);
  }
  gpu_ = std::make_unique<binder::GpuBinding>(client, clock, std::move(options.gpu));
  binder::StatusWriterOptions statusOptions;
  statusOptions.schedulerName = config.schedulerName;
  statusOptions.background = !synchronous_;
  statusOptions.mayWrite = std::move(options.statusMayWrite);
  status_ = std::make_unique<binder::StatusWriter>(options.statusClient ? *options.statusClient : client, clock,
                                                   statusOptions);
  options.binder.preBind = [gpu = gpu_.get()](const framework::SessionResult::Bind& b) { return gpu->prepare(b); };
  binder_ = std::make_unique<binder::Binder>(client, cache, clock, *status_, std::move(options.binder));
  scheduler_ = std::make_unique<framework::Scheduler>(cache, config, clock, *binder_);
}

// Members go in reverse: the scheduler, the binder (its queued binds finish), the status writer
// (what is still queued is dropped), the GPU binding.
Pipeline::~Pipeline() = default;

framework::SessionResult Pipeline::runCycle(framework::CycleStats* stats) {
  if (grouper_) groupPods();
  framework::SessionResult result = scheduler_->runCycle(stats);
  if (synchronous_) {
    binder_->waitIdle();  // a cycle's binds, evictions and status writes complete within the cycle
    if (result.snapshot) status_->update(result, *result.snapshot);
    status_->drain();
    // The binds are done: a fresh snapshot shows every GPU group in use.
    gpu_->collectGarbage(*cache_.snapshot());
  } else {
    // Binds may still be in flight: their groups count as in use (the cycle's decisions).
    gpu_->collectGarbage(*result.snapshot, &result);
    if (result.snapshot) status_->update(result, *result.snapshot);
  }
  return result;
}

void Pipeline::groupPods() {
  // Only pods added or changed since the last pass (and the last pass's retries): no API call
  // while no ungrouped pod changes.
  const auto pods = cache_.takeUngroupedPods(groupRetry_);
  if (pods.empty()) {
    groupRetry_.clear();
    return;
  }
  grouper_->setDefaultPriorityClasses(config_.podGrouper.defaultPriorityClass);  // the running config's
  grouper::GroupingReport grouped = grouper_->group(pods);
  groupRetry_ = std::move(grouped.retry);
  if (synchronous_ || (grouped.pods.empty() && grouped.podGroups.empty())) return;
  // The embedded cluster's watch has queued these writes already; an API server's watch brings
  // them later. Applied now, after what is queued (snapshot() drains it), this cycle sees the pods
  // in their gangs rather than as groups of one.
  cache_.snapshot();
  for (const auto& pg : grouped.podGroups)
    cache_.applyEvent(api::Kind::PodGroup, cache::WatchEvent{cache::WatchEventType::Added, pg});
  for (const auto& pod : grouped.pods)
    cache_.applyEvent(api::Kind::Pod, cache::WatchEvent{cache::WatchEventType::Modified, pod});
}

}  // namespace tessera::app
