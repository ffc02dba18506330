// proportion::divide, the fair-share division, against tables computed by hand. Every expected
// number below is written out with the arithmetic that gives it (units: milli-GPU, milli-CPU,
// bytes). Rules: per resource, top-down; deserved pass min(deserved, requested capped by limit);
// over-quota pass by queue priority, highest first, in rounds among unsatisfied queues with
// weight > 0, remaining × w / Σw each (the whole remaining request when smaller); the milli-units
// integer division leaves over go to the largest remainders, then by name.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tessera/plugins/proportion.h"

namespace {

using tessera::plugins::proportion::Amounts;
using tessera::plugins::proportion::DivisionQueue;
using tessera::plugins::proportion::divide;
using tessera::plugins::proportion::kCpu;
using tessera::plugins::proportion::kGpu;
using tessera::plugins::proportion::kMemory;

constexpr int64_t kGi = int64_t{1} << 30;

/// A GPU-only queue (cpu and memory ask for nothing): deserved, requested, weight (thousandths),
/// limit (-1: none), all in milli-GPU.
DivisionQueue gpuQueue(const std::string& name, int64_t deserved, int64_t requested, int64_t weight = 1000,
                       int64_t limit = -1, int parent = -1, int32_t priority = 100) {
  DivisionQueue q;
  q.name = name;
  q.parent = parent;
  q.priority = priority;
  q.deserved = {deserved, 0, 0};
  q.requested = {requested, 0, 0};
  q.weight = {weight, 1000, 1000};
  q.limit = {limit, -1, -1};
  return q;
}

Amounts gpuOnly(int64_t milliGpu) { return {milliGpu, 0, 0}; }

std::vector<int64_t> gpuShares(const std::vector<DivisionQueue>& qs) {
  std::vector<int64_t> out;
  for (const auto& q : qs) out.push_back(q.fairShare[kGpu]);
  return out;
}

TEST_CASE("divide: single level, deserved only", "[division]") {
  // 8 GPUs. Every request is within its deserved quota, so the deserved pass decides:
  //   a: min(3000, 2000) = 2000;  b: min(4000, 4000) = 4000;  c: min(1000, 0) = 0.
  // 2000 milli-GPU remain but no queue wants more: nobody gets over-quota share.
  std::vector<DivisionQueue> qs{gpuQueue("a", 3000, 2000), gpuQueue("b", 4000, 4000), gpuQueue("c", 1000, 0)};
  divide(qs, gpuOnly(8000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{2000, 4000, 0});
}

TEST_CASE("divide: over-committed deserved quotas are scaled down, no over-quota pass", "[division]") {
  // 4 GPUs, deserved quotas sum to 6 (> capacity). Deserved pass: a min(3000, 3000) = 3000,
  // b min(3000, 3000) = 3000, c min(0, 2000) = 0: 6000 granted > 4000, so each grant is scaled by
  // 4000 / 6000: a 2000, b 2000, c 0. Nothing remains: c (weight 1, asking 2 GPUs) gets nothing.
  std::vector<DivisionQueue> qs{gpuQueue("a", 3000, 3000), gpuQueue("b", 3000, 3000), gpuQueue("c", 0, 2000)};
  divide(qs, gpuOnly(4000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{2000, 2000, 0});
}

TEST_CASE("divide: an unlimited quota gets at most what the level has", "[division]") {
  // 4 GPUs. a: quota -1 asking 10 -> min(10000, 4000) = 4000; b: quota 1, asking 1 -> 1000.
  // 5000 granted > 4000: scaled by 4/5: a 3200, b 800. The shares sum to the capacity.
  std::vector<DivisionQueue> qs{gpuQueue("a", -1, 10000), gpuQueue("b", 1000, 1000)};
  divide(qs, gpuOnly(4000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{3200, 800});
  // Alone, it is capped by the capacity.
  std::vector<DivisionQueue> one{gpuQueue("a", -1, 10000)};
  divide(one, gpuOnly(4000));
  CHECK(gpuShares(one) == std::vector<int64_t>{4000});
}

TEST_CASE("divide: over-quota weights 1:3 give 1:3 shares", "[division]") {
  // 8 GPUs, no deserved quota, both ask for all 8. One round: remaining 8000, Σw = 1000 + 3000.
  //   a: 8000 × 1000 / 4000 = 2000;  b: 8000 × 3000 / 4000 = 6000.
  std::vector<DivisionQueue> qs{gpuQueue("a", 0, 8000, 1000), gpuQueue("b", 0, 8000, 3000)};
  divide(qs, gpuOnly(8000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{2000, 6000});

  // With deserved 1 GPU each on 9 GPUs: 1000 + 1000 deserved, remaining 7000,
  //   a: 7000 × 1 / 4 = 1750 -> 2750;  b: 7000 × 3 / 4 = 5250 -> 6250.
  std::vector<DivisionQueue> qd{gpuQueue("a", 1000, 9000, 1000), gpuQueue("b", 1000, 9000, 3000)};
  divide(qd, gpuOnly(9000));
  CHECK(gpuShares(qd) == std::vector<int64_t>{2750, 6250});
}

TEST_CASE("divide: a queue capped by its limit or its request leaves the rest to the next round", "[division]") {
  // 12 GPUs, deserved 0, weights 1:1:1.
  // Round 1: remaining 12000, Σw = 3000, portion 12000 × 1000 / 3000 = 4000 each:
  //   a: limit 2000 -> gets 2000 (capped);  b: requested 3000 -> gets 3000 (capped);  c: 4000.
  //   given 9000, remaining 3000.
  // Round 2: only c is unsatisfied (20000 > 4000): it gets the whole 3000 -> 7000.
  std::vector<DivisionQueue> qs{gpuQueue("a", 0, 10000, 1000, /*limit=*/2000), gpuQueue("b", 0, 3000),
                                gpuQueue("c", 0, 20000)};
  divide(qs, gpuOnly(12000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{2000, 3000, 7000});

  // The limit also caps the deserved pass: requested 5000 capped by limit 3000, deserved -1
  // (unlimited) -> min(∞, 3000) = 3000; b takes the other 5000 of 8000 over quota.
  std::vector<DivisionQueue> ql{gpuQueue("a", -1, 5000, 1000, /*limit=*/3000), gpuQueue("b", 0, 8000)};
  divide(ql, gpuOnly(8000));
  CHECK(gpuShares(ql) == std::vector<int64_t>{3000, 5000});
}

TEST_CASE("divide: higher queue priority is satisfied first", "[division]") {
  // 10 GPUs. Deserved pass: hi 1000, lo1 1000, lo2 1000; remaining 7000.
  // Priority 200 group: hi needs 6000 - 1000 = 5000 < its portion 7000 -> 5000; remaining 2000.
  // Priority 100 group: lo1, lo2 1:1 -> 1000 each.
  //   hi 6000, lo1 2000, lo2 2000.
  std::vector<DivisionQueue> qs{gpuQueue("lo1", 1000, 10000), gpuQueue("hi", 1000, 6000, 1000, -1, -1, 200),
                                gpuQueue("lo2", 1000, 10000)};
  divide(qs, gpuOnly(10000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{2000, 6000, 2000});

  // hi asks for everything: the 7000 over quota all go to it, whatever the weights
  // (lo1 weight 5, hi weight 1): hi 1000 + 7000 = 8000, lo1 1000, lo2 1000.
  std::vector<DivisionQueue> qa{gpuQueue("lo1", 1000, 10000, 5000), gpuQueue("hi", 1000, 20000, 1000, -1, -1, 200),
                                gpuQueue("lo2", 1000, 10000)};
  divide(qa, gpuOnly(10000));
  CHECK(gpuShares(qa) == std::vector<int64_t>{1000, 8000, 1000});
}

TEST_CASE("divide: weight 0 gets no over-quota share", "[division]") {
  // 8 GPUs. Deserved: a 1000, b 1000; remaining 6000.
  // Round 1: only b (weight 1) is eligible; it needs 3000 - 1000 = 2000 -> 2000. Remaining 4000.
  // Round 2: nobody eligible (a has weight 0): 4000 stay undivided; a keeps just its 1000.
  std::vector<DivisionQueue> qs{gpuQueue("a", 1000, 8000, /*weight=*/0), gpuQueue("b", 1000, 3000, 1000)};
  divide(qs, gpuOnly(8000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{1000, 3000});
}

TEST_CASE("divide: unlimited deserved (-1) gets its whole request in the deserved pass", "[division]") {
  // 8 GPUs. a: deserved -1 -> min(∞, 5000) = 5000; c: deserved -1, requested 0 -> 0;
  // b: deserved 0; remaining 8000 - 5000 = 3000 all to b (the only one asking for more).
  std::vector<DivisionQueue> qs{gpuQueue("a", -1, 5000), gpuQueue("b", 0, 8000), gpuQueue("c", -1, 0)};
  divide(qs, gpuOnly(8000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{5000, 3000, 0});
}

TEST_CASE("divide: three levels, capacity -> departments -> teams", "[division]") {
  // 16 GPUs. Departments: d1 (deserved 8, weight 1), d2 (deserved 4, weight 1).
  // Teams of d1: t1 (deserved 2, weight 1, asks 10), t2 (deserved 2, weight 3, asks 10).
  // Teams of d2: t3 (deserved 4, asks 1), t4 (deserved 0, weight 1, asks 10).
  // Subtree requests: d1 = 10 + 10 = 20, d2 = 1 + 10 = 11.
  // Top level: d1 8000, d2 4000; remaining 4000 at 1:1 -> 2000 each: d1 10000, d2 6000.
  // In d1 (10000): t1 2000, t2 2000; remaining 6000 at 1:3 -> 1500 / 4500: t1 3500, t2 6500.
  // In d2 (6000): t3 min(4000, 1000) = 1000, t4 0; remaining 5000 -> t4 5000.
  // Children come before their parents in the vector: the order must not matter.
  std::vector<DivisionQueue> qs{
      gpuQueue("t1", 2000, 10000, 1000, -1, /*parent=*/5), gpuQueue("t2", 2000, 10000, 3000, -1, 5),
      gpuQueue("t3", 4000, 1000, 1000, -1, 4),             gpuQueue("t4", 0, 10000, 1000, -1, 4),
      gpuQueue("d2", 4000, 11000),                         gpuQueue("d1", 8000, 20000)};
  divide(qs, gpuOnly(16000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{3500, 6500, 1000, 5000, 6000, 10000});
}

TEST_CASE("divide: a parent's limit caps what its children share", "[division]") {
  // 8 GPUs. Department d (limit 2, asks 8) and e (asks 8); d's teams x, y ask 4 each.
  // Top: d min(0, min(8000, 2000)) = 0; e 0; remaining 8000, portion 4000 each:
  //   d capped at 2000, e 4000; round 2: e gets the other 2000 -> 6000.
  // Inside d (2000): x, y 1:1 -> 1000 each.
  std::vector<DivisionQueue> qs{gpuQueue("d", 0, 8000, 1000, 2000), gpuQueue("e", 0, 8000),
                                gpuQueue("x", 0, 4000, 1000, -1, 0), gpuQueue("y", 0, 4000, 1000, -1, 0)};
  divide(qs, gpuOnly(8000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{2000, 6000, 1000, 1000});
}

TEST_CASE("divide: fractional GPU quotas in exact milli-units", "[division]") {
  // 4 GPUs; a deserved 2.5, b deserved 1.25, both ask for 4.
  // Deserved: 2500 + 1250 = 3750; remaining 250 at 1:1 -> 125 each: a 2625, b 1375 (sum 4000).
  // KAI would floor the 0.125 GPUs to 0 and leave the 250 milli-GPU undivided.
  std::vector<DivisionQueue> qs{gpuQueue("a", 2500, 4000), gpuQueue("b", 1250, 4000)};
  divide(qs, gpuOnly(4000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{2625, 1375});

  // 1.5 GPUs of over-quota between weights 1:2: 1500 × 1/3 = 500, 1500 × 2/3 = 1000.
  std::vector<DivisionQueue> qw{gpuQueue("a", 0, 4000, 1000), gpuQueue("b", 0, 4000, 2000)};
  divide(qw, gpuOnly(1500));
  CHECK(gpuShares(qw) == std::vector<int64_t>{500, 1000});
}

TEST_CASE("divide: leftover milli-units go to the largest remainders, then by name", "[division]") {
  // 1000 milli-GPU split 1:1:1: 1000 × 1000 / 3000 = 333 remainder 1000 each (equal);
  // floors 999, leftover 1 -> the alphabetically first, "a": a 334, b 333, c 333.
  // The vector lists c, b, a: the tie is broken by name, not by position.
  std::vector<DivisionQueue> qs{gpuQueue("c", 0, 1000), gpuQueue("b", 0, 1000), gpuQueue("a", 0, 1000)};
  divide(qs, gpuOnly(1000));
  CHECK(gpuShares(qs) == std::vector<int64_t>{333, 333, 334});

  // 1000 split 1:2 (a, b): a 1000 × 1000 / 3000 = 333 remainder 1000 (of 3000);
  // b 1000 × 2000 / 3000 = 666 remainder 2000. Leftover 1 -> the larger remainder, b, although
  // a comes first by name: a 333, b 667.
  std::vector<DivisionQueue> qr{gpuQueue("a", 0, 1000, 1000), gpuQueue("b", 0, 1000, 2000)};
  divide(qr, gpuOnly(1000));
  CHECK(gpuShares(qr) == std::vector<int64_t>{333, 667});

  // 2 milli-units over 3 equal queues: 2 × 1000 / 3000 = 0 remainder 2000 each; leftover 2 ->
  // a and b (by name): a 1, b 1, c 0. Nothing is lost.
  std::vector<DivisionQueue> q2{gpuQueue("a", 0, 1000), gpuQueue("b", 0, 1000), gpuQueue("c", 0, 1000)};
  divide(q2, gpuOnly(2));
  CHECK(gpuShares(q2) == std::vector<int64_t>{1, 1, 0});
}

TEST_CASE("divide: each resource is divided independently", "[division]") {
  // Capacity: 8 GPUs, 16 CPUs, 64 GiB.
  // gpu: weights a 1, b 3 -> 8000 × 1/4 = 2000, 8000 × 3/4 = 6000.
  // cpu: weights a 3, b 1 -> 16000 × 3/4 = 12000, 16000 × 1/4 = 4000.
  // memory: deserved a 32 GiB, b 0; b limit 8 GiB. Remaining 32 GiB at 1:1 -> 16 GiB each;
  //   b capped at 8 GiB; round 2: a gets the other 8 GiB -> 32 + 16 + 8 = 56 GiB; b 8 GiB.
  DivisionQueue a, b;
  a.name = "a";
  a.weight = {1000, 3000, 1000};
  a.deserved = {0, 0, 32 * kGi};
  a.requested = {8000, 16000, 64 * kGi};
  b.name = "b";
  b.weight = {3000, 1000, 1000};
  b.deserved = {0, 0, 0};
  b.limit = {-1, -1, 8 * kGi};
  b.requested = {8000, 16000, 64 * kGi};
  std::vector<DivisionQueue> qs{a, b};
  divide(qs, Amounts{8000, 16000, 64 * kGi});
  CHECK(qs[0].fairShare == Amounts{2000, 12000, 56 * kGi});
  CHECK(qs[1].fairShare == Amounts{6000, 4000, 8 * kGi});
}

TEST_CASE("divide: large memory values do not overflow", "[division]") {
  // 4000 nodes × 2 TiB = 4000 × 2^41 = 8 796 093 022 208 000 bytes. Weights 1:3 (1000 : 3000
  // thousandths): remaining × weight is 2.6e19, above INT64_MAX (9.2e18), so the product must be
  // computed wider. a = M / 4 = 2 199 023 255 552 000; b = 3M / 4 = 6 597 069 766 656 000.
  const int64_t m = int64_t{4000} * (int64_t{2} << 40);
  REQUIRE(m == 8'796'093'022'208'000);
  DivisionQueue a, b;
  a.name = "a";
  a.requested = {0, 0, m};
  a.weight = {1000, 1000, 1000};
  b.name = "b";
  b.requested = {0, 0, m};
  b.weight = {1000, 1000, 3000};
  std::vector<DivisionQueue> qs{a, b};
  divide(qs, Amounts{0, 0, m});
  CHECK(qs[0].fairShare[kMemory] == 2'199'023'255'552'000);
  CHECK(qs[1].fairShare[kMemory] == 6'597'069'766'656'000);
  CHECK(qs[0].fairShare[kGpu] == 0);
  CHECK(qs[0].fairShare[kCpu] == 0);

  // Deserved quotas of 1 PiB each on the same capacity: deserved 2^50 each, the rest
  // (M - 2^51) at 1:3: (M - 2^51) / 4 = 1 636 073 302 130 688 -> a = 2^50 + that.
  const int64_t pib = int64_t{1} << 50;
  qs[0].deserved = {0, 0, pib};
  qs[1].deserved = {0, 0, pib};
  divide(qs, Amounts{0, 0, m});
  const int64_t rest = m - 2 * pib;
  REQUIRE(rest % 4 == 0);
  CHECK(qs[0].fairShare[kMemory] == pib + rest / 4);
  CHECK(qs[1].fairShare[kMemory] == pib + 3 * (rest / 4));
  CHECK(qs[0].fairShare[kMemory] + qs[1].fairShare[kMemory] == m);
}

}  // namespace
