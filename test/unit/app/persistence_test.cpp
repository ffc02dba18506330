// State that survives a config reload and a restart (issue 17, item 5), through the real pipeline
// (cache, scheduler, binder, status writer) on the embedded cluster with a virtual clock:
//  - time-aware usage: the history is the scheduler's (a reload keeps it), saved to its ConfigMap
//    and restored by a new pipeline (a restart), so the over-quota split after either is the one
//    without it;
//  - the stale-gang timer: on the PodGroup (tessera.dev/stale-since), so a gang is evicted at its
//    original deadline after either.
// Each case runs the same steps without the interruption, with a reload and with a restart, and
// compares the decisions.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "support/test_cluster.h"
#include "support/test_registry.h"
#include "tessera/app/pipeline.h"

namespace {

using namespace tessera;  // NOLINT(google-build-using-namespace)
using Json = nlohmann::json;

enum class Interruption { None, Reload, Restart };

const char* name(Interruption i) {
  switch (i) {
    case Interruption::None: return "none";
    case Interruption::Reload: return "config reload";
    case Interruption::Restart: return "restart";
  }
  return "?";
}

/// A scheduler (synchronous pipeline) over an embedded cluster, which can be reloaded (a new
/// Config from the same text: new plugin and action objects) or restarted (a new cache and
/// pipeline on the same cluster: nothing of the old process's memory).
struct Daemon {
  testing::TestCluster c;
  std::string configText;
  framework::Config config;
  std::unique_ptr<cache::Cache> cache;
  std::unique_ptr<app::Pipeline> pipeline;

  explicit Daemon(std::string yaml) : configText(std::move(yaml)) { config = load(); }

  framework::Config load() {
    auto cfg = framework::loadConfigYaml(testing::testRegistry(), configText);
    if (!cfg.ok()) FAIL(cfg.error().message);
    return std::move(cfg).value();
  }
  void start() {
    cache::CacheOptions options;
    options.schedulerName = config.schedulerName;
    cache = std::make_unique<cache::Cache>(c.cluster, c.clock, options);
    REQUIRE(cache->start().ok());
    app::PipelineOptions po;
    po.synchronous = true;
    po.usageNamespace = "tessera-system";
    po.usageConfigMap = "tessera-usage";
    pipeline = std::make_unique<app::Pipeline>(c.cluster, *cache, c.clock, config, std::move(po));
  }
  void stop() {
    pipeline.reset();
    cache.reset();
  }
  void interrupt(Interruption i) {
    if (i == Interruption::Reload) config = load();  // the daemon's loop does just this
    if (i == Interruption::Restart) {
      stop();
      config = load();
      start();
    }
  }
  framework::SessionResult cycle() {
    auto r = pipeline->runCycle();
    c.cluster.kubeletTick();
    return r;
  }
  void advance(int64_t seconds) { c.clock.advance(api::Duration{seconds * 1000}); }
  std::map<std::string, std::string> bound() {
    std::map<std::string, std::string> out;
    auto pods = c.cluster.list(api::Kind::Pod);
    REQUIRE(pods.ok());
    for (const auto& p : pods->items)
      if (p["metadata"].value("namespace", "") != "tessera-reservation")
        out[p["metadata"].value("namespace", "") + "/" + p["metadata"].value("name", "")] =
            p["spec"].value("nodeName", "");
    return out;
  }
};

std::string queueYaml(const std::string& name) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: " + name +
         "}\nspec:\n  resources:\n    gpu: {quota: \"0\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
         "    cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
         "    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";
}

std::string podYaml(const std::string& name, const std::string& queue, const std::string& extraSpec = "",
                    const std::string& group = "") {
  std::string y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + queue +
                  "\n  labels: {tessera.dev/queue: " + queue + "}\n";
  if (!group.empty()) y += "  annotations: {pod-group-name: " + group + "}\n";
  return y + "spec:\n  schedulerName: tessera\n" + extraSpec +
         "  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\", nvidia.com/gpu: \"1\"}, "
         "limits: {nvidia.com/gpu: \"1\"}}}]\n---\n";
}

/// Time-aware fairness as in the shared scenario timeaware/idle-queue-first: team-a holds the
/// whole 2-GPU node for three hours, then both queues ask for two GPUs (team-a's pods first). With
/// the history, team-b gets both; without it (a reset), one each.
std::map<std::string, std::string> timeAware(Interruption interruption) {
  Daemon d("plugins:\n  timeaware: {enabled: true, windowSize: 1h, kValue: 1.0, saveInterval: 60s}\n");
  d.c.create(testing::nodeYaml("gpu-1", "64", "2") + "---\n" + queueYaml("team-a") + queueYaml("team-b") +
             podYaml("a-0", "team-a") + podYaml("a-1", "team-a"));
  d.start();
  d.cycle();
  for (int i = 0; i < 6; ++i) {
    d.advance(30 * 60);
    d.cycle();
  }
  d.interrupt(interruption);
  REQUIRE(d.c.cluster.finishPod("team-a", "a-0", true).ok());
  REQUIRE(d.c.cluster.finishPod("team-a", "a-1", true).ok());
  d.c.create(podYaml("a-2", "team-a") + podYaml("a-3", "team-a") + podYaml("b-2", "team-b") + podYaml("b-3", "team-b"));
  d.cycle();
  d.cycle();
  auto bound = d.bound();
  d.stop();
  return bound;
}

}  // namespace

