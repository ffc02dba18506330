#pragma once
/// The immutable per-cycle view of the cluster. Built by the Cache from its incrementally kept
/// NodeInfo / JobInfo / QueueInfo; sharing unchanged entries with earlier snapshots (copy on write),
/// so taking a snapshot costs a pointer copy per node and job, not a rebuild of the world.
/// Thread-safety: a Snapshot and everything it points to are immutable; share it freely.
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/api/gpu_request.h"
#include "tessera/api/kinds.h"
#include "tessera/api/objects.h"
#include "tessera/api/resources.h"
#include "tessera/api/validation.h"

namespace tessera::cache {

/// Lifecycle of a pod as the scheduler sees it.
enum class TaskStatus : uint8_t {
  Pending,    ///< not bound to a node
  Bound,      ///< bound (or assumed bound), not yet running
  Running,    ///< running on its node
  Releasing,  ///< terminating on its node: still holds resources that will be freed
  Succeeded,
  Failed,
};
const char* toString(TaskStatus s);
/// True when the pod holds node resources (Bound, Running, Releasing).
inline bool holdsResources(TaskStatus s) {
  return s == TaskStatus::Bound || s == TaskStatus::Running || s == TaskStatus::Releasing;
}

/// Whether a pod names the nodes it may use: a nodeSelector, required node affinity or host ports.
/// Unknown where a TaskInfo was built by hand (the predicates then read the pod).
enum class NodeConstraints : uint8_t { Unknown, None, Some };

/// One pod of a job.
struct TaskInfo {
  std::shared_ptr<const api::Pod> pod;
  std::string key;        ///< "ns/name"
  std::string uid;
  // What Session::buildState reads of every task of every cycle lies in these eight bytes (one
  // cache line, not two), the node's name and the subgroup right after them.
  TaskStatus status = TaskStatus::Pending;
  bool gpuSpecInvalid = false;                                 ///< !gpuSpecError.empty()
  bool assumed = false;                                        ///< bound by us, not yet confirmed by the watch
  NodeConstraints nodeConstraints = NodeConstraints::Unknown;  ///< set by the cache from the pod
  int32_t taskPriority = 0;  ///< label tessera.dev/task-priority
  std::string nodeName;      ///< where it is bound (or assumed)
  std::string subGroup;      ///< label tessera.dev/subgroup
  api::Resources request;
  /// What the pod takes from its node's idle resources: `request` without nvidia.com/gpu for pods
  /// that share GPUs (those are accounted through the node's GPU groups).
  api::Resources nodeRequest;
  /// The pod's GPU annotations (gpu-fraction, gpu-memory, policies, model filters); null when it
  /// has none, or when they are invalid (then `gpuSpecError` says why and the pod is not placed).
  std::shared_ptr<const api::PodGpuSpec> gpuSpec;
  std::string gpuSpecError;
  /// GPU groups a bound fractional pod holds (label tessera.dev/gpu-group, annotation
  /// tessera.dev/gpu-groups for several devices).
  std::vector<std::string> gpuGroups;
  /// The pod's placement key (placement_key.h), interned: pods with equal keys share one string.
  /// Null where a TaskInfo was built by hand (the session builds the key then).
  std::shared_ptr<const std::string> placementKey;
  bool sharesGpu() const { return gpuSpec && gpuSpec->shared(); }
  /// The GPU the pod needs as the victim search counts it (milli-GPUs): its node request's, plus
  /// its share of a GPU when it shares one (a share counts toward whole GPUs).
  int64_t gpuNeedMilli() const { return nodeRequest.milliGpu + (sharesGpu() ? request.milliGpu : 0); }
};

/// The task order's last words between two pods (Session::taskLess once every plugin's order
/// ties): the older pod first, then the lower uid, then the key. Strict and total.
bool taskTieLess(const TaskInfo& l, const TaskInfo& r);

/// A PodGroup with its pods; a pod without a group is a job of one.
struct JobInfo {
  // The fields every session reads of every job (Session::buildState) come first, on two or three
  // cache lines; names and keys after them.
  api::Time creationTime; ///< PodGroup's creationTimestamp, or the pod's
  /// The PodGroup object; null for a group of one or when the referenced PodGroup does not exist.
  std::shared_ptr<const api::PodGroup> podGroup;
  /// The PodGroup's own topology constraint (topologyKeyOf), interned: jobs with equal ones share
  /// one pointer, so a session tells jobs alike by it, near the entry's start (on the line a turn
  /// asks for ahead), without reading their PodGroups (Session::jobSignature). Null when it sets none, and where a JobInfo was
  /// built by hand (the session reads the PodGroup then).
  std::shared_ptr<const std::string> topologyKey;
  std::optional<int32_t> podPriority;  ///< spec.priority of the first pod, if admission set it
  int32_t minMember = 1;
  api::Preemptibility preemptibility = api::Preemptibility::Unset;
  bool podGroupMissing = false;  ///< pods name a PodGroup that does not exist
  /// A pod without a PodGroup (key "Pod/ns/name"): set with the key (setKey), read without it.
  bool singleton = false;
  bool pendingSharesGpu = false;  ///< a pending task shares a GPU (see pendingMinWholeGpus)
  /// Every task's pod has one creationTimestamp (a gang created at once, or a job of one): the
  /// victim order's last word between two of its pods (the newest, then the pod key) is then the
  /// task order. False unless the cache found it so (a JobInfo built by hand is ranked pod by pod).
  bool tasksCreatedTogether = false;
  /// Its PodGroup carries the annotation tessera.dev/stale-since (whatever its value): set by the
  /// cache with the PodGroup (false where a JobInfo was built by hand), so that stalegangeviction
  /// asks no PodGroup of the many jobs that are not stale whether a mark must go.
  bool staleMarked = false;
  int32_t pendingCount = 0, allocatedCount = 0, succeededCount = 0, failedCount = 0;
  /// The placement key (TaskInfo::placementKey) every pending task shares, or null when they do
  /// not all share one (or none is pending): such a job's pods place alike, without a look at each.
  const std::string* pendingPlacementKey = nullptr;
  /// The fewest whole GPUs a pending task takes from its node (nodeRequest), INT64_MAX when none
  /// is pending: a job whose every pending pod needs more than any node has free fits nowhere,
  /// known without reading its tasks (allocate, on every pending job of every cycle).
  int64_t pendingMinGpus = INT64_MAX;
  /// The same over the pending tasks that share no GPU (a task sharing one may fit in a GPU
  /// group's room without a whole GPU free; whether one is pending: pendingSharesGpu): backfill's
  /// "nothing fits now" (Session::pendingGpuFloor).
  int64_t pendingMinWholeGpus = INT64_MAX;
  /// The fewest milli-GPUs a pending task needs as consolidation counts them (TaskInfo::gpuNeedMilli);
  /// INT64_MAX when none is pending.
  int64_t pendingMinGpuMilli = INT64_MAX;
  std::vector<TaskInfo> tasks;  ///< sorted by pod key
  // Totals kept incrementally by the cache.
  api::Resources allocated;       ///< sum over tasks holding resources (releasing ones included)
  api::Resources pendingRequest;  ///< sum over pending tasks
  std::string queue;              ///< resolved queue name (BRIEF.md: pod -> Queue)
  std::string priorityClassName;  ///< PodGroup's, else the first pod's
  api::Resources releasing;       ///< the part of `allocated` held by terminating pods
  std::string key;                ///< "PodGroup/ns/name" or "Pod/ns/name" (a group of one): set by setKey
  std::string namespace_;
  std::string name;  ///< the PodGroup's name, or the pod's for a group of one
  std::string uid;   ///< PodGroup uid, or the pod's
  /// Task indices in the order of the task order's last words (oldest pod, then uid, then key:
  /// Session::taskLess once every plugin's order ties), made by the cache for each snapshot the
  /// job changed in, so that a session sorts a job's tasks by the plugins' orders alone. Of
  /// another size than `tasks` unless the cache made it (a JobInfo built by hand: sorted in full).
  std::vector<int32_t> tieOrder;

