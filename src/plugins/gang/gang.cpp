// gang: a job is placed only when at least minMember of its pods can be, and each of its subgroups
// gets its own minMember (KAI's gang plugin).
#include <string>
#include <vector>

#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

class GangPlugin final : public framework::Plugin {
 public:
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    ssn.addJobValidFn(name_, [&ssn](const framework::SessionJob& job) -> api::Status {
      const cache::JobInfo& info = *job.info;
      auto pg = [&] { return "PodGroup " + info.namespace_ + "/" + info.name; };
      // An invalid PodGroup (api/validation.h: minMember, queue, priority class, topology; or its
      // latest version failed conversion) is skipped whole; the job's key is its Problem::ref().
      if (!job.singleton)
        if (const api::Problem* p = ssn.snapshot().findInvalid(info.key)) return api::makeError(p->text());
      if (info.podGroupMissing) return api::makeError(pg() + " not found (named by its pods' pod-group-name)");
      // Pods that could still run: everything but failed and releasing ones (counted by the cache
      // and the session: the tasks are not read).
      const int32_t live = static_cast<int32_t>(job.tasks.size()) - info.failedCount - job.releasingCount;
      if (live < info.minMember)
        return api::makeError("gang " + std::to_string(live) + "/" + std::to_string(info.minMember) + ": only " +
                              std::to_string(live) + " pods exist for spec.minMember " +
                              std::to_string(info.minMember));
      // Every subgroup needs its own minimum too.
      const std::vector<api::SubGroup>& groups = job.subGroups();
      for (size_t g = 0; g < groups.size(); ++g) {
        int32_t liveInGroup = 0;
        for (const auto& t : job.tasks)
          if (t.subGroup == static_cast<int32_t>(g) && t.state != framework::TaskState::Failed &&
              t.state != framework::TaskState::Releasing)
            ++liveInGroup;
        if (liveInGroup < groups[g].minMember)
          return api::makeError("subgroup " + groups[g].name + " " + std::to_string(liveInGroup) + "/" +
                                std::to_string(groups[g].minMember) + ": only " + std::to_string(liveInGroup) +
                                " pods exist for its minMember " + std::to_string(groups[g].minMember));
      }
      return api::Status::success();
    });
    // Ready: minMember pods in a ready state, and every subgroup at its own minMember.
    ssn.addJobReadyFn(name_, [](const framework::SessionJob& job) {
      return job.readyCount >= job.minMember() && (job.subGroupReady.empty() || job.shortSubGroup() < 0);
    });
  }

 private:
  std::string name_ = "gang";
};

}  // namespace

PluginResult makeGang(framework::Args&) { return std::shared_ptr<framework::Plugin>(std::make_shared<GangPlugin>()); }

}  // namespace tessera::plugins
