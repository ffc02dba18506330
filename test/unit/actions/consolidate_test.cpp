// consolidate at the session level: a pending preemptible job makes room by moving preemptible
// pods to other nodes, only when every moved pod is placed again elsewhere (its room reserved
// there, not reported to the binder) and at most maxConsolidationPreemptees pods move.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"
#include "support/action_env.h"

namespace {

using namespace tessera::testing::actions;  // NOLINT(google-build-using-namespace)

using tessera::framework::Config;
using tessera::framework::Session;
using tessera::framework::SessionResult;
using tessera::testing::TestCluster;

TEST_CASE("consolidate: moves a pod when it can be re-placed, and only then", "[actions][consolidate]") {
  // n1 (4 GPUs) runs one 1-GPU pod, n2 (2 GPUs) has 1 GPU free. A 4-GPU preemptible pod fits only
  // on n1 if its pod moves to n2: one eviction, the claimant pipelined on n1, nothing bound.
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + pod("mover", "q", 1, "n1") +
                                                    pod("stayer", "q", 1, "n2") + pod("big", "q", 4));
  CHECK(evicted(r) == std::vector<std::string>{"t/mover"});
  CHECK(pipelinedTo(r, "t/big") == "n1");
  CHECK(r.binds.empty());  // the reserved room on n2 is not a bind
  CHECK_THAT(r.evictions[0].reason, Catch::Contains("moved to make room for pod t/big"));
}

TEST_CASE("consolidate: refuses when a victim cannot be re-placed", "[actions][consolidate]") {
  // Same, but n2 is full: the pod could not run elsewhere, so nothing is evicted.
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + pod("mover", "q", 1, "n1") +
                                                    pod("s1", "q", 1, "n2") + pod("s2", "q", 1, "n2") +
                                                    pod("big", "q", 4));
  CHECK(r.evictions.empty());
  CHECK(r.pipelined.empty());
}

TEST_CASE("consolidate: two victims may not share one free slot", "[actions][consolidate]") {
  // n1 (4 GPUs) runs two 1-GPU pods; n2 (2 GPUs) has only 1 GPU free. Both pods must move for the
  // 4-GPU pod, but only one can be re-placed: the first one's room is reserved, so the second
  // finds none, and the whole attempt is rolled back.
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + pod("m1", "q", 1, "n1") +
                                                    pod("m2", "q", 1, "n1") + pod("s1", "q", 1, "n2") +
                                                    pod("big", "q", 4));
  CHECK(r.evictions.empty());
  CHECK(r.pipelined.empty());
}

TEST_CASE("consolidate: at most maxConsolidationPreemptees pods move", "[actions][consolidate]") {
  // n1 (4 GPUs) runs two 1-GPU pods, n2 (4 GPUs) two more: the 4-GPU pod needs two moves.
  const std::string objects = queue("q", "8") + pod("p1", "q", 1, "n1") + pod("p2", "q", 1, "n1") +
                              pod("p3", "q", 1, "n2") + pod("p4", "q", 1, "n2") + pod("big", "q", 4);
  SECTION("1: refused") {
    TestCluster c;
    c.create(node("n1", 4) + node("n2", 4) + kClasses + objects);
    c.start();
    Config cfg = config("actions: [consolidate]\nactionArgs:\n  consolidate: {maxConsolidationPreemptees: 1}\n");
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    ssn.runActions();
    auto r = ssn.close();
    CHECK(r.evictions.empty());
  }
  SECTION("2: exactly enough") {
    TestCluster c;
    c.create(node("n1", 4) + node("n2", 4) + kClasses + objects);
    c.start();
    Config cfg = config("actions: [consolidate]\nactionArgs:\n  consolidate: {maxConsolidationPreemptees: 2}\n");
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    ssn.runActions();
    auto r = ssn.close();
    CHECK(r.evictions.size() == 2);
    CHECK_FALSE(pipelinedTo(r, "t/big").empty());
  }
}

TEST_CASE("consolidate: never for a non-preemptible job", "[actions][consolidate]") {
  Env e("consolidate");
  auto r = e.run(node("n1", 4) + node("n2", 2),
                 "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: build}\nvalue: 100\n---\n" +
                     queue("q", "8") + pod("mover", "q", 1, "n1") + pod("stayer", "q", 1, "n2") +
                     pod("big", "q", 4, "", "build"));
  CHECK(r.evictions.empty());
}

}  // namespace

TEST_CASE("consolidate: releasing GPUs count as free room; a cluster with less free room than any pod asks moves none",
          "[actions][consolidate]") {
  // n1 (4 GPUs) runs mover (1 GPU) and leaving (1 GPU, terminating); n2 (2 GPUs) runs stayer. big
  // (4 GPUs) fits on n1 once mover moves to n2 and leaving is gone: free room 2 idle + 1 releasing
  // on n1, 1 on n2 (4 in all, as much as big asks: consolidation searches).
  const std::string leaving =
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: leaving\n  namespace: t\n  labels: {tessera.dev/queue: q}\n"
      "  deletionTimestamp: \"2026-01-01T00:00:30Z\"\nspec:\n  schedulerName: tessera\n  priorityClassName: train\n"
      "  nodeName: n1\n  containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: \"1\"}, "
      "limits: {nvidia.com/gpu: \"1\"}}}]\nstatus: {phase: Running}\n---\n";
  SECTION("as much free room as the pod asks: moved") {
    Env e("consolidate");
    auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + leaving + pod("mover", "q", 1, "n1") +
                                                      pod("stayer", "q", 1, "n2") + pod("big", "q", 4));
    CHECK(evicted(r) == std::vector<std::string>{"t/mover"});
    CHECK(pipelinedTo(r, "t/big") == "n1");
  }
  SECTION("one GPU less (n2 full): nothing moves") {
    Env e("consolidate");
    auto r = e.run(node("n1", 4) + node("n2", 2), queue("q", "8") + leaving + pod("mover", "q", 1, "n1") +
                                                      pod("s1", "q", 1, "n2") + pod("s2", "q", 1, "n2") +
                                                      pod("big", "q", 4));
    CHECK(r.evictions.empty());
    CHECK(r.pipelined.empty());
  }
}
