// The node side of the victim search (victims.h): what a claimant lacks on one node, the minimal
// set of useful victims there (choose), and the ranking of nodes by their sets (candidates).
#include <algorithm>
#include <limits>

#include "tessera/actions/factories.h"
#include "tessera/api/gpu_request.h"
#include "victims.h"

namespace tessera::actions {

using framework::SessionJob;
using framework::SessionNode;
using framework::SessionTask;
using framework::TaskState;
using victims_detail::running;
using victims_detail::runningCount;

/// The node whose victim set ends earliest in victim order (its latest victim is the most
/// expendable: the newest, lowest-priority pods go before older ones on another node); then the
/// fewest victims; then score; then name.
bool VictimSearch::better(const Candidate& a, const Candidate& b) const {
  // Victim order is strict and total (victim_order_property checks it): of two distinct victims
  // one goes first, so one comparison says which.
  if (a.last.job != b.last.job || a.last.task != b.last.task)
    return ssn_.victimLess(ssn_.task(a.last.job, a.last.task), ssn_.task(b.last.job, b.last.task));
  if (a.count != b.count) return a.count < b.count;
  if (a.negScore != b.negScore) return a.negScore < b.negScore;
  return a.node < b.node;
}

bool VictimSearch::mayHaveVictims(const SessionJob& job, int node) const {
  // Preempt takes victims in the claimant's own queue only: nodes running none of its pods have none.
  if (pruning_ && !std::binary_search(pruneNodes_.begin(), pruneNodes_.end(), node)) return false;
  if (mode_ != VictimMode::Preempt) return true;
  if (job.queue < 0) return false;
  const std::vector<int>& nodes = queueNodes(job.queue);
  return std::binary_search(nodes.begin(), nodes.end(), node);
}

void VictimSearch::resetVerdicts() {
  for (std::vector<int8_t>* verdicts : {&verdict_, &boundVerdict_})
    if (!verdicts->empty())
      for (int j : touched_) (*verdicts)[static_cast<size_t>(j)] = -1;
  touched_.clear();
}

bool VictimSearch::judge(std::vector<int8_t>& verdicts, const SessionJob& job, const Victim& v, bool bound) {
  if (verdicts.size() != ssn_.jobs().size()) verdicts.assign(ssn_.jobs().size(), -1);
  const bool e = eligible(job, ssn_.task(v.job, v.task), bound);
  verdicts[static_cast<size_t>(v.job)] = e ? 1 : 0;
  touched_.push_back(v.job);
  return e;
}

bool VictimSearch::firstVerdict(const SessionJob& job, const Victim& v) {
  const bool e = judge(verdict_, job, v, /*bound=*/false);
  // Self-check: the bound mayHold() sizes domains by holds every pod eligible now (asked once).
  if (e && mode_ == VictimMode::Reclaim && selfChecks())
    TESSERA_ASSERT(eligible(job, ssn_.task(v.job, v.task), /*bound=*/true));
  return e;
}

/// What a claimant still lacks on one node, resource by resource (a positive amount is missing),
/// and what a set of victims gives back there. One per search (lack_), its vectors' storage kept
/// from one node to the next.
struct VictimLack {
  int64_t cpu = 0, mem = 0, gpu = 0, slots = 0;
  std::vector<std::pair<std::string, int64_t>> scalars;  ///< the claimant's extended resources
  /// Fractional claimants (one device): `gpu` is what a whole free GPU lacks, `groups` the units
  /// and `groupCompute` the compute (api::gpuComputeMilli) each GPU group lacks; one group lacking
  /// neither is enough.
  std::vector<int64_t> groups;
  std::vector<int64_t> groupCompute;
  bool fractional = false;
  int64_t units = 0;
  /// Whole-GPU claimants on a node with GPU groups: units each group's staying pods still hold; a
  /// group whose last pods leave gives back its whole GPU (kNever: it cannot be vacated).
  std::vector<int64_t> held;
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max() / 4;
  /// Whether group `g` may take the fractional claimant at all (its lacks start at kNever when not:
  /// at its split count, or a GPU the claimant's UUID rules exclude); victims never bring them below.
  bool countedOn(size_t g) const { return groups[g] < kNever / 2; }

