// The web UI's state (ui/STATE.md) as `tessera simulate --html` records it, the report page, and
// the daemon's publisher.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tessera/app/scenario.h"
#include "tessera/app/ui_state.h"

using namespace tessera;  // NOLINT
using nlohmann::json;

namespace {

json reportOf(const std::string& example) {
  json report = {{"states", json::array()}, {"timeline", json::array()}, {"expectations", json::array()}};
  app::ScenarioOptions opts;
  opts.report = &report;
  const app::ScenarioOutcome o = app::runScenarioFile(std::string(TESSERA_SOURCE_DIR) + "/config/examples/" + example, opts);
  REQUIRE(o.passed());
  return report;
}

const json* find(const json& array, const std::string& field, const std::string& value) {
  for (const json& x : array)
    if (x.value(field, "") == value) return &x;
  return nullptr;
}

}  // namespace

TEST_CASE("ui state: one state per cycle, the GPU grid as the cycle left it, queue figures, timeline", "[ui]") {
  const json report = reportOf("fractional.yaml");
  // fractional.yaml runs 1 + 1 + 2 cycles.
  REQUIRE(report["states"].size() == 4);
  REQUIRE(report["timeline"].size() == 4);
  CHECK(report["timeline"][0][0].get<std::string>().rfind("cycle 1 @", 0) == 0);
  // The apply before the second cycle is in that cycle's lines.
  bool applied = false;
  for (const json& line : report["timeline"][1]) applied = applied || line.get<std::string>() == "apply Pod team-a/trainer";
  CHECK(applied);

  const json& first = report["states"][0];
  CHECK(first["version"] == 1);
  CHECK(first["source"] == "simulate");
  CHECK(first["cycle"] == 1);
  const json* node = find(first["nodes"], "name", "h100-1");
  REQUIRE(node);
  // Two shared GPUs (ana and bo on one, cy's 20 GiB of 80 on another), the rest free.
  int shared = 0, free = 0;
  double anaShare = 0, cyShare = 0;
  for (const json& g : (*node)["gpus"]) {
    if (g["kind"] == "free") ++free;
    if (g["kind"] != "shared") continue;
    ++shared;
    for (const json& o : g["occupants"]) {
      CHECK(o["queue"] == "team-a");
      if (o["pod"] == "team-a/notebook-ana") anaShare = o["share"].get<double>();
      if (o["pod"] == "team-a/notebook-cy") cyShare = o["share"].get<double>();
    }
  }
  CHECK(shared == 2);
  CHECK((*node)["gpus"].size() == static_cast<size_t>(shared + free));
  CHECK(anaShare == Approx(0.5));
  CHECK(cyShare == Approx(0.25));
  const json* queue = find(first["queues"], "name", "team-a");
  REQUIRE(queue);
  CHECK((*queue)["resources"]["gpu"]["allocated"].get<double>() == Approx(1.25));

  // The second cycle leaves the whole-GPU trainer pending, with the reason of its job.
  const json* trainer = find(report["states"][1]["jobs"], "key", "Pod/team-a/trainer");
  REQUIRE(trainer);
  CHECK((*trainer)["status"] == "pending");
  CHECK_THAT((*trainer)["reason"].get<std::string>(), Catch::Contains("insufficient nvidia.com/gpu"));
  CHECK((*trainer)["placed"] == 0);
  CHECK((*trainer)["minMember"] == 1);
  // Then it runs on a whole GPU, and its reason is gone.
  const json& last = report["states"].back();
  trainer = find(last["jobs"], "key", "Pod/team-a/trainer");
  REQUIRE(trainer);
  CHECK((*trainer)["status"] == "running");
  CHECK((*trainer)["reason"] == "");
  node = find(last["nodes"], "name", "h100-1");
  REQUIRE(node);
  CHECK(std::any_of((*node)["gpus"].begin(), (*node)["gpus"].end(),
                    [](const json& g) { return g["kind"] == "whole" && g["pod"] == "team-a/trainer"; }));
  CHECK(last["cycles"].size() == 4);

  // Each expect step: one item that held, at the state it was checked after.
  REQUIRE(report["expectations"].size() == 3);
  CHECK(report["expectations"][0]["state"] == 0);
  CHECK(report["expectations"][2]["state"] == 3);
  for (const json& e : report["expectations"]) CHECK(e["ok"] == true);
}

