// timeaware: time-aware fairness without Prometheus. Each cycle it samples what each queue holds
// (subtree totals) into the usage history (framework/state.h), which lives in the scheduler's
// state, not in this object: a config reload, which rebuilds plugins, keeps it, and the pipeline
// saves it to a ConfigMap every `saveInterval` and restores it at start, so a restart keeps it too.
// From the history it takes the last `windowSize` (decayed with `halfLife` when set), normalized by
// the cluster's capacity over the same window, and publishes the usage U_i on the session; the
// proportion plugin turns it into over-quota weights s_i = max(0, w_i + k (w_i - U_i)). Off unless
// `enabled: true`. What leaves the plugin is rounded to integer millionths, so the division and
// every ordering decision stay in integers.
#include <cmath>
#include <set>
#include <string>

#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

using Amounts = framework::UsageHistory::Amounts;
using Sample = framework::UsageHistory::Sample;

struct TimeAwareArgs {
  bool enabled = false;
  api::Duration window{3'600'000};
  api::Duration halfLife{0};
  int64_t kMilli = 1000;
  api::Duration saveInterval{60'000};  ///< 0: never saved
};

class TimeAwarePlugin final : public framework::Plugin {
 public:
  explicit TimeAwarePlugin(TimeAwareArgs args) : args_(args) {}
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    if (!args_.enabled) return;
    const api::Time now = ssn.now();
    framework::SchedulerState& state = ssn.state();
    state.usage.record(sample(ssn, now), args_.window);
    framework::Session::QueueUsage usage;
    usage.kMilli = args_.kMilli;
    for (const auto& [q, u] : state.usage.usage(now, args_.window, args_.halfLife)) {
      std::array<int64_t, 3> ppm{0, 0, 0};
      for (int r = 0; r < 3; ++r) ppm[r] = static_cast<int64_t>(std::llround(u[r] * 1e6));
      usage.usagePpm[q] = ppm;
    }
    ssn.setQueueUsage(std::move(usage));
    // Throttled: the pipeline writes the history at most once per saveInterval.
    if (args_.saveInterval.millis > 0 && now - state.usageSavedAt >= args_.saveInterval) {
      state.usageSaveDue = true;
      state.usageSavedAt = now;
    }
  }

 private:
  static Sample sample(const framework::Session& ssn, api::Time now) {
    Sample s;
    s.at = now;
    for (const auto& n : ssn.nodes()) {
      if (!n.node().ready) continue;
      const api::Resources free = n.info->allocatable - n.info->foreignUsed;
      s.capacity[0] += std::max<int64_t>(0, free.milliGpu);
      s.capacity[1] += std::max<int64_t>(0, free.milliCpu);
      s.capacity[2] += std::max<int64_t>(0, free.memory);
    }
    for (const auto& q : ssn.queues()) {
      if (q.info->allocated.isZero()) continue;
      const Amounts a{q.info->allocated.milliGpu, q.info->allocated.milliCpu, q.info->allocated.memory};
      // The queue and its ancestors (guarding against parent cycles).
      std::set<std::string> seen;
      for (const framework::SessionQueue* cur = &q; cur && seen.insert(cur->name).second;) {
        auto& h = s.held[cur->name];
        for (int r = 0; r < 3; ++r) h[r] += a[r];
        const int p = cur->queue && !cur->queue->parentQueue.empty() ? ssn.findQueue(cur->queue->parentQueue) : -1;
        cur = p >= 0 ? &ssn.queues()[p] : nullptr;
      }
    }
    return s;
  }

  std::string name_ = "timeaware";
  TimeAwareArgs args_;
};

}  // namespace

PluginResult makeTimeAware(framework::Args& args) {
  TimeAwareArgs a;
  a.enabled = args.getBool("enabled", false);
  a.window = args.getDuration("windowSize", a.window);
  a.halfLife = args.getDuration("halfLife", a.halfLife);
  a.kMilli = args.getMilli("kValue", 1000, 0, 1'000'000);
  a.saveInterval = args.getDuration("saveInterval", a.saveInterval);
  if (a.window.millis <= 0) return api::makeError("config.plugins.timeaware.windowSize: must be positive");
  if (a.saveInterval.millis < 0) return api::makeError("config.plugins.timeaware.saveInterval: must not be negative");
  return std::shared_ptr<framework::Plugin>(std::make_shared<TimeAwarePlugin>(a));
}

}  // namespace tessera::plugins
