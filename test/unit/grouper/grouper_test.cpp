// The pod grouper against the in-memory cluster: one test per workload kind (the PodGroup it gets:
// minMember, subgroups, queue, priority, owner), the overrides, adoption, and garbage collection.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "tessera/api/clock.h"
#include "tessera/api/convert.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/grouper/grouper.h"

namespace {

using tessera::api::FakeClock;
using tessera::api::Kind;
using tessera::api::parseTime;
using tessera::cache::Json;
using tessera::cache::MemoryCluster;
using tessera::grouper::Grouper;

struct Fixture {
  FakeClock clock{parseTime("2026-01-01T00:00:00Z").value()};
  MemoryCluster cluster{clock};
  Grouper grouper{cluster};

  Json add(Kind kind, Json obj) {
    if (!obj["metadata"].contains("namespace") && kind != Kind::Namespace) obj["metadata"]["namespace"] = "default";
    auto created = cluster.create(kind, obj);
    REQUIRE(created.ok());
    return *created;
  }
  Json workload(Kind kind, const std::string& apiVersion, const std::string& name, Json spec, Json meta = {}) {
    Json obj = {{"apiVersion", apiVersion}, {"kind", std::string(tessera::api::kindInfo(kind).name)}, {"spec", spec}};
    obj["metadata"] = meta.is_object() ? meta : Json::object();
    obj["metadata"]["name"] = name;
    return add(kind, obj);
  }
  /// A pending Tessera pod owned by `owner` (null: bare).
  Json pod(const std::string& name, const Json& owner, Json labels = Json::object()) {
    Json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"labels", labels}}},
              {"spec", {{"schedulerName", "tessera"}, {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
    if (owner.is_object()) {
      p["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", owner["apiVersion"]},
                                                       {"kind", owner["kind"]},
                                                       {"name", owner["metadata"]["name"]},
                                                       {"uid", owner["metadata"]["uid"]},
                                                       {"controller", true}}});
    }
    return add(Kind::Pod, p);
  }
  std::string groupOf(const std::string& name) {
    auto p = cluster.get(Kind::Pod, "default", name);
    REQUIRE(p.ok());
    return (*p)["metadata"].value("annotations", Json::object()).value("pod-group-name", "");
  }
  std::string subGroupOf(const std::string& name) {
    auto p = cluster.get(Kind::Pod, "default", name);
    REQUIRE(p.ok());
    return (*p)["metadata"].value("labels", Json::object()).value("tessera.dev/subgroup", "");
  }
  Json podGroup(const std::string& name) {
    auto pg = cluster.get(Kind::PodGroup, "default", name);
    REQUIRE(pg.ok());
    return *pg;
  }
};

