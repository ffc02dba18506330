// The asynchronous binder: binds and evictions off the scheduling thread, in-flight binds counted
// as bound, per-pod exponential backoff after failed binds (a failing pod cannot starve the
// others), expiry of assumed binds the watch never confirms, the coalescing status queue, and
// binds parked while their GPU reservation pod has not reported its GPU (issue 18, item 8).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <catch2/catch.hpp>

#include "tessera/app/registry.h"
#include "tessera/binder/binder.h"
#include "tessera/binder/gpu_binding.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/config.h"
#include "tessera/framework/scheduler.h"

using namespace tessera;
using api::Duration;
using api::Kind;
using cache::Json;
using cache::TaskStatus;

namespace {

/// A clock tests move while binder threads read it.
class SharedClock final : public api::Clock {
 public:
  explicit SharedClock(api::Time t) : millis_(t.unixMillis) {}
  api::Time now() const override { return api::Time{millis_.load()}; }
  void advance(Duration d) { millis_ += d.millis; }

 private:
  std::atomic<int64_t> millis_;
};

/// A gate a test opens: threads that reach wait() block until open().
class Gate {
 public:
  void close() {
    std::lock_guard l(mu_);
    open_ = false;
  }
  void open() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock l(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
    --waiting_;
  }
  /// Blocks until `n` threads wait at the gate.
  void awaitWaiting(int n) {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
};

/// The memory cluster with knobs: binds of chosen pods fail, binds can be "lost" (answered OK but
/// never done, so the watch never confirms), status patches can be held at a gate; counts writes.
class FlakyClient final : public cache::ClusterClient {
 public:
  explicit FlakyClient(cache::MemoryCluster& c) : c_(c) {}
  std::set<std::string> failBind;  ///< pod names
  std::atomic<bool> loseBinds{false};
  Gate patchGate;
  Gate bindGate;  ///< binds wait here (after they were counted as sent)

  std::map<std::string, std::vector<std::string>> conditionsWritten() {
    std::lock_guard l(mu_);
    return conditions_;
  }
  int binds() const { return binds_; }

  api::Result<cache::ListResult> list(Kind k, const cache::ListOptions& o) override { return c_.list(k, o); }
  api::Result<std::unique_ptr<cache::WatchHandle>> watch(Kind k, const std::string& rv, cache::WatchCallback cb) override {
    return c_.watch(k, rv, std::move(cb));
  }
  api::Result<Json> get(Kind k, const std::string& ns, const std::string& n) override { return c_.get(k, ns, n); }
  api::Result<Json> create(Kind k, const Json& o) override { return c_.create(k, o); }
  api::Result<Json> update(Kind k, const Json& o) override { return c_.update(k, o); }
  api::Result<Json> updateStatus(Kind k, const Json& o) override { return c_.updateStatus(k, o); }
  api::Result<Json> patch(Kind k, const std::string& ns, const std::string& n, cache::PatchType t, const Json& p,
                          bool status) override {
    if (k == Kind::Pod && status && p.dump().find("PodScheduled") != std::string::npos) {
      patchGate.wait();
      std::lock_guard l(mu_);
      conditions_[n].push_back(p["status"]["conditions"][0]["message"].get<std::string>());
    }
    return c_.patch(k, ns, n, t, p, status);
  }
  api::Status remove(Kind k, const std::string& ns, const std::string& n, const cache::DeleteOptions& o) override {
    return c_.remove(k, ns, n, o);
  }
  api::Status bind(const std::string& ns, const std::string& n, const std::string& uid, const std::string& node) override {
    ++binds_;
    bindGate.wait();
    if (failBind.count(n)) return api::makeError("pods \"" + n + "\": injected failure", 500);
    if (loseBinds) return api::Status::success();
    return c_.bind(ns, n, uid, node);
  }