  bool gpuMet() const {
    if (!fractional) return gpu <= 0;
    if (gpu <= 0) return true;  // a whole GPU is free: the claimant opens a group on it
    for (size_t g = 0; g < groups.size(); ++g)
      if (groups[g] <= 0 && groupCompute[g] <= 0) return true;
    return false;
  }
  bool met() const {
    if (cpu > 0 || mem > 0 || slots > 0 || !gpuMet()) return false;
    return std::all_of(scalars.begin(), scalars.end(), [](const auto& s) { return s.second <= 0; });
  }
  /// As a new one, keeping its vectors' storage.
  void reset() {
    cpu = mem = gpu = slots = units = 0;
    fractional = false;
    scalars.clear();
    groups.clear();
    groupCompute.clear();
    held.clear();
  }
};

/// What one chunk of victims frees on the node (pods elsewhere free nothing here).
struct VictimFreed {
  VictimSearchVictim first;  ///< the victim the chunk starts with (its place in victim order)
  int pods = 0;              ///< pods in the chunk (on any node)
  int64_t cpu = 0, mem = 0, gpu = 0, slots = 0;
  std::vector<int64_t> scalars;  ///< parallel to VictimLack::scalars
  struct GroupShare {
    int group = 0;
    int64_t units = 0, compute = 0;
  };
  std::vector<GroupShare> groupShares;  ///< what fractional victims give back in each of their groups

