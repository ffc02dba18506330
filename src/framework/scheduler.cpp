#include "tessera/framework/scheduler.h"

#include <chrono>

namespace tessera::framework {

namespace {
double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

SessionResult Scheduler::runCycle(CycleStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  auto snapshot = cache_.snapshot();
  const double snapMs = msSince(t0);

  const auto t1 = std::chrono::steady_clock::now();
  Session session(snapshot, config_, clock_, &state_);
  session.open();
  const double openMs = msSince(t1);

  const auto t2 = std::chrono::steady_clock::now();
  session.runActions();
  SessionResult result = session.close();
  const double actionsMs = msSince(t2);

  const auto t3 = std::chrono::steady_clock::now();
  sink_.apply(result, *snapshot);
  const double commitMs = msSince(t3);

  ++cycles_;
  if (stats) {
    stats->cycle = cycles_;
    stats->snapshotMs = snapMs;
    stats->sessionOpenMs = openMs;
    stats->actionsMs = actionsMs;
    stats->commitMs = commitMs;
    stats->totalMs = msSince(t0);
    stats->binds = result.binds.size();
    stats->evictions = result.evictions.size();
    stats->pipelined = result.pipelined.size();
    stats->pendingJobs = result.jobs.size();
  }
  return result;
}

}  // namespace tessera::framework
