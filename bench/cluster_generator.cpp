#include "cluster_generator.h"

#include <algorithm>
#include <random>

#include "tessera/api/clock.h"

namespace tessera::bench {

namespace {

using Json = nlohmann::json;

const int64_t kBase = 1767225600;  // 2026-01-01T00:00:00Z

std::string ts(int64_t sec) { return api::formatTime(api::Time{sec * 1000}); }

Json nodeJson(const std::string& name, const std::string& cpu, int gpus, int rack,
              const std::vector<std::pair<std::string, std::string>>& extraLabels) {
  Json res = {{"cpu", cpu}, {"memory", "1Ti"}, {"pods", "110"}};
  Json labels = {{"kubernetes.io/hostname", name}, {"topology.example.com/rack", "rack-" + std::to_string(rack)}};
  if (gpus > 0) {
    res["nvidia.com/gpu"] = std::to_string(gpus);
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3";
    labels["nvidia.com/gpu.memory"] = "81920";
  }
  for (const auto& [k, v] : extraLabels) labels[k] = v;
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"status", {{"capacity", res}, {"allocatable", res}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json queue(const std::string& name, const std::string& parent, int64_t quotaGpu) {
  auto r = [](const std::string& quota) {
    return Json{{"quota", quota}, {"limit", "-1"}, {"overQuotaWeight", "1"}};
  };
  Json spec = {{"resources", {{"gpu", r(std::to_string(quotaGpu))}, {"cpu", r("-1")}, {"memory", r("-1")}}}};
  if (!parent.empty()) spec["parentQueue"] = parent;
  return {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
          {"kind", "Queue"},
          {"metadata", {{"name", name}, {"creationTimestamp", ts(kBase - 86400)}}},
          {"spec", spec}};
}

/// What a generated pod asks for: whole GPUs, half a GPU in `gpuGroup` (fractional), or cpu only.
struct PodShape {
  std::string gpus = "1";      ///< whole GPUs ("" with a fraction or a cpu-only pod)
  std::string cpu = "8";
  bool halfGpu = false;        ///< annotation gpu-fraction 0.5
  std::string gpuGroup;        ///< a running fractional pod's GPU group
};

Json pod(const std::string& ns, const std::string& name, const std::string& queue, const std::string& group,
         const std::string& pc, int64_t createdSec, const std::string& nodeName, const PodShape& shape = {}) {
  Json meta = {{"name", name},
               {"namespace", ns},
               {"uid", "pod-" + name},
               {"creationTimestamp", ts(createdSec)},
               {"labels", {{"tessera.dev/queue", queue}}}};
  Json annotations = Json::object();
  if (!group.empty()) annotations["pod-group-name"] = group;
  if (shape.halfGpu) annotations["gpu-fraction"] = "0.5";
  if (!annotations.empty()) meta["annotations"] = annotations;
  if (!shape.gpuGroup.empty()) meta["labels"]["tessera.dev/gpu-group"] = shape.gpuGroup;
  Json requests = {{"cpu", shape.cpu}, {"memory", shape.gpus.empty() && !shape.halfGpu ? "8Gi" : "64Gi"}};
  Json resources = {{"requests", requests}};
  if (!shape.gpus.empty()) {
    resources["requests"]["nvidia.com/gpu"] = shape.gpus;
    resources["limits"] = {{"nvidia.com/gpu", shape.gpus}};
  }
  Json spec = {{"schedulerName", "tessera"},
               {"priorityClassName", pc},
               {"containers", {{{"name", "worker"}, {"image", "nvcr.io/nvidia/pytorch:24.05-py3"}, {"resources", resources}}}}};
  Json status = {{"phase", "Pending"}};
  if (!nodeName.empty()) {
    spec["nodeName"] = nodeName;
    status = {{"phase", "Running"}, {"startTime", ts(createdSec + 60)}};
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}, {"status", status}};
}

Json priorityClass(const std::string& name, int value) {
  return {{"apiVersion", "scheduling.k8s.io/v1"}, {"kind", "PriorityClass"}, {"metadata", {{"name", name}}}, {"value", value}};
}

const char* const kClasses[] = {"train", "build", "inference"};

/// PriorityClasses and the queue tree of generateCluster; returns the leaf queues.
std::vector<std::string> addDefinitions(const ClusterSpec& spec, const ObjectSink& add) {
  const int values[] = {50, 100, 125};
  for (int i = 0; i < 3; ++i)
    add(api::Kind::PriorityClass, priorityClass(kClasses[i], values[i]));
  // Queues: departments with teams; quotas split the cluster's GPUs evenly.
  const int64_t totalGpus = int64_t(spec.nodes) * spec.gpusPerNode;
  std::vector<std::string> leaves;
  for (int d = 0; d < spec.departments; ++d) {
    const std::string dept = "dept-" + std::to_string(d);
    add(api::Kind::Queue, queue(dept, "", totalGpus / spec.departments));
    for (int t = 0; t < spec.teamsPerDepartment; ++t) {
      const std::string team = dept + "-team-" + std::to_string(t);
      add(api::Kind::Queue, queue(team, dept, totalGpus / spec.departments / spec.teamsPerDepartment));
      leaves.push_back(team);
    }
  }
  return leaves;
}

}  // namespace

Json makePendingPod(const std::string& ns, const std::string& name, const std::string& queue, int64_t createdSec) {
  return pod(ns, name, queue, "", "train", createdSec, "");
}

Json makeNode(const std::string& name, int gpus, int rack, const std::vector<std::pair<std::string, std::string>>& extraLabels) {
  return nodeJson(name, "128", gpus, rack, extraLabels);
}

/// `sink`, or one that collects into `out.objects`.
ObjectSink sinkFor(GeneratedCluster& out, const ObjectSink& sink) {
  if (sink) return sink;
  return [&out](api::Kind k, Json&& j) { out.objects.push_back({k, std::move(j)}); };
}

GeneratedCluster generateUnschedulableCluster(int nodes, int pods, const ObjectSink& sink) {
  GeneratedCluster out;
  const ObjectSink add = sinkFor(out, sink);
  ClusterSpec spec;
  spec.nodes = nodes;
  spec.gpusPerNode = 0;
  const std::vector<std::string> leaves = addDefinitions(spec, add);
  for (int n = 0; n < nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    add(api::Kind::Node, nodeJson(name, "4", 0, n / 32, {}));
  }
  PodShape big;
  big.gpus = "";
  big.cpu = "8";
  for (int i = 0; i < pods; ++i, ++out.pendingPods) {
    const std::string& q = leaves[static_cast<size_t>(i) % leaves.size()];
    add(api::Kind::Pod, pod("ns-" + q, "big-" + std::to_string(i), q, "", kClasses[i % 3], kBase - 3600 + i, "", big));
  }
  return out;
}

GeneratedCluster generateCluster(const ClusterSpec& spec, const ObjectSink& sink) {
  GeneratedCluster out;
  std::mt19937_64 rng(spec.seed);
  const ObjectSink add = sinkFor(out, sink);
  const std::vector<std::string> leaves = addDefinitions(spec, add);
  const int64_t totalGpus = int64_t(spec.nodes) * spec.gpusPerNode;
  if (spec.preferredTopology)
    add(api::Kind::Topology, {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                              {"kind", "Topology"},
                              {"metadata", {{"name", "dc"}}},
                              {"spec",
                               {{"levels",
                                 {{{"nodeLabel", "topology.example.com/rack"}}, {{"nodeLabel", "kubernetes.io/hostname"}}}}}}});

  for (int n = 0; n < spec.nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    add(api::Kind::Node, nodeJson(name, "128", spec.gpusPerNode, n / 32, {}));
  }

  // Running pods fill nodes in order up to runningFill of all GPUs; the rest are pending.
  const int64_t runningTarget = static_cast<int64_t>(static_cast<double>(totalGpus) * spec.runningFill);
  int64_t placed = 0;
  int nodeCursor = 0, slotOnNode = 0;
  auto nextNode = [&]() -> std::string {
    if (placed >= runningTarget || nodeCursor >= spec.nodes) return "";
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", nodeCursor);
    if (++slotOnNode == spec.gpusPerNode) slotOnNode = 0, ++nodeCursor;
    ++placed;
    return name;
  };

  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<size_t> pickQueue(0, leaves.size() - 1);
  std::uniform_int_distribution<int> pickClass(0, 2);
  int podIndex = 0;
  int64_t created = kBase - 7 * 86400;
  std::string openGroup, openGroupNode;  // a running fractional pod's GPU group with room for one more
  while (podIndex < spec.pods) {
    const std::string q = leaves[pickQueue(rng)];
    const std::string ns = "ns-" + q;
    const std::string pc = kClasses[pickClass(rng)];
    const bool gang = coin(rng) < spec.gangShare && spec.pods - podIndex >= spec.gangSize;
    ++created;
    if (gang) {
      const std::string g = "job-" + std::to_string(out.gangs++);
      // A gang runs whole or not at all.
      const bool running = placed + spec.gangSize <= runningTarget;
      Json pgSpec = {{"minMember", spec.gangSize}, {"queue", q}, {"priorityClassName", pc}};
      if (spec.preferredTopology)
        pgSpec["topologyConstraint"] = {{"topology", "dc"}, {"preferredTopologyLevel", "topology.example.com/rack"}};
      add(api::Kind::PodGroup, {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                                {"kind", "PodGroup"},
                                {"metadata", {{"name", g}, {"namespace", ns}, {"uid", "pg-" + g}, {"creationTimestamp", ts(created)}}},
                                {"spec", pgSpec}});
      for (int i = 0; i < spec.gangSize; ++i, ++podIndex) {
        const std::string nodeName = running ? nextNode() : "";
        add(api::Kind::Pod, pod(ns, g + "-" + std::to_string(i), q, g, pc, created, nodeName));
        (nodeName.empty() ? out.pendingPods : out.runningPods)++;
      }
    } else if (spec.fractionalShare > 0 && coin(rng) < spec.fractionalShare) {
      // Half a GPU: a running one joins the GPU group opened by the previous one, or opens one.
      PodShape half;
      half.gpus = "";
      half.halfGpu = true;
      std::string nodeName;
      if (!openGroup.empty()) {
        nodeName = openGroupNode;
        half.gpuGroup = openGroup;
        openGroup.clear();
      } else if (!(nodeName = nextNode()).empty()) {
        half.gpuGroup = openGroup = nodeName + "-shared-" + std::to_string(podIndex);
        openGroupNode = nodeName;
      }
      const std::string name = "single-" + std::to_string(podIndex);
      add(api::Kind::Pod, pod(ns, name, q, "", pc, created, nodeName, half));
      (nodeName.empty() ? out.pendingPods : out.runningPods)++;
      if (!nodeName.empty()) out.runningSingles.push_back(ns + "/" + name);
      ++podIndex;
    } else {
      const std::string nodeName = nextNode();
      const std::string name = "single-" + std::to_string(podIndex);
      add(api::Kind::Pod, pod(ns, name, q, "", pc, created, nodeName));
      (nodeName.empty() ? out.pendingPods : out.runningPods)++;
      if (!nodeName.empty()) out.runningSingles.push_back(ns + "/" + name);
      ++podIndex;
    }
  }
  return out;
}

GeneratedCluster generateReclaimCluster(int nodes) {
  GeneratedCluster out;
  auto add = [&](api::Kind k, Json j) { out.objects.push_back({k, std::move(j)}); };
  add(api::Kind::PriorityClass, priorityClass("train", 50));
  const int pending = std::max(1, nodes / 10);
  // The starved queue deserves what its pending pods ask for; the busy one deserves nothing and
  // holds every GPU through its over-quota share.
  add(api::Kind::Queue, queue("starved", "", int64_t(pending) * 8));
  add(api::Kind::Queue, queue("busy", "", 0));
  for (int n = 0; n < nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    add(api::Kind::Node, nodeJson(name, "128", 8, n / 32, {}));
    for (int g = 0; g < 8; ++g) {
      add(api::Kind::Pod, pod("ns-busy", std::string(name) + "-victim-" + std::to_string(g), "busy", "", "train",
                              kBase - 86400 + n, name));
      ++out.runningPods;
    }
  }
  PodShape eight;
  eight.gpus = "8";
  for (int i = 0; i < pending; ++i) {
    add(api::Kind::Pod, pod("ns-starved", "big-" + std::to_string(i), "starved", "", "train", kBase - 3600 + i, "", eight));
    ++out.pendingPods;
  }
  return out;
}

GeneratedCluster generateConsolidateCluster(int nodes, int busy, int claimGpus) {
  GeneratedCluster out;
  auto add = [&](api::Kind k, Json j) { out.objects.push_back({k, std::move(j)}); };
  add(api::Kind::PriorityClass, priorityClass("train", 50));
  // One queue that deserves everything: no reclaim, no preemption (one priority); only moving
  // pods makes room.
  add(api::Kind::Queue, queue("team", "", int64_t(nodes) * 8));
  for (int n = 0; n < nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    add(api::Kind::Node, nodeJson(name, "128", 8, n / 32, {}));
    for (int g = 0; g < busy; ++g) {
      add(api::Kind::Pod, pod("ns-team", std::string(name) + "-run-" + std::to_string(g), "team", "", "train",
                              kBase - 86400 + n * 8 + g, name));
      ++out.runningPods;
    }
  }
  PodShape claim;
  claim.gpus = std::to_string(claimGpus);
  for (int i = 0; i < std::max(1, nodes / 10); ++i) {
    add(api::Kind::Pod, pod("ns-team", "claim-" + std::to_string(i), "team", "", "train", kBase - 3600 + i, "", claim));
    ++out.pendingPods;
  }
  return out;
}

}  // namespace tessera::bench
