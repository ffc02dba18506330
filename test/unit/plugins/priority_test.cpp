// priority: jobs by priority (spec.priority, else the PriorityClass of the PodGroup or pod, else
// the globalDefault class, else 0), higher first, then older, then UID; tasks inside a job by the
// tessera.dev/task-priority label (kai.scheduler/task-priority accepted), higher first. Both are
// strict total orders.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "tessera/framework/args.h"
#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"
#include "support/test_cluster.h"

namespace {

using tessera::framework::Session;
using tessera::framework::SessionJob;
using tessera::framework::SessionTask;
using tessera::testing::TestCluster;

std::shared_ptr<tessera::framework::Plugin> priority() {
  tessera::framework::Args args("plugins.priority", nullptr);
  auto p = tessera::plugins::makePriority(args);
  REQUIRE(p.ok());
  return std::move(p).value();
}

std::string pc(const std::string& name, int value, bool globalDefault = false) {
  return "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: " + name +
         "}\nvalue: " + std::to_string(value) + "\nglobalDefault: " + (globalDefault ? "true" : "false") + "\n---\n";
}

/// A pending pod; `created` is the time of day on 2026-01-01 ("00:00:05") or a full timestamp.
std::string pod(const std::string& name, const std::string& created, const std::string& spec = "",
                const std::string& meta = "") {
  const std::string ts = created.size() == 8 ? "2026-01-01T" + created + "Z" : created;
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t, creationTimestamp: \"" + ts + "\"" +
         (meta.empty() ? "" : ", " + meta) + "}\nspec:\n  schedulerName: tessera\n" +
         (spec.empty() ? "" : "  " + spec + "\n") + "  containers: [{name: c, image: busybox}]\n---\n";
}

std::vector<std::string> jobOrder(const Session& ssn) {
  std::vector<const SessionJob*> jobs;
  for (const auto& j : ssn.jobs()) jobs.push_back(&j);
  std::sort(jobs.begin(), jobs.end(), [&](const SessionJob* l, const SessionJob* r) { return ssn.jobLess(*l, *r); });
  std::vector<std::string> out;
  for (const auto* j : jobs) out.push_back(j->key());
  return out;
}

/// Every pair is ordered exactly one way; nothing is before itself.
template <class T, class Less>
void checkStrictTotal(const std::vector<const T*>& items, Less less) {
  for (const T* a : items) {
    CHECK_FALSE(less(*a, *a));
    for (const T* b : items)
      if (a != b) CHECK(less(*a, *b) != less(*b, *a));
  }
}

int32_t priorityOf(const Session& ssn, const std::string& key) {
  const int j = ssn.findJob(key);
  if (j < 0) FAIL("no job " << key);
  return ssn.jobs()[j].priority;
}

void jobCluster(TestCluster& c) {
  c.create(pc("high", 1000) + pc("low", 10) +
           pod("lo", "00:00:00", "priorityClassName: low") +                      //
           pod("none", "00:00:01") +                                              //
           pod("spec", "00:00:02", "priorityClassName: low\n  priority: 2000") +  //
           pod("hi", "00:00:05", "priorityClassName: high") +                     //
           pod("hi-old", "2025-12-31T23:59:00Z", "priorityClassName: high") +     //
           pod("twin-b", "00:00:09") +                                            // created first: the smaller UID
           pod("twin-a", "00:00:09") +                                            //
           pod("pg-0", "00:00:00", "", "annotations: {pod-group-name: pg}") + R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: pg, namespace: t, creationTimestamp: "2026-01-01T00:00:03Z"}
spec: {minMember: 1, priorityClassName: high}
)");
  c.start();
}

}  // namespace

TEST_CASE("jobs: higher priority first, then older, then UID", "[priority]") {
  TestCluster c;
  jobCluster(c);
  auto cfg = tessera::testing::configWith({priority()});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  CHECK(priorityOf(ssn, "Pod/t/lo") == 10);
  CHECK(priorityOf(ssn, "Pod/t/none") == 0);
  CHECK(priorityOf(ssn, "Pod/t/spec") == 2000);  // spec.priority over the class name
  CHECK(priorityOf(ssn, "Pod/t/hi") == 1000);
  CHECK(priorityOf(ssn, "PodGroup/t/pg") == 1000);  // the PodGroup's class
  CHECK(jobOrder(ssn) == std::vector<std::string>{"Pod/t/spec", "Pod/t/hi-old", "PodGroup/t/pg", "Pod/t/hi",
                                                  "Pod/t/lo", "Pod/t/none", "Pod/t/twin-b", "Pod/t/twin-a"});
  std::vector<const SessionJob*> jobs;
  for (const auto& j : ssn.jobs()) jobs.push_back(&j);
  checkStrictTotal(jobs, [&](const SessionJob& l, const SessionJob& r) { return ssn.jobLess(l, r); });
}

TEST_CASE("without the priority plugin jobs go by age alone", "[priority]") {
  TestCluster c;
  jobCluster(c);
  auto cfg = tessera::testing::configWith({});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  CHECK(jobOrder(ssn) == std::vector<std::string>{"Pod/t/hi-old", "Pod/t/lo", "Pod/t/none", "Pod/t/spec",
                                                  "PodGroup/t/pg", "Pod/t/hi", "Pod/t/twin-b", "Pod/t/twin-a"});
}

