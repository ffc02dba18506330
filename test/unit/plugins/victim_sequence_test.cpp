// The victim sequence (src/plugins/proportion/victim_sequence.h) built incrementally gives the
// shares a build from scratch gives. Over random queue forests whose pods change between builds: a
// build rebuilds only the changed subtrees and merges them into the last merge of the others, and a
// top-level queue's own merge waits until a depth-0 share is asked, possibly several builds later
// and after the pods changed again. Every share asked must be what a fresh VictimSequence, built
// at the moment of that incremental build, gives. Sessions end at random (reset: storage kept).
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plugins/proportion/victim_sequence.h"
#include "support/splitmix.h"

namespace tessera::plugins::proportion {
namespace {

using Rng = tessera::testing::SplitMix64;
constexpr int kSlotsPerQueue = 6;

/// A queue forest and its pods, as the proportion plugin's Source would show them.
class Forest final : public VictimSequence::Source {
 public:
  struct Queue {
    int parent = -1;
    std::vector<int> children;
    std::vector<VictimSequence::Pod> pods;
    uint64_t version = 1;
    int64_t allocated = 0, fair = 1;
    int64_t seen = 0;  ///< `allocated` as the last ownPods() saw it (the plugin's sequenceSnap_)
  };
  std::vector<Queue> q;
  std::vector<int> tops;

  explicit Forest(Rng& rng) {
    const int nTops = 1 + static_cast<int>(rng.below(3));
    for (int t = 0; t < nTops; ++t) {
      const int top = add(-1, rng);
      tops.push_back(top);
      const int kids = static_cast<int>(rng.below(4));
      for (int k = 0; k < kids; ++k) {
        const int kid = add(top, rng);
        const int grand = static_cast<int>(rng.below(3));
        for (int g = 0; g < grand; ++g) add(kid, rng);
      }
    }
    for (size_t i = 0; i < q.size(); ++i) repopulate(static_cast<int>(i), rng);
  }
  size_t slots() const { return q.size() * kSlotsPerQueue; }
  int topOf(int queue) const {
    while (q[static_cast<size_t>(queue)].parent >= 0) queue = q[static_cast<size_t>(queue)].parent;
    return queue;
  }
  int depthOf(int queue) const {
    int d = 0;
    while (q[static_cast<size_t>(queue)].parent >= 0) queue = q[static_cast<size_t>(queue)].parent, ++d;
    return d;
  }
  /// New pods (a random subset of the queue's slots, in random order) and allocation; the queue
  /// and its ancestors change version.
  void repopulate(int queue, Rng& rng) {
    Queue& x = q[static_cast<size_t>(queue)];
    std::vector<int> mine;
    for (int s = 0; s < kSlotsPerQueue; ++s)
      if (rng.below(3) != 0) mine.push_back(queue * kSlotsPerQueue + s);
    for (size_t i = mine.size(); i > 1; --i) std::swap(mine[i - 1], mine[static_cast<size_t>(rng.below(static_cast<int64_t>(i)))]);
    x.pods.clear();
    for (int s : mine)
      x.pods.push_back({s, !x.pods.empty() && rng.below(3) == 0,
                        {static_cast<int64_t>(rng.below(4)), static_cast<int64_t>(rng.below(4)), 0}});
    x.allocated = static_cast<int64_t>(rng.below(40));
    for (int c = queue; c >= 0; c = q[static_cast<size_t>(c)].parent) ++q[static_cast<size_t>(c)].version;
  }

  void ownPods(int queue, std::vector<VictimSequence::Pod>& out) override {
    Queue& x = q[static_cast<size_t>(queue)];
    x.seen = x.allocated;
    out.insert(out.end(), x.pods.begin(), x.pods.end());
  }
  const std::vector<int>& children(int queue) const override { return q[static_cast<size_t>(queue)].children; }
  uint64_t version(int queue) const override { return q[static_cast<size_t>(queue)].version; }
  Share shareAfter(int queue, const Amounts& given) const override {
    const Queue& x = q[static_cast<size_t>(queue)];
    return {x.seen - given[0] - given[1], x.fair};
  }
  int compareChildren(int a, const Share& sa, int b, const Share& sb) const override {
    const __int128 l = static_cast<__int128>(sa.num) * sb.den, r = static_cast<__int128>(sb.num) * sa.den;
    if (l != r) return l > r ? -1 : 1;  // the larger share gives first
    return a < b ? -1 : 1;
  }

