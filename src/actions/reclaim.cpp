// reclaim: a pending job whose queue is below its fair share takes resources back from other
// queues' preemptible jobs (KAI's reclaim). Which queues may give back is the proportion plugin's
// rule (Session::reclaimable); the search is node by node (victims.h). The reclaimer is pipelined
// onto the released resources and bound in a later cycle, once its victims are gone.
#include "job_placement.h"
#include "tessera/actions/factories.h"
#include "victims.h"

namespace tessera::actions {
namespace {

class Reclaim final : public framework::Action {
 public:
  const std::string& name() const override { return name_; }
  bool indexesRunningPods() const override { return true; }
  void execute(framework::Session& ssn) override {
    VictimSearch search(ssn, VictimMode::Reclaim);
    // Every job with pending pods, in queue order: its gang minimum in one turn, then one pod per
    // turn above it (KAI), going back into the queue order between pods (issue 15, item 3).
    std::string reason;
    forEachJobTurn(
        ssn, [](const framework::SessionJob&) { return true; }, /*reportInvalid=*/false,
        [&](framework::SessionJob& job) {
          reason.clear();  // one string for every claimant: its buffer is reused (the words are not read)
          return search.run(job, reason);  // on failure allocate's reason stays: it says what does not fit
        });
  }

 private:
  std::string name_ = "reclaim";
};

}  // namespace

ActionResult makeReclaim(framework::Args&) { return std::shared_ptr<framework::Action>(std::make_shared<Reclaim>()); }

}  // namespace tessera::actions
