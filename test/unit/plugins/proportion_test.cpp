// proportion, through a Session: queue order (each rule shown deciding against the rules after it),
// capacity reasons (OverLimit, NonPreemptibleOverQuota), unusable queues (orphaned, cycle, invalid,
// non-leaf), the reclaim rules (which victims a claimant's queue may take) and the preempt rules
// (same queue, preemptMinRuntime). Only GPUs decide here: every queue leaves cpu and memory
// unlimited (quota -1), so their fair share of cpu and memory is whatever they ask for.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tessera/framework/args.h"
#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"
#include "support/test_cluster.h"
#include "support/test_plugins.h"

namespace {

using tessera::framework::Session;
using tessera::framework::SessionJob;
using tessera::framework::SessionQueue;
using tessera::framework::SessionTask;
using tessera::testing::TestCluster;

using tessera::testing::makePlugin;


const char* kClasses = R"(
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: train}
value: 50
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: build}
value: 100
---
)";

struct QueueSpec {
  std::string gpuQuota = "0", gpuLimit = "-1", gpuWeight = "1";
  std::string parent{};
  int priority = 100;
  std::string created{};  ///< creationTimestamp; empty: the cluster's
  std::string extra{};    ///< more spec lines, e.g. "reclaimMinRuntime: 1h"
  std::string cpuQuota = "-1";
  std::string cpuWeight = "1";
};

std::string queue(const std::string& name, const QueueSpec& s) {
  std::string y = "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata:\n  name: " + name + "\n";
  if (!s.created.empty()) y += "  creationTimestamp: \"" + s.created + "\"\n";
  y += "spec:\n  priority: " + std::to_string(s.priority) + "\n";
  if (!s.parent.empty()) y += "  parentQueue: " + s.parent + "\n";
  if (!s.extra.empty()) y += "  " + s.extra + "\n";
  y += "  resources:\n    gpu: {quota: \"" + s.gpuQuota + "\", limit: \"" + s.gpuLimit + "\", overQuotaWeight: \"" +
       s.gpuWeight + "\"}\n    cpu: {quota: \"" + s.cpuQuota + "\", limit: \"-1\", overQuotaWeight: \"" + s.cpuWeight +
       "\"}\n    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";
  return y;
}

/// A pod of queue `q` asking for `gpus` (and `cpu` when not empty). With `node` it runs there,
/// started at `started` (default a day before the session's clock).
std::string pod(const std::string& name, const std::string& q, int gpus, const std::string& node = "",
                const std::string& cls = "train", const std::string& started = "2025-12-31T00:00:00Z",
                const std::string& cpu = "") {
  std::string y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
                  "\n  namespace: t\n  labels: {tessera.dev/queue: " + q + "}\nspec:\n  schedulerName: tessera\n";
  if (!node.empty()) y += "  nodeName: " + node + "\n";
  if (!cls.empty()) y += "  priorityClassName: " + cls + "\n";
  std::string req = "nvidia.com/gpu: \"" + std::to_string(gpus) + "\"";
  if (!cpu.empty()) req += ", cpu: \"" + cpu + "\"";
  y += "  containers: [{name: c, image: busybox, resources: {requests: {" + req + "}, limits: {nvidia.com/gpu: \"" +
       std::to_string(gpus) + "\"}}}]\n";
  if (!node.empty()) y += "status: {phase: Running, startTime: \"" + started + "\"}\n";
  return y + "---\n";
}

struct Env {
  TestCluster c;
  tessera::framework::Config cfg = tessera::testing::configWith(
      {makePlugin("priority", tessera::plugins::makePriority), makePlugin("proportion", tessera::plugins::makeProportion)});
  std::unique_ptr<Session> ssn;

  /// `nodes` 8-GPU nodes n1..nN, then the objects.
  void start(const std::string& yaml, int nodes = 1) {
    for (int i = 1; i <= nodes; ++i) c.create(tessera::testing::nodeYaml("n" + std::to_string(i), "64", "8"));
    c.create(std::string(kClasses) + yaml);
    c.start();
    ssn = std::make_unique<Session>(c.snapshot(), cfg, c.clock);
    ssn->open();
  }
  SessionJob& job(const std::string& pod) {
    const int j = ssn->findJob("Pod/t/" + pod);
    if (j < 0) FAIL("no job for pod " << pod);
    return ssn->jobs()[j];
  }
  SessionTask& task(const std::string& pod) { return job(pod).tasks[0]; }
  const SessionQueue& q(const std::string& name) {
    const int i = ssn->findQueue(name);
    if (i < 0) FAIL("no queue " << name);
    return ssn->queues()[i];
  }
  /// Whether queue `l` (trying job of pod `lj`) goes before `r` (trying `rj`); checks the
  /// order is asymmetric.
  bool before(const std::string& l, const std::string& lj, const std::string& r, const std::string& rj) {
    const bool lr = ssn->queueLess(q(l), q(r), &job(lj), &job(rj));
    const bool rl = ssn->queueLess(q(r), q(l), &job(rj), &job(lj));
    CHECK(lr != rl);
    return lr;
  }
  std::string invalid(const std::string& pod) {
    return tessera::testing::rejection(ssn->jobValid(job(pod))).value_or("");
  }
  std::string capacity(const std::string& pod) {
    return tessera::testing::rejection(ssn->capacityCheck(job(pod), task(pod).request())).value_or("");
  }
  /// The capacity check's refusal as "Reason name" (Error::reason, Error::name: what the victim
  /// search decides from), empty when it allows.
  std::string capacityReason(const std::string& pod) {
    return reasonOf(ssn->capacityCheck(job(pod), task(pod).request()));
  }
  /// The same of reclaim's bound on the claimant's ancestors (Session::reclaimBounds).
  std::string reclaimBoundReason(const std::string& pod) {
    return reasonOf(ssn->reclaimBounds(job(pod), task(pod).request()));
  }
  static std::string reasonOf(const tessera::api::Status& s) {
    return s.ok() ? ""
                  : (s.error().reason ? s.error().reason : "(none)") + std::string(" ") + std::string(s.error().name());
  }
};

