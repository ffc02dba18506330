#include "cluster_generator.h"

#include <algorithm>
#include <random>

#include "tessera/api/clock.h"

namespace tessera::bench {

namespace {

using Json = nlohmann::json;

const int64_t kBase = 1767225600;  // 2026-01-01T00:00:00Z

std::string ts(int64_t sec) { return api::formatTime(api::Time{sec * 1000}); }

Json node(const std::string& name, int gpus, int rack) {
  const std::string g = std::to_string(gpus);
  Json res = {{"cpu", "128"}, {"memory", "1Ti"}, {"pods", "110"}, {"nvidia.com/gpu", g}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"topology.example.com/rack", "rack-" + std::to_string(rack)},
              {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
              {"nvidia.com/gpu.memory", "81920"}}}}},
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

Json pod(const std::string& ns, const std::string& name, const std::string& queue, const std::string& group,
         const std::string& pc, int64_t createdSec, const std::string& nodeName, const std::string& gpus = "1") {
  Json meta = {{"name", name},
               {"namespace", ns},
               {"uid", "pod-" + name},
               {"creationTimestamp", ts(createdSec)},
               {"labels", {{"tessera.dev/queue", queue}}}};
  if (!group.empty()) meta["annotations"] = {{"pod-group-name", group}};
  Json spec = {{"schedulerName", "tessera"},
               {"priorityClassName", pc},
               {"containers",
                {{{"name", "worker"},
                  {"image", "nvcr.io/nvidia/pytorch:24.05-py3"},
                  {"resources",
                   {{"requests", {{"cpu", "8"}, {"memory", "64Gi"}, {"nvidia.com/gpu", gpus}}},
                    {"limits", {{"nvidia.com/gpu", gpus}}}}}}}}};
  Json status = {{"phase", "Pending"}};
  if (!nodeName.empty()) {
    spec["nodeName"] = nodeName;
    status = {{"phase", "Running"}, {"startTime", ts(createdSec + 60)}};
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}, {"status", status}};
}

}  // namespace

Json makePendingPod(const std::string& ns, const std::string& name, const std::string& queue, int64_t createdSec) {
  return pod(ns, name, queue, "", "train", createdSec, "");
}

GeneratedCluster generateCluster(const ClusterSpec& spec) {
  GeneratedCluster out;
  std::mt19937_64 rng(spec.seed);
  auto add = [&](api::Kind k, Json j) { out.objects.push_back({k, std::move(j)}); };

  const char* classes[] = {"train", "build", "inference"};
  const int values[] = {50, 100, 125};
  for (int i = 0; i < 3; ++i)
    add(api::Kind::PriorityClass, {{"apiVersion", "scheduling.k8s.io/v1"},
                                   {"kind", "PriorityClass"},
                                   {"metadata", {{"name", classes[i]}}},
                                   {"value", values[i]}});

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

  for (int n = 0; n < spec.nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    add(api::Kind::Node, node(name, spec.gpusPerNode, n / 32));
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
  while (podIndex < spec.pods) {
    const std::string q = leaves[pickQueue(rng)];
    const std::string ns = "ns-" + q;
    const std::string pc = classes[pickClass(rng)];
    const bool gang = coin(rng) < spec.gangShare && spec.pods - podIndex >= spec.gangSize;
    ++created;
    if (gang) {
      const std::string g = "job-" + std::to_string(out.gangs++);
      // A gang runs whole or not at all.
      const bool running = placed + spec.gangSize <= runningTarget;
      add(api::Kind::PodGroup, {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                                {"kind", "PodGroup"},
                                {"metadata", {{"name", g}, {"namespace", ns}, {"uid", "pg-" + g}, {"creationTimestamp", ts(created)}}},
                                {"spec", {{"minMember", spec.gangSize}, {"queue", q}, {"priorityClassName", pc}}}});
      for (int i = 0; i < spec.gangSize; ++i, ++podIndex) {
        const std::string nodeName = running ? nextNode() : "";
        add(api::Kind::Pod, pod(ns, g + "-" + std::to_string(i), q, g, pc, created, nodeName));
        (nodeName.empty() ? out.pendingPods : out.runningPods)++;
      }
    } else {
      const std::string nodeName = nextNode();
      add(api::Kind::Pod, pod(ns, "single-" + std::to_string(podIndex), q, "", pc, created, nodeName));
      (nodeName.empty() ? out.pendingPods : out.runningPods)++;
      ++podIndex;
    }
  }
  return out;
}

GeneratedCluster generateReclaimCluster(int nodes) {
  GeneratedCluster out;
  auto add = [&](api::Kind k, Json j) { out.objects.push_back({k, std::move(j)}); };
  add(api::Kind::PriorityClass, {{"apiVersion", "scheduling.k8s.io/v1"},
                                 {"kind", "PriorityClass"},
                                 {"metadata", {{"name", "train"}}},
                                 {"value", 50}});
  const int pending = std::max(1, nodes / 10);
  // The starved queue deserves what its pending pods ask for; the busy one deserves nothing and
  // holds every GPU through its over-quota share.
  add(api::Kind::Queue, queue("starved", "", int64_t(pending) * 8));
  add(api::Kind::Queue, queue("busy", "", 0));
  for (int n = 0; n < nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    add(api::Kind::Node, node(name, 8, n / 32));
    for (int g = 0; g < 8; ++g) {
      add(api::Kind::Pod, pod("ns-busy", std::string(name) + "-victim-" + std::to_string(g), "busy", "", "train",
                              kBase - 86400 + n, name));
      ++out.runningPods;
    }
  }
  for (int i = 0; i < pending; ++i) {
    add(api::Kind::Pod, pod("ns-starved", "big-" + std::to_string(i), "starved", "", "train", kBase - 3600 + i, "", "8"));
    ++out.pendingPods;
  }
  return out;
}

}  // namespace tessera::bench
