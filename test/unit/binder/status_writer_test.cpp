// StatusWriter: PodGroup and Queue status through the status subresource, the reasons of invalid
// objects on the objects (conditions and events), deduplication and coalescing, background writes.
// The real cache, scheduler and binder over the in-memory cluster; no sleeps (drain() waits).
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/convert.h"
#include "tessera/api/log.h"
#include "tessera/app/registry.h"
#include "tessera/binder/binder.h"
#include "tessera/binder/events.h"
#include "tessera/binder/status_writer.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/config.h"
#include "tessera/framework/scheduler.h"

namespace {

using namespace tessera;
using cache::Json;

const char* kBase = R"(
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {nvidia.com/gpu.memory: "81920"}}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110", nvidia.com/gpu: "4"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: team}
spec:
  resources:
    gpu: {quota: "2", limit: "-1"}
    cpu: {quota: "-1", limit: "-1"}
    memory: {quota: "-1", limit: "-1"}
)";

std::string podYaml(const std::string& name, const std::string& group, const std::string& extra = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t, labels: {tessera.dev/queue: team}" +
         (group.empty() ? "" : ", annotations: {pod-group-name: " + group + "}") +
         "}\nspec:\n  schedulerName: tessera\n" + extra +
         "  containers: [{name: c, image: i, resources: {requests: {cpu: '1', nvidia.com/gpu: '1'}}}]\n";
}

std::string otherScheduler(std::string yaml) {
  const std::string from = "schedulerName: tessera";
  yaml.replace(yaml.find(from), from.size(), "schedulerName: other");
  return yaml;
}

std::string groupYaml(const std::string& name, int minMember) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: t}\nspec: {minMember: " + std::to_string(minMember) + ", queue: team}\n";
}

struct Env {
  api::FakeClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  framework::Config config = framework::loadConfig(app::builtinRegistry(), nullptr).value();
  std::unique_ptr<cache::Cache> cache;
  std::unique_ptr<binder::StatusWriter> writer;
  std::unique_ptr<binder::Binder> binder;
  std::unique_ptr<framework::Scheduler> scheduler;

  /// shared: the binder writes through `writer` (as app::Pipeline wires it); else it has its own.
  explicit Env(const std::string& yaml, bool background = false, bool shared = false) {
    add(kBase);
    add(yaml);
    cache = std::make_unique<cache::Cache>(cluster, clock, cache::CacheOptions{});  // scheduler "tessera"
    REQUIRE(cache->start().ok());
    binder::StatusWriterOptions o;
    o.background = background;
    writer = std::make_unique<binder::StatusWriter>(cluster, clock, o);
    binder = shared ? std::make_unique<binder::Binder>(cluster, *cache, clock, *writer)
                    : std::make_unique<binder::Binder>(cluster, *cache, clock);
    scheduler = std::make_unique<framework::Scheduler>(*cache, config, clock, *binder);
  }

  /// Creates (or replaces) the manifests; raw: not checked by conversion first (a broken object).
  void add(const std::string& yaml) {
    auto docs = api::yamlToJson(yaml);
    REQUIRE(docs.ok());
    for (auto& d : *docs) {
      auto kind = api::kindOf(d);
      REQUIRE(kind.ok());
      if (api::kindInfo(*kind).namespaced && !d["metadata"].contains("namespace"))
        d["metadata"]["namespace"] = "default";
      auto r = cluster.apply(*kind, d);
      INFO(d.dump());
      REQUIRE(r.ok());
    }
  }

  void cycle() {
    auto result = scheduler->runCycle();
    binder->waitIdle();  // the binder is asynchronous: the cycle's binds are done after this
    REQUIRE(result.snapshot);
    writer->update(result, *result.snapshot);
    writer->drain();
    cluster.kubeletTick();
  }

  Json get(api::Kind kind, const std::string& ns, const std::string& name) {
    auto r = cluster.get(kind, ns, name);
    REQUIRE(r.ok());
    return *r;
  }

  static Json conditionOf(const Json& obj, const std::string& type) {
    for (const auto& c : obj["status"].value("conditions", Json::array()))
      if (c.value("type", "") == type) return c;
    return Json();
  }

