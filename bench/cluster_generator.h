#pragma once
/// Generates a synthetic GPU cluster as Kubernetes JSON objects, deterministically from a seed:
/// nodes with 8 GPUs, a two-level queue tree, PriorityClasses, running and pending pods in gangs
/// (PodGroups) and singles. Used by tessera-bench.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/kinds.h"

namespace tessera::bench {

struct ClusterSpec {
  int nodes = 4000;
  int gpusPerNode = 8;
  int pods = 140000;
  int departments = 10;       ///< parent queues
  int teamsPerDepartment = 10;  ///< leaf queues per parent (100 queues in two levels by default)
  int gangSize = 8;
  double gangShare = 0.5;     ///< fraction of pods that belong to gangs
  double runningFill = 0.9;   ///< fraction of the cluster's GPUs held by running pods
  uint64_t seed = 1;
  /// Fraction of single pods that ask for half a GPU (annotation gpu-fraction 0.5) instead of a
  /// whole one; running ones share GPUs two by two in GPU groups (label tessera.dev/gpu-group).
  double fractionalShare = 0;
  /// Adds a Topology "dc" (rack, hostname) and gives every PodGroup preferredTopologyLevel rack.
  bool preferredTopology = false;
};

struct GeneratedObject {
  api::Kind kind;
  nlohmann::json object;
};

struct GeneratedCluster {
  std::vector<GeneratedObject> objects;  ///< in creation order (definitions, nodes, groups, pods)
  int runningPods = 0;
  int pendingPods = 0;
  int gangs = 0;
  /// Keys ("namespace/name") of the running single pods, oldest first (what finishes first).
  std::vector<std::string> runningSingles;
};

/// Receives generated objects one by one (in creation order) instead of collecting them: a large
/// cluster is then never held as JSON all at once.
using ObjectSink = std::function<void(api::Kind, nlohmann::json&&)>;

/// `sink` set: objects go to it and `objects` stays empty.
GeneratedCluster generateCluster(const ClusterSpec& spec, const ObjectSink& sink = {});

/// KAI's "ReclaimLargeJobs" shape: `nodes` nodes of 8 GPUs, every GPU busy with a 1-GPU
/// preemptible pod of an over-share queue, and nodes/10 pending 8-GPU pods of a starved queue.
GeneratedCluster generateReclaimCluster(int nodes);

/// Consolidation: `nodes` nodes of 8 GPUs, each running `busy` 1-GPU pods (single preemptible
/// pods of one queue that deserves everything), and nodes/10 pending pods asking `claimGpus` GPUs
/// each of the same queue and priority: with 8 - busy < claimGpus they fit nowhere as things are,
/// and only consolidation (moving running pods) makes room.
GeneratedCluster generateConsolidateCluster(int nodes, int busy, int claimGpus);

/// The `unschedulable` shape of issue 16: `nodes` nodes of 4 cpu (no GPU) and `pods` pending
/// single pods asking for 8 cpu each, in the 100 queues: no pod fits anywhere.
GeneratedCluster generateUnschedulableCluster(int nodes, int pods, const ObjectSink& sink = {});

/// A node as generateCluster makes it (128 cpu, 1 TiB, 8 GPUs, labels hostname / rack / GPU
/// model); `extraLabels` are added (churn-nodes changes them every cycle).
nlohmann::json makeNode(const std::string& name, int gpus, int rack,
                        const std::vector<std::pair<std::string, std::string>>& extraLabels = {});

/// A pending single pod (1 GPU) for churn between cycles.
nlohmann::json makePendingPod(const std::string& ns, const std::string& name, const std::string& queue, int64_t createdSec);

}  // namespace tessera::bench
