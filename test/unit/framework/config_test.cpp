// Config loading: the defaults (config/tessera.yaml), overrides merged over them, and errors that
// name the field (and list the valid names) for every kind of mistake.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"
#include "tessera/framework/action.h"
#include "tessera/framework/config.h"
#include "tessera/framework/plugin.h"
#include "tessera/framework/session.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"

namespace {

using tessera::framework::Config;
using tessera::framework::loadConfig;
using tessera::framework::loadConfigYaml;
using tessera::testing::testRegistry;

/// Loads `yaml` (one document) as overrides over the defaults.
tessera::api::Result<Config> load(const std::string& yaml) {
  auto docs = tessera::testing::manifests(yaml);
  REQUIRE(docs.size() == 1);
  return loadConfig(testRegistry(), &docs[0]);
}

std::string errorOf(const std::string& yaml) {
  auto cfg = load(yaml);
  if (cfg.ok()) FAIL("config accepted: " << yaml);
  return cfg.error().message;
}

std::vector<std::string> pluginNames(const Config& c) {
  std::vector<std::string> out;
  for (const auto& p : c.plugins) out.push_back(p->name());
  return out;
}

std::vector<std::string> actionNames(const Config& c) {
  std::vector<std::string> out;
  for (const auto& a : c.actions) out.push_back(a->name());
  return out;
}

using Tiers = std::vector<std::vector<std::string>>;

/// What config/tessera.yaml (compiled in) says, read independently of loadConfig: the actions, the
/// tiers, and the enabled plugins in the documented order (tier by tier, then plugins not in any
/// tier by name; `enabled: false` removes one).
struct Defaults {
  std::vector<std::string> actions;
  Tiers tiers;
  std::vector<std::string> plugins;
  int64_t periodMillis = 0;
};

const Defaults& defaults() {
  static const Defaults d = [] {
    Defaults out;
    auto docs = tessera::api::yamlToJson(tessera::framework::defaultConfigYaml());
    REQUIRE(docs.ok());
    const nlohmann::json& doc = docs->front();
    out.actions = doc.at("actions").get<std::vector<std::string>>();
    out.tiers = doc.at("tiers").get<Tiers>();
    out.periodMillis = tessera::api::parseDuration(doc.at("schedulePeriod").get<std::string>()).value().millis;
    std::vector<std::string> order;
    for (const auto& t : out.tiers) order.insert(order.end(), t.begin(), t.end());
    for (const auto& [name, v] : doc.at("plugins").items())  // nlohmann keeps keys sorted
      if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
    for (const auto& name : order) {
      const auto& args = doc.at("plugins").value(name, nlohmann::json::object());
      if (!args.is_object() || args.value("enabled", true)) out.plugins.push_back(name);
    }
    return out;
  }();
  return d;
}

std::vector<std::string> without(std::vector<std::string> v, const std::string& x) {
  v.erase(std::remove(v.begin(), v.end(), x), v.end());
  return v;
}

bool before(const std::vector<std::string>& v, const std::string& a, const std::string& b) {
  auto ia = std::find(v.begin(), v.end(), a), ib = std::find(v.begin(), v.end(), b);
  return ia != v.end() && ib != v.end() && ia < ib;
}

std::string validActions() { return "(valid: " + tessera::framework::joinNames(testRegistry().actionNames()) + ")"; }
std::string validPlugins() { return "(valid: " + tessera::framework::joinNames(testRegistry().pluginNames()) + ")"; }

}  // namespace

TEST_CASE("the defaults", "[config]") {
  auto cfg = loadConfig(testRegistry(), nullptr);
  REQUIRE(cfg.ok());
  CHECK(cfg->schedulerName == "tessera");
  CHECK(cfg->schedulePeriod.millis == defaults().periodMillis);
  CHECK(actionNames(*cfg) == defaults().actions);
  CHECK(pluginNames(*cfg) == defaults().plugins);
  CHECK(cfg->tiers == defaults().tiers);
  // Facts of issue 2 whatever later issues add: allocate runs first; the core plugins are on,
  // ordering plugins before filters and scores.
  REQUIRE_FALSE(defaults().actions.empty());
  CHECK(defaults().actions.front() == "allocate");
  const auto p = pluginNames(*cfg);
  CHECK(before(p, "priority", "gang"));
  CHECK(before(p, "gang", "predicates"));
  CHECK(before(p, "predicates", "nodeorder"));
}