  void applyTo(VictimLack& l, int sign) const {
    l.cpu -= sign * cpu, l.mem -= sign * mem, l.gpu -= sign * gpu, l.slots -= sign * slots;
    for (size_t i = 0; i < scalars.size(); ++i) l.scalars[i].second -= sign * scalars[i];
    if (l.fractional) {
      for (const auto& [g, u, c] : groupShares) l.groups[g] -= sign * u, l.groupCompute[g] -= sign * c;
      return;
    }
    for (const auto& [g, u, c] : groupShares) {  // a group emptied by the victims frees its GPU
      int64_t& h = l.held[g];
      if (h >= VictimLack::kNever) continue;
      const bool emptyBefore = h <= 0;
      h -= sign * u;
      if (emptyBefore != (h <= 0)) l.gpu -= h <= 0 ? 1000 : -1000;
    }
  }
  /// Whether giving this back reduces anything the claimant still lacks.
  bool helps(const VictimLack& l) const {
    if ((l.cpu > 0 && cpu > 0) || (l.mem > 0 && mem > 0) || (l.slots > 0 && slots > 0)) return true;
    for (size_t i = 0; i < scalars.size(); ++i)
      if (l.scalars[i].second > 0 && scalars[i] > 0) return true;
    if (l.gpuMet()) return false;
    if (!l.fractional) {
      if (gpu > 0) return true;
      for (const auto& [g, u, c] : groupShares)  // brings a shared GPU closer to being vacated
        if (u > 0 && l.held[g] > 0 && l.held[g] < VictimLack::kNever) return true;
      return false;
    }
    if (gpu > 0) return true;  // frees (part of) a whole GPU the claimant could open a group on
    for (const auto& [g, u, c] : groupShares)
      if (l.countedOn(g) && ((l.groups[g] > 0 && u > 0) || (l.groupCompute[g] > 0 && c > 0))) return true;
    return false;
  }
};

// Here, where VictimFreed is complete.
VictimSearch::VictimSearch(framework::Session& ssn, VictimMode mode, int maxVictims)
    : lack_(std::make_unique<VictimLack>()), ssn_(ssn), mode_(mode), maxVictims_(maxVictims) {}

VictimSearch::~VictimSearch() = default;

std::optional<VictimSearch::Chosen> VictimSearch::choose(const SessionJob& job, const SessionTask& task, int node,
                                                         bool keepChunks) {
  const SessionNode& n = ssn_.nodes()[node];
  if (onNode(node).empty()) return std::nullopt;  // (unsorted: only its size is read)
  const api::Resources& req = task.nodeRequest();
  // cpu, memory and GPUs in plain integers (no Resources temporaries: this runs for every node).
  if (req.milliCpu > n.ownMilliCpu || req.memory > n.ownMemory || req.milliGpu > n.ownMilliGpu) return std::nullopt;
  if (!req.scalars.empty() && !req.fitsIn(n.info->allocatable - n.info->foreignUsed)) return std::nullopt;
  const int64_t roomGpu = n.idle.milliGpu + n.releasing.milliGpu - n.pipelined.milliGpu;
  VictimLack& lack = *lack_;
  lack.reset();
  lack.cpu = req.milliCpu - (n.idle.milliCpu + n.releasing.milliCpu - n.pipelined.milliCpu);
  lack.mem = req.memory - (n.idle.memory + n.releasing.memory - n.pipelined.memory);
  lack.gpu = req.milliGpu - roomGpu;
  if (!req.scalars.empty()) {
    const api::Resources room = n.futureIdle();
    for (const auto& [name, amount] : req.scalars) lack.scalars.emplace_back(name, amount - room.get(name));
  }
  // Pod slots once the pods leaving are gone and the pipelined ones are bound.
  lack.slots = n.futurePods() + 1 - n.allocatablePods;
  if (task.sharesGpu()) {
    if (task.info->gpuSpec->numDevices != 1) {  // several devices: only a fit without GPU victims
      if (!ssn_.gpuShareFits(task, n, /*future=*/true)) return std::nullopt;
    } else {
      lack.fractional = true;
      lack.units = cache::gpuUnitsOn(*task.info->gpuSpec, *n.info);
      const int64_t compute = api::gpuComputeMilli(*task.info->gpuSpec);
      if (lack.units <= 0 || lack.units > n.gpuCapacity || compute > n.gpuComputeCapacity) return std::nullopt;
      lack.gpu = 1000 - roomGpu;  // what is missing for a whole free GPU
      // A group at the node's split count is not counted on (a victim there frees units, and a
      // slot only if it leaves; kept simple: such a group never takes the share), nor one on a GPU
      // the claimant's tessera.dev/use-gpu-uuid / nouse-gpu-uuid rule out (the session would not
      // join it: evicting its pods would free nothing the claimant can use).
      const api::PodGpuSpec& spec = *task.info->gpuSpec;
      for (const framework::SessionGpuGroup& g : n.gpuGroups) {
        const bool allowed = !spec.filtersGpuUuids() || (g.info && spec.gpuUuidAllowed(g.info->uuid));
        const bool counted = g.capacity > 0 && g.tasks < n.gpuSplitCount && allowed;
        lack.groups.push_back(counted ? lack.units - g.futureFree() : VictimLack::kNever);
        lack.groupCompute.push_back(counted ? compute - g.computeFutureFree() : VictimLack::kNever);
      }
    }
  }
  if (!task.sharesGpu() && lack.gpu > 0 && !n.gpuGroups.empty()) {
    lack.held.reserve(n.gpuGroups.size());
    for (const framework::SessionGpuGroup& g : n.gpuGroups)
      lack.held.push_back(g.capacity > 0 && g.opened == 0 && g.pipelined == 0 && !g.vacating ? g.used - g.releasing
                                                                                             : VictimLack::kNever);
  }
  if (lack.met()) return std::nullopt;  // fits without victims: not this search's business
  // A node with no pod the claimant may take is not sorted in victim order to find that out.
  const std::span<const Victim> unsorted = onNode(node);
  if (std::none_of(unsorted.begin(), unsorted.end(), [&](const Victim& v) { return eligibleCached(job, v) && !podExcluded(v); }))
    return std::nullopt;
  Chosen out;
  std::vector<VictimFreed>& freed = freed_;
  freed.clear();
  const std::span<const Victim> victims = victimsOn(node);
  if (keepChunks) out.chunks.reserve(victims.size());
  // Pods of each victim job chosen so far: a job goes surplus pod by surplus pod while above its
  // minMember, then the rest of it whole (after which it is done).
  std::vector<std::pair<int, int>>& takenPods = takenPods_;  // (job, pods)
  std::vector<int>& whole = whole_;
  takenPods.clear();
  whole.clear();
  taken_.clear();
  for (const Victim& v : victims) {
    if (lack.met()) break;
    if (!eligibleCached(job, v) || podExcluded(v)) continue;
    if (std::find(whole.begin(), whole.end(), v.job) != whole.end()) continue;
    if (!unmovable_.empty() && std::find(unmovable_.begin(), unmovable_.end(), v.job) != unmovable_.end()) continue;
    const SessionJob& vj = ssn_.jobs()[v.job];
    auto tp = std::find_if(takenPods.begin(), takenPods.end(), [&](const auto& p) { return p.first == v.job; });
    const int already = tp == takenPods.end() ? 0 : tp->second;
    bool surplus = runningCount(vj) - already > vj.minMember();
    if (surplus && vj.info->podGroup && !vj.info->podGroup->subGroups.empty()) {
      const Take take = takeOf(v, taken_);
      if (take == Take::Wait) continue;
      surplus = take == Take::Surplus;
    }
    if (!surplus && placedThisCycle(vj)) continue;  // not taken whole: see takeOf()
    std::vector<Victim>& chunk = scratch_;
    chunk.assign(1, v);  // first: it places the chunk in victim order
    if (!surplus)
      for (const SessionTask& t : vj.tasks) {
        if (!running(t) || t.index == v.task) continue;
        const bool chosen = std::any_of(taken_.begin(), taken_.end(),
                                        [&](const Victim& x) { return x.job == v.job && x.task == t.index; });
        if (!chosen) chunk.push_back({v.job, t.index});
      }
    if (!surplus && !excludedPods_.empty() && std::any_of(chunk.begin(), chunk.end(), [&](const Victim& c) {
          return podExcluded(c);
        }))
      continue;  // pruning: a pod left alone keeps its whole job
    VictimFreed f;
    f.scalars.assign(lack.scalars.size(), 0);
    // A whole job's place in victim order is its first pod's, wherever that pod runs: nodes whose
    // sets end with the same job compare equal there (and then by how many pods they take).
    f.first = surplus ? v
                      : *std::min_element(chunk.begin(), chunk.end(),
                                          [&](const Victim& a, const Victim& b) { return victimBefore(a, b); });
    f.pods = static_cast<int>(chunk.size());
    for (const Victim& c : chunk) {
      const SessionTask& ct = ssn_.task(c.job, c.task);
      if (ct.node != node || !running(ct)) continue;
      const api::Resources& cr = ct.nodeRequest();
      f.cpu += cr.milliCpu, f.mem += cr.memory, f.gpu += cr.milliGpu, ++f.slots;
      for (size_t i = 0; i < lack.scalars.size(); ++i) f.scalars[i] += cr.get(lack.scalars[i].first);
      if ((lack.fractional || !lack.held.empty()) && ct.sharesGpu()) {
        const int64_t u = cache::gpuUnitsOn(*ct.info->gpuSpec, *n.info);
        const int64_t c = api::gpuComputeMilli(*ct.info->gpuSpec);
        for (const std::string& id : ct.info->gpuGroups)
          for (size_t g = 0; g < n.gpuGroups.size(); ++g)
            if (n.gpuGroups[g].id == id) f.groupShares.push_back({static_cast<int>(g), u, c});
      }
    }
    if (!f.helps(lack)) continue;  // a victim that gives back nothing the claimant lacks stays
    if (surplus) {
      if (tp == takenPods.end()) takenPods.emplace_back(v.job, 1);
      else ++tp->second;
    } else {
      whole.push_back(v.job);
    }
    f.applyTo(lack, +1);
    freed.push_back(std::move(f));
    taken_.insert(taken_.end(), chunk.begin(), chunk.end());
    if (keepChunks) out.chunks.push_back(chunk);
  }
  if (freed.empty() || !lack.met()) return std::nullopt;
  // Minimal: walking back from the last victim taken, drop every chunk the claimant can do without.
  for (size_t i = freed.size() - 1; i-- > 0;) {
    // A surplus pod stays taken when the rest of its job goes whole after it.
    const int j = freed[i].first.job;
    if (freed[i].pods == 1 && std::find(whole.begin(), whole.end(), j) != whole.end() &&
        std::any_of(freed.begin() + static_cast<std::ptrdiff_t>(i) + 1, freed.end(),
                    [&](const VictimFreed& c) { return c.first.job == j; }))
      continue;
    freed[i].applyTo(lack, -1);
    if (lack.met()) {
      freed.erase(freed.begin() + static_cast<std::ptrdiff_t>(i));
      if (keepChunks) out.chunks.erase(out.chunks.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      freed[i].applyTo(lack, +1);
    }
  }
  for (const VictimFreed& f : freed) out.slots += f.slots, out.count += f.pods;
  out.last = freed.back().first;  // chunks follow the node's victim order: the last one's victim
  return out;
}

std::optional<VictimSearch::Candidate> VictimSearch::evaluate(const SessionJob& job, const SessionTask& task,
                                                              int node) {
  std::optional<Chosen> chosen = choose(job, task, node, /*keepChunks=*/false);
  if (!chosen) return std::nullopt;
  // Node checks run with the victims gone: their pod slots are free again by the time the pod is
  // bound (it is pipelined until then), as those of the pods already leaving.
  SessionNode& n = ssn_.nodes()[node];
  const auto slots = static_cast<int32_t>(chosen->slots);
  n.releasingPods += slots;
  std::string unused;
  const bool ok = ssn_.predicate(task, n, unused);
  n.releasingPods -= slots;
  if (!ok) return std::nullopt;
  return Candidate{chosen->count, chosen->last, -ssn_.nodeScore(task, n), node, ssn_.nodeChanges().version(node)};
}

void VictimSearch::candidates(const SessionJob& job, const SessionTask& task, const framework::NodeDomain* domain,
                              size_t max, std::vector<int>& out) {
  // Nothing is evicted while evaluating, so whether a victim job may be taken is asked once per job.
  if (domain) {
    std::vector<Candidate>& all = top_;
    all.clear();
    for (int ni : domain->nodes)
      if (mayHaveVictims(job, ni))
        if (auto c = evaluate(job, task, ni)) all.push_back(*c);
    resetVerdicts();
    bestOf(all, max, out);
    return;
  }
  if (pruning_) {
    // A prune's trial looks among the pruned set's few nodes, with victims of its own left out:
    // they are evaluated afresh, not kept as a ranking no later claimant could use.
    orderChanged_ = false;
    std::vector<Candidate> all = rankAll(job, task);
    resetVerdicts();
    bestOf(all, max, out);
    return;
  }
  std::string& key = rankingKey_;  // its buffer is kept: a ranking met before costs no allocation
  key.clear();
  key += std::to_string(ssn_.placementClass(task));
  key += '|';
  appendClaimantKey(job, key);
  const size_t plainKey = key.size();
  key += pruneKey();  // a retry without its first victim: rankings of its own
  // Victims taken for this claimant's earlier pods change the victim order itself (queue shares,
  // jobs no longer above their minimum): the nodes are ranked afresh for its later pods. Preempt's
  // victims are all in the claimant's queue, where the order of two pods depends on their jobs
  // alone (priority, surplus or whole, age): only the nodes running pods of the jobs it took from
  // are evaluated again.
  const framework::NodeChangeLog& log = ssn_.nodeChanges();
  bool reorder = false;
  if (orderChanged_) {
    orderChanged_ = false;
    if (mode_ == VictimMode::Preempt) reorder = true;
    else rankings_.erase(key);
  }
  auto it = rankings_.find(key);
  // An earlier claimant's commit since this ranking was made moved the victim order: reclaim's
  // moves queue shares, and with them pods on nodes it did not touch (KAI builds its victim queue
  // afresh for each claimant). Such a ranking is dropped (preempt instead evaluates again the
  // nodes of the jobs commits changed, below).
  const uint64_t order = ssn_.victimOrderVersion();
  if (it != rankings_.end() && mode_ != VictimMode::Preempt &&
      (it->second.order != order || (it->second.onlyFor != 0 && it->second.onlyFor != turnSeq_))) {
    rankings_.erase(it);
    it = rankings_.end();
  }
  // Reclaim without a ranking made in the order as it stands walks the order: the first claimant
  // of a shape evaluates the nodes of the first victims only, not every node. A walk that had to
  // go through every victim has evaluated every node that could be a candidate: its findings are
  // kept as the shape's ranking, refreshed for the next claimants like any other. Once the
  // claimant's own search changed pods the walk is in the held order (a top-level tree changed in
  // the hold is walked as the hold built it: Session::walkVictims), as every comparison here is.
  if (it == rankings_.end() && mode_ == VictimMode::Reclaim && excludedPods_.empty())
    if (std::optional<Walked> walked = walkCandidates(job, task, max)) {
      if (walked->whole) {
        if (selfChecks()) checkWalkedAll(job, task, walked->all);
        KeptRanking& kept = rankings_.try_emplace(key, Better{this}).first->second;
        kept.ranking.assign(std::move(walked->all), log);
        kept.order = order;
        if (!evictedNow_.empty()) kept.onlyFor = turnSeq_;  // (as a ranking made below)
      }
      out = std::move(walked->nodes);
      return;
    }
  // Preempt's retry without its first victim starts from a copy of the plain search's ranking of
  // its shape (not from every node of the queue afresh), kept current like any other: leaving a
  // victim out changes its node's set alone, and that node is evaluated again (the discarded
  // turn's undo logged it too; it is named here so that the copy never rests on that).
  std::vector<int> again;  // nodes to evaluate again although they did not change
  if (it == rankings_.end() && mode_ == VictimMode::Preempt && !excludedPods_.empty())
    if (auto plain = rankings_.find(std::string_view(key).substr(0, plainKey)); plain != rankings_.end()) {
      it = rankings_.emplace(key, plain->second).first;
      for (const Victim& v : excludedPods_)
        if (const int n = nodeOf(ssn_.task(v.job, v.task)); n >= 0) again.push_back(n);
    }
  const bool fresh = it == rankings_.end();
  if (fresh) it = rankings_.try_emplace(key, Better{this}).first;
  KeptRanking& kept = it->second;
  Ranking& ranking = kept.ranking;
  // Preempt walks its queue's victim order rather than evaluating every node of the queue: the
  // nodes of the first victims only, and more of them only when the sets found so far are taken.
  // (Inside one queue two pods compare by their jobs as they stand, held or not.)
  const bool mayWalk = mode_ == VictimMode::Preempt && job.queue >= 0;
  auto rankEveryNode = [&] {
    ranking.assign(rankAll(job, task), log);
    kept.horizon.reset();
    kept.reached.clear();
  };
  auto evaluateNode = [&](int ni) { return mayHaveVictims(job, ni) ? evaluate(job, task, ni) : std::optional<Candidate>(); };
  auto nodesOf = [&](int ji, std::vector<int>& out) {
    for (const SessionTask& t : ssn_.jobs()[static_cast<size_t>(ji)].tasks) {
      const int n = nodeOf(t);
      if (n >= 0) out.push_back(n);
    }
  };
  const std::vector<int>& movedLog = movedLogOf(job.queue);
  const bool movedSince = !fresh && it->second.moved < movedLog.size();  // preempt: commits since
  if ((reorder || movedSince || !again.empty()) && !fresh) {
    // Nodes running pods of the jobs commits in its queue changed since, and of those this
    // claimant took from.
    std::vector<int>& moved = movedNodes_;  // (a kept buffer)
    moved.assign(movedLog.begin() + static_cast<std::ptrdiff_t>(it->second.moved), movedLog.end());
    moved.insert(moved.end(), again.begin(), again.end());
    if (reorder)
      for (const Victim& v : evictedNow_) nodesOf(v.job, moved);
    ranking.reevaluate(moved, log, evaluateNode);
  } else if (fresh) {
    if (!mayWalk || !walkOwnQueue(job, task, max, kept, /*fresh=*/true)) rankEveryNode();
  } else {
    ranking.refresh(log, evaluateNode);
  }
  std::vector<Candidate>& top = top_;  // the answer, once the check below has read it
  bool answered = false;
  if (!fresh && kept.horizon) {
    // A walk's ranking answers while its best `max` sets end before the job it stopped at (and
    // that job is as it was); otherwise the walk goes on (or, when it cannot, every node is ranked).
    ranking.best(max, log, top);
    answered = top.size() == max && ssn_.jobs()[kept.horizon->job].version == kept.horizonVersion &&
               victimBefore(top.back().last, *kept.horizon);
    if (!answered)
      if (!mayWalk || !walkOwnQueue(job, task, max, kept, /*fresh=*/false)) rankEveryNode();
  }
  kept.order = order;
  kept.moved = movedLog.size();
  if (mode_ == VictimMode::Reclaim && !evictedNow_.empty()) kept.onlyFor = turnSeq_;
  // The best current nodes; they stay ranked, valid until a try changes them.
  if (!answered) ranking.best(max, log, top);
  out.clear();
  for (const Candidate& c : top) out.push_back(c.node);
  if (selfChecks()) checkCandidates(job, task, out, max);  // a kept ranking answers as a fresh one
  resetVerdicts();
}

std::vector<VictimSearch::Candidate> VictimSearch::rankAll(const SessionJob& job, const SessionTask& task) {
  std::vector<Candidate> all;
  if (pruning_) {  // victims only where the pruned set's jobs run
    for (int ni : pruneNodes_)
      if (auto c = evaluate(job, task, ni)) all.push_back(*c);
  } else if (mode_ == VictimMode::Preempt) {  // victims live in the claimant's queue: only its nodes
    if (job.queue >= 0)
      for (int ni : queueNodes(job.queue))
        if (auto c = evaluate(job, task, ni)) all.push_back(*c);
  } else if (mode_ == VictimMode::Reclaim) {  // the nodes running a pod the claimant may take
    const std::vector<int>& nodes = reclaimNodes(job);
    for (int ni : nodes)
      if (auto c = evaluate(job, task, ni)) all.push_back(*c);
    if (selfChecks())  // self-check: no other node has a set
      for (const auto& n : ssn_.nodes())
        TESSERA_ASSERT(std::binary_search(nodes.begin(), nodes.end(), n.index) || !evaluate(job, task, n.index));
  } else {
    for (const auto& n : ssn_.nodes())
      if (auto c = evaluate(job, task, n.index)) all.push_back(*c);
  }
  return all;
}

const std::vector<int>& VictimSearch::reclaimNodes(const SessionJob& job) {
  // Job by job (whether a job may be taken is asked of its first running pod) in the top-level
  // trees the claimant may take from; the index holds every running pod (none starts running in
  // a session), and a node running none of them has no set: it is not evaluated.
  indexQueues();
  std::vector<int>& out = reclaimNodes_;
  out.clear();
  if (walkNode_.size() != ssn_.nodes().size()) walkNode_.assign(ssn_.nodes().size(), 0);
  for (size_t top = 0; top < topJobs_.size(); ++top) {
    if (topJobs_[top].empty() || !ssn_.reclaimableUnder(job, static_cast<int>(top))) continue;
    const std::vector<Victim>& pool = topRunning_[top];
    for (const TopJob& r : topJobs_[top]) {
      int8_t ok = -1;
      for (uint32_t i = r.from; i < r.to && ok != 0; ++i) {
        const SessionTask& t = ssn_.task(pool[i].job, pool[i].task);
        if (!running(t)) continue;
        if (ok < 0) ok = eligibleCached(job, pool[i]) ? 1 : 0;
        const int n = nodeOf(t);
        if (ok == 1 && n >= 0 && !walkNode_[static_cast<size_t>(n)]) {
          walkNode_[static_cast<size_t>(n)] = 1;
          out.push_back(n);
        }
      }
    }
  }
  for (int n : out) walkNode_[static_cast<size_t>(n)] = 0;
  std::sort(out.begin(), out.end());
  return out;
}

void VictimSearch::bestOf(std::vector<Candidate>& all, size_t max, std::vector<int>& nodes) const {
  const size_t keep = std::min(all.size(), max);
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), Better{this});
  nodes.clear();
  for (size_t i = 0; i < keep; ++i) nodes.push_back(all[i].node);
}

