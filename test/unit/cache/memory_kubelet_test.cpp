// The simulated kubelet and device plugin of the in-memory cluster (SCHEMA.md, "Simulated kubelet and
// devices"): terminating pods go, evicted pods come back, bound pods start with the lowest free GPUs,
// pods that do not fit are rejected, pods with a duration complete.
#include <catch2/catch.hpp>

#include "tessera/api/clock.h"
#include "tessera/cache/memory_cluster.h"

namespace {

using tessera::api::Duration;
using tessera::api::FakeClock;
using tessera::api::Kind;
using tessera::api::parseTime;
using tessera::cache::DeleteOptions;
using tessera::cache::Json;
using tessera::cache::MemoryCluster;
using tessera::cache::WatchEvent;
using tessera::cache::WatchEventType;

FakeClock startClock() { return FakeClock(parseTime("2026-01-01T00:00:00Z").value()); }

Json makeNode(const std::string& name, const Json& gpus = "4", const std::string& cpu = "8") {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status", {{"allocatable", {{"cpu", cpu}, {"memory", "32Gi"}, {"nvidia.com/gpu", gpus}, {"pods", "110"}}}}}};
}

/// A pod requesting `gpus` whole GPUs (as a limit, as users write it) and `cpu`.
Json makePod(const std::string& name, const Json& gpus = 0, const std::string& cpu = "1") {
  Json resources = {{"requests", {{"cpu", cpu}}}};
  if (gpus != 0) resources["limits"] = {{"nvidia.com/gpu", gpus}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"namespace", "ns"}, {"name", name}, {"labels", {{"app", "train"}}}}},
          {"spec", {{"containers", {{{"name", "main"}, {"resources", resources}}}}}}};
}

std::string phaseOf(MemoryCluster& c, const std::string& name) {
  return c.get(Kind::Pod, "ns", name)->at("status")["phase"];
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("bound pending pods start Running with startTime and the lowest free GPUs", "[memory][kubelet]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  for (auto [name, gpus] : std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 2}, {"c", 1}, {"cpu", 0}}) {
    REQUIRE(cluster.create(Kind::Pod, makePod(name, gpus)).ok());
    REQUIRE(cluster.bind("ns", name, "", "n1").ok());
  }
  REQUIRE(cluster.create(Kind::Pod, makePod("unbound", 1)).ok());
  clock.advance(Duration{5000});

  auto report = cluster.kubeletTick();
  CHECK(report.started == V{"ns/a", "ns/b", "ns/c", "ns/cpu"});
  CHECK(report.rejected.empty());
  Json a = *cluster.get(Kind::Pod, "ns", "a");
  CHECK(a["status"]["phase"] == "Running");
  CHECK(a["status"]["startTime"] == "2026-01-01T00:00:05Z");
  CHECK(phaseOf(cluster, "unbound") == "Pending");
  CHECK(cluster.devicesOf("ns", "a") == std::vector<int>{0});
  CHECK(cluster.devicesOf("ns", "b") == std::vector<int>{1, 2});
  CHECK(cluster.devicesOf("ns", "c") == std::vector<int>{3});
  CHECK(cluster.devicesOf("ns", "cpu").empty());
  CHECK(cluster.devicesOf("ns", "unbound").empty());

  // Freed devices are reused lowest first.
  REQUIRE(cluster.finishPod("ns", "b", true).ok());
  CHECK(cluster.devicesOf("ns", "b").empty());
  REQUIRE(cluster.create(Kind::Pod, makePod("d", 1)).ok());
  REQUIRE(cluster.bind("ns", "d", "", "n1").ok());
  CHECK(cluster.kubeletTick().started == V{"ns/d"});
  CHECK(cluster.devicesOf("ns", "d") == std::vector<int>{1});

  // A second tick changes nothing.
  auto idle = cluster.kubeletTick();
  CHECK(idle.started.empty());
  CHECK(idle.removed.empty());
}

TEST_CASE("pods loaded Running get their devices at the first tick, before newly started pods", "[memory][kubelet]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.apply(Kind::Node, makeNode("n1", 4)).ok());
  Json pending = makePod("new", 1);
  pending["spec"]["nodeName"] = "n1";
  REQUIRE(cluster.apply(Kind::Pod, pending).ok());  // created first, but not running yet
  for (auto [name, gpus] : std::vector<std::pair<std::string, int>>{{"old1", 2}, {"old2", 1}}) {
    Json p = makePod(name, gpus);
    p["spec"]["nodeName"] = "n1";
    p["status"] = {{"phase", "Running"}, {"startTime", "2025-12-31T00:00:00Z"}};
    REQUIRE(cluster.apply(Kind::Pod, p).ok());
  }
  CHECK(cluster.devicesOf("ns", "old1").empty());
  auto report = cluster.kubeletTick();
  CHECK(report.started == V{"ns/new"});
  CHECK(cluster.devicesOf("ns", "old1") == std::vector<int>{0, 1});
  CHECK(cluster.devicesOf("ns", "old2") == std::vector<int>{2});
  CHECK(cluster.devicesOf("ns", "new") == std::vector<int>{3});
}

