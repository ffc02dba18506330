// Contract tests over every registered plugin and action (STYLE.md, practice 11): each is created
// from defaults, rejects an unknown argument naming itself, runs on an empty and on a busy cluster,
// alone and with the others; and a whole cycle is deterministic - the same snapshot, or the same
// cluster seen through another cache, gives the same decisions and the same reasons.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/framework/action.h"
#include "tessera/framework/config.h"
#include "tessera/framework/plugin.h"
#include "tessera/framework/session.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"

namespace {

using tessera::framework::Config;
using tessera::framework::loadConfig;
using tessera::framework::Session;
using tessera::testing::testRegistry;
using tessera::testing::TestCluster;
using Json = nlohmann::json;

std::string node(const std::string& name, int gpus, const std::string& extra = "") {
  return "apiVersion: v1\nkind: Node\nmetadata: {name: " + name + ", labels: {kubernetes.io/hostname: " + name +
         ", topology.example.com/rack: r" + std::to_string(gpus % 2) + "}}\n" + extra +
         "status:\n  allocatable: {cpu: \"32\", memory: 256Gi, pods: \"110\", nvidia.com/gpu: \"" +
         std::to_string(gpus) + "\"}\n  conditions: [{type: Ready, status: \"True\"}]\n---\n";
}

std::string pod(const std::string& name, const std::string& queue, int gpus, const std::string& more = "",
                const std::string& spec = "", const std::string& status = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t, labels: {tessera.dev/queue: " +
         queue + "}" + more + "}\nspec:\n  schedulerName: tessera\n" + spec +
         "  containers: [{name: c, image: busybox, resources: {requests: {cpu: \"1\"}, limits: {nvidia.com/gpu: \"" +
         std::to_string(gpus) + "\"}}}]\n" + status + "---\n";
}

std::string queue(const std::string& name, const std::string& gpuQuota) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: " + name +
         "}\nspec:\n  resources:\n    gpu: {quota: \"" + gpuQuota +
         "\", limit: \"-1\", overQuotaWeight: \"1\"}\n    cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
         "    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";
}

/// A busy cluster: queues with quotas, running pods of several priorities (possible victims), a
/// terminating pod, a tainted node, pending gangs and single pods competing for too few GPUs.
void busyCluster(TestCluster& c) {
  std::string y = queue("default", "-1") + queue("team-a", "8") + queue("team-b", "4") +
                  "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n" +
                  "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n---\n";
  for (int i = 0; i < 5; ++i) y += node("n" + std::to_string(i), 4 + 2 * (i % 2));
  y += node("tainted", 8, "spec: {taints: [{key: gpu, value: reserved, effect: NoSchedule}]}\n");
  const std::string run = "status: {phase: Running, startTime: \"2025-12-31T00:00:00Z\"}\n";
  y += pod("run-low-0", "team-b", 2, "", "  nodeName: n0\n  priorityClassName: low\n", run);
  y += pod("run-low-1", "team-b", 3, "", "  nodeName: n1\n  priorityClassName: low\n", run);
  y += pod("run-high", "team-a", 2, "", "  nodeName: n2\n  priorityClassName: high\n", run);
  y += pod("leaving", "team-a", 4, ", deletionTimestamp: \"2026-01-01T00:00:20Z\"", "  nodeName: n3\n", run);
  y += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: big, namespace: t}\n"
       "spec: {minMember: 3, queue: team-a, priorityClassName: high}\n---\n";
  for (int i = 0; i < 4; ++i) y += pod("big-" + std::to_string(i), "team-a", 2, ", annotations: {pod-group-name: big}");
  y += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: small, namespace: t}\n"
       "spec: {minMember: 2, queue: team-b}\n---\n";
  for (int i = 0; i < 2; ++i) y += pod("small-" + std::to_string(i), "team-b", 1, ", annotations: {pod-group-name: small}");
  for (int i = 0; i < 4; ++i) y += pod("single-" + std::to_string(i), i % 2 ? "team-a" : "team-b", 1 + i % 3);
  y += pod("huge", "default", 16);
  // Higher priority than the running low pods of its queue: a preemptor.
  y += pod("urgent", "team-b", 2, "", "  priorityClassName: high\n  nodeSelector: {kubernetes.io/hostname: n0}\n");
  y += pod("tolerant", "default", 4, "", "  tolerations: [{key: gpu, operator: Exists}]\n");
  c.create(y);
  c.start();
}

/// Everything a cycle decided, as text: binds (every field), pipelines, evictions and every
/// pending pod's reason.
std::vector<std::string> decisions(const tessera::framework::SessionResult& r) {
  std::vector<std::string> out;
  for (const auto& b : r.binds) {
    std::string line = "bind " + b.podKey + " " + b.podUid + " " + b.node + " job " + b.jobKey + " core " +
                       std::to_string(b.gpuCorePercent) + " mem " + std::to_string(b.defaultedMemoryMiB);
    for (const auto& g : b.gpus)
      line += " gpu " + g.group + (g.newGroup ? " new " : " ") + std::to_string(g.portionMilli) + " " +
              std::to_string(g.memoryMiB) + " " + std::to_string(g.device);
    out.push_back(std::move(line));
  }
  for (const auto& p : r.pipelined) out.push_back("pipeline " + p.podKey + " " + p.node);
  for (const auto& e : r.evictions) out.push_back("evict " + e.podKey + " " + e.podUid + " " + e.node + " " + e.reason);
  for (const auto& p : r.pods) out.push_back("pending " + p.task->key + ": " + r.podMessage(p));
  return out;
}

