// framework::splitCarried on its own: what it keeps is sorted and a subsequence of what was carried,
// kept and moved together are what was carried, an item is kept exactly when it compares after
// the one kept before it and before the next (the rule both carried orders rely on), and it makes
// one comparison per item where the carried order holds. Checked against the rule written out
// with two comparisons per item, on random carried orders (sorted, nearly sorted, shuffled).
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "tessera/framework/carried_order.h"

namespace {

using tessera::framework::splitCarried;

/// The rule as both callers stated it before splitCarried: two comparisons per item.
void splitByRule(const std::vector<int>& carried, std::vector<int>& kept, std::vector<int>& moved) {
  for (size_t i = 0; i < carried.size(); ++i) {
    const bool afterKept = kept.empty() || kept.back() < carried[i];
    const bool beforeNext = i + 1 == carried.size() || carried[i] < carried[i + 1];
    (afterKept && beforeNext ? kept : moved).push_back(carried[i]);
  }
}

}  // namespace

TEST_CASE("splitCarried keeps what the rule keeps, sorted, with one comparison per item in order",
          "[carriedorder]") {
  std::mt19937 rng(20261206);
  for (int round = 0; round < 2000; ++round) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 40)(rng);
    std::vector<int> carried(n);
    std::iota(carried.begin(), carried.end(), 0);
    const int shape = round % 3;  // sorted, a few items moved, shuffled
    if (shape == 1 && n > 1)
      for (int k = 0; k < 3; ++k)
        std::swap(carried[std::uniform_int_distribution<size_t>(0, n - 1)(rng)],
                  carried[std::uniform_int_distribution<size_t>(0, n - 1)(rng)]);
    if (shape == 2) std::shuffle(carried.begin(), carried.end(), rng);

    size_t comparisons = 0, asked = 0;
    auto less = [&](int a, int b) {
      ++comparisons;
      return a < b;
    };
    std::vector<int> kept, moved, wantKept, wantMoved;
    splitCarried(carried, less, kept, moved, [&](size_t i) { CHECK(i == asked++); });
    splitByRule(carried, wantKept, wantMoved);
    INFO("round " << round << ", " << n << " items");
    CHECK(asked == n);
    CHECK(kept == wantKept);
    CHECK(moved == wantMoved);
    CHECK(std::is_sorted(kept.begin(), kept.end()));
    CHECK(comparisons <= 2 * n);
    if (shape == 0) CHECK(comparisons == (n == 0 ? 0 : n - 1));  // (the last item has no next)
  }
}
