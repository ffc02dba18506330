// The simulated kubelet and GPU device plugin of the in-memory cluster (scenario SCHEMA.md, "Simulated
// kubelet and devices"). Everything here runs under the store lock, in pod creation order, so a tick is
// deterministic.
#include <algorithm>
#include <array>
#include <set>
#include <string_view>

#include "store.h"
#include "tessera/api/objects.h"
#include "tessera/api/quantity.h"

namespace tessera::cache {

using memory::Key;
using memory::keyText;
using memory::podTerminal;
using memory::stringAt;
using memory::terminating;

namespace {

constexpr const char* kRecreateAnnotation = "sim.tessera.dev/recreate";
constexpr const char* kDurationAnnotation = "sim.tessera.dev/duration";

/// The resources the kubelet's admission checks, besides the pod count. cpu and GPUs in thousandths,
/// memory in bytes (as parseResourceAmount reads them).
constexpr std::array<std::string_view, 3> kAdmitted = {"cpu", "memory", "nvidia.com/gpu"};
constexpr size_t kGpuIndex = 2;
using Amounts = std::array<int64_t, kAdmitted.size()>;

/// A quantity from JSON: a string ("500m") or, from YAML plain scalars, a number (2).
int64_t amount(const Json& list, std::string_view name) {
  if (!list.is_object()) return 0;
  auto it = list.find(std::string(name));
  if (it == list.end()) return 0;
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_number()) {
    text = it->dump();
  } else {
    return 0;
  }
  auto parsed = api::parseResourceAmount(name, text);
  return parsed ? *parsed : 0;  // the API server would have refused it; the kubelet ignores it here
}

bool has(const Json& list, std::string_view name) { return list.is_object() && list.contains(std::string(name)); }

/// A container's request of each resource: the request, else the limit (API server defaulting).
Amounts containerRequest(const Json& container) {
  Amounts out{};
  if (!container.is_object() || !container.contains("resources")) return out;
  const Json& res = container["resources"];
  const Json requests = res.is_object() && res.contains("requests") ? res["requests"] : Json();
  const Json limits = res.is_object() && res.contains("limits") ? res["limits"] : Json();
  for (size_t i = 0; i < kAdmitted.size(); ++i) {
    out[i] = has(requests, kAdmitted[i]) ? amount(requests, kAdmitted[i]) : amount(limits, kAdmitted[i]);
  }
  return out;
}

/// max(sum over containers, max over init containers) + overhead, per resource.
Amounts podRequest(const Json& pod) {
  Amounts sum{}, init{};
  if (!pod.contains("spec") || !pod["spec"].is_object()) return sum;
  const Json& spec = pod["spec"];
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (const Json& c : spec["containers"]) {
      Amounts r = containerRequest(c);
      for (size_t i = 0; i < r.size(); ++i) sum[i] += r[i];
    }
  }
  if (spec.contains("initContainers") && spec["initContainers"].is_array()) {
    for (const Json& c : spec["initContainers"]) {
      Amounts r = containerRequest(c);
      for (size_t i = 0; i < r.size(); ++i) init[i] = std::max(init[i], r[i]);
    }
  }
  const Json overhead = spec.contains("overhead") ? spec["overhead"] : Json();
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = std::max(sum[i], init[i]) + amount(overhead, kAdmitted[i]);
  return sum;
}

int64_t wholeGpus(const Amounts& request) { return request[kGpuIndex] / 1000; }

const Json& allocatableOf(const Json& node) {
  static const Json kNone;
  if (!node.contains("status") || !node["status"].is_object()) return kNone;
  const Json& status = node["status"];
  return status.contains("allocatable") ? status["allocatable"] : kNone;
}

/// What the kubelet of one node has admitted.
struct NodeUsage {
  Amounts used{};
  int64_t pods = 0;
  std::set<int> devices;
};

}  // namespace

void MemoryCluster::Impl::completeExpiredLocked(std::vector<std::string>& completed) {
  const api::Time now = clock.now();
  for (const Key& key : podsInCreationOrder()) {
    const Json* pod = find(api::Kind::Pod, key);
    if (pod == nullptr || stringAt(*pod, "status", "phase") != "Running") continue;
    std::string duration = stringAt((*pod)["metadata"], "annotations", kDurationAnnotation);
    if (duration.empty()) continue;
    auto d = api::parseDuration(duration);
    auto started = api::parseTime(stringAt(*pod, "status", "startTime"));
    if (!d || !started || now < *started + *d) continue;  // a malformed annotation never completes
    Json next = *pod;
    next["status"]["phase"] = "Succeeded";
    modify(api::Kind::Pod, key, *pod, std::move(next));  // commit() frees the devices
    completed.push_back(keyText(key));
  }
}

