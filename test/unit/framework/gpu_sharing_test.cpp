// GPU sharing in the cache and the session: a GPU group holds a whole GPU (through its reservation
// pod, or by itself until that pod exists), fractional shares are counted in exact units (portions
// of a GPU's memory), a session opens groups on whole idle GPUs and closes them on rollback, and an
// eviction makes a share releasing (room for a pipelined pod).
#include <catch2/catch.hpp>

#include "tessera/framework/args.h"
#include "tessera/framework/statement.h"
#include "tessera/plugins/factories.h"
#include "support/test_cluster.h"

namespace {

using namespace tessera;
using testing::TestCluster;

std::string gpuNode(const std::string& name, const std::string& gpus, const std::string& memLabel = "81920") {
  return testing::nodeYaml(name, "64", gpus,
                           "  labels: {nvidia.com/gpu.memory: \"" + memLabel + "\"}\n");
}

std::string fracPod(const std::string& name, const std::string& fraction, const std::string& node = "",
                    const std::string& group = "", const std::string& extraAnn = "") {
  std::string s = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
                  "\n  namespace: t\n  annotations: {gpu-fraction: \"" + fraction + "\"" + extraAnn + "}\n";
  if (!group.empty()) s += "  labels: {tessera.dev/gpu-group: " + group + "}\n";
  s += "spec:\n  schedulerName: tessera\n";
  if (!node.empty()) s += "  nodeName: " + node + "\n";
  s += "  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\"}}}]\n";
  if (!node.empty()) s += "status: {phase: Running}\n";
  return s;
}

std::string reservation(const std::string& group, const std::string& node) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gpu-reservation-" + group +
         "\n  namespace: tessera-reservation\n  labels: {tessera.dev/gpu-group: " + group +
         "}\n  annotations: {tessera.dev/gpu-uuid: GPU-1}\nspec:\n  nodeName: " + node +
         "\n  containers: [{name: r, image: x, resources: {requests: {nvidia.com/gpu: \"1\"}, limits: "
         "{nvidia.com/gpu: \"1\"}}}]\nstatus: {phase: Running}\n";
}

}  // namespace

TEST_CASE("cache: a GPU group holds one GPU, by its reservation pod or by itself", "[gpushare]") {
  TestCluster c;
  c.create(gpuNode("n1", "4"));
  c.create(fracPod("a", "0.5", "n1", "g1"));
  c.create(fracPod("b", "0.25", "n1", "g1"));
  c.start();
  {
    auto s = c.snapshot();
    const cache::NodeInfo* n = s->findNode("n1");
    REQUIRE(n);
    REQUIRE(n->gpuGroups.size() == 1);
    const auto& g = n->gpuGroups[0];
    CHECK(g.id == "g1");
    CHECK_FALSE(g.reserved);
    CHECK(g.pods == 2);
    CHECK(g.used == (500 + 250) * 81920);  // units: milli-MiB
    CHECK(n->used.milliGpu == 1000);       // the group holds a GPU by itself
    // The queue is charged the fractions.
    const cache::JobInfo* ja = s->findJob("Pod/t/a");
    REQUIRE(ja);
    CHECK(ja->allocated.milliGpu == 500);
    CHECK(ja->tasks[0].nodeRequest.milliGpu == 0);
  }
  // The reservation pod arrives: the GPU is held through it, not twice.
  c.create(reservation("g1", "n1"));
  {
    auto s = c.snapshot();
    const cache::NodeInfo* n = s->findNode("n1");
    REQUIRE(n->gpuGroups.size() == 1);
    CHECK(n->gpuGroups[0].reserved);
    CHECK(n->gpuGroups[0].uuid == "GPU-1");
    CHECK(n->used.milliGpu == 1000);
    CHECK(n->foreignUsed.milliGpu == 0);  // a reservation pod is not foreign use
  }
  // Both fractional pods finish: the group stays while its reservation pod does, empty.
  REQUIRE(c.cluster.finishPod("t", "a", true).ok());
  REQUIRE(c.cluster.finishPod("t", "b", true).ok());
  {
    auto s = c.snapshot();
    const cache::NodeInfo* n = s->findNode("n1");
    REQUIRE(n->gpuGroups.size() == 1);
    CHECK(n->gpuGroups[0].pods == 0);
    CHECK(n->gpuGroups[0].used == 0);
    CHECK(n->used.milliGpu == 1000);
  }
  REQUIRE(c.cluster.forceRemove(api::Kind::Pod, "tessera-reservation", "gpu-reservation-g1").ok());
  {
    auto s = c.snapshot();
    const cache::NodeInfo* n = s->findNode("n1");
    CHECK(n->gpuGroups.empty());
    CHECK(n->used.milliGpu == 0);
  }
}

