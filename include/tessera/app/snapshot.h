#pragma once
/// Capturing a cluster's scheduling inputs as a scenario file (../shared/scenarios/SCHEMA.md) that
/// `tessera simulate` replays: `tessera snapshot` (from a kubeconfig) and the daemon's
/// `/debug/snapshot` (through its own client). docs/troubleshooting.md#snapshot says what is kept.
///
/// What a capture holds: every Node, PriorityClass, Queue, Topology and PodGroup; the pods of
/// interest (those of the scheduler name, in any phase, and every other pod bound to a node and not
/// finished: what the cache counts); the Namespaces those objects live in (the pod grouper reads a
/// namespace's queue label); and the workload objects (Job, PyTorchJob, ...) that own a pending pod
/// of the scheduler name which names no PodGroup (what the pod grouper reads). Server-managed
/// metadata (uid, resourceVersion, generation, managedFields, selfLink) and fields no scheduling
/// decision reads (pod IPs, container statuses, node addresses and images, the kubectl
/// last-applied annotation) are dropped; creation and deletion timestamps, phases, start times and
/// conditions are kept, since ordering, pipelining and min-runtimes read them. Objects are written
/// per kind in (creationTimestamp, uid) order: the replay assigns UIDs in file order, so ties on the
/// creation second break as they did live.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/result.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::app {

struct SnapshotOptions {
  /// The scheduler whose pods are of interest (the config's schedulerName).
  std::string schedulerName = "tessera";
  /// The scenario's `config`: the daemon's config file as a map; null for the built-in defaults.
  nlohmann::json config;
  /// Rename namespaces, nodes, pods, PodGroups, Queues, Topologies, PriorityClasses and workloads
  /// (see anonymizeObjects) and drop free text (images, commands, env, messages).
  bool anonymize = false;
  /// The scenario's `clock`: when the capture was taken.
  api::Time capturedAt;
  /// Free text for the scenario's `source` (the API server); left out when anonymizing.
  std::string source;
};

/// Lists the scheduling inputs through `client` (the same ClusterClient seam as the daemon, paged)
/// and returns the scenario as a JSON document. A kind the server does not serve (a CRD not
/// installed: 404) is skipped; any other failed list is an error naming the kind. Namespaces and
/// workloads are read one `get` each, as the pod grouper reads them (the daemon's RBAC: get only);
/// one that cannot be read is left out. Needs no verb the daemon's ClusterRole lacks.
api::Result<nlohmann::json> captureScenario(cache::ClusterClient& client, const SnapshotOptions& options);

/// Pure part of captureScenario: from everything listed (any kinds, any order) to the scenario
/// document: filtering to the objects of interest, stripping, ordering, anonymizing.
nlohmann::json buildScenario(const std::vector<nlohmann::json>& objects, const SnapshotOptions& options);

/// Deterministic renames, consistent across the set: a name becomes `<prefix>-<n>` numbered in the
/// sorted order of the originals (zero-padded), so ties broken by name break the same way in the
/// replay. Kept as they are: namespaces default, kube-* and tessera-reservation; queue default;
/// PriorityClasses system-*. References follow their object: pod nodeName, node hostname labels,
/// node affinity on hostnames, PodGroup annotations and labels, queue labels and spec.queue,
/// parentQueue, priorityClassName, topology names, ownerReferences, the grouper's workload
/// annotation. Other label values of pods, PodGroups and workloads are renamed consistently
/// (`v-<n>`: workload and pod-affinity selectors still match); node labels other than the hostname are kept (nodeSelector,
/// affinity and topology levels match them). Resource amounts, timestamps and phases are kept.
std::vector<nlohmann::json> anonymizeObjects(const std::vector<nlohmann::json>& objects);

/// A JSON value as block-style YAML (strings double-quoted) that api::yamlToJson reads back equal.
std::string toYaml(const nlohmann::json& value);

/// `tessera snapshot --kubeconfig PATH [--context NAME] [-o FILE] [--config FILE]
/// [--scheduler-name NAME] [--anonymize]`: writes the scenario to FILE or `out`. Returns the exit
/// code. (Linked from tessera_daemon: it needs the HTTP client.)
int snapshotCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::app
