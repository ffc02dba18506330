#include "job_placement.h"

#include <algorithm>

namespace tessera::actions {

using framework::Session;
using framework::SessionJob;
using framework::SessionTask;
using framework::Statement;
using framework::TaskState;

std::string describeJob(const SessionJob& job) {
  return (job.info->isSingleton() ? "pod " : "PodGroup ") + job.info->namespace_ + "/" + job.info->name;
}

std::string pods(int n) { return std::to_string(n) + (n == 1 ? " pod" : " pods"); }

namespace {
struct QueueJobs {
  int queue = -1;
  std::vector<int> jobs;
  size_t next = 0;
};
}  // namespace

void forEachPendingJob(Session& ssn, const std::function<bool(const SessionJob&)>& filter, bool reportInvalid,
                       const std::function<void(SessionJob&)>& fn) {
  std::vector<QueueJobs> perQueue(ssn.queues().size());
  for (size_t i = 0; i < perQueue.size(); ++i) perQueue[i].queue = static_cast<int>(i);
  for (SessionJob& job : ssn.jobs()) {
    if (job.pendingCount == 0 || !filter(job)) continue;
    if (auto valid = ssn.jobValid(job); !valid.ok()) {
      if (reportInvalid) ssn.setUnschedulable(job, valid.error().message);
      continue;
    }
    perQueue[job.queue].jobs.push_back(job.index);
  }
  for (QueueJobs& q : perQueue)
    std::sort(q.jobs.begin(), q.jobs.end(), [&](int a, int b) { return ssn.jobLess(ssn.jobs()[a], ssn.jobs()[b]); });
  // Max-heap on "goes first": `later(a, b)` says b should be tried before a.
  auto later = [&](int a, int b) {
    const QueueJobs& qa = perQueue[a];
    const QueueJobs& qb = perQueue[b];
    return ssn.queueLess(ssn.queues()[qb.queue], ssn.queues()[qa.queue], &ssn.jobs()[qb.jobs[qb.next]],
                         &ssn.jobs()[qa.jobs[qa.next]]);
  };
  std::vector<int> heap;
  for (size_t i = 0; i < perQueue.size(); ++i)
    if (!perQueue[i].jobs.empty()) heap.push_back(static_cast<int>(i));
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const int qi = heap.back();
    heap.pop_back();
    QueueJobs& q = perQueue[qi];
    fn(ssn.jobs()[q.jobs[q.next++]]);
    if (q.next < q.jobs.size()) {
      heap.push_back(qi);
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
}

std::vector<int> pendingTasks(const Session& ssn, const SessionJob& job) {
  std::vector<int> out;
  for (const SessionTask& t : job.tasks)
    if (t.state == TaskState::Pending) out.push_back(t.index);
  if (out.size() > 1)
    std::sort(out.begin(), out.end(), [&](int a, int b) { return ssn.taskLess(job.tasks[a], job.tasks[b]); });
  return out;
}

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

bool placePending(Session& ssn, Statement& stmt, SessionJob& job, const framework::NodeDomain* domain,
                  bool allowPipeline, std::string& reason, int& ready, int& failed) {
  const auto cp = stmt.checkpoint();
  ssn.restrictTo(domain);
  failed = 0;
  std::string firstReason;
  bool gangBroken = false;
  for (int ti : pendingTasks(ssn, job)) {
    SessionTask& task = job.tasks[ti];
    framework::Placement p = placeTask(ssn, job, task, allowPipeline);
    if (p.node < 0) {
      ++failed;
      if (firstReason.empty()) firstReason = p.reason;
      if (!ssn.jobReady(job)) {
        gangBroken = true;  // the minimum cannot be met: no point placing the rest
        break;
      }
      continue;  // a pod above minMember: place the others that fit
    }
    if (p.pipelined) stmt.pipeline(task, p.node);
    else stmt.allocate(task, p.node);
  }
  ssn.restrictTo(nullptr);
  if (gangBroken || !ssn.jobReady(job)) {
    ready = job.readyCount;
    stmt.rollback(cp);
    reason = firstReason;
    return false;
  }
  reason = firstReason;
  return true;
}

bool placeInDomains(Session& ssn, Statement& stmt, SessionJob& job, bool allowPipeline, std::string& reason,
                    int& ready, int& failed) {
  ready = job.readyCount;
  auto domains = ssn.jobDomains(job);
  if (!domains) return placePending(ssn, stmt, job, nullptr, allowPipeline, reason, ready, failed);
  if (domains->domains.empty()) {  // constrained, and no domain can hold it: the plugin said why
    reason = std::move(domains->reason);
    return false;
  }
  // Domains in the plugin's order; the first one's failure is the one worth telling.
  std::string firstReason;
  int firstReady = job.readyCount;
  for (const framework::NodeDomain& d : domains->domains) {
    if (placePending(ssn, stmt, job, &d, allowPipeline, reason, ready, failed)) return true;
    if (firstReason.empty()) firstReason = d.name + ": " + reason, firstReady = ready;
  }
  reason = firstReason;
  ready = firstReady;
  return false;
}

void failJob(Session& ssn, SessionJob& job, int ready, const std::string& reason) {
  std::string& msg = ssn.scratch();
  if (job.info->isSingleton() && job.minMember() <= 1) {
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
