#pragma once
/// The fair-share division of the proportion plugin, exposed for tests and the simulator.
/// KAI-Scheduler's semantics, in exact integer units (milli-GPU, milli-CPU, bytes): per resource,
/// top-down through the queue tree, each level divides its parent's fair share among the children:
///   1. deserved pass: min(deserved, requested), requested capped by the limit and by the level's
///      share; over-committed quotas are scaled down in proportion (never more than the level has);
///   2. over-quota pass, highest queue priority first, in rounds among unsatisfied queues
///      (requested > share, below limit, weight > 0): remaining × w / Σw each (the whole remaining
///      request when smaller); the few milli-units integer division leaves over go one by one to
///      the largest remainders (then by name). KAI floors to whole units instead.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::plugins::proportion {

inline constexpr int kGpu = 0, kCpu = 1, kMemory = 2, kResources = 3;
using Amounts = std::array<int64_t, kResources>;
inline constexpr int64_t kUnlimited = -1;

struct DivisionQueue {
  std::string name;
  int parent = -1;  ///< index in the vector; -1 for a top-level queue
  int32_t priority = 100;
  Amounts deserved{0, 0, 0};  ///< -1 = unlimited
  Amounts limit{-1, -1, -1};  ///< -1 = none
  Amounts weight{1000, 1000, 1000};  ///< over-quota weight, thousandths
  Amounts requested{0, 0, 0};  ///< of the subtree: allocated + pending
  Amounts fairShare{0, 0, 0};  ///< output
};

/// Divides `capacity` among the tree. Parents must come before their children is NOT required;
/// queues must form a forest (no cycles: the caller removes orphans first).
void divide(std::vector<DivisionQueue>& queues, const Amounts& capacity);

}  // namespace tessera::plugins::proportion