TEST_CASE("session: a fractional task opens a group on a whole GPU; rollback closes it exactly", "[gpushare]") {
  TestCluster c;
  c.create(gpuNode("n1", "2"));
  c.create(fracPod("a", "0.5"));
  c.create(fracPod("b", "0.75"));
  c.start();
  auto cfg = testing::configWith({});
  framework::Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  auto& a = testing::taskOf(ssn, "Pod/t/a", "t/a");
  auto& b = testing::taskOf(ssn, "Pod/t/b", "t/b");
  const int n1 = testing::nodeIndex(ssn, "n1");
  auto& node = ssn.nodes()[n1];
  const api::Resources idleBefore = node.idle;
  framework::Statement st(ssn);
  REQUIRE(ssn.fits(a, node, false));
  st.allocate(a, n1);
  REQUIRE(node.gpuGroups.size() == 1);
  CHECK(node.idle.milliGpu == 1000);  // one GPU taken by the new group
  CHECK(ssn.gpuGroupsOf(a) == std::vector<int>{0});
  // 0.75 does not fit next to 0.5: it takes the other GPU.
  REQUIRE(ssn.fits(b, node, false));
  st.allocate(b, n1);
  CHECK(node.gpuGroups.size() == 2);
  CHECK(node.idle.milliGpu == 0);
  // A third 0.75 would not fit anywhere now.
  CHECK(node.gpuGroups[0].free() == 500 * 81920);
  st.discard();
  CHECK(node.gpuGroups.empty());
  CHECK(node.idle == idleBefore);
  CHECK(ssn.gpuGroupsOf(a).empty());
}

TEST_CASE("session: an evicted share is releasing room for a pipelined fractional pod", "[gpushare]") {
  TestCluster c;
  c.create(gpuNode("n1", "1"));
  c.create(reservation("g1", "n1"));
  c.create(fracPod("old", "0.75", "n1", "g1"));
  c.create(fracPod("new", "0.5"));
  c.start();
  auto cfg = testing::configWith({});
  framework::Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  auto& oldTask = testing::taskOf(ssn, "Pod/t/old", "t/old");
  auto& newTask = testing::taskOf(ssn, "Pod/t/new", "t/new");
  auto& node = ssn.nodes()[testing::nodeIndex(ssn, "n1")];
  CHECK_FALSE(ssn.fits(newTask, node, false));
  CHECK_FALSE(ssn.fits(newTask, node, true));
  framework::Statement st(ssn);
  st.evict(oldTask, "test");
  CHECK_FALSE(ssn.fits(newTask, node, false));
  CHECK(ssn.fits(newTask, node, true));  // once the evicted share is gone
  st.pipeline(newTask, node.index);
  CHECK(node.gpuGroups[0].pipelined == 500 * 81920);
  CHECK(ssn.gpuGroupsOf(newTask) == std::vector<int>{0});  // joined the existing group
  st.discard();
  CHECK(node.gpuGroups[0].releasing == 0);
  CHECK(node.gpuGroups[0].pipelined == 0);
}

TEST_CASE("session: memory requests need the node's GPU memory label and fit exactly", "[gpushare]") {
  TestCluster c;
  c.create(gpuNode("n1", "1"));
  c.create(testing::nodeYaml("bare", "64", "1"));
  for (const auto& [name, mib] : std::vector<std::pair<std::string, std::string>>{{"m1", "30720"}, {"m2", "51200"}, {"m3", "1"}})
    c.create("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t, annotations: {gpu-memory: \"" +
             mib + "\"}}\nspec:\n  schedulerName: tessera\n  containers: [{name: c, image: x}]\n");
  c.start();
  auto cfg = testing::configWith({});
  framework::Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  const int n1 = testing::nodeIndex(ssn, "n1");
  auto& node = ssn.nodes()[n1];
  auto& bare = ssn.nodes()[testing::nodeIndex(ssn, "bare")];
  auto& m1 = testing::taskOf(ssn, "Pod/t/m1", "t/m1");
  auto& m2 = testing::taskOf(ssn, "Pod/t/m2", "t/m2");
  auto& m3 = testing::taskOf(ssn, "Pod/t/m3", "t/m3");
  CHECK_FALSE(ssn.fits(m1, bare, false));  // no nvidia.com/gpu.memory label
  framework::Statement st(ssn);
  st.allocate(m1, n1);
  st.allocate(m2, n1);  // 30720 + 51200 = 81920: exactly full
  CHECK(node.gpuGroups.size() == 1);
  CHECK(node.gpuGroups[0].free() == 0);
  CHECK_FALSE(ssn.fits(m3, node, false));  // not even 1 MiB more
  st.commit();
  auto result = ssn.close();
  REQUIRE(result.binds.size() == 2);
  CHECK(result.binds[0].gpus.size() == 1);
  CHECK(result.binds[0].gpus[0].memoryMiB == 30720);
  CHECK(result.binds[0].gpus[0].newGroup);
  CHECK(result.binds[1].gpus[0].memoryMiB == 51200);
  CHECK(result.binds[0].gpus[0].group == result.binds[1].gpus[0].group);
}