// ---------------------------------------------------------------- queue order

TEST_CASE("queue order: a queue not over its fair share goes before one over it", "[proportion][order]") {
  // hi: priority 200 and starved in GPUs (0 + 1 <= quota 2), but over its fair share of CPU: it
  // holds 4 CPUs with cpu quota 0 and cpu weight 0 (fair share 0). lo: priority 100, not starved
  // (quota 0), within its share. Rule 1 puts lo first though rules 2 and 3 would pick hi.
  Env e;
  QueueSpec hi{.gpuQuota = "2", .priority = 200, .cpuQuota = "0", .cpuWeight = "0"};
  e.start(queue("hi", hi) + queue("lo", {}) + pod("hi-run", "hi", 0, "n1", "train", "2025-12-31T00:00:00Z", "4") +
          pod("hi-job", "hi", 1) + pod("lo-job", "lo", 1));
  CHECK(e.before("lo", "lo-job", "hi", "hi-job"));
}

TEST_CASE("queue order: a starved queue goes first", "[proportion][order]") {
  // 8 GPUs. starved: quota 2, asks 1 (0 + 1 <= 2: starved), priority 100.
  // rich: quota 0, priority 200, asks 1. Fair shares: starved 1 (deserved), rich 1 (over quota).
  // Neither is over; the starved one goes first although rich has the higher priority.
  Env e;
  e.start(queue("starved", {.gpuQuota = "2"}) + queue("rich", {.priority = 200}) + pod("s-job", "starved", 1) +
          pod("r-job", "rich", 1));
  CHECK(e.before("starved", "s-job", "rich", "r-job"));
}

TEST_CASE("queue order: higher queue priority before a smaller share", "[proportion][order]") {
  // 8 GPUs, quotas 0. low (priority 100): two pending 1-GPU jobs, fair share 2, share with its
  // next job 1/2. high (priority 200): 1 running + 1 pending, fair share 2, share with job 2/2.
  // Neither over nor starved: priority decides, against the dominant share.
  Env e;
  e.start(queue("low", {}) + queue("high", {.priority = 200}) + pod("l1", "low", 1) + pod("l2", "low", 1) +
          pod("h-run", "high", 1, "n1") + pod("h1", "high", 1));
  CHECK(e.before("high", "h1", "low", "l1"));
}

TEST_CASE("queue order: smaller dominant share including the job, then without it", "[proportion][order]") {
  // 24 GPUs (3 nodes), quotas 0, weights 1: fair share = what each asks for (8 each).
  Env e;
  SECTION("with the job decides") {
    // a: holds 2, next job 1, asks 8: with job 3/8, without 2/8.
    // b: holds 0, next job 4, asks 8: with job 4/8, without 0/8.
    // With the job a is smaller (3/8 < 4/8), though without it b would be (0 < 2/8).
    e.start(queue("a", {}) + queue("b", {}) + pod("a-run", "a", 2, "n1") + pod("a-job", "a", 1) +
                pod("a-more", "a", 5) + pod("b-job", "b", 4) + pod("b-more", "b", 4),
            3);
    CHECK(e.before("a", "a-job", "b", "b-job"));
  }
  SECTION("equal with the job: without it decides") {
    // a: holds 2, next job 2, asks 8: with job 4/8, without 2/8.
    // b: holds 0, next job 4, asks 8: with job 4/8, without 0. b goes first, though a is the
    // older queue and the first by name.
    e.start(queue("a", {.created = "2025-01-01T00:00:00Z"}) + queue("b", {.created = "2025-06-01T00:00:00Z"}) +
                pod("a-run", "a", 2, "n1") + pod("a-job", "a", 2) + pod("a-more", "a", 4) + pod("b-job", "b", 4) +
                pod("b-more", "b", 4),
            3);
    CHECK(e.before("b", "b-job", "a", "a-job"));
  }
}

TEST_CASE("queue order: a next job that asks the same keeps the queue's rank (queueHeadSame)", "[proportion][order]") {
  // forEachJobTurn skips re-ranking a queue whose next job changed when queueHeadSame says the
  // queue compares as before: it must say so only when every comparison is the same.
  Env e;
  e.start(queue("a", {}) + queue("b", {}) + pod("a-run", "a", 2, "n1") + pod("a1", "a", 1) + pod("a2", "a", 1) +
              pod("a3", "a", 2) + pod("b-run", "b", 1, "n1") + pod("b1", "b", 1) + pod("b2", "b", 2) +
              pod("b3", "b", 1),
          2);
  // 16 GPUs; fair shares are what each asks: a 6, b 5. Dominant shares with the next job: a1 or a2
  // 3/6, a3 4/6; b1 2/5, b2 3/5 (b2 falls between a1's and a3's).
  CHECK(e.ssn->queueHeadSame(e.q("a"), e.job("a1"), e.job("a2")));
  CHECK_FALSE(e.ssn->queueHeadSame(e.q("a"), e.job("a1"), e.job("a3")));
  for (const char* rj : {"b1", "b2", "b3"}) {
    CHECK(e.ssn->queueLess(e.q("a"), e.q("b"), &e.job("a1"), &e.job(rj)) ==
          e.ssn->queueLess(e.q("a"), e.q("b"), &e.job("a2"), &e.job(rj)));
    CHECK(e.ssn->queueLess(e.q("b"), e.q("a"), &e.job(rj), &e.job("a1")) ==
          e.ssn->queueLess(e.q("b"), e.q("a"), &e.job(rj), &e.job("a2")));
  }
  // a3 asks more: against b2 the order with it differs from a1's (why a new next job that asks
  // otherwise must re-rank its queue).
  bool differs = false;
  for (const char* rj : {"b1", "b2", "b3"})
    differs = differs || e.ssn->queueLess(e.q("a"), e.q("b"), &e.job("a1"), &e.job(rj)) !=
                             e.ssn->queueLess(e.q("a"), e.q("b"), &e.job("a3"), &e.job(rj));
  CHECK(differs);
}

