#pragma once
// The cluster as the cache knows it, without threads: the objects of every watched kind, the
// accounting derived from them (node use and GPU groups, jobs and their totals, queue totals), the
// assumptions about pods, and what changed since the last snapshot. Private to the cache library.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "assumptions.h"
#include "tessera/api/clock.h"
#include "tessera/api/gpu_request.h"
#include "tessera/api/kinds.h"
#include "tessera/api/objects.h"
#include "tessera/api/result.h"
#include "tessera/api/shard.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/cache/placement_key.h"
#include "tessera/cache/snapshot.h"

namespace tessera::cache {

/// Per-pod bookkeeping: where its contributions went, so they can be taken back exactly.
struct PodEntry {
  std::shared_ptr<const api::Pod> pod;
  bool ours = false;
  TaskStatus status = TaskStatus::Pending;
  std::string node;    ///< node it is accounted on (holds resources)
  std::string jobKey;  ///< empty when not ours
  // GPU sharing: what the pod contributed to its node's GPU groups, taken back exactly.
  std::shared_ptr<const api::PodGpuSpec> gpuSpec;
  std::string gpuSpecError;
  std::vector<std::string> gpuGroups;  ///< groups a fractional pod holds
  int64_t gpuUnits = 0;                ///< units per group
  std::string reservationGroup;        ///< set for a live GPU reservation pod
  bool reservation = false;            ///< a GPU reservation pod (live or terminating)
};

/// Applies watch events to maps of NodeInfo / JobInfo / QueueInfo, keeping their totals exact
/// incrementally (each change takes a pod's old contribution back and adds the new one).
///
/// Thread-safety: none, by design. One owner at a time: the Cache's start() (before any
/// snapshot), then the scheduling thread inside Cache::snapshot(); tests drive it directly.
///
/// Copy on write: entries are held through shared_ptr and shared with published snapshots; an
/// entry still referenced by one is cloned before it changes, so a snapshot never changes.
class ClusterState {
 public:
  using Nodes = std::map<std::string, std::shared_ptr<NodeInfo>>;
  using Pods = std::map<std::string, PodEntry>;
  using Jobs = std::map<std::string, std::shared_ptr<JobInfo>>;
  using Queues = std::map<std::string, std::shared_ptr<QueueInfo>>;

  /// `clock` (borrowed, must outlive this) ends bind backoffs; pods whose spec.schedulerName is
  /// `schedulerName` are ours (in jobs), others only count as node use.
  /// `isolation`: the cluster's isolation backend (the webhook's default; `tessera run --isolation`).
  /// Under Hard, a fractional pod that the webhook did not wire is refused with a reason; Unset (as
  /// in simulations, which have no webhook) checks nothing.
  /// `shard`: the node pool scheduled (docs/sharding.md): Queues labelled with another pool are
  /// not held (their pool is remembered); PodGroups of every pool are held (a PodGroup's pool, its
  /// label else its Queue's, decides where its unlabelled pods go); our pods of another pool (their
  /// label, else their PodGroup's pool) count as another scheduler's, in no job.
  ClusterState(const api::Clock& clock, std::string schedulerName, api::Isolation isolation = api::Isolation::Unset,
               api::GpuShareDefaults gpuDefaults = {}, api::ShardScope shard = {});

  // ---- changes ----

  /// Applies one watch event of `kind`; Bookmark and Error events are ignored. An object that fails
  /// conversion is recorded in conversionErrors() and its last good version (if any) kept.
  /// `converted`: a pod event's object, already converted (it is moved from); null to convert here.
  void apply(api::Kind kind, const WatchEvent& event, std::optional<api::Result<api::Pod>>* converted = nullptr);
  /// Keys ("ns/name", or "name" when cluster-scoped) of every object of `kind` held, failed
  /// conversions included; sorted, unique. What a relist reconciles against.
  std::vector<std::string> heldKeys(api::Kind kind) const;
  /// Deletes the object `key` of `kind` as a Deleted watch event would, and its conversion error.
  void remove(api::Kind kind, const std::string& key);

