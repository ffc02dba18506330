// tessera-bench e2e: the daemon end to end over HTTP against the test API server, and the server's
// own ceiling for the same binds with no scheduling. See e2e_bench.h.
#include "e2e_bench.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu_time.h"
#include "tessera/cache/http_client.h"
#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"

extern char** environ;

namespace tessera::bench {

namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct E2eOptions {
  int nodes = 500;
  int pods = 5000;
  int creators = 16;     ///< concurrent pod creations
  int bindWorkers = 16;  ///< the daemon's --bind-workers, and the raw generator's binders
  int serverThreads = 2;
  int timeoutSeconds = 600;
  std::string debounce = "100ms";  // the daemon's default
  std::string tessera = TESSERA_BINARY;
  bool skipRaw = false;
  int serverLatencyMs = 0;  ///< per write, on the test server (ApiServerOptions::writeLatencyMs)
  /// The daemon's client: "default" (its own --kube-api-qps/--kube-api-burst defaults), "unlimited"
  /// (--kube-api-qps 0), or "both" (one run each).
  std::string client = "both";
  /// --shards N (>= 2): nodes and pods spread over N node pools (label tessera.dev/node-pool), and
  /// after each unsharded run one with N `tessera run --shard` daemons, one per pool (docs/sharding.md).
  int shards = 0;
};

std::string poolOf(int i, int shards) { return "pool-" + std::to_string(i % shards); }

Json nodeJson(int i, int shards) {
  Json meta = {{"name", "node-" + std::to_string(i)}};
  if (shards > 0) meta["labels"] = {{"tessera.dev/node-pool", poolOf(i, shards)}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", std::move(meta)},
          {"status",
           {{"allocatable", {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json podJson(int i, int shards) {
  Json meta = {{"namespace", "bench"}, {"name", "p-" + std::to_string(i)}};
  if (shards > 0) meta["labels"] = {{"tessera.dev/node-pool", poolOf(i, shards)}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", std::move(meta)},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers",
             {{{"name", "main"},
               {"image", "busybox"},
               {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "128Mi"}}}}}}}}}}};
}

/// Server-side times of each pod's creation and bind, from a watch on the cluster itself (callbacks
/// run inside the mutating call, so these are the moments the server did it).
class Tracker {
 public:
  explicit Tracker(int pods) : created_(pods), bound_(pods) {}

  void onEvent(const cache::WatchEvent& ev) {
    if (ev.type != cache::WatchEventType::Added && ev.type != cache::WatchEventType::Modified) return;
    const auto& meta = ev.object.value("metadata", Json::object());
    const std::string name = meta.value("name", "");
    if (name.rfind("p-", 0) != 0) return;
    const size_t i = std::strtoul(name.c_str() + 2, nullptr, 10);
    if (i >= created_.size()) return;
    const auto now = SteadyClock::now();
    if (created_[i] == SteadyClock::time_point{}) created_[i] = now;
    const auto spec = ev.object.find("spec");
    if (spec != ev.object.end() && !spec->value("nodeName", "").empty() && bound_[i] == SteadyClock::time_point{}) {
      bound_[i] = now;
      std::lock_guard lock(mu_);
      if (++boundCount_ == bound_.size()) cv_.notify_all();
    }
  }

  /// Waits until every pod is bound or the deadline passes; true if all are.
  bool waitAllBound(int seconds) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return boundCount_ == bound_.size(); });
  }
  size_t boundCount() {
    std::lock_guard lock(mu_);
    return boundCount_;
  }

  struct Figures {
    double podsPerSecond = 0, totalSeconds = 0, p50Ms = 0, p99Ms = 0;
  };
  /// Throughput from the first creation to the last bind; creation-to-bind latency percentiles.
  Figures figures() const {
    Figures f;
    SteadyClock::time_point first = SteadyClock::time_point::max(), last{};
    std::vector<double> lat;
    for (size_t i = 0; i < created_.size(); ++i) {
      if (created_[i] == SteadyClock::time_point{} || bound_[i] == SteadyClock::time_point{}) continue;
      first = std::min(first, created_[i]);
      last = std::max(last, bound_[i]);
      lat.push_back(std::chrono::duration<double, std::milli>(bound_[i] - created_[i]).count());
    }
    if (lat.empty()) return f;
    std::sort(lat.begin(), lat.end());
    f.totalSeconds = std::chrono::duration<double>(last - first).count();
    f.podsPerSecond = f.totalSeconds > 0 ? static_cast<double>(lat.size()) / f.totalSeconds : 0;
    f.p50Ms = lat[lat.size() / 2];
    f.p99Ms = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
    return f;
  }

 private:
  std::vector<SteadyClock::time_point> created_, bound_;  // written under the cluster's lock
  std::mutex mu_;
  std::condition_variable cv_;
  size_t boundCount_ = 0;
};

