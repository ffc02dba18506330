#include "domain_tree.h"

#include <algorithm>
#include <climits>
#include <set>

#include "tessera/api/gpu_request.h"

namespace tessera::plugins::topology {

std::pair<api::Resources, int64_t> freeOf(const framework::SessionNode& n, const Overlay* overlay, Basis basis) {
  const api::Node& node = n.node();
  if (!node.ready || node.unschedulable) return {api::Resources{}, 0};
  std::pair<api::Resources, int64_t> out =
      basis == Basis::Free  ? std::pair<api::Resources, int64_t>{n.futureIdle(), node.allocatablePods - n.futurePods()}
      : basis == Basis::Now ? std::pair<api::Resources, int64_t>{n.idle, node.allocatablePods - n.podCount}
                            : std::pair<api::Resources, int64_t>{n.info->allocatable - n.info->foreignUsed,
                                                                 node.allocatablePods};
  if (overlay) {
    auto it = overlay->used.find(n.index);
    if (it != overlay->used.end()) {
      out.first -= it->second.first;
      out.second -= it->second.second;
    }
  }
  return out;
}

int64_t fitCount(const api::Resources& free, const api::Resources& request) {
  int64_t k = INT64_MAX;
  auto limit = [&](int64_t have, int64_t want) {
    if (want > 0) k = std::min(k, have <= 0 ? int64_t{0} : have / want);
  };
  limit(free.milliCpu, request.milliCpu);
  limit(free.memory, request.memory);
  limit(free.milliGpu, request.milliGpu);
  for (const auto& [name, v] : request.scalars) limit(free.get(name), v);
  return k;
}

void subtractTimes(api::Resources& r, const api::Resources& request, int64_t k) {
  r.milliCpu -= request.milliCpu * k;
  r.memory -= request.memory * k;
  r.milliGpu -= request.milliGpu * k;
  for (const auto& [name, v] : request.scalars) r.set(name, r.get(name) - v * k);
}

std::string requestKey(const api::Resources& r, const api::PodGpuSpec* share) {
  // Appended piece by piece into one buffer (no temporary per piece).
  std::string key;
  key.reserve(48);
  key += std::to_string(r.milliCpu);
  key += '/';
  key += std::to_string(r.memory);
  key += '/';
  key += std::to_string(r.milliGpu);
  for (const auto& [n, v] : r.scalars) {
    key += '/';
    key += n;
    key += '=';
    key += std::to_string(v);
  }
  if (share) {
    key += "/share=";
    key += std::to_string(share->fractionMilli);
    key += ',';
    key += std::to_string(share->memoryMiB);
  }
  return key;
}

namespace {

/// How many pods of a fractional class the node's GPUs take: the room left in its GPU groups (an
/// existing shared GPU may be joined) plus whole GPUs, each holding capacity / units of them (and
/// no more than their compute holds).
int64_t shareSlots(const framework::SessionNode& n, const api::PodGpuSpec& share, int64_t wholeMilli, Basis basis) {
  const int64_t units = cache::gpuUnitsOn(share, *n.info);
  const int64_t compute = api::gpuComputeMilli(share);
  const int64_t capacity = n.info->gpuUnits();
  if (units <= 0 || units > capacity || compute > n.gpuComputeCapacity) return 0;
  const auto pods = [&](int64_t unitRoom, int64_t computeRoom) {
    const int64_t k = std::max<int64_t>(0, unitRoom) / units;
    return compute > 0 ? std::min(k, std::max<int64_t>(0, computeRoom) / compute) : k;
  };
  int64_t k = std::max<int64_t>(0, wholeMilli / 1000) * pods(capacity, n.gpuComputeCapacity);
  if (basis != Basis::Capacity)
    for (const framework::SessionGpuGroup& g : n.gpuGroups)
      if (g.capacity > 0)
        k += basis == Basis::Free ? pods(g.futureFree(), g.computeFutureFree()) : pods(g.free(), g.computeFree());
  return k;
}

}  // namespace

Room roomOf(const std::vector<int>& nodes, const std::vector<PodClass>& classes,
            const std::vector<framework::SessionNode>& sessionNodes, const Overlay* overlay, Overlay* commit,
            Basis basis) {
  Room room;
  std::vector<int64_t> left;
  left.reserve(classes.size());
  for (const PodClass& c : classes) left.push_back(c.count);
  for (int ni : nodes) {
    auto [free, slots] = freeOf(sessionNodes[ni], overlay, basis);
    room.freeGpu += std::max<int64_t>(0, free.milliGpu);
    room.freeCpu += std::max<int64_t>(0, free.milliCpu);
    int64_t shares = -1;  // fractional pods the node's GPUs still take (computed when first asked)
    for (size_t c = 0; c < classes.size() && slots > 0; ++c) {
      if (left[c] <= 0) continue;
      // A fractional pod's share is taken from GPU groups, not from the node's idle GPUs.
      api::Resources request = classes[c].request;
      if (classes[c].share) {
        request.milliGpu = 0;
        if (shares < 0) shares = shareSlots(sessionNodes[ni], *classes[c].share, free.milliGpu, basis);
      }
      int64_t k = std::min({fitCount(free, request), slots, left[c]});
      if (classes[c].share) k = std::min(k, shares);
      if (k <= 0) continue;
      if (classes[c].share) shares -= k;
      left[c] -= k;
      slots -= k;
      room.pods += k;
      if (classes.size() > 1 || commit) subtractTimes(free, request, k);
      if (commit) {
        auto& [res, pods] = commit->used[ni];
        api::Resources add;
        subtractTimes(add, request, -k);
        res += add;
        pods += k;
      }
    }
  }
  return room;
}

namespace {
std::string shortOf(const std::string& label) {
  const auto slash = label.rfind('/');
  return slash == std::string::npos ? label : label.substr(slash + 1);
}
}  // namespace

DomainTree::DomainTree(std::shared_ptr<const api::Topology> topologyPtr, const std::vector<framework::SessionNode>& nodes)
    : name_(topologyPtr->meta.name), topology_(std::move(topologyPtr)) {
  const api::Topology& topology = *topology_;
  nodeObjects_.reserve(nodes.size());
  for (const framework::SessionNode& n : nodes) nodeObjects_.push_back(n.info->node);
  const size_t L = topology.levels.size();
  levels_.resize(L);
  std::set<std::string> shorts, clash;
  for (const auto& lv : topology.levels)
    if (!shorts.insert(shortOf(lv.nodeLabel)).second) clash.insert(shortOf(lv.nodeLabel));
  for (size_t l = 0; l < L; ++l) {
    levels_[l].label = topology.levels[l].nodeLabel;
    const std::string s = shortOf(levels_[l].label);
    levels_[l].shortName = clash.count(s) ? levels_[l].label : s;
    levels_[l].nodeDomain.assign(nodes.size(), -1);
  }
  // (parent domain, label value) -> domain, per level.
  std::vector<std::map<std::pair<int, std::string>, int>> index(L);
  std::vector<const std::string*> values(L);
  for (const framework::SessionNode& n : nodes) {
    bool member = L > 0;
    for (size_t l = 0; l < L && member; ++l) member = (values[l] = n.node().meta.label(levels_[l].label)) != nullptr;
    if (!member) continue;
    ++nodesInTree_;
    int parent = -1;
    for (size_t l = 0; l < L; ++l) {
      auto [it, fresh] = index[l].try_emplace({parent, *values[l]}, static_cast<int>(levels_[l].domains.size()));
      if (fresh) {
        Domain d;
        d.id = (parent < 0 ? "" : levels_[l - 1].domains[parent].id + "/") + levels_[l].shortName + "=" + *values[l];
        d.parent = parent;
        levels_[l].domains.push_back(std::move(d));
      }
      levels_[l].domains[it->second].nodes.push_back(n.index);
      levels_[l].nodeDomain[n.index] = it->second;
      parent = it->second;
    }
  }
  versions_.resize(L);
  for (size_t l = 0; l < L; ++l) versions_[l].assign(levels_[l].domains.size(), 0);
  for (Level& level : levels_) {
    std::vector<int> byId(level.domains.size());
    for (size_t d = 0; d < byId.size(); ++d) byId[d] = static_cast<int>(d);
    std::sort(byId.begin(), byId.end(), [&](int a, int b) { return level.domains[a].id < level.domains[b].id; });
    for (size_t r = 0; r < byId.size(); ++r) level.domains[static_cast<size_t>(byId[r])].idOrder = static_cast<int>(r);
  }
}

int DomainTree::levelOf(const std::string& label) const {
  for (size_t l = 0; l < levels_.size(); ++l)
    if (levels_[l].label == label) return static_cast<int>(l);
  return -1;
}

bool DomainTree::within(int l, int d, int scopeLevel, int scope) const {
  if (scopeLevel < 0) return true;
  if (scopeLevel >= l) return scopeLevel == l && scope == d;
  return levels_[scopeLevel].nodeDomain[levels_[l].domains[d].nodes.front()] == scope;
}

std::string DomainTree::levelNames() const {
  std::string out;
  for (const Level& l : levels_) out += (out.empty() ? "" : ", ") + l.label;
  return out;
}

bool DomainTree::builtFrom(const api::Topology* topology, const std::vector<framework::SessionNode>& nodes) const {
  if (topology != topology_.get() || nodes.size() != nodeObjects_.size()) return false;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].info->node != nodeObjects_[i]) return false;
  return true;
}