std::vector<std::string> runCycle(const std::shared_ptr<const tessera::cache::Snapshot>& snap, const Config& cfg,
                                  const tessera::api::Clock& clock) {
  Session ssn(snap, cfg, clock);
  ssn.open();
  ssn.runActions();
  return decisions(ssn.close());
}

Config configFrom(const std::string& yaml) {
  auto docs = tessera::testing::manifests(yaml);
  auto cfg = docs.empty() ? loadConfig(testRegistry(), nullptr) : loadConfig(testRegistry(), &docs[0]);
  if (!cfg.ok()) FAIL(cfg.error().message);
  return std::move(cfg).value();
}

}  // namespace

TEST_CASE("every plugin and action is created from its defaults and rejects an unknown argument", "[contract]") {
  for (const auto& name : testRegistry().pluginNames()) {
    DYNAMIC_SECTION("plugin " << name) {
      Json over = {{"plugins", {{name, Json::object()}}}};
      auto ok = loadConfig(testRegistry(), &over);
      INFO((ok.ok() ? std::string() : ok.error().message));
      CHECK(ok.ok());
      over["plugins"][name]["surelyNotAnArgument"] = 1;
      auto bad = loadConfig(testRegistry(), &over);
      REQUIRE_FALSE(bad.ok());
      CHECK_THAT(bad.error().message,
                 Catch::Contains("config.plugins." + name + ": unknown argument \"surelyNotAnArgument\""));
    }
  }
  for (const auto& name : testRegistry().actionNames()) {
    DYNAMIC_SECTION("action " << name) {
      Json over = {{"actions", {name}}, {"actionArgs", {{name, Json::object()}}}};
      auto ok = loadConfig(testRegistry(), &over);
      INFO((ok.ok() ? std::string() : ok.error().message));
      REQUIRE(ok.ok());
      REQUIRE(ok->actions.size() == 1);
      CHECK(ok->actions[0]->name() == name);
      over["actionArgs"][name]["surelyNotAnArgument"] = 1;
      auto bad = loadConfig(testRegistry(), &over);
      REQUIRE_FALSE(bad.ok());
      CHECK_THAT(bad.error().message,
                 Catch::Contains("config.actionArgs." + name + ": unknown argument \"surelyNotAnArgument\""));
    }
  }
}

TEST_CASE("every plugin and action runs on an empty cluster", "[contract]") {
  TestCluster c;
  c.start();
  const Config cfg = configFrom("");
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  ssn.runActions();
  const auto r = ssn.close();
  CHECK(r.binds.empty());
  CHECK(r.evictions.empty());
  CHECK(r.pods.empty());
}

TEST_CASE("every action runs alone, and with each plugin alone, on a busy cluster", "[contract]") {
  TestCluster c;
  busyCluster(c);
  const auto snap = c.snapshot();
  for (const auto& action : testRegistry().actionNames()) {
    DYNAMIC_SECTION("action " << action << " with every plugin") {
      const Config cfg = configFrom("actions: [" + action + "]");
      const auto first = runCycle(snap, cfg, c.clock);
      CHECK(runCycle(snap, cfg, c.clock) == first);
    }
    for (const auto& plugin : testRegistry().pluginNames()) {
      DYNAMIC_SECTION("action " << action << " with only " << plugin) {
        const Config cfg = configFrom("actions: [" + action + "]\ntiers: [[" + plugin + "]]\nplugins: {" + plugin + ": {}}");
        // Plugins outside the tiers still load (they run after by name): keep exactly one.
        Config only = cfg;
        only.plugins.clear();
        for (const auto& p : cfg.plugins)
          if (p->name() == plugin) only.plugins.push_back(p);
        const auto first = runCycle(snap, only, c.clock);
        CHECK(runCycle(snap, only, c.clock) == first);
      }
    }
  }
}

TEST_CASE("a cycle is deterministic: same snapshot, or another cache on the same cluster, same decisions",
          "[contract]") {
  TestCluster c;
  busyCluster(c);
  const Config cfg = configFrom("");
  const auto snap = c.snapshot();
  const auto first = runCycle(snap, cfg, c.clock);
  INFO("decisions:\n" << [&] {
    std::string s;
    for (const auto& d : first) s += "  " + d + "\n";
    return s;
  }());
  CHECK_FALSE(first.empty());
  const auto has = [&](const std::string& prefix) {
    return std::any_of(first.begin(), first.end(), [&](const std::string& d) { return d.rfind(prefix, 0) == 0; });
  };
  CHECK(has("bind "));
  CHECK(has("pipeline "));
  CHECK(has("evict "));
  CHECK(has("pending "));
  for (int i = 0; i < 3; ++i) CHECK(runCycle(snap, cfg, c.clock) == first);

  tessera::cache::Cache other(c.cluster, c.clock);
  REQUIRE(other.start().ok());
  CHECK(runCycle(other.snapshot(), cfg, c.clock) == first);
  // A later snapshot of the same, unchanged cluster (sharing its entries) decides the same.
  CHECK(runCycle(c.snapshot(), cfg, c.clock) == first);
}

