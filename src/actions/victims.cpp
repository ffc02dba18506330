#include "victims.h"

#include <algorithm>
#include <optional>

#include "job_placement.h"
#include "tessera/actions/factories.h"

namespace tessera::actions {

using framework::Session;
using framework::SessionJob;
using framework::SessionNode;
using framework::SessionTask;
using framework::Statement;
using framework::TaskState;

namespace {

using victims_detail::running;
using victims_detail::runningCount;

/// How many candidate nodes to try per pod before giving up.
constexpr size_t kNodeAttempts = 8;

}  // namespace

void VictimSearch::indexNodes() {
  if (indexed_) return;
  indexed_ = true;
  index_ = &ssn_.runningIndex();
  running_ = index_->tasks;
  sortedOn_.assign(ssn_.nodes().size(), SortStamp{});  // each node's list is sorted when searched (victimsOn)
}

bool VictimSearch::nodeOrderLess(const Victim& a, const Victim& b) const {
  if (mode_ != VictimMode::Preempt) return victimBefore(a, b);
  // Preempt takes victims in the claimant's own queue only: each node's pods are grouped by queue,
  // in victim order inside each: no two queues' pods are compared (an order across queues costs
  // the proportion plugin a build of their victim sequences, and preempt never needs it).
  const int qa = ssn_.jobs()[a.job].queue, qb = ssn_.jobs()[b.job].queue;
  return qa != qb ? qa < qb : victimBefore(a, b);
}

std::span<const VictimSearch::Victim> VictimSearch::victimsOn(int node) {
  const std::span<Victim> list = onNode(node);
  SortStamp& stamp = sortedOn_[static_cast<size_t>(node)];
  const bool held = ssn_.victimOrderHeld();
  const uint64_t epoch = ssn_.victimOrderEpoch();
  const uint64_t live = ssn_.victimOrderVersion(/*live=*/true);
  // In one search, kept while no pod changed since: two pods of one queue compare by what their
  // jobs are now (running, surplus), so a list sorted before the search's own evictions may be out
  // of order after them (and which lists were sorted before depends on which nodes were evaluated).
  if (stamp.sorted && held && stamp.epoch == epoch && stamp.live == live) return list;
  const uint64_t version = ssn_.victimOrderVersion();
  // Preempt: sorted while its pods' jobs stay as they were, whatever moved elsewhere (every commit
  // moves the order's version; a node's pods are sorted again only where one of their jobs moved).
  const bool byJobs = mode_ == VictimMode::Preempt && ssn_.victimOrderByJobsInQueue();
  const uint64_t jobs = byJobs ? jobsStamp(list) : 0;
  const bool jobsHold = byJobs && stamp.sorted && stamp.jobs == jobs;
  if (jobsHold || (stamp.sorted && stamp.lasting && stamp.version == version)) {
    // Self-check: an order kept from an earlier search is the order now (read where the order in
    // force is the live one: a search's own evictions do not move the order it holds; preempt's
    // order inside a queue is the live one, held or not).
    if (selfChecks() && (jobsHold || version == live))
      TESSERA_ASSERT(std::is_sorted(list.begin(), list.end(), [&](const Victim& a, const Victim& b) {
        return nodeOrderLess(a, b);
      }));
    if (held) stamp.epoch = epoch;
    return list;
  }
  auto less = [&](const Victim& a, const Victim& b) { return nodeOrderLess(a, b); };
  // A node runs a few pods: they are sorted in place by insertion (stable, as std::stable_sort,
  // which would allocate a buffer per call; a list sorted in an earlier order is mostly in order
  // still, a pass of one comparison per pod). Past a few dozen, insertion's quadratic worst case
  // would cost more than the buffer.
  constexpr size_t kInsertionMax = 24;
  if (list.size() <= kInsertionMax) {
    for (size_t i = 1; i < list.size(); ++i) {
      const Victim v = list[i];
      size_t j = i;
      for (; j > 0 && less(v, list[j - 1]); --j) list[j] = list[j - 1];
      list[j] = v;
    }
  } else {
    std::stable_sort(list.begin(), list.end(), less);
  }
  // The sort read the order the search holds; pods of jobs the search already changed compare by
  // what they are now (running, surplus), so such a sort is kept for this search only (and there
  // only while no pod changes, above).
  stamp = {true, version == live, epoch, version, live, jobs};
  return list;
}

uint64_t VictimSearch::jobsStamp(std::span<const Victim> list) const {
  uint64_t sum = 0;
  for (const Victim& v : list) sum += ssn_.jobs()[static_cast<size_t>(v.job)].version;
  return sum;
}

bool VictimSearch::onSessionNodes(const SessionJob& job) const {
  if (onSessionNodes_.size() < ssn_.jobs().size()) onSessionNodes_.resize(ssn_.jobs().size(), -1);
  int8_t& known = onSessionNodes_[job.index];
  if (known < 0) {
    known = 1;
    for (const framework::SessionTask& t : job.tasks)
      if (running(t) && t.node < 0 && ssn_.findNode(t.info->nodeName) < 0) known = 0;
  }
  return known == 1;
}

bool VictimSearch::jobMayGive(const SessionJob& claimant, const SessionJob& vj) const {
  if (vj.index == claimant.index || !vj.preemptible || !onSessionNodes(vj)) return false;
  if (pruning_ && !std::binary_search(pruneJobs_.begin(), pruneJobs_.end(), vj.index)) return false;
  return excluded_.empty() || std::find(excluded_.begin(), excluded_.end(), vj.index) == excluded_.end();
}

bool VictimSearch::eligible(const SessionJob& claimant, const SessionTask& victim, bool bound) const {
  if (!running(victim) || !jobMayGive(claimant, ssn_.jobs()[victim.job])) return false;
  switch (mode_) {
    case VictimMode::Reclaim: return bound ? ssn_.reclaimableBound(claimant, victim) : ssn_.reclaimable(claimant, victim);
    case VictimMode::Preempt: return ssn_.preemptable(claimant, victim);
    case VictimMode::Consolidate: return true;  // moved, not lost: a gang moves whole (chunkOf)
  }
  return false;
}

namespace {

/// The subgroup of the job's PodGroup a task belongs to; null when it has none.
const api::SubGroup* subGroupOf(const SessionJob& j, const SessionTask& t) {
  if (!j.info->podGroup || t.info->subGroup.empty()) return nullptr;
  for (const api::SubGroup& s : j.info->podGroup->subGroups)
    if (s.name == t.info->subGroup) return &s;
  return nullptr;
}

/// Running pods of the job in subgroup `s` (all of them when null), less those in `taken`.
int runningIn(const SessionJob& j, const api::SubGroup* s, const std::vector<VictimSearchVictim>& taken) {
  int n = 0;
  for (const SessionTask& t : j.tasks) {
    if (!running(t) || (s && t.info->subGroup != s->name)) continue;
    const bool gone = std::any_of(taken.begin(), taken.end(),
                                  [&](const VictimSearchVictim& x) { return x.job == j.index && x.task == t.index; });
    n += gone ? 0 : 1;
  }
  return n;
}

}  // namespace

VictimSearch::Take VictimSearch::takeOf(const Victim& v, const std::vector<Victim>& taken) const {
  const SessionJob& vj = ssn_.jobs()[v.job];
  // A job that got pods placed in this cycle is not taken whole in it (its surplus pods may go):
  // its running pods evicted or moved would leave the new ones starting without them, the gang
  // below its minimum.
  const Take whole = placedThisCycle(vj) ? Take::Wait : Take::Whole;
  if (runningIn(vj, nullptr, taken) <= vj.minMember()) return whole;
  if (!vj.info->podGroup || vj.info->podGroup->subGroups.empty()) return Take::Surplus;
  // Subgroups (issue 15, item 6): a pod is surplus only while its subgroup is above its own
  // minimum too; one whose subgroup is at it waits while another subgroup still has a surplus pod.
  const api::SubGroup* mine = subGroupOf(vj, ssn_.task(v.job, v.task));
  if (!mine || runningIn(vj, mine, taken) > mine->minMember) return Take::Surplus;
  for (const api::SubGroup& s : vj.info->podGroup->subGroups)
    if (runningIn(vj, &s, taken) > s.minMember) return Take::Wait;
  return whole;
}

std::vector<VictimSearch::Victim> VictimSearch::chunkOf(const Victim& v) const {
  const SessionJob& vj = ssn_.jobs()[v.job];
  const Take take = takeOf(v, {});
  if (take == Take::Surplus) return {v};  // a surplus pod of an elastic job
  if (take == Take::Wait) return {};
  std::vector<Victim> all;  // a gang at its minimum goes whole
  for (const SessionTask& t : vj.tasks)
    if (running(t)) all.push_back({v.job, t.index});
  return all;
}

int VictimSearch::replace(Statement& stmt, const std::vector<Victim>& victims, int& evicted, int depth) {
  // Anywhere, the node it leaves included (a fractional pod packed onto another GPU there, a
  // gang's pod on room its other pods left): the claimant already holds the room it needed.
  for (const Victim& v : victims) {
    ssn_.restrictTo(nullptr);
    const SessionTask& t = ssn_.task(v.job, v.task);
    const framework::Placement p = ssn_.scanPlacement(t, /*allowPipeline=*/true);
    if (p.node >= 0) {
      stmt.reserve(t, p.node);
      continue;
    }
    if (depth >= chainLimit_ || !moveFor(stmt, v, evicted, depth + 1)) return v.job;
  }
  return -1;
}

bool VictimSearch::moveFor(Statement& stmt, const Victim& v, int& evicted, int depth) {
  // A moved pod with no room anywhere: other pods are moved for it in turn (a chain of moves, as
  // KAI's scenarios re-allocate every victim), on the node whose set comes first in victim order.
  const SessionJob& vj = ssn_.jobs()[v.job];
  const SessionTask& t = ssn_.task(v.job, v.task);
  std::optional<Chosen> best;
  int bestNode = -1;
  for (const SessionNode& n : ssn_.nodes()) {
    std::string unused;
    std::optional<Chosen> c = choose(vj, t, n.index, /*keepChunks=*/true);
    resetVerdicts();
    if (!c || evicted + c->count > maxVictims_ || !ssn_.predicate(t, n, unused)) continue;
    const SessionTask& last = ssn_.task(c->last.job, c->last.task);
    const bool better = !best || ssn_.victimLess(last, ssn_.task(best->last.job, best->last.task)) ||
                        (!ssn_.victimLess(ssn_.task(best->last.job, best->last.task), last) && c->count < best->count);
    if (better) best = std::move(c), bestNode = n.index;
  }
  if (!best) return false;
  const auto cp = stmt.checkpoint();
  const size_t record = evictedNow_.size();
  const int before = evicted;
  std::vector<Victim> moved;
  for (const std::vector<Victim>& chunk : best->chunks)
    for (const Victim& c : chunk) {
      SessionTask& ct = ssn_.task(c.job, c.task);
      if (!running(ct)) continue;
      evict(stmt, ct, movedWhy_);
      ++evicted;
      moved.push_back(c);
    }
  if (ssn_.fits(t, ssn_.nodes()[bestNode], /*future=*/true)) {
    stmt.reserve(t, bestNode);
    if (replace(stmt, moved, evicted, depth) < 0) return true;
  }
  stmt.rollback(cp);
  evictedNow_.resize(record);
  evicted = before;
  return false;
}

bool VictimSearch::tryOn(Statement& stmt, SessionJob& job, SessionTask& task, const std::vector<int>& nodes,
                         int& evicted) {
  // Consolidation: on every node without moving further pods for the moved ones first; chains of
  // moves only when no node does without.
  for (int pass = 0; pass < (mode_ == VictimMode::Consolidate ? 2 : 1); ++pass) {
    chainLimit_ = pass == 0 ? 0 : kMaxChain;
    for (int node : nodes)
      if (makeRoomOn(stmt, job, task, node, evicted)) return true;
  }
  return false;
}

bool VictimSearch::makeRoomOn(Statement& stmt, SessionJob& job, SessionTask& task, int node, int& evicted) {
  // A victim job the node's set cannot take after all (consolidation: its pods cannot be placed
  // again; reclaim: no longer eligible once the chunks before it are gone) is left where it is,
  // and the node's set chosen again without it (a few times at most).
  unmovable_.clear();
  for (int attempt = 0; attempt < 4; ++attempt) {
    const int stuck = makeRoomOnce(stmt, job, task, node, evicted);
    if (stuck == kPlaced) return true;
    if (stuck < 0) break;
    unmovable_.push_back(stuck);
  }
  unmovable_.clear();
  return false;
}

int VictimSearch::makeRoomOnce(Statement& stmt, SessionJob& job, SessionTask& task, int node, int& evicted) {
  std::optional<Chosen> chosen = choose(job, task, node, /*keepChunks=*/true);
  resetVerdicts();
  if (!chosen || evicted + chosen->count > maxVictims_) return kFailed;
  const auto cp = stmt.checkpoint();
  const int before = evicted;
  const Reason why = claimantWhy(job);
  const size_t record = evictedNow_.size();
  auto fail = [&] {
    stmt.rollback(cp);
    evictedNow_.resize(record);
    evicted = before;
    return kFailed;
  };
  bool first = true;
  std::vector<Victim> moved;  // consolidation: placed again once the claimant holds its room
  for (const std::vector<Victim>& chunk : chosen->chunks) {
    // Whether a reclaim victim may be taken can change with the evictions before it (a queue that
    // falls to its fair share stops giving back): checked again as it is taken. One that may not is
    // left alone on this node, and the node's set chosen again without it (makeRoomOn): a victim
    // after it in victim order, of a queue still above its share, may do.
    if (mode_ == VictimMode::Reclaim && !first && !eligible(job, ssn_.task(chunk.front().job, chunk.front().task))) {
      fail();
      return chunk.front().job;
    }
    first = false;
    for (const Victim& c : chunk) {
      SessionTask& ct = ssn_.task(c.job, c.task);
      if (!running(ct)) continue;
      evict(stmt, ct, why);
      ++evicted;
    }
    if (mode_ == VictimMode::Consolidate) moved.insert(moved.end(), chunk.begin(), chunk.end());
  }
  const auto& n = ssn_.nodes()[node];
  if (!ssn_.fits(task, n, /*future=*/true)) return fail();
  // Bound now only when the node holds it now, its pod slots included (evicted pods still hold
  // theirs until they are gone).
  if (ssn_.fits(task, n, /*future=*/false)) stmt.allocate(task, node);
  else stmt.pipeline(task, node);
  orderChanged_ = true;
  movedWhy_ = why;
  if (!moved.empty())
    if (const int stuck = replace(stmt, moved, evicted, 0); stuck >= 0) {
      fail();
      return stuck;
    }
  return kPlaced;
}

void VictimSearch::indexQueues() {
  const size_t nq = ssn_.queues().size();
  if (queueTop_.size() == nq) return;
  const std::vector<int> parent = queueParents(ssn_);  // parent cycles cut
  queueTop_.assign(nq, -1);
  for (size_t q = 0; q < nq; ++q) {
    int c = static_cast<int>(q);
    while (parent[static_cast<size_t>(c)] >= 0) c = parent[static_cast<size_t>(c)];
    queueTop_[q] = c;
  }
  topRunning_.assign(nq, {});
  topJobs_.assign(nq, {});
  queueJobs_.assign(nq, {});
  topQueues_.assign(nq, {});
  for (const SessionJob& j : ssn_.jobs()) {
    if (j.queue < 0 || j.readyCount == 0) continue;  // a job with no pod in a ready state runs none
    const size_t top = static_cast<size_t>(queueTop_[static_cast<size_t>(j.queue)]);
    std::vector<Victim>& pods = topRunning_[top];
    const uint32_t from = static_cast<uint32_t>(pods.size());
    for (const SessionTask& t : j.tasks)
      if (running(t)) pods.push_back({j.index, t.index});
    if (pods.size() == from) continue;
    topJobs_[top].push_back({j.index, from, static_cast<uint32_t>(pods.size())});
    if (j.preemptible) queueJobs_[static_cast<size_t>(j.queue)].push_back(topJobs_[top].back());
  }
  for (size_t q = 0; q < nq; ++q)
    if (!queueJobs_[q].empty()) topQueues_[static_cast<size_t>(queueTop_[q])].push_back(static_cast<int>(q));
  topAsked_.resize(nq);
  for (size_t top = 0; top < nq; ++top) topAsked_[top].assign(topRunning_[top].size(), 0);
}

uint8_t VictimSearch::askedMask(const api::Resources& r) {
  return static_cast<uint8_t>(kAskedKnown | (r.milliGpu > 0 ? 1 : 0) | (r.milliCpu > 0 ? 2 : 0) |
                              (r.memory > 0 ? 4 : 0));
}

api::Status VictimSearch::queueRoom(const SessionJob& job, const SessionTask& task) const {
  TESSERA_TRY(taskAllowed(ssn_, job, task));
  if (mode_ == VictimMode::Reclaim) return ssn_.reclaimBounds(job, task.request());
  return api::Status::success();
}

bool VictimSearch::relievable(const SessionJob& job, const api::Error& why) const {
  // OverLimit of queue q: reclaim takes from other queues, which frees no room under the
  // claimant's own queue's limit, only under an ancestor's; preempt frees its own queue's.
  // OverFairShare of queue q (reclaim): an ancestor's, freed by victims in sibling queues.
  const bool limit = why.is("OverLimit");
  if (!limit && (mode_ != VictimMode::Reclaim || !why.is("OverFairShare"))) return false;
  return mode_ != VictimMode::Reclaim || why.name() != job.info->queue;
}

const std::string& VictimSearch::queueRoomKey(const SessionJob& job, const SessionTask& task) {
  std::string& key = queueRoomKey_;
  key.clear();
  for (int64_t v : {task.request().milliGpu, task.request().milliCpu, task.request().memory}) {
    key += std::to_string(v);
    key += '|';
  }
  appendClaimantKey(job, key);
  key += pruneKey();
  return key;
}

void VictimSearch::appendClaimantKey(const SessionJob& job, std::string& key) const {
  key += job.info->queue;
  key += '|';
  key += std::to_string(job.priority);
  key += job.preemptible ? "|p" : "|n";
  if (mode_ == VictimMode::Reclaim) ssn_.reclaimClaimantKey(job, key);
}

bool VictimSearch::queueRoomKnownFailed(const SessionJob& job, const SessionTask& task) {
  auto it = queueRoomFailedAt_.find(queueRoomKey(job, task));
  return it != queueRoomFailedAt_.end() && it->second == ssn_.nodeChanges().size();
}

bool VictimSearch::freeQueueRoom(Statement& stmt, SessionJob& job, SessionTask& task, int& evicted) {
  if (job.queue < 0) return false;
  // A claimant of the same queue, priority and request that found no room under the limit, with
  // nothing changed on any node since, finds none again: the scan below is not repeated.
  if (queueRoomKnownFailed(job, task)) return false;
  indexQueues();
  // Victims that give back some of what the claimant asks for (each pod's mask read once per action).
  const uint8_t wants = askedMask(task.request());
  // Victims whose queue counts against a limit on the claimant's path: every queue under the
  // path's top-level queue.
  const size_t top = static_cast<size_t>(queueTop_[static_cast<size_t>(job.queue)]);
  const std::vector<Victim>& pool = topRunning_[top];
  std::vector<uint8_t>& asked = topAsked_[top];
  // Grouped by queue, for the choice below (which takes the first in victim order: the order of
  // the groups and of the pods in each does not matter).
  std::vector<std::vector<Victim>>& byQueue = queueGroupPods_;  // per group, its candidates
  queueGroupOf_.resize(ssn_.queues().size(), -1);
  std::vector<QueueCands>& groups = queueGroups_;
  groups.clear();
  // The job's running pods that ask for what the claimant lacks; `ok`: whether the job may give
  // victims, or -1: asked of its first such pod.
  auto addPods = [&](const TopJob& r, int8_t ok) {
    const SessionJob& vj = ssn_.jobs()[static_cast<size_t>(r.job)];
    int& slot = queueGroupOf_[static_cast<size_t>(vj.queue)];
    for (uint32_t i = r.from; i < r.to && ok != 0; ++i) {
      const SessionTask& t = vj.tasks[static_cast<size_t>(pool[i].task)];
      if (!running(t)) continue;
      if (!asked[i]) asked[i] = askedMask(t.request());
      if (!(asked[i] & wants)) continue;
      if (ok < 0) ok = eligible(job, t) ? 1 : 0;
      if (ok != 1) continue;
      if (slot < 0) {
        slot = static_cast<int>(groups.size());
        groups.push_back({vj.queue, 0});
        if (byQueue.size() < groups.size()) byQueue.resize(groups.size());
        byQueue[static_cast<size_t>(slot)].clear();
      }
      byQueue[static_cast<size_t>(slot)].push_back(pool[i]);
    }
  };
  // Reclaiming, where every filter splits its verdict by queue (Session::reclaimQueuesNow), the
  // queues that may give none are passed whole and each job's own part is asked once; otherwise
  // job by job, of its first pod.
  if (mode_ == VictimMode::Reclaim && ssn_.reclaimQueuesNow(job, topQueues_[top], queueNow_)) {
    for (int q : topQueues_[top]) {
      if (!queueNow_[static_cast<size_t>(q)]) continue;
      for (const TopJob& r : queueJobs_[static_cast<size_t>(q)]) {
        const SessionJob& vj = ssn_.jobs()[static_cast<size_t>(r.job)];
        if (vj.readyCount > 0 && jobMayGive(job, vj) && ssn_.reclaimBoundJob(vj)) addPods(r, 1);
      }
    }
    if (selfChecks()) checkQueueVerdicts(job, top);
  } else {
    for (const TopJob& r : topJobs_[top]) {  // job by job: a job that gives none is passed whole
      const SessionJob& vj = ssn_.jobs()[static_cast<size_t>(r.job)];
      if (vj.index != job.index && vj.readyCount > 0 && vj.preemptible) addPods(r, -1);
    }
  }
  for (const QueueCands& g : groups) queueGroupOf_[static_cast<size_t>(g.queue)] = -1;
  // A group's candidates not taken yet: those from its `next` on.
  auto rest = [&](size_t g) {
    std::vector<Victim>& pods = byQueue[g];
    return std::span<Victim>(pods).subspan(groups[g].next);
  };
  // Taken in victim order, the order as it stands after the victims taken so far (KAI's victim
  // queue: an elastic job that reached its minimum now goes whole, behind newer jobs; the queues'
  // shares moved): each next one is the first of the rest. Victim order is one strict total order,
  // so this is what sorting them all would give, for the few a claimant usually needs. The first
  // of the rest is the first among each queue's first: two pods of one queue compare by their own
  // jobs (cheap), two of different queues through the queues' victim sequences (not cheap), so
  // the pods of different queues are compared once per queue rather than once per candidate.
  auto less = [&](const Victim& a, const Victim& b) { return victimBefore(a, b); };
  const auto cp = stmt.checkpoint();
  const size_t record = evictedNow_.size();
  const int before = evicted;
  Reason why;  // made at the first eviction: most calls evict none
  for (;;) {
    if (queueRoom(job, task).ok()) break;
    size_t in = groups.size();  // the group of the first of the rest
    Victim* first = nullptr;
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::span<Victim> left = rest(g);
      if (left.empty()) continue;
      Victim* m = &*std::min_element(left.begin(), left.end(), less);
      if (!first || less(*m, *first)) in = g, first = m;
    }
    if (!first) break;  // every candidate taken or passed over
    std::swap(rest(in).front(), *first);
    const Victim v = byQueue[in][groups[in].next++];
    if (selfChecks())  // self-check: no candidate left goes before it
      for (size_t g = 0; g < groups.size(); ++g)
        TESSERA_ASSERT(std::none_of(rest(g).begin(), rest(g).end(), [&](const Victim& c) { return less(c, v); }));
    SessionTask& vt = ssn_.task(v.job, v.task);
    if (!running(vt) || !eligible(job, vt)) continue;
    const std::vector<Victim> chunk = chunkOf(v);
    if (std::any_of(chunk.begin(), chunk.end(), [&](const Victim& c) { return podExcluded(c); })) continue;
    for (const Victim& c : chunk) {
      SessionTask& ct = ssn_.task(c.job, c.task);
      if (!running(ct)) continue;
      if (!why) why = std::make_shared<const std::string>(whyText(job, /*queueLimit=*/true));
      evict(stmt, ct, why);
      ++evicted;
    }
  }
  if (queueRoom(job, task).ok()) return true;
  stmt.rollback(cp);
  evictedNow_.resize(record);
  evicted = before;
  queueRoomFailedAt_[queueRoomKey(job, task)] = ssn_.nodeChanges().size();
  return false;
}