 private:
  cache::MemoryCluster& c_;
  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> conditions_;
  std::atomic<int> binds_{0};
};

Json node(const std::string& name, const std::string& cpu, const std::string& gpus = "0") {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status",
           {{"allocatable", {{"cpu", cpu}, {"memory", "64Gi"}, {"pods", "110"}, {"nvidia.com/gpu", gpus}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json pod(const std::string& name, const std::string& cpu = "1") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"namespace", "t"}, {"name", name}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers", {{{"name", "main"}, {"image", "busybox"}, {"resources", {{"requests", {{"cpu", cpu}}}}}}}}}}};
}

Json fractionalPod(const std::string& name) {
  Json p = pod(name);
  p["metadata"]["annotations"] = {{api::keys::kGpuFraction, "0.5"}};
  return p;
}

/// What reached the binder's callbacks: preBind calls and records, by pod key. Tests wait for them
/// with a generous bound, so that a binder that stalls fails the test instead of hanging it.
class Seen {
 public:
  void call(const std::string& podKey) { add("call " + podKey, std::nullopt); }
  void record(const binder::BindRecord& r) { add(r.podKey, r); }
  int calls(const std::string& podKey) { return count("call " + podKey); }
  std::optional<binder::BindRecord> recordOf(const std::string& podKey) {
    std::lock_guard l(mu_);
    auto it = records_.find(podKey);
    return it == records_.end() ? std::nullopt : std::optional(it->second);
  }
  /// Waits until each pod has a record (or, for "call <pod>", `n` preBind calls); false after 30 s.
  bool await(const std::vector<std::string>& keys, int n = 1) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30), [&] {
      for (const auto& k : keys)
        if (counts_[k] < n) return false;
      return true;
    });
  }

 private:
  void add(const std::string& key, std::optional<binder::BindRecord> r) {
    std::lock_guard l(mu_);
    ++counts_[key];
    if (r) records_[key] = std::move(*r);
    cv_.notify_all();
  }
  int count(const std::string& key) {
    std::lock_guard l(mu_);
    return counts_[key];
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> counts_;
  std::map<std::string, binder::BindRecord> records_;
};

struct Env {
  SharedClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  FlakyClient client{cluster};
  std::unique_ptr<cache::Cache> cache;
  Seen seen;
  std::unique_ptr<binder::GpuBinding> gpu;
  std::unique_ptr<binder::Binder> binder;

