// Watches on the in-memory cluster: replay from a resourceVersion, 410 outside the window, event
// order, stop(), and callbacks that write or stop their own watch.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "tessera/api/clock.h"
#include "tessera/cache/memory_cluster.h"

namespace {

using tessera::api::FakeClock;
using tessera::api::Kind;
using tessera::api::parseTime;
using tessera::cache::Json;
using tessera::cache::MemoryCluster;
using tessera::cache::PatchType;
using tessera::cache::WatchEvent;
using tessera::cache::WatchEventType;
using tessera::cache::WatchHandle;

FakeClock startClock() { return FakeClock(parseTime("2026-01-01T00:00:00Z").value()); }

Json makePod(const std::string& name) {
  return {{"metadata", {{"namespace", "ns"}, {"name", name}}}, {"spec", {{"containers", Json::array()}}}};
}

Json makeNode(const std::string& name) { return {{"metadata", {{"name", name}}}}; }

struct Recorder {
  std::vector<WatchEvent> events;
  tessera::cache::WatchCallback callback() {
    return [this](const WatchEvent& e) { events.push_back(e); };
  }
  std::vector<std::string> summary() const {
    std::vector<std::string> out;
    for (const auto& e : events) {
      const char* t = e.type == WatchEventType::Added      ? "ADDED"
                      : e.type == WatchEventType::Modified ? "MODIFIED"
                      : e.type == WatchEventType::Deleted  ? "DELETED"
                                                           : "OTHER";
      out.push_back(std::string(t) + " " + e.object["metadata"]["name"].get<std::string>());
    }
    return out;
  }
};

std::string rvOf(const Json& j) { return j["metadata"]["resourceVersion"].get<std::string>(); }

}  // namespace

using V = std::vector<std::string>;

TEST_CASE("watch from a list's resourceVersion sees every later event of its kind, in order", "[memory][watch]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Pod, makePod("before")).ok());
  auto listed = cluster.list(Kind::Pod);
  REQUIRE(listed.ok());
  Recorder rec;
  auto handle = cluster.watch(Kind::Pod, listed->resourceVersion, rec.callback());
  REQUIRE(handle.ok());
  CHECK(rec.events.empty());

  REQUIRE(cluster.create(Kind::Pod, makePod("a")).ok());
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());  // another kind: not delivered
  REQUIRE(cluster.patch(Kind::Pod, "ns", "a", PatchType::Merge, {{"metadata", {{"labels", {{"k", "v"}}}}}}).ok());
  Json last = *cluster.get(Kind::Pod, "ns", "a");
  REQUIRE(cluster.remove(Kind::Pod, "ns", "a").ok());

  CHECK(rec.summary() == V{"ADDED a", "MODIFIED a", "DELETED a"});
  // The DELETED event carries the last state with a new resourceVersion.
  const Json& deleted = rec.events[2].object;
  CHECK(deleted["metadata"]["labels"]["k"] == "v");
  CHECK(rvOf(deleted) != rvOf(last));
  CHECK(cluster.list(Kind::Pod)->resourceVersion == rvOf(deleted));
  // Each event's object carries that event's resourceVersion, all distinct.
  CHECK(rvOf(rec.events[0].object) != rvOf(rec.events[1].object));
}

