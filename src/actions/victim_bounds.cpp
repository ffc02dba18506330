// The victim search's bounds by resources alone (victims.h): whether a claimant's turn could fit
// with only some victims gone (mayFitWith, for a prune's trials), and whether a topology domain
// could hold it with every eligible victim gone (mayHold, before a domain is searched). Both are
// upper bounds kept current through the session's node change log, so that asking them costs far
// less than the search they spare.
#include <algorithm>
#include <atomic>
#include <optional>

#include "job_placement.h"
#include "tessera/actions/factories.h"
#include "victims.h"

namespace tessera::actions {

using framework::SessionJob;
using framework::SessionNode;
using framework::SessionTask;
using framework::TaskState;

namespace {
#ifdef NDEBUG
std::atomic<bool> gSelfChecks{false};
#else
std::atomic<bool> gSelfChecks{true};
#endif
}  // namespace

void setSelfChecks(bool on) { gSelfChecks = on; }
bool selfChecks() { return gSelfChecks; }

namespace {

using victims_detail::futureRoom;
using victims_detail::podRoom;
using victims_detail::Room;

/// Whether `room` covers `want` in every amount the bounds count.
bool covers(const Room& room, const api::Resources& want) {
  return want.milliGpu <= room[0] && want.milliCpu <= room[1] && want.memory <= room[2];
}

/// Pods asking `need` (some amount positive) that `room` holds, by amounts alone.
int64_t podsIn(const Room& room, const Room& need) {
  constexpr int64_t kMany = int64_t{1} << 20;  // past any turn's size
  int64_t n = kMany;
  for (size_t d = 0; d < 3; ++d)
    if (need[d] > 0) n = std::min(n, std::max<int64_t>(0, room[d]) / need[d]);
  return n;
}

}  // namespace

bool VictimSearch::mayFitWith(const SessionJob& job, const framework::NodeDomain* domain,
                              const std::vector<Victim>& set) {
  if (mode_ == VictimMode::Consolidate) return true;  // moved pods take room again elsewhere
  Room need{0, 0, 0};
  bool first = true;
  for (const SessionTask& t : job.tasks) {
    if (t.state != TaskState::Pending) continue;
    if (t.sharesGpu()) return true;
    const Room r{t.nodeRequest().milliGpu, t.nodeRequest().milliCpu, t.nodeRequest().memory};
    if (first) need = r, first = false;
    else if (r != need) return true;
  }
  if (first || (need[0] <= 0 && need[1] <= 0 && need[2] <= 0)) return true;
  const bool everywhere = !domain || domain->nodes.size() == ssn_.nodes().size();
  if (!everywhere && domain->nodes.size() > 256) return true;  // a count would cost a search's worth
  // What the set frees per node (inside the domain: the turn's pods go nowhere else).
  std::vector<std::pair<int, Room>>& freed = fitFreed_;  // (a kept buffer)
  freed.clear();
  for (const Victim& v : set) {
    const SessionTask& t = ssn_.task(v.job, v.task);
    const int n = nodeOf(t);
    if (n < 0) return true;
    if (!everywhere && !std::binary_search(domain->nodes.begin(), domain->nodes.end(), n)) continue;
    auto it = std::find_if(freed.begin(), freed.end(), [&](const auto& f) { return f.first == n; });
    if (it == freed.end()) it = freed.insert(freed.end(), {n, Room{0, 0, 0}});
    const Room p = podRoom(t);
    for (size_t i = 0; i < 3; ++i) it->second[i] += p[i];
  }
  int64_t fit = 0;
  if (everywhere) {
    FreeFit& f = freeFit_[need];
    const framework::NodeChangeLog& log = ssn_.nodeChanges();
    if (f.perNode.size() != ssn_.nodes().size()) {
      f.perNode.assign(ssn_.nodes().size(), 0);
      f.total = 0;
      for (const framework::SessionNode& n : ssn_.nodes())
        f.total += f.perNode[static_cast<size_t>(n.index)] = podsIn(futureRoom(n), need);
      f.at = log.size();
    } else if (f.at != log.size()) {
      log.forEachChangedSince(f.at, [&](int n) {
        const int64_t now = podsIn(futureRoom(ssn_.nodes()[static_cast<size_t>(n)]), need);
        f.total += now - f.perNode[static_cast<size_t>(n)];
        f.perNode[static_cast<size_t>(n)] = now;
      });
      f.at = log.size();
    }
    fit = f.total;
  } else {
    for (int n : domain->nodes) fit += podsIn(futureRoom(ssn_.nodes()[static_cast<size_t>(n)]), need);
  }
  for (const auto& [n, more] : freed) {
    const Room base = futureRoom(ssn_.nodes()[static_cast<size_t>(n)]);
    fit += podsIn({base[0] + more[0], base[1] + more[1], base[2] + more[2]}, need) - podsIn(base, need);
  }
  return fit >= turnMissing(job);
}

api::Resources VictimSearch::leadingAlikeRequest(const SessionJob& job) const {
  // The search takes the pending pods in this order and checks each before placing it, the ones
  // before it placed (each adds its request to its queue path): a success checks at least the
  // first turnMissing() of them. Of those, the leading run that asks alike is summed: its k-th
  // pod's check is "held + k requests <= fair share" on the resources it asks for.
  const std::vector<int> pending = pendingTasks(ssn_, job);
  api::Resources run;
  if (pending.empty()) return run;
  const api::Resources& first = job.tasks[pending.front()].request();
  for (int i = 0; i < turnMissing(job) && i < static_cast<int>(pending.size()); ++i) {
    if (!(job.tasks[pending[i]].request() == first)) break;
    run += first;
  }
  return run;
}

bool VictimSearch::reclaimBoundsMayHold(const SessionJob& job, const api::Resources& leading,
                                        const std::vector<Victim>& set) {
  framework::Statement stmt(ssn_);
  for (const Victim& v : set) stmt.evict(ssn_.task(v.job, v.task), std::string());
  const bool holds = ssn_.reclaimBounds(job, leading).ok();  // (nothing asked: nothing refused)
  stmt.discard();
  return holds;
}

VictimSearch::ClassRooms& VictimSearch::roomsFor(const SessionJob& job) {
  // Per node, for claimants alike in what their victims depend on, while the node is unchanged
  // (syncRooms). Reclaiming, a commit moves queue shares, and with them who may be a victim: with
  // the bound split by queue (Session::reclaimBoundQueues) the class is that verdict per queue,
  // and its rooms hold across commits but on the nodes of the jobs commits changed (evaluated
  // again, syncRooms); without, claimants alike (appendClaimantKey: queue, priority,
  // preemptibility, the turn's request) share rooms until the next commit. Preempting, a class's
  // rooms hold across commits too, but on the nodes of the jobs commits changed (a job that gave
  // its surplus pods may be protected by its min runtime from then on).
  std::string& key = roomsKey_;
  key.clear();
  const bool byQueue = mode_ == VictimMode::Reclaim && ssn_.reclaimBoundQueues(job, queueBits_);
  const bool byLevel = mode_ == VictimMode::Preempt && ssn_.preemptableSplit();
  if (byQueue) {
    key += "q|";
    key.append(queueBits_.begin(), queueBits_.end());
  } else {
    appendClaimantKey(job, key);
    // A claimant is never its own victim: where jobs like it may be victims (the priority plugin
    // off), one with pods running has rooms of its own.
    if (mode_ == VictimMode::Preempt && job.readyCount > 0 && (!byLevel || ssn_.preemptablePair(job, job))) {
      key += "|j";
      key += std::to_string(job.index);
    }
  }
  ClassRooms& rooms = nodeRoom_[key];
  const bool stale = mode_ == VictimMode::Reclaim && !byQueue && rooms.madeAt != commits_;
  if (rooms.known.empty() || stale) {
    const size_t n = ssn_.nodes().size();
    if (!rooms.room) {
      rooms.room = std::make_unique_for_overwrite<Room[]>(n);
      rooms.version = std::make_unique_for_overwrite<uint32_t[]>(n);
    }
    rooms.known.assign(n, 0);
    rooms.sums.clear();
    rooms.syncedAt = ssn_.nodeChanges().size();
    rooms.jobNodesAt = jobNodes_.size();
    rooms.madeAt = commits_;
    rooms.byQueue = byQueue;
    rooms.byLevel = byLevel;
    if (byQueue) rooms.queues = queueBits_;
  }
  return rooms;
}

std::span<const VictimSearch::HeldPod> VictimSearch::heldOn(int node) {
  const size_t ni = static_cast<size_t>(node);
  if (heldVersion_.size() != ssn_.nodes().size()) {
    heldVersion_.assign(ssn_.nodes().size(), 0);
    heldCount_.assign(ssn_.nodes().size(), 0);
    held_.resize(running_.size());
  }
  HeldPod* first = held_.data() + index_->nodeStart[ni];
  const uint32_t version = ssn_.nodeChanges().version(node) + 1;
  if (heldVersion_[ni] != version) {
    uint32_t count = 0;
    for (const Victim& v : onNode(node))
      if (const SessionTask& t = ssn_.task(v.job, v.task); victims_detail::running(t)) first[count++] = {v, podRoom(t)};
    heldCount_[ni] = count;
    heldVersion_[ni] = version;
  }
  return {first, heldCount_[ni]};
}

std::span<const VictimSearch::PartHeld> VictimSearch::partHeldOn(int node) {
  const size_t ni = static_cast<size_t>(node);
  if (partHeldVersion_.size() != ssn_.nodes().size()) {
    partHeldVersion_.assign(ssn_.nodes().size(), 0);
    partHeldCount_.assign(ssn_.nodes().size(), 0);
    partHeld_.resize(running_.size());
  }
  PartHeld* first = partHeld_.data() + index_->nodeStart[ni];
  const uint32_t version = ssn_.nodeChanges().version(node) + 1;
  if (partHeldVersion_[ni] != version) {
    if (partJob_.size() != ssn_.jobs().size()) {
      partJob_.assign(ssn_.jobs().size(), -1);
      partJobVersion_.assign(ssn_.jobs().size(), 0);
    }
    const bool preempt = mode_ == VictimMode::Preempt;
    uint32_t count = 0;
    for (const HeldPod& p : heldOn(node)) {
      const SessionJob& vj = ssn_.jobs()[static_cast<size_t>(p.pod.job)];
      const size_t ji = static_cast<size_t>(vj.index);
      if (partJob_[ji] < 0 || partJobVersion_[ji] != vj.version) {
        // (eligible()'s own part too: a preemptible job, every pod on session nodes)
        const bool lets = preempt ? vj.preemptible && onSessionNodes(vj) && ssn_.preemptableJob(vj)
                                  : vj.queue >= 0 && onSessionNodes(vj) && ssn_.reclaimBoundJob(vj);
        partJob_[ji] = lets ? 1 : 0;
        partJobVersion_[ji] = vj.version;
      }
      if (!partJob_[ji]) continue;
      const int32_t priority = preempt ? vj.priority : 0;
      PartHeld* h = std::find_if(first, first + count,
                                 [&](const PartHeld& x) { return x.queue == vj.queue && x.priority == priority; });
      if (h == first + count) first[count++] = {vj.queue, priority, vj.index, Room{0, 0, 0}};
      for (size_t i = 0; i < 3; ++i) h->room[i] += p.room[i];
    }
    partHeldCount_[ni] = count;
    partHeldVersion_[ni] = version;
  }
  return {first, partHeldCount_[ni]};
}

victims_detail::Room VictimSearch::classRoomOn(const SessionJob& job, const ClassRooms& rooms, int node) {
  if (!rooms.byQueue && !rooms.byLevel) return victimRoomOn(job, node);
  Room r{0, 0, 0};
  if (!mayHaveVictims(job, node)) return r;
  for (const PartHeld& h : partHeldOn(node)) {
    if (rooms.byQueue) {
      if (!rooms.queues[static_cast<size_t>(h.queue)]) continue;
    } else {
      if (!ssn_.preemptablePair(job, ssn_.jobs()[static_cast<size_t>(h.job)])) continue;
      // The claimant's own pods are never its victims: where they may be among them, pod by pod.
      if (h.queue == job.queue && h.priority == job.priority) return victimRoomOn(job, node);
    }
    for (size_t i = 0; i < 3; ++i) r[i] += h.room[i];
  }
  return r;
}

victims_detail::Room VictimSearch::victimRoomOn(const SessionJob& job, int node) {
  Room r{0, 0, 0};
  if (mayHaveVictims(job, node))
    for (const HeldPod& p : heldOn(node))
      if (mayBecomeEligible(job, p.pod))
        for (size_t i = 0; i < 3; ++i) r[i] += p.room[i];
  return r;
}

int VictimSearch::domainId(const framework::NodeDomain& domain) {
  const auto [it, fresh] = domainIds_.try_emplace(DomainKey{domain.nodes.data(), domain.nodes.size()},
                                                   static_cast<int>(domainIds_.size()));
  if (fresh) {
    if (domainHead_.size() != ssn_.nodes().size()) domainHead_.assign(ssn_.nodes().size(), -1);
    for (int n : domain.nodes) {
      int& head = domainHead_[static_cast<size_t>(n)];
      domainLinks_.push_back({it->second, head});
      head = static_cast<int>(domainLinks_.size()) - 1;
    }
  }
  return it->second;
}

void VictimSearch::syncRooms(const SessionJob& job, ClassRooms& rooms) {
  const framework::NodeChangeLog& log = ssn_.nodeChanges();
  // Moves the sums in `sums` of the domains holding node `ni` by `now - was`.
  auto move = [&](std::vector<std::optional<Room>>& sums, size_t ni, const Room& was, const Room& now) {
    forEachDomainOf(static_cast<int>(ni), [&](int d) {
      if (static_cast<size_t>(d) < sums.size() && sums[static_cast<size_t>(d)])
        for (size_t i = 0; i < 3; ++i) (*sums[static_cast<size_t>(d)])[i] += now[i] - was[i];
    });
  };
  if (baseRoom_.size() != ssn_.nodes().size()) {
    baseRoom_.resize(ssn_.nodes().size());
    for (const SessionNode& n : ssn_.nodes()) baseRoom_[static_cast<size_t>(n.index)] = futureRoom(n);
    baseAt_ = log.size();
  } else if (baseAt_ != log.size()) {
    log.forEachChangedSince(baseAt_, [&](int n) {
      const size_t ni = static_cast<size_t>(n);
      const Room now = futureRoom(ssn_.nodes()[ni]);
      move(baseSums_, ni, baseRoom_[ni], now);
      baseRoom_[ni] = now;
    });
    baseAt_ = log.size();
  }
  auto evaluateAgain = [&](int n) {
    const size_t ni = static_cast<size_t>(n);
    if (!rooms.known[ni]) return;  // in no sum yet
    const Room now = classRoomOn(job, rooms, n);
    move(rooms.sums, ni, rooms.room[ni], now);
    rooms.room[ni] = now;
    rooms.version[ni] = log.version(n);
  };
  if (rooms.syncedAt != log.size()) {
    log.forEachChangedSince(rooms.syncedAt, evaluateAgain);
    rooms.syncedAt = log.size();
  }
  for (; rooms.jobNodesAt < jobNodes_.size(); ++rooms.jobNodesAt) evaluateAgain(jobNodes_[rooms.jobNodesAt]);
}

bool VictimSearch::mayHold(const SessionJob& job, const framework::NodeDomain& domain, int domainIndex,
                           const api::Resources& want, ClassRooms& rooms) {
  // An upper bound, cheap next to a search: what is free or releasing in the domain plus all that
  // its victims hold (those that may become eligible in the turn) must cover the pods the gang
  // still needs (`want`, turnNeeds()).
  syncRooms(job, rooms);
  const size_t id = static_cast<size_t>(domainIndex);
  // The first sum asked of the base (of a preempt class) sums every domain known (runInDomains
  // numbers the claimant's domains first) in one walk over the nodes; a domain met later is
  // summed alone.
  const bool preempt = mode_ == VictimMode::Preempt;
  // Adds node `n`'s room `r` to the sums of every domain known that holds it.
  auto addToAll = [&](std::vector<std::optional<Room>>& sums, int n, const Room& r) {
    forEachDomainOf(n, [&](int d) {
      for (size_t i = 0; i < 3; ++i) (*sums[static_cast<size_t>(d)])[i] += r[i];
    });
  };
  auto victimRoom = [&](int n) -> const Room& {
    const size_t ni = static_cast<size_t>(n);
    if (!rooms.known[ni]) {
      rooms.room[ni] = classRoomOn(job, rooms, n);
      rooms.version[ni] = ssn_.nodeChanges().version(n);
      rooms.known[ni] = 1;
    }
    return rooms.room[ni];
  };
  // The nodes whose victim room may be other than none: preempt's victims run on the claimant
  // queue's nodes only (mayHaveVictims).
  static const std::vector<int> kNone;
  const std::vector<int>& mine = !preempt ? kNone : job.queue >= 0 ? queueNodes(job.queue) : kNone;
  if (baseSums_.empty()) {
    baseSums_.assign(domainIds_.size(), Room{0, 0, 0});
    for (size_t n = 0; n < baseRoom_.size(); ++n) addToAll(baseSums_, static_cast<int>(n), baseRoom_[n]);
  }
  if (preempt && rooms.sums.empty()) {  // (reclaim's victims may run anywhere: its domains are summed as asked)
    rooms.sums.assign(domainIds_.size(), Room{0, 0, 0});
    for (int n : mine) addToAll(rooms.sums, n, victimRoom(n));
  }
  for (auto* sums : {&baseSums_, &rooms.sums})
    if (sums->size() <= id) sums->resize(id + 1);
  if (!baseSums_[id]) {
    Room sum{0, 0, 0};
    for (int n : domain.nodes)
      for (size_t i = 0; i < 3; ++i) sum[i] += baseRoom_[static_cast<size_t>(n)][i];
    baseSums_[id] = sum;
  }
  if (!rooms.sums[id]) {
    Room sum{0, 0, 0};
    auto add = [&](int n) {
      const Room& r = victimRoom(n);
      for (size_t i = 0; i < 3; ++i) sum[i] += r[i];
    };
    if (preempt) {
      // Both lists ascend: the shorter one is walked, the other searched.
      if (domain.nodes.size() < mine.size()) {
        for (int n : domain.nodes)
          if (std::binary_search(mine.begin(), mine.end(), n)) add(n);
      } else {
        for (int n : mine)
          if (std::binary_search(domain.nodes.begin(), domain.nodes.end(), n)) add(n);
      }
    } else {
      for (int n : domain.nodes) add(n);
    }
    rooms.sums[id] = sum;
  }
  resetVerdicts();
  if (selfChecks()) checkRooms(job, domain, id, rooms);
  const Room& base = *baseSums_[id];
  const Room& victims = *rooms.sums[id];
  return covers({base[0] + victims[0], base[1] + victims[1], base[2] + victims[2]}, want);
}

bool VictimSearch::freeRoomCovers(int domainIndex, const api::Resources& want) const {
  return covers(*baseSums_[static_cast<size_t>(domainIndex)], want);  // (mayHold summed it)
}

void VictimSearch::checkRooms(const SessionJob& job, const framework::NodeDomain& domain, size_t id,
                              const ClassRooms& rooms) {
  Room base{0, 0, 0}, victims{0, 0, 0};
  for (int n : domain.nodes) {
    const size_t ni = static_cast<size_t>(n);
    const Room now = futureRoom(ssn_.nodes()[ni]);
    TESSERA_ASSERT(baseRoom_[ni] == now);
    for (size_t i = 0; i < 3; ++i) base[i] += now[i];
    if (!rooms.known[ni]) continue;  // (preempt: a node of no pod of the claimant's queue)
    TESSERA_ASSERT(rooms.version[ni] == ssn_.nodeChanges().version(n));
    TESSERA_ASSERT(rooms.room[ni] == victimRoomOn(job, n));  // (kept across commits too: roomsFor)
    for (size_t i = 0; i < 3; ++i) victims[i] += rooms.room[ni][i];
  }
  resetVerdicts();
  TESSERA_ASSERT(base == *baseSums_[id]);
  TESSERA_ASSERT(victims == *rooms.sums[id]);
}

}  // namespace tessera::actions