  /// Events about an object with a reason.
  int events(const std::string& kind, const std::string& name, const std::string& reason) {
    auto evs = cluster.list(api::Kind::Event);
    REQUIRE(evs.ok());
    int n = 0;
    for (const auto& e : evs->items)
      n += e["involvedObject"].value("kind", "") == kind && e["involvedObject"].value("name", "") == name &&
           e.value("reason", "") == reason;
    return n;
  }

  /// InvalidSpec events about an object.
  int invalidEvents(const std::string& kind, const std::string& name, std::string* message = nullptr) {
    auto evs = cluster.list(api::Kind::Event);
    REQUIRE(evs.ok());
    int n = 0;
    for (const auto& e : evs->items)
      if (e["involvedObject"].value("kind", "") == kind && e["involvedObject"].value("name", "") == name &&
          e.value("reason", "") == "InvalidSpec") {
        ++n;
        if (message) *message = e.value("message", "");
      }
    return n;
  }
};

}  // namespace

TEST_CASE("PodGroup and Queue status are written through the status subresource", "[status]") {
  Env env(groupYaml("g", 2) + "---\n" + podYaml("g-0", "g") + "---\n" + podYaml("g-1", "g"));
  env.cycle();
  Json pg = env.get(api::Kind::PodGroup, "t", "g");
  CHECK(pg["status"].value("phase", "") == "Running");  // placed this cycle: counted as scheduled
  CHECK(pg["status"].value("scheduled", -1) == 2);
  CHECK(pg["status"].value("pending", -1) == 0);
  CHECK(Env::conditionOf(pg, "Valid").value("status", "") == "True");
  CHECK(Env::conditionOf(pg, "Unschedulable").value("status", "") == "False");
  CHECK(pg["spec"].value("minMember", 0) == 2);  // the spec is untouched

  Json q = env.get(api::Kind::Queue, "", "team");
  CHECK(q["status"]["allocated"].value("nvidia.com/gpu", "") == "2");
  CHECK(q["status"]["requested"].value("nvidia.com/gpu", "") == "2");
  CHECK(q["status"].contains("fairShare"));
  CHECK(Env::conditionOf(q, "Valid").value("status", "") == "True");

  env.cycle();  // the pods run now
  pg = env.get(api::Kind::PodGroup, "t", "g");
  CHECK(pg["status"].value("running", -1) == 2);

  SECTION("nothing new: no write") {
    const auto before = env.writer->stats();
    const std::string rv = env.get(api::Kind::PodGroup, "t", "g")["metadata"].value("resourceVersion", "");
    env.cycle();
    env.cycle();
    CHECK(env.writer->stats().queued == before.queued);
    CHECK(env.get(api::Kind::PodGroup, "t", "g")["metadata"].value("resourceVersion", "") == rv);
  }
  SECTION("a pod finishing changes the counts") {
    REQUIRE(env.cluster.finishPod("t", "g-0", true).ok());
    env.cycle();
    pg = env.get(api::Kind::PodGroup, "t", "g");
    CHECK(pg["status"].value("succeeded", -1) == 1);
    REQUIRE(env.cluster.finishPod("t", "g-1", true).ok());
    env.cycle();
    CHECK(env.get(api::Kind::PodGroup, "t", "g")["status"].value("phase", "") == "Succeeded");
  }
}

