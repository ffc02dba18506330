// `tessera run`: the scheduler daemon against a real API server. Wiring only: HTTP client -> cache
// -> Pipeline (scheduler -> binder -> status writer, pipeline.h), a Lease so only one replica
// schedules, /healthz /readyz /metrics, and SIGTERM. Cycles run every schedulePeriod and early
// (debounced) when watch events arrive.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "tessera/api/flags.h"
#include "tessera/api/log.h"
#include "tessera/api/signals.h"
#include "tessera/app/config_file.h"
#include "tessera/app/leader_election.h"
#include "tessera/app/pipeline.h"
#include "tessera/app/registry.h"
#include "tessera/app/run.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/http_client.h"
#include "tessera/cache/http_server.h"
#include "tessera/framework/action.h"
#include "tessera/framework/config.h"
#include "tessera/framework/plugin.h"
#include "tessera/framework/scheduler.h"

namespace tessera::app {

namespace {

struct RunFlags {
  std::string kubeconfig, context, configFile;
  bool inCluster = false;
  std::string schedulerName;  ///< overrides the config's schedulerName when set
  double qps = 50;
  int burst = 100;
  bool leaderElect = true;
  LeaseOptions lease;
  std::string healthAddress = "0.0.0.0";
  int healthPort = 10259;
  api::Duration debounce{100};
  binder::GpuBindingOptions gpu;  ///< --reservation-image, --reservation-timeout, --evict-orphaned-gpu-pods
  int bindWorkers = 16;
  api::Duration bindBackoffInitial{1000}, bindBackoffMax{60'000};
};

const char* const kUsage =
    "usage: tessera run (--kubeconfig PATH [--context NAME] | --in-cluster) [--config FILE]\n"
    "                   [--scheduler-name NAME] [--kube-api-qps 50] [--kube-api-burst 100]\n"
    "                   [--leader-elect=true|false] [--lease-name tessera] [--lease-namespace kube-system]\n"
    "                   [--lease-duration 15s] [--renew-deadline 10s] [--retry-period 2s] [--identity ID]\n"
    "                   [--health-address 0.0.0.0] [--health-port 10259] [--debounce 100ms]\n"
    "                   [--reservation-image IMAGE (default: this pod's image)] [--reservation-timeout 60s]\n"
    "                   [--evict-orphaned-gpu-pods]\n"
    "                   [--bind-workers 16] [--bind-backoff-initial 1s] [--bind-backoff-max 60s]\n";

api::Result<RunFlags> parseFlags(const std::vector<std::string>& args) {
  RunFlags f;
  f.gpu.reservationImage.clear();  // empty: this pod's own image (ownImage)
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  f.lease.identity = std::string(host) + "_" + std::to_string(::getpid());
  api::FlagCursor flag(args);
  while (flag.next()) {
    const std::string& a = flag.name();
    auto value = [&] { return flag.value(); };
    auto duration = [&](api::Duration& out) -> api::Status {
      auto s = value();
      if (!s.ok()) return s.error();
      auto d = api::parseDuration(*s);
      if (!d.ok()) return api::makeError(a + ": " + d.error().message);
      out = *d;
      return api::Status::success();
    };
    auto number = [&](double& out) -> api::Status {
      auto s = value();
      if (!s.ok()) return s.error();
      try {
        out = std::stod(*s);
      } catch (...) {
        return api::makeError(a + ": not a number: " + *s);
      }
      return api::Status::success();
    };
    api::Status st = api::Status::success();
    double n = 0;
    if (a == "--kubeconfig") { auto s = value(); if (!s.ok()) return s.error(); f.kubeconfig = *s; }
    else if (a == "--context") { auto s = value(); if (!s.ok()) return s.error(); f.context = *s; }
    else if (a == "--config") { auto s = value(); if (!s.ok()) return s.error(); f.configFile = *s; }
    else if (a == "--in-cluster") f.inCluster = flag.boolean();
    else if (a == "--scheduler-name") { auto s = value(); if (!s.ok()) return s.error(); f.schedulerName = *s; }
    else if (a == "--kube-api-qps") { st = number(f.qps); }
    else if (a == "--kube-api-burst") { st = number(n); f.burst = static_cast<int>(n); }
    else if (a == "--leader-elect") f.leaderElect = flag.boolean();
    else if (a == "--lease-name") { auto s = value(); if (!s.ok()) return s.error(); f.lease.name = *s; }
    else if (a == "--lease-namespace") { auto s = value(); if (!s.ok()) return s.error(); f.lease.namespace_ = *s; }
    else if (a == "--lease-duration") st = duration(f.lease.leaseDuration);
    else if (a == "--renew-deadline") st = duration(f.lease.renewDeadline);
    else if (a == "--retry-period") st = duration(f.lease.retryPeriod);
    else if (a == "--identity") { auto s = value(); if (!s.ok()) return s.error(); f.lease.identity = *s; }
    else if (a == "--health-address") { auto s = value(); if (!s.ok()) return s.error(); f.healthAddress = *s; }
    else if (a == "--health-port") { st = number(n); f.healthPort = static_cast<int>(n); }
    else if (a == "--debounce") st = duration(f.debounce);
    else if (a == "--reservation-image") { auto s = value(); if (!s.ok()) return s.error(); f.gpu.reservationImage = *s; }
    else if (a == "--reservation-timeout") {
      api::Duration d;
      st = duration(d);
      f.gpu.uuidTimeout = std::chrono::milliseconds(d.millis);
    }
    else if (a == "--evict-orphaned-gpu-pods") f.gpu.evictOrphans = flag.boolean();
    else if (a == "--bind-workers") {
      st = number(n);
      if (st.ok() && (n < 1 || n > 1024)) return api::makeError("--bind-workers: must be 1..1024, got " + std::to_string(n));
      f.bindWorkers = static_cast<int>(n);
    }
    else if (a == "--bind-backoff-initial") st = duration(f.bindBackoffInitial);
    else if (a == "--bind-backoff-max") st = duration(f.bindBackoffMax);
    else return api::makeError("unknown flag " + a);
    if (!st.ok()) return st.error();
  }
  if (f.inCluster == !f.kubeconfig.empty())
    return api::makeError("exactly one of --kubeconfig PATH and --in-cluster is required");
  if (f.bindBackoffInitial.millis <= 0 || f.bindBackoffMax < f.bindBackoffInitial)
    return api::makeError("--bind-backoff-initial must be positive and at most --bind-backoff-max");
  if (f.lease.renewDeadline >= f.lease.leaseDuration)
    return api::makeError("--renew-deadline must be shorter than --lease-duration");
  return f;
}

/// The image this scheduler runs, read from its own pod (env POD_NAME / POD_NAMESPACE, the
/// downward API): GPU reservation pods run `tessera reserve` from the same image, so an upgrade of
/// the Deployment's image upgrades them too. Falls back to the built-in default.
std::string ownImage(cache::ClusterClient& client) {
  const char* name = std::getenv("POD_NAME");
  const char* ns = std::getenv("POD_NAMESPACE");
  const std::string fallback = binder::GpuBindingOptions{}.reservationImage;
  if (!name || !ns || !*name || !*ns) return fallback;
  auto pod = client.get(api::Kind::Pod, ns, name);
  if (!pod.ok() || !pod->contains("spec") || !(*pod)["spec"].contains("containers")) return fallback;
  const auto& containers = (*pod)["spec"]["containers"];
  if (!containers.is_array() || containers.empty() || !containers[0].is_object()) return fallback;
  const std::string image = containers[0].value("image", "");
  return image.empty() ? fallback : image;
}

/// The daemon's Prometheus metrics (prometheus-cpp core; served by our own /metrics handler).
struct Metrics {
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
      .Name("tessera_binder_queue").Help("Binder work now: in_flight binds and evictions, status writes waiting, pods in bind backoff")
      .Register(*registry);

