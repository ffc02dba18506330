#include "snapshot_builder.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "snapshot_validation.h"

namespace tessera::cache {
namespace {

/// The last snapshot's sorted list with the dirty keys re-read from `table`: no walk over the
/// maps, and each dirty key found by binary search, so that the entries kept between two dirty
/// keys are copied without reading their keys (each a cache miss or two on a large cluster).
/// `include` says whether an entry belongs in the list. With `counts` (`beforeCounts` parallel to
/// `before`), a list parallel to `out` of each entry's `count` is merged alongside: an entry of
/// the last snapshot never changes (the cache copies one on write), so its count is copied.
struct NoCount {
  template <class T>
  uint32_t operator()(const T&) const {
    return 0;
  }
};
template <class T, class Key, class Include, class Count = NoCount>
void mergeInto(const std::vector<std::shared_ptr<const T>>& before, const std::set<std::string>& dirty,
               const std::map<std::string, std::shared_ptr<T>>& table, Key key, Include include,
               std::vector<std::shared_ptr<const T>>& out, Count count = {},
               const std::vector<uint32_t>* beforeCounts = nullptr, std::vector<uint32_t>* counts = nullptr) {
  out.reserve(before.size() + dirty.size());
  if (counts) counts->reserve(before.size() + dirty.size());
  auto copy = [&](auto from, auto to) {
    out.insert(out.end(), from, to);
    if (counts)
      counts->insert(counts->end(), beforeCounts->begin() + (from - before.begin()),
                     beforeCounts->begin() + (to - before.begin()));
  };
  auto b = before.begin();
  for (const std::string& d : dirty) {
    const auto at = std::lower_bound(b, before.end(), d, [&](const auto& e, const std::string& k) { return key(*e) < k; });
    copy(b, at);
    b = at;
    if (b != before.end() && key(**b) == d) ++b;  // replaced (or dropped) below
    auto it = table.find(d);
    if (it != table.end() && include(*it->second)) {
      out.push_back(it->second);
      if (counts) counts->push_back(count(*it->second));
    }
  }
  copy(b, before.end());
}

}  // namespace

std::shared_ptr<const Snapshot> SnapshotBuilder::build(ClusterState& state, api::Time now) {
  auto s = std::make_shared<Snapshot>();
  s->generation = ++generation_;
  s->takenAt = now;
  auto nodeName = [](const NodeInfo& n) -> const std::string& { return n.name; };
  auto jobKey = [](const JobInfo& j) -> const std::string& { return j.key; };
  auto hasNode = [](const NodeInfo& n) { return n.node != nullptr; };
  auto any = [](const JobInfo&) { return true; };
  auto pods = [](const JobInfo& j) { return static_cast<uint32_t>(j.tasks.size()); };
  state.orderDirtyJobs(/*all=*/!last_);
  if (last_) {
    mergeInto(last_->nodes, state.dirtyNodes(), state.nodes(), nodeName, hasNode, s->nodes);
    mergeInto(last_->jobs, state.dirtyJobs(), state.jobs(), jobKey, any, s->jobs, pods, &last_->jobTaskCounts,
              &s->jobTaskCounts);
  } else {
    s->nodes.reserve(state.nodes().size());
    for (const auto& [name, n] : state.nodes())
      if (n->node) s->nodes.push_back(n);
    s->jobs.reserve(state.jobs().size());
    s->jobTaskCounts.reserve(state.jobs().size());
    for (const auto& [key, j] : state.jobs()) {
      s->jobs.push_back(j);
      s->jobTaskCounts.push_back(pods(*j));
    }
  }
  state.clearDirty();
  for (const auto& [name, q] : state.queues()) s->queues.emplace(name, q);
  for (const auto& [name, pool] : state.queuePools())
    if (auto q = s->queues.find(name); q == s->queues.end() || !q->second->queue) s->otherPoolQueues.emplace(name, pool);
  s->priorityClasses = state.priorityClasses();
  s->topologies = state.topologies();
  s->conversionErrors.reserve(state.conversionErrors().size());
  for (const auto& [k, e] : state.conversionErrors()) s->conversionErrors.push_back(e);
  validateSnapshot(*s, last_.get(), validation_);
  last_ = s;
  return s;
}

}  // namespace tessera::cache