MemoryCluster::KubeletReport MemoryCluster::kubeletTick() {
  auto lock = impl_->lock();
  Impl& s = *impl_;
  KubeletReport report;
  const std::string now = api::formatTime(s.clock.now());

  // (1) Terminating pods go away: their containers have stopped by the end of the cycle.
  for (const Key& key : s.podsInCreationOrder()) {
    const Json* pod = s.find(api::Kind::Pod, key);
    if (pod == nullptr || !terminating(*pod)) continue;
    Json last = *pod;
    s.commit(api::Kind::Pod, key, WatchEventType::Deleted, last, last);
    report.removed.push_back(keyText(key));
    if (stringAt(last["metadata"], "annotations", kRecreateAnnotation) != "true") continue;
    // Its controller makes a new pod of the same name: fresh uid, unbound, no status.
    Json fresh = {{"apiVersion", last["apiVersion"]}, {"kind", last["kind"]}};
    Json meta = {{"name", key.second}, {"namespace", key.first}};
    for (const char* field : {"labels", "annotations", "ownerReferences", "generateName"}) {
      if (last["metadata"].contains(field)) meta[field] = last["metadata"][field];
    }
    fresh["metadata"] = std::move(meta);
    if (last.contains("spec")) {
      fresh["spec"] = last["spec"];
      if (fresh["spec"].is_object()) fresh["spec"].erase("nodeName");
    }
    fresh["metadata"]["creationTimestamp"] = now;
    if (s.createLocked(api::Kind::Pod, std::move(fresh), /*keepUid=*/false).ok()) {
      report.recreated.push_back(keyText(key));
    }
  }

  // What each node's kubelet holds: admitted (Running) pods and their devices.
  const std::vector<Key> order = s.podsInCreationOrder();
  std::map<std::string, NodeUsage> usage;
  for (const Key& key : order) {
    const Json& pod = *s.find(api::Kind::Pod, key);
    std::string node = stringAt(pod, "spec", "nodeName");
    if (node.empty() || podTerminal(pod) || stringAt(pod, "status", "phase") != "Running") continue;
    NodeUsage& u = usage[node];
    Amounts r = podRequest(pod);
    for (size_t i = 0; i < r.size(); ++i) u.used[i] += r[i];
    ++u.pods;
  }
  for (const auto& [uid, alloc] : s.devices) usage[alloc.node].devices.insert(alloc.devices.begin(), alloc.devices.end());

  auto assignDevices = [&](const Json& pod, const std::string& nodeName, int64_t count) {
    const Json* node = s.find(api::Kind::Node, Key{"", nodeName});
    int64_t total = node ? amount(allocatableOf(*node), "nvidia.com/gpu") / 1000 : 0;
    NodeUsage& u = usage[nodeName];
    memory::DeviceAllocation alloc{nodeName, {}};
    for (int i = 0; i < total && static_cast<int64_t>(alloc.devices.size()) < count; ++i) {
      if (u.devices.insert(i).second) alloc.devices.push_back(i);
    }
    if (!alloc.devices.empty()) s.devices[stringAt(pod, "metadata", "uid")] = std::move(alloc);
  };

  // (2a) Pods that were already running when the cluster was loaded get their devices, oldest first,
  // before any newly started pod takes one.
  for (const Key& key : order) {
    const Json& pod = *s.find(api::Kind::Pod, key);
    std::string node = stringAt(pod, "spec", "nodeName");
    if (node.empty() || stringAt(pod, "status", "phase") != "Running") continue;
    if (s.devices.count(stringAt(pod, "metadata", "uid")) != 0) continue;
    int64_t gpus = wholeGpus(podRequest(pod));
    if (gpus > 0) assignDevices(pod, node, gpus);
  }

  // (2b) Bound Pending pods: admission against the node's allocatable, then Running with devices.
  for (const Key& key : order) {
    const Json* pod = s.find(api::Kind::Pod, key);
    if (pod == nullptr || stringAt(*pod, "status", "phase") != "Pending") continue;
    std::string nodeName = stringAt(*pod, "spec", "nodeName");
    if (nodeName.empty()) continue;
    const Json* node = s.find(api::Kind::Node, Key{"", nodeName});
    if (node == nullptr) continue;  // no kubelet there: the pod stays Pending
    // A reservation pod is started by the simulated device plugin, which a test may hold: the pod
    // waits Pending (ContainerCreating), as behind a slow device plugin, never Running without a UUID.
    const bool reservation = Impl::isReservationPod(*pod);
    if (reservation && s.holdReservations) continue;
    const Json& allocatable = allocatableOf(*node);
    NodeUsage& u = usage[nodeName];
    Amounts request = podRequest(*pod);
    std::string insufficient;
    std::string detail;
    int64_t podCapacity = has(allocatable, "pods") ? amount(allocatable, "pods") : 110;
    if (u.pods + 1 > podCapacity) {
      insufficient = "pods";
      detail = "requested: 1, used: " + std::to_string(u.pods) + ", capacity: " + std::to_string(podCapacity);
    }
    for (size_t i = 0; i < kAdmitted.size() && insufficient.empty(); ++i) {
      int64_t capacity = amount(allocatable, kAdmitted[i]);
      if (request[i] > 0 && u.used[i] + request[i] > capacity) {
        insufficient = std::string(kAdmitted[i]);
        detail = "requested: " + std::to_string(request[i]) + ", used: " + std::to_string(u.used[i]) +
                 ", capacity: " + std::to_string(capacity);
      }
    }
    Json next = *pod;
    Json& status = next["status"];
    if (!insufficient.empty()) {
      // As the kubelet does: the pod fails and stays failed; its controller may replace it.
      status["phase"] = "Failed";
      status["reason"] = "OutOf" + insufficient;
      status["message"] = "Pod was rejected: Node didn't have enough resource: " + insufficient + ", " + detail;
      s.modify(api::Kind::Pod, key, *pod, std::move(next));
      report.rejected.push_back(keyText(key));
      continue;
    }
    for (size_t i = 0; i < request.size(); ++i) u.used[i] += request[i];
    ++u.pods;
    if (reservation) {  // its GPU, Running and its UUID reported, as at its creation
      s.startReservationLocked(key);
      report.started.push_back(keyText(key));
      continue;
    }
    status["phase"] = "Running";
    status["startTime"] = now;
    // Devices first, so that devicesOf() already answers when watchers see the pod Running.
    if (int64_t gpus = wholeGpus(request); gpus > 0) assignDevices(*pod, nodeName, gpus);
    s.modify(api::Kind::Pod, key, *pod, std::move(next));
    report.started.push_back(keyText(key));
  }

  // (3) Pods that have run for their sim.tessera.dev/duration complete.
  s.completeExpiredLocked(report.completed);
  return report;
}

