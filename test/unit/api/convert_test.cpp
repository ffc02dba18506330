#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"

using namespace tessera::api;
using nlohmann::json;

namespace {

json yaml(const std::string& text) {
  auto r = yamlToJson(text);
  INFO(text << (r.ok() ? "" : ": " + r.error().message));
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  return r->front();
}

/// A pod manifest whose spec is the given YAML (indented under spec:).
json pod(const std::string& spec) {
  return yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: big-0, namespace: team-a}\nspec:\n" + spec);
}

Pod okPod(const json& j) {
  auto r = podFromJson(j);
  INFO(j.dump() << (r.ok() ? "" : "\n-> " + r.error().message));
  REQUIRE(r.ok());
  return *r;
}

/// The error message of a failed conversion (fails the test when it succeeds).
template <class R>
std::string errorOf(const R& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("convert: metadata", "[convert]") {
  json j = yaml(R"(
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: ns
  generateName: p-
  uid: u-1
  resourceVersion: "42"
  labels: {app: x, tessera.dev/queue: q}
  annotations: {pod-group-name: g}
  creationTimestamp: "2025-12-31T00:00:00Z"
  deletionTimestamp: "2026-01-01T00:00:20Z"
  deletionGracePeriodSeconds: 30
  ownerReferences:
    - {apiVersion: batch/v1, kind: Job, name: j, uid: u-0, controller: true}
)");
  Pod p = okPod(j);
  CHECK(p.meta.name == "p");
  CHECK(p.meta.namespace_ == "ns");
  CHECK(p.meta.key() == "ns/p");
  CHECK(p.meta.generateName == "p-");
  CHECK(p.meta.uid == "u-1");
  CHECK(p.meta.resourceVersion == "42");
  CHECK(*p.meta.label("tessera.dev/queue") == "q");
  CHECK(*p.meta.annotation("pod-group-name") == "g");
  CHECK(p.meta.creationTimestamp == parseTime("2025-12-31T00:00:00Z").value());
  REQUIRE(p.meta.deletionTimestamp);
  CHECK(*p.meta.deletionTimestamp == parseTime("2026-01-01T00:00:20Z").value());
  CHECK(p.meta.deletionGracePeriodSeconds == 30);
  REQUIRE(p.meta.ownerReferences.size() == 1);
  CHECK(p.meta.ownerReferences[0].kind == "Job");
  CHECK(p.meta.ownerReferences[0].controller);
  CHECK(p.terminating());

  Pod bare = okPod(yaml("kind: Pod\nmetadata: {name: b}"));
  CHECK(bare.meta.creationTimestamp == Time{0});
  CHECK_FALSE(bare.meta.deletionTimestamp);
  CHECK(bare.phase == PodPhase::Pending);
  CHECK(bare.requests.isZero());
}

TEST_CASE("convert: pod requests follow kube-scheduler", "[convert]") {
  SECTION("containers are summed") {
    Pod p = okPod(pod(R"(
  containers:
    - name: a
      resources: {requests: {cpu: 500m, memory: 1Gi}}
    - name: b
      resources: {requests: {cpu: "1.5", memory: 512Mi, nvidia.com/gpu: "2"}, limits: {nvidia.com/gpu: "2"}}
)"));
    CHECK(p.requests.milliCpu == 2000);
    CHECK(p.requests.memory == (1LL << 30) + (512LL << 20));
    CHECK(p.requests.milliGpu == 2000);
  }
  SECTION("init containers: max of the sum and the largest init container, plus overhead") {
    Pod p = okPod(pod(R"(
  initContainers:
    - name: big-init
      resources: {requests: {cpu: "4", memory: 1Gi}}
    - name: small-init
      resources: {requests: {cpu: "1", memory: 8Gi}}
  containers:
    - name: a
      resources: {requests: {cpu: "1", memory: 2Gi}}
    - name: b
      resources: {requests: {cpu: "1", memory: 2Gi}}
  overhead: {cpu: 250m, memory: 64Mi}
)"));
    CHECK(p.requests.milliCpu == 4000 + 250);                     // init 4 > sum 2
    CHECK(p.requests.memory == (8LL << 30) + (64LL << 20));       // init 8Gi > sum 4Gi
  }
  SECTION("sidecar init containers add to the sum") {
    Pod p = okPod(pod(R"(
  initContainers:
    - name: sidecar
      restartPolicy: Always
      resources: {requests: {cpu: "1"}}
    - name: init
      resources: {requests: {cpu: "2"}}
  containers:
    - name: a
      resources: {requests: {cpu: "1"}}
)"));
    CHECK(p.requests.milliCpu == 3000);  // max(1 + 1, 2 + 1)
  }
  SECTION("a missing request defaults to the limit, per resource") {
    Pod p = okPod(pod(R"(
  containers:
    - name: a
      resources:
        requests: {cpu: "1"}
        limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: 1, example.com/fpga: "1"}
)"));
    CHECK(p.requests.milliCpu == 1000);  // request given: kept
    CHECK(p.requests.memory == 4LL << 30);
    CHECK(p.requests.milliGpu == 1000);
    CHECK(p.requests.get("example.com/fpga") == 1);
  }
  SECTION("numbers are quantities too") {
    Pod p = okPod(pod(R"(
  containers:
    - name: a
      resources: {requests: {cpu: 0.5, memory: 1000, ephemeral-storage: 1.5}}
)"));
    CHECK(p.requests.milliCpu == 500);
    CHECK(p.requests.memory == 1000);
    CHECK(p.requests.get("ephemeral-storage") == 2);  // base units rounded up
  }
  SECTION("pods in a request list are not a resource") {
    Pod p = okPod(pod("  containers: [{name: a, resources: {requests: {pods: \"1\", cpu: \"1\"}}}]\n"));
    CHECK(p.requests.milliCpu == 1000);
    CHECK(p.requests.scalars.empty());
  }
}

TEST_CASE("convert: bad pod resources are errors naming object and field", "[convert]") {
  CHECK(errorOf(podFromJson(pod("  containers: [{name: a, resources: {requests: {cpu: abc}}}]\n"))) ==
        "Pod team-a/big-0: spec.containers[0].resources.requests.cpu: invalid quantity \"abc\"");
  std::string frac = errorOf(podFromJson(pod(
      "  containers: [{name: a, resources: {requests: {nvidia.com/gpu: \"0.5\"}, limits: {nvidia.com/gpu: \"0.5\"}}}]\n")));
  CHECK_THAT(frac, Catch::StartsWith("Pod team-a/big-0: spec.containers[0].resources.limits.nvidia.com/gpu: "));
  CHECK_THAT(frac, Catch::Contains("whole number"));
  CHECK_THAT(frac, Catch::Contains("gpu-fraction"));
  CHECK_THAT(errorOf(podFromJson(pod("  containers: [{name: a, resources: {requests: {example.com/fpga: 1.5}}}]\n"))),
             Catch::StartsWith("Pod team-a/big-0: spec.containers[0].resources.requests.example.com/fpga: "));
  std::string neq = errorOf(podFromJson(pod(
      "  containers:\n    - {name: a}\n    - {name: b, resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}}\n")));
  CHECK_THAT(neq, Catch::StartsWith("Pod team-a/big-0: spec.containers[1].resources.requests.nvidia.com/gpu: "));
  CHECK_THAT(neq, Catch::Contains("must equal its limit"));
  CHECK_THAT(errorOf(podFromJson(pod("  containers: [{name: a, resources: {requests: {memory: \"-1Gi\"}}}]\n"))),
             Catch::Contains("spec.containers[0].resources.requests.memory: negative quantity \"-1Gi\""));
  CHECK_THAT(errorOf(podFromJson(pod("  initContainers: [{name: a, resources: {limits: {cpu: \"1 \"}}}]\n"))),
             Catch::StartsWith("Pod team-a/big-0: spec.initContainers[0].resources.limits.cpu: invalid quantity"));
  CHECK_THAT(errorOf(podFromJson(pod("  overhead: {cpu: lots}\n"))),
             Catch::StartsWith("Pod team-a/big-0: spec.overhead.cpu: invalid quantity"));
  CHECK_THAT(errorOf(podFromJson(pod("  containers: [{name: a, resources: {requests: {cpu: true}}}]\n"))),
             Catch::Contains("spec.containers[0].resources.requests.cpu: expected a quantity"));
  CHECK_THAT(errorOf(podFromJson(pod("  containers: {name: a}\n"))),
             Catch::Contains("spec.containers: expected a list, got object"));
  // Non-extended resources may be fractional and differ between request and limit.
  Pod p = okPod(pod("  containers: [{name: a, resources: {requests: {cpu: 100m}, limits: {cpu: \"2\"}}}]\n"));
  CHECK(p.requests.milliCpu == 100);
}

TEST_CASE("convert: pod scheduling fields", "[convert]") {
  Pod p = okPod(yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  schedulerName: tessera
  nodeName: n1
  priorityClassName: train
  priority: 50
  terminationGracePeriodSeconds: 30
  nodeSelector: {pool: training}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: pool, operator: In, values: [a, b]}
              - {key: gone, operator: DoesNotExist}
          - matchFields:
              - {key: metadata.name, operator: NotIn, values: [n2]}
            matchExpressions:
              - {key: cores, operator: Gt, values: ["8"]}
  tolerations:
    - {key: dedicated, operator: Equal, value: inference, effect: NoSchedule}
    - {operator: Exists}
    - {key: k, value: v, effect: NoExecute, tolerationSeconds: 60}
  containers:
    - name: a
      ports:
        - {containerPort: 80}
        - {containerPort: 8080, hostPort: 8080}
        - {containerPort: 53, hostPort: 53, protocol: UDP, hostIP: 10.0.0.1}
status:
  phase: Running
  startTime: "2025-12-31T00:00:00Z"
  conditions: [{type: PodScheduled, status: "True"}]
)"));
  CHECK(p.schedulerName == "tessera");
  CHECK(p.nodeName == "n1");
  CHECK(p.priorityClassName == "train");
  CHECK(p.priority == 50);
  CHECK(p.terminationGracePeriodSeconds == 30);
  CHECK(p.nodeSelector.at("pool") == "training");
  REQUIRE(p.requiredNodeAffinity.size() == 2);
  REQUIRE(p.requiredNodeAffinity[0].matchExpressions.size() == 2);
  CHECK(p.requiredNodeAffinity[0].matchExpressions[0].op == SelectorOperator::In);
  CHECK(p.requiredNodeAffinity[0].matchExpressions[0].values == std::vector<std::string>{"a", "b"});
  CHECK(p.requiredNodeAffinity[0].matchExpressions[1].op == SelectorOperator::DoesNotExist);
  REQUIRE(p.requiredNodeAffinity[1].matchFields.size() == 1);
  CHECK(p.requiredNodeAffinity[1].matchFields[0].op == SelectorOperator::NotIn);
  CHECK(p.requiredNodeAffinity[1].matchExpressions[0].op == SelectorOperator::Gt);
  REQUIRE(p.tolerations.size() == 3);
  CHECK(p.tolerations[0].op == TolerationOperator::Equal);
  CHECK(p.tolerations[0].effect == TaintEffect::NoSchedule);
  CHECK(p.tolerations[1].op == TolerationOperator::Exists);
  CHECK(p.tolerations[1].key.empty());
  CHECK_FALSE(p.tolerations[1].effect.has_value());
  CHECK(p.tolerations[2].op == TolerationOperator::Equal);  // default
  CHECK(p.tolerations[2].tolerationSeconds == 60);
  REQUIRE(p.hostPorts.size() == 2);
  CHECK(p.hostPorts[0].port == 8080);
  CHECK(p.hostPorts[0].protocol == "TCP");
  CHECK(p.hostPorts[1].protocol == "UDP");
  CHECK(p.hostPorts[1].hostIP == "10.0.0.1");
  CHECK(p.phase == PodPhase::Running);
  CHECK(p.startTime == parseTime("2025-12-31T00:00:00Z").value());
  REQUIRE(p.conditions.size() == 1);
  CHECK(p.conditions[0].type == "PodScheduled");

  CHECK(okPod(pod("  containers: []\n")).phase == PodPhase::Pending);
}

TEST_CASE("convert: bad pod fields name object and field", "[convert]") {
  CHECK(errorOf(podFromJson(pod("  tolerations: [{key: a, operator: Maybe}]\n"))) ==
        "Pod team-a/big-0: spec.tolerations[0].operator: unknown operator \"Maybe\" (want Equal or Exists)");
  CHECK_THAT(errorOf(podFromJson(pod("  tolerations: [{key: a, effect: NoRun}]\n"))),
             Catch::StartsWith("Pod team-a/big-0: spec.tolerations[0].effect: unknown effect \"NoRun\""));
  CHECK_THAT(errorOf(podFromJson(pod(R"(  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Near}]}]
)"))),
             Catch::StartsWith("Pod team-a/big-0: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                               "Execution.nodeSelectorTerms[0].matchExpressions[0].operator: unknown operator \"Near\""));
  CHECK_THAT(errorOf(podFromJson(pod("  priority: high\n"))),
             Catch::StartsWith("Pod team-a/big-0: spec.priority: expected an integer, got string"));
  CHECK_THAT(errorOf(podFromJson(pod("  priority: 1.5\n"))), Catch::Contains("spec.priority: expected an integer"));
  CHECK_THAT(errorOf(podFromJson(pod("  priority: 3000000000\n"))), Catch::Contains("spec.priority: value 3000000000 out of range"));
  CHECK_THAT(errorOf(podFromJson(pod("  nodeSelector: {gpu: 1}\n"))),
             Catch::StartsWith("Pod team-a/big-0: spec.nodeSelector[\"gpu\"]: expected a string, got integer"));
  CHECK_THAT(errorOf(podFromJson(yaml("kind: Pod\nmetadata: {name: x, labels: {n: 3}}"))),
             Catch::StartsWith("Pod x: metadata.labels[\"n\"]: expected a string"));
  CHECK_THAT(errorOf(podFromJson(yaml("kind: Pod\nmetadata: {name: x, annotations: {gpu-fraction: 0.5}}"))),
             Catch::StartsWith("Pod x: metadata.annotations[\"gpu-fraction\"]: expected a string, got number"));
  CHECK_THAT(errorOf(podFromJson(yaml("kind: Pod\nmetadata: {name: x, creationTimestamp: yesterday}"))),
             Catch::StartsWith("Pod x: metadata.creationTimestamp: invalid time \"yesterday\""));
  CHECK_THAT(errorOf(podFromJson(yaml("kind: Pod\nmetadata: {name: x}\nstatus: {phase: Sleeping}"))),
             Catch::StartsWith("Pod x: status.phase: unknown phase \"Sleeping\""));
  CHECK_THAT(errorOf(podFromJson(yaml("kind: Node\nmetadata: {name: x}"))), Catch::StartsWith("Node x: kind: expected Pod"));
  CHECK_THAT(errorOf(podFromJson(json::array())), Catch::StartsWith("Pod <unnamed>: "));
  CHECK_THAT(errorOf(podFromJson(yaml("metadata: {namespace: ns}\nspec: {priority: x}"))),
             Catch::StartsWith("Pod ns/<unnamed>: spec.priority"));
  CHECK_THAT(errorOf(podFromJson(yaml("kind: Pod\nmetadata: 5"))), Catch::Contains("metadata: expected an object"));
}

TEST_CASE("convert: node", "[convert]") {
  auto r = nodeFromJson(yaml(R"(
apiVersion: v1
kind: Node
metadata: {name: gpu-1, labels: {nvidia.com/gpu.memory: "81920"}}
spec:
  unschedulable: true
  taints: [{key: dedicated, value: inference, effect: NoSchedule}]
status:
  capacity: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
  allocatable: {cpu: 63500m, memory: 500Gi, pods: 50, nvidia.com/gpu: "8", example.com/fpga: 2}
  conditions: [{type: MemoryPressure, status: "False"}, {type: Ready, status: "True"}]
)"));
  REQUIRE(r.ok());
  const Node& n = *r;
  CHECK(n.unschedulable);
  REQUIRE(n.taints.size() == 1);
  CHECK(n.taints[0].effect == TaintEffect::NoSchedule);
  CHECK(n.capacity.milliCpu == 64000);
  CHECK(n.allocatable.milliCpu == 63500);
  CHECK(n.allocatable.memory == 500LL << 30);
  CHECK(n.allocatable.milliGpu == 8000);
  CHECK(n.allocatable.get("example.com/fpga") == 2);
  CHECK(n.allocatablePods == 50);
  CHECK(n.ready);

  auto fallback = nodeFromJson(yaml("kind: Node\nmetadata: {name: n}\nstatus: {capacity: {cpu: \"2\", pods: 20}}"));
  REQUIRE(fallback.ok());
  CHECK(fallback->allocatable.milliCpu == 2000);
  CHECK(fallback->allocatablePods == 20);
  CHECK_FALSE(fallback->ready);

  auto noPods = nodeFromJson(yaml("kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: \"2\"}, conditions: [{type: Ready, status: \"False\"}]}"));
  REQUIRE(noPods.ok());
  CHECK(noPods->allocatablePods == 110);
  CHECK_FALSE(noPods->ready);

  CHECK(errorOf(nodeFromJson(yaml("kind: Node\nmetadata: {name: n}\nspec: {taints: [{key: a}]}"))) ==
        "Node n: spec.taints[0].effect: required");
  CHECK_THAT(errorOf(nodeFromJson(yaml("kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {memory: 1GB}}"))),
             Catch::StartsWith("Node n: status.allocatable.memory: invalid quantity \"1GB\""));
  CHECK_THAT(errorOf(nodeFromJson(yaml("kind: Node\nmetadata: {name: n}\nspec: {unschedulable: \"yes\"}"))),
             Catch::StartsWith("Node n: spec.unschedulable: expected a boolean"));
}

TEST_CASE("convert: podgroup", "[convert]") {
  auto r = podGroupFromJson(yaml(R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: a, namespace: team-a}
spec:
  minMember: 3
  queue: team-a
  priorityClassName: train
  preemptibility: non-preemptible
  topologyConstraint: {topology: dc, requiredTopologyLevel: rack, preferredTopologyLevel: host}
  subGroups:
    - {name: workers, minMember: 2, topologyConstraint: {topology: dc, requiredTopologyLevel: rack}}
    - {name: ps}
status: {phase: Running, running: 3, pending: 1, conditions: [{type: Scheduled, status: "True"}]}
)"));
  REQUIRE(r.ok());
  CHECK(r->minMember == 3);
  CHECK(r->queue == "team-a");
  CHECK(r->priorityClassName == "train");
  CHECK(r->preemptibility == Preemptibility::NonPreemptible);
  CHECK(r->topologyConstraint.requiredTopologyLevel == "rack");
  CHECK(r->topologyConstraint.preferredTopologyLevel == "host");
  REQUIRE(r->subGroups.size() == 2);
  CHECK(r->subGroups[0].minMember == 2);
  CHECK(r->subGroups[0].topologyConstraint.topology == "dc");
  CHECK(r->subGroups[1].minMember == 1);
  CHECK(r->subGroups[1].topologyConstraint.empty());
  CHECK(r->status.phase == "Running");
  CHECK(r->status.running == 3);
  CHECK(r->status.pending == 1);

  auto defaults = podGroupFromJson(yaml("kind: PodGroup\nmetadata: {name: d, namespace: ns}\nspec: {queue: q}"));
  REQUIRE(defaults.ok());
  CHECK(defaults->minMember == 1);
  CHECK(defaults->preemptibility == Preemptibility::Unset);
  auto zero = podGroupFromJson(yaml("kind: PodGroup\nmetadata: {name: z, namespace: ns}\nspec: {minMember: -2}"));
  REQUIRE(zero.ok());
  CHECK(zero->minMember == -2);  // kept; validated by the scheduler
  CHECK(errorOf(podGroupFromJson(yaml("kind: PodGroup\nmetadata: {name: z, namespace: ns}\nspec: {minMember: 1.5}"))) ==
        "PodGroup ns/z: spec.minMember: expected an integer, got 1.5");
  CHECK_THAT(errorOf(podGroupFromJson(yaml("kind: PodGroup\nmetadata: {name: z, namespace: ns}\nspec: {minMember: \"2\"}"))),
             Catch::StartsWith("PodGroup ns/z: spec.minMember: expected an integer, got string"));
  CHECK_THAT(errorOf(podGroupFromJson(yaml("kind: PodGroup\nmetadata: {name: z, namespace: ns}\nspec: {preemptibility: maybe}"))),
             Catch::StartsWith("PodGroup ns/z: spec.preemptibility: unknown value \"maybe\""));
  CHECK_THAT(errorOf(podGroupFromJson(yaml("kind: PodGroup\nmetadata: {name: z, namespace: ns}\nspec: {subGroups: [{name: a, minMember: x}]}"))),
             Catch::StartsWith("PodGroup ns/z: spec.subGroups[0].minMember: expected an integer"));
}

TEST_CASE("convert: queue", "[convert]") {
  auto r = queueFromJson(yaml(R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: org
  priority: 200
  resources:
    gpu: {quota: "6", limit: "-1", overQuotaWeight: "2"}
    cpu: {quota: 500m, limit: 8, overQuotaWeight: 0.5}
    memory: {quota: 64Gi, limit: "-1"}
  preemptMinRuntime: 10m
  reclaimMinRuntime: 1h30m
status:
  allocated: {nvidia.com/gpu: "2", cpu: "4"}
)"));
  REQUIRE(r.ok());
  const Queue& q = *r;
  CHECK(q.parentQueue == "org");
  CHECK(q.priority == 200);
  CHECK(q.gpu.quota == 6000);
  CHECK(q.gpu.limit == -1);
  CHECK(q.gpu.overQuotaWeightMilli == 2000);
  CHECK(q.cpu.quota == 500);
  CHECK(q.cpu.limit == 8000);
  CHECK(q.cpu.overQuotaWeightMilli == 500);
  CHECK(q.memory.quota == 64LL << 30);
  CHECK(q.memory.limit == -1);
  CHECK(q.memory.overQuotaWeightMilli == 1000);
  CHECK(q.preemptMinRuntime->millis == 600000);
  CHECK(q.reclaimMinRuntime->millis == 5400000);
  CHECK(q.status.allocated.milliGpu == 2000);

  auto defaults = queueFromJson(yaml("kind: Queue\nmetadata: {name: d}"));
  REQUIRE(defaults.ok());
  CHECK(defaults->priority == 100);
  CHECK(defaults->gpu.quota == 0);
  CHECK(defaults->gpu.limit == -1);
  CHECK(defaults->cpu.overQuotaWeightMilli == 1000);
  CHECK_FALSE(defaults->preemptMinRuntime);

  auto neg = queueFromJson(yaml("kind: Queue\nmetadata: {name: n}\nspec: {resources: {gpu: {quota: \"-3\"}, cpu: {quota: -1}, memory: {quota: \"-2\"}}}"));
  REQUIRE(neg.ok());
  CHECK(neg->gpu.quota == -3000);  // stored, validated elsewhere
  CHECK(neg->cpu.quota == -1);
  CHECK(neg->memory.quota == -2);

  CHECK(errorOf(queueFromJson(yaml("kind: Queue\nmetadata: {name: q}\nspec: {resources: {tpu: {quota: 1}}}"))) ==
        "Queue q: spec.resources.tpu: unknown resource \"tpu\" (want gpu, cpu or memory)");
  CHECK_THAT(errorOf(queueFromJson(yaml("kind: Queue\nmetadata: {name: q}\nspec: {resources: {gpu: {quota: lots}}}"))),
             Catch::StartsWith("Queue q: spec.resources.gpu.quota: invalid quantity \"lots\""));
  CHECK_THAT(errorOf(queueFromJson(yaml("kind: Queue\nmetadata: {name: q}\nspec: {resources: {gpu: {quotas: 1}}}"))),
             Catch::StartsWith("Queue q: spec.resources.gpu.quotas: unknown field"));
  CHECK_THAT(errorOf(queueFromJson(yaml("kind: Queue\nmetadata: {name: q}\nspec: {preemptMinRuntime: soon}"))),
             Catch::StartsWith("Queue q: spec.preemptMinRuntime: invalid duration \"soon\""));
  CHECK_THAT(errorOf(queueFromJson(yaml("kind: Queue\nmetadata: {name: q}\nspec: {preemptMinRuntime: -5m}"))),
             Catch::StartsWith("Queue q: spec.preemptMinRuntime: invalid duration"));
}

TEST_CASE("convert: topology, priorityclass, namespace, configmap", "[convert]") {
  auto t = topologyFromJson(yaml("apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Topology\nmetadata: {name: dc}\n"
                                 "spec: {levels: [{nodeLabel: topology.example.com/rack}, {nodeLabel: kubernetes.io/hostname}]}"));
  REQUIRE(t.ok());
  REQUIRE(t->levels.size() == 2);
  CHECK(t->levels[1].nodeLabel == "kubernetes.io/hostname");
  CHECK(errorOf(topologyFromJson(yaml("kind: Topology\nmetadata: {name: dc}\nspec: {levels: [{nodeLabel: \"\"}]}"))) ==
        "Topology dc: spec.levels[0].nodeLabel: required");

  auto pc = priorityClassFromJson(yaml("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: train}\nvalue: 50\nglobalDefault: true"));
  REQUIRE(pc.ok());
  CHECK(pc->value == 50);
  CHECK(pc->globalDefault);
  CHECK(pc->preemptionPolicy == "PreemptLowerPriority");
  CHECK(errorOf(priorityClassFromJson(yaml("kind: PriorityClass\nmetadata: {name: x}"))) == "PriorityClass x: value: required");
  CHECK_THAT(errorOf(priorityClassFromJson(yaml("kind: PriorityClass\nmetadata: {name: x}\nvalue: \"5\""))),
             Catch::StartsWith("PriorityClass x: value: expected an integer"));
  CHECK_THAT(errorOf(priorityClassFromJson(yaml("kind: PriorityClass\nmetadata: {name: x}\nvalue: 5\npreemptionPolicy: Sometimes"))),
             Catch::StartsWith("PriorityClass x: preemptionPolicy: unknown value"));

  auto ns = namespaceFromJson(yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}"));
  REQUIRE(ns.ok());
  CHECK(ns->meta.name == "team-a");

  auto cm = configMapFromJson(yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: n}\ndata: {a: \"1\", b: x}"));
  REQUIRE(cm.ok());
  CHECK(cm->data.at("a") == "1");
  CHECK_THAT(errorOf(configMapFromJson(yaml("kind: ConfigMap\nmetadata: {name: c, namespace: n}\ndata: {a: 1}"))),
             Catch::StartsWith("ConfigMap n/c: data[\"a\"]: expected a string"));

  auto meta = metaFromJson(yaml("kind: Lease\nmetadata: {name: l, namespace: n, uid: u}"));
  REQUIRE(meta.ok());
  CHECK(meta->uid == "u");
}

TEST_CASE("convert: kindOf and describeObject", "[convert]") {
  CHECK(kindOf(yaml("apiVersion: v1\nkind: Pod")).value() == Kind::Pod);
  CHECK(kindOf(yaml("apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup")).value() == Kind::PodGroup);
  CHECK(kindOf(yaml("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass")).value() == Kind::PriorityClass);
  CHECK_THAT(errorOf(kindOf(yaml("apiVersion: v1\nkind: Foo\nmetadata: {name: f}"))),
             Catch::Contains("unknown kind \"Foo\" (apiVersion v1)"));
  CHECK_THAT(errorOf(kindOf(yaml("apiVersion: v1\nkind: Queue\nmetadata: {name: f}"))),
             Catch::Contains("unknown kind \"Queue\" (apiVersion v1)"));
  CHECK_THAT(errorOf(kindOf(yaml("kind: Pod\nmetadata: {name: f}"))), Catch::Contains("apiVersion: required"));
  CHECK_THAT(errorOf(kindOf(yaml("apiVersion: v1\nmetadata: {name: f}"))), Catch::Contains("kind: required"));
  CHECK_FALSE(kindOf(json(3)).ok());

  CHECK(describeObject(yaml("kind: Pod\nmetadata: {name: big-0, namespace: team-a}")) == "Pod team-a/big-0");
  CHECK(describeObject(yaml("kind: Queue\nmetadata: {name: default}")) == "Queue default");
  CHECK(describeObject(yaml("kind: Pod\nmetadata: {}")) == "Pod <unnamed>");
  CHECK(describeObject(json(nullptr)) == "object <unnamed>");
}

TEST_CASE("convert: never throws on JSON of the wrong shape", "[convert]") {
  const json inputs[] = {json(nullptr), json(1), json("x"), json::array({1, 2}),
                         json::parse(R"({"kind":"Pod","metadata":[],"spec":[]})"),
                         json::parse(R"({"metadata":{"name":1,"labels":[]}})"),
                         json::parse(R"({"spec":{"containers":[1,{"resources":[]},{"resources":{"requests":[1]}}]}})"),
                         json::parse(R"({"spec":{"containers":[{"ports":"x"}],"tolerations":[null]}})"),
                         json::parse(R"({"status":{"capacity":{"cpu":null},"conditions":"Ready"}})"),
                         json::parse(R"({"spec":{"resources":{"gpu":"6"},"levels":{},"minMember":null}})"),
                         json::parse(R"({"spec":{"priority":18446744073709551615}})")};
  for (const json& j : inputs) {
    INFO(j.dump());
    CHECK_NOTHROW((void)podFromJson(j));
    CHECK_NOTHROW((void)nodeFromJson(j));
    CHECK_NOTHROW((void)podGroupFromJson(j));
    CHECK_NOTHROW((void)queueFromJson(j));
    CHECK_NOTHROW((void)topologyFromJson(j));
    CHECK_NOTHROW((void)priorityClassFromJson(j));
    CHECK_NOTHROW((void)namespaceFromJson(j));
    CHECK_NOTHROW((void)configMapFromJson(j));
    CHECK_NOTHROW((void)metaFromJson(j));
    CHECK_NOTHROW((void)kindOf(j));
    CHECK_NOTHROW((void)describeObject(j));
  }
  CHECK_FALSE(podFromJson(json::parse(R"({"spec":{"priority":18446744073709551615}})")).ok());
  CHECK_FALSE(queueFromJson(json::parse(R"({"spec":{"resources":{"gpu":"6"}}})")).ok());
}
