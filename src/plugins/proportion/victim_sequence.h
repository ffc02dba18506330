#pragma once
// KAI's victim queue as one total order of running pods (internal to the proportion plugin).
//
// KAI pops victims from a sequence built level by level: at each parent, the child queue whose
// share is largest once its next chunk (a surplus pod, or a job at its minimum whole) is gone gives
// next, its share counting every chunk it gave before. Comparing two victims pairwise, each with
// only its own chunk gone, is not transitive across levels of a tree (x < y < z < x happens), so
// Tessera builds the sequence instead and compares positions in it.
//
// The sequence of a queue: its own pods first (in the queue's victim order, a chunk's pods
// adjacent), then its children's sequences merged by that rule. Since a child's share only falls
// along its own sequence, the merge at a parent is a sort by "what the child holds once everything
// it gave up to this chunk is gone", and two victims whose queues differ compare, at the children of
// their lowest common ancestor, by that share: `share(slot, depth)`, computed once per build. A
// top-level queue's subtree is built on demand; of it, only the queues whose subtree changed since
// (Source::version) are built again, and a parent merges only its changed children's sequences
// into its last merge of the others (their order among themselves stands).
#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/plugins/proportion.h"

namespace tessera::plugins::proportion {

/// A dominant share num / den (den 0: infinite), as the plugin computes it.
struct Share {
  int64_t num = 0, den = 1;
};

class VictimSequence {
 public:
  /// One pod of a queue, in the queue's own victim order.
  struct Pod {
    int slot = -1;                ///< the caller's number for the pod (below `slots` of reset())
    bool joinsPrevious = false;   ///< same chunk as the pod before it (a job at its minimum)
    Amounts amounts{0, 0, 0};     ///< what it gives back (0 for a pod that is never a victim)
  };
  /// What a build asks of the plugin.
  class Source {
   public:
    virtual ~Source() = default;
    /// Appends queue `q`'s own pods (those of its jobs, not its children's) in victim order.
    virtual void ownPods(int q, std::vector<Pod>& out) = 0;
    virtual const std::vector<int>& children(int q) const = 0;
    /// Changes whenever anything in `q`'s subtree does (its pods, their states, its allocation):
    /// a subtree whose version stands is not built again.
    virtual uint64_t version(int q) const = 0;
    /// Queue `q`'s dominant share once it has given `given`.
    virtual Share shareAfter(int q, const Amounts& given) const = 0;
    /// <0 when child `a` of a parent, at share `sa` (shareAfter), gives before its sibling `b` at
    /// share `sb` (a strict total order on the siblings for fixed shares).
    virtual int compareChildren(int a, const Share& sa, int b, const Share& sb) const = 0;
  };

  /// For a new session: `queues` queues, pods numbered below `slots`. Storage is kept.
  void reset(size_t queues, size_t slots);
  /// Builds the sequence of top-level queue `top`'s subtree (replacing its last one); the top
  /// queue's own merge waits for shareAtTop.
  void build(int top, Source& src);
  /// The share of the ancestor at `depth` (1 or more: below the top level) of `slot`'s queue once
  /// it has given everything in its own sequence up to and including the slot's chunk; null when
  /// the slot is in no built sequence. At the top level: shareAtTop.
  const Share* share(int slot, int depth) const {
    const int chunk = chunkOf(slot);
    if (depth < 1 || chunk < 0 || static_cast<size_t>(depth) >= share_.size()) return nullptr;
    return &share_[static_cast<size_t>(depth)][static_cast<size_t>(chunk)];
  }
  /// The same at the top level, for a pod under top-level queue `top` (none when the slot is in no
  /// built sequence), merging `top`'s sequence first if its last build left that to now (`src` as
  /// that build's). Computed when asked from what the tree has given up to the slot's chunk: a
  /// tree's merge is redone after each change below it, and most of its shares are never asked
  /// (the top level compares the victims of two trees only).
  std::optional<Share> shareAtTop(int slot, int top, Source& src) {
    if (mergePending_[static_cast<size_t>(top)]) merge(top, 0, src);
    const int chunk = chunkOf(slot);
    if (chunk < 0) return std::nullopt;
    return src.shareAfter(top, given_[static_cast<size_t>(chunk)]);
  }
  /// One pod in a sequence: its slot and its chunk (pods of one chunk are adjacent).
  struct Entry {
    int slot;
    int chunk;
  };
  /// Top-level queue `top`'s whole sequence, built (build()) and merged first if it waits for that.
  const std::vector<Entry>& sequenceOf(int top, Source& src) {
    if (mergePending_[static_cast<size_t>(top)]) merge(top, 0, src);
    return seq_[static_cast<size_t>(top)];
  }

