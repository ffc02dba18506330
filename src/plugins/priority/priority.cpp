// priority: jobs by PriorityClass value, higher first (ties fall to the session: older, then UID);
// tasks inside a job by the tessera.dev/task-priority label, higher first.
#include <string>

#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

class PriorityPlugin final : public framework::Plugin {
 public:
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    ssn.addJobOrderFn(name_, [](const framework::SessionJob& l, const framework::SessionJob& r) {
      if (l.priority != r.priority) return l.priority > r.priority ? -1 : 1;
      return 0;
    });
    // Preempt (within a queue) takes only from preemptible jobs of strictly lower priority: the
    // victim job's part and the priorities' (split for the victim search's bounds).
    auto job = [](const framework::SessionJob& v) { return v.preemptible; };
    auto pair = [](const framework::SessionJob& claimant, const framework::SessionJob& v) {
      return v.priority < claimant.priority;
    };
    ssn.addPreemptableFn(
        name_, [&ssn, job, pair](const framework::SessionJob& claimant, const framework::SessionTask& victim) {
          const framework::SessionJob& v = ssn.jobs()[victim.job];
          return job(v) && pair(claimant, v);
        });
    ssn.addPreemptableSplitFn(name_, job, pair);
    ssn.addTaskOrderFn(name_, [](const framework::SessionTask& l, const framework::SessionTask& r) {
      if (l.taskPriority != r.taskPriority) return l.taskPriority > r.taskPriority ? -1 : 1;
      return 0;
    });
  }

 private:
  std::string name_ = "priority";
};

}  // namespace

PluginResult makePriority(framework::Args&) {
  return std::shared_ptr<framework::Plugin>(std::make_shared<PriorityPlugin>());
}

}  // namespace tessera::plugins