void VictimSearch::checkQueueVerdicts(const SessionJob& job, size_t top) const {
  // Every running pod's verdict as eligible() gives it, pod by pod.
  const std::vector<Victim>& pool = topRunning_[top];
  for (const TopJob& r : topJobs_[top]) {
    const SessionJob& vj = ssn_.jobs()[static_cast<size_t>(r.job)];
    const bool split = queueNow_[static_cast<size_t>(vj.queue)] && jobMayGive(job, vj) && ssn_.reclaimBoundJob(vj);
    for (uint32_t i = r.from; i < r.to; ++i) {
      const SessionTask& t = vj.tasks[static_cast<size_t>(pool[i].task)];
      if (running(t)) TESSERA_ASSERT(split == eligible(job, t));
    }
  }
}

bool VictimSearch::turnDone(const SessionJob& job) const {
  return turnTarget_ > 0 ? job.readyCount >= turnTarget_ : ssn_.jobReady(job);
}

int VictimSearch::turnMissing(const SessionJob& job) const {
  return turnTarget_ > 0 ? std::max(0, turnTarget_ - job.readyCount) : std::max(0, job.minMember() - job.readyCount);
}

bool VictimSearch::queueHasVictims(const SessionJob& job) {
  if (job.queue < 0) return false;
  // Who may be preempted depends on the claimant's queue, priority and preemptibility (the nodes'
  // rankings are kept per the same key); evictions only take victims away, so "none" holds for the
  // rest of the action.
  auto [it, fresh] = queueHasVictims_.try_emplace(claimantClass(job), false);
  if (fresh) it->second = anyVictimFor(job);
  return it->second;
}