TEST_CASE("a PyTorchJob is one gang of master and workers, with its scheduling policy") {
  Fixture f;
  const Json job =
      f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "train",
                 {{"pytorchReplicaSpecs", {{"Master", {{"replicas", 1}}}, {"Worker", {{"replicas", 3}}}}},
                  {"runPolicy", {{"schedulingPolicy", {{"queue", "team-a"}, {"priorityClass", "train"}}}}}});
  f.pod("train-master-0", job, {{"training.kubeflow.org/replica-type", "master"}});
  for (int i = 0; i < 3; ++i)
    f.pod("train-worker-" + std::to_string(i), job, {{"training.kubeflow.org/replica-type", "worker"}});
  const auto report = f.grouper.run("tessera");
  CHECK(report.podGroups.size() == 1);
  CHECK(report.pods.size() == 4);
  CHECK(report.failures == 0);
  const Json pg = f.podGroup("pg-pytorchjob-train");
  CHECK(pg["spec"]["minMember"] == 4);
  CHECK(pg["spec"]["queue"] == "team-a");
  CHECK(pg["spec"]["priorityClassName"] == "train");
  CHECK(pg["spec"]["subGroups"].size() == 2);
  CHECK(pg["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]);
  CHECK(pg["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob");
  CHECK(f.groupOf("train-worker-2") == "pg-pytorchjob-train");
  CHECK(f.subGroupOf("train-master-0") == "master");
  CHECK(f.subGroupOf("train-worker-0") == "worker");

  SECTION("a second pass changes nothing; a pod created later joins the group") {
    CHECK(f.grouper.run("tessera").pods.empty());
    f.pod("train-worker-3", job, {{"training.kubeflow.org/replica-type", "worker"}});
    const auto again = f.grouper.run("tessera");
    CHECK(again.podGroups.empty());
    CHECK(again.pods.size() == 1);
    CHECK(f.groupOf("train-worker-3") == "pg-pytorchjob-train");
  }
  SECTION("deleting the job takes its PodGroup with it") {
    REQUIRE(f.cluster.remove(Kind::PyTorchJob, "default", "train").ok());
    CHECK(f.cluster.get(Kind::PodGroup, "default", "pg-pytorchjob-train").error().code == 404);
  }
}

TEST_CASE("schedulingPolicy.minAvailable and the min-member annotation set the gang size") {
  Fixture f;
  const Json tf = f.workload(Kind::TFJob, "kubeflow.org/v1", "tf",
                             {{"tfReplicaSpecs", {{"PS", {{"replicas", 2}}}, {"Worker", {{"replicas", 4}}}}},
                              {"runPolicy", {{"schedulingPolicy", {{"minAvailable", 3}}}}}});
  f.pod("tf-ps-0", tf);
  const Json mpi = f.workload(Kind::MPIJob, "kubeflow.org/v1", "mpi",
                              {{"mpiReplicaSpecs", {{"Launcher", {{"replicas", 1}}}, {"Worker", {{"replicas", 2}}}}}},
                              {{"annotations", {{"tessera.dev/min-member", "2"}}}});
  f.pod("mpi-launcher", mpi);
  f.grouper.run("tessera");
  CHECK(f.podGroup("pg-tfjob-tf")["spec"]["minMember"] == 3);
  CHECK_FALSE(f.podGroup("pg-tfjob-tf")["spec"].contains("subGroups"));
  CHECK(f.podGroup("pg-mpijob-mpi")["spec"]["minMember"] == 2);
}

TEST_CASE("a batch Job's pods are independent unless it asks for a gang") {
  Fixture f;
  const Json plain = f.workload(Kind::Job, "batch/v1", "etl", {{"parallelism", 3}});
  f.pod("etl-a", plain);
  f.pod("etl-b", plain);
  const Json gang = f.workload(Kind::Job, "batch/v1", "sweep", {{"parallelism", 4}},
                               {{"annotations", {{"tessera.dev/min-member", "4"}}}});
  f.pod("sweep-a", gang);
  f.grouper.run("tessera");
  CHECK(f.podGroup("pg-job-etl")["spec"]["minMember"] == 1);
  CHECK(f.groupOf("etl-b") == "pg-job-etl");
  CHECK(f.podGroup("pg-job-sweep")["spec"]["minMember"] == 4);
}

TEST_CASE("a JobSet is one gang of all its replicated jobs, one subgroup each") {
  Fixture f;
  const Json set =
      f.workload(Kind::JobSet, "jobset.x-k8s.io/v1alpha2", "js",
                 {{"replicatedJobs",
                   {{{"name", "driver"}, {"replicas", 1}},
                    {{"name", "workers"}, {"replicas", 2}, {"template", {{"spec", {{"parallelism", 2}}}}}}}}});
  Json job = f.workload(Kind::Job, "batch/v1", "js-workers-0", {{"parallelism", 2}});
  job["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                                                     {"kind", "JobSet"},
                                                     {"name", "js"},
                                                     {"uid", set["metadata"]["uid"]},
                                                     {"controller", true}}});
  job = *f.cluster.update(Kind::Job, job);
  f.pod("js-workers-0-0", job, {{"jobset.sigs.k8s.io/replicatedjob-name", "workers"}});
  f.grouper.run("tessera");
  const Json pg = f.podGroup("pg-jobset-js");
  CHECK(pg["spec"]["minMember"] == 5);
  CHECK(pg["metadata"]["ownerReferences"][0]["kind"] == "JobSet");
  CHECK(f.subGroupOf("js-workers-0-0") == "workers");
}

