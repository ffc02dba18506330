// ConfigFile: the daemon's config file is validated at start and on reload (errors name the key);
// a bad reload leaves the running config alone; schedulerName cannot change while running;
// changed() notices a rewritten file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tessera/app/config_file.h"

namespace {

namespace fs = std::filesystem;

fs::path tempFile(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tessera-config-test-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::trunc) << text; }

}  // namespace

TEST_CASE("ConfigFile: load, reload, bad reloads keep the running config", "[config]") {
  const fs::path file = tempFile("tessera.yaml");
  write(file, "schedulePeriod: 2s\n");
  tessera::app::ConfigFile cf(file.string(), "");
  auto c = cf.load();
  REQUIRE(c.ok());
  CHECK(c->schedulePeriod.millis == 2000);
  CHECK_FALSE(cf.changed());

  SECTION("a valid change is picked up") {
    write(file, "schedulePeriod: 5s\nplugins: {nodeorder: {node: spread}}\n");
    CHECK(cf.changed());
    auto r = cf.reload(*c);
    REQUIRE(r.ok());
    CHECK(r->schedulePeriod.millis == 5000);
    CHECK_FALSE(cf.changed());
  }
  SECTION("errors name the key; the attempt is remembered (no retry until the file changes again)") {
    struct Case {
      const char* yaml;
      const char* want;
    };
    for (const Case& k :
         {Case{"schedulPeriod: 5s\n", "config: unknown key \"schedulPeriod\""},
          Case{"schedulePeriod: 5\n", "config.schedulePeriod: must be a duration string"},
          Case{"plugins: {proportion: {reclaimerSaturationMultiplier: -1}}\n",
               "config.plugins.proportion.reclaimerSaturationMultiplier"},
          Case{"actionArgs: {consolidate: {maxConsolidationPreemptees: 0}}\n",
               "config.actionArgs.consolidate.maxConsolidationPreemptees"},
          Case{"plugins: {timeaware: {windowSize: 0s}}\n", "config.plugins.timeaware.windowSize"},
          Case{"plugins: {nodeorder: {node: fullest}}\n", "config.plugins.nodeorder.node"},
          Case{"schedulerName: other\n", "config.schedulerName: cannot change"}, Case{"plugins: [\n", "config: "}}) {
      INFO(k.yaml);
      write(file, k.yaml);
      CHECK(cf.changed());
      auto r = cf.reload(*c);
      REQUIRE_FALSE(r.ok());
      CHECK_THAT(r.error().message, Catch::Contains(k.want));
      CHECK_THAT(r.error().message, Catch::StartsWith(file.string() + ": "));
      CHECK_FALSE(cf.changed());
    }
  }
  SECTION("--scheduler-name overrides the file's, at start and on reload") {
    tessera::app::ConfigFile flagged(file.string(), "mine");
    auto f = flagged.load();
    REQUIRE(f.ok());
    CHECK(f->schedulerName == "mine");
    write(file, "schedulerName: other\n");
    auto r = flagged.reload(*f);
    REQUIRE(r.ok());
    CHECK(r->schedulerName == "mine");
  }
  SECTION("a file that disappears is an error at reload") {
    fs::remove(file);
    CHECK(cf.changed());
    auto r = cf.reload(*c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("cannot read config file"));
  }
  fs::remove_all(file.parent_path());
}

TEST_CASE("ConfigFile: no file means the defaults, never changed", "[config]") {
  tessera::app::ConfigFile cf("", "");
  auto c = cf.load();
  REQUIRE(c.ok());
  CHECK(c->schedulerName == "tessera");
  CHECK_FALSE(cf.changed());
}

TEST_CASE("ConfigFile: a SchedulingShard's spec.config is merged over the file; shard cannot change on reload",
          "[config][shard]") {
  const fs::path file = tempFile("sharded.yaml");
  write(file, "schedulePeriod: 2s\nshard: gpu\nplugins: {nodeorder: {node: binpack, gpu: binpack}}\n");
  tessera::app::ConfigFile cf(file.string(), "");
  cf.setOverrides({{"schedulePeriod", "3s"}, {"plugins", {{"nodeorder", {{"node", "spread"}}}}}},
                  "SchedulingShard gpu spec.config");
  auto c = cf.load();
  REQUIRE(c.ok());
  CHECK(c->shard == "gpu");
  CHECK(c->schedulePeriod.millis == 3000);             // the shard's value wins
  CHECK(cf.document()["plugins"]["nodeorder"]["node"] == "spread");
  CHECK(cf.document()["plugins"]["nodeorder"]["gpu"] == "binpack");  // merged, not replaced

  write(file, "schedulePeriod: 2s\nshard: cpu\n");
  auto r = cf.reload(*c);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("config.shard: cannot change from \"gpu\" to \"cpu\""));

  // A bad override is an error naming where it came from and the key.
  tessera::app::ConfigFile bad("", "");
  bad.setOverrides({{"schedulePeriod", 5}}, "SchedulingShard gpu spec.config");
  auto b = bad.load();
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.error().message, Catch::Contains("SchedulingShard gpu spec.config"));
  CHECK_THAT(b.error().message, Catch::Contains("config.schedulePeriod"));
}
