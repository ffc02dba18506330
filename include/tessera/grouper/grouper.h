#pragma once
/// The pod grouper: gives every pending Tessera pod that names no PodGroup the PodGroup of its
/// workload (PyTorchJob, JobSet, RayCluster, LeaderWorkerSet, batch Job, ...), so users never write
/// PodGroups by hand. Rules follow KAI-Scheduler's PodGrouper; docs/workloads.md lists them per kind.
///
/// One PodGroup per workload (per group for a LeaderWorkerSet; Deployment, StatefulSet and bare pods
/// stay groups of one unless their namespace names a queue), in the pod's namespace, owned by the workload
/// (ownerReference: garbage-collected with it), named deterministically (`pg-<kind>-<name>`); pods get annotation
/// `pod-group-name` and, where the workload has roles, label `tessera.dev/subgroup`. An existing PodGroup of that name
/// is adopted as it is (pods created later join it).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/objects.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::grouper {

using Json = nlohmann::json;

/// Annotations (on the workload, or on a bare pod) that steer the grouper.
namespace keys {
/// Gang size override: a positive integer ("4"); a batch Job with it becomes a gang.
inline constexpr const char* kMinMember = "tessera.dev/min-member";
/// "false": the grouper leaves the workload's pods alone (each is its own group of one).
inline constexpr const char* kPodGrouping = "tessera.dev/pod-grouping";
/// Topology constraint of the generated PodGroup: the Topology's name, and level label keys.
inline constexpr const char* kTopology = "tessera.dev/topology";
inline constexpr const char* kRequiredTopologyLevel = "tessera.dev/topology-required-level";
inline constexpr const char* kPreferredTopologyLevel = "tessera.dev/topology-preferred-level";
/// Recorded on generated PodGroups: "<apiVersion>/<Kind>/<name>" of the workload they stand for.
inline constexpr const char* kWorkloadAnnotation = "tessera.dev/workload";
/// Label on generated PodGroups.
inline constexpr const char* kGeneratedLabel = "tessera.dev/pod-grouper";
}  // namespace keys

/// The LeaderWorkerSet's label on its pods: names the set directly (its pods hang under StatefulSets).
inline constexpr const char* kLwsNameLabel = "leaderworkerset.sigs.k8s.io/name";

/// One owner in a pod's ownerReference chain, bottom up. `object` is null when the kind is not one
/// the grouper reads (Deployment, StatefulSet, an unknown CRD) or the object is gone.
struct Owner {
  std::string apiVersion;
  std::string kind;
  std::string name;
  std::string uid;
  Json object;
};

struct SubGroupPlan {
  std::string name;
  int64_t minMember = 0;
};

/// The PodGroup one pod belongs to, and how the pod is labelled.
struct PodGroupPlan {
  std::string name;
  std::string namespace_;
  int64_t minMember = 1;
  std::vector<SubGroupPlan> subGroups;
  std::string podSubGroup;  ///< the pod's subgroup (label tessera.dev/subgroup); empty: none
  std::string queue;
  std::string priorityClassName;  ///< empty: the pods' own priority
  std::string topology, requiredTopologyLevel, preferredTopologyLevel;
  /// Label tessera.dev/node-pool of the pod, else of the workload (docs/sharding.md): the PodGroup
  /// carries it, so a pod without it is routed to its pool's shard. Empty: none.
  std::string nodePool;
  Owner owner;  ///< the workload the PodGroup is owned by (ownerReference, controller)
};

/// Default priority class names of generated PodGroups whose workload and pods name none: by the
/// workload's kind ("PyTorchJob", "Deployment", "Pod" for a bare pod), else by its category
/// ("training" or "inference": workloadCategory). Config key podGrouper.defaultPriorityClass.
using DefaultPriorityClasses = std::map<std::string, std::string>;

/// "inference" for serving workloads (Deployment, ReplicaSet, StatefulSet, DaemonSet,
/// ReplicationController, LeaderWorkerSet, RayService) and bare pods ("Pod"); "training" for the
/// rest (batch Job, JobSet, Kubeflow jobs, TrainJob, RayJob, RayCluster, unknown kinds).
std::string_view workloadCategory(const std::string& kind);