TEST_CASE("config/tessera.yaml loads and is the compiled-in default", "[config]") {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/config/tessera.yaml");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == tessera::framework::defaultConfigYaml());
  auto cfg = loadConfigYaml(testRegistry(), text.str());
  REQUIRE(cfg.ok());
  CHECK(cfg->schedulePeriod.millis == defaults().periodMillis);
  CHECK(actionNames(*cfg) == defaults().actions);
  CHECK(pluginNames(*cfg) == defaults().plugins);
  CHECK(cfg->tiers == defaults().tiers);

  SECTION("an empty file is the defaults") {
    auto empty = loadConfigYaml(testRegistry(), "");
    REQUIRE(empty.ok());
    CHECK(pluginNames(*empty) == pluginNames(*cfg));
  }
  SECTION("a file overrides the defaults") {
    auto c = loadConfigYaml(testRegistry(), "schedulePeriod: 250ms\nschedulerName: other\n");
    REQUIRE(c.ok());
    CHECK(c->schedulePeriod.millis == 250);
    CHECK(c->schedulerName == "other");
    CHECK(pluginNames(*c) == pluginNames(*cfg));
  }
}

TEST_CASE("config errors name the field", "[config]") {
  struct Case {
    const char* yaml;
    std::vector<std::string> want;  // substrings of the message
  };
  const std::vector<Case> cases{
      {"foo: 1", {"config: unknown key \"foo\"", "valid: schedulerName, schedulePeriod, actions, actionArgs, plugins, tiers"}},
      {"actions: [allocate, reclaimx]", {"config.actions: unknown action \"reclaimx\"", validActions()}},
      {"actions: allocate", {"config.actions: must be a list of names", "\"allocate\""}},
      {"actions: [allocate, 5]", {"config.actions[1]: must be a name, got 5"}},
      {"actions: [allocate, allocate]", {"config.actions: action \"allocate\" listed twice"}},
      {"actionArgs: {reclaimx: {}}", {"config.actionArgs: unknown action \"reclaimx\"", validActions()}},
      {"actionArgs: {allocate: {depth: 1}}", {"config.actionArgs.allocate: unknown argument \"depth\" (valid: none)"}},
      {"actionArgs: [allocate]", {"config.actionArgs: must be a map"}},
      {"plugins: {gangx: {}}", {"config.plugins: unknown plugin \"gangx\"", validPlugins()}},
      {"plugins: [gang]", {"config.plugins: must be a map"}},
      {"plugins: {nodeorder: spread}", {"config.plugins.nodeorder: must be a map of arguments", "\"spread\""}},
      {"plugins: {nodeorder: {nodes: spread}}", {"config.plugins.nodeorder: unknown argument \"nodes\"", "valid: ", "node"}},
      {"plugins: {gang: {minMember: 2}}", {"config.plugins.gang: unknown argument \"minMember\" (valid: enabled)"}},
      {"plugins: {nodeorder: {node: 5}}", {"config.plugins.nodeorder.node: must be a string, got 5"}},
      {"plugins: {nodeorder: {node: fullest}}",
       {"config.plugins.nodeorder.node: unknown value \"fullest\" (valid: binpack, spread)"}},
      {"plugins: {nodeorder: {gpu: Spread}}", {"config.plugins.nodeorder.gpu: unknown value \"Spread\""}},
      {"plugins: {gang: {enabled: \"no\"}}", {"config.plugins.gang.enabled: must be true or false"}},
      {"tiers: [[priority, nope]]", {"config.tiers: unknown plugin \"nope\"", validPlugins()}},
      {"tiers: [[gang], [gang]]", {"config.tiers: plugin \"gang\" listed twice"}},
      {"tiers: [gang]", {"config.tiers[0]: must be a list of names"}},
      {"tiers: gang", {"config.tiers: must be a list of lists of plugin names"}},
      {"schedulePeriod: abc", {"config.schedulePeriod: invalid duration \"abc\""}},
      {"schedulePeriod: 5", {"config.schedulePeriod: must be a duration string", "got 5"}},
      {"schedulePeriod: 0s", {"config.schedulePeriod: must be positive"}},
      {"schedulerName: \"\"", {"config.schedulerName: must not be empty"}},
      {"schedulerName: 7", {"config.schedulerName: must be a string"}},
      {"gpuSharing: 2", {"config.gpuSharing: must be a map, got 2"}},
      {"gpuSharing: {splitCount: 0}", {"config.gpuSharing.splitCount", "0"}},
      {"gpuSharing: {splitCount: 1001}", {"config.gpuSharing.splitCount", "1001"}},
      {"gpuSharing: {memoryScaling: 0}", {"config.gpuSharing.memoryScaling"}},
      {"gpuSharing: {memoryScaling: 101}", {"config.gpuSharing.memoryScaling"}},
      {"gpuSharing: {coreScaling: 0}", {"config.gpuSharing.coreScaling"}},
      {"gpuSharing: {coreScaling: 101}", {"config.gpuSharing.coreScaling"}},
      {"gpuSharing: {defaultCores: 101}", {"config.gpuSharing.defaultCores"}},
      {"gpuSharing: {defaultMemory: -1}", {"config.gpuSharing.defaultMemory"}},
      {"gpuSharing: {splitcount: 2}", {"config.gpuSharing: unknown", "splitcount", "memoryScaling", "splitCount"}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.yaml) {
      const std::string msg = errorOf(c.yaml);
      for (const auto& w : c.want) CHECK_THAT(msg, Catch::Contains(w));
    }
  }
}

