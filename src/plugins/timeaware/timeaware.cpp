// timeaware: time-aware fairness without Prometheus. The plugin object lives across sessions and
// keeps, per queue (subtree totals), what it held over time: a piecewise-constant history sampled
// at every cycle. Each cycle it integrates the last `windowSize` (decayed with `halfLife` when set),
// normalizes by the cluster's capacity over the same window, and publishes the usage U_i on the
// session; the proportion plugin turns it into over-quota weights s_i = max(0, w_i + k (w_i - U_i)).
// Off unless `enabled: true`. The history is in memory: a restart starts it afresh (persisting it in
// a ConfigMap is still to do). The integrals use doubles (time x amount overflows nothing there, and
// the half-life decay is exponential); what leaves the plugin is rounded to integer millionths, so
// the division and every ordering decision stay in integers.
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <string>

#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

using Amounts = std::array<int64_t, 3>;

struct TimeAwareArgs {
  bool enabled = false;
  api::Duration window{3'600'000};
  api::Duration halfLife{0};
  int64_t kMilli = 1000;
};

struct Sample {
  api::Time at;
  std::map<std::string, Amounts> held;  ///< per queue, subtree totals
  Amounts capacity{0, 0, 0};
};

class TimeAwarePlugin final : public framework::Plugin {
 public:
  explicit TimeAwarePlugin(TimeAwareArgs args) : args_(args) {}
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    if (!args_.enabled) return;
    const api::Time now = ssn.now();
    Sample current = sample(ssn, now);
    framework::Session::QueueUsage usage;
    usage.kMilli = args_.kMilli;
    const api::Time from{now.unixMillis - args_.window.millis};
    std::map<std::string, std::array<double, 3>> used;
    std::array<double, 3> capacity{0, 0, 0};
    for (size_t i = 0; i < history_.size(); ++i) {
      const api::Time start = std::max(history_[i].at, from);
      const api::Time end = i + 1 < history_.size() ? history_[i + 1].at : now;
      if (end <= start) continue;
      const double dt = static_cast<double>(end.unixMillis - start.unixMillis);
      double weight = 1.0;
      if (args_.halfLife.millis > 0) {
        const double mid = (static_cast<double>(start.unixMillis) + static_cast<double>(end.unixMillis)) / 2;
        weight = std::exp2(-(static_cast<double>(now.unixMillis) - mid) / static_cast<double>(args_.halfLife.millis));
      }
      for (int r = 0; r < 3; ++r) capacity[r] += static_cast<double>(history_[i].capacity[r]) * dt * weight;
      for (const auto& [q, a] : history_[i].held)
        for (int r = 0; r < 3; ++r) used[q][r] += static_cast<double>(a[r]) * dt * weight;
    }
    for (const auto& [q, u] : used) {
      std::array<int64_t, 3> ppm{0, 0, 0};
      for (int r = 0; r < 3; ++r)
        if (capacity[r] > 0) ppm[r] = static_cast<int64_t>(std::llround(u[r] / capacity[r] * 1e6));
      usage.usagePpm[q] = ppm;
    }
    ssn.setQueueUsage(std::move(usage));
    // Keep what the next window still needs: the last sample before it starts, and the rest.
    history_.push_back(std::move(current));
    const api::Time nextFrom{now.unixMillis - args_.window.millis};
    while (history_.size() > 1 && history_[1].at <= nextFrom) history_.pop_front();
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
  std::deque<Sample> history_;
};

}  // namespace

PluginResult makeTimeAware(framework::Args& args) {
  TimeAwareArgs a;
  a.enabled = args.getBool("enabled", false);
  a.window = args.getDuration("windowSize", a.window);
  a.halfLife = args.getDuration("halfLife", a.halfLife);
  a.kMilli = args.getMilli("kValue", 1000, 0, 1'000'000);
  if (a.window.millis <= 0) return api::makeError("config.plugins.timeaware.windowSize: must be positive");
  return std::shared_ptr<framework::Plugin>(std::make_shared<TimeAwarePlugin>(a));
}

}  // namespace tessera::plugins
