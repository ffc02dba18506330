// backfill: after the other actions, place jobs that fit on idle resources as they are now, without
// touching what was pipelined or reserved this cycle (kube-batch's backfill). Nothing is pipelined.
#include <algorithm>
#include <string>

#include "job_placement.h"
#include "tessera/actions/factories.h"

namespace tessera::actions {
namespace {

class Backfill final : public framework::Action {
 public:
  const std::string& name() const override { return name_; }
  void execute(framework::Session& ssn) override {
    // Backfill places on idle resources only. When every pending pod asks its node for more whole
    // GPUs than any node has idle, and (pods sharing a GPU pending) no node has a whole GPU idle nor
    // any GPU group room now (a full cluster, after allocate and the victim actions, whose victims
    // release rather than free), none can be placed: no job is visited (every one would end with
    // a failure of its own or its signature's, changing nothing). With the self-checks on
    // (factories.h) the jobs are visited anyway and none may be placed.
    const int64_t idle = ssn.maxIdleGpus();
    const bool nothingFits =
        ssn.pendingGpuFloor() > idle && (!ssn.pendingSharesGpu() || (idle == 0 && ssn.maxGroupRoom() <= 0));
    if (nothingFits && !selfChecks()) return;
    ShapeFailures failures;  // jobs that did not fit, by signature: a job like one, nothing changed since, neither
    forEachPendingJob(
        ssn, [&](const framework::SessionJob& j) { return !ssn.jobReady(j); }, /*reportInvalid=*/false,
        [&](framework::SessionJob& job) {
          const int sig = ssn.jobSignature(job, std::max(1, job.minMember() - job.readyCount));
          if (failures.find(ssn, sig)) return;
          framework::Statement stmt(ssn);
          std::string reason;
          int ready = 0, failed = 0;
          auto place = [&] {
            return placeInDomains(ssn, stmt, job, /*allowPipeline=*/false, Turn::Whole, nullptr, reason, ready, failed);
          };
          bool placed;
          {
            // A job backfill cannot place keeps allocate's reason: failures are not explained.
            framework::QuietPlacement quiet(ssn);
            placed = place();
          }
          if (placed && failed > 0) {  // placed, with pods above minMember left: placed again, explained
            stmt.discard();
            reason.clear();
            placed = place();
          }
          if (!placed) failures.record(ssn, sig);
          if (placed) {
            TESSERA_ASSERT(!nothingFits);
            stmt.commit();
            ssn.setUnschedulable(job, failed > 0 ? pods(failed) + " above minMember unschedulable: " + reason : "");
          }
        });
  }

 private:
  std::string name_ = "backfill";
};

}  // namespace

ActionResult makeBackfill(framework::Args&) { return std::shared_ptr<framework::Action>(std::make_shared<Backfill>()); }

}  // namespace tessera::actions