void VictimSearch::checkCandidates(const SessionJob& job, const SessionTask& task, const std::vector<int>& nodes,
                                   size_t max) {
  std::vector<Candidate> all = rankAll(job, task);
  std::vector<int> fresh;
  bestOf(all, max, fresh);
  TESSERA_ASSERT(fresh == nodes);
}

bool VictimSearch::walkStep(const SessionJob& job, const SessionTask& task, const SessionTask& t, WalkState& w) {
  if (!running(t)) return true;
  if (selfChecks()) TESSERA_ASSERT(!w.prev || !ssn_.victimLess(t, *w.prev));  // the walk is in victim order
  w.prev = &t;
  if (walkJob_[static_cast<size_t>(t.job)]) return true;
  // The job's first pod: every node running one of its pods may end its set with this job (a
  // whole job's place in victim order is its first pod's), none earlier than here.
  if (w.best.size() == w.keep && victimBefore(w.best.back().last, Victim{t.job, t.index})) {
    w.stop = Victim{t.job, t.index};  // the nodes of the jobs after here are not evaluated
    return false;
  }
  walkJob_[static_cast<size_t>(t.job)] = 1;
  w.reachedJobs.push_back(t.job);
  // A job the claimant may not take ends no node's set: its nodes are evaluated when a job it
  // may take is reached there (a node holding no such job before here has no set ending here).
  if (!eligibleCached(job, Victim{t.job, t.index})) return true;
  for (const SessionTask& x : ssn_.jobs()[static_cast<size_t>(t.job)].tasks) {
    if (!running(x)) continue;
    const int n = nodeOf(x);
    if (n < 0 || walkNode_[static_cast<size_t>(n)]) continue;
    walkNode_[static_cast<size_t>(n)] = 1;
    w.reachedNodes.push_back(n);
    if (auto c = evaluate(job, task, n)) {
      w.found.push_back(*c);
      w.best.insert(std::upper_bound(w.best.begin(), w.best.end(), *c, Better{this}), *c);
      if (w.best.size() > w.keep) w.best.pop_back();
    }
  }
  return true;
}