TEST_CASE("a RayCluster gangs its head and minReplicas; a RayJob's goes through its RayCluster") {
  Fixture f;
  const Json rayJob =
      f.workload(Kind::RayJob, "ray.io/v1", "rj", Json::object(), {{"labels", {{"tessera.dev/queue", "research"}}}});
  Json rc = {{"apiVersion", "ray.io/v1"},
             {"kind", "RayCluster"},
             {"metadata",
              {{"name", "rc"},
               {"namespace", "default"},
               {"ownerReferences", Json::array({{{"apiVersion", "ray.io/v1"},
                                                 {"kind", "RayJob"},
                                                 {"name", "rj"},
                                                 {"uid", rayJob["metadata"]["uid"]},
                                                 {"controller", true}}})}}},
             {"spec",
              {{"headGroupSpec", Json::object()},
               {"workerGroupSpecs",
                {{{"groupName", "gpu"}, {"minReplicas", 2}, {"maxReplicas", 8}},
                 {{"groupName", "cpu"}, {"minReplicas", 1}, {"numOfHosts", 2}}}}}}};
  rc = f.add(Kind::RayCluster, rc);
  f.pod("rc-head", rc, {{"ray.io/node-type", "head"}});
  f.pod("rc-gpu-1", rc, {{"ray.io/node-type", "worker"}, {"ray.io/group", "gpu"}});
  f.grouper.run("tessera");
  const Json pg = f.podGroup("pg-raycluster-rc");
  CHECK(pg["spec"]["minMember"] == 5);
  CHECK(pg["spec"]["queue"] == "research");
  CHECK(f.subGroupOf("rc-head") == "head");
  CHECK(f.subGroupOf("rc-gpu-1") == "gpu");
}

TEST_CASE("a LeaderWorkerSet is one gang per group of size pods") {
  Fixture f;
  f.workload(Kind::LeaderWorkerSet, "leaderworkerset.x-k8s.io/v1", "lws",
             {{"replicas", 2}, {"leaderWorkerTemplate", {{"size", 4}}}});
  for (int g = 0; g < 2; ++g)
    for (int w = 0; w < 4; ++w)
      f.pod("lws-" + std::to_string(g) + "-" + std::to_string(w), Json(),
            {{"leaderworkerset.sigs.k8s.io/name", "lws"},
             {"leaderworkerset.sigs.k8s.io/group-index", std::to_string(g)},
             {"leaderworkerset.sigs.k8s.io/worker-index", std::to_string(w)}});
  f.grouper.run("tessera");
  CHECK(f.podGroup("pg-leaderworkerset-lws-0")["spec"]["minMember"] == 4);
  CHECK(f.podGroup("pg-leaderworkerset-lws-1")["spec"]["minMember"] == 4);
  CHECK(f.groupOf("lws-1-3") == "pg-leaderworkerset-lws-1");
  CHECK(f.subGroupOf("lws-1-0") == "leader");
  CHECK(f.subGroupOf("lws-1-3") == "workers");
}

TEST_CASE("bare pods stay groups of one unless their namespace names a queue") {
  Fixture f;
  f.pod("lonely", Json());
  f.grouper.run("tessera");
  CHECK(f.groupOf("lonely").empty());
  CHECK(f.cluster.list(Kind::PodGroup).value().items.empty());

  f.add(Kind::Namespace, {{"apiVersion", "v1"},
                          {"kind", "Namespace"},
                          {"metadata", {{"name", "default"}, {"labels", {{"tessera.dev/queue", "team-b"}}}}}});
  f.pod("queued", Json());
  f.grouper.run("tessera");
  const Json pg = f.podGroup("pg-pod-queued");
  CHECK(pg["spec"]["queue"] == "team-b");
  CHECK(pg["spec"]["minMember"] == 1);
  CHECK(pg["metadata"]["ownerReferences"][0]["kind"] == "Pod");
}