TEST_CASE("watch replays from an older resourceVersion, then continues live", "[memory][watch]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  std::string afterFirst = rvOf(*cluster.create(Kind::Pod, makePod("p1")));
  REQUIRE(cluster.create(Kind::Pod, makePod("p2")).ok());
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("p3")).ok());

  Recorder rec;
  auto handle = cluster.watch(Kind::Pod, afterFirst, rec.callback());
  REQUIRE(handle.ok());
  CHECK(rec.summary() == V{"ADDED p2", "ADDED p3"});
  REQUIRE(cluster.create(Kind::Pod, makePod("p4")).ok());
  CHECK(rec.summary() == V{"ADDED p2", "ADDED p3", "ADDED p4"});

  SECTION("\"\" and \"0\" start from now") {
    Recorder now, zero;
    auto h1 = cluster.watch(Kind::Pod, "", now.callback());
    auto h2 = cluster.watch(Kind::Pod, "0", zero.callback());
    REQUIRE(h1.ok());
    REQUIRE(h2.ok());
    CHECK(now.events.empty());
    REQUIRE(cluster.create(Kind::Pod, makePod("p5")).ok());
    CHECK(now.summary() == V{"ADDED p5"});
    CHECK(zero.summary() == V{"ADDED p5"});
  }
  SECTION("a malformed resourceVersion is refused") {
    CHECK_FALSE(cluster.watch(Kind::Pod, "abc", rec.callback()).ok());
  }
  SECTION("a resourceVersion the store never reached is refused (504, as a real server's watch cache)") {
    auto listed = cluster.list(Kind::Pod);
    REQUIRE(listed.ok());
    const std::string future = std::to_string(std::stoull(listed->resourceVersion) + 1);
    auto w = cluster.watch(Kind::Pod, future, rec.callback());
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code == 504);
    CHECK(w.error().message.find("Too large resource version") != std::string::npos);
    CHECK(cluster.watch(Kind::Pod, listed->resourceVersion, rec.callback()).ok());  // the current one is fine
  }
}

TEST_CASE("watching from a resourceVersion outside the window is 410", "[memory][watch]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  std::string old = cluster.list(Kind::Pod)->resourceVersion;
  for (int i = 0; i < 5; ++i) REQUIRE(cluster.create(Kind::Pod, makePod("p" + std::to_string(i))).ok());
  std::string recent = cluster.list(Kind::Pod)->resourceVersion;
  Recorder rec;
  CHECK(cluster.watch(Kind::Pod, old, rec.callback()).ok());  // the default window holds them all

  cluster.setWatchWindow(2);
  auto gone = cluster.watch(Kind::Pod, old, rec.callback());
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == 410);

  // The last two events are still there: watching from the third-last RV works.
  Recorder tail;
  std::string third = rvOf(*cluster.get(Kind::Pod, "ns", "p2"));
  auto h = cluster.watch(Kind::Pod, third, tail.callback());
  REQUIRE(h.ok());
  CHECK(tail.summary() == V{"ADDED p3", "ADDED p4"});
  CHECK(cluster.watch(Kind::Pod, recent, rec.callback()).ok());
  CHECK(cluster.watch(Kind::Pod, rvOf(*cluster.get(Kind::Pod, "ns", "p1")), rec.callback()).error().code == 410);
}

TEST_CASE("stop() and destroying the handle end delivery", "[memory][watch]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  Recorder a, b;
  auto ha = cluster.watch(Kind::Pod, "", a.callback());
  auto hb = cluster.watch(Kind::Pod, "", b.callback());
  REQUIRE(ha.ok());
  REQUIRE(hb.ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("x")).ok());
  (*ha)->stop();
  (*ha)->stop();  // idempotent
  hb->reset();
  REQUIRE(cluster.create(Kind::Pod, makePod("y")).ok());
  CHECK(a.summary() == V{"ADDED x"});
  CHECK(b.summary() == V{"ADDED x"});

  SECTION("a handle may outlive the cluster") {
    auto cluster2 = std::make_unique<MemoryCluster>(clock);
    Recorder c;
    auto hc = cluster2->watch(Kind::Pod, "", c.callback());
    REQUIRE(hc.ok());
    cluster2.reset();
    (*hc)->stop();
    hc->reset();
  }
}

TEST_CASE("callbacks may stop their own watch or write; every watcher still sees RV order", "[memory][watch]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);

  SECTION("stop from inside the callback") {
    std::unique_ptr<WatchHandle> self;
    int calls = 0;
    auto h = cluster.watch(Kind::Pod, "", [&](const WatchEvent&) {
      ++calls;
      self.reset();
    });
    REQUIRE(h.ok());
    self = std::move(*h);
    REQUIRE(cluster.create(Kind::Pod, makePod("a")).ok());
    REQUIRE(cluster.create(Kind::Pod, makePod("b")).ok());
    CHECK(calls == 1);
  }
  SECTION("a write from a callback is delivered after the current event") {
    // Not something the cache does (it only enqueues), but it must not reorder or deadlock.
    Recorder observer;
    auto writer = cluster.watch(Kind::Pod, "", [&](const WatchEvent& e) {
      if (e.type == WatchEventType::Added && e.object["metadata"]["name"] == "a") {
        (void)cluster.create(Kind::Pod, makePod("from-callback"));
      }
    });
    auto h = cluster.watch(Kind::Pod, "", observer.callback());
    REQUIRE(writer.ok());
    REQUIRE(h.ok());
    REQUIRE(cluster.create(Kind::Pod, makePod("a")).ok());
    CHECK(observer.summary() == V{"ADDED a", "ADDED from-callback"});
    CHECK(std::stoull(rvOf(observer.events[0].object)) < std::stoull(rvOf(observer.events[1].object)));
  }
}

