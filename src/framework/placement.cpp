// Placement search: where a task goes (findPlacement, with node rankings per placement key kept
// current through the node change log, node_ranking.h), the full scan that also says why nothing
// fits (scanPlacement), and the indexes they share: the GPU levels (nodes grouped by whole GPUs
// of future idle) and the change log, both kept by nodeChanged() on every change of a node.
//
// Unschedulable work is cheap (issue 16): tasks of one placement key form a class that shares one
// ranking and, when it fits nowhere, one failure tally (the scan's reasons node by node, refreshed
// only for nodes changed since); a task asking more cpu or memory than any node has free skips the
// ranking altogether (the largest free amounts are kept in lazy heaps over the change log). The
// reasons are the scan's, counted alike.
#include <algorithm>
#include <limits>
#include <map>

#include "tessera/api/gpu_request.h"
#include "tessera/cache/placement_key.h"
#include "tessera/framework/session.h"

namespace tessera::framework {

namespace {

int64_t levelOf(int64_t milliGpu) { return milliGpu <= 0 ? 0 : milliGpu / 1000; }

/// Future idle amounts without building a Resources (this runs on every change of a node).
int64_t futureCpu(const SessionNode& n) { return n.idle.milliCpu + n.releasing.milliCpu - n.pipelined.milliCpu; }
int64_t futureMemory(const SessionNode& n) { return n.idle.memory + n.releasing.memory - n.pipelined.memory; }

/// Per-node outcomes all failure tallies of a session may hold together (2 bytes each, 32 MiB):
/// past it, a new failing class is explained by a full scan, as before tallies existed.
constexpr size_t kMaxTallyEntries = size_t{16} << 20;

/// "insufficient cpu (4000 nodes), ...": most frequent reason first, then by text.
std::string aggregate(const std::map<std::string, int>& reasons) {
  std::vector<std::pair<std::string, int>> sorted(reasons.begin(), reasons.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i) out += ", ";
    out += sorted[i].first + " (" + std::to_string(sorted[i].second) + (sorted[i].second == 1 ? " node)" : " nodes)");
  }
  return out;
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
  std::vector<FreeEntry> cpu, memory;
  cpu.reserve(nodes_.size());
  memory.reserve(nodes_.size());
  for (const SessionNode& n : nodes_) {
    cpu.push_back({futureCpu(n), n.index, nodeChanges_.version(n.index)});
    memory.push_back({futureMemory(n), n.index, nodeChanges_.version(n.index)});
  }
  maxFreeCpu_.assign(std::move(cpu), nodeChanges_);
  maxFreeMemory_.assign(std::move(memory), nodeChanges_);
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

bool Session::exceedsEveryNode(const api::Resources& request) {
  auto largest = [&](NodeRanking<FreeEntry, MoreFree>& index, int64_t (*amount)(const SessionNode&)) {
    index.refresh(nodeChanges_, [&](int ni) {
      return std::optional<FreeEntry>(FreeEntry{amount(nodes_[ni]), ni, nodeChanges_.version(ni)});
    });
    const FreeEntry* top = index.top(nodeChanges_);
    return top ? top->value : std::numeric_limits<int64_t>::min();
  };
  return request.milliCpu > largest(maxFreeCpu_, futureCpu) || request.memory > largest(maxFreeMemory_, futureMemory);
}

int64_t Session::maxFreeGpus() const {
  int64_t lvl = static_cast<int64_t>(gpuLevels_.size()) - 1;
  while (lvl > 0 && gpuLevels_[lvl].empty()) --lvl;
  return std::max<int64_t>(lvl, 0);
}

int64_t Session::maxIdleGpus() const {
  int64_t most = 0;
  for (const SessionNode& n : nodes_) most = std::max(most, n.idle.milliGpu);
  return most / 1000;
}

int64_t Session::maxGroupRoom() const {
  int64_t most = 0;
  for (const SessionNode& n : nodes_)
    for (const SessionGpuGroup& g : n.gpuGroups) most = std::max(most, g.free());
  return most;
}

// ---- ranked search ----

const std::string& Session::podPlacementKey(const SessionTask& task) const {
  if (task.info->placementKey) return *task.info->placementKey;  // built by the cache
  const size_t slot = slotOf(task);
  if (keyCache_.size() != tasks_.size()) keyCache_.resize(tasks_.size());
  std::string& key = keyCache_[slot];
  if (key.empty()) key = cache::taskPlacementKey(task.pod(), task.request(), task.info->key, task.info->gpuSpecError);
  return key;
}

namespace {

/// What the plugins `fns` (the first `count`) add to `task`'s key now, written into `part`:
/// "|plugin:what" for each one that adds something (its place in `fns` with it); empty when none
/// does, which is the usual case. `own` is a buffer: both keep their memory from call to call.
template <typename Fns>
void pluginKeyPart(const Fns& fns, const SessionTask& task, std::string& part, std::string& own,
                   size_t count = SIZE_MAX) {
  part.clear();
  for (size_t i = 0; i < fns.size() && i < count; ++i) {
    own.clear();
    fns[i].fn(task, own);
    if (own.empty()) continue;
    part += '|';
    part += std::to_string(i);
    part += fns[i].plugin;
    part += ':';
    part += own;
  }
}

}  // namespace

bool Session::keysJob(const SessionJob& job, size_t count) const {
  for (size_t i = 0; i < placementKeyJobs_.size() && i < count; ++i)
    if (!placementKeyJobs_[i] || placementKeyJobs_[i](job)) return true;
  return false;
}

int Session::classOfKey(const std::string* shared) const {
  auto [it, fresh] = classByKey_.try_emplace(shared, 0);
  if (fresh) it->second = classFor(classIds_.try_emplace(*shared, -1).first->second);
  return it->second;
}

int Session::placementClass(const SessionTask& task) const {
  const size_t slot = slotOf(task);
  if (classCache_.size() != tasks_.size()) classCache_.assign(tasks_.size(), -1);
  int& own = classCache_[slot];  // the class of the pod-derived key
  if (own < 0) {
    auto intern = [&](const std::string& key) {
      return classFor(classIds_.try_emplace(key, -1).first->second);
    };
    if (const std::string* shared = task.info->placementKey.get()) {
      own = classOfKey(shared);
    } else {
      own = intern(podPlacementKey(task));
    }
  }
  if (!keysJob(jobs_[static_cast<size_t>(task.job)])) {
#ifndef NDEBUG  // (a plugin's PlacementKeyJobFn keeps its promise)
    pluginKeyPart(placementKey_, task, partProbe_.second, partScratch_);
    TESSERA_ASSERT(partProbe_.second.empty());
#endif
    return own;
  }
  // Plugins' parts are asked each time (they may change within the session); usually empty. The
  // probe's buffers are reused: a class met before costs no allocation.
  std::pair<int, std::string>& probe = partProbe_;
  pluginKeyPart(placementKey_, task, probe.second, partScratch_);
  if (probe.second.empty()) return own;
  probe.first = own;
  if (auto it = partClasses_.find(probe); it != partClasses_.end()) return it->second;
  int id = -1;
  partClasses_.emplace(probe, classFor(id));
  return id;
}

int Session::jobSignature(const SessionJob& job, int missing) const {
  // (A plugin's part of a pod's class may change without the job's tasks changing: the topology
  // plugin's, for the job it last planned. A signature kept from then is that job's alone, never
  // another's: it can only share less.)
  if (signatureCache_.size() != jobs_.size()) signatureCache_.assign(jobs_.size(), SignatureMemo{});
  SignatureMemo& memo = signatureCache_[static_cast<size_t>(job.index)];
  if (memo.missing == missing && memo.version == job.version) return memo.id;
  memo.version = job.version;
  memo.missing = missing;
  std::string& sig = signatureScratch_;
  sig.clear();
  memo.id = buildSignature(job, missing, sig) ? signatureIds_.try_emplace(sig, static_cast<int>(signatureIds_.size())).first->second : -1;
  return memo.id;
}

bool Session::buildSignature(const SessionJob& job, int missing, std::string& sig) const {
  // Numbers go in as raw bytes (a key compared for equality only).
  auto put = [&sig](int64_t v) { sig.append(reinterpret_cast<const char*>(&v), sizeof v); };
  if (job.topologyConstrained) {
    // A subgroup's constraint is placed subgroup by subgroup: such a job is like no other. Else
    // the PodGroup's own constraint goes in, by the cache's interned key (a pointer tells equal
    // constraints; the PodGroup, on lines of its own, is not read), or, for a JobInfo built by
    // hand, by its words.
    if (job.subGroupTopology) return false;
    if (job.readyCount > 0 || job.pendingCount < static_cast<int32_t>(job.tasks.size())) return false;
    if (const std::string* interned = job.info->topologyKey.get()) {
      put(-2);
      put(static_cast<int64_t>(reinterpret_cast<intptr_t>(interned)));
    } else {
      put(-3);
      const api::TopologyConstraint& tc = job.info->podGroup->topologyConstraint;
      for (const std::string* part : {&tc.topology, &tc.requiredTopologyLevel, &tc.preferredTopologyLevel}) {
        put(static_cast<int64_t>(part->size()));
        sig += *part;
      }
    }
  }
  put(job.queue);
  put(job.priority);
  put(job.preemptible ? 1 : 0);
  put(missing);
  // Pods all of one class (the usual gang, every single) go in as the class and how many, with no
  // need to order them; a -1 tells that form from a sequence of classes in task order (never
  // negative). When its pending pods are the snapshot's and all share one key (and no plugin adds
  // to keys), that key's class is theirs: no pod is read.
  if (job.subGroupReady.empty() && job.pendingAlike() && !keysJob(job)) {
    put(-1);
    put(classOfKey(job.infoPendingKey));
    put(job.pendingCount);
    return true;
  }
  int same = -2;
  int64_t count = 0;
  if (job.subGroupReady.empty())
    for (const SessionTask& t : job.tasks)
      if (t.state == TaskState::Pending) {
        const int c = placementClass(t);
        same = same == -2 || same == c ? c : -1;
        ++count;
      }
  if (same >= 0) {
    put(-1);
    put(same);
    put(count);
    return true;
  }
  // Subgroups: each one's name (a failure's reason names it) and missing minimum, and each pod's
  // subgroup with its class (the minimum is chosen per subgroup).
  for (size_t g = 0; g < job.subGroupReady.size(); ++g) {
    const api::SubGroup& sg = job.subGroups()[g];
    put(static_cast<int64_t>(sg.name.size()));
    sig += sg.name;
    put(sg.minMember - job.subGroupReady[g]);
  }
  for (int ti : pendingTaskOrder(job)) {
    const SessionTask& t = job.tasks[static_cast<size_t>(ti)];
    put(placementClass(t));
    if (!job.subGroupReady.empty()) put(t.subGroup);
  }
  return true;
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
  // Inside a domain (a rack, say) the ranking covers the domain's nodes only, kept per domain:
  // many gangs placed rack by rack reuse one ranking per rack.
  // The key: the task's placement class (its own key's class is found once per session: the same
  // pod is often tried by several actions) and the domain's.
  uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(placementClass(task))) << 32;
  if (domain_) key |= domainIds_.try_emplace(domain_->name, static_cast<uint32_t>(domainIds_.size()) + 1).first->second;
  // The ranking is exact: when it holds no node, none fits. A quiet caller wants no reason, so the
  // failure tally (which walks every node change since it was last asked) is left alone.
  auto noNode = [&] { return explain_ ? explainFailure(task, allowPipeline) : Placement{}; };
  auto it = rankings_.find(key);
  const bool fresh = it == rankings_.end();
  if (fresh) {
    // More cpu or memory than any node has free, even counting releasing pods: no ranking to
    // build (a ranking kept already is cheaper to refresh than this index).
    if (exceedsEveryNode(task.nodeRequest())) return noNode();
    it = rankings_.try_emplace(key).first;
  }
  NodeRanking<RankedNode, RankedBefore>& ranking = it->second;
  if (fresh) {
    std::vector<RankedNode> ranked;
    if (domain_) {
      // (A rack's few dozen grown once, not doubling; a domain of the whole cluster is not
      // reserved for: most of its nodes may not fit.)
      if (domain_->nodes.size() <= 128) ranked.reserve(domain_->nodes.size());
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
  return noNode();  // nothing fits: the class's tally says why
}

// ---- failure tallies ----

Session::NodeFit Session::judgeNode(const SessionTask& task, const SessionNode& n, bool allowPipeline,
                                    ReasonList& why) const {
  std::string& reason = why.add();  // (kept for the predicate's reason, dropped if there is none)
  reason.clear();
  if (!predicate(task, n, reason)) return NodeFit::No;
  why.dropLast();
  const bool fitsFuture = fits(task, n, /*future=*/true);
  if (fitsFuture && fits(task, n, /*future=*/false)) return NodeFit::Now;
  if (fitsFuture && allowPipeline) return NodeFit::Later;
  std::vector<std::string>& short_ = judgeShort_;  // (a kept buffer: thousands of nodes are judged)
  short_.clear();
  task.nodeRequest().insufficient(allowPipeline ? n.futureIdle() : n.idle, short_);
  if (short_.empty() && task.sharesGpu() && !gpuShareFits(task, n, allowPipeline)) {
    // (Written in place: thousands of nodes give this reason for one pod on a busy cluster.)
    std::string& text = why.add();
    text.assign(task.info->gpuSpec->numDevices > 1 ? "insufficient GPUs with room for the pod's GPU share"
                                                   : "insufficient GPU with room for the pod's GPU share");
    // Room in memory is not enough when the GPU already holds its split count of pods, or when the
    // compute of its pods leaves too little for this one's (gpuSharing.coreScaling): say so.
    const int64_t units = cache::gpuUnitsOn(*task.info->gpuSpec, *n.info);
    const int64_t compute = api::gpuComputeMilli(*task.info->gpuSpec);
    const auto memoryRoom = [&](const SessionGpuGroup& g) {
      return g.capacity > 0 && (allowPipeline ? g.futureFree() : g.free()) >= units;
    };
    if (std::any_of(n.gpuGroups.begin(), n.gpuGroups.end(),
                    [&](const SessionGpuGroup& g) { return memoryRoom(g) && g.tasks >= n.gpuSplitCount; })) {
      text += " (GPUs at their split count of ";
      text += std::to_string(n.gpuSplitCount);
      text += " pods)";
    } else if (compute > n.gpuComputeCapacity ||
               std::any_of(n.gpuGroups.begin(), n.gpuGroups.end(), [&](const SessionGpuGroup& g) {
                 return memoryRoom(g) && !g.hasRoom(units, compute, allowPipeline);
               })) {
      text += " (GPU compute: the shares on one GPU take at most ";
      text += std::to_string(n.gpuComputeCapacity / 10);
      text += "% of it in tessera.dev/gpu-cores)";
    }
    return NodeFit::No;
  }
  if (short_.empty()) {
    why.add() = "insufficient resources promised to pipelined pods";
    return NodeFit::No;
  }
  for (const auto& r : short_) {
    std::string& text = why.add();
    text.assign("insufficient ");
    text += r;
  }
  return NodeFit::No;
}

void Session::scanOutcome(const SessionTask& task, int ni, bool allowPipeline, ReasonList& out) const {
  // What scanPlacement counts for a node it considers (a domain's, or any outside a domain): short
  // of GPUs by the level index (not visited), or the node's own verdict.
  static const std::string kGpuShort = "insufficient " + std::string(api::kResourceGpu);
  out.clear();
  if (!domain_) {
    const int64_t need = levelOf(task.nodeRequest().milliGpu);
    if (need > 0 && nodeLevel_[ni] < need) {
      out.add() = kGpuShort;
      return;
    }
  }
  if (judgeNode(task, nodes_[ni], allowPipeline, out) != NodeFit::No) out.clear();
}

void Session::setOutcome(FailureTally& t, int ni, const ReasonList& list) {
  if (t.fitting < 0) return;  // given up
  uint16_t id = 0;
  if (std::ranges::equal(t.outcomes[t.outcome[ni]], list.view())) return;  // unchanged (the common case)
  std::vector<std::string>& reasons = outcomeKey_;
  reasons.assign(list.view().begin(), list.view().end());
  if (auto f = t.outcomeIndex.find(reasons); f != t.outcomeIndex.end()) {
    id = f->second;
  } else if (t.outcomes.size() >= std::numeric_limits<uint16_t>::max()) {
    t.fitting = -1;  // too many distinct reasons to intern: the tally is given up (explainFailure scans)
    return;
  } else {
    id = static_cast<uint16_t>(t.outcomes.size());
    t.outcomes.push_back(reasons);
    t.outcomeIndex.emplace(reasons, id);
  }
  uint16_t& cur = t.outcome[ni];
  if (id == cur) return;
  if (cur == 0) --t.fitting;
  for (const std::string& r : t.outcomes[cur])
    if (auto c = t.counts.find(r); --c->second == 0) t.counts.erase(c);
  if (id == 0) ++t.fitting;
  for (const std::string& r : t.outcomes[id]) ++t.counts[r];
  cur = id;
}

Placement Session::explainFailure(const SessionTask& task, bool allowPipeline) {
  // A plugin's verdict part of the key (topology: where a gang's subgroups went) is per-job state
  // its predicates read, which can change a node's verdict without changing the node: tallies would
  // go stale, so such tasks scan. Order parts (a preferred level's bonus) change no verdict.
  if (nodes_.empty()) return scanPlacement(task, allowPipeline);
  if (keysJob(jobs_[static_cast<size_t>(task.job)], verdictKeyFns_)) {
    pluginKeyPart(placementKey_, task, partProbe_.second, partScratch_, verdictKeyFns_);
    if (!partProbe_.second.empty()) return scanPlacement(task, allowPipeline);
  }
  // Shared by every task whose verdicts are alike: the pod's key, plugins' order parts left out.
  std::string key = podPlacementKey(task);
  if (domain_) key += "|domain:" + domain_->name;
  key += allowPipeline ? "|pipeline" : "|now";
  auto [it, fresh] = tallies_.try_emplace(std::move(key));
  FailureTally& t = it->second;
  // A class that fails once (a job-dependent key, say) is explained by the scan, as before; a tally
  // pays off from the second failure on.
  if (fresh || t.fitting < 0) return scanPlacement(task, allowPipeline);
  // Inside a domain, only its nodes are visited; the others count once as "outside".
  const std::span<const int>* visit = domain_ ? &domain_->nodes : nullptr;
  if (t.outcomes.empty()) {
    const size_t visited = visit ? visit->size() : nodes_.size();
    if (tallyEntries_ + nodes_.size() > kMaxTallyEntries) {
      t.fitting = -1;  // over the memory bound: this class is scanned every time
      return scanPlacement(task, allowPipeline);
    }
    tallyEntries_ += nodes_.size();
    t.outcomes.emplace_back();  // outcome 0: the task fits there; every visited node starts there
    t.outcomeIndex.emplace(std::vector<std::string>{}, 0);
    t.outcome.assign(nodes_.size(), 0);
    t.fitting = static_cast<int>(visited);
    if (visit && visited < nodes_.size()) t.counts["outside " + domain_->name] = static_cast<int>(nodes_.size() - visited);
    auto add = [&](int ni) {
      scanOutcome(task, ni, allowPipeline, outcomeScratch_);
      setOutcome(t, ni, outcomeScratch_);
    };
    if (visit) for (int ni : *visit) add(ni);
    else for (const SessionNode& n : nodes_) add(n.index);
  } else {
    // Only the nodes changed since the class was last explained (once each) can say otherwise.
    const std::vector<int>& changes = nodeChanges_.changes();
    if (changedMark_.size() != nodes_.size() || ++changedGen_ == 0) changedMark_.assign(nodes_.size(), 0), changedGen_ = 1;
    for (size_t i = t.seen; i < changes.size(); ++i) {
      const int ni = changes[i];
      if (changedMark_[static_cast<size_t>(ni)] == changedGen_) continue;
      changedMark_[static_cast<size_t>(ni)] = changedGen_;
      if (visit && !std::binary_search(visit->begin(), visit->end(), ni)) continue;
      scanOutcome(task, ni, allowPipeline, outcomeScratch_);
      setOutcome(t, ni, outcomeScratch_);
    }
  }
  t.seen = nodeChanges_.size();
  // A node fits after all (a caller without pipelining asking where only future room is), or the
  // tally was given up: the scan decides, as it always did.
  if (t.fitting != 0) return scanPlacement(task, allowPipeline);
  Placement p;
  if (explain_) p.reason = aggregate(t.counts);
  return p;
}

// ---- full scan ----

Placement Session::scanPlacement(const SessionTask& task, bool allowPipeline) const {
  const api::Resources& req = task.nodeRequest();
  std::map<std::string, int> reasons;
  int best = -1, bestFuture = -1;
  int64_t bestScore = 0, bestFutureScore = 0;
  ReasonList& why = scanWhy_;
  auto visit = [&](int ni) {
    const SessionNode& n = nodes_[ni];
    why.clear();
    switch (judgeNode(task, n, allowPipeline, why)) {
      case NodeFit::Now: {
        const int64_t s = nodeScore(task, n);
        if (best < 0 || s > bestScore) best = ni, bestScore = s;  // equal score: lower index = name order
        return;
      }
      case NodeFit::Later: {
        const int64_t s = nodeScore(task, n);
        if (bestFuture < 0 || s > bestFutureScore) bestFuture = ni, bestFutureScore = s;
        return;
      }
      case NodeFit::No:
        for (const auto& r : why.view()) reasons[r]++;
        return;
    }
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
  if (nodes_.empty()) p.reason = "no nodes available";
  p.reason += aggregate(reasons);
  return p;
}

}  // namespace tessera::framework