TEST_CASE("an unknown owner gives an independent PodGroup that records it") {
  Fixture f;
  const Json owner = {
      {"apiVersion", "example.com/v1"}, {"kind", "Widget"}, {"metadata", {{"name", "w"}, {"uid", "widget-uid"}}}};
  f.pod("w-0", owner);
  f.grouper.run("tessera");
  const Json pg = f.podGroup("pg-widget-w");
  CHECK(pg["spec"]["minMember"] == 1);
  CHECK(pg["metadata"]["annotations"]["tessera.dev/workload"] == "example.com/v1/Widget/w");
  CHECK(pg["metadata"]["ownerReferences"][0]["uid"] == "widget-uid");
}

TEST_CASE("overrides: grouping off, topology, a malformed min-member is ignored") {
  Fixture f;
  const Json off =
      f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "off", {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 2}}}}}},
                 {{"annotations", {{"tessera.dev/pod-grouping", "false"}}}});
  f.pod("off-0", off);
  const Json topo = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "topo",
                               {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 2}}}}}},
                               {{"annotations",
                                 {{"tessera.dev/topology", "dc"},
                                  {"tessera.dev/topology-required-level", "rack"},
                                  {"tessera.dev/min-member", "lots"}}}});
  f.pod("topo-0", topo);
  f.grouper.run("tessera");
  CHECK(f.groupOf("off-0").empty());
  const Json pg = f.podGroup("pg-pytorchjob-topo");
  CHECK(pg["spec"]["minMember"] == 2);
  CHECK(pg["spec"]["topologyConstraint"]["topology"] == "dc");
  CHECK(pg["spec"]["topologyConstraint"]["requiredTopologyLevel"] == "rack");
}

TEST_CASE("an existing PodGroup of the name is adopted; pods with a group or another scheduler are left alone") {
  Fixture f;
  const Json job = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "mine",
                              {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 8}}}}}});
  f.add(Kind::PodGroup, {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                         {"kind", "PodGroup"},
                         {"metadata", {{"name", "pg-pytorchjob-mine"}}},
                         {"spec", {{"minMember", 2}}}});
  f.pod("mine-0", job);
  Json other = f.pod("elsewhere", job);
  other["spec"]["schedulerName"] = "default-scheduler";
  REQUIRE(f.cluster.apply(Kind::Pod, other).ok());
  Json hand = f.pod("hand", job);
  hand["metadata"]["annotations"] = {{"pod-group-name", "handmade"}};
  REQUIRE(f.cluster.apply(Kind::Pod, hand).ok());
  const auto report = f.grouper.run("tessera");
  CHECK(report.podGroups.empty());
  CHECK(f.podGroup("pg-pytorchjob-mine")["spec"]["minMember"] == 2);
  CHECK(f.groupOf("mine-0") == "pg-pytorchjob-mine");
  CHECK(f.groupOf("elsewhere").empty());
  CHECK(f.groupOf("hand") == "handmade");
}

}  // namespace

TEST_CASE("a pod whose workload is not readable yet is retried, then grouped when it appears") {
  Fixture f;
  // The pod names a PyTorchJob that the API server does not hold yet (created after its pods).
  Json ghost = {{"apiVersion", "kubeflow.org/v1"},
                {"kind", "PyTorchJob"},
                {"metadata", {{"name", "late"}, {"uid", "uid-late"}}}};
  f.pod("late-worker-0", ghost, {{"training.kubeflow.org/replica-type", "worker"}});
  const auto first = f.grouper.run("tessera");
  CHECK(first.pods.empty());
  CHECK(first.retry == std::vector<std::string>{"default/late-worker-0"});
  CHECK(f.groupOf("late-worker-0").empty());

  f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "late", {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 2}}}}}});
  const auto second = f.grouper.run("tessera");
  CHECK(second.retry.empty());
  CHECK(second.pods.size() == 1);
  CHECK(f.groupOf("late-worker-0") == "pg-pytorchjob-late");
}

