// `tessera run` (a child process) against the test API server: shared scenarios end to end, the
// same final state under each injected fault, kill -9 and restart without double binds, and two
// replicas with leader election. Waits poll the cluster with generous deadlines as a safety net
// only; nothing asserts on wall-clock time.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "support/daemon_process.h"
#include "tessera/api/convert.h"
#include "tessera/app/run.h"
#include "tessera/cache/http_server.h"


using namespace tessera;
using cache::Json;

namespace {

namespace fs = std::filesystem;

fs::path tempDir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("tessera-it-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

/// `tessera run` against the test server at `url` (test/support/daemon_process.h).
struct DaemonProcess : testing::DaemonProcess {
  DaemonProcess(const std::string& url, const std::string& identity, std::vector<std::string> extra = {})
      : testing::DaemonProcess(TESSERA_BINARY, tempDir(), url, identity, std::move(extra)) {}
};
using testing::eventually;

std::map<std::string, std::string> podNodes(cache::MemoryCluster& cluster) {
  std::map<std::string, std::string> out;
  auto pods = cluster.list(api::Kind::Pod);
  REQUIRE(pods.ok());
  for (const auto& p : pods->items) {
    const std::string ns = p["metadata"].value("namespace", "");
    if (ns == "tessera-reservation") continue;
    out[ns + "/" + p["metadata"].value("name", "")] = p["spec"].value("nodeName", "");
  }
  return out;
}

bool unschedulableReported(cache::MemoryCluster& cluster, const std::string& ref) {
  auto slash = ref.find('/');
  auto p = cluster.get(api::Kind::Pod, ref.substr(0, slash), ref.substr(slash + 1));
  if (!p.ok() || !p->contains("status") || !(*p)["status"].contains("conditions")) return false;
  for (const auto& c : (*p)["status"]["conditions"])
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return true;
  return false;
}

/// The final `bound` and `pending` expectations of a shared scenario (its last expect).
struct Expected {
  std::map<std::string, std::string> bound;
  std::vector<std::string> pending;
};

Expected expectedOf(const std::string& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto docs = api::yamlToJson(ss.str());
  REQUIRE(docs.ok());
  const Json& doc = docs->front();
  Json expect;
  if (doc.contains("expect")) expect = doc["expect"];
  if (doc.contains("steps"))
    for (const auto& s : doc["steps"])
      if (s.contains("expect")) expect = s["expect"];
  Expected e;
  if (expect.contains("bound"))
    for (const auto& [k, v] : expect["bound"].items()) e.bound[k] = v.get<std::string>();
  if (expect.contains("pending"))
    for (const auto& p : expect["pending"]) e.pending.push_back(p.get<std::string>());
  return e;
}

enum class Fault { None, WatchDrop, Gone, Burst500, Burst429, Slow };
const char* name(Fault f) {
  switch (f) {
    case Fault::None: return "none";
    case Fault::WatchDrop: return "watch drop";
    case Fault::Gone: return "410 Gone";
    case Fault::Burst500: return "500 burst";
    case Fault::Burst429: return "429 burst";
    case Fault::Slow: return "slow responses";
  }
  return "?";
}

/// Runs one scenario's objects through a daemon under `fault`; returns the final pod -> node map.
std::map<std::string, std::string> runScenario(const std::string& file, Fault fault) {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  REQUIRE(app::loadScenarioObjects(file, cluster, clock.now()).ok());
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  so.bookmarkIntervalMs = 100;
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  if (fault == Fault::Burst500) server.failNextRequests(12, 500);
  if (fault == Fault::Burst429) server.failNextRequests(12, 429, {}, 0);  // Retry-After, as APF sends
  if (fault == Fault::Slow) server.delayResponses(30);
  const Expected want = expectedOf(file);
  DaemonProcess daemon(server.url(), "solo", {"--leader-elect=false"});
  if (fault == Fault::WatchDrop || fault == Fault::Gone) {
    REQUIRE(eventually([&] { return server.openWatches() >= 6; }));
    if (fault == Fault::Gone) server.compact();
    server.dropWatches();
  }
  const bool settled = eventually([&] {
    auto nodes = podNodes(cluster);
    for (const auto& [ref, node] : want.bound) {
      auto it = nodes.find(ref);
      if (it == nodes.end() || it->second.empty()) return false;
    }
    for (const auto& ref : want.pending)
      if (!unschedulableReported(cluster, ref)) return false;
    return true;
  });
  INFO("scenario " << file << ", fault " << name(fault) << "\n" << daemon.log());
  REQUIRE(settled);
  auto nodes = podNodes(cluster);
  for (const auto& [ref, node] : want.bound)
    if (node != "*") CHECK(nodes[ref] == node);
  for (const auto& ref : want.pending) CHECK(nodes[ref].empty());
  CHECK(daemon.kill(SIGTERM) == 0);  // graceful exit 0
  server.stop();
  return nodes;
}

/// How many pods of each workload (the pod name without its trailing "-N") are on each node ("" for
/// pending). Pods of one gang are interchangeable: which of them takes the smaller node follows the
/// task order, whose last tie-break (uids) differs from run to run.
std::map<std::string, int> placementShape(const std::map<std::string, std::string>& nodes) {
  std::map<std::string, int> shape;
  for (const auto& [ref, node] : nodes) {
    std::string workload = ref;
    const auto dash = workload.find_last_of('-');
    if (dash != std::string::npos && dash + 1 < workload.size() &&
        workload.find_first_not_of("0123456789", dash + 1) == std::string::npos)
      workload.resize(dash);
    ++shape[workload + " on " + (node.empty() ? "(pending)" : node)];
  }
  return shape;
}

Json gpuNode(const std::string& name, int gpus) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}}},
              {"status",
               {{"allocatable", {{"cpu", "256"}, {"memory", "2Ti"}, {"pods", "500"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json gpuPod(const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "default"}}},
              {"spec",
               {{"schedulerName", "tessera"},
                {"containers",
                 {{{"name", "c"},
                   {"image", "x"},
                   {"resources",
                    {{"requests", {{"cpu", "100m"}, {"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
}

/// Pods without a queue label go to queue "default", which must exist.
Json defaultQueue() {
  const Json unlimited = {{"quota", "-1"}, {"limit", "-1"}, {"overQuotaWeight", "1"}};
  return Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
              {"kind", "Queue"},
              {"metadata", {{"name", "default"}}},
              {"spec", {{"resources", {{"gpu", unlimited}, {"cpu", unlimited}, {"memory", unlimited}}}}}};
}

}  // namespace

TEST_CASE("daemon: shared scenarios end to end, same final state under every fault") {
  const std::string dir = TESSERA_SHARED_DIR "/scenarios/";
  if (!fs::exists(dir)) {
    WARN("shared scenarios not found at " << dir);
    return;
  }
  for (const char* s : {"gang/spread-across-nodes.yaml", "gang/competing-gangs.yaml", "gang/all-or-nothing.yaml",
                        "predicates/taints-tolerations.yaml", "predicates/node-selector-affinity.yaml",
                        "pipelining/terminating-pod.yaml"}) {
    const std::string file = dir + s;
    const auto clean = placementShape(runScenario(file, Fault::None));
    for (Fault f : {Fault::WatchDrop, Fault::Gone, Fault::Burst500, Fault::Burst429, Fault::Slow}) {
      INFO("scenario " << s << ", fault " << name(f));
      CHECK(placementShape(runScenario(file, f)) == clean);
    }
  }
}

TEST_CASE("daemon: kill -9 in the middle of a load, restart: nothing bound twice, everything bound") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  REQUIRE(cluster.create(api::Kind::Queue, defaultQueue()).ok());
  for (int i = 0; i < 50; ++i) REQUIRE(cluster.create(api::Kind::Node, gpuNode("n" + std::to_string(i), 40)).ok());
  cache::ApiServerOptions so;
  so.threads = 2;
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());

  // Count binds per pod as the server sees them: a second bind of one pod would be a 409 there,
  // so double binding shows up as a pod whose nodeName changed; record every node a pod ever had.
  std::mutex mu;
  std::map<std::string, std::set<std::string>> nodesSeen;
  auto listed = cluster.list(api::Kind::Pod);
  REQUIRE(listed.ok());
  auto watch = cluster.watch(api::Kind::Pod, listed->resourceVersion, [&](const cache::WatchEvent& ev) {
    const std::string node = ev.object["spec"].value("nodeName", "");
    if (node.empty()) return;
    std::lock_guard lock(mu);
    nodesSeen[ev.object["metadata"].value("name", "")].insert(node);
  });
  REQUIRE(watch.ok());

  const int kPods = 2000;
  auto first = std::make_unique<DaemonProcess>(server.url(), "first", std::vector<std::string>{"--leader-elect=false"});
  for (int i = 0; i < kPods; ++i) REQUIRE(cluster.create(api::Kind::Pod, gpuPod("p" + std::to_string(i))).ok());
  auto boundCount = [&] {
    int n = 0;
    for (const auto& [ref, node] : podNodes(cluster)) n += !node.empty();
    return n;
  };
  // Kill it without any cleanup once it has bound some but (very likely) not all.
  REQUIRE(eventually([&] { return boundCount() > 0; }));
  first->kill(SIGKILL);
  first.reset();
  const int boundAtKill = boundCount();
  DaemonProcess second(server.url(), "second", {"--leader-elect=false"});
  REQUIRE(eventually([&] { return boundCount() == kPods; }, 300, 250));
  INFO("bound when killed: " << boundAtKill);
  std::lock_guard lock(mu);
  for (const auto& [pod, nodes] : nodesSeen) {
    INFO(pod);
    CHECK(nodes.size() == 1);
  }
  CHECK(nodesSeen.size() == static_cast<size_t>(kPods));
  (*watch)->stop();
  second.kill(SIGTERM);
  server.stop();
}

TEST_CASE("daemon: two replicas with leader election; the other takes over when the leader dies") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  REQUIRE(cluster.create(api::Kind::Queue, defaultQueue()).ok());
  REQUIRE(cluster.create(api::Kind::Node, gpuNode("n0", 100)).ok());
  cache::ApiServer server(cluster);
  REQUIRE(server.start().ok());
  auto a = std::make_unique<DaemonProcess>(server.url(), "replica-a");
  auto b = std::make_unique<DaemonProcess>(server.url(), "replica-b");
  auto holder = [&]() -> std::string {
    auto l = cluster.get(api::Kind::Lease, "default", "tessera");
    return l.ok() ? (*l)["spec"].value("holderIdentity", "") : "";
  };
  REQUIRE(eventually([&] { return !holder().empty(); }));
  const std::string leader = holder();
  REQUIRE(cluster.create(api::Kind::Pod, gpuPod("before")).ok());
  REQUIRE(eventually([&] { return !podNodes(cluster)["default/before"].empty(); }));
  // Exactly one scheduled: only the leader logs that it leads.
  const bool aLeads = leader == "replica-a";
  CHECK((a->log().find("became leader") != std::string::npos) == aLeads);
  CHECK((b->log().find("became leader") != std::string::npos) == !aLeads);

  // Kill the leader without releasing the lease: the other takes over once it expires.
  (aLeads ? a : b)->kill(SIGKILL);
  REQUIRE(cluster.create(api::Kind::Pod, gpuPod("after")).ok());
  REQUIRE(eventually([&] { return !podNodes(cluster)["default/after"].empty(); }));
  CHECK(holder() == (aLeads ? "replica-b" : "replica-a"));
  auto l = cluster.get(api::Kind::Lease, "default", "tessera");
  REQUIRE(l.ok());
  CHECK((*l)["spec"].value("leaseTransitions", 0) == 1);
  a.reset();
  b.reset();
  server.stop();
}

TEST_CASE("daemon: config reload on SIGHUP; a bad reload keeps running; a bad config refuses to start") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  REQUIRE(cluster.create(api::Kind::Queue, defaultQueue()).ok());
  REQUIRE(cluster.create(api::Kind::Node, gpuNode("n0", 8)).ok());
  cache::ApiServer server(cluster);
  REQUIRE(server.start().ok());
  const fs::path cfg = tempDir() / "reload.yaml";
  std::ofstream(cfg, std::ios::trunc) << "schedulePeriod: 200ms\n";
  {
    DaemonProcess d(server.url(), "reload", {"--leader-elect=false", "--config", cfg.string()});
    REQUIRE(cluster.create(api::Kind::Pod, gpuPod("first")).ok());
    REQUIRE(eventually([&] { return !podNodes(cluster)["default/first"].empty(); }));

    std::ofstream(cfg, std::ios::trunc) << "schedulePeriod: 200ms\nplugins: {nodeorder: {node: fullest}}\n";
    d.signal(SIGHUP);
    REQUIRE(eventually([&] { return d.log().find("config reload rejected") != std::string::npos; }));
    CHECK_THAT(d.log(), Catch::Contains("config.plugins.nodeorder.node"));
    // Still scheduling, on the old config.
    REQUIRE(cluster.create(api::Kind::Pod, gpuPod("second")).ok());
    REQUIRE(eventually([&] { return !podNodes(cluster)["default/second"].empty(); }));

    // A good file is picked up when it changes, without a signal too.
    std::ofstream(cfg, std::ios::trunc) << "schedulePeriod: 100ms\nplugins: {nodeorder: {node: spread}}\n";
    REQUIRE(eventually([&] { return d.log().find("config reloaded from") != std::string::npos; }));
    REQUIRE(cluster.create(api::Kind::Pod, gpuPod("third")).ok());
    REQUIRE(eventually([&] { return !podNodes(cluster)["default/third"].empty(); }));
    CHECK(d.kill(SIGTERM) == 0);
  }
  {
    std::ofstream(cfg, std::ios::trunc) << "schedulPeriod: 1s\n";
    DaemonProcess d(server.url(), "bad-config", {"--leader-elect=false", "--config", cfg.string()});
    const int status = d.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK_THAT(d.log(), Catch::Contains("config: unknown key \"schedulPeriod\""));
  }
  server.stop();
}

TEST_CASE("daemon: PodGroup and Queue status over HTTP (status subresource), invalid objects get reasons") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  REQUIRE(cluster.create(api::Kind::Queue, defaultQueue()).ok());
  REQUIRE(cluster.create(api::Kind::Node, gpuNode("n0", 8)).ok());
  auto group = [](const std::string& name, int minMember) {
    return Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                {"kind", "PodGroup"},
                {"metadata", {{"name", name}, {"namespace", "default"}}},
                {"spec", {{"minMember", minMember}, {"queue", "default"}}}};
  };
  REQUIRE(cluster.create(api::Kind::PodGroup, group("good", 2)).ok());
  REQUIRE(cluster.create(api::Kind::PodGroup, group("zero", 0)).ok());
  for (const char* name : {"good-0", "good-1", "zero-0"}) {
    Json p = gpuPod(name);
    p["metadata"]["annotations"] = {{"pod-group-name", std::string(name).substr(0, std::string(name).find('-'))}};
    REQUIRE(cluster.create(api::Kind::Pod, p).ok());
  }
  cache::ApiServer server(cluster);
  REQUIRE(server.start().ok());
  DaemonProcess d(server.url(), "status", {"--leader-elect=false"});
  auto condition = [&](api::Kind kind, const std::string& ns, const std::string& name, const std::string& type) {
    auto o = cluster.get(kind, ns, name);
    if (!o.ok() || !o->contains("status")) return Json();
    for (const auto& c : (*o)["status"].value("conditions", Json::array()))
      if (c.value("type", "") == type) return c;
    return Json();
  };
  REQUIRE(eventually([&] {
    auto pg = cluster.get(api::Kind::PodGroup, "default", "good");
    return pg.ok() && pg->contains("status") && (*pg)["status"].value("phase", "") == "Running";
  }));
  REQUIRE(eventually([&] { return !condition(api::Kind::PodGroup, "default", "zero", "Valid").is_null(); }));
  Json valid = condition(api::Kind::PodGroup, "default", "zero", "Valid");
  CHECK(valid.value("status", "") == "False");
  CHECK(valid.value("reason", "") == "InvalidSpec");
  CHECK_THAT(valid.value("message", ""), Catch::Contains("spec.minMember: must be at least 1, got 0"));
  REQUIRE(eventually([&] { return !condition(api::Kind::Queue, "", "default", "Valid").is_null(); }));
  CHECK(condition(api::Kind::Queue, "", "default", "Valid").value("status", "") == "True");
  REQUIRE(eventually([&] {
    auto q = cluster.get(api::Kind::Queue, "", "default");
    return q.ok() && (*q)["status"].value("allocated", Json::object()).value("nvidia.com/gpu", "") == "2";
  }));
  CHECK(d.kill(SIGTERM) == 0);
  server.stop();
}