TEST_CASE("queue order: the older queue, then the name", "[proportion][order]") {
  Env e;
  SECTION("older first") {
    // Equal in everything but age: "b" is older, so it goes before "a".
    e.start(queue("a", {.created = "2025-06-01T00:00:00Z"}) + queue("b", {.created = "2025-01-01T00:00:00Z"}) +
            pod("a-job", "a", 1) + pod("b-job", "b", 1));
    CHECK(e.before("b", "b-job", "a", "a-job"));
  }
  SECTION("same age: by name") {
    e.start(queue("b", {.created = "2025-01-01T00:00:00Z"}) + queue("a", {.created = "2025-01-01T00:00:00Z"}) +
            pod("a-job", "a", 1) + pod("b-job", "b", 1));
    CHECK(e.before("a", "a-job", "b", "b-job"));
  }
}

TEST_CASE("queue order: hierarchical, compared where the paths diverge", "[proportion][order]") {
  // d-hi (priority 200) -> t-low (priority 50); d-lo (priority 100) -> t-high (priority 300).
  // t-low vs t-high is decided by their departments: d-hi first. Inside d-lo, t-high (300)
  // goes before its sibling t-mid (150): the leaves' own priorities decide there.
  Env e;
  e.start(queue("d-hi", {.priority = 200}) + queue("d-lo", {}) + queue("t-low", {.parent = "d-hi", .priority = 50}) +
          queue("t-high", {.parent = "d-lo", .priority = 300}) + queue("t-mid", {.parent = "d-lo", .priority = 150}) +
          pod("low-job", "t-low", 1) + pod("high-job", "t-high", 1) + pod("mid-job", "t-mid", 1));
  CHECK(e.before("t-low", "low-job", "t-high", "high-job"));
  CHECK(e.before("t-high", "high-job", "t-mid", "mid-job"));
}

TEST_CASE("queue order: over fair share judged at the department level", "[proportion][order]") {
  // 8 GPUs. d1 (quota 2, weight 0) holds 2 through t1; its other leaf t2 asks 1: at the
  // department level 2 + 1 > fair share 2, so d1 is over though t2 itself holds nothing.
  // d2 (quota 0, weight 1) -> t3 asks 1: within its share. t3 goes before t2.
  Env e;
  e.start(queue("d1", {.gpuQuota = "2", .gpuWeight = "0"}) + queue("d2", {}) +
          queue("t1", {.gpuQuota = "2", .parent = "d1"}) + queue("t2", {.parent = "d1"}) +
          queue("t3", {.parent = "d2"}) + pod("t1-run", "t1", 2, "n1") + pod("t2-job", "t2", 1) +
          pod("t3-job", "t3", 1));
  CHECK(e.before("t3", "t3-job", "t2", "t2-job"));
}

// ---------------------------------------------------------------- capacity

TEST_CASE("capacity: OverLimit names the queue and the numbers, at a parent", "[proportion][capacity]") {
  // dept limit 2 GPUs holds 2 (through team-a); team-b (no limit of its own) asks 1.
  Env e;
  e.start(queue("dept", {.gpuLimit = "2"}) + queue("team-a", {.parent = "dept"}) +
          queue("team-b", {.parent = "dept"}) + queue("other", {}) + pod("a-run", "team-a", 2, "n1") +
          pod("b-job", "team-b", 1) + pod("o-job", "other", 1));
  const std::string r = e.capacity("b-job");
  CHECK_THAT(r, Catch::Contains("OverLimit"));
  CHECK_THAT(r, Catch::Contains("queue dept"));
  CHECK_THAT(r, Catch::Contains("nvidia.com/gpu 2 + 1 > limit 2"));
  CHECK(e.capacity("o-job").empty());
  // What the victim search decides from: the reason and the queue, apart from the words.
  CHECK(e.capacityReason("b-job") == "OverLimit dept");
  CHECK(e.capacityReason("o-job").empty());
}

TEST_CASE("capacity: a refusal carries its reason and queue apart from its message", "[proportion][capacity]") {
  // Two departments share 8 GPUs (quota 4 each): d1 holds its 4 through t1. A non-preemptible job
  // of t2 (quota 0) is refused by t2's own quota; reclaim's bound refuses one more GPU for t1 at
  // d1 (4 + 1 > fair share 4); a queue whose name begins like another's is named whole.
  Env e;
  e.start(queue("d1", {.gpuQuota = "4", .gpuWeight = "0"}) + queue("d2", {.gpuQuota = "4", .gpuWeight = "0"}) +
          queue("t1", {.gpuQuota = "4", .parent = "d1"}) + queue("t2", {.parent = "d1"}) +
          queue("d2-team", {.gpuLimit = "0", .parent = "d2"}) + pod("t1-run", "t1", 4, "n1") + pod("t1-job", "t1", 1) +
          pod("np-job", "t2", 1, "", "build") + pod("d2-job", "d2-team", 1));
  CHECK(e.capacityReason("np-job") == "NonPreemptibleOverQuota t2");
  CHECK(e.reclaimBoundReason("t1-job") == "OverFairShare d1");
  CHECK(e.capacityReason("d2-job") == "OverLimit d2-team");
  CHECK_THAT(e.capacity("d2-job"), Catch::StartsWith("OverLimit: queue d2-team: nvidia.com/gpu 0 + 1 > limit 0"));
}