  void start(binder::BinderOptions bo = {}, cache::CacheOptions co = {}) {
    cache = std::make_unique<cache::Cache>(client, clock, co);
    REQUIRE(cache->start().ok());
    binder = std::make_unique<binder::Binder>(client, *cache, clock, std::move(bo));
  }
  /// With the real GpuBinding as preBind (reservation pods on the memory cluster), every preBind
  /// call and every record noted in `seen`.
  void startGpu(binder::BinderOptions bo, binder::GpuBindingOptions go) {
    gpu = std::make_unique<binder::GpuBinding>(client, clock, go);
    bo.preBind = [this](const framework::SessionResult::Bind& b, api::Time since) {
      auto out = gpu->prepare(b, since);
      seen.call(b.podKey);
      return out;
    };
    bo.onRecord = [this](const binder::BindRecord& r) { seen.record(r); };
    start(std::move(bo));
    (void)cache->snapshot();
  }
  ~Env() {
    client.patchGate.open();
    client.bindGate.open();
    cluster.holdReservations(false);  // a test that failed with binds parked: they finish
    binder.reset();
  }
  /// The GPU reservation pod of `group`, if it exists.
  std::optional<Json> reservation(const std::string& group) {
    auto p = cluster.get(Kind::Pod, api::keys::kReservationNamespace, binder::GpuBinding::reservationPodName(group));
    return p.ok() ? std::optional(*p) : std::nullopt;
  }
  /// The reservation pod of `group` exists and is not being deleted.
  bool reservationLive(const std::string& group) {
    auto p = reservation(group);
    return p && !(*p)["metadata"].contains("deletionTimestamp");
  }
  std::string visibleDevices(const std::string& name) {
    auto cm = cluster.get(Kind::ConfigMap, "t", name + "-tessera-gpu");
    return cm.ok() ? (*cm)["data"].value("NVIDIA_VISIBLE_DEVICES", "") : "";
  }
  std::string uid(const std::string& name) {
    auto p = cluster.get(Kind::Pod, "t", name);
    return p.ok() ? (*p)["metadata"].value("uid", "") : "";
  }
  std::string nodeOf(const std::string& name) {
    auto p = cluster.get(Kind::Pod, "t", name);
    return p.ok() && p->contains("spec") ? (*p)["spec"].value("nodeName", "") : "";
  }
  /// The pod's task in a fresh snapshot, or null when no job holds it.
  std::optional<cache::TaskInfo> task(const std::string& name) {
    auto s = cache->snapshot();
    const auto* job = s->findJob("Pod/t/" + name);
    if (!job) return std::nullopt;
    for (const auto& t : job->tasks)
      if (t.key == "t/" + name) return t;
    return std::nullopt;
  }
  framework::SessionResult binds(std::vector<std::pair<std::string, std::string>> podNode) {
    framework::SessionResult r;
    for (auto& [p, n] : podNode) {
      framework::SessionResult::Bind& b = r.binds.emplace_back();
      b.podKey = "t/" + p;
      b.podUid = uid(p);
      b.node = n;
    }
    return r;
  }
};

/// A result with pods left pending, each with its own message.
struct Pending {
  std::vector<cache::TaskInfo> tasks;
  cache::JobInfo job;
  framework::SessionResult result(const std::vector<std::pair<std::string, std::string>>& podMessage) {
    tasks.clear();
    tasks.reserve(podMessage.size());
    framework::SessionResult r;
    job.setKey("PodGroup/t/g");
    for (const auto& [p, m] : podMessage) {
      cache::TaskInfo t;
      t.key = "t/" + p;
      tasks.push_back(t);
      r.jobs.push_back({&job, static_cast<uint32_t>(r.messages.size())});
      r.messages.push_back(m);
      r.pods.push_back({&tasks.back(), static_cast<uint32_t>(r.jobs.size() - 1), nullptr});
    }
    return r;
  }
};

}  // namespace

TEST_CASE("binds run on binder threads; waitIdle waits for them", "[binder]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8")).ok());
  for (const char* p : {"a", "b", "c"}) REQUIRE(e.cluster.create(Kind::Pod, pod(p)).ok());
  binder::BinderOptions bo;
  bo.workers = 2;
  std::atomic<int> recorded{0};
  bo.onRecord = [&](const binder::BindRecord&) { ++recorded; };
  e.start(bo);
  (void)e.cache->snapshot();
  e.binder->apply(e.binds({{"a", "n1"}, {"b", "n1"}, {"c", "n1"}}), cache::Snapshot{});
  e.binder->waitIdle();
  CHECK(recorded == 3);
  REQUIRE(e.binder->lastRecords().size() == 3);
  for (const auto& r : e.binder->lastRecords()) CHECK(r.ok);
  CHECK(e.binder->lastRecords()[1].podKey == "t/b");  // records keep the result's order
  for (const char* p : {"a", "b", "c"}) CHECK(e.nodeOf(p) == "n1");
  CHECK(e.task("a")->status == TaskStatus::Bound);
  CHECK_FALSE(e.task("a")->assumed);  // the watch confirmed it
  CHECK(e.binder->inFlight() == 0);
}