  /// Sets `key` and `singleton` (whether it names a pod: "Pod/...").
  void setKey(std::string k) {
    key = std::move(k);
    singleton = key.rfind("Pod/", 0) == 0;
  }
  bool isSingleton() const { return singleton; }
};

/// One physical GPU of a node shared by fractional pods: a GPU group. It holds a whole GPU (through
/// its reservation pod, or by itself while that pod does not exist yet) and divides it in units:
/// milli-MiB when the node has the nvidia.com/gpu.memory label (capacity = MiB x 1000), else
/// thousandths of a GPU (capacity 1000). Units are exact for both fractions and memory requests.
struct GpuGroupInfo {
  std::string id;
  bool reserved = false;     ///< a (non-terminating) reservation pod holds its GPU
  std::string reservationPod;///< "ns/name" of that pod
  std::string uuid;          ///< GPU UUID the reservation pod reported (tessera.dev/gpu-uuid)
  int64_t used = 0;          ///< units held by fractional pods (releasing ones included)
  int64_t releasing = 0;     ///< units held by terminating fractional pods
  /// Compute of its fractional pods (api::gpuComputeMilli: thousandths of the GPU), and of the
  /// terminating ones among them.
  int64_t compute = 0;
  int64_t computeReleasing = 0;
  int32_t pods = 0;          ///< fractional pods in the group
};

/// A node with its resource accounting.
struct NodeInfo {
  std::shared_ptr<const api::Node> node;
  std::string name;
  api::Resources allocatable;
  api::Resources used;       ///< all non-terminal pods bound here (including releasing ones)
  api::Resources releasing;  ///< pods terminating here: freed once they are gone
  api::Resources foreignUsed;  ///< held by pods of other schedulers (never ours to divide)
  int32_t podCount = 0;
  int32_t releasingPods = 0;  ///< of podCount, the terminating pods: their slots free once they are gone
  std::vector<std::string> pods;          ///< keys "ns/name" of pods holding resources here, sorted
  std::vector<api::HostPort> usedPorts;   ///< host ports of those pods
  /// GPU groups on this node, sorted by id. A group without a reservation pod still holds a GPU:
  /// `used` includes 1 nvidia.com/gpu for each such group.
  std::vector<GpuGroupInfo> gpuGroups;
  /// Label nvidia.com/gpu.memory (MiB per GPU); 0 when absent or invalid (`gpuLabelError`).
  int64_t gpuMemoryMiB = 0;
  std::string gpuLabelError;
  /// The node's own GPU-sharing settings (api::nodeGpuSettings; 0: the cluster's). GPUs it excludes
  /// (tessera.dev/gpu-exclude) are already taken out of `allocatable`.
  int32_t gpuSplitCount = 0;
  int64_t gpuMemoryScalingMilli = 0;
  int64_t gpuCoreScalingMilli = 0;
  int32_t gpusExcluded = 0;
  std::vector<std::string> excludedGpuUuids;
  /// What the node's MIG instances (allocatable nvidia.com/mig-*) are worth in thousandths of a GPU
  /// (api::migGpuMilli): added to the cluster's GPUs that queues divide.
  int64_t migGpuMilli = 0;
  /// Label tessera.dev/gpu-mode: mig (the node takes no GPU shares).
  bool migMode = false;
  /// Ready, not cordoned, and no taint but PreferNoSchedule: any pod that names no node
  /// (TaskInfo::nodeConstraints None) may run here if a pod slot is free. Set by the cache with
  /// `node`; false where a NodeInfo was built by hand (the predicates then read the node).
  bool takesAnyPod = false;
  /// Capacity of one GPU in group units (see GpuGroupInfo).
  int64_t gpuUnits() const { return gpuMemoryMiB > 0 ? gpuMemoryMiB * 1000 : 1000; }
  const GpuGroupInfo* findGpuGroup(const std::string& id) const;
  api::Resources idle() const { return allocatable - used; }
};

/// Group units a fractional pod takes on each of its GPUs on `node`; 0 when it cannot run there
/// (a gpu-memory request on a node without the nvidia.com/gpu.memory label).
int64_t gpuUnitsOn(const api::PodGpuSpec& spec, const NodeInfo& node);
/// What a fractional pod charges its queue, in milli-GPU: the fraction, or the memory as a portion
/// of a GPU of `gpuMemoryMiB` (rounded up; 1000 per device when unknown), times the devices.
int64_t gpuChargeMilli(const api::PodGpuSpec& spec, int64_t gpuMemoryMiB);
/// The GPU groups named on a pod (annotation tessera.dev/gpu-groups, else label tessera.dev/gpu-group).
std::vector<std::string> gpuGroupsOf(const api::ObjectMeta& meta);

/// A queue with the totals of its own jobs.
struct QueueInfo {
  std::shared_ptr<const api::Queue> queue;
  std::string name;
  api::Resources allocated;  ///< held by bound, non-terminated pods of its jobs (own jobs only)
};

/// An object that failed conversion, with the error naming the object and the field.
struct ConversionError {
  api::Kind kind;
  std::string namespace_, name;
  std::string message;
};

/// A snapshot's jobs, sorted by key: read through plain pointers, owned in chunks of a few hundred
/// jobs that consecutive snapshots share. SnapshotBuilder makes a new chunk only where a job
/// changed, so that taking a snapshot and dropping the last one touch no reference count of an
/// unchanged job (on a large cluster each is a cache miss on the job's entry, ~60,000 a cycle).
/// A job's entry is never changed in place while a chunk holds it (the cache copies on write).
class JobList {
 public:
  using Chunk = std::vector<std::shared_ptr<const JobInfo>>;