TEST_CASE("sessions that reuse the arrays of earlier ones (SchedulerState) decide as with new ones", "[contract]") {
  // Issue 16: a session takes the per-node, per-job and per-pod arrays the last one left in the
  // scheduler's state, emptied. A session on a smaller cluster after a larger one, or one opened
  // while another holds them, must decide exactly as with arrays of its own.
  TestCluster busy;
  busyCluster(busy);
  TestCluster small;
  small.create(queue("team-a", "2") + node("only", 2) + pod("lonely", "team-a", 1) + pod("too-big", "team-a", 4));
  small.start();
  TestCluster empty;
  empty.start();
  // Fractional pods: their binds carry GPU groups and a compute limit, which a bind made of a
  // recycled entry (Session::close) must not keep.
  TestCluster shared;
  shared.create(queue("team-a", "2") + node("frac", 2) +
                pod("half-0", "team-a", 0, ", annotations: {gpu-fraction: \"0.5\"}") +
                pod("half-1", "team-a", 0, ", annotations: {gpu-fraction: \"0.5\", gpu-memory-policy: \"x\"}") +
                pod("whole", "team-a", 1));
  shared.start();
  const Config cfg = configFrom("");
  const std::vector<std::shared_ptr<const tessera::cache::Snapshot>> sequence = {
      busy.snapshot(),   small.snapshot(), busy.snapshot(), empty.snapshot(), small.snapshot(),
      shared.snapshot(), busy.snapshot(),  shared.snapshot(), small.snapshot()};

  // `recycle`: the result's lists are handed back too (framework::recycleResult), as the daemon does.
  auto run = [&](tessera::framework::SchedulerState& state, const std::shared_ptr<const tessera::cache::Snapshot>& snap,
                 size_t* nodeCapacity = nullptr, bool recycle = false) {
    Session ssn(snap, cfg, busy.clock, &state);
    if (nodeCapacity) *nodeCapacity = ssn.nodes().capacity();
    ssn.open();
    ssn.runActions();
    tessera::framework::SessionResult r = ssn.close();
    auto out = decisions(r);
    if (recycle) tessera::framework::recycleResult(state, std::move(r));
    return out;
  };
  tessera::framework::SchedulerState reused, fresh;  // the same history; `fresh` drops its arrays
  for (size_t i = 0; i < sequence.size(); ++i) {
    INFO("session " << i);
    size_t capacity = 0;
    const auto got = run(reused, sequence[i], &capacity, /*recycle=*/true);
    fresh.sessionStorage.reset();
    CHECK(got == run(fresh, sequence[i]));
    if (i == 1) CHECK(capacity >= 6);  // the busy cluster's 6 nodes' array, reused for 1 node
  }
  CHECK(reused.sessionStorage != nullptr);
  {  // the busy cluster's pending pods: a recycled list holds them, in the same block
    Session ssn(busy.snapshot(), cfg, busy.clock, &reused);
    ssn.open();
    ssn.runActions();
    tessera::framework::SessionResult r = ssn.close();
    REQUIRE_FALSE(r.pods.empty());
    const auto* block = r.pods.data();
    tessera::framework::recycleResult(reused, std::move(r));
    Session again(busy.snapshot(), cfg, busy.clock, &reused);
    again.open();
    again.runActions();
    CHECK(again.close().pods.data() == block);
  }

  // A session opened while another holds the arrays gets arrays of its own.
  Session outer(busy.snapshot(), cfg, busy.clock, &reused);
  outer.open();
  const auto inner = run(reused, small.snapshot());
  fresh.sessionStorage.reset();
  CHECK(inner == run(fresh, small.snapshot()));
  outer.runActions();
  const auto outerDecisions = decisions(outer.close());
  fresh.sessionStorage.reset();
  CHECK(outerDecisions == run(fresh, busy.snapshot()));
}

TEST_CASE("findNode names each node of its session and no other, in a session on arrays a larger one left",
          "[contract]") {
  // Session::findNode's table (hash bits and index per slot, the names copied end to end) is kept
  // in the scheduler's state between sessions: a session after a larger one must find its own
  // nodes only. Names that are prefixes or extensions of one another share most of their bytes.
  auto cluster = [](const std::vector<std::string>& names) {
    std::string y;
    for (const std::string& n : names) y += node(n, 2);
    return y;
  };
  std::vector<std::string> large;
  for (int i = 0; i < 300; ++i) large.push_back("node-" + std::to_string(i));
  large.push_back("n");
  large.push_back("node-1x");
  TestCluster big;
  big.create(cluster(large));
  big.start();
  TestCluster few;
  few.create(cluster({"node-1", "node-10", "node-100x"}));
  few.start();
  tessera::framework::SchedulerState state;
  const Config cfg = configFrom("");
  for (TestCluster* c : {&big, &few, &big}) {
    Session ssn(c->snapshot(), cfg, c->clock, &state);
    ssn.open();
    for (const auto& n : ssn.nodes()) CHECK(ssn.findNode(n.name()) == n.index);
    const size_t count = ssn.nodes().size();
    for (const char* absent : {"", "node-", "node-1000", "node-100", "node-299 ", "nod", "node-1y"})
      if (c == &few || std::string(absent) != "node-100") CHECK(ssn.findNode(absent) == -1);
    if (c == &few) CHECK(ssn.findNode("node-299") == -1);
    CHECK(count == (c == &few ? 3u : large.size()));
    ssn.close();
  }
}

