// api/validation: every rule, and that each problem names the object, the field and the bad value.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"
#include "tessera/api/gpu_request.h"
#include "tessera/api/validation.h"

namespace {

using namespace tessera::api;

Queue queue(const std::string& yaml) {
  auto docs = yamlToJson(yaml);
  REQUIRE(docs.ok());
  auto q = queueFromJson(docs->front());
  INFO((q.ok() ? std::string() : q.error().message));
  REQUIRE(q.ok());
  return std::move(q).value();
}

Queue named(const std::string& name, const std::string& parent = "") {
  Queue q;
  q.meta.name = name;
  q.parentQueue = parent;
  return q;
}

PodGroup group(int32_t minMember) {
  PodGroup pg;
  pg.meta.name = "g";
  pg.meta.namespace_ = "ns";
  pg.minMember = minMember;
  return pg;
}

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST_CASE("validateQueueSpec: only -1 may be negative, limit not below quota, weight not negative") {
  const std::string head =
      "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec:\n  resources:\n";
  CHECK_FALSE(validateQueueSpec(
      queue(head + "    gpu: {quota: \"-1\", limit: \"-1\"}\n    cpu: {quota: \"4\", limit: \"8\"}\n")));

  auto p = validateQueueSpec(queue(head + "    gpu: {quota: \"-3\"}\n"));
  REQUIRE(p);
  CHECK(p->field == "spec.resources.gpu.quota");
  CHECK(p->text() == "Queue q: spec.resources.gpu.quota: -3 is invalid (only -1, unlimited, may be negative)");

  p = validateQueueSpec(queue(head + "    memory: {quota: \"1Gi\", limit: \"-2Gi\"}\n"));
  REQUIRE(p);
  CHECK(p->field == "spec.resources.memory.limit");
  CHECK(contains(p->message, "-2Gi"));

  p = validateQueueSpec(queue(head + "    cpu: {quota: \"8\", limit: \"4\"}\n"));
  REQUIRE(p);
  CHECK(p->detail() == "spec.resources.cpu.limit: 4 is below the quota 8");

  p = validateQueueSpec(queue(head + "    gpu: {overQuotaWeight: \"-1\"}\n"));
  REQUIRE(p);
  CHECK(p->field == "spec.resources.gpu.overQuotaWeight");
  CHECK(contains(p->message, "-1"));

  // "-1m" of a GPU is not the unlimited sentinel.
  p = validateQueueSpec(queue(head + "    gpu: {quota: \"-1m\"}\n"));
  REQUIRE(p);
  CHECK(p->field == "spec.resources.gpu.quota");
}

TEST_CASE("validateQueues: missing parents, cycles, inherited problems") {
  Queue root = named("root"), child = named("child", "root"), orphan = named("orphan", "nope");
  Queue x = named("x", "y"), y = named("y", "x"), under = named("under", "x"), deep = named("deep", "under");
  Queue bad = named("bad", "root");
  bad.gpu.quota = -5;
  Queue belowBad = named("below-bad", "bad");
  auto problems = validateQueues({&root, &child, &orphan, &x, &y, &under, &deep, &bad, &belowBad});
  CHECK_FALSE(problems.count("root"));
  CHECK_FALSE(problems.count("child"));
  REQUIRE(problems.count("orphan"));
  CHECK(problems.at("orphan").text() ==
        "Queue orphan: spec.parentQueue: parent queue \"nope\" does not exist (orphaned)");
  REQUIRE(problems.count("x"));
  CHECK(problems.at("x").detail() == "spec.parentQueue: parent cycle x -> y -> x (orphaned)");
  CHECK(problems.at("y").detail() == "spec.parentQueue: parent cycle x -> y -> x (orphaned)");
  REQUIRE(problems.count("under"));
  CHECK(contains(problems.at("under").message, "ancestor queue x: spec.parentQueue: parent cycle"));
  REQUIRE(problems.count("deep"));
  CHECK(contains(problems.at("deep").message,
                 "ancestor queue x: spec.parentQueue: parent cycle"));  // the nearest one with a problem of its own
  CHECK(problems.at("bad").field == "spec.resources.gpu.quota");
  CHECK(contains(problems.at("below-bad").message, "ancestor queue bad: spec.resources.gpu.quota"));

  SECTION("a self-parent is a cycle of one") {
    Queue self = named("self", "self");
    auto p = validateQueues({&self});
    REQUIRE(p.count("self"));
    CHECK(contains(p.at("self").message, "parent cycle self -> self"));
  }
  SECTION("known problems (conversion errors) pass down") {
    std::map<std::string, Problem> known;
    known.emplace("root", Problem{Kind::Queue, "", "root", "", "Queue root: spec.priority: expected an integer"});
    auto p = validateQueues({&root, &child}, known);
    REQUIRE(p.count("root"));
    CHECK(p.at("root").text() == "Queue root: spec.priority: expected an integer");
    REQUIRE(p.count("child"));
    CHECK(contains(p.at("child").text(), "ancestor queue root: Queue root: spec.priority"));
  }
}

TEST_CASE("validatePodGroup: minMember, subgroups, queue, priority class") {
  PodGroupRefs refs;
  refs.queueExists = [](const std::string& n) { return n == "team"; };
  refs.priorityClassExists = [](const std::string& n) { return n == "high"; };

  CHECK_FALSE(validatePodGroup(group(1), refs));
  auto p = validatePodGroup(group(0), refs);
  REQUIRE(p);
  CHECK(p->text() == "PodGroup ns/g: spec.minMember: must be at least 1, got 0");
  CHECK(p->ref() == "PodGroup/ns/g");
  p = validatePodGroup(group(-2), refs);
  REQUIRE(p);
  CHECK(contains(p->message, "got -2"));

  PodGroup pg = group(2);
  pg.queue = "nope";
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->detail() == "spec.queue: Queue \"nope\" does not exist");
  pg.meta.labels["tessera.dev/queue"] = "team";  // the label wins over spec.queue
  CHECK_FALSE(validatePodGroup(pg, refs));
  pg.meta.labels["tessera.dev/queue"] = "lost";
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->detail() == "metadata.labels[tessera.dev/queue]: Queue \"lost\" does not exist");
  pg.meta.labels.clear();
  pg.queue = "team";
  pg.priorityClassName = "urgent";
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->detail() == "spec.priorityClassName: PriorityClass \"urgent\" does not exist");
  pg.priorityClassName = "high";
  CHECK_FALSE(validatePodGroup(pg, refs));

  pg.subGroups = {SubGroup{"a", 1, {}}, SubGroup{"a", 1, {}}};
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->field == "spec.subGroups[1].name");
  pg.subGroups = {SubGroup{"", 1, {}}};
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->field == "spec.subGroups[0].name");
  pg.subGroups = {SubGroup{"a", 0, {}}};
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->detail() == "spec.subGroups[0].minMember: must be at least 1, got 0");

  SECTION("unset lookups skip their checks") {
    PodGroup q = group(1);
    q.queue = "nope";
    q.priorityClassName = "nope";
    CHECK_FALSE(validatePodGroup(q, PodGroupRefs{}));
  }
}