TEST_CASE("gpuSharing: HAMi's defaults, overridden by the config", "[config]") {
  auto d = loadConfig(testRegistry(), nullptr);
  REQUIRE(d.ok());
  CHECK(d->gpuSharing.splitCount == 10);
  CHECK(d->gpuSharing.memoryScalingMilli == 1000);
  CHECK(d->gpuSharing.coreScalingMilli == 1000);
  auto c = load("gpuSharing: {splitCount: 4, memoryScaling: 1.5, coreScaling: 2.5}");
  REQUIRE(c.ok());
  CHECK(c->gpuSharing.splitCount == 4);
  CHECK(c->gpuSharing.memoryScalingMilli == 1500);
  CHECK(c->gpuSharing.coreScalingMilli == 2500);
  auto one = load("gpuSharing: {memoryScaling: 2}");  // the other key keeps its default
  REQUIRE(one.ok());
  CHECK(one->gpuSharing.splitCount == 10);
  CHECK(one->gpuSharing.memoryScalingMilli == 2000);
  CHECK(one->gpuSharing.coreScalingMilli == 1000);
  CHECK(one->gpuSharing.defaults.memoryMiB == 0);
  CHECK(one->gpuSharing.defaults.corePercent == 0);
  auto defaults = load("gpuSharing: {defaultMemory: 20000, defaultCores: 40}");
  REQUIRE(defaults.ok());
  CHECK(defaults->gpuSharing.defaults.memoryMiB == 20000);
  CHECK(defaults->gpuSharing.defaults.corePercent == 40);
}

TEST_CASE("config file errors", "[config]") {
  auto dup = loadConfigYaml(testRegistry(), "plugins:\n  gang: {}\n  gang: {}\n");
  REQUIRE_FALSE(dup.ok());
  CHECK_THAT(dup.error().message, Catch::Contains("duplicate key \"gang\""));
  auto list = loadConfigYaml(testRegistry(), "- allocate\n");
  REQUIRE_FALSE(list.ok());
  CHECK_THAT(list.error().message, Catch::Contains("config: must be a map"));
  auto two = loadConfigYaml(testRegistry(), "schedulePeriod: 1s\n---\nschedulePeriod: 2s\n");
  REQUIRE_FALSE(two.ok());
  CHECK_THAT(two.error().message, Catch::Contains("one YAML document"));
  auto bad = loadConfigYaml(testRegistry(), "plugins: {gang: [}\n");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::StartsWith("config: "));
}

TEST_CASE("enabled: false removes a plugin", "[config]") {
  auto cfg = load("plugins: {gang: {enabled: false}}");
  REQUIRE(cfg.ok());
  CHECK(pluginNames(*cfg) == without(defaults().plugins, "gang"));
  CHECK(cfg->tiers == defaults().tiers);  // as configured

  // Its callbacks are gone: a gang with fewer pods than minMember is no longer rejected.
  tessera::testing::TestCluster c;
  c.create(R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: default}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: t}
