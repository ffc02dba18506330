#pragma once
/// The one validation layer for the objects users write and Tessera reads: Queues (alone and as a
/// tree), PodGroups, and the node labels Tessera relies on. Pod GPU annotations are validated by
/// gpu_request.h. Conversion (convert.h) rejects what is not well-formed (types, unknown fields);
/// this layer rejects what is well-formed but wrong. Every problem names the object, the field and
/// the bad value. An object with a problem is skipped whole by the scheduler, never half-used; the
/// problem is shown on the object (status condition `Valid=False`, reason `InvalidSpec`) and on the
/// pods it stops (PodScheduled=False). See docs/troubleshooting.md.
/// Pure functions over immutable values: thread-safe, no allocation beyond the results.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/api/kinds.h"
#include "tessera/api/objects.h"

namespace tessera::api {

/// What is wrong with one object.
struct Problem {
  Kind kind = Kind::Queue;
  std::string namespace_, name;  ///< the object (namespace empty for cluster-scoped kinds)
  /// "spec.minMember", "metadata.labels[nvidia.com/gpu.memory]"; empty when `message` is a whole
  /// error text that already names the object and the field (a conversion error).
  std::string field;
  std::string message;  ///< what is wrong, with the bad value: "must be at least 1, got 0"
  /// The object stays in use (the bad setting is ignored and said in an event): a node's invalid
  /// GPU-sharing label falls back to the cluster's value instead of closing the node.
  bool ignored = false;

  /// "spec.minMember: must be at least 1, got 0"
  std::string detail() const { return field.empty() ? message : field + ": " + message; }
  /// "PodGroup team-a/zero: spec.minMember: must be at least 1, got 0"
  std::string text() const;
  /// "PodGroup/team-a/zero", "Queue/gpu": the key Snapshot::invalid uses.
  std::string ref() const { return objectRef(kind, namespace_, name); }

  static std::string objectRef(Kind kind, const std::string& ns, const std::string& name);
};

/// One Queue on its own: per resource, quota and limit are -1 (unlimited) or >= 0, the limit is not
/// below the quota, the over-quota weight is not negative. (Unknown resource names are rejected when
/// the Queue is converted.) The first problem found, in field order.
std::optional<Problem> validateQueueSpec(const Queue& queue);

/// The whole queue forest: every queue's own spec, its parent (must exist and be a declared Queue),
/// parent cycles (every queue on the cycle is invalid), and problems inherited from an ancestor
/// (field spec.parentQueue, "ancestor queue X: ..."). Returns one problem per unusable queue, by name.
/// `known`: problems found elsewhere (a queue whose latest version failed conversion), by name; they
/// are returned as given and passed down to descendants. O(queues × depth).
std::map<std::string, Problem> validateQueues(const std::vector<const Queue*>& queues,
                                              const std::map<std::string, Problem>& known = {});

/// Lookups a PodGroup's references are checked against; a null function skips that check.
struct PodGroupRefs {
  std::function<bool(const std::string&)> queueExists;          ///< a declared Queue of that name
  std::function<bool(const std::string&)> priorityClassExists;  ///< a PriorityClass of that name
  std::function<const Topology*(const std::string&)> topology;  ///< the Topology of that name, or null
};

/// A PodGroup: spec.minMember >= 1, subgroup minMember >= 1 and names unique and non-empty, the queue
/// it names (label tessera.dev/queue or kai.scheduler/queue, else spec.queue) exists, the priority class (when named) exists, and the topology constraints (see
/// validateTopologyConstraints). The first problem found.
std::optional<Problem> validatePodGroup(const PodGroup& podGroup, const PodGroupRefs& refs);

/// The PodGroup's and its subgroups' topology constraints: a level needs a topology; the Topology
/// exists; the levels are levels of it; the preferred level is not above the required one; a
/// subgroup's topology is the group's. Skipped when `refs.topology` is null.
std::optional<Problem> validateTopologyConstraints(const PodGroup& podGroup, const PodGroupRefs& refs);

/// A Node's labels Tessera relies on: nvidia.com/gpu.memory, when present, is a positive integer
/// number of MiB (api::nodeGpuMemoryMiB).
std::optional<Problem> validateNode(const Node& node);

}  // namespace tessera::api
