// consolidate: for a pending preemptible job, move preemptible running pods to other nodes to make
// room. Accepted only if every evicted pod can be placed again elsewhere (its room is reserved
// there this cycle; its controller recreates it and it is bound there), and at most
// maxConsolidationPreemptees pods move for one job. Nobody loses resources: only where they run.
#include "job_placement.h"
#include "tessera/actions/factories.h"
#include "victims.h"

namespace tessera::actions {
namespace {

class Consolidate final : public framework::Action {
 public:
  explicit Consolidate(int maxPreemptees) : maxPreemptees_(maxPreemptees) {}
  const std::string& name() const override { return name_; }
  bool indexesRunningPods() const override { return true; }
  void execute(framework::Session& ssn) override {
    // Spreading undoes what packing achieves: consolidation is off then, as in KAI.
    if (ssn.spreadPlacement()) return;
    VictimSearch search(ssn, VictimMode::Consolidate, maxPreemptees_);  // the limit counts per job
    // A full cluster (every pending pod asks more GPUs than are free in all) has no room to move
    // pods into: no job is visited (each would fail alike, changing nothing). With the self-checks
    // on (factories.h) they are visited and none may succeed.
    const bool tooFull = search.clusterTooFullToMove();
    if (tooFull && !selfChecks()) return;
    std::string reason;
    forEachPendingJob(
        ssn, [&](const framework::SessionJob& j) { return !ssn.jobReady(j) && j.preemptible; },
        /*reportInvalid=*/false, [&](framework::SessionJob& job) {
          reason.clear();  // one string for every claimant: its buffer is reused (the words are not read)
          const bool moved = search.run(job, reason);
          TESSERA_ASSERT(!(moved && tooFull));
        });
  }

 private:
  std::string name_ = "consolidate";
  int maxPreemptees_;
};

}  // namespace

ActionResult makeConsolidate(framework::Args& args) {
  const int max = static_cast<int>(args.getInt("maxConsolidationPreemptees", 16, 1, 10'000));
  return std::shared_ptr<framework::Action>(std::make_shared<Consolidate>(max));
}

}  // namespace tessera::actions
