// The cache and its snapshots: a published snapshot never changes, whatever events follow; a new
// snapshot reflects them and shares every unchanged entry with the previous one (copy on write);
// totals kept incrementally equal a from-scratch recomputation after a random (seeded) sequence of
// events; assumed binds and evictions, and their expiry; job -> queue and pod -> PodGroup
// resolution by every accepted key; pods of other schedulers and terminal pods.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/convert.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/cache/placement_key.h"

namespace {

using tessera::api::Duration;
using tessera::api::FakeClock;
using tessera::api::Kind;
using tessera::api::parseTime;
using tessera::api::Resources;
using tessera::cache::Cache;
using tessera::cache::CacheOptions;
using tessera::cache::JobInfo;
using tessera::cache::Json;
using tessera::cache::MemoryCluster;
using tessera::cache::NodeInfo;
using tessera::cache::QueueInfo;
using tessera::cache::Snapshot;
using tessera::cache::TaskStatus;

const std::vector<std::string> kNone;

// ---- manifests ----

Json node(const std::string& name, const std::string& cpu = "16", const std::string& gpus = "4",
          Json labels = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"status",
           {{"allocatable", {{"cpu", cpu}, {"memory", "64Gi"}, {"pods", "110"}, {"nvidia.com/gpu", gpus}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

/// A pod of scheduler tessera requesting `requests`; `patch` is merged over it (JSON merge patch).
Json pod(const std::string& ns, const std::string& name, Json requests, const Json& patch = Json::object()) {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"namespace", ns}, {"name", name}}},
            {"spec",
             {{"schedulerName", "tessera"},
              {"containers", {{{"name", "main"}, {"image", "busybox"}, {"resources", {{"requests", requests}}}}}}}}};
  p.merge_patch(patch);
  return p;
}

Json running(const std::string& nodeName) {
  return {{"spec", {{"nodeName", nodeName}}}, {"status", {{"phase", "Running"}}}};
}

Json labels(Json l) { return {{"metadata", {{"labels", std::move(l)}}}}; }
Json annotations(Json a) { return {{"metadata", {{"annotations", std::move(a)}}}}; }

Json merged(Json a, const Json& b) {
  a.merge_patch(b);
  return a;
}

Json queue(const std::string& name, Json meta = Json::object()) {
  Json q = {{"apiVersion", "scheduling.tessera.dev/v1alpha1"}, {"kind", "Queue"}, {"metadata", {{"name", name}}}};
  q["metadata"].merge_patch(meta);
  return q;
}

Json podGroup(const std::string& ns, const std::string& name, int minMember, const std::string& queueName = "",
              Json meta = Json::object()) {
  Json g = {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
            {"kind", "PodGroup"},
            {"metadata", {{"namespace", ns}, {"name", name}}},
            {"spec", {{"minMember", minMember}}}};
  if (!queueName.empty()) g["spec"]["queue"] = queueName;
  g["metadata"].merge_patch(meta);
  return g;
}

Json priorityClass(const std::string& name, int value) {
  return {{"apiVersion", "scheduling.k8s.io/v1"}, {"kind", "PriorityClass"}, {"metadata", {{"name", name}}},
          {"value", value}};
}

Resources cpuGpu(int64_t milliCpu, int64_t gpus) {
  Resources r;
  r.milliCpu = milliCpu;
  r.milliGpu = gpus * 1000;
  return r;
}

struct Env {
  FakeClock clock{parseTime("2026-01-01T00:00:00Z").value()};
  MemoryCluster cluster{clock};
  std::unique_ptr<Cache> cache;

  void create(Kind kind, const Json& obj) {
    auto r = cluster.create(kind, obj);
    if (!r.ok()) FAIL("create " << obj.dump() << ": " << r.error().message);
  }
  void apply(Kind kind, const Json& obj) {
    auto r = cluster.apply(kind, obj);
    if (!r.ok()) FAIL("apply " << obj.dump() << ": " << r.error().message);
  }
  void start(CacheOptions options = {}) {
    cache = std::make_unique<Cache>(cluster, clock, options);
    REQUIRE(cache->start().ok());
  }
  std::shared_ptr<const Snapshot> snap() { return cache->snapshot(); }
};

// ---- the observable contents of a snapshot, one line per field ----

std::string res(const Resources& r) { return "{" + r.toString() + "}"; }

std::vector<std::string> describeNode(const NodeInfo& n) {
  const std::string w = "node " + n.name;
  std::vector<std::string> out;
  out.push_back(w + " allocatable " + res(n.allocatable));
  out.push_back(w + " used " + res(n.used));
  out.push_back(w + " releasing " + res(n.releasing));
  out.push_back(w + " idle " + res(n.idle()));
  out.push_back(w + " podCount " + std::to_string(n.podCount));
  out.push_back(w + " releasingPods " + std::to_string(n.releasingPods));
  std::string pods;
  for (const auto& p : n.pods) pods += " " + p;
  out.push_back(w + " pods" + pods);
  std::vector<std::string> ports;
  for (const auto& p : n.usedPorts) ports.push_back(std::to_string(p.port) + "/" + p.protocol + "@" + p.hostIP);
  std::sort(ports.begin(), ports.end());  // a multiset: the order of events does not matter
  std::string ps;
  for (const auto& p : ports) ps += " " + p;
  out.push_back(w + " ports" + ps);
  if (n.node) {
    std::string ls;
    for (const auto& [k, v] : n.node->meta.labels) ls += " " + k + "=" + v;
    out.push_back(w + " labels" + ls);
  }
  return out;
}

std::vector<std::string> describeJob(const JobInfo& j) {
  const std::string w = "job " + j.key;
  std::vector<std::string> out;
  out.push_back(w + " ns/name " + j.namespace_ + "/" + j.name + " uid " + j.uid);
  out.push_back(w + " created " + std::to_string(j.creationTime.unixMillis));
  out.push_back(w + " podGroup " + (j.podGroup ? j.podGroup->meta.uid : "-") + (j.podGroupMissing ? " missing" : ""));
  out.push_back(w + " queue " + j.queue);
  out.push_back(w + " priorityClass " + j.priorityClassName + " podPriority " +
                (j.podPriority ? std::to_string(*j.podPriority) : "-"));
  out.push_back(w + " minMember " + std::to_string(j.minMember));
  out.push_back(w + " allocated " + res(j.allocated));
  out.push_back(w + " counts pending " + std::to_string(j.pendingCount) + " allocated " +
                std::to_string(j.allocatedCount) + " succeeded " + std::to_string(j.succeededCount) + " failed " +
                std::to_string(j.failedCount));
  for (const auto& t : j.tasks) {
    out.push_back(w + " task " + t.key + " uid " + t.uid + " " + toString(t.status) + " node " + t.nodeName +
                  " request " + res(t.request) + " taskPriority " + std::to_string(t.taskPriority) + " subGroup " +
                  t.subGroup + (t.assumed ? " assumed" : ""));
  }
  return out;
}

std::vector<std::string> describe(const Snapshot& s) {
  std::vector<std::string> out;
  for (const auto& n : s.nodes)
    for (auto& l : describeNode(*n)) out.push_back(std::move(l));
  for (const auto& j : s.jobs)
    for (auto& l : describeJob(*j)) out.push_back(std::move(l));
  for (const auto& [name, q] : s.queues) {
    // An entry with no Queue object and nothing allocated says nothing (see the [queues] case).
    if (!q->queue && q->allocated.isZero()) continue;
    out.push_back("queue " + name + (q->queue ? " declared" : " undeclared") + " allocated " + res(q->allocated));
  }
  for (const auto& [name, pc] : s.priorityClasses)
    out.push_back("priorityClass " + name + " " + std::to_string(pc->value));
  return out;
}

/// Lines only in `a` ("- ...") and only in `b` ("+ ..."): empty when equal.
std::vector<std::string> lineDiff(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::multiset<std::string> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  std::vector<std::string> out;
  for (const auto& l : sa)
    if (sb.count(l) < sa.count(l) && std::find(out.begin(), out.end(), "- " + l) == out.end()) out.push_back("- " + l);
  for (const auto& l : sb)
    if (sa.count(l) < sb.count(l) && std::find(out.begin(), out.end(), "+ " + l) == out.end()) out.push_back("+ " + l);
  if (out.empty() && a != b) out.push_back("same lines, different order");
  return out;
}

const JobInfo& jobOf(const Snapshot& s, const std::string& key) {
  const JobInfo* j = s.findJob(key);
  if (!j) FAIL("no job " << key);
  return *j;
}

const tessera::cache::TaskInfo& taskOf(const Snapshot& s, const std::string& jobKey, const std::string& podKey) {
  const JobInfo& j = jobOf(s, jobKey);
  for (const auto& t : j.tasks)
    if (t.key == podKey) return t;
  FAIL("no task " << podKey << " in " << jobKey);
  return j.tasks.front();
}

const NodeInfo& nodeOf(const Snapshot& s, const std::string& name) {
  const NodeInfo* n = s.findNode(name);
  if (!n) FAIL("no node " << name);
  return *n;
}

template <class Map>
const void* entry(const Map& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? nullptr : it->second.get();
}

}  // namespace

