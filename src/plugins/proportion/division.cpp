#include <algorithm>
#include <map>

#include "tessera/plugins/proportion.h"

namespace tessera::plugins::proportion {
namespace {

using i128 = __int128;

int64_t capOf(const DivisionQueue& q, int r) {
  int64_t cap = q.requested[r];
  if (q.limit[r] >= 0) cap = std::min(cap, q.limit[r]);
  return std::max<int64_t>(cap, 0);
}

/// Over-committed quotas (the deserved pass grants more than the level has): each child keeps
/// grant × share / Σgrant, the milli-units integer division leaves over dealt one each to the
/// largest remainders, then by name. The level's share is divided exactly, never exceeded.
void scaleDown(std::vector<DivisionQueue>& queues, const std::vector<int>& children, int r, int64_t share,
               i128 granted) {
  struct Part {
    int queue;
    i128 remainder;
  };
  std::vector<Part> parts;
  int64_t given = 0;
  for (int c : children) {
    DivisionQueue& q = queues[c];
    const i128 num = static_cast<i128>(q.fairShare[r]) * share;
    q.fairShare[r] = static_cast<int64_t>(num / granted);
    given += q.fairShare[r];
    parts.push_back({c, num % granted});
  }
  std::stable_sort(parts.begin(), parts.end(), [&](const Part& a, const Part& b) {
    if (a.remainder != b.remainder) return a.remainder > b.remainder;
    return queues[a.queue].name < queues[b.queue].name;
  });
  for (size_t i = 0; given < share && i < parts.size(); ++i, ++given) ++queues[parts[i].queue].fairShare[r];
}

/// Divides `share` of resource r among `children` (indices into queues).
void divideLevel(std::vector<DivisionQueue>& queues, const std::vector<int>& children, int r, int64_t share) {
  share = std::max<int64_t>(share, 0);
  int64_t remaining = share;
  // 1. Deserved pass: min(quota, requested), never more than the level has (an unlimited quota
  // asks for what it requests, which may exceed the cluster).
  i128 granted = 0;
  for (int c : children) {
    DivisionQueue& q = queues[c];
    const int64_t want = std::min(capOf(q, r), share);
    q.fairShare[r] = q.deserved[r] < 0 ? want : std::min(q.deserved[r], want);
    granted += q.fairShare[r];
  }
  if (granted > share) {
    scaleDown(queues, children, r, share, granted);
    return;
  }
  remaining -= static_cast<int64_t>(granted);
  if (remaining <= 0) return;
  // 2. Over-quota pass, by priority, highest first.
  std::map<int32_t, std::vector<int>, std::greater<>> byPriority;
  for (int c : children) byPriority[queues[c].priority].push_back(c);
  for (auto& [prio, group] : byPriority) {
    while (remaining > 0) {
      std::vector<int> unsatisfied;
      i128 weights = 0;
      for (int c : group) {
        const DivisionQueue& q = queues[c];
        if (q.weight[r] > 0 && q.fairShare[r] < capOf(q, r)) {
          unsatisfied.push_back(c);
          weights += q.weight[r];
        }
      }
      if (unsatisfied.empty()) break;
      const int64_t round = remaining;
      int64_t given = 0;
      // Exact shares: floor, then the leftover milli-units to the largest remainders.
      struct Part {
        int queue;
        int64_t give;
        i128 remainder;
        bool capped;
      };
      std::vector<Part> parts;
      int64_t floors = 0;
      for (int c : unsatisfied) {
        DivisionQueue& q = queues[c];
        const i128 num = static_cast<i128>(round) * q.weight[r];
        const int64_t portion = static_cast<int64_t>(num / weights);
        const int64_t need = capOf(q, r) - q.fairShare[r];
        const bool capped = need <= portion;
        parts.push_back({c, std::min(portion, need), num % weights, capped});
        floors += portion;
      }
      int64_t leftover = round - floors;
      std::stable_sort(parts.begin(), parts.end(), [&](const Part& a, const Part& b) {
        if (a.remainder != b.remainder) return a.remainder > b.remainder;
        return queues[a.queue].name < queues[b.queue].name;
      });
      for (Part& p : parts) {
        if (leftover > 0 && !p.capped) {
          const int64_t need = capOf(queues[p.queue], r) - queues[p.queue].fairShare[r];
          if (p.give < need) {
            ++p.give;
            --leftover;
          }
        }
        queues[p.queue].fairShare[r] += p.give;
        given += p.give;
      }
      remaining -= given;
      if (given == 0) break;
    }
    if (remaining <= 0) break;
  }
}

}  // namespace

void divide(std::vector<DivisionQueue>& queues, const Amounts& capacity) {
  std::vector<std::vector<int>> children(queues.size());
  std::vector<int> top;
  for (size_t i = 0; i < queues.size(); ++i) {
    if (queues[i].parent < 0) top.push_back(static_cast<int>(i));
    else children[queues[i].parent].push_back(static_cast<int>(i));
  }
  auto byName = [&](int a, int b) { return queues[a].name < queues[b].name; };
  std::sort(top.begin(), top.end(), byName);
  for (auto& c : children) std::sort(c.begin(), c.end(), byName);
  for (int r = 0; r < kResources; ++r) {
    // Breadth-first: a level is divided once its parent's share is known.
    std::vector<std::pair<const std::vector<int>*, int64_t>> work{{&top, capacity[r]}};
    for (size_t w = 0; w < work.size(); ++w) {
      const std::vector<int>& level = *work[w].first;
      divideLevel(queues, level, r, work[w].second);
      for (int c : level)
        if (!children[c].empty()) work.push_back({&children[c], queues[c].fairShare[r]});
    }
  }
}

}  // namespace tessera::plugins::proportion