bool VictimSearch::anyVictimFor(const SessionJob& job) {
  bool any = false;
  for (int ni : queueNodes(job.queue)) {
    for (const Victim& v : onNode(ni))
      if (ssn_.jobs()[static_cast<size_t>(v.job)].queue == job.queue && eligibleCached(job, v)) {
        any = true;
        break;
      }
    if (any) break;
  }
  resetVerdicts();
  return any;
}

bool VictimSearch::queueSpent(std::span<const int> rest) {
  // Only right after a preempt turn that found no victim in its queue, and once per queue (a queue
  // whose rest may still take victims is not asked again at each of its failing turns).
  if (!noVictimsTurn_) return false;
  noVictimsTurn_ = false;
  const SessionJob& first = ssn_.jobs()[static_cast<size_t>(rest.front())];
  if (first.queue < 0) return false;
  if (spentAsked_.size() != ssn_.queues().size()) spentAsked_.assign(ssn_.queues().size(), 0);
  uint8_t& asked = spentAsked_[static_cast<size_t>(first.queue)];
  if (asked) return false;  // (kSpentChecked stays: run() checks every later turn)
  asked = 1;
  // Each later job's turn ends at queueHasVictims() exactly when its claimant class has no victim
  // when the turn comes. A class known to have none keeps none (victims only leave); one not asked
  // yet is asked now, and kept only when it has none: a class with victims now is asked again at
  // its turn, as without this check (the answer kept is the first claimant's, at its turn). A class
  // known to have some means a search: the queue goes on.
  std::optional<ClaimantClass> last;  // jobs of one class come in runs (job order: priority first)
  for (int j : rest) {
    const SessionJob& job = ssn_.jobs()[static_cast<size_t>(j)];
    const ClaimantClass key = claimantClass(job);
    if (key == last) continue;  // known to have none: a class with victims ended the loop
    last = key;
    if (auto it = queueHasVictims_.find(key); it != queueHasVictims_.end()) {
      if (it->second) return false;
      continue;
    }
    if (anyVictimFor(job)) return false;
    queueHasVictims_.emplace(key, false);
  }
  if (selfChecks()) {  // the turns are taken, each checked to end as said (run())
    asked = kSpentChecked;
    return false;
  }
  return true;
}