TEST_CASE("a snapshot never changes; the next one reflects the events and shares what did not change",
          "[snapshot]") {
  Env e;
  e.create(Kind::PriorityClass, priorityClass("high", 1000));
  e.create(Kind::Queue, queue("q-a"));
  e.create(Kind::Queue, queue("q-b"));
  e.create(Kind::Queue, queue("q-c"));
  for (const char* n : {"n1", "n2", "n3", "n4"}) e.create(Kind::Node, node(n));
  const Json qa = labels({{"tessera.dev/queue", "q-a"}});
  e.create(Kind::Pod, pod("t", "run", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}, merged(qa, running("n1"))));
  e.create(Kind::Pod, pod("t", "pend", {{"cpu", "1"}}, qa));
  e.create(Kind::Pod, pod("t", "to-bind", {{"cpu", "2"}, {"nvidia.com/gpu", "1"}}, qa));
  e.create(Kind::Pod, pod("t", "to-delete", {{"cpu", "1"}}, qa));
  e.create(Kind::Pod, pod("t", "to-terminate", {{"cpu", "1"}, {"nvidia.com/gpu", "2"}}, merged(qa, running("n2"))));
  e.create(Kind::Pod, pod("t", "to-complete", {{"cpu", "3"}}, merged(qa, running("n3"))));
  e.create(Kind::Pod, pod("t", "relabel", {{"cpu", "1"}}, merged(qa, running("n3"))));
  e.create(Kind::Pod, pod("t", "untouched", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}},
                          merged(labels({{"tessera.dev/queue", "q-c"}}), running("n4"))));
  e.create(Kind::Pod, pod("t", "late-0", {{"cpu", "1"}}, annotations({{"pod-group-name", "late"}})));
  e.create(Kind::Pod, pod("t", "late-1", {{"cpu", "1"}}, annotations({{"pod-group-name", "late"}})));
  e.create(Kind::PodGroup, podGroup("t", "gone", 2, "q-b"));
  e.create(Kind::Pod, pod("t", "gone-0", {{"cpu", "1"}}, annotations({{"pod-group-name", "gone"}})));
  e.create(Kind::Pod, pod("t", "gone-1", {{"cpu", "1"}}, annotations({{"pod-group-name", "gone"}})));
  e.start();

  const auto s1 = e.snap();
  const std::vector<std::string> c1 = describe(*s1);
  REQUIRE(nodeOf(*s1, "n2").releasing.isZero());
  REQUIRE(jobOf(*s1, "PodGroup/t/late").podGroupMissing);
  REQUIRE(jobOf(*s1, "PodGroup/t/gone").podGroup != nullptr);
  REQUIRE(jobOf(*s1, "Pod/t/relabel").queue == "q-a");

  // Events of every kind.
  REQUIRE(e.cluster.bind("t", "to-bind", "", "n2").ok());
  REQUIRE(e.cluster.remove(Kind::Pod, "t", "to-delete").ok());
  REQUIRE(e.cluster.remove(Kind::Pod, "t", "to-terminate").ok());  // bound: terminating
  REQUIRE(e.cluster.finishPod("t", "to-complete", true).ok());
  e.create(Kind::Pod, pod("t", "new", {{"cpu", "1"}}, qa));
  e.apply(Kind::Node, node("n1", "32", "4", {{"zone", "z1"}}));
  e.create(Kind::PodGroup, podGroup("t", "late", 2, "q-b"));
  REQUIRE(e.cluster.remove(Kind::PodGroup, "t", "gone").ok());
  {
    auto p = e.cluster.get(Kind::Pod, "t", "relabel");
    REQUIRE(p.ok());
    Json next = *p;
    next["metadata"]["labels"]["tessera.dev/queue"] = "q-b";
    REQUIRE(e.cluster.update(Kind::Pod, next).ok());
  }
  e.apply(Kind::Queue, queue("q-b", {{"labels", {{"team", "b"}}}}));
  e.create(Kind::PriorityClass, priorityClass("low", 10));

  const auto s2 = e.snap();

  SECTION("the first snapshot is unchanged, field by field") {
    CHECK(lineDiff(c1, describe(*s1)) == kNone);
    CHECK(s1->findJob("Pod/t/new") == nullptr);
    CHECK(s1->findJob("Pod/t/to-delete") != nullptr);
    CHECK(s1->priorityClasses.count("low") == 0);
  }

  SECTION("the second reflects every event") {
    CHECK(lineDiff(c1, describe(*s2)) != kNone);
    const auto& bound = taskOf(*s2, "Pod/t/to-bind", "t/to-bind");
    CHECK(bound.status == TaskStatus::Bound);
    CHECK(bound.nodeName == "n2");
    CHECK(s2->findJob("Pod/t/to-delete") == nullptr);
    CHECK(taskOf(*s2, "Pod/t/to-terminate", "t/to-terminate").status == TaskStatus::Releasing);
    const NodeInfo& n2 = nodeOf(*s2, "n2");
    CHECK(n2.releasing == cpuGpu(1000, 2));
    CHECK(n2.used == cpuGpu(3000, 3));  // to-bind + to-terminate
    CHECK(n2.podCount == 2);
    CHECK(n2.pods == std::vector<std::string>{"t/to-bind", "t/to-terminate"});
    CHECK(taskOf(*s2, "Pod/t/to-complete", "t/to-complete").status == TaskStatus::Succeeded);
    CHECK(nodeOf(*s2, "n3").used == cpuGpu(1000, 0));  // only relabel is left there
    CHECK(nodeOf(*s2, "n1").allocatable.milliCpu == 32000);
    CHECK(*nodeOf(*s2, "n1").node->meta.label("zone") == "z1");
    CHECK(nodeOf(*s2, "n1").used == cpuGpu(1000, 1));  // the node changed, its pods did not
    CHECK(s2->findJob("Pod/t/new") != nullptr);
    const JobInfo& late = jobOf(*s2, "PodGroup/t/late");
    CHECK_FALSE(late.podGroupMissing);
    REQUIRE(late.podGroup);
    CHECK(late.minMember == 2);
    CHECK(late.queue == "q-b");
    const JobInfo& gone = jobOf(*s2, "PodGroup/t/gone");
    CHECK(gone.podGroupMissing);
    CHECK(gone.podGroup == nullptr);
    CHECK(gone.queue == "default");
    CHECK(jobOf(*s2, "Pod/t/relabel").queue == "q-b");
    // Queue totals moved with the relabelled job and the finished pods.
    // run + to-bind + to-terminate (releasing still holds); to-complete is done, relabel moved.
    CHECK(s2->queues.at("q-a")->allocated == cpuGpu(1000 + 2000 + 1000, 1 + 1 + 2));
    CHECK(s2->queues.at("q-b")->allocated == cpuGpu(1000, 0));             // relabel
    CHECK(s2->queues.at("q-b")->queue->meta.labels.at("team") == "b");
    CHECK(s2->priorityClasses.count("low") == 1);
  }

  SECTION("unchanged entries are shared, changed ones are not") {
    CHECK(s1->findNode("n4") == s2->findNode("n4"));
    CHECK(s1->findJob("Pod/t/untouched") == s2->findJob("Pod/t/untouched"));
    CHECK(s1->findJob("Pod/t/pend") == s2->findJob("Pod/t/pend"));
    CHECK(s1->findJob("Pod/t/run") == s2->findJob("Pod/t/run"));
    CHECK(entry(s1->queues, "q-c") == entry(s2->queues, "q-c"));
    CHECK(entry(s1->priorityClasses, "high") == entry(s2->priorityClasses, "high"));
    for (const char* n : {"n1", "n2", "n3"}) CHECK(s1->findNode(n) != s2->findNode(n));
    for (const char* j : {"Pod/t/to-bind", "Pod/t/to-terminate", "Pod/t/to-complete", "Pod/t/relabel",
                          "PodGroup/t/late", "PodGroup/t/gone"})
      CHECK(s1->findJob(j) != s2->findJob(j));
    CHECK(entry(s1->queues, "q-a") != entry(s2->queues, "q-a"));
    CHECK(entry(s1->queues, "q-b") != entry(s2->queues, "q-b"));
  }

  SECTION("a snapshot with no events in between shares everything") {
    const auto s3 = e.snap();
    CHECK(s3->generation > s2->generation);
    REQUIRE(s3->nodes.size() == s2->nodes.size());
    for (size_t i = 0; i < s2->nodes.size(); ++i) CHECK(s3->nodes[i] == s2->nodes[i]);
    REQUIRE(s3->jobs.size() == s2->jobs.size());
    for (size_t i = 0; i < s2->jobs.size(); ++i) CHECK(s3->jobs[i] == s2->jobs[i]);
  }
}