  /// The assumptions consulted for every pod. After changing them, refreshPod() the pod.
  Assumptions& assumptions() { return assumptions_; }
  const Assumptions& assumptions() const { return assumptions_; }
  /// Re-evaluates a pod after an assumption about it changed; no-op for a pod not held.
  void refreshPod(const std::string& key);

  // ---- views (for the snapshot builder and tests) ----

  /// The pod `key` ("ns/name") as held: ours, or another scheduler's that holds node resources.
  const api::Pod* findPod(const std::string& key) const;
  /// Null when unknown. A NodeInfo may exist without its Node (pods still bound to a deleted node).
  const NodeInfo* findNode(const std::string& name) const;
  const JobInfo* findJob(const std::string& key) const;
  const QueueInfo* findQueue(const std::string& name) const;

  const Nodes& nodes() const { return nodes_; }
  const Jobs& jobs() const { return jobs_; }
  const Queues& queues() const { return queues_; }
  const std::map<std::string, std::shared_ptr<const api::PriorityClass>>& priorityClasses() const {
    return priorityClasses_;
  }
  const std::map<std::string, std::shared_ptr<const api::Topology>>& topologies() const { return topologies_; }
  /// Sharded: every Queue's pool by name ("" : none), held or not.
  const std::map<std::string, std::string>& queuePools() const { return queuePools_; }
  /// Objects whose latest version failed conversion, by "Kind/ns/name".
  const std::map<std::string, ConversionError>& conversionErrors() const { return errors_; }

  /// Names of nodes and keys of jobs changed since clearDirty() (added, changed or removed).
  const std::set<std::string>& dirtyNodes() const { return dirtyNodes_; }
  const std::set<std::string>& dirtyJobs() const { return dirtyJobs_; }
  void clearDirty() {
    dirtyNodes_.clear();
    dirtyJobs_.clear();
  }
  /// Makes JobInfo::tieOrder of the jobs changed since clearDirty() (every job's, with `all`)
  /// whose tasks changed since it was made (each change clears it): once per snapshot, not at each
  /// pod event (a job of thousands of pods would sort them at every one).
  void orderDirtyJobs(bool all);

  /// Our unbound, not-terminating pods that name no PodGroup and were added or changed since the
  /// last call (what the pod grouper must look at), plus those of `alsoKeys` that still qualify.
  /// Each is offered once per version: a pass costs nothing while no such pod changes.
  std::vector<std::shared_ptr<const api::Pod>> takeUngroupedPods(const std::vector<std::string>& alsoKeys = {});
  /// On (a pod grouper runs before each cycle): such a pod with an ownerReference is in no job
  /// until takeUngroupedPods has offered it once, so a cycle never sees a workload's pod before
  /// the grouper has pointed it at its gang. Off by default (nobody would release them).
  void holdUngroupedPods(bool on) { holdUngrouped_ = on; }
  /// See Cache::takeMisroutedPods().
  std::vector<std::pair<std::string, std::string>> takeMisroutedPods();

 private:
  // Events by kind.
  void onPod(const WatchEvent& ev, std::optional<api::Result<api::Pod>>* converted);
  void onNode(const WatchEvent& ev);
  /// Tessera's PodGroups, and other schedulers' (Kind::VolcanoPodGroup, ...) in tables of their own.
  void onPodGroup(api::Kind kind, const WatchEvent& ev);
  std::map<std::string, std::shared_ptr<const api::PodGroup>>& podGroupTable(api::Kind kind);
  const std::map<std::string, std::shared_ptr<const api::PodGroup>>& podGroupTable(api::Kind kind) const {
    return const_cast<ClusterState*>(this)->podGroupTable(kind);
  }
  /// The PodGroup "ns/name" names: Tessera's, else Volcano's, else scheduler-plugins'; null: none.
  std::shared_ptr<const api::PodGroup> findPodGroup(const std::string& nsName) const;
  void onQueue(const WatchEvent& ev);
  /// Sharded: the pool a PodGroup names (its label, else its Queue's label); "" none.
  std::string podGroupPool(const api::PodGroup& pg) const;
  /// Sharded: the pool a pod of ours belongs to (its label, else its PodGroup's pool, else, with no
  /// PodGroup, its queue label's Queue's); "" none.
  std::string podPool(const api::Pod& pod) const;
  /// Sharded: re-files the pods of a PodGroup whose pool may have changed.
  void refreshPodGroupPods(const std::string& nsName);
  template <class T, class Conv>
  void onSimple(api::Kind kind, const WatchEvent& ev, std::map<std::string, std::shared_ptr<const T>>& table,
                Conv conv);
  void recordError(api::Kind kind, const Json& obj, const std::string& message);

