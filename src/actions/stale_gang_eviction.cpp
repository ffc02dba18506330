// stalegangeviction: a gang that runs with fewer pods than its minMember (a pod failed or was
// deleted) for longer than gracePeriod is evicted whole, so its resources are not held by a job
// that cannot make progress. The action remembers, across cycles, since when each gang is stale.
#include <map>

#include "tessera/actions/factories.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"

namespace tessera::actions {
namespace {

using framework::TaskState;

class StaleGangEviction final : public framework::Action {
 public:
  explicit StaleGangEviction(api::Duration grace) : grace_(grace) {}
  const std::string& name() const override { return name_; }

  void execute(framework::Session& ssn) override {
    std::map<std::string, api::Time> stillStale;
    for (framework::SessionJob& job : ssn.jobs()) {
      if (job.info->isSingleton() || job.minMember() <= 1) continue;
      int runningNow = 0;
      for (const auto& t : job.tasks)
        runningNow += (t.state == TaskState::Running || t.state == TaskState::Bound) ? 1 : 0;
      // Stale: some pods run, fewer than the minimum, and this cycle placed none to complete it.
      if (runningNow == 0 || job.readyCount >= job.minMember()) continue;
      auto it = staleSince_.find(job.key());
      const api::Time since = it == staleSince_.end() ? ssn.now() : it->second;
      if (ssn.now() - since < grace_) {
        stillStale[job.key()] = since;
        continue;
      }
      framework::Statement stmt(ssn);
      const std::string why = "stale gang: " + std::to_string(runningNow) + "/" + std::to_string(job.minMember()) +
                              " pods running for more than " + api::formatDuration(grace_);
      for (auto& t : job.tasks) {
        if (t.state != TaskState::Running && t.state != TaskState::Bound) continue;
        if (t.node < 0) t.node = ssn.findNode(t.info->nodeName);
        if (t.node >= 0) stmt.evict(t, why);  // a pod on a node that is gone holds nothing to free here
      }
      stmt.commit();
    }
    staleSince_ = std::move(stillStale);
  }

 private:
  std::string name_ = "stalegangeviction";
  api::Duration grace_;
  std::map<std::string, api::Time> staleSince_;
};

}  // namespace

ActionResult makeStaleGangEviction(framework::Args& args) {
  const api::Duration grace = args.getDuration("gracePeriod", api::Duration{60'000});
  return std::shared_ptr<framework::Action>(std::make_shared<StaleGangEviction>(grace));
}

}  // namespace tessera::actions