TEST_CASE("stop() from another thread while writes are delivered", "[memory][watch]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  std::atomic<bool> stopped{false};
  std::atomic<int> afterStop{0};
  auto h = cluster.watch(Kind::Pod, "", [&](const WatchEvent&) {
    if (stopped.load()) afterStop.fetch_add(1);
  });
  REQUIRE(h.ok());
  std::thread writer([&] {
    for (int i = 0; i < 300; ++i) (void)cluster.create(Kind::Pod, makePod("p" + std::to_string(i)));
  });
  std::thread stopper([&] {
    while (cluster.list(Kind::Pod)->items.size() < 50) {
    }
    (*h)->stop();
    stopped.store(true);
  });
  stopper.join();
  writer.join();
  CHECK(afterStop.load() == 0);
}

TEST_CASE("a selected watch sees objects start and stop matching as ADDED and DELETED", "[memory][watch][shard]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  auto labelled = [](const std::string& name, const std::string& pool) {
    Json n = makeNode(name);
    if (!pool.empty()) n["metadata"]["labels"] = {{"tessera.dev/node-pool", pool}};
    return n;
  };
  REQUIRE(cluster.create(Kind::Node, labelled("n1", "a")).ok());
  REQUIRE(cluster.create(Kind::Node, labelled("n2", "b")).ok());
  auto listed = cluster.list(Kind::Node);
  REQUIRE(listed.ok());
  Recorder a, unlabelled;
  tessera::cache::ListOptions poolA, none;
  poolA.labelSelector = "tessera.dev/node-pool=a";
  none.labelSelector = "!tessera.dev/node-pool";
  auto wa = cluster.watchSelected(Kind::Node, listed->resourceVersion, poolA, a.callback());
  auto wn = cluster.watchSelected(Kind::Node, listed->resourceVersion, none, unlabelled.callback());
  REQUIRE(wa.ok());
  REQUIRE(wn.ok());
  REQUIRE(cluster.update(Kind::Node, [&] {
                  auto n = cluster.get(Kind::Node, "", "n2").value();
                  n["metadata"]["labels"]["tessera.dev/node-pool"] = "a";  // n2 joins pool a
                  return n;
                }())
              .ok());
  auto n1 = cluster.get(Kind::Node, "", "n1").value();
  n1["metadata"].erase("labels");  // n1 leaves every pool
  auto left = cluster.update(Kind::Node, n1);
  REQUIRE(left.ok());
  REQUIRE(cluster.create(Kind::Node, labelled("n3", "")).ok());
  CHECK(a.summary() == V{"ADDED n2", "DELETED n1"});
  CHECK(unlabelled.summary() == V{"ADDED n1", "ADDED n3"});
  // The DELETED carries the last matching content at the event's version, as kube-apiserver does.
  REQUIRE(a.events.size() == 2);
  CHECK(a.events[1].object["metadata"]["labels"]["tessera.dev/node-pool"] == "a");
  CHECK(rvOf(a.events[1].object) == rvOf(*left));
  // A watch from an older version replays through the same filter.
  Recorder replay;
  auto wr = cluster.watchSelected(Kind::Node, listed->resourceVersion, poolA, replay.callback());
  REQUIRE(wr.ok());
  CHECK(replay.summary() == V{"ADDED n2", "DELETED n1"});
  tessera::cache::ListOptions bad;
  bad.labelSelector = "in (";
  CHECK_FALSE(cluster.watchSelected(Kind::Node, "", bad, replay.callback()).ok());
}
