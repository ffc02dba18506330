// Consolidation by the victim sequence (victims.h): KAI's solver, which takes victims cluster-wide
// in victim order until the claimant and every moved pod fit, then keeps the first minimal set.
// Node by node (victims.cpp) finds most of these sets faster; this one also finds those where a
// pod is moved to make room for a moved pod, or where the claimant goes to a node other than the
// one its first victims free.
#include <algorithm>
#include <array>
#include <functional>
#include <queue>

#include "job_placement.h"
#include "victims.h"

namespace tessera::actions {

using framework::SessionJob;
using framework::SessionNode;
using framework::SessionTask;
using framework::Statement;
using victims_detail::running;
using victims_detail::runningCount;
using victims_detail::podRoom;

namespace {

bool contains(const std::vector<VictimSearchVictim>& set, const VictimSearchVictim& v) {
  return std::any_of(set.begin(), set.end(), [&](const VictimSearchVictim& x) { return x.job == v.job && x.task == v.task; });
}

}  // namespace

const std::vector<VictimSearch::Victim>& VictimSearch::sequenceHead() {
  // Kept across commits while it still holds enough running pods: a commit moves a few of them,
  // and rebuilding after each would cost every claimant a merge over all nodes. (The pods' order
  // is the one the nodes' lists were sorted in, as node by node reads it.)
  if (sequenceBuilt_) {
    const auto stillRunning = std::count_if(sequenceHead_.begin(), sequenceHead_.end(),
                                            [&](const Victim& v) { return running(ssn_.task(v.job, v.task)); });
    if (stillRunning >= kSequencePods || sequenceAt_ == commits_) return sequenceHead_;
  }
  sequenceBuilt_ = true;
  sequenceAt_ = commits_;
  sequenceHead_.clear();
  indexNodes();
  // Each node's running pods are in victim order (victimsOn): a merge of their heads gives the
  // cluster's first pods for O((nodes + pods taken) log nodes) comparisons, not a sort of every
  // running pod.
  struct Head {
    int node;
    size_t at;
  };
  auto later = [&](const Head& a, const Head& b) { return victimBefore(onNode(b.node)[b.at], onNode(a.node)[a.at]); };
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  auto next = [&](int node, size_t at) {
    const std::span<const Victim> list = onNode(node);
    while (at < list.size()) {
      const SessionTask& t = ssn_.task(list[at].job, list[at].task);
      const SessionJob& j = ssn_.jobs()[static_cast<size_t>(list[at].job)];
      if (running(t) && j.preemptible && onSessionNodes(j)) break;
      ++at;
    }
    if (at < list.size()) heads.push({node, at});
  };
  for (size_t n = 0; n < ssn_.nodes().size(); ++n) {
    victimsOn(static_cast<int>(n));  // sorted before its head is compared
    next(static_cast<int>(n), 0);
  }
  // Room for the claimant's own running pods, which are skipped, and for a gang's pods.
  const size_t want = 2 * kSequencePods;
  while (!heads.empty() && sequenceHead_.size() < want) {
    const Head h = heads.top();
    heads.pop();
    sequenceHead_.push_back(onNode(h.node)[h.at]);
    next(h.node, h.at + 1);
  }
  return sequenceHead_;
}

bool VictimSearch::mayPlaceWith(const framework::NodeDomain* domain, const std::vector<Victim>& set) {
  // A claimant pod that did not fit anywhere as things stand can only fit on a node the set
  // touches: one of the turn's pods must fit in what is free there plus what the set frees.
  std::vector<std::pair<int, std::array<int64_t, 3>>> rooms;  // node, room
  for (const Victim& v : set) {
    const SessionTask& t = ssn_.task(v.job, v.task);
    const int node = t.node;
    if (node < 0 || (domain && !std::binary_search(domain->nodes.begin(), domain->nodes.end(), node))) continue;
    auto it = std::find_if(rooms.begin(), rooms.end(), [&](const auto& r) { return r.first == node; });
    if (it == rooms.end()) {
      const SessionNode& n = ssn_.nodes()[static_cast<size_t>(node)];
      api::Resources idle = n.futureIdle();
      for (const framework::SessionGpuGroup& g : n.gpuGroups)
        if (g.capacity > 0 && g.futureFree() > 0) idle.milliGpu += g.futureFree() * 1000 / g.capacity;
      rooms.push_back({node, {idle.milliGpu, idle.milliCpu, idle.memory}});
      it = rooms.end() - 1;
    }
    const auto freed = podRoom(t);
    for (int i = 0; i < 3; ++i) it->second[static_cast<size_t>(i)] += freed[static_cast<size_t>(i)];
  }
  for (const SessionTask* t : turn_) {
    const auto want = podRoom(*t);
    for (const auto& [node, room] : rooms)
      if (want[0] <= room[0] && want[1] <= room[1] && want[2] <= room[2]) return true;
  }
  return false;
}

bool VictimSearch::placesWith(SessionJob& job, const framework::NodeDomain* domain, const std::vector<Victim>& set,
                              bool commit) {
  Statement stmt(ssn_);
  evictedNow_.clear();
  int evicted = 0;
  const Reason why = claimantWhy(job);  // consolidation: "moved to make room for ..." 
  std::vector<int> touched;  // nodes the set frees room on
  for (const Victim& v : set) {
    SessionTask& t = ssn_.task(v.job, v.task);
    if (!running(t)) continue;
    const int node = t.node;
    evict(stmt, t, why);
    ++evicted;
    if (node >= 0 && std::find(touched.begin(), touched.end(), node) == touched.end()) touched.push_back(node);
  }
  std::sort(touched.begin(), touched.end());
  // What is placed: the pods of the claimant's turn, then the moved pods largest first.
  const std::vector<SessionTask*>& claimant = turn_;
  std::vector<Victim> moved = set;
  std::stable_sort(moved.begin(), moved.end(), [&](const Victim& a, const Victim& b) {
    const SessionTask &ta = ssn_.task(a.job, a.task), &tb = ssn_.task(b.job, b.task);
    const auto ra = podRoom(ta), rb = podRoom(tb);
    return ra != rb ? ra > rb : ssn_.placementClass(ta) < ssn_.placementClass(tb);
  });
  // A small search with backtracking: each pod goes to the node placement ranks first, or to a
  // node the set frees room on (where the choice matters most: every other node offers what it
  // offered before), or on a small cluster to any node (the search is then exact within its
  // steps). Greedy placement misses sets that fit (the claimant taking the room a moved pod
  // needs); the steps are bounded.
  std::vector<int> spots = touched;
  if (ssn_.nodes().size() <= static_cast<size_t>(kPackEveryNode)) {
    spots.resize(ssn_.nodes().size());
    for (size_t n = 0; n < spots.size(); ++n) spots[n] = static_cast<int>(n);
  }
  int steps = 0;
  auto item = [&](size_t i) -> SessionTask& {
    return i < claimant.size() ? *claimant[i] : ssn_.task(moved[i - claimant.size()].job, moved[i - claimant.size()].task);
  };
  // Pods alike (one placement class, both the claimant's or both moved) are interchangeable: the
  // second tries the nodes the set frees numbered no lower than the first's node, so arrangements
  // are not tried twice there (the node placement ranks first is always tried: the others are
  // reached through it).
  std::vector<int> placedOn(claimant.size() + moved.size(), -1);
  std::function<bool(size_t)> pack = [&](size_t i) -> bool {
    if (i == claimant.size() + moved.size()) return true;
    if (++steps > kPackSteps || ++solveSteps_ > kSolveSteps) return false;
    const bool ofClaimant = i < claimant.size();
    SessionTask& task = item(i);
    const bool likePrevious = i > 0 && i != claimant.size() && ssn_.placementClass(item(i - 1)) == ssn_.placementClass(task);
    const int lowest = likePrevious ? placedOn[i - 1] : -1;
    if (ofClaimant && !taskAllowed(ssn_, job, task).ok()) return false;
    std::vector<int> nodes;
    ssn_.restrictTo(ofClaimant ? domain : nullptr);
    const framework::Placement p = ssn_.findPlacement(task, /*allowPipeline=*/true);
    ssn_.restrictTo(nullptr);
    if (p.node >= 0) nodes.push_back(p.node);  // always: untouched nodes are reached through it only
    for (int n : spots) {
      if (n == p.node || n < lowest ||
          (ofClaimant && domain && !std::binary_search(domain->nodes.begin(), domain->nodes.end(), n)))
        continue;
      std::string unused;
      const SessionNode& node = ssn_.nodes()[static_cast<size_t>(n)];
      if (ssn_.fits(task, node, /*future=*/true) && ssn_.predicate(task, node, unused)) nodes.push_back(n);
    }
    for (int n : nodes) {
      const auto cp = stmt.checkpoint();
      if (!ofClaimant) stmt.reserve(task, n);
      else if (ssn_.fits(task, ssn_.nodes()[static_cast<size_t>(n)], /*future=*/false)) stmt.allocate(task, n);
      else stmt.pipeline(task, n);
      placedOn[i] = n;
      if (pack(i + 1)) return true;
      stmt.rollback(cp);
      if (steps > kPackSteps || solveSteps_ > kSolveSteps) break;
    }
    return false;
  };
  const bool packed = pack(0);
  if (packed && turnDone(job)) {
    if (commit) {
      orderChanged_ = true;
      commitTurn(stmt, job, evicted);
    } else {
      stmt.discard();
    }
    return true;
  }
  stmt.discard();
  evictedNow_.clear();
  return false;
}

VictimSearch::SequenceResult VictimSearch::solveBySequence(SessionJob& job, const framework::NodeDomain* domain,
                                                           bool trial, std::string& reason) {
  // Moved pods stay in their queues: the turn must fit under its queue's limits as things stand.
  // (Checked once for the whole turn: with pods of its own queue evicted, a pod-by-pod check in
  // placesWith would count room they only leave for a moment.)
  turn_.clear();
  api::Resources turn;
  for (int ti : ssn_.pendingTaskOrder(job)) {
    if (turn_.size() >= static_cast<size_t>(std::max(1, turnMissing(job)))) break;
    turn_.push_back(&job.tasks[static_cast<size_t>(ti)]);
    turn += turn_.back()->request();
  }
  if (auto room = ssn_.capacityCheck(job, turn); !room.ok()) {
    reason = room.error().message;
    return SequenceResult::Blocked;
  }
  solveSteps_ = 0;
  if (placesWith(job, domain, {}, /*commit=*/false)) return SequenceResult::NoVictimsNeeded;
  const std::vector<Victim>& head = sequenceHead();
  // A set may take from a job its surplus pods, or all its running pods (a gang moves whole).
  auto wholeOrSurplus = [&](const std::vector<Victim>& set) {
    for (const Victim& v : set) {
      const SessionJob& vj = ssn_.jobs()[static_cast<size_t>(v.job)];
      const int taken = static_cast<int>(std::count_if(set.begin(), set.end(), [&](const Victim& x) { return x.job == v.job; }));
      const int left = runningCount(vj) - taken;
      if (left > 0 && left < vj.minMember()) return false;
    }
    return true;
  };
  std::vector<std::vector<Victim>> chunks;
  std::vector<Victim> taken;
  for (const Victim& v : head) {
    if (v.job == job.index || contains(taken, v)) continue;
    const SessionTask& t = ssn_.task(v.job, v.task);
    if (!running(t) || !eligible(job, t)) continue;
    const Take take = takeOf(v, taken);
    if (take == Take::Wait) continue;
    std::vector<Victim> chunk;
    if (take == Take::Surplus) chunk.push_back(v);
    else
      for (const SessionTask& o : ssn_.jobs()[static_cast<size_t>(v.job)].tasks)
        if (running(o) && !contains(taken, {v.job, o.index})) chunk.push_back({v.job, o.index});
    if (taken.size() + chunk.size() > static_cast<size_t>(kSequencePods) || solveSteps_ > kSolveSteps) break;
    chunks.push_back(chunk);
    taken.insert(taken.end(), chunk.begin(), chunk.end());
    if (!mayPlaceWith(domain, taken) || !placesWith(job, domain, taken, /*commit=*/false)) continue;
    // The first prefix that fits ends in the earliest possible last chunk; walking back from the
    // chunk before it, each chunk the set can do without is dropped: the first minimal set.
    std::vector<bool> keep(chunks.size(), true);
    auto kept = [&] {
      std::vector<Victim> set;
      for (size_t i = 0; i < chunks.size(); ++i)
        if (keep[i]) set.insert(set.end(), chunks[i].begin(), chunks[i].end());
      return set;
    };
    for (size_t i = chunks.size() - 1; i-- > 0;) {
      keep[i] = false;
      const std::vector<Victim> set = kept();
      if (!wholeOrSurplus(set) || !placesWith(job, domain, set, /*commit=*/false)) keep[i] = true;
    }
    // Out of steps, a chunk may have been kept for want of them: the set is not known minimal.
    const std::vector<Victim> set = kept();
    if (solveSteps_ > kSolveSteps || static_cast<int>(set.size()) > maxVictims_) return SequenceResult::Failed;
    solveSteps_ = 0;  // the set fits: placing it again takes the steps it took
    return placesWith(job, domain, set, /*commit=*/!trial) ? SequenceResult::Solved : SequenceResult::Failed;
  }
  return SequenceResult::Failed;
}

}  // namespace tessera::actions