namespace {

/// Recomputes node, job and queue totals from the cluster's pods and the snapshot's tasks, and
/// returns every total of `s` that differs.
std::vector<std::string> recomputeDifferences(MemoryCluster& cluster, const Snapshot& s) {
  std::vector<std::string> d;
  auto pods = cluster.list(Kind::Pod);
  REQUIRE(pods.ok());
  struct NodeTotals {
    Resources used, releasing;
    int32_t count = 0, leaving = 0;
    std::vector<std::string> pods;
  };
  std::map<std::string, NodeTotals> nodes;
  for (const auto& j : pods->items) {
    auto p = tessera::api::podFromJson(j);
    REQUIRE(p.ok());
    if (p->nodeName.empty() || p->terminated()) continue;
    NodeTotals& t = nodes[p->nodeName];
    t.used += p->requests;
    if (p->terminating()) t.releasing += p->requests, t.leaving++;
    t.count++;
    t.pods.push_back(p->meta.key());
  }
  for (const auto& n : s.nodes) {
    NodeTotals& t = nodes[n->name];
    std::sort(t.pods.begin(), t.pods.end());
    if (!(n->used == t.used)) d.push_back("node " + n->name + " used " + res(n->used) + " != " + res(t.used));
    if (!(n->releasing == t.releasing))
      d.push_back("node " + n->name + " releasing " + res(n->releasing) + " != " + res(t.releasing));
    if (n->podCount != t.count) d.push_back("node " + n->name + " podCount " + std::to_string(n->podCount));
    if (n->releasingPods != t.leaving)
      d.push_back("node " + n->name + " releasingPods " + std::to_string(n->releasingPods));
    if (n->pods != t.pods) d.push_back("node " + n->name + " pods");
  }
  std::map<std::string, Resources> queues;
  std::map<std::string, const std::string*> topologyKeys;  // (JobInfo::topologyKey)
  // Each job's pod count, kept alongside the list from one snapshot to the next (sessions place
  // the jobs' pods by it).
  if (s.jobTaskCounts.size() != s.jobs.size()) d.push_back("jobTaskCounts: " + std::to_string(s.jobTaskCounts.size()));
  for (size_t i = 0; i < s.jobs.size() && i < s.jobTaskCounts.size(); ++i)
    if (s.jobTaskCounts[i] != s.jobs[i]->tasks.size())
      d.push_back("job " + s.jobs[i]->key + " count " + std::to_string(s.jobTaskCounts[i]));
  for (const auto& j : s.jobs) {
    Resources alloc;
    int32_t pending = 0, allocated = 0, succeeded = 0, failed = 0;
    for (const auto& t : j->tasks) {
      if (holdsResources(t.status)) alloc += t.request;
      switch (t.status) {
        case TaskStatus::Pending: ++pending; break;
        case TaskStatus::Succeeded: ++succeeded; break;
        case TaskStatus::Failed: ++failed; break;
        default: ++allocated; break;
      }
    }
    if (!(j->allocated == alloc)) d.push_back("job " + j->key + " allocated " + res(j->allocated) + " != " + res(alloc));
    if (j->pendingCount != pending || j->allocatedCount != allocated || j->succeededCount != succeeded ||
        j->failedCount != failed)
      d.push_back("job " + j->key + " counts");
    if (j->tasks.empty()) d.push_back("job " + j->key + " has no tasks");
    queues[j->queue] += alloc;
    // Its PodGroup's topology constraint, interned: equal constraints are one pointer.
    const std::string want = j->podGroup ? tessera::cache::topologyKeyOf(j->podGroup->topologyConstraint) : "";
    if ((j->topologyKey != nullptr) != !want.empty() || (j->topologyKey && *j->topologyKey != want))
      d.push_back("job " + j->key + " topologyKey");
    if (j->topologyKey) {
      const std::string* first = topologyKeys.try_emplace(want, j->topologyKey.get()).first->second;
      if (first != j->topologyKey.get()) d.push_back("job " + j->key + " topologyKey not interned");
    }
  }
  for (const auto& [name, q] : s.queues)
    if (!(q->allocated == queues[name]))
      d.push_back("queue " + name + " allocated " + res(q->allocated) + " != " + res(queues[name]));
  for (const auto& [name, total] : queues)
    if (!total.isZero() && !s.queues.count(name)) d.push_back("queue " + name + " missing");
  return d;
}

}  // namespace

