#pragma once
/// Generates a synthetic GPU cluster as Kubernetes JSON objects, deterministically from a seed:
/// nodes with 8 GPUs, a two-level queue tree, PriorityClasses, running and pending pods in gangs
/// (PodGroups) and singles. Used by tessera-bench.
#include <cstdint>
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
};

GeneratedCluster generateCluster(const ClusterSpec& spec);

/// KAI's "ReclaimLargeJobs" shape: `nodes` nodes of 8 GPUs, every GPU busy with a 1-GPU
/// preemptible pod of an over-share queue, and nodes/10 pending 8-GPU pods of a starved queue.
GeneratedCluster generateReclaimCluster(int nodes);

/// A pending single pod (1 GPU) for churn between cycles.
nlohmann::json makePendingPod(const std::string& ns, const std::string& name, const std::string& queue, int64_t createdSec);

}  // namespace tessera::bench
