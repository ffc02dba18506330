#include "snapshot_validation.h"

#include "tessera/api/validation.h"

namespace tessera::cache {

void validateSnapshot(Snapshot& s) {
  s.invalid.clear();
  // An object whose latest version failed conversion may still be in the cache in its last good
  // version: it is invalid all the same (skipped, never scheduled on a stale spec).
  std::map<std::string, api::Problem> badQueues;
  for (const ConversionError& e : s.conversionErrors) {
    api::Problem p{e.kind, e.namespace_, e.name, "", e.message};
    if (e.kind == api::Kind::Queue) badQueues.emplace(e.name, p);
    else if (e.kind == api::Kind::PodGroup || e.kind == api::Kind::Node) s.invalid.emplace(p.ref(), std::move(p));
    else if (e.kind == api::Kind::VolcanoPodGroup || e.kind == api::Kind::SchedulerPluginsPodGroup) {
      // Another scheduler's PodGroup stands for the job only where Tessera has none of that name.
      const JobInfo* job = s.findJob(p.ref());
      if (!job || !job->podGroup || job->podGroup->source != api::PodGroupSource::Tessera)
        s.invalid.emplace(p.ref(), std::move(p));
    }
  }
  std::vector<const api::Queue*> queues;
  queues.reserve(s.queues.size());
  for (const auto& [name, q] : s.queues)
    if (q->queue) queues.push_back(q->queue.get());
  for (auto& [name, p] : api::validateQueues(queues, badQueues)) s.invalid.emplace(p.ref(), std::move(p));

  api::PodGroupRefs refs;
  // A queue of another node pool exists: the session says why a job of this pool cannot use it.
  refs.queueExists = [&](const std::string& n) {
    auto it = s.queues.find(n);
    return (it != s.queues.end() && it->second->queue != nullptr) || s.otherPoolQueues.count(n) > 0;
  };
  refs.priorityClassExists = [&](const std::string& n) { return s.priorityClasses.count(n) > 0; };
  refs.topology = [&](const std::string& n) -> const api::Topology* {
    auto it = s.topologies.find(n);
    return it == s.topologies.end() ? nullptr : it->second.get();
  };
  for (const auto& job : s.jobs)
    if (job->podGroup)
      if (auto p = api::validatePodGroup(*job->podGroup, refs)) s.invalid.emplace(p->ref(), std::move(*p));  // idem
  for (const auto& n : s.nodes)
    if (n->node)
      if (auto p = api::validateNode(*n->node)) s.invalid.emplace(p->ref(), std::move(*p));  // keeps a conversion error
}

}  // namespace tessera::cache
