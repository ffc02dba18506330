#pragma once
// The daemon's Prometheus metrics (docs/operations.md lists them), served by `tessera run`'s
// /metrics handler. prometheus-cpp stays in daemon_metrics.cpp.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/app/pipeline.h"
#include "tessera/binder/binder.h"
#include "tessera/framework/config.h"
#include "tessera/framework/scheduler.h"

namespace tessera::app {

/// Thread-safety: the recorders (apiRequest, bindRecorder's function, setLeader) may be called from
/// any thread; instrument() and afterCycle() from the scheduling thread; text() from the HTTP server.
class DaemonMetrics {
 public:
  DaemonMetrics();
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  /// Wraps the config's actions and plugins so that each action's execute() and each plugin's
  /// session open and close are timed (tessera_action_duration_seconds,
  /// tessera_plugin_duration_seconds). Called for every config loaded, reloads included.
  void instrument(framework::Config& config);

  /// One API request (the HTTP client's observer): tessera_api_request_duration_seconds.
  void apiRequest(const std::string& verb, int code, double seconds);

  /// For BinderOptions::onRecord: tessera_binds_total, tessera_evictions_total and
  /// tessera_bind_duration_seconds.
  std::function<void(const binder::BindRecord&)> bindRecorder();

  void setLeader(bool leading);

  /// After each cycle: its durations, pending pods by queue, the binder's and status writer's
  /// queues, and the cache's relists and expired assumptions since the last call.
  void afterCycle(const framework::CycleStats& stats, const framework::SessionResult& result, Pipeline& pipeline);

  /// The pipeline whose fencing drops /metrics reports (tessera_writes_dropped_total); null before
  /// it exists and after it is gone.
  void observe(Pipeline* pipeline);

  /// The text exposition format.
  std::string text() const;

 private:
  struct Families;
  void sampleProcess() const;
  void sampleDrops() const;
  static double processStartSeconds();

  std::unique_ptr<Families> f_;
  std::vector<std::string> pendingQueues_;  ///< queues with pending pods at the last cycle
  uint64_t relistsSeen_ = 0, expiredSeen_ = 0;
  mutable std::mutex sampleMu_;  ///< the scrape's samples (text() may run on several server threads)
  Pipeline* pipeline_ = nullptr;
  mutable uint64_t droppedBindsSeen_ = 0, droppedEvictionsSeen_ = 0, droppedStatusSeen_ = 0, droppedEventsSeen_ = 0;
};

}  // namespace tessera::app
