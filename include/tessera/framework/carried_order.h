#pragma once
/// An order carried from the last session, checked rather than trusted: Session::jobsInOrder (the
/// job order) and the proportion plugin's victim order of a queue's own pods both start a session
/// from the order the last one left, most of whose items did not change since.
#include <cstddef>
#include <vector>

namespace tessera::framework {

/// Splits `carried` (an order that held once) into the items that still hold their place, each
/// after the one kept before it and before the next (`kept`, sorted by `less` whatever was
/// carried), and the others (`moved`, in carried order: the caller sorts them in). A kept item was
/// compared with the next one already, so that comparison is not made again: one comparison per
/// item where the carried order holds, two where it does not. `ahead(i)` is called before item i
/// is compared (to ask memory for the items a few places on).
template <typename T, typename Less, typename Ahead>
void splitCarried(const std::vector<T>& carried, const Less& less, std::vector<T>& kept, std::vector<T>& moved,
                  const Ahead& ahead) {
  bool prevKept = false;  // carried[i - 1] was kept: it is kept.back(), and goes before carried[i]
  for (size_t i = 0; i < carried.size(); ++i) {
    ahead(i);
    const bool afterKept = kept.empty() || prevKept || less(kept.back(), carried[i]);
    const bool beforeNext = i + 1 == carried.size() || less(carried[i], carried[i + 1]);
    prevKept = afterKept && beforeNext;
    (prevKept ? kept : moved).push_back(carried[i]);
  }
}

}  // namespace tessera::framework