TEST_CASE("incremental totals equal a from-scratch recomputation after random events", "[snapshot][random]") {
  const uint32_t seed = GENERATE(1u, 2u, 3u, 20260101u);
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  Env e;
  const std::vector<std::string> nodeNames{"n1", "n2", "n3", "n4", "n5"};
  for (const auto& n : nodeNames) e.create(Kind::Node, node(n));
  e.create(Kind::Queue, queue("q1"));
  e.create(Kind::Queue, queue("q2"));
  e.start();

  const std::vector<std::string> nss{"a", "b"};
  const std::vector<std::string> groupKeys{"pod-group-name", "scheduling.k8s.io/group-name",
                                           "scheduling.x-k8s.io/pod-group"};
  const std::vector<std::string> queueKeys{"tessera.dev/queue", "kai.scheduler/queue"};
  const std::vector<std::string> queueNames{"q1", "q2", "q3"};
  int created = 0;
  // How often the interesting states showed up in snapshots: the sequence must reach them.
  int sawReleasing = 0, sawGroup = 0, sawMissing = 0, sawTerminal = 0, sawDefaultQueue = 0, sawTopology = 0;
  // Earlier snapshots kept alive while events keep coming, with what they showed when taken.
  std::vector<std::pair<std::shared_ptr<const Snapshot>, std::vector<std::string>>> kept;

  // A PodGroup asks one of a few topology constraints, or none (jobs share interned keys).
  auto withTopology = [&](Json g) {
    const size_t which = pick(4);
    if (which == 1) g["spec"]["topologyConstraint"] = {{"topology", "dc"}, {"preferredTopologyLevel", "rack"}};
    if (which == 2) g["spec"]["topologyConstraint"] = {{"topology", "dc"}, {"requiredTopologyLevel", "rack"}};
    if (which == 3) g["spec"]["topologyConstraint"] = {{"topology", "dc"}, {"requiredTopologyLevel", "zone"}};
    return g;
  };
  auto listPods = [&] {
    auto l = e.cluster.list(Kind::Pod);
    REQUIRE(l.ok());
    return l->items;
  };
  auto nameOf = [](const Json& p) {
    return std::make_pair(p["metadata"]["namespace"].get<std::string>(), p["metadata"]["name"].get<std::string>());
  };

  for (int step = 0; step < 600; ++step) {
    const size_t what = pick(20);
    if (what < 5) {  // a new pod, maybe in a group, maybe of another scheduler, maybe already running
      const std::string ns = nss[pick(2)];
      Json patch = Json::object();
      const size_t g = pick(4);
      if (g < 3) {
        const std::string group = "g" + std::to_string(pick(4));
        if (g < 2) patch["metadata"]["annotations"][groupKeys[g]] = group;
        else patch["metadata"]["labels"][groupKeys[g]] = group;
      }
      if (pick(3) > 0) patch["metadata"]["labels"][queueKeys[pick(2)]] = queueNames[pick(3)];
      if (pick(3) == 0) patch["metadata"]["labels"]["tessera.dev/task-priority"] = std::to_string(pick(5));
      if (pick(5) == 0) patch["spec"]["schedulerName"] = "default-scheduler";
      Json p = pod(ns, "p" + std::to_string(created++),
                   {{"cpu", std::to_string(100 * (1 + pick(20))) + "m"}, {"nvidia.com/gpu", std::to_string(pick(3))}},
                   patch);
      if (pick(3) == 0) {
        p["spec"]["containers"][0]["ports"] = {{{"containerPort", 80}, {"hostPort", 8000 + static_cast<int>(pick(3))}}};
      }
      if (pick(4) == 0) p.merge_patch(running(nodeNames[pick(nodeNames.size())]));
      e.create(Kind::Pod, p);
    } else if (what < 8) {  // bind a pending pod
      std::vector<Json> pending;
      for (auto& p : listPods())
        if (p["spec"].value("nodeName", "").empty() && !p["metadata"].contains("deletionTimestamp")) pending.push_back(p);
      if (pending.empty()) continue;
      auto [ns, name] = nameOf(pending[pick(pending.size())]);
      (void)e.cluster.bind(ns, name, "", nodeNames[pick(nodeNames.size())]);
    } else if (what < 10) {  // delete a pod (graceful when bound)
      auto pods = listPods();
      if (pods.empty()) continue;
      auto [ns, name] = nameOf(pods[pick(pods.size())]);
      (void)e.cluster.remove(Kind::Pod, ns, name);
    } else if (what < 11) {
      (void)e.cluster.kubeletTick();
    } else if (what < 12) {  // a pod finishes
      auto pods = listPods();
      if (pods.empty()) continue;
      auto [ns, name] = nameOf(pods[pick(pods.size())]);
      (void)e.cluster.finishPod(ns, name, pick(2) == 0);
    } else if (what < 14) {  // a PodGroup comes or goes
      const std::string ns = nss[pick(2)];
      const std::string name = "g" + std::to_string(pick(4));
      if (e.cluster.get(Kind::PodGroup, ns, name).ok()) {
        if (pick(2) == 0) REQUIRE(e.cluster.remove(Kind::PodGroup, ns, name).ok());
        else e.apply(Kind::PodGroup, withTopology(podGroup(ns, name, 1 + static_cast<int>(pick(3)), queueNames[pick(3)])));
      } else {
        Json meta = Json::object();
        if (pick(2) == 0) meta["labels"][queueKeys[pick(2)]] = queueNames[pick(3)];
        e.create(Kind::PodGroup,
                 withTopology(podGroup(ns, name, 1 + static_cast<int>(pick(3)), pick(2) ? queueNames[pick(3)] : "", meta)));
      }
    } else if (what < 16) {  // a pod's queue label, or the PodGroup it names, changes
      auto pods = listPods();
      if (pods.empty()) continue;
      Json p = pods[pick(pods.size())];
      if (pick(2) == 0) {
        p["metadata"]["labels"][queueKeys[pick(2)]] = queueNames[pick(3)];
      } else {
        for (const auto& k : groupKeys) {
          if (p["metadata"].contains("annotations")) p["metadata"]["annotations"].erase(k);
          if (p["metadata"].contains("labels")) p["metadata"]["labels"].erase(k);
        }
        const size_t g = pick(4);
        if (g < 2) p["metadata"]["annotations"][groupKeys[g]] = "g" + std::to_string(pick(4));
        else if (g < 3) p["metadata"]["labels"][groupKeys[g]] = "g" + std::to_string(pick(4));
      }
      (void)e.cluster.update(Kind::Pod, p);
    } else if (what < 17) {  // a node changes, goes, or comes back
      const std::string n = nodeNames[pick(nodeNames.size())];
      const size_t how = pick(4);
      if (how == 0) (void)e.cluster.remove(Kind::Node, "", n);
      else e.apply(Kind::Node, node(n, std::to_string(8 * (1 + pick(3))), "4", {{"rev", std::to_string(step)}}));
    } else if (what < 18) {  // a queue comes or goes
      const std::string q = queueNames[pick(3)];
      if (e.cluster.get(Kind::Queue, "", q).ok()) REQUIRE(e.cluster.remove(Kind::Queue, "", q).ok());
      else e.create(Kind::Queue, queue(q));
    } else if (what < 19) {
      e.clock.advance(Duration{1000 * static_cast<int64_t>(1 + pick(30))});
    } else {  // take a snapshot and keep some alive
      auto s = e.snap();
      if (kept.size() < 8 || pick(2) == 0) {
        if (kept.size() >= 8) kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(pick(kept.size())));
        kept.emplace_back(s, describe(*s));
      }
      INFO("step " << step);
      REQUIRE(recomputeDifferences(e.cluster, *s) == kNone);
      for (const auto& n : s->nodes) sawReleasing += n->releasing.isZero() ? 0 : 1;
      for (const auto& j : s->jobs) {
        sawGroup += j->podGroup ? 1 : 0;
        sawTopology += j->topologyKey ? 1 : 0;
        sawMissing += j->podGroupMissing ? 1 : 0;
        sawTerminal += j->succeededCount + j->failedCount;
        sawDefaultQueue += j->queue == "default" ? 1 : 0;
      }
    }
  }
  const auto last = e.snap();
  CHECK(recomputeDifferences(e.cluster, *last) == kNone);

  // A cache built from scratch over the same cluster agrees with the incremental one.
  Cache fresh(e.cluster, e.clock);
  REQUIRE(fresh.start().ok());
  CHECK(lineDiff(describe(*fresh.snapshot()), describe(*last)) == kNone);

  // Snapshots taken along the way still show what they showed.
  for (const auto& [s, lines] : kept) CHECK(lineDiff(lines, describe(*s)) == kNone);
  CHECK(created > 50);
  CHECK(sawReleasing > 0);
  CHECK(sawGroup > 0);
  CHECK(sawTopology > 0);
  CHECK(sawMissing > 0);
  CHECK(sawTerminal > 0);
  CHECK(sawDefaultQueue > 0);
  CHECK(last->jobs.size() > 5);
}

