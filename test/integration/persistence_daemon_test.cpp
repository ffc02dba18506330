// `tessera run` (a child process) against the test API server, killed with SIGKILL and started
// again, or reloaded with SIGHUP (issue 17, item 5): what the scheduler remembers across cycles
// survives both.
//  - time-aware usage: the history the first daemon saved to its ConfigMap is restored by the
//    second, so a queue that held the cluster before the crash gets less after it (the split
//    without a crash; with an empty history it would be an equal one); and a SIGHUP reload, which
//    rebuilds every plugin object, keeps the history;
//  - the stale-gang timer: the tessera.dev/stale-since annotation the first daemon wrote is the one
//    the second evicts by (never rewritten, so the deadline is the original one, not gracePeriod
//    after the restart).
// Waits poll the cluster with generous deadlines as a safety net only; nothing asserts on
// wall-clock speed (the one time comparison is a lower bound: no eviction before the deadline).
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>

#include "support/daemon_process.h"
#include "tessera/api/convert.h"
#include "tessera/app/run.h"
#include "tessera/cache/http_server.h"
#include "tessera/framework/state.h"

using namespace tessera;  // NOLINT(google-build-using-namespace)
using cache::Json;
using testing::eventually;
namespace fs = std::filesystem;

namespace {

fs::path dir() {
  static fs::path d = testing::scratchDir("tessera-persist-it");
  return d;
}

/// `tessera run` with its own config file (after the helper's, so it wins) and no leader election.
struct Daemon : testing::DaemonProcess {
  Daemon(const std::string& url, const std::string& identity, const std::string& config)
      : testing::DaemonProcess(TESSERA_BINARY, dir(), url, identity, flags(identity, config)) {}
  static std::vector<std::string> flags(const std::string& identity, const std::string& config) {
    const fs::path file = dir() / ("config-" + identity + ".yaml");
    std::ofstream(file) << config;
    return {"--leader-elect=false", "--usage-configmap", "default/tessera-usage", "--config", file.string()};
  }
};

std::string queueYaml(const std::string& name) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: " + name +
         "}\nspec:\n  resources:\n    gpu: {quota: \"0\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
         "    cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
         "    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";
}

std::string nodeYaml(const std::string& name, int gpus) {
  return "apiVersion: v1\nkind: Node\nmetadata: {name: " + name +
         "}\nstatus:\n  allocatable: {cpu: \"64\", "
         "memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"" +
         std::to_string(gpus) + "\"}\n  conditions: [{type: Ready, status: \"True\"}]\n---\n";
}

std::string podYaml(const std::string& name, const std::string& ns, const std::string& extraSpec = "",
                    const std::string& group = "") {
  std::string y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
                  "\n  labels: {tessera.dev/queue: " + ns + "}\n";
  if (!group.empty()) y += "  annotations: {pod-group-name: " + group + "}\n";
  return y + "spec:\n  schedulerName: tessera\n" + extraSpec +
         "  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\", nvidia.com/gpu: \"1\"}, "
         "limits: {nvidia.com/gpu: \"1\"}}}]\n---\n";
}

void create(cache::MemoryCluster& cluster, const std::string& yaml) { testing::createObjects(cluster, yaml); }

std::string nodeOf(cache::MemoryCluster& cluster, const std::string& ns, const std::string& name) {
  auto p = cluster.get(api::Kind::Pod, ns, name);
  return p.ok() ? (*p)["spec"].value("nodeName", "") : "";
}

bool running(cache::MemoryCluster& cluster, const std::string& ns, const std::string& name) {
  auto p = cluster.get(api::Kind::Pod, ns, name);
  return p.ok() && (*p).value("status", Json::object()).value("phase", "") == "Running";
}

/// The time-aware history the daemon last saved (ConfigMap default/tessera-usage); nullopt before
/// the first save or when it does not read back.
std::optional<framework::UsageHistory> savedHistory(cache::MemoryCluster& cluster) {
  auto cm = cluster.get(api::Kind::ConfigMap, "default", "tessera-usage");
  if (!cm.ok()) return std::nullopt;
  const Json parsed = Json::parse((*cm)["data"].value("usage.json", ""), nullptr, false);
  if (parsed.is_discarded()) return std::nullopt;
  auto h = framework::UsageHistory::fromJson(parsed);
  if (!h.ok() || !h->last()) return std::nullopt;
  return std::move(h).value();
}

/// team-a's usage of the GPUs in a saved history, up to its last sample (window 1 h, no decay).
double usageOfA(framework::UsageHistory& h) {
  auto u = h.usage(h.last()->at, api::Duration{3'600'000}, api::Duration{0});
  return u.count("team-a") ? u["team-a"][0] : 0;
}