/// The embedded cluster with the nodes, served over HTTP, with a tracker watching its pods.
struct Server {
  api::SystemClock clock;
  cache::MemoryCluster cluster{clock};
  Tracker tracker;
  std::unique_ptr<cache::WatchHandle> watch;
  std::unique_ptr<cache::ApiServer> api;

  /// `withShards`: the SchedulingShards of the pools too (an unsharded daemon refuses to start
  /// beside them; its run has the labelled nodes and pods only).
  explicit Server(const E2eOptions& o, bool withShards = false) : tracker(o.pods) {
    cluster.setWatchWindow(static_cast<size_t>(o.pods) * 4 + 10'000);
    (void)cluster.create(api::Kind::Queue, Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                                                {"kind", "Queue"},
                                                {"metadata", {{"name", "default"}}}});
    for (int i = 0; i < o.nodes; ++i) (void)cluster.create(api::Kind::Node, nodeJson(i, o.shards));
    for (int k = 0; withShards && k < o.shards; ++k)
      (void)cluster.create(api::Kind::SchedulingShard,
                           Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                                {"kind", "SchedulingShard"},
                                {"metadata", {{"name", poolOf(k, o.shards)}}},
                                {"spec", {{"nodePool", poolOf(k, o.shards)}}}});
    watch = std::move(cluster.watch(api::Kind::Pod, "", [this](const cache::WatchEvent& ev) { tracker.onEvent(ev); }))
                .value();
    cache::ApiServerOptions so;
    so.threads = o.serverThreads;
    so.writeLatencyMs = o.serverLatencyMs;
    api = std::make_unique<cache::ApiServer>(cluster, so);
  }
  ~Server() {
    if (api) api->stop();
    if (watch) watch->stop();
  }
};

std::unique_ptr<cache::ClusterClient> client(const std::string& url, int ioThreads) {
  cache::RestConfig rc;
  rc.server = url;
  cache::HttpClientOptions co;
  co.qps = 0;  // unlimited: the bench measures the server and the scheduler, not a rate limiter
  co.ioThreads = ioThreads;
  auto c = cache::makeHttpClient(rc, co);
  if (!c.ok()) {
    std::fprintf(stderr, "tessera-bench e2e: %s\n", c.error().message.c_str());
    std::exit(1);
  }
  return std::move(c).value();
}

/// Creates pods 0..n-1 from `threads` threads; `created(i)` after each success.
template <class Created>
size_t createPods(cache::ClusterClient& c, int n, int threads, int shards, Created created) {
  std::atomic<int> next{0};
  std::atomic<size_t> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        auto r = c.create(api::Kind::Pod, podJson(i, shards));
        if (r.ok()) created(i);
        else if (failures++ < 5) std::fprintf(stderr, "tessera-bench e2e: creating p-%d: %s\n", i, r.error().message.c_str());
      }
    });
  for (auto& th : pool) th.join();
  return failures;
}