TEST_CASE("a bind in flight counts as bound and does not expire; the cycle does not wait for it", "[binder][assume]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8")).ok());
  REQUIRE(e.cluster.create(Kind::Pod, pod("a")).ok());
  Gate gate;
  gate.close();
  binder::BinderOptions bo;
  bo.preBind = [&](const framework::SessionResult::Bind&, api::Time) {
    gate.wait();  // a preBind that takes its time
    return binder::PreBindOutcome::done();
  };
  cache::CacheOptions co;
  co.assumeTtl = Duration{5'000};
  e.start(bo, co);
  auto r = e.binds({{"a", "n1"}});
  r.binds[0].gpus.push_back({"g1", true, 500, 0, -1});
  e.binder->apply(r, cache::Snapshot{});  // returns with the bind blocked in preBind
  gate.awaitWaiting(1);
  auto t = e.task("a");
  REQUIRE(t);
  CHECK(t->status == TaskStatus::Bound);
  CHECK(t->nodeName == "n1");
  CHECK(t->assumed);
  CHECK(e.binder->inFlight() == 1);
  e.clock.advance(Duration{60'000});  // far past the TTL: in flight, so not expired
  CHECK(e.task("a")->status == TaskStatus::Bound);
  CHECK(e.cache->expiredAssumptions() == 0);
  gate.open();
  e.binder->waitIdle();
  CHECK(e.nodeOf("a") == "n1");
  CHECK_FALSE(e.task("a")->assumed);
  CHECK(e.cache->expiredAssumptions() == 0);
}

TEST_CASE("an assumed bind the watch never confirms expires after the TTL, counted", "[binder][assume]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8")).ok());
  REQUIRE(e.cluster.create(Kind::Pod, pod("a")).ok());
  e.client.loseBinds = true;  // answered 201, never done
  cache::CacheOptions co;
  co.assumeTtl = Duration{5'000};
  e.start({}, co);
  e.binder->apply(e.binds({{"a", "n1"}}), cache::Snapshot{});
  e.binder->waitIdle();
  CHECK(e.binder->lastRecords().at(0).ok);
  CHECK(e.task("a")->status == TaskStatus::Bound);
  CHECK(e.task("a")->assumed);
  e.clock.advance(Duration{5'000});
  CHECK(e.task("a")->status == TaskStatus::Bound);  // the TTL runs from the bind's answer
  e.clock.advance(Duration{1});
  CHECK(e.task("a")->status == TaskStatus::Pending);
  CHECK(e.cache->snapshot()->findNode("n1")->used.isZero());
  CHECK(e.cache->expiredAssumptions() == 1);
}

TEST_CASE("a failing bind backs off exponentially per pod; the pod is left out until then", "[binder][backoff]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8")).ok());
  REQUIRE(e.cluster.create(Kind::Pod, pod("a")).ok());
  e.client.failBind.insert("a");
  binder::BinderOptions bo;
  bo.backoffInitial = Duration{1'000};
  bo.backoffMax = Duration{4'000};
  e.start(bo);
  auto attempt = [&] {
    e.binder->apply(e.binds({{"a", "n1"}}), cache::Snapshot{});
    e.binder->waitIdle();
    CHECK_FALSE(e.binder->lastRecords().at(0).ok);
  };
  // Backoffs 1 s, 2 s, 4 s, 4 s (capped).
  for (int64_t backoff : {1'000, 2'000, 4'000, 4'000}) {
    attempt();
    CAPTURE(backoff);
    CHECK_FALSE(e.task("a"));  // in no job: no cycle can place it
    CHECK(e.binder->backingOff() == 1);
    CHECK(e.cache->snapshot()->findNode("n1")->used.isZero());
    e.clock.advance(Duration{backoff - 1});
    CHECK_FALSE(e.task("a"));
    e.clock.advance(Duration{1});
    REQUIRE(e.task("a"));
    CHECK(e.task("a")->status == TaskStatus::Pending);
    CHECK(e.binder->backingOff() == 0);
  }
  SECTION("a result placing it during its backoff is refused without a request") {
    attempt();
    const int before = e.client.binds();
    e.binder->apply(e.binds({{"a", "n1"}}), cache::Snapshot{});
    e.binder->waitIdle();
    CHECK(e.client.binds() == before);
    CHECK_THAT(e.binder->lastRecords().at(0).error, Catch::Contains("backing off"));
  }
  SECTION("a success resets the backoff") {
    e.client.failBind.clear();
    e.binder->apply(e.binds({{"a", "n1"}}), cache::Snapshot{});
    e.binder->waitIdle();
    CHECK(e.binder->lastRecords().at(0).ok);
    CHECK(e.nodeOf("a") == "n1");
    CHECK(e.binder->backingOff() == 0);
  }
  SECTION("deleting the pod ends it") {
    attempt();
    REQUIRE(e.cluster.forceRemove(Kind::Pod, "t", "a").ok());
    REQUIRE(e.cluster.create(Kind::Pod, pod("a")).ok());  // same name, new pod
    REQUIRE(e.task("a"));
  }
}

TEST_CASE("a pod whose bind keeps failing does not starve the others (the scheduler end to end)", "[binder][backoff]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Queue, Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                                             {"kind", "Queue"},
                                             {"metadata", {{"name", "default"}}}})
              .ok());
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "1")).ok());  // room for one pod
  REQUIRE(e.cluster.create(Kind::Pod, pod("a")).ok());          // older: placed first
  e.clock.advance(Duration{1'000});
  REQUIRE(e.cluster.create(Kind::Pod, pod("b")).ok());
  e.client.failBind.insert("a");
  e.start();
  auto config = framework::loadConfig(app::builtinRegistry(), nullptr);
  REQUIRE(config.ok());
  framework::Scheduler scheduler(*e.cache, *config, e.clock, *e.binder);
  auto cycle = [&] {
    auto r = scheduler.runCycle();
    e.binder->waitIdle();
    return r;
  };
  auto r1 = cycle();
  for (const auto& j : r1.jobs) UNSCOPED_INFO(j.job->key << ": " << r1.message(j));
  REQUIRE(r1.binds.size() == 1);
  CHECK(r1.binds[0].podKey == "t/a");
  CHECK(e.nodeOf("a").empty());
  auto r2 = cycle();  // no time passed: a backs off, b gets the node
  REQUIRE(r2.binds.size() == 1);
  CHECK(r2.binds[0].podKey == "t/b");
  CHECK(e.nodeOf("b") == "n1");
  e.clock.advance(Duration{1'000});
  auto r3 = cycle();  // a is back, and finds the node full
  CHECK(r3.binds.empty());
  CHECK(e.client.binds() == 2);
}

TEST_CASE("status writes are coalesced per pod and deduplicated", "[binder][status]") {
  Env e;
  for (const char* p : {"a", "b"}) REQUIRE(e.cluster.create(Kind::Pod, pod(p)).ok());
  e.start();
  Pending pending;
  e.client.patchGate.close();
  e.binder->apply(pending.result({{"a", "a1"}, {"b", "b1"}}), cache::Snapshot{});
  e.client.patchGate.awaitWaiting(1);  // the status thread holds a's first write
  e.binder->apply(pending.result({{"a", "a2"}, {"b", "b2"}}), cache::Snapshot{});
  e.binder->apply(pending.result({{"a", "a3"}, {"b", "b3"}}), cache::Snapshot{});
  e.client.patchGate.open();
  e.binder->waitIdle();
  auto written = e.client.conditionsWritten();
  CHECK(written["a"] == std::vector<std::string>{"a1", "a3"});  // a2 was overtaken before it was written
  CHECK(written["b"] == std::vector<std::string>{"b3"});
  // The same message again: nothing written.
  e.binder->apply(pending.result({{"a", "a3"}, {"b", "b3"}}), cache::Snapshot{});
  e.binder->waitIdle();
  CHECK(e.client.conditionsWritten() == written);
  auto events = e.cluster.list(Kind::Event);
  REQUIRE(events.ok());
  int failedScheduling = 0;
  for (const auto& ev : events->items) failedScheduling += ev.value("reason", "") == "FailedScheduling";
  CHECK(failedScheduling == 3);  // a1, a3, b3
  auto a = e.cluster.get(Kind::Pod, "t", "a");
  REQUIRE(a.ok());
  CHECK((*a)["status"]["conditions"][0]["message"] == "a3");
}

TEST_CASE("afterApply runs once the apply's binds and evictions are done, in apply order", "[binder]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8")).ok());
  for (const char* p : {"a", "b"}) REQUIRE(e.cluster.create(Kind::Pod, pod(p)).ok());
  std::mutex mu;
  std::vector<size_t> seen;  // binds of each result, as afterApply saw them
  std::vector<std::string> boundAtAfter;
  binder::BinderOptions bo;
  bo.afterApply = [&](const framework::SessionResult& r) {
    std::lock_guard l(mu);
    seen.push_back(r.binds.size());
    for (const auto& b : r.binds) boundAtAfter.push_back(e.nodeOf(b.podKey.substr(2)));
  };
  e.start(bo);
  e.binder->apply(e.binds({{"a", "n1"}, {"b", "n1"}}), cache::Snapshot{});
  e.binder->apply(framework::SessionResult{}, cache::Snapshot{});
  e.binder->waitIdle();
  CHECK(seen == std::vector<size_t>{2, 0});
  CHECK(boundAtAfter == std::vector<std::string>{"n1", "n1"});
}

