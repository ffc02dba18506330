// topology: the job-domains hook (which node subsets a gang is tried in, in which order, and why
// none), constraint validation, domain membership, the room cache, subgroup and preferred-level
// plans. Placement through the actions is covered by test/scenarios/topology.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "tessera/framework/args.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"
#include "tessera/plugins/factories.h"
#include "support/test_cluster.h"
#include "support/test_plugins.h"

namespace {

using tessera::framework::JobDomains;
using tessera::framework::NodeDomain;
using tessera::framework::Session;
using tessera::framework::SessionJob;
using tessera::framework::Statement;
using tessera::testing::TestCluster;

std::shared_ptr<tessera::framework::Plugin> plugin(tessera::plugins::PluginResult (*make)(tessera::framework::Args&),
                                                   const char* name) {
  return tessera::testing::makePlugin(name, make);
}

const char* kQueue = R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: default}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Topology
metadata: {name: dc}
spec: {levels: [{nodeLabel: zone}, {nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}
---
)";

/// A node with 8 GPUs; `zone`/`rack` empty = no such label.
std::string node(const std::string& name, const std::string& zone, const std::string& rack) {
  std::string labels = "kubernetes.io/hostname: " + name;
  if (!zone.empty()) labels += ", zone: " + zone;
  if (!rack.empty()) labels += ", rack: " + rack;
  return tessera::testing::nodeYaml(name, "64", "8", "  labels: {" + labels + "}\n") + "---\n";
}

/// A running foreign pod taking `gpus` GPUs on `node`.
std::string load(const std::string& node, int gpus) {
  const std::string g = std::to_string(gpus);
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: load-" + node +
         ", namespace: t}\nspec:\n  schedulerName: default-scheduler\n  nodeName: " + node +
         "\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m, nvidia.com/gpu: \"" + g +
         "\"}, limits: {nvidia.com/gpu: \"" + g + "\"}}}]\nstatus: {phase: Running}\n---\n";
}

std::string group(const std::string& name, int minMember, const std::string& constraint,
                  const std::string& subGroups = "") {
  std::string spec = "{minMember: " + std::to_string(minMember);
  if (!constraint.empty()) spec += ", topologyConstraint: " + constraint;
  if (!subGroups.empty()) spec += ", subGroups: " + subGroups;
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: t}\nspec: " + spec + "}\n---\n";
}

/// A pod of group `g` asking for `gpus` GPUs; running on `node` when given.
std::string member(const std::string& g, const std::string& name, int gpus, const std::string& node = "",
                   const std::string& subgroup = "") {
  const std::string gs = std::to_string(gpus);
  std::string meta = "{name: " + name + ", namespace: t, annotations: {pod-group-name: " + g + "}";
  if (!subgroup.empty()) meta += ", labels: {tessera.dev/subgroup: " + subgroup + "}";
  meta += "}";
  return "apiVersion: v1\nkind: Pod\nmetadata: " + meta + "\nspec:\n  schedulerName: tessera\n" +
         (node.empty() ? "" : "  nodeName: " + node + "\n") +
         "  containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m, nvidia.com/gpu: \"" + gs +
         "\"}, limits: {nvidia.com/gpu: \"" + gs + "\"}}}]\n" + (node.empty() ? "" : "status: {phase: Running}\n") +
         "---\n";
}

std::string gang(const std::string& g, int n, int gpus, const std::string& constraint) {
  std::string out = group(g, n, constraint);
  for (int i = 0; i < n; ++i) out += member(g, g + "-" + std::to_string(i), gpus);
  return out;
}

struct Env {
  TestCluster c;
  tessera::framework::Config cfg = tessera::testing::configWith(
      {plugin(tessera::plugins::makeGang, "gang"), plugin(tessera::plugins::makePredicates, "predicates"),
       plugin(tessera::plugins::makeNodeOrder, "nodeorder"), plugin(tessera::plugins::makeTopology, "topology")});
  std::unique_ptr<Session> ssn;

  void start(const std::string& yaml) {
    c.create(std::string(kQueue) + yaml);
    c.start();
    open();
  }
  void open() {
    ssn = std::make_unique<Session>(c.snapshot(), cfg, c.clock);
    ssn->open();
  }
  SessionJob& job(const std::string& name) {
    const int j = ssn->findJob("PodGroup/t/" + name);
    if (j < 0) FAIL("no job " << name);
    return ssn->jobs()[j];
  }
  tessera::framework::JobDomainsPtr domains(const std::string& name) { return ssn->jobDomains(job(name)); }
  /// Domain names, or "nullopt", or "none: <reason>".
  std::vector<std::string> names(const std::string& name) {
    auto d = domains(name);
    if (!d) return {"nullopt"};
    if (d->domains.empty()) return {"none: " + d->reason};
    std::vector<std::string> out;
    for (const auto& x : d->domains) out.push_back(x.name);
    return out;
  }
  std::vector<std::string> nodesOf(const NodeDomain& d) {
    std::vector<std::string> out;
    for (int n : d.nodes) out.push_back(ssn->nodes()[n].name());
    return out;
  }
};

