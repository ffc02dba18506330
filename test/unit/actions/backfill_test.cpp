// backfill at the session level: places jobs that fit on idle resources as they are now, never
// on releasing resources or room pipelined this cycle, and pipelines nothing.
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

TEST_CASE("backfill: idle resources only, never releasing ones", "[actions][backfill]") {
  // n1's 4 GPUs are held by a terminating pod (releasing). A 1-GPU pod that fits only there is
  // neither bound nor pipelined by backfill (allocate would pipeline it); with n2 idle it is bound
  // on n2.
  const std::string leaving =
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: leaving\n  namespace: t\n  labels: {tessera.dev/queue: q}\n"
      "  deletionTimestamp: \"2026-01-01T00:00:30Z\"\nspec:\n  schedulerName: tessera\n  nodeName: n1\n"
      "  containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: \"4\"}, limits: "
      "{nvidia.com/gpu: \"4\"}}}]\nstatus: {phase: Running}\n---\n";
  SECTION("only releasing room: nothing") {
    Env e("backfill");
    auto r = e.run(node("n1", 4), queue("q", "8") + leaving + pod("small", "q", 1));
    CHECK(r.binds.empty());
    CHECK(r.pipelined.empty());
  }
  SECTION("idle room elsewhere: bound there") {
    Env e("backfill");
    auto r = e.run(node("n1", 4) + node("n2", 1), queue("q", "8") + leaving + pod("small", "q", 1));
    REQUIRE(r.binds.size() == 1);
    CHECK(r.binds[0].node == "n2");
    CHECK(r.pipelined.empty());
  }
  SECTION("allocate pipelines the big job; backfill does not take its room") {
    // allocate pipelines big (4 GPUs) onto n1's releasing GPUs and binds small-a on n2's idle GPU;
    // backfill then finds no idle room for small-b (n1's room is promised to big).
    Env e("allocate, backfill");
    auto r = e.run(node("n1", 4) + node("n2", 1),
                   queue("q", "8") + leaving + pod("big", "q", 4, "", "train", "", "2025-12-31T00:00:00Z") +
                       pod("small-a", "q", 1, "", "train", "", "2025-12-31T00:00:01Z") +
                       pod("small-b", "q", 1, "", "train", "", "2025-12-31T00:00:02Z"));
    CHECK(pipelinedTo(r, "t/big") == "n1");
    REQUIRE(r.binds.size() == 1);
    CHECK(r.binds[0].podKey == "t/small-a");
    CHECK(pipelinedTo(r, "t/small-b").empty());
  }
}

TEST_CASE("backfill: the fewest GPUs any pending pod asks decides whether jobs are searched", "[actions][backfill]") {
  // Backfill visits no job when every pending pod asks more whole GPUs than any node has idle.
  // Here big asks 2 and small 1; n1 has 1 idle GPU: small is bound there (the bound is the fewest
  // any pod asks, not the first job's, nor the most).
  Env e("backfill");
  SECTION("one idle GPU, a 1-GPU pod among 2-GPU ones: bound") {
    auto r = e.run(node("n1", 1), queue("q", "8") + pod("big", "q", 2, "", "train", "", "2025-12-31T00:00:00Z") +
                                      pod("small", "q", 1, "", "train", "", "2025-12-31T00:00:01Z") +
                                      pod("big2", "q", 2, "", "train", "", "2025-12-31T00:00:02Z"));
    REQUIRE(r.binds.size() == 1);
    CHECK(r.binds[0].podKey == "t/small");
  }
  SECTION("one idle GPU, only 2-GPU pods: nothing") {
    auto r = e.run(node("n1", 1), queue("q", "8") + pod("big", "q", 2) + pod("big2", "q", 2));
    CHECK(r.binds.empty());
    CHECK(r.pipelined.empty());
  }
}

}  // namespace
