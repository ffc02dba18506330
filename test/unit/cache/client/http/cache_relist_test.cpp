// The cache over the HTTP client: a dropped watch resumes, a compacted one relists and reconciles.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "tessera/cache/cache.h"
#include "tessera/cache/http_client.h"
#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"

using namespace tessera;
using namespace tessera::cache;

namespace {

Json node(const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}}},
              {"status", {{"allocatable", {{"cpu", "8"}, {"memory", "32Gi"}, {"pods", "110"}}},
                          {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json topology(const std::string& name) {
  return Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
              {"kind", "Topology"},
              {"metadata", {{"name", name}}},
              {"spec", {{"levels", {{{"nodeLabel", "kubernetes.io/hostname"}}}}}}};
}

std::vector<std::string> nodeNames(const Snapshot& s) {
  std::vector<std::string> out;
  for (const auto& n : s.nodes) out.push_back(n->name);
  return out;
}

/// Polls the cache (snapshot() applies what the watch delivered) until `want` holds; the deadline
/// is only a safety net against a hang.
template <class Pred>
bool eventually(Cache& cache, Pred want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (want(*cache.snapshot())) return true;
    std::this_thread::yield();
  }
  return false;
}

/// A client of `url` that retries and reconnects at once (no rate limit, 1 ms backoff).
std::unique_ptr<ClusterClient> fastClient(const std::string& url) {
  RestConfig rc;
  rc.server = url;
  HttpClientOptions o;
  o.qps = 0;
  o.retryInitialMs = 1;
  o.watchReconnectInitialMs = 1;
  o.watchReconnectMaxMs = 20;
  auto client = makeHttpClient(rc, o);
  REQUIRE(client.ok());
  return std::move(client).value();
}

}  // namespace

TEST_CASE("cache over http: drop -> resume; compaction -> relist with deletes reconciled") {
  api::SystemClock clock;
  MemoryCluster cluster(clock);
  ApiServer server(cluster);
  REQUIRE(server.start().ok());
  auto client = fastClient(server.url());
  for (const char* n : {"a", "b", "c"}) REQUIRE(cluster.create(api::Kind::Node, node(n)).ok());

  CacheOptions co;
  co.listPageSize = 2;  // the initial list takes two pages
  co.relistRetry = api::Duration{1};
  Cache cache(*client, clock, co);
  REQUIRE(cache.start().ok());
  CHECK(cache.synced());
  CHECK(nodeNames(*cache.snapshot()) == std::vector<std::string>{"a", "b", "c"});

  // A dropped stream resumes from its last RV: the write made meanwhile arrives, no relist.
  server.dropWatches();
  REQUIRE(cluster.create(api::Kind::Node, node("d")).ok());
  REQUIRE(eventually(cache, [](const Snapshot& s) { return nodeNames(s).size() == 4; }));
  CHECK(cache.relists() == 0);

  // Compaction while the streams are down: the resumed watches get 410, the cache relists; the
  // node deleted meanwhile disappears and the one created appears.
  server.dropWatches();
  REQUIRE(cluster.remove(api::Kind::Node, "", "b").ok());
  REQUIRE(cluster.create(api::Kind::Node, node("e")).ok());
  server.compact();
  server.dropWatches();
  REQUIRE(eventually(cache, [](const Snapshot& s) {
    return nodeNames(s) == std::vector<std::string>{"a", "c", "d", "e"};
  }));
  // The new watch works: later events still arrive.
  REQUIRE(cluster.create(api::Kind::Node, node("f")).ok());
  REQUIRE(eventually(cache, [](const Snapshot& s) { return nodeNames(s).size() == 5; }));
  cache.stop();
  server.stop();
}

TEST_CASE("cache: an Error event on the embedded cluster's watch relists too") {
  api::FakeClock clock(api::Time{1'700'000'000'000});
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(api::Kind::Node, node("a")).ok());
  Cache cache(cluster, clock);
  REQUIRE(cache.start().ok());
  REQUIRE(cluster.create(api::Kind::Node, node("b")).ok());
  // Pretend the watch said 410 (the embedded cluster never does by itself).
  cache.applyEvent(api::Kind::Node, WatchEvent{WatchEventType::Error, Json{{"code", 410}}});
  CHECK(nodeNames(*cache.snapshot()) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("cache over http: an optional kind the server does not serve (Topology CRD absent) is picked up later") {
  api::SystemClock clock;
  MemoryCluster cluster(clock);
  ApiServer server(cluster);
  REQUIRE(server.start().ok());
  server.setServed(api::Kind::Topology, false);  // as a real server without the Topology CRD
  auto client = fastClient(server.url());
  REQUIRE(cluster.create(api::Kind::Node, node("a")).ok());

  CacheOptions co;
  co.relistRetry = api::Duration{1};
  Cache cache(*client, clock, co);
  // The cache starts (and the daemon becomes ready) without topologies...
  REQUIRE(cache.start().ok());
  CHECK(cache.synced());
  CHECK(nodeNames(*cache.snapshot()) == std::vector<std::string>{"a"});
  CHECK(cache.snapshot()->topologies.empty());
  // ...while a required kind the server does not serve still fails the start.
  {
    server.setServed(api::Kind::Queue, false);
    Cache strict(*client, clock, co);
    auto st = strict.start();
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("queues") != std::string::npos);
    server.setServed(api::Kind::Queue, true);
  }
  // The CRD is installed and a Topology created: the cache lists and watches it.
  REQUIRE(cluster.create(api::Kind::Topology, topology("dc")).ok());
  server.setServed(api::Kind::Topology, true);
  REQUIRE(eventually(cache, [](const Snapshot& s) { return s.topologies.count("dc") == 1; }));
  // And watched from then on: a second one arrives through the watch.
  REQUIRE(cluster.create(api::Kind::Topology, topology("dc2")).ok());
  REQUIRE(eventually(cache, [](const Snapshot& s) { return s.topologies.count("dc2") == 1; }));
  cache.stop();
}