TEST_CASE("the job list: chunks with a changed job are made anew, the others shared untouched", "[snapshot][chunks]") {
  // Thousands of jobs (many chunks), changed a few at a time at random places of the key order:
  // created (new keys between old ones), changed, deleted. Each snapshot lists exactly the jobs
  // of a cache built from scratch, sorted, with their pod counts; its chunks hold its list; a
  // chunk none of whose jobs changed is the last snapshot's own, and an unchanged job's entry is
  // held by no more references for it (taking a snapshot touches none).
  const uint32_t seed = GENERATE(7u, 20261207u);
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  Env e;
  e.create(Kind::Node, node("n1"));
  std::set<int> live;
  auto name = [](int i) {  // zero-padded: the key order is the number order
    char buf[16];
    std::snprintf(buf, sizeof buf, "p%05d", i);
    return std::string(buf);
  };
  for (int i = 0; i < 8000; i += 2) {  // the odd numbers come later, between them
    e.create(Kind::Pod, pod("a", name(i), {{"cpu", "1"}}));
    live.insert(i);
  }
  e.start();
  auto last = e.snap();
  for (int step = 0; step < 40; ++step) {
    INFO("step " << step);
    std::set<std::string> changed;
    const size_t events = step % 10 == 9 ? 300 : 1 + pick(6);  // now and then a burst
    for (size_t k = 0; k < events; ++k) {
      const int i = static_cast<int>(pick(8000));
      if (!live.count(i)) {
        e.create(Kind::Pod, pod("a", name(i), {{"cpu", "1"}}));
        live.insert(i);
      } else if (pick(2) == 0) {
        REQUIRE(e.cluster.remove(Kind::Pod, "a", name(i)).ok());
        live.erase(i);
      } else {
        e.apply(Kind::Pod, pod("a", name(i), {{"cpu", std::to_string(1 + pick(4))}}));
      }
      changed.insert("Pod/a/" + name(i));
    }
    const long before = last->jobs.chunks().empty() ? 0 : last->jobs.chunks().front().use_count();
    auto s = e.snap();
    // The list: the live pods' jobs, sorted, counted; its chunks hold it, none empty or overgrown.
    REQUIRE(s->jobs.size() == live.size());
    REQUIRE(s->jobTaskCounts.size() == s->jobs.size());
    size_t at = 0;
    for (const auto& chunk : s->jobs.chunks()) {
      CHECK(!chunk->empty());
      CHECK(chunk->size() <= 512);
      for (const auto& j : *chunk) {
        REQUIRE(at < s->jobs.size());
        CHECK(s->jobs[at] == j.get());
        ++at;
      }
    }
    CHECK(at == s->jobs.size());
    auto it = live.begin();
    for (size_t i = 0; i < s->jobs.size(); ++i, ++it) {
      CHECK(s->jobs[i]->key == "Pod/a/" + name(*it));
      CHECK(s->jobTaskCounts[i] == s->jobs[i]->tasks.size());
    }
    // Sharing: a chunk of the last snapshot none of whose keys changed is in this one as it is.
    std::set<const void*> now;
    for (const auto& chunk : s->jobs.chunks()) now.insert(chunk.get());
    size_t shared = 0;
    for (const auto& chunk : last->jobs.chunks()) {
      shared += now.count(chunk.get());
      bool hit = false;
      for (const auto& j : *chunk) hit = hit || changed.count(j->key);
      // (A key created between two chunks may fall in either: only chunks clear of both sides'
      // created keys are asked.)
      const std::string& first = chunk->front()->key;
      const std::string& end = chunk->back()->key;
      for (const auto& c : changed) hit = hit || (c > first && c < end);
      if (hit) continue;
      if (!now.count(chunk.get())) {
        // Only the neighbours of a created key outside every chunk's range may be rebuilt.
        bool neighbour = false;
        for (const auto& c : changed) neighbour = neighbour || !last->findJob(c);
        CHECK(neighbour);
      }
    }
    CHECK(shared + 2 * events >= last->jobs.chunks().size());  // a change makes one chunk anew, two at most
    if (!last->jobs.chunks().empty() && now.count(last->jobs.chunks().front().get()))
      CHECK(last->jobs.chunks().front().use_count() == before + 1);  // one more holder: the chunk's
    last = s;
  }
  // A cache built from scratch over the same cluster agrees.
  Cache fresh(e.cluster, e.clock);
  REQUIRE(fresh.start().ok());
  CHECK(lineDiff(describe(*fresh.snapshot()), describe(*last)) == kNone);
  // An unchanged job's entry: held by the cache and one chunk, however many snapshots share it.
  const auto& firstChunk = *last->jobs.chunks().front();
  auto again = e.snap(), more = e.snap();
  CHECK(firstChunk.front().use_count() == 2);
}

TEST_CASE("the job list built by hand: a copy's appends are its own", "[snapshot][chunks]") {
  auto job = [](const std::string& key) {
    auto j = std::make_shared<JobInfo>();
    j->setKey(key);
    return std::shared_ptr<const JobInfo>(j);
  };
  tessera::cache::JobList a;
  a.push_back(job("Pod/t/a"));
  a.push_back(job("Pod/t/b"));
  tessera::cache::JobList b = a;
  b.push_back(job("Pod/t/c"));
  a.push_back(job("Pod/t/d"));
  REQUIRE(a.size() == 3);
  REQUIRE(b.size() == 3);
  CHECK(a[2]->key == "Pod/t/d");
  CHECK(b[2]->key == "Pod/t/c");
  size_t inChunks = 0;
  for (const auto& chunk : a.chunks()) inChunks += chunk->size();
  CHECK(inChunks == 3);  // a's chunks hold a's jobs, not b's
}

TEST_CASE("a queue entry with no Queue object goes once nothing holds resources in it", "[snapshot][queues]") {
  Env e;
  e.create(Kind::Node, node("n1"));
  e.create(Kind::Pod, pod("t", "p", {{"cpu", "1"}}, merged(labels({{"tessera.dev/queue", "ghost"}}), running("n1"))));
  e.start();
  REQUIRE(e.snap()->queues.count("ghost") == 1);
  REQUIRE(e.cluster.finishPod("t", "p", true).ok());
  const auto s = e.snap();
  // A from-scratch cache has no "ghost" entry: it was only there to hold the job's total.
  Cache fresh(e.cluster, e.clock);
  REQUIRE(fresh.start().ok());
  CHECK(fresh.snapshot()->queues.count("ghost") == 0);
  CHECK(s->queues.count("ghost") == 0);
}