void MemoryCluster::holdReservations(bool hold) {
  auto lock = impl_->lock();
  impl_->holdReservations = hold;
  if (hold) return;
  std::vector<Key> held;
  for (const auto& [key, pod] : impl_->objects[api::Kind::Pod])
    if (key.first == api::keys::kReservationNamespace && !stringAt(pod, "spec", "nodeName").empty())
      held.push_back(key);
  for (const Key& key : held) impl_->startReservationLocked(key);
}

bool MemoryCluster::Impl::isReservationPod(const Json& pod) {
  return stringAt(pod, "metadata", "namespace") == api::keys::kReservationNamespace &&
         !stringAt(pod, "spec", "nodeName").empty() && pod["metadata"].contains("labels") &&
         pod["metadata"]["labels"].is_object() && pod["metadata"]["labels"].contains(api::keys::kGpuGroupLabel);
}

void MemoryCluster::Impl::startReservationLocked(const Key& key) {
  if (holdReservations) return;
  const Json* pod = find(api::Kind::Pod, key);
  if (pod == nullptr || stringAt(*pod, "status", "phase") != "Pending") return;
  const std::string nodeName = stringAt(*pod, "spec", "nodeName");
  const Json* node = find(api::Kind::Node, Key{"", nodeName});
  const int64_t total = node ? amount(allocatableOf(*node), "nvidia.com/gpu") / 1000 : 0;
  std::set<int> taken;
  for (const auto& [uid, alloc] : devices)
    if (alloc.node == nodeName) taken.insert(alloc.devices.begin(), alloc.devices.end());
  int device = -1;
  for (int i = 0; i < total && device < 0; ++i)
    if (!taken.count(i)) device = i;
  Json next = *pod;
  Json& status = next["status"];
  if (device < 0) {
    status["phase"] = "Failed";
    status["reason"] = "OutOfnvidia.com/gpu";
    status["message"] = "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu";
    modify(api::Kind::Pod, key, *pod, std::move(next));
    return;
  }
  devices[stringAt(*pod, "metadata", "uid")] = memory::DeviceAllocation{nodeName, {device}};
  status["phase"] = "Running";
  status["startTime"] = api::formatTime(clock.now());
  if (!next["metadata"].contains("annotations") || !next["metadata"]["annotations"].is_object())
    next["metadata"]["annotations"] = Json::object();
  next["metadata"]["annotations"][api::keys::kGpuUuidAnnotation] = "GPU-sim-" + nodeName + "-" + std::to_string(device);
  modify(api::Kind::Pod, key, *pod, std::move(next));
}

std::vector<std::string> MemoryCluster::completeExpired() {
  auto lock = impl_->lock();
  std::vector<std::string> completed;
  impl_->completeExpiredLocked(completed);
  return completed;
}

}  // namespace tessera::cache
