// Placement search: where a task goes (findPlacement, with node rankings per placement key kept
// current through the node change log, node_ranking.h), the full scan that also says why nothing
// fits (scanPlacement), and the indexes they share: the GPU levels (nodes grouped by whole GPUs
// of future idle) and the change log, both kept by nodeChanged() on every change of a node.
#include <algorithm>
#include <map>

#include "tessera/framework/session.h"

namespace tessera::framework {

namespace {

int64_t levelOf(int64_t milliGpu) { return milliGpu <= 0 ? 0 : milliGpu / 1000; }

void appendSelector(std::string& key, const api::NodeSelectorRequirement& r) {
  key += r.key;
  key += static_cast<char>('0' + static_cast<int>(r.op));
  for (const auto& v : r.values) key += v + ",";
  key += ';';
}

}  // namespace

// ---- indexes ----

void Session::buildPlacementIndex() {
  gpuShortage_ = nodes_.empty() ? std::string("no nodes available")
                                : "insufficient " + std::string(api::kResourceGpu) + " (" +
                                      std::to_string(nodes_.size()) + (nodes_.size() == 1 ? " node)" : " nodes)");
  nodeChanges_.reset(nodes_.size());
  nodeLevel_.assign(nodes_.size(), 0);
  gpuLevelPos_.assign(nodes_.size(), 0);
  for (const SessionNode& n : nodes_) {
    const int lvl = static_cast<int>(levelOf(n.futureIdle().milliGpu));
    if (static_cast<int>(gpuLevels_.size()) <= lvl) gpuLevels_.resize(lvl + 1);
    nodeLevel_[n.index] = lvl;
    gpuLevelPos_[n.index] = static_cast<int>(gpuLevels_[lvl].size());
    gpuLevels_[lvl].push_back(n.index);
  }
}

int Session::gpuLevel(const SessionNode& node) const {
  // Only the GPU part of futureIdle(): this runs on every change of a node, so no vector copies.
  return static_cast<int>(levelOf(node.idle.milliGpu + node.releasing.milliGpu - node.pipelined.milliGpu));
}

void Session::nodeChanged(const SessionNode& node) {
  nodeChanges_.touch(node.index);
  const int now = gpuLevel(node);
  const int old = nodeLevel_[node.index];
  if (now == old) return;
  auto& from = gpuLevels_[old];
  const int pos = gpuLevelPos_[node.index];
  from[pos] = from.back();
  gpuLevelPos_[from[pos]] = pos;
  from.pop_back();
  if (static_cast<int>(gpuLevels_.size()) <= now) gpuLevels_.resize(now + 1);
  gpuLevelPos_[node.index] = static_cast<int>(gpuLevels_[now].size());
  gpuLevels_[now].push_back(node.index);
  nodeLevel_[node.index] = now;
}

int64_t Session::maxFreeGpus() const {
  int64_t lvl = static_cast<int64_t>(gpuLevels_.size()) - 1;
  while (lvl > 0 && gpuLevels_[lvl].empty()) --lvl;
  return std::max<int64_t>(lvl, 0);
}

// ---- ranked search ----

std::string Session::placementKey(const SessionTask& task) const {
  const api::Pod& pod = task.pod();
  const api::Resources& r = task.request();
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
      api::keys::kGpuFractionNumDevices, api::keys::kUseGpuType, api::keys::kAvoidGpuType};
  key += "|ann:";
  for (const char* k : kPlacementAnnotations)
    if (const std::string* v = pod.meta.annotation(k)) key += std::string(k) + "=" + *v + "\n";
  for (const auto& f : placementKey_) {
    key += "|" + f.plugin + ":";
    f.fn(task, key);
  }
  return key;
}

std::optional<Session::RankedNode> Session::rank(const SessionTask& task, const SessionNode& n) const {
  std::string reason;
  if (!predicate(task, n, reason)) return std::nullopt;
  if (!fits(task, n, /*future=*/true)) return std::nullopt;
  RankedNode r;
  r.fitsNow = fits(task, n, /*future=*/false);
  r.score = nodeScore(task, n);
  r.node = n.index;
  r.version = nodeChanges_.version(n.index);
  return r;
}