/// The daemon as a child process (its output in `log`); `unlimited`: --kube-api-qps 0, else the
/// daemon's default client rate limit; `shard`: --shard (empty: unsharded).
pid_t spawnDaemon(const E2eOptions& o, const std::string& url, const fs::path& dir, bool unlimited,
                  const std::string& shard, const fs::path& log) {
  const fs::path kc = dir / ("kubeconfig" + (shard.empty() ? std::string() : "-" + shard));  // one each: no torn reads
  std::ofstream(kc) << "apiVersion: v1\nkind: Config\ncurrent-context: b\n"
                       "clusters: [{name: b, cluster: {server: \"" << url << "\"}}]\n"
                       "contexts: [{name: b, context: {cluster: b}}]\n";
  std::vector<std::string> args = {o.tessera, "run", "--kubeconfig", kc.string(), "--leader-elect=false",
                                   "--health-port", "0", "--health-address", "127.0.0.1",
                                   "--bind-workers", std::to_string(o.bindWorkers), "--debounce", o.debounce};
  if (unlimited) args.insert(args.end(), {"--kube-api-qps", "0"});
  if (!shard.empty()) args.insert(args.end(), {"--shard", shard});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    std::fprintf(stderr, "tessera-bench e2e: cannot start %s: %s\n", o.tessera.c_str(), std::strerror(rc));
    std::exit(1);
  }
  return pid;
}

/// GET http://127.0.0.1:port/path with a plain socket (the daemon's /metrics); empty on failure.
std::string httpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

/// The daemon's cycle figures from its /metrics (port read from its log): cycles and mean ms by
/// phase, and the Events it dropped (its status writer's backlog was full).
Json daemonCycles(const fs::path& log) {
  std::ifstream in(log);
  std::string line;
  int port = 0;
  while (std::getline(in, line))
    if (auto at = line.find("health and metrics on 127.0.0.1:"); at != std::string::npos)
      port = std::atoi(line.c_str() + at + std::strlen("health and metrics on 127.0.0.1:"));
  if (port <= 0) return nullptr;
  const std::string text = httpGet(port, "/metrics");
  std::map<std::string, double> sum, count;
  std::istringstream ss(text);
  double eventsDropped = 0;
  while (std::getline(ss, line)) {
    if (line.rfind("tessera_events_dropped_total ", 0) == 0)
      eventsDropped = std::atof(line.c_str() + line.rfind(' ') + 1);
    for (const char* what : {"_sum{", "_count{"}) {
      const std::string prefix = std::string("tessera_cycle_duration_seconds") + what + "phase=\"";
      if (line.rfind(prefix, 0) != 0) continue;
      const auto close = line.find('"', prefix.size());
      const std::string phase = line.substr(prefix.size(), close - prefix.size());
      const double v = std::atof(line.c_str() + line.rfind(' ') + 1);
      (std::strcmp(what, "_sum{") == 0 ? sum : count)[phase] = v;
    }
  }
  Json out = Json::object();
  out["cycles"] = count["total"];
  out["events_dropped"] = eventsDropped;
  for (const auto& [phase, s] : sum)
    out["mean_" + phase + "_ms"] = count[phase] > 0 ? s / count[phase] * 1000 : 0;
  return out;
}

Json figuresJson(const Tracker::Figures& f) {
  return {{"pods_per_s", f.podsPerSecond}, {"total_s", f.totalSeconds}, {"p50_ms", f.p50Ms}, {"p99_ms", f.p99Ms}};
}

/// This process's CPU seconds so far (every thread: the test server, the creators, the raw load
/// generator).
double ownCpuSeconds() { return processCpuMs() / 1000; }

/// A process's CPU seconds so far (user + system, fields 14 and 15 of /proc/PID/stat); 0 unknown.
double procCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto afterName = text.rfind(')');  // the command name may hold spaces
  if (afterName == std::string::npos) return 0;
  std::istringstream fields(text.substr(afterName + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int k = 3; k <= 15 && fields >> field; ++k) {
    if (k == 14) utime = std::stoull(field);
    if (k == 15) stime = std::stoull(field);
  }
  return double(utime + stime) / double(::sysconf(_SC_CLK_TCK));
}

/// A field of /proc/PID/status in MiB ("VmHWM:" peak resident memory, "VmRSS:"); -1 unknown.
double procMiB(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atof(line.c_str() + std::strlen(field)) / 1024.0;
  return -1;
}

