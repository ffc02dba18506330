#include "job_placement.h"

#include <algorithm>

#include "tessera/framework/queue_order.h"

namespace tessera::actions {

using framework::Session;
using framework::SessionJob;
using framework::SessionTask;
using framework::Statement;
using framework::TaskState;

void appendJob(std::string& out, const SessionJob& job) {
  out += job.singleton ? "pod " : "PodGroup ";
  out += job.info->namespace_;
  out += '/';
  out += job.info->name;
}

std::string describeJob(const SessionJob& job) {
  std::string text;
  appendJob(text, job);
  return text;
}

std::string pods(int n) { return std::to_string(n) + (n == 1 ? " pod" : " pods"); }

std::vector<int> queueParents(const Session& ssn) {
  const auto& queues = ssn.queues();
  std::vector<int> parent(queues.size(), -1);
  for (const auto& q : queues)
    if (q.queue && !q.queue->parentQueue.empty())
      if (int p = ssn.findQueue(q.queue->parentQueue); p >= 0 && queues[static_cast<size_t>(p)].queue)
        parent[static_cast<size_t>(q.index)] = p;
  std::vector<int> seen(queues.size(), -1);
  for (size_t i = 0; i < queues.size(); ++i)
    for (int c = static_cast<int>(i); c >= 0; c = parent[static_cast<size_t>(c)]) {
      if (seen[static_cast<size_t>(c)] == static_cast<int>(i)) {
        parent[static_cast<size_t>(c)] = -1;
        break;
      }
      seen[static_cast<size_t>(c)] = static_cast<int>(i);
    }
  return parent;
}

namespace {

struct QueueJobs {
  std::vector<int> jobs;  ///< in job order
  size_t next = 0;        ///< the job whose turn it is
};

}  // namespace

void forEachPendingJob(Session& ssn, const std::function<bool(const SessionJob&)>& filter, bool reportInvalid,
                       const std::function<void(SessionJob&)>& fn) {
  forEachJobTurn(ssn, filter, reportInvalid, [&](SessionJob& job) {
    fn(job);
    return false;
  });
}

void forEachJobTurn(Session& ssn, const std::function<bool(const SessionJob&)>& filter, bool reportInvalid,
                    const std::function<bool(SessionJob&)>& fn, const QueueSpentFn& spent) {
  std::vector<QueueJobs> perQueue(ssn.queues().size());
  const std::vector<int>& inOrder = ssn.pendingJobsInOrder();
  for (size_t i = 0; i < inOrder.size(); ++i) {  // each queue's jobs come out in job order
    // Jobs in job order are far apart in memory (and their cache entries further): asked for
    // ahead, as Session::buildState does.
    if (i + 8 < inOrder.size()) {
      __builtin_prefetch(&ssn.jobs()[static_cast<size_t>(inOrder[i + 8])]);
      ssn.prefetchJobMemos(inOrder[i + 8]);
    }
    if (i + 4 < inOrder.size()) __builtin_prefetch(ssn.jobs()[static_cast<size_t>(inOrder[i + 4])].info);
    SessionJob& job = ssn.jobs()[static_cast<size_t>(inOrder[i])];
    if (job.pendingCount == 0 || !filter(job)) continue;
    if (auto valid = ssn.jobValid(job); !valid.ok()) {
      if (reportInvalid) ssn.setUnschedulable(job, valid.error().message);
      continue;
    }
    perQueue[static_cast<size_t>(job.queue)].jobs.push_back(job.index);
  }
  // The job each queue would try next (kept in one array: the queue order's comparisons read it
  // for two queues each), and the queue order over the tree (framework/queue_order.h).
  std::vector<const SessionJob*> heads(perQueue.size(), nullptr);
  auto setHead = [&](size_t queue) {
    const QueueJobs& q = perQueue[queue];
    heads[queue] = q.next < q.jobs.size() ? &ssn.jobs()[q.jobs[q.next]] : nullptr;
  };
  auto head = [&](int queue) { return queue < 0 ? nullptr : heads[static_cast<size_t>(queue)]; };
  framework::QueueOrder order(queueParents(ssn), [&](int a, int b) {
    return ssn.queueLess(ssn.queues()[a], ssn.queues()[b], head(order.best(a)), head(order.best(b)));
  });
  for (size_t i = 0; i < perQueue.size(); ++i) {
    setHead(i);
    if (!perQueue[i].jobs.empty()) order.activate(static_cast<int>(i));
  }
  order.fix();
  std::vector<int> changed;
  ssn.takeChangedQueues(changed);  // what earlier actions changed is already in the order's view
  for (int leaf = order.next(); leaf >= 0; leaf = order.next()) {
    QueueJobs& q = perQueue[static_cast<size_t>(leaf)];
    SessionJob& job = ssn.jobs()[q.jobs[q.next]];
    // A queue usually serves several turns in a row (a job that fails leaves it where it ranks):
    // its next jobs (and their entries of the session's memos), their cache entries and tasks are asked for ahead.
    if (q.next + 2 < q.jobs.size()) {
      __builtin_prefetch(&ssn.jobs()[q.jobs[q.next + 2]]);
      ssn.prefetchJobMemos(q.jobs[q.next + 2]);
    }
    if (q.next + 1 < q.jobs.size()) {
      const SessionJob& after = ssn.jobs()[q.jobs[q.next + 1]];
      __builtin_prefetch(after.info);
      __builtin_prefetch(after.tasks.data());
    }
    // One turn: the job goes back into the order (as the head of its queue) while it asks for
    // another and still has pending pods.
    const size_t turn = q.next;
    const bool again = fn(job);
    if (!again || job.pendingCount == 0) ++q.next;
    if (!again && spent && q.next < q.jobs.size() &&
        spent(std::span<const int>(q.jobs).subspan(q.next)))
      q.next = q.jobs.size();  // the rest of the queue would change nothing in this action
    setHead(static_cast<size_t>(leaf));
    ssn.takeChangedQueues(changed);
    if (q.next >= q.jobs.size()) {
      order.deactivate(leaf);
    } else if (!changed.empty() || q.next == turn ||
               !ssn.queueHeadSame(ssn.queues()[static_cast<size_t>(leaf)], job, ssn.jobs()[q.jobs[q.next]])) {
      order.touch(leaf);  // (nothing changed and the next job ranks the queue as this one did: it stands)
    }
    // Re-rank every queue whose share changed (victims' queues too), with its ancestors.
    for (int c : changed) order.touch(c);
    order.fix();
  }
}

std::vector<int> pendingTasks(const Session& ssn, const SessionJob& job) { return ssn.pendingTaskOrder(job); }

api::Status taskAllowed(const Session& ssn, const SessionJob& job, const SessionTask& task) {
  TESSERA_TRY(ssn.prePredicate(job, task));
  return ssn.capacityCheck(job, task.request());
}

framework::Placement placeTask(Session& ssn, const SessionJob& job, const SessionTask& task, bool allowPipeline) {
  if (auto allowed = taskAllowed(ssn, job, task); !allowed.ok()) {
    framework::Placement p;
    p.reason = allowed.error().message;
    return p;
  }
  return ssn.findPlacement(task, allowPipeline);
}

namespace {

/// Places one pending task (allocate or pipeline inside `stmt`); false with `reason` set when it
/// does not fit.
bool placeOne(Session& ssn, Statement& stmt, SessionJob& job, SessionTask& task, bool allowPipeline,
              std::string& reason) {
  framework::Placement p = placeTask(ssn, job, task, allowPipeline);
  if (p.node < 0) {
    reason = std::move(p.reason);
    return false;
  }
  if (p.pipelined) stmt.pipeline(task, p.node);
  else stmt.allocate(task, p.node);
  return true;
}

/// The gang minimum, as KAI's task selection takes it: each subgroup's missing minMember from its
/// own pods, then the PodGroup's from any pod, in `order` (Session::pendingTaskOrder). A pod that
/// does not fit is replaced by the next one of the same subgroup (pods with the placement key of
/// one that failed are passed over: they would fail alike). Fails when a subgroup, or the gang,
/// runs out of pods; the reason names the subgroup. `used` marks the positions tried.
bool placeMinimum(Session& ssn, Statement& stmt, SessionJob& job, const std::vector<int>& order, bool allowPipeline,
                  std::vector<char>& used, std::string& reason) {
  std::vector<int> failedClasses;
  int64_t untried = std::count(used.begin(), used.end(), 0);
  // Takes the next untried pod of `group` (-2: any) and tries it; false when none is left.
  auto tryNext = [&](int group, size_t& cursor, std::string& why) -> bool {
    for (; cursor < order.size(); ++cursor) {
      if (used[cursor]) continue;
      SessionTask& task = job.tasks[order[cursor]];
      if (group != -2 && task.subGroup != group) continue;
      used[cursor] = 1;
      --untried;
      if (!failedClasses.empty() &&
          std::find(failedClasses.begin(), failedClasses.end(), ssn.placementClass(task)) != failedClasses.end())
        continue;
      std::string r;
      if (placeOne(ssn, stmt, job, task, allowPipeline, r)) return true;
      if (why.empty()) why = std::move(r);
      failedClasses.push_back(ssn.placementClass(task));
    }
    return false;
  };
  const std::vector<api::SubGroup>& groups = job.subGroups();
  for (size_t g = 0; g < groups.size(); ++g) {
    size_t cursor = 0;
    std::string why;
    while (job.subGroupReady[g] < groups[g].minMember) {
      if (tryNext(static_cast<int>(g), cursor, why)) continue;
      reason = "subgroup " + groups[g].name + " " + std::to_string(job.subGroupReady[g]) + "/" +
               std::to_string(groups[g].minMember) + ": " + (why.empty() ? "no more pods to try" : why);
      return false;
    }
  }
  size_t cursor = 0;
  std::string why;
  while (!ssn.jobReady(job)) {
    // Fewer untried pods left than the gang still needs: it cannot be met.
    if (untried < job.minMember() - job.readyCount || !tryNext(-2, cursor, why)) {
      reason = why.empty() ? "no more pods to try" : why;
      return false;
    }
  }
  return true;
}

}  // namespace

bool placePending(Session& ssn, Statement& stmt, SessionJob& job, const framework::NodeDomain* domain,
                  bool allowPipeline, Turn turn, const std::vector<int>* skip, std::string& reason, int& ready,
                  int& failed) {
  const auto cp = stmt.checkpoint();
  ssn.restrictTo(domain);
  failed = 0;
  reason.clear();
  const bool wasReady = ssn.jobReady(job);
  const std::vector<int> order = ssn.pendingTaskOrder(job);
  std::vector<char> used(order.size(), 0);
  bool ok = wasReady || placeMinimum(ssn, stmt, job, order, allowPipeline, used, reason);
  if (ok && turn == Turn::Whole) {
    // Pods above the minimum: every one that fits.
    for (size_t i = 0; i < order.size(); ++i) {
      if (used[i]) continue;
      std::string r;
      if (placeOne(ssn, stmt, job, job.tasks[order[i]], allowPipeline, r)) continue;
      ++failed;
      if (reason.empty()) reason = std::move(r);
    }
  } else if (ok && wasReady) {
    // A turn above the minimum: the next pod not tried yet.
    ok = false;
    for (int ti : order) {
      if (skip && std::find(skip->begin(), skip->end(), ti) != skip->end()) continue;
      ok = placeOne(ssn, stmt, job, job.tasks[ti], allowPipeline, reason);
      if (!ok) failed = 1;
      break;
    }
  }
  ssn.restrictTo(nullptr);
  if (!ok) {
    ready = job.readyCount;
    stmt.rollback(cp);
    return false;
  }
  return true;
}

bool placeInDomains(Session& ssn, Statement& stmt, SessionJob& job, bool allowPipeline, Turn turn,
                    const std::vector<int>* skip, std::string& reason, int& ready, int& failed) {
  ready = job.readyCount;
  // Placements that may not be pipelined need domains with room free now (releasing room is not).
  auto domains = ssn.jobDomains(job, allowPipeline ? framework::DomainRoom::Free : framework::DomainRoom::Now);
  if (!domains) return placePending(ssn, stmt, job, nullptr, allowPipeline, turn, skip, reason, ready, failed);
  if (domains->domains.empty()) {  // constrained, and no domain can hold it: the plugin said why
    reason = domains->reason;
    failed = ssn.jobReady(job) ? 1 : 0;
    return false;
  }
  // Domains in the plugin's order; the first one's failure is the one worth telling.
  std::string firstReason;
  int firstReady = job.readyCount;
  const bool explain = ssn.explainsFailures();
  for (const framework::NodeDomain& d : domains->domains) {
    // Once the first failure's reason is known, the others' are not built...
    const auto cp = stmt.checkpoint();
    bool placed;
    {
      framework::QuietPlacement quiet(ssn, /*quiet=*/!firstReason.empty());
      placed = placePending(ssn, stmt, job, &d, allowPipeline, turn, skip, reason, ready, failed);
    }
    // ... unless the job is placed there with pods left over, whose reason is shown: again, explained.
    if (placed && failed > 0 && explain && !firstReason.empty()) {
      stmt.rollback(cp);
      placed = placePending(ssn, stmt, job, &d, allowPipeline, turn, skip, reason, ready, failed);
    }
    if (placed) return true;
    if (firstReason.empty()) firstReason = d.name + ": " + reason, firstReady = ready;
  }
  reason = firstReason;
  ready = firstReady;
  return false;
}

const ShapeFailures::Failure* ShapeFailures::find(const Session& ssn, int signature) const {
  if (signature < 0 || static_cast<size_t>(signature) >= bySignature_.size()) return nullptr;
  const Failure& f = bySignature_[static_cast<size_t>(signature)];
  return f.known && f.at == ssn.nodeChanges().size() ? &f : nullptr;
}

void ShapeFailures::record(const Session& ssn, int signature, int progress, std::string reason) {
  if (signature < 0) return;
  if (static_cast<size_t>(signature) >= bySignature_.size()) bySignature_.resize(static_cast<size_t>(signature) + 1);
  bySignature_[static_cast<size_t>(signature)] = Failure{true, ssn.nodeChanges().size(), progress, std::move(reason)};
}

void failJob(Session& ssn, SessionJob& job, int ready, const std::string& reason) {
  std::string& msg = ssn.scratch();
  if (job.singleton && job.minMember() <= 1) {
    msg += "pod unschedulable: ";
  } else {
    const int missing = std::max(1, job.minMember() - ready);
    msg += "gang ";
    msg += std::to_string(ready);
    msg += '/';
    msg += std::to_string(job.minMember());
    msg += ": ";
    msg += pods(missing);
    msg += " unschedulable: ";
  }
  msg += reason;
  ssn.setUnschedulable(job, msg);
}

}  // namespace tessera::actions
