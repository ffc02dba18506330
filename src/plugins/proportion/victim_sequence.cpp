// KAI's victim queue as one total order (victim_sequence.h).
#include "victim_sequence.h"

#include <algorithm>

namespace tessera::plugins::proportion {

void VictimSequence::reset(size_t queues, size_t slots) {
  slots_ = slots;
  nextChunk_ = 0;
  if (seq_.size() < queues) seq_.resize(queues);
  for (auto& s : seq_) s.clear();
  built_.assign(queues, Built{});
  // Only valid_ must start clean: a build writes share_ and amounts_ for every pod it places.
  for (auto& g : share_) g.resize(slots);
  amounts_.resize(slots);
  valid_.assign(slots, 0);
}

std::vector<Share>& VictimSequence::shareAt(size_t depth) {
  while (share_.size() <= depth) share_.emplace_back(slots_);
  return share_[depth];
}

void VictimSequence::build(int top, Source& src) {
  for (const Entry& e : seq_[static_cast<size_t>(top)]) valid_[static_cast<size_t>(e.slot)] = 0;
  buildQueue(top, 0, src);
  for (const Entry& e : seq_[static_cast<size_t>(top)]) valid_[static_cast<size_t>(e.slot)] = 1;
}

void VictimSequence::buildQueue(int q, size_t depth, Source& src) {
  Built& built = built_[static_cast<size_t>(q)];
  const uint64_t version = src.version(q);
  if (built.valid && built.version == version) return;  // its sequence and shares stand
  built = {true, version};
  std::vector<Entry>& out = seq_[static_cast<size_t>(q)];
  out.clear();
  pods_.clear();
  src.ownPods(q, pods_);
  for (const Pod& p : pods_) {
    if (!p.joinsPrevious || out.empty()) ++nextChunk_;
    out.push_back({p.slot, nextChunk_});
    amounts_[static_cast<size_t>(p.slot)] = p.amounts;
  }
  const std::vector<int>& kids = src.children(q);
  for (int c : kids) buildQueue(c, depth + 1, src);
  if (!kids.empty()) {
    // Merge the children: the next chunk comes from the child that gives first once it is gone.
    const std::vector<Share>& below = shareAt(depth + 1);
    auto later = [&](const Head& a, const Head& b) {  // heap order: the child that gives first on top
      const Entry& ea = seq_[static_cast<size_t>(a.child)][a.pos];
      const Entry& eb = seq_[static_cast<size_t>(b.child)][b.pos];
      return src.compareChildren(a.child, below[static_cast<size_t>(ea.slot)], b.child,
                                 below[static_cast<size_t>(eb.slot)]) > 0;
    };
    heads_.clear();
    for (int c : kids)
      if (!seq_[static_cast<size_t>(c)].empty()) heads_.push_back({c, 0});
    std::make_heap(heads_.begin(), heads_.end(), later);
    while (!heads_.empty()) {
      std::pop_heap(heads_.begin(), heads_.end(), later);
      Head& h = heads_.back();
      const std::vector<Entry>& from = seq_[static_cast<size_t>(h.child)];
      const int chunk = from[h.pos].chunk;
      while (h.pos < from.size() && from[h.pos].chunk == chunk) out.push_back(from[h.pos++]);
      if (h.pos < from.size()) std::push_heap(heads_.begin(), heads_.end(), later);
      else heads_.pop_back();
    }
  }
  // The queue's share once it has given everything up to and including each chunk.
  std::vector<Share>& share = shareAt(depth);
  Amounts sum{0, 0, 0};
  for (size_t i = 0; i < out.size();) {
    size_t end = i;
    for (; end < out.size() && out[end].chunk == out[i].chunk; ++end)
      for (int r = 0; r < kResources; ++r) sum[r] += amounts_[static_cast<size_t>(out[end].slot)][r];
    const Share after = src.shareAfter(q, sum);
    for (; i < end; ++i) share[static_cast<size_t>(out[i].slot)] = after;
  }
}

}  // namespace tessera::plugins::proportion