void VictimSearch::startWalk(WalkState& w, size_t keep) {
  if (walkNode_.size() != ssn_.nodes().size()) walkNode_.assign(ssn_.nodes().size(), 0);
  if (walkJob_.size() != ssn_.jobs().size()) walkJob_.assign(ssn_.jobs().size(), 0);
  w.keep = keep;
  w.best.clear();
  w.found.clear();
  w.reachedNodes.clear();
  w.reachedJobs.clear();
  w.prev = nullptr;
  w.stop.reset();
}

void VictimSearch::endWalk(const WalkState& w) {
  for (int n : w.reachedNodes) walkNode_[static_cast<size_t>(n)] = 0;
  for (int j : w.reachedJobs) walkJob_[static_cast<size_t>(j)] = 0;
}

std::optional<VictimSearch::Walked> VictimSearch::walkCandidates(const SessionJob& job, const SessionTask& task,
                                                                 size_t max) {
  Walked out;
  if (max == 0) return out;  // (not whole: nothing was evaluated)
  WalkState& w = walk_;      // (its buffers kept from one walk to the next)
  startWalk(w, max);
  // A top-level tree none of whose pods the claimant may take holds no set's victim: not walked.
  auto tree = [&](int top) {
    const bool may = ssn_.reclaimableUnder(job, top);
    if (!may && selfChecks()) {  // self-check: indeed none of them
      indexQueues();
      for (const Victim& v : topRunning_[static_cast<size_t>(top)])
        TESSERA_ASSERT(!running(ssn_.task(v.job, v.task)) || !eligibleCached(job, v));
    }
    return may;
  };
  const bool walked = ssn_.walkVictims([&](const SessionTask& t) { return walkStep(job, task, t, w); }, tree);
  endWalk(w);
  if (!walked) return std::nullopt;
  out.whole = !w.stop;
  out.all = std::move(w.found);
  for (const Candidate& c : w.best) out.nodes.push_back(c.node);
  if (selfChecks()) checkCandidates(job, task, out.nodes, max);  // what ranking every node afresh gives
  resetVerdicts();
  return out;
}