TEST_CASE("validateTopologyConstraints") {
  Topology dc;
  dc.meta.name = "dc";
  dc.levels = {{"rack"}, {"kubernetes.io/hostname"}};
  PodGroupRefs refs;
  refs.topology = [&](const std::string& n) -> const Topology* { return n == "dc" ? &dc : nullptr; };
  PodGroup pg = group(1);
  pg.topologyConstraint.requiredTopologyLevel = "rack";
  auto p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->field == "spec.topologyConstraint.topology");
  pg.topologyConstraint.topology = "nope";
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->detail() == "spec.topologyConstraint.topology: Topology \"nope\" not found");
  pg.topologyConstraint.topology = "dc";
  CHECK_FALSE(validatePodGroup(pg, refs));
  pg.topologyConstraint.requiredTopologyLevel = "zone";
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->detail() ==
        "spec.topologyConstraint.requiredTopologyLevel: \"zone\" is not a level of Topology dc (levels: rack, "
        "kubernetes.io/hostname)");
  pg.topologyConstraint.requiredTopologyLevel = "kubernetes.io/hostname";
  pg.topologyConstraint.preferredTopologyLevel = "rack";
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->field == "spec.topologyConstraint.preferredTopologyLevel");
  pg.topologyConstraint.preferredTopologyLevel.clear();
  pg.subGroups = {SubGroup{"a", 1, TopologyConstraint{"other", "rack", ""}}};
  p = validatePodGroup(pg, refs);
  REQUIRE(p);
  CHECK(p->field == "spec.subGroups[0].topologyConstraint.topology");
}

TEST_CASE("validateNode: nvidia.com/gpu.memory must be a positive integer") {
  Node n;
  n.meta.name = "gpu-1";
  CHECK_FALSE(validateNode(n));
  n.meta.labels["nvidia.com/gpu.memory"] = "81920";
  CHECK_FALSE(validateNode(n));
  for (const char* bad : {"80GB", "", "-1", "0", "1e5", "81920.5"}) {
    n.meta.labels["nvidia.com/gpu.memory"] = bad;
    auto p = validateNode(n);
    INFO(bad);
    REQUIRE(p);
    CHECK(p->ref() == "Node/gpu-1");
    CHECK(p->text() == std::string("Node gpu-1: metadata.labels[nvidia.com/gpu.memory]: \"") + bad +
                           "\" is not a positive integer number of MiB");
  }
}

