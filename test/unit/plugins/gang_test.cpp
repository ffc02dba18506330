// gang: job validity (enough live pods for minMember, the PodGroup exists, minMember >= 1) and
// readiness (ready tasks >= minMember: allocated, pipelined, bound, running and succeeded count).
#include <catch2/catch.hpp>

#include <string>

#include "tessera/framework/args.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"
#include "tessera/plugins/factories.h"
#include "support/test_cluster.h"

namespace {

using tessera::framework::Session;
using tessera::framework::SessionJob;
using tessera::framework::Statement;
using tessera::testing::TestCluster;

std::shared_ptr<tessera::framework::Plugin> gang() {
  tessera::framework::Args args("plugins.gang", nullptr);
  auto p = tessera::plugins::makeGang(args);
  REQUIRE(p.ok());
  return std::move(p).value();
}

const char* kQueue = R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: default}
---
)";

std::string group(const std::string& name, int minMember) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: t}\nspec: {minMember: " + std::to_string(minMember) + "}\n---\n";
}

/// A pod of group `g`; `state` is "" (pending), "Running", "Succeeded", "Failed" or "Terminating".
std::string member(const std::string& g, const std::string& name, const std::string& state = "") {
  std::string meta = "{name: " + name + ", namespace: t, annotations: {pod-group-name: " + g + "}";
  if (state == "Terminating") meta += ", deletionTimestamp: \"2026-01-01T00:01:00Z\"";
  meta += "}";
  const std::string phase = state == "Terminating" ? "Running" : state;
  return "apiVersion: v1\nkind: Pod\nmetadata: " + meta + "\nspec:\n  schedulerName: tessera\n" +
         (state.empty() ? "" : "  nodeName: n1\n") +
         "  containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]\n" +
         (phase.empty() ? "" : "status: {phase: " + phase + "}\n") + "---\n";
}

struct Env {
  TestCluster c;
  tessera::framework::Config cfg = tessera::testing::configWith({gang()});
  std::unique_ptr<Session> ssn;
  void start(const std::string& yaml) {
    c.create(tessera::testing::nodeYaml("n1", "16", "0"));
    c.create(std::string(kQueue) + yaml);
    c.start();
    ssn = std::make_unique<Session>(c.snapshot(), cfg, c.clock);
    ssn->open();
  }
  SessionJob& job(const std::string& key) {
    const int j = ssn->findJob(key);
    if (j < 0) FAIL("no job " << key);
    return ssn->jobs()[j];
  }
  std::optional<std::string> invalid(const std::string& key) {
    return tessera::testing::rejection(ssn->jobValid(job(key)));
  }
  void allocate(Statement& stmt, const std::string& g, const std::string& pod) {
    stmt.allocate(tessera::testing::taskOf(*ssn, "PodGroup/t/" + g, "t/" + pod), 0);
  }
};

}  // namespace

TEST_CASE("gang validity", "[gang]") {
  Env e;
  e.start(group("short", 3) + member("short", "short-0") + member("short", "short-1") +  //
          group("full", 2) + member("full", "full-0") + member("full", "full-1") +       //
          group("zero", 0) + member("zero", "zero-0") +                                  //
          member("ghost", "ghost-0") +                                                   //
          group("dead", 2) + member("dead", "dead-0") + member("dead", "dead-1", "Failed") +
          group("leaving", 2) + member("leaving", "leaving-0") + member("leaving", "leaving-1", "Terminating") +
          group("done", 2) + member("done", "done-0") + member("done", "done-1", "Succeeded"));

  auto r = e.invalid("PodGroup/t/short");
  REQUIRE(r);
  CHECK(*r == "gang 2/3: only 2 pods exist for spec.minMember 3");
  CHECK_FALSE(e.invalid("PodGroup/t/full"));

  r = e.invalid("PodGroup/t/zero");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::Contains("PodGroup t/zero"));
  CHECK_THAT(*r, Catch::Contains("spec.minMember: must be at least 1"));

  r = e.invalid("PodGroup/t/ghost");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::Contains("PodGroup t/ghost not found"));

  // Failed and terminating pods will not run again: they do not make up the gang.
  r = e.invalid("PodGroup/t/dead");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::StartsWith("gang 1/2"));
  r = e.invalid("PodGroup/t/leaving");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::StartsWith("gang 1/2"));
  // A pod that succeeded did its part.
  CHECK_FALSE(e.invalid("PodGroup/t/done"));
}

TEST_CASE("a job whose queue does not exist is invalid, naming the queue", "[gang]") {
  Env e;
  e.start(group("g", 1) + "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: t, labels: {tessera.dev/queue: "
                          "nowhere}}\nspec: {schedulerName: tessera, containers: [{name: c, image: busybox}]}\n");
  auto r = e.invalid("Pod/t/p");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::Contains("queue \"nowhere\" not found"));
}

