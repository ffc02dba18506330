#pragma once
/// The Kubernetes and Tessera objects the scheduler reads, as plain value types.
/// Created by the conversion layer (convert.h) from JSON; immutable once shared.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/kinds.h"
#include "tessera/api/resources.h"

namespace tessera::api {

/// Annotation and label keys of the public API (see BRIEF.md, "Conventions").
namespace keys {
inline constexpr const char* kPodGroupAnnotation = "pod-group-name";                  // KAI
inline constexpr const char* kPodGroupAnnotationVolcano = "scheduling.k8s.io/group-name";
inline constexpr const char* kPodGroupLabelSchedulerPlugins = "scheduling.x-k8s.io/pod-group";
/// A key that names a pod's PodGroup: an annotation's or a label's.
struct PodGroupKey {
  bool annotation;
  const char* key;
};
/// Every key that names a pod's PodGroup, the one read first first (KAI's annotation, Volcano's,
/// scheduler-plugins' label).
inline constexpr PodGroupKey kPodGroupKeys[] = {
    {true, kPodGroupAnnotation}, {true, kPodGroupAnnotationVolcano}, {false, kPodGroupLabelSchedulerPlugins}};
inline constexpr const char* kQueueLabel = "tessera.dev/queue";
inline constexpr const char* kQueueLabelKai = "kai.scheduler/queue";
inline constexpr const char* kSubGroupLabel = "tessera.dev/subgroup";
inline constexpr const char* kSubGroupLabelKai = "kai.scheduler/subgroup-name";
inline constexpr const char* kTaskPriorityLabel = "tessera.dev/task-priority";
inline constexpr const char* kTaskPriorityLabelKai = "kai.scheduler/task-priority";
inline constexpr const char* kGpuFraction = "gpu-fraction";
inline constexpr const char* kGpuMemory = "gpu-memory";
inline constexpr const char* kGpuFractionNumDevices = "gpu-fraction-num-devices";
inline constexpr const char* kNodePolicy = "tessera.dev/node-policy";
inline constexpr const char* kGpuPolicy = "tessera.dev/gpu-policy";
inline constexpr const char* kUseGpuType = "tessera.dev/use-gpu-type";
inline constexpr const char* kAvoidGpuType = "tessera.dev/avoid-gpu-type";
/// HAMi's name for avoid-gpu-type, read as an alias (avoid-gpu-type wins when both are set).
inline constexpr const char* kNoUseGpuType = "tessera.dev/nouse-gpu-type";
/// GPUs a fractional pod may only use, or must not use, by UUID (docs/gpu-sharing.md, "Pinning and
/// avoiding GPUs"); HAMi's nvidia.com/use-gpuuuid and nouse-gpuuuid are read as aliases.
inline constexpr const char* kUseGpuUuid = "tessera.dev/use-gpu-uuid";
inline constexpr const char* kNoUseGpuUuid = "tessera.dev/nouse-gpu-uuid";
inline constexpr const char* kHamiUseGpuUuid = "nvidia.com/use-gpuuuid";
inline constexpr const char* kHamiNoUseGpuUuid = "nvidia.com/nouse-gpuuuid";
inline constexpr const char* kIsolation = "tessera.dev/isolation";
/// Compute share of a fractional pod in percent of the GPU's SMs (HAMi's gpucores), and whether it
/// may use idle compute beyond it (docs/isolation.md, "Compute limit").
inline constexpr const char* kGpuCores = "tessera.dev/gpu-cores";
inline constexpr const char* kGpuCoresPolicy = "tessera.dev/gpu-cores-policy";
/// The env entry the webhook adds to every container of a fractional pod under hard isolation (the
/// path of its accounting region): its presence is how the scheduler knows the pod was wired.
inline constexpr const char* kIsolationRegionEnv = "TESSERA_ISOLATION_REGION";
inline constexpr const char* kGpuGroupLabel = "tessera.dev/gpu-group";
inline constexpr const char* kGpuUuidAnnotation = "tessera.dev/gpu-uuid";
/// On a PodGroup, written by the scheduler (stalegangeviction): since when (RFC 3339, seconds) the
/// gang runs below its minMember; removed once it no longer does. KAI: kai.scheduler/stale-podgroup-timestamp.
inline constexpr const char* kStaleSinceAnnotation = "tessera.dev/stale-since";
inline constexpr const char* kNodeGpuMemoryLabel = "nvidia.com/gpu.memory";
inline constexpr const char* kNodeGpuProductLabel = "nvidia.com/gpu.product";
/// A node's GPU-sharing settings (labels or annotations set by the platform team; docs/gpu-sharing.md,
/// "Per-node settings"): pods per GPU, memory oversubscription, GPUs taken out of scheduling.
inline constexpr const char* kNodeGpuSplitCount = "tessera.dev/gpu-split-count";
inline constexpr const char* kNodeGpuMemoryScaling = "tessera.dev/gpu-memory-scaling";
inline constexpr const char* kNodeGpuCoreScaling = "tessera.dev/gpu-core-scaling";
inline constexpr const char* kNodeGpuExclude = "tessera.dev/gpu-exclude";
/// A node's GPU mode (label): `mig` for nodes whose GPUs are partitioned into MIG instances; such a
/// node takes no GPU shares (docs/gpu-sharing.md, "MIG").
inline constexpr const char* kNodeGpuMode = "tessera.dev/gpu-mode";
inline constexpr const char* kReservationNamespace = "tessera-reservation";
inline constexpr const char* kDefaultQueue = "default";
inline constexpr const char* kDefaultSchedulerName = "tessera";
}  // namespace keys

/// Labels, annotations, selectors: ordered, with heterogeneous lookup (no temporary strings).
using StringMap = std::map<std::string, std::string, std::less<>>;

struct OwnerReference {
  std::string apiVersion, kind, name, uid;
  bool controller = false;
};

struct ObjectMeta {
  std::string name;
  std::string namespace_;  ///< empty for cluster-scoped objects
  std::string generateName;
  std::string uid;
  std::string resourceVersion;
  StringMap labels;
  StringMap annotations;
  Time creationTimestamp;
  std::optional<Time> deletionTimestamp;
  std::optional<int64_t> deletionGracePeriodSeconds;
  std::vector<OwnerReference> ownerReferences;