TEST_CASE("fencing: binds queued in a term are dropped unsent once the term ends", "[binder][fencing]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8")).ok());
  for (const char* p : {"a", "b", "c"}) REQUIRE(e.cluster.create(Kind::Pod, pod(p)).ok());
  std::atomic<uint64_t> epoch{1};
  binder::BinderOptions bo;
  bo.workers = 1;
  bo.leaderEpoch = [&] { return epoch.load(); };
  e.start(bo);
  (void)e.cache->snapshot();
  // The first bind is held at the client (sent before the term ended); the other two wait in the
  // queue behind it.
  e.client.bindGate.close();
  e.binder->apply(e.binds({{"a", "n1"}, {"b", "n1"}, {"c", "n1"}}), cache::Snapshot{});  // term 1
  e.client.bindGate.awaitWaiting(1);
  epoch = 0;  // the renew deadline passes: not leading
  e.client.bindGate.open();
  e.binder->waitIdle();
  // What had not been sent when the term ended never reached the API server.
  CHECK(e.client.binds() == 1);
  CHECK(e.nodeOf("a") == "n1");
  CHECK(e.binder->droppedByFencing().binds == 2);
  size_t notLeading = 0;
  for (const auto& rec : e.binder->lastRecords())
    if (!rec.ok && rec.error.find("not leading") != std::string::npos) ++notLeading;
  CHECK(notLeading == 2);
  // A later term (a new epoch) binds them: dropped binds left no backoff and no assumption behind.
  epoch = 2;
  (void)e.cache->snapshot();
  std::vector<std::pair<std::string, std::string>> left;
  for (const char* p : {"a", "b", "c"})
    if (e.nodeOf(p).empty()) left.emplace_back(p, "n1");
  e.binder->apply(e.binds(left), cache::Snapshot{});
  e.binder->waitIdle();
  for (const char* p : {"a", "b", "c"}) CHECK(e.nodeOf(p) == "n1");
}

