#pragma once
/// One scheduling cycle end to end: snapshot -> session (plugins, actions) -> commit to the binder
/// -> pending reasons to the status writer.
#include <cstdint>
#include <memory>

#include "tessera/api/clock.h"
#include "tessera/cache/cache.h"
#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "tessera/framework/state.h"

namespace tessera::framework {

/// Receives a session's decisions. Implemented by the binder (src/binder).
class CommitSink {
 public:
  virtual ~CommitSink() = default;
  /// Makes the decisions real (evictions, binds) and publishes pending reasons.
  virtual void apply(const SessionResult& result, const cache::Snapshot& snapshot) = 0;
};

struct CycleStats {
  uint64_t cycle = 0;
  double snapshotMs = 0, sessionOpenMs = 0, actionsMs = 0, commitMs = 0, totalMs = 0;
  size_t binds = 0, evictions = 0, pipelined = 0, pendingJobs = 0;
};

class Scheduler {
 public:
  Scheduler(cache::Cache& cache, const Config& config, const api::Clock& clock, CommitSink& sink)
      : cache_(cache), config_(config), clock_(clock), sink_(sink) {}

  /// Runs one cycle; returns what it decided.
  SessionResult runCycle(CycleStats* stats = nullptr);

  /// What the sessions remember across cycles (state.h): the scheduler's, not the config's, so a
  /// config reload keeps it. Scheduler thread only.
  SchedulerState& state() { return state_; }

 private:
  cache::Cache& cache_;
  const Config& config_;
  const api::Clock& clock_;
  CommitSink& sink_;
  uint64_t cycles_ = 0;
  SchedulerState state_;
};

}  // namespace tessera::framework