TEST_CASE("cache over http: a server restarted without its state (serve-cluster) -> the watches relist") {
  api::SystemClock clock;
  auto before = std::make_unique<MemoryCluster>(clock);
  for (const char* n : {"a", "b", "c", "d", "e"}) REQUIRE(before->create(api::Kind::Node, node(n)).ok());
  auto server = std::make_unique<ApiServer>(*before);
  REQUIRE(server->start().ok());
  const uint16_t port = server->port();
  auto client = fastClient(server->url());
  CacheOptions co;
  co.relistRetry = api::Duration{1};
  Cache cache(*client, clock, co);
  REQUIRE(cache.start().ok());
  CHECK(nodeNames(*cache.snapshot()).size() == 5);

  // The server restarts on the same address with a fresh store whose versions are all older than
  // the ones the cache watches from: a real server answers "Too large resource version"; the cache
  // relists instead of waiting forever for events.
  server->stop();
  server.reset();
  MemoryCluster after(clock);
  REQUIRE(after.create(api::Kind::Node, node("x")).ok());
  ApiServerOptions so;
  so.port = port;
  ApiServer restarted(after, so);
  REQUIRE(restarted.start().ok());
  REQUIRE(eventually(cache, [](const Snapshot& s) { return nodeNames(s) == std::vector<std::string>{"x"}; }));
  // Watched again from the new store's versions: a later node arrives.
  REQUIRE(after.create(api::Kind::Node, node("y")).ok());
  REQUIRE(eventually(cache, [](const Snapshot& s) { return nodeNames(s) == std::vector<std::string>{"x", "y"}; }));
  CHECK(cache.relists() >= 1);
  cache.stop();
  restarted.stop();
}

TEST_CASE("cache over http: Volcano's PodGroup CRD absent at start -> its PodGroups are read once it is served") {
  api::SystemClock clock;
  MemoryCluster cluster(clock);
  ApiServer server(cluster);
  REQUIRE(server.start().ok());
  server.setServed(api::Kind::VolcanoPodGroup, false);            // as most clusters: no Volcano
  server.setServed(api::Kind::SchedulerPluginsPodGroup, false);   // nor scheduler-plugins
  auto client = fastClient(server.url());
  REQUIRE(cluster.create(api::Kind::Node, node("a")).ok());
  const Json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata",
                     {{"name", "w-0"}, {"namespace", "ml"}, {"annotations", {{"scheduling.k8s.io/group-name", "vc"}}}}},
                    {"spec", {{"schedulerName", "tessera"}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
  REQUIRE(cluster.create(api::Kind::Pod, pod).ok());

  CacheOptions co;
  co.relistRetry = api::Duration{1};
  Cache cache(*client, clock, co);
  REQUIRE(cache.start().ok());  // starts quietly without either kind
  auto job = [](const Snapshot& s) { return s.findJob("PodGroup/ml/vc"); };
  REQUIRE(job(*cache.snapshot()) != nullptr);
  CHECK(job(*cache.snapshot())->podGroupMissing);

  // Volcano is installed and its controller writes the PodGroup: the job takes minMember and queue from it.
  const Json vc = {{"apiVersion", "scheduling.volcano.sh/v1beta1"},
                   {"kind", "PodGroup"},
                   {"metadata", {{"name", "vc"}, {"namespace", "ml"}}},
                   {"spec", {{"minMember", 3}, {"queue", "research"}, {"minTaskMember", {{"worker", 3}}}}}};
  REQUIRE(cluster.create(api::Kind::VolcanoPodGroup, vc).ok());
  server.setServed(api::Kind::VolcanoPodGroup, true);
  REQUIRE(eventually(cache, [&](const Snapshot& s) { return job(s) && job(s)->podGroup != nullptr; }));
  const JobInfo* j = job(*cache.snapshot());
  CHECK(j->minMember == 3);
  CHECK(j->queue == "research");
  CHECK(j->podGroup->source == api::PodGroupSource::Volcano);
  // A Tessera PodGroup of the same name wins over it; deleting that one falls back to Volcano's.
  const Json own = {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                    {"kind", "PodGroup"},
                    {"metadata", {{"name", "vc"}, {"namespace", "ml"}}},
                    {"spec", {{"minMember", 1}}}};
  REQUIRE(cluster.create(api::Kind::PodGroup, own).ok());
  REQUIRE(eventually(cache, [&](const Snapshot& s) { return job(s) && job(s)->minMember == 1; }));
  CHECK(job(*cache.snapshot())->podGroup->source == api::PodGroupSource::Tessera);
  REQUIRE(cluster.remove(api::Kind::PodGroup, "ml", "vc").ok());
  REQUIRE(eventually(cache, [&](const Snapshot& s) { return job(s) && job(s)->minMember == 3; }));
  cache.stop();
}
