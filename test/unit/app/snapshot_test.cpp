// Snapshots (tessera snapshot, /debug/snapshot): which objects a capture keeps and how it strips
// them, the anonymizer's consistent renames, the YAML writer read back by the scenario loader, and
// a capture through the ClusterClient seam (the embedded cluster) replayed by the scenario runner.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/convert.h"
#include "tessera/app/scenario.h"
#include "tessera/app/snapshot.h"
#include "tessera/cache/memory_cluster.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using tessera::app::anonymizeObjects;
using tessera::app::buildScenario;
using tessera::app::SnapshotOptions;

std::vector<json> objects(const std::string& yaml) {
  auto docs = tessera::api::yamlToJson(yaml);
  REQUIRE(docs.ok());
  std::vector<json> out;
  for (auto& d : *docs)
    if (!d.is_null()) out.push_back(std::move(d));
  return out;
}

/// Creates the objects of `yaml` in `cluster`, in order; fails the test when one is refused.
void createAll(tessera::cache::MemoryCluster& cluster, const std::string& yaml) {
  for (auto& o : objects(yaml)) {
    auto kind = tessera::api::kindOf(o);
    REQUIRE(kind.ok());
    REQUIRE(cluster.create(*kind, o).ok());
  }
}

/// The object of `kind` named `name` (in any namespace) in `objs`; fails the test when absent.
const json& find(const std::vector<json>& objs, const std::string& kind, const std::string& name) {
  for (const auto& o : objs)
    if (o.value("kind", "") == kind && o["metadata"].value("name", "") == name) return o;
  FAIL("no " << kind << " " << name);
  static json none;
  return none;
}

std::vector<std::string> names(const std::vector<json>& objs, const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& o : objs)
    if (o.value("kind", "") == kind) out.push_back(o["metadata"].value("name", ""));
  return out;
}

/// A small cluster that uses every kind of reference the anonymizer follows.
const char* const kCluster = R"(
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {kubernetes.io/metadata.name: team-a, tessera.dev/queue: research}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-prio}
value: 1000
description: "the research team's urgent jobs"
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: org}
spec: {resources: {gpu: {quota: "8"}}}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: research}
spec: {parentQueue: org, resources: {gpu: {quota: "4"}}}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: default}
spec: {resources: {gpu: {quota: "-1"}}}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Topology
metadata: {name: racks}
spec: {levels: [{nodeLabel: example.com/rack}, {nodeLabel: kubernetes.io/hostname}]}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-zeta, labels: {kubernetes.io/hostname: gpu-zeta, example.com/rack: r1}}
status: {allocatable: {cpu: "8", nvidia.com/gpu: "4"}, addresses: [{type: InternalIP, address: 10.0.0.9}]}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-alpha, labels: {kubernetes.io/hostname: gpu-alpha, example.com/rack: r1}}
status: {allocatable: {cpu: "8", nvidia.com/gpu: "4"}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: team-a, annotations: {tessera.dev/topology: racks}}
spec:
  parallelism: 2
  template:
    metadata: {labels: {app: trainer}}
    spec:
      containers: [{name: main, image: registry.example.com/secret/trainer:1, command: [python, train.py]}]
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata:
  name: pg-job-train
  namespace: team-a
  annotations: {tessera.dev/workload: batch/v1/Job/train}
  labels: {tessera.dev/pod-grouper: "true"}
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: train, uid: u-1, controller: true}]
spec:
  minMember: 2
  queue: research
  priorityClassName: high-prio
  topologyConstraint: {topology: racks, requiredTopologyLevel: example.com/rack}
---
apiVersion: v1
kind: Pod
metadata:
  name: train-0
  namespace: team-a
  labels: {app: trainer, tessera.dev/queue: research}
  annotations: {pod-group-name: pg-job-train, kubectl.kubernetes.io/last-applied-configuration: "{}", note: secret}
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: train, uid: u-1, controller: true}]
  uid: 4f1c
  resourceVersion: "17"
  managedFields: [{manager: kubectl}]