TEST_CASE("an unschedulable gang: phase and condition carry the aggregated reason", "[status]") {
  Env env(groupYaml("big", 5) + "---\n" + podYaml("big-0", "big") + "---\n" + podYaml("big-1", "big"));
  env.cycle();
  Json pg = env.get(api::Kind::PodGroup, "t", "big");
  CHECK(pg["status"].value("phase", "") == "Unschedulable");
  Json c = Env::conditionOf(pg, "Unschedulable");
  CHECK(c.value("status", "") == "True");
  CHECK_THAT(c.value("message", ""), Catch::Contains("spec.minMember 5"));
  CHECK(c.value("lastTransitionTime", "") == "2026-01-01T00:00:00Z");
  // The condition keeps its transition time while it holds.
  env.clock.advance(api::Duration{60'000});
  env.add(podYaml("big-2", "big"));
  env.cycle();
  c = Env::conditionOf(env.get(api::Kind::PodGroup, "t", "big"), "Unschedulable");
  CHECK_THAT(c.value("message", ""), Catch::Contains("only 3 pods"));
  CHECK(c.value("lastTransitionTime", "") == "2026-01-01T00:00:00Z");
}

TEST_CASE("invalid PodGroups and Queues: Valid=False, InvalidSpec, an event, and fixing them", "[status]") {
  Env env(groupYaml("zero", 0) + "---\n" + podYaml("zero-0", "zero") + R"(---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: loop}
spec: {parentQueue: loop}
)");
  env.cycle();
  Json pg = env.get(api::Kind::PodGroup, "t", "zero");
  Json valid = Env::conditionOf(pg, "Valid");
  CHECK(valid.value("status", "") == "False");
  CHECK(valid.value("reason", "") == "InvalidSpec");
  CHECK(valid.value("message", "") == "PodGroup t/zero: spec.minMember: must be at least 1, got 0");
  CHECK(pg["status"].value("phase", "") == "Unschedulable");
  std::string msg;
  CHECK(env.invalidEvents("PodGroup", "zero", &msg) == 1);
  CHECK(msg == valid.value("message", ""));
  // The pod says why (the binder writes the job's reason).
  Json pod = env.get(api::Kind::Pod, "t", "zero-0");
  CHECK_THAT(Env::conditionOf(pod, "PodScheduled").value("message", ""), Catch::Contains("spec.minMember"));

  Json q = env.get(api::Kind::Queue, "", "loop");
  CHECK(Env::conditionOf(q, "Valid").value("status", "") == "False");
  CHECK_THAT(Env::conditionOf(q, "Valid").value("message", ""), Catch::Contains("parent cycle loop -> loop"));
  CHECK(env.invalidEvents("Queue", "loop") == 1);

  // Deduplicated: one event while the problem stays.
  env.cycle();
  env.cycle();
  CHECK(env.invalidEvents("PodGroup", "zero") == 1);
  CHECK(env.invalidEvents("Queue", "loop") == 1);

  // Fixed: Valid=True, and the gang is scheduled.
  env.clock.advance(api::Duration{1000});
  env.add(groupYaml("zero", 1));
  env.cycle();
  pg = env.get(api::Kind::PodGroup, "t", "zero");
  CHECK(Env::conditionOf(pg, "Valid").value("status", "") == "True");
  CHECK(Env::conditionOf(pg, "Valid").value("lastTransitionTime", "") == "2026-01-01T00:00:01Z");
  CHECK(env.get(api::Kind::Pod, "t", "zero-0")["spec"].value("nodeName", "") == "n1");
}

TEST_CASE("objects that fail conversion get their reason", "[status]") {
  std::string inTypo = podYaml("in-typo", "");
  inTypo.replace(inTypo.find("tessera.dev/queue: team"), std::string("tessera.dev/queue: team").size(),
                 "tessera.dev/queue: typo");
  Env env(podYaml("broken", "", "  priority: high\n") + "---\n" +
          podYaml("bound-broken", "", "  priority: high\n  nodeName: n1\n") + "---\n" + inTypo + "---\n" +
          podYaml("no-class", "", "  priorityClassName: ghost\n") + "---\n" +
          otherScheduler(podYaml("other-broken", "", "  priority: high\n")) +
          R"(---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: typo}
spec: {resources: {gpus: {quota: "1"}}}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: pg, namespace: t}
spec: {minMember: many}
---
apiVersion: v1
kind: Node
metadata: {name: bad-label, labels: {nvidia.com/gpu.memory: 80GB}}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110", nvidia.com/gpu: "4"}
  conditions: [{type: Ready, status: "True"}]
)");
  env.cycle();
  Json c = Env::conditionOf(env.get(api::Kind::Pod, "t", "broken"), "PodScheduled");
  CHECK(c.value("status", "") == "False");
  CHECK(c.value("reason", "") == "InvalidSpec");
  CHECK_THAT(c.value("message", ""), Catch::Contains("spec.priority"));
  CHECK(env.invalidEvents("Pod", "broken") == 1);
  // Not ours to mark: bound, or another scheduler's.
  CHECK(Env::conditionOf(env.get(api::Kind::Pod, "t", "bound-broken"), "PodScheduled").is_null());
  CHECK(Env::conditionOf(env.get(api::Kind::Pod, "t", "other-broken"), "PodScheduled").is_null());

  // A pod of the Queue that failed conversion: the queue is invalid (with why), not missing.
  c = Env::conditionOf(env.get(api::Kind::Pod, "t", "in-typo"), "PodScheduled");
  CHECK_THAT(c.value("message", ""), Catch::Contains("queue \"typo\" is invalid") && Catch::Contains("spec.resources.gpus"));
  // A pod naming a PriorityClass that does not exist (no spec.priority): a reason, not priority 0.
  c = Env::conditionOf(env.get(api::Kind::Pod, "t", "no-class"), "PodScheduled");
  CHECK_THAT(c.value("message", ""), Catch::Contains("PriorityClass \"ghost\" not found"));
  Json q = env.get(api::Kind::Queue, "", "typo");
  CHECK(Env::conditionOf(q, "Valid").value("reason", "") == "InvalidSpec");
  CHECK_THAT(Env::conditionOf(q, "Valid").value("message", ""), Catch::Contains("spec.resources.gpus"));
  Json pg = env.get(api::Kind::PodGroup, "t", "pg");
  CHECK(Env::conditionOf(pg, "Valid").value("status", "") == "False");
  CHECK_THAT(Env::conditionOf(pg, "Valid").value("message", ""), Catch::Contains("spec.minMember"));

  std::string msg;
  CHECK(env.invalidEvents("Node", "bad-label", &msg) == 1);
  CHECK(msg ==
        "Node bad-label: metadata.labels[nvidia.com/gpu.memory]: \"80GB\" is not a positive integer number of MiB");
}

TEST_CASE("updates coalesce and the background thread writes them", "[status]") {
  SECTION("two updates before a drain: one write") {
    Env env(groupYaml("g", 1) + "---\n" + podYaml("g-0", "g"));
    auto r1 = env.scheduler->runCycle();
    env.binder->waitIdle();
    env.writer->update(r1, *r1.snapshot);
    env.cluster.kubeletTick();
    auto r2 = env.scheduler->runCycle();
    env.binder->waitIdle();
    env.writer->update(r2, *r2.snapshot);
    CHECK(env.writer->stats().coalesced >= 1);
    const auto before = env.writer->stats().written;
    env.writer->drain();
    CHECK(env.writer->stats().written > before);
    CHECK(env.get(api::Kind::PodGroup, "t", "g")["status"].value("running", -1) == 1);
  }
  SECTION("background") {
    Env env(groupYaml("g", 1) + "---\n" + podYaml("g-0", "g"), /*background=*/true);
    env.cycle();  // update, then drain() waits for whatever the thread has taken
    CHECK(env.get(api::Kind::PodGroup, "t", "g")["status"].value("phase", "") == "Running");
    CHECK(env.writer->stats().failed == 0);
  }
}

TEST_CASE("one writer for the binder and update(): one queue, deduplicated, drained within the cycle", "[status]") {
  Env env(groupYaml("big", 5) + "---\n" + podYaml("big-0", "big") + "---\n" + podYaml("big-1", "big"),
          /*background=*/false, /*shared=*/true);
  auto r = env.scheduler->runCycle();
  // The binder queued the pods' conditions and the PodGroup's event; nothing is written yet.
  CHECK(env.writer->backlog() == 3);
  CHECK(Env::conditionOf(env.get(api::Kind::Pod, "t", "big-0"), "PodScheduled").is_null());
  env.binder->waitIdle();  // writes the binder's share on this thread
  CHECK(env.writer->backlog() == 0);
  Json c = Env::conditionOf(env.get(api::Kind::Pod, "t", "big-0"), "PodScheduled");
  CHECK(c.value("reason", "") == "Unschedulable");
  CHECK_THAT(c.value("message", ""), Catch::Contains("spec.minMember 5"));
  CHECK(env.events("Pod", "big-0", "FailedScheduling") == 1);
  CHECK(env.events("PodGroup", "big", "Unschedulable") == 1);
  env.writer->update(r, *r.snapshot);
  CHECK(env.writer->backlog() == 2);  // the PodGroup's and the Queue's status
  env.writer->drain();
  CHECK(env.get(api::Kind::PodGroup, "t", "big")["status"].value("phase", "") == "Unschedulable");

  // The same decisions again: every write is a duplicate of the last one queued under its key.
  const auto before = env.writer->stats();
  r = env.scheduler->runCycle();
  CHECK(env.writer->backlog() == 0);
  env.binder->waitIdle();
  env.writer->update(r, *r.snapshot);
  CHECK(env.writer->backlog() == 0);
  CHECK(env.writer->stats().queued == before.queued);
  CHECK(env.events("Pod", "big-0", "FailedScheduling") == 1);
  CHECK(env.events("PodGroup", "big", "Unschedulable") == 1);
}

TEST_CASE("a pod's queued condition is dropped when it is bound (settle)", "[status]") {
  Env env(podYaml("late", "", "  nodeSelector: {zone: b}\n"), /*background=*/false, /*shared=*/true);
  env.scheduler->runCycle();  // no node in zone b: PodScheduled=False queued, not written
  CHECK(env.writer->backlog() == 1);
  env.add(R"(
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {zone: b, nvidia.com/gpu.memory: "81920"}}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110", nvidia.com/gpu: "4"}
  conditions: [{type: Ready, status: "True"}]
)");
  env.scheduler->runCycle();  // bound: the stale condition must not land after the bind
  env.binder->waitIdle();
  Json pod = env.get(api::Kind::Pod, "t", "late");
  CHECK(pod["spec"].value("nodeName", "") == "n2");
  CHECK(Env::conditionOf(pod, "PodScheduled").value("status", "") == "True");  // the bind's, not ours
  CHECK(env.events("Pod", "late", "FailedScheduling") == 0);
  CHECK(env.events("Pod", "late", "Scheduled") == 1);
}