  static const prometheus::Histogram::BucketBoundaries& buckets() {
    static const prometheus::Histogram::BucketBoundaries b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                              0.1,    0.25,  0.5,    1,     2.5,  5,    10};
    return b;
  }

  std::string text() const {
    std::ostringstream os;
    prometheus::TextSerializer().Serialize(os, registry->Collect());
    return os.str();
  }
};

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

/// Routes the logger to a stream while it lives; the sink before it comes back after.
class LogTo {
 public:
  explicit LogTo(std::ostream& err)
      : previous_(log::setSink([&err](log::Severity, std::string_view line) {
          err << "tessera: " << line << "\n" << std::flush;
        })) {}
  ~LogTo() { log::setSink(std::move(previous_)); }
  LogTo(const LogTo&) = delete;
  LogTo& operator=(const LogTo&) = delete;

 private:
  log::Sink previous_;
};

class Daemon {
 public:
  explicit Daemon(RunFlags flags) : flags_(std::move(flags)) {}

  int run() {
    api::blockDaemonSignals();  // before any thread starts: only the signal thread takes them
    std::thread signals([this] {
      for (;;) {
        const int sig = api::waitForDaemonSignal();
        if (sig == SIGHUP) {  // reload the config file before the next cycle
          reload_ = true;
          wake();
          continue;
        }
        if (sig > 0) log::info("signal ", sig, ": shutting down");
        requestStop();
        return;
      }
    });
    const int rc = runLoop();
    if (!stopping()) {
      // Exiting on an error: wake the signal thread with a signal of our own so it can be joined.
      requestStop();
    }
    ::kill(::getpid(), SIGTERM);
    signals.join();
    return rc;
  }