TEST_CASE("the kubelet rejects a pod that does not fit the node: Failed, OutOf<resource>", "[memory][kubelet]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1", "2", "4")).ok());

  SECTION("GPUs") {
    for (const char* name : {"g1", "g2"}) {
      REQUIRE(cluster.create(Kind::Pod, makePod(name, 1)).ok());
      REQUIRE(cluster.bind("ns", name, "", "n1").ok());
    }
    REQUIRE(cluster.kubeletTick().started.size() == 2);
    REQUIRE(cluster.create(Kind::Pod, makePod("g3", 1)).ok());
    REQUIRE(cluster.bind("ns", "g3", "", "n1").ok());
    auto report = cluster.kubeletTick();
    CHECK(report.started.empty());
    CHECK(report.rejected == V{"ns/g3"});
    Json g3 = *cluster.get(Kind::Pod, "ns", "g3");
    CHECK(g3["status"]["phase"] == "Failed");
    CHECK(g3["status"]["reason"] == "OutOfnvidia.com/gpu");
    CHECK(cluster.devicesOf("ns", "g3").empty());
  }
  SECTION("cpu, counting pods admitted earlier in the same tick") {
    REQUIRE(cluster.create(Kind::Pod, makePod("c1", 0, "3")).ok());
    REQUIRE(cluster.create(Kind::Pod, makePod("c2", 0, "1500m")).ok());
    REQUIRE(cluster.bind("ns", "c1", "", "n1").ok());
    REQUIRE(cluster.bind("ns", "c2", "", "n1").ok());
    auto report = cluster.kubeletTick();
    CHECK(report.started == V{"ns/c1"});
    CHECK(report.rejected == V{"ns/c2"});
    CHECK(cluster.get(Kind::Pod, "ns", "c2")->at("status")["reason"] == "OutOfcpu");
  }
  SECTION("terminal pods hold nothing") {
    REQUIRE(cluster.create(Kind::Pod, makePod("c1", 2, "4")).ok());
    REQUIRE(cluster.bind("ns", "c1", "", "n1").ok());
    REQUIRE(cluster.kubeletTick().started.size() == 1);
    REQUIRE(cluster.finishPod("ns", "c1", false).ok());
    REQUIRE(cluster.create(Kind::Pod, makePod("c2", 2, "4")).ok());
    REQUIRE(cluster.bind("ns", "c2", "", "n1").ok());
    CHECK(cluster.kubeletTick().started == V{"ns/c2"});
    CHECK(cluster.devicesOf("ns", "c2") == std::vector<int>{0, 1});
  }
}