  /// "ns/name" for namespaced objects, "name" otherwise.
  std::string key() const { return namespace_.empty() ? name : namespace_ + "/" + name; }
  const std::string* label(std::string_view k) const {
    auto it = labels.find(k);
    return it == labels.end() ? nullptr : &it->second;
  }
  const std::string* annotation(std::string_view k) const {
    auto it = annotations.find(k);
    return it == annotations.end() ? nullptr : &it->second;
  }
};

enum class TaintEffect { NoSchedule, PreferNoSchedule, NoExecute };
enum class TolerationOperator { Equal, Exists };
enum class SelectorOperator { In, NotIn, Exists, DoesNotExist, Gt, Lt };

struct Taint {
  std::string key, value;
  TaintEffect effect = TaintEffect::NoSchedule;
};

struct Toleration {
  std::string key;  ///< empty key with Exists tolerates everything
  TolerationOperator op = TolerationOperator::Equal;
  std::string value;
  std::optional<TaintEffect> effect;  ///< unset = all effects
  std::optional<int64_t> tolerationSeconds;
};

struct NodeSelectorRequirement {
  std::string key;
  SelectorOperator op = SelectorOperator::In;
  std::vector<std::string> values;
};

/// One term of required node affinity: all expressions must match (AND).
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> matchExpressions;
  std::vector<NodeSelectorRequirement> matchFields;  ///< only metadata.name is meaningful
};

struct HostPort {
  int32_t port = 0;
  std::string protocol = "TCP";
  std::string hostIP;  ///< empty = 0.0.0.0
};

enum class PodPhase { Pending, Running, Succeeded, Failed, Unknown };

struct Condition {
  std::string type, status, reason, message;
  std::optional<Time> lastTransitionTime;
};

struct Pod {
  ObjectMeta meta;
  std::string schedulerName;  ///< empty when not set (then default-scheduler in Kubernetes)
  std::string nodeName;
  std::string priorityClassName;
  std::optional<int32_t> priority;  ///< spec.priority as set by admission
  StringMap nodeSelector;
  /// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms (OR);
  /// empty = no requirement.
  std::vector<NodeSelectorTerm> requiredNodeAffinity;
  std::vector<Toleration> tolerations;
  std::vector<HostPort> hostPorts;
  /// Effective scheduling request: max(sum(containers), max(init containers)) + overhead;
  /// a request absent but limit set defaults to the limit.
  Resources requests;
  std::optional<int64_t> terminationGracePeriodSeconds;
  PodPhase phase = PodPhase::Pending;
  std::optional<Time> startTime;
  std::vector<Condition> conditions;
  /// Every container has the env entry kIsolationRegionEnv: the webhook wired the pod for the hard
  /// isolation backend (interposer preloaded, accounting region mounted).
  bool hardIsolationWired = false;