api::Resources VictimSearch::turnNeeds(const SessionJob& job) const {
  auto needs = [](const SessionTask& t) {
    api::Resources r = t.nodeRequest();
    r.milliGpu = t.info->gpuNeedMilli();
    return r;
  };
  // When the turn takes every pending pod, or they all ask alike (gangs mostly do), no order is
  // needed: a sum does.
  const int wanted = std::max(1, turnMissing(job));
  api::Resources all, first;
  bool alike = true;
  int pending = 0;
  for (const SessionTask& t : job.tasks) {
    if (t.state != TaskState::Pending) continue;
    api::Resources r = needs(t);
    if (pending++ == 0) first = r;
    else if (alike && !(r == first)) alike = false;
    all += r;
  }
  if (wanted >= pending) return all;
  api::Resources out;
  if (alike) {
    for (int i = 0; i < wanted; ++i) out += first;
    return out;
  }
  int left = wanted;
  for (int ti : pendingTasks(ssn_, job)) {
    if (left-- <= 0) break;
    out += needs(job.tasks[static_cast<size_t>(ti)]);
  }
  return out;
}

bool VictimSearch::run(SessionJob& job, std::string& reason) {
  const bool spared = job.queue >= 0 && static_cast<size_t>(job.queue) < spentAsked_.size() &&
                      spentAsked_[static_cast<size_t>(job.queue)] == kSpentChecked;
  const bool ok = runTurn(job, reason);
  // Self-check of queueSpent(): a turn it would have spared ends at queueHasVictims().
  if (spared) TESSERA_ASSERT(!ok && noVictimsTurn_);
  return ok;
}

bool VictimSearch::runTurn(SessionJob& job, std::string& reason) {
  ++turnSeq_;
  // The search says why in its own words: findPlacement's failure reasons are not built.
  framework::QuietPlacement quiet(ssn_);
  // One victim order for the whole search, as KAI builds its victim queue once per claimant
  // (kept as it began whichever trial compares first; preempt's compares pods of one queue).
  framework::HeldVictimOrder held(ssn_, /*keep=*/mode_ != VictimMode::Preempt);
  turnTarget_ = ssn_.jobReady(job) ? job.readyCount + 1 : 0;
  noVictimsTurn_ = false;
  if (mode_ == VictimMode::Reclaim)
    if (auto may = ssn_.canReclaim(job); !may.ok()) {
      // Blocked by a limit on its queue path: victims under it may free room (item 9), unless a
      // claimant like it found none with nothing changed since.
      const SessionTask* first = nullptr;
      for (const SessionTask& t : job.tasks)
        if (t.state == TaskState::Pending && !first) first = &t;
      if (!relievable(job, may.error()) || !first || queueRoomKnownFailed(job, *first)) {
        reason = may.error().message;
        return false;
      }
    }
  if (mode_ == VictimMode::Consolidate) {
    if (!job.preemptible) {
      reason = "only preemptible jobs are consolidated for";
      return false;
    }
    // Moving pods around creates no room: the cluster's free resources must hold the job already.
    // What the gang's minimum needs (pods above it are not consolidated for).
    if (!turnNeeds(job).fitsIn(clusterFree())) {
      reason = "the cluster's free resources cannot hold the job, wherever its pods run";
      return false;
    }
  }
  indexNodes();
  if (mode_ == VictimMode::Preempt && !queueHasVictims(job)) {
    reason = "no eligible victims would make room";
    noVictimsTurn_ = true;
    return false;
  }
  // KAI's scheduling signatures: a job just like one that failed, with nothing changed on any node
  // since, fails the same way; it is not searched again.
  const int sig = ssn_.jobSignature(job, turnMissing(job));
  if (failed_.find(ssn_, sig)) {
    reason = "no eligible victims would make room (as for a job of the same shape)";
    return false;
  }
  bool ok = false;
  // A claimant constrained by topology makes room inside one of its domains: every domain that
  // could hold it once victims are gone, not only those with room now (issue 15, item 4).
  auto domains = ssn_.jobDomains(job, framework::DomainRoom::WithVictims);
  if (!domains) {
    ok = searchIn(job, nullptr, reason, /*trial=*/false);
  } else {
    reason = domains->reason;  // the plugin's word, when it has one, goes before a domain's
    ok = runInDomains(job, domains->domains, reason);
  }
  if (!ok) failed_.record(ssn_, sig);
  return ok;
}

const api::Resources& VictimSearch::clusterFree() {
  if (freeAt_ != ssn_.nodeChanges().size() || !freeKnown_) {  // recounted only after changes
    free_ = api::Resources();
    for (const auto& n : ssn_.nodes()) {
      free_ += n.futureIdle();
      // Room left in shared GPUs counts too: packing fractional pods turns it into whole GPUs.
      for (const framework::SessionGpuGroup& g : n.gpuGroups)
        if (g.capacity > 0 && !g.vacating && g.futureFree() > 0) free_.milliGpu += g.futureFree() * 1000 / g.capacity;
    }
    freeAt_ = ssn_.nodeChanges().size();
    freeKnown_ = true;
  }
  return free_;
}

bool VictimSearch::clusterTooFullToMove() {
  // A turn needs at least one pod, and each pod at least its GPUs as turnNeeds counts them: every
  // pending pod needing more than the cluster has free in all fails the check in runTurn.
  return ssn_.pendingGpuMilliFloor() > clusterFree().milliGpu;
}

std::string VictimSearch::whyText(const SessionJob& job, bool queueLimit) const {
  // Built in one buffer (one allocation per claimant, not one per piece).
  const cache::JobInfo& info = *job.info;
  std::string text;
  text.reserve(64 + info.queue.size() + info.namespace_.size() + info.name.size());
  switch (mode_) {
    case VictimMode::Reclaim:
      text += "reclaimed by queue ";
      text += info.queue;
      text += " for ";
      appendJob(text, job);
      if (queueLimit) text += " (queue limit)";
      return text;
    case VictimMode::Preempt:
      text += "preempted by ";
      appendJob(text, job);
      text += " (priority ";
      text += std::to_string(job.priority);
      text += queueLimit ? ", queue limit)" : ")";
      return text;
    case VictimMode::Consolidate: break;
  }
  text += "moved to make room for ";
  appendJob(text, job);
  return text;
}