/// One run against a fresh server: the daemon (or, with `sharded`, one daemon per pool), the pods
/// created, their binds awaited.
bool runScheduler(const E2eOptions& o, const fs::path& dir, bool unlimited, bool sharded, Json& out) {
  Server server(o, sharded);
  if (auto st = server.api->start(); !st.ok()) {
    std::fprintf(stderr, "tessera-bench e2e: %s\n", st.error().message.c_str());
    std::exit(1);
  }
  std::vector<std::string> shards = {""};
  if (sharded) {
    shards.clear();
    for (int k = 0; k < o.shards; ++k) shards.push_back(poolOf(k, o.shards));
  }
  std::vector<pid_t> pids;
  std::vector<fs::path> logs;
  for (const auto& shard : shards) {
    logs.push_back(dir / (shard.empty() ? std::string("daemon.log") : "daemon-" + shard + ".log"));
    pids.push_back(spawnDaemon(o, server.api->url(), dir, unlimited, shard, logs.back()));
  }
  // Ready once each has its watches open (six kinds at least; a shard watches pods twice).
  const auto deadline = SteadyClock::now() + std::chrono::seconds(o.timeoutSeconds);
  while (server.api->openWatches() < 6 * shards.size() && SteadyClock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the daemons' start
  auto c = client(server.api->url(), 2);
  std::vector<double> daemonCpuBefore;
  for (pid_t pid : pids) daemonCpuBefore.push_back(procCpuSeconds(pid));
  const double benchCpuBefore = ownCpuSeconds();
  const size_t failed = createPods(*c, o.pods, o.creators, o.shards, [](int) {});
  const bool all = failed == 0 && server.tracker.waitAllBound(o.timeoutSeconds);
  const auto f = server.tracker.figures();
  const size_t requests = server.api->requestCount();  // (before the list below)
  // What the daemons' status writers had written when the last pod was bound (best effort: Events
  // wait behind the state users read, and past a backlog of 10,000 are dropped).
  auto events = c->list(api::Kind::Event);
  const size_t eventsWritten = events.ok() ? events->items.size() : 0;
  Json daemons = Json::array();
  for (size_t k = 0; k < pids.size(); ++k) {
    Json d = {{"shard", shards[k]}, {"peak_rss_mb", procMiB(pids[k], "VmHWM:")}, {"rss_mb", procMiB(pids[k], "VmRSS:")},
              {"cycles", daemonCycles(logs[k])}};
    daemons.push_back(std::move(d));
  }
  double daemonCpu = 0;
  for (size_t k = 0; k < pids.size(); ++k) daemonCpu += procCpuSeconds(pids[k]) - daemonCpuBefore[k];
  const double benchCpu = ownCpuSeconds() - benchCpuBefore;
  for (pid_t pid : pids) ::kill(pid, SIGTERM);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  out = figuresJson(f);
  out["daemon_cpu_s"] = daemonCpu;
  out["bench_cpu_s"] = benchCpu;
  out["client"] = unlimited ? "unlimited" : "default";
  out["bound"] = server.tracker.boundCount();
  out["requests"] = requests;
  out["events_written"] = eventsWritten;
  if (sharded) out["shards"] = daemons;
  else out["daemon"] = daemons[0]["cycles"], out["peak_rss_mb"] = daemons[0]["peak_rss_mb"];
  std::string memory;
  for (const auto& d : daemons) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.0f MiB", memory.empty() ? "" : ", ",
                  d["shard"].get<std::string>().empty() ? "daemon" : d["shard"].get<std::string>().c_str(),
                  d["peak_rss_mb"].get<double>());
    memory += buf;
  }
  std::printf("%s (%s client): %zu/%d bound, %.0f pods/s, p50 %.1f ms, p99 %.1f ms; CPU daemon %.1f s, bench %.1f s; "
              "peak RSS %s (logs: %s)\n",
              sharded ? "sharded  " : "scheduler", unlimited ? "unlimited" : "default", server.tracker.boundCount(),
              o.pods, f.podsPerSecond, f.p50Ms, f.p99Ms, daemonCpu, benchCpu, memory.c_str(), dir.c_str());
  return all;
}