void DomainTree::resetSession() {
  cache_.clear();
  for (auto& v : versions_) std::fill(v.begin(), v.end(), 0);
}

DomainTree::RoomCache& DomainTree::roomCache(const PodClass& cls, Basis basis) {
  const std::string key = basis == Basis::Free ? cls.key : (basis == Basis::Now ? "now|" : "capacity|") + cls.key;
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    RoomCache fresh(levels_.size());
    for (size_t i = 0; i < levels_.size(); ++i) fresh[i].resize(levels_[i].domains.size());
    it = cache_.emplace(key, std::move(fresh)).first;
  }
  return it->second;
}

const Room& DomainTree::cachedRoom(RoomCache& cache, int l, int d, const PodClass& cls,
                                   const std::vector<framework::SessionNode>& nodes, Basis basis) {
  CacheEntry& e = cache[l][d];
  // Everything a node has for the scheduler's pods (Basis::Capacity) does not move within a
  // session: such a room is computed once, whatever changes on the domain's nodes.
  const bool known = basis == Basis::Capacity ? e.version != CacheEntry::kNever : e.version == versions_[l][d];
  if (!known) {
    PodClass unbounded = cls;
    unbounded.count = INT64_MAX;
    e.room = roomOf(levels_[l].domains[d].nodes, {unbounded}, nodes, nullptr, nullptr, basis);
    e.version = versions_[l][d];
  }
  return e.room;
}

void DomainTree::nodeChanged(int n) {
  for (size_t l = 0; l < levels_.size(); ++l) {
    const int d = levels_[l].nodeDomain[n];
    if (d >= 0 && ++versions_[l][d] == UINT32_MAX) versions_[l][d] = 0;
  }
}

}  // namespace tessera::plugins::topology