TEST_CASE("validateNode: an invalid GPU-sharing setting is named and ignored, not fatal") {
  Node n;
  n.meta.name = "gpu-1";
  n.meta.annotations["tessera.dev/gpu-split-count"] = "many";
  auto p = validateNode(n);
  REQUIRE(p);
  CHECK(p->ignored);  // the node keeps scheduling with the cluster's value
  CHECK(p->text() ==
        "Node gpu-1: metadata.annotations[tessera.dev/gpu-split-count]: \"many\" is not a whole number of pods per "
        "GPU of at least 1 (the cluster's setting applies)");
  // A broken memory label is said first, and it closes the node.
  n.meta.labels["nvidia.com/gpu.memory"] = "80GB";
  p = validateNode(n);
  REQUIRE(p);
  CHECK_FALSE(p->ignored);
  CHECK(p->field == "metadata.labels[nvidia.com/gpu.memory]");
}

TEST_CASE("nodeGpuSettings: labels win over annotations; each bad value is named") {
  Node n;
  n.meta.name = "gpu-1";
  auto none = nodeGpuSettings(n);
  CHECK(none.splitCount == 0);
  CHECK(none.memoryScalingMilli == 0);
  CHECK(none.coreScalingMilli == 0);
  CHECK(none.excludedCount() == 0);
  CHECK(none.errors.empty());

  n.meta.annotations["tessera.dev/gpu-split-count"] = "3";
  n.meta.labels["tessera.dev/gpu-split-count"] = "5";
  n.meta.annotations["tessera.dev/gpu-memory-scaling"] = "1.5";
  n.meta.annotations["tessera.dev/gpu-core-scaling"] = "0.75";
  n.meta.annotations["tessera.dev/gpu-exclude"] = "GPU-aaaa, 2,0 ,GPU-aaaa,2";
  auto g = nodeGpuSettings(n);
  CHECK(g.errors.empty());
  CHECK(g.splitCount == 5);
  CHECK(g.memoryScalingMilli == 1500);
  CHECK(g.coreScalingMilli == 750);
  CHECK(g.excludedUuids == std::vector<std::string>{"GPU-aaaa"});
  CHECK(g.excludedIndexes == std::vector<int32_t>{2, 0});
  CHECK(g.excludedCount() == 3);
  CHECK_FALSE(g.migMode);
  n.meta.labels["tessera.dev/gpu-mode"] = "mig";
  CHECK(nodeGpuSettings(n).migMode);

  struct Bad {
    const char* key;
    const char* value;
    const char* want;
  };
  for (const Bad& b : {Bad{"tessera.dev/gpu-split-count", "0", "is not a whole number of pods per GPU"},
                       Bad{"tessera.dev/gpu-split-count", "1001", "is too large: at most 1000"},
                       Bad{"tessera.dev/gpu-split-count", "2.5", "is not a whole number"},
                       Bad{"tessera.dev/gpu-memory-scaling", "0", "is not a decimal factor above 0"},
                       Bad{"tessera.dev/gpu-memory-scaling", "-1", "is not a decimal factor"},
                       Bad{"tessera.dev/gpu-memory-scaling", "100.5", "at most 100"},
                       Bad{"tessera.dev/gpu-memory-scaling", "2x", "is not a decimal factor"},
                       Bad{"tessera.dev/gpu-core-scaling", "0", "is not a decimal factor above 0"},
                       Bad{"tessera.dev/gpu-core-scaling", "100.5", "at most 100"},
                       Bad{"tessera.dev/gpu-core-scaling", "half", "is not a decimal factor"},
                       Bad{"tessera.dev/gpu-exclude", "GPU-1,gpu0", "has \"gpu0\", neither a GPU UUID"},
                       Bad{"tessera.dev/gpu-exclude", "1024", "neither a GPU UUID (GPU-...) nor a device index"},
                       Bad{"tessera.dev/gpu-mode", "MIG", "is not a known GPU mode (valid: mig)"}}) {
    Node m;
    m.meta.name = "gpu-2";
    m.meta.labels[b.key] = b.value;
    INFO(b.key << "=" << b.value);
    auto r = nodeGpuSettings(m);
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].field == std::string("metadata.labels[") + b.key + "]");
    CHECK_THAT(r.errors[0].message, Catch::Contains(b.want) && Catch::Contains(std::string("\"") + b.value + "\""));
    CHECK(r.splitCount == 0);  // the bad value is not used
    CHECK(r.memoryScalingMilli == 0);
    CHECK(r.coreScalingMilli == 0);
    CHECK(r.excludedCount() == 0);
    CHECK_FALSE(r.migMode);
  }
}