TEST_CASE("fencing: a batch decided while not leading writes nothing", "[binder][fencing]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8")).ok());
  REQUIRE(e.cluster.create(Kind::Pod, pod("a")).ok());
  binder::BinderOptions bo;
  bo.leaderEpoch = [] { return uint64_t{0}; };
  e.start(bo);
  (void)e.cache->snapshot();
  e.binder->apply(e.binds({{"a", "n1"}}), cache::Snapshot{});
  e.binder->waitIdle();
  CHECK(e.client.binds() == 0);
  CHECK(e.nodeOf("a").empty());
  CHECK(e.binder->droppedByFencing().binds == 1);
}

// ---- binds parked while a GPU reservation pod has not reported its GPU (issue 18, item 8) ----

namespace {
/// A half-GPU share of `group`, opened by this bind.
framework::SessionResult::GpuAssignment half(const std::string& group) { return {group, true, 500, 0, -1}; }
}  // namespace

TEST_CASE("a bind waiting for its GPU UUID holds no worker: with one worker, unrelated binds and evictions go first",
          "[binder][parked]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8", "2")).ok());
  for (const char* p : {"frac", "frac2"}) REQUIRE(e.cluster.create(Kind::Pod, fractionalPod(p)).ok());
  for (const char* p : {"b", "c", "d"}) REQUIRE(e.cluster.create(Kind::Pod, pod(p)).ok());
  e.cluster.holdReservations(true);  // the device plugin is slow: reservation pods report nothing
  binder::BinderOptions bo;
  bo.workers = 1;
  binder::GpuBindingOptions go;
  go.uuidPoll = std::chrono::milliseconds(1);
  e.startGpu(bo, go);
  // The fractional pod comes first on the one worker; a CPU pod in the same apply, and a later
  // apply with an eviction, another CPU pod and a second fractional pod on the same GPU group.
  auto first = e.binds({{"frac", "n1"}, {"b", "n1"}});
  first.binds[0].gpus.push_back(half("g1"));
  e.binder->apply(first, cache::Snapshot{});
  auto second = e.binds({{"frac2", "n1"}, {"c", "n1"}});
  second.binds[0].gpus.push_back(half("g1"));
  second.evictions.push_back({"t/d", e.uid("d"), "n1", "preempted by the test"});
  e.binder->apply(second, cache::Snapshot{});

  // Without parking, the worker would sit in frac's wait and nothing else would be done.
  REQUIRE(e.seen.await({"t/b", "t/c", "t/d"}));
  CHECK(e.seen.recordOf("t/b")->ok);
  CHECK(e.seen.recordOf("t/c")->ok);
  CHECK(e.seen.recordOf("t/d")->ok);
  CHECK(e.nodeOf("b") == "n1");
  CHECK(e.nodeOf("c") == "n1");
  CHECK_FALSE(e.cluster.get(Kind::Pod, "t", "d").ok());
  // Both fractional binds wait, parked, in flight, their pods not bound; one reservation pod, no UUID yet.
  REQUIRE(e.seen.await({"call t/frac", "call t/frac2"}));
  CHECK_FALSE(e.seen.recordOf("t/frac"));
  CHECK_FALSE(e.seen.recordOf("t/frac2"));
  CHECK(e.nodeOf("frac").empty());
  CHECK(e.nodeOf("frac2").empty());
  CHECK(e.binder->parked() == 2);
  CHECK(e.binder->inFlight() == 2);
  auto fracTask = e.task("frac");
  REQUIRE(fracTask);
  CHECK(fracTask->status == TaskStatus::Bound);  // assumed while parked: no cycle places it again
  auto res = e.reservation("g1");
  REQUIRE(res);
  CHECK_FALSE((*res)["metadata"].value("annotations", Json::object()).contains(api::keys::kGpuUuidAnnotation));

  // The device plugin catches up: both binds waiting on the group go on, with its GPU.
  e.cluster.holdReservations(false);
  REQUIRE(e.seen.await({"t/frac", "t/frac2"}));
  e.binder->waitIdle();
  CHECK(e.seen.recordOf("t/frac")->ok);
  CHECK(e.seen.recordOf("t/frac2")->ok);
  CHECK(e.nodeOf("frac") == "n1");
  CHECK(e.nodeOf("frac2") == "n1");
  CHECK(e.visibleDevices("frac") == "GPU-sim-n1-0");
  CHECK(e.visibleDevices("frac2") == "GPU-sim-n1-0");
  CHECK(e.binder->parked() == 0);
  CHECK(e.binder->inFlight() == 0);
}