TEST_CASE("ui report page: the report is embedded where the page's marker is, and cannot end its script", "[ui]") {
  const json report = {{"scenario", "x"}, {"states", json::array()}, {"note", "</script><b>"}};
  const std::string page = app::uiReportPage(report);
  CHECK(page.find("window.TESSERA_REPORT = ") != std::string::npos);
  CHECK(page.find("<!--TESSERA_REPORT-->") == std::string::npos);
  CHECK(page.find("</script><b>") == std::string::npos);
  CHECK(page.find("\\u003c/script\\u003e\\u003cb\\u003e") != std::string::npos);
  CHECK(app::uiPage().find("<!--TESSERA_REPORT-->") != std::string_view::npos);
}

TEST_CASE("ui publisher: no cycle yet, then the last cycles, at most kUiCycles", "[ui]") {
  app::UiPublisher ui("tessera");
  json empty = json::parse(*ui.stateJson());
  CHECK(empty["cycle"] == 0);
  CHECK(empty["schedulerName"] == "tessera");
  CHECK(empty["nodes"].empty());
  CHECK(empty["cycles"].empty());
  for (uint64_t c = 1; c <= app::kUiCycles + 10; ++c) {
    framework::CycleStats stats;
    stats.cycle = c;
    stats.totalMs = 1.5;
    auto r = std::make_shared<framework::SessionResult>();
    r->evictions.push_back({"ns/p" + std::to_string(c), "uid", "n1", "preempted"});
    ui.publish(r, stats, api::Time{1'800'000'000'000});
  }
  auto built = ui.stateJson();
  CHECK(ui.stateJson() == built);  // built once per published cycle
  json state = json::parse(*built);
  CHECK(state["cycle"] == app::kUiCycles + 10);
  REQUIRE(state["cycles"].size() == app::kUiCycles);
  CHECK(state["cycles"].front()["cycle"] == 11);
  CHECK(state["cycles"].back()["evictions"][0]["pod"] == "ns/p60");
  CHECK(state["cycles"].back()["evictions"][0]["reason"] == "preempted");
}

TEST_CASE("ui state: every job with pending pods, running ones up to kUiJobs, the rest counted", "[ui]") {
  auto snap = std::make_shared<cache::Snapshot>();
  auto job = [&](const std::string& name, cache::TaskStatus status) {
    auto j = std::make_shared<cache::JobInfo>();
    j->setKey("Pod/ns/" + name);
    j->namespace_ = "ns";
    j->name = name;
    j->queue = "q";
    cache::TaskInfo t;
    t.key = "ns/" + name;
    t.status = status;
    j->tasks.push_back(t);
    snap->jobs.push_back(j);
    return j;
  };
  for (size_t i = 0; i < app::kUiJobs + 5; ++i) job("run-" + std::to_string(100000 + i), cache::TaskStatus::Running);
  auto waiting = job("zz-waiting", cache::TaskStatus::Pending);  // last in key order
  job("done", cache::TaskStatus::Succeeded);                      // finished: not listed, not counted
  framework::SessionResult r;
  r.snapshot = snap;
  r.messages = {"pod unschedulable: insufficient cpu"};
  r.jobs.push_back({waiting.get(), 0});
  const json state = app::uiStateJson(&r, {}, api::Time{1'800'000'000'000}, "daemon", "tessera");
  REQUIRE(state["jobs"].size() == app::kUiJobs);
  CHECK(state["jobsOmitted"] == 6);
  CHECK(state["jobs"][0]["name"] == "zz-waiting");
  CHECK(state["jobs"][0]["status"] == "pending");
  CHECK(state["jobs"][0]["reason"] == "pod unschedulable: insufficient cpu");
  CHECK(state["jobs"][1]["status"] == "running");
}