 private:
  /// The chunk `slot` is in, in a built sequence (-1: none).
  int chunkOf(int slot) const {
    const size_t s = static_cast<size_t>(slot);
    return s < chunkOf_.size() ? chunkOf_[s] : -1;
  }
  /// Numbers the next chunk (nextChunk_), with room for what is kept of it, its amounts at zero.
  void newChunk() {
    if (static_cast<size_t>(++nextChunk_) >= chunkAmount_.size()) growChunks(2 * static_cast<size_t>(nextChunk_));
    chunkAmount_[static_cast<size_t>(nextChunk_)] = {0, 0, 0};
  }
  void growChunks(size_t n);
  /// Builds queue `q` at `depth`: its children, its own pods, then (not for `defer`) its merge.
  void buildQueue(int q, size_t depth, Source& src, bool defer = false);
  /// `q`'s sequence from its own pods and its children's sequences, and its shares at `depth`.
  void merge(int q, size_t depth, Source& src);
  /// Appends the chunks of the streams in heads_ (children's sequences), merged; empties heads_.
  void mergeHeads(const std::vector<Share>& below, Source& src, std::vector<Entry>& out, std::vector<int>& from);
  /// Appends changed_ (the changed children's chunks, merged) and rest_, merged.
  void mergeIntoRest(const std::vector<Share>& below, Source& src, std::vector<Entry>& out, std::vector<int>& from);
  std::vector<Share>& shareAt(size_t depth);

  int nextChunk_ = 0;
  std::vector<std::vector<Entry>> seq_;    ///< per queue: its subtree's pods, in sequence
  std::vector<std::vector<int>> from_;     ///< per queue, per seq_ entry: the child it came from (-1: own)
  std::vector<std::vector<Entry>> own_;    ///< per queue: its own pods, in order, as its last build saw them
  struct Built {
    bool valid = false;
    uint64_t version = 0;
  };
  std::vector<Built> built_;               ///< per queue: when it was last built
  std::vector<uint8_t> merged_;            ///< per queue: seq_ and from_ hold a merge (its last or an earlier build's)
  std::vector<uint8_t> mergePending_;      ///< per queue: built since its last merge
  /// Per queue, per child (as children() lists them): the child was built again since the last merge.
  std::vector<std::vector<uint8_t>> kidChanged_;
  // Kept per chunk (numbered in sequence order within each queue's build: what a merge reads and
  // writes of a queue's chunks lies together, not scattered by pod), and the chunk of each slot.
  std::vector<std::vector<Share>> share_;  ///< per depth (0 unused), per chunk (share())
  std::vector<Amounts> given_;             ///< per chunk: what its top-level tree gives up to it (shareAtTop)
  std::vector<Amounts> chunkAmount_;       ///< per chunk: what its pods give back
  std::vector<int32_t> chunkOf_;           ///< per slot: its chunk in a built sequence, -1 for none
  std::vector<Pod> pods_;                  ///< ownPods() buffer
  struct Head {
    int child;
    size_t pos;
  };
  std::vector<Head> heads_;
  std::vector<Entry> rest_;       ///< merge(): the last merge's chunks of unchanged children
  std::vector<int> restFrom_;     ///< their children
  std::vector<Entry> changed_;    ///< merge(): the changed children's chunks, merged
  std::vector<int> changedFrom_;  ///< their children
  std::vector<int> kidAt_;        ///< merge(): per queue, its place among the children merged (-1: none)
};

}  // namespace tessera::plugins::proportion