TEST_CASE("a pod retried kMaxAttempts times is given up until it changes") {
  Fixture f;
  Json ghost = {{"apiVersion", "kubeflow.org/v1"},
                {"kind", "PyTorchJob"},
                {"metadata", {{"name", "never"}, {"uid", "uid-never"}}}};
  f.pod("never-0", ghost);
  int retried = 0;
  for (int i = 0; i < Grouper::kMaxAttempts + 3; ++i) retried += f.grouper.run("tessera").retry.empty() ? 0 : 1;
  CHECK(retried == Grouper::kMaxAttempts - 1);
}

TEST_CASE("the cache's pods are grouped from their metadata alone") {
  Fixture f;
  const Json job = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "t2", {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 1}}}}}});
  tessera::api::Pod pod;
  pod.meta.name = "t2-worker-0";
  pod.meta.namespace_ = "default";
  pod.meta.uid = "uid-pod";
  pod.meta.labels = {{"training.kubeflow.org/replica-type", "worker"}};
  pod.meta.ownerReferences.push_back({"kubeflow.org/v1", "PyTorchJob", "t2", job["metadata"]["uid"], true});
  pod.schedulerName = "tessera";
  const Json asJson = tessera::grouper::podJson(pod);
  CHECK(asJson["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob");
  CHECK(asJson["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker");
  f.add(Kind::Pod, {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", asJson["metadata"]},
                    {"spec", {{"schedulerName", "tessera"}, {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}});
  const auto report = f.grouper.group(std::vector<std::shared_ptr<const tessera::api::Pod>>{
      std::make_shared<const tessera::api::Pod>(pod)});
  CHECK(report.pods.size() == 1);
  CHECK(f.groupOf("t2-worker-0") == "pg-pytorchjob-t2");
  CHECK(f.grouper.group(std::vector<tessera::cache::Json>{}).pods.empty());
}

TEST_CASE("default priority classes by workload kind and category (podGrouper.defaultPriorityClass)") {
  using tessera::grouper::workloadCategory;
  CHECK(workloadCategory("PyTorchJob") == "training");
  CHECK(workloadCategory("Job") == "training");
  CHECK(workloadCategory("RayCluster") == "training");
  CHECK(workloadCategory("Widget") == "training");
  CHECK(workloadCategory("Deployment") == "inference");
  CHECK(workloadCategory("ReplicaSet") == "inference");
  CHECK(workloadCategory("StatefulSet") == "inference");
  CHECK(workloadCategory("LeaderWorkerSet") == "inference");
  CHECK(workloadCategory("RayService") == "inference");
  CHECK(workloadCategory("Pod") == "inference");

  Fixture f;
  f.grouper.setDefaultPriorityClasses({{"training", "train"}, {"inference", "serve"}, {"JobSet", "sets"}});
  const Json plain = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "plain", {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 1}}}}}});
  const Json own = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "own",
                              {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 1}}}}},
                               {"runPolicy", {{"schedulingPolicy", {{"priorityClass", "urgent"}}}}}});
  const Json set = f.workload(Kind::JobSet, "jobset.x-k8s.io/v1alpha2", "s",
                              {{"replicatedJobs", Json::array({{{"name", "w"}, {"replicas", 1}, {"template", Json::object()}}})}});
  f.pod("plain-worker-0", plain, {{"training.kubeflow.org/replica-type", "worker"}});
  f.pod("own-worker-0", own, {{"training.kubeflow.org/replica-type", "worker"}});
  f.pod("s-w-0-0", set, {{"jobset.sigs.k8s.io/replicatedjob-name", "w"}});
  f.pod("bare", Json());  // a bare pod: inference; names no class -> a PodGroup of its own carries it
  Json mine = {{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"metadata", {{"name", "mine"}}},
               {"spec", {{"schedulerName", "tessera"}, {"priorityClassName", "low"},
                         {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  f.add(Kind::Pod, mine);
  f.grouper.run("tessera");
  CHECK(f.podGroup("pg-pytorchjob-plain")["spec"].value("priorityClassName", "") == "train");
  CHECK(f.podGroup("pg-pytorchjob-own")["spec"].value("priorityClassName", "") == "urgent");  // the workload's own
  CHECK(f.podGroup("pg-jobset-s")["spec"].value("priorityClassName", "") == "sets");  // the kind over its category
  CHECK(f.podGroup("pg-pod-bare")["spec"].value("priorityClassName", "") == "serve");
  CHECK(f.groupOf("mine").empty());  // names its own class: nothing to carry, no PodGroup
}

namespace {

/// Forwards to the in-memory cluster and counts the gets by kind.
class CountingClient final : public tessera::cache::ClusterClient {
 public:
  explicit CountingClient(MemoryCluster& c) : c_(c) {}
  std::map<Kind, int> gets;
  tessera::api::Result<tessera::cache::ListResult> list(Kind k, const tessera::cache::ListOptions& o) override {
    return c_.list(k, o);
  }
  tessera::api::Result<std::unique_ptr<tessera::cache::WatchHandle>> watch(Kind k, const std::string& rv,
                                                                          tessera::cache::WatchCallback cb) override {
    return c_.watch(k, rv, std::move(cb));
  }
  tessera::api::Result<Json> get(Kind k, const std::string& ns, const std::string& n) override {
    ++gets[k];
    return c_.get(k, ns, n);
  }
  tessera::api::Result<Json> create(Kind k, const Json& o) override { return c_.create(k, o); }
  tessera::api::Result<Json> update(Kind k, const Json& o) override { return c_.update(k, o); }
  tessera::api::Result<Json> updateStatus(Kind k, const Json& o) override { return c_.updateStatus(k, o); }
  tessera::api::Result<Json> patch(Kind k, const std::string& ns, const std::string& n, tessera::cache::PatchType t,
                                   const Json& p, bool status) override {
    return c_.patch(k, ns, n, t, p, status);
  }
  tessera::api::Status remove(Kind k, const std::string& ns, const std::string& n,
                              const tessera::cache::DeleteOptions& o) override {
    return c_.remove(k, ns, n, o);
  }
  tessera::api::Status bind(const std::string& ns, const std::string& n, const std::string& uid,
                            const std::string& node) override {
    return c_.bind(ns, n, uid, node);
  }

 private:
  MemoryCluster& c_;
};

}  // namespace

TEST_CASE("a pass reads each workload once, and reads it afresh the next pass") {
  Fixture f;
  CountingClient counting(f.cluster);
  Grouper grouper(counting);
  const Json job = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "big", {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 8}}}}}});
  for (int i = 0; i < 8; ++i) f.pod("big-worker-" + std::to_string(i), job, {{"training.kubeflow.org/replica-type", "worker"}});
  const auto report = grouper.run("tessera");
  CHECK(report.pods.size() == 8);
  CHECK(counting.gets[Kind::PyTorchJob] == 1);
  // A worker added later (elastic): the next pass reads the job again (its min-member may have changed).
  f.pod("big-worker-8", job, {{"training.kubeflow.org/replica-type", "worker"}});
  grouper.run("tessera");
  CHECK(counting.gets[Kind::PyTorchJob] == 2);
  CHECK(f.groupOf("big-worker-8") == "pg-pytorchjob-big");
}

