#pragma once
/// The status writer publishes what the scheduler knows onto the objects users look at:
///  - PodGroup status (status subresource): phase, pod counts, conditions `Valid` and `Unschedulable`;
///  - Queue status (status subresource): allocated, requested, fairShare, condition `Valid`;
///  - the reasons of objects that are wrong: conversion errors (Snapshot::conversionErrors) and
///    validation problems (Snapshot::invalid) become `Valid=False` (reason `InvalidSpec`) on Queues and
///    PodGroups, `PodScheduled=False` (reason `InvalidSpec`) on our unbound pods, and a Warning event
///    (reason `InvalidSpec`) on the object (nodes: the event only).
/// Pods of a valid spec keep their PodScheduled condition from the binder. Names: docs/troubleshooting.md.
///
/// Writes never block a cycle: update() computes the desired state in memory and queues only what
/// changed since the last write (deduplicated by content, timestamps aside); a background thread
/// writes the queue, coalescing several updates of one object into one write. drain() writes what is
/// queued on the calling thread (the simulator writes status within the cycle).
/// Thread-safety: update() and drain() from one thread (the scheduler's); the writer thread is internal.
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/api/clock.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/cache/snapshot.h"
#include "tessera/framework/session.h"

namespace tessera::binder {

struct StatusWriterOptions {
  std::string component = "tessera";      ///< Event source.component
  std::string schedulerName = "tessera";  ///< only our pods get a PodScheduled condition
  bool writeEvents = true;
  /// true: a background thread writes as soon as work is queued (the daemon); false: writes happen
  /// only in drain() (the simulator, deterministic).
  bool background = true;
};

/// Counters, for metrics and tests.
struct StatusWriterStats {
  uint64_t queued = 0;     ///< writes queued (after deduplication)
  uint64_t coalesced = 0;  ///< queued writes replaced by a newer one before they were written
  uint64_t written = 0;    ///< successful writes
  uint64_t failed = 0;     ///< failed writes (retried when the next update still wants them)
};

class StatusWriter {
 public:
  StatusWriter(cache::ClusterClient& client, const api::Clock& clock, StatusWriterOptions options = {});
  /// Stops the writer thread; what is still queued is dropped (the next leader rewrites it).
  ~StatusWriter();
  StatusWriter(const StatusWriter&) = delete;
  StatusWriter& operator=(const StatusWriter&) = delete;

  /// Computes the desired status of every PodGroup (of a job in the snapshot) and every Queue of
  /// the result, plus the reasons of invalid objects, and queues what changed. O(jobs + queues +
  /// problems) in memory; no API call.
  void update(const framework::SessionResult& result, const cache::Snapshot& snapshot);

  /// Writes everything queued, on the calling thread, and returns once it is written.
  void drain();

  StatusWriterStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::binder
