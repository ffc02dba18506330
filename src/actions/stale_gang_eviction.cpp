// stalegangeviction: a gang that runs with fewer pods than its minMember (a pod failed or was
// deleted) for longer than gracePeriod is evicted whole, so its resources are not held by a job
// that cannot make progress. Since when a gang is stale lives on its PodGroup, as KAI keeps it
// (kai.scheduler/stale-podgroup-timestamp): annotation tessera.dev/stale-since, written when the
// gang becomes stale and removed when it stops being so (only on those transitions), so neither a
// restart nor a config reload restarts the count. Until the annotation is written and seen, the
// scheduler's state (SchedulerState::staleSince, which a reload keeps) remembers it.
#include <map>

#include "tessera/actions/factories.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"

namespace tessera::actions {
namespace {

using framework::TaskState;

/// The annotation holds whole seconds (RFC 3339): the in-memory time is cut alike, so that the
/// deadline is the same whichever of the two the action reads.
api::Time wholeSeconds(api::Time t) {
  const int64_t r = t.unixMillis % 1000;
  return api::Time{t.unixMillis - (r < 0 ? r + 1000 : r)};
}

class StaleGangEviction final : public framework::Action {
 public:
  explicit StaleGangEviction(api::Duration grace) : grace_(grace) {}
  const std::string& name() const override { return name_; }

  void execute(framework::Session& ssn) override {
    const char* key = api::keys::kStaleSinceAnnotation;
    std::map<std::string, api::Time>& memory = ssn.state().staleSince;
    std::map<std::string, api::Time> stillStale;
    for (framework::SessionJob& job : ssn.jobs()) {
      // Stale: some pods run, fewer than the minimum, and this cycle placed none to complete it.
      // (Running pods are ready ones: a job with none ready, most pending ones, has none running,
      // and its pods are not read.)
      int runningNow = 0;
      if (job.readyCount > 0 && job.readyCount < job.minMember())
        for (const auto& t : job.tasks)
          runningNow += (t.state == TaskState::Running || t.state == TaskState::Bound) ? 1 : 0;
      const bool stale =
          runningNow > 0 && job.minMember() > 1 && job.readyCount < job.minMember() && !job.singleton;
      // (Its cache entry and PodGroup are read only when it is stale or marked: few jobs are.)
      if (!stale && !job.staleMarked) continue;
      const api::PodGroup* pg = job.info->podGroup.get();
      const std::string* mark = pg ? pg->meta.annotation(key) : nullptr;
      if (!stale) {
        if (mark) ssn.annotate(job, key, std::nullopt);  // no longer stale: the timer goes
        continue;
      }
      api::Time since = wholeSeconds(ssn.now());
      if (pg && pg->staleSince) since = *pg->staleSince;
      else if (auto it = memory.find(job.key()); it != memory.end()) since = it->second;
      stillStale[job.key()] = since;
      if (const std::string text = api::formatTime(since); pg && (!mark || *mark != text))
        ssn.annotate(job, key, text);  // became stale (or the annotation is unreadable)
      if (ssn.now() - since < grace_) continue;
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
    memory = std::move(stillStale);
  }

 private:
  std::string name_ = "stalegangeviction";
  api::Duration grace_;
};

}  // namespace

ActionResult makeStaleGangEviction(framework::Args& args) {
  const api::Duration grace = args.getDuration("gracePeriod", api::Duration{60'000});
  return std::shared_ptr<framework::Action>(std::make_shared<StaleGangEviction>(grace));
}

}  // namespace tessera::actions
