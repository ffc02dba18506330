// Operating `tessera run` (a child process) against the test API server: what it logs at steady
// state, and what /metrics serves. Waits poll with generous deadlines as a safety net only.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <regex>
#include <set>
#include <sstream>

#include "support/daemon_process.h"
#include "tessera/app/run.h"
#include "tessera/cache/http_server.h"

using namespace tessera;
using testing::eventually;
using testing::httpGet;

namespace {

namespace fs = std::filesystem;

/// One node; a pod bound at the first cycle, and one too big for any node, pending for ever (with
/// its reason written once): afterwards every cycle is idle.
const char* const kCluster = R"(
objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
  - apiVersion: scheduling.tessera.dev/v1alpha1
    kind: Queue
    metadata: {name: default}
    spec:
      resources:
        cpu: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
  - apiVersion: v1
    kind: Node
    metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
    status:
      allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
      conditions: [{type: Ready, status: "True"}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: p, namespace: team-a}
    spec:
      schedulerName: tessera
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: big, namespace: team-a}
    spec:
      schedulerName: tessera
      containers: [{name: c, image: x, resources: {requests: {cpu: "100"}}}]
)";

struct Env {
  api::SystemClock clock;
  cache::MemoryCluster cluster{clock};
  std::unique_ptr<cache::ApiServer> server;
  fs::path dir = testing::scratchDir("tessera-operability-it");

  /// writeLatencyMs: every write is answered that late (a slow API server).
  explicit Env(const std::string& name, int64_t writeLatencyMs = 0) {
    const fs::path file = dir / (name + ".yaml");
    std::ofstream(file) << kCluster;
    REQUIRE(app::loadScenarioObjects(file.string(), cluster, clock.now()).ok());
    cache::ApiServerOptions so;
    so.kubeletPeriodMs = 50;
    so.writeLatencyMs = writeLatencyMs;
    server = std::make_unique<cache::ApiServer>(cluster, so);
    REQUIRE(server->start().ok());
  }
  /// 10 nodes of 64 cpu and `pods` pods of 100m that fit (w-0, w-1, ...).
  void addLoad(int pods) {
    for (int n = 0; n < 10; ++n)
      REQUIRE(cluster
                  .create(api::Kind::Node,
                          {{"apiVersion", "v1"},
                           {"kind", "Node"},
                           {"metadata", {{"name", "big-" + std::to_string(n)}}},
                           {"status",
                            {{"allocatable", {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}}},
                             {"conditions", cache::Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}})
                  .ok());
    for (int i = 0; i < pods; ++i)
      REQUIRE(
          cluster
              .create(api::Kind::Pod,
                      {{"apiVersion", "v1"},
                       {"kind", "Pod"},
                       {"metadata", {{"name", "w-" + std::to_string(i)}, {"namespace", "team-a"}}},
                       {"spec",
                        {{"schedulerName", "tessera"},
                         {"containers",
                          cache::Json::array(
                              {{{"name", "c"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "100m"}}}}}}})}}}})
              .ok());
  }
  /// Pods with a node.
  int boundPods() {
    int n = 0;
    const auto pods = cluster.list(api::Kind::Pod);  // held: a range-for over a temporary's member dangles
    for (const auto& p : pods.value().items) n += p["spec"].value("nodeName", "").empty() ? 0 : 1;
    return n;
  }
  testing::DaemonProcess daemon(const std::string& identity, std::vector<std::string> extra = {},
                                std::vector<std::string> env = {}) {
    return testing::DaemonProcess(TESSERA_BINARY, dir, server->url(), identity, std::move(extra), "default",
                                  std::move(env));
  }
};

/// The port the daemon logged for /metrics ("health and metrics on 127.0.0.1:PORT"); 0 before.
int healthPort(const std::string& log) {
  std::smatch m;
  static const std::regex re("health and metrics on [0-9.]+:([0-9]+)");
  return std::regex_search(log, m, re) ? std::stoi(m[1]) : 0;
}

/// tessera_cycle_duration_seconds_count{phase="total"} in a scrape (cycles run so far); -1 if absent.
long cycles(const std::string& metrics) {
  std::smatch m;
  static const std::regex re("tessera_cycle_duration_seconds_count\\{phase=\"total\"\\} ([0-9.e+]+)");
  return std::regex_search(metrics, m, re) ? static_cast<long>(std::stod(m[1])) : -1;
}