/// Two zones; z1 has racks r1 (a1, a2) and r2 (b1), z2 has rack r3 (c1); x1 lacks the zone label.
std::string cluster() {
  return node("a1", "z1", "r1") + node("a2", "z1", "r1") + node("b1", "z1", "r2") + node("c1", "z2", "r3") +
         node("x1", "", "r9");
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("topology: jobs without a constraint are left alone", "[topology]") {
  Env e;
  e.start(cluster() + gang("free", 2, 1, "") + gang("soft-nothing", 1, 1, "{topology: dc}"));
  CHECK(e.names("free") == V{"nullopt"});
  CHECK(e.names("soft-nothing") == V{"nullopt"});  // a topology without a level constrains nothing
  CHECK(e.ssn->jobValid(e.job("free")).ok());
}

TEST_CASE("topology: required level, candidates fullest first, ids as paths", "[topology]") {
  Env e;
  // r1 has 16 free GPUs, r2 8, r3 6 (c1 holds 2); a gang of 2 x 3 GPUs fits r1 (4 pods), r2 (2), r3 (2).
  e.start(cluster() + load("c1", 2) + gang("g", 2, 3, "{topology: dc, requiredTopologyLevel: rack}"));
  // r3 and r2 hold 2 pods each; r3 has fewer free GPUs: fullest first. x1 is outside the tree.
  CHECK(e.names("g") == V{"zone=z2/rack=r3", "zone=z1/rack=r2", "zone=z1/rack=r1"});
  auto d = e.domains("g");
  REQUIRE(d);
  CHECK(e.nodesOf(d->domains.back()) == V{"a1", "a2"});
}

TEST_CASE("topology: a zone holds pods across its racks", "[topology]") {
  Env e;
  e.start(cluster() + gang("z", 3, 8, "{topology: dc, requiredTopologyLevel: zone}"));
  CHECK(e.names("z") == V{"zone=z1"});
  auto d = e.domains("z");
  REQUIRE(d);
  CHECK(e.nodesOf(d->domains.front()) == V{"a1", "a2", "b1"});
}

TEST_CASE("topology: nothing holds the gang: the level and the best domain's count", "[topology]") {
  Env e;
  e.start(cluster() + load("a1", 4) + gang("big", 4, 4, "{topology: dc, requiredTopologyLevel: rack}"));
  // r1: a1 holds 1, a2 holds 2 -> 3 of 4; r2 and r3 hold 2.
  CHECK(e.names("big") == V{"none: topology level rack: best domain zone=z1/rack=r1 can hold 3 of 4 pods"});
}

TEST_CASE("topology: constraint errors name the PodGroup field", "[topology]") {
  Env e;
  e.start(cluster() + gang("t", 1, 1, "{topology: nope, requiredTopologyLevel: rack}") +
          gang("l", 1, 1, "{topology: dc, requiredTopologyLevel: row}") +
          gang("p", 1, 1, "{topology: dc, requiredTopologyLevel: rack, preferredTopologyLevel: zone}") +
          gang("n", 1, 1, "{requiredTopologyLevel: rack}") +
          group("s", 1, "{topology: dc}", "[{name: a, minMember: 1, topologyConstraint: {requiredTopologyLevel: aisle}}]") +
          member("s", "s-0", 1, "", "a"));
  auto invalid = [&](const char* j) {
    return tessera::testing::rejection(e.ssn->jobValid(e.job(j))).value_or("valid");
  };
  CHECK(invalid("t") == "PodGroup t/t: spec.topologyConstraint.topology: Topology \"nope\" not found");
  CHECK(invalid("l") == "PodGroup t/l: spec.topologyConstraint.requiredTopologyLevel: \"row\" is not a level of "
                        "Topology dc (levels: zone, rack, kubernetes.io/hostname)");
  CHECK(invalid("p") == "PodGroup t/p: spec.topologyConstraint.preferredTopologyLevel: \"zone\" is above "
                        "requiredTopologyLevel \"rack\" in Topology dc");
  CHECK(invalid("n") == "PodGroup t/n: spec.topologyConstraint.topology: required when requiredTopologyLevel or "
                        "preferredTopologyLevel is set");
  CHECK(invalid("s") == "PodGroup t/s: spec.subGroups[0].topologyConstraint.requiredTopologyLevel: \"aisle\" is not "
                        "a level of Topology dc (levels: zone, rack, kubernetes.io/hostname)");
  // Asked anyway (an action that skips the validity check): constrained, nowhere, same reason.
  CHECK(e.names("t") == V{"none: PodGroup t/t: spec.topologyConstraint.topology: Topology \"nope\" not found"});
}

TEST_CASE("topology: running pods pin the domain", "[topology]") {
  Env e;
  e.start(cluster() + group("grow", 1, "{topology: dc, requiredTopologyLevel: rack}") + member("grow", "grow-0", 1, "b1") +
          member("grow", "grow-1", 1) + group("split", 1, "{topology: dc, requiredTopologyLevel: rack}") +
          member("split", "split-0", 1, "a1") + member("split", "split-1", 1, "c1") + member("split", "split-2", 1) +
          group("outside", 1, "{topology: dc, requiredTopologyLevel: rack}") + member("outside", "outside-0", 1, "x1") +
          member("outside", "outside-1", 1));
  CHECK(e.names("grow") == V{"zone=z1/rack=r2"});
  CHECK(e.names("split") ==
        V{"none: topology level rack: running pods are in more than one domain (zone=z1/rack=r1, zone=z2/rack=r3)"});
  CHECK(e.names("outside") == V{"none: topology level rack: running pod t/outside-0 is on node x1, which is outside "
                                "Topology dc (a node needs every level's label: zone, rack, kubernetes.io/hostname)"});
}

TEST_CASE("topology: preferred level first, then up to the required one or the whole cluster", "[topology]") {
  Env e;
  e.start(cluster() + load("a1", 4) +
          gang("pair", 2, 4, "{topology: dc, requiredTopologyLevel: zone, preferredTopologyLevel: rack}") +
          gang("soft", 3, 8, "{topology: dc, preferredTopologyLevel: rack}"));
  // pair: racks r2 and r3 (2 pods each, alike: by id), r1 (3), then zones z2 (2), z1 (5).
  CHECK(e.names("pair") == V{"zone=z1/rack=r2", "zone=z2/rack=r3", "zone=z1/rack=r1", "zone=z2", "zone=z1"});
  // soft: no rack holds 3 x 8 GPUs; z1 holds 2 (a2, b1): none; then anywhere.
  CHECK(e.names("soft") == V{"cluster"});
  auto d = e.domains("soft");
  REQUIRE(d);
  CHECK(d->domains.front().nodes.size() == e.ssn->nodes().size());
}

TEST_CASE("topology: concentrating inside a fallback domain, most room first", "[topology]") {
  Env e;
  e.start(cluster() + load("a1", 4) + gang("trio", 3, 4, "{topology: dc, requiredTopologyLevel: rack, "
                                                         "preferredTopologyLevel: kubernetes.io/hostname}"));
  CHECK(e.names("trio") == V{"zone=z1/rack=r1"});
  // Inside r1, a2 (room for 2) outranks a1 (room for 1) by more than any nodeorder score.
  const auto& t = e.job("trio").tasks[0];
  const int64_t a1 = e.ssn->nodeScore(t, e.ssn->nodes()[tessera::testing::nodeIndex(*e.ssn, "a1")]);
  const int64_t a2 = e.ssn->nodeScore(t, e.ssn->nodes()[tessera::testing::nodeIndex(*e.ssn, "a2")]);
  CHECK(a2 > a1 + 1'000'000);
}

TEST_CASE("topology: rooms follow this cycle's placements", "[topology]") {
  Env e;
  e.start(cluster() + gang("first", 2, 4, "{topology: dc, requiredTopologyLevel: rack}") +
          gang("second", 2, 4, "{topology: dc, requiredTopologyLevel: rack}"));
  CHECK(e.names("second") == V{"zone=z1/rack=r2", "zone=z2/rack=r3", "zone=z1/rack=r1"});
  // Place first on b1 (r2): r2 is then full for second.
  Statement stmt(*e.ssn);
  for (auto& t : e.job("first").tasks) stmt.allocate(t, tessera::testing::nodeIndex(*e.ssn, "b1"));
  CHECK(e.names("second") == V{"zone=z2/rack=r3", "zone=z1/rack=r1"});
  stmt.discard();  // undone: r2 has room again
  CHECK(e.names("second") == V{"zone=z1/rack=r2", "zone=z2/rack=r3", "zone=z1/rack=r1"});
}

TEST_CASE("topology: membership follows node labels across sessions", "[topology]") {
  Env e;
  e.start(cluster() + gang("g", 1, 1, "{topology: dc, requiredTopologyLevel: rack}"));
  CHECK(e.names("g").size() == 3);
  // x1 gains its zone: a fourth rack appears in the next session.
  auto x1 = tessera::testing::manifests(node("x1", "z3", "r9"));
  REQUIRE(e.c.cluster.apply(tessera::api::Kind::Node, x1.front()).ok());
  e.open();
  CHECK(e.names("g").size() == 4);
}

TEST_CASE("topology: subgroups get a domain of their level inside the group's", "[topology]") {
  Env e;
  e.start(cluster() +
          group("sg", 4, "{topology: dc, requiredTopologyLevel: zone}",
                "[{name: ps, minMember: 2, topologyConstraint: {requiredTopologyLevel: rack}}, {name: w, minMember: 2}]") +
          member("sg", "sg-0", 8, "", "ps") + member("sg", "sg-1", 8, "", "ps") + member("sg", "sg-2", 1, "", "w") +
          member("sg", "sg-3", 1, "", "w"));
  CHECK(e.names("sg") == V{"zone=z1"});  // z2 holds 1 of the 8-GPU pods
  auto d = e.domains("sg");
  REQUIRE(d);
  e.ssn->restrictTo(&d->domains.front());
  auto allowed = [&](int task, const char* node) {
    std::string why;
    const bool ok = e.ssn->predicate(e.job("sg").tasks[task], e.ssn->nodes()[tessera::testing::nodeIndex(*e.ssn, node)], why);
    return ok ? std::string("ok") : why;
  };
  // ps needs two 8-GPU nodes in one rack: only r1.
  CHECK(allowed(0, "a1") == "ok");
  CHECK(allowed(0, "b1") == "outside subgroup ps's domain zone=z1/rack=r1");
  CHECK(allowed(2, "b1") == "ok");  // w has no constraint of its own
  e.ssn->restrictTo(nullptr);
}

TEST_CASE("topology: by capacity, jobs alike get what a fresh answer gives them, whoever asked before", "[topology]") {
  // The victim actions' domains (DomainRoom::WithVictims: rooms by capacity) are kept per demand for
  // the session. Each job's domains and node bonuses asked in a session where every other job asked
  // first must be those of a session where it asks alone: alike jobs (p1, p2; r1, r2) share an
  // answer, a job that differs in pod count (p3), request (p4) or constraint (r1) or that has a pod
  // placed (q) gets its own.
  const std::string zoneRack = "{topology: dc, requiredTopologyLevel: zone, preferredTopologyLevel: rack}";
  const std::string rackHost = "{topology: dc, requiredTopologyLevel: rack, preferredTopologyLevel: kubernetes.io/hostname}";
  const std::string yaml = cluster() + load("a1", 4) + load("c1", 2) + gang("p1", 2, 4, zoneRack) +
                           gang("p2", 2, 4, zoneRack) + gang("p3", 3, 4, zoneRack) + gang("p4", 2, 6, zoneRack) +
                           group("p5", 2, zoneRack) + member("p5", "p5-0", 4) + member("p5", "p5-1", 4) +
                           member("p5", "p5-2", 4) + group("q", 3, zoneRack) + member("q", "q-0", 4, "b1") +
                           member("q", "q-1", 4) + member("q", "q-2", 4) + gang("r1", 3, 4, rackHost) +
                           gang("r2", 3, 4, rackHost);
  // p5 asks as p3 but needs 2 of its 3 pods; q asks as p1 but has a pod running (its rack only).
  const std::vector<std::string> jobs = {"p1", "p2", "p3", "p4", "p5", "q", "r1", "r2", "p1"};
  // What one ask shows: each domain's name, rank and size, then the job's first pod's score per node.
  auto ask = [](Env& e, const std::string& name) {
    std::vector<std::string> out;
    auto d = e.ssn->jobDomains(e.job(name), tessera::framework::DomainRoom::WithVictims);
    if (!d) return std::vector<std::string>{"nullopt"};
    out.push_back("reason: " + d->reason);
    for (const auto& x : d->domains)
      out.push_back(x.name + " rank " + std::to_string(x.rank) + " nodes " + std::to_string(x.nodes.size()));
    const auto& t = e.job(name).tasks[0];
    for (const auto& n : e.ssn->nodes()) out.push_back(n.name() + " " + std::to_string(e.ssn->nodeScore(t, n)));
    return out;
  };
  Env together;
  together.start(yaml);
  for (const std::string& name : jobs) {
    Env alone;
    alone.start(yaml);
    INFO("job " << name);
    CHECK(ask(together, name) == ask(alone, name));
    Env byFree;  // by free room (allocate's): never kept
    byFree.start(yaml);
    CHECK(together.names(name) == byFree.names(name));
  }
  // The alike jobs did share an answer, and it has domains.
  CHECK(ask(together, "p2").size() > 1 + together.ssn->nodes().size());
}
