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
    ssn.addTaskOrderFn(name_, [](const framework::SessionTask& l, const framework::SessionTask& r) {
      if (l.info->taskPriority != r.info->taskPriority) return l.info->taskPriority > r.info->taskPriority ? -1 : 1;
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