namespace {

/// The memory cluster, through a client a test overrides where it looks.
class Forwarding : public cache::ClusterClient {
 public:
  explicit Forwarding(cache::MemoryCluster& c) : c_(c) {}
  api::Result<cache::ListResult> list(api::Kind k, const cache::ListOptions& o) override { return c_.list(k, o); }
  api::Result<std::unique_ptr<cache::WatchHandle>> watch(api::Kind k, const std::string& rv,
                                                         cache::WatchCallback cb) override {
    return c_.watch(k, rv, std::move(cb));
  }
  api::Result<Json> get(api::Kind k, const std::string& ns, const std::string& n) override { return c_.get(k, ns, n); }
  api::Result<Json> create(api::Kind k, const Json& o) override { return c_.create(k, o); }
  api::Result<Json> update(api::Kind k, const Json& o) override { return c_.update(k, o); }
  api::Result<Json> updateStatus(api::Kind k, const Json& o) override { return c_.updateStatus(k, o); }
  api::Result<Json> patch(api::Kind k, const std::string& ns, const std::string& n, cache::PatchType t, const Json& p,
                          bool status) override {
    return c_.patch(k, ns, n, t, p, status);
  }
  api::Status remove(api::Kind k, const std::string& ns, const std::string& n, const cache::DeleteOptions& o) override {
    return c_.remove(k, ns, n, o);
  }
  api::Status bind(const std::string& ns, const std::string& n, const std::string& uid,
                   const std::string& node) override {
    return c_.bind(ns, n, uid, node);
  }

