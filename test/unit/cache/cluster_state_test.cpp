// ClusterState on its own, without a cluster or threads: add / update / delete events of nodes,
// pods, PodGroups and Queues, and the accounting they keep (node use, GPU groups, jobs, queues);
// the assumptions it consults; what a relist reconciles against; the dirty sets and copy on write.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "../src/cache/cluster_state.h"
#include "../src/cache/sync.h"
#include "tessera/api/clock.h"

namespace {

using tessera::api::Duration;
using tessera::api::FakeClock;
using tessera::api::Kind;
using tessera::api::parseTime;
using tessera::cache::Assumptions;
using tessera::cache::ClusterState;
using tessera::cache::GpuGroupInfo;
using tessera::cache::JobInfo;
using tessera::cache::Json;
using tessera::cache::NodeInfo;
using tessera::cache::PodReport;
using tessera::cache::QueueInfo;
using tessera::cache::TaskStatus;
using tessera::cache::WatchEvent;
using tessera::cache::WatchEventType;

// ---- manifests ----

Json node(const std::string& name, const std::string& gpus = "4", Json labels = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
          {"status",
           {{"allocatable", {{"cpu", "16"}, {"memory", "64Gi"}, {"pods", "110"}, {"nvidia.com/gpu", gpus}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

/// A pod of scheduler tessera requesting `requests`; `patch` is merged over it (JSON merge patch).
Json pod(const std::string& name, Json requests, const Json& patch = Json::object()) {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"namespace", "t"}, {"name", name}, {"creationTimestamp", "2026-01-01T00:00:00Z"}}},
            {"spec",
             {{"schedulerName", "tessera"},
              {"containers", {{{"name", "main"}, {"image", "busybox"}, {"resources", {{"requests", requests}}}}}}}}};
  p.merge_patch(patch);
  return p;
}

Json running(const std::string& nodeName) {
  return {{"spec", {{"nodeName", nodeName}}}, {"status", {{"phase", "Running"}}}};
}
Json merged(Json a, const Json& b) {
  a.merge_patch(b);
  return a;
}
Json terminating() { return {{"metadata", {{"deletionTimestamp", "2026-01-01T00:01:00Z"}}}}; }
Json inGroup(const std::string& group) { return {{"metadata", {{"annotations", {{"pod-group-name", group}}}}}}; }

Json podGroup(const std::string& name, int minMember, const std::string& queue) {
  return {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
          {"kind", "PodGroup"},
          {"metadata", {{"namespace", "t"}, {"name", name}, {"uid", "pg-" + name}}},
          {"spec", {{"minMember", minMember}, {"queue", queue}}}};
}

Json queue(const std::string& name) {
  return {{"apiVersion", "scheduling.tessera.dev/v1alpha1"}, {"kind", "Queue"}, {"metadata", {{"name", name}}}};
}

/// A fractional pod of `fraction` of a GPU, running on `nodeName` in GPU group `group` when given.
Json fracPod(const std::string& name, const std::string& fraction, const std::string& nodeName = "",
             const std::string& group = "") {
  Json patch = {{"metadata", {{"annotations", {{"gpu-fraction", fraction}}}}}};
  if (!group.empty()) patch["metadata"]["labels"] = {{"tessera.dev/gpu-group", group}};
  if (!nodeName.empty()) patch.merge_patch(running(nodeName));
  return pod(name, {{"cpu", "1"}}, patch);
}

/// The binder's reservation pod of GPU group `group` (another scheduler's pod holding one GPU).
Json reservation(const std::string& group, const std::string& nodeName) {
  Json p = pod("gpu-reservation-" + group, {{"nvidia.com/gpu", "1"}},
               merged(running(nodeName), {{"metadata",
                                           {{"namespace", "tessera-reservation"},
                                            {"labels", {{"tessera.dev/gpu-group", group}}},
                                            {"annotations", {{"tessera.dev/gpu-uuid", "GPU-1"}}}}},
                                          {"spec", {{"schedulerName", "default-scheduler"}}}}));
  return p;
}

struct Env {
  FakeClock clock{parseTime("2026-01-01T00:00:00Z").value()};
  ClusterState state{clock, "tessera"};

  void add(Kind kind, const Json& obj) { state.apply(kind, WatchEvent{WatchEventType::Added, obj}); }
  void update(Kind kind, const Json& obj) { state.apply(kind, WatchEvent{WatchEventType::Modified, obj}); }
  void remove(Kind kind, const Json& obj) { state.apply(kind, WatchEvent{WatchEventType::Deleted, obj}); }
  void report(PodReport::Op op, const std::string& podKey, const std::string& node = "",
              std::vector<std::string> groups = {}) {
    PodReport r;
    r.op = op;
    r.podKey = podKey;
    r.node = node;
    r.gpuGroups = std::move(groups);
    r.until = clock.now() + Duration{10'000};
    if (state.assumptions().apply(r, state.findPod(podKey), clock.now(), Duration{60'000})) state.refreshPod(podKey);
  }
  const NodeInfo& nodeInfo(const std::string& name) {
    const NodeInfo* n = state.findNode(name);
    REQUIRE(n);
    return *n;
  }
  const JobInfo& job(const std::string& key) {
    const JobInfo* j = state.findJob(key);
    REQUIRE(j);
    return *j;
  }
};

}  // namespace

TEST_CASE("cluster state: nodes are added, updated and deleted", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  CHECK(e.nodeInfo("n1").allocatable.milliCpu == 16'000);
  CHECK(e.nodeInfo("n1").allocatable.milliGpu == 4'000);
  CHECK(e.nodeInfo("n1").gpuMemoryMiB == 0);
  CHECK(e.state.dirtyNodes() == std::set<std::string>{"n1"});
  e.state.clearDirty();

  e.update(Kind::Node, node("n1", "8", {{"nvidia.com/gpu.memory", "81920"}}));
  CHECK(e.nodeInfo("n1").allocatable.milliGpu == 8'000);
  CHECK(e.nodeInfo("n1").gpuMemoryMiB == 81920);
  CHECK(e.nodeInfo("n1").gpuUnits() == 81920 * 1000);
  CHECK(e.state.dirtyNodes() == std::set<std::string>{"n1"});

  e.update(Kind::Node, node("n1", "8", {{"nvidia.com/gpu.memory", "lots"}}));
  CHECK(e.nodeInfo("n1").gpuMemoryMiB == 0);
  CHECK_FALSE(e.nodeInfo("n1").gpuLabelError.empty());

  e.remove(Kind::Node, node("n1"));
  CHECK(e.state.findNode("n1") == nullptr);
  CHECK(e.state.heldKeys(Kind::Node).empty());
}

TEST_CASE("cluster state: a node deleted under its pods stays until they are gone", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  e.add(Kind::Pod, pod("a", {{"cpu", "2"}}, running("n1")));
  e.remove(Kind::Node, node("n1"));
  const NodeInfo& n = e.nodeInfo("n1");
  CHECK(n.node == nullptr);
  CHECK(n.podCount == 1);
  CHECK(n.used.milliCpu == 2'000);
  CHECK(e.state.heldKeys(Kind::Node).empty());  // no Node object: a relist would not delete it again

  e.remove(Kind::Pod, pod("a", {{"cpu", "2"}}));
  CHECK(e.state.findNode("n1") == nullptr);
}

TEST_CASE("cluster state: a job's fewest whole GPUs of a pending pod follow its pods", "[cluster_state]") {
  // JobInfo::pendingMinGpus answers allocate's "fits nowhere" without reading the tasks: the
  // minimum over pending pods only, whole GPUs of the node request, none pending: INT64_MAX.
  Env e;
  e.add(Kind::Node, node("n1"));
  e.add(Kind::PodGroup, podGroup("g", 1, "default"));
  e.add(Kind::Pod, pod("g-big", {{"nvidia.com/gpu", "4"}}, inGroup("g")));
  CHECK(e.job("PodGroup/t/g").pendingMinGpus == 4);
  e.add(Kind::Pod, pod("g-small", {{"nvidia.com/gpu", "2"}}, inGroup("g")));
  e.add(Kind::Pod, pod("g-cpu", {{"cpu", "1"}}, inGroup("g")));
  CHECK(e.job("PodGroup/t/g").pendingMinGpus == 0);
  e.update(Kind::Pod, pod("g-cpu", {{"cpu", "1"}}, merged(inGroup("g"), running("n1"))));
  CHECK(e.job("PodGroup/t/g").pendingMinGpus == 2);  // a running pod no longer counts
  e.remove(Kind::Pod, pod("g-small", {{"nvidia.com/gpu", "2"}}, inGroup("g")));
  CHECK(e.job("PodGroup/t/g").pendingMinGpus == 4);
  e.update(Kind::Pod, pod("g-big", {{"nvidia.com/gpu", "4"}}, merged(inGroup("g"), running("n1"))));
  CHECK(e.job("PodGroup/t/g").pendingMinGpus == INT64_MAX);
}

TEST_CASE("cluster state: a job's pending GPU bounds tell pods sharing a GPU apart", "[cluster_state]") {
  // pendingMinWholeGpus leaves out pods sharing a GPU (pendingSharesGpu says one is pending);
  // pendingMinGpuMilli counts a shared pod's fraction, a whole-GPU pod's GPUs (consolidation's needs).
  Env e;
  e.add(Kind::Node, node("n1"));
  e.add(Kind::PodGroup, podGroup("g", 1, "default"));
  e.add(Kind::Pod, pod("g-two", {{"nvidia.com/gpu", "2"}}, inGroup("g")));
  const auto* j = &e.job("PodGroup/t/g");
  CHECK(j->pendingMinWholeGpus == 2);
  CHECK_FALSE(j->pendingSharesGpu);
  CHECK(j->pendingMinGpuMilli == 2000);
  e.add(Kind::Pod, merged(fracPod("g-half", "0.25"), inGroup("g")));
  j = &e.job("PodGroup/t/g");
  CHECK(j->pendingMinGpus == 0);  // (the shared pod asks its node for no whole GPU)
  CHECK(j->pendingMinWholeGpus == 2);
  CHECK(j->pendingSharesGpu);
  CHECK(j->pendingMinGpuMilli == 250);
  e.update(Kind::Pod, merged(fracPod("g-half", "0.25", "n1"), inGroup("g")));
  j = &e.job("PodGroup/t/g");
  CHECK_FALSE(j->pendingSharesGpu);  // running now
  CHECK(j->pendingMinGpuMilli == 2000);
  e.remove(Kind::Pod, pod("g-two", {{"nvidia.com/gpu", "2"}}, inGroup("g")));
  j = &e.job("PodGroup/t/g");
  CHECK(j->pendingMinWholeGpus == INT64_MAX);
  CHECK(j->pendingMinGpuMilli == INT64_MAX);
}

TEST_CASE("cluster state: a pod's life moves its request between job, node and queue", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  const Json req = {{"cpu", "2"}, {"nvidia.com/gpu", "1"}};

  e.add(Kind::Pod, pod("a", req));
  {
    const JobInfo& j = e.job("Pod/t/a");
    CHECK(j.isSingleton());
    CHECK(j.queue == "default");
    CHECK(j.minMember == 1);
    CHECK(j.pendingCount == 1);
    CHECK(j.pendingRequest.milliCpu == 2'000);
    CHECK(j.allocated.isZero());
    REQUIRE(j.tasks.size() == 1);
    CHECK(j.tasks[0].status == TaskStatus::Pending);
    CHECK(e.nodeInfo("n1").podCount == 0);
    CHECK(e.state.findQueue("default") == nullptr);  // nothing allocated, nothing declared
  }

  e.update(Kind::Pod, pod("a", req, running("n1")));
  {
    const JobInfo& j = e.job("Pod/t/a");
    CHECK(j.pendingCount == 0);
    CHECK(j.pendingRequest.isZero());
    CHECK(j.allocatedCount == 1);
    CHECK(j.allocated.milliCpu == 2'000);
    CHECK(j.tasks[0].status == TaskStatus::Running);
    CHECK(j.tasks[0].nodeName == "n1");
    const NodeInfo& n = e.nodeInfo("n1");
    CHECK(n.used.milliCpu == 2'000);
    CHECK(n.used.milliGpu == 1'000);
    CHECK(n.foreignUsed.isZero());
    CHECK(n.podCount == 1);
    CHECK(n.pods == std::vector<std::string>{"t/a"});
    const QueueInfo* q = e.state.findQueue("default");
    REQUIRE(q);
    CHECK(q->queue == nullptr);
    CHECK(q->allocated.milliGpu == 1'000);
  }

  e.update(Kind::Pod, merged(pod("a", req, running("n1")), terminating()));
  CHECK(e.job("Pod/t/a").tasks[0].status == TaskStatus::Releasing);
  CHECK(e.job("Pod/t/a").releasing.milliCpu == 2'000);
  CHECK(e.nodeInfo("n1").releasing.milliCpu == 2'000);
  CHECK(e.nodeInfo("n1").used.milliCpu == 2'000);  // still held until it is gone

  e.remove(Kind::Pod, pod("a", req));
  CHECK(e.state.findJob("Pod/t/a") == nullptr);
  CHECK(e.state.findPod("t/a") == nullptr);
  const NodeInfo& n = e.nodeInfo("n1");
  CHECK(n.used.isZero());
  CHECK(n.releasing.isZero());
  CHECK(n.podCount == 0);
  CHECK(n.pods.empty());
  CHECK(e.state.findQueue("default") == nullptr);  // an undeclared queue nothing uses is dropped
}

TEST_CASE("cluster state: terminal pods and other schedulers' pods", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  Json foreign = pod("f", {{"cpu", "3"}}, merged(running("n1"), {{"spec", {{"schedulerName", "other"}}}}));
  foreign["spec"]["containers"][0]["ports"] = {{{"containerPort", 80}, {"hostPort", 8080}}};
  e.add(Kind::Pod, foreign);
  e.add(Kind::Pod, pod("p", {{"cpu", "1"}}, {{"spec", {{"schedulerName", "other"}}}}));  // pending: not ours
  e.add(Kind::Pod, pod("done", {{"cpu", "4"}}, {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Succeeded"}}}}));

  const NodeInfo& n = e.nodeInfo("n1");
  CHECK(n.used.milliCpu == 3'000);
  CHECK(n.foreignUsed.milliCpu == 3'000);
  CHECK(n.podCount == 1);
  REQUIRE(n.usedPorts.size() == 1);
  CHECK(n.usedPorts[0].port == 8080);
  CHECK(e.state.findJob("Pod/t/f") == nullptr);
  CHECK(e.state.findPod("t/p") == nullptr);
  CHECK(e.job("Pod/t/done").succeededCount == 1);
  CHECK(e.job("Pod/t/done").allocated.isZero());

  e.remove(Kind::Pod, foreign);
  CHECK(e.nodeInfo("n1").foreignUsed.isZero());
  CHECK(e.nodeInfo("n1").usedPorts.empty());
}

TEST_CASE("cluster state: ungrouped pending pods are offered to the pod grouper once per change", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  auto names = [&e](const std::vector<std::string>& also = {}) {
    std::vector<std::string> out;
    for (const auto& p : e.state.takeUngroupedPods(also)) out.push_back(p->meta.name);
    std::sort(out.begin(), out.end());
    return out;
  };
  e.add(Kind::Pod, pod("bare", {{"cpu", "1"}}));
  e.add(Kind::Pod, pod("grouped", {{"cpu", "1"}}, inGroup("g")));
  e.add(Kind::Pod, pod("bound", {{"cpu", "1"}}, running("n1")));
  e.add(Kind::Pod, pod("other", {{"cpu", "1"}}, {{"spec", {{"schedulerName", "other"}}}}));
  e.add(Kind::Pod, pod("going", {{"cpu", "1"}}, terminating()));
  CHECK(names() == std::vector<std::string>{"bare"});
  CHECK(names().empty());  // nothing changed: nothing to look at

  SECTION("a change offers it again; a retry key too, while it still qualifies") {
    e.update(Kind::Pod, pod("bare", {{"cpu", "2"}}));
    CHECK(names() == std::vector<std::string>{"bare"});
    CHECK(names({"t/bare", "t/grouped", "t/missing"}) == std::vector<std::string>{"bare"});
  }
  SECTION("a pod pointed at a group, bound or deleted meanwhile is not offered") {
    e.add(Kind::Pod, pod("late", {{"cpu", "1"}}));
    e.add(Kind::Pod, pod("late2", {{"cpu", "1"}}));
    e.add(Kind::Pod, pod("late3", {{"cpu", "1"}}));
    e.update(Kind::Pod, pod("late", {{"cpu", "1"}}, inGroup("g")));
    e.update(Kind::Pod, pod("late2", {{"cpu", "1"}}, running("n1")));
    e.remove(Kind::Pod, pod("late3", {{"cpu", "1"}}));
    CHECK(names().empty());
  }
}

TEST_CASE("cluster state: with a grouper, a workload's pod waits in no job until offered", "[cluster_state]") {
  Env e;
  e.state.holdUngroupedPods(true);
  const Json owned = pod("w-0", {{"cpu", "1"}},
                         {{"metadata", {{"ownerReferences", {{{"apiVersion", "kubeflow.org/v1"},
                                                             {"kind", "PyTorchJob"},
                                                             {"name", "w"},
                                                             {"uid", "u"},
                                                             {"controller", true}}}}}}});
  e.add(Kind::Pod, owned);
  e.add(Kind::Pod, pod("bare", {{"cpu", "1"}}));
  CHECK(e.state.findJob("Pod/t/w-0") == nullptr);  // held
  CHECK(e.state.findJob("Pod/t/bare") != nullptr);  // nothing to group it with
  CHECK(e.state.takeUngroupedPods().size() == 2);
  CHECK(e.state.findJob("Pod/t/w-0") != nullptr);  // offered: left alone, it is its own job
  CHECK(e.state.takeUngroupedPods().empty());
  e.update(Kind::Pod, owned);  // a later change does not hold it again
  CHECK(e.state.findJob("Pod/t/w-0") != nullptr);
}

TEST_CASE("cluster state: PodGroups and Queues resolve a job's queue and gang size", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  const Json req = {{"cpu", "1"}};
  e.add(Kind::Pod, pod("w0", req, merged(inGroup("g"), running("n1"))));
  e.add(Kind::Pod, pod("w1", req, inGroup("g")));
  {
    const JobInfo& j = e.job("PodGroup/t/g");
    CHECK(j.podGroupMissing);
    CHECK(j.minMember == 2);  // no PodGroup: every pod
    CHECK(j.queue == "default");
    CHECK(j.tasks.size() == 2);
    CHECK(j.allocatedCount == 1);
    CHECK(j.pendingCount == 1);
    CHECK(e.state.findQueue("default")->allocated.milliCpu == 1'000);
  }

  e.add(Kind::Queue, queue("research"));
  REQUIRE(e.state.findQueue("research"));
  CHECK(e.state.findQueue("research")->queue != nullptr);
  CHECK(e.state.findQueue("research")->allocated.isZero());

  e.add(Kind::PodGroup, podGroup("g", 3, "research"));
  {
    const JobInfo& j = e.job("PodGroup/t/g");
    CHECK_FALSE(j.podGroupMissing);
    REQUIRE(j.podGroup);
    CHECK(j.uid == "pg-g");
    CHECK(j.minMember == 3);
    CHECK(j.queue == "research");
    CHECK(e.state.findQueue("research")->allocated.milliCpu == 1'000);
    CHECK(e.state.findQueue("default") == nullptr);  // the job's use moved with it
  }

  e.update(Kind::PodGroup, podGroup("g", 1, "research"));
  CHECK(e.job("PodGroup/t/g").minMember == 1);

  // A queue deleted while a job still uses it keeps its totals, without the Queue object.
  e.remove(Kind::Queue, queue("research"));
  REQUIRE(e.state.findQueue("research"));
  CHECK(e.state.findQueue("research")->queue == nullptr);
  CHECK(e.state.findQueue("research")->allocated.milliCpu == 1'000);
  CHECK(e.state.heldKeys(Kind::Queue).empty());

  e.remove(Kind::PodGroup, podGroup("g", 1, "research"));
  CHECK(e.job("PodGroup/t/g").podGroupMissing);
  CHECK(e.job("PodGroup/t/g").queue == "default");
  CHECK(e.state.findQueue("research") == nullptr);
  CHECK(e.state.findQueue("default")->allocated.milliCpu == 1'000);

  e.remove(Kind::Pod, pod("w0", req));
  e.remove(Kind::Pod, pod("w1", req));
  CHECK(e.state.findJob("PodGroup/t/g") == nullptr);
  CHECK(e.state.jobs().empty());
  CHECK(e.state.queues().empty());
}

TEST_CASE("cluster state: a GPU group holds one GPU, by its reservation pod or by itself", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1", "4", {{"nvidia.com/gpu.memory", "81920"}}));
  e.add(Kind::Pod, fracPod("a", "0.5", "n1", "g1"));
  e.add(Kind::Pod, fracPod("b", "0.25", "n1", "g1"));
  {
    const NodeInfo& n = e.nodeInfo("n1");
    REQUIRE(n.gpuGroups.size() == 1);
    const GpuGroupInfo& g = n.gpuGroups[0];
    CHECK(g.id == "g1");
    CHECK_FALSE(g.reserved);
    CHECK(g.pods == 2);
    CHECK(g.used == (500 + 250) * 81920);
    CHECK(g.compute == 500 + 250);  // a fraction's compute is the fraction (api::gpuComputeMilli)
    CHECK(g.computeReleasing == 0);
    CHECK(n.used.milliGpu == 1'000);  // the group by itself
    CHECK(n.used.milliCpu == 2'000);
    CHECK(e.job("Pod/t/a").allocated.milliGpu == 500);  // the queue is charged the fraction
    CHECK(e.job("Pod/t/a").tasks[0].gpuGroups == std::vector<std::string>{"g1"});
  }

  e.add(Kind::Pod, reservation("g1", "n1"));
  {
    const NodeInfo& n = e.nodeInfo("n1");
    REQUIRE(n.findGpuGroup("g1"));
    const GpuGroupInfo& g = *n.findGpuGroup("g1");
    CHECK(g.reserved);
    CHECK(g.reservationPod == "tessera-reservation/gpu-reservation-g1");
    CHECK(g.uuid == "GPU-1");
    CHECK(n.used.milliGpu == 1'000);  // the reservation pod's GPU, no longer the group's own
    CHECK(n.foreignUsed.isZero());    // a reservation pod is ours in spirit
  }

  e.update(Kind::Pod, merged(fracPod("a", "0.5", "n1", "g1"), terminating()));
  CHECK(e.nodeInfo("n1").findGpuGroup("g1")->releasing == 500 * 81920);
  CHECK(e.nodeInfo("n1").findGpuGroup("g1")->computeReleasing == 500);

  e.remove(Kind::Pod, fracPod("a", "0.5"));
  e.remove(Kind::Pod, fracPod("b", "0.25"));
  {
    const NodeInfo& n = e.nodeInfo("n1");
    REQUIRE(n.gpuGroups.size() == 1);  // reserved, empty
    CHECK(n.gpuGroups[0].pods == 0);
    CHECK(n.gpuGroups[0].used == 0);
    CHECK(n.gpuGroups[0].releasing == 0);
    CHECK(n.gpuGroups[0].compute == 0);
    CHECK(n.gpuGroups[0].computeReleasing == 0);
    CHECK(n.used.milliGpu == 1'000);
  }

  e.remove(Kind::Pod, reservation("g1", "n1"));
  CHECK(e.nodeInfo("n1").gpuGroups.empty());
  CHECK(e.nodeInfo("n1").used.isZero());
}

TEST_CASE("cluster state: a group without its reservation pod holds its GPU until empty", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));  // no memory label: units are thousandths of a GPU
  e.add(Kind::Pod, reservation("g1", "n1"));
  e.add(Kind::Pod, fracPod("a", "0.5", "n1", "g1"));
  e.remove(Kind::Pod, reservation("g1", "n1"));
  const NodeInfo& n = e.nodeInfo("n1");
  REQUIRE(n.gpuGroups.size() == 1);
  CHECK_FALSE(n.gpuGroups[0].reserved);
  CHECK(n.gpuGroups[0].used == 500);
  CHECK(n.used.milliGpu == 1'000);
  e.remove(Kind::Pod, fracPod("a", "0.5"));
  CHECK(e.nodeInfo("n1").gpuGroups.empty());
  CHECK(e.nodeInfo("n1").used.isZero());
}

TEST_CASE("cluster state: assumptions count a pod before the watch shows it", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  const Json req = {{"cpu", "2"}};
  e.add(Kind::Pod, pod("a", req));

  e.report(PodReport::Op::AssumeBinding, "t/a", "n1");
  CHECK(e.job("Pod/t/a").tasks[0].status == TaskStatus::Bound);
  CHECK(e.job("Pod/t/a").tasks[0].assumed);
  CHECK(e.nodeInfo("n1").used.milliCpu == 2'000);
  REQUIRE(e.state.assumptions().bound("t/a"));
  CHECK(e.state.assumptions().bound("t/a")->expiry == Assumptions::kInFlight);

  // The bind failed: the pod leaves every job until its backoff ends.
  e.report(PodReport::Op::BindingFailed, "t/a");
  CHECK(e.state.findJob("Pod/t/a") == nullptr);
  CHECK(e.state.findPod("t/a") != nullptr);
  CHECK(e.nodeInfo("n1").used.isZero());
  e.clock.advance(Duration{10'000});
  for (const auto& key : e.state.assumptions().endBackoffs(e.clock.now())) e.state.refreshPod(key);
  CHECK(e.job("Pod/t/a").tasks[0].status == TaskStatus::Pending);

  // Assumed bound, then confirmed by the watch: the assumption ends.
  e.report(PodReport::Op::AssumeBound, "t/a", "n1");
  CHECK(e.job("Pod/t/a").tasks[0].status == TaskStatus::Bound);
  e.update(Kind::Pod, pod("a", req, running("n1")));
  CHECK(e.state.assumptions().bound("t/a") == nullptr);
  CHECK_FALSE(e.job("Pod/t/a").tasks[0].assumed);

  // An assumed eviction counts the pod as releasing; a failed one takes that back.
  e.report(PodReport::Op::AssumeEvicted, "t/a");
  CHECK(e.job("Pod/t/a").tasks[0].status == TaskStatus::Releasing);
  CHECK(e.nodeInfo("n1").releasing.milliCpu == 2'000);
  e.report(PodReport::Op::EvictionFailed, "t/a");
  CHECK(e.job("Pod/t/a").tasks[0].status == TaskStatus::Running);
  CHECK(e.nodeInfo("n1").releasing.isZero());
}

TEST_CASE("cluster state: an assumed bind expires, and a deleted pod takes its assumptions", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  e.add(Kind::Pod, pod("a", {{"cpu", "1"}}));
  e.add(Kind::Pod, pod("b", {{"cpu", "1"}}));
  e.report(PodReport::Op::AssumeBound, "t/a", "n1");
  e.report(PodReport::Op::AssumeBound, "t/b", "n1");
  e.report(PodReport::Op::AssumeBound, "t/gone", "n1");  // unknown pod: nothing assumed
  CHECK(e.state.assumptions().bound("t/gone") == nullptr);
  CHECK(e.nodeInfo("n1").podCount == 2);

  e.remove(Kind::Pod, pod("b", {{"cpu", "1"}}));
  CHECK(e.state.assumptions().bound("t/b") == nullptr);
  CHECK(e.nodeInfo("n1").podCount == 1);

  CHECK(e.state.assumptions().expireBinds(e.clock.now()).empty());
  e.clock.advance(Duration{60'001});
  const std::vector<std::string> expired = e.state.assumptions().expireBinds(e.clock.now());
  CHECK(expired == std::vector<std::string>{"t/a"});
  for (const auto& key : expired) e.state.refreshPod(key);
  CHECK(e.job("Pod/t/a").tasks[0].status == TaskStatus::Pending);
  CHECK(e.nodeInfo("n1").podCount == 0);
}

TEST_CASE("cluster state: an assumed binding counts a fractional pod in the bind's GPU groups", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  e.add(Kind::Pod, fracPod("a", "0.5"));
  e.report(PodReport::Op::AssumeBinding, "t/a", "n1", {"g7"});
  const NodeInfo& n = e.nodeInfo("n1");
  REQUIRE(n.findGpuGroup("g7"));
  CHECK(n.findGpuGroup("g7")->used == 500);
  CHECK(n.used.milliGpu == 1'000);
}

TEST_CASE("cluster state: conversion errors keep the last good object and are held for relists", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  Json bad = node("n1");
  bad["status"]["allocatable"]["cpu"] = "lots";
  e.update(Kind::Node, bad);
  CHECK(e.nodeInfo("n1").allocatable.milliCpu == 16'000);  // the last good version
  REQUIRE(e.state.conversionErrors().count("Node/n1"));
  CHECK(e.state.conversionErrors().at("Node/n1").name == "n1");

  Json badQueue = queue("q");
  badQueue["spec"] = {{"parentQueue", 7}};
  e.add(Kind::Queue, badQueue);
  CHECK(e.state.heldKeys(Kind::Queue) == std::vector<std::string>{"q"});  // only as an error

  e.state.remove(Kind::Queue, "q");
  e.state.remove(Kind::Node, "n1");
  CHECK(e.state.conversionErrors().empty());
  CHECK(e.state.findNode("n1") == nullptr);
}

TEST_CASE("cluster state: held keys name every object of a kind, as a relist sees them", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n2"));
  e.add(Kind::Node, node("n1"));
  e.add(Kind::Pod, pod("b", {{"cpu", "1"}}));
  e.add(Kind::Pod, pod("a", {{"cpu", "1"}}));
  e.add(Kind::PodGroup, podGroup("g", 1, "q"));
  CHECK(e.state.heldKeys(Kind::Node) == std::vector<std::string>{"n1", "n2"});
  CHECK(e.state.heldKeys(Kind::Pod) == std::vector<std::string>{"t/a", "t/b"});
  CHECK(e.state.heldKeys(Kind::PodGroup) == std::vector<std::string>{"t/g"});

  e.state.remove(Kind::Pod, "t/a");
  e.state.remove(Kind::PodGroup, "t/g");
  CHECK(e.state.heldKeys(Kind::Pod) == std::vector<std::string>{"t/b"});
  CHECK(e.state.heldKeys(Kind::PodGroup).empty());
}

TEST_CASE("cluster state: dirty sets name what changed; shared entries are copied on write", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  e.add(Kind::Node, node("n2"));
  e.add(Kind::Pod, pod("a", {{"cpu", "1"}}));
  CHECK(e.state.dirtyNodes() == std::set<std::string>{"n1", "n2"});
  CHECK(e.state.dirtyJobs() == std::set<std::string>{"Pod/t/a"});
  e.state.clearDirty();

  std::shared_ptr<const NodeInfo> published = e.state.nodes().at("n1");  // as a snapshot holds it
  e.update(Kind::Pod, pod("a", {{"cpu", "1"}}, running("n1")));
  CHECK(e.state.dirtyNodes() == std::set<std::string>{"n1"});
  CHECK(e.state.dirtyJobs() == std::set<std::string>{"Pod/t/a"});
  CHECK(published->podCount == 0);  // unchanged
  CHECK(e.nodeInfo("n1").podCount == 1);
  CHECK(published.get() != &e.nodeInfo("n1"));
}

TEST_CASE("cluster state: a relist upserts what it lists and deletes what it lacks", "[cluster_state]") {
  Env e;
  e.add(Kind::Node, node("n1"));
  e.add(Kind::Node, node("n2"));
  e.add(Kind::Pod, pod("a", {{"cpu", "1"}}, running("n1")));
  e.add(Kind::Pod, pod("b", {{"cpu", "1"}}));
  Json bad = pod("c", {{"cpu", "1"}});
  bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots";
  e.add(Kind::Pod, bad);
  REQUIRE(e.state.conversionErrors().count("Pod/t/c"));

  tessera::cache::reconcile(e.state, Kind::Node, {node("n2", "8"), node("n3")});
  CHECK(e.state.heldKeys(Kind::Node) == std::vector<std::string>{"n2", "n3"});
  CHECK(e.nodeInfo("n2").allocatable.milliGpu == 8'000);
  CHECK(e.nodeInfo("n1").node == nullptr);  // deleted, still holding pod a

  tessera::cache::reconcile(e.state, Kind::Pod, {pod("b", {{"cpu", "1"}}, running("n2"))});
  CHECK(e.state.heldKeys(Kind::Pod) == std::vector<std::string>{"t/b"});
  CHECK(e.state.conversionErrors().empty());  // c is gone too
  CHECK(e.state.findNode("n1") == nullptr);
  CHECK(e.nodeInfo("n2").podCount == 1);
  CHECK(e.job("Pod/t/b").tasks[0].status == TaskStatus::Running);
}

TEST_CASE("cluster state: under hard isolation an unwired fractional pod is refused with a reason", "[cluster_state]") {
  FakeClock clock{parseTime("2026-01-01T00:00:00Z").value()};
  ClusterState hard{clock, "tessera", tessera::api::Isolation::Hard};
  const Json wiredEnv = {{"spec",
                          {{"containers",
                            {{{"name", "main"},
                              {"image", "busybox"},
                              {"resources", {{"requests", {{"cpu", "1"}}}}},
                              {"env", {{{"name", "TESSERA_ISOLATION_REGION"}, {"value", "/r/region"}}}}}}}}}};
  hard.apply(Kind::Node, WatchEvent{WatchEventType::Added, node("n1")});
  hard.apply(Kind::Pod, WatchEvent{WatchEventType::Added, fracPod("unwired", "0.5")});
  hard.apply(Kind::Pod, WatchEvent{WatchEventType::Added, merged(fracPod("wired", "0.5"), wiredEnv)});
  hard.apply(Kind::Pod, WatchEvent{WatchEventType::Added,
                                   merged(fracPod("soft", "0.5"), {{"metadata", {{"annotations", {{"tessera.dev/isolation", "none"}}}}}})});
  // Bound before (or by another scheduler's rules): its GPU use is still counted.
  hard.apply(Kind::Pod, WatchEvent{WatchEventType::Added, fracPod("bound", "0.5", "n1", "g1")});
  auto task = [&](ClusterState& st, const std::string& name) -> const tessera::cache::TaskInfo& {
    const JobInfo* j = st.findJob("Pod/t/" + name);
    REQUIRE(j);
    REQUIRE(j->tasks.size() == 1);
    return j->tasks[0];
  };
  CHECK_THAT(task(hard, "unwired").gpuSpecError, Catch::Contains("not wired for hard GPU isolation"));
  CHECK(task(hard, "unwired").gpuSpec == nullptr);
  CHECK(task(hard, "wired").gpuSpecError.empty());
  CHECK(task(hard, "wired").gpuSpec != nullptr);
  CHECK(task(hard, "wired").gpuSpec->hardIsolation);  // the gpushare filter needs the node's memory label
  CHECK(task(hard, "soft").gpuSpecError.empty());
  CHECK_FALSE(task(hard, "soft").gpuSpec->hardIsolation);
  CHECK(task(hard, "bound").gpuSpecError.empty());
  CHECK(task(hard, "bound").gpuSpec != nullptr);

  // Without a declared backend (simulations have no webhook) nothing is checked.
  Env unchecked;
  unchecked.add(Kind::Pod, fracPod("unwired", "0.5"));
  CHECK(task(unchecked.state, "unwired").gpuSpecError.empty());
}

TEST_CASE("cluster state, sharded: another pool's pods, Queues and PodGroups are not this shard's", "[cluster_state][shard]") {
  FakeClock clock{parseTime("2026-01-01T00:00:00Z").value()};
  ClusterState state{clock, "tessera", tessera::api::Isolation::Unset, {}, tessera::api::ShardScope::of("a")};
  auto add = [&](Kind kind, const Json& obj) { state.apply(kind, WatchEvent{WatchEventType::Added, obj}); };
  auto pooled = [](const std::string& pool) { return Json{{"metadata", {{"labels", {{"tessera.dev/node-pool", pool}}}}}}; };
  const Json req = {{"nvidia.com/gpu", "1"}};
  add(Kind::Node, node("a-1", "4", {{"tessera.dev/node-pool", "a"}}));
  add(Kind::Queue, queue("shared"));                                     // no pool: every shard's
  add(Kind::Queue, merged(queue("only-b"), pooled("b")));                // pool b's
  add(Kind::Queue, merged(queue("only-a"), pooled("a")));
  CHECK(state.findQueue("shared"));
  CHECK(state.findQueue("only-a"));
  CHECK(state.findQueue("only-b") == nullptr);
  CHECK(state.queuePools().at("only-b") == "b");

  // A pod of pool a is ours; one of pool b bound on a-1 (the node moved here) is only node use.
  add(Kind::Pod, pod("mine", req, merged(pooled("a"), running("a-1"))));
  add(Kind::Pod, pod("theirs", req, merged(pooled("b"), running("a-1"))));
  CHECK(state.findJob("Pod/t/mine"));
  CHECK(state.findJob("Pod/t/theirs") == nullptr);
  CHECK(state.findNode("a-1")->used.milliGpu == 2'000);
  CHECK(state.findNode("a-1")->foreignUsed.milliGpu == 1'000);

  // A pod without the label follows its PodGroup's pool: the PodGroup's label, else its Queue's.
  add(Kind::PodGroup, merged(podGroup("ga", 1, "shared"), pooled("a")));
  add(Kind::PodGroup, podGroup("gb", 1, "only-b"));  // pool b through its queue
  add(Kind::Pod, pod("in-ga", req, inGroup("ga")));
  add(Kind::Pod, pod("in-gb", req, inGroup("gb")));
  CHECK(state.findJob("PodGroup/t/ga"));
  CHECK(state.findJob("PodGroup/t/gb") == nullptr);
  // ... and is handed out once to be labelled for its pool's shard.
  auto misrouted = state.takeMisroutedPods();
  REQUIRE(misrouted.size() == 1);
  CHECK(misrouted[0] == std::make_pair(std::string("t/in-gb"), std::string("b")));
  CHECK(state.takeMisroutedPods().empty());

  // A pod with no PodGroup follows its queue label's Queue.
  add(Kind::Pod, pod("queued-b", req, {{"metadata", {{"labels", {{"tessera.dev/queue", "only-b"}}}}}}));
  add(Kind::Pod, pod("queued-shared", req, {{"metadata", {{"labels", {{"tessera.dev/queue", "shared"}}}}}}));
  CHECK(state.findJob("Pod/t/queued-b") == nullptr);
  CHECK(state.findJob("Pod/t/queued-shared") == nullptr);  // no pool: the default shard's
  misrouted = state.takeMisroutedPods();
  CHECK(misrouted == std::vector<std::pair<std::string, std::string>>{{"t/queued-b", "b"}, {"t/queued-shared", ""}});

  // The PodGroup moves to pool a: its pod is filed again, now ours.
  state.apply(Kind::PodGroup, WatchEvent{WatchEventType::Modified, merged(podGroup("gb", 1, "only-b"), pooled("a"))});
  CHECK(state.findJob("PodGroup/t/gb"));
}

TEST_CASE("cluster state, sharded: a pod moving between the two pod streams is not lost", "[cluster_state][shard]") {
  FakeClock clock{parseTime("2026-01-01T00:00:00Z").value()};
  ClusterState state{clock, "tessera", tessera::api::Isolation::Unset, {}, tessera::api::ShardScope::of("a")};
  state.apply(Kind::Node, WatchEvent{WatchEventType::Added, node("a-1")});
  auto at = [](Json p, const std::string& rv) {
    p["metadata"]["resourceVersion"] = rv;
    return p;
  };
  const Json req = {{"cpu", "1"}};
  const Json bound = pod("p", req, running("a-1"));
  state.apply(Kind::Pod, WatchEvent{WatchEventType::Added, at(bound, "5")});
  // Its label changed at version 7: the other stream's Added came first, then this stream's
  // Deleted (with the old content at the event's version): the pod stays.
  state.apply(Kind::Pod, WatchEvent{WatchEventType::Modified, at(bound, "7")});
  state.apply(Kind::Pod, WatchEvent{WatchEventType::Deleted, at(bound, "7")});
  CHECK(state.findPod("t/p"));
  // A real deletion is newer than what is held: the pod goes.
  state.apply(Kind::Pod, WatchEvent{WatchEventType::Deleted, at(bound, "9")});
  CHECK(state.findPod("t/p") == nullptr);
}