TEST_CASE("terminating pods go at the next tick; annotated ones come back unbound", "[memory][kubelet]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  Json keep = makePod("keep", 1);
  keep["metadata"]["annotations"] = {{"sim.tessera.dev/recreate", "true"}};
  std::string oldUid = cluster.create(Kind::Pod, keep)->at("metadata")["uid"];
  REQUIRE(cluster.create(Kind::Pod, makePod("gone", 1)).ok());
  for (const char* name : {"keep", "gone"}) REQUIRE(cluster.bind("ns", name, "", "n1").ok());
  REQUIRE(cluster.kubeletTick().started.size() == 2);
  CHECK(cluster.devicesOf("ns", "gone") == std::vector<int>{1});

  clock.advance(Duration{60000});
  for (const char* name : {"keep", "gone"}) REQUIRE(cluster.remove(Kind::Pod, "ns", name, DeleteOptions{0, ""}).ok());
  // Terminating pods still exist and still hold their devices until the kubelet acts.
  CHECK(cluster.get(Kind::Pod, "ns", "gone").ok());
  CHECK(cluster.devicesOf("ns", "gone") == std::vector<int>{1});

  std::vector<std::string> events;
  auto watch = cluster.watch(Kind::Pod, "", [&](const WatchEvent& e) {
    events.push_back(std::string(e.type == WatchEventType::Deleted ? "DELETED " : e.type == WatchEventType::Added ? "ADDED " : "MODIFIED ") +
                     e.object["metadata"]["name"].get<std::string>());
  });
  REQUIRE(watch.ok());
  auto report = cluster.kubeletTick();
  CHECK(report.removed == V{"ns/keep", "ns/gone"});
  CHECK(report.recreated == V{"ns/keep"});
  CHECK(report.started.empty());
  CHECK(events == V{"DELETED keep", "ADDED keep", "DELETED gone"});

  CHECK(cluster.get(Kind::Pod, "ns", "gone").error().code == 404);
  Json again = *cluster.get(Kind::Pod, "ns", "keep");
  CHECK(again["metadata"]["uid"] != oldUid);
  CHECK(again["metadata"]["uid"].get<std::string>() > oldUid);
  CHECK(again["metadata"]["creationTimestamp"] == "2026-01-01T00:01:00Z");
  CHECK(again["metadata"]["labels"]["app"] == "train");
  CHECK(again["metadata"]["annotations"]["sim.tessera.dev/recreate"] == "true");
  CHECK_FALSE(again["metadata"].contains("deletionTimestamp"));
  CHECK_FALSE(again["spec"].contains("nodeName"));
  CHECK(again["status"] == Json{{"phase", "Pending"}});
  CHECK(again["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1);
  CHECK(cluster.devicesOf("ns", "keep").empty());

  SECTION("a pod given with a deletionTimestamp is gone at the first tick") {
    Json t = makePod("loaded-terminating");
    t["spec"]["nodeName"] = "n1";
    t["status"] = {{"phase", "Running"}};
    t["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
    REQUIRE(cluster.apply(Kind::Pod, t).ok());
    CHECK(cluster.kubeletTick().removed == V{"ns/loaded-terminating"});
  }
}

TEST_CASE("pods complete once their sim.tessera.dev/duration has passed", "[memory][kubelet]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  Json timed = makePod("timed", 1);
  timed["metadata"]["annotations"] = {{"sim.tessera.dev/duration", "10m"}};
  REQUIRE(cluster.create(Kind::Pod, timed).ok());
  REQUIRE(cluster.bind("ns", "timed", "", "n1").ok());
  REQUIRE(cluster.kubeletTick().started == V{"ns/timed"});

  clock.advance(Duration{9 * 60 * 1000});
  CHECK(cluster.completeExpired().empty());
  CHECK(cluster.kubeletTick().completed.empty());
  CHECK(phaseOf(cluster, "timed") == "Running");
  clock.advance(Duration{60 * 1000});
  CHECK(cluster.completeExpired() == V{"ns/timed"});
  CHECK(phaseOf(cluster, "timed") == "Succeeded");
  CHECK(cluster.devicesOf("ns", "timed").empty());
  CHECK(cluster.completeExpired().empty());

  SECTION("kubeletTick completes too, including a pod that started in the same tick") {
    Json instant = makePod("instant");
    instant["metadata"]["annotations"] = {{"sim.tessera.dev/duration", "0s"}};
    REQUIRE(cluster.create(Kind::Pod, instant).ok());
    REQUIRE(cluster.bind("ns", "instant", "", "n1").ok());
    auto report = cluster.kubeletTick();
    CHECK(report.started == V{"ns/instant"});
    CHECK(report.completed == V{"ns/instant"});
  }
}

TEST_CASE("a held reservation pod waits Pending through kubelet ticks, then reports its GPU's UUID", "[memory][kubelet]") {
  // A slow device plugin (holdReservations): the kubelet must not start the reservation pod without
  // its GPU, or the binder waiting for the UUID would wait forever (a CI failure under load).
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1", "2")).ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("a", 1)).ok());
  REQUIRE(cluster.bind("ns", "a", "", "n1").ok());
  cluster.holdReservations(true);
  Json r = makePod("gpu-reservation-g1", 1);
  r["metadata"] = {{"namespace", "tessera-reservation"},
                   {"name", "gpu-reservation-g1"},
                   {"labels", {{"tessera.dev/gpu-group", "g1"}}}};
  r["spec"]["nodeName"] = "n1";
  REQUIRE(cluster.create(Kind::Pod, r).ok());
  for (int i = 0; i < 3; ++i) {
    auto report = cluster.kubeletTick();
    CHECK(report.rejected.empty());
  }
  auto held = cluster.get(Kind::Pod, "tessera-reservation", "gpu-reservation-g1");
  REQUIRE(held.ok());
  CHECK((*held)["status"]["phase"] == "Pending");
  CHECK(cluster.devicesOf("tessera-reservation", "gpu-reservation-g1").empty());
  CHECK(cluster.devicesOf("ns", "a") == std::vector<int>{0});

  cluster.holdReservations(false);
  auto started = cluster.get(Kind::Pod, "tessera-reservation", "gpu-reservation-g1");
  REQUIRE(started.ok());
  CHECK((*started)["status"]["phase"] == "Running");
  CHECK((*started)["metadata"]["annotations"].value("tessera.dev/gpu-uuid", "") == "GPU-sim-n1-1");
  CHECK(cluster.devicesOf("tessera-reservation", "gpu-reservation-g1") == std::vector<int>{1});
}
