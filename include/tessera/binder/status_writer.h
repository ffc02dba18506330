#pragma once
/// The status writer: the one path by which what the scheduler knows reaches the objects users look
/// at. Two producers feed it:
///  - update(), each cycle, from the snapshot and the session result (the desired state):
///    - PodGroup status (status subresource): phase, pod counts, conditions `Valid` and `Unschedulable`;
///    - Queue status (status subresource): allocated, requested, fairShare, condition `Valid`;
///    - the reasons of objects that are wrong: conversion errors (Snapshot::conversionErrors) and
///      validation problems (Snapshot::invalid) become `Valid=False` (reason `InvalidSpec`) on Queues
///      and PodGroups, `PodScheduled=False` (reason `InvalidSpec`) on our unbound pods, and a Warning
///      event (reason `InvalidSpec`) on the object (nodes: the event only);
///    - PodGroup annotations the session asked for (SessionResult::annotations: the stale-gang
///      timer), as merge patches of metadata.annotations;
///  - the binder, as it applies a cycle's decisions: `PodScheduled=False` (reason `Unschedulable`)
///    on the pods a cycle left pending, each followed by a `FailedScheduling` event, and the events
///    of binds and evictions (Scheduled, FailedBinding, Preempted) and of PodGroups (Unschedulable).
/// Names: docs/troubleshooting.md.
///
/// Writes never block a cycle: producers queue them in memory and one writer (the background thread,
/// or the caller of drain()) writes the queue in order, one write at a time.
///  - Two lanes: the state users read (status, conditions, annotations, objects put; a condition's
///    FailedScheduling event is written with it) and Events (of decisions, of invalid objects, and
///    their count bumps). The writer takes the next state write before any Event, so a burst of
///    thousands of Events (a Scheduled event per pod bound) never holds a condition back behind
///    it. Events are best effort, as client-go's event recorder makes them: at most
///    `maxQueuedEvents` wait; one more is dropped (counted in `eventsDropped`, logged once per
///    burst) rather than written minutes late against an API server that cannot keep up.
///  - Deduplication, one rule for every write: each write has a key (the object and what about it:
///    its status, a condition, an event reason); a write whose content (timestamps aside) equals the
///    last one queued under its key is dropped. A failed write forgets its key's content, so the next
///    identical write goes through. update() forgets the keys it no longer wants (objects gone,
///    problems fixed: a problem that comes back is reported again); settle() forgets a pod's
///    condition when it is bound.
///  - Coalescing: a status or condition write replaces a queued write of the same key (only the
///    latest state is written). Events of decisions (event()) are records: each one not deduplicated
///    away is written.
///  - Event series: an event repeated (same object UID, reason and message) is not written again;
///    the Event already written gets its `count` and `lastTimestamp` bumped instead (one patch per
///    `eventSeriesInterval` at most, carrying every repetition since), as client-go's event
///    correlator does. A pod recreated under the same name (a new UID) gets its own condition and
///    Event. What the writer remembers about objects (dedup marks, series) is pruned when the
///    objects leave the snapshot.
/// Shutdown: the destructor stops after the write in progress; what is still queued is dropped (the
/// next leader rewrites the desired state).
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/kinds.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/cache/snapshot.h"
#include "tessera/framework/session.h"

namespace tessera::binder {

struct StatusWriterOptions {
  std::string component = "tessera";      ///< Event source.component
  std::string schedulerName = "tessera";  ///< only our pods get an InvalidSpec PodScheduled condition
  bool writeEvents = true;
  /// true: a background thread writes as soon as work is queued (the daemon); false: writes happen
  /// only in drain() (the simulator, deterministic).
  bool background = true;
  /// Fencing (leader election): asked right before each write; false drops the write (counted in
  /// `dropped`) so that an ex-leader writes nothing once its renew deadline passed. Null: always.
  std::function<bool()> mayWrite;
  /// A repeated event bumps its Event's count at most this often (the repetitions in between are
  /// added up).
  api::Duration eventSeriesInterval{5 * 60'000};
  /// Events (and Event count bumps) that may wait to be written; one more is dropped. 0: no bound.
  /// client-go's event broadcaster queues 1,000 (maxQueuedEvents) and drops past that; a scheduler
  /// binds thousands of pods in a second, and one writer on a healthy server keeps up with that
  /// only a few thousand Events behind: 10,000 keeps every Event of such a burst, and at ~16 ms a
  /// write (a slow server) is still under three minutes of writing.
  size_t maxQueuedEvents = 10'000;
};

/// Counters, for metrics and tests.
struct StatusWriterStats {
  uint64_t queued = 0;     ///< writes queued (after deduplication)
  uint64_t coalesced = 0;  ///< queued writes replaced by a newer one before they were written
  uint64_t written = 0;    ///< successful writes
  uint64_t failed = 0;     ///< failed writes (retried when a producer still wants them)
  uint64_t dropped = 0;    ///< writes dropped unsent because mayWrite said no (leadership lost)
  uint64_t eventsDropped = 0;  ///< Events not queued: maxQueuedEvents were waiting
};

/// A pod ("ns/name", uid) a cycle left pending, and why.
struct UnschedulablePod {
  std::string key, uid, message;
};

/// One core/v1 Event about an object (a decision of the binder).
struct EventSpec {
  api::Kind kind = api::Kind::Pod;
  std::string ns, name, uid, type, reason, message;
};

/// Thread-safety: update() from one thread (the scheduler's); drain() from any one thread at a time
/// (it waits for the background thread's write in progress); the binder's entry points
/// (podsUnschedulable, event, settle) and backlog/stats from any thread.
class StatusWriter {
 public:
  StatusWriter(cache::ClusterClient& client, const api::Clock& clock, StatusWriterOptions options = {});
  /// Stops the writer thread after the write in progress; what is still queued is dropped.
  ~StatusWriter();
  StatusWriter(const StatusWriter&) = delete;
  StatusWriter& operator=(const StatusWriter&) = delete;

  /// Computes the desired status of every PodGroup (of a job in the snapshot) and every Queue of
  /// the result, plus the reasons of invalid objects, and queues what changed. O(jobs + queues +
  /// problems) in memory; no API call.
  void update(const framework::SessionResult& result, const cache::Snapshot& snapshot);

  /// Queues `PodScheduled=False` (reason Unschedulable) with each pod's message, for pods a cycle
  /// left pending; once written, a `FailedScheduling` event follows it (deduplicated per pod UID
  /// and message; a repetition counts in the event's series). One lock for the whole list.
  void podsUnschedulable(std::vector<UnschedulablePod> pods);

  /// Queues an event unless it repeats the last one of its object and reason (no event per cycle:
  /// a repetition counts in the event's series).
  void event(EventSpec e);

  /// Queues a write of a whole object: replaced when it exists (PUT without a resourceVersion), else
  /// created (the pipeline's saved state: the usage history's ConfigMap). Coalesced per object:
  /// only the latest queued version is written. Any thread.
  void put(api::Kind kind, cache::Json object);

  /// The pod ("ns/name") is about to be bound: its queued condition is dropped and forgotten, and
  /// this waits until no condition write of it is in progress, so that a stale PodScheduled=False
  /// cannot land after the bind.
  void settle(const std::string& podKey);

  /// Writes everything queued on the calling thread (after the background thread's write in
  /// progress) and returns once the queue is empty and nothing is being written.
  void drain();

  /// Writes queued and not yet written.
  size_t backlog() const;
  /// Entries the writer remembers about objects (dedup marks and event series), for tests.
  size_t remembered() const;
  StatusWriterStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::binder