TEST_CASE("the job order carried from the last session is the order a full sort gives", "[contract]") {
  // Issue 16: Session::jobsInOrder starts from the last session's order (SchedulerState) and only
  // sorts in what moved. Between the sessions a job is deleted, one arrives that goes first, and a
  // PodGroup's priority class changes (the same job, now ordered elsewhere): the order must be the
  // one a session without history computes.
  TestCluster c;
  std::string y = queue("team", "-1") +
                  "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n" +
                  "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n---\n" +
                  node("n0", 1);
  for (int i = 0; i < 8; ++i)
    y += pod("p" + std::to_string(i), "team", 1, ", creationTimestamp: \"2025-12-31T00:0" + std::to_string(7 - i) + ":00Z\"",
             i % 3 == 0 ? "  priorityClassName: high\n" : "  priorityClassName: low\n");
  for (const char* g : {"ga", "gb"}) {
    y += std::string("apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: ") + g +
         ", namespace: t}\nspec: {minMember: 1, queue: team, priorityClassName: low}\n---\n";
    y += pod(std::string(g) + "-0", "team", 1, std::string(", annotations: {pod-group-name: ") + g + "}");
  }
  c.create(y);
  c.start();
  const Config cfg = configFrom("");
  auto order = [&](tessera::framework::SchedulerState* state) {
    Session ssn(c.snapshot(), cfg, c.clock, state);
    ssn.open();
    std::vector<std::string> keys;
    for (int j : ssn.jobsInOrder()) keys.push_back(ssn.jobs()[static_cast<size_t>(j)].info->key);
    return keys;
  };
  tessera::framework::SchedulerState state;
  const auto first = order(&state);
  CHECK(first == order(nullptr));
  REQUIRE(first.size() == 10);

  REQUIRE(c.cluster.remove(tessera::api::Kind::Pod, "t", "p3").ok());
  c.create(pod("p-new", "team", 1, ", creationTimestamp: \"2025-12-30T00:00:00Z\"", "  priorityClassName: high\n"));
  Json gb = {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
             {"kind", "PodGroup"},
             {"metadata", {{"name", "gb"}, {"namespace", "t"}}},
             {"spec", {{"minMember", 1}, {"queue", "team"}, {"priorityClassName", "high"}}}};
  REQUIRE(c.cluster.update(tessera::api::Kind::PodGroup, gb).ok());
  const auto second = order(&state);
  CHECK(second == order(nullptr));
  CHECK(second.front() == "Pod/t/p-new");  // high, and the oldest
  CHECK(std::find(second.begin(), second.end(), "Pod/t/p3") == second.end());
  // gb (now high) comes before ga (still low); the carried order had it after.
  CHECK(std::find(second.begin(), second.end(), "PodGroup/t/gb") < std::find(second.begin(), second.end(), "PodGroup/t/ga"));
  CHECK(std::find(first.begin(), first.end(), "PodGroup/t/gb") > std::find(first.begin(), first.end(), "PodGroup/t/ga"));
}

TEST_CASE("the pending jobs' order carried from the last session is a full sort's", "[contract]") {
  // Issue 16: an action's turns ask for the pending jobs alone (Session::pendingJobsInOrder), sorted
  // on their own from the last session's order (every job's, or only its pending ones'). Seeded
  // random steps create, delete and bind pods (a bound job leaves the pending order; a PodGroup
  // whose pods were all bound comes back to it with a new pod) and move PodGroups between
  // priority classes; after each step the order must be the one a session without history gives
  // its pending jobs (its whole order, filtered). Ties of priority and age are many: uids decide.
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    TestCluster c;
    std::string y = queue("team", "-1") +
                    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n" +
                    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n---\n";
    for (int n = 0; n < 4; ++n) y += node("n" + std::to_string(n), 8);
    for (const char* g : {"ga", "gb", "gc"})
      y += std::string("apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: ") + g +
           ", namespace: t}\nspec: {minMember: 1, queue: team, priorityClassName: low}\n---\n";
    c.create(y);
    c.start();
    const Config cfg = configFrom("");
    std::vector<std::string> pods;  // names of the pods that exist
    int made = 0;
    auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
    auto createPod = [&] {
      const std::string name = "p" + std::to_string(made++);
      const std::string when = "2025-12-31T00:0" + std::to_string(pick(3)) + ":00Z";  // ties of age
      std::string more = ", creationTimestamp: \"" + when + "\"";
      if (pick(4) == 0) more += std::string(", annotations: {pod-group-name: g") + "abc"[pick(3)] + "}";
      c.create(pod(name, "team", 1, more, pick(2) ? "  priorityClassName: high\n" : "  priorityClassName: low\n"));
      pods.push_back(name);
    };
    tessera::framework::SchedulerState state;
    for (int step = 0; step < 60; ++step) {
      const size_t ops = 1 + pick(4);
      for (size_t k = 0; k < ops; ++k) {
        const size_t op = pick(10);
        if (op < 4 || pods.empty()) {
          createPod();
        } else if (op < 6) {
          const size_t i = pick(pods.size());
          REQUIRE(c.cluster.remove(tessera::api::Kind::Pod, "t", pods[i]).ok());
          pods.erase(pods.begin() + static_cast<std::ptrdiff_t>(i));
        } else if (op < 9) {
          (void)c.cluster.bind("t", pods[pick(pods.size())], "", "n" + std::to_string(pick(4)));  // bound ones refuse
        } else {
          Json g = {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                    {"kind", "PodGroup"},
                    {"metadata", {{"name", std::string("g") + "abc"[pick(3)]}, {"namespace", "t"}}},
                    {"spec", {{"minMember", 1}, {"queue", "team"}, {"priorityClassName", pick(2) ? "high" : "low"}}}};
          REQUIRE(c.cluster.update(tessera::api::Kind::PodGroup, g).ok());
        }
      }
      const auto snap = c.snapshot();
      std::vector<std::string> expected;
      {
        Session fresh(snap, cfg, c.clock, nullptr);
        fresh.open();
        for (int j : fresh.jobsInOrder())
          if (fresh.jobs()[static_cast<size_t>(j)].pendingCount > 0)
            expected.push_back(fresh.jobs()[static_cast<size_t>(j)].info->key);
      }
      Session ssn(snap, cfg, c.clock, &state);
      ssn.open();
      if (pick(3) == 0) (void)ssn.jobsInOrder();  // now and then every job's order is carried
      std::vector<std::string> got;
      for (int j : ssn.pendingJobsInOrder()) got.push_back(ssn.jobs()[static_cast<size_t>(j)].info->key);
      INFO("seed " << seed << ", step " << step);
      REQUIRE(got == expected);
      ssn.close();
    }
  }
}