size_t lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

/// Runs a daemon until it has bound the pod and gone idle, then counts its log lines over 10 more
/// cycles (schedulePeriod 200ms). Returns {lines during idle cycles, the idle part of the log}.
std::pair<size_t, std::string> idleLines(Env& env, const std::string& identity, std::vector<std::string> flags) {
  auto d = env.daemon(identity, std::move(flags));
  REQUIRE(eventually([&] { return healthPort(d.log()) > 0; }));
  const int port = healthPort(d.log());
  REQUIRE(eventually([&] {
    auto p = env.cluster.get(api::Kind::Pod, "team-a", "p");
    return p.ok() && !(*p)["spec"].value("nodeName", "").empty();
  }));
  long start = -1;
  REQUIRE(eventually([&] { return (start = cycles(httpGet(port, "/metrics"))) >= 2; }));
  // The bind's own lines (and its Event) are written by now: the binder reported to the cache.
  REQUIRE(eventually([&] { return cycles(httpGet(port, "/metrics")) >= start + 2; }));
  const std::string before = d.log();
  const long from = cycles(httpGet(port, "/metrics"));
  REQUIRE(eventually([&] { return cycles(httpGet(port, "/metrics")) >= from + 10; }));
  const std::string after = d.log();
  CHECK(d.kill(SIGTERM) == 0);
  return {lines(after) - lines(before), after.substr(before.size())};
}

/// A process's environment variable as /proc/PID/environ holds it (what it was started, or last
/// executed, with; glibc's tunables parser cuts GLIBC_TUNABLES there after its first tunable, so
/// that one is read from the daemon's log instead); nullopt when it has none.
std::optional<std::string> environOf(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  return std::nullopt;
}

/// The malloc setting the daemon's startup line names ("malloc keep freed memory, huge pages").
std::string mallocLogged(const std::string& log) {
  std::smatch m;
  static const std::regex re(", malloc ([^,]+(, huge pages)?), log verbosity");
  return std::regex_search(log, m, re) ? m[1].str() : "(no startup line)";
}

/// Whether the kernel hands out transparent huge pages to a region that asks.
bool kernelHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return std::getline(in, line) &&
         (line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos);
}

}  // namespace

TEST_CASE("operability: the daemon asks glibc for huge pages by re-executing itself once, unless told not to") {
  Env env("hugepages");
  // What the daemon says it runs with once it serves /metrics, and whether it was re-executed
  // (exec keeps the pid: the process the test started is the daemon).
  auto started = [&](const std::string& identity, std::vector<std::string> vars) {
    auto d = env.daemon(identity, {}, std::move(vars));
    REQUIRE(eventually([&] { return healthPort(d.log()) > 0; }));
    std::pair<std::string, std::optional<std::string>> out{mallocLogged(d.log()),
                                                           environOf(d.pid(), "TESSERA_MALLOC_REEXEC")};
    INFO(d.log());
    CHECK(d.kill(SIGTERM) == 0);
    return out;
  };
  // An operator's own tunables stay; glibc >= 2.35 and a kernel giving huge pages on request only.
  const bool glibcHas = __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35);
  const bool asks = kernelHugePages() && glibcHas;
  const auto [asked, mark] = started("asks", {"GLIBC_TUNABLES=glibc.malloc.perturb=0", "TESSERA_MALLOC_HUGEPAGES=",
                                              "TESSERA_MALLOC_REEXEC="});
  CHECK(asked == (asks ? "keep freed memory, huge pages" : "keep freed memory"));
  CHECK(mark == (asks ? "1" : ""));
  // Told not to, either way: started as it was, and says so.
  const auto [off, offMark] = started("off", {"GLIBC_TUNABLES=glibc.malloc.perturb=0", "TESSERA_MALLOC_HUGEPAGES=0",
                                              "TESSERA_MALLOC_REEXEC="});
  CHECK(off == "keep freed memory");
  CHECK(offMark == "");
  const auto [own, ownMark] = started("own", {"GLIBC_TUNABLES=glibc.malloc.hugetlb=0", "TESSERA_MALLOC_HUGEPAGES=",
                                              "TESSERA_MALLOC_REEXEC="});
  CHECK(own == "keep freed memory");
  CHECK(ownMark == "");
  env.server->stop();
}

