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
/// `include` says whether an entry belongs in the list.
template <class T, class Key, class Include>
void mergeInto(const std::vector<std::shared_ptr<const T>>& before, const std::set<std::string>& dirty,
               const std::map<std::string, std::shared_ptr<T>>& table, Key key, Include include,
               std::vector<std::shared_ptr<const T>>& out) {
  out.reserve(before.size() + dirty.size());
  auto b = before.begin();
  for (const std::string& d : dirty) {
    const auto at = std::lower_bound(b, before.end(), d, [&](const auto& e, const std::string& k) { return key(*e) < k; });
    out.insert(out.end(), b, at);
    b = at;
    if (b != before.end() && key(**b) == d) ++b;  // replaced (or dropped) below
    auto it = table.find(d);
    if (it != table.end() && include(*it->second)) out.push_back(it->second);
  }
  out.insert(out.end(), b, before.end());
}

/// Jobs per chunk of a snapshot's job list (JobList): a chunk with a changed job is made anew.
constexpr size_t kChunkJobs = 256;

/// Appends `jobs` (with their pod counts) to the snapshot as one chunk, or as several of about
/// kChunkJobs when it grew past twice that; nothing when empty.
void appendChunks(JobList::Chunk&& jobs, const uint32_t* counts, Snapshot& s) {
  const size_t n = jobs.size();
  const size_t pieces = n <= 2 * kChunkJobs ? 1 : (n + kChunkJobs - 1) / kChunkJobs;
  for (size_t p = 0, from = 0; p < pieces && from < n; ++p) {
    const size_t to = n * (p + 1) / pieces;
    if (pieces == 1) {
      s.jobs.appendChunk(std::make_shared<const JobList::Chunk>(std::move(jobs)));
    } else {
      s.jobs.appendChunk(std::make_shared<const JobList::Chunk>(
          std::make_move_iterator(jobs.begin() + static_cast<std::ptrdiff_t>(from)),
          std::make_move_iterator(jobs.begin() + static_cast<std::ptrdiff_t>(to))));
    }
    s.jobTaskCounts.insert(s.jobTaskCounts.end(), counts + from, counts + to);
    from = to;
  }
}

/// The jobs of the next snapshot from the last one's: each chunk none of whose keys is dirty is
/// shared as it is (its jobs' entries are not touched at all), each other one is made anew with
/// its dirty keys re-read from `table` (found in it by binary search). A dirty key belongs to the
/// chunk whose key range it falls in: before the next chunk's first key (the first chunk also
/// takes the keys before its own, the last those after).
void mergeJobs(const Snapshot& last, const std::set<std::string>& dirty, const ClusterState::Jobs& table, Snapshot& s) {
  const auto& chunks = last.jobs.chunks();
  s.jobs.reserve(last.jobs.size() + dirty.size());
  s.jobTaskCounts.reserve(last.jobs.size() + dirty.size());
  auto d = dirty.begin();
  size_t offset = 0;  // of chunk k in last.jobs
  JobList::Chunk fresh;
  std::vector<uint32_t> freshCounts;
  const JobList::Chunk none;  // (the last snapshot had no job)
  for (size_t k = 0; k < chunks.size() || (k == 0 && d != dirty.end()); ++k) {
    const JobList::Chunk& old = k < chunks.size() ? *chunks[k] : none;
    auto upTo = d;  // past this chunk's dirty keys
    if (k + 1 < chunks.size()) {
      const std::string& next = chunks[k + 1]->front()->key;
      while (upTo != dirty.end() && *upTo < next) ++upTo;
    } else {
      upTo = dirty.end();
    }
    const uint32_t* oldCounts = last.jobTaskCounts.data() + offset;
    offset += old.size();
    if (upTo == d) {  // unchanged: shared
      s.jobs.appendChunk(chunks[k]);
      s.jobTaskCounts.insert(s.jobTaskCounts.end(), oldCounts, oldCounts + old.size());
      continue;
    }
    fresh.clear();
    freshCounts.clear();
    auto b = old.begin();
    auto keep = [&](JobList::Chunk::const_iterator to) {
      fresh.insert(fresh.end(), b, to);
      freshCounts.insert(freshCounts.end(), oldCounts + (b - old.begin()), oldCounts + (to - old.begin()));
      b = to;
    };
    for (; d != upTo; ++d) {
      keep(std::lower_bound(b, old.end(), *d, [](const auto& e, const std::string& key) { return e->key < key; }));
      if (b != old.end() && (*b)->key == *d) ++b;  // replaced (or dropped) below
      if (auto it = table.find(*d); it != table.end()) {
        fresh.push_back(it->second);
        freshCounts.push_back(static_cast<uint32_t>(it->second->tasks.size()));
      }
    }
    keep(old.end());
    appendChunks(std::move(fresh), freshCounts.data(), s);
    fresh = JobList::Chunk();
  }
}

}  // namespace

std::shared_ptr<const Snapshot> SnapshotBuilder::build(ClusterState& state, api::Time now) {
  auto s = std::make_shared<Snapshot>();
  s->generation = ++generation_;
  s->takenAt = now;
  auto nodeName = [](const NodeInfo& n) -> const std::string& { return n.name; };
  auto hasNode = [](const NodeInfo& n) { return n.node != nullptr; };
  state.orderDirtyJobs(/*all=*/!last_);
  if (last_) {
    mergeInto(last_->nodes, state.dirtyNodes(), state.nodes(), nodeName, hasNode, s->nodes);
    mergeJobs(*last_, state.dirtyJobs(), state.jobs(), *s);
  } else {
    s->nodes.reserve(state.nodes().size());
    for (const auto& [name, n] : state.nodes())
      if (n->node) s->nodes.push_back(n);
    s->jobs.reserve(state.jobs().size());
    s->jobTaskCounts.reserve(state.jobs().size());
    JobList::Chunk chunk;
    std::vector<uint32_t> counts;
    for (const auto& [key, j] : state.jobs()) {
      chunk.push_back(j);
      counts.push_back(static_cast<uint32_t>(j->tasks.size()));
      if (chunk.size() == kChunkJobs) {
        appendChunks(std::move(chunk), counts.data(), *s);
        chunk = JobList::Chunk(), counts.clear();
      }
    }
    appendChunks(std::move(chunk), counts.data(), *s);
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