TEST_CASE("a globalDefault PriorityClass applies to pods without a class", "[priority]") {
  TestCluster c;
  c.create(pc("base", 50, true) + pc("low", 10) + pod("plain", "00:00:00") +
           pod("classed", "00:00:01", "priorityClassName: low") + pod("explicit", "00:00:02", "priority: 0") +
           pod("unknown-class", "00:00:03", "priorityClassName: nope"));
  c.start();
  auto cfg = tessera::testing::configWith({priority()});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  CHECK(priorityOf(ssn, "Pod/t/plain") == 50);
  CHECK(priorityOf(ssn, "Pod/t/classed") == 10);
  CHECK(priorityOf(ssn, "Pod/t/explicit") == 0);
  CHECK(jobOrder(ssn).front() == "Pod/t/plain");
  // Priority below 100 means preemptible unless the PodGroup says otherwise.
  CHECK(ssn.jobs()[ssn.findJob("Pod/t/plain")].preemptible);
}

TEST_CASE("preemptible follows priority unless the PodGroup says otherwise", "[priority]") {
  TestCluster c;
  c.create(pc("high", 1000) + pod("hi", "00:00:00", "priorityClassName: high") + pod("lo", "00:00:01") +
           pod("pinned-0", "00:00:02", "", "annotations: {pod-group-name: pinned}") +
           pod("cheap-0", "00:00:03", "priorityClassName: high", "annotations: {pod-group-name: cheap}") + R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: pinned, namespace: t}
spec: {minMember: 1, preemptibility: non-preemptible}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: cheap, namespace: t}
spec: {minMember: 1, preemptibility: preemptible}
)");
  c.start();
  auto cfg = tessera::testing::configWith({priority()});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  CHECK_FALSE(ssn.jobs()[ssn.findJob("Pod/t/hi")].preemptible);
  CHECK(ssn.jobs()[ssn.findJob("Pod/t/lo")].preemptible);
  CHECK_FALSE(ssn.jobs()[ssn.findJob("PodGroup/t/pinned")].preemptible);
  CHECK(ssn.jobs()[ssn.findJob("PodGroup/t/cheap")].preemptible);
}

TEST_CASE("tasks: higher task-priority first, then older, then UID", "[priority]") {
  TestCluster c;
  const std::string g = "annotations: {pod-group-name: g}";
  c.create(pod("zero", "00:00:01", "", g) +
           pod("five", "00:00:02", "", g + ", labels: {tessera.dev/task-priority: \"5\"}") +
           pod("seven-kai", "00:00:03", "", g + ", labels: {kai.scheduler/task-priority: \"7\"}") +
           pod("junk", "00:00:04", "", g + ", labels: {tessera.dev/task-priority: abc}") +
           pod("both", "00:00:05", "", g + ", labels: {tessera.dev/task-priority: \"1\", kai.scheduler/task-priority: \"9\"}") +
           pod("late-twin", "00:00:06", "", g) + pod("early-twin", "00:00:06", "", g) + R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: t}
spec: {minMember: 1}
)");
  c.start();
  auto order = [&](bool withPlugin) {
    auto cfg = withPlugin ? tessera::testing::configWith({priority()}) : tessera::testing::configWith({});
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    const SessionJob& job = ssn.jobs()[ssn.findJob("PodGroup/t/g")];
    std::vector<const SessionTask*> tasks;
    for (const auto& t : job.tasks) tasks.push_back(&t);
    checkStrictTotal(tasks, [&](const SessionTask& l, const SessionTask& r) { return ssn.taskLess(l, r); });
    std::sort(tasks.begin(), tasks.end(),
              [&](const SessionTask* l, const SessionTask* r) { return ssn.taskLess(*l, *r); });
    std::vector<std::string> out;
    for (const auto* t : tasks) out.push_back(t->pod().meta.name);
    return out;
  };
  // late-twin was created first: same timestamp, smaller UID.
  // (A negative task priority cannot be written: a label value starts with an alphanumeric.)
  CHECK(order(true) == std::vector<std::string>{"seven-kai", "five", "both", "zero", "junk", "late-twin",
                                                "early-twin"});
  CHECK(order(false) == std::vector<std::string>{"zero", "five", "seven-kai", "junk", "both", "late-twin",
                                                 "early-twin"});
}

TEST_CASE("a PodGroup's class beats the spec.priority admission puts on its pods", "[priority]") {
  // On a real API server the Priority admission plugin sets spec.priority on every pod (from the
  // pod's own class, the globalDefault class, or 0). A PodGroup's spec.priorityClassName must still
  // decide the job's priority; the session takes the first pod's spec.priority first.
  TestCluster c;
  c.create(pc("high", 1000) + pod("g-0", "00:00:00", "priority: 0", "annotations: {pod-group-name: g}") + R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: t}
spec: {minMember: 1, priorityClassName: high}
)");
  c.start();
  auto cfg = tessera::testing::configWith({priority()});
  Session ssn(c.snapshot(), cfg, c.clock);
  ssn.open();
  CHECK(priorityOf(ssn, "PodGroup/t/g") == 1000);
}
