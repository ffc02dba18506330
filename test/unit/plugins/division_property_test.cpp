// Properties of the fair-share division (issue 15, item 8) over thousands of random queue trees:
//   - at every level, the children's fair shares sum to no more than the parent's (the top level to
//     no more than capacity), per resource, whatever the quotas (over-committed, unlimited);
//   - no queue's fair share exceeds the capacity, even with quota -1 (unlimited);
//   - no queue gets more than it asks for (requested, capped by its limit);
//   - raising one queue's over-quota weight never lowers its fair share (up to the few milli-units
//     integer division deals by remainder).
// A failure prints the seed and the tree. TESSERA_DIVISION_CASES sets the count (default 5000).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "support/splitmix.h"
#include "tessera/plugins/proportion.h"

namespace tessera::plugins::proportion {
namespace {

using Rng = tessera::testing::SplitMix64;

struct Tree {
  std::vector<DivisionQueue> queues;
  Amounts capacity{0, 0, 0};
};

/// 1-3 top-level queues, each with 0-3 children; quotas from 0 to above capacity and -1, limits,
/// weights 0-3, priorities 100 or 200; leaves ask for 0 to twice the capacity.
Tree randomTree(uint64_t seed) {
  Rng rng{seed * 0x2545F4914F6CDD1Dull + 7};
  Tree t;
  t.capacity = {1000 * (1 + rng.below(16)), 1000 * (4 + rng.below(64)), int64_t(1 + rng.below(64)) << 30};
  auto amount = [&](int r, bool allowUnlimited) -> int64_t {
    const int64_t cap = t.capacity[r];
    const int64_t k = rng.below(10);
    if (allowUnlimited && k == 0) return kUnlimited;
    if (k == 1) return cap + cap / 2;  // alone over-commits the level
    return rng.below(cap + 1);
  };
  auto addQueue = [&](int parent) {
    DivisionQueue q;
    q.name = "q";
    q.name += std::to_string(t.queues.size());
    q.parent = parent;
    q.priority = rng.below(4) == 0 ? 200 : 100;
    for (int r = 0; r < kResources; ++r) {
      q.deserved[r] = amount(r, true);
      q.limit[r] = rng.below(4) == 0 ? amount(r, false) : kUnlimited;
      q.weight[r] = 1000 * rng.below(4);
    }
    t.queues.push_back(q);
    return int(t.queues.size()) - 1;
  };
  const int tops = 1 + int(rng.below(3));
  for (int i = 0; i < tops; ++i) {
    const int top = addQueue(-1);
    const int kids = int(rng.below(4));
    for (int k = 0; k < kids; ++k) addQueue(top);
  }
  // Leaves ask; parents ask for their children's sum (as the proportion plugin builds it).
  std::vector<bool> leaf(t.queues.size(), true);
  for (const auto& q : t.queues)
    if (q.parent >= 0) leaf[size_t(q.parent)] = false;
  for (size_t i = 0; i < t.queues.size(); ++i)
    if (leaf[i])
      for (int r = 0; r < kResources; ++r) {
        const int64_t ask = rng.below(2 * t.capacity[r] + 1);
        for (int q = int(i); q >= 0; q = t.queues[size_t(q)].parent) t.queues[size_t(q)].requested[r] += ask;
      }
  return t;
}

std::string describe(const Tree& t, uint64_t seed) {
  std::ostringstream o;
  o << "seed " << seed << ", capacity {" << t.capacity[0] << ", " << t.capacity[1] << ", " << t.capacity[2] << "}\n";
  for (const auto& q : t.queues) {
    o << "  " << q.name << " parent " << (q.parent >= 0 ? t.queues[size_t(q.parent)].name : "-") << " prio "
      << q.priority;
    for (int r = 0; r < kResources; ++r)
      o << " | r" << r << " quota " << q.deserved[r] << " limit " << q.limit[r] << " w " << q.weight[r] << " req "
        << q.requested[r] << " -> " << q.fairShare[r];
    o << "\n";
  }
  return o.str();
}

long cases() {
  const char* v = std::getenv("TESSERA_DIVISION_CASES");
  return v && *v ? std::strtol(v, nullptr, 10) : 5000;
}

}  // namespace

TEST_CASE("division property: shares never sum to more than what the level divides", "[division][property]") {
  long bad = 0;
  for (long s = 1; s <= cases(); ++s) {
    Tree t = randomTree(uint64_t(s));
    divide(t.queues, t.capacity);
    bool treeOk = true;
    for (int r = 0; r < kResources; ++r) {
      // What each level divides: the capacity at the top, the parent's fair share below.
      std::vector<int64_t> sum(t.queues.size() + 1, 0);
      for (const auto& q : t.queues) sum[q.parent >= 0 ? size_t(q.parent) : t.queues.size()] += q.fairShare[r];
      bool ok = sum.back() <= t.capacity[r];
      for (size_t p = 0; p < t.queues.size(); ++p) {
        bool hasKids = false;
        for (const auto& q : t.queues) hasKids |= q.parent == int(p);
        if (hasKids) ok = ok && sum[p] <= t.queues[p].fairShare[r];
      }
      if (!ok && treeOk && bad < 3)
        FAIL_CHECK("resource " << r << ": shares sum to more than the level has\n" << describe(t, uint64_t(s)));
      treeOk = treeOk && ok;
    }
    bad += treeOk ? 0 : 1;
  }
  INFO(bad << " of " << cases() << " trees over-divide");
  CHECK(bad == 0);
}

TEST_CASE("division property: an unlimited quota is capped by the capacity", "[division][property]") {
  long bad = 0;
  for (long s = 1; s <= cases(); ++s) {
    Tree t = randomTree(uint64_t(s));
    divide(t.queues, t.capacity);
    for (const auto& q : t.queues)
      for (int r = 0; r < kResources; ++r)
        if (q.fairShare[r] > t.capacity[r] && bad++ < 3)
          FAIL_CHECK(q.name << " resource " << r << ": fair share " << q.fairShare[r] << " > capacity " << t.capacity[r]
                            << "\n"
                            << describe(t, uint64_t(s)));
  }
  CHECK(bad == 0);
}

TEST_CASE("division property: nobody gets more than it asks for, within its limit", "[division][property]") {
  long bad = 0;
  for (long s = 1; s <= cases(); ++s) {
    Tree t = randomTree(uint64_t(s));
    divide(t.queues, t.capacity);
    for (const auto& q : t.queues)
      for (int r = 0; r < kResources; ++r) {
        int64_t cap = q.requested[r];
        if (q.limit[r] >= 0) cap = std::min(cap, q.limit[r]);
        if (q.fairShare[r] > cap && bad++ < 3)
          FAIL_CHECK(q.name << " resource " << r << ": fair share " << q.fairShare[r] << " > " << cap << "\n"
                            << describe(t, uint64_t(s)));
      }
  }
  CHECK(bad == 0);
}

TEST_CASE("division property: a larger weight never lowers a queue's fair share", "[division][property]") {
  long bad = 0;
  for (long s = 1; s <= cases(); ++s) {
    Tree base = randomTree(uint64_t(s));
    Tree more = base;
    Rng rng{uint64_t(s) * 31 + 3};
    const size_t pick = size_t(rng.below(int64_t(base.queues.size())));
    for (int r = 0; r < kResources; ++r) more.queues[pick].weight[r] += 1000 * (1 + rng.below(3));
    divide(base.queues, base.capacity);
    divide(more.queues, more.capacity);
    // Integer division deals the last milli-units by remainder: one per sibling at most.
    const int64_t slack = int64_t(base.queues.size());
    for (int r = 0; r < kResources; ++r)
      if (more.queues[pick].fairShare[r] + slack < base.queues[pick].fairShare[r] && bad++ < 3)
        FAIL_CHECK(base.queues[pick].name << " resource " << r << ": weight up, fair share down from "
                                          << base.queues[pick].fairShare[r] << " to " << more.queues[pick].fairShare[r]
                                          << "\nbefore: " << describe(base, uint64_t(s))
                                          << "after: " << describe(more, uint64_t(s)));
  }
  CHECK(bad == 0);
}

}  // namespace tessera::plugins::proportion
