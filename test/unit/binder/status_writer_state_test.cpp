// StatusWriter, the writes of the scheduler's saved state (issue 17, item 5): PodGroup annotations
// a session asks for (merge patches of metadata.annotations, deduplicated while asked, written
// again once asked again after they were seen), and put() of a whole object (created, then
// replaced; coalesced). Synchronous writer over the in-memory cluster; drain() waits.
#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/clock.h"
#include "tessera/binder/status_writer.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/cache/snapshot.h"
#include "tessera/framework/session.h"

namespace {

using namespace tessera;  // NOLINT(google-build-using-namespace)
using cache::Json;

struct Fixture {
  api::FakeClock clock{api::parseTime("2026-01-01T00:00:00Z").value()};
  cache::MemoryCluster cluster{clock};
  std::unique_ptr<binder::StatusWriter> writer;
  cache::Snapshot snapshot;
  Fixture() {
    binder::StatusWriterOptions o;
    o.background = false;
    writer = std::make_unique<binder::StatusWriter>(cluster, clock, o);
    REQUIRE(cluster
                .create(api::Kind::PodGroup,
                        Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                             {"kind", "PodGroup"},
                             {"metadata", {{"name", "g"}, {"namespace", "t"}, {"annotations", {{"keep", "me"}}}}},
                             {"spec", {{"minMember", 2}}}})
                .ok());
  }
  /// One cycle's update() asking for `value` (nullopt: removal), or for nothing.
  void cycle(std::optional<std::optional<std::string>> ask) {
    framework::SessionResult r;
    if (ask) r.annotations.push_back({"t", "g", "tessera.dev/stale-since", *ask});
    writer->update(r, snapshot);
    writer->drain();
  }
  Json annotations() {
    auto pg = cluster.get(api::Kind::PodGroup, "t", "g");
    REQUIRE(pg.ok());
    return (*pg)["metadata"].value("annotations", Json::object());
  }
};

}  // namespace

TEST_CASE("status writer: PodGroup annotations are merged, deduplicated while asked, and removed",
          "[binder][status][state]") {
  Fixture f;
  f.cycle(std::optional<std::string>("2026-01-01T00:00:00Z"));
  CHECK(f.annotations() == Json{{"keep", "me"}, {"tessera.dev/stale-since", "2026-01-01T00:00:00Z"}});
  const uint64_t written = f.writer->stats().written;
  f.cycle(std::optional<std::string>("2026-01-01T00:00:00Z"));  // asked again before it is seen: no write
  CHECK(f.writer->stats().written == written);
  f.cycle(std::nullopt);  // seen: not asked; the key is forgotten
  // Removed by hand, asked again: written again.
  REQUIRE(f.cluster
              .patch(api::Kind::PodGroup, "t", "g", cache::PatchType::Merge,
                     Json{{"metadata", {{"annotations", {{"tessera.dev/stale-since", nullptr}}}}}})
              .ok());
  f.cycle(std::optional<std::string>("2026-01-01T00:00:00Z"));
  CHECK(f.annotations().value("tessera.dev/stale-since", "") == "2026-01-01T00:00:00Z");
  // Removal: only that annotation goes.
  f.cycle(std::optional<std::optional<std::string>>(std::optional<std::string>()));
  CHECK(f.annotations() == Json{{"keep", "me"}});
}

TEST_CASE("status writer: put() creates the object, then replaces it; the latest queued wins",
          "[binder][status][state]") {
  Fixture f;
  auto cm = [](const std::string& value) {
    return Json{{"apiVersion", "v1"},
                {"kind", "ConfigMap"},
                {"metadata", {{"name", "tessera-usage"}, {"namespace", "tessera-system"}}},
                {"data", {{"usage.json", value}}}};
  };
  f.writer->put(api::Kind::ConfigMap, cm("1"));
  f.writer->drain();
  auto got = f.cluster.get(api::Kind::ConfigMap, "tessera-system", "tessera-usage");
  REQUIRE(got.ok());
  CHECK((*got)["data"]["usage.json"] == "1");
  f.writer->put(api::Kind::ConfigMap, cm("2"));
  f.writer->put(api::Kind::ConfigMap, cm("3"));  // coalesced with "2": one write
  const uint64_t before = f.writer->stats().written;
  f.writer->drain();
  CHECK(f.writer->stats().written == before + 1);
  got = f.cluster.get(api::Kind::ConfigMap, "tessera-system", "tessera-usage");
  REQUIRE(got.ok());
  CHECK((*got)["data"]["usage.json"] == "3");
}
