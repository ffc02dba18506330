// Operating `tessera run` (a child process) against the test API server: what it logs at steady
// state, and what /metrics serves. Waits poll with generous deadlines as a safety net only.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "support/daemon_process.h"
#include "tessera/app/run.h"
#include "tessera/cache/http_server.h"

using namespace tessera;
using testing::eventually;

namespace {

namespace fs = std::filesystem;

/// Two nodes, one pod bound at the first cycle: afterwards every cycle is idle.
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
)";

struct Env {
  api::SystemClock clock;
  cache::MemoryCluster cluster{clock};
  std::unique_ptr<cache::ApiServer> server;
  fs::path dir = testing::scratchDir("tessera-operability-it");

  explicit Env(const std::string& name) {
    const fs::path file = dir / (name + ".yaml");
    std::ofstream(file) << kCluster;
    REQUIRE(app::loadScenarioObjects(file.string(), cluster, clock.now()).ok());
    cache::ApiServerOptions so;
    so.kubeletPeriodMs = 50;
    server = std::make_unique<cache::ApiServer>(cluster, so);
    REQUIRE(server->start().ok());
  }
  testing::DaemonProcess daemon(const std::string& identity, std::vector<std::string> extra = {}) {
    return testing::DaemonProcess(TESSERA_BINARY, dir, server->url(), identity, std::move(extra));
  }
};

/// The port the daemon logged for /metrics ("health and metrics on 127.0.0.1:PORT"); 0 before.
int healthPort(const std::string& log) {
  std::smatch m;
  static const std::regex re("health and metrics on [0-9.]+:([0-9]+)");
  return std::regex_search(log, m, re) ? std::stoi(m[1]) : 0;
}

/// GET http://127.0.0.1:port/path: the body, or "" when it cannot be read.
std::string httpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
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
  const size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
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

}  // namespace

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