TEST_CASE("job verdicts carried from the last session are those a session without history gives", "[contract]") {
  // Issue 16: Session::jobValid starts from the last session's verdicts for jobs whose cache entry
  // is the same object. Between sessions, objects other than the job's change what its verdict
  // reads: a PriorityClass, its Queue, a child queue, a Topology, another scheduler config; and a
  // job's own pods change. Every verdict must be the one a session without history gives.
  TestCluster c;
  const std::string high = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n";
  const std::string racks = "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Topology\nmetadata: {name: racks}\n"
                            "spec: {levels: [{nodeLabel: topology.example.com/rack}]}\n---\n";
  std::string y = queue("team", "-1") + queue("other", "-1") + high + racks + node("n0", 1);
  y += pod("classy", "team", 1, "", "  priorityClassName: high\n");  // no spec.priority: the class decides
  y += pod("elsewhere", "other", 1);
  y += pod("plain", "team", 1);
  y += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: t}\n"
       "spec: {minMember: 2, queue: team}\n---\n";
  for (const char* name : {"g-0", "g-1"}) y += pod(name, "team", 1, ", annotations: {pod-group-name: g}");
  y += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: placed, namespace: t}\n"
       "spec: {minMember: 1, queue: team, topologyConstraint: {topology: racks, requiredTopologyLevel: "
       "topology.example.com/rack}}\n---\n";
  y += pod("placed-0", "team", 1, ", annotations: {pod-group-name: placed}");
  // A gang with a pod leaving: its verdict is not carried (releasing), and is the same again.
  y += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: thin, namespace: t}\n"
       "spec: {minMember: 2, queue: team}\n---\n";
  y += pod("thin-0", "team", 1, ", annotations: {pod-group-name: thin}");
  y += pod("thin-1", "team", 1, ", annotations: {pod-group-name: thin}, deletionTimestamp: \"2026-01-01T00:00:20Z\"",
           "  nodeName: n0\n", "status: {phase: Running, startTime: \"2025-12-31T00:00:00Z\"}\n");
  c.create(y);
  c.start();
  const Config full = configFrom("");
  const Config noGang = configFrom("plugins: {gang: {enabled: false}}");
  // Each job's verdict ("" when valid) by key.
  auto verdicts = [&](tessera::framework::SchedulerState* state, const Config& cfg) {
    Session ssn(c.snapshot(), cfg, c.clock, state);
    ssn.open();
    std::vector<std::string> out;
    for (const auto& j : ssn.jobs()) {
      const tessera::api::Status v = ssn.jobValid(j);
      out.push_back(j.info->key + ": " + (v.ok() ? "" : v.error().message));
    }
    ssn.close();
    return out;
  };
  auto contains = [](const std::vector<std::string>& all, const std::string& text) {
    return std::any_of(all.begin(), all.end(), [&](const std::string& v) { return v.find(text) != std::string::npos; });
  };
  tessera::framework::SchedulerState state;
  const Config* cfg = &full;
  auto step = [&](const char* what) {
    INFO(what);
    const auto carried = verdicts(&state, *cfg);
    CHECK(carried == verdicts(nullptr, *cfg));
    CHECK(carried == verdicts(&state, *cfg));  // and once more from its own verdicts
    return carried;
  };
  auto first = step("first");
  CHECK(contains(first, "Pod/t/classy: "));
  CHECK_FALSE(contains(first, "not found"));
  CHECK(contains(first, "PodGroup/t/thin: gang 1/2"));

  REQUIRE(c.cluster.remove(tessera::api::Kind::PriorityClass, "", "high").ok());
  CHECK(contains(step("the PriorityClass deleted"), "PriorityClass \"high\" not found"));
  c.create(high);
  CHECK_FALSE(contains(step("the PriorityClass back"), "not found"));

  REQUIRE(c.cluster.remove(tessera::api::Kind::Queue, "", "other").ok());
  CHECK(contains(step("a queue deleted"), "queue \"other\" not found"));
  c.create(queue("other", "-1"));
  step("the queue back");

  c.create("apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: team-child}\n"
           "spec: {parentQueue: team, resources: {gpu: {quota: \"-1\"}}}\n---\n");
  CHECK(contains(step("a child queue under team"), "has child queues"));
  REQUIRE(c.cluster.remove(tessera::api::Kind::Queue, "", "team-child").ok());
  step("the child queue gone");

  REQUIRE(c.cluster.remove(tessera::api::Kind::Topology, "", "racks").ok());
  CHECK(contains(step("the Topology deleted"), "racks"));
  c.create(racks);
  step("the Topology back");

  REQUIRE(c.cluster.remove(tessera::api::Kind::Pod, "t", "g-1").ok());
  CHECK(contains(step("a gang's pod deleted"), "PodGroup/t/g: gang 1/2"));

  cfg = &noGang;  // without the gang plugin, the gangs' verdicts are others
  CHECK_FALSE(contains(step("another config"), "gang 1/2"));
  cfg = &full;
  CHECK(contains(step("the first config again"), "gang 1/2"));
}

