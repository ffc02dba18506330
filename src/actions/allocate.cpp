// allocate: KAI's allocate action. Queues are taken in queue order, and from each queue its jobs in
// job order, one job at a time (the queue goes back into the heap with its updated share). A job's
// tasks are placed inside one Statement: the gang's minMember all-or-nothing, pods above minMember
// where they fit (elastic). If any task of the job only fits on releasing resources the whole job is
// pipelined: nothing of it is bound this cycle.
#include <algorithm>
#include <climits>
#include <queue>
#include <string>
#include <vector>

#include "tessera/actions/factories.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"

namespace tessera::actions {
namespace {

using framework::Session;
using framework::SessionJob;
using framework::SessionTask;
using framework::Statement;
using framework::TaskState;

std::string pods(int n) { return std::to_string(n) + (n == 1 ? " pod" : " pods"); }

/// Jobs waiting in one queue, in job order, with a cursor.
struct QueueJobs {
  int queue = -1;
  std::vector<int> jobs;
  size_t next = 0;
};

class Allocate final : public framework::Action {
 public:
  const std::string& name() const override { return name_; }

  void execute(Session& ssn) override {
    std::vector<QueueJobs> perQueue = collectJobs(ssn);
    // Max-heap on "goes first": the comparator says a < b when b should be tried before a.
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
      allocateJob(ssn, ssn.jobs()[q.jobs[q.next++]]);
      if (q.next < q.jobs.size()) {
        heap.push_back(qi);
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }

 private:
  /// Valid jobs with pending pods, grouped by queue and sorted in job order. Invalid ones get
  /// their reason and are skipped.
  static std::vector<QueueJobs> collectJobs(Session& ssn) {
    std::vector<QueueJobs> perQueue(ssn.queues().size());
    for (size_t i = 0; i < perQueue.size(); ++i) perQueue[i].queue = static_cast<int>(i);
    for (SessionJob& job : ssn.jobs()) {
      if (job.pendingCount == 0) continue;
      if (auto reason = ssn.jobInvalid(job)) {
        ssn.setUnschedulable(job, *reason);
        continue;
      }
      perQueue[job.queue].jobs.push_back(job.index);
    }
    for (QueueJobs& q : perQueue)
      std::sort(q.jobs.begin(), q.jobs.end(),
                [&](int a, int b) { return ssn.jobLess(ssn.jobs()[a], ssn.jobs()[b]); });
    return perQueue;
  }

  /// Pending tasks of the job in task order.
  static std::vector<int> pendingTasks(const Session& ssn, const SessionJob& job) {
    std::vector<int> out;
    for (const SessionTask& t : job.tasks)
      if (t.state == TaskState::Pending) out.push_back(t.index);
    std::sort(out.begin(), out.end(), [&](int a, int b) { return ssn.taskLess(job.tasks[a], job.tasks[b]); });
    return out;
  }

  /// Why one task cannot be placed now, or where it goes.
  static framework::Placement place(Session& ssn, const SessionJob& job, const SessionTask& task) {
    framework::Placement p;
    if (auto r = ssn.prePredicate(job, task)) {
      p.reason = *r;
      return p;
    }
    if (auto r = ssn.capacityCheck(job, task.request())) {
      p.reason = *r;
      return p;
    }
    p = ssn.findPlacement(task, /*allowPipeline=*/true);
    return p;
  }

  /// Fails the job at once when none of its pending pods could fit on any node: the GPU index
  /// answers that without visiting nodes (a full cluster has many such jobs every cycle).
  static bool cannotFitAnywhere(Session& ssn, SessionJob& job) {
    if (ssn.jobReady(job)) return false;
    int64_t minGpus = INT64_MAX;
    for (const SessionTask& t : job.tasks)
      if (t.state == TaskState::Pending) minGpus = std::min<int64_t>(minGpus, t.request().milliGpu / 1000);
    if (minGpus == INT64_MAX || minGpus <= ssn.maxFreeGpus()) return false;
    for (const SessionTask& t : job.tasks) {  // a task-level problem (a bad annotation) is said first
      if (t.state != TaskState::Pending) continue;
      if (auto r = ssn.prePredicate(job, t)) {
        fail(ssn, job, job.readyCount, *r);
        return true;
      }
      break;  // the first pending pod stands for the others: they are all short of GPUs anyway
    }
    fail(ssn, job, job.readyCount, ssn.gpuShortageReason());
    return true;
  }

  static void fail(Session& ssn, SessionJob& job, int ready, const std::string& reason) {
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

  /// One attempt to place the job's pending pods (inside `domain` when given). On success the
  /// placements are committed; on failure nothing is left behind and `reason`/`ready` say why.
  static bool attempt(Session& ssn, SessionJob& job, const framework::NodeDomain* domain, std::string& reason,
                      int& ready) {
    ssn.restrictTo(domain);
    Statement stmt(ssn);
    int failed = 0;
    std::string firstReason;
    bool gangBroken = false;
    for (int ti : pendingTasks(ssn, job)) {
      SessionTask& task = job.tasks[ti];
      framework::Placement p = place(ssn, job, task);
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
      stmt.discard();
      reason = firstReason;
      return false;
    }
    // A gang is bound together: if any of it waits for releasing resources, all of it waits.
    if (job.pipelinedCount > 0) stmt.pipelineAllocated(job.index);
    stmt.commit();
    if (failed > 0)
      ssn.setUnschedulable(job, pods(failed) + " above minMember unschedulable: " + firstReason);
    else
      ssn.setUnschedulable(job, "");
    return true;
  }

  static void allocateJob(Session& ssn, SessionJob& job) {
    if (cannotFitAnywhere(ssn, job)) return;
    std::string reason;
    int ready = job.readyCount;
    auto domains = ssn.jobDomains(job, reason);
    if (!domains) {
      if (!attempt(ssn, job, nullptr, reason, ready)) fail(ssn, job, ready, reason);
      return;
    }
    if (domains->empty()) {  // constrained, and no domain can hold it: the plugin said why
      fail(ssn, job, job.readyCount, reason);
      return;
    }
    // Domains in the plugin's order; the first one's failure is the one worth telling.
    std::string firstReason;
    int firstReady = job.readyCount;
    for (const framework::NodeDomain& d : *domains) {
      if (attempt(ssn, job, &d, reason, ready)) return;
      if (firstReason.empty()) firstReason = d.name + ": " + reason, firstReady = ready;
    }
    fail(ssn, job, firstReady, firstReason);
  }

  std::string name_ = "allocate";
};

}  // namespace

ActionResult makeAllocate(framework::Args&) {
  return std::shared_ptr<framework::Action>(std::make_shared<Allocate>());
}

}  // namespace tessera::actions
