#pragma once
/// The cluster cache: consumes watch events from a ClusterClient, keeps NodeInfo / JobInfo /
/// QueueInfo with totals maintained incrementally, and publishes an immutable Snapshot per cycle.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/gpu_request.h"
#include "tessera/api/result.h"
#include "tessera/api/shard.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/cache/snapshot.h"

namespace tessera::cache {

struct CacheOptions {
  std::string schedulerName = "tessera";
  /// An assumed bind not confirmed by the watch within this time is forgotten (counted).
  api::Duration assumeTtl{60'000};
  /// Page size of the initial list and of relists (0: one request).
  int64_t listPageSize = 500;
  /// Called (on the watch's thread, possibly under the client's locks: only notify) after any
  /// event was queued, so a daemon can start a cycle early. Optional.
  std::function<void()> onEvent;
  /// Delay before retrying a failed relist (doubled up to 30 s).
  api::Duration relistRetry{500};
  /// The cluster's isolation backend (`tessera run --isolation`). Hard: fractional pods under hard
  /// isolation that the webhook did not wire stay pending with a reason. Unset: not checked.
  api::Isolation isolation = api::Isolation::Unset;
  /// Sizes of GPU shares that do not give them (config gpuSharing.defaultMemory / defaultCores).
  api::GpuShareDefaults gpuDefaults;
  /// The node pool this cache schedules (`tessera run --shard`, docs/sharding.md); unsharded by
  /// default. Sharded, nodes and pods are filtered at the watch (sync.h); Queues of other pools are
  /// not held (PodGroups are: their pool routes their pods), our pods of other pools are in no
  /// job, and unbound ones without the label are left for takeMisroutedPods().
  api::ShardScope shard;
  /// Sharded: snapshot() first waits (up to 10 s) for the pods' relist after a node joined the pool,
  /// instead of leaving the node out until it is done. The simulator's choice (deterministic cycles).
  bool awaitJoins = false;
};

/// Thread-safety: watch callbacks may arrive on any thread (they only enqueue), and so may the
/// binder's reports (assume*, binding*, eviction*, forgetAssumed: queued too); every other
/// method is called from the scheduler's thread. Events are applied in arrival order at the start
/// of snapshot(), so a cycle sees a consistent state.
///
/// Relist: when a watch reports an Error event (410 Gone: its resourceVersion was compacted away,
/// or any other ERROR), a background thread (started on first need) stops that watch, lists the
/// kind again (paged) and queues a replacement; snapshot() then reconciles: listed objects are
/// upserted and objects of that kind the cache holds but the list lacks are deleted. A new watch
/// starts from the list's resourceVersion. Failed lists are retried with backoff until stop().
class Cache {
 public:
  Cache(ClusterClient& client, const api::Clock& clock, CacheOptions options = {});
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  /// Lists every kind and starts the watches. Fails if a list fails.
  api::Status start();
  /// Stops the watches.
  void stop();

  /// Applies queued events and returns the current immutable view.
  std::shared_ptr<const Snapshot> snapshot();

  /// Applies queued events and returns our unbound pods that name no PodGroup and were added or
  /// changed since the last call, plus those of `alsoKeys` ("ns/name") that still qualify: the pod
  /// grouper's work, so a pass costs nothing while no such pod changes.
  std::vector<std::shared_ptr<const api::Pod>> takeUngroupedPods(const std::vector<std::string>& alsoKeys = {});
  /// Called before start() when a pod grouper calls takeUngroupedPods before each cycle: a
  /// workload's ungrouped pod stays out of every job until it has been taken once, so no cycle
  /// schedules one pod of a gang as a group of one.
  void holdUngroupedPods(bool on);
  /// Sharded: our unbound pods without the pool label whose PodGroup (by its label, else its
  /// Queue's; with no PodGroup, the pod's queue) belongs to another pool, each once per version,
  /// with that pool: what the default shard labels so that their shard's watch sees them
  /// (docs/sharding.md).
  std::vector<std::pair<std::string, std::string>> takeMisroutedPods();

  // ---- what the binder reports (thread-safe: queued, applied by the next snapshot() in order
  // ---- with the watch events, so an outcome never overtakes the assumption it follows) ----

  /// `podKey` was bound to `node`: counted as bound until the watch confirms, or until assumeTtl
  /// passes without confirmation (then forgotten and counted in expiredAssumptions()).
  void assumeBound(const std::string& podKey, const std::string& node);
  /// A bind of `podKey` to `node` is in flight: counted as bound from the next snapshot on (so no
  /// cycle places it again), with no expiry until bindingDone() or bindingFailed().
  /// `gpuGroups`: the GPU groups a fractional pod's bind gives it (counted in its node's groups
  /// until the watch shows the pod's group labels).
  void assumeBinding(const std::string& podKey, const std::string& node,
                     const std::vector<std::string>& gpuGroups = {});
  /// The in-flight bind succeeded: the assume TTL starts now.
  void bindingDone(const std::string& podKey);
  /// The in-flight bind failed: the assumption is dropped and the pod is left out of every
  /// snapshot (in no job) until `backoffUntil`, so no cycle places it before its backoff ends.
  /// The watch showing the pod bound, or its deletion, ends the backoff early.
  void bindingFailed(const std::string& podKey, api::Time backoffUntil);
  /// `podKey` is being evicted: counted as releasing until the watch shows it terminating or gone.
  void assumeEvicted(const std::string& podKey);
  /// The eviction failed: the pod counts as it did before.
  void evictionFailed(const std::string& podKey);
  /// Forgets every assumption about the pod.
  void forgetAssumed(const std::string& podKey);
  /// Assumed binds that expired without confirmation since start. Thread-safe.
  uint64_t expiredAssumptions() const;
  /// True once start() has listed every kind (the daemon's /readyz).
  bool synced() const;
  /// Relists done after watch errors since start (a metric). Thread-safe.
  uint64_t relists() const;

  /// Test hook: apply one event directly (as if it arrived on the watch of `kind`).
  void applyEvent(api::Kind kind, const WatchEvent& event);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::cache