TEST_CASE("time-aware usage survives a config reload and a restart: same decisions as without", "[app][persistence]") {
  const auto without = timeAware(Interruption::None);
  // The history decides: team-b, idle for three hours, gets both GPUs.
  CHECK(without.at("team-b/b-2") == "gpu-1");
  CHECK(without.at("team-b/b-3") == "gpu-1");
  CHECK(without.at("team-a/a-2").empty());
  CHECK(without.at("team-a/a-3").empty());
  for (Interruption i : {Interruption::Reload, Interruption::Restart}) {
    INFO("interruption: " << name(i));
    CHECK(timeAware(i) == without);
  }
}

TEST_CASE("time-aware usage: saved to its ConfigMap at most once per saveInterval, restored as saved",
          "[app][persistence]") {
  Daemon d("plugins:\n  timeaware: {enabled: true, windowSize: 1h, saveInterval: 60s}\n");
  d.c.create(testing::nodeYaml("gpu-1", "64", "2") + "---\n" + queueYaml("team-a") + podYaml("a-0", "team-a"));
  d.start();
  auto savedText = [&]() -> std::string {
    auto cm = d.c.cluster.get(api::Kind::ConfigMap, "tessera-system", "tessera-usage");
    if (!cm.ok()) return "";
    return (*cm)["data"].value("usage.json", "");
  };
  CHECK(savedText().empty());  // none before the first cycle: a fresh cluster starts empty
  d.cycle();
  const std::string first = savedText();
  CHECK_FALSE(first.empty());
  d.advance(30);
  d.cycle();
  CHECK(savedText() == first);  // 30 s < saveInterval: not written again
  d.advance(30);
  d.cycle();
  const std::string second = savedText();
  CHECK(second != first);
  // What was saved is what the scheduler holds; a restart reads it back exactly.
  CHECK(second == d.pipeline->state().usage.toJson().dump());
  const framework::UsageHistory before = d.pipeline->state().usage;
  d.interrupt(Interruption::Restart);
  CHECK(d.pipeline->state().usage.empty());  // read before the first cycle, not at construction
  d.pipeline->restoreState();
  d.cycle();
  // The restored history went on with one more sample at the same time (nothing folded).
  auto restored = framework::UsageHistory::fromJson(Json::parse(second));
  REQUIRE(restored.ok());
  CHECK(*restored == before);
  CHECK(d.pipeline->state().usage.buckets() == before.buckets());
  d.stop();
}

TEST_CASE("time-aware usage: an unreadable ConfigMap starts empty; a failed read saves nothing until one succeeds",
          "[app][persistence]") {
  Daemon d("plugins:\n  timeaware: {enabled: true, windowSize: 1h, saveInterval: 60s}\n");
  // No pods: the pod grouper makes no API call that the injected failure could hit instead.
  d.c.create(testing::nodeYaml("gpu-1", "64", "2") + "---\n" + queueYaml("team-a") +
             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tessera-usage, namespace: tessera-system}\n"
             "data: {usage.json: \"{not json\"}\n---\n");
  SECTION("unreadable: empty history, overwritten at the next save") {
    d.start();
    d.cycle();
    auto cm = d.c.cluster.get(api::Kind::ConfigMap, "tessera-system", "tessera-usage");
    REQUIRE(cm.ok());
    CHECK((*cm)["data"].value("usage.json", "") == d.pipeline->state().usage.toJson().dump());
  }
  SECTION("the read fails: the ConfigMap is left alone until it is read") {
    d.c.cluster.failNthCall("get", 1, 500);
    d.start();
    d.cycle();
    auto cm = d.c.cluster.get(api::Kind::ConfigMap, "tessera-system", "tessera-usage");
    REQUIRE(cm.ok());
    CHECK((*cm)["data"].value("usage.json", "") == "{not json");
    d.advance(60);
    d.cycle();  // read now (unreadable: empty), then saved
    cm = d.c.cluster.get(api::Kind::ConfigMap, "tessera-system", "tessera-usage");
    REQUIRE(cm.ok());
    CHECK((*cm)["data"].value("usage.json", "") == d.pipeline->state().usage.toJson().dump());
  }
  d.stop();
}

namespace {

/// A gang of 3 with 2 pods running and a third that can never be placed, stalegangeviction with a
/// 60 s grace period: stale from the first cycle, evicted 60 s later. Returns the virtual seconds
/// after the first cycle at which it was evicted (-1: not within 3 minutes).
int staleEvictionAt(Interruption interruption) {
  Daemon d("actionArgs:\n  stalegangeviction: {gracePeriod: 60s}\n");
  d.c.create(testing::nodeYaml("gpu-1", "64", "8") + "---\n" + queueYaml("team") +
             "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: train, namespace: team}\n"
             "spec: {minMember: 3, queue: team}\n---\n" +
             podYaml("train-0", "team", "  nodeName: gpu-1\n", "train") +
             podYaml("train-1", "team", "  nodeName: gpu-1\n", "train") +
             podYaml("train-2", "team", "  nodeSelector: {pool: nowhere}\n", "train"));
  d.start();
  d.cycle();  // the kubelet starts the two bound pods
  int evictedAt = -1;
  for (int t = 0; t <= 180 && evictedAt < 0; t += 10) {
    if (t == 30) d.interrupt(interruption);
    if (!d.cycle().evictions.empty()) evictedAt = t;
    d.advance(10);
  }
  d.stop();
  return evictedAt;
}

}  // namespace

TEST_CASE("stale-gang timer survives a config reload and a restart: evicted at the original deadline",
          "[app][persistence]") {
  const int without = staleEvictionAt(Interruption::None);
  CHECK(without == 60);
  for (Interruption i : {Interruption::Reload, Interruption::Restart}) {
    INFO("interruption: " << name(i));
    CHECK(staleEvictionAt(i) == without);
  }
}