 private:
  int add(int parent, Rng& rng) {
    const int id = static_cast<int>(q.size());
    q.push_back({});
    q.back().parent = parent;
    q.back().fair = 1 + static_cast<int64_t>(rng.below(9));
    if (parent >= 0) q[static_cast<size_t>(parent)].children.push_back(id);
    return id;
  }
};

/// The share of `slot` at depth `d` (at the top level: shareAtTop, which merges first).
std::optional<Share> shareOf(VictimSequence& seq, int slot, int d, int top, VictimSequence::Source& src) {
  if (d == 0) return seq.shareAtTop(slot, top, src);
  const Share* sh = seq.share(slot, d);
  return sh ? std::optional<Share>(*sh) : std::nullopt;
}

/// A top-level queue's whole sequence: its slots in order, each -1 - slot where a chunk begins
/// (chunk numbers differ between builds; where chunks begin does not).
std::vector<int> orderOf(VictimSequence& seq, int top, VictimSequence::Source& src) {
  std::vector<int> out;
  const std::vector<VictimSequence::Entry>& entries = seq.sequenceOf(top, src);
  for (size_t i = 0; i < entries.size(); ++i)
    out.push_back(i == 0 || entries[i].chunk != entries[i - 1].chunk ? -1 - entries[i].slot : entries[i].slot);
  return out;
}

using Shares = std::map<std::pair<int, int>, std::pair<bool, std::pair<int64_t, int64_t>>>;

/// Every (slot, depth) share of `top`'s pods, as a build from scratch gives them now (null: none),
/// and its whole sequence (orderOf).
std::pair<Shares, std::vector<int>> fresh(Forest& f, int top) {
  Shares out;
  // ownPods() records what it saw: a fresh build must not move that (the incremental one's
  // deferred merge reads it), so it runs on a copy.
  Forest copy = f;
  VictimSequence seq;
  seq.reset(copy.q.size(), copy.slots());
  seq.build(top, copy);
  for (size_t queue = 0; queue < copy.q.size(); ++queue) {
    if (copy.topOf(static_cast<int>(queue)) != top) continue;
    for (int s = 0; s < kSlotsPerQueue; ++s) {
      const int slot = static_cast<int>(queue) * kSlotsPerQueue + s;
      for (int d = 0; d <= copy.depthOf(static_cast<int>(queue)); ++d) {
        const std::optional<Share> sh = shareOf(seq, slot, d, top, copy);
        out[{slot, d}] = {sh.has_value(), sh ? std::make_pair(sh->num, sh->den) : std::make_pair(int64_t{0}, int64_t{0})};
      }
    }
  }
  return {out, orderOf(seq, top, copy)};
}

TEST_CASE("victim sequence: incremental builds and a deferred top-level merge give a fresh build's shares") {
  const int cases = 3000;
  int compared = 0;
  for (int c = 0; c < cases; ++c) {
    Rng rng{static_cast<uint64_t>(c) * 7919 + 17};
    Forest f(rng);
    VictimSequence seq;
    seq.reset(f.q.size(), f.slots());
    // Per top: what a fresh build gave at its last incremental build.
    std::map<int, std::pair<Shares, std::vector<int>>> expected;
    for (int step = 0; step < 30; ++step) {
      const uint64_t what = rng.below(4);
      if (rng.below(25) == 0) {  // a new session: storage kept, nothing built
        seq.reset(f.q.size(), f.slots());
        expected.clear();
        continue;
      }
      if (what == 0) {  // pods change (not built yet)
        f.repopulate(static_cast<int>(rng.below(static_cast<int64_t>(f.q.size()))), rng);
      } else if (what == 1) {  // a top is built (its merge waits)
        const int top = f.tops[static_cast<size_t>(rng.below(static_cast<int64_t>(f.tops.size())))];
        expected[top] = fresh(f, top);
        seq.build(top, f);
      } else {  // shares asked of a built top, at a random depth (0 merges it)
        const int top = f.tops[static_cast<size_t>(rng.below(static_cast<int64_t>(f.tops.size())))];
        if (!expected.count(top)) continue;
        if (what == 3) {  // the whole sequence (merged first if it waits)
          ++compared;
          if (orderOf(seq, top, f) != expected[top].second) FAIL("case " << c << " step " << step << " top " << top << ": sequence");
        }
        for (const auto& [key, want] : expected[top].first) {
          const auto [slot, d] = key;
          if (what == 2 && d == 0) continue;  // depth 0 untouched: the merge stays pending
          ++compared;
          const std::optional<Share> sh = shareOf(seq, slot, d, top, f);
          const bool same = sh.has_value() == want.first &&
                            (!sh || (sh->num == want.second.first && sh->den == want.second.second));
          if (!same)
            FAIL("case " << c << " step " << step << " top " << top << " slot " << slot << " depth " << d << ": "
                         << (sh ? std::to_string(sh->num) + "/" + std::to_string(sh->den) : "none") << ", fresh "
                         << (want.first ? std::to_string(want.second.first) + "/" + std::to_string(want.second.second)
                                        : "none"));
        }
      }
    }
  }
  CHECK(compared > 100000);  // the cases did compare (most trees have pods and built tops)
}

}  // namespace
}  // namespace tessera::plugins::proportion