/// Of the new pods a-2, a-3 (team-a) and b-2, b-3 (team-b): how many are bound.
int boundNew(cache::MemoryCluster& cluster) {
  int n = 0;
  for (const char* p : {"a-2", "a-3"}) n += !nodeOf(cluster, "team-a", p).empty();
  for (const char* p : {"b-2", "b-3"}) n += !nodeOf(cluster, "team-b", p).empty();
  return n;
}

/// The decision of a scheduler that kept team-a's history: team-b gets both GPUs, team-a none.
void checkTeamBGetsBoth(cache::MemoryCluster& cluster) {
  CHECK(nodeOf(cluster, "team-b", "b-2") == "gpu-1");
  CHECK(nodeOf(cluster, "team-b", "b-3") == "gpu-1");
  CHECK(nodeOf(cluster, "team-a", "a-2").empty());
  CHECK(nodeOf(cluster, "team-a", "a-3").empty());
}

}  // namespace

TEST_CASE("persistence: kill -9, restart: the time-aware usage history is restored, same split as without") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  create(cluster, nodeYaml("gpu-1", 2) + queueYaml("team-a") + queueYaml("team-b") + podYaml("a-0", "team-a") +
                      podYaml("a-1", "team-a"));
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  const std::string config =
      "schedulePeriod: 200ms\nplugins:\n  timeaware: {enabled: true, windowSize: 1h, kValue: 1.0, saveInterval: 1s}\n";

  auto first = std::make_unique<Daemon>(server.url(), "first", config);
  REQUIRE(eventually([&] { return running(cluster, "team-a", "a-0") && running(cluster, "team-a", "a-1"); }));
  // Wait for a save that shows team-a holding the whole cluster (its usage 1.0 of the GPUs).
  {
    const bool saved = eventually([&] {
      auto h = savedHistory(cluster);
      return h && usageOfA(*h) > 0.99;
    });
    INFO(first->log());
    REQUIRE(saved);
  }
  first->kill(SIGKILL);
  first.reset();

  // While no scheduler runs, team-a's pods finish and both queues ask for two GPUs (team-a first).
  REQUIRE(cluster.finishPod("team-a", "a-0", true).ok());
  REQUIRE(cluster.finishPod("team-a", "a-1", true).ok());
  create(cluster,
         podYaml("a-2", "team-a") + podYaml("a-3", "team-a") + podYaml("b-2", "team-b") + podYaml("b-3", "team-b"));
  Daemon second(server.url(), "second", config);
  const bool placed = eventually([&] { return boundNew(cluster) == 2; });
  INFO(second.log());
  REQUIRE(placed);
  CHECK(second.log().find("time-aware usage history restored") != std::string::npos);
  // With the history, team-a (usage 1.0, over-quota weight max(0, 0.5 + (0.5 - 1.0)) = 0) gets
  // nothing and team-b both GPUs: what a scheduler that never restarted decides (the shared
  // scenario timeaware/idle-queue-first). An empty history would split them one each.
  checkTeamBGetsBoth(cluster);
  CHECK(second.kill(SIGTERM) == 0);
  server.stop();
}

TEST_CASE("persistence: SIGHUP config reload keeps the time-aware history: same split as without") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  create(cluster, nodeYaml("gpu-1", 2) + queueYaml("team-a") + queueYaml("team-b") + podYaml("a-0", "team-a") +
                      podYaml("a-1", "team-a"));
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  // k = 10: team-a, which held the cluster for most of the recorded time, gets no over-quota share
  // (max(0, 0.5 + 10 (0.5 - U)) = 0 for any U above 0.55).
  const std::string config =
      "schedulePeriod: 200ms\nplugins:\n  timeaware: {enabled: true, windowSize: 1h, kValue: 10, saveInterval: 1s}\n";
  Daemon d(server.url(), "reload", config);
  REQUIRE(eventually([&] { return running(cluster, "team-a", "a-0") && running(cluster, "team-a", "a-1"); }));
  // team-a holds both GPUs for a while: until a saved history spans at least 8 s with team-a at 100%.
  {
    const bool held = eventually([&] {
      auto h = savedHistory(cluster);
      return h && !h->buckets().empty() && h->last()->at.unixMillis - h->buckets().front().from >= 8000 &&
             usageOfA(*h) > 0.99;
    });
    INFO(d.log());
    REQUIRE(held);
  }
  // team-a's pods finish; the new pods wait for a node label that only comes after the reload.
  REQUIRE(cluster.finishPod("team-a", "a-0", true).ok());
  REQUIRE(cluster.finishPod("team-a", "a-1", true).ok());
  const std::string open = "  nodeSelector: {pool: open}\n";
  create(cluster, podYaml("a-2", "team-a", open) + podYaml("a-3", "team-a", open) + podYaml("b-2", "team-b", open) +
                      podYaml("b-3", "team-b", open));
  // The reload rebuilds every plugin object; the history is the scheduler's and stays.
  d.signal(SIGHUP);
  REQUIRE(eventually([&] { return d.log().find("config reloaded") != std::string::npos; }));
  REQUIRE(cluster
              .patch(api::Kind::Node, "", "gpu-1", cache::PatchType::Merge,
                     Json{{"metadata", {{"labels", {{"pool", "open"}}}}}})
              .ok());
  const bool placed = eventually([&] { return boundNew(cluster) == 2; });
  INFO(d.log());
  REQUIRE(placed);
  // As without the reload: team-b gets both GPUs. A history reset by the reload would give each
  // queue U = 0 and one GPU each.
  checkTeamBGetsBoth(cluster);
  CHECK(d.kill(SIGTERM) == 0);
  server.stop();
}

