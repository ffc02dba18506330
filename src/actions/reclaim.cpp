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
  void execute(framework::Session& ssn) override {
    VictimSearch search(ssn, VictimMode::Reclaim);
    forEachPendingJob(
        ssn, [&](const framework::SessionJob& j) { return !ssn.jobReady(j); }, /*reportInvalid=*/false,
        [&](framework::SessionJob& job) {
          std::string reason;
          search.run(job, reason);  // on failure allocate's reason stays: it says what does not fit
        });
  }

 private:
  std::string name_ = "reclaim";
};

}  // namespace

ActionResult makeReclaim(framework::Args&) { return std::shared_ptr<framework::Action>(std::make_shared<Reclaim>()); }

}  // namespace tessera::actions