 protected:
  cache::MemoryCluster& c_;
};

/// The memory cluster, but status patches fail while `failing` is set.
class FailingStatus final : public Forwarding {
 public:
  using Forwarding::Forwarding;
  bool failing = true;
  api::Result<Json> patch(api::Kind k, const std::string& ns, const std::string& n, cache::PatchType t, const Json& p,
                          bool status) override {
    if (failing && status) return api::makeError("injected", 500);
    return c_.patch(k, ns, n, t, p, status);
  }
};

}  // namespace

TEST_CASE("a failed write is counted, logged, and written again when it is next wanted", "[status]") {
  Env env(groupYaml("g", 1) + "---\n" + podYaml("g-0", "g"));
  FailingStatus client(env.cluster);
  binder::StatusWriterOptions o;
  o.background = false;
  binder::StatusWriter writer(client, env.clock, o);
  std::vector<std::string> lines;
  auto previous = log::setSink([&](log::Severity, std::string_view m) { lines.emplace_back(m); });
  auto r = env.scheduler->runCycle();
  env.binder->waitIdle();
  writer.update(r, *r.snapshot);
  writer.drain();
  log::setSink(std::move(previous));
  CHECK(writer.stats().failed == 2);  // the PodGroup's and the Queue's status
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "status of PodGroup t/g: injected");
  CHECK(lines[1] == "status of Queue team: injected");
  // The same desired state: queued again (the failure forgot it), and written now.
  client.failing = false;
  writer.update(r, *r.snapshot);
  CHECK(writer.backlog() == 2);
  writer.drain();
  CHECK(writer.stats().written == 2);
  CHECK(env.get(api::Kind::PodGroup, "t", "g")["status"].value("phase", "") == "Running");
}