TEST_CASE("operability: no log line at steady state (10 idle cycles at the default verbosity)") {
  Env env("idle");
  auto [quiet, quietText] = idleLines(env, "quiet", {});
  INFO(quietText);
  CHECK(quiet == 0);
  // The same idle cycles at --v=2 each log their summary: the count above could have seen them.
  auto [verbose, verboseText] = idleLines(env, "verbose", {"--v=2"});
  INFO(verboseText);
  CHECK(verbose >= 10);
  CHECK(verboseText.find("0 binds, 0 evictions") != std::string::npos);
  env.server->stop();
}

TEST_CASE("operability: fenced leadership: an ex-leader whose renewals paused writes nothing after its deadline") {
  // One cluster, two API servers over it: each replica talks to its own, so every write is known
  // by who sent it. Replica a binds slowly (one worker, answers delayed) with a backlog queued, is
  // paused (SIGSTOP: no renewals, nothing at all) until b has taken the Lease over, then resumes.
  api::SystemClock clock;
  cache::MemoryCluster cluster{clock};
  const fs::path dir = testing::scratchDir("tessera-operability-it");
  {
    const fs::path file = dir / "fenced.yaml";
    std::ofstream(file) << kCluster;
    REQUIRE(app::loadScenarioObjects(file.string(), cluster, clock.now()).ok());
  }
  // Every write a sends, in order, as "verb resource/subresource".
  std::mutex writesMu;
  std::vector<std::string> writesOfA;
  cache::ApiServerOptions oa;
  oa.kubeletPeriodMs = 50;
  oa.onRequest = [&](const cache::ApiRequestRecord& r) {
    if (r.verb == "create" || r.verb == "update" || r.verb == "patch" || r.verb == "delete") {
      std::lock_guard lock(writesMu);
      writesOfA.push_back(r.verb + " " + r.resource + (r.subresource.empty() ? "" : "/" + r.subresource));
    }
  };
  auto writesSince = [&](size_t from) {
    std::lock_guard lock(writesMu);
    return std::vector<std::string>(writesOfA.begin() + static_cast<std::ptrdiff_t>(from), writesOfA.end());
  };
  cache::ApiServer serverA(cluster, oa);
  cache::ApiServerOptions ob;
  cache::ApiServer serverB(cluster, ob);
  REQUIRE(serverA.start().ok());
  REQUIRE(serverB.start().ok());
  auto holder = [&] {
    auto lease = cluster.get(api::Kind::Lease, "default", "tessera");
    return lease.ok() ? (*lease)["spec"].value("holderIdentity", "") : std::string();
  };
  testing::DaemonProcess a(TESSERA_BINARY, dir, serverA.url(), "fenced-a", {"--bind-workers", "1"});
  REQUIRE(eventually([&] { return holder() == "fenced-a"; }));
  testing::DaemonProcess b(TESSERA_BINARY, dir, serverB.url(), "fenced-b");
  REQUIRE(eventually([&] { return b.log().find("cache synced") != std::string::npos; }));

  serverA.delayResponses(300);
  const int pods = 20;
  for (int i = 0; i < pods; ++i) {
    cache::Json p = {{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", "w-" + std::to_string(i)}, {"namespace", "team-a"}}},
                     {"spec",
                      {{"schedulerName", "tessera"},
                       {"containers", {{{"name", "c"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "100m"}}}}}}}}}}};
    REQUIRE(cluster.create(api::Kind::Pod, p).ok());
  }
  auto bound = [&] {
    cache::ListOptions o;
    o.namespace_ = "team-a";
    int n = 0;
    auto listed = cluster.list(api::Kind::Pod, o);  // held: the loop reads its items
    REQUIRE(listed.ok());
    for (const auto& p : listed->items)
      if (p["metadata"].value("name", "").rfind("w-", 0) == 0 && !p["spec"].value("nodeName", "").empty()) ++n;
    return n;
  };
  // a has decided the binds and is working through them, one at a time.
  REQUIRE(eventually([&] { return bound() >= 1; }));
  REQUIRE(bound() < pods);
  a.signal(SIGSTOP);
  const bool tookOver = eventually([&] { return holder() == "fenced-b"; });
  const size_t beforeResume = writesSince(0).size();
  a.signal(SIGCONT);
  INFO(a.log());
  INFO(b.log());
  REQUIRE(tookOver);
  // b binds what a left; a notices that it lost the Lease.
  CHECK(eventually([&] { return bound() == pods; }));
  CHECK(eventually([&] { return a.log().find("lost leadership") != std::string::npos; }));
  // b keeps scheduling for a while (a pod created now is bound by b): a still writes nothing.
  cache::Json late = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata", {{"name", "late"}, {"namespace", "team-a"}}},
                      {"spec",
                       {{"schedulerName", "tessera"},
                        {"containers", {{{"name", "c"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "100m"}}}}}}}}}}};
  REQUIRE(cluster.create(api::Kind::Pod, late).ok());
  CHECK(eventually([&] {
    auto p = cluster.get(api::Kind::Pod, "team-a", "late");
    return p.ok() && !(*p)["spec"].value("nodeName", "").empty();
  }));
  // a dropped its queued binds unsent (counted): without fencing it would resume its queue, one
  // bind (409 by now) and its Event after another.
  const int portA = healthPort(a.log());
  REQUIRE(portA > 0);
  static const std::regex droppedBinds(R"(tessera_writes_dropped_total\{what="bind"\} ([0-9.e+]+))");
  CHECK(eventually([&] {
    const std::string m = httpGet(portA, "/metrics");
    std::smatch match;
    return std::regex_search(m, match, droppedBinds) && std::stod(match[1]) >= 1;
  }));
  // Nothing reached the API server from a after its deadline, except what a thread had already
  // begun at the very instant of SIGSTOP (past its fence check, before the bytes left): one
  // request per thread that writes. a has three: its one bind worker (bindings here: no pod
  // is evicted), the status writer (conditions, Events) and the leader elector (the Lease, whose
  // late update fails on its resourceVersion: b holds the Lease, checked above and below).
  const auto lateWrites = writesSince(beforeResume);
  std::string lateText;
  int byBinder = 0, byStatusWriter = 0, byElector = 0;
  for (const auto& w : lateWrites) {
    lateText += w + "\n";
    if (w.find(" leases") != std::string::npos) ++byElector;
    else if (w.find(" events") != std::string::npos || w.ends_with("/status")) ++byStatusWriter;
    else ++byBinder;
  }
  INFO("writes of a after it resumed:\n" << lateText);
  CHECK(byBinder <= 1);
  CHECK(byStatusWriter <= 1);
  CHECK(byElector <= 1);
  CHECK(holder() == "fenced-b");
  CHECK(a.kill(SIGTERM) == 0);
  CHECK(b.kill(SIGTERM) == 0);
  serverA.stop();
  serverB.stop();
}

