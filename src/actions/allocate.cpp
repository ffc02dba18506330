// allocate: KAI's allocate action. Jobs take turns, queue by queue in queue order (re-ranked after
// every turn: forEachJobTurn), and within a queue in job order. A job's first turn places its gang
// minimum, all or nothing, chosen per subgroup; each later turn places one pod above minMember and
// puts the job back into the queue order, so elastic jobs of equal queues share a node instead of
// the first taking all of it (KAI's one task per turn above the minimum). A pod above minMember
// that does not fit is not tried again this cycle; the job's other pods still get their turns.
// If any task of the job only fits on releasing resources, the whole job is pipelined: nothing of
// it is bound this cycle.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

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
    // Per job that took a turn above its minimum, what those turns left behind (created on first
    // use: most jobs never get there).
    std::vector<int32_t> slot(ssn.jobs().size(), -1);
    std::vector<AboveMinimum> above;
    ShapeFailures failures;  // gang minimums (first turns) that found no placement, by signature
    forEachJobTurn(
        ssn, [](const SessionJob&) { return true; }, /*reportInvalid=*/true, [&](SessionJob& job) {
          int32_t& k = slot[static_cast<size_t>(job.index)];
          if (k < 0 && ssn.jobReady(job)) {
            k = static_cast<int32_t>(above.size());
            above.emplace_back();
          }
          AboveMinimum none;
          return turn(ssn, job, k < 0 ? none : above[static_cast<size_t>(k)], failures);
        });
  }

 private:
  /// Fails the job at once when none of its pending pods could fit on any node: the GPU index
  /// answers that without visiting nodes (a full cluster has many such jobs every cycle).
  static bool cannotFitAnywhere(Session& ssn, SessionJob& job) {
    if (ssn.jobReady(job)) return false;
    // The snapshot's pending pods (none of them placed yet: pods leave the pending state only so)
    // are summed up in the cache entry; otherwise the pending ones are read.
    int64_t minGpus = INT64_MAX;
    if (job.pendingCount == job.infoPendingCount) {
      minGpus = job.info->pendingMinGpus;
    } else {
      for (const SessionTask& t : job.tasks)
        if (t.state == TaskState::Pending) minGpus = std::min<int64_t>(minGpus, t.nodeRequest().milliGpu / 1000);
    }
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

  /// What a job's turns above its minimum left behind: the pods that did not fit (not tried again
  /// this cycle) and the first reason.
  struct AboveMinimum {
    std::vector<int> failed;
    std::string reason;
  };

  /// One turn of the job; returns whether it asks for another.
  static bool turn(Session& ssn, SessionJob& job, AboveMinimum& above, ShapeFailures& failures) {
    if (cannotFitAnywhere(ssn, job)) return false;
    const bool wasReady = ssn.jobReady(job);
    // A gang minimum like one that found no placement, with no node changed since, finds none
    // either: it fails the same way without a search.
    int sig = -1;
    if (!wasReady) {
      sig = ssn.jobSignature(job, std::max(1, job.minMember() - job.readyCount));
      if (const ShapeFailures::Failure* f = failures.find(ssn, sig)) {
        failJob(ssn, job, job.readyCount + f->progress, f->reason);
        return false;
      }
    }
    Statement stmt(ssn);
    std::string reason;
    int ready = job.readyCount, failed = 0;
    const bool placed =
        placeInDomains(ssn, stmt, job, /*allowPipeline=*/true, Turn::Next, &above.failed, reason, ready, failed);
    if (!placed && !wasReady) {
      failures.record(ssn, sig, ready - job.readyCount, reason);
      failJob(ssn, job, ready, reason);
      return false;
    }
    if (placed) {
      // A gang is bound together: if any of it waits for releasing resources, all of it waits.
      if (job.pipelinedCount > 0) stmt.pipelineAllocated(job.index);
      stmt.commit();
    } else {
      // The pod tried above the minimum does not fit: the next one gets the next turn.
      const std::vector<int> order = ssn.pendingTaskOrder(job);
      for (int ti : order)
        if (std::find(above.failed.begin(), above.failed.end(), ti) == above.failed.end()) {
          above.failed.push_back(ti);
          break;
        }
      if (above.reason.empty()) above.reason = reason;
    }
    if (!above.failed.empty())
      ssn.setUnschedulable(job, pods(static_cast<int>(above.failed.size())) + " above minMember unschedulable: " +
                                    above.reason);
    else ssn.setUnschedulable(job, "");
    return job.pendingCount > static_cast<int>(above.failed.size());
  }

  std::string name_ = "allocate";
};

}  // namespace

ActionResult makeAllocate(framework::Args&) { return std::shared_ptr<framework::Action>(std::make_shared<Allocate>()); }

}  // namespace tessera::actions