TEST_CASE("fencing: writes are dropped unsent while mayWrite says no, and queued again later", "[status][fencing]") {
  api::FakeClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  std::atomic<bool> leading{false};
  binder::StatusWriterOptions o;
  o.background = false;
  o.mayWrite = [&] { return leading.load(); };
  binder::StatusWriter writer(cluster, clock, o);
  const binder::EventSpec ev{api::Kind::Pod, "t", "p", "uid-1", "Normal", "Scheduled", "assigned t/p to n1"};
  writer.event(ev);
  writer.drain();
  CHECK(writer.stats().dropped == 1);
  CHECK(writer.stats().written == 0);
  CHECK(cluster.list(api::Kind::Event)->items.empty());
  leading = true;  // a new term wants the same write: it was forgotten, so it is queued again
  writer.event(ev);
  writer.drain();
  CHECK(writer.stats().written == 1);
  CHECK(cluster.list(api::Kind::Event)->items.size() == 1);
}

namespace {

/// The memory cluster, recording each write in the order it reaches the server.
class Recording final : public Forwarding {
 public:
  using Forwarding::Forwarding;
  std::vector<std::string> writes;  ///< "Event <involved object>", "put <name>" or "patch <name>"
  api::Result<Json> create(api::Kind k, const Json& o) override {
    if (k == api::Kind::Event) writes.push_back("Event " + o["involvedObject"].value("name", ""));
    return c_.create(k, o);
  }
  api::Result<Json> update(api::Kind k, const Json& o) override {
    writes.push_back("put " + o["metadata"].value("name", ""));
    return c_.update(k, o);
  }
  api::Result<Json> patch(api::Kind k, const std::string& ns, const std::string& n, cache::PatchType t, const Json& p,
                          bool status) override {
    writes.push_back("patch " + n);
    return c_.patch(k, ns, n, t, p, status);
  }
};

}  // namespace

TEST_CASE("Events wait behind the state users read, and past maxQueuedEvents new ones are dropped",
          "[status][events]") {
  api::FakeClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  Recording client(cluster);
  binder::StatusWriterOptions o;
  o.background = false;
  o.maxQueuedEvents = 5;
  binder::StatusWriter writer(client, clock, o);
  auto scheduled = [](int i) {
    const std::string pod = "p" + std::to_string(i);
    return binder::EventSpec{
        api::Kind::Pod, "t", pod, "uid-" + pod, "Normal", "Scheduled", "assigned t/" + pod + " to n1"};
  };
  std::vector<std::string> lines;
  auto previous = log::setSink([&](log::Severity, std::string_view m) { lines.emplace_back(m); });
  for (int i = 0; i < 8; ++i) writer.event(scheduled(i));
  // A state write queued after the Events (the usage history's ConfigMap, put whole).
  writer.put(api::Kind::ConfigMap, Json{{"apiVersion", "v1"},
                                        {"kind", "ConfigMap"},
                                        {"metadata", {{"name", "usage"}, {"namespace", "tessera-system"}}}});
  CHECK(writer.stats().eventsDropped == 3);
  CHECK(writer.backlog() == 6);
  writer.drain();
  log::setSink(std::move(previous));
  // The state first, then the five Events that waited, in the order they came.
  CHECK(client.writes ==
        std::vector<std::string>{"put usage", "Event p0", "Event p1", "Event p2", "Event p3", "Event p4"});
  // One warning for the burst, one line once its backlog is written.
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Catch::Contains("5 Events wait to be written"));
  CHECK(lines[1] == "status writer: the Event backlog is written; 3 Events were dropped meanwhile");
  SECTION("a dropped Event is not remembered as written: wanted again, it is written") {
    client.writes.clear();
    writer.event(scheduled(6));
    writer.event(scheduled(0));  // written already: deduplicated
    writer.drain();
    CHECK(client.writes == std::vector<std::string>{"Event p6"});
    CHECK(writer.stats().eventsDropped == 3);
  }
  SECTION("with room again, Events are queued") {
    for (int i = 10; i < 15; ++i) writer.event(scheduled(i));
    CHECK(writer.stats().eventsDropped == 3);
    CHECK(writer.backlog() == 5);
  }
}

