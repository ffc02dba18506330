#include "tessera/cache/placement_key.h"

#include <algorithm>

namespace tessera::cache {

namespace {

void appendSelector(std::string& key, const api::NodeSelectorRequirement& r) {
  key += r.key;
  key += static_cast<char>('0' + static_cast<int>(r.op));
  for (const auto& v : r.values) key += v + ",";
  key += ';';
}

}  // namespace

std::string podPlacementKey(const api::Pod& pod, const api::Resources& request) {
  const api::Resources& r = request;
  std::string key;
  key.reserve(128);
  key += std::to_string(r.milliCpu) + "/" + std::to_string(r.memory) + "/" + std::to_string(r.milliGpu);
  for (const auto& [n, v] : r.scalars) key += "/" + n + "=" + std::to_string(v);
  key += "|sel:";
  for (const auto& [k, v] : pod.nodeSelector) key += k + "=" + v + ",";
  key += "|aff:";
  for (const auto& term : pod.requiredNodeAffinity) {
    for (const auto& e : term.matchExpressions) appendSelector(key, e);
    key += "f:";
    for (const auto& e : term.matchFields) appendSelector(key, e);
    key += "||";
  }
  key += "|tol:";
  for (const auto& t : pod.tolerations) {
    key += t.key + (t.op == api::TolerationOperator::Exists ? "?" : "=") + t.value + ":";
    key += t.effect ? std::to_string(static_cast<int>(*t.effect)) : "*";
    key += ",";
  }
  key += "|ports:";
  for (const auto& hp : pod.hostPorts) key += std::to_string(hp.port) + hp.protocol + hp.hostIP + ",";
  // Only the annotations Tessera's plugins read: per-pod annotations (a Job's completion index,
  // a restart stamp) must not split pods that place alike into separate rankings.
  static constexpr const char* kPlacementAnnotations[] = {
      api::keys::kNodePolicy, api::keys::kGpuPolicy,  api::keys::kGpuFraction, api::keys::kGpuMemory,
      api::keys::kGpuFractionNumDevices, api::keys::kUseGpuType, api::keys::kAvoidGpuType, api::keys::kNoUseGpuType,
      api::keys::kGpuCores, api::keys::kUseGpuUuid, api::keys::kNoUseGpuUuid, api::keys::kHamiUseGpuUuid,
      api::keys::kHamiNoUseGpuUuid};
  key += "|ann:";
  for (const char* k : kPlacementAnnotations)
    if (const std::string* v = pod.meta.annotation(k)) key += std::string(k) + "=" + *v + "\n";
  return key;
}

std::string taskPlacementKey(const api::Pod& pod, const api::Resources& request, const std::string& podKey,
                             const std::string& gpuSpecError) {
  std::string key = podPlacementKey(pod, request);
  if (!gpuSpecError.empty()) key += "|refused:" + podKey;
  return key;
}

std::string topologyKeyOf(const api::TopologyConstraint& tc) {
  if (tc.empty()) return {};
  std::string key;
  for (const std::string* part : {&tc.topology, &tc.requiredTopologyLevel, &tc.preferredTopologyLevel}) {
    key += std::to_string(part->size());
    key += ':';
    key += *part;
  }
  return key;
}

std::shared_ptr<const std::string> KeyInterner::intern(std::string key) {
  auto [it, fresh] = keys_.try_emplace(std::move(key));
  if (auto held = it->second.lock()) return held;
  auto made = std::make_shared<const std::string>(it->first);
  it->second = made;
  if (fresh && keys_.size() >= pruneAt_) {  // drop the keys no pod holds any more
    for (auto e = keys_.begin(); e != keys_.end();) e = e->second.expired() ? keys_.erase(e) : std::next(e);
    pruneAt_ = std::max<size_t>(1024, 2 * keys_.size());
  }
  return made;
}

}  // namespace tessera::cache