/// The ceiling the ratios divide by: the mean of the raw runs before and after the scheduler's
/// (pods/s, and the other figures alike, so that the JSON's "raw" reads as one run's).
Json ceilingOf(const Json& before, const Json& after) {
  Json out = Json::object();
  for (const char* key : {"pods_per_s", "total_s", "p50_ms", "p99_ms", "bench_cpu_s"})
    out[key] = (before[key].get<double>() + after[key].get<double>()) / 2;
  out["bound"] = std::min(before["bound"].get<size_t>(), after["bound"].get<size_t>());
  out["runs"] = 2;
  return out;
}

/// The server's ceiling: the same creations and binds from a raw load generator, no scheduling.
bool runRaw(const E2eOptions& o, const char* label, Json& raw) {
  Server server(o);
  if (auto st = server.api->start(); !st.ok()) {
    std::fprintf(stderr, "tessera-bench e2e: %s\n", st.error().message.c_str());
    std::exit(1);
  }
  auto c = client(server.api->url(), 2);
  auto binderClient = client(server.api->url(), 2);  // as the daemon: its own connections and I/O threads
  const double benchCpuBefore = ownCpuSeconds();
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> toBind;
  bool creating = true;
  std::vector<std::thread> binders;
  for (int t = 0; t < o.bindWorkers; ++t)
    binders.emplace_back([&] {
      for (;;) {
        int i;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return !toBind.empty() || !creating; });
          if (toBind.empty()) return;
          i = toBind.front();
          toBind.pop_front();
        }
        (void)binderClient->bind("bench", "p-" + std::to_string(i), "", "node-" + std::to_string(i % o.nodes));
      }
    });
  createPods(*c, o.pods, o.creators, o.shards, [&](int i) {
    std::lock_guard lock(mu);
    toBind.push_back(i);
    cv.notify_one();
  });
  {
    std::lock_guard lock(mu);
    creating = false;
    cv.notify_all();
  }
  for (auto& t : binders) t.join();
  const bool all = server.tracker.waitAllBound(o.timeoutSeconds);
  const auto f = server.tracker.figures();
  raw = figuresJson(f);
  const double benchCpu = ownCpuSeconds() - benchCpuBefore;
  raw["bench_cpu_s"] = benchCpu;
  raw["bound"] = server.tracker.boundCount();
  raw["requests"] = server.api->requestCount();
  std::printf("%s %zu/%d bound, %.0f pods/s, p50 %.1f ms, p99 %.1f ms; CPU bench %.1f s\n", label,
              server.tracker.boundCount(), o.pods, f.podsPerSecond, f.p50Ms, f.p99Ms, benchCpu);
  return all;
}

}  // namespace