TEST_CASE("two pods of one job that every plugin ties go newest first, then by pod key", "[contract]") {
  // Session::victimLess's last word (a rank per job's tasks since issue 16): without plugins every
  // pair of pods of the job reaches it. Pods named out of key order and created out of name order.
  TestCluster c;
  std::string y = queue("team", "-1") + node("n0", 8) +
                  "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: t}\n"
                  "spec: {minMember: 1, queue: team}\n---\n";
  const std::string run = "status: {phase: Running, startTime: \"2025-12-31T00:00:00Z\"}\n";
  const std::pair<const char*, const char*> pods[] = {
      {"g-c", "2025-12-30T00:00:00Z"}, {"g-a", "2025-12-30T00:00:00Z"}, {"g-b", "2025-12-30T00:00:00Z"},
      {"g-old", "2025-12-29T00:00:00Z"}, {"g-new", "2025-12-31T00:00:00Z"}};
  for (const auto& [name, created] : pods)
    y += pod(name, "team", 1, std::string(", creationTimestamp: \"") + created + "\", annotations: {pod-group-name: g}",
             "  nodeName: n0\n", run);
  c.create(y);
  c.start();
  const Config cfg = tessera::testing::configWith({});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  const tessera::framework::SessionJob* job = nullptr;
  for (const auto& j : ssn.jobs())
    if (j.info->key == "PodGroup/t/g") job = &j;
  REQUIRE(job);
  REQUIRE(job->tasks.size() == 5);
  std::vector<const tessera::framework::SessionTask*> order;
  for (const auto& t : job->tasks) order.push_back(&t);
  std::sort(order.begin(), order.end(), [&](auto* a, auto* b) { return ssn.victimLess(*a, *b); });
  std::vector<std::string> keys;
  for (const auto* t : order) keys.push_back(t->info->key);
  CHECK(keys == std::vector<std::string>{"t/g-new", "t/g-a", "t/g-b", "t/g-c", "t/g-old"});
  CHECK_FALSE(job->info->tasksCreatedTogether);  // ranked by creation time, not in task order

  // A gang created together (the cache says so: JobInfo::tasksCreatedTogether) goes by pod key
  // alone, its task order; a pod of it created later makes it a job ranked pod by pod.
  std::string h = "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: h, namespace: t}\n"
                  "spec: {minMember: 1, queue: team}\n---\n";
  for (const char* name : {"h-c", "h-a", "h-b"})
    h += pod(name, "team", 1, ", creationTimestamp: \"2025-12-30T00:00:00Z\", annotations: {pod-group-name: h}",
             "  nodeName: n0\n", run);
  c.create(h);
  auto orderOf = [&](const std::string& jobKey, bool together) {
    Session s(c.snapshot(), cfg, c.clock);
    s.open();
    std::vector<std::string> out;
    for (const auto& j : s.jobs()) {
      if (j.info->key != jobKey) continue;
      CHECK(j.info->tasksCreatedTogether == together);
      std::vector<const tessera::framework::SessionTask*> ts;
      for (const auto& t : j.tasks) ts.push_back(&t);
      std::sort(ts.begin(), ts.end(), [&](auto* a, auto* b) { return s.victimLess(*a, *b); });
      for (const auto* t : ts) out.push_back(t->info->key);
    }
    return out;
  };
  CHECK(orderOf("PodGroup/t/h", true) == std::vector<std::string>{"t/h-a", "t/h-b", "t/h-c"});
  c.create(pod("h-d", "team", 1, ", creationTimestamp: \"2025-12-31T00:00:00Z\", annotations: {pod-group-name: h}",
               "  nodeName: n0\n", run));
  CHECK(orderOf("PodGroup/t/h", false) == std::vector<std::string>{"t/h-d", "t/h-a", "t/h-b", "t/h-c"});
}