TEST_CASE("operability: /metrics serves exactly the metrics documented in docs/operations.md, from the start") {
  // The documented names: the first column of the Metrics table.
  std::ifstream doc(std::string(TESSERA_SOURCE_DIR) + "/docs/operations.md");
  std::stringstream buf;
  buf << doc.rdbuf();
  const std::string text = buf.str();
  const size_t from = text.find("## Metrics");
  REQUIRE(from != std::string::npos);
  const std::string section = text.substr(from, text.find("\n## ", from + 1) - from);
  std::set<std::string> documented;
  static const std::regex row(R"(\n\| `((tessera|process)_[a-z_]+)`)");
  for (std::sregex_iterator it(section.begin(), section.end(), row), end; it != end; ++it) documented.insert((*it)[1]);
  REQUIRE(documented.size() >= 10);

  Env env("metrics");
  auto d = env.daemon("metrics");
  REQUIRE(eventually([&] { return healthPort(d.log()) > 0; }));
  const int port = healthPort(d.log());
  // Scraped as soon as it answers (before the cache has synced, or just after): the series with a
  // fixed label set are there, at zero.
  std::string first;
  REQUIRE(eventually([&] { return !(first = httpGet(port, "/metrics")).empty(); }));
  INFO(first);
  CHECK(std::regex_search(first, std::regex(R"(tessera_binds_total\{result="error"\} 0)")));
  CHECK(std::regex_search(first, std::regex(R"(tessera_writes_dropped_total\{what="status"\} 0)")));
  CHECK(std::regex_search(first, std::regex(R"(tessera_cycle_duration_seconds_count\{phase="total"\} )")));
  CHECK(std::regex_search(first, std::regex(R"(tessera_build_info\{commit="[^"]+",version="[^"]+"\} 1)")));
  CHECK(std::regex_search(first, std::regex(R"(process_start_time_seconds [1-9])")));
  CHECK(std::regex_search(first, std::regex(R"(process_resident_memory_bytes [1-9])")));
  // After a cycle the series keyed by what was seen exist too (a queue with a pending pod, API
  // verbs and codes): every family is there. Compared by name with the table, both ways.
  std::string scrape;
  REQUIRE(eventually([&] { return cycles(scrape = httpGet(port, "/metrics")) >= 1 &&
                                  scrape.find("tessera_pending_pods{") != std::string::npos; }));
  std::set<std::string> served;
  static const std::regex type(R"((^|\n)# TYPE ((tessera|process)_[a-z_]+) )");
  for (std::sregex_iterator it(scrape.begin(), scrape.end(), type), end; it != end; ++it) served.insert((*it)[2]);
  INFO(scrape);
  for (const auto& m : documented) CHECK(served.count(m) == 1);  // documented, not served
  for (const auto& m : served) CHECK(documented.count(m) == 1);  // served, not documented
  CHECK(d.kill(SIGTERM) == 0);
  env.server->stop();
}