TEST_CASE("assumed binds and evictions count until the watch confirms or they expire", "[snapshot][assume]") {
  Env e;
  e.create(Kind::Queue, queue("q"));
  e.create(Kind::Node, node("n1"));
  e.create(Kind::Node, node("n2"));
  const Json q = labels({{"tessera.dev/queue", "q"}});
  e.create(Kind::Pod, pod("t", "a", {{"cpu", "2"}, {"nvidia.com/gpu", "1"}}, q));
  e.create(Kind::Pod, pod("t", "r", {{"cpu", "1"}, {"nvidia.com/gpu", "2"}}, merged(q, running("n2"))));
  CacheOptions opts;
  opts.assumeTtl = Duration{30'000};
  e.start(opts);
  const auto s0 = e.snap();
  const auto before = describe(*s0);

  SECTION("assumeBound counts the pod on its node, in its job and queue") {
    e.cache->assumeBound("t/a", "n1");
    const auto s = e.snap();
    const auto& t = taskOf(*s, "Pod/t/a", "t/a");
    CHECK(t.status == TaskStatus::Bound);
    CHECK(t.nodeName == "n1");
    CHECK(t.assumed);
    CHECK(nodeOf(*s, "n1").used == cpuGpu(2000, 1));
    CHECK(nodeOf(*s, "n1").pods == std::vector<std::string>{"t/a"});
    CHECK(jobOf(*s, "Pod/t/a").allocated == cpuGpu(2000, 1));
    CHECK(s->queues.at("q")->allocated == cpuGpu(3000, 3));
    CHECK(lineDiff(before, describe(*s0)) == kNone);  // the earlier snapshot did not see it

    SECTION("forgetAssumed takes it back") {
      e.cache->forgetAssumed("t/a");
      CHECK(lineDiff(before, describe(*e.snap())) == kNone);
      CHECK(e.cache->expiredAssumptions() == 0);
    }
    SECTION("it expires once the TTL has passed, and is counted") {
      e.clock.advance(Duration{29'999});
      CHECK(taskOf(*e.snap(), "Pod/t/a", "t/a").status == TaskStatus::Bound);
      CHECK(e.cache->expiredAssumptions() == 0);
      e.clock.advance(Duration{2});
      const auto after = e.snap();
      CHECK(taskOf(*after, "Pod/t/a", "t/a").status == TaskStatus::Pending);
      CHECK(nodeOf(*after, "n1").used.isZero());
      CHECK(e.cache->expiredAssumptions() == 1);
      CHECK(lineDiff(before, describe(*after)) == kNone);
      e.clock.advance(Duration{60'000});
      (void)e.snap();
      CHECK(e.cache->expiredAssumptions() == 1);  // counted once
    }
    SECTION("the watch confirms it: no expiry, not assumed any more") {
      REQUIRE(e.cluster.bind("t", "a", "", "n1").ok());
      const auto s2 = e.snap();
      CHECK(taskOf(*s2, "Pod/t/a", "t/a").status == TaskStatus::Bound);
      CHECK_FALSE(taskOf(*s2, "Pod/t/a", "t/a").assumed);
      e.clock.advance(Duration{120'000});
      const auto s3 = e.snap();
      CHECK(taskOf(*s3, "Pod/t/a", "t/a").nodeName == "n1");
      CHECK(nodeOf(*s3, "n1").used == cpuGpu(2000, 1));
      CHECK(e.cache->expiredAssumptions() == 0);
    }
    SECTION("the watch says it went elsewhere: the watch wins") {
      REQUIRE(e.cluster.bind("t", "a", "", "n2").ok());
      const auto s2 = e.snap();
      CHECK(taskOf(*s2, "Pod/t/a", "t/a").nodeName == "n2");
      CHECK(nodeOf(*s2, "n1").used.isZero());
    }
  }

  SECTION("assumeEvicted makes a running pod releasing until it is gone") {
    e.cache->assumeEvicted("t/r");
    const auto s = e.snap();
    CHECK(taskOf(*s, "Pod/t/r", "t/r").status == TaskStatus::Releasing);
    CHECK(nodeOf(*s, "n2").releasing == cpuGpu(1000, 2));
    CHECK(nodeOf(*s, "n2").used == cpuGpu(1000, 2));
    SECTION("forgotten: running again") {
      e.cache->forgetAssumed("t/r");
      CHECK(lineDiff(before, describe(*e.snap())) == kNone);
    }
    SECTION("the deletion arrives: gone, resources free") {
      REQUIRE(e.cluster.forceRemove(Kind::Pod, "t", "r").ok());
      const auto s2 = e.snap();
      CHECK(s2->findJob("Pod/t/r") == nullptr);
      CHECK(nodeOf(*s2, "n2").used.isZero());
      CHECK(nodeOf(*s2, "n2").releasing.isZero());
      CHECK(s2->queues.at("q")->allocated.isZero());
    }
  }
}

TEST_CASE("a job's queue is resolved by every accepted key", "[snapshot][resolve]") {
  Env e;
  const Json pg = annotations({{"pod-group-name", "g"}});
  struct Case {
    const char* name;
    Json podPatch;
    Json group;  // null: no PodGroup
    const char* want;
  };
  const std::vector<Case> cases{
      {"pod tessera label", labels({{"tessera.dev/queue", "q-pod"}}), nullptr, "q-pod"},
      {"pod kai label", labels({{"kai.scheduler/queue", "q-kai"}}), nullptr, "q-kai"},
      {"podgroup tessera label", pg, podGroup("x", "g", 1, "", {{"labels", {{"tessera.dev/queue", "q-pgl"}}}}),
       "q-pgl"},
      {"podgroup kai label", pg, podGroup("x", "g", 1, "", {{"labels", {{"kai.scheduler/queue", "q-pgk"}}}}), "q-pgk"},
      {"podgroup spec.queue", pg, podGroup("x", "g", 1, "q-spec"), "q-spec"},
      {"a label beats spec.queue", merged(pg, labels({{"tessera.dev/queue", "q-label"}})),
       podGroup("x", "g", 1, "q-spec"), "q-label"},
      {"tessera key beats kai key on a pod",
       labels({{"tessera.dev/queue", "q-tessera"}, {"kai.scheduler/queue", "q-kai"}}), nullptr, "q-tessera"},
      {"nothing: default", Json::object(), nullptr, "default"},
      {"podgroup without a queue: default", pg, podGroup("x", "g", 1), "default"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      if (!c.group.is_null()) e.create(Kind::PodGroup, c.group);
      e.create(Kind::Pod, pod("x", "p", {{"cpu", "1"}}, c.podPatch));
      e.start();
      const auto s = e.snap();
      REQUIRE(s->jobs.size() == 1);
      CHECK(s->jobs[0]->queue == c.want);
    }
  }
}

TEST_CASE("a pod finds its PodGroup by every accepted key", "[snapshot][resolve]") {
  Env e;
  e.create(Kind::PodGroup, podGroup("x", "g", 3, "q"));
  e.create(Kind::Pod, pod("x", "kai", {{"cpu", "1"}}, annotations({{"pod-group-name", "g"}})));
  e.create(Kind::Pod, pod("x", "volcano", {{"cpu", "1"}}, annotations({{"scheduling.k8s.io/group-name", "g"}})));
  e.create(Kind::Pod, pod("x", "sp", {{"cpu", "1"}}, labels({{"scheduling.x-k8s.io/pod-group", "g"}})));
  e.create(Kind::Pod, pod("x", "alone", {{"cpu", "1"}}));
  e.create(Kind::Pod, pod("x", "lost-0", {{"cpu", "1"}}, annotations({{"pod-group-name", "nope"}})));
  e.create(Kind::Pod, pod("x", "lost-1", {{"cpu", "1"}}, labels({{"scheduling.x-k8s.io/pod-group", "nope"}})));
  e.create(Kind::Pod, pod("y", "other-ns", {{"cpu", "1"}}, annotations({{"pod-group-name", "g"}})));
  e.start();
  const auto s = e.snap();
  const JobInfo& g = jobOf(*s, "PodGroup/x/g");
  std::vector<std::string> keys;
  for (const auto& t : g.tasks) keys.push_back(t.key);
  CHECK(keys == std::vector<std::string>{"x/kai", "x/sp", "x/volcano"});
  REQUIRE(g.podGroup);
  CHECK(g.minMember == 3);
  CHECK(g.queue == "q");
  CHECK(g.uid == g.podGroup->meta.uid);
  CHECK_FALSE(g.isSingleton());

  const JobInfo& alone = jobOf(*s, "Pod/x/alone");
  CHECK(alone.isSingleton());
  CHECK(alone.minMember == 1);
  CHECK(alone.podGroup == nullptr);
  CHECK_FALSE(alone.podGroupMissing);

  const JobInfo& lost = jobOf(*s, "PodGroup/x/nope");
  CHECK(lost.podGroupMissing);
  CHECK(lost.tasks.size() == 2);
  CHECK(lost.minMember == 2);  // every pod that names it

  // A PodGroup is namespaced: the same name in another namespace is another (missing) group.
  CHECK(jobOf(*s, "PodGroup/y/g").podGroupMissing);
}

TEST_CASE("pods of other schedulers hold node resources but are no job", "[snapshot]") {
  Env e;
  e.create(Kind::Node, node("n1"));
  e.create(Kind::Pod, pod("k", "foreign-run", {{"cpu", "3"}, {"nvidia.com/gpu", "1"}},
                          merged({{"spec", {{"schedulerName", "default-scheduler"}}}}, running("n1"))));
  e.create(Kind::Pod, pod("k", "foreign-pending", {{"cpu", "3"}}, {{"spec", {{"schedulerName", "default-scheduler"}}}}));
  Json noScheduler = pod("k", "no-scheduler", {{"cpu", "1"}}, running("n1"));
  noScheduler["spec"].erase("schedulerName");
  e.create(Kind::Pod, noScheduler);
  e.create(Kind::Pod, pod("k", "ours", {{"cpu", "1"}}, running("n1")));
  e.start();
  const auto s = e.snap();
  const NodeInfo& n1 = nodeOf(*s, "n1");
  CHECK(n1.used == cpuGpu(5000, 1));
  CHECK(n1.podCount == 3);
  CHECK(n1.pods == std::vector<std::string>{"k/foreign-run", "k/no-scheduler", "k/ours"});
  CHECK(s->findJob("Pod/k/foreign-run") == nullptr);
  CHECK(s->findJob("Pod/k/foreign-pending") == nullptr);
  CHECK(s->findJob("Pod/k/no-scheduler") == nullptr);
  CHECK(s->findJob("Pod/k/ours") != nullptr);
  CHECK(s->jobs.size() == 1);

  SECTION("another scheduler name in the options makes them ours") {
    CacheOptions options;
    options.schedulerName = "default-scheduler";
    Cache other(e.cluster, e.clock, options);
    REQUIRE(other.start().ok());
    const auto o = other.snapshot();
    CHECK(o->findJob("Pod/k/foreign-run") != nullptr);
    CHECK(o->findJob("Pod/k/foreign-pending") != nullptr);
    CHECK(o->findJob("Pod/k/ours") == nullptr);
    CHECK(nodeOf(*o, "n1").used == cpuGpu(5000, 1));
  }
  SECTION("a foreign pod that finishes frees its resources") {
    REQUIRE(e.cluster.finishPod("k", "foreign-run", true).ok());
    CHECK(nodeOf(*e.snap(), "n1").used == cpuGpu(2000, 0));
  }
}

TEST_CASE("terminal pods hold no resources", "[snapshot]") {
  Env e;
  e.create(Kind::Queue, queue("q"));
  e.create(Kind::Node, node("n1"));
  const Json q = labels({{"tessera.dev/queue", "q"}});
  e.create(Kind::PodGroup, podGroup("t", "g", 1, "q"));
  const Json inG = merged(q, annotations({{"pod-group-name", "g"}}));
  e.create(Kind::Pod, pod("t", "done", {{"cpu", "4"}, {"nvidia.com/gpu", "2"}},
                          merged(inG, {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Succeeded"}}}})));
  e.create(Kind::Pod, pod("t", "crashed", {{"cpu", "2"}},
                          merged(inG, {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Failed"}}}})));
  e.create(Kind::Pod, pod("t", "live", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}, merged(inG, running("n1"))));
  e.start();
  const auto s = e.snap();
  const NodeInfo& n1 = nodeOf(*s, "n1");
  CHECK(n1.used == cpuGpu(1000, 1));
  CHECK(n1.podCount == 1);
  CHECK(n1.pods == std::vector<std::string>{"t/live"});
  const JobInfo& g = jobOf(*s, "PodGroup/t/g");
  CHECK(g.allocated == cpuGpu(1000, 1));
  CHECK(g.succeededCount == 1);
  CHECK(g.failedCount == 1);
  CHECK(g.allocatedCount == 1);
  CHECK(g.pendingCount == 0);
  CHECK(taskOf(*s, "PodGroup/t/g", "t/done").status == TaskStatus::Succeeded);
  CHECK(taskOf(*s, "PodGroup/t/g", "t/crashed").status == TaskStatus::Failed);
  CHECK(s->queues.at("q")->allocated == cpuGpu(1000, 1));

  SECTION("a running pod that fails gives its resources back") {
    REQUIRE(e.cluster.finishPod("t", "live", false).ok());
    const auto s2 = e.snap();
    CHECK(nodeOf(*s2, "n1").used.isZero());
    CHECK(nodeOf(*s2, "n1").podCount == 0);
    CHECK(jobOf(*s2, "PodGroup/t/g").allocated.isZero());
    CHECK(jobOf(*s2, "PodGroup/t/g").failedCount == 2);
    CHECK(s2->queues.at("q")->allocated.isZero());
  }
}

TEST_CASE("MIG instances: the node's are worth their part of a GPU, a pod's are its queue's GPU charge",
          "[snapshot][mig]") {
  Env e;
  e.create(Kind::Queue, queue("q"));
  Json mig = node("mig", "16", "0", {{"nvidia.com/gpu.memory", "81920"}, {"tessera.dev/gpu-mode", "mig"}});
  mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7";
  mig["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "2";
  e.create(Kind::Node, mig);
  e.create(Kind::Node, node("plain"));
  const Json q = labels({{"tessera.dev/queue", "q"}});
  e.create(Kind::Pod, pod("t", "big", {{"cpu", "1"}, {"nvidia.com/mig-3g.40gb", "1"}}, merged(q, running("mig"))));
  e.create(Kind::Pod, pod("t", "small", {{"cpu", "1"}, {"nvidia.com/mig-1g.10gb", "2"}}, q));
  e.start();
  const auto s = e.snap();
  const NodeInfo& n = nodeOf(*s, "mig");
  CHECK(n.migGpuMilli == 7 * 125 + 2 * 500);
  CHECK(n.migMode);
  CHECK(nodeOf(*s, "plain").migGpuMilli == 0);
  CHECK_FALSE(nodeOf(*s, "plain").migMode);
  // The node is asked for the instances; the queue is charged their part of a GPU.
  const auto& big = taskOf(*s, "Pod/t/big", "t/big");
  CHECK(big.request.milliGpu == 500);
  CHECK(big.nodeRequest.milliGpu == 0);
  CHECK(big.nodeRequest.get("nvidia.com/mig-3g.40gb") == 1);
  CHECK(n.used.get("nvidia.com/mig-3g.40gb") == 1);
  CHECK(n.used.milliGpu == 0);
  const auto& small = taskOf(*s, "Pod/t/small", "t/small");  // pending: as on the largest GPUs seen
  CHECK(small.request.milliGpu == 2 * 125);
  CHECK(s->queues.at("q")->allocated.milliGpu == 500);
}

TEST_CASE("cache, sharded: the pool's nodes and pods; foreign pods where they run; a node joins with its pods",
          "[cache][shard]") {
  Env e;
  const auto pool = [](const std::string& p) { return labels({{"tessera.dev/node-pool", p}}); };
  e.create(Kind::Queue, queue("default"));
  e.create(Kind::Node, node("a-1", "16", "4", {{"tessera.dev/node-pool", "a"}}));
  e.create(Kind::Node, node("b-1", "16", "4", {{"tessera.dev/node-pool", "b"}}));
  // Another scheduler's pods (a DaemonSet's) on both nodes; ours of both pools.
  const Json other = {{"spec", {{"schedulerName", "default-scheduler"}}}};
  e.create(Kind::Pod, pod("kube", "ds-a", Json{{"cpu", "1"}}, merged(other, running("a-1"))));
  e.create(Kind::Pod, pod("kube", "ds-b", Json{{"cpu", "1"}}, merged(other, running("b-1"))));
  e.create(Kind::Pod, pod("t", "a-run", Json{{"cpu", "1"}, {"nvidia.com/gpu", "1"}}, merged(pool("a"), running("a-1"))));
  e.create(Kind::Pod, pod("t", "b-run", Json{{"cpu", "1"}, {"nvidia.com/gpu", "2"}}, merged(pool("b"), running("b-1"))));
  e.create(Kind::Pod, pod("t", "a-wait", Json{{"cpu", "1"}, {"nvidia.com/gpu", "1"}}, pool("a")));
  e.create(Kind::Pod, pod("t", "b-wait", Json{{"cpu", "1"}, {"nvidia.com/gpu", "1"}}, pool("b")));
  CacheOptions o;
  o.shard = tessera::api::ShardScope::of("a");
  o.awaitJoins = true;
  e.start(o);

  auto s = e.snap();
  REQUIRE(s->nodes.size() == 1);
  CHECK(s->nodes[0]->name == "a-1");
  CHECK(s->nodes[0]->used.milliCpu == 2'000);  // a-run and the DaemonSet pod; ds-b is not held
  CHECK(s->findJob("Pod/t/a-wait"));
  CHECK(s->findJob("Pod/t/a-run"));
  CHECK(s->findJob("Pod/t/b-wait") == nullptr);
  CHECK(s->findJob("Pod/t/b-run") == nullptr);

  // b-1 moves to pool a: it appears with what runs on it (b-run and ds-b), in the same snapshot.
  e.apply(Kind::Node, node("b-1", "16", "4", {{"tessera.dev/node-pool", "a"}}));
  s = e.snap();
  REQUIRE(s->nodes.size() == 2);
  const NodeInfo* moved = s->findNode("b-1");
  REQUIRE(moved);
  CHECK(moved->used.milliCpu == 2'000);
  CHECK(moved->used.milliGpu == 2'000);
  CHECK(moved->foreignUsed.milliGpu == 2'000);     // b-run is pool b's: node use, not this shard's job
  CHECK(s->findJob("Pod/t/b-run") == nullptr);

  // a-1 leaves the pool: out of the snapshot at once; a-run stays a job of this shard.
  e.apply(Kind::Node, node("a-1", "16", "4", {{"tessera.dev/node-pool", "c"}}));
  s = e.snap();
  REQUIRE(s->nodes.size() == 1);
  CHECK(s->nodes[0]->name == "b-1");
  CHECK(s->findJob("Pod/t/a-run"));

  // A pod running on b-1 is relabelled from pool b to pool a: it moves from one stream to the other
  // and becomes this shard's, never dropped on the way.
  e.apply(Kind::Pod, pod("t", "b-run", Json{{"cpu", "1"}, {"nvidia.com/gpu", "2"}}, merged(pool("a"), running("b-1"))));
  s = e.snap();
  CHECK(s->findJob("Pod/t/b-run"));
  CHECK(s->findNode("b-1")->used.milliGpu == 2'000);
  CHECK(s->findNode("b-1")->foreignUsed.milliGpu == 0);
}

TEST_CASE("validation verdicts kept between snapshots follow the objects and the references they read",
          "[snapshot][validation]") {
  // The snapshot keeps the verdicts of unchanged PodGroups and nodes (snapshot_validation.h): each
  // snapshot must still say what validating from scratch says, whatever changed in between.
  Env e;
  e.create(Kind::Node, node("n1"));
  e.create(Kind::Queue, queue("q"));
  e.create(Kind::PodGroup, podGroup("t", "g", 1, "missing"));
  e.create(Kind::PodGroup, podGroup("t", "h", 1, "q"));
  // A PodGroup is validated as a job's: each has a pod.
  e.create(Kind::Pod, pod("t", "g-0", {{"cpu", "1"}}, annotations({{"pod-group-name", "g"}})));
  e.create(Kind::Pod, pod("t", "h-0", {{"cpu", "1"}}, annotations({{"pod-group-name", "h"}})));
  e.start();
  auto invalid = [&](const std::string& ref) {
    const auto s = e.snap();
    Cache fresh(e.cluster, e.clock);  // from scratch: the verdict the kept one must equal
    REQUIRE(fresh.start().ok());
    const bool kept = s->findInvalid(ref) != nullptr;
    CHECK(kept == (fresh.snapshot()->findInvalid(ref) != nullptr));
    return kept;
  };
  CHECK(invalid("PodGroup/t/g"));   // its queue does not exist
  CHECK(!invalid("PodGroup/t/h"));
  e.create(Kind::Queue, queue("missing"));  // a reference appears: the unchanged PodGroup is valid now
  CHECK(!invalid("PodGroup/t/g"));
  REQUIRE(e.cluster.remove(Kind::Queue, "", "missing").ok());  // and disappears again
  CHECK(invalid("PodGroup/t/g"));
  // A priority class named by an unchanged PodGroup comes and goes.
  Json withClass = podGroup("t", "h", 1, "q");
  withClass["spec"]["priorityClassName"] = "high";
  e.apply(Kind::PodGroup, withClass);
  CHECK(invalid("PodGroup/t/h"));
  e.create(Kind::PriorityClass, priorityClass("high", 100));
  CHECK(!invalid("PodGroup/t/h"));
  // The object itself changes: validated again.
  e.apply(Kind::PodGroup, podGroup("t", "h", 1, "missing"));
  CHECK(invalid("PodGroup/t/h"));
  // A node's labels break a rule, then are mended.
  e.apply(Kind::Node, node("n1", "16", "4", {{"nvidia.com/gpu.memory", "lots"}}));
  CHECK(invalid("Node/n1"));
  e.apply(Kind::Node, node("n1", "16", "4", {{"nvidia.com/gpu.memory", "81920"}}));
  CHECK(!invalid("Node/n1"));
  // Many snapshots with nothing changed keep the same verdicts.
  for (int i = 0; i < 3; ++i) CHECK(invalid("PodGroup/t/h"));
}