Placement Session::findPlacement(const SessionTask& task, bool allowPipeline) {
  const int64_t need = levelOf(task.nodeRequest().milliGpu);
  if (need > maxFreeGpus()) {
    // No node has that many GPUs free, even counting releasing ones: no need to look.
    Placement p;
    p.reason = gpuShortageReason();
    return p;
  }
  // Inside a domain (a rack, say) the ranking covers the domain's nodes only, kept per domain name:
  // many gangs placed rack by rack reuse one ranking per rack.
  // The key of a task is built once per session (the same pod is often tried by several actions).
  const size_t slot = slotOf(task);
  if (keyCache_.size() != tasks_.size()) keyCache_.resize(tasks_.size());
  if (keyCache_[slot].empty()) keyCache_[slot] = placementKey(task);
  std::string key = keyCache_[slot];
  if (domain_) key += "|domain:" + domain_->name;
  auto [it, fresh] = rankings_.try_emplace(std::move(key));
  NodeRanking<RankedNode, RankedBefore>& ranking = it->second;
  if (fresh) {
    std::vector<RankedNode> ranked;
    if (domain_) {
      for (int ni : domain_->nodes)
        if (nodeLevel_[ni] >= need)
          if (auto r = rank(task, nodes_[ni])) ranked.push_back(*r);
    } else {
      for (size_t lvl = static_cast<size_t>(need); lvl < gpuLevels_.size(); ++lvl)
        for (int ni : gpuLevels_[lvl])
          if (auto r = rank(task, nodes_[ni])) ranked.push_back(*r);
    }
    ranking.assign(std::move(ranked), nodeChanges_);
  } else {
    // Fold in the nodes (of the domain) that changed since this ranking was last used.
    ranking.refresh(nodeChanges_, [&](int ni) -> std::optional<RankedNode> {
      if (domain_ && !std::binary_search(domain_->nodes.begin(), domain_->nodes.end(), ni)) return std::nullopt;
      return rank(task, nodes_[ni]);
    });
  }
  if (const RankedNode* best = ranking.top(nodeChanges_); best && (best->fitsNow || allowPipeline)) {
    Placement p;
    p.node = best->node;
    p.pipelined = !best->fitsNow;
    return p;
  }
  return scanPlacement(task, allowPipeline);  // nothing fits: the full scan says why
}

// ---- full scan ----

Placement Session::scanPlacement(const SessionTask& task, bool allowPipeline) const {
  const api::Resources& req = task.nodeRequest();
  std::map<std::string, int> reasons;
  int best = -1, bestFuture = -1;
  int64_t bestScore = 0, bestFutureScore = 0;
  std::vector<std::string> short_;
  std::string reason;

  auto visit = [&](int ni) {
    const SessionNode& n = nodes_[ni];
    reason.clear();
    if (!predicate(task, n, reason)) {
      reasons[reason]++;
      return;
    }
    const api::Resources future = n.futureIdle();
    const bool fitsFuture = fits(task, n, /*future=*/true);
    const bool fitsNow = fitsFuture && fits(task, n, /*future=*/false);
    if (fitsNow) {
      const int64_t s = nodeScore(task, n);
      if (best < 0 || s > bestScore) best = ni, bestScore = s;  // equal score: lower index = name order
      return;
    }
    if (fitsFuture && allowPipeline) {
      const int64_t s = nodeScore(task, n);
      if (bestFuture < 0 || s > bestFutureScore) bestFuture = ni, bestFutureScore = s;
      return;
    }
    short_.clear();
    req.insufficient(allowPipeline ? future : n.idle, short_);
    if (short_.empty() && task.sharesGpu() && !gpuShareFits(task, n, allowPipeline))
      short_.push_back(task.info->gpuSpec->numDevices > 1 ? "GPUs with room for the pod's GPU share"
                                                          : "GPU with room for the pod's GPU share");
    if (short_.empty()) short_.push_back("resources promised to pipelined pods");
    for (const auto& r : short_) reasons["insufficient " + r]++;
  };

  const int64_t need = levelOf(req.milliGpu);
  if (need > maxFreeGpus()) {
    // No node has that many GPUs free, even counting releasing ones: no need to look.
    Placement p;
    p.reason = gpuShortageReason();
    return p;
  }
  if (domain_) {
    for (int ni : domain_->nodes) visit(ni);
    const int outside = static_cast<int>(nodes_.size() - domain_->nodes.size());
    if (outside > 0) reasons["outside " + domain_->name] += outside;
  } else if (need > 0) {
    // Visit nodes by ascending index within levels that can hold the GPUs; others lack them.
    std::vector<int> candidates;
    for (size_t lvl = static_cast<size_t>(need); lvl < gpuLevels_.size(); ++lvl)
      candidates.insert(candidates.end(), gpuLevels_[lvl].begin(), gpuLevels_[lvl].end());
    std::sort(candidates.begin(), candidates.end());
    for (int ni : candidates) visit(ni);
    const int skipped = static_cast<int>(nodes_.size() - candidates.size());
    if (skipped > 0) reasons["insufficient " + std::string(api::kResourceGpu)] += skipped;
  } else {
    for (const SessionNode& n : nodes_) visit(n.index);
  }

  Placement p;
  if (best >= 0) {
    p.node = best;
    return p;
  }
  if (bestFuture >= 0) {
    p.node = bestFuture;
    p.pipelined = true;
    return p;
  }
  // Aggregate: most frequent reason first, then by text.
  std::vector<std::pair<std::string, int>> sorted(reasons.begin(), reasons.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (nodes_.empty()) p.reason = "no nodes available";
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i) p.reason += ", ";
    p.reason +=
        sorted[i].first + " (" + std::to_string(sorted[i].second) + (sorted[i].second == 1 ? " node)" : " nodes)");
  }
  return p;
}

}  // namespace tessera::framework