  bool terminated() const { return phase == PodPhase::Succeeded || phase == PodPhase::Failed; }
  bool terminating() const { return meta.deletionTimestamp.has_value(); }
};

struct Node {
  ObjectMeta meta;
  bool unschedulable = false;
  std::vector<Taint> taints;
  Resources capacity;
  Resources allocatable;
  int64_t allocatablePods = 110;  ///< status.allocatable.pods (Kubernetes default 110 when absent)
  bool ready = false;             ///< condition Ready == True
  std::vector<Condition> conditions;
};

enum class Preemptibility { Unset, Preemptible, NonPreemptible };

struct TopologyConstraint {
  std::string topology;
  std::string requiredTopologyLevel;
  std::string preferredTopologyLevel;
  bool empty() const { return topology.empty() && requiredTopologyLevel.empty() && preferredTopologyLevel.empty(); }
};

struct SubGroup {
  std::string name;
  int32_t minMember = 1;
  TopologyConstraint topologyConstraint;
};

struct PodGroupStatus {
  std::string phase;
  int32_t running = 0, pending = 0, succeeded = 0, failed = 0;
  std::vector<Condition> conditions;
};

/// Where a PodGroup comes from: Tessera's own CRD, or another scheduler's that Tessera reads
/// (docs/workloads.md#other-schedulers-podgroups); the others are never written to.
enum class PodGroupSource { Tessera, Volcano, SchedulerPlugins };

struct PodGroup {
  ObjectMeta meta;
  PodGroupSource source = PodGroupSource::Tessera;
  int32_t minMember = 1;
  std::string queue;
  std::string priorityClassName;
  Preemptibility preemptibility = Preemptibility::Unset;
  TopologyConstraint topologyConstraint;
  std::vector<SubGroup> subGroups;
  PodGroupStatus status;
  /// Annotation tessera.dev/stale-since; unset when absent or not an RFC 3339 time (the scheduler
  /// then rewrites it: it is the scheduler's own, so a bad value is no error of the PodGroup).
  std::optional<Time> staleSince;
};

/// The kind a PodGroup is read from (Kind::PodGroup, Kind::VolcanoPodGroup, ...): events and
/// problems name that object.
inline Kind podGroupKind(const PodGroup& pg) {
  switch (pg.source) {
    case PodGroupSource::Volcano: return Kind::VolcanoPodGroup;
    case PodGroupSource::SchedulerPlugins: return Kind::SchedulerPluginsPodGroup;
    case PodGroupSource::Tessera: break;
  }
  return Kind::PodGroup;
}

/// Quota settings of one resource of a queue, in the resource's fixed units (milli-GPU, milli-CPU,
/// bytes). -1 means unlimited (quota: no deserved amount declared as unlimited; limit: none).
struct QueueResource {
  int64_t quota = 0;
  int64_t limit = -1;
  int64_t overQuotaWeightMilli = 1000;  ///< weight × 1000
};

struct QueueStatus {
  Resources allocated, requested, fairShare;
  std::vector<Condition> conditions;
};

struct Queue {
  ObjectMeta meta;
  std::string parentQueue;
  int32_t priority = 100;
  QueueResource gpu, cpu, memory;
  std::optional<Duration> preemptMinRuntime;
  std::optional<Duration> reclaimMinRuntime;
  QueueStatus status;
};

struct TopologyLevel {
  std::string nodeLabel;
};

struct Topology {
  ObjectMeta meta;
  std::vector<TopologyLevel> levels;  ///< top level first
};

struct PriorityClass {
  ObjectMeta meta;
  int32_t value = 0;
  bool globalDefault = false;
  std::string preemptionPolicy;  ///< "PreemptLowerPriority" (default) or "Never"
};

struct Namespace {
  ObjectMeta meta;
};

struct ConfigMap {
  ObjectMeta meta;
  StringMap data;
};

}  // namespace tessera::api
