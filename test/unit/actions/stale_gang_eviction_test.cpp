// stalegangeviction at the session level: a gang running below its minMember is evicted whole
// once it has been so for longer than gracePeriod. The action object remembers since when each
// gang is stale across sessions (a restart, i.e. a new action object, starts counting again);
// a gang that recovers is forgotten.
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

struct Stale {
  TestCluster c;
  Config cfg = config("actions: [stalegangeviction]\nactionArgs:\n  stalegangeviction: {gracePeriod: 60s}\n");
  void start(int running) {
    std::string y = queue("q", "8") + group("g", "q", 3);
    for (int i = 0; i < running; ++i) y += pod("g-" + std::to_string(i), "q", 1, "n1", "train", "g");
    for (int i = running; i < 3; ++i) y += pod("g-" + std::to_string(i), "q", 1, "", "train", "g");
    c.create(node("n1", 8) + kClasses + y);
    c.start();
  }
  SessionResult cycle(Config& with) {
    Session ssn(c.snapshot(), with, c.clock);
    ssn.open();
    ssn.runActions();
    return ssn.close();
  }
  SessionResult cycle() { return cycle(cfg); }
  void advance(int64_t seconds) { c.clock.advance(tessera::api::Duration{seconds * 1000}); }
};

TEST_CASE("stale gang: evicted whole only after the grace period", "[actions][stalegang]") {
  Stale s;
  s.start(2);  // 2 of minMember 3 running, the third pending (and not placed: no allocate here)
  CHECK(s.cycle().evictions.empty());  // first seen stale now
  s.advance(30);
  CHECK(s.cycle().evictions.empty());  // 30s < 60s
  s.advance(29);
  CHECK(s.cycle().evictions.empty());  // 59s < 60s
  s.advance(1);
  auto r = s.cycle();                  // 60s: not less than the grace period
  CHECK(evicted(r) == std::vector<std::string>{"t/g-0", "t/g-1"});
  REQUIRE_FALSE(r.evictions.empty());
  CHECK_THAT(r.evictions[0].reason, Catch::Contains("stale gang: 2/3 pods running"));
}

TEST_CASE("stale gang: the memory is the action object's", "[actions][stalegang]") {
  Stale s;
  s.start(2);
  CHECK(s.cycle().evictions.empty());
  s.advance(120);
  // A new action object (a restarted scheduler) has not seen the gang before: it starts counting.
  Config fresh = config("actions: [stalegangeviction]\nactionArgs:\n  stalegangeviction: {gracePeriod: 60s}\n");
  CHECK(s.cycle(fresh).evictions.empty());
  // The original one has: 120s > 60s.
  CHECK(s.cycle().evictions.size() == 2);
}

TEST_CASE("stale gang: a gang at its minMember, or not running at all, is not stale", "[actions][stalegang]") {
  SECTION("at minMember") {
    Stale s;
    s.start(3);
    s.cycle();
    s.advance(600);
    CHECK(s.cycle().evictions.empty());
  }
  SECTION("nothing running") {
    Stale s;
    s.start(0);
    s.cycle();
    s.advance(600);
    CHECK(s.cycle().evictions.empty());
  }
}

}  // namespace
