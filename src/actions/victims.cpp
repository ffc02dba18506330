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
  queueNodes_.assign(ssn_.queues().size(), {});
  for (size_t n = 0; n < onNode_.size(); ++n)
    for (const Victim& v : onNode_[n]) {
      const int q = ssn_.jobs()[v.job].queue;
      if (q >= 0 && (queueNodes_[q].empty() || queueNodes_[q].back() != static_cast<int>(n)))
        queueNodes_[q].push_back(static_cast<int>(n));
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
  const std::string who = describeJob(job);
  const std::string why = mode_ == VictimMode::Reclaim   ? "reclaimed by queue " + job.info->queue + " for " + who
                          : mode_ == VictimMode::Preempt ? "preempted by " + who + " (priority " +
                                                               std::to_string(job.priority) + ")"
                                                         : "moved to make room for " + who;
  for (const Victim& v : onNode_[node]) {
    if (ssn_.fits(task, ssn_.nodes()[node], /*future=*/true)) break;
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
  if (evicted > maxVictims_ || !ssn_.fits(task, n, /*future=*/true)) {
    stmt.rollback(cp);
    evicted = before;
    return false;
  }
  if (ssn_.fits(task, n, /*future=*/false)) stmt.allocate(task, node);
  else stmt.pipeline(task, node);
  return true;
}

bool VictimSearch::run(SessionJob& job, std::string& reason) {
  if (mode_ == VictimMode::Reclaim)
    if (auto may = ssn_.canReclaim(job); !may.ok()) {
      reason = may.error().message;
      return false;
    }
  if (mode_ == VictimMode::Consolidate) {
    if (!job.preemptible) {
      reason = "only preemptible jobs are consolidated for";
      return false;
    }
    // Moving pods around creates no room: the cluster's free resources must hold the job already.
    if (freeAt_ != ssn_.nodeChanges().size() || !freeKnown_) {  // recounted only after changes
      free_ = api::Resources();
      for (const auto& n : ssn_.nodes()) free_ += n.futureIdle();
      freeAt_ = ssn_.nodeChanges().size();
      freeKnown_ = true;
    }
    api::Resources want;
    for (const SessionTask& t : job.tasks)
      if (t.state == TaskState::Pending) want += t.nodeRequest();
    if (!want.fitsIn(free_)) {
      reason = "the cluster's free resources cannot hold the job, wherever its pods run";
      return false;
    }
  }
  indexNodes();
  // KAI's scheduling signatures: a job just like one that failed, with nothing changed on any node
  // since, fails the same way; it is not searched again.
  const std::string sig = signature(job);
  auto failed = failedAt_.find(sig);
  if (failed != failedAt_.end() && failed->second == ssn_.nodeChanges().size()) {
    reason = "no eligible victims would make room (as for a job of the same shape)";
    return false;
  }
  bool ok = false;
  // A claimant constrained by topology makes room inside one of its domains, in the plugin's order.
  auto domains = ssn_.jobDomains(job);
  if (!domains) {
    ok = runIn(job, nullptr, reason);
  } else {
    reason = std::move(domains->reason);  // the plugin's word, when it has one, goes before a domain's
    for (const framework::NodeDomain& d : domains->domains) {
      std::string why;
      if ((ok = runIn(job, &d, why))) break;
      if (reason.empty()) reason = d.name + ": " + why;
    }
  }
  if (!ok && !sig.empty()) failedAt_[sig] = ssn_.nodeChanges().size();
  return ok;
}

std::string VictimSearch::signature(const SessionJob& job) const {
  // Pending pods' placement keys (in task order), the job's queue, priority, preemptibility and
  // how many pods it still needs; jobs under topology constraints are not compared.
  if (job.info->podGroup && !job.info->podGroup->topologyConstraint.empty()) return "";
  std::string sig = job.info->queue + "|" + std::to_string(job.priority) + (job.preemptible ? "|p|" : "|n|") +
                    std::to_string(job.minMember() - job.readyCount);
  for (int ti : pendingTasks(ssn_, job)) sig += "|" + ssn_.placementKey(job.tasks[ti]);
  return sig;
}

/// Fewest victims; then the node whose most expendable victim comes first in victim order (the
/// newest, lowest-priority pods go before older ones on another node); then score; then name.
bool VictimSearch::better(const Candidate& a, const Candidate& b) const {
  if (a.count != b.count) return a.count < b.count;
  if (a.first.job != b.first.job || a.first.task != b.first.task) {
    const SessionTask& ta = ssn_.task(a.first.job, a.first.task);
    const SessionTask& tb = ssn_.task(b.first.job, b.first.task);
    if (ssn_.victimLess(ta, tb)) return true;
    if (ssn_.victimLess(tb, ta)) return false;
  }
  if (a.negScore != b.negScore) return a.negScore < b.negScore;
  return a.node < b.node;
}

std::optional<VictimSearch::Candidate> VictimSearch::evaluate(const SessionJob& job, const SessionTask& task, int node) {
  const auto& n = ssn_.nodes()[node];
  if (onNode_[node].empty()) return std::nullopt;
  const api::Resources& req = task.nodeRequest();
  if (verdict_.size() != ssn_.jobs().size()) verdict_.assign(ssn_.jobs().size(), -1);
  auto eligibleJob = [&](const Victim& v) {
    int8_t& e = verdict_[v.job];
    if (e < 0) {
      e = eligible(job, ssn_.task(v.job, v.task)) ? 1 : 0;
      touched_.push_back(v.job);
    }
    return e == 1 && running(ssn_.task(v.job, v.task));
  };
  // Victims evicted as a whole gang are counted once, with every pod of the gang.
  std::vector<int> gangs;
  auto taken = [&](const Victim& v) { return std::find(gangs.begin(), gangs.end(), v.job) != gangs.end(); };
  auto chunk = [&](const Victim& v) {
    std::vector<Victim> c = chunkOf(v);
    if (c.size() > 1) gangs.push_back(v.job);
    return c;
  };
  int count = 0;
  Victim first;
  bool fits = false;
  if (req.scalars.empty()) {
    // The common case, a request of cpu, memory and GPUs only, is counted in three integers.
    struct Room {
      int64_t cpu, mem, gpu;
      bool holds(const api::Resources& r) const { return r.milliCpu <= cpu && r.memory <= mem && r.milliGpu <= gpu; }
    };
    const api::Resources& a = n.info->allocatable;
    const api::Resources& f = n.info->foreignUsed;
    if (!Room{a.milliCpu - f.milliCpu, a.memory - f.memory, a.milliGpu - f.milliGpu}.holds(req)) return std::nullopt;
    Room room{n.idle.milliCpu + n.releasing.milliCpu - n.pipelined.milliCpu,
              n.idle.memory + n.releasing.memory - n.pipelined.memory,
              n.idle.milliGpu + n.releasing.milliGpu - n.pipelined.milliGpu};
    for (const Victim& v : onNode_[node]) {
      if ((fits = room.holds(req))) break;
      if (!eligibleJob(v) || taken(v)) continue;
      if (first.job < 0) first = v;
      for (const Victim& c : chunk(v)) {  // a gang at its minimum goes whole: all of it counts
        const SessionTask& ct = ssn_.task(c.job, c.task);
        const api::Resources& cr = ct.nodeRequest();
        if (ct.node == node) room.cpu += cr.milliCpu, room.mem += cr.memory, room.gpu += cr.milliGpu;
        ++count;
      }
    }
    fits = fits || room.holds(req);
  } else {
    if (!req.fitsIn(n.info->allocatable - n.info->foreignUsed)) return std::nullopt;
    api::Resources room = n.futureIdle();
    for (const Victim& v : onNode_[node]) {
      if ((fits = req.fitsIn(room))) break;
      if (!eligibleJob(v) || taken(v)) continue;
      if (first.job < 0) first = v;
      for (const Victim& c : chunk(v)) {
        const SessionTask& ct = ssn_.task(c.job, c.task);
        if (ct.node == node) room += ct.nodeRequest();
        ++count;
      }
    }
    fits = fits || req.fitsIn(room);
  }
  std::string unused;
  if (count == 0 || !fits || !ssn_.predicate(task, n, unused)) return std::nullopt;
  return Candidate{count, first, -ssn_.nodeScore(task, n), node, ssn_.nodeChanges().version(node)};
}

std::vector<int> VictimSearch::candidates(const SessionJob& job, const SessionTask& task,
                                          const framework::NodeDomain* domain, size_t max) {
  std::vector<int> out;
  // Nothing is evicted while evaluating, so whether a victim job may be taken is asked once per job.
  auto resetVerdicts = [&] {
    for (int j : touched_) verdict_[j] = -1;
    touched_.clear();
  };
  if (domain) {
    std::vector<Candidate> all;
    for (int ni : domain->nodes)
      if (auto c = evaluate(job, task, ni)) all.push_back(*c);
    resetVerdicts();
    const size_t keep = std::min(all.size(), max);
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), Better{this});
    for (size_t i = 0; i < keep; ++i) out.push_back(all[i].node);
    return out;
  }
  const std::string key = ssn_.placementKey(task) + "|" + job.info->queue + "|" + std::to_string(job.priority) + "|" +
                          (job.preemptible ? "p" : "n");
  auto [it, fresh] = rankings_.try_emplace(key, Better{this});
  Ranking& ranking = it->second;
  const framework::NodeChangeLog& log = ssn_.nodeChanges();
  if (fresh) {
    std::vector<Candidate> all;
    if (mode_ == VictimMode::Preempt) {  // victims live in the claimant's queue: only its nodes
      if (job.queue >= 0)
        for (int ni : queueNodes_[job.queue])
          if (auto c = evaluate(job, task, ni)) all.push_back(*c);
    } else {
      for (const auto& n : ssn_.nodes())
        if (auto c = evaluate(job, task, n.index)) all.push_back(*c);
    }
    ranking.assign(std::move(all), log);
  } else {
    ranking.refresh(log, [&](int ni) { return evaluate(job, task, ni); });
  }
  resetVerdicts();
  // The best current nodes; they stay ranked, valid until a try changes them.
  for (const Candidate& c : ranking.best(max, log)) out.push_back(c.node);
  return out;
}