TEST_CASE("capacity: a non-preemptible job must stay within quota, a preemptible one need not",
          "[proportion][capacity]") {
  // q: quota 2 holds 2 non-preemptible GPUs (build, priority 100). Another non-preemptible
  // 1-GPU job: 2 + 1 > quota 2. A preemptible one (train) may use the idle GPUs.
  Env e;
  e.start(queue("q", {.gpuQuota = "2"}) + pod("np-run", "q", 2, "n1", "build") + pod("np-job", "q", 1, "", "build") +
          pod("p-job", "q", 1, "", "train"));
  const std::string r = e.capacity("np-job");
  CHECK_THAT(r, Catch::Contains("NonPreemptibleOverQuota"));
  CHECK_THAT(r, Catch::Contains("queue q"));
  CHECK_THAT(r, Catch::Contains("non-preemptible 2 + 1 > quota 2"));
  CHECK(e.capacity("p-job").empty());
}

TEST_CASE("capacity: NonPreemptibleOverQuota at a parent, counting only non-preemptible work",
          "[proportion][capacity]") {
  // dept quota 2; team-a (quota 8, so fine itself) holds 1 non-preemptible and 4 preemptible.
  // A 1-GPU non-preemptible job: team-a 1 + 1 <= 8, dept 1 + 1 <= 2: allowed. A 2-GPU one:
  // dept 1 + 2 > 2.
  Env e;
  e.start(queue("dept", {.gpuQuota = "2"}) + queue("team-a", {.gpuQuota = "8", .parent = "dept"}) +
          pod("np-run", "team-a", 1, "n1", "build") + pod("p-run", "team-a", 4, "n1", "train") +
          pod("np-1", "team-a", 1, "", "build") + pod("np-2", "team-a", 2, "", "build"));
  CHECK(e.capacity("np-1").empty());
  const std::string r = e.capacity("np-2");
  CHECK_THAT(r, Catch::Contains("NonPreemptibleOverQuota"));
  CHECK_THAT(r, Catch::Contains("queue dept") && Catch::Contains("non-preemptible 1 + 2 > quota 2"));
}

// ---------------------------------------------------------------- unusable queues

TEST_CASE("orphaned and invalid queues: reasons, the rest unaffected", "[proportion][orphan]") {
  Env e;
  e.start(queue("good", {}) + queue("lost", {.parent = "nowhere"}) + queue("x", {.parent = "y"}) +
          queue("y", {.parent = "x"}) + queue("x-child", {.parent = "x"}) + queue("bad-quota", {.gpuQuota = "-3"}) +
          queue("low-limit", {.gpuQuota = "2", .gpuLimit = "1"}) + queue("dept", {}) +
          queue("team", {.parent = "dept"}) + pod("good-job", "good", 1) + pod("lost-job", "lost", 1) +
          pod("x-job", "x", 1) + pod("child-job", "x-child", 1) + pod("bad-job", "bad-quota", 1) +
          pod("limit-job", "low-limit", 1) + pod("dept-job", "dept", 1) + pod("team-job", "team", 1));
  CHECK(e.invalid("good-job").empty());
  CHECK(e.invalid("team-job").empty());

  const std::string lost = e.invalid("lost-job");
  CHECK_THAT(lost, Catch::Contains("queue lost"));
  CHECK_THAT(lost, Catch::Contains("\"nowhere\" does not exist"));
  CHECK_THAT(lost, Catch::Contains("orphaned"));

  const std::string cycle = e.invalid("x-job");
  CHECK_THAT(cycle, Catch::Contains("parent cycle"));
  CHECK_THAT(cycle, Catch::Contains("x -> y -> x"));

  const std::string child = e.invalid("child-job");
  CHECK_THAT(child, Catch::Contains("queue x-child"));
  CHECK_THAT(child, Catch::Contains("ancestor queue x"));
  CHECK_THAT(child, Catch::Contains("parent cycle"));

  const std::string bad = e.invalid("bad-job");
  CHECK_THAT(bad, Catch::Contains("spec.resources.gpu.quota"));
  CHECK_THAT(bad, Catch::Contains("-3"));  // the value given, not "unlimited"
  CHECK_THAT(bad, Catch::Contains("invalid"));

  const std::string limit = e.invalid("limit-job");
  CHECK_THAT(limit, Catch::Contains("spec.resources.gpu.limit: 1 is below the quota 2"));

  const std::string dept = e.invalid("dept-job");
  CHECK_THAT(dept, Catch::Contains("queue dept has child queues"));
}

TEST_CASE("orphaned queues do not take part in the division", "[proportion][orphan]") {
  // 8 GPUs; good (quota 0) asks 4, the orphan asks 8 with quota 8: the orphan's demand would
  // have taken the deserved share, but good's fair share is its whole request.
  Env e;
  e.start(queue("good", {}) + queue("lost", {.gpuQuota = "8", .parent = "nowhere"}) + pod("g-run", "good", 4, "n1") +
          pod("l-job", "lost", 8) + pod("g-job", "good", 1));
  // good holds 4 and asks 1 more: within a fair share of 5, so it may reclaim (no victims exist,
  // but the queue-level check passes).
  CHECK(e.ssn->canReclaim(e.job("g-job")).ok());
}

// ---------------------------------------------------------------- reclaim rules