const VictimSearch::Reason& VictimSearch::claimantWhy(const SessionJob& job) {
  if (whyJob_ != job.index || !why_) {
    why_ = std::make_shared<const std::string>(whyText(job, /*queueLimit=*/false));
    whyJob_ = job.index;
  }
  return why_;
}

void VictimSearch::evict(Statement& stmt, SessionTask& task, const Reason& why) {
  evictedNow_.push_back({task.job, task.index});
  stmt.evict(task, why);
}

bool VictimSearch::earlier(std::vector<Victim> a, std::vector<Victim> b) const {
  // Latest victim first in both, then compared from there: the set whose latest victim comes
  // earlier in victim order wins; on a tie the next latest decides; a set that runs out first
  // (fewer victims, the rest equal) wins.
  sortInVictimOrder(a, /*latestFirst=*/true);
  sortInVictimOrder(b, /*latestFirst=*/true);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (victimBefore(a[i], b[i])) return true;
    if (victimBefore(b[i], a[i])) return false;
  }
  return a.size() < b.size();
}

std::string VictimSearch::pruneKey() const {
  if (!pruning_ && excludedPods_.empty()) return "";
  std::string key = "|p" + std::to_string(pruneSeq_);
  for (int j : excluded_) key += "|x" + std::to_string(j);
  for (const Victim& v : excludedPods_) key += "|y" + std::to_string(v.job) + "." + std::to_string(v.task);
  return key;
}

bool VictimSearch::prune(SessionJob& job, const framework::NodeDomain* domain, std::vector<Victim> best,
                         std::string& reason) {
  // The turn with what was left out: the last trial kept, which ran with exactly that left out.
  const std::optional<TrialSolution> kept = pruneWalk(job, domain, best);
  bool ok = kept ? replayIn(job, domain, *kept, reason) : runIn(job, domain, reason, /*trial=*/false);
  endPrune();
  if (!ok) ok = runIn(job, domain, reason, /*trial=*/false);  // as first found
  return ok;
}

void VictimSearch::endPrune() {
  excluded_.clear();
  excludedPods_.clear();
  pruning_ = false;
}

bool VictimSearch::prunable(size_t needed, bool queueFreed, const std::vector<Victim>& set, bool applied) const {
  if (pruning_ || (needed <= 1 && !queueFreed && mode_ != VictimMode::Consolidate) || set.size() < 2) return false;
  const int job = set.front().job;
  if (std::any_of(set.begin(), set.end(), [&](const Victim& v) { return v.job != job; })) return true;
  // One victim job gave several pods: one of them may be spare where the job keeps its minimum
  // with it (surplus pods taken one at a time, or an elastic job taken whole).
  const SessionJob& vj = ssn_.jobs()[static_cast<size_t>(job)];
  const int left = runningCount(vj) - (applied ? 0 : static_cast<int>(set.size()));
  return left + 1 >= vj.minMember();
}