TEST_CASE("a JobSet that starts its jobs in order is one gang per replicated job") {
  Fixture f;
  const Json set = f.workload(
      Kind::JobSet, "jobset.x-k8s.io/v1alpha2", "ordered",
      {{"startupPolicy", {{"startupPolicyOrder", "InOrder"}}},
       {"replicatedJobs", Json::array({{{"name", "driver"}, {"replicas", 1}},
                                       {{"name", "workers"}, {"replicas", 2}, {"template", {{"spec", {{"parallelism", 2}}}}}}})}});
  f.pod("ordered-driver-0-0", set, {{"jobset.sigs.k8s.io/replicatedjob-name", "driver"}});
  f.pod("ordered-workers-0-0", set, {{"jobset.sigs.k8s.io/replicatedjob-name", "workers"}});
  f.grouper.run("tessera");
  CHECK(f.groupOf("ordered-driver-0-0") == "pg-jobset-ordered-driver");
  CHECK(f.groupOf("ordered-workers-0-0") == "pg-jobset-ordered-workers");
  CHECK(f.podGroup("pg-jobset-ordered-driver")["spec"]["minMember"] == 1);
  const Json workers = f.podGroup("pg-jobset-ordered-workers");
  CHECK(workers["spec"]["minMember"] == 4);
  CHECK_FALSE(workers["spec"].contains("subGroups"));
  CHECK(f.subGroupOf("ordered-workers-0-0").empty());
}

