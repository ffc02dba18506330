#pragma once
/// The scheduling pipeline, wired once for `tessera run` and for the scenario runner:
///
///   Cache (watch -> snapshot) -> Scheduler (session, actions, plugins) -> Binder (evictions, then
///   binds; GpuBinding prepares fractional GPUs before a bind) -> StatusWriter (conditions, events,
///   PodGroup and Queue status; fed by the binder and, after each cycle, by update()).
///
/// The caller owns the client, the clock, the config and the started cache (the daemon retries the
/// cache's first sync; the simulator builds it from a file). The pipeline owns the rest and tears it
/// down in the right order: scheduler, binder (its queued binds finish), status writer, GPU binding.
#include <functional>
#include <memory>

#include "tessera/api/clock.h"
#include "tessera/binder/binder.h"
#include "tessera/binder/gpu_binding.h"
#include "tessera/binder/status_writer.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/framework/config.h"
#include "tessera/framework/scheduler.h"
#include "tessera/grouper/grouper.h"

namespace tessera::app {

struct PipelineOptions {
  /// Binder settings; its preBind is the pipeline's GpuBinding (set here, not by the caller).
  binder::BinderOptions binder;
  binder::GpuBindingOptions gpu;
  /// false (the daemon): a cycle returns once its decisions are queued; binds, evictions and status
  /// writes happen on their threads. true (the simulator): a cycle returns once its binds,
  /// evictions and status writes are done, status written on the calling thread (deterministic).
  bool synchronous = false;
  /// Run the pod grouper (docs/workloads.md) before each cycle: pods of workloads get their PodGroup.
  bool groupPods = true;
  /// Fencing of status writes (StatusWriterOptions::mayWrite); binds and evictions are fenced by
  /// binder.leaderEpoch. Null: never fenced.
  std::function<bool()> statusMayWrite;
  /// The status writer's own client (the daemon: its own connections and rate limit, as
  /// kube-scheduler's event client), so that binds never wait behind conditions and Events. Null:
  /// the pipeline's client.
  cache::ClusterClient* statusClient = nullptr;
  /// Events that may wait for the status writer (StatusWriterOptions::maxQueuedEvents; 0: no bound).
  size_t maxQueuedEvents = binder::StatusWriterOptions{}.maxQueuedEvents;
  /// Where the time-aware usage history is saved (docs/operations.md#state): a ConfigMap with the
  /// JSON under key `usage.json`, written through the status writer whenever the timeaware plugin
  /// says it is due (its saveInterval), restored before the first cycle (restoreState()). Empty
  /// name: not saved (the simulator: a scenario starts with an empty history).
  std::string usageNamespace, usageConfigMap;
};

class Pipeline {
 public:
  /// `config` is read by reference each cycle (a reload replaces it between cycles); its
  /// schedulerName decides which unbound pods get an InvalidSpec condition.
  Pipeline(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, const framework::Config& config,
           PipelineOptions options = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// One scheduling cycle: the pod grouper gives new workload pods their PodGroups, the scheduler
  /// decides, the binder is handed the decisions, GPU reservations no pod uses any more are
  /// collected, and the status writer gets the cycle's desired state. Called from one thread.
  framework::SessionResult runCycle(framework::CycleStats* stats = nullptr);

  /// Reads the saved usage history back before the next cycle (the daemon: at start, done by the
  /// constructor, and on becoming leader again: the ConfigMap may be newer than this replica's
  /// memory). A read that fails (not a 404) is retried before each cycle; until one succeeds,
  /// nothing is saved over what may be there. No-op without a ConfigMap name.
  void restoreState();
  /// What the scheduler remembers across cycles and config reloads (framework/state.h).
  framework::SchedulerState& state() { return scheduler_->state(); }

  cache::Cache& cache() { return cache_; }
  binder::Binder& binder() { return *binder_; }
  binder::GpuBinding& gpu() { return *gpu_; }
  binder::StatusWriter& status() { return *status_; }

 private:
  /// Runs the pod grouper; in the daemon, applies what it wrote to the cache at once.
  void groupPods();
  /// Sharded: labels our pods that belong to another pool's shard (Cache::takeMisroutedPods).
  void routePods();
  /// The GET behind restoreState(); true once the history is read, absent (404) or unreadable.
  bool tryRestore();
  /// Hands the usage history to the status writer when the timeaware plugin says it is due.
  void saveState();

  cache::ClusterClient& client_;
  cache::Cache& cache_;
  std::string usageNamespace_, usageConfigMap_;
  bool restorePending_ = false;
  const framework::Config& config_;
  bool synchronous_;
  std::unique_ptr<grouper::Grouper> grouper_;  ///< null when options.groupPods is false
  std::vector<std::string> groupRetry_;        ///< pods the last grouping pass asked to see again
  std::vector<std::pair<std::string, std::string>> routeRetry_;  ///< pods whose labelling failed, with the pool
  std::unique_ptr<binder::GpuBinding> gpu_;
  std::unique_ptr<binder::StatusWriter> status_;
  std::unique_ptr<binder::Binder> binder_;
  std::unique_ptr<framework::Scheduler> scheduler_;
};

}  // namespace tessera::app
