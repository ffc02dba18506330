#include "victims.h"

#include <algorithm>
#include <tuple>

#include "job_placement.h"

namespace tessera::actions {

using framework::Session;
using framework::SessionJob;
using framework::SessionTask;
using framework::Statement;
using framework::TaskState;

namespace {

bool running(const SessionTask& t) { return t.state == TaskState::Running || t.state == TaskState::Bound; }

/// Pods of the job that still run (not releasing).
int runningCount(const SessionJob& j) {
  int n = 0;
  for (const SessionTask& t : j.tasks) n += running(t) ? 1 : 0;
  return n;
}

/// How many candidate nodes to try per pod before giving up.
constexpr size_t kNodeAttempts = 8;

}  // namespace

VictimSearch::VictimSearch(Session& ssn, VictimMode mode, int maxVictims)
    : ssn_(ssn), mode_(mode), maxVictims_(maxVictims) {}

void VictimSearch::indexNodes() {
  if (indexed_) return;
  indexed_ = true;
  onNode_.assign(ssn_.nodes().size(), {});
  for (SessionJob& j : ssn_.jobs())
    for (SessionTask& t : j.tasks) {
      if (!running(t)) continue;
      if (t.node < 0) t.node = ssn_.findNode(t.info->nodeName);
      if (t.node >= 0) onNode_[t.node].push_back({j.index, t.index});
    }
  for (auto& list : onNode_)
    std::sort(list.begin(), list.end(), [&](const Victim& a, const Victim& b) {
      return ssn_.victimLess(ssn_.task(a.job, a.task), ssn_.task(b.job, b.task));
    });
}

bool VictimSearch::eligible(const SessionJob& claimant, const SessionTask& victim) const {
  const SessionJob& vj = ssn_.jobs()[victim.job];
  if (vj.index == claimant.index || !vj.preemptible || !running(victim)) return false;
  switch (mode_) {
    case VictimMode::Reclaim: return ssn_.reclaimable(claimant, victim);
    case VictimMode::Preempt: return ssn_.preemptable(claimant, victim);
    case VictimMode::Consolidate: return runningCount(vj) > vj.minMember() || vj.minMember() <= 1;
  }
  return false;
}

std::vector<VictimSearch::Victim> VictimSearch::chunkOf(const Victim& v) const {
  const SessionJob& vj = ssn_.jobs()[v.job];
  if (runningCount(vj) > vj.minMember()) return {v};  // a surplus pod of an elastic job
  std::vector<Victim> all;  // a gang at its minimum goes whole
  for (const SessionTask& t : vj.tasks)
    if (running(t)) all.push_back({v.job, t.index});
  return all;
}

bool VictimSearch::replace(Statement& stmt, const std::vector<Victim>& victims, int avoid) {
  framework::NodeDomain elsewhere;
  elsewhere.name = "nodes other than " + ssn_.nodes()[avoid].name();
  for (const auto& n : ssn_.nodes())
    if (n.index != avoid) elsewhere.nodes.push_back(n.index);
  for (const Victim& v : victims) {
    const SessionTask& t = ssn_.task(v.job, v.task);
    ssn_.restrictTo(&elsewhere);
    const framework::Placement p = ssn_.scanPlacement(t, /*allowPipeline=*/true);
    ssn_.restrictTo(nullptr);
    if (p.node < 0) return false;
    stmt.reserve(t, p.node);
  }
  return true;
}

bool VictimSearch::makeRoomOn(Statement& stmt, SessionJob& job, SessionTask& task, int node, int& evicted) {
  const auto cp = stmt.checkpoint();
  const int before = evicted;
  const api::Resources& req = task.request();
  const std::string why = mode_ == VictimMode::Reclaim   ? "reclaimed for " + job.key() + " (queue " + job.info->queue + ")"
                          : mode_ == VictimMode::Preempt ? "preempted by " + job.key() + " (priority " +
                                                               std::to_string(job.priority) + ")"
                                                         : "moved to make room for " + job.key();
  for (const Victim& v : onNode_[node]) {
    if (req.fitsIn(ssn_.nodes()[node].futureIdle())) break;
    SessionTask& vt = ssn_.task(v.job, v.task);
    if (!eligible(job, vt)) continue;
    std::vector<Victim> chunk = chunkOf(v);
    if (mode_ == VictimMode::Consolidate && chunk.size() != 1) continue;
    for (const Victim& c : chunk) {
      SessionTask& ct = ssn_.task(c.job, c.task);
      if (!running(ct)) continue;
      stmt.evict(ct, why);
      ++evicted;
    }
    if (mode_ == VictimMode::Consolidate && !replace(stmt, chunk, node)) {
      stmt.rollback(cp);
      evicted = before;
      return false;
    }
    if (evicted > maxVictims_) break;
  }
  const auto& n = ssn_.nodes()[node];
  if (evicted > maxVictims_ || !req.fitsIn(n.futureIdle())) {
    stmt.rollback(cp);
    evicted = before;
    return false;
  }
  if (req.fitsIn(n.idle)) stmt.allocate(task, node);
  else stmt.pipeline(task, node);
  return true;
}

bool VictimSearch::run(SessionJob& job, std::string& reason) {
  if (mode_ == VictimMode::Reclaim)
    if (auto r = ssn_.canReclaim(job)) {
      reason = *r;
      return false;
    }
  if (mode_ == VictimMode::Consolidate && !job.preemptible) {
    reason = "only preemptible jobs are consolidated for";
    return false;
  }
  indexNodes();
  // A claimant constrained by topology makes room inside one of its domains, in the plugin's order.
  auto domains = ssn_.jobDomains(job, reason);
  if (!domains) return runIn(job, nullptr, reason);
  for (const framework::NodeDomain& d : *domains) {
    std::string why;
    if (runIn(job, &d, why)) return true;
    if (reason.empty()) reason = d.name + ": " + why;
  }
  return false;
}

bool VictimSearch::runIn(SessionJob& job, const framework::NodeDomain* domain, std::string& reason) {
  Statement stmt(ssn_);
  int evicted = 0;
  std::vector<int> all;
  if (!domain) {
    all.reserve(ssn_.nodes().size());
    for (const auto& n : ssn_.nodes()) all.push_back(n.index);
  }
  const std::vector<int>& nodes = domain ? domain->nodes : all;
  for (int ti : pendingTasks(ssn_, job)) {
    ssn_.restrictTo(domain);  // replace() below lifts it
    if (ssn_.jobReady(job) && mode_ != VictimMode::Consolidate) break;  // evict for the minimum only
    SessionTask& task = job.tasks[ti];
    if (auto r = ssn_.prePredicate(job, task)) {
      reason = *r;
      break;
    }
    if (auto r = ssn_.capacityCheck(job, task.request())) {
      reason = *r;
      break;
    }
    const framework::Placement p = ssn_.findPlacement(task, /*allowPipeline=*/true);
    if (p.node >= 0) {  // room freed by earlier victims, or there all along
      if (p.pipelined) stmt.pipeline(task, p.node);
      else stmt.allocate(task, p.node);
      continue;
    }
    // Candidate nodes: the fewest victims first, then the better node score, then the name.
    // Nothing is evicted while scanning, so whether a victim job may be taken is asked once per job.
    std::vector<std::tuple<int, int64_t, int>> candidates;
    const api::Resources& req = task.request();
    std::string unused;
    std::vector<int> touched;
    if (verdict_.size() != ssn_.jobs().size()) verdict_.assign(ssn_.jobs().size(), -1);
    auto eligibleJob = [&](const Victim& v) {
      int8_t& e = verdict_[v.job];
      if (e < 0) {
        e = eligible(job, ssn_.task(v.job, v.task)) ? 1 : 0;
        touched.push_back(v.job);
      }
      return e == 1 && running(ssn_.task(v.job, v.task));
    };
    // The common case, a request of cpu, memory and GPUs only, is counted in three integers.
    const bool simple = req.scalars.empty();
    struct Room {
      int64_t cpu, mem, gpu;
      bool holds(const api::Resources& r) const { return r.milliCpu <= cpu && r.memory <= mem && r.milliGpu <= gpu; }
    };
    for (int ni : nodes) {
      const auto& n = ssn_.nodes()[ni];
      if (onNode_[n.index].empty()) continue;
      int count = 0;
      bool fits = false;
      if (simple) {
        const api::Resources& a = n.info->allocatable;
        const api::Resources& f = n.info->foreignUsed;
        if (!Room{a.milliCpu - f.milliCpu, a.memory - f.memory, a.milliGpu - f.milliGpu}.holds(req)) continue;
        Room room{n.idle.milliCpu + n.releasing.milliCpu - n.pipelined.milliCpu,
                  n.idle.memory + n.releasing.memory - n.pipelined.memory,
                  n.idle.milliGpu + n.releasing.milliGpu - n.pipelined.milliGpu};
        for (const Victim& v : onNode_[n.index]) {
          if ((fits = room.holds(req))) break;
          if (!eligibleJob(v)) continue;
          const api::Resources& vr = ssn_.task(v.job, v.task).request();
          room.cpu += vr.milliCpu, room.mem += vr.memory, room.gpu += vr.milliGpu;
          ++count;
        }
        fits = fits || room.holds(req);
      } else {
        if (!req.fitsIn(n.info->allocatable - n.info->foreignUsed)) continue;
        api::Resources room = n.futureIdle();
        for (const Victim& v : onNode_[n.index]) {
          if ((fits = req.fitsIn(room))) break;
          if (!eligibleJob(v)) continue;
          room += ssn_.task(v.job, v.task).request();
          ++count;
        }
        fits = fits || req.fitsIn(room);
      }
      if (count == 0 || !fits || !ssn_.predicate(task, n, unused)) continue;
      candidates.emplace_back(count, -ssn_.nodeScore(task, n), n.index);
    }
    for (int j : touched) verdict_[j] = -1;
    const size_t keep = std::min(candidates.size(), kNodeAttempts);
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end());
    bool placed = false;
    for (size_t i = 0; i < candidates.size() && i < kNodeAttempts && !placed; ++i)
      placed = makeRoomOn(stmt, job, task, std::get<2>(candidates[i]), evicted);
    if (!placed) {
      if (reason.empty())
        reason = candidates.empty() ? "no eligible victims would make room" : "evicting the eligible victims is not enough";
      if (!ssn_.jobReady(job)) break;
    }
  }
  ssn_.restrictTo(nullptr);
  if (!ssn_.jobReady(job)) {
    if (reason.empty()) reason = "no eligible victims would make room";
    stmt.discard();
    return false;
  }
  if (job.pipelinedCount > 0) stmt.pipelineAllocated(job.index);
  stmt.commit();
  return true;
}

}  // namespace tessera::actions
