// stalegangeviction at the session level: a gang running below its minMember is evicted whole
// once it has been so for longer than gracePeriod. Since when is kept on the PodGroup (annotation
// tessera.dev/stale-since, asked for in SessionResult::annotations when the gang becomes stale and
// removed when it stops being so) and, until that is written, in the scheduler's state: a config
// reload (a new action object, same state) and a restart (a new state, the annotation written)
// both keep the original deadline.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>
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
using tessera::framework::SchedulerState;
using tessera::framework::Session;
using tessera::framework::SessionResult;
using tessera::testing::TestCluster;
using Json = nlohmann::json;

constexpr const char* kStale = "tessera.dev/stale-since";

Config staleConfig() {
  return config("actions: [stalegangeviction]\nactionArgs:\n  stalegangeviction: {gracePeriod: 60s}\n");
}

struct Stale {
  TestCluster c;
  SchedulerState state;  // the scheduler's: outlives config reloads
  Config cfg = staleConfig();
  void start(int running, const std::string& annotation = "") {
    std::string g = group("g", "q", 3);
    if (!annotation.empty())
      g = "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: t, "
          "annotations: {" +
          std::string(kStale) + ": \"" + annotation +
          "\"}}\nspec: {minMember: 3, queue: q, priorityClassName: train}\n---\n";
    std::string y = queue("q", "8") + g;
    for (int i = 0; i < running; ++i) y += pod("g-" + std::to_string(i), "q", 1, "n1", "train", "g");
    for (int i = running; i < 3; ++i) y += pod("g-" + std::to_string(i), "q", 1, "", "train", "g");
    c.create(node("n1", 8) + kClasses + y);
    c.start();
  }
  SessionResult cycle(Config& with, SchedulerState& st) {
    Session ssn(c.snapshot(), with, c.clock, &st);
    ssn.open();
    ssn.runActions();
    return ssn.close();
  }
  SessionResult cycle() { return cycle(cfg, state); }
  /// Writes the annotations the cycle asked for, as the status writer does.
  void write(const SessionResult& r) {
    for (const auto& a : r.annotations) {
      const Json patch = {{"metadata", {{"annotations", {{a.key, a.value ? Json(*a.value) : Json(nullptr)}}}}}};
      REQUIRE(
          c.cluster.patch(tessera::api::Kind::PodGroup, a.ns, a.name, tessera::cache::PatchType::Merge, patch).ok());
    }
  }
  /// The PodGroup's stale-since annotation ("" when absent).
  std::string annotation() {
    auto pg = c.cluster.get(tessera::api::Kind::PodGroup, "t", "g");
    REQUIRE(pg.ok());
    return (*pg)["metadata"].value("annotations", Json::object()).value(kStale, "");
  }
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

TEST_CASE("stale gang: a config reload keeps the timer (the state is the scheduler's, not the action's)",
          "[actions][stalegang]") {
  Stale s;
  s.start(2);
  CHECK(s.cycle().evictions.empty());
  s.advance(60);
  // A reloaded config builds a new action object; the scheduler's state is the same one.
  Config reloaded = staleConfig();
  CHECK(s.cycle(reloaded, s.state).evictions.size() == 2);
}

TEST_CASE("stale gang: the annotation is asked for when the gang becomes stale, once, and removed after",
          "[actions][stalegang]") {
  Stale s;
  s.start(2);
  s.advance(0);
  auto r = s.cycle();
  REQUIRE(r.annotations.size() == 1);
  CHECK(r.annotations[0].ns == "t");
  CHECK(r.annotations[0].name == "g");
  CHECK(r.annotations[0].key == kStale);
  CHECK(r.annotations[0].value == std::optional<std::string>("2026-01-01T00:00:00Z"));
  s.write(r);
  CHECK(s.annotation() == "2026-01-01T00:00:00Z");
  s.advance(10);
  CHECK(s.cycle().annotations.empty());  // written and seen: nothing more to write
  // Nothing runs any more: no longer stale, the annotation goes.
  REQUIRE(s.c.cluster.forceRemove(tessera::api::Kind::Pod, "t", "g-0").ok());
  REQUIRE(s.c.cluster.forceRemove(tessera::api::Kind::Pod, "t", "g-1").ok());
  r = s.cycle();
  REQUIRE(r.annotations.size() == 1);
  CHECK_FALSE(r.annotations[0].value.has_value());
  s.write(r);
  CHECK(s.annotation().empty());
  CHECK(s.cycle().annotations.empty());
}

TEST_CASE("stale gang: a restart (an empty state) keeps the deadline through the annotation", "[actions][stalegang]") {
  Stale s;
  s.start(2);
  s.write(s.cycle());  // stale from 00:00:00, written
  s.advance(30);
  SchedulerState restarted;
  Config fresh = staleConfig();
  auto r = s.cycle(fresh, restarted);
  CHECK(r.evictions.empty());
  CHECK(r.annotations.empty());  // the annotation is read, not rewritten
  s.advance(30);
  // 60 s after the gang became stale, not 60 s after the restart.
  CHECK(s.cycle(fresh, restarted).evictions.size() == 2);
}

TEST_CASE("stale gang: a stale-since annotation from before counts; an unreadable one is rewritten",
          "[actions][stalegang]") {
  SECTION("an earlier time: past the grace period at the first cycle") {
    Stale s;
    s.start(2, "2025-12-31T23:58:00Z");
    auto r = s.cycle();
    CHECK(r.evictions.size() == 2);
    CHECK(r.annotations.empty());
  }
  SECTION("not a time: the scheduler's own annotation, rewritten with now") {
    Stale s;
    s.start(2, "yesterday");
    auto r = s.cycle();
    CHECK(r.evictions.empty());
    REQUIRE(r.annotations.size() == 1);
    CHECK(r.annotations[0].value == std::optional<std::string>("2026-01-01T00:00:00Z"));
  }
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
  SECTION("a mark left from before (a restart) goes at the first cycle, readable or not") {
    for (const char* before : {"2026-01-01T00:00:00Z", "not a time"}) {
      Stale s;
      s.start(3, before);
      auto r = s.cycle();
      REQUIRE(r.annotations.size() == 1);
      CHECK(r.annotations[0].key == kStale);
      CHECK_FALSE(r.annotations[0].value.has_value());
      CHECK(r.evictions.empty());
    }
  }
}

}  // namespace