namespace {

/// A random cluster for the session build: leaf queues under a parent (and pods naming a queue
/// that does not exist), priority classes, gangs (some non-preemptible, some with subgroups) and
/// single pods, pending, running, terminating or finished, some asking half a GPU.
std::string randomBuildCluster(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string y =
      "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n"
      "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: org}\nspec: {}\n---\n";
  for (const char* q : {"qa", "qb", "qc"})
    y += std::string("apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: ") + q +
         "}\nspec: {parentQueue: org}\n---\n";
  const int nodes = 3 + pick(5);
  for (int i = 0; i < nodes; ++i) y += node("n" + std::to_string(i), 2 + pick(6));
  const char* queues[] = {"qa", "qb", "qc", "nowhere"};
  auto podYaml = [&](const std::string& name, const std::string& queue, const std::string& labels,
                     const std::string& annotations) {
    const int state = pick(6);  // 0-2 pending, 3 running, 4 terminating, 5 finished
    const std::string nodeName = "n" + std::to_string(pick(nodes));
    const int gpus = pick(3);
    std::string p = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
                    "\n  namespace: t\n  creationTimestamp: \"2025-12-31T0" + std::to_string(pick(10)) +
                    ":00:00Z\"\n  labels: {tessera.dev/queue: " + queue + labels + "}\n";
    if (pick(4) == 0) p += "  annotations: {gpu-fraction: \"0.5\"" + annotations + "}\n";
    else if (!annotations.empty()) p += "  annotations: {" + annotations.substr(2) + "}\n";
    if (state == 4) p += "  deletionTimestamp: \"2026-01-01T00:00:20Z\"\n";
    p += "spec:\n  schedulerName: tessera\n";
    if (state >= 3) p += "  nodeName: " + nodeName + "\n";
    if (pick(3) == 0) p += "  priorityClassName: high\n";
    p += "  containers: [{name: c, image: busybox, resources: {requests: {cpu: \"" + std::to_string(1 + pick(4)) +
         "\"}, limits: {nvidia.com/gpu: \"" + std::to_string(gpus) + "\"}}}]\n";
    if (state == 3 || state == 4) p += "status: {phase: Running}\n";
    if (state == 5) p += "status: {phase: Succeeded}\n";
    return p + "---\n";
  };
  const int jobs = 20 + pick(30);
  for (int j = 0; j < jobs; ++j) {
    const std::string queue = queues[pick(4)];
    if (pick(2) == 0) {
      y += podYaml("single-" + std::to_string(j), queue, "", "");
      continue;
    }
    const std::string name = "g" + std::to_string(j);
    const bool subgroups = pick(3) == 0;
    y += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: t}\nspec:\n  minMember: " + std::to_string(1 + pick(3)) + "\n  queue: " + queue + "\n" +
         (pick(3) == 0 ? "  preemptibility: non-preemptible\n" : "") +
         (pick(3) == 0 ? "  priorityClassName: high\n" : "") +
         (subgroups ? "  subGroups:\n  - {name: a, minMember: 1}\n  - {name: b, minMember: 1}\n" : "") + "---\n";
    for (int i = 0; i < 1 + pick(5); ++i)
      y += podYaml(name + "-" + std::to_string(i), queue,
                   subgroups && pick(4) ? std::string(", tessera.dev/subgroup: ") + (i % 2 ? "b" : "a") : "",
                   ", pod-group-name: " + name);
  }
  return y;
}

/// Everything a session builds from its snapshot, as text: each job's and each pod's fields, where
/// a job's pods lie in the one array, each queue's totals at open, the pending floors.
std::vector<std::string> built(const Session& ssn) {
  std::vector<std::string> out;
  const tessera::framework::SessionTask* base = ssn.jobs().empty() ? nullptr : ssn.jobs().front().tasks.data();
  auto amounts = [](const tessera::framework::CoreAmounts& a) {
    return std::to_string(a.milliGpu) + "/" + std::to_string(a.milliCpu) + "/" + std::to_string(a.memory);
  };
  for (const auto& j : ssn.jobs()) {
    std::string line = "job " + j.key() + " #" + std::to_string(j.index) + " queue " + std::to_string(j.queue) +
                       " prio " + std::to_string(j.priority) + " preemptible " + std::to_string(j.preemptible) +
                       " created " + std::to_string(j.created.unixMillis) + " together " +
                       std::to_string(j.tasksCreatedTogether) + " singleton " + std::to_string(j.singleton) + " at " +
                       std::to_string(j.tasks.data() - base) + " size " + std::to_string(j.tasks.size()) + " ready " +
                       std::to_string(j.readyCount) + " pending " + std::to_string(j.pendingCount) + " releasing " +
                       std::to_string(j.releasingCount) + " min " + std::to_string(j.minMember()) + " allocated " +
                       std::to_string(j.allocated.milliGpu) + "/" + std::to_string(j.allocated.milliCpu) +
                       " infoPending " + std::to_string(j.infoPendingCount) + " " +
                       std::to_string(j.infoPendingMilliCpu) + "/" + std::to_string(j.infoPendingMemory) + "/" +
                       std::to_string(j.infoPendingMilliGpu) + " key " + (j.infoPendingKey ? *j.infoPendingKey : "-") +
                       " topology " + std::to_string(j.topologyConstrained) + " subgroups";
    for (int32_t r : j.subGroupReady) line += " " + std::to_string(r);
    out.push_back(std::move(line));
    for (const auto& t : j.tasks)
      out.push_back("  task " + t.info->key +
                    (t.info == &j.info->tasks[static_cast<size_t>(t.index)] ? "" : " (other entry)") + " job " +
                    std::to_string(t.job) + " state " + tessera::framework::toString(t.state) + " node " +
                    std::to_string(t.node) + " subgroup " + std::to_string(t.subGroup) + " prio " +
                    std::to_string(t.taskPriority) + " anyNode " + std::to_string(t.anyNode) + " gpuSpecInvalid " +
                    std::to_string(t.gpuSpecInvalid));
  }
  for (const auto& q : ssn.queues())
    out.push_back("queue " + q.name + " held " + amounts(q.opened.held) + " np " +
                  amounts(q.opened.heldNonPreemptible) + " pending " + amounts(q.opened.pending));
  out.push_back("floors " + std::to_string(ssn.pendingGpuFloor()) + " " + std::to_string(ssn.pendingSharesGpu()) + " " +
                std::to_string(ssn.pendingGpuMilliFloor()));
  return out;
}

}  // namespace