TEST_CASE("waitIdle and afterApply wait for a parked bind", "[binder][parked]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8", "1")).ok());
  REQUIRE(e.cluster.create(Kind::Pod, fractionalPod("frac")).ok());
  e.cluster.holdReservations(true);
  std::atomic<int> afterApplies{0};
  binder::BinderOptions bo;
  bo.afterApply = [&](const framework::SessionResult&) { ++afterApplies; };
  binder::GpuBindingOptions go;
  go.uuidPoll = std::chrono::milliseconds(50);  // parked most of the time: a waitIdle that ignored it would return
  e.startGpu(bo, go);
  auto r = e.binds({{"frac", "n1"}});
  r.binds[0].gpus.push_back(half("g1"));
  e.binder->apply(r, cache::Snapshot{});
  REQUIRE(e.seen.await({"call t/frac"}));
  CHECK(afterApplies == 0);  // its apply is not done while the bind waits
  e.cluster.holdReservations(false);
  e.binder->waitIdle();
  CHECK(e.nodeOf("frac") == "n1");
  REQUIRE(e.binder->lastRecords().size() == 1);
  CHECK(e.binder->lastRecords()[0].ok);
  CHECK(afterApplies == 1);
}

TEST_CASE("a reservation pod that never reports: the parked bind fails at uuidTimeout, the reservation pod is deleted",
          "[binder][parked]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8", "1")).ok());
  REQUIRE(e.cluster.create(Kind::Pod, fractionalPod("frac")).ok());
  e.cluster.holdReservations(true);
  binder::GpuBindingOptions go;
  go.uuidPoll = std::chrono::milliseconds(1);
  go.uuidTimeout = std::chrono::milliseconds(60'000);  // on the (test's) clock, from the bind's first attempt
  e.startGpu({}, go);
  auto r = e.binds({{"frac", "n1"}});
  r.binds[0].gpus.push_back(half("g1"));
  e.binder->apply(r, cache::Snapshot{});
  REQUIRE(e.seen.await({"call t/frac"}));
  REQUIRE(e.reservationLive("g1"));
  // Just short of the timeout, it still waits (two more looks: one began after the move).
  e.clock.advance(Duration{59'999});
  const int calls = e.seen.calls("t/frac");
  REQUIRE(e.seen.await({"call t/frac"}, calls + 2));
  CHECK_FALSE(e.seen.recordOf("t/frac"));
  CHECK(e.reservationLive("g1"));
  e.clock.advance(Duration{1});
  REQUIRE(e.seen.await({"t/frac"}));
  e.binder->waitIdle();
  auto rec = e.seen.recordOf("t/frac");
  CHECK_FALSE(rec->ok);
  CHECK_THAT(rec->error, Catch::Contains("Pod t/frac: GPU group g1: reservation pod tessera-reservation/"
                                         "gpu-reservation-g1 on node n1 did not report its GPU UUID"));
  CHECK_THAT(rec->error, Catch::EndsWith("within 1m0s; deleted it"));
  CHECK_FALSE(e.reservationLive("g1"));  // deleted (the kubelet takes it down at its next tick)
  CHECK(e.nodeOf("frac").empty());
  CHECK(e.client.binds() == 0);
  CHECK(e.binder->backingOff() == 1);  // as any failed bind
  CHECK(e.binder->parked() == 0);
  CHECK(e.binder->inFlight() == 0);
  auto events = e.cluster.list(Kind::Event);
  REQUIRE(events.ok());
  int failedBinding = 0;
  for (const auto& ev : events->items)
    failedBinding += ev.value("reason", "") == "FailedBinding" &&
                     ev.value("message", "").find("did not report its GPU UUID") != std::string::npos;
  CHECK(failedBinding == 1);
}

TEST_CASE("fencing: a parked bind is dropped unsent at its next look once leadership is lost",
          "[binder][parked][fencing]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8", "1")).ok());
  REQUIRE(e.cluster.create(Kind::Pod, fractionalPod("frac")).ok());
  e.cluster.holdReservations(true);
  std::atomic<uint64_t> epoch{1};
  binder::BinderOptions bo;
  bo.leaderEpoch = [&] { return epoch.load(); };
  binder::GpuBindingOptions go;
  go.uuidPoll = std::chrono::milliseconds(1);
  e.startGpu(bo, go);
  auto r = e.binds({{"frac", "n1"}});
  r.binds[0].gpus.push_back(half("g1"));
  e.binder->apply(r, cache::Snapshot{});
  REQUIRE(e.seen.await({"call t/frac"}));
  epoch = 0;  // shutdown or a lost lease: the reservation never reports, yet the binder drains
  REQUIRE(e.seen.await({"t/frac"}));
  e.binder->waitIdle();
  CHECK_THAT(e.seen.recordOf("t/frac")->error, Catch::Contains("not leading"));
  CHECK(e.binder->droppedByFencing().binds == 1);
  CHECK(e.client.binds() == 0);
  CHECK(e.nodeOf("frac").empty());
  CHECK(e.binder->parked() == 0);
  CHECK(e.binder->inFlight() == 0);
  CHECK(e.binder->backingOff() == 0);  // no backoff: the next leader places it afresh
}