TEST_CASE("reclaimable: the victim's queue is over its fair share", "[proportion][reclaim]") {
  // 8 GPUs: a quota 4 asks 4 (pending), b quota 4 holds 8 (train). Fair shares: a 4, b 4.
  // b 8 > 4: over; a 0 + 4 <= 4 may reclaim.
  Env e;
  std::string b;
  for (int i = 0; i < 8; ++i) b += pod("b" + std::to_string(i), "b", 1, "n1");
  e.start(queue("a", {.gpuQuota = "4"}) + queue("b", {.gpuQuota = "4"}) + b + pod("a-job", "a", 4));
  CHECK(e.ssn->canReclaim(e.job("a-job")).ok());
  CHECK(e.ssn->reclaimable(e.job("a-job"), e.task("b0")));
  // Never within the same queue, never the claimant's own pods.
  CHECK_FALSE(e.ssn->reclaimable(e.job("b1"), e.task("b0")));
}

TEST_CASE("reclaimable: reclaimer within deserved takes from a victim over deserved", "[proportion][reclaim]") {
  // 8 GPUs. b: quota 1, holds 3 (train) + asks 4 more pending (requested 7).
  // a: quota 2, asks 1. c: quota 0, asks 1. Deserved pass: a 1, b 1, c 0; remaining 5.
  // Round 1 (b, c unsatisfied): 5 x 1/2 = 2.5 each: c capped at 1, b 1 + 2.5 = 3.5; round 2:
  // b the other 1.5 -> 5. b holds 3 <= 5: not over its fair share; but over its deserved 1, and
  // a stays within its deserved (0 + 1 <= 2): reclaimable. c (0 + 1 > quota 0) may not.
  Env e;
  e.start(queue("a", {.gpuQuota = "2"}) + queue("b", {.gpuQuota = "1"}) + queue("c", {}) +
          pod("b0", "b", 1, "n1") + pod("b1", "b", 1, "n1") + pod("b2", "b", 1, "n1") + pod("b-more", "b", 4) +
          pod("a-job", "a", 1) + pod("c-job", "c", 1));
  CHECK(e.ssn->reclaimable(e.job("a-job"), e.task("b0")));
  CHECK_FALSE(e.ssn->reclaimable(e.job("c-job"), e.task("b0")));
}

TEST_CASE("reclaimable: a victim queue within its quota is protected", "[proportion][reclaim]") {
  // 8 GPUs, b quota 8 holds 8; a quota 0 asks 1. b is neither over fair share nor deserved.
  Env e;
  std::string b;
  for (int i = 0; i < 8; ++i) b += pod("b" + std::to_string(i), "b", 1, "n1");
  e.start(queue("a", {}) + queue("b", {.gpuQuota = "8"}) + b + pod("a-job", "a", 1));
  CHECK_FALSE(e.ssn->reclaimable(e.job("a-job"), e.task("b0")));
  // And a itself has no fair share left to reclaim into: 0 + 1 > 0.
  const auto why = tessera::testing::rejection(e.ssn->canReclaim(e.job("a-job")));
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("queue a would exceed its fair share"));
}

TEST_CASE("reclaimable: non-preemptible work is never a victim", "[proportion][reclaim]") {
  Env e;
  std::string b;
  for (int i = 0; i < 8; ++i) b += pod("b" + std::to_string(i), "b", 1, "n1", i == 0 ? "build" : "train");
  e.start(queue("a", {.gpuQuota = "4"}) + queue("b", {.gpuQuota = "4"}) + b + pod("a-job", "a", 4));
  CHECK_FALSE(e.ssn->reclaimable(e.job("a-job"), e.task("b0")));  // build: priority 100
  CHECK(e.ssn->reclaimable(e.job("a-job"), e.task("b1")));
}

TEST_CASE("reclaimable: reclaimMinRuntime protects young jobs", "[proportion][reclaim]") {
  // b's reclaimMinRuntime is 1h; the clock is 2026-01-01T00:00:00Z. b-young started 10 minutes
  // ago, b-old 2 hours ago.
  Env e;
  std::string b;
  for (int i = 0; i < 7; ++i) b += pod("b" + std::to_string(i), "b", 1, "n1");
  b += pod("b-young", "b", 1, "n1", "train", "2025-12-31T23:50:00Z");
  e.start(queue("a", {.gpuQuota = "4"}) + queue("b", {.gpuQuota = "4", .extra = "reclaimMinRuntime: 1h"}) + b +
          pod("a-job", "a", 4));
  CHECK_FALSE(e.ssn->reclaimable(e.job("a-job"), e.task("b-young")));
  CHECK(e.ssn->reclaimable(e.job("a-job"), e.task("b0")));
}

TEST_CASE("reclaimable: the min runtime is inherited from the parent queue", "[proportion][reclaim]") {
  Env e;
  std::string b;
  for (int i = 0; i < 7; ++i) b += pod("b" + std::to_string(i), "b", 1, "n1");
  b += pod("b-young", "b", 1, "n1", "train", "2025-12-31T23:50:00Z");
  e.start(queue("da", {.gpuQuota = "4"}) + queue("db", {.gpuQuota = "4", .extra = "reclaimMinRuntime: 1h"}) +
          queue("a", {.gpuQuota = "4", .parent = "da"}) + queue("b", {.gpuQuota = "4", .parent = "db"}) + b +
          pod("a-job", "a", 4));
  CHECK_FALSE(e.ssn->reclaimable(e.job("a-job"), e.task("b-young")));
  CHECK(e.ssn->reclaimable(e.job("a-job"), e.task("b0")));
}

