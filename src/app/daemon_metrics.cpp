#include "daemon_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "tessera/api/version.h"
#include "tessera/framework/action.h"
#include "tessera/framework/plugin.h"

namespace tessera::app {

namespace {

const prometheus::Histogram::BucketBoundaries& buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                            0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  return b;
}

/// Times an action's execute() into tessera_action_duration_seconds (one clock read per action).
class TimedAction final : public framework::Action {
 public:
  TimedAction(std::shared_ptr<framework::Action> inner, prometheus::Histogram& h) : inner_(std::move(inner)), h_(h) {}
  const std::string& name() const override { return inner_->name(); }
  void execute(framework::Session& s) override {
    const auto t0 = std::chrono::steady_clock::now();
    inner_->execute(s);
    h_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

 private:
  std::shared_ptr<framework::Action> inner_;
  prometheus::Histogram& h_;
};

/// Times a plugin's session open and close. The callbacks it registers (predicates, scores...) run
/// inside the actions and are not timed one by one: that would cost more than they do.
class TimedPlugin final : public framework::Plugin {
 public:
  TimedPlugin(std::shared_ptr<framework::Plugin> inner, prometheus::Histogram& open, prometheus::Histogram& close)
      : inner_(std::move(inner)), open_(open), close_(close) {}
  const std::string& name() const override { return inner_->name(); }
  void onSessionOpen(framework::Session& s) override {
    const auto t0 = std::chrono::steady_clock::now();
    inner_->onSessionOpen(s);
    open_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  void onSessionClose(framework::Session& s) override {
    const auto t0 = std::chrono::steady_clock::now();
    inner_->onSessionClose(s);
    close_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

 private:
  std::shared_ptr<framework::Plugin> inner_;
  prometheus::Histogram& open_;
  prometheus::Histogram& close_;
};

/// Moves `counter` up to `total`, a running count read from the pipeline; `seen` is the total it
/// was moved to last.
void advance(prometheus::Counter& counter, uint64_t total, uint64_t& seen) {
  if (total <= seen) return;
  counter.Increment(static_cast<double>(total - seen));
  seen = total;
}

}  // namespace

/// The metric families, registered once (left unformatted: one family per statement reads best).
// clang-format off
struct DaemonMetrics::Families {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Histogram>& cycle = prometheus::BuildHistogram()
      .Name("tessera_cycle_duration_seconds").Help("Scheduling cycle duration, by phase (snapshot, open, actions, commit, total)")
      .Register(*registry);
  prometheus::Family<prometheus::Gauge>& pending = prometheus::BuildGauge()
      .Name("tessera_pending_pods").Help("Pods left pending or pipelined by the last cycle, by queue").Register(*registry);
  prometheus::Family<prometheus::Counter>& binds = prometheus::BuildCounter()
      .Name("tessera_binds_total").Help("Bind requests by result").Register(*registry);
  prometheus::Family<prometheus::Counter>& evictions = prometheus::BuildCounter()
      .Name("tessera_evictions_total").Help("Evictions by result").Register(*registry);
  prometheus::Family<prometheus::Counter>& relists = prometheus::BuildCounter()
      .Name("tessera_watch_restarts_total").Help("Relists after a watch error (410 Gone)").Register(*registry);
  prometheus::Family<prometheus::Counter>& expired = prometheus::BuildCounter()
      .Name("tessera_assumed_binds_expired_total").Help("Assumed binds the watch never confirmed").Register(*registry);
  prometheus::Family<prometheus::Histogram>& api = prometheus::BuildHistogram()
      .Name("tessera_api_request_duration_seconds").Help("API server request latency by verb and HTTP code (0: transport error)")
      .Register(*registry);
  prometheus::Family<prometheus::Gauge>& leader = prometheus::BuildGauge()
      .Name("tessera_leader").Help("1 while this replica holds the Lease and schedules").Register(*registry);
  prometheus::Family<prometheus::Histogram>& action = prometheus::BuildHistogram()
      .Name("tessera_action_duration_seconds").Help("Time in each action of a cycle").Register(*registry);
  prometheus::Family<prometheus::Histogram>& plugin = prometheus::BuildHistogram()
      .Name("tessera_plugin_duration_seconds")
      .Help("Time in each plugin's session open and close (extension_point = open, close)").Register(*registry);
  prometheus::Family<prometheus::Histogram>& bindLatency = prometheus::BuildHistogram()
      .Name("tessera_bind_duration_seconds").Help("One bind (preBind + POST binding) or eviction (DisruptionTarget + DELETE), by kind")
      .Register(*registry);
  prometheus::Family<prometheus::Gauge>& binder = prometheus::BuildGauge()
      .Name("tessera_binder_queue").Help("Binder work now: in_flight binds and evictions, of which parked binds waiting for a GPU UUID, status writes waiting, pods in bind backoff")
      .Register(*registry);
  prometheus::Family<prometheus::Counter>& fenced = prometheus::BuildCounter()
      .Name("tessera_writes_dropped_total")
      .Help("Writes dropped unsent because leadership was lost (fencing), by what = bind, evict, status").Register(*registry);
  prometheus::Family<prometheus::Counter>& eventsDropped = prometheus::BuildCounter()
      .Name("tessera_events_dropped_total")
      .Help("Events not written because the status writer's Event backlog was full (best effort, as client-go's recorder)")
      .Register(*registry);
  prometheus::Family<prometheus::Gauge>& build = prometheus::BuildGauge()
      .Name("tessera_build_info").Help("Always 1; the labels say which build runs").Register(*registry);
  prometheus::Family<prometheus::Counter>& cpu = prometheus::BuildCounter()
      .Name("process_cpu_seconds_total").Help("User and system CPU time spent, in seconds").Register(*registry);
  prometheus::Family<prometheus::Gauge>& rss = prometheus::BuildGauge()
      .Name("process_resident_memory_bytes").Help("Resident memory size in bytes").Register(*registry);
  prometheus::Family<prometheus::Gauge>& fds = prometheus::BuildGauge()
      .Name("process_open_fds").Help("Open file descriptors").Register(*registry);
  prometheus::Family<prometheus::Gauge>& maxFds = prometheus::BuildGauge()
      .Name("process_max_fds").Help("Limit of open file descriptors").Register(*registry);
  prometheus::Family<prometheus::Gauge>& start = prometheus::BuildGauge()
      .Name("process_start_time_seconds").Help("Start time of the process since the Unix epoch, in seconds").Register(*registry);