namespace {

/// The one event about an object with a reason (null when there is none or more than one).
Json onlyEvent(Env& env, const std::string& kind, const std::string& name, const std::string& reason) {
  auto evs = env.cluster.list(api::Kind::Event);
  REQUIRE(evs.ok());
  Json found;
  int n = 0;
  for (const auto& e : evs->items)
    if (e["involvedObject"].value("kind", "") == kind && e["involvedObject"].value("name", "") == name &&
        e.value("reason", "") == reason)
      found = e, ++n;
  return n == 1 ? found : Json();
}

}  // namespace

TEST_CASE("a repeated event bumps the count of the Event written, at most once per interval", "[status][series]") {
  Env env(groupYaml("big", 5) + "---\n" + podYaml("big-0", "big") + "---\n" + podYaml("big-1", "big"),
          /*background=*/false, /*shared=*/true);
  env.cycle();
  Json pg = onlyEvent(env, "PodGroup", "big", "Unschedulable");
  Json pod = onlyEvent(env, "Pod", "big-0", "FailedScheduling");
  REQUIRE(pg.is_object());
  REQUIRE(pod.is_object());
  CHECK(pg.value("count", 0) == 1);
  CHECK_FALSE(pg["involvedObject"].value("uid", "").empty());  // the PodGroup's: a series is per object
  // Four more cycles within the interval (5 min): counted, not written.
  for (int i = 0; i < 4; ++i) {
    env.clock.advance(api::Duration{60'000});
    env.cycle();
  }
  CHECK(onlyEvent(env, "PodGroup", "big", "Unschedulable").value("count", 0) == 1);
  // Past the interval: one patch carries every repetition (1 + 5).
  env.clock.advance(api::Duration{60'000});
  env.cycle();
  pg = onlyEvent(env, "PodGroup", "big", "Unschedulable");
  pod = onlyEvent(env, "Pod", "big-0", "FailedScheduling");
  REQUIRE(pg.is_object());
  REQUIRE(pod.is_object());
  CHECK(pg.value("count", 0) == 6);
  CHECK(pod.value("count", 0) == 6);
  CHECK(pg.value("lastTimestamp", "") == "2026-01-01T00:05:00Z");
  CHECK(pg.value("firstTimestamp", "") == "2026-01-01T00:00:00Z");
  SECTION("a new message is a new Event") {
    env.add(podYaml("big-2", "big"));
    env.cycle();
    CHECK(env.events("PodGroup", "big", "Unschedulable") == 2);
  }
  SECTION("the Event expired: the next repetition writes a new one") {
    REQUIRE(env.cluster.remove(api::Kind::Event, pg["metadata"].value("namespace", ""),
                               pg["metadata"].value("name", "")).ok());
    env.clock.advance(api::Duration{5 * 60'000});
    env.cycle();  // the count patch answers 404: the series ends
    env.cycle();
    Json again = onlyEvent(env, "PodGroup", "big", "Unschedulable");
    REQUIRE(again.is_object());
    CHECK(again.value("count", 0) == 1);
  }
}

TEST_CASE("a pod recreated under the same name gets its own condition and event", "[status][series]") {
  std::string big = podYaml("p", "");
  big.replace(big.find("nvidia.com/gpu: '1'"), std::string("nvidia.com/gpu: '1'").size(), "nvidia.com/gpu: '9'");
  Env env(big, /*background=*/false, /*shared=*/true);
  env.cycle();
  Json first = onlyEvent(env, "Pod", "p", "FailedScheduling");
  REQUIRE(first.is_object());
  const std::string uid1 = env.get(api::Kind::Pod, "t", "p")["metadata"].value("uid", "");
  CHECK(first["involvedObject"].value("uid", "") == uid1);
  REQUIRE(env.cluster.remove(api::Kind::Pod, "t", "p").ok());
  env.cycle();   // terminating for a cycle; gone at its end
  env.add(big);  // a controller recreates it: same name, new UID, no condition yet
  env.cycle();
  const Json pod = env.get(api::Kind::Pod, "t", "p");
  CHECK(pod["metadata"].value("uid", "") != uid1);
  CHECK(Env::conditionOf(pod, "PodScheduled").value("reason", "") == "Unschedulable");
  CHECK(env.events("Pod", "p", "FailedScheduling") == 2);
}

TEST_CASE("what the writer remembers about objects goes with them; an emptied PodGroup shows no pods",
          "[status][series]") {
  std::string yaml = groupYaml("big", 5);
  for (int i = 0; i < 4; ++i) yaml += "---\n" + podYaml("big-" + std::to_string(i), "big");
  Env env(yaml, /*background=*/false, /*shared=*/true);
  env.cycle();
  REQUIRE(env.get(api::Kind::PodGroup, "t", "big")["status"].value("pending", -1) == 4);
  const size_t withPods = env.writer->remembered();
  for (int i = 0; i < 4; ++i) REQUIRE(env.cluster.remove(api::Kind::Pod, "t", "big-" + std::to_string(i)).ok());
  env.cycle();  // terminating for a cycle; gone at its end
  env.clock.advance(api::Duration{2 * 60'000});
  env.cycle();
  const Json status = env.get(api::Kind::PodGroup, "t", "big")["status"];
  CHECK(status.value("pending", -1) == 0);
  CHECK(status.value("running", -1) == 0);
  CHECK(status.value("phase", "") == "Pending");
  CHECK(Env::conditionOf(env.get(api::Kind::PodGroup, "t", "big"), "Unschedulable").value("reason", "") == "NoPods");
  // Per pod: its condition mark, its event mark and its event series (12), and the PodGroup's event.
  CHECK(env.writer->remembered() + 12 <= withPods);
}

TEST_CASE("an Event about an object with a long name still has a valid name (at most 253)", "[status]") {
  std::string longest;  // a 253-character pod name: four labels of 62 and one of 1
  for (int i = 0; i < 4; ++i) longest += std::string(62, 'p') + ".";
  longest += "p";
  api::FakeClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  std::string dotted;  // "a.a.a...a": wherever the cut falls, it may leave a trailing '.'
  for (int i = 0; i < 126; ++i) dotted += "a.";
  dotted += "a";
  for (const std::string& name : {longest, dotted}) {
    const Json ev = binder::makeEvent(api::Kind::Pod, "t", name, "uid", "Warning", "FailedScheduling", "m", "tessera",
                                      clock.now());
    const std::string evName = ev["metadata"].value("name", "");
    CHECK(evName.size() <= 253);
    CHECK(ev["involvedObject"].value("name", "") == name);  // the object is named in full
    auto created = cluster.create(api::Kind::Event, ev);     // validated as kube-apiserver would
    INFO(evName);
    CHECK(created.ok());
  }
}

TEST_CASE("a reason quoting bytes that are not UTF-8 is written, the bytes replaced (fuzz_annotations)",
          "[status]") {
  // A pod's annotation held 0xff bytes; its unschedulable reason quoted them and dumping the
  // condition threw (nlohmann: invalid UTF-8), which ended the daemon.
  api::FakeClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  REQUIRE(cluster.create(api::Kind::Pod, Json::parse(R"({"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"p","namespace":"t","uid":"uid-1"},"spec":{"containers":[]}})")).ok());
  binder::StatusWriterOptions o;
  o.background = false;
  binder::StatusWriter writer(cluster, clock, o);
  const std::string bad = "annotation tessera.dev/x: \"\xFF\xFF\xC3\": not a number";
  writer.podsUnschedulable({binder::UnschedulablePod{"t/p", "uid-1", bad}});
  writer.event(binder::EventSpec{api::Kind::Pod, "t", "p", "uid-1", "Warning", "Odd", bad});
  writer.drain();
  const std::string fixed = "annotation tessera.dev/x: \"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\": not a number";
  auto pod = cluster.get(api::Kind::Pod, "t", "p");
  REQUIRE(pod.ok());
  bool found = false;
  for (const Json& c : (*pod)["status"].value("conditions", Json::array()))
    if (c.value("type", "") == "PodScheduled") found = c.value("message", "") == fixed;
  CHECK(found);
  auto evs = cluster.list(api::Kind::Event);
  REQUIRE(evs.ok());
  int withFixed = 0;
  for (const Json& e : evs->items) withFixed += e.value("message", "") == fixed ? 1 : 0;
  CHECK(withFixed >= 1);
}