bool VictimSearch::walkOwnQueue(const SessionJob& job, const SessionTask& task, size_t max, KeptRanking& kept,
                                bool fresh) {
  const framework::NodeChangeLog& log = ssn_.nodeChanges();
  WalkState& w = walk_;  // (its buffers kept from one walk to the next)
  // It walks on until four times `max` sets end before the next job: a ranking that answers with
  // just `max` would have to walk on after nearly every claimant (each takes a best set away).
  startWalk(w, max * 4);
  // Going on: the nodes reached before hold current entries (the ranking was refreshed), and so do
  // those evaluated since; the walk starts over from the queue's first victim but evaluates none
  // of the reached nodes again.
  if (!fresh) {
    kept.ranking.best(w.keep, log, w.best);
    for (int n : kept.reached) walkNode_[static_cast<size_t>(n)] = 1;
  }
  const bool walked = ssn_.walkQueueVictims(job.queue, [&](const SessionTask& t) { return walkStep(job, task, t, w); });
  if (!fresh)
    for (int n : kept.reached) walkNode_[static_cast<size_t>(n)] = 0;
  endWalk(w);
  if (!walked) return false;  // (nothing was evaluated)
  if (fresh) {
    kept.ranking.assign(std::move(w.found), log);
    kept.reached.clear();
  } else {
    for (const Candidate& c : w.found) kept.ranking.add(c);
  }
  kept.horizon = w.stop;
  if (w.stop) {
    kept.horizonVersion = ssn_.jobs()[static_cast<size_t>(w.stop->job)].version;
    kept.reached.insert(kept.reached.end(), w.reachedNodes.begin(), w.reachedNodes.end());
    std::sort(kept.reached.begin(), kept.reached.end());
  } else {
    kept.reached.clear();  // every node with a set is in the ranking, as a fresh one of every node
  }
  return true;
}

void VictimSearch::checkWalkedAll(const SessionJob& job, const SessionTask& task, const std::vector<Candidate>& walked) {
  auto nodesOf = [](const std::vector<Candidate>& cs) {
    std::vector<int> nodes;
    for (const Candidate& c : cs) nodes.push_back(c.node);
    std::sort(nodes.begin(), nodes.end());
    return nodes;
  };
  TESSERA_ASSERT(nodesOf(walked) == nodesOf(rankAll(job, task)));
  resetVerdicts();
}

}  // namespace tessera::actions