/// Pure rules: the plan for `pod` given its owner chain (bottom up; empty for a bare pod) and its
/// Namespace object (null when unreadable). nullopt: nothing to do (grouping turned off for the
/// workload, or a bare / Deployment / StatefulSet pod that its own labels describe fully).
/// A malformed override (min-member "abc") is ignored with a warning, never an error.
std::optional<PodGroupPlan> planFor(const Json& pod, const std::vector<Owner>& owners, const Json& namespaceObject,
                                    const DefaultPriorityClasses& defaults = {});

/// A pod no workload owns: no ownerReference, no LeaderWorkerSet label.
bool isBarePod(const api::Pod& pod);
/// planFor's rule for a bare pod, read from the pod itself: false when it plans nothing for it (its
/// namespace names no queue, it carries no topology annotation, and no default priority class
/// applies to it). The grouper passes such pods over before writing them as JSON (where bare pods
/// are the rule, most of the pods handed to it).
bool barePodGetsGroup(const api::Pod& pod, const Json& namespaceObject, const DefaultPriorityClasses& defaults);

/// The PodGroup manifest for a plan (scheduling.tessera.dev/v1alpha1, ownerReference set).
Json podGroupObject(const PodGroupPlan& plan);

/// True for the workload kinds the grouper reads (so the scenario runner accepts them as objects).
bool isWorkloadKind(api::Kind kind);

/// What one pass wrote, as the API server returned it (so a cache can apply it at once).
struct GroupingReport {
  std::vector<Json> podGroups;  ///< created
  std::vector<Json> pods;       ///< patched
  size_t failures = 0;          ///< API calls that failed (retried next pass)
  /// Pods ("ns/name") to look at again next pass: an API call failed, or an owner of a workload
  /// kind could not be read yet (created after its pods). Given up after kMaxAttempts passes, until the pod
  /// changes (a new resourceVersion).
  std::vector<std::string> retry;
};

/// Groups pending pods through the ClusterClient seam. Not thread-safe: one caller (the pipeline,
/// before each cycle).
class Grouper {
 public:
  /// Passes a pod is looked at again before the grouper gives up on it (with a warning).
  static constexpr int kMaxAttempts = 20;

  explicit Grouper(cache::ClusterClient& client) : client_(client) {}

  /// The defaults of the next passes (a config reload changes them).
  void setDefaultPriorityClasses(DefaultPriorityClasses defaults) { defaults_ = std::move(defaults); }

  /// One pass over every pending pod of `schedulerName` that carries no PodGroup key (one list).
  GroupingReport run(const std::string& schedulerName);
  /// One pass over the given pods (the cache's ungrouped pods: Cache::takeUngroupedPods); pods that
  /// carry a PodGroup key or are terminating are skipped. No API call when `pods` is empty.
  GroupingReport group(const std::vector<Json>& pods);
  GroupingReport group(const std::vector<std::shared_ptr<const api::Pod>>& pods);

 private:
  using Namespaces = std::map<std::string, Json>;  ///< read once per pass; null when unreadable
  const Json& namespaceObject(const std::string& name, Namespaces& read);
  GroupingReport group(const std::vector<Json>& pods, Namespaces& namespaces);
  /// The owner chain, bottom up; `unresolved` is set when an owner of a workload kind was not found.
  std::vector<Owner> ownersOf(const Json& pod, bool& unresolved);
  /// Creates the plan's PodGroup unless one of that name exists; false on an API error.
  bool ensurePodGroup(const PodGroupPlan& plan, GroupingReport& report);
  /// Records `key` for another pass, unless it was retried kMaxAttempts times already.
  void retryLater(const Json& pod, const std::string& key, GroupingReport& report, const char* why);
  /// A workload read through the client, once per pass (the 64 pods of one job read it once).
  api::Result<Json> readOwner(api::Kind kind, const std::string& ns, const std::string& name);
  cache::ClusterClient& client_;
  DefaultPriorityClasses defaults_;
  std::map<std::string, api::Result<Json>> owners_;  ///< this pass's reads, by "Kind/ns/name"
  std::map<std::string, int> attempts_;          ///< pod key -> passes that asked for a retry
  std::map<std::string, std::string> givenUp_;   ///< pod key -> the resourceVersion given up on
  /// Whether the pod `key` is given up on at `resourceVersion`; one given up on at another version
  /// (it changed since) is forgotten.
  bool givenUpOn(const std::string& key, const std::string& resourceVersion);
};

/// The metadata of a pod as the grouper reads it (name, namespace, uid, labels, annotations,
/// ownerReferences), as Kubernetes JSON.
Json podJson(const api::Pod& pod);

}  // namespace tessera::grouper