bool VictimSearch::runIn(SessionJob& job, const framework::NodeDomain* domain, std::string& reason) {
  Statement stmt(ssn_);
  int evicted = 0;
  for (int ti : pendingTasks(ssn_, job)) {
    ssn_.restrictTo(domain);  // replace() below lifts it
    if (ssn_.jobReady(job) && mode_ != VictimMode::Consolidate) break;  // evict for the minimum only
    SessionTask& task = job.tasks[ti];
    if (auto allowed = taskAllowed(ssn_, job, task); !allowed.ok()) {
      reason = allowed.error().message;
      break;
    }
    const framework::Placement p = ssn_.findPlacement(task, /*allowPipeline=*/true);
    if (p.node >= 0) {  // room freed by earlier victims, or there all along
      if (p.pipelined) stmt.pipeline(task, p.node);
      else stmt.allocate(task, p.node);
      continue;
    }
    const std::vector<int> tryNodes = candidates(job, task, domain, kNodeAttempts);
    bool placed = false;
    for (size_t i = 0; i < tryNodes.size() && !placed; ++i) placed = makeRoomOn(stmt, job, task, tryNodes[i], evicted);
    if (!placed) {
      if (reason.empty())
        reason = tryNodes.empty() ? "no eligible victims would make room" : "evicting the eligible victims is not enough";
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
  // Placed: what the pods now wait for replaces allocate's fit reason.
  const char* what = mode_ == VictimMode::Reclaim ? "reclaim" : mode_ == VictimMode::Preempt ? "preempt" : "consolidation";
  ssn_.setUnschedulable(job, job.pipelinedCount > 0 ? "pipelined by " + std::string(what) + ": waiting for " +
                                                          pods(evicted) + " to leave"
                                                    : "");
  return true;
}

}  // namespace tessera::actions