spec:
  schedulerName: tessera
  nodeName: gpu-zeta
  priorityClassName: high-prio
  containers:
    - name: main
      image: registry.example.com/secret/trainer:1
      env: [{name: TOKEN, value: hunter2}, {name: TESSERA_ISOLATION_REGION, value: /r}]
      resources: {requests: {nvidia.com/gpu: "2"}}
status: {phase: Running, startTime: "2026-01-01T00:00:00Z", podIP: 10.1.0.4, hostIP: 10.0.0.9}
---
apiVersion: v1
kind: Pod
metadata:
  name: train-1
  namespace: team-a
  labels: {app: trainer}
  annotations: {pod-group-name: pg-job-train}
spec:
  schedulerName: tessera
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [gpu-alpha]}]
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector:
            matchLabels: {app: trainer}
            matchExpressions: [{key: team, operator: In, values: [vision-secret]}]
          namespaces: [team-a]
          topologyKey: kubernetes.io/hostname
  containers: [{name: main, image: x, resources: {requests: {nvidia.com/gpu: "2"}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", message: "gang 1/2: node gpu-alpha is full"}]
)";

TEST_CASE("anonymize: every name is replaced, references stay consistent, order and amounts are kept") {
  const auto in = objects(kCluster);
  const auto out = anonymizeObjects(in);
  REQUIRE(out.size() == in.size());
  const std::string text = json(out).dump();
  for (const char* original : {"team-a",    "high-prio", "\"org\"",  "research", "racks",   "gpu-zeta",
                               "gpu-alpha", "\"train\"", "train-0",  "train-1",  "trainer", "registry.example.com",
                               "hunter2",   "TOKEN",     "10.0.0.9", "10.1.0.4", "secret",  "python",
                               "is full",   "vision"}) {
    INFO(original);
    CHECK(text.find(original) == std::string::npos);
  }

  // Kept: reserved names, label keys, topology levels, amounts, phases, the isolation wiring.
  CHECK(names(out, "Queue") == std::vector<std::string>{"queue-1", "queue-2", "default"});
  const json& pod0 = out[10];
  const json& pod1 = out[11];
  REQUIRE(pod0["kind"] == "Pod");
  CHECK(pod0["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2");
  CHECK(pod0["spec"]["containers"][0]["env"] == json::parse(R"([{"name":"TESSERA_ISOLATION_REGION","value":"/r"}])"));
  CHECK(pod0["status"]["phase"] == "Running");
  CHECK(find(out, "Topology", "topology-1")["spec"]["levels"][0]["nodeLabel"] == "example.com/rack");

  // Nodes are numbered in the order of the originals: gpu-alpha < gpu-zeta.
  const json& alpha = out[7];
  const json& zeta = out[6];
  CHECK(alpha["metadata"]["name"] == "node-1");
  CHECK(zeta["metadata"]["name"] == "node-2");
  CHECK(zeta["metadata"]["labels"]["kubernetes.io/hostname"] == "node-2");
  CHECK(zeta["metadata"]["labels"]["example.com/rack"] == "r1");
  CHECK(pod0["spec"]["nodeName"] == "node-2");
  CHECK(pod1["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["values"][0] == "node-1");

  // Namespace, queue, priority class, PodGroup, workload: each reference follows its object.
  const std::string ns = out[0]["metadata"]["name"];
  CHECK(ns == "ns-1");
  CHECK(out[0]["metadata"]["labels"]["kubernetes.io/metadata.name"] == ns);
  CHECK(out[0]["metadata"]["labels"]["tessera.dev/queue"] == "queue-2");
  CHECK(find(out, "Queue", "queue-2")["spec"]["parentQueue"] == "queue-1");  // research's parent, org
  CHECK(out[1]["metadata"]["name"] == "priority-1");
  CHECK_FALSE(out[1].contains("description"));
  const json& job = find(out, "Job", "wl-1");
  CHECK(job["metadata"]["namespace"] == ns);
  CHECK(job["metadata"]["annotations"]["tessera.dev/topology"] == "topology-1");
  CHECK(job["spec"]["template"]["spec"]["containers"][0]["image"] == "image");
  // The grouper's PodGroup keeps its generated shape with the workload's new name.
  const json& pg = find(out, "PodGroup", "pg-job-wl-1");
  CHECK(pg["metadata"]["annotations"]["tessera.dev/workload"] == "batch/v1/Job/wl-1");
  CHECK(pg["metadata"]["ownerReferences"][0]["name"] == "wl-1");
  CHECK(pg["spec"]["queue"] == "queue-2");
  CHECK(pg["spec"]["priorityClassName"] == "priority-1");
  CHECK(pg["spec"]["topologyConstraint"]["topology"] == "topology-1");
  CHECK(pg["spec"]["topologyConstraint"]["requiredTopologyLevel"] == "example.com/rack");
  for (const json* p : {&pod0, &pod1}) {
    CHECK((*p)["metadata"]["namespace"] == ns);
    CHECK((*p)["metadata"]["annotations"]["pod-group-name"] == "pg-job-wl-1");
    CHECK((*p)["metadata"]["labels"]["app"] == pod0["metadata"]["labels"]["app"]);  // one value, one rename
  }
  const json& anti = pod1["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
  CHECK(anti["labelSelector"]["matchLabels"]["app"] == pod0["metadata"]["labels"]["app"]);
  CHECK(anti["namespaces"][0] == ns);
  CHECK(anti["topologyKey"] == "kubernetes.io/hostname");
  CHECK(pod0["metadata"]["name"] == "pod-1");
  CHECK(pod1["metadata"]["name"] == "pod-2");
  CHECK(pod0["metadata"]["labels"]["tessera.dev/queue"] == "queue-2");
  CHECK(pod0["spec"]["priorityClassName"] == "priority-1");
  CHECK(pod0["metadata"]["annotations"].size() == 1);  // only what Tessera reads
  CHECK(pod1["status"]["conditions"][0]["type"] == "PodScheduled");

  SECTION("deterministic whatever the order of the input") {
    auto shuffled = in;
    std::mt19937 rng(7);
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    auto again = anonymizeObjects(shuffled);
    std::sort(again.begin(), again.end());
    auto sorted = out;
    std::sort(sorted.begin(), sorted.end());
    CHECK(again == sorted);
  }
}

TEST_CASE("snapshot: the pods of interest, stripped of server fields, in creation order; config and clock") {
  auto in = objects(kCluster);
  for (const auto& o : objects(R"(
apiVersion: v1
kind: Pod
metadata: {name: other-pending, namespace: elsewhere}
spec: {schedulerName: default-scheduler, containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: other-bound, namespace: kube-system, creationTimestamp: "2025-01-01T00:00:00Z"}
spec: {schedulerName: default-scheduler, nodeName: gpu-alpha, containers: [{name: c, image: x}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: other-done, namespace: elsewhere}
spec: {schedulerName: default-scheduler, nodeName: gpu-alpha, containers: [{name: c, image: x}]}
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata: {name: ours-done, namespace: team-a, creationTimestamp: "2025-06-01T00:00:00Z", uid: b}
spec: {schedulerName: tessera, nodeName: gpu-alpha, containers: [{name: c, image: x}]}
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata: {name: ours-tie, namespace: team-a, creationTimestamp: "2025-06-01T00:00:00Z", uid: a}
spec: {schedulerName: tessera, containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: elsewhere}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system}
---
apiVersion: v1
kind: Lease
metadata: {name: tessera, namespace: team-a}
)"))
    in.push_back(o);
  SnapshotOptions options;
  options.capturedAt = tessera::api::parseTime("2026-03-04T05:06:07Z").value();
  options.config = json::parse(R"({"actions": ["allocate"]})");
  options.source = "test";
  const json doc = buildScenario(in, options);
  CHECK(doc["clock"] == "2026-03-04T05:06:07Z");
  CHECK(doc["config"] == json::parse(R"({"actions": ["allocate"]})"));
  CHECK(doc["source"] == "test");
  CHECK(doc["steps"] == json::parse(R"([{"cycles": 1}])"));
  const std::vector<json> out = doc["objects"];
  // Foreign pods: only those holding a node's resources. Ours: all. Namespaces: those in use.
  // Ordered by creationTimestamp (train-* have none here), then UID: as the live cluster breaks ties.
  CHECK(names(out, "Pod") == std::vector<std::string>{"train-1", "train-0", "other-bound", "ours-tie", "ours-done"});
  CHECK(names(out, "Namespace") == std::vector<std::string>{"kube-system", "team-a"});
  CHECK(names(out, "Lease").empty());
  // Definitions first, pods last.
  CHECK(out.front()["kind"] == "Namespace");
  CHECK(out.back()["kind"] == "Pod");
  const json& train0 = find(out, "Pod", "train-0");
  for (const char* k : {"uid", "resourceVersion", "managedFields"}) CHECK_FALSE(train0["metadata"].contains(k));
  CHECK_FALSE(train0["metadata"]["annotations"].contains("kubectl.kubernetes.io/last-applied-configuration"));
  CHECK(train0["metadata"]["annotations"]["note"] == "secret");  // not anonymized: kept
  CHECK(train0["status"] == json::parse(R"({"phase": "Running", "startTime": "2026-01-01T00:00:00Z"})"));
  CHECK_FALSE(find(out, "Node", "gpu-zeta")["status"].contains("addresses"));

  SECTION("another scheduler name: its pods, and the name in the config") {
    options.schedulerName = "other";
    options.config = json();
    const json d = buildScenario(in, options);
    CHECK(d["config"] == json::parse(R"({"schedulerName": "other"})"));
    CHECK(names(d["objects"], "Pod") == std::vector<std::string>{"train-0", "other-bound"});
  }
  SECTION("anonymized: no source, and no original name") {
    options.anonymize = true;
    const json d = buildScenario(in, options);
    CHECK_FALSE(d.contains("source"));
    CHECK(d.dump().find("team-a") == std::string::npos);
    CHECK(d.dump().find("kube-system") != std::string::npos);  // reserved
  }
}

TEST_CASE("snapshot: YAML the scenario loader reads back as the same document") {
  const json doc = json::parse(R"({
    "name": "snapshot", "clock": "2026-01-01T00:00:00Z", "objects": [
      {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "annotations": {"gpu-fraction": "0.5",
        "x": "line1\nline2 \"quoted\" \\ : # [] {}", "y": "", "true": "yes", "no": "null", "1": "007"}},
       "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}], "args": [], "env": [{}]}],
                "tolerations": [], "priority": -5, "weight": 0.5, "flag": true, "nothing": null,
                "nested": [[1, 2], [], [{"a": {}}]]}}],
    "steps": [{"cycles": 1}]})");
  const std::string yaml = tessera::app::toYaml(doc);
  INFO(yaml);
  auto back = tessera::api::yamlToJson(yaml);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 1);
  CHECK(back->front() == doc);
  CHECK(yaml.rfind("name: \"snapshot\"\n", 0) == 0);  // the scenario's keys in their usual order
}

TEST_CASE(
    "snapshot: captured through the ClusterClient seam, the file replays; a workload of a pending pod comes along") {
  tessera::api::FakeClock clock(tessera::api::parseTime("2026-01-01T00:00:00Z").value());
  tessera::cache::MemoryCluster cluster(clock);
  for (auto& o : objects(kCluster)) {
    auto kind = tessera::api::kindOf(o);
    REQUIRE(kind.ok());
    if (o["metadata"].contains("uid")) o["metadata"].erase("uid");
    REQUIRE(cluster.create(*kind, o).ok());
  }
  // A pending pod of a second Job, with no PodGroup: the grouper would read its Job.
  createAll(cluster, R"(
apiVersion: batch/v1
kind: Job
metadata: {name: solo, namespace: team-a}
spec: {template: {spec: {containers: [{name: c, image: x}]}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: solo-0
  namespace: team-a
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: solo, uid: u-2, controller: true}]
spec: {schedulerName: tessera, containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
)");
  // A Volcano PodGroup and its pod: captured, and renamed together.
  createAll(cluster, R"(
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: vc, namespace: team-a}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: vc-0, namespace: team-a, annotations: {scheduling.k8s.io/group-name: vc}}
spec: {schedulerName: tessera, containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
)");
  SnapshotOptions options;
  options.capturedAt = clock.now();
  auto doc = tessera::app::captureScenario(cluster, options);
  REQUIRE(doc.ok());
  const std::vector<json> out = (*doc)["objects"];
  auto volcano = [](const std::vector<json>& objs) {
    std::vector<std::string> found;
    for (const auto& o : objs)
      if (o.value("apiVersion", "") == "scheduling.volcano.sh/v1beta1") found.push_back(o["metadata"].value("name", ""));
    return found;
  };
  CHECK(volcano(out) == std::vector<std::string>{"vc"});
  {
    options.anonymize = true;
    auto anon = tessera::app::captureScenario(cluster, options);
    options.anonymize = false;
    REQUIRE(anon.ok());
    const std::vector<json> objs = (*anon)["objects"];
    REQUIRE(volcano(objs).size() == 1);
    CHECK(volcano(objs)[0] != "vc");
    bool pointed = false;
    for (const auto& o : objs)
      if (o.value("kind", "") == "Pod" && o["metadata"].value("annotations", json::object()).value(
                                              "scheduling.k8s.io/group-name", "") == volcano(objs)[0])
        pointed = true;
    CHECK(pointed);  // the pod names the PodGroup's new name
  }
  CHECK(names(out, "Job") == std::vector<std::string>{"solo"});                    // train's pods are grouped already
  CHECK(names(out, "Node") == std::vector<std::string>{"gpu-zeta", "gpu-alpha"});  // creation order

  std::string dir = (fs::temp_directory_path() / "tessera-snapshot-test-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  for (bool anonymize : {false, true}) {
    options.anonymize = anonymize;
    auto captured = tessera::app::captureScenario(cluster, options);
    REQUIRE(captured.ok());
    const fs::path file = fs::path(dir) / (anonymize ? "anonymized.yaml" : "plain.yaml");
    std::ofstream(file) << tessera::app::toYaml(*captured);
    auto outcome = tessera::app::runScenarioFile(file.string());
    INFO(tessera::app::toYaml(*captured));
    for (const auto& f : outcome.failures) INFO(f);
    CHECK(outcome.passed());
  }
  fs::remove_all(dir);
}

TEST_CASE("snapshot: objects as a real API server lists them load in the replay") {
  // Abridged from `kubectl get -o json` on a kind cluster: everything the server adds.
  const auto in = objects(R"yaml(
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  uid: 0b5e
  resourceVersion: "12"
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels: {kubernetes.io/metadata.name: team-a}
  managedFields: [{manager: kubectl-create, operation: Update, apiVersion: v1, time: "2026-01-01T00:00:00Z",
                   fieldsType: FieldsV1, fieldsV1: {"f:metadata": {}}}]
spec: {finalizers: [kubernetes]}
status: {phase: Active}
---
apiVersion: v1
kind: Node
metadata:
  name: kind-worker
  uid: 9c1d
  resourceVersion: "733"
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels: {kubernetes.io/arch: amd64, kubernetes.io/hostname: kind-worker, kubernetes.io/os: linux}
  annotations: {node.alpha.kubernetes.io/ttl: "0", volumes.kubernetes.io/controller-managed-attach-detach: "true"}
spec: {podCIDR: 10.244.1.0/24, podCIDRs: [10.244.1.0/24], providerID: "kind://docker/kind/kind-worker"}
status:
  addresses: [{address: 172.18.0.3, type: InternalIP}, {address: kind-worker, type: Hostname}]
  allocatable: {cpu: "8", ephemeral-storage: 100Gi, hugepages-1Gi: "0", hugepages-2Mi: "0", memory: 32Gi, pods: "110"}
  capacity: {cpu: "8", ephemeral-storage: 100Gi, hugepages-1Gi: "0", hugepages-2Mi: "0", memory: 32Gi, pods: "110"}
  conditions:
    - {lastHeartbeatTime: "2026-01-01T00:10:00Z", lastTransitionTime: "2026-01-01T00:00:00Z",
       message: kubelet has sufficient memory available, reason: KubeletHasSufficientMemory, status: "False",
       type: MemoryPressure}
    - {lastHeartbeatTime: "2026-01-01T00:10:00Z", lastTransitionTime: "2026-01-01T00:00:10Z",
       message: kubelet is posting ready status, reason: KubeletReady, status: "True", type: Ready}
  daemonEndpoints: {kubeletEndpoint: {Port: 10250}}
  images: [{names: ["docker.io/library/nginx@sha256:abc", "docker.io/library/nginx:1.25"], sizeBytes: 70000000}]
  nodeInfo: {architecture: amd64, containerRuntimeVersion: "containerd://1.7.1", kubeletVersion: v1.29.2}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-7d4b9c-x2x9q
  generateName: web-7d4b9c-
  namespace: team-a
  uid: 5a7e
  resourceVersion: "901"
  creationTimestamp: "2026-01-01T00:05:00Z"
  labels: {app: web, pod-template-hash: 7d4b9c}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7d4b9c, uid: 77aa, controller: true,
                     blockOwnerDeletion: true}]
spec:
  schedulerName: tessera
  nodeName: kind-worker
  containers:
    - name: nginx
      image: nginx:1.25
      imagePullPolicy: IfNotPresent
      ports: [{containerPort: 80, protocol: TCP}]
      resources: {requests: {cpu: 250m, memory: 64Mi}, limits: {memory: 128Mi}}
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
      volumeMounts: [{mountPath: /var/run/secrets/kubernetes.io/serviceaccount, name: kube-api-access-x, readOnly: true}]
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  preemptionPolicy: PreemptLowerPriority
  priority: 0
  restartPolicy: Always
  securityContext: {}
  serviceAccount: default
  serviceAccountName: default
  terminationGracePeriodSeconds: 30
  tolerations:
    - {effect: NoExecute, key: node.kubernetes.io/not-ready, operator: Exists, tolerationSeconds: 300}
    - {effect: NoExecute, key: node.kubernetes.io/unreachable, operator: Exists, tolerationSeconds: 300}
  volumes:
    - name: kube-api-access-x
      projected:
        defaultMode: 420
        sources: [{serviceAccountToken: {expirationSeconds: 3607, path: token}}]
status:
  conditions:
    - {lastProbeTime: null, lastTransitionTime: "2026-01-01T00:05:01Z", status: "True", type: PodScheduled}
    - {lastProbeTime: null, lastTransitionTime: "2026-01-01T00:05:03Z", status: "True", type: Ready}
  containerStatuses:
    - {containerID: "containerd://abc", image: "docker.io/library/nginx:1.25", imageID: "sha256:abc", name: nginx,
       ready: true, restartCount: 0, started: true, state: {running: {startedAt: "2026-01-01T00:05:02Z"}}}
  hostIP: 172.18.0.3
  hostIPs: [{ip: 172.18.0.3}]
  phase: Running
  podIP: 10.244.1.5
  podIPs: [{ip: 10.244.1.5}]
  qosClass: Burstable
  startTime: "2026-01-01T00:05:01Z"
---
apiVersion: v1
kind: Pod
metadata:
  name: pending-one
  namespace: team-a
  uid: 5a7f
  resourceVersion: "902"
  creationTimestamp: "2026-01-01T00:06:00Z"
spec:
  schedulerName: tessera
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "100"}}}]
status:
  phase: Pending
  conditions: [{lastProbeTime: null, lastTransitionTime: "2026-01-01T00:06:01Z", status: "False", type: PodScheduled,
                reason: Unschedulable, message: "insufficient cpu (1 node)"}]
  qosClass: Burstable
)yaml");
  SnapshotOptions options;
  options.capturedAt = tessera::api::parseTime("2026-01-01T00:10:00Z").value();
  std::string dir = (fs::temp_directory_path() / "tessera-snapshot-real-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  for (bool anonymize : {false, true}) {
    options.anonymize = anonymize;
    const json doc = buildScenario(in, options);
    const std::string yaml = tessera::app::toYaml(doc);
    INFO(yaml);
    CHECK(yaml.find("172.18.0.3") == std::string::npos);
    CHECK(yaml.find("managedFields") == std::string::npos);
    CHECK(yaml.find("containerStatuses") == std::string::npos);
    // The bound pod's requests stay on the node: 100 CPUs do not fit the 7.75 left.
    json steps = json::parse(R"([{"cycles": 1}, {"expect": {"pending": []}}])");
    const std::string pending = anonymize ? "ns-1/pod-1" : "team-a/pending-one";
    steps[1]["expect"]["pending"].push_back(pending);
    json replay = doc;
    replay["steps"] = steps;
    const fs::path file = fs::path(dir) / (anonymize ? "anonymized.yaml" : "plain.yaml");
    std::ofstream(file) << tessera::app::toYaml(replay);
    auto outcome = tessera::app::runScenarioFile(file.string());
    for (const auto& f : outcome.failures) INFO(f);
    CHECK(outcome.passed());
    CHECK(outcome.expectationsChecked == 1);
  }
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("snapshot: a sharded daemon's capture carries the SchedulingShards its config names, and replays") {
  tessera::api::FakeClock clock(tessera::api::parseTime("2026-01-01T00:00:00Z").value());
  tessera::cache::MemoryCluster cluster(clock);
  createAll(cluster, R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: SchedulingShard
metadata: {name: gpu}
spec: {nodePool: a100}
status: {nodes: 1, leader: tessera-0}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: SchedulingShard
metadata: {name: default}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: default}
spec: {resources: {gpu: {quota: "-1", limit: "-1", overQuotaWeight: "1"}}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {tessera.dev/node-pool: a100}}
status: {allocatable: {cpu: "8", memory: 8Gi, pods: "110", nvidia.com/gpu: "1"}, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {tessera.dev/node-pool: a100}}
spec: {schedulerName: tessera, containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
)");
  SnapshotOptions options;
  options.capturedAt = clock.now();
  options.config = json::parse(R"({"shard": "gpu"})");
  auto doc = tessera::app::captureScenario(cluster, options);
  REQUIRE(doc.ok());
  const std::vector<json> out = (*doc)["objects"];
  CHECK(names(out, "SchedulingShard") == std::vector<std::string>{"gpu", "default"});
  for (const auto& o : out)
    if (o.value("kind", "") == "SchedulingShard") CHECK_FALSE(o.contains("status"));
  std::string dir = (fs::temp_directory_path() / "tessera-snapshot-shard-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  const fs::path file = fs::path(dir) / "sharded.yaml";
  (*doc)["steps"].push_back(json::parse(R"({"expect": {"bound": {"default/p": "n1"}}})"));
  std::ofstream(file) << tessera::app::toYaml(*doc);
  auto outcome = tessera::app::runScenarioFile(file.string());
  for (const auto& f : outcome.failures) UNSCOPED_INFO(f);
  CHECK(outcome.passed());
  fs::remove_all(dir);

  // Unsharded, no SchedulingShard is captured.
  options.config = json();
  auto plain = tessera::app::captureScenario(cluster, options);
  REQUIRE(plain.ok());
  CHECK(names((*plain)["objects"], "SchedulingShard").empty());
}