  /// tessera_api_request_duration_seconds' series met so far, by verb and code (a handful). Found
  /// here, not through Family::Add, which builds a histogram (and its buckets) on every call before
  /// it looks the labels up: ~1.5% of a busy daemon's CPU, at one call per request.
  struct ApiSeries {
    std::string verb;
    int code;
    prometheus::Histogram* histogram;
  };
  std::mutex apiMu;
  std::vector<ApiSeries> apiSeries;
};
// clang-format on

DaemonMetrics::DaemonMetrics() : f_(std::make_unique<Families>()) {
  // Every series with a fixed set of labels exists from the start, at zero: a dashboard or an alert
  // sees 0, not "no data" (docs/operations.md lists them; a test compares the names).
  auto& b = buckets();
  for (const char* phase : {"snapshot", "open", "actions", "commit", "total"}) f_->cycle.Add({{"phase", phase}}, b);
  for (const char* result : {"ok", "error"}) {
    f_->binds.Add({{"result", result}});
    f_->evictions.Add({{"result", result}});
  }
  for (const char* kind : {"bind", "evict"}) f_->bindLatency.Add({{"kind", kind}}, b);
  for (const char* what : {"in_flight", "parked", "status_backlog", "backoff"}) f_->binder.Add({{"what", what}});
  for (const char* what : {"bind", "evict", "status"}) f_->fenced.Add({{"what", what}});
  f_->eventsDropped.Add({});
  f_->relists.Add({});
  f_->expired.Add({});
  f_->leader.Add({}).Set(0);
  f_->build.Add({{"version", std::string(api::buildVersion())}, {"commit", std::string(api::buildCommit())}}).Set(1);
  f_->start.Add({}).Set(processStartSeconds());
  sampleProcess();
}

/// process_* from /proc/self, sampled at each scrape.
void DaemonMetrics::sampleProcess() const {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');  // the command name may hold spaces
  std::istringstream rest(close == std::string::npos ? std::string() : line.substr(close + 2));
  std::vector<std::string> fields{std::istream_iterator<std::string>(rest), std::istream_iterator<std::string>()};
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  // After ")": state is field 3 of stat(5); utime 14, stime 15, rss 24 -> indexes 11, 12, 21 here.
  if (fields.size() > 21 && tick > 0) {
    const double cpu = (std::stod(fields[11]) + std::stod(fields[12])) / tick;
    auto& c = f_->cpu.Add({});
    if (cpu > c.Value()) c.Increment(cpu - c.Value());
    f_->rss.Add({}).Set(std::stod(fields[21]) * page);
  }
  size_t open = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++open;
  f_->fds.Add({}).Set(static_cast<double>(open));
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) f_->maxFds.Add({}).Set(static_cast<double>(lim.rlim_cur));
}

/// The process's start time: boot time (/proc/stat btime) + its start in clock ticks after boot.
double DaemonMetrics::processStartSeconds() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  std::istringstream rest(close == std::string::npos ? std::string() : line.substr(close + 2));
  std::vector<std::string> fields{std::istream_iterator<std::string>(rest), std::istream_iterator<std::string>()};
  std::ifstream procStat("/proc/stat");
  double btime = 0;
  for (std::string key; procStat >> key;) {
    if (key == "btime") {
      procStat >> btime;
      break;
    }
    std::getline(procStat, key);
  }
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  if (fields.size() <= 19 || tick <= 0 || btime <= 0) return 0;
  return btime + std::stod(fields[19]) / tick;  // starttime, field 22 of stat(5)
}

DaemonMetrics::~DaemonMetrics() = default;

void DaemonMetrics::instrument(framework::Config& config) {
  auto& b = buckets();
  for (auto& a : config.actions) a = std::make_shared<TimedAction>(a, f_->action.Add({{"action", a->name()}}, b));
  for (auto& p : config.plugins)
    p = std::make_shared<TimedPlugin>(p, f_->plugin.Add({{"plugin", p->name()}, {"extension_point", "open"}}, b),
                                      f_->plugin.Add({{"plugin", p->name()}, {"extension_point", "close"}}, b));
}

void DaemonMetrics::apiRequest(const std::string& verb, int code, double seconds) {
  prometheus::Histogram* histogram = nullptr;
  {
    std::lock_guard lock(f_->apiMu);
    for (const auto& s : f_->apiSeries)
      if (s.code == code && s.verb == verb) {
        histogram = s.histogram;
        break;
      }
    if (!histogram) {
      histogram = &f_->api.Add({{"verb", verb}, {"code", std::to_string(code)}}, buckets());
      f_->apiSeries.push_back({verb, code, histogram});
    }
  }
  histogram->Observe(seconds);  // thread-safe on its own
}

std::function<void(const binder::BindRecord&)> DaemonMetrics::bindRecorder() {
  auto& b = buckets();
  auto* bindOk = &f_->binds.Add({{"result", "ok"}});
  auto* bindErr = &f_->binds.Add({{"result", "error"}});
  auto* evictOk = &f_->evictions.Add({{"result", "ok"}});
  auto* evictErr = &f_->evictions.Add({{"result", "error"}});
  auto* bindTime = &f_->bindLatency.Add({{"kind", "bind"}}, b);
  auto* evictTime = &f_->bindLatency.Add({{"kind", "evict"}}, b);
  return [=](const binder::BindRecord& rec) {
    const bool bind = rec.kind == binder::BindRecord::Kind::Bind;
    (bind ? (rec.ok ? bindOk : bindErr) : (rec.ok ? evictOk : evictErr))->Increment();
    (bind ? bindTime : evictTime)->Observe(rec.seconds);
  };
}

void DaemonMetrics::setLeader(bool leading) { f_->leader.Add({}).Set(leading ? 1 : 0); }

void DaemonMetrics::afterCycle(const framework::CycleStats& stats, const framework::SessionResult& result,
                               Pipeline& pipeline) {
  auto& b = buckets();
  f_->cycle.Add({{"phase", "snapshot"}}, b).Observe(stats.snapshotMs / 1000);
  f_->cycle.Add({{"phase", "open"}}, b).Observe(stats.sessionOpenMs / 1000);
  f_->cycle.Add({{"phase", "actions"}}, b).Observe(stats.actionsMs / 1000);
  f_->cycle.Add({{"phase", "commit"}}, b).Observe(stats.commitMs / 1000);
  f_->cycle.Add({{"phase", "total"}}, b).Observe(stats.totalMs / 1000);
  std::map<std::string, double> byQueue;
  for (const auto& q : pendingQueues_) byQueue[q] = 0;  // queues that drained go back to 0
  for (const auto& p : result.pods) byQueue[result.jobs[p.jobStatus].job->queue] += 1;
  pendingQueues_.clear();
  for (const auto& [q, n] : byQueue) {
    f_->pending.Add({{"queue", q}}).Set(n);
    if (n > 0) pendingQueues_.push_back(q);
  }
  f_->binder.Add({{"what", "in_flight"}}).Set(static_cast<double>(pipeline.binder().inFlight()));
  f_->binder.Add({{"what", "parked"}}).Set(static_cast<double>(pipeline.binder().parked()));
  f_->binder.Add({{"what", "status_backlog"}}).Set(static_cast<double>(pipeline.status().backlog()));
  f_->binder.Add({{"what", "backoff"}}).Set(static_cast<double>(pipeline.binder().backingOff()));
  advance(f_->relists.Add({}), pipeline.cache().relists(), relistsSeen_);
  advance(f_->expired.Add({}), pipeline.cache().expiredAssumptions(), expiredSeen_);
}

void DaemonMetrics::observe(Pipeline* pipeline) {
  std::lock_guard lock(sampleMu_);
  pipeline_ = pipeline;
}

/// Writes dropped by fencing and Events dropped past the status writer's backlog: sampled at each
/// scrape, since an ex-leader runs no cycles.
void DaemonMetrics::sampleDrops() const {
  std::lock_guard lock(sampleMu_);
  Pipeline* p = pipeline_;
  if (!p) return;
  const binder::FencingDrops drops = p->binder().droppedByFencing();
  advance(f_->fenced.Add({{"what", "bind"}}), drops.binds, droppedBindsSeen_);
  advance(f_->fenced.Add({{"what", "evict"}}), drops.evictions, droppedEvictionsSeen_);
  const binder::StatusWriterStats status = p->status().stats();
  advance(f_->fenced.Add({{"what", "status"}}), status.dropped, droppedStatusSeen_);
  advance(f_->eventsDropped.Add({}), status.eventsDropped, droppedEventsSeen_);
}

std::string DaemonMetrics::text() const {
  sampleProcess();
  sampleDrops();
  std::ostringstream os;
  prometheus::TextSerializer().Serialize(os, f_->registry->Collect());
  return os.str();
}

}  // namespace tessera::app
