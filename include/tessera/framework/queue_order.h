#pragma once
/// The order in which queues are served while a cycle allocates, kept true incrementally (KAI's
/// JobsOrderByQueues): a tree of heaps over the queue tree. Every queue with work has a heap of its
/// children that have work; a level compares siblings only (two teams of one department compare as
/// themselves, two departments as departments), with each subtree represented by the leaf it would
/// serve next. After an allocation, the queues whose share changed are marked (touched) and re-ranked
/// in their parents' heaps, deepest first, their ancestors with them: the served queue's sibling is
/// re-ranked through the shared parent without a full re-sort.
/// Single-threaded; a session's actions own one each.
#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::framework {

class QueueOrder {
 public:
  /// Whether sibling queue `a` goes before sibling `b` as things are now: a strict total order.
  /// It may ask best() for the leaf each side would serve.
  using Less = std::function<bool(int a, int b)>;

  /// `parent[q]`: q's parent (index into the same vector), -1 for a top-level queue. Parent cycles
  /// must have been cut by the caller.
  QueueOrder(std::vector<int> parent, Less less);

  /// The queue has jobs of its own to serve (again): it takes part in the order. (A queue with
  /// child queues that has jobs itself is served once its children have no work.)
  void activate(int queue);
  /// The queue has no more jobs of its own.
  void deactivate(int queue);
  /// The queue's share (or the job it would try next) changed: it and its ancestors are re-ranked
  /// at the next fix().
  void touch(int queue);
  /// Re-ranks every touched queue, deepest first: one sift in its parent's heap when it is the only
  /// touched child there, a rebuild of that heap when several are.
  void fix();
  /// The leaf queue to serve next (-1 when none has work). Call fix() first after changes.
  int next() const { return best(root()); }
  /// The leaf a queue's subtree would serve next (-1 when it has no work). `queue` may be root().
  int best(int queue) const;
  /// The virtual root above the top-level queues.
  int root() const { return static_cast<int>(parent_.size()); }
  /// Whether the queue (or the root) has work.
  bool active(int queue) const {
    const Node& n = nodes_[static_cast<size_t>(queue)];
    return n.self || !n.heap.empty();
  }
  /// The children with work of `queue` (or root()), in heap order: heap()[0] goes first.
  const std::vector<int>& heap(int queue) const { return nodes_[static_cast<size_t>(queue)].heap; }
  /// Checks every heap's order (for tests): true when each heap is a valid heap under Less.
  bool valid() const;

 private:
  struct Node {
    std::vector<int> heap;  ///< children with work, a binary min-heap under less_
    int pos = -1;           ///< position in the parent's heap; -1 when not in it
    int depth = 0;          ///< root 0, top-level queues 1
    bool self = false;      ///< has jobs of its own (activate)
    bool touched = false;
    /// Which of heap[1] and heap[2] goes first (1 or 2), kept while neither moves nor is touched;
    /// 0: not known. The served queue is mostly at a heap's top and stays there: re-ranking it
    /// then compares it with the better of its two children, whose own order has not changed.
    int8_t firstChild = 0;
  };
  int parentOf(int q) const { return parent_[static_cast<size_t>(q)] < 0 ? root() : parent_[static_cast<size_t>(q)]; }
  void insert(int q);
  void remove(int q);
  void place(std::vector<int>& h, size_t i, int q);
  void siftUp(std::vector<int>& h, size_t i);
  void siftDown(std::vector<int>& h, size_t i);
  void rebuild(int p);

  std::vector<int> parent_;
  Less less_;
  std::vector<Node> nodes_;     ///< per queue, then the root
  std::vector<int> touched_;    ///< queues marked by touch()
};

}  // namespace tessera::framework
