// preempt: inside one queue, a pending job evicts preemptible jobs of strictly lower priority
// (Session::preemptable), the fewest that make room, node by node (victims.h). Gangs are evicted
// whole unless above their minMember, when surplus pods go first.
#include "job_placement.h"
#include "tessera/actions/factories.h"
#include "victims.h"

namespace tessera::actions {
namespace {

class Preempt final : public framework::Action {
 public:
  const std::string& name() const override { return name_; }
  bool indexesRunningPods() const override { return true; }
  void execute(framework::Session& ssn) override {
    VictimSearch search(ssn, VictimMode::Preempt);
    // Every job with pending pods, in queue order: its gang minimum in one turn, then one pod per
    // turn above it (KAI), going back into the queue order between pods (issue 15, item 3).
    std::string reason;
    forEachJobTurn(
        ssn, [](const framework::SessionJob&) { return true; }, /*reportInvalid=*/false,
        [&](framework::SessionJob& job) {
          reason.clear();  // one string for every claimant: its buffer is reused (the words are not read)
          return search.run(job, reason);
        },
        [&](std::span<const int> rest) { return search.queueSpent(rest); });
  }

 private:
  std::string name_ = "preempt";
};

}  // namespace

ActionResult makePreempt(framework::Args&) { return std::shared_ptr<framework::Action>(std::make_shared<Preempt>()); }

}  // namespace tessera::actions