TEST_CASE("a session built on two threads at once is the session one thread builds", "[contract]") {
  // Issue 16: on a large cluster Session::buildState builds the jobs in chunks on two threads (a
  // helper thread builds the first chunk and the scheduling thread the last, each then the next
  // one left), placing their pods where the snapshot's per-job counts say. Here every cluster is
  // split (SchedulerState::splitBuildJobs = 1): the built state, the queues' totals
  // (checked against the cache's per-job figures too) and a whole cycle's decisions must be those
  // of one thread, and of a snapshot without the counts. Session::close() splits the same way (the
  // helper writes the evictions and the waiting jobs, this thread the binds and pipelined pods),
  // into the lists of the result before, handed back (recycleResult).
  const Config cfg = configFrom("");
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    TestCluster c;
    c.create(randomBuildCluster(rng));
    c.start();
    const auto snap = c.snapshot();
    REQUIRE(snap->jobTaskCounts.size() == snap->jobs.size());
    auto uncounted = std::make_shared<tessera::cache::Snapshot>(*snap);
    uncounted->jobTaskCounts.clear();
    tessera::framework::SchedulerState split, alone;
    split.splitBuildJobs = 1;
    alone.splitBuildJobs = SIZE_MAX;
    auto build = [&](const std::shared_ptr<const tessera::cache::Snapshot>& s, tessera::framework::SchedulerState& st) {
      Session ssn(s, cfg, c.clock, &st);
      auto out = built(ssn);
      ssn.open();
      ssn.runActions();
      tessera::framework::SessionResult result = ssn.close();
      for (const auto& d : decisions(result)) out.push_back(d);
      tessera::framework::recycleResult(st, std::move(result));
      return out;
    };
    const auto one = build(snap, alone);
    for (int again = 0; again < 2; ++again) {  // the second time on the helper started the first
      CHECK(build(snap, split) == one);
      CHECK(build(uncounted, split) == one);
    }
    CHECK(build(uncounted, alone) == one);
    // No helper thread to be had: built and closed on one thread, no error; once one can be
    // created, the next session has it (it was not left taken).
    tessera::framework::SchedulerState noThread;
    noThread.splitBuildJobs = 1;
    noThread.helperThreadFails = true;
    CHECK(build(snap, noThread) == one);
    CHECK(build(snap, noThread) == one);
    noThread.helperThreadFails = false;
    CHECK(build(snap, noThread) == one);

    Session ssn(snap, cfg, c.clock, &split);
    std::map<int, std::array<int64_t, 9>> sums;  // by queue: held, non-preemptible held, pending
    for (const auto& j : ssn.jobs()) {
      if (j.queue < 0) continue;
      const auto& i = *j.info;
      const int64_t held[3] = {i.allocated.milliGpu - i.releasing.milliGpu, i.allocated.milliCpu - i.releasing.milliCpu,
                               i.allocated.memory - i.releasing.memory};
      auto& s = sums[j.queue];
      for (int r = 0; r < 3; ++r) {
        s[static_cast<size_t>(r)] += held[r];
        if (!j.preemptible) s[static_cast<size_t>(3 + r)] += held[r];
      }
      s[6] += i.pendingRequest.milliGpu;
      s[7] += i.pendingRequest.milliCpu;
      s[8] += i.pendingRequest.memory;
    }
    for (const auto& q : ssn.queues()) {
      const auto& o = q.opened;
      const std::array<int64_t, 9> got = {o.held.milliGpu,
                                          o.held.milliCpu,
                                          o.held.memory,
                                          o.heldNonPreemptible.milliGpu,
                                          o.heldNonPreemptible.milliCpu,
                                          o.heldNonPreemptible.memory,
                                          o.pending.milliGpu,
                                          o.pending.milliCpu,
                                          o.pending.memory};
      INFO("queue " << q.name);
      CHECK(got == sums[q.index]);
    }
  }
}