TEST_CASE(
    "persistence: kill -9, restart: a stale gang is evicted by its original stale-since, not grace after the restart") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  create(cluster, nodeYaml("gpu-1", 8) + queueYaml("team") +
                      "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\n"
                      "metadata: {name: train, namespace: team}\nspec: {minMember: 3, queue: team}\n---\n" +
                      podYaml("train-0", "team", "  nodeName: gpu-1\n", "train") +
                      podYaml("train-1", "team", "  nodeName: gpu-1\n", "train") +
                      podYaml("train-2", "team", "  nodeSelector: {pool: nowhere}\n", "train"));
  // Every value the annotation takes, and when train-0 is first seen evicted (terminating or gone).
  std::mutex mu;
  std::set<std::string> values;
  std::optional<api::Time> evictedAt;
  auto listed = cluster.list(api::Kind::PodGroup);
  REQUIRE(listed.ok());
  auto pgWatch = cluster.watch(api::Kind::PodGroup, listed->resourceVersion, [&](const cache::WatchEvent& ev) {
    const Json ann = ev.object.value("metadata", Json::object()).value("annotations", Json::object());
    std::lock_guard lock(mu);
    if (ann.contains("tessera.dev/stale-since")) values.insert(ann["tessera.dev/stale-since"].get<std::string>());
  });
  REQUIRE(pgWatch.ok());
  auto pods = cluster.list(api::Kind::Pod);
  REQUIRE(pods.ok());
  auto podWatch = cluster.watch(api::Kind::Pod, pods->resourceVersion, [&](const cache::WatchEvent& ev) {
    if (ev.object["metadata"].value("name", "") != "train-0") return;
    if (ev.type != cache::WatchEventType::Deleted && !ev.object["metadata"].contains("deletionTimestamp")) return;
    std::lock_guard lock(mu);
    if (!evictedAt) evictedAt = clock.now();
  });
  REQUIRE(podWatch.ok());
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  const api::Duration grace{6000};
  const std::string config = "schedulePeriod: 200ms\nactionArgs:\n  stalegangeviction: {gracePeriod: 6s}\n";

  auto first = std::make_unique<Daemon>(server.url(), "stale-first", config);
  auto annotation = [&]() -> std::string {
    auto pg = cluster.get(api::Kind::PodGroup, "team", "train");
    if (!pg.ok()) return "";
    return (*pg)["metadata"].value("annotations", Json::object()).value("tessera.dev/stale-since", "");
  };
  {
    const bool written = eventually([&] { return !annotation().empty(); });
    INFO(first->log());
    REQUIRE(written);
  }
  const std::string since = annotation();
  auto sinceTime = api::parseTime(since);
  REQUIRE(sinceTime.ok());
  // Restart at least two seconds later, so that a timer restarted by the second daemon would show
  // as another value of the annotation (it holds whole seconds).
  REQUIRE(eventually([&] { return clock.now() - *sinceTime >= api::Duration{2000}; }));
  first->kill(SIGKILL);
  first.reset();
  {
    std::lock_guard lock(mu);
    REQUIRE_FALSE(evictedAt);  // the first daemon did not get to the deadline
  }
  Daemon second(server.url(), "stale-second", config);
  const bool evicted = eventually([&] {
    std::lock_guard lock(mu);
    return evictedAt.has_value();
  });
  INFO(second.log());
  REQUIRE(evicted);
  {
    std::lock_guard lock(mu);  // released before the watches stop: their callbacks take it
    // The second daemon evicted by the first one's timer: never rewritten, and not before its deadline.
    CHECK(values == std::set<std::string>{since});
    CHECK(*evictedAt - *sinceTime >= grace);
  }
  (*pgWatch)->stop();
  (*podWatch)->stop();
  CHECK(second.kill(SIGTERM) == 0);
  server.stop();
}