  size_t size() const { return view_.size(); }
  bool empty() const { return view_.empty(); }
  const JobInfo* operator[](size_t i) const { return view_[i]; }
  std::vector<const JobInfo*>::const_iterator begin() const { return view_.begin(); }
  std::vector<const JobInfo*>::const_iterator end() const { return view_.end(); }

  /// Appends a job (keys ascending) to a chunk of this list's own: a snapshot built by hand.
  void push_back(std::shared_ptr<const JobInfo> job);
  /// Appends a chunk, shared or new (SnapshotBuilder); a chunk is never changed once appended.
  void appendChunk(std::shared_ptr<const Chunk> chunk);
  const std::vector<std::shared_ptr<const Chunk>>& chunks() const { return chunks_; }
  void reserve(size_t jobs) { view_.reserve(jobs); }

 private:
  std::vector<const JobInfo*> view_;  ///< every chunk's jobs, in order
  std::vector<std::shared_ptr<const Chunk>> chunks_;
  std::shared_ptr<Chunk> own_;  ///< the last chunk when push_back made it (not shared)
};

/// Immutable view of the cluster for one scheduling cycle.
struct Snapshot {
  uint64_t generation = 0;
  api::Time takenAt;
  std::vector<std::shared_ptr<const NodeInfo>> nodes;  ///< sorted by name
  JobList jobs;                                        ///< sorted by key
  /// Parallel to `jobs`: each one's number of pods (tasks), kept by SnapshotBuilder from one
  /// snapshot to the next, so that a session knows where each job's pods go in its arrays without
  /// visiting every job first. Empty in a snapshot built otherwise (a session counts them then).
  std::vector<uint32_t> jobTaskCounts;
  std::map<std::string, std::shared_ptr<const QueueInfo>> queues;
  std::map<std::string, std::shared_ptr<const api::PriorityClass>> priorityClasses;
  std::map<std::string, std::shared_ptr<const api::Topology>> topologies;
  /// Sharded (docs/sharding.md): Queues of other node pools by name, with their pool. Not this
  /// shard's to divide; named so that a job of this pool that uses one is told why it waits.
  std::map<std::string, std::string> otherPoolQueues;
  /// Objects the cache could not convert: they are skipped, never half-used.
  std::vector<ConversionError> conversionErrors;
  /// Objects that converted but break a rule of api/validation.h, by Problem::ref() ("Queue/q",
  /// "PodGroup/ns/name", "Node/n"): skipped whole, never half-used. A queue under an invalid
  /// ancestor is invalid too. Filled by the cache with every snapshot.
  std::map<std::string, api::Problem> invalid;
  const api::Problem* findInvalid(const std::string& ref) const;

  const NodeInfo* findNode(const std::string& name) const;
  const JobInfo* findJob(const std::string& key) const;
  /// For each job of this snapshot, its index in `later` (both list their jobs sorted by key):
  /// -1 where the job is gone, or, with `sameObjectOnly`, where the cache has replaced its object
  /// since (its tasks may be others). Carries what one session kept per job to the next.
  std::vector<int> jobIndicesIn(const Snapshot& later, bool sameObjectOnly) const;
};

}  // namespace tessera::cache
