// KAI's victim queue as one total order (victim_sequence.h).
#include "victim_sequence.h"

#include <algorithm>

namespace tessera::plugins::proportion {

void VictimSequence::reset(size_t queues, size_t slots) {
  nextChunk_ = 0;
  if (seq_.size() < queues) seq_.resize(queues), from_.resize(queues), own_.resize(queues), kidChanged_.resize(queues);
  for (auto& s : seq_) s.clear();
  for (auto& f : from_) f.clear();
  for (auto& o : own_) o.clear();
  for (auto& k : kidChanged_) k.clear();
  built_.assign(queues, Built{});
  merged_.assign(queues, 0);
  mergePending_.assign(queues, 0);
  // Only chunkOf_ must start clean: a build numbers its chunks afresh and writes what is kept per
  // chunk (chunkAmount_, share_, given_) before anything reads it; their storage is kept.
  kidAt_.assign(queues, -1);
  chunkOf_.assign(slots, -1);
  if (chunkAmount_.size() <= slots) growChunks(slots + 1);  // (every pod a chunk of its own: the first builds fit)
}

void VictimSequence::growChunks(size_t n) {
  chunkAmount_.resize(n);
  given_.resize(n);
  for (auto& d : share_) d.resize(n);
}

void VictimSequence::mergeHeads(const std::vector<Share>& below, Source& src, std::vector<Entry>& out,
                                std::vector<int>& from) {
  auto later = [&](const Head& a, const Head& b) {  // heap order: the child that gives first on top
    return src.compareChildren(a.child, below[static_cast<size_t>(seq_[static_cast<size_t>(a.child)][a.pos].chunk)],
                               b.child, below[static_cast<size_t>(seq_[static_cast<size_t>(b.child)][b.pos].chunk)]) > 0;
  };
  if (heads_.size() == 1) {  // (one stream: as it is)
    const std::vector<Entry>& only = seq_[static_cast<size_t>(heads_.front().child)];
    out.insert(out.end(), only.begin(), only.end());
    from.insert(from.end(), only.size(), heads_.front().child);
    heads_.clear();
    return;
  }
  std::make_heap(heads_.begin(), heads_.end(), later);
  while (!heads_.empty()) {
    std::pop_heap(heads_.begin(), heads_.end(), later);
    Head& h = heads_.back();
    const std::vector<Entry>& stream = seq_[static_cast<size_t>(h.child)];
    const int chunk = stream[h.pos].chunk;
    for (; h.pos < stream.size() && stream[h.pos].chunk == chunk; ++h.pos) out.push_back(stream[h.pos]), from.push_back(h.child);
    if (h.pos < stream.size()) std::push_heap(heads_.begin(), heads_.end(), later);
    else heads_.pop_back();
  }
}

void VictimSequence::mergeIntoRest(const std::vector<Share>& below, Source& src, std::vector<Entry>& out,
                                   std::vector<int>& from) {
  using Diff = std::ptrdiff_t;
  // Whether the rest's entry `r` gives before the changed entry `c` (never a tie: the two come
  // from two children).
  auto restFirst = [&](size_t r, size_t c) {
    return src.compareChildren(restFrom_[r], below[static_cast<size_t>(rest_[r].chunk)], changedFrom_[c],
                               below[static_cast<size_t>(changed_[c].chunk)]) < 0;
  };
  size_t r = 0;
  for (size_t c = 0; c < changed_.size();) {
    // The rest's entries from `r` that give before the next changed chunk: a galloping search
    // (steps 1, 2, 4, ...), then a binary one inside the last step. A few comparisons per changed
    // chunk, however many unchanged ones lie between.
    size_t end = r;
    if (r < rest_.size() && restFirst(r, c)) {
      size_t known = r, step = 1, hi = rest_.size();  // restFirst(known); none from hi on
      while (known + step < rest_.size()) {
        if (!restFirst(known + step, c)) {
          hi = known + step;
          break;
        }
        known += step;
        step *= 2;
      }
      end = known + 1;
      while (end < hi) {
        const size_t mid = end + (hi - end) / 2;
        if (restFirst(mid, c)) end = mid + 1;
        else hi = mid;
      }
    }
    out.insert(out.end(), rest_.begin() + static_cast<Diff>(r), rest_.begin() + static_cast<Diff>(end));
    from.insert(from.end(), restFrom_.begin() + static_cast<Diff>(r), restFrom_.begin() + static_cast<Diff>(end));
    r = end;
    const int chunk = changed_[c].chunk;
    for (; c < changed_.size() && changed_[c].chunk == chunk; ++c) out.push_back(changed_[c]), from.push_back(changedFrom_[c]);
  }
  out.insert(out.end(), rest_.begin() + static_cast<Diff>(r), rest_.end());
  from.insert(from.end(), restFrom_.begin() + static_cast<Diff>(r), restFrom_.end());
}

std::vector<Share>& VictimSequence::shareAt(size_t depth) {
  while (share_.size() <= depth) share_.emplace_back(chunkAmount_.size());
  return share_[depth];
}

void VictimSequence::build(int top, Source& src) { buildQueue(top, 0, src, /*defer=*/true); }

void VictimSequence::buildQueue(int q, size_t depth, Source& src, bool defer) {
  const size_t qi = static_cast<size_t>(q);
  Built& built = built_[qi];
  const uint64_t version = src.version(q);
  if (built.valid && built.version == version) return;  // its sequence and shares stand
  built = {true, version};
  const std::vector<int>& kids = src.children(q);
  // The children built again (their subtree changed since), marked until the next merge: the
  // others' chunks keep their order among themselves, so the last merge, without the changed
  // children's chunks, is one sorted stream to merge them into.
  std::vector<uint8_t>& changed = kidChanged_[qi];
  changed.resize(kids.size(), 1);
  for (size_t i = 0; i < kids.size(); ++i) {
    const Built& b = built_[static_cast<size_t>(kids[i])];
    if (!b.valid || b.version != src.version(kids[i])) changed[i] = 1;
  }
  for (int c : kids) buildQueue(c, depth + 1, src);
  // Its own pods, in order: a pod is in a built sequence (chunkOf_) from its queue's build on.
  // Chunks are numbered afresh, in order: what is kept per chunk for a queue's pods lies together.
  std::vector<Entry>& own = own_[qi];
  for (const Entry& e : own) chunkOf_[static_cast<size_t>(e.slot)] = -1;
  own.clear();
  pods_.clear();
  src.ownPods(q, pods_);
  for (const Pod& p : pods_) {
    if (!p.joinsPrevious || own.empty()) newChunk();
    own.push_back({p.slot, nextChunk_});
    Amounts& sum = chunkAmount_[static_cast<size_t>(nextChunk_)];
    for (int r = 0; r < kResources; ++r) sum[r] += p.amounts[r];
    chunkOf_[static_cast<size_t>(p.slot)] = nextChunk_;
  }
  mergePending_[qi] = 1;
  if (!defer) merge(q, depth, src);
}

void VictimSequence::merge(int q, size_t depth, Source& src) {
  const size_t qi = static_cast<size_t>(q);
  mergePending_[qi] = 0;
  const std::vector<int>& kids = src.children(q);
  std::vector<uint8_t>& changed = kidChanged_[qi];
  std::vector<Entry>& out = seq_[qi];
  std::vector<int>& from = from_[qi];
  rest_.clear();
  restFrom_.clear();
  // The first merge takes every child's sequence; later ones, the changed children's and the rest.
  if (!merged_[qi]) {
    std::fill(changed.begin(), changed.end(), 1);
  } else {
    for (size_t k = 0; k < kids.size(); ++k) kidAt_[static_cast<size_t>(kids[k])] = static_cast<int>(k);
    rest_.reserve(out.size());
    restFrom_.reserve(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const int c = from[i];
      if (c < 0) continue;  // the queue's own pods: taken from own_ below
      const int k = kidAt_[static_cast<size_t>(c)];
      if (k >= 0 && !changed[static_cast<size_t>(k)]) rest_.push_back(out[i]), restFrom_.push_back(c);
    }
    for (int c : kids) kidAt_[static_cast<size_t>(c)] = -1;
  }
  merged_[qi] = 1;
  out.assign(own_[qi].begin(), own_[qi].end());
  from.assign(out.size(), -1);
  if (!kids.empty()) {
    // Merge: the next chunk comes from the child that gives first once it is gone. Every stream
    // (a child's sequence, the unchanged children's chunks in their last merged order) is sorted
    // that way: a child's share only falls along its own sequence.
    const std::vector<Share>& below = shareAt(depth + 1);
    heads_.clear();
    for (size_t i = 0; i < kids.size(); ++i)
      if (changed[i] && !seq_[static_cast<size_t>(kids[i])].empty()) heads_.push_back({kids[i], 0});
    if (rest_.empty()) {  // the first merge (or only changed children have pods)
      mergeHeads(below, src, out, from);
    } else {
      // A later merge: the changed children's chunks among themselves (usually one child's), then
      // into the rest, which is copied between them in runs.
      changed_.clear();
      changedFrom_.clear();
      mergeHeads(below, src, changed_, changedFrom_);
      mergeIntoRest(below, src, out, from);
    }
  }
  std::fill(changed.begin(), changed.end(), 0);
  // The queue's share once it has given everything up to and including each chunk (at the top
  // level what it has given, the share computed when asked: shareAtTop).
  std::vector<Share>* share = depth > 0 ? &shareAt(depth) : nullptr;
  Amounts sum{0, 0, 0};
  for (size_t i = 0; i < out.size();) {
    const auto chunk = static_cast<size_t>(out[i].chunk);
    while (++i < out.size() && static_cast<size_t>(out[i].chunk) == chunk) {}
    for (int r = 0; r < kResources; ++r) sum[r] += chunkAmount_[chunk][r];
    if (share) (*share)[chunk] = src.shareAfter(q, sum);
    else given_[chunk] = sum;
  }
}

}  // namespace tessera::plugins::proportion