 private:
  bool stopping() {
    std::lock_guard lock(mu_);
    return stop_;
  }
  void requestStop() {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  void wake() {
    std::lock_guard lock(mu_);
    if (!woken_) {
      woken_ = true;
      cv_.notify_all();
    }
  }

  int runLoop() {
    // ---- config ----
    // A bad file refuses to start; a bad reload (SIGHUP or the file changed) keeps the old one.
    ConfigFile configFile(flags_.configFile, flags_.schedulerName);
    // Actions and plugins are timed (tessera_action_duration_seconds, tessera_plugin_duration_seconds),
    // also after a reload.
    auto instrument = [this](framework::Config& cfg) {
      auto& b = Metrics::buckets();
      for (auto& a : cfg.actions)
        a = std::make_shared<TimedAction>(a, metrics_.action.Add({{"action", a->name()}}, b));
      for (auto& p : cfg.plugins)
        p = std::make_shared<TimedPlugin>(p, metrics_.plugin.Add({{"plugin", p->name()}, {"extension_point", "open"}}, b),
                                          metrics_.plugin.Add({{"plugin", p->name()}, {"extension_point", "close"}}, b));
    };
    framework::Config config;
    {
      auto c = configFile.load();
      if (!c.ok()) return log::error("config: ", c.error().message), 1;
      config = std::move(c).value();
      instrument(config);
    }
    // ---- client ----
    auto rc = flags_.inCluster ? cache::inClusterConfig() : cache::loadKubeconfig(flags_.kubeconfig, flags_.context);
    if (!rc.ok()) return log::error(rc.error().message), 1;
    cache::HttpClientOptions co;
    co.qps = flags_.qps;
    co.burst = flags_.burst;
    co.observer = [this](const std::string& verb, int code, double seconds) {
      metrics_.api.Add({{"verb", verb}, {"code", std::to_string(code)}}, Metrics::buckets()).Observe(seconds);
    };
    auto client = cache::makeHttpClient(*rc, co);
    if (!client.ok()) return log::error(client.error().message), 1;

    // ---- health ----
    cache::HttpServer health(
        [this](const std::string&, const std::string& path) -> cache::HttpReply {
          if (path == "/healthz") return {200, "text/plain", "ok\n"};
          if (path == "/readyz") return ready_ ? cache::HttpReply{200, "text/plain", "ok\n"}
                                               : cache::HttpReply{503, "text/plain", "cache not synced\n"};
          if (path == "/metrics") return {200, "text/plain; version=0.0.4", metrics_.text()};
          return {404, "text/plain", "not found\n"};
        },
        flags_.healthAddress, static_cast<uint16_t>(flags_.healthPort));
    if (auto st = health.start(); !st.ok()) return log::error(st.error().message), 1;
    log::info("health and metrics on ", flags_.healthAddress, ":", health.port(), " (/healthz /readyz /metrics)");

    // ---- cache (retried until it syncs: the API server may be starting too) ----
    api::SystemClock clock;
    cache::CacheOptions cacheOptions;
    cacheOptions.schedulerName = config.schedulerName;
    cacheOptions.onEvent = [this] { wake(); };
    auto cachePtr = std::make_unique<cache::Cache>(**client, clock, cacheOptions);
    for (int64_t delay = 500;; delay = std::min<int64_t>(delay * 2, 30'000)) {
      auto st = cachePtr->start();
      if (st.ok()) break;
      log::warning("syncing the cache: ", st.error().message, " (retrying)");
      cachePtr = std::make_unique<cache::Cache>(**client, clock, cacheOptions);  // a clean slate
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(delay), [&] { return stop_; })) return 0;
    }
    cache::Cache& cache = *cachePtr;
    ready_ = true;
    log::info("cache synced; scheduler name ", config.schedulerName);

    PipelineOptions po;
    po.binder.workers = flags_.bindWorkers;
    po.binder.backoffInitial = flags_.bindBackoffInitial;
    po.binder.backoffMax = flags_.bindBackoffMax;
    po.binder.onRecord = bindMetrics();
    // Fractional GPUs: reservation pods, UUIDs and ConfigMaps before binds (on the binder's
    // workers); unused reservations collected after each cycle (the first one after start is the
    // full resync), sparing groups with binds in flight.
    po.gpu = flags_.gpu;
    if (po.gpu.reservationImage.empty()) po.gpu.reservationImage = ownImage(**client);
    log::info("GPU reservation pods run image ", po.gpu.reservationImage);
    Pipeline pipeline(**client, cache, clock, config, std::move(po));

    // ---- leader election ----
    std::unique_ptr<LeaderElector> elector;
    std::thread electorThread;
    if (flags_.leaderElect) {
      elector = std::make_unique<LeaderElector>(**client, clock, flags_.lease);
      electorThread = std::thread([&] {
        bool was = false;
        for (;;) {
          const bool now = elector->tryAcquireOrRenew();
          leading_ = now;
          metrics_.leader.Add({}).Set(now ? 1 : 0);
          if (now != was) {
            if (now) log::info("became leader (lease ", flags_.lease.namespace_, "/", flags_.lease.name, ")");
            else log::info("not leading (holder: ", elector->observedHolder(), ")");
            if (now) wake();
            was = now;
          }
          std::unique_lock lock(mu_);
          if (cv_.wait_for(lock, std::chrono::milliseconds(flags_.lease.retryPeriod.millis), [&] { return stop_; }))
            break;
        }
      });
    } else {
      leading_ = true;
      metrics_.leader.Add({}).Set(1);
    }

    // ---- the loop ----
    uint64_t relistsSeen = 0, expiredSeen = 0;
    auto nextPeriodic = std::chrono::steady_clock::now();
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait_until(lock, nextPeriodic, [&] { return stop_ || woken_; });
        if (stop_) break;
        if (woken_ && std::chrono::steady_clock::now() < nextPeriodic) {
          // Debounce: let a burst of events land before the cycle.
          cv_.wait_for(lock, std::chrono::milliseconds(flags_.debounce.millis), [&] { return stop_; });
          if (stop_) break;
        }
        woken_ = false;
      }
      nextPeriodic = std::chrono::steady_clock::now() + std::chrono::milliseconds(config.schedulePeriod.millis);
      if (reload_.exchange(false) || configFile.changed()) {
        // The scheduler reads `config` by reference: replaced between cycles, used from the next.
        auto c = configFile.reload(config);
        if (c.ok()) {
          config = std::move(c).value();
          instrument(config);
          log::info("config reloaded from ", configFile.path());
        } else log::error("config reload rejected, keeping the running config: ", c.error().message);
      }
      // A leader that could not renew in time stops at once (isLeader() checks the renew deadline).
      if (!leading_ || (elector && !elector->isLeader())) continue;
      framework::CycleStats stats;
      framework::SessionResult result = pipeline.runCycle(&stats);
      record(stats, result, pipeline);
      if (auto r = cache.relists(); r > relistsSeen) {
        metrics_.relists.Add({}).Increment(static_cast<double>(r - relistsSeen));
        relistsSeen = r;
      }
      if (auto e = cache.expiredAssumptions(); e > expiredSeen) {
        metrics_.expired.Add({}).Increment(static_cast<double>(e - expiredSeen));
        expiredSeen = e;
      }
    }

