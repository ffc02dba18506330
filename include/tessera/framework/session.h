#pragma once
/// A Session is one scheduling cycle over an immutable Snapshot: it owns the cycle's working state
/// (what each node has idle, releasing and promised; each task's planned state), exposes KAI's
/// extension points to plugins, and collects the decisions actions commit through Statements.
/// Single-threaded: a session is used only by the scheduler thread that created it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/resources.h"
#include "tessera/api/result.h"
#include "tessera/cache/snapshot.h"
#include "tessera/framework/config.h"
#include "tessera/framework/node_ranking.h"
#include "tessera/framework/state.h"

namespace tessera::framework {

/// A task's state within a session: the cache's status plus what this cycle planned.
enum class TaskState : uint8_t {
  Pending,
  Allocated,  ///< placed this cycle on idle resources: will be bound
  Pipelined,  ///< placed this cycle on releasing resources: remembered, not bound
  Bound,
  Running,
  Releasing,  ///< terminating, or evicted this cycle
  Succeeded,
  Failed,
};
const char* toString(TaskState s);
/// Counts toward a gang's readiness: Allocated, Pipelined, Bound, Running, Succeeded.
bool isReadyState(TaskState s);
/// Holds (or will hold) node resources: Allocated, Bound, Running, Releasing (not Pipelined).
bool holdsNodeResources(TaskState s);

struct SessionTask {
  const cache::TaskInfo* info = nullptr;
  int job = -1;    ///< index in Session::jobs()
  int index = -1;  ///< index in the job's tasks
  TaskState state = TaskState::Pending;
  /// info->gpuSpecInvalid, copied: the GPU-sharing pre-predicate asks it of every pod tried.
  bool gpuSpecInvalid = false;
  /// The cache found the pod names no node it must use (no nodeSelector, required node affinity or
  /// host ports: cache::NodeConstraints::None): on a node that takes any pod (SessionNode::
  /// takesAnyPod) the predicates ask only for a pod slot, without reading the pod or the node.
  bool anyNode = false;
  int node = -1;   ///< index in Session::nodes() while on a node (or planned there)
  /// Index of the task's subgroup in its PodGroup's spec.subGroups; -1 when it has none (or names
  /// one the PodGroup does not declare).
  int32_t subGroup = -1;
  /// info->taskPriority, copied: every victim comparison of two pods of one job reads it.
  int32_t taskPriority = 0;
  /// What the task charges its job and queue (fractional pods and MIG instances: their milli-GPU
  /// share of a GPU).
  const api::Resources& request() const { return info->request; }
  /// What the task takes from its node's idle resources: what the pod requests (fractional pods: no
  /// whole GPU, their share is placed in the node's GPU groups; MIG pods: their nvidia.com/mig-*).
  const api::Resources& nodeRequest() const { return info->nodeRequest; }
  bool sharesGpu() const { return info->sharesGpu(); }
  const api::Pod& pod() const { return *info->pod; }
};
static_assert(sizeof(SessionTask) == 32, "two tasks to a cache line: a field added goes where the padding is");

/// A GPU group within a session: the cache's, or one opened this cycle (a whole idle GPU that a
/// fractional pod starts sharing). Amounts are in the node's group units (cache::GpuGroupInfo).
struct SessionGpuGroup {
  const cache::GpuGroupInfo* info = nullptr;  ///< null when opened this session
  std::string id;
  int64_t capacity = 0;
  int64_t used = 0;       ///< held by fractional pods (releasing ones included)
  int64_t releasing = 0;  ///< held by terminating or evicted fractional pods
  int64_t pipelined = 0;  ///< promised to pipelined fractional pods
  int32_t tasks = 0;      ///< fractional pods in it (bound, allocated, pipelined)
  /// Its GPU's compute (thousandths of the GPU times the node's core scaling) and the compute of
  /// its pods (api::gpuComputeMilli), held, releasing and promised as the units above.
  int64_t computeCapacity = 0;
  int64_t compute = 0;
  int64_t computeReleasing = 0;
  int64_t computePipelined = 0;
  /// How an opened group took its GPU: 1 from idle GPUs, 2 from releasing ones (pipelined).
  int8_t opened = 0;
  /// Every pod in it is releasing and nothing is promised in it: the GPU is counted as a whole
  /// releasing GPU of the node (SessionNode::releasing), and only offered as such.
  bool vacating = false;
  int64_t free() const { return capacity - used; }
  int64_t futureFree() const { return capacity - used + releasing - pipelined; }
  int64_t computeFree() const { return computeCapacity - compute; }
  int64_t computeFutureFree() const { return computeCapacity - compute + computeReleasing - computePipelined; }
  /// Room for a share of `units` and `computeMilli` now, or (future) once releasing pods are gone
  /// and promises kept. Says nothing of the split count or device rules (Session::gpuShareFits).
  bool hasRoom(int64_t units, int64_t computeMilli, bool future) const {
    return (future ? futureFree() : free()) >= units && (future ? computeFutureFree() : computeFree()) >= computeMilli;
  }
};

struct SessionNode {
  const cache::NodeInfo* info = nullptr;
  int index = -1;
  api::Resources idle;       ///< allocatable minus everything on the node (incl. this cycle's allocations)
  api::Resources releasing;  ///< held by terminating/evicted pods: free once they are gone
  api::Resources pipelined;  ///< promised to pipelined tasks out of releasing (and idle) resources
  int32_t podCount = 0;       ///< pods holding a slot now (releasing ones too; not pipelined ones)
  int32_t releasingPods = 0;  ///< of podCount, pods leaving: their slots are free once they are gone
  int32_t pipelinedPods = 0;  ///< pods promised a slot once releasing ones are gone (and reserved moves)
  int64_t allocatablePods = 0;  ///< node().allocatablePods, copied (the victim search reads it per node)
  /// info->takesAnyPod, copied: a pod without node constraints (SessionTask::anyNode) may run here
  /// if a pod slot is free.
  bool takesAnyPod = false;
  /// info->allocatable less info->foreignUsed (what other schedulers' pods hold): cpu, memory and
  /// GPUs, copied: the victim search asks every node it evaluates whether a pod could fit at all.
  int64_t ownMilliCpu = 0, ownMemory = 0, ownMilliGpu = 0;
  std::vector<api::HostPort> addedPorts;  ///< host ports of tasks placed this cycle
  std::vector<SessionGpuGroup> gpuGroups; ///< the cache's groups (same order), then opened ones
  /// One GPU's capacity in group units: cache::NodeInfo::gpuUnits() times the memory scaling (the
  /// node's tessera.dev/gpu-memory-scaling, else config gpuSharing.memoryScaling).
  int64_t gpuCapacity = 0;
  /// Fractional pods one GPU takes at most (tessera.dev/gpu-split-count, else gpuSharing.splitCount).
  int32_t gpuSplitCount = 0;
  /// One GPU's compute in thousandths: 1000 times the core scaling (tessera.dev/gpu-core-scaling,
  /// else gpuSharing.coreScaling).
  int64_t gpuComputeCapacity = 0;
  const api::Node& node() const { return *info->node; }
  const std::string& name() const { return info->name; }
  /// Resources free once releasing pods are gone, minus what pipelined tasks were promised.
  api::Resources futureIdle() const { return idle + releasing - pipelined; }
  /// Pod slots taken once releasing pods are gone and pipelined ones are bound.
  int32_t futurePods() const { return podCount - releasingPods + pipelinedPods; }
};

/// A fixed, well-spread 64-bit key for `id` (splitmix64): a fingerprint of states XORs such keys in
/// and out, so an undo restores it (SessionJob::version, the proportion plugin's allocatedVersion).
constexpr uint64_t fingerprintKey(uint64_t id) {
  uint64_t z = id + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// The fields every job turn reads (the queue order, the checks a claimant fails early, the gang's
/// readiness) fill its first cache line, and jobs are cache-line aligned: a turn costs one memory
/// miss for them, not two (5 actions take ~100,000 turns a cycle on a big cluster, most of them
/// failing at once).
struct alignas(64) SessionJob {
  const cache::JobInfo* info = nullptr;
  int index = -1;
  int queue = -1;  ///< index in Session::queues(); -1 when the job's queue does not exist
  int32_t priority = 0;
  int32_t minMember_ = 1;      ///< copied from info: read on every readiness check
  bool preemptible = true;
  bool tasksCreatedTogether = false;  ///< copied from info: read by victim comparisons (victimTieRank)
  /// info->isSingleton(), copied: the failure message of every job allocate turns away reads it,
  /// and it is a look at the key's characters, far from the cache entry.
  bool singleton = false;
  bool staleMarked = false;  ///< info->staleMarked, copied: stalegangeviction reads it of every job
  /// Why the job (or some of its pods) could not be placed this cycle: an index into the
  /// session's interned messages (Session::reasonOf); -1 when placed or not tried.
  int32_t reason = -1;
  std::span<SessionTask> tasks;  ///< storage owned by the session (one array for all jobs)
  int32_t readyCount = 0;      ///< tasks in a ready state (isReadyState)
  int32_t pendingCount = 0;
  int32_t pipelinedCount = 0;
  int32_t releasingCount = 0;  ///< tasks leaving (Releasing): the gang counts only the others
  // ---- 64 bytes ----
  /// A fingerprint of its tasks' states since the session opened: each change of a task's state
  /// (allocate, pipeline, evict, repipeline) toggles a fixed key of that task and change, and its
  /// undo toggles it back (Session::taskChanged), so a trial rolled back leaves the job's version
  /// as it found it. What is kept per job about its pending pods (Session::jobSignature) and its
  /// place in a queue's victim order (proportion) holds while the version stays.
  uint64_t version = 0;
  /// info->creationTime, copied: every victim comparison of two jobs of one queue reads it.
  api::Time created;
  api::Resources allocated;    ///< resources of tasks holding node resources
  /// Per subgroup of the PodGroup (spec.subGroups order): tasks in a ready state; empty when the
  /// PodGroup declares no subgroups.
  std::vector<int32_t> subGroupReady;
  /// Copied from info when the session is built, beside subGroupReady (every job signature reads
  /// them; the cache entry's lines are cold by then): the placement key its pending pods all
  /// share (JobInfo::pendingPlacementKey), how many pods were pending, whether its PodGroup or
  /// one of its subgroups sets a topology constraint, and whether a subgroup does.
  const std::string* infoPendingKey = nullptr;
  int32_t infoPendingCount = 0;
  bool topologyConstrained = false;
  bool subGroupTopology = false;
  /// info->pendingRequest's cpu, memory and GPUs (its scalars are read from info), copied there
  /// too: the queue order and the victim actions ask every job what its next turn needs.
  int64_t infoPendingMilliCpu = 0, infoPendingMemory = 0, infoPendingMilliGpu = 0;
  const std::string& key() const { return info->key; }
  int32_t minMember() const { return minMember_; }
  /// Its pending pods are the snapshot's and all share one placement key
  /// (cache::JobInfo::pendingPlacementKey): they ask alike, and one of them says it for all.
  bool pendingAlike() const { return infoPendingKey && pendingCount == infoPendingCount; }
  /// The PodGroup's subgroups (empty for none), indexed like subGroupReady.
  const std::vector<api::SubGroup>& subGroups() const;
  /// The first subgroup below its own minMember, or -1.
  int shortSubGroup() const;
};
static_assert(offsetof(SessionJob, version) == 64, "SessionJob: the turn's fields fill the first cache line");
static_assert(sizeof(SessionJob) == 192, "SessionJob: three cache lines");

/// A task by its indices: Session::jobs() and the job's tasks.
struct TaskRef {
  int job = -1, task = -1;
};

/// The tasks running (bound or running) when the session opened, per node, and the nodes each
/// queue runs pods on (Session::runningIndex). Tasks the session places never run in it, so the
/// index only loses members as pods are evicted: users check a task's state.
struct RunningIndex {
  std::vector<TaskRef> tasks;          ///< grouped by node, in job order within a node
  std::vector<uint32_t> nodeStart;     ///< node n's tasks are [nodeStart[n], nodeStart[n + 1])
  std::vector<std::vector<int>> queueNodes;  ///< per queue: nodes running its pods (ascending)
};

/// GPU, CPU and memory amounts summed over jobs (extended resources left out).
struct CoreAmounts {
  int64_t milliGpu = 0, milliCpu = 0, memory = 0;
  CoreAmounts& operator+=(const CoreAmounts& o) {
    milliGpu += o.milliGpu;
    milliCpu += o.milliCpu;
    memory += o.memory;
    return *this;
  }
};

/// What a queue's own jobs held and asked for when the session was built, from the cache's
/// per-job totals (summed while the session builds its jobs, so that a plugin need not visit them
/// all again): `held` is what they hold less what is being released, `heldNonPreemptible` the part
/// of it held by non-preemptible jobs, `pending` what their pending pods ask.
struct QueueOpenTotals {
  CoreAmounts held, heldNonPreemptible, pending;
  QueueOpenTotals& operator+=(const QueueOpenTotals& o) {
    held += o.held;
    heldNonPreemptible += o.heldNonPreemptible;
    pending += o.pending;
    return *this;
  }
};

struct SessionQueue {
  const cache::QueueInfo* info = nullptr;
  int index = -1;
  std::string name;
  const api::Queue* queue = nullptr;  ///< null: referenced by jobs but not declared
  api::Resources allocated;           ///< own jobs, updated as tasks are allocated/evicted this cycle
  QueueOpenTotals opened;             ///< own jobs, as the session was built (not updated)
};

/// A decision for the binder, in commit order.
struct Operation {
  /// Repipeline: an Allocated task of a gang turned Pipelined (the gang waits together).
  /// Reserve: future room on a node held for an evicted pod that will come back there
  /// (consolidation); not reported to the binder.
  enum class Type { Allocate, Pipeline, Evict, Repipeline, Reserve };
  Type type = Type::Allocate;
  int job = -1, task = -1, node = -1;
  TaskState previous = TaskState::Pending;
  int previousNode = -1;
  /// Evictions: why (shared by a claimant's victims: one string, not a copy per eviction).
  std::shared_ptr<const std::string> reason;
};

/// What a session decided, in terms the binder and the status writer understand. Pointers point
/// into `snapshot`, which the result keeps alive.
struct SessionResult {
  /// One GPU of a fractional pod's placement (GPU-sharing work): the GPU group it joins or opens.
  struct GpuAssignment {
    std::string group;          ///< GPU group id (label tessera.dev/gpu-group)
    bool newGroup = false;      ///< opened by this bind: the binder creates its reservation pod
    int64_t portionMilli = 0;   ///< the pod's share of that GPU, in thousandths
    int64_t memoryMiB = 0;      ///< the pod's GPU memory limit on that GPU (0: node has no memory label)
    int device = -1;            ///< device index when known (the reservation pod's), else -1
  };
  // Session::close() makes Bind, Evict and Pipeline entries of recycled ones (recycleResult): a
  // field added to one of them must be assigned there too.
  struct Bind {
    std::string podKey, podUid, node;
    std::vector<GpuAssignment> gpus;  ///< empty unless the pod shares GPUs
    std::string jobKey;               ///< the pod's job in the snapshot (JobInfo::key)
    /// A fractional pod's compute limit (GPU_CORE_LIMIT, percent) as the cache parsed it, cluster
    /// defaults included; -1: not computed (the binder reads the pod's annotations).
    int32_t gpuCorePercent = -1;
    /// gpu-memory (MiB) the pod got from gpuSharing.defaultMemory: written on it at bind.
    int64_t defaultedMemoryMiB = 0;
  };
  struct Evict { std::string podKey, podUid, node, reason; };
  struct Pipeline { std::string podKey, node; };
  /// A job with pods left pending or pipelined this cycle, and why.
  struct JobStatus {
    const cache::JobInfo* job = nullptr;
    uint32_t message = 0;  ///< index into `messages` (jobs failing alike share one)
  };
  /// A pod left pending (or pipelined) this cycle; its message is its job's.
  struct PodStatus {
    const cache::TaskInfo* task = nullptr;
    uint32_t jobStatus = 0;              ///< index into `jobs`
    const std::string* pipelinedTo = nullptr;  ///< node name when pipelined
  };
  std::shared_ptr<const cache::Snapshot> snapshot;
  std::vector<Bind> binds;
  std::vector<Evict> evictions;
  std::vector<Pipeline> pipelined;
  /// A queue's figures this cycle (proportion plugin): what it deserves, its fair share, what it
  /// holds and asks for; `problem` when the queue is unusable (orphaned, invalid).
  struct QueueReport {
    std::string name;
    std::string parent;
    api::Resources deserved, fairShare, allocated, requested;
    std::string problem;
    /// Time-aware fairness on: the queue's recent usage of gpu, cpu and memory, as millionths of the
    /// cluster's capacity over the plugin's window (Session::QueueUsage); unset when off.
    std::optional<std::array<int64_t, 3>> usagePpm;
  };
  std::vector<QueueReport> queues;
  std::vector<JobStatus> jobs;  ///< jobs with pending or pipelined pods
  std::vector<PodStatus> pods;  ///< their pending and pipelined pods
  std::vector<std::string> messages;
  /// Annotations of PodGroups to write (stalegangeviction's tessera.dev/stale-since): the value to
  /// set, or nullopt to remove the annotation. Asked only while the PodGroup's differs; the status
  /// writer merges them into metadata.annotations.
  struct Annotation {
    std::string ns, name, key;
    std::optional<std::string> value;
  };
  std::vector<Annotation> annotations;
  const std::string& message(const JobStatus& j) const { return messages[j.message]; }
  /// The message a pod shows: its job's reason, or where it is pipelined to.
  std::string podMessage(const PodStatus& p) const;
};

/// Result of searching a node for one task.
struct Placement {
  int node = -1;           ///< -1 when nothing fits
  bool pipelined = false;  ///< fits only on releasing resources
  std::string reason;      ///< when node == -1: "insufficient nvidia.com/gpu (5 nodes), ..."
};

// ---- Extension points (KAI's session callbacks). Order functions return <0 when l goes first. ----
// Checks off the hot path return api::Status: ok, or an error whose message is the reason users
// read (pod conditions, events; its code is unused). Node predicates, called for every node a
// task is tried on, keep an allocation-free form: bool, the reason written into a buffer.
/// Orders jobs inside a queue. It decides on what the snapshot says of the jobs (priority, age),
/// not on this cycle's placements: the session sorts its jobs once (Session::jobsInOrder).
using JobOrderFn = std::function<int(const SessionJob& l, const SessionJob& r)>;
using TaskOrderFn = std::function<int(const SessionTask& l, const SessionTask& r)>;
/// Orders queues for allocate; `lJob`/`rJob` are the jobs each queue would try next (may be null).
using QueueOrderFn = std::function<int(const SessionQueue& l, const SessionQueue& r, const SessionJob* lJob,
                                       const SessionJob* rJob)>;
/// Whether queue `q` ranks the same under the plugin's QueueOrderFn with job `a` or job `b` as the
/// job it would try next (both ask the same for their next turn, say). A plugin whose
/// QueueOrderFn reads the jobs registers one to spare re-ranking a queue whose next job changed
/// (Session::queueHeadSame); without one, a new next job is taken to change the queue's rank.
using QueueHeadSameFn = std::function<bool(const SessionQueue& q, const SessionJob& a, const SessionJob& b)>;
/// Fails with a reason when the job cannot be scheduled at all this cycle (gang too small, bad spec...).
/// It may depend on the job's cache entry, on which of its pods are leaving and on the snapshot's
/// queues, priority classes, topologies and problems (Snapshot::invalid), nothing else: the session
/// asks it again only when one of its pods was evicted or came back, and the next session keeps
/// its verdict while none of those changed (Session::jobValid, seedValidity).
using JobValidFn = std::function<api::Status(const SessionJob& job)>;
/// Whether the job's placement so far satisfies it (gang: ready tasks >= minMember).
using JobReadyFn = std::function<bool(const SessionJob& job)>;
/// Task-level check before any node is considered; fails with a reason when the task cannot be placed.
using PrePredicateFn = std::function<api::Status(const SessionJob& job, const SessionTask& task)>;
/// Node filter; on failure writes a short reason (aggregated across nodes) and returns false.
using PredicateFn = std::function<bool(const SessionTask& task, const SessionNode& node, std::string& reason)>;
/// Node score; higher is better. Scores of all plugins are summed. Integers: no float ties.
using NodeOrderFn = std::function<int64_t(const SessionTask& task, const SessionNode& node)>;
/// GPU score within a node for a fractional task; higher is better. `gpuGroup` indexes
/// node.gpuGroups, or is -1 for a whole idle GPU the task would start a new group on.
using GpuOrderFn = std::function<int64_t(const SessionTask& task, const SessionNode& node, int gpuGroup)>;
/// Victim filters for preempt / reclaim: may `victim` be evicted for `claimant`? Of the claimant, a
/// verdict reads its queue, priority and preemptibility, and whatever else its plugin's
/// ClaimantKeyFn writes: claimants alike in these get one verdict for every victim while nothing is
/// committed (the victim search keeps node rooms and rankings per claimant key).
using VictimFn = std::function<bool(const SessionJob& claimant, const SessionTask& victim)>;
/// Appends to `key` what else of the claimant a plugin's VictimFn reads (proportion's reclaim: the
/// request of the claimant's turn, which its saturation and quota checks add to its queue).
using ClaimantKeyFn = std::function<void(const SessionJob& claimant, std::string& key)>;
/// A reclaimable filter's bound per victim queue (addReclaimBoundSplitFn): one entry per queue.
using ReclaimQueuesFn = std::function<void(const SessionJob& claimant, std::vector<uint8_t>& perQueue)>;
/// A reclaimable filter's own verdict per victim queue as things stand (addReclaimBoundSplitFn's
/// `queuesNow`): writes perQueue[q] for each q of `queues` (perQueue has one entry per queue).
using ReclaimQueuesNowFn =
    std::function<void(const SessionJob& claimant, std::span<const int> queues, std::vector<uint8_t>& perQueue)>;
/// A reclaimable filter's bound's victim-job part (addReclaimBoundSplitFn), a preemptable filter's
/// too (addPreemptableSplitFn).
using VictimJobFn = std::function<bool(const SessionJob& victimJob)>;
/// A preemptable filter's part that reads, of the claimant and of the victim's job, only their
/// queues and priorities (addPreemptableSplitFn).
using VictimPairFn = std::function<bool(const SessionJob& claimant, const SessionJob& victimJob)>;
/// Queue capacity check for placing `request` of `job`; fails with a reason (OverLimit...) when it may not.
using CapacityFn = std::function<api::Status(const SessionJob& job, const api::Resources& request)>;
/// Orders victims: <0 when `l` should be evicted before `r`.
using VictimOrderFn = std::function<int(const SessionTask& l, const SessionTask& r)>;
/// A fingerprint of the session state a plugin's victim order reads (what queues hold, which pods
/// run): at two moments with equal fingerprints it orders every two pods alike. `live` false: the
/// order in force (while held, HeldVictimOrder, the one the hold took); true: as things stand.
using VictimOrderVersionFn = std::function<uint64_t(bool live)>;
/// Called with pods in victim order until it returns false (VictimWalkFn).
using VictimVisitFn = std::function<bool(const SessionTask& pod)>;
/// Asked by a walk (VictimWalkFn) of each top-level queue (its index in Session::queues()) before
/// it walks the pods under it: false when none of them need be visited.
using VictimTreeFn = std::function<bool(int topQueue)>;
/// Gives every running pod of the session to `visit` in the plugin's victim order (leaving pods,
/// no victims, may come too), but those under a top-level queue `tree` (when given) says no to.
using VictimWalkFn = std::function<void(const VictimVisitFn& visit, const VictimTreeFn& tree)>;
/// Gives the running pods of queue `queue` itself (not its children's; leaving pods may come too)
/// to `visit` in the plugin's victim order; false, visiting none, when it cannot walk that order now.
using QueueVictimWalkFn = std::function<bool(int queue, const VictimVisitFn& visit)>;
/// Whether any pod under top-level queue `topQueue` may be a reclaim victim of `claimant` as things
/// stand: false only when the plugin's VictimFn refuses every one of them.
using ReclaimTreeFn = std::function<bool(const SessionJob& claimant, int topQueue)>;
/// A check of a whole job; fails with a reason (e.g. whether the job's queue may reclaim).
using JobCheckFn = std::function<api::Status(const SessionJob& job)>;
/// Notified after a task's state changes in the session (allocate, pipeline, evict, and undo).
using TaskEventFn = std::function<void(const SessionTask& task)>;
/// A subset of nodes a job may be placed in (a topology domain), tried as a whole.
struct NodeDomain {
  /// "rack=rack-2" or a path "zone=z1/rack=r2": shown in reasons, and names this node set within
  /// a session (findPlacement keeps a ranking per domain name).
  std::string name;
  /// Node indices, ascending. Not owned: its maker keeps them for the session (the topology
  /// plugin's domain tree, Session::allNodes()), so that handing a job its domains copies no list.
  std::span<const int> nodes;
  /// Domains of equal rank are alternatives of the same level: the victim search compares their
  /// victim sets and takes the best; a lower rank (a more preferred level) is tried first.
  int rank = 0;
};
/// The subsets of nodes a job must be placed inside.
struct JobDomains {
  std::vector<NodeDomain> domains;  ///< in the order to try them; empty: none can hold the job
  /// Why the job cannot be placed when `domains` is empty; otherwise the plugin's word on a level
  /// it could not use ("" when none).
  std::string reason;
};
/// Which room a domain must have to be offered: what is free (or releasing) now, what is free now
/// without what is releasing (placements that may not be pipelined: backfill), or what it could
/// have once running pods are evicted (the victim actions: the search decides what to evict).
enum class DomainRoom { Free, Now, WithVictims };
/// The domains a job must be placed in; null when the plugin does not constrain this job. The
/// answer is shared: one a plugin keeps for jobs alike is handed out again without a copy.
using JobDomainsPtr = std::shared_ptr<const JobDomains>;
using JobDomainsFn = std::function<JobDomainsPtr(const SessionJob& job, DomainRoom room)>;
/// Appends to the task's placement key whatever, besides the pod's own scheduling fields (requests,
/// selectors, affinity, tolerations, host ports, Tessera's placement annotations) and the node's
/// state, this plugin's predicates and scores depend on (e.g. the job, for constraints
/// that depend on where its siblings are). Tasks with equal keys share cached node rankings.
using PlacementKeyFn = std::function<void(const SessionTask& task, std::string& key)>;
/// Whether a plugin's PlacementKeyFn may append anything for some task of `job`: false promises it
/// appends nothing for any of them, so the job's pods keep their own classes and a job whose
/// pending pods ask alike is one class without reading them. Omitted: it may, for every job.
using PlacementKeyJobFn = std::function<bool(const SessionJob& job)>;
/// What a plugin's part of the placement key stands for: state its predicates read (which nodes
/// pass), or state only its scores read (the order of the nodes that pass). Failure tallies, which
/// remember only which nodes pass and why, are shared by tasks whose verdict parts are equal.
enum class KeyPart { Verdicts, Order };

class Statement;

/// Hands a cycle's result back once nothing reads it any more: its per-job and per-pod lists are
/// kept, emptied, for the next session's result (SchedulerState::sessionStorage), so a cycle does
/// not allocate and fault them in anew. Optional: a result kept elsewhere (the UI) is just freed.
void recycleResult(SchedulerState& state, SessionResult&& result);

class Session {
 public:
  /// Builds the working state from `snapshot`. Plugins are opened by open(). `state` is what the
  /// scheduler remembers across cycles (it must outlive the session); null: a state of the
  /// session's own, forgotten when it closes (tests of one cycle).
  Session(std::shared_ptr<const cache::Snapshot> snapshot, const Config& config, const api::Clock& clock,
          SchedulerState* state = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Calls onSessionOpen on every plugin of the config, in tier order.
  void open();
  /// Runs every configured action in order.
  void runActions();
  /// Calls onSessionClose on every plugin and returns the decisions (committed operations,
  /// pending reasons). The session must not be used afterwards.
  SessionResult close();

  const cache::Snapshot& snapshot() const { return *snapshot_; }
  /// The snapshot itself, for a plugin that keeps it alive to match the next session's jobs with
  /// this one's (JobInfo objects are shared while unchanged).
  const std::shared_ptr<const cache::Snapshot>& sharedSnapshot() const { return snapshot_; }
  const Config& config() const { return config_; }
  api::Time now() const { return now_; }
  /// What plugins and actions remember across cycles and config reloads (state.h).
  SchedulerState& state() { return *state_; }

  std::vector<SessionNode>& nodes() { return nodes_; }
  const std::vector<SessionNode>& nodes() const { return nodes_; }
  std::vector<SessionJob>& jobs() { return jobs_; }
  const std::vector<SessionJob>& jobs() const { return jobs_; }
  std::vector<SessionQueue>& queues() { return queues_; }
  const std::vector<SessionQueue>& queues() const { return queues_; }
  SessionTask& task(int job, int index) { return jobs_[job].tasks[index]; }
  /// Every task of the session has one slot, 0 .. taskCount() - 1 (its place in the session's one
  /// array of tasks): per-task arrays of actions and plugins index by it.
  size_t taskSlot(const SessionTask& task) const { return slotOf(task); }
  size_t taskCount() const { return tasks_.size(); }
  int findNode(const std::string& name) const;
  /// The running tasks per node (resolving each one's node), built on first use and kept for the
  /// session: the victim actions share it.
  const RunningIndex& runningIndex();
  int findJob(const std::string& key) const;
  int findQueue(const std::string& name) const;

  // ---- registration, from Plugin::onSessionOpen (session_plugins.cpp) ----
  void addJobOrderFn(const std::string& plugin, JobOrderFn fn);
  void addTaskOrderFn(const std::string& plugin, TaskOrderFn fn);
  void addQueueOrderFn(const std::string& plugin, QueueOrderFn fn);
  void addQueueHeadSameFn(const std::string& plugin, QueueHeadSameFn fn);
  void addJobValidFn(const std::string& plugin, JobValidFn fn);
  void addJobReadyFn(const std::string& plugin, JobReadyFn fn);
  void addPrePredicateFn(const std::string& plugin, PrePredicateFn fn);
  void addPredicateFn(const std::string& plugin, PredicateFn fn);
  void addNodeOrderFn(const std::string& plugin, NodeOrderFn fn);
  void addGpuOrderFn(const std::string& plugin, GpuOrderFn fn);
  void addPreemptableFn(const std::string& plugin, VictimFn fn);
  /// `bound`: an upper bound of `fn` over a claimant's turn, where `fn` reads what the turn's own
  /// victims change (proportion: the claimant side's allocation, which victims under a shared
  /// ancestor lower): a pod `fn` refuses now but may accept once other victims are gone must pass
  /// it. The victim search sizes a topology domain by it before searching there. None: `fn`.
  void addReclaimableFn(const std::string& plugin, VictimFn fn, ClaimantKeyFn key = nullptr, VictimFn bound = nullptr);
  /// A reclaimable filter's bound (addReclaimableFn) in two parts: `queues` writes, per queue of
  /// the session, whether the claimant's queue rules let a pod of that queue be taken; `job`,
  /// whether a victim job's own state does. Its bound must be exactly `queues[victim job's queue]
  /// && job(victim job)` for every pod of a job with a queue, and false for the others. The victim
  /// search then sizes domains by queue, and keeps the sizes of one such verdict across commits.
  /// `queuesNow` (optional): the same split of the filter itself, as things stand: for every queue
  /// it is asked about, the filter must be exactly `queuesNow[that queue] && job(victim job)` for
  /// every running pod of a job of that queue. The victim search then asks the queue rules once
  /// per queue rather than once per victim job.
  void addReclaimBoundSplitFn(const std::string& plugin, ReclaimQueuesFn queues, VictimJobFn job,
                              ReclaimQueuesNowFn queuesNow = nullptr);
  /// A preemptable filter (addPreemptableFn) in two parts: `job`, whether a victim job's own state
  /// lets its pods go; `pair`, whether the claimant lets a pod of that job go, reading of the two
  /// jobs only their queues and priorities. The filter must be exactly `job(victim job) &&
  /// pair(claimant, victim job)`. With every preemptable filter split, the victim search sizes
  /// preempt's domains by what each node's pods hold per queue and priority, read once per node.
  void addPreemptableSplitFn(const std::string& plugin, VictimJobFn job, VictimPairFn pair);
  /// A reclaimable filter's word on whole top-level trees (reclaimableUnder()).
  void addReclaimTreeFn(const std::string& plugin, ReclaimTreeFn fn);
  void addCapacityFn(const std::string& plugin, CapacityFn fn);
  void addAllocateHandler(const std::string& plugin, TaskEventFn onAllocate, TaskEventFn onDeallocate);
  void addPlacementKeyFn(const std::string& plugin, PlacementKeyFn fn, KeyPart part = KeyPart::Verdicts,
                         PlacementKeyJobFn keysJob = nullptr);
  void addJobDomainsFn(const std::string& plugin, JobDomainsFn fn);
  void addCanReclaimFn(const std::string& plugin, JobCheckFn fn);
  void addReclaimBoundsFn(const std::string& plugin, CapacityFn fn);
  /// `version`: for an order that reads session state (what queues hold), its fingerprint.
  /// `byJobsInQueue`: two pods of one queue compare by their own and their jobs' states alone
  /// (SessionTask::state, SessionJob::version's fingerprint), not by anything else in the session.
  void addVictimOrderFn(const std::string& plugin, VictimOrderFn fn, VictimOrderVersionFn version = nullptr,
                        bool byJobsInQueue = false);
  /// For an order built lazily while held: told before a pod's state changes in a hold that keeps
  /// its order (HeldVictimOrder with `keep`), while what it would build is still as the hold took
  /// it (the plugin builds there what the change moves, rather than at its first comparison,
  /// which may come inside a trial).
  void addVictimOrderKeepFn(const std::string& plugin, TaskEventFn beforeChange);
  /// The plugin's victim order as one walk (its VictimOrderFn's order, ties and all).
  /// `queueWalk`: the same order over one queue's own pods.
  void addVictimWalkFn(const std::string& plugin, VictimWalkFn fn, QueueVictimWalkFn queueWalk = nullptr);

  // ---- queries over the registered callbacks (session_plugins.cpp) ----
  /// Strict total orders: plugins first (tier order), then the session's unique tie-break.
  bool jobLess(const SessionJob& l, const SessionJob& r) const;
  /// Every job's index in jobLess order, sorted once per session (JobOrderFn's contract).
  const std::vector<int>& jobsInOrder() const;
  /// Those of them with pending pods when first asked, outside any statement: no job gains any
  /// later in the session (pods leave the pending state, and come back to it only by a rollback
  /// of a statement), so the jobs an action could give a turn are all here (forEachJobTurn). The
  /// order jobsInOrder() gives them, sorted on their own.
  const std::vector<int>& pendingJobsInOrder() const;
  bool taskLess(const SessionTask& l, const SessionTask& r) const;
  /// The plugins' task orders alone (the first that does not tie; 0 when all do).
  int pluginTaskOrder(const SessionTask& l, const SessionTask& r) const;
  bool queueLess(const SessionQueue& l, const SessionQueue& r, const SessionJob* lJob, const SessionJob* rJob) const;
  /// Whether `q` compares with every other queue under queueLess exactly as before when its next
  /// job changes from `a` to `b`: every plugin with a QueueOrderFn has a QueueHeadSameFn and says so.
  bool queueHeadSame(const SessionQueue& q, const SessionJob& a, const SessionJob& b) const;
  /// Fails when the job cannot be scheduled this cycle: its queue is missing, or a plugin says so.
  /// Asked of every pending job by every action: the verdict is kept per job until one of its pods
  /// is evicted or its eviction undone (JobValidFn's contract).
  api::Status jobValid(const SessionJob& job) const;
  bool jobReady(const SessionJob& job) const;
  /// The job's pending tasks in the order they are tried (KAI's task selection): while the gang is
  /// below its minimum, the pods that make up each subgroup's missing minMember first (subgroups in
  /// spec order, task order within one), then the others in task order. `minimum`, when given, is
  /// set to how many of the first ones make up the missing gang minimum (each subgroup's, then the
  /// PodGroup's minMember); 0 when the job is ready.
  std::vector<int> pendingTaskOrder(const SessionJob& job, int* minimum = nullptr) const;
  /// The same into `order` (its storage reused).
  void pendingTaskOrder(const SessionJob& job, std::vector<int>& order, int* minimum = nullptr) const;
  api::Status prePredicate(const SessionJob& job, const SessionTask& task) const;
  bool predicate(const SessionTask& task, const SessionNode& node, std::string& reason) const;
  int64_t nodeScore(const SessionTask& task, const SessionNode& node) const;
  int64_t gpuScore(const SessionTask& task, const SessionNode& node, int gpuGroup) const;
  bool preemptable(const SessionJob& claimant, const SessionTask& victim) const;
  bool reclaimable(const SessionJob& claimant, const SessionTask& victim) const;
  /// Whether every preemptable filter is split (addPreemptableSplitFn), and every split is a
  /// filter's; then preemptable() is exactly preemptableJob(victim's job) &&
  /// preemptablePair(claimant, victim's job). The two parts are asked only where this holds.
  bool preemptableSplit() const;
  /// The victim job's part of preemptable() (every split's).
  bool preemptableJob(const SessionJob& victimJob) const;
  /// The queue-and-priority part of preemptable() (every split's).
  bool preemptablePair(const SessionJob& claimant, const SessionJob& victimJob) const;
  /// Whether `victim` may become reclaimable for `claimant` in its turn (each filter's bound).
  bool reclaimableBound(const SessionJob& claimant, const SessionTask& victim) const;
  /// False when no pod under top-level queue `topQueue` is reclaimable() for `claimant` as things
  /// stand (a filter's ReclaimTreeFn said so); true says nothing.
  bool reclaimableUnder(const SessionJob& claimant, int topQueue) const;
  /// Appends the reclaimable filters' ClaimantKeyFn parts for `claimant` to `key`.
  void reclaimClaimantKey(const SessionJob& claimant, std::string& key) const;
  /// reclaimableBound() for `claimant` per victim queue (every filter's split, addReclaimBoundSplitFn,
  /// in `perQueue`, one entry per queue); false when a reclaimable filter has no split.
  bool reclaimBoundQueues(const SessionJob& claimant, std::vector<uint8_t>& perQueue) const;
  /// The victim job's part of reclaimableBound() and reclaimable() (every split's); asked only
  /// where reclaimBoundQueues() or reclaimQueuesNow() answered.
  bool reclaimBoundJob(const SessionJob& victimJob) const;
  /// reclaimable() for `claimant` per victim queue of `queues` as things stand (every filter's
  /// `queuesNow`, addReclaimBoundSplitFn, in `perQueue`: one entry per queue, 0 for the others);
  /// false when a reclaimable filter has none.
  bool reclaimQueuesNow(const SessionJob& claimant, std::span<const int> queues, std::vector<uint8_t>& perQueue) const;
  api::Status capacityCheck(const SessionJob& job, const api::Resources& request) const;
  /// Whether the job's queue may take resources back from other queues (a reason when not).
  /// Without a registered check, no job may reclaim.
  api::Status canReclaim(const SessionJob& job) const;
  /// Whether a reclaimer may take `request` more as things stand, by the rules that depend on
  /// where its victims are (its queue's ancestors staying within their fair shares: victims in
  /// sibling queues make room there, others do not). Without a registered check, always.
  api::Status reclaimBounds(const SessionJob& job, const api::Resources& request) const;
  /// Strict total order of victims: plugins first, then the newest pod, then the pod key.
  bool victimLess(const SessionTask& l, const SessionTask& r) const;
  /// While held (HeldVictimOrder: one claimant's victim search), a victim order that depends on
  /// what queues hold keeps the order it had when the hold began, as KAI builds its victim queue
  /// once per claimant: that order already counts each victim as gone once the ones before it
  /// are, so the search's own evictions do not change it. Each hold is a new epoch.
  /// `keep`: the plugins that build the held order lazily are told before each change of a pod
  /// in the hold (addVictimOrderKeepFn): comparisons across queues (reclaim, consolidation) then
  /// read the order as the hold began whichever trial makes the first. Preempt compares pods of
  /// one queue, by their jobs as they stand: nothing to keep.
  void holdVictimOrder(bool on, bool keep = false) {
    if (on && !victimOrderHeld_) ++victimOrderEpoch_;
    victimOrderHeld_ = on;
    victimOrderKept_ = on && keep;
  }
  bool victimOrderHeld() const { return victimOrderHeld_; }
  bool victimOrderKept() const { return victimOrderKept_; }
  uint64_t victimOrderEpoch() const { return victimOrderEpoch_; }
  /// The plugins' victim order fingerprints (VictimOrderVersionFn) combined: equal values at two
  /// moments, one victim order (a list sorted at the one is sorted at the other). `live` false:
  /// the order in force (held: as the hold took it); true: as things stand now.
  uint64_t victimOrderVersion(bool live = false) const;
  /// Gives the running pods (and maybe leaving ones) to `visit` in victim order (victimLess) until
  /// it returns false; false when no walk gives that order (a plugin without one orders victims, or
  /// several do).
  bool walkVictims(const VictimVisitFn& visit, const VictimTreeFn& tree = nullptr) const;
  /// The same for the running pods of queue `queue` itself (its jobs' pods, not its children's);
  /// false, visiting none, when no walk gives that order now.
  bool walkQueueVictims(int queue, const VictimVisitFn& visit) const;
  /// Whether victimLess orders two pods of one queue by their own and their jobs' states alone (every
  /// victim order said so, addVictimOrderFn's byJobsInQueue; the tie-break reads the pods alone): a
  /// list of one queue's pods sorted stays sorted while none of their jobs' versions moves.
  bool victimOrderByJobsInQueue() const { return victimOrderByJobs_; }
  /// The domains a job must be placed in (first plugin that constrains it wins); null = anywhere.
  JobDomainsPtr jobDomains(const SessionJob& job, DomainRoom room = DomainRoom::Free) const;

  // ---- data plugins share within a session ----
  /// Time-aware fairness: each queue's recent usage per resource (gpu, cpu, memory) as a fraction
  /// of the cluster's capacity over the window, in millionths; and k in thousandths.
  struct QueueUsage {
    std::map<std::string, std::array<int64_t, 3>> usagePpm;
    int64_t kMilli = 1000;
  };
  void setQueueUsage(QueueUsage usage) { queueUsage_ = std::move(usage); }
  const std::optional<QueueUsage>& queueUsage() const { return queueUsage_; }
  /// Whether the configured placement spreads (node or GPU axis; set by the nodeorder plugin):
  /// consolidation is then off, as in KAI.
  void setSpreadPlacement(bool spread) { spreadPlacement_ = spread; }
  bool spreadPlacement() const { return spreadPlacement_; }
  /// Per-queue figures for the timeline and Queue status (filled by the proportion plugin).
  void setQueueReports(std::vector<SessionResult::QueueReport> reports) { queueReports_ = std::move(reports); }

  // ---- placement (placement.cpp; fits and GPU groups: session_gpu.cpp) ----
  /// Whether the task fits on the node's idle resources (`future`: idle + releasing - promised),
  /// its GPU share included (a fractional task needs a group with room, or a whole GPU, per device).
  bool fits(const SessionTask& task, const SessionNode& node, bool future) const;
  /// Whether a fractional task finds its devices on the node (idle or future), ignoring cpu/memory.
  bool gpuShareFits(const SessionTask& task, const SessionNode& node, bool future) const;
  /// The node.gpuGroups indices a fractional task was given this session (empty otherwise).
  const std::vector<int>& gpuGroupsOf(const SessionTask& task) const;
  /// Finds the best node for `task`: nodes passing every predicate where the task fits on idle
  /// resources, best score first (ties: node name); else, when `allowPipeline`, on future idle
  /// (idle + releasing - promised). Fails with an aggregated reason.
  /// Tasks with the same placement key share a ranking of nodes that is kept up to date lazily
  /// (only nodes changed since are re-evaluated), so a burst of similar pods costs O(log n) each.
  /// Contract for plugins: predicates and scores depend only on the task (its placement key), the
  /// node's session state and the domain restriction in force (part of the ranking's key).
  Placement findPlacement(const SessionTask& task, bool allowPipeline);
  /// The full scan behind findPlacement, without caches (also gives the failure reasons).
  Placement scanPlacement(const SessionTask& task, bool allowPipeline) const;
  /// Restricts findPlacement / scanPlacement to `domain` (null: every node). The domain must
  /// outlive the restriction. findPlacement keeps rankings per (placement key, domain name): a
  /// name stands for one set of nodes within a session.
  void restrictTo(const NodeDomain* domain) { domain_ = domain; }
  const NodeDomain* restriction() const { return domain_; }
  /// While off, a findPlacement that finds no node may leave its reason empty instead of building
  /// it from the failure tally (for callers that only ask whether and where a pod fits). On by
  /// default; QuietPlacement turns it off for a scope.
  void explainFailures(bool on) { explain_ = on; }
  bool explainsFailures() const { return explain_; }
  /// Every node index, ascending (a domain of the whole cluster points at it).
  const std::vector<int>& allNodes() const;
  /// Every change of a node's working state is logged here (its version bumped): callers keep
  /// their own lazily refreshed views of the nodes with it (NodeRanking, as findPlacement does).
  const NodeChangeLog& nodeChanges() const { return nodeChanges_; }
  /// The task's placement class, a small number (session-wide) under which findPlacement caches
  /// node rankings: what the pod asks for and where it may go (its own key, built once per pod by
  /// the cache: TaskInfo::placementKey), and what plugins add for it now (their key parts). Tasks
  /// whose own keys are equal and to which plugins add the same part have equal classes, others
  /// not. Cheap after a task's first call: callers compare and combine classes instead of keys.
  int placementClass(const SessionTask& task) const;
  /// KAI's scheduling signature of the job's next turn, as a small number: jobs with one signature
  /// place alike on the same nodes (their pending pods' placement classes, queue, priority,
  /// preemptibility, `missing` pods the turn still needs, subgroups' names and missing minimums,
  /// topology constraint; docs/fairness.md "Jobs alike are searched once"). -1 for a job like
  /// no other: constrained by topology with pods placed (its domains depend on where they are), or
  /// with constrained subgroups. Kept per job while its tasks stay as they are.
  int jobSignature(const SessionJob& job, int missing) const;
  /// Asks for job `job`'s (an index) entries of the per-job memos every turn reads (jobSignature,
  /// jobValid), ahead of its turn: jobs take turns far apart in memory.
  void prefetchJobMemos(int job) const {
    const auto j = static_cast<size_t>(job);
    if (j < signatureCache_.size()) __builtin_prefetch(&signatureCache_[j]);
    if (j < validCache_.size()) __builtin_prefetch(&validCache_[j]);
  }
  /// Whole GPUs free on the best node, counting releasing resources (an upper bound for any task).
  int64_t maxFreeGpus() const;
  /// Whole GPUs idle now on the best node (releasing ones not counted): no task asking more of
  /// its node (nodeRequest) fits anywhere without pipelining. Counted over the nodes when asked.
  int64_t maxIdleGpus() const;
  /// Over the tasks pending at the session's start (tasks only leave the pending state in a
  /// session, and come back to it only by a rollback: every task pending at any point of it is one
  /// of them): the fewest whole GPUs one that shares no GPU asks of its node (INT64_MAX: none)...
  int64_t pendingGpuFloor() const { return pendingGpuFloor_; }
  /// ...whether one shares a GPU (it may fit in a GPU group's room, maxGroupRoom())...
  bool pendingSharesGpu() const { return pendingSharesGpu_; }
  /// ...and the fewest milli-GPUs one needs as consolidation counts them (its node request's, plus
  /// its share when it shares a GPU; INT64_MAX: none pending).
  int64_t pendingGpuMilliFloor() const { return pendingGpuMilliFloor_; }
  /// Jobs with pods pending at the session's start whose PodGroup constrains topology
  /// (SessionJob::topologyConstrained), counted as the jobs were built: a plugin that has nothing
  /// to do without one need not read every job to learn that.
  int32_t pendingTopologyJobs() const { return pendingTopologyJobs_; }
  /// The most units free now in any GPU group (releasing ones not counted; 0 when none is).
  int64_t maxGroupRoom() const;
  /// The reason given when no node has enough GPUs free: "insufficient nvidia.com/gpu (N nodes)".
  const std::string& gpuShortageReason() const { return gpuShortage_; }

  // ---- why jobs wait, and the decisions (session.cpp) ----
  /// Records why a job could not be (fully) placed this cycle (latest wins; empty clears it).
  /// Messages are interned: thousands of jobs failing for one reason share one string.
  void setUnschedulable(SessionJob& job, std::string_view reason);
  /// The job's latest reason ("" when none).
  const std::string& reasonOf(const SessionJob& job) const;
  /// A scratch buffer for building messages without allocating (valid until the next call).
  std::string& scratch() {
    scratch_.clear();
    return scratch_;
  }

  /// Asks for an annotation of the job's PodGroup to be set (`value`) or removed (nullopt) once the
  /// session's decisions are applied (SessionResult::annotations). Ignored for a job without one.
  void annotate(const SessionJob& job, std::string key, std::optional<std::string> value);

  /// Operations committed so far this session, in order.
  const std::vector<Operation>& committed() const { return committed_; }

  /// Queues whose allocation changed (allocate, pipeline, evict and their undos) since the last
  /// call, each once, in the order of their first change, into `out` (its old contents go); the
  /// list is emptied. Queue orders re-rank exactly these (and their ancestors) instead of
  /// re-sorting every queue.
  void takeChangedQueues(std::vector<int>& out);
  /// The jobs of queue `queue` in the order their tasks changed state this session (each change and
  /// each undo): whoever reads it keeps how far it read.
  const std::vector<int>& jobChanges(int queue) const { return jobChanges_[static_cast<size_t>(queue)]; }

 private:
  friend class Statement;  // changes the working state through apply* / undo*

  // ---- state, lookups, open and close (session.cpp) ----
  friend struct SessionStorage;
  void buildState();
  /// Fills nodes_ (sized by the snapshot) and what is built of them: GPU groups, placement index.
  void buildNodes();
  /// What a thread's share of the session build adds up over its jobs: the least their pending
  /// pods ask (pendingGpuFloor() and the others) and each queue's totals (SessionQueue::opened).
  struct BuildTotals {
    int64_t gpuFloor = INT64_MAX;
    bool sharesGpu = false;
    int64_t gpuMilliFloor = INT64_MAX;
    int32_t topologyJobs = 0;  ///< pendingTopologyJobs()
    std::vector<QueueOpenTotals> opened;  ///< per queue
    void add(const BuildTotals& o);
  };
  /// Builds jobs_[from, to) and their tasks, from tasks_[offset] on, and adds the jobs to `totals`;
  /// returns where its tasks end. Reads only the snapshot and the tables built before it, writes
  /// only its own jobs, tasks and `totals`: two ranges may be built at once.
  size_t buildJobs(size_t from, size_t to, size_t offset, const api::PriorityClass* globalDefault, bool indexRunning,
                   BuildTotals& totals);
  /// close()'s parts. Writes the result's entries of the committed operations in commit order:
  /// its evictions, or its binds and pipelined pods (the two may run at once: each reads only the
  /// session and writes only its own lists).
  void writeOperations(SessionResult& r, SessionStorage& storage, bool evictionsOnly) const;
  /// Lists the jobs with pods left pending (and tried) or pipelined, and those pods; a pipelined job
  /// with no reason yet gets one.
  void listWaitingJobs(SessionResult& r);

  std::shared_ptr<const cache::Snapshot> snapshot_;
  const Config& config_;
  const api::Clock& clock_;
  api::Time now_;
  std::unique_ptr<SchedulerState> ownState_;  ///< when the caller gave none
  SchedulerState* state_ = nullptr;
  std::vector<SessionResult::Annotation> annotations_;
  std::vector<SessionNode> nodes_;
  std::vector<SessionJob> jobs_;
  std::vector<SessionQueue> queues_;
  std::vector<SessionTask> tasks_;  ///< every job's tasks, contiguous; jobs hold spans into it
  std::map<std::string, int> queueIndex_;
  /// findNode's table, built on its first call (victim actions ask it for every running pod):
  /// open addressing by name hash, each slot the hash's upper 32 bits and the node's index (~0:
  /// empty). The names are copied end to end into nodeNames_ (node i's ends at nodeNameEnd_[i]),
  /// so a probe compares names at hand rather than reaching into each node's NodeInfo.
  mutable std::vector<uint64_t> nodeSlots_;
  mutable std::string nodeNames_;
  mutable std::vector<uint32_t> nodeNameEnd_;
  RunningIndex running_;
  bool runningBuilt_ = false;
  std::vector<Operation> committed_;
  bool closed_ = false;
  std::optional<QueueUsage> queueUsage_;
  bool spreadPlacement_ = false;
  std::vector<SessionResult::QueueReport> queueReports_;
  std::vector<int> changedQueues_;    ///< see takeChangedQueues
  std::vector<std::vector<int>> jobChanges_;  ///< per queue: see jobChanges
  std::vector<char> queueChanged_;    ///< per queue: listed in changedQueues_
  std::vector<std::string> reasons_;  ///< interned messages
  std::map<std::string, int32_t, std::less<>> reasonIndex_;
  std::string scratch_;

  // ---- plugin hooks: registration and dispatch (session_plugins.cpp) ----
  /// Before a Statement changes `task` (or undoes a change): addVictimOrderKeepFn's plugins.
  void beforeTaskChange(const SessionTask& task) const {
    if (victimOrderKept_)
      for (const auto& f : victimOrderKeep_) f.fn(task);
  }
  void notifyAllocate(const SessionTask& task) const;
  void notifyDeallocate(const SessionTask& task) const;

  template <class Fn>
  struct Named {
    std::string plugin;
    Fn fn;
  };
  std::vector<Named<JobOrderFn>> jobOrder_;
  std::vector<Named<TaskOrderFn>> taskOrder_;
  std::vector<Named<QueueOrderFn>> queueOrder_;
  std::vector<Named<QueueHeadSameFn>> queueHeadSame_;
  mutable std::vector<int> headSameOf_;  ///< per queueOrder_ entry: its plugin's queueHeadSame_, or -1
  std::vector<Named<JobValidFn>> jobValid_;
  std::vector<Named<JobReadyFn>> jobReady_;
  std::vector<Named<PrePredicateFn>> prePredicate_;
  std::vector<Named<PredicateFn>> predicate_;
  std::vector<Named<NodeOrderFn>> nodeOrder_;
  std::vector<Named<GpuOrderFn>> gpuOrder_;
  std::vector<Named<VictimFn>> preemptable_;
  std::vector<Named<VictimFn>> reclaimable_;
  std::vector<VictimFn> reclaimableBounds_;  ///< per reclaimable_ filter: its bound (empty: the filter)
  struct ReclaimBoundSplit {
    std::string plugin;
    ReclaimQueuesFn queues;
    VictimJobFn job;
    ReclaimQueuesNowFn queuesNow;  ///< may be empty
  };
  std::vector<ReclaimBoundSplit> reclaimSplits_;
  /// Whether every reclaimable filter has a split (with `queuesNow` too when `now`).
  bool reclaimFiltersSplit(bool now) const;
  /// perQueue[q] for each q of `queues`: whether every filter's split (its `queuesNow` when `now`,
  /// else its `queues`) lets the claimant take from q; 0 for the other queues.
  void combineReclaimSplits(const SessionJob& claimant, std::span<const int> queues, bool now,
                            std::vector<uint8_t>& perQueue) const;
  mutable std::vector<int> allQueues_;  ///< every queue's index (reclaimBoundQueues), built on first use
  struct PreemptableSplit {
    std::string plugin;
    VictimJobFn job;
    VictimPairFn pair;
  };
  std::vector<PreemptableSplit> preemptSplits_;  ///< (used only where every one is a filter's: preemptableSplit)
  /// Whether `plugin` registered a reclaimable filter (a split counts only for one).
  bool reclaimFilterOf(const std::string& plugin) const;
  mutable std::vector<uint8_t> splitScratch_;  ///< reclaimBoundQueues(), reclaimQueuesNow(): a further split's verdicts
  std::vector<Named<ReclaimTreeFn>> reclaimTrees_;
  std::vector<ClaimantKeyFn> reclaimKeys_;  ///< the reclaimable filters' ClaimantKeyFn, those given
  std::vector<Named<CapacityFn>> capacity_;
  std::vector<Named<TaskEventFn>> onAllocate_;
  std::vector<Named<TaskEventFn>> onDeallocate_;
  std::vector<Named<PlacementKeyFn>> placementKey_;  ///< every plugin's part (KeyPart::Verdicts first)
  std::vector<PlacementKeyJobFn> placementKeyJobs_;  ///< parallel to placementKey_ (null: every job)
  size_t verdictKeyFns_ = 0;                          ///< how many of them are KeyPart::Verdicts
  std::vector<Named<JobDomainsFn>> jobDomains_;
  std::vector<Named<JobCheckFn>> canReclaim_;
  std::vector<Named<CapacityFn>> reclaimBounds_;
  std::vector<Named<VictimOrderFn>> victimOrder_;
  bool victimOrderByJobs_ = true;  ///< every victimOrder_ said byJobsInQueue
  std::vector<Named<VictimOrderVersionFn>> victimOrderVersion_;
  std::vector<Named<TaskEventFn>> victimOrderKeep_;
  std::vector<Named<VictimWalkFn>> victimWalk_;
  std::vector<Named<QueueVictimWalkFn>> queueVictimWalk_;  ///< one per victimWalk_ (may be empty)

  // ---- placement search, its node rankings and indexes (placement.cpp) ----
  /// Builds the GPU level index and the change log from the nodes' initial state.
  void buildPlacementIndex();
  /// Every change of a node goes through here: GPU level index, version, change log.
  void nodeChanged(const SessionNode& node);
  int gpuLevel(const SessionNode& node) const;

  /// A node as ranked for one placement key: feasible now before feasible only in the future,
  /// then higher score, then lower index. `version` invalidates it when the node changes.
  struct RankedNode {
    bool fitsNow = false;
    int64_t score = 0;
    int node = -1;
    uint32_t version = 0;
  };
  struct RankedBefore {
    bool operator()(const RankedNode& a, const RankedNode& b) const {
      if (a.fitsNow != b.fitsNow) return a.fitsNow;
      if (a.score != b.score) return a.score > b.score;
      return a.node < b.node;
    }
  };
  /// Evaluates `node` for `task`: nullopt when a predicate fails or it does not fit even later.
  std::optional<RankedNode> rank(const SessionTask& task, const SessionNode& node) const;
  /// The reasons one node gives, in strings kept across judgements: clear() keeps them and their
  /// room, so that judging thousands of nodes a cycle allocates nothing once warm.
  struct ReasonList {
    std::vector<std::string> items;  ///< [0, size) are the current reasons
    size_t size = 0;
    void clear() { size = 0; }
    /// A slot for one more reason (its former text still in it).
    std::string& add() {
      if (size == items.size()) items.emplace_back();
      return items[size++];
    }
    void dropLast() { --size; }
    std::span<const std::string> view() const { return {items.data(), size}; }
  };
  /// How a node does for a task in a scan: fits now, fits only later (releasing resources), or not,
  /// with the reasons appended to `why` (the predicate's, or each resource short).
  enum class NodeFit { Now, Later, No };
  NodeFit judgeNode(const SessionTask& task, const SessionNode& node, bool allowPipeline, ReasonList& why) const;

  /// Why a placement class (key, domain, pipelining allowed or not) fits on no node, node by node,
  /// kept current through the change log: built at the class's second failure, after which its
  /// reason costs the nodes changed since it was last asked, not a scan of every node. Counts
  /// equal scanPlacement's (a domain's nodes visited, the others counted as outside).
  struct FailureTally {
    std::vector<uint16_t> outcome;                   ///< per node: index into `outcomes`
    std::vector<std::vector<std::string>> outcomes;  ///< interned reason lists; [0] = the task fits there
    std::map<std::vector<std::string>, uint16_t> outcomeIndex;
    std::map<std::string, int> counts;               ///< reason -> nodes giving it
    int fitting = 0;                                 ///< visited nodes of outcome 0; -1: given up
    size_t seen = 0;                                 ///< prefix of the change log folded in
  };
  /// The reasons scanPlacement would give for a task that fits nowhere, from the class's tally.
  Placement explainFailure(const SessionTask& task, bool allowPipeline);
  /// The reasons node `ni` gives in a scan (empty: the task fits there, now or with pipelining).
  void scanOutcome(const SessionTask& task, int ni, bool allowPipeline, ReasonList& out) const;
  void setOutcome(FailureTally& t, int ni, const ReasonList& list);

  /// The largest future-idle amount of a resource over all nodes (a lazy max-heap over the change
  /// log): a task asking more fits nowhere, which findPlacement knows without visiting a node.
  struct FreeEntry {
    int64_t value = 0;
    int node = -1;
    uint32_t version = 0;
  };
  struct MoreFree {
    bool operator()(const FreeEntry& a, const FreeEntry& b) const {
      return a.value != b.value ? a.value > b.value : a.node < b.node;
    }
  };
  /// Whether some resource the task asks exceeds what any node has free, counting releasing ones.
  bool exceedsEveryNode(const api::Resources& request);

  std::map<std::string, FailureTally> tallies_;
  size_t tallyEntries_ = 0;  ///< per-node outcomes held by all tallies (bounded: see placement.cpp)
  NodeRanking<FreeEntry, MoreFree> maxFreeCpu_, maxFreeMemory_;
  ReasonList outcomeScratch_;
  std::vector<std::string> outcomeKey_;  ///< setOutcome()'s scratch: a changed outcome as a tally key
  /// explainFailure's marks of nodes already re-judged in one catch-up (== changedGen_).
  std::vector<uint32_t> changedMark_;
  uint32_t changedGen_ = 0;
  bool explain_ = true;  ///< explainFailures()
  bool victimOrderHeld_ = false;     ///< holdVictimOrder()
  bool victimOrderKept_ = false;     ///< holdVictimOrder(): held, and `keep`
  uint64_t victimOrderEpoch_ = 0;    ///< counts holds

  const NodeDomain* domain_ = nullptr;
  /// findPlacement's rankings by the task's placement class (upper 32 bits) and the domain's id
  /// plus one (domainIds_; 0: the whole cluster).
  std::unordered_map<uint64_t, NodeRanking<RankedNode, RankedBefore>> rankings_;
  std::unordered_map<std::string, uint32_t> domainIds_;  ///< domain name -> id (findPlacement)
  /// A pod's own placement key per task slot where the cache built none, built lazily (plugins'
  /// parts are not kept: they may change within a session).
  mutable std::vector<std::string> keyCache_;
  mutable std::vector<int> classCache_;  ///< its class per task slot, -1 not known yet
  mutable std::unordered_map<std::string, int> classIds_;  ///< placement key -> class
  /// A pod's own key's class and plugins' part (short) -> the class of the whole key; one
  /// numbering with classIds_ (nextClass_), so no key of a pod and a part is ever put together.
  struct ClassPartHash {
    size_t operator()(const std::pair<int, std::string>& k) const {
      return std::hash<std::string>()(k.second) * 31 + static_cast<size_t>(k.first);
    }
  };
  mutable std::unordered_map<std::pair<int, std::string>, int, ClassPartHash> partClasses_;
  mutable std::pair<int, std::string> partProbe_;  ///< placementClass()'s lookup key, its buffer kept
  mutable std::string partScratch_;                ///< one plugin's part (pluginKeyPart)
  mutable int nextClass_ = 0;
  /// `id`, a class map's entry for a key (-1 when the key is met first now: it is numbered).
  int classFor(int& id) const {
    if (id < 0) id = nextClass_++;
    return id;
  }
  /// The cache's interned keys -> class: equal keys are one pointer there, so no string is hashed.
  mutable std::unordered_map<const std::string*, int> classByKey_;
  int classOfKey(const std::string* shared) const;  ///< the class of a cache-interned key
  struct SignatureMemo {
    uint64_t version = 0;
    int32_t missing = -1;  ///< -1: not computed
    int32_t id = -1;
  };
  mutable std::vector<SignatureMemo> signatureCache_;  ///< per job (jobSignature)
  mutable std::unordered_map<std::string, int> signatureIds_;
  mutable std::string signatureScratch_;
  /// jobSignature's key into `sig`; false for a job like no other.
  bool buildSignature(const SessionJob& job, int missing, std::string& sig) const;
  /// Whether a plugin's placement key part (of the first `count`) may be other than empty for a task
  /// of `job` (PlacementKeyJobFn).
  bool keysJob(const SessionJob& job, size_t count = SIZE_MAX) const;
  const std::string& podPlacementKey(const SessionTask& task) const;
  /// Per task slot: its job's task indices in task order (taskLess: static within a session), each
  /// job's in its own tasks' slots, built lazily (taskOrderKnown_ per job). One array, not one per
  /// job: kept between sessions, it is not allocated again job by job.
  mutable std::vector<int> taskOrderCache_;
  mutable std::vector<uint8_t> taskOrderKnown_;
  mutable std::vector<std::string> judgeShort_;  ///< judgeNode()'s scratch: the resources a node lacks
  mutable ReasonList scanWhy_;                   ///< scanPlacement()'s scratch: one node's reasons
  /// victimLess()'s last word between two pods of one job (the newest pod, then the pod key) as a
  /// rank: the task index for a job whose pods were created together (JobInfo::tasksCreatedTogether),
  /// else a rank per task slot, computed for the job the first time two of its pods get there
  /// (static within a session): most of a victim search's comparisons end there, and a rank spares
  /// comparing keys. victimTieKnown_: per job, whether its tasks are ranked.
  mutable std::vector<int32_t> victimTieRank_;
  mutable std::vector<uint8_t> victimTieKnown_;
  mutable std::vector<int32_t> victimTieScratch_;  ///< victimTieRank()'s buffer
  int32_t victimTieRank(const SessionTask& t) const {
    // A job's tasks are in pod key order (cache::JobInfo::tasks), newerPodFirst's second word: pods
    // created together (as the cache found them) rank in task order; the others are sorted.
    return jobs_[static_cast<size_t>(t.job)].tasksCreatedTogether ? t.index : victimTieRankSorted(t);
  }
  int32_t victimTieRankSorted(const SessionTask& t) const;
  /// Every job's index (or, pendingOnly, those of the jobs with pending pods) into `out` in jobLess
  /// order, starting from the last session's order (prevJobOrder_).
  void sortJobs(bool pendingOnly, std::vector<int>& out) const;
  mutable std::vector<int> jobOrderCache_;  ///< jobsInOrder(); empty until asked
  mutable std::vector<int> pendingJobOrder_;  ///< pendingJobsInOrder(), once pendingJobOrderMade_
  mutable bool pendingJobOrderMade_ = false;
  /// The last session's job order (indices into its snapshot's jobs: every job's, or its pending
  /// ones' when no more was asked) and that snapshot, kept alive so that its jobs can be matched
  /// with this one's: sortJobs() starts from it.
  std::vector<int> prevJobOrder_;
  std::shared_ptr<const cache::Snapshot> prevOrderSnapshot_;
  /// Per job: jobValid()'s verdict, as of the job's releasingCount `releasing` (-1: not asked yet):
  /// valid, or the error at `error` in validErrors_. (Eight bytes: every action reads the verdicts
  /// of all pending jobs, in job order.)
  struct ValidMemo {
    int32_t releasing = -1;
    int32_t error = -1;
  };
  mutable std::vector<ValidMemo> validCache_;
  mutable std::vector<api::Error> validErrors_;
  api::Status checkJobValid(const SessionJob& job) const;
  /// The last session's verdicts (indexed like its snapshot's jobs), that snapshot, and the plugins
  /// that gave them. A verdict reads the job's cache entry, its pods leaving, the snapshot's queues,
  /// priority classes, topologies and problems, and the plugins' job checks: a job whose entry is
  /// the same object, with no pod leaving then or now, keeps its verdict when the rest is the same
  /// too (seedValidity(); on a big cluster the checks cost ~6 ms a cycle, most of it memory misses
  /// on entries nothing changed).
  std::vector<ValidMemo> prevValid_;
  std::vector<api::Error> prevValidErrors_;
  std::shared_ptr<const cache::Snapshot> prevValidSnapshot_;
  std::vector<std::string> prevValidPlugins_;
  /// Sizes validCache_ for this session's jobs, with the verdicts carried from the last session.
  void seedValidity() const;
  /// The plugins with a job check, in the order they check (Session::addJobValidFn).
  std::vector<std::string> jobValidPlugins() const;
  /// For each job of `earlier` (a snapshot before this session's), its index in this session's
  /// snapshot matched by key, or -1 (Snapshot::jobIndicesIn): computed once per session for the
  /// last snapshot given (the job order and the verdicts carried start from the same one).
  const std::vector<int>& jobsNowOf(const cache::Snapshot& earlier) const;
  mutable std::vector<int> jobsNow_;
  mutable const cache::Snapshot* jobsNowOf_ = nullptr;
  NodeChangeLog nodeChanges_;
  mutable std::vector<int> allNodes_;  ///< allNodes(), built on first use
  /// Nodes grouped by whole GPUs of future idle: a task needing g GPUs only visits levels >= g.
  std::vector<std::vector<int>> gpuLevels_;
  std::vector<int> gpuLevelPos_;  ///< node index -> position in its level's vector
  std::vector<int> nodeLevel_;    ///< node index -> its level
  std::string gpuShortage_;       ///< "insufficient nvidia.com/gpu (N nodes)", N = all nodes
  int64_t pendingGpuFloor_ = INT64_MAX;       ///< pendingGpuFloor()
  bool pendingSharesGpu_ = false;             ///< pendingSharesGpu()
  int64_t pendingGpuMilliFloor_ = INT64_MAX;  ///< pendingGpuMilliFloor()
  int32_t pendingTopologyJobs_ = 0;           ///< pendingTopologyJobs()

  // ---- working-state changes, each with its undo (statement.cpp) ----
  void applyAllocate(SessionTask& task, int node);
  void undoAllocate(const Operation& op);
  void applyPipeline(SessionTask& task, int node);
  void undoPipeline(const Operation& op);
  void applyEvict(SessionTask& task);
  void undoEvict(const Operation& op);
  void applyReserve(const SessionTask& task, int node);
  void undoReserve(const Operation& op);
  void applyRepipeline(SessionTask& task);
  void undoRepipeline(const Operation& op);
  /// The common end of undoing an allocate, pipeline or evict: drops the zero entries the undo
  /// left, logs the node's change and puts the task back where `op` found it.
  void finishUndo(const Operation& op, SessionTask& task, SessionNode& node, SessionJob& job);
  /// A task enters (+1) or leaves (-1) a ready state: the job's and its subgroup's counts.
  static void countReady(SessionJob& job, const SessionTask& task, int delta);
  /// The task's state changed by `change`, or by the undo of it: toggles the task's key for that
  /// change in the job's version (SessionJob::version).
  void taskChanged(SessionJob& job, const SessionTask& task, Operation::Type change);
  /// The job's queue gets (+1) or gives back (-1) the task's request; the queue is listed as
  /// changed (takeChangedQueues).
  void chargeQueue(const SessionJob& job, const SessionTask& task, int sign);
  /// Moves `ops` to the committed list, leaving it empty (its storage kept for the next statement).
  void commitOperations(std::vector<Operation>& ops);
  /// Operation logs of finished statements, emptied, lent to the next ones (Statement): a victim
  /// search opens thousands of statements a cycle, each of which would grow a log of its own.
  std::vector<std::vector<Operation>> opLogs_;
  std::vector<Operation> borrowOpLog() {
    if (opLogs_.empty()) return {};
    std::vector<Operation> log = std::move(opLogs_.back());
    opLogs_.pop_back();
    return log;
  }
  void returnOpLog(std::vector<Operation>&& log) {
    constexpr size_t kKeptLogs = 16;  // (statements open at once: a search nests a few)
    if (log.capacity() == 0 || opLogs_.size() >= kKeptLogs) return;
    log.clear();
    opLogs_.push_back(std::move(log));
  }

  // ---- GPU sharing (session_gpu.cpp) ----
  size_t slotOf(const SessionTask& task) const { return static_cast<size_t>(&task - tasks_.data()); }
  void buildGpuGroups();
  /// Places a fractional task's devices on the node's groups (opening groups on whole GPUs).
  void takeGpus(SessionTask& task, SessionNode& node, bool pipelined);
  /// Gives them back (undo of an allocate or pipeline).
  void returnGpus(SessionTask& task, SessionNode& node, bool pipelined);
  /// Marks (sign +1) or unmarks (-1) the task's share releasing (evict and its undo).
  void releaseGpus(SessionTask& task, SessionNode& node, int sign);
  std::string newGroupId(const SessionTask& task, const SessionNode& node, size_t k) const;
  /// Per task slot: indices into its node's gpuGroups. Kept from session to session with every
  /// element empty (only the slots in taskGpuSlots_ are emptied at the end): one element per pod
  /// of the cluster (~3 MB at 140,000 pods) was emptied and made again each cycle.
  std::vector<std::vector<int>> taskGpus_;
  std::vector<uint32_t> taskGpuSlots_;  ///< slots takeGpus filled this session
};

/// Turns a session's failure explanations off for a scope (Session::explainFailures), restoring
/// what was set before.
class QuietPlacement {
 public:
  explicit QuietPlacement(Session& ssn, bool quiet = true) : ssn_(ssn), was_(ssn.explainsFailures()) {
    if (quiet) ssn_.explainFailures(false);
  }
  ~QuietPlacement() { ssn_.explainFailures(was_); }
  QuietPlacement(const QuietPlacement&) = delete;
  QuietPlacement& operator=(const QuietPlacement&) = delete;

 private:
  Session& ssn_;
  bool was_;
};

/// Holds the session's victim order for a scope (Session::holdVictimOrder).
class HeldVictimOrder {
 public:
  /// `keep`: Session::holdVictimOrder's.
  explicit HeldVictimOrder(Session& ssn, bool keep = false)
      : ssn_(ssn), was_(ssn.victimOrderHeld()), wasKept_(ssn.victimOrderKept()) {
    ssn_.holdVictimOrder(true, keep || wasKept_);
  }
  ~HeldVictimOrder() { ssn_.holdVictimOrder(was_, wasKept_); }
  HeldVictimOrder(const HeldVictimOrder&) = delete;
  HeldVictimOrder& operator=(const HeldVictimOrder&) = delete;

 private:
  Session& ssn_;
  bool was_;
  bool wasKept_;
};

}  // namespace tessera::framework