std::optional<VictimSearch::TrialSolution> VictimSearch::pruneWalk(SessionJob& job, const framework::NodeDomain* domain,
                                                                   std::vector<Victim>& best) {
  pruning_ = true;
  ++pruneSeq_;
  pruneJobs_.clear();
  pruneNodes_.clear();
  for (const Victim& v : best) {
    pruneJobs_.push_back(v.job);
    for (const SessionTask& t : ssn_.jobs()[v.job].tasks) {
      if (!running(t)) continue;
      const int n = nodeOf(t);
      if (n >= 0) pruneNodes_.push_back(n);
    }
  }
  for (std::vector<int>* list : {&pruneJobs_, &pruneNodes_}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  // The victims, the latest in victim order first.
  std::vector<Victim> byLatest = best;
  sortInVictimOrder(byLatest, /*latestFirst=*/true);
  auto in = [](const std::vector<Victim>& set, const Victim& v) {
    return std::any_of(set.begin(), set.end(), [&](const Victim& y) { return v.job == y.job && v.task == y.task; });
  };
  // One trial without what was just excluded: kept only when it takes a subset (comparing
  // different sets by the victim order as it stands, not as it would be after the victims
  // before, could trade a victim for a later one).
  // `without`: best less what the trial leaves alone. A trial that cannot fit the turn with those
  // alone, by resources, would fail (or find a set that is not a subset): it is not run.
  // Reclaim: nor one whose first pods (those that ask alike) would break their queue path's fair
  // share with all of them gone (reclaimBoundsMayHold: a statement, far cheaper than the search;
  // with selfChecks() the search runs and is asserted to fail).
  const api::Resources leading = mode_ == VictimMode::Reclaim ? leadingAlikeRequest(job) : api::Resources();
  std::optional<TrialSolution> kept;  // the operations of the last trial kept
  auto trial = [&](const std::vector<Victim>& without) {
    if (!mayFitWith(job, domain, without)) return false;
    const bool bounded = mode_ == VictimMode::Reclaim && !reclaimBoundsMayHold(job, leading, without);
    if (bounded && !selfChecks()) return false;
    std::string why;
    lastTrial_.reset();
    const bool found = runIn(job, domain, why, /*trial=*/true);
    if (!found || !std::all_of(evictedNow_.begin(), evictedNow_.end(), [&](const Victim& x) { return in(best, x); }))
      return false;
    TESSERA_ASSERT(!bounded);
    best = evictedNow_;
    kept = std::move(lastTrial_);
    return true;
  };
  // First the victims no trial can do without (neededOf): every set a trial keeps holds them, and
  // of such sets the one of them alone comes first in victim order (earlier()). When a trial
  // finds it, no walk finds better, and the walk's trials, one per victim left out, are spared
  // (a gang claimant's first search takes a lone pod per node before one takes a gang that
  // frees room for the whole turn). When it finds none, the walk runs as it would have.
  if (const std::vector<Victim> needed = neededOf(job, domain, best); !needed.empty() && needed.size() < best.size()) {
    const size_t jobsBefore = excluded_.size(), podsBefore = excludedPods_.size();
    for (const Victim& x : best) {
      if (in(needed, x)) continue;
      const bool jobNeeded = std::any_of(needed.begin(), needed.end(), [&](const Victim& y) { return y.job == x.job; });
      if (jobNeeded) excludedPods_.push_back(x);
      else if (std::find(excluded_.begin(), excluded_.end(), x.job) == excluded_.end()) excluded_.push_back(x.job);
    }
    if (!trial(needed)) {
      excluded_.resize(jobsBefore);
      excludedPods_.resize(podsBefore);
    }
  }
  // Walking back from the latest victim to the first (victim order), each one the claimant can do
  // without is left alone: a pod of an elastic job on its own where the job keeps its minimum
  // running without it (its pods were taken one at a time, for different pods of the claimant or
  // for queue room and node room), else its whole job, once, at the job's latest victim. One walk,
  // not jobs first and then pods: a job's later pod goes before an earlier victim of another job
  // is tried (the first minimal set in victim order keeps the earlier victims).
  std::vector<int> triedJobs;
  for (const Victim& v : byLatest) {
    if (!in(best, v)) continue;
    std::vector<Victim> without;
    if (leftOutAlone(best, v)) {
      for (const Victim& x : best)
        if (x.job != v.job || x.task != v.task) without.push_back(x);
      excludedPods_.push_back(v);
      if (!trial(without)) excludedPods_.pop_back();
      continue;
    }
    if (std::find(triedJobs.begin(), triedJobs.end(), v.job) != triedJobs.end()) continue;
    triedJobs.push_back(v.job);
    for (const Victim& x : best)
      if (x.job != v.job) without.push_back(x);
    excluded_.push_back(v.job);
    if (!trial(without)) excluded_.pop_back();
  }
  if (kept) kept->pruned = true;
  return kept;
}

bool VictimSearch::leftOutAlone(const std::vector<Victim>& set, const Victim& v) const {
  const SessionJob& vj = ssn_.jobs()[v.job];
  const int taken = static_cast<int>(std::count_if(set.begin(), set.end(), [&](const Victim& y) { return y.job == v.job; }));
  return taken >= 2 && runningCount(vj) - (taken - 1) >= vj.minMember();
}

std::vector<VictimSearch::Victim> VictimSearch::neededOf(const SessionJob& job, const framework::NodeDomain* domain,
                                                         const std::vector<Victim>& best) {
  // Each victim's part as the walk leaves it out (leftOutAlone).
  std::vector<Victim> needed;
  needed.reserve(best.size());
  std::vector<Victim>& without = neededWithout_;
  std::vector<int>& triedJobs = neededJobs_;
  triedJobs.clear();
  for (const Victim& v : best) {
    const bool alone = leftOutAlone(best, v);
    if (!alone) {
      if (std::find(triedJobs.begin(), triedJobs.end(), v.job) != triedJobs.end()) continue;
      triedJobs.push_back(v.job);
    }
    without.clear();
    for (const Victim& x : best)
      if (alone ? (x.job != v.job || x.task != v.task) : x.job != v.job) without.push_back(x);
    if (mayFitWith(job, domain, without)) continue;
    for (const Victim& x : best)
      if (alone ? (x.job == v.job && x.task == v.task) : x.job == v.job) needed.push_back(x);
  }
  return needed;
}

bool VictimSearch::queueRulesHold(const SessionJob& job) const {
  api::Resources all;  // every pending pod: more than the turn asks, so a yes holds for the turn
  for (const SessionTask& t : job.tasks)
    if (t.state == TaskState::Pending) all += t.request();
  if (!ssn_.capacityCheck(job, all).ok()) return false;
  return mode_ != VictimMode::Reclaim || ssn_.reclaimBounds(job, all).ok();
}

std::optional<VictimSearch::Victim> VictimSearch::earliestVictimIn(const SessionJob& job,
                                                                  const framework::NodeDomain& domain, bool bound) {
  // The first candidate of each queue, then the first of those (victim order is one strict total
  // order: the first of the firsts is the first). Two pods of one queue compare by their jobs, two
  // of different queues through their queues' victim sequences: pods of different queues are
  // compared once per queue rather than once per candidate.
  std::vector<Victim>& firsts = queueFirsts_;
  std::vector<int>& slotOf = queueFirstSlot_;  // per queue (+1: a job without one), its place in firsts
  firsts.clear();
  if (slotOf.size() != ssn_.queues().size() + 1) slotOf.assign(ssn_.queues().size() + 1, -1);
  for (int ni : domain.nodes) {
    if (!mayHaveVictims(job, ni)) continue;
    for (const Victim& v : onNode(ni)) {  // not victimsOn(): its order may be an earlier claimant's
      if (!(bound ? running(ssn_.task(v.job, v.task)) && mayBecomeEligible(job, v) : eligibleCached(job, v))) continue;
      int& slot = slotOf[static_cast<size_t>(ssn_.jobs()[static_cast<size_t>(v.job)].queue + 1)];
      if (slot < 0) {
        slot = static_cast<int>(firsts.size());
        firsts.push_back(v);
      } else if (victimBefore(v, firsts[static_cast<size_t>(slot)])) {
        firsts[static_cast<size_t>(slot)] = v;
      }
    }
  }
  std::optional<Victim> head;
  for (const Victim& v : firsts) {
    slotOf[static_cast<size_t>(ssn_.jobs()[static_cast<size_t>(v.job)].queue + 1)] = -1;
    if (!head || victimBefore(v, *head)) head = v;
  }
  return head;  // (its verdicts stand: the caller resets them once it changes anything)
}

VictimSearch::Victim VictimSearch::earliestOf(const std::vector<Victim>& set) const {
  Victim first = set.front();
  for (const Victim& v : set)
    if (victimBefore(v, first)) first = v;
  return first;
}

VictimSearch::Victim VictimSearch::latestOf(const std::vector<Victim>& set) const {
  Victim last = set.front();
  for (const Victim& v : set)
    if (victimBefore(last, v)) last = v;
  return last;
}

bool VictimSearch::runInDomains(SessionJob& job, const std::vector<framework::NodeDomain>& domains,
                                std::string& reason) {
  // Domains of one rank (one level) are alternatives: each is tried without committing, and the
  // one whose victims come first in victim order is taken. A lower rank (a preferred level) goes
  // before a higher one whenever it has a solution.
  indexNodes();
  const api::Resources want = turnNeeds(job);  // the turn, and who may give, are the same in every domain
  ClassRooms& rooms = roomsFor(job);
  // Every domain numbered before mayHold sums any (its first sum walks them all at once).
  std::vector<int>& ids = domainIdsOf_;
  ids.clear();
  for (const framework::NodeDomain& d : domains) ids.push_back(domainId(d));
  // A domain whose every set holds a pod that ran there, and whose earliest such pod comes after
  // the latest victim of the best set so far, cannot give an earlier set (earlier() compares the
  // latest victims first): its trial is spared. When the queue rules hold the whole turn as things
  // stand, every victim frees node room in the domain and the first one a search takes was
  // eligible from the start: the earliest eligible pod bounds the domain. Else victims taken for
  // queue room (anywhere under a queue limit) may be all a domain needs when its free room holds
  // the turn, and the pods taken there may have become eligible only as others went: a domain
  // whose free room does not hold the turn is bounded by its earliest pod that may become one.
  const bool queueHolds = mode_ != VictimMode::Consolidate && queueRulesHold(job);
  const size_t needed = static_cast<size_t>(turnMissing(job));
  struct Trial {
    size_t domain;
    bool bounded = false;        ///< its sets hold a pod of its nodes, none before `head`
    std::optional<Victim> head;  ///< earliestVictimIn
  };
  std::vector<Trial> trials;
  trials.reserve(kDomainTrials);
  for (size_t first = 0; first < domains.size();) {
    size_t end = first;
    while (end < domains.size() && domains[end].rank == domains[first].rank) ++end;
    // The domains compared: the first kDomainTrials of the rank that could hold the turn.
    trials.clear();
    // The reason, when the rank gives none: the first domain's (in the plugin's order) that failed.
    size_t failed = end;
    std::optional<std::string> failedWhy;  // (none: mayHold refused it)
    auto fail = [&](size_t d, std::optional<std::string>&& why) {
      if (d < failed) failed = d, failedWhy = std::move(why);
    };
    for (size_t d = first; d < end && trials.size() < static_cast<size_t>(kDomainTrials); ++d) {
      if (!mayHold(job, domains[d], ids[d], want, rooms)) {
        fail(d, std::nullopt);
        continue;
      }
      // A turn that fits in a domain of the level as things stand takes no victim in any, nor
      // moves a pod: placing it is allocate's job, as for a claimant without domains (finishTurn).
      // Asked before any trial: a trial elsewhere could find victims, and one here would end
      // "fits without victims" only after the others, or never be run (the bound below).
      if (freeRoomCovers(ids[d], want) && fitsAsIs(job, domains[d])) {
        reason = domains[d].name + ": fits without victims";
        return false;
      }
      if (end - first == 1) {
        std::string why;
        if (searchIn(job, &domains[d], why, /*trial=*/false)) return true;
        fail(d, std::move(why));
        continue;
      }
      trials.push_back({d, false, std::nullopt});
    }
    // Tried in the order of their earliest pod: the first set found is then usually the best, and
    // every domain bounded by a later pod than its latest victim is spared (the domains compared,
    // and the winner, are those of trying them in the plugin's order).
    if (mode_ != VictimMode::Consolidate && trials.size() > 1) {
      for (Trial& t : trials) {
        t.bounded = queueHolds || !freeRoomCovers(ids[t.domain], want);
        if (t.bounded) t.head = earliestVictimIn(job, domains[t.domain], /*bound=*/!queueHolds);
      }
      resetVerdicts();  // (each victim job judged once for all the domains, nothing changed between)
      std::stable_sort(trials.begin(), trials.end(), [&](const Trial& a, const Trial& b) {
        if (a.bounded != b.bounded) return !a.bounded;  // (a domain that may need no victim of its own first)
        if (!a.head || !b.head) return a.head && !b.head;
        return victimBefore(*a.head, *b.head);
      });
    }
    int best = -1;
    std::vector<Victim> bestSet;
    std::optional<TrialSolution> bestTrial;  // the best set's operations, when its trial kept them
    for (const Trial& t : trials) {
      const size_t d = t.domain;
      if (best >= 0 && t.bounded && (!t.head || victimBefore(latestOf(bestSet), *t.head)))
        break;  // (and every domain after it: bounded, by later pods still)
      std::string why;
      lastTrial_.reset();
      if (searchIn(job, &domains[d], why, /*trial=*/true)) {
        // Domains compare by the sets their turns end with: a set a prune would make smaller (the
        // same queue-room victims found in two domains, a node's extra victims) is pruned first
        // (not consolidation's: its sets may come from the victim sequence, which prunes its own).
        std::vector<Victim> set = evictedNow_;
        std::optional<TrialSolution> solution = std::move(lastTrial_);
        // (A set whose first victim comes after the best set's latest loses, whatever it keeps.)
        if (best >= 0 && victimBefore(latestOf(bestSet), earliestOf(set))) continue;
        if (mode_ != VictimMode::Consolidate &&
            prunable(needed, !solution || solution->queueFreed, set, /*applied=*/false)) {
          if (std::optional<TrialSolution> kept = pruneWalk(job, &domains[d], set)) solution = std::move(kept);
          else if (solution) solution->pruned = true;  // nothing to drop: its replay is not pruned again
          endPrune();
        }
        // (Equal sets: the domain the plugin lists first.)
        if (best < 0 || earlier(set, bestSet) || (d < static_cast<size_t>(best) && !earlier(bestSet, set))) {
          best = static_cast<int>(d), bestSet = std::move(set);
          bestTrial = std::move(solution);
        }
        continue;
      }
      fail(d, std::move(why));
    }
    if (reason.empty() && failed < end)
      reason = domains[failed].name + ": " + failedWhy.value_or("no eligible victims would make room");
    if (best >= 0) {
      std::string why;
      if (bestTrial ? replayIn(job, &domains[best], *bestTrial, why) : searchIn(job, &domains[best], why, /*trial=*/false))
        return true;
      if (reason.empty()) reason = domains[best].name + ": " + why;
    }
    first = end;
  }
  return false;
}

bool VictimSearch::runIn(SessionJob& job, const framework::NodeDomain* domain, std::string& reason, bool trial,
                         bool victimsFirst) {
  evictedNow_.clear();
  orderChanged_ = false;
  // The pending pods in the order they are tried, in a buffer of this call's depth (runIn nests:
  // the retry without a first victim, a prune's trials).
  const PendingScope scope(*this, job);
  const std::vector<int>& pending = scope.pending;
  // A job that needs one more pod, which fits as things are, needs no victim: asked before any
  // operation, so that no statement is opened and discarded for it.
  const size_t needed = static_cast<size_t>(turnMissing(job));
  if (needed == 1 && !pending.empty()) {
    ssn_.restrictTo(domain);
    SessionTask& first = job.tasks[pending.front()];
    const bool fitsAsIs = taskAllowed(ssn_, job, first).ok() && ssn_.findPlacement(first, /*allowPipeline=*/true).node >= 0;
    ssn_.restrictTo(nullptr);
    if (fitsAsIs) {
      reason = "fits without victims";
      return false;
    }
  }
  Statement stmt(ssn_);
  int evicted = 0;
  bool queueFreed = false;  // victims freed queue room: the pods wait for them to leave
  for (int ti : pending) {
    ssn_.restrictTo(domain);  // replace() below lifts it
    if (turnDone(job)) break;  // evict (or move pods) for this turn's pods only
    SessionTask& task = job.tasks[ti];
    if (auto allowed = queueRoom(job, task); !allowed.ok()) {
      // Blocked by a queue's limit (or, reclaiming, an ancestor's fair share): victims under that
      // queue free room in it (issue 15, item 9).
      if (mode_ == VictimMode::Consolidate || !relievable(job, allowed.error()) ||
          !freeQueueRoom(stmt, job, task, evicted)) {
        reason = allowed.error().message;
        break;
      }
      queueFreed = true;
    }
    bool placed = false;
    if (victimsFirst) {  // see below: the free room is left to the pods that are moved
      candidates(job, task, domain, kNodeAttempts, scope.tryNodes);
      placed = tryOn(stmt, job, task, scope.tryNodes, evicted);
      if (placed) continue;
      ssn_.restrictTo(domain);  // replace() lifted it
    }
    const framework::Placement p = ssn_.findPlacement(task, /*allowPipeline=*/true);
    if (p.node >= 0) {  // room freed by earlier victims, or there all along
      if (p.pipelined || queueFreed) stmt.pipeline(task, p.node);
      else stmt.allocate(task, p.node);
      continue;
    }
    std::vector<int>& tryNodes = scope.tryNodes;
    if (victimsFirst) tryNodes.clear();
    else candidates(job, task, domain, kNodeAttempts, tryNodes);
    placed = tryOn(stmt, job, task, tryNodes, evicted);
    if (!placed) {
      if (reason.empty())
        reason = tryNodes.empty() ? "no eligible victims would make room" : "evicting the eligible victims is not enough";
      if (!turnDone(job)) break;
    }
  }
  ssn_.restrictTo(nullptr);
  if (!turnDone(job)) {
    if (reason.empty()) reason = "no eligible victims would make room";
    const std::optional<Victim> firstVictim =
        evictedNow_.empty() ? std::nullopt : std::optional<Victim>(evictedNow_.front());
    stmt.discard();
    // Consolidation for several pods: the pods that fit as things are may have taken the free room
    // the moved pods needed. Once more, making room before taking free room.
    if (mode_ == VictimMode::Consolidate && !victimsFirst && needed > 1) {
      std::string again;
      if (runIn(job, domain, again, trial, /*victimsFirst=*/true)) return true;
    }
    // Several pods take victims one after another, each its node's first in victim order, and
    // nothing backtracks: the first pod's victim may leave no room for the next one where another
    // victim would have held both. So for queue room taken before node room: the first victim in
    // victim order under the limit may run where it frees nothing the pod can use, and taking it
    // may leave the victim that would have freed both no longer eligible (its queue down to its
    // fair share). Once more without that first victim.
    if (mode_ != VictimMode::Consolidate && (needed > 1 || queueFreed) && firstVictim && !pruning_ &&
        excludedPods_.empty()) {
      excludedPods_.push_back(*firstVictim);
      ++pruneSeq_;  // rankings and failures of this search are its own (pruneKey)
      std::string again;
      const bool ok = runIn(job, domain, again, trial, victimsFirst);
      excludedPods_.clear();
      if (ok) return true;
    }
    return false;
  }
  // (A search that left a pod out to retry, not pruning, ends its turn inside that retry.)
  if (trial && evicted > 0 && (pruning_ || excludedPods_.empty()) && !victimsFirst && mode_ != VictimMode::Consolidate &&
      std::none_of(stmt.operations().begin(), stmt.operations().end(), [](const framework::Operation& op) {
        return op.type == framework::Operation::Type::Repipeline;
      }))
    lastTrial_ = TrialSolution{stmt.operations(), evictedNow_, evicted, queueFreed, orderChanged_};
  return finishTurn(stmt, job, domain, needed, evicted, queueFreed, trial, reason);
}

VictimSearch::PendingScope::PendingScope(VictimSearch& search, const SessionJob& job)
    : depth(search.runInDepth_),
      pending((search.runAt_.size() <= depth ? search.runAt_.emplace_back() : search.runAt_[depth]).pending),
      tryNodes(search.runAt_[depth].tryNodes) {
  search.ssn_.pendingTaskOrder(job, pending);
  ++depth;
}

bool VictimSearch::fitsAsIs(SessionJob& job, const framework::NodeDomain& domain) {
  const PendingScope scope(*this, job);
  Statement stmt(ssn_);
  ssn_.restrictTo(&domain);
  for (int ti : scope.pending) {
    if (turnDone(job)) break;
    SessionTask& task = job.tasks[ti];
    if (!queueRoom(job, task).ok()) break;
    const framework::Placement p = ssn_.findPlacement(task, /*allowPipeline=*/true);
    if (p.node < 0) break;
    if (p.pipelined) stmt.pipeline(task, p.node);
    else stmt.allocate(task, p.node);
  }
  ssn_.restrictTo(nullptr);
  const bool fits = turnDone(job);
  stmt.discard();
  return fits;
}

bool VictimSearch::finishTurn(Statement& stmt, SessionJob& job, const framework::NodeDomain* domain, size_t needed,
                              int evicted, bool queueFreed, bool trial, std::string& reason, bool pruned) {
  if (evicted == 0) {  // the job needs no victim: placing it is allocate's job, not this action's
    reason = "fits without victims";
    stmt.discard();
    return false;
  }
  if (trial) {  // the caller compares this solution with others: it only wanted the victims
    stmt.discard();
    return true;
  }
  // Several pods (or queue room and node room, or pods moved for moved pods) were made room for
  // one after another: a victim taken early may have become unnecessary. Pruned across the whole
  // set before committing (not a set a prune ended with, replayed).
  if (!pruned && prunable(needed, queueFreed, evictedNow_, /*applied=*/true)) {
    std::vector<Victim> found = evictedNow_;
    stmt.discard();
    return prune(job, domain, std::move(found), reason);
  }
  // A victim with an earlier pod of its job in victim order beside it, on its node, asking the same
  // and sharing no GPU, could have been that pod (the same room freed, the job left as many pods):
  // the set with it instead comes first in victim order. Such a pod is passed over when a search
  // ran without it (the retry without its first victim, a prune's trial) and the turn ended on its
  // twin. Traded in the victim order as it stood before the turn.
  if (mode_ != VictimMode::Consolidate && mayTradeAlike(stmt.operations())) {
    std::vector<framework::Operation> ops = stmt.operations();
    stmt.discard();
    if (tradeAlike(job, ops)) {
      evictedNow_.clear();
      for (const framework::Operation& op : ops)
        if (op.type == framework::Operation::Type::Evict) evictedNow_.push_back({op.job, op.task});
    }
    applyOps(stmt, ops);
  }
  commitTurn(stmt, job, evicted);
  return true;
}

const std::vector<int>& VictimSearch::movedLogOf(int queue) const {
  static const std::vector<int> none;
  return queue >= 0 && static_cast<size_t>(queue) < movedLog_.size() ? movedLog_[static_cast<size_t>(queue)] : none;
}

void VictimSearch::commitTurn(Statement& stmt, SessionJob& job, int evicted) {
  if (job.pipelinedCount > 0) stmt.pipelineAllocated(job.index);
  // The jobs this commit changes (the claimant, its victims' jobs): their pods elsewhere move in
  // the victim order (surplus or whole, placed this cycle), so preempt's kept rankings evaluate
  // again the nodes running them (candidates()); and may have become victims or stopped being
  // ones (min runtime), so the kept rooms do too (roomsFor()), and what their nodes' pods hold
  // per split part is read again (partHeldOn()).
  const bool ranked = mode_ == VictimMode::Preempt && !rankings_.empty();
  const bool roomed = mode_ != VictimMode::Consolidate && !nodeRoom_.empty();
  if (ranked || roomed) {
    std::vector<int>& jobs = commitJobs_;
    std::vector<int>& nodes = commitNodes_;
    jobs.clear();
    nodes.clear();
    for (const framework::Operation& op : stmt.operations()) jobs.push_back(op.job);
    std::sort(jobs.begin(), jobs.end());
    jobs.erase(std::unique(jobs.begin(), jobs.end()), jobs.end());
    for (int ji : jobs)
      for (const SessionTask& t : ssn_.jobs()[static_cast<size_t>(ji)].tasks)
        if (const int n = nodeOf(t); n >= 0) nodes.push_back(n);
    // Each node once per commit (a gang's pods share nodes): every reader evaluates a node again
    // once however often it is named.
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    if (ranked && job.queue >= 0) {  // (a claimant without a queue takes no victim)
      if (movedLog_.size() != ssn_.queues().size()) movedLog_.resize(ssn_.queues().size());
      std::vector<int>& log = movedLog_[static_cast<size_t>(job.queue)];
      log.insert(log.end(), nodes.begin(), nodes.end());
      if (selfChecks())  // preempt's victims are of the claimant's queue: its log names them all
        for (int ji : jobs) TESSERA_ASSERT(ssn_.jobs()[static_cast<size_t>(ji)].queue == job.queue);
    }
    if (roomed) jobNodes_.insert(jobNodes_.end(), nodes.begin(), nodes.end());
    for (int n : nodes)
      if (static_cast<size_t>(n) < partHeldVersion_.size()) partHeldVersion_[static_cast<size_t>(n)] = 0;
  }
  stmt.commit();
  ++commits_;
  // Placed: what the pods now wait for replaces allocate's fit reason.
  const char* what = mode_ == VictimMode::Reclaim ? "reclaim" : mode_ == VictimMode::Preempt ? "preempt" : "consolidation";
  std::string& message = commitMessage_;  // (its buffer is kept: the words are interned)
  message.clear();
  if (job.pipelinedCount > 0) {
    message += "pipelined by ";
    message += what;
    message += ": waiting for ";
    message += pods(evicted);
    message += " to leave";
  }
  ssn_.setUnschedulable(job, message);
}

bool VictimSearch::replayIn(SessionJob& job, const framework::NodeDomain* domain, const TrialSolution& s,
                            std::string& reason) {
  if (selfChecks()) {  // the trial, run again, finds the same operations (the search is deterministic)
    lastTrial_.reset();
    std::string why;
    const bool again = runIn(job, domain, why, /*trial=*/true);
    TESSERA_ASSERT(again);
    std::optional<TrialSolution> found = std::move(lastTrial_);
    if (s.pruned && !pruning_) {
      // A domain's set, pruned before the domains were compared (runInDomains): pruned again from
      // the set the search evicted, as there. (A search that ended in its retry without its first
      // victim keeps no operations, only that set.)
      std::vector<Victim> set = evictedNow_;
      if (std::optional<TrialSolution> kept = pruneWalk(job, domain, set)) found = std::move(kept);
      endPrune();
    }
    TESSERA_ASSERT(found);
    TESSERA_ASSERT(found->ops.size() == s.ops.size() && found->evictedCount == s.evictedCount &&
                   found->queueFreed == s.queueFreed);
    for (size_t i = 0; i < s.ops.size(); ++i) {
      const framework::Operation &a = found->ops[i], &b = s.ops[i];
      TESSERA_ASSERT(a.type == b.type && a.job == b.job && a.task == b.task && a.node == b.node);
    }
  }
  const size_t needed = static_cast<size_t>(turnMissing(job));  // (as runIn counts it: before the turn)
  Statement stmt(ssn_);
  applyOps(stmt, s.ops);
  evictedNow_ = s.evicted;
  orderChanged_ = s.orderChanged;
  return finishTurn(stmt, job, domain, needed, s.evictedCount, s.queueFreed, /*trial=*/false, reason, s.pruned);
}

void VictimSearch::applyOps(Statement& stmt, const std::vector<framework::Operation>& ops) {
  for (const framework::Operation& op : ops) {
    SessionTask& t = ssn_.jobs()[static_cast<size_t>(op.job)].tasks[static_cast<size_t>(op.task)];
    switch (op.type) {
      case framework::Operation::Type::Evict: stmt.evict(t, op.reason); break;
      case framework::Operation::Type::Pipeline: stmt.pipeline(t, op.node); break;
      case framework::Operation::Type::Allocate: stmt.allocate(t, op.node); break;
      case framework::Operation::Type::Reserve: stmt.reserve(t, op.node); break;
      case framework::Operation::Type::Repipeline: TESSERA_ASSERT(false); break;  // (never kept: runIn)
    }
  }
}

bool VictimSearch::alike(const SessionTask& a, const SessionTask& b) const {
  return a.job == b.job && a.index != b.index && a.subGroup == b.subGroup && !a.sharesGpu() && !b.sharesGpu() &&
         nodeOf(a) == nodeOf(b) && a.request() == b.request() && a.nodeRequest() == b.nodeRequest();
}

bool VictimSearch::mayTradeAlike(const std::vector<framework::Operation>& ops) const {
  for (const framework::Operation& op : ops) {
    if (op.type != framework::Operation::Type::Evict) continue;
    const SessionTask& v = ssn_.task(op.job, op.task);
    for (const SessionTask& u : ssn_.jobs()[static_cast<size_t>(op.job)].tasks)
      if (running(u) && alike(u, v)) return true;
  }
  return false;
}

bool VictimSearch::tradeAlike(const SessionJob& job, std::vector<framework::Operation>& ops) {
  auto evicted = [&](int ji, int ti) {
    return std::any_of(ops.begin(), ops.end(), [&](const framework::Operation& op) {
      return op.type == framework::Operation::Type::Evict && op.job == ji && op.task == ti;
    });
  };
  bool traded = false;
  // Each trade moves a victim to an earlier pod: at most one per pair, so the passes end.
  for (bool again = true; again;) {
    again = false;
    for (framework::Operation& op : ops) {
      if (op.type != framework::Operation::Type::Evict) continue;
      const SessionTask& v = ssn_.task(op.job, op.task);
      const SessionTask* best = nullptr;
      for (const SessionTask& u : ssn_.jobs()[static_cast<size_t>(op.job)].tasks)
        if (running(u) && alike(u, v) && !evicted(u.job, u.index) && ssn_.victimLess(u, best ? *best : v) &&
            eligible(job, u))
          best = &u;
      if (!best) continue;
      op.task = best->index;
      traded = again = true;
    }
  }
  return traded;
}

bool VictimSearch::searchIn(SessionJob& job, const framework::NodeDomain* domain, std::string& reason, bool trial) {
  if (mode_ == VictimMode::Consolidate) switch (solveBySequence(job, domain, trial, reason)) {
      case SequenceResult::Solved: return true;
      case SequenceResult::NoVictimsNeeded: reason = "fits without victims"; return false;
      case SequenceResult::Blocked: return false;
      case SequenceResult::Failed: break;
    }
  return runIn(job, domain, reason, trial);
}

}  // namespace tessera::actions