TEST_CASE("cache: an in-flight bind's GPU groups count before the watch shows the pod's labels", "[gpushare]") {
  TestCluster c;
  c.create(gpuNode("n1", "2"));
  c.create(fracPod("a", "0.5", "", "stale-group"));  // a label left by an earlier failed attempt
  c.start();
  c.cache->assumeBinding("t/a", "n1", {"g-new"});
  auto s = c.snapshot();
  const cache::NodeInfo* n = s->findNode("n1");
  REQUIRE(n);
  REQUIRE(n->gpuGroups.size() == 1);
  CHECK(n->gpuGroups[0].id == "g-new");
  CHECK(n->gpuGroups[0].pods == 1);
  CHECK_FALSE(n->gpuGroups[0].reserved);
  CHECK(n->used.milliGpu == 1000);  // the new group holds its GPU before its reservation pod exists
}

TEST_CASE("gpushare: under hard isolation a fraction needs the node's GPU memory label (filtered, with a reason)",
          "[gpushare]") {
  const std::string wired =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: f, namespace: t, annotations: {gpu-fraction: \"0.5\"}}\n"
      "spec:\n  schedulerName: tessera\n  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\"}},"
      " env: [{name: TESSERA_ISOLATION_REGION, value: /r/region}]}]\n";
  for (const api::Isolation isolation : {api::Isolation::Hard, api::Isolation::Unset}) {
    TestCluster c;
    c.create(gpuNode("n1", "1"));
    c.create(testing::nodeYaml("bare", "64", "1"));  // no nvidia.com/gpu.memory label
    c.create(wired);
    cache::CacheOptions options;
    options.isolation = isolation;
    c.start(options);
    framework::Args args("plugins.gpushare", nullptr);
    auto gpushare = plugins::makeGpuShare(args);
    REQUIRE(gpushare.ok());
    auto cfg = testing::configWith({std::move(gpushare).value()});
    framework::Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    const auto& task = testing::taskOf(ssn, "Pod/t/f", "t/f");
    std::string reason;
    CHECK(ssn.predicate(task, ssn.nodes()[testing::nodeIndex(ssn, "n1")], reason));
    const bool onBare = ssn.predicate(task, ssn.nodes()[testing::nodeIndex(ssn, "bare")], reason);
    INFO(reason);
    if (isolation == api::Isolation::Hard) {
      CHECK_FALSE(onBare);  // the interposer could not be given the fraction's memory limit
      CHECK_THAT(reason, Catch::Contains("hard GPU isolation"));
    } else {
      CHECK(onBare);  // no backend declared: nothing to enforce
    }
  }
}

TEST_CASE("session: a pod's GPU groups are its session's only (arrays kept from one session to the next)",
          "[gpushare]") {
  // Session 1 places pending pod `a` in a new group (index 0 of n1's groups); session 2, reusing
  // the scheduler state's arrays, sees `a` running in group g2 (index 1, after g1). Its groups
  // there come from its labels: evicting it makes g2's share releasing, not g1's.
  framework::SchedulerState state;
  auto cfg = testing::configWith({});
  {
    TestCluster c;
    c.create(gpuNode("n1", "2"));
    c.create(fracPod("a", "0.5"));
    c.start();
    framework::Session ssn(c.snapshot(), cfg, c.clock, &state);
    ssn.open();
    auto& a = testing::taskOf(ssn, "Pod/t/a", "t/a");
    framework::Statement st(ssn);
    st.allocate(a, testing::nodeIndex(ssn, "n1"));
    st.commit();
    REQUIRE(ssn.gpuGroupsOf(a) == std::vector<int>{0});
    ssn.close();
  }
  TestCluster c;
  c.create(gpuNode("n1", "2"));
  c.create(reservation("g1", "n1"));
  c.create(reservation("g2", "n1"));
  c.create(fracPod("a", "0.5", "n1", "g2"));
  c.start();
  framework::Session ssn(c.snapshot(), cfg, c.clock, &state);
  ssn.open();
  auto& a = testing::taskOf(ssn, "Pod/t/a", "t/a");
  auto& node = ssn.nodes()[testing::nodeIndex(ssn, "n1")];
  REQUIRE(node.gpuGroups.size() == 2);
  REQUIRE(node.gpuGroups[1].id == "g2");
  CHECK(ssn.gpuGroupsOf(a).empty());  // placed by no one in this session
  framework::Statement st(ssn);
  st.evict(a, "test");
  CHECK(node.gpuGroups[0].releasing == 0);
  CHECK(node.gpuGroups[1].releasing == 500 * 81920);
}