// ---- sizes from the cluster's defaults (gpuSharing.defaultMemory / defaultCores; issue 22) ----

TEST_CASE("a defaulted GPU memory is written on the pod at bind, and the decided compute limit reaches its ConfigMap",
          "[binder][gpudefaults]") {
  Env e;
  REQUIRE(e.cluster.create(Kind::Node, node("n1", "8", "1")).ok());
  Json coresOnly = pod("c30");
  coresOnly["metadata"]["annotations"] = {{api::keys::kGpuCores, "30"}};
  REQUIRE(e.cluster.create(Kind::Pod, coresOnly).ok());
  REQUIRE(e.cluster.create(Kind::Pod, fractionalPod("half")).ok());
  binder::GpuBindingOptions go;
  go.uuidPoll = std::chrono::milliseconds(1);
  e.startGpu(binder::BinderOptions{}, go);
  auto r = e.binds({{"c30", "n1"}, {"half", "n1"}});
  r.binds[0].gpus.push_back({"g1", true, 244, 20000, -1});
  r.binds[0].gpuCorePercent = 30;
  r.binds[0].defaultedMemoryMiB = 20000;
  r.binds[1].gpus.push_back({"g1", false, 500, 0, -1});
  r.binds[1].gpuCorePercent = 40;  // what the scheduler decided wins over the pod's annotations (0.5: 50)
  e.binder->apply(r, cache::Snapshot{});
  e.binder->waitIdle();
  REQUIRE(e.nodeOf("c30") == "n1");
  REQUIRE(e.nodeOf("half") == "n1");
  auto c30 = e.cluster.get(Kind::Pod, "t", "c30");
  REQUIRE(c30.ok());
  // The pod keeps the size it got even if the default changes later.
  CHECK((*c30)["metadata"]["annotations"].value(api::keys::kGpuMemory, "") == "20000");
  auto half = e.cluster.get(Kind::Pod, "t", "half");
  REQUIRE(half.ok());
  CHECK_FALSE((*half)["metadata"]["annotations"].contains(api::keys::kGpuMemory));  // nothing defaulted
  auto limit = [&](const std::string& name) {
    auto cm = e.cluster.get(Kind::ConfigMap, "t", name + "-tessera-gpu");
    return cm.ok() ? (*cm)["data"].value("GPU_CORE_LIMIT", "") : std::string("no ConfigMap");
  };
  CHECK(limit("c30") == "30");
  CHECK(limit("half") == "40");
}