  // Pods.
  TaskStatus statusOf(const std::string& key, const api::Pod& pod, std::string& node) const;
  void upsertPod(std::shared_ptr<const api::Pod> pod);
  void removePod(const std::string& key);
  /// Takes a held pod's entry out of the table, with what it adds to its node, GPU groups and job
  /// taken back.
  Pods::node_type takeOut(Pods::iterator it);
  void parseGpu(PodEntry& e) const;
  void refreshPodGroupJob(const std::string& nsName);

  // Node, GPU group, job and queue accounting.
  NodeInfo& nodeEntry(const std::string& name);
  QueueInfo& queueEntry(const std::string& name);
  template <class Fn>
  void withGpuGroup(NodeInfo& n, const std::string& id, Fn&& fn);
  void addGpuUse(NodeInfo& n, const PodEntry& e, TaskStatus st, int sign);
  void addToNode(const std::string& key, const api::Pod& pod, TaskStatus st, const std::string& node, bool ours);
  void removeFromNode(const std::string& key, const api::Pod& pod, TaskStatus st, const std::string& node, bool ours);
  void removeJobFromQueue(const JobInfo& job);
  void addJobToQueue(const JobInfo& job);
  void deriveJob(JobInfo& job);
  template <class Fn>
  void withJob(const std::string& key, Fn&& fn);
  static void countTask(JobInfo& job, const TaskInfo& t, int sign);
  void addTask(const std::string& jobKey, const std::string& podKey, const PodEntry& e, TaskStatus st,
               const std::string& node);
  void removeTask(const std::string& jobKey, const std::string& podKey);

  const api::Clock& clock_;
  const std::string schedulerName_;
  const api::Isolation isolation_;
  const api::GpuShareDefaults gpuDefaults_;
  const api::ShardScope shard_;
  /// Sharded: every Queue's pool (held or not), by name: a PodGroup follows its Queue's pool.
  std::map<std::string, std::string> queuePools_;
  /// Sharded: our unbound pods of another pool not yet handed to takeMisroutedPods(), with it.
  std::map<std::string, std::string> misrouted_;
  Assumptions assumptions_;
  std::set<std::string> ungroupedChanged_;  ///< pod keys for takeUngroupedPods()
  std::set<std::string> offered_;           ///< pod keys takeUngroupedPods() has returned
  bool holdUngrouped_ = false;

  Pods pods_;
  Nodes nodes_;
  Jobs jobs_;
  std::map<std::string, std::shared_ptr<const api::PodGroup>> podGroups_;  ///< by "ns/name"
  std::map<std::string, std::shared_ptr<const api::PodGroup>> volcanoPodGroups_, schedulerPluginsPodGroups_;
  Queues queues_;
  std::map<std::string, std::shared_ptr<const api::PriorityClass>> priorityClasses_;
  std::map<std::string, std::shared_ptr<const api::Topology>> topologies_;
  std::map<std::string, ConversionError> errors_;  ///< by "Kind/ns/name"
  std::set<std::string> dirtyJobs_, dirtyNodes_;
  /// The largest nvidia.com/gpu.memory label seen: pending gpu-memory pods are charged against it.
  int64_t maxGpuMemoryMiB_ = 0;
  KeyInterner placementKeys_;  ///< every task's placement key, shared among pods of one shape
  KeyInterner topologyKeys_;   ///< every job's topology constraint (JobInfo::topologyKey)
};

}  // namespace tessera::cache