spec: {minMember: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: g-0, namespace: t, annotations: {pod-group-name: g}}
spec: {schedulerName: tessera, containers: [{name: c, image: busybox}]}
)");
  c.start();
  auto full = loadConfig(testRegistry(), nullptr);
  REQUIRE(full.ok());
  tessera::framework::Session with(c.snapshot(), *full, c.clock);
  with.open();
  tessera::framework::Session without(c.snapshot(), *cfg, c.clock);
  without.open();
  const int j = with.findJob("PodGroup/t/g");
  REQUIRE(j >= 0);
  CHECK_FALSE(with.jobValid(with.jobs()[j]).ok());
  CHECK(without.jobValid(without.jobs()[j]).ok());

  SECTION("enabled: true keeps it") {
    auto on = load("plugins: {gang: {enabled: true}}");
    REQUIRE(on.ok());
    CHECK(pluginNames(*on) == defaults().plugins);
  }
}

TEST_CASE("overrides merge over the defaults", "[config]") {
  SECTION("lists replace") {
    auto cfg = load("actions: []");
    REQUIRE(cfg.ok());
    CHECK(cfg->actions.empty());
    CHECK(pluginNames(*cfg) == defaults().plugins);
  }
  SECTION("plugins not in tiers run after the listed ones, by name") {
    auto cfg = load("tiers: [[gang]]");
    REQUIRE(cfg.ok());
    std::vector<std::string> rest = without(defaults().plugins, "gang");
    std::sort(rest.begin(), rest.end());
    const auto p = pluginNames(*cfg);
    REQUIRE_FALSE(p.empty());
    CHECK(p.front() == "gang");
    CHECK(std::vector<std::string>(p.begin() + 1, p.end()) == rest);
    REQUIRE_FALSE(cfg->tiers.empty());
    CHECK(cfg->tiers.front() == std::vector<std::string>{"gang"});
    for (size_t i = 1; i < cfg->tiers.size(); ++i) {
      CHECK(cfg->tiers[i].size() == 1);  // one tier each, by name
      if (i + 1 < cfg->tiers.size()) CHECK(cfg->tiers[i][0] < cfg->tiers[i + 1][0]);
    }
  }
  SECTION("a plugin named only in tiers is created with its defaults") {
    auto cfg = load("tiers: [[priority, gang], [predicates, nodeorder]]");
    REQUIRE(cfg.ok());
    std::vector<std::string> got = pluginNames(*cfg), want = defaults().plugins;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    CHECK(got == want);
  }
}

TEST_CASE("a scenario config overrides one argument only", "[config]") {
  // Two nodes with 4 GPUs: "full" has 3 in use, "empty" none. A 1-GPU pod: binpack prefers full,
  // spread prefers empty.
  tessera::testing::TestCluster c;
  c.create(tessera::testing::nodeYaml("empty", "16", "4"));
  c.create(tessera::testing::nodeYaml("full", "16", "4"));
  c.create(R"(
apiVersion: v1
kind: Pod
metadata: {name: busy, namespace: t}
spec:
  schedulerName: tessera
  nodeName: full
  containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "3"}, limits: {nvidia.com/gpu: "3"}}}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: t}
spec:
  schedulerName: tessera
  containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
)");
  c.start();
  auto prefers = [&](const std::string& yaml) {
    auto cfg = yaml.empty() ? loadConfig(testRegistry(), nullptr) : load(yaml);
    REQUIRE(cfg.ok());
    CHECK(pluginNames(*cfg) == defaults().plugins);
    CHECK(cfg->tiers == defaults().tiers);
    tessera::framework::Session ssn(c.snapshot(), *cfg, c.clock);
    ssn.open();
    const auto& task = tessera::testing::taskOf(ssn, "Pod/t/p", "t/p");
    const int64_t full = ssn.nodeScore(task, ssn.nodes()[tessera::testing::nodeIndex(ssn, "full")]);
    const int64_t empty = ssn.nodeScore(task, ssn.nodes()[tessera::testing::nodeIndex(ssn, "empty")]);
    REQUIRE(full != empty);
    return full > empty ? std::string("full") : std::string("empty");
  };
  CHECK(prefers("") == "full");
  CHECK(prefers("plugins: {nodeorder: {node: spread}}") == "empty");
  CHECK(prefers("plugins: {nodeorder: {gpu: spread}}") == "full");  // node stays binpack
  CHECK(prefers("plugins: {nodeorder: {node: binpack}}") == "full");
  CHECK(prefers("plugins: {gang: {}}") == "full");
}
