// The incremental queue order (queue_order.h): a binary heap per queue over its children with
// work, positions kept so that one child can be re-ranked in O(log n) when its share changes.
#include "tessera/framework/queue_order.h"

#include <algorithm>

#include "tessera/api/result.h"

namespace tessera::framework {

QueueOrder::QueueOrder(std::vector<int> parent, Less less)
    : parent_(std::move(parent)), less_(std::move(less)), nodes_(parent_.size() + 1) {
  for (size_t q = 0; q < parent_.size(); ++q) {
    int d = 1;
    for (int c = parent_[q]; c >= 0; c = parent_[static_cast<size_t>(c)]) {
      ++d;
      TESSERA_ASSERT(d <= static_cast<int>(parent_.size()) + 1);  // no cycles
    }
    nodes_[q].depth = d;
  }
}

int QueueOrder::best(int queue) const {
  for (int q = queue;;) {
    const Node& n = nodes_[static_cast<size_t>(q)];
    if (!n.heap.empty()) {
      q = n.heap.front();
      continue;
    }
    return n.self && q != root() ? q : -1;
  }
}

void QueueOrder::activate(int queue) {
  Node& n = nodes_[static_cast<size_t>(queue)];
  const bool wasActive = active(queue);
  n.self = true;
  if (wasActive) touch(queue);
  else insert(queue);
}

void QueueOrder::deactivate(int queue) {
  Node& n = nodes_[static_cast<size_t>(queue)];
  if (!n.self) return;
  n.self = false;
  if (n.heap.empty()) remove(queue);
  else touch(queue);
}

void QueueOrder::touch(int queue) {
  for (int c = queue; c != root(); c = parentOf(c)) {
    Node& n = nodes_[static_cast<size_t>(c)];
    if (n.touched) break;  // its ancestors were marked with it
    n.touched = true;
    touched_.push_back(c);
  }
}

// insert and remove only link and unlink; the re-ranking they imply (the moved or inserted entry,
// and every ancestor whose best leaf may have changed) is left to fix(), which sees every change
// of a heap at once.
void QueueOrder::insert(int q) {
  const int p = parentOf(q);
  Node& pn = nodes_[static_cast<size_t>(p)];
  pn.firstChild = 0;
  const bool parentWasActive = p == root() || active(p);
  pn.heap.push_back(q);
  nodes_[static_cast<size_t>(q)].pos = static_cast<int>(pn.heap.size()) - 1;
  touch(q);
  if (!parentWasActive) insert(p);
}

void QueueOrder::remove(int q) {
  const int p = parentOf(q);
  Node& pn = nodes_[static_cast<size_t>(p)];
  Node& n = nodes_[static_cast<size_t>(q)];
  TESSERA_ASSERT(n.pos >= 0);
  pn.firstChild = 0;
  const size_t i = static_cast<size_t>(n.pos);
  const int last = pn.heap.back();
  pn.heap.pop_back();
  n.pos = -1;
  if (last != q) {
    place(pn.heap, i, last);
    touch(last);
  }
  if (p == root()) return;
  if (!active(p)) remove(p);
  else touch(p);
}

void QueueOrder::place(std::vector<int>& h, size_t i, int q) {
  h[i] = q;
  nodes_[static_cast<size_t>(q)].pos = static_cast<int>(i);
  if (i == 1 || i == 2) nodes_[static_cast<size_t>(parentOf(q))].firstChild = 0;  // (q's parent owns h)
}

void QueueOrder::siftUp(std::vector<int>& h, size_t i) {
  const int q = h[i];
  while (i > 0) {
    const size_t up = (i - 1) / 2;
    if (!less_(q, h[up])) break;
    place(h, i, h[up]);
    i = up;
  }
  place(h, i, q);
}

void QueueOrder::siftDown(std::vector<int>& h, size_t i) {
  const int q = h[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h.size()) break;
    if (c + 1 < h.size()) {
      if (i == 0) {  // the top's two children: their order is kept (Node::firstChild)
        int8_t& first = nodes_[static_cast<size_t>(parentOf(q))].firstChild;
        if (first == 0) first = less_(h[2], h[1]) ? 2 : 1;
        c = static_cast<size_t>(first);
      } else if (less_(h[c + 1], h[c])) {
        ++c;
      }
    }
    if (!less_(h[c], q)) break;
    place(h, i, h[c]);
    i = c;
  }
  place(h, i, q);
}

void QueueOrder::rebuild(int p) {
  std::vector<int>& h = nodes_[static_cast<size_t>(p)].heap;
  for (size_t i = h.size() / 2; i-- > 0;) siftDown(h, i);
}

void QueueOrder::fix() {
  if (touched_.empty()) return;
  // Deepest first, grouped by parent: a parent is re-ranked after all its touched children, so
  // the leaf each of its children stands for is known.
  std::sort(touched_.begin(), touched_.end(), [&](int a, int b) {
    const int da = nodes_[static_cast<size_t>(a)].depth, db = nodes_[static_cast<size_t>(b)].depth;
    if (da != db) return da > db;
    const int pa = parentOf(a), pb = parentOf(b);
    return pa != pb ? pa < pb : a < b;
  });
  for (size_t i = 0; i < touched_.size();) {
    const int p = parentOf(touched_[i]);
    size_t j = i;
    int inHeap = 0, one = -1;
    for (; j < touched_.size() && parentOf(touched_[j]) == p &&
           nodes_[static_cast<size_t>(touched_[j])].depth == nodes_[static_cast<size_t>(touched_[i])].depth;
         ++j) {
      Node& n = nodes_[static_cast<size_t>(touched_[j])];
      n.touched = false;
      if (n.pos >= 0) ++inHeap, one = touched_[j];
      if (n.pos == 1 || n.pos == 2) nodes_[static_cast<size_t>(p)].firstChild = 0;  // its rank may have moved
    }
    std::vector<int>& h = nodes_[static_cast<size_t>(p)].heap;
    if (inHeap == 1) {
      const size_t at = static_cast<size_t>(nodes_[static_cast<size_t>(one)].pos);
      siftUp(h, at);
      siftDown(h, static_cast<size_t>(nodes_[static_cast<size_t>(one)].pos));
    } else if (inHeap > 1) {
      rebuild(p);
    }
    i = j;
  }
  touched_.clear();
}

bool QueueOrder::valid() const {
  for (const Node& n : nodes_) {
    for (size_t i = 1; i < n.heap.size(); ++i)
      if (less_(n.heap[i], n.heap[(i - 1) / 2])) return false;
    for (size_t i = 0; i < n.heap.size(); ++i)
      if (nodes_[static_cast<size_t>(n.heap[i])].pos != static_cast<int>(i)) return false;
  }
  return true;
}

}  // namespace tessera::framework