TEST_CASE("gang readiness", "[gang]") {
  Env e;
  e.start(group("g", 3) + member("g", "g-0") + member("g", "g-1") + member("g", "g-2") + member("g", "g-3") +
          group("half", 2) + member("half", "half-0", "Running") + member("half", "half-1") +
          group("won", 2) + member("won", "won-0", "Succeeded") + member("won", "won-1", "Running") +
          member("won", "won-2"));
  SessionJob& g = e.job("PodGroup/t/g");
  CHECK_FALSE(e.ssn->jobReady(g));
  Statement stmt(*e.ssn);
  e.allocate(stmt, "g", "g-0");
  e.allocate(stmt, "g", "g-1");
  CHECK_FALSE(e.ssn->jobReady(g));
  SECTION("minMember allocated") {
    e.allocate(stmt, "g", "g-2");
    CHECK(e.ssn->jobReady(g));
    e.allocate(stmt, "g", "g-3");
    CHECK(e.ssn->jobReady(g));
  }
  SECTION("pipelined tasks count") {
    stmt.pipeline(tessera::testing::taskOf(*e.ssn, "PodGroup/t/g", "t/g-2"), 0);
    CHECK(e.ssn->jobReady(g));
  }
  SECTION("rolled back: not ready again") {
    e.allocate(stmt, "g", "g-2");
    stmt.discard();
    CHECK_FALSE(e.ssn->jobReady(g));
  }
  SECTION("running pods count") {
    SessionJob& half = e.job("PodGroup/t/half");
    CHECK_FALSE(e.ssn->jobReady(half));
    e.allocate(stmt, "half", "half-1");
    CHECK(e.ssn->jobReady(half));
  }
  SECTION("succeeded and running pods make a gang ready") {
    CHECK(e.ssn->jobReady(e.job("PodGroup/t/won")));
  }
}

namespace {

/// A PodGroup with subgroups master (minMember 1) and worker (minMember `workers`).
std::string subGrouped(const std::string& name, int minMember, int workers) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: t}\nspec:\n  minMember: " + std::to_string(minMember) +
         "\n  subGroups: [{name: master, minMember: 1}, {name: worker, minMember: " + std::to_string(workers) +
         "}]\n---\n";
}

/// A pending pod of group `g` in subgroup `sub`, created at second `second` (task order).
std::string subMember(const std::string& g, const std::string& name, const std::string& sub, int second) {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t, creationTimestamp: \"2026-01-01T00:00:" +
         (second < 10 ? "0" : "") + std::to_string(second) + "Z\", labels: {tessera.dev/subgroup: " + sub +
         "}, annotations: {pod-group-name: " + g +
         "}}\nspec:\n  schedulerName: tessera\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: "
         "100m}}}]\n---\n";
}

}  // namespace

TEST_CASE("gang with subgroups: ready only when every subgroup has its minMember", "[gang][subgroups]") {
  Env e;
  e.start(subGrouped("s", 2, 2) + subMember("s", "m-0", "master", 0) + subMember("s", "m-1", "master", 1) +
          subMember("s", "w-0", "worker", 2) + subMember("s", "w-1", "worker", 3));
  SessionJob& s = e.job("PodGroup/t/s");
  // Each subgroup's missing minimum first (master: m-0; worker: w-0, w-1), then the rest.
  int minimum = -1;
  const std::vector<int> order = e.ssn->pendingTaskOrder(s, &minimum);
  std::vector<std::string> names;
  for (int ti : order) names.push_back(s.tasks[ti].pod().meta.name);
  CHECK(names == std::vector<std::string>{"m-0", "w-0", "w-1", "m-1"});
  CHECK(minimum == 3);

  Statement stmt(*e.ssn);
  e.allocate(stmt, "s", "m-0");
  e.allocate(stmt, "s", "m-1");
  CHECK_FALSE(e.ssn->jobReady(s));  // the PodGroup's minMember 2 is met, the worker subgroup's is not
  CHECK(s.shortSubGroup() == 1);
  e.allocate(stmt, "s", "w-0");
  CHECK_FALSE(e.ssn->jobReady(s));
  e.allocate(stmt, "s", "w-1");
  CHECK(e.ssn->jobReady(s));
  CHECK(s.shortSubGroup() == -1);
  CHECK(e.ssn->pendingTaskOrder(s, &minimum).empty());
  stmt.discard();
  CHECK(s.subGroupReady == std::vector<int32_t>{0, 0});
}

TEST_CASE("gang with subgroups: a subgroup with fewer pods than its minMember is invalid, named",
          "[gang][subgroups]") {
  Env e;
  e.start(subGrouped("s", 2, 2) + subMember("s", "m-0", "master", 0) + subMember("s", "w-0", "worker", 1) +
          subMember("s", "m-1", "master", 2));
  auto r = e.invalid("PodGroup/t/s");
  REQUIRE(r);
  CHECK(*r == "subgroup worker 1/2: only 1 pods exist for its minMember 2");
}
