#include "snapshot_validation.h"

#include "tessera/api/validation.h"

namespace tessera::cache {

namespace {

/// Whether a PodGroup's references would resolve the same in `a` and `b`: the same queues (and
/// which of them exist as objects), queues of other pools, priority classes and topologies.
bool sameRefs(const Snapshot& a, const Snapshot& b) {
  auto sameKeys = [](const auto& x, const auto& y, auto same) {
    if (x.size() != y.size()) return false;
    for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j)
      if (i->first != j->first || !same(i->second, j->second)) return false;
    return true;
  };
  auto any = [](const auto&, const auto&) { return true; };
  return sameKeys(a.queues, b.queues, [](const auto& x, const auto& y) { return (x->queue != nullptr) == (y->queue != nullptr); }) &&
         sameKeys(a.otherPoolQueues, b.otherPoolQueues, any) && sameKeys(a.priorityClasses, b.priorityClasses, any) &&
         sameKeys(a.topologies, b.topologies, [](const auto& x, const auto& y) { return x == y; });
}

/// The verdict on `object` from `memo` when it was validated before, else `validate`'s.
template <class T, class Validate>
const std::optional<api::Problem>& verdictOf(const std::shared_ptr<const T>& object, ValidationMemo::Verdicts<T>& memo,
                                             uint64_t generation, Validate validate) {
  auto [at, fresh] = memo.try_emplace(object.get());
  if (fresh) at->second = {object, validate(*object), 0};
  at->second.seen = generation;
  return at->second.problem;
}

/// Drops the verdicts of objects the snapshot no longer holds, once they are as many as the live.
template <class T>
void sweep(ValidationMemo::Verdicts<T>& memo, uint64_t generation, size_t live) {
  if (memo.size() <= 2 * live + 64) return;
  for (auto it = memo.begin(); it != memo.end();) it = it->second.seen == generation ? std::next(it) : memo.erase(it);
}

}  // namespace

void validateSnapshot(Snapshot& s, const Snapshot* last, ValidationMemo& memo) {
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
  const uint64_t generation = ++memo.generation;
  std::vector<const api::Queue*> queues;
  queues.reserve(s.queues.size());
  for (const auto& [name, q] : s.queues)
    if (q->queue) queues.push_back(q->queue.get());
  // The queue objects are held by `last` (and `s`): the same addresses are the same objects.
  std::vector<std::string> badNames;
  for (const auto& [name, p] : badQueues) badNames.push_back(name);
  if (!last || queues != memo.queues || badNames != memo.badQueues) {
    memo.queueProblems = api::validateQueues(queues, badQueues);
    memo.queues = std::move(queues);
    memo.badQueues = std::move(badNames);
  }
  for (const auto& [name, p] : memo.queueProblems) s.invalid.emplace(p.ref(), p);

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
  if (!last || !sameRefs(s, *last)) memo.podGroups.clear(), memo.chunks.clear();
  auto validatePodGroup = [&](const api::PodGroup& pg) { return api::validatePodGroup(pg, refs); };
  size_t podGroups = 0, nodes = 0;
  // A chunk of jobs `last` had too holds the same jobs, so the same PodGroups: its verdicts stand
  // (no job entry is read); a new chunk's PodGroups are looked up one by one.
  std::unordered_map<const void*, ValidationMemo::ChunkVerdict> chunks;
  chunks.reserve(s.jobs.chunks().size());
  for (const auto& chunk : s.jobs.chunks()) {
    ValidationMemo::ChunkVerdict v;
    if (auto was = memo.chunks.find(chunk.get()); was != memo.chunks.end()) {
      v = std::move(was->second);
    } else {
      for (const auto& job : *chunk) {
        if (!job->podGroup) continue;
        ++v.podGroups;
        if (const auto& p = verdictOf(job->podGroup, memo.podGroups, generation, validatePodGroup))
          v.problems.push_back(*p);
      }
    }
    for (const api::Problem& p : v.problems) s.invalid.emplace(p.ref(), p);  // idem
    podGroups += v.podGroups;
    chunks.emplace(chunk.get(), std::move(v));
  }
  memo.chunks = std::move(chunks);
  for (const auto& n : s.nodes) {
    if (!n->node) continue;
    ++nodes;
    if (const auto& p = verdictOf(n->node, memo.nodes, generation, api::validateNode))
      s.invalid.emplace(p->ref(), *p);  // keeps a conversion error
  }
  // (A PodGroup of a shared chunk is not marked seen: a sweep drops its verdict too, and it is
  // looked up again when its chunk is made anew.)
  sweep(memo.podGroups, generation, podGroups);
  sweep(memo.nodes, generation, nodes);
}

}  // namespace tessera::cache
