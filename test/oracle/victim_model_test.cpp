// The oracle's own model, on small cases worked out by hand: if these fail, the oracle is wrong,
// not the scheduler. (Run alone: victim_oracle "[model]".)
#include <catch2/catch.hpp>

#include <cstdio>

#include "victim_generate.h"
#include "victim_model.h"

namespace tessera::oracle {
namespace {

struct Builder {
  Case c;
  Builder(Mode m) { c.mode = m; }
  int node(int gpus, int cpu = 16) {
    ONode n;
    char name[16];  // (not "n" + std::to_string(...): GCC 12's -Wrestrict false positive)
    std::snprintf(name, sizeof name, "n%zu", c.nodes.size() + 1);
    n.name = name;
    n.gpus = gpus;
    n.cpu = cpu * 1000;
    c.nodes.push_back(n);
    return int(c.nodes.size()) - 1;
  }
  int queue(const std::string& name, double quota, int parent = -1) {
    OQueue q;
    q.name = name;
    q.quotaGpu = int64_t(quota * 1000);
    q.parent = parent;
    if (parent >= 0) c.queues[size_t(parent)].leaf = false;
    c.queues.push_back(q);
    return int(c.queues.size()) - 1;
  }
  /// A single running pod (node >= 0) or pending claimant pod (node < 0).
  int pod(const std::string& name, int queue, int priority, int node, int gpus, int cpu, int created) {
    OJob j;
    j.name = name;
    j.queue = queue;
    j.priority = priority;
    j.created = created;
    OPod p;
    p.name = name;
    p.job = int(c.jobs.size());
    p.node = node;
    p.wholeGpus = gpus;
    p.cpu = cpu * 1000;
    p.created = created;
    j.pods.push_back(int(c.pods.size()));
    c.pods.push_back(p);
    c.jobs.push_back(j);
    if (node < 0) c.claimant = int(c.jobs.size()) - 1;
    return int(c.pods.size()) - 1;
  }
};

std::vector<std::string> names(const Case& c, const std::vector<int>& pods) {
  std::vector<std::string> out;
  for (int p : pods) out.push_back(c.pods[size_t(p)].name);
  return out;
}

}  // namespace

TEST_CASE("oracle model: a victim made useless by a later, larger one is dropped", "[model]") {
  // 3 GPUs: small (1 GPU, newest) and big (2 GPUs). The claimant needs 2. Victim order: small,
  // big; {small} is not enough, {small, big} is, and without small it still is: {big}.
  Builder b(Mode::Preempt);
  const int n = b.node(3);
  const int q = b.queue("qa", 3);
  b.pod("big", q, 50, n, 2, 1, 100);
  b.pod("small", q, 50, n, 1, 1, 200);
  b.pod("claim", q, 75, -1, 2, 1, 900);
  const Expected e = expectedOutcome(b.c);
  REQUIRE(e.solvable);
  CHECK(names(b.c, e.victims) == std::vector<std::string>{"big"});
  CHECK(names(b.c, {e.sequence[0].pods[0]}) == std::vector<std::string>{"small"});
}

TEST_CASE("oracle model: a cpu-only victim does not help a GPU claimant", "[model]") {
  Builder b(Mode::Preempt);
  const int n = b.node(2, 8);
  const int q = b.queue("qa", 2);
  b.pod("gpu", q, 50, n, 2, 1, 100);
  b.pod("cpu", q, 50, n, 0, 4, 200);  // newest: first in victim order
  b.pod("claim", q, 75, -1, 2, 1, 900);
  const Expected e = expectedOutcome(b.c);
  CHECK(names(b.c, e.victims) == std::vector<std::string>{"gpu"});
}

TEST_CASE("oracle model: reclaim takes from the queue furthest above its fair share", "[model]") {
  // 6 GPUs on one node; qa (quota 1) holds 3, qb (quota 1) holds 2, qc (quota 2) asks 1 more after
  // holding 1. Fair shares (requested qa 3, qb 2, qc 2): deserved 1/1/2, the 2 left split 1:1
  // -> qa 2, qb 2, qc 2. Only qa is above its share: its newest pod goes.
  Builder b(Mode::Reclaim);
  const int n = b.node(6);
  const int qa = b.queue("qa", 1), qb = b.queue("qb", 1), qc = b.queue("qc", 2);
  b.pod("a1", qa, 50, n, 1, 1, 100);
  b.pod("a2", qa, 50, n, 1, 1, 110);
  b.pod("a3", qa, 50, n, 1, 1, 120);
  b.pod("b1", qb, 50, n, 1, 1, 300);
  b.pod("b2", qb, 50, n, 1, 1, 310);  // the newest pod of all: a naive "newest first" takes it
  b.pod("c1", qc, 50, n, 1, 1, 50);
  b.pod("claim", qc, 50, -1, 1, 1, 900);
  const Expected e = expectedOutcome(b.c);
  CHECK(e.fairShare[0][0] == 2000);
  CHECK(e.fairShare[1][0] == 2000);
  CHECK(e.fairShare[2][0] == 2000);
  CHECK(names(b.c, e.victims) == std::vector<std::string>{"a3"});
}

TEST_CASE("oracle model: reclaim refused when the claimant's queue would exceed its fair share", "[model]") {
  Builder b(Mode::Reclaim);
  const int n = b.node(4);
  const int qa = b.queue("qa", 2), qb = b.queue("qb", 2);
  b.pod("a1", qa, 50, n, 1, 1, 100);
  b.pod("a2", qa, 50, n, 1, 1, 110);
  b.pod("a3", qa, 50, n, 1, 1, 120);
  b.pod("b1", qb, 50, n, 1, 1, 130);
  b.pod("claim", qa, 50, -1, 1, 1, 900);  // qa holds 3 of its share of 2 (+1 asked: 4 > 2)
  const Expected e = expectedOutcome(b.c);
  CHECK_FALSE(e.solvable);
  CHECK(e.victims.empty());
}

TEST_CASE("oracle model: generated cases render and are deterministic", "[model]") {
  for (uint64_t s = 1; s <= 50; ++s) {
    const Case a = generate(s), b = generate(s);
    CHECK(renderScenario(a, nullptr) == renderScenario(b, nullptr));
    CHECK(a.claimant >= 0);
    CHECK(a.pods.size() <= 8 + 3 + 1);
  }
}

}  // namespace tessera::oracle
