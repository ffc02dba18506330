// `tessera run`: the scheduler daemon against a real API server. Wiring only: HTTP client -> cache
// -> Pipeline (scheduler -> binder -> status writer, pipeline.h), a Lease so only one replica
// schedules, /healthz /readyz /metrics /debug/snapshot, and SIGTERM. Cycles run every
// schedulePeriod and early (debounced) when watch events arrive.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

#include "daemon_metrics.h"
#include "tessera/api/malloc_tuning.h"
#include "tessera/api/flags.h"
#include "tessera/api/log.h"
#include "tessera/api/signals.h"
#include "tessera/api/version.h"
#include "tessera/app/config_file.h"
#include "tessera/app/leader_election.h"
#include "tessera/app/pipeline.h"
#include "tessera/app/registry.h"
#include "tessera/app/run.h"
#include "tessera/app/shard.h"
#include "tessera/app/snapshot.h"
#include "tessera/app/ui_state.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/http_client.h"
#include "tessera/cache/http_server.h"
#include "tessera/framework/config.h"
#include "tessera/framework/scheduler.h"

namespace tessera::app {

namespace {

struct RunFlags {
  std::string kubeconfig, context, configFile;
  bool inCluster = false;
  std::string schedulerName;  ///< overrides the config's schedulerName when set
  /// No client-side rate limit by default: the API server's Priority and Fairness bounds the daemon
  /// (docs/operations.md#api-budget); in-flight requests are bounded by the bind workers.
  double qps = 0;
  int burst = 100;
  bool leaderElect = true;
  LeaseOptions lease;
  /// Loopback by default: /metrics and /debug/snapshot are not for the network unless asked
  /// (the manifests listen on the pod IP for probes and the scrape, behind a NetworkPolicy).
  std::string healthAddress = "127.0.0.1";
  int healthPort = 10259;
  bool debugSnapshot = true;  ///< serve /debug/snapshot on the health port
  /// The read-only web UI (docs/ui.md): off (-1) unless a port is given; 0 picks a free port.
  /// Loopback by default, as the health port: it shows every queue, job and node.
  std::string uiAddress = "127.0.0.1";
  int uiPort = -1;
  api::Duration debounce{100};
  /// On SIGTERM: how long queued binds, evictions and status writes may still go out; what is
  /// left then is dropped unsent (counted, logged) and the process exits.
  api::Duration shutdownGrace{10'000};
  binder::GpuBindingOptions gpu;  ///< --reservation-image, --reservation-timeout, --evict-orphaned-gpu-pods
  int bindWorkers = 16;
  /// --max-queued-events: Events that may wait for the status writer; past that, new ones are
  /// dropped (tessera_events_dropped_total). 0: no bound.
  size_t maxQueuedEvents = binder::StatusWriterOptions{}.maxQueuedEvents;
  api::Duration bindBackoffInitial{1000}, bindBackoffMax{60'000};
  /// --isolation: the backend the webhook wires fractional pods to; hard: unwired ones are refused.
  api::Isolation isolation = api::Isolation::Unset;
  /// --usage-configmap NAMESPACE/NAME: where the time-aware usage history is saved; unset: the
  /// pod's namespace (POD_NAMESPACE, else --lease-namespace) and tessera-usage; "" turns it off.
  std::optional<std::string> usageConfigMap;
  /// --shard NAME: schedule the node pool of SchedulingShard NAME only (docs/sharding.md).
  std::string shard;
  bool leaseNameSet = false;  ///< --lease-name given (else a shard's lease is tessera-<shard>)
};

const char* const kUsage =
    "usage: tessera run (--kubeconfig PATH [--context NAME] | --in-cluster) [--config FILE]\n"
    "                   [--scheduler-name NAME] [--kube-api-qps 0 (none)] [--kube-api-burst 100]\n"
    "                   [--leader-elect=true|false] [--lease-name tessera] [--lease-namespace kube-system]\n"
    "                   [--lease-duration 15s] [--renew-deadline 10s] [--retry-period 2s] [--identity ID]\n"
    "                   [--health-address 127.0.0.1] [--health-port 10259] [--debug-snapshot=true|false]\n"
    "                   [--ui-address 127.0.0.1] [--ui-port PORT (the web UI; default: off, 0: any free port)]\n"
    "                   [--debounce 100ms] [--shutdown-grace 10s]\n"
    "                   [--reservation-image IMAGE (default: this pod's image)] [--reservation-timeout 60s]\n"
    "                   [--evict-orphaned-gpu-pods]\n"
    "                   [--bind-workers 16] [--bind-backoff-initial 1s] [--bind-backoff-max 60s]\n"
    "                   [--max-queued-events 10000 (0: no bound)]\n"
    "                   [--isolation hard|mps|none (the webhook's backend; default: not checked)]\n"
    "                   [--usage-configmap NAMESPACE/NAME (default: $POD_NAMESPACE/tessera-usage; \"\": off)]\n"
    "                   [--shard NAME (schedule SchedulingShard NAME's node pool; lease tessera-NAME)]\n"
    "                   [--v 0] [--log-format text|json]\n";

}  // namespace

api::Result<bool> applyLogFlag(const std::string& name, const std::function<api::Result<std::string>()>& value) {
  if (name == "--v" || name == "-v") {
    TESSERA_ASSIGN_OR_RETURN(const std::string v, value());
    int level = -1;
    try {
      level = std::stoi(v);
    } catch (...) {
    }
    if (level < 0 || level > 10 || std::to_string(level) != v)
      return api::makeError(name + ": must be a verbosity 0..10, got \"" + v + "\"");
    log::setVerbosity(level);
    return true;
  }
  if (name == "--log-format") {
    TESSERA_ASSIGN_OR_RETURN(const std::string v, value());
    auto format = log::parseFormat(v);
    if (!format) return api::makeError("--log-format: must be text or json, got \"" + v + "\"");
    log::setFormat(*format);
    return true;
  }
  return false;
}

namespace {

api::Result<RunFlags> parseFlags(const std::vector<std::string>& args) {
  RunFlags f;
  f.gpu.reservationImage.clear();  // empty: this pod's own image (ownImage)
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  f.lease.identity = std::string(host) + "_" + std::to_string(::getpid());
  api::FlagCursor flag(args);
  while (flag.next()) {
    const std::string& a = flag.name();
    auto text = [&](std::string& out) -> api::Status {
      TESSERA_ASSIGN_OR_RETURN(out, flag.value());
      return api::Status::success();
    };
    auto duration = [&](api::Duration& out) -> api::Status {
      TESSERA_ASSIGN_OR_RETURN(const std::string s, flag.value());
      auto d = api::parseDuration(s);
      if (!d.ok()) return api::makeError(a + ": " + d.error().message);
      out = *d;
      return api::Status::success();
    };
    auto number = [&](double& out) -> api::Status {
      TESSERA_ASSIGN_OR_RETURN(const std::string s, flag.value());
      try {
        out = std::stod(s);
      } catch (...) {
        return api::makeError(a + ": not a number: " + s);
      }
      return api::Status::success();
    };
    api::Status st = api::Status::success();
    double n = 0;
    TESSERA_ASSIGN_OR_RETURN(const bool logFlag, applyLogFlag(a, [&] { return flag.value(); }));
    if (logFlag) continue;
    if (a == "--kubeconfig") st = text(f.kubeconfig);
    else if (a == "--context") st = text(f.context);
    else if (a == "--config") st = text(f.configFile);
    else if (a == "--in-cluster") f.inCluster = flag.boolean();
    else if (a == "--scheduler-name") st = text(f.schedulerName);
    else if (a == "--kube-api-qps") st = number(f.qps);
    else if (a == "--kube-api-burst") { st = number(n); f.burst = static_cast<int>(n); }
    else if (a == "--leader-elect") f.leaderElect = flag.boolean();
    else if (a == "--lease-name") { st = text(f.lease.name); f.leaseNameSet = true; }
    else if (a == "--shard") {
      st = text(f.shard);
      if (st.ok() && f.shard.empty()) return api::makeError("--shard: give the SchedulingShard's name");
    }
    else if (a == "--lease-namespace") st = text(f.lease.namespace_);
    else if (a == "--lease-duration") st = duration(f.lease.leaseDuration);
    else if (a == "--renew-deadline") st = duration(f.lease.renewDeadline);
    else if (a == "--retry-period") st = duration(f.lease.retryPeriod);
    else if (a == "--identity") st = text(f.lease.identity);
    else if (a == "--health-address") st = text(f.healthAddress);
    else if (a == "--health-port") { st = number(n); f.healthPort = static_cast<int>(n); }
    else if (a == "--debug-snapshot") f.debugSnapshot = flag.boolean();
    else if (a == "--ui-address") st = text(f.uiAddress);
    else if (a == "--ui-port") {
      st = number(n);
      if (st.ok() && (n < 0 || n > 65535)) return api::makeError("--ui-port: must be 0..65535, got " + std::to_string(n));
      f.uiPort = static_cast<int>(n);
    }
    else if (a == "--debounce") st = duration(f.debounce);
    else if (a == "--shutdown-grace") st = duration(f.shutdownGrace);
    else if (a == "--reservation-image") st = text(f.gpu.reservationImage);
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
    else if (a == "--max-queued-events") {
      std::string v;
      st = text(v);
      size_t used = 0;
      long long m = -1;
      try {
        m = std::stoll(v, &used);
      } catch (...) {
      }
      if (st.ok() && (v.empty() || used != v.size() || m < 0 || m > 10'000'000))
        return api::makeError("--max-queued-events: must be a whole number 0..10000000 (0: no bound), got \"" + v +
                              "\"");
      f.maxQueuedEvents = static_cast<size_t>(m);
    }
    else if (a == "--usage-configmap") {
      std::string v;
      st = text(v);
      const auto slash = v.find('/');
      if (st.ok() && !v.empty() && (slash == std::string::npos || slash == 0 || slash + 1 == v.size() ||
                                    v.find('/', slash + 1) != std::string::npos))
        return api::makeError("--usage-configmap: want NAMESPACE/NAME or \"\", got \"" + v + "\"");
      f.usageConfigMap = v;
    }
    else if (a == "--bind-backoff-initial") st = duration(f.bindBackoffInitial);
    else if (a == "--bind-backoff-max") st = duration(f.bindBackoffMax);
    else if (a == "--isolation") {
      std::string v;
      st = text(v);
      if (v == "hard") f.isolation = api::Isolation::Hard;
      else if (v == "mps") f.isolation = api::Isolation::Mps;
      else if (v == "none") f.isolation = api::Isolation::None;
      else if (st.ok()) return api::makeError("--isolation: must be hard, mps or none, got \"" + v + "\"");
      f.gpu.isolation = f.isolation;
    }
    else return api::makeError("unknown flag " + a);
    TESSERA_TRY(st);
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

/// Routes the logger to a stream while it lives; the sink before it comes back after.
/// The daemon's log lines (formatted: --log-format) go to the command's error stream while it runs.
class LogTo {
 public:
  explicit LogTo(std::ostream& err) { log::setOutput(&err); }
  ~LogTo() { log::setOutput(nullptr); }
  LogTo(const LogTo&) = delete;
  LogTo& operator=(const LogTo&) = delete;
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

  /// The running config as a scenario's `config` (the file as loaded, the scheduler name the
  /// daemon uses), for /debug/snapshot. Called from the loop whenever it takes a config.
  void setSnapshotConfig(const ConfigFile& file, const framework::Config& config) {
    std::lock_guard lock(snapshotMu_);
    snapshotConfig_ = file.document();
    snapshotSchedulerName_ = config.schedulerName;
  }

  /// GET /debug/snapshot[/anonymized]: the cluster's scheduling inputs as a scenario file, listed
  /// through the daemon's client on the health server's thread (the server has two, so /healthz
  /// answers meanwhile); the scheduling loop is not involved. One capture at a time.
  cache::HttpReply debugSnapshot(bool anonymize) {
    std::unique_lock capture(captureMu_, std::try_to_lock);
    if (!capture.owns_lock()) return {503, "text/plain", "a snapshot is being captured; retry\n"};
    cache::ClusterClient* client = snapshotClient_.load();
    if (!client) return {503, "text/plain", "not connected to the API server yet\n"};
    SnapshotOptions options;
    {
      std::lock_guard lock(snapshotMu_);
      options.config = snapshotConfig_;
      options.schedulerName = snapshotSchedulerName_;
    }
    options.anonymize = anonymize;
    options.capturedAt = api::SystemClock().now();
    options.source = "tessera run /debug/snapshot of " + server_ + " at " + api::formatTime(options.capturedAt);
    auto doc = captureScenario(*client, options);
    if (!doc.ok()) return {502, "text/plain", "capturing the snapshot: " + doc.error().message + "\n"};
    return {200, "application/yaml",
            "# A" + std::string(anonymize ? "n anonymized" : "") +
                " snapshot of a cluster's scheduling inputs: `tessera simulate FILE` replays it.\n" + toYaml(*doc)};
  }

  /// One line with what this process runs with: an SRE's first question.
  void logStartup(const framework::Config& config, const std::string& configPath, const std::string& server) const {
    const char* isolation = flags_.isolation == api::Isolation::Hard  ? "hard"
                            : flags_.isolation == api::Isolation::Mps ? "mps"
                            : flags_.isolation == api::Isolation::None ? "none"
                                                                       : "not checked";
    log::info("tessera ", api::buildVersion(), " (commit ", api::buildCommit(), ") starting: API server ", server,
              ", scheduler name ", config.schedulerName, ", config ", configPath.empty() ? "built-in defaults" : configPath,
              ", schedulePeriod ", api::formatDuration(config.schedulePeriod), ", leader election ",
              flags_.leaderElect ? "on (lease " + flags_.lease.namespace_ + "/" + flags_.lease.name + " as " +
                                       flags_.lease.identity + ")"
                                 : std::string("off"),
              ", kube-api-qps ",
              flags_.qps > 0 ? std::to_string(static_cast<int64_t>(flags_.qps)) + ", burst " + std::to_string(flags_.burst)
                             : std::string("unlimited (API Priority and Fairness)"),
              ", bind workers ", flags_.bindWorkers,
              ", isolation ", isolation, ", malloc ", api::mallocInEffect(), ", log verbosity ", log::verbosity());
  }

  int runLoop() {
    // ---- client ----
    auto rc = flags_.inCluster ? cache::inClusterConfig() : cache::loadKubeconfig(flags_.kubeconfig, flags_.context);
    if (!rc.ok()) return log::error(rc.error().message), 1;
    server_ = rc->server;
    cache::HttpClientOptions co;
    co.qps = flags_.qps;
    co.burst = flags_.burst;
    co.observer = [this](const std::string& verb, int code, double seconds) {
      metrics_.apiRequest(verb, code, seconds);
    };
    auto client = cache::makeHttpClient(*rc, co);
    if (!client.ok()) return log::error(client.error().message), 1;

    // ---- shard (docs/sharding.md): its pool and config overrides, read once at start ----
    ConfigFile configFile(flags_.configFile, flags_.schedulerName);
    api::ShardScope scope;
    // The config file may name the shard (config.shard); loaded once unless a shard's overrides
    // must be merged over it.
    std::optional<api::Result<framework::Config>> loaded;
    if (flags_.shard.empty() && !flags_.configFile.empty()) {
      loaded = configFile.load();
      if (!loaded->ok()) return log::error("config: ", loaded->error().message), 1;
      flags_.shard = (*loaded)->shard;
      if (!flags_.shard.empty()) loaded.reset();
    }
    // Retried while the API server cannot answer (it may be starting too); a missing, bad or
    // doubled SchedulingShard refuses the start, and so do shards for an unsharded daemon.
    auto untilAnswered = [&](const char* what, auto read) -> std::optional<int> {
      auto got = read();
      for (int64_t delay = 500; !got.ok(); delay = std::min<int64_t>(delay * 2, 30'000)) {
        const int code = got.error().code;
        if (code == 404 || code == 409 || code == 422 || code == 403 || code == 401)
          return log::error(what, got.error().message), 1;
        log::warning(what, got.error().message, " (retrying)");
        std::unique_lock lock(mu_);
        if (cv_.wait_for(lock, std::chrono::milliseconds(delay), [&] { return stop_; })) return 0;
        lock.unlock();
        got = read();
      }
      return std::nullopt;
    };
    if (flags_.shard.empty()) {
      if (auto rc = untilAnswered("unsharded: ", [&] { return checkUnsharded(**client); })) return *rc;
    } else {
      api::Result<ShardSpec> shard = api::makeError("not read");
      if (auto rc = untilAnswered("--shard: ", [&] { return shard = loadShard(**client, flags_.shard); })) return *rc;
      scope = shard->scope;
      nlohmann::json overrides = shard->config.is_null() ? nlohmann::json::object() : shard->config;
      overrides["shard"] = flags_.shard;  // the flag wins over the file's config.shard
      configFile.setOverrides(std::move(overrides), "SchedulingShard " + flags_.shard + " spec.config");
      log::info("shard ", flags_.shard, ": scheduling ", scope.describe());
      // One Lease and one usage history per shard, unless given.
      if (!flags_.leaseNameSet) flags_.lease.name += "-" + flags_.shard;
      if (!flags_.usageConfigMap) {
        const char* podNs = std::getenv("POD_NAMESPACE");
        flags_.usageConfigMap =
            std::string(podNs && *podNs ? podNs : flags_.lease.namespace_.c_str()) + "/tessera-usage-" + flags_.shard;
      }
    }
    // ---- config ----
    // A bad file refuses to start; a bad reload (SIGHUP or the file changed) keeps the old one.
    framework::Config config;
    {
      auto c = loaded ? std::move(*loaded) : configFile.load();
      if (!c.ok()) return log::error("config: ", c.error().message), 1;
      config = std::move(c).value();
      metrics_.instrument(config);  // also after a reload
      setSnapshotConfig(configFile, config);
    }
    logStartup(config, configFile.path(), rc->server);
    // Cleared before the client goes (the health server stops first: it is declared after).
    struct ClearOnExit {
      std::atomic<cache::ClusterClient*>& p;
      ~ClearOnExit() { p = nullptr; }
    } clearSnapshotClient{snapshotClient_};
    if (flags_.debugSnapshot) snapshotClient_ = client->get();
    // Conditions and Events go through a client of their own, with the same limits (as
    // kube-scheduler's event client): binds never wait behind them for the rate limit.
    auto statusClient = cache::makeHttpClient(*rc, co);
    if (!statusClient.ok()) return log::error(statusClient.error().message), 1;

    // ---- health ----
    cache::HttpServer health(
        [this](const std::string&, const std::string& path) -> cache::HttpReply {
          if (path == "/healthz") return {200, "text/plain", "ok\n"};
          if (path == "/readyz") return ready_ ? cache::HttpReply{200, "text/plain", "ok\n"}
                                               : cache::HttpReply{503, "text/plain", "cache not synced\n"};
          if (path == "/metrics") return {200, "text/plain; version=0.0.4", metrics_.text()};
          if (flags_.debugSnapshot && path == "/debug/snapshot") return debugSnapshot(false);
          if (flags_.debugSnapshot && path == "/debug/snapshot/anonymized") return debugSnapshot(true);
          return {404, "text/plain", "not found\n"};
        },
        flags_.healthAddress, static_cast<uint16_t>(flags_.healthPort), /*threads=*/2);
    if (auto st = health.start(); !st.ok()) return log::error(st.error().message), 1;
    log::info("health and metrics on ", flags_.healthAddress, ":", health.port(), " (/healthz /readyz /metrics",
              flags_.debugSnapshot ? " /debug/snapshot)" : ")");

    // ---- web UI (docs/ui.md): the page and its state, built on the server's threads ----
    std::optional<cache::HttpServer> ui;
    if (flags_.uiPort >= 0) {
      ui_ = std::make_unique<UiPublisher>(config.schedulerName);
      ui.emplace(
          [this](const std::string& method, const std::string& path) -> cache::HttpReply {
            if (method != "GET") return {405, "text/plain", "the UI is read-only\n"};
            if (path == "/" || path == "/index.html") return {200, "text/html; charset=utf-8", std::string(uiPage())};
            if (path == "/api/v1/state") return {200, "application/json", *ui_->stateJson()};
            return {404, "text/plain", "not found\n"};
          },
          flags_.uiAddress, static_cast<uint16_t>(flags_.uiPort), /*threads=*/1);
      if (auto st = ui->start(); !st.ok()) return log::error("web UI: ", st.error().message), 1;
      log::info("web UI on http://", flags_.uiAddress, ":", ui->port(), "/");
    }

    // ---- cache (retried until it syncs: the API server may be starting too) ----
    api::SystemClock clock;
    cache::CacheOptions cacheOptions;
    cacheOptions.schedulerName = config.schedulerName;
    cacheOptions.onEvent = [this] { wake(); };
    cacheOptions.isolation = flags_.isolation;
    cacheOptions.gpuDefaults = config.gpuSharing.defaults;
    cacheOptions.shard = scope;
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
    po.binder.onRecord = metrics_.bindRecorder();
    // Fractional GPUs: reservation pods, UUIDs and ConfigMaps before binds (on the binder's
    // workers); unused reservations collected after each cycle (the first one after start is the
    // full resync), sparing groups with binds in flight.
    po.gpu = flags_.gpu;
    if (po.gpu.reservationImage.empty()) po.gpu.reservationImage = ownImage(**client);
    log::info("GPU reservation pods run image ", po.gpu.reservationImage);
    // ---- leader election, and the fencing of writes by its epoch ----
    std::unique_ptr<LeaderElector> elector;
    if (flags_.leaderElect) elector = std::make_unique<LeaderElector>(**client, clock, flags_.lease);
    // Right before each bind, eviction and status write: still the term that decided it, and not
    // past the shutdown grace? (Without leader election every cycle is of term 1.)
    std::atomic<bool> closing{false};
    po.binder.leaderEpoch = [e = elector.get(), &closing]() -> uint64_t {
      if (closing) return 0;
      return e ? e->fencingEpoch() : 1;
    };
    po.statusMayWrite = [e = elector.get(), &closing] { return !closing && (!e || e->fencingEpoch() != 0); };
    po.statusClient = statusClient->get();
    po.maxQueuedEvents = flags_.maxQueuedEvents;
    {
      const char* podNs = std::getenv("POD_NAMESPACE");
      std::string where = flags_.usageConfigMap.value_or(
          std::string(podNs && *podNs ? podNs : flags_.lease.namespace_.c_str()) + "/tessera-usage");
      if (const auto slash = where.find('/'); slash != std::string::npos) {
        po.usageNamespace = where.substr(0, slash);
        po.usageConfigMap = where.substr(slash + 1);
      }
      log::info("time-aware usage history: ",
                po.usageConfigMap.empty() ? std::string("not saved") : "ConfigMap " + where);
    }
    Pipeline pipeline(**client, cache, clock, config, std::move(po));
    metrics_.observe(&pipeline);

    std::thread electorThread;
    if (flags_.leaderElect) {
      electorThread = std::thread([&] {
        bool was = false;
        for (;;) {
          const bool now = elector->tryAcquireOrRenew();
          leading_ = now;
          metrics_.setLeader(now);
          if (now != was) {
            if (now) log::info("became leader (lease ", flags_.lease.namespace_, "/", flags_.lease.name, ")");
            else log::warning("lost leadership (lease ", flags_.lease.namespace_, "/", flags_.lease.name,
                              ", holder now: ", elector->observedHolder().empty() ? "unknown" : elector->observedHolder(),
                              "): no new cycles");
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
      metrics_.setLeader(true);
    }

    // ---- the loop ----
    auto nextPeriodic = std::chrono::steady_clock::now();
    bool leadingCycles = false;
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
          metrics_.instrument(config);
          setSnapshotConfig(configFile, config);
          log::info("config reloaded from ", configFile.path());
        } else log::error("config reload rejected, keeping the running config: ", c.error().message);
      }
      // A leader that could not renew in time stops at once (isLeader() checks the renew deadline).
      if (!leading_ || (elector && !elector->isLeader())) {
        leadingCycles = false;
        continue;
      }
      // First cycle of a term: what the last leader saved may be newer than this replica's memory.
      if (!leadingCycles) pipeline.restoreState();
      leadingCycles = true;
      framework::CycleStats stats;
      framework::SessionResult result = pipeline.runCycle(&stats);
      metrics_.afterCycle(stats, result, pipeline);
      if (!flags_.shard.empty() && result.snapshot) writeShardStatus(**statusClient, *result.snapshot, clock.now());
      if (ui_) ui_->publish(std::make_shared<const framework::SessionResult>(std::move(result)), stats, clock.now());
      else framework::recycleResult(pipeline.state(), std::move(result));  // its lists serve the next cycle
      if (log::v(2))
        log::info("cycle ", stats.cycle, ": ", stats.binds, " binds, ", stats.evictions, " evictions, ",
                  stats.pipelined, " pipelined, ", stats.pendingJobs, " pending jobs, ", stats.totalMs, " ms");
    }

    // ---- shutdown: what is queued may go out within the grace; the rest is dropped unsent ----
    const auto graceEnd = std::chrono::steady_clock::now() + std::chrono::milliseconds(flags_.shutdownGrace.millis);
    while ((pipeline.binder().inFlight() > 0 || pipeline.status().backlog() > 0) &&
           std::chrono::steady_clock::now() < graceEnd)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const size_t bindsLeft = pipeline.binder().inFlight(), writesLeft = pipeline.status().backlog();
    closing = true;                // fences every write not yet sent
    pipeline.binder().waitIdle();  // requests in flight finish; queued ones are dropped at once
    pipeline.status().drain();
    if (bindsLeft + writesLeft > 0)
      log::warning("shutdown grace (", flags_.shutdownGrace.millis, " ms) over: ", bindsLeft,
                   " binds and evictions and ", writesLeft,
                   " status and Event writes still queued were dropped unsent (the next leader decides again)");
    metrics_.observe(nullptr);
    if (electorThread.joinable()) electorThread.join();
    if (elector) elector->release();
    cache.stop();
    health.stop();
    log::info("stopped");
    return 0;
  }

  /// The shard's status (nodes, queues, pending pods, leader), written by its leader at most every
  /// 10 s through the status client; a failure is logged and tried again at the next chance.
  void writeShardStatus(cache::ClusterClient& client, const cache::Snapshot& snapshot, api::Time now) {
    if (lastShardStatus_ && now - *lastShardStatus_ < api::Duration{10'000}) return;
    lastShardStatus_ = now;
    const nlohmann::json patch = {{"status", shardStatus(snapshot, flags_.lease.identity, now)}};
    auto r = client.patch(api::Kind::SchedulingShard, "", flags_.shard, cache::PatchType::Merge, patch, true);
    if (!r.ok()) log::warning("writing SchedulingShard ", flags_.shard, " status: ", r.error().message);
  }

  RunFlags flags_;
  DaemonMetrics metrics_;
  std::optional<api::Time> lastShardStatus_;
  std::unique_ptr<UiPublisher> ui_;  ///< set when the web UI is on (--ui-port)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, woken_ = false;
  std::atomic<bool> ready_{false}, leading_{false}, reload_{false};
  // ---- /debug/snapshot (health server threads) ----
  std::atomic<cache::ClusterClient*> snapshotClient_{nullptr};
  std::string server_;     ///< the API server's URL; written before the health server starts
  std::mutex snapshotMu_;  ///< guards the two below (written by the loop, read by the health server)
  nlohmann::json snapshotConfig_;
  std::string snapshotSchedulerName_;
  std::mutex captureMu_;  ///< held while a capture runs: one at a time
};

}  // namespace

int runCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (api::helpRequested(args)) {
    out << kUsage;  // the daemon itself only logs (to err)
    return 0;
  }
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