    // ---- shutdown ----
    if (electorThread.joinable()) electorThread.join();
    if (elector) elector->release();
    cache.stop();
    health.stop();
    log::info("stopped");
    return 0;
  }

  /// tessera_binds_total, tessera_evictions_total and tessera_bind_duration_seconds, per bind or eviction.
  std::function<void(const binder::BindRecord&)> bindMetrics() {
    auto& b = Metrics::buckets();
    auto* bindOk = &metrics_.binds.Add({{"result", "ok"}});
    auto* bindErr = &metrics_.binds.Add({{"result", "error"}});
    auto* evictOk = &metrics_.evictions.Add({{"result", "ok"}});
    auto* evictErr = &metrics_.evictions.Add({{"result", "error"}});
    auto* bindTime = &metrics_.bindLatency.Add({{"kind", "bind"}}, b);
    auto* evictTime = &metrics_.bindLatency.Add({{"kind", "evict"}}, b);
    return [=](const binder::BindRecord& rec) {
      const bool bind = rec.kind == binder::BindRecord::Kind::Bind;
      (bind ? (rec.ok ? bindOk : bindErr) : (rec.ok ? evictOk : evictErr))->Increment();
      (bind ? bindTime : evictTime)->Observe(rec.seconds);
    };
  }

  void record(const framework::CycleStats& stats, const framework::SessionResult& result, Pipeline& pipeline) {
    auto& b = Metrics::buckets();
    metrics_.cycle.Add({{"phase", "snapshot"}}, b).Observe(stats.snapshotMs / 1000);
    metrics_.cycle.Add({{"phase", "open"}}, b).Observe(stats.sessionOpenMs / 1000);
    metrics_.cycle.Add({{"phase", "actions"}}, b).Observe(stats.actionsMs / 1000);
    metrics_.cycle.Add({{"phase", "commit"}}, b).Observe(stats.commitMs / 1000);
    metrics_.cycle.Add({{"phase", "total"}}, b).Observe(stats.totalMs / 1000);
    std::map<std::string, double> byQueue;
    for (const auto& q : pendingQueues_) byQueue[q] = 0;  // queues that drained go back to 0
    for (const auto& p : result.pods) byQueue[result.jobs[p.jobStatus].job->queue] += 1;
    pendingQueues_.clear();
    for (const auto& [q, n] : byQueue) {
      metrics_.pending.Add({{"queue", q}}).Set(n);
      if (n > 0) pendingQueues_.push_back(q);
    }
    metrics_.binder.Add({{"what", "in_flight"}}).Set(static_cast<double>(pipeline.binder().inFlight()));
    metrics_.binder.Add({{"what", "status_backlog"}}).Set(static_cast<double>(pipeline.status().backlog()));
    metrics_.binder.Add({{"what", "backoff"}}).Set(static_cast<double>(pipeline.binder().backingOff()));
  }

  RunFlags flags_;
  Metrics metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, woken_ = false;
  std::atomic<bool> ready_{false}, leading_{false}, reload_{false};
  std::vector<std::string> pendingQueues_;
};

}  // namespace

int runCommand(const std::vector<std::string>& args, std::ostream& /*out: the daemon only logs*/, std::ostream& err) {
  auto flags = parseFlags(args);
  if (!flags.ok()) {
    err << "tessera run: " << flags.error().message << "\n" << kUsage;
    return 2;
  }
  // Every log line of the daemon (and of the cache, binder and status writer under it) goes to
  // the command's error stream, as `tessera: <line>`.
  LogTo logTo(err);
  Daemon d(std::move(flags).value());
  return d.run();
}

}  // namespace tessera::app