TEST_CASE("operability: SIGTERM under a backlog: what is queued goes out within the shutdown grace, the rest is "
          "dropped unsent, and the process exits") {
  Env env("shutdown", /*writeLatencyMs=*/100);
  // 300 pods that fit: 300 binds on 2 workers plus 600 condition and Event writes, each answered
  // 100 ms late, are about a minute of writes; the grace is 1 s.
  env.addLoad(300);
  auto bound = [&] { return env.boundPods(); };
  auto daemon = env.daemon("solo", {"--leader-elect=false", "--bind-workers", "2", "--shutdown-grace", "1s"});
  REQUIRE(eventually([&] { return bound() >= 3; }));  // binds are going out
  const auto t0 = std::chrono::steady_clock::now();
  const int status = daemon.kill(SIGTERM);
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0).count();
  const std::string log = daemon.log();
  INFO(log);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // Bounded by the grace and the requests in flight at its end, not by the backlog (a minute).
  CHECK(took < 20);
  CHECK_THAT(log, Catch::Contains("dropped unsent"));
  CHECK(log.find("dropped unsent") < log.rfind("stopped"));
  CHECK(bound() < 300);  // the rest is the next leader's to decide
}

TEST_CASE(
    "operability: past --max-queued-events new Events are dropped and counted in /metrics; the binds all go "
    "out; a bad value refuses to start") {
  // 60 pods bound by 16 workers while the one status writer takes 50 ms a write: their Scheduled
  // Events come faster than it writes them, and at most 5 may wait.
  Env env("events-dropped", /*writeLatencyMs=*/50);
  env.addLoad(60);
  auto d = env.daemon("events", {"--leader-elect=false", "--max-queued-events", "5"});
  REQUIRE(eventually([&] { return healthPort(d.log()) > 0; }));
  const int port = healthPort(d.log());
  REQUIRE(eventually([&] { return env.boundPods() == 61; }));  // the load and kCluster's pod p
  static const std::regex droppedRe(R"((^|\n)tessera_events_dropped_total ([0-9.e+]+))");
  double dropped = 0;
  std::string scrape;
  REQUIRE(eventually([&] {
    std::smatch m;
    scrape = httpGet(port, "/metrics");
    return std::regex_search(scrape, m, droppedRe) && (dropped = std::stod(m[2])) > 0;
  }));
  INFO(scrape);
  // Said once when the bound is reached, and with the count once the backlog is written.
  REQUIRE(eventually([&] { return d.log().find("Event backlog is written") != std::string::npos; }));
  const std::string log = d.log();
  INFO(log);
  CHECK_THAT(log, Catch::Contains("5 Events wait to be written"));
  CHECK(log.find("dropped until the backlog shrinks") < log.find("Event backlog is written"));
  CHECK(d.kill(SIGTERM) == 0);

  // A value that is not a whole number in range: the daemon says so and exits 1.
  for (const std::string bad : {"-1", "1.5", "many", "20000000"}) {
    auto refused = env.daemon("bad-" + bad, {"--max-queued-events", bad});
    const int status = refused.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 0);
    CHECK_THAT(refused.log(), Catch::Contains("--max-queued-events: must be a whole number"));
  }
  env.server->stop();
}