// canReclaim checks the claimant's own queue; a reclaim from a sibling inside the same department
// does not change the department's allocation, so a department at its fair share does not block it.
// 8 GPUs: dept-a 4 (a1 holds 4), dept-b 4 (b2 holds 3 of its share 2, b1 holds 1 of 2 and asks 1 more).
TEST_CASE("reclaim: a team below its share may reclaim from an over-share sibling in a full department",
          "[proportion][reclaim]") {
  Env e;
  e.start(queue("dept-a", {.gpuQuota = "4"}) + queue("dept-b", {.gpuQuota = "4"}) +
          queue("a1", {.gpuQuota = "4", .parent = "dept-a"}) + queue("b1", {.gpuQuota = "2", .parent = "dept-b"}) +
          queue("b2", {.gpuQuota = "2", .parent = "dept-b"}) + pod("a1-0", "a1", 4, "n1") + pod("b2-0", "b2", 1, "n1") +
          pod("b2-1", "b2", 1, "n1") + pod("b2-2", "b2", 1, "n1") + pod("b1-0", "b1", 1, "n1") + pod("b1-1", "b1", 1));
  CHECK(e.ssn->canReclaim(e.job("b1-1")).ok());
  CHECK(e.ssn->reclaimable(e.job("b1-1"), e.task("b2-0")));
}

TEST_CASE("reclaimableBound: a pod the department may not take yet, once a sibling's pod is gone",
          "[proportion][reclaim]") {
  // dept (quota 4) holds 3 GPUs in qa (fair share 2, so over it); qb's 2-GPU claimant would take
  // dept to 5 > 4, so qc's pods (another department, over its share of 4) are no victims of it now.
  // Taking qa's pods (its sibling's) lowers dept: the bound counts qc's pods, the verdict does not.
  // Where qa's pods may not go (non-preemptible, "build"), nothing lowers dept: bound = verdict.
  const bool siblingPreemptible = GENERATE(true, false);
  const std::string cls = siblingPreemptible ? "train" : "build";
  Env e;
  e.start(queue("dept", {.gpuQuota = "4"}) + queue("qa", {.gpuQuota = "0", .parent = "dept"}) +
          queue("qb", {.gpuQuota = "2", .parent = "dept"}) + queue("qc", {.gpuQuota = "4"}) +
          pod("qa-0", "qa", 1, "n1", cls) + pod("qa-1", "qa", 1, "n1", cls) + pod("qa-2", "qa", 1, "n1", cls) +
          pod("qc-0", "qc", 1, "n1") + pod("qc-1", "qc", 1, "n1") + pod("qc-2", "qc", 1, "n1") +
          pod("qc-3", "qc", 1, "n1") + pod("qc-4", "qc", 1, "n1") + pod("claim", "qb", 2));
  const SessionJob& claimant = e.job("claim");
  CHECK_FALSE(e.ssn->reclaimable(claimant, e.task("qc-0")));
  CHECK(e.ssn->reclaimableBound(claimant, e.task("qc-0")) == siblingPreemptible);
  // A sibling's pod: taken now when it may be taken at all; the bound agrees.
  CHECK(e.ssn->reclaimable(claimant, e.task("qa-0")) == siblingPreemptible);
  CHECK(e.ssn->reclaimableBound(claimant, e.task("qa-0")) == siblingPreemptible);
  // The claimant's own queue is never its victim, bound or not.
  CHECK_FALSE(e.ssn->reclaimableBound(e.job("qa-0"), e.task("qa-1")));
  // Whole trees (Session::reclaimableUnder, what a walk of the victim order skips): no pod of qc's
  // may be taken now, so qc's tree is refused; the claimant's own tree is asked pod by pod.
  CHECK_FALSE(e.ssn->reclaimableUnder(claimant, e.ssn->findQueue("qc")));
  CHECK(e.ssn->reclaimableUnder(claimant, e.ssn->findQueue("dept")));
}

TEST_CASE("reclaimableUnder: a tree is refused exactly when every pod in it is", "[proportion][reclaim]") {
  // a (quota 4) asks 4 with nothing; b (quota 4) holds 8: over its share, its pods may go, but the
  // non-preemptible one ("build"). With a holding 4 already, another 4 would take it over its fair
  // share: none may go.
  const bool aHolds = GENERATE(false, true);
  Env e;
  std::string b;
  for (int i = 0; i < 8; ++i) b += pod("b" + std::to_string(i), "b", 1, "n1", i == 0 ? "build" : "train");
  e.start(queue("a", {.gpuQuota = "4"}) + queue("b", {.gpuQuota = "4"}) + b + pod("a-job", "a", 4) +
          (aHolds ? pod("a-run", "a", 4, "n2") : std::string()),
          /*nodes=*/2);
  const SessionJob& claimant = e.job("a-job");
  bool any = false;
  for (int i = 0; i < 8; ++i) any = any || e.ssn->reclaimable(claimant, e.task("b" + std::to_string(i)));
  CHECK(any == !aHolds);
  CHECK(e.ssn->reclaimableUnder(claimant, e.ssn->findQueue("b")) == any);
}