TEST_CASE("a workload's node pool label goes on its PodGroup, so its pods are routed to that shard") {
  Fixture f;
  const Json job = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "pooled",
                              {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 2}}}}}},
                              {{"labels", {{"tessera.dev/node-pool", "a100"}}}});
  for (int i = 0; i < 2; ++i)
    f.pod("pooled-worker-" + std::to_string(i), job, {{"training.kubeflow.org/replica-type", "worker"}});
  REQUIRE(f.grouper.run("tessera").podGroups.size() == 1);
  CHECK(f.podGroup("pg-pytorchjob-pooled")["metadata"]["labels"]["tessera.dev/node-pool"] == "a100");

  // Without the label anywhere, the PodGroup has none.
  const Json plain = f.workload(Kind::PyTorchJob, "kubeflow.org/v1", "plain",
                                {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 1}}}}}});
  f.pod("plain-worker-0", plain, {{"training.kubeflow.org/replica-type", "worker"}});
  REQUIRE(f.grouper.run("tessera").podGroups.size() == 1);
  CHECK_FALSE(f.podGroup("pg-pytorchjob-plain")["metadata"]["labels"].contains("tessera.dev/node-pool"));
}

TEST_CASE("the cache's pods: those passed over before JSON are those planFor plans nothing for (random pods)") {
  // Two clusters alike; one grouped from the cache's pods (bare pods asking for nothing passed over
  // unread), the other from the same pods as JSON (each planned). PodGroups and pods must agree.
  using tessera::api::Pod;
  int passedOver = 0, grouped = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    auto coin = [&rng](int percent) { return static_cast<int>(rng() % 100) < percent; };
    Fixture a, b;
    const std::vector<tessera::grouper::DefaultPriorityClasses> defaultsChoice = {
        {}, {{"Pod", "pods"}}, {{"inference", "serve"}}, {{"training", "train"}}, {{"Deployment", "deploy"}}};
    const auto defaults = defaultsChoice[rng() % defaultsChoice.size()];
    a.grouper.setDefaultPriorityClasses(defaults);
    b.grouper.setDefaultPriorityClasses(defaults);
    for (const char* ns : {"n0", "n1", "n2"}) {  // n2 has no Namespace object
      if (std::string(ns) == "n2") continue;
      Json obj = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}};
      if (coin(50)) obj["metadata"]["labels"] = {{"tessera.dev/queue", coin(70) ? "team" : ""}};
      a.add(Kind::Namespace, obj);
      b.add(Kind::Namespace, obj);
    }
    Json jobObj = {{"apiVersion", "batch/v1"},
                   {"kind", "Job"},
                   {"metadata", {{"name", "j"}, {"namespace", "n0"}}},
                   {"spec", Json::object()}};
    if (coin(50)) jobObj["metadata"]["annotations"] = {{"tessera.dev/min-member", "2"}};
    const Json jobA = a.add(Kind::Job, jobObj);
    b.add(Kind::Job, jobObj);  // (its uid differs: PodGroups are compared by their specs)
    std::vector<std::shared_ptr<const Pod>> pods;
    std::vector<Json> asJson;
    for (int i = 0; i < 8; ++i) {
      Json p = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", "p" + std::to_string(i)}, {"namespace", "n" + std::to_string(rng() % 3)}}},
                {"spec", {{"schedulerName", "tessera"}, {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
      Json ann = Json::object(), labels = Json::object();
      if (coin(25)) ann["tessera.dev/topology"] = coin(80) ? "rack" : "";
      if (coin(10)) ann["tessera.dev/pod-grouping"] = "false";
      if (coin(10)) ann["pod-group-name"] = "given";
      if (coin(5)) labels["scheduling.x-k8s.io/pod-group"] = "given";
      if (coin(10)) labels["tessera.dev/queue"] = "own";
      if (!ann.empty()) p["metadata"]["annotations"] = ann;
      if (!labels.empty()) p["metadata"]["labels"] = labels;
      if (coin(40)) p["spec"]["priorityClassName"] = "mine";
      if (coin(20)) {
        p["metadata"]["namespace"] = "n0";
        p["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "batch/v1"},
                                                         {"kind", "Job"},
                                                         {"name", "j"},
                                                         {"uid", jobA["metadata"]["uid"]},
                                                         {"controller", true}}});
      }
      const Json created = a.add(Kind::Pod, p);
      b.add(Kind::Pod, p);
      auto pod = tessera::api::podFromJson(created);
      REQUIRE(pod.ok());
      if (tessera::grouper::isBarePod(*pod) &&
          !p["metadata"].value("annotations", Json::object()).contains("pod-group-name") &&
          !labels.contains("scheduling.x-k8s.io/pod-group")) {
        Json nsObj = a.cluster.get(Kind::Namespace, "", p["metadata"]["namespace"]).ok()
                         ? *a.cluster.get(Kind::Namespace, "", p["metadata"]["namespace"])
                         : Json();
        (tessera::grouper::barePodGetsGroup(*pod, nsObj, defaults) ? grouped : passedOver)++;
      }
      asJson.push_back(tessera::grouper::podJson(*pod));
      pods.push_back(std::make_shared<const Pod>(std::move(*pod)));
    }
    const auto ra = a.grouper.group(pods);
    const auto rb = b.grouper.group(asJson);
    INFO("seed " << seed);
    CHECK(ra.pods.size() == rb.pods.size());
    CHECK(ra.podGroups.size() == rb.podGroups.size());
    CHECK(ra.failures == rb.failures);
    auto groupsOf = [](Fixture& f) {
      std::vector<std::string> out;
      const auto groups = f.cluster.list(Kind::PodGroup).value();
      const auto podList = f.cluster.list(Kind::Pod).value();
      for (const Json& pg : groups.items)
        out.push_back(pg["metadata"]["namespace"].get<std::string>() + "/" + pg["metadata"]["name"].get<std::string>() +
                      " " + pg["spec"].dump());
      for (const Json& p : podList.items)
        out.push_back(p["metadata"]["name"].get<std::string>() + " " +
                      p["metadata"].value("annotations", Json::object()).dump() + " " +
                      p["metadata"].value("labels", Json::object()).dump());
      std::sort(out.begin(), out.end());
      return out;
    };
    CHECK(groupsOf(a) == groupsOf(b));
  }
  // Both sides of the rule were met.
  CHECK(passedOver > 100);
  CHECK(grouped > 100);
}