int runE2eBench(int argc, char** argv) {
  E2eOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tessera-bench e2e: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](int lo) {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < lo || n > 10'000'000) {
        std::fprintf(stderr, "tessera-bench e2e: %s: expected an integer >= %d, got \"%s\"\n", a.c_str(), lo, v.c_str());
        std::exit(2);
      }
      return static_cast<int>(n);
    };
    if (a == "--nodes") o.nodes = number(1);
    else if (a == "--pods") o.pods = number(1);
    else if (a == "--creators") o.creators = number(1);
    else if (a == "--bind-workers") o.bindWorkers = number(1);
    else if (a == "--server-threads") o.serverThreads = number(1);
    else if (a == "--timeout") o.timeoutSeconds = number(1);
    else if (a == "--debounce") o.debounce = value();
    else if (a == "--tessera") o.tessera = value();
    else if (a == "--skip-raw") o.skipRaw = true;
    else if (a == "--server-latency") o.serverLatencyMs = number(0);
    else if (a == "--shards") {
      o.shards = number(2);
    }
    else if (a == "--client") {
      o.client = value();
      if (o.client != "default" && o.client != "unlimited" && o.client != "both") {
        std::fprintf(stderr, "tessera-bench e2e: --client: expected default, unlimited or both, got \"%s\"\n",
                     o.client.c_str());
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "tessera-bench e2e: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("tessera-bench-e2e-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::printf("e2e: %d nodes, %d pods, %d creators, %d bind workers, server threads %d, server latency %d ms a write\n",
              o.nodes, o.pods, o.creators, o.bindWorkers, o.serverThreads, o.serverLatencyMs);

  // ---- 0. warm-up ----
  // The test server lives in this process: the first run grows its heap (page faults, ~50,000 pods'
  // objects) and every later run reuses it. Without a warm-up the first measured run alone pays for
  // that (the scheduler's default-client run measured ~0.73 of a warm ceiling, the same daemon
  // ~1.1 when second). One raw run, not reported, puts every measured run on a warm server.
  if (!o.skipRaw) {
    Json unused;
    (void)runRaw(o, "warm-up:  ", unused);
  }

  // ---- 1. the server's ceiling, before the scheduler's runs ----
  // And again after them (step 3): the ceiling is the mean of the two. On a VM whose speed drifts
  // within a minute (the raw rate moved by 10% from the warm-up to a raw run one minute later), a
  // ceiling measured on one side of the scheduler's runs only would carry the drift into the ratio,
  // either way; measured on both sides, a steady drift cancels out (as scripts/bench-ab.sh's A-B-B-A).
  Json rawBefore;
  bool rawAll = true;
  if (!o.skipRaw) rawAll = runRaw(o, "raw before:", rawBefore);

  // ---- 2. the scheduler end to end, with the daemon's default client and/or an unlimited one ----
  // With --shards, each is followed by the same workload under one daemon per node pool.
  Json sched, schedUnlimited, sharded, shardedUnlimited;
  bool schedAll = true;
  if (o.client == "default" || o.client == "both") {
    schedAll = runScheduler(o, dir, /*unlimited=*/false, /*sharded=*/false, sched) && schedAll;
    if (o.shards > 0) schedAll = runScheduler(o, dir, false, /*sharded=*/true, sharded) && schedAll;
  }
  if (o.client == "unlimited" || o.client == "both") {
    schedAll = runScheduler(o, dir, /*unlimited=*/true, /*sharded=*/false, schedUnlimited) && schedAll;
    if (o.shards > 0) schedAll = runScheduler(o, dir, true, /*sharded=*/true, shardedUnlimited) && schedAll;
  }

  // ---- 3. the server's ceiling again: the same creations and binds, no scheduling ----
  Json rawAfter, raw;
  if (!o.skipRaw) {
    rawAll = runRaw(o, "raw after: ", rawAfter) && rawAll;
    raw = ceilingOf(rawBefore, rawAfter);
    std::printf("ceiling:   %.0f pods/s (the mean of the raw runs before and after)\n", raw["pods_per_s"].get<double>());
  }
  std::error_code ec;
  if (schedAll && rawAll) fs::remove_all(dir, ec);
  else std::fprintf(stderr, "tessera-bench e2e: not every pod was bound; the daemons' logs are kept in %s\n", dir.c_str());

  double load[1] = {0};
  const double rawRate = raw.is_null() ? 0.0 : raw["pods_per_s"].get<double>();
  auto ratio = [&](const Json& run) -> Json {
    if (run.is_null() || rawRate <= 0) return nullptr;
    return run["pods_per_s"].get<double>() / rawRate;
  };
  Json out = {{"benchmark", "e2e"},
              {"nodes", o.nodes},
              {"pods", o.pods},
              {"creators", o.creators},
              {"bind_workers", o.bindWorkers},
              {"server_threads", o.serverThreads},
              {"server_latency_ms", o.serverLatencyMs},
              {"all_bound", schedAll && rawAll},
              {"scheduler", sched},
              {"scheduler_unlimited", schedUnlimited},
              {"raw", raw},
              {"raw_before", rawBefore},
              {"raw_after", rawAfter},
              {"ratio", ratio(sched)},
              {"ratio_unlimited", ratio(schedUnlimited)},
              {"shards", o.shards},
              {"sharded", sharded},
              {"sharded_unlimited", shardedUnlimited},
              {"ratio_sharded", ratio(sharded)},
              {"ratio_sharded_unlimited", ratio(shardedUnlimited)},
              {"load_average", getloadavg(load, 1) == 1 ? load[0] : -1}};
  std::cout << out.dump() << std::endl;
  return schedAll && rawAll ? 0 : 1;
}

}  // namespace tessera::bench