TEST_CASE("reclaimBoundQueues, reclaimQueuesNow and reclaimBoundJob: on random trees the bound and the filter "
          "are exactly their products",
          "[proportion][reclaim]") {
  // Random trees (two departments of two or three teams, a top-level queue with and without a min
  // runtime), running pods of every queue (some non-preemptible, some young, some elastic gangs at,
  // above or below their minimum) and a pending pod of every queue asking 1 to 4 GPUs. For every
  // claimant and every running pod, reclaimableBound must be the split's verdict for the pod's
  // queue and its job (Session::reclaimBoundQueues, reclaimBoundJob): the victim search sizes
  // domains from the split alone. And reclaimable must be the exact split's (reclaimQueuesNow, the
  // same job part): the queue-limit scan asks it per queue.
  std::mt19937 rng(43);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int allowed = 0, refused = 0, allowedNow = 0, refusedNow = 0;
  for (int c = 0; c < 60; ++c) {
    Env e;
    std::vector<std::string> leaves;
    std::string yaml;
    for (int d = 0; d < 2; ++d) {
      const std::string dept = "d" + std::to_string(d);
      yaml += queue(dept, {.gpuQuota = std::to_string(pick(12))});
      for (int t = 0, teams = 2 + pick(2); t < teams; ++t) {
        const std::string team = dept + "t" + std::to_string(t);
        yaml += queue(team, {.gpuQuota = std::to_string(pick(6)), .parent = dept,
                             .extra = pick(4) == 0 ? "reclaimMinRuntime: 2h" : ""});
        leaves.push_back(team);
      }
    }
    yaml += queue("solo", {.gpuQuota = std::to_string(pick(8)), .extra = pick(2) ? "reclaimMinRuntime: 2h" : ""});
    leaves.push_back("solo");
    std::vector<std::string> running;
    for (int j = 0; j < 14; ++j) {
      const std::string q = leaves[static_cast<size_t>(pick(static_cast<int>(leaves.size())))];
      const std::string name = "r" + std::to_string(j), cls = pick(5) == 0 ? "build" : "train";
      const std::string started = pick(3) == 0 ? "2025-12-31T23:30:00Z" : "2025-12-31T00:00:00Z";  // young or not
      const int pods = pick(3) == 0 ? 2 + pick(2) : 1;
      std::string y = pods > 1 ? "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " +
                                     name + ", namespace: t}\nspec: {minMember: " + std::to_string(1 + pick(pods + 1)) +
                                     ", queue: " + q + "}\n---\n"
                               : "";
      for (int i = 0; i < pods; ++i) {
        std::string p = pod(name + "-" + std::to_string(i), q, 1, "n" + std::to_string(1 + pick(4)), cls, started);
        if (pods > 1) p.replace(p.find("  labels:"), 0, "  annotations: {pod-group-name: " + name + "}\n");
        y += p;
        running.push_back(name + "-" + std::to_string(i));
      }
      yaml += y;
    }
    for (const std::string& q : leaves) yaml += pod("claim-" + q, q, 1 + pick(4));
    e.start(yaml, /*nodes=*/4);
    for (const std::string& q : leaves) {
      const SessionJob& claimant = e.job("claim-" + q);
      std::vector<uint8_t> perQueue, perQueueNow;
      REQUIRE(e.ssn->reclaimBoundQueues(claimant, perQueue));
      REQUIRE(perQueue.size() == e.ssn->queues().size());
      std::vector<int> all(e.ssn->queues().size());
      std::iota(all.begin(), all.end(), 0);
      REQUIRE(e.ssn->reclaimQueuesNow(claimant, all, perQueueNow));
      REQUIRE(perQueueNow.size() == e.ssn->queues().size());
      for (const std::string& r : running) {
        const SessionTask* victim = nullptr;
        for (const SessionJob& j : e.ssn->jobs())
          for (const SessionTask& t : j.tasks)
            if (t.info->key == "t/" + r) victim = &t;
        REQUIRE(victim);
        const SessionJob& vj = e.ssn->jobs()[static_cast<size_t>(victim->job)];
        const bool split = vj.queue >= 0 && perQueue[static_cast<size_t>(vj.queue)] && e.ssn->reclaimBoundJob(vj);
        INFO("case " << c << ": claimant of " << q << ", victim " << r << "\n" << yaml);
        REQUIRE(e.ssn->reclaimableBound(claimant, *victim) == split);
        (split ? allowed : refused)++;
        const bool now = vj.queue >= 0 && perQueueNow[static_cast<size_t>(vj.queue)] && e.ssn->reclaimBoundJob(vj);
        REQUIRE(e.ssn->reclaimable(claimant, *victim) == now);
        (now ? allowedNow : refusedNow)++;
      }
    }
  }
  CHECK(allowed > 300);  // both verdicts met often
  CHECK(refused > 300);
  CHECK(allowedNow > 100);
  CHECK(refusedNow > 300);
}

// ---------------------------------------------------------------- preempt rules

TEST_CASE("preemptableJob and preemptablePair: on random clusters preemptable is exactly their product",
          "[proportion][preempt]") {
  // Queues with and without a preemptMinRuntime; running jobs of both priorities, young or not,
  // single pods and gangs at or above their minimum, preemptibility from the class or set on the
  // PodGroup either way; claimants of both priorities in every queue. The victim search sizes
  // preempt's domains from the split alone (Session::preemptableSplit): for every claimant and
  // every running pod, preemptable must be the split's verdict, and the pair part must give one
  // verdict for every job of one queue and priority (it reads nothing else of the victim's job).
  std::mt19937 rng(47);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int allowed = 0, refused = 0;
  for (int c = 0; c < 40; ++c) {
    Env e;
    const std::vector<std::string> queues = {"a", "b", "c"};
    std::string yaml;
    for (const std::string& q : queues)
      yaml += queue(q, {.gpuQuota = "8", .extra = pick(2) ? "preemptMinRuntime: 2h" : ""});
    std::vector<std::string> running;
    for (int j = 0; j < 12; ++j) {
      const std::string q = queues[static_cast<size_t>(pick(3))];
      const std::string name = "r" + std::to_string(j), cls = pick(2) ? "build" : "train";
      const std::string started = pick(3) == 0 ? "2025-12-31T23:30:00Z" : "2025-12-31T00:00:00Z";  // young or not
      const int pods = pick(2) ? 2 + pick(2) : 1;
      const char* const pre[] = {"", "preemptible", "non-preemptible"};
      const std::string preemptibility = pre[pick(3)];
      const bool group = pods > 1 || !preemptibility.empty();
      std::string y = group ? "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
                                  ", namespace: t}\nspec: {minMember: " + std::to_string(1 + pick(pods)) +
                                  ", queue: " + q + ", priorityClassName: " + cls +
                                  (preemptibility.empty() ? "" : ", preemptibility: " + preemptibility) + "}\n---\n"
                            : "";
      for (int i = 0; i < pods; ++i) {
        std::string p = pod(name + "-" + std::to_string(i), q, 1, "n" + std::to_string(1 + pick(3)), cls, started);
        if (group) p.replace(p.find("  labels:"), 0, "  annotations: {pod-group-name: " + name + "}\n");
        y += p;
        running.push_back(name + "-" + std::to_string(i));
      }
      yaml += y;
    }
    for (const std::string& q : queues)
      for (const std::string cls : {"train", "build"}) yaml += pod("claim-" + q + "-" + cls, q, 1, "", cls);
    e.start(yaml, /*nodes=*/3);
    REQUIRE(e.ssn->preemptableSplit());
    for (const std::string& q : queues)
      for (const std::string cls : {"train", "build"}) {
        const SessionJob& claimant = e.job("claim-" + q + "-" + cls);
        std::map<std::pair<int, int32_t>, bool> pairOf;  // per victim job's queue and priority
        for (const std::string& r : running) {
          const SessionTask* found = nullptr;
          for (const SessionJob& j : e.ssn->jobs())
            for (const SessionTask& t : j.tasks)
              if (t.info->key == "t/" + r) found = &t;
          REQUIRE(found);
          const SessionTask& victim = *found;
          const SessionJob& vj = e.ssn->jobs()[static_cast<size_t>(victim.job)];
          const bool pairs = e.ssn->preemptablePair(claimant, vj);
          const bool split = e.ssn->preemptableJob(vj) && pairs;
          INFO("case " << c << ": claimant " << q << "/" << cls << ", victim " << r << "\n" << yaml);
          REQUIRE(e.ssn->preemptable(claimant, victim) == split);
          const auto [it, fresh] = pairOf.try_emplace({vj.queue, vj.priority}, pairs);
          REQUIRE(it->second == pairs);
          (split ? allowed : refused)++;
        }
      }
  }
  CHECK(allowed > 150);  // both verdicts met often
  CHECK(refused > 150);
}

