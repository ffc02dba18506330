// allocate: KAI's allocate action. Queues are taken in queue order, and from each queue its jobs in
// job order, one job at a time (the queue goes back into the heap with its updated share). A job's
// tasks are placed inside one Statement: the gang's minMember all-or-nothing, pods above minMember
// where they fit (elastic). If any task of the job only fits on releasing resources the whole job is
// pipelined: nothing of it is bound this cycle.
#include <algorithm>
#include <climits>
#include <string>

#include "job_placement.h"
#include "tessera/actions/factories.h"

namespace tessera::actions {
namespace {

using framework::Session;
using framework::SessionJob;
using framework::SessionTask;
using framework::Statement;
using framework::TaskState;

class Allocate final : public framework::Action {
 public:
  const std::string& name() const override { return name_; }

  void execute(Session& ssn) override {
    forEachPendingJob(
        ssn, [](const SessionJob&) { return true; }, /*reportInvalid=*/true,
        [&](SessionJob& job) { allocateJob(ssn, job); });
  }

 private:
  /// Fails the job at once when none of its pending pods could fit on any node: the GPU index
  /// answers that without visiting nodes (a full cluster has many such jobs every cycle).
  static bool cannotFitAnywhere(Session& ssn, SessionJob& job) {
    if (ssn.jobReady(job)) return false;
    int64_t minGpus = INT64_MAX;
    for (const SessionTask& t : job.tasks)
      if (t.state == TaskState::Pending) minGpus = std::min<int64_t>(minGpus, t.nodeRequest().milliGpu / 1000);
    if (minGpus == INT64_MAX || minGpus <= ssn.maxFreeGpus()) return false;
    for (const SessionTask& t : job.tasks) {  // a task-level problem (a bad annotation) is said first
      if (t.state != TaskState::Pending) continue;
      if (auto allowed = ssn.prePredicate(job, t); !allowed.ok()) {
        failJob(ssn, job, job.readyCount, allowed.error().message);
        return true;
      }
      break;  // the first pending pod stands for the others: they are all short of GPUs anyway
    }
    failJob(ssn, job, job.readyCount, ssn.gpuShortageReason());
    return true;
  }

  static void allocateJob(Session& ssn, SessionJob& job) {
    if (cannotFitAnywhere(ssn, job)) return;
    Statement stmt(ssn);
    std::string reason;
    int ready = job.readyCount, failed = 0;
    if (!placeInDomains(ssn, stmt, job, /*allowPipeline=*/true, reason, ready, failed)) {
      failJob(ssn, job, ready, reason);
      return;
    }
    // A gang is bound together: if any of it waits for releasing resources, all of it waits.
    if (job.pipelinedCount > 0) stmt.pipelineAllocated(job.index);
    stmt.commit();
    if (failed > 0) ssn.setUnschedulable(job, pods(failed) + " above minMember unschedulable: " + reason);
    else ssn.setUnschedulable(job, "");
  }

  std::string name_ = "allocate";
};

}  // namespace

ActionResult makeAllocate(framework::Args&) { return std::shared_ptr<framework::Action>(std::make_shared<Allocate>()); }

}  // namespace tessera::actions
