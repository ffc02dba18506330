#pragma once
/// The built-in web UI (docs/ui.md): the state it renders (ui/STATE.md), what the daemon publishes
/// after each cycle for it, and the page itself (ui/index.html, compiled into the binary).
///
/// The scheduling thread only hands over what a cycle produced (a pointer and a few numbers):
/// the JSON is built on the UI server's threads, from the last published session result and the
/// snapshot it holds (both immutable).
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/clock.h"
#include "tessera/framework/scheduler.h"
#include "tessera/framework/session.h"

namespace tessera::app {

/// One cycle as the "cycles" view shows it.
struct UiCycle {
  framework::CycleStats stats;
  api::Time at;
  std::vector<framework::SessionResult::Evict> evictions;
};

/// Cycles the "cycles" view keeps.
inline constexpr size_t kUiCycles = 50;
/// Jobs the state lists at most: every job with pending pods, then running ones up to this many
/// (`jobsOmitted` counts the running ones left out).
inline constexpr size_t kUiJobs = 2000;

/// The state object of ui/STATE.md for the cycle `r` (null: no cycle yet), with the last cycles.
/// `source` is "daemon" or "simulate".
nlohmann::json uiStateJson(const framework::SessionResult* r, const std::deque<UiCycle>& cycles, api::Time now,
                           const std::string& source, const std::string& schedulerName);

/// What the daemon publishes for the UI after each cycle. publish() is called by the scheduling
/// thread; stateJson() by any thread.
class UiPublisher {
 public:
  explicit UiPublisher(std::string schedulerName) : schedulerName_(std::move(schedulerName)) {}
  void publish(std::shared_ptr<const framework::SessionResult> r, const framework::CycleStats& stats, api::Time now);
  /// The state of the last published cycle, built once per cycle however many pages ask.
  std::shared_ptr<const std::string> stateJson() const;

 private:
  const std::string schedulerName_;
  mutable std::mutex mu_;  ///< guards what publish() writes
  std::shared_ptr<const framework::SessionResult> last_;
  std::deque<UiCycle> cycles_;
  api::Time lastAt_;
  uint64_t published_ = 0;       ///< cycles published so far
  mutable std::mutex buildMu_;  ///< one build at a time; guards the two below
  mutable uint64_t builtGeneration_ = 0;  ///< published_ when built_ was built
  mutable std::shared_ptr<const std::string> built_;
};

/// The page of the live UI (ui/index.html): it polls api/v1/state.
std::string_view uiPage();
/// The page with a report embedded (`window.TESSERA_REPORT`, ui/STATE.md "Reports"): one
/// self-contained HTML file.
std::string uiReportPage(const nlohmann::json& report);

}  // namespace tessera::app