TEST_CASE("victim order in one queue: priority, surplus pods, newer job, then job by job (its pods together)",
          "[proportion][victims]") {
  // Every pod runs in queue q. low-* have the lowest priority; the gangs ga, gb and gc theirs
  // (train), gc created later than ga and gb, which were created together: ga's and gb's pods
  // then go job by job in key order (each job's chunk together), though their pod keys interleave.
  // elastic's minMember is 1 of its 3 running pods: two are surplus and go first among train.
  auto gang = [](const std::string& name, int min, const std::string& created) {
    return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
           ", namespace: t, creationTimestamp: \"" + created + "\"}\nspec: {minMember: " + std::to_string(min) +
           ", queue: q, priorityClassName: train}\n---\n";
  };
  auto member = [](const std::string& name, const std::string& group, const std::string& cls = "train") {
    return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
           "\n  namespace: t\n  creationTimestamp: \"2025-12-30T00:00:00Z\"\n  labels: {tessera.dev/queue: q}\n" +
           (group.empty() ? "" : "  annotations: {pod-group-name: " + group + "}\n") +
           "spec:\n  schedulerName: tessera\n  nodeName: n1\n  priorityClassName: " + cls +
           "\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: \"1\"}}}]\n"
           "status: {phase: Running, startTime: \"2025-12-31T00:00:00Z\"}\n---\n";
  };
  const std::string early = "2025-12-30T00:00:00Z", late = "2025-12-30T06:00:00Z";
  Env e;
  e.cfg = tessera::testing::configWith({makePlugin("proportion", tessera::plugins::makeProportion)});
  e.start(queue("q", {.gpuQuota = "8"}) + "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n---\n" +
          gang("ga", 2, early) + gang("gb", 2, early) + gang("gc", 2, late) + gang("elastic", 1, early) +
          member("z1", "ga") + member("z2", "gb") + member("z3", "ga") + member("z4", "gb") + member("z5", "gc") +
          member("z6", "gc") + member("e1", "elastic") + member("e2", "elastic") + member("e3", "elastic") +
          member("low-a", "", "low"));
  std::vector<const SessionTask*> pods;
  for (const auto& j : e.ssn->jobs())
    for (const auto& t : j.tasks) pods.push_back(&t);
  std::sort(pods.begin(), pods.end(), [&](const SessionTask* a, const SessionTask* b) { return e.ssn->victimLess(*a, *b); });
  std::vector<std::string> order;
  for (const SessionTask* t : pods) order.push_back(t->info->key.substr(2));
  // elastic's surplus pods (the first two it gives up: newest pod, then key; all were created
  // together), then the newer gang gc, then the gangs created early by key: elastic (its last pod),
  // ga and gb.
  const std::vector<std::string> want = {"low-a", "e1", "e2", "z5", "z6", "e3", "z1", "z3", "z2", "z4"};
  CHECK(order == want);
}

TEST_CASE("preemptable: same queue, strictly lower priority, preemptMinRuntime", "[proportion][preempt]") {
  // q's preemptMinRuntime is 30m. young started 10 minutes ago, old a day ago; other is in
  // another queue. The claimant has priority 100 (build), the victims 50 (train).
  Env e;
  e.start(queue("q", {.gpuQuota = "8", .extra = "preemptMinRuntime: 30m"}) + queue("other", {}) +
          pod("old", "q", 2, "n1") + pod("young", "q", 2, "n1", "train", "2025-12-31T23:50:00Z") +
          pod("foreign", "other", 2, "n1") + pod("claim", "q", 4, "", "build"));
  CHECK(e.ssn->preemptable(e.job("claim"), e.task("old")));
  CHECK_FALSE(e.ssn->preemptable(e.job("claim"), e.task("young")));
  CHECK_FALSE(e.ssn->preemptable(e.job("claim"), e.task("foreign")));
  // Equal priority never preempts.
  CHECK_FALSE(e.ssn->preemptable(e.job("old"), e.task("young")));
}

}  // namespace
