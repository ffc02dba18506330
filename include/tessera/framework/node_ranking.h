#pragma once
/// Incremental node rankings over a session's changing nodes, shared by Session::findPlacement
/// and the victim search of preempt / reclaim / consolidate.
///
/// Every change of a node's working state bumps the node's version and appends the node to a
/// change log (NodeChangeLog, owned by the session). A NodeRanking is a heap of nodes evaluated
/// for one kind of request, best on top; before each use it re-evaluates only the nodes logged
/// since its last use, and it drops an entry whose node changed after it was evaluated when that
/// entry reaches the top. A burst of alike requests then costs O(changes · log n) each instead of
/// a scan of every node. What "evaluated" and "best" mean is the caller's: the ranking only keeps
/// the entries current.
/// Single-threaded, like the session.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::framework {

/// Per node a version, bumped on every change, and the log of changes in order.
class NodeChangeLog {
 public:
  /// `nodes` nodes, all at version 0; the log empty.
  void reset(size_t nodes) {
    version_.assign(nodes, 0);
    changes_.clear();
  }
  /// Records a change of `node`.
  void touch(int node) {
    ++version_[node];
    changes_.push_back(node);
  }
  uint32_t version(int node) const { return version_[node]; }
  /// Node indices in change order; a node appears once per change.
  const std::vector<int>& changes() const { return changes_; }
  /// How many changes were logged: equal sizes at two moments mean nothing changed between them.
  size_t size() const { return changes_.size(); }
  /// Calls `f(node)` once for each node changed since log position `from`, in the order of their
  /// first change there. A node changed many times (a trial's evictions, placements and their
  /// undoing) is visited once: whoever evaluates it reads its current state. `f` may visit the log
  /// itself (each visit has its own marks; a node may then be visited twice, never skipped).
  template <class F>
  void forEachChangedSince(size_t from, F&& f) const {
    if (mark_.size() != version_.size()) mark_.assign(version_.size(), 0);
    if (++marks_ == 0) std::fill(mark_.begin(), mark_.end(), 0), marks_ = 1;
    const uint32_t mine = marks_;
    for (size_t i = from; i < changes_.size(); ++i) {
      const int node = changes_[i];
      if (mark_[static_cast<size_t>(node)] == mine) continue;
      mark_[static_cast<size_t>(node)] = mine;
      f(node);
    }
  }

 private:
  std::vector<uint32_t> version_;
  std::vector<int> changes_;
  mutable std::vector<uint32_t> mark_;  ///< forEachChangedSince: the visit that last saw each node
  mutable uint32_t marks_ = 0;
};

/// A heap of node evaluations kept current against a NodeChangeLog.
/// `Entry` has `int node` and `uint32_t version` (the node's version when it was evaluated);
/// `Before(a, b)` is a strict weak order, true when `a` ranks better than `b`. A node may have
/// several entries (one per evaluation); only those of its current version count.
template <class Entry, class Before>
class NodeRanking {
 public:
  explicit NodeRanking(Before before = Before()) : before_(std::move(before)) {}

  /// Starts the ranking from `entries` (any order), evaluated against the log as it is now:
  /// every change logged so far counts as seen.
  void assign(std::vector<Entry> entries, const NodeChangeLog& log) {
    heap_ = std::move(entries);
    std::make_heap(heap_.begin(), heap_.end(), worse());
    seen_ = log.size();
  }

  /// Adds an entry the caller evaluated just now (stamped with its node's current version).
  void add(const Entry& e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), worse());
  }

  /// Folds in the changes logged since the last assign / refresh: `evaluate(int node)` returns the
  /// node's new entry (stamped with its current version), or an empty optional when the node no
  /// longer qualifies. Called once per node changed since, in the order of their first change.
  template <class Evaluate>
  void refresh(const NodeChangeLog& log, Evaluate&& evaluate) {
    log.forEachChangedSince(seen_, [&](int node) {
      if (auto e = evaluate(node)) {
        heap_.push_back(*e);
        std::push_heap(heap_.begin(), heap_.end(), worse());
      }
    });
    seen_ = log.size();
  }

  /// The best current entry (stale entries on top are dropped on the way), or null when none is.
  /// Valid until the ranking is next changed.
  const Entry* top(const NodeChangeLog& log) {
    while (!heap_.empty() && stale(heap_.front(), log)) pop();
    return heap_.empty() ? nullptr : &heap_.front();
  }

  /// Evaluates `nodes` again although they did not change (what the caller's order depends on
  /// moved there), with the nodes changed since the last assign / refresh (each node once), and
  /// rebuilds the heap from the current entries: the old entries of those nodes and every stale
  /// entry are dropped, so no entry evaluated under the old order stays in it.
  template <class Evaluate>
  void reevaluate(std::vector<int>&& nodes, const NodeChangeLog& log, Evaluate&& evaluate) {
    reevaluate(nodes, log, std::forward<Evaluate>(evaluate));
  }
  /// The same with the caller's vector as scratch (the nodes changed since are added to it, and
  /// it is sorted): a caller that keeps it allocates nothing.
  template <class Evaluate>
  void reevaluate(std::vector<int>& nodes, const NodeChangeLog& log, Evaluate&& evaluate) {
    log.forEachChangedSince(seen_, [&](int node) { nodes.push_back(node); });
    seen_ = log.size();
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    std::erase_if(heap_, [&](const Entry& e) {
      return stale(e, log) || std::binary_search(nodes.begin(), nodes.end(), e.node);
    });
    for (int n : nodes)
      if (auto e = evaluate(n)) heap_.push_back(*e);
    std::make_heap(heap_.begin(), heap_.end(), worse());
  }

  /// Up to `max` current entries of distinct nodes, best first (stale entries are dropped on the
  /// way). They stay in the ranking: they remain valid until their nodes change.
  std::vector<Entry> best(size_t max, const NodeChangeLog& log) {
    std::vector<Entry> out;
    best(max, log, out);
    return out;
  }
  /// best() into `out` (its storage reused).
  void best(size_t max, const NodeChangeLog& log, std::vector<Entry>& out) {
    out.clear();
    out.reserve(std::min(max, heap_.size()));
    while (!heap_.empty() && out.size() < max) {
      const Entry e = pop();
      if (stale(e, log)) continue;
      if (std::any_of(out.begin(), out.end(), [&](const Entry& o) { return o.node == e.node; })) continue;
      out.push_back(e);
    }
    for (const Entry& e : out) {
      heap_.push_back(e);
      std::push_heap(heap_.begin(), heap_.end(), worse());
    }
  }

  /// Entries held, stale ones included (for tests).
  size_t size() const { return heap_.size(); }

 private:
  /// The heap's comparator: "a is worse than b", so the best entry is on top.
  auto worse() const {
    return [this](const Entry& a, const Entry& b) { return before_(b, a); };
  }
  static bool stale(const Entry& e, const NodeChangeLog& log) { return e.version != log.version(e.node); }
  Entry pop() {
    std::pop_heap(heap_.begin(), heap_.end(), worse());
    Entry e = heap_.back();
    heap_.pop_back();
    return e;
  }

  Before before_;
  std::vector<Entry> heap_;  ///< std heap under worse()
  size_t seen_ = 0;          ///< prefix of the change log already folded in
};

}  // namespace tessera::framework
