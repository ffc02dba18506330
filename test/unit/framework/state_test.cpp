// The time-aware usage history (framework/state.h): what it integrates, its saved form (a round
// trip is exact, and a history restored from it continues exactly as the original), and the errors
// of a damaged saved form, each naming the field.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tessera/framework/state.h"

namespace {

using tessera::api::Duration;
using tessera::api::Time;
using tessera::framework::UsageHistory;
using Json = nlohmann::json;

constexpr int64_t kMin = 60'000;
constexpr int64_t kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

UsageHistory::Sample sample(int64_t minutes, int64_t a, int64_t b, int64_t capacity = 2000) {
  UsageHistory::Sample s;
  s.at = Time{kT0 + minutes * kMin};
  if (a) s.held["team-a"] = {a, a * 4, a << 20};
  if (b) s.held["team-b"] = {b, b * 4, b << 20};
  s.capacity = {capacity, capacity * 4, capacity << 20};
  return s;
}

}  // namespace

TEST_CASE("usage history: piecewise constant between samples, over the window, normalized by capacity",
          "[framework][state]") {
  UsageHistory h;
  const Duration hour{60 * kMin};
  h.record(sample(0, 2000, 0), hour);
  CHECK(h.usage(Time{kT0}, hour, Duration{0}).empty());  // nothing has been held for any time yet
  h.record(sample(30, 1000, 1000), hour);
  h.record(sample(60, 0, 0), hour);
  auto u = h.usage(Time{kT0 + 60 * kMin}, hour, Duration{0});
  // team-a: 2 GPUs for 30 min then 1 for 30 min, of 2 for 60 min: 0.75; team-b: 0.25.
  CHECK(u["team-a"][0] == Approx(0.75));
  CHECK(u["team-b"][0] == Approx(0.25));
  CHECK(u["team-a"][2] == Approx(0.75));
  // 90 minutes on: only the last 60 count, in which nothing was held.
  h.record(sample(150, 0, 0), hour);
  u = h.usage(Time{kT0 + 150 * kMin}, hour, Duration{0});
  CHECK(u["team-a"][0] == Approx(0.0));
  // Buckets older than the window are gone: memory is bounded by the window, not the cycle count.
  CHECK(h.buckets().size() <= 61);
  CHECK(h.bucketMillis() == kMin);
}

TEST_CASE("usage history: half-life decay weighs recent usage more", "[framework][state]") {
  UsageHistory h;
  const Duration hour{60 * kMin};
  h.record(sample(0, 2000, 0), hour);
  h.record(sample(30, 0, 2000), hour);
  h.record(sample(60, 0, 0), hour);
  auto u = h.usage(Time{kT0 + 60 * kMin}, hour, Duration{10 * kMin});
  CHECK(u["team-b"][0] > u["team-a"][0]);
  CHECK(u["team-a"][0] + u["team-b"][0] == Approx(1.0));
}

TEST_CASE("usage history: the saved form round-trips exactly, and a restored history continues as the original",
          "[framework][state]") {
  const Duration hour{60 * kMin};
  UsageHistory original;
  for (int m = 0; m <= 95; m += 7) original.record(sample(m, (m % 3) * 700, (m % 2) * 900 + 1), hour);
  const std::string text = original.toJson().dump();
  auto restored = UsageHistory::fromJson(Json::parse(text));
  REQUIRE(restored.ok());
  CHECK(*restored == original);
  CHECK(restored->toJson().dump() == text);
  // Both go on with the same samples (a restart at minute 95, the same cluster after it).
  for (int m = 100; m <= 130; m += 5) {
    original.record(sample(m, 1500, 500), hour);
    restored->record(sample(m, 1500, 500), hour);
  }
  const Time now{kT0 + 130 * kMin};
  CHECK(restored->usage(now, hour, Duration{0}) == original.usage(now, hour, Duration{0}));
  CHECK(restored->usage(now, hour, Duration{20 * kMin}) == original.usage(now, hour, Duration{20 * kMin}));
  // An empty history saves and restores as empty.
  auto empty = UsageHistory::fromJson(UsageHistory().toJson());
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("usage history: a gap (the scheduler was down) counts at the last sample's amounts", "[framework][state]") {
  const Duration hour{60 * kMin};
  UsageHistory h;
  h.record(sample(0, 2000, 0), hour);
  h.record(sample(600, 0, 0), hour);  // ten hours later: only the window is folded
  CHECK(h.buckets().size() <= 62);
  auto u = h.usage(Time{kT0 + 600 * kMin}, hour, Duration{0});
  CHECK(u["team-a"][0] == Approx(1.0));
}

TEST_CASE("usage history: a new window re-buckets what is kept", "[framework][state]") {
  UsageHistory h;
  h.record(sample(0, 2000, 0), Duration{60 * kMin});
  h.record(sample(60, 0, 0), Duration{60 * kMin});
  h.record(sample(60, 0, 0), Duration{120 * kMin});  // the window doubled: 2-minute buckets
  CHECK(h.bucketMillis() == 2 * kMin);
  auto u = h.usage(Time{kT0 + 60 * kMin}, Duration{120 * kMin}, Duration{0});
  CHECK(u["team-a"][0] == Approx(1.0));
}

TEST_CASE("usage history: a damaged saved form is an error naming the field", "[framework][state]") {
  const Duration hour{60 * kMin};
  UsageHistory h;
  h.record(sample(0, 2000, 0), hour);
  h.record(sample(5, 2000, 0), hour);
  const Json good = h.toJson();
  auto failsWith = [](const Json& j) {
    auto r = UsageHistory::fromJson(j);
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK_THAT(failsWith(Json::array()), Catch::Contains("want an object"));
  Json j = good;
  j["version"] = 2;
  CHECK_THAT(failsWith(j), Catch::Contains("version"));
  j = good;
  j["last"]["held"]["team-a"] = Json::array({1, 2});
  CHECK_THAT(failsWith(j), Catch::Contains("last.held.team-a"));
  j = good;
  j["buckets"][0]["to"] = j["buckets"][0]["start"].get<int64_t>() + 2 * kMin;
  CHECK_THAT(failsWith(j), Catch::Contains("buckets[0].from/to"));
  j = good;
  j["buckets"][0]["used"]["team-a"][1] = "x";
  CHECK_THAT(failsWith(j), Catch::Contains("buckets[0].used.team-a[1]"));
  j = good;
  j.erase("bucketMillis");
  CHECK_THAT(failsWith(j), Catch::Contains("bucketMillis"));
}
