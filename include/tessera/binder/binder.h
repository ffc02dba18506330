#pragma once
/// The binder makes a session's decisions real through the ClusterClient: evictions (a
/// DisruptionTarget condition, then DELETE), binds (POST pods/binding), and what users read:
/// the PodScheduled condition and deduplicated core/v1 Events on pods and PodGroups.
///
/// Nothing of that runs on the scheduling thread. apply() only records the decisions in the cache
/// as assumptions (so the next cycle neither places a pod whose bind is in flight nor counts the
/// resources of a pod being evicted as free) and queues the work:
///  - binds and evictions go to a pool of `workers` threads (bounded concurrency; a slow preBind
///    holds one worker, not the cycle). An apply's binds start once its evictions are done.
///    Outcomes go back to the cache (bindingDone / bindingFailed / evictionFailed); the watch then
///    confirms, or the assumption expires (Cache::assumeTtl).
///  - a bind whose preBind is not ready (a GPU reservation pod that has not reported its GPU UUID:
///    PreBindOutcome::retryAfter) is parked: it holds no worker while it waits, and goes back to
///    the end of the queue once its retryAfter has passed, so other binds and evictions keep
///    flowing past it (issue 18, item 8). It stays in flight (its pod assumed bound) until preBind
///    finishes, which a preBind's own timeout bounds; fencing is checked again at each retry.
///  - a pod whose bind fails is left out of the snapshots for a per-pod exponential backoff
///    (backoffInitial, doubled per consecutive failure up to backoffMax), so a pod that keeps
///    failing cannot take the room of the others cycle after cycle.
///  - what users read (PodScheduled=False on the pods left pending, Events of binds, evictions and
///    unschedulable PodGroups) goes to the StatusWriter (status_writer.h): its one queue
///    coalesces and deduplicates, and its thread (or drain()) writes. Before a pod is bound its
///    pending condition is settled, so a stale PodScheduled=False cannot land after the bind.
/// waitIdle() waits until everything queued so far is done, parked binds and status writes
/// included (the simulator calls it at the end of every cycle, so a cycle's work completes within
/// the cycle).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/binder/pre_bind.h"
#include "tessera/binder/status_writer.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/framework/scheduler.h"

namespace tessera::binder {

/// Runs on a binder thread once every bind and eviction of that apply() is done (GPU reservation
/// garbage collection). Calls are never concurrent with each other and come in apply order; binds
/// of later applies may be in flight meanwhile.
using AfterApplyFn = std::function<void(const framework::SessionResult&)>;

/// Outcome of one bind or eviction, for timelines and metrics.
struct BindRecord {
  enum class Kind { Bind, Evict };
  Kind kind = Kind::Bind;
  std::string podKey, node;
  bool ok = true;
  std::string error;
  double seconds = 0;  ///< wall time of the requests (preBind included, time parked too)
};

struct BinderOptions {
  PreBindFn preBind;        ///< optional; called before each bind that has GPU assignments (pre_bind.h)
  AfterApplyFn afterApply;  ///< optional
  int workers = 16;         ///< binds and evictions in flight at most (>= 1)
  api::Duration backoffInitial{1000};  ///< first backoff of a pod whose bind failed
  api::Duration backoffMax{60'000};    ///< cap of the doubling
  /// Called on a binder thread after each bind or eviction (metrics). Optional; must be thread-safe.
  std::function<void(const BindRecord&)> onRecord;
  /// Fencing (leader election): the current leadership epoch, 0 when not leading. A batch carries
  /// the epoch of the cycle that decided it; each eviction and bind (GPU preparation included) is
  /// dropped unsent, reported failed to the cache, when the epoch no longer matches right before it
  /// would write. Null: never fenced. Must be thread-safe.
  std::function<uint64_t()> leaderEpoch;
};

/// Counts of writes fencing dropped (Binder::droppedByFencing).
struct FencingDrops {
  uint64_t binds = 0, evictions = 0;
};

class Binder final : public framework::CommitSink {
 public:
  /// Status writes go to `status`, which must outlive the binder (it is shared with whoever calls
  /// StatusWriter::update(): the daemon and the simulator, through app::Pipeline).
  Binder(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, StatusWriter& status,
         BinderOptions options = {});
  /// A binder with a status writer of its own (default options, background thread): for tests and
  /// tools that write no desired state.
  Binder(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, BinderOptions options = {});
  /// Waits for the work queued so far (parked binds included: they finish, or are dropped by
  /// fencing at their next retry), then stops the threads. Status writes still queued stay with
  /// the status writer (its destructor decides what happens to them).
  ~Binder() override;
  Binder(const Binder&) = delete;
  Binder& operator=(const Binder&) = delete;

  /// Queues the result's evictions, binds and status writes; returns without waiting for them.
  /// Called from the scheduling thread.
  void apply(const framework::SessionResult& result, const cache::Snapshot& snapshot) override;

  /// Blocks until every bind (parked ones included), eviction, afterApply and status write queued
  /// so far is done.
  void waitIdle();

  /// Records of the last apply(), in its order (evictions first, then binds). Complete only after
  /// waitIdle(); read it from the thread that calls apply().
  const std::vector<BindRecord>& lastRecords() const;

  /// Binds and evictions queued, running or parked now (status writes waiting:
  /// StatusWriter::backlog()).
  size_t inFlight() const;
  /// Of those, binds parked until their preBind is ready (waiting for a GPU UUID), counted from
  /// their first parking until they are done (while one is being looked at again too).
  size_t parked() const;
  /// Binds and evictions dropped unsent because leadership was lost (BinderOptions::leaderEpoch).
  FencingDrops droppedByFencing() const;
  /// Pods whose last bind failed and that are still backing off (at `now`).
  size_t backingOff() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::binder
