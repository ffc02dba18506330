#include "tessera/app/pipeline.h"

#include <set>

#include <nlohmann/json.hpp>

#include "tessera/api/log.h"
#include "tessera/api/shard.h"

namespace tessera::app {

Pipeline::Pipeline(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock,
                   const framework::Config& config, PipelineOptions options)
    : client_(client),
      cache_(cache),
      usageNamespace_(std::move(options.usageNamespace)),
      usageConfigMap_(std::move(options.usageConfigMap)),
      restorePending_(!usageConfigMap_.empty()),
      config_(config),
      synchronous_(options.synchronous) {
  if (options.groupPods) {
    grouper_ = std::make_unique<grouper::Grouper>(client);
    cache.holdUngroupedPods(true);
  }
  gpu_ = std::make_unique<binder::GpuBinding>(client, clock, std::move(options.gpu));
  binder::StatusWriterOptions statusOptions;
  statusOptions.schedulerName = config.schedulerName;
  statusOptions.background = !synchronous_;
  statusOptions.mayWrite = std::move(options.statusMayWrite);
  statusOptions.maxQueuedEvents = options.maxQueuedEvents;
  status_ = std::make_unique<binder::StatusWriter>(options.statusClient ? *options.statusClient : client, clock,
                                                   statusOptions);
  options.binder.preBind = [gpu = gpu_.get()](const framework::SessionResult::Bind& b, api::Time since) {
    return gpu->prepare(b, since);
  };
  binder_ = std::make_unique<binder::Binder>(client, cache, clock, *status_, std::move(options.binder));
  scheduler_ = std::make_unique<framework::Scheduler>(cache, config, clock, *binder_);
}

// Members go in reverse: the scheduler, the binder (its queued binds finish), the status writer
// (what is still queued is dropped), the GPU binding.
Pipeline::~Pipeline() = default;

/// Sharded (docs/sharding.md): our unbound pods without the pool label whose PodGroup (or, with
/// none, queue) belongs to another pool get the label, so that pool's shard watches them. A failed patch is tried again
/// before the next cycle (until the pod is gone).
void Pipeline::routePods() {
  std::vector<std::pair<std::string, std::string>> todo = cache_.takeMisroutedPods();
  for (auto& retry : routeRetry_) todo.push_back(std::move(retry));
  routeRetry_.clear();
  std::set<std::string> done;
  for (const auto& [key, pool] : todo) {
    const auto slash = key.find('/');
    if (slash == std::string::npos || !done.insert(key).second) continue;
    const cache::Json patch = {{"metadata", {{"labels", {{api::keys::kNodePoolLabel, pool}}}}}};
    auto r = client_.patch(api::Kind::Pod, key.substr(0, slash), key.substr(slash + 1), cache::PatchType::Merge, patch);
    if (r.ok()) {
      log::info("pod ", key, ": belongs to node pool ", pool.empty() ? std::string("(default)") : pool,
                " (its PodGroup's, or its queue's): labelled ", api::keys::kNodePoolLabel, "=", pool,
                " for that pool's shard");
    } else if (r.error().code != 404) {
      log::warning("pod ", key, ": labelling it for node pool ", pool, ": ", r.error().message, " (retrying)");
      routeRetry_.emplace_back(key, pool);
    }
  }
}

framework::SessionResult Pipeline::runCycle(framework::CycleStats* stats) {
  routePods();
  if (grouper_) groupPods();
  if (restorePending_) restorePending_ = !tryRestore();
  framework::SessionResult result = scheduler_->runCycle(stats);
  saveState();
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

void Pipeline::restoreState() { restorePending_ = !usageConfigMap_.empty(); }

namespace {
constexpr const char* kUsageKey = "usage.json";
/// ConfigMaps hold at most 1 MiB; what is larger is not written (logged), the memory keeps it.
constexpr size_t kMaxUsageBytes = 900 * 1024;
}  // namespace

bool Pipeline::tryRestore() {
  const std::string where = "ConfigMap " + usageNamespace_ + "/" + usageConfigMap_;
  auto cm = client_.get(api::Kind::ConfigMap, usageNamespace_, usageConfigMap_);
  if (!cm.ok()) {
    if (cm.error().code == 404) {
      log::info("time-aware usage history: ", where, " not found, starting from an empty history");
      state().usage = {};
      return true;
    }
    log::warning("time-aware usage history: reading ", where, ": ", cm.error().message,
                 " (retried before the next cycle; not saved meanwhile)");
    return false;
  }
  const cache::Json data = cm->value("data", cache::Json::object());
  const cache::Json text = data.is_object() ? data.value(kUsageKey, cache::Json()) : cache::Json();
  api::Result<framework::UsageHistory> history = api::makeError(std::string("data.") + kUsageKey + ": missing");
  if (text.is_string()) {
    const cache::Json parsed = cache::Json::parse(text.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    history = parsed.is_discarded() ? api::makeError(std::string("data.") + kUsageKey + ": not JSON")
                                    : framework::UsageHistory::fromJson(parsed);
  }
  if (!history.ok()) {
    log::warning("time-aware usage history: ", where, ": ", history.error().message,
                 "; starting from an empty history (it is overwritten at the next save)");
    state().usage = {};
    return true;
  }
  state().usage = std::move(history).value();
  log::info("time-aware usage history restored from ", where, " (", state().usage.buckets().size(), " buckets)");
  return true;
}

void Pipeline::saveState() {
  framework::SchedulerState& s = state();
  if (!s.usageSaveDue) return;
  s.usageSaveDue = false;
  if (usageConfigMap_.empty() || restorePending_) return;
  std::string text = s.usage.toJson().dump();
  if (text.size() > kMaxUsageBytes) {
    log::error("time-aware usage history: ", text.size(), " bytes is more than a ConfigMap holds; not saved");
    return;
  }
  cache::Json cm = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", usageConfigMap_},
        {"namespace", usageNamespace_},
        {"labels", {{"app.kubernetes.io/name", "tessera"}, {"app.kubernetes.io/component", "scheduler"}}}}},
      {"data", {{kUsageKey, std::move(text)}}}};
  status_->put(api::Kind::ConfigMap, std::move(cm));
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
