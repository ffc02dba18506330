// The stale-gang timer read back from a PodGroup (annotation tessera.dev/stale-since, written by
// stalegangeviction): parsed into api::PodGroup::staleSince; a value that is not a time leaves it
// unset without failing the PodGroup (the annotation is the scheduler's own: it rewrites it).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"

namespace {

nlohmann::json podGroup(const std::string& staleSince) {
  nlohmann::json j = {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                      {"kind", "PodGroup"},
                      {"metadata", {{"name", "g"}, {"namespace", "t"}}},
                      {"spec", {{"minMember", 2}}}};
  if (!staleSince.empty()) j["metadata"]["annotations"] = {{"tessera.dev/stale-since", staleSince}};
  return j;
}

}  // namespace

TEST_CASE("PodGroup: tessera.dev/stale-since is read as a time; an unreadable one is ignored", "[convert][stale]") {
  auto pg = tessera::api::podGroupFromJson(podGroup("2026-01-01T00:01:02Z"));
  REQUIRE(pg.ok());
  REQUIRE(pg->staleSince.has_value());
  CHECK(*pg->staleSince == tessera::api::parseTime("2026-01-01T00:01:02Z").value());
  auto none = tessera::api::podGroupFromJson(podGroup(""));
  REQUIRE(none.ok());
  CHECK_FALSE(none->staleSince.has_value());
  auto bad = tessera::api::podGroupFromJson(podGroup("last tuesday"));
  REQUIRE(bad.ok());
  CHECK_FALSE(bad->staleSince.has_value());
  CHECK(*bad->meta.annotation("tessera.dev/stale-since") == "last tuesday");
}
