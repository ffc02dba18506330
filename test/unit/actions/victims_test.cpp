// The victim search of reclaim and preempt at the session level: which node and which pods go.
// The claimant takes the node whose victim set comes first in victim order (fewer victims break
// ties); an elastic victim above its minMember
// loses surplus pods only; a gang at its minMember goes whole; nothing is committed when the
// victims would not make room.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/actions/factories.h"
#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"
#include "support/action_env.h"

namespace {

using namespace tessera::testing::actions;  // NOLINT(google-build-using-namespace)

using tessera::framework::Config;
using tessera::framework::Session;
using tessera::framework::SessionResult;
using tessera::testing::TestCluster;

// Queues for reclaim: a (quota 4) asks for `claim` GPUs, b (quota 4) holds 8 of 8.
// Fair shares: a min(4, claim), b 4 + the rest; b is over its share.

TEST_CASE("reclaim: the claimant takes the node whose victims come first in victim order", "[actions][victims]") {
  // n1 runs four 1-GPU pods of b, n2 two newer 2-GPU pods. A 2-GPU claimant could take two pods on
  // n1 or one on n2; n2's pods are the newest, first in victim order: one 2-GPU pod on n2 goes.
  Env e("reclaim");
  const std::string old = "2025-12-30T00:00:00Z", young = "2025-12-30T06:00:00Z";
  auto r = e.run(node("n1", 4) + node("n2", 4),
                 queue("a", "4") + queue("b", "4") + pod("b1", "b", 1, "n1", "train", "", old) +
                     pod("b2", "b", 1, "n1", "train", "", old) + pod("b3", "b", 1, "n1", "train", "", old) +
                     pod("b4", "b", 1, "n1", "train", "", old) + pod("b5", "b", 2, "n2", "train", "", young) +
                     pod("b6", "b", 2, "n2", "train", "", young) + pod("claim", "a", 2));
  REQUIRE(r.evictions.size() == 1);
  CHECK((r.evictions[0].podKey == "t/b5" || r.evictions[0].podKey == "t/b6"));
  CHECK(r.evictions[0].node == "n2");
  CHECK(pipelinedTo(r, "t/claim") == "n2");
  CHECK_THAT(r.evictions[0].reason, Catch::Contains("reclaimed by queue a for pod t/claim"));
}

TEST_CASE("reclaim: fewer victims break ties of victim order", "[actions][victims]") {
  // As above, but n1's pods are the newest: the order prefers taking two of them (issue 15: the
  // victim order before the count).
  Env e("reclaim");
  const std::string old = "2025-12-30T00:00:00Z", young = "2025-12-30T06:00:00Z";
  auto r = e.run(node("n1", 4) + node("n2", 4),
                 queue("a", "4") + queue("b", "4") + pod("b1", "b", 1, "n1", "train", "", young) +
                     pod("b2", "b", 1, "n1", "train", "", young) + pod("b3", "b", 1, "n1", "train", "", young) +
                     pod("b4", "b", 1, "n1", "train", "", young) + pod("b5", "b", 2, "n2", "train", "", old) +
                     pod("b6", "b", 2, "n2", "train", "", old) + pod("claim", "a", 2));
  CHECK(evicted(r).size() == 2);
  CHECK(pipelinedTo(r, "t/claim") == "n1");
}

TEST_CASE("reclaim: an elastic victim above minMember loses surplus pods only", "[actions][victims]") {
  // b's job el (minMember 2) runs four 1-GPU pods, and b holds 4 more (8 of 8). A 2-GPU claimant
  // takes two surplus pods of el: el keeps its minimum; the other pods on n2 are untouched.
  Env e("reclaim");
  std::string y = queue("a", "4") + queue("b", "4") + group("el", "b", 2);
  for (int i = 0; i < 4; ++i) y += pod("el-" + std::to_string(i), "b", 1, "n1", "train", "el");
  for (int i = 0; i < 4; ++i) y += pod("other-" + std::to_string(i), "b", 1, "n2", "train", "", "2025-12-30T00:00:00Z");
  auto r = e.run(node("n1", 4) + node("n2", 4), y + pod("claim", "a", 2));
  const auto ev = evicted(r);
  REQUIRE(ev.size() == 2);
  for (const auto& k : ev) CHECK(k.rfind("t/el-", 0) == 0);
}

// Candidate nodes count victims as makeRoomOn evicts them: a gang at its minMember whole.
TEST_CASE("reclaim: victims are counted as whole gangs when choosing the node", "[actions][victims]") {
  // n1 (6 GPUs): b's gang g (minMember 3) runs three 2-GPU pods. n2 (4 GPUs): four 1-GPU pods of b.
  // A 2-GPU claimant: on n1 one gang pod would free enough, but the gang goes whole (3 pods); on n2
  // two pods do, and they are newer than the gang (first in victim order): the two pods on n2.
  Env e("reclaim");
  std::string y = queue("a", "5") + queue("b", "5") +
                  "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: t, "
                  "creationTimestamp: \"2025-12-29T00:00:00Z\"}\nspec: {minMember: 3, queue: b, priorityClassName: "
                  "train}\n---\n";
  for (int i = 0; i < 3; ++i) y += pod("g-" + std::to_string(i), "b", 2, "n1", "train", "g", "2025-12-29T00:00:00Z");
  for (int i = 0; i < 4; ++i) y += pod("other-" + std::to_string(i), "b", 1, "n2", "train", "", "2025-12-30T00:00:00Z");
  auto r = e.run(node("n1", 6) + node("n2", 4), y + pod("claim", "a", 2));
  const auto ev = evicted(r);
  CHECK(ev.size() == 2);
  for (const auto& k : ev) CHECK(k.rfind("t/other-", 0) == 0);
  CHECK(pipelinedTo(r, "t/claim") == "n2");
}

TEST_CASE("reclaim: a gang at its minMember on the only usable node goes whole", "[actions][victims]") {
  // One 4-GPU node; b's gang g (minMember 2) holds it with two 2-GPU pods. A 1-GPU claimant: both
  // gang pods are evicted (a gang is never left below its minimum by reclaim).
  Env e("reclaim");
  auto r = e.run(node("n1", 4), queue("a", "2") + queue("b", "2") + group("g", "b", 2) +
                                    pod("g-0", "b", 2, "n1", "train", "g") + pod("g-1", "b", 2, "n1", "train", "g") +
                                    pod("claim", "a", 1));
  CHECK(evicted(r) == std::vector<std::string>{"t/g-0", "t/g-1"});
  CHECK(pipelinedTo(r, "t/claim") == "n1");
}

TEST_CASE("preempt: nothing is evicted when the eligible victims would not make room", "[actions][victims]") {
  // n1 (4 GPUs): a train pod (1 GPU) and a build-preemptible pod (3 GPUs) of the same queue. A
  // build-preemptible 4-GPU claimant may take only the train pod (strictly lower priority): not
  // enough, so nothing is evicted and nothing pipelined.
  Env e("preempt");
  auto r = e.run(node("n1", 4), queue("q", "4") + pod("low", "q", 1, "n1") +
                                    pod("peer", "q", 3, "n1", "build-preemptible") +
                                    pod("claim", "q", 4, "", "build-preemptible"));
  CHECK(r.evictions.empty());
  CHECK(r.pipelined.empty());
}

TEST_CASE("preempt: the fewest victims, the lowest priority first", "[actions][victims]") {
  // n1 (4 GPUs): four 1-GPU pods: two train (50), two build-preemptible (75). A 2-GPU claimant of
  // priority 100 evicts exactly the two train pods.
  Env e("preempt");
  auto r = e.run(node("n1", 4), queue("q", "8") + pod("t1", "q", 1, "n1") + pod("t2", "q", 1, "n1") +
                                    pod("m1", "q", 1, "n1", "build-preemptible") +
                                    pod("m2", "q", 1, "n1", "build-preemptible") +
                                    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: build}\n"
                                    "value: 100\n---\n" +
                                    pod("claim", "q", 2, "", "build"));
  CHECK(evicted(r) == std::vector<std::string>{"t/t1", "t/t2"});
  CHECK(pipelinedTo(r, "t/claim") == "n1");
}

/// One action's evictions and pipelined pods ("pod->node") on a cluster, with the self-checks on
/// or off (they stay as set: the caller restores them).
std::vector<std::string> decisionsWithSelfChecks(const std::string& action, bool checks, const std::string& nodes,
                                                 const std::string& yaml) {
  tessera::actions::setSelfChecks(checks);
  Env e(action);
  const SessionResult r = e.run(nodes, yaml);
  std::vector<std::string> out = evicted(r);
  for (const auto& p : r.pipelined) out.push_back(p.podKey + "->" + p.node);
  return out;
}

/// The action's decisions with the self-checks on (a failed check aborts), required to be those
/// with them off. The self-checks stay off afterwards as decisionsWithSelfChecks leaves them.
std::vector<std::string> decisionsCheckedAlike(const std::string& action, const std::string& nodes,
                                               const std::string& yaml) {
  const std::vector<std::string> checked = decisionsWithSelfChecks(action, true, nodes, yaml);
  REQUIRE(decisionsWithSelfChecks(action, false, nodes, yaml) == checked);
  return checked;
}

/// Whether the decisions placed more than one pod (several claimants, or pods, committed).
bool placedSeveral(const std::vector<std::string>& decisions) {
  return std::count_if(decisions.begin(), decisions.end(),
                       [](const std::string& d) { return d.find("->") != std::string::npos; }) > 1;
}

TEST_CASE("preempt: a queue whose later claimants have no victim left takes no more turns; decisions unchanged",
          "[actions][victims]") {
  // Random clusters of three queues, running and pending pods at three priorities. Preempt spares
  // a queue's remaining turns once its next claimants can find no victim (VictimSearch::queueSpent):
  // run once that way and once with the self-checks on, which take every turn and assert that each
  // spared one ends without victims. The evictions and pipelined pods must be the same.
  const std::string build = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: build}\nvalue: 100\n---\n";
  const char* classes[] = {"train", "build-preemptible", "build"};
  const bool checksWere = tessera::actions::selfChecks();
  std::mt19937 rng(11);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int withEvictions = 0;
  for (int c = 0; c < 150; ++c) {
    std::string nodes, yaml = build;
    const int nodeCount = 2 + pick(3);
    std::vector<int> free;
    for (int n = 0; n < nodeCount; ++n) nodes += node("n" + std::to_string(n), 4), free.push_back(4);
    for (int q = 0; q < 3; ++q) yaml += queue("q" + std::to_string(q), std::to_string(2 + pick(6)));
    for (int i = 0; i < 10; ++i) {  // running pods where they fit
      const int n = pick(nodeCount), gpus = 1 + pick(2);
      if (free[static_cast<size_t>(n)] < gpus) continue;
      free[static_cast<size_t>(n)] -= gpus;
      yaml += pod("r" + std::to_string(i), "q" + std::to_string(pick(3)), gpus, "n" + std::to_string(n), classes[pick(3)]);
    }
    for (int i = 0; i < 12; ++i)
      yaml += pod("p" + std::to_string(i), "q" + std::to_string(pick(3)), 1 + pick(3), "", classes[pick(3)], "",
                  "2026-01-01T00:00:" + std::to_string(10 + pick(40)) + "Z");
    auto decisions = [&](bool checks) { return decisionsWithSelfChecks("preempt", checks, nodes, yaml); };
    const std::vector<std::string> spared = decisions(false);
    const std::vector<std::string> taken = decisions(true);
    INFO("case " << c << "\n" << yaml);
    REQUIRE(spared == taken);
    withEvictions += spared.empty() ? 0 : 1;
  }
  tessera::actions::setSelfChecks(checksWere);
  CHECK(withEvictions > 30);  // the cases preempt in many of them, not only in a few
}

TEST_CASE("reclaim: a trial of the victim set's pruning that would break a parent's fair share is not run; decisions unchanged",
          "[actions][victims]") {
  // Random clusters: a parent queue dept with children a and b, a top-level queue other. Gangs of
  // a reclaim, from b (which frees dept's fair share) and from other (which does not). Pruning a
  // victim set tries it without each victim job in turn; a trial whose claimant pods would break
  // dept's fair share with all the remaining victims gone is not run
  // (VictimSearch::reclaimBoundsMayHold). Run once that way and once with the self-checks on,
  // which run such trials and assert that each fails: same evictions and pipelined pods.
  auto tree = [](const std::string& name, const std::string& parent, int quota) {
    return queue(name, std::to_string(quota), parent);
  };
  const bool checksWere = tessera::actions::selfChecks();
  std::mt19937 rng(5);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int withEvictions = 0;
  for (int c = 0; c < 200; ++c) {
    std::string nodes;
    const int nodeCount = 2 + pick(3);
    std::vector<int> free;
    for (int n = 0; n < nodeCount; ++n) nodes += node("n" + std::to_string(n), 4), free.push_back(4);
    std::string yaml = tree("dept", "", 2 + pick(6)) + tree("a", "dept", 1 + pick(4)) + tree("b", "dept", pick(3)) +
                       tree("other", "", 1 + pick(4));
    const char* holders[] = {"b", "other", "a"};
    for (int j = 0; j < 10; ++j) {  // running jobs of one to three pods, where they fit
      const std::string q = holders[pick(3)], name = "r" + std::to_string(j);
      const int pods = 1 + pick(3), gpus = 1 + pick(2);
      std::string job = pods > 1 ? group(name, q, 1 + pick(pods)) : "";
      int placed = 0;
      for (int i = 0; i < pods; ++i) {
        const int n = pick(nodeCount);
        if (free[static_cast<size_t>(n)] < gpus) continue;
        free[static_cast<size_t>(n)] -= gpus;
        job += pod(name + "-" + std::to_string(i), q, gpus, "n" + std::to_string(n), "train", pods > 1 ? name : "",
                   "2026-01-01T00:" + std::to_string(10 + j) + ":00Z");
        ++placed;
      }
      if (placed > 0) yaml += job;
    }
    for (int i = 0; i < pick(4); ++i) yaml += pod("wait" + std::to_string(i), "other", 1 + pick(2));  // other's demand
    for (int j = 0; j < 3; ++j) {  // claimants of a: gangs of two or three
      const std::string name = "claim" + std::to_string(j);
      const int pods = 2 + pick(2);
      yaml += group(name, "a", pods);
      for (int i = 0; i < pods; ++i) yaml += pod(name + "-" + std::to_string(i), "a", 1, "", "train", name);
    }
    auto decisions = [&](bool checks) { return decisionsWithSelfChecks("reclaim", checks, nodes, yaml); };
    const std::vector<std::string> skipped = decisions(false);
    const std::vector<std::string> run = decisions(true);
    INFO("case " << c << "\n" << nodes << yaml);
    REQUIRE(skipped == run);
    withEvictions += skipped.empty() ? 0 : 1;
  }
  tessera::actions::setSelfChecks(checksWere);
  CHECK(withEvictions > 30);
}

/// A full cluster for the reclaim tests below: `nodeCount` nodes of 4 GPUs, four queues (x and y
/// under a parent p in half of them), x, y and z running 1- and 2-GPU pods and gangs (whole or
/// elastic, across nodes), and `claimsFrom` + pick(`claimsSpread`) pending claimants of w (one in
/// five of z); a third of them gangs of two or three when `gangs`. Returns the objects, `nodes` the nodes.
std::string reclaimCluster(std::mt19937& rng, int nodeCount, int claimsFrom, int claimsSpread, bool gangs,
                           std::string& nodes) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string yaml;
  nodes.clear();
  std::vector<int> free;
  for (int n = 0; n < nodeCount; ++n) nodes += node("n" + std::to_string(n), 4), free.push_back(4);
  const char* queues[] = {"x", "y", "z", "w"};
  // Half the clusters put x and y under a parent p: a tree of two queues next to top-level ones.
  const bool nested = pick(2) == 0;
  if (nested) yaml += queue("p", std::to_string(2 + pick(2 * nodeCount + 1)));
  for (const char* q : queues)
    yaml += queue(q, std::to_string(1 + pick(3 * nodeCount / 2 + 1)), nested && q[0] < 'z' ? "p" : "");
  int job = 0;
  auto created = [&] { return "2026-01-01T" + std::to_string(10 + job / 60) + ":" + std::to_string(10 + job % 40) + ":00Z"; };
  for (int n = 0; n < nodeCount; ++n)  // every node full: single pods, and gangs spilling onto the next nodes
    while (free[static_cast<size_t>(n)] > 0) {
      const std::string q = queues[pick(3)], name = "r" + std::to_string(job);
      const int gpus = std::min(free[static_cast<size_t>(n)], 1 + pick(2));
      const int pods = pick(4) == 0 ? 2 + pick(2) : 1;
      std::string y = pods > 1 ? group(name, q, 1 + pick(pods)) : "";
      int placed = 0;
      for (int i = 0, at = n; i < pods && at < nodeCount; ++i) {
        while (at < nodeCount && free[static_cast<size_t>(at)] < gpus) ++at;
        if (at == nodeCount) break;
        free[static_cast<size_t>(at)] -= gpus;
        y += pod(name + "-" + std::to_string(i), q, gpus, "n" + std::to_string(at), "train", pods > 1 ? name : "", created());
        ++placed;
      }
      if (pods > 1 && placed < 2) y = pod(name + "-0", q, gpus, "n" + std::to_string(n), "train", "", created());
      yaml += y;
      ++job;
    }
  const int claims = claimsFrom + pick(claimsSpread);
  for (int i = 0; i < claims; ++i) {
    const std::string q = pick(5) == 0 ? "z" : "w", name = "claim" + std::to_string(i);
    const std::string at = "2026-01-02T00:" + std::to_string(10 + i) + ":00Z";
    if (gangs && pick(3) == 0) {
      const int pods = 2 + pick(2);
      yaml += group(name, q, pods);
      for (int k = 0; k < pods; ++k) yaml += pod(name + "-" + std::to_string(k), q, 1 + pick(2), "", "train", name, at);
    } else {
      yaml += pod(name, q, 1 + pick(2), "", "train", "", at);
    }
  }
  return yaml;
}

TEST_CASE("reclaim: the victim order a claimant sees is the order as it stands, after other claimants' commits",
          "[actions][victims]") {
  // Random full clusters (2 to 12 nodes of 4 GPUs) of four queues, x and y under a parent in half
  // of them: x, y and z run 1- and 2-GPU pods and gangs (whole or elastic, across nodes), w (and
  // sometimes z) has several pending claimants, many of one shape. Each claimant's commit moves
  // the queues' shares and with them the victim order, also on nodes it did not touch. A node's
  // order sorted for an earlier claimant is kept only at the same order fingerprint
  // (VictimSearch::victimsOn); a claimant whose ranking predates a commit walks the victim order
  // instead (walkCandidates: a top-level queue without children lazily, a tree from its built
  // sequence). With the self-checks on, every kept order is asserted sorted by the order now, the
  // walk asserted in victim order and its nodes asserted to be what ranking all nodes afresh
  // gives; the decisions must be the same with them off. (Keeping the first sort for the whole
  // action changed 2 of 1,200 such clusters' decisions; scenario
  // test/scenarios/victims/reclaim-order-after-a-commit.yaml is one.)
  const bool checksWere = tessera::actions::selfChecks();
  std::mt19937 rng(17);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int severalClaimants = 0;
  for (int c = 0; c < 300; ++c) {
    std::string nodes;
    const int nodeCount = 2 + pick(11);
    const std::string yaml = reclaimCluster(rng, nodeCount, 2, 3 + nodeCount, /*gangs=*/false, nodes);
    INFO("case " << c << "\n" << nodes << yaml);
    severalClaimants += placedSeveral(decisionsCheckedAlike("reclaim", nodes, yaml));  // aborts on an order out of date
  }
  tessera::actions::setSelfChecks(checksWere);
  CHECK(severalClaimants > 100);  // many cases commit for more than one claimant
}

TEST_CASE("reclaim: on clusters of 30 to 60 nodes, walks that stop early and kept rankings answer as fresh ones",
          "[actions][victims]") {
  // The clusters of the test above, larger (30 to 60 nodes of 4 GPUs), with 10 to 29 claimants of
  // which a third are gangs of two or three: a walk of the victim order stops once 8 sets end
  // before the next job (the small clusters above rarely have 8 nodes with a set), and a gang's
  // later pods rank afresh the nodes running a pod they may take. Self-checks on and off alike.
  const bool checksWere = tessera::actions::selfChecks();
  std::mt19937 rng(31);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int severalClaimants = 0;
  for (int c = 0; c < 30; ++c) {
    std::string nodes;
    const std::string yaml = reclaimCluster(rng, 30 + pick(31), 10, 20, /*gangs=*/true, nodes);
    INFO("case " << c << "\n" << nodes << yaml);
    severalClaimants += placedSeveral(decisionsCheckedAlike("reclaim", nodes, yaml));  // aborts on an order out of date
  }
  tessera::actions::setSelfChecks(checksWere);
  CHECK(severalClaimants > 10);  // many cases commit for more than one claimant
}

/// `count` nodes n0, n1... of 4 GPUs, node i in rack i % `racks`, into `nodes` (replaced), each
/// with its 4 GPUs in `free`; returns the Topology over racks and hosts.
std::string rackNodes(int count, int racks, std::string& nodes, std::vector<int>& free) {
  nodes.clear();
  free.assign(static_cast<size_t>(count), 4);
  for (int n = 0; n < count; ++n) {
    const std::string name = "n" + std::to_string(n);
    nodes += tessera::testing::nodeYaml(name, "64", "4",
                                        "  labels: {kubernetes.io/hostname: " + name + ", topology.example.com/rack: rack-" +
                                            std::to_string(n % racks) + "}\n") +
             "---\n";
  }
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Topology\nmetadata: {name: dc}\nspec: {levels: "
         "[{nodeLabel: topology.example.com/rack}, {nodeLabel: kubernetes.io/hostname}]}\n---\n";
}

/// A random full cluster of 6 to 20 nodes of 4 GPUs in 2 to 4 racks: x and y under a parent p, z
/// (whose jobs are protected by reclaimMinRuntime while at their minimum) and w; pending gangs of
/// w (and of x) preferring one rack. The nodes go to `nodes`; the rest is returned.
std::string rackReclaimCluster(std::mt19937& rng, std::string& nodes) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int nodeCount = 6 + pick(15), racks = 2 + pick(3);
  std::vector<int> free;
  std::string yaml = rackNodes(nodeCount, racks, nodes, free);
  yaml += queue("p", std::to_string(2 + pick(2 * nodeCount + 1))) + queue("x", std::to_string(1 + pick(nodeCount)), "p") +
          queue("y", std::to_string(1 + pick(nodeCount)), "p");
  std::string z = queue("z", std::to_string(1 + pick(nodeCount)));
  z.replace(z.find("spec:\n"), 6, "spec:\n  reclaimMinRuntime: 48h\n");
  yaml += z + queue("w", std::to_string(2 + pick(2 * nodeCount)));
  const char* holders[] = {"x", "y", "z", "z"};
  int job = 0;
  for (int n = 0; n < nodeCount; ++n)  // every node full: single pods, and elastic gangs across nodes
    while (free[static_cast<size_t>(n)] > 0) {
      const std::string q = holders[pick(4)], name = "r" + std::to_string(job);
      const std::string created = "2025-12-30T" + std::to_string(10 + job / 50) + ":" + std::to_string(10 + job % 40) + ":00Z";
      const int pods = pick(2) == 0 ? 2 + pick(3) : 1;
      std::string y = pods > 1 ? group(name, q, 1 + pick(pods - 1)) : "";
      int placed = 0;
      for (int i = 0, at = n; i < pods; ++i) {
        while (at < nodeCount && free[static_cast<size_t>(at)] < 1) ++at;
        if (at >= nodeCount) break;
        free[static_cast<size_t>(at)] -= 1;
        y += pod(name + "-" + std::to_string(i), q, 1, "n" + std::to_string(at), "train", pods > 1 ? name : "", created);
        at += pick(3);
        ++placed;
      }
      if (pods > 1 && placed < 2) y = pod(name + "-0", q, 1, "n" + std::to_string(n), "train", "", created);
      yaml += y;
      ++job;
    }
  const int claims = 2 + pick(5);
  for (int i = 0; i < claims; ++i) {
    const std::string name = "claim" + std::to_string(i), at = "2026-01-01T00:0" + std::to_string(i % 10) + ":00Z";
    const std::string q = pick(3) == 0 ? "x" : "w";  // (x: its side is x below p, then p at the top)
    const int pods = 1 + pick(3);
    yaml += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
            ", namespace: t}\nspec: {minMember: " + std::to_string(pods) + ", queue: " + q +
            ", priorityClassName: train, topologyConstraint: {topology: dc, preferredTopologyLevel: "
            "topology.example.com/rack}}\n---\n";
    for (int k = 0; k < pods; ++k) yaml += pod(name + "-" + std::to_string(k), q, 1, "", "train", name, at);
  }
  return yaml;
}

TEST_CASE("reclaim: a claimant class's sized rack domains kept across commits hold what its victims hold now",
          "[actions][victims]") {
  // Random rack clusters (rackReclaimCluster). Before searching a rack the search sizes it
  // (VictimSearch::mayHold) by what a claimant class's victims hold there; those per-node rooms
  // are kept across commits while the class's bound key (Session::reclaimBoundKey: the queue rules
  // between the claimant's side and each victim side) stands, the nodes of the jobs a commit
  // changed evaluated again (an elastic job of z that gave its surplus pods is protected from then
  // on, on every node). With the self-checks on, every kept room is asserted equal to what the
  // class's victims hold now; the decisions must be the same with them off.
  const bool checksWere = tessera::actions::selfChecks();
  std::mt19937 rng(37);
  int severalClaimants = 0;
  for (int c = 0; c < 120; ++c) {
    std::string nodes;
    const std::string yaml = rackReclaimCluster(rng, nodes);
    INFO("case " << c << "\n" << nodes << yaml);
    severalClaimants += placedSeveral(decisionsCheckedAlike("reclaim", nodes, yaml));  // aborts on a room out of date
  }
  tessera::actions::setSelfChecks(checksWere);
  CHECK(severalClaimants > 40);  // many cases commit for more than one claimant
}

/// A random full cluster of 6 to 16 nodes of 4 GPUs in 2 to 4 racks for preempt: queues a (in
/// half the cases with a preemptMinRuntime that protects its jobs at their minimum) and b, running
/// single pods and elastic gangs at priorities 50 and 75 (some with pods still pending: claimants
/// whose own pods run in the racks), and pending gangs of both queues at 75 and 100 preferring one
/// rack. The nodes go to `nodes`.
std::string rackPreemptCluster(std::mt19937& rng, std::string& nodes) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int nodeCount = 6 + pick(11), racks = 2 + pick(3);
  std::vector<int> free;
  std::string yaml = rackNodes(nodeCount, racks, nodes, free) +
                     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: build}\nvalue: 100\n---\n";
  std::string a = queue("a", std::to_string(nodeCount * 2));
  if (pick(2)) a.replace(a.find("spec:\n"), 6, "spec:\n  preemptMinRuntime: 48h\n");  // (a job at its minimum stays)
  yaml += a + queue("b", std::to_string(nodeCount * 2));
  const char* classes[] = {"train", "build-preemptible"};
  int job = 0;
  for (int n = 0; n < nodeCount; ++n)
    while (free[static_cast<size_t>(n)] > 0) {
      const std::string q = pick(2) ? "a" : "b", name = "r" + std::to_string(job), cls = classes[pick(2)];
      const std::string created = "2025-12-30T" + std::to_string(10 + job / 50) + ":" + std::to_string(10 + job % 40) + ":00Z";
      const int pods = pick(2) == 0 ? 2 + pick(3) : 1;
      const bool pendingToo = pods > 1 && pick(3) == 0;  // elastic, asking for more
      std::string y;
      if (pods > 1)
        y = "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
            ", namespace: t}\nspec: {minMember: 1, queue: " + q + ", priorityClassName: " + cls +
            ", topologyConstraint: {topology: dc, preferredTopologyLevel: topology.example.com/rack}}\n---\n";
      int placed = 0;
      for (int i = 0, at = n; i < pods; ++i) {
        while (at < nodeCount && free[static_cast<size_t>(at)] < 1) ++at;
        if (at >= nodeCount) break;
        free[static_cast<size_t>(at)] -= 1;
        y += pod(name + "-" + std::to_string(i), q, 1, "n" + std::to_string(at), cls, pods > 1 ? name : "", created);
        at += pick(3);
        ++placed;
      }
      if (pods > 1 && placed < 1) y.clear();
      if (pods > 1 && pendingToo)
        for (int i = 0; i < 1 + pick(2); ++i) y += pod(name + "-p" + std::to_string(i), q, 1, "", cls, name, created);
      yaml += y;
      ++job;
    }
  const int claims = 2 + pick(4);
  for (int i = 0; i < claims; ++i) {
    const std::string name = "claim" + std::to_string(i), at = "2026-01-01T00:0" + std::to_string(i % 10) + ":00Z";
    const std::string q = pick(2) ? "a" : "b", cls = pick(2) ? "build" : "build-preemptible";
    const int pods = 1 + pick(3);
    yaml += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
            ", namespace: t}\nspec: {minMember: " + std::to_string(pods) + ", queue: " + q + ", priorityClassName: " + cls +
            ", topologyConstraint: {topology: dc, preferredTopologyLevel: topology.example.com/rack}}\n---\n";
    for (int k = 0; k < pods; ++k) yaml += pod(name + "-" + std::to_string(k), q, 1, "", cls, name, at);
  }
  return yaml;
}

TEST_CASE("preempt: rack domains sized per queue and priority hold what each claimant may take and never its own pods",
          "[actions][victims]") {
  // Random rack clusters (rackPreemptCluster). Preempt sizes a rack (VictimSearch::mayHold) by what
  // each node's pods hold per queue and priority where the claimant's pair part lets them go
  // (Session::preemptablePair), read once per node. With the self-checks on, every node's room is
  // asserted equal to what the claimant's victims hold there pod by pod; the decisions must be the
  // same with them off (the rooms are kept across commits, the nodes of the jobs a commit changed
  // evaluated again: an elastic job of a that gave its surplus pods is protected from then on).
  // Also with the priority plugin off: then the claimant's own queue and priority are victims too,
  // but never its own pods (elastic claimants run some in the racks).
  const bool checksWere = tessera::actions::selfChecks();
  for (const std::string plugins : {"", "plugins: {priority: {enabled: false}}\n"}) {
    std::mt19937 rng(53);
    int evictingCases = 0;
    for (int c = 0; c < 80; ++c) {
      std::string nodes;
      const std::string yaml = rackPreemptCluster(rng, nodes);
      INFO("case " << c << (plugins.empty() ? "" : ", priority off") << "\n" << nodes << yaml);
      auto decisions = [&](bool checks) {
        tessera::actions::setSelfChecks(checks);
        TestCluster cluster;
        const Config cfg = config("actions: [preempt]\n" + plugins);
        cluster.create(nodes + kClasses + yaml);
        cluster.start();
        Session ssn(cluster.snapshot(), cfg, cluster.clock);
        ssn.open();
        ssn.runActions();
        const SessionResult r = ssn.close();
        std::vector<std::string> out = evicted(r);
        for (const auto& p : r.pipelined) out.push_back(p.podKey + "->" + p.node);
        return out;
      };
      const std::vector<std::string> checked = decisions(true);  // aborts on a room not the claimant's
      REQUIRE(decisions(false) == checked);
      evictingCases += checked.empty() ? 0 : 1;
    }
    CHECK(evictingCases > 20);
  }
  tessera::actions::setSelfChecks(checksWere);
}

TEST_CASE("reclaim: the victim order a search holds is the one it began with whichever trial compares first",
          "[actions][victims]") {
  // Rack clusters (rackReclaimCluster) on which the self-checks failed or the decisions moved
  // with them, found among 1,000 drawn per seed (seeds 41 to 49 pass whole):
  //  - seed 41, cases 100 and 141: a top-level tree stale when the hold began was built at its
  //    first comparison, inside a trial; the trial run again found other victims
  //    (Session::addVictimOrderKeepFn);
  //  - seed 41, case 557: a job's surplus pods were kept by how many of its pods ran, not which (a
  //    trial that took one pod, then one that took another): decisions moved with the self-checks;
  //  - seed 43, case 258; seed 46, case 129: a domain's pruned set whose search ended in its retry
  //    without its first victim (which keeps no operations): the replay's self-check asked for them.
  // Self-checks on and off alike.
  const bool checksWere = tessera::actions::selfChecks();
  const std::vector<std::pair<unsigned, std::vector<int>>> found{{41, {100, 141, 557}}, {43, {258}}, {46, {129}}};
  for (const auto& [seed, cases] : found) {
    std::mt19937 rng(seed);
    for (int c = 0; c <= cases.back(); ++c) {
      std::string nodes;
      const std::string yaml = rackReclaimCluster(rng, nodes);
      if (std::find(cases.begin(), cases.end(), c) == cases.end()) continue;
      INFO("seed " << seed << " case " << c << "\n" << nodes << yaml);
      decisionsCheckedAlike("reclaim", nodes, yaml);  // aborts on a replay that finds other operations
    }
  }
  tessera::actions::setSelfChecks(checksWere);
}

/// A full cluster of one queue q for the preempt tests below: `nodeCount` nodes of 4 GPUs running
/// train pods and elastic gangs across nodes, and `claimsFrom` + pick(`claimsSpread`) build
/// claimants of 1 and 2 GPUs. `varied`: victims created over three hours, one job in four of the
/// lower class low, single victims of 1 or 2 GPUs, and a third of the claimants gangs of two or
/// three. `head`: the priority classes and the queue. Returns the objects, `nodes` the nodes.
std::string preemptCluster(std::mt19937& rng, const std::string& head, int nodeCount, int claimsFrom, int claimsSpread,
                           bool varied, std::string& nodes) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string yaml = head;
  nodes.clear();
  std::vector<int> free;
  for (int n = 0; n < nodeCount; ++n) nodes += node("n" + std::to_string(n), 4), free.push_back(4);
  int job = 0;
  for (int n = 0; n < nodeCount; ++n)
    while (free[static_cast<size_t>(n)] > 0) {
      const std::string name = "r" + std::to_string(job);
      const std::string hour = varied ? "1" + std::to_string(job % 3) : "10";
      const std::string created = "2026-01-01T" + hour + ":" + std::to_string(10 + job % 40) + ":00Z";
      const std::string cls = varied && pick(4) == 0 ? "low" : "train";
      const int pods = pick(2) == 0 ? 2 + pick(3) : 1;
      std::string y = pods > 1 ? group(name, "q", 1 + pick(pods - 1)) : "";
      for (int i = 0, at = n; i < pods; ++i) {
        while (at < nodeCount && free[static_cast<size_t>(at)] < 1) ++at;
        if (at == nodeCount) break;
        const int gpus = varied ? std::min(free[static_cast<size_t>(at)], pods > 1 ? 1 : 1 + pick(2)) : 1;
        free[static_cast<size_t>(at)] -= gpus;
        y += pod(name + "-" + std::to_string(i), "q", gpus, "n" + std::to_string(at), cls, pods > 1 ? name : "", created);
        at += pick(2);
      }
      yaml += y;
      ++job;
    }
  const int claims = claimsFrom + pick(claimsSpread);
  for (int i = 0; i < claims; ++i) {
    const std::string name = "claim" + std::to_string(i), created = "2026-01-02T00:" + std::to_string(10 + i) + ":00Z";
    if (varied && pick(3) == 0) {  // a gang: its later pods search with its first pods' victims out
      const int pods = 2 + pick(2);
      yaml += "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
              ", namespace: t}\nspec: {minMember: " + std::to_string(pods) + ", queue: q, priorityClassName: build}\n---\n";
      for (int k = 0; k < pods; ++k) yaml += pod(name + "-" + std::to_string(k), "q", 1 + pick(2), "", "build", name, created);
    } else {
      yaml += pod(name, "q", 1 + pick(2), "", "build", "", created);
    }
  }
  return yaml;
}

TEST_CASE("preempt: a node ranking kept across claimants answers as a fresh one, after other claimants' commits",
          "[actions][victims]") {
  // Random full clusters (2 to 10 nodes of 4 GPUs) of one queue: train pods and elastic gangs
  // across nodes, and build claimants of 1 and 2 GPUs. Inside a queue two pods compare by their
  // jobs alone, so a commit moves the order only on nodes running pods of the jobs it changed (a
  // gang that gave a surplus pod goes whole next); preempt's kept rankings evaluate those nodes
  // again (VictimSearch::movedLog_). With the self-checks on, every ranking's answer is asserted
  // equal to a fresh ranking of the queue's nodes; the decisions must be the same with them off.
  const std::string build = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: build}\nvalue: 100\n---\n";
  const bool checksWere = tessera::actions::selfChecks();
  std::mt19937 rng(23);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int severalClaimants = 0;
  for (int c = 0; c < 200; ++c) {
    std::string nodes;
    const std::string yaml = preemptCluster(rng, build + queue("q", "64"), 2 + pick(9), 3, 6, /*varied=*/false, nodes);
    INFO("case " << c << "\n" << nodes << yaml);
    severalClaimants += placedSeveral(decisionsCheckedAlike("preempt", nodes, yaml));  // aborts on a ranking out of date
  }
  tessera::actions::setSelfChecks(checksWere);
  CHECK(severalClaimants > 100);
}

TEST_CASE("preempt: a ranking from a walk of the queue that stopped early answers as a fresh one",
          "[actions][victims]") {
  // Random full clusters of one queue, large enough (40 to 70 nodes of 4 GPUs) that a walk of the
  // queue's victim order stops once 32 sets end before the next job (VictimSearch::walkOwnQueue):
  // the ranking then holds the nodes it reached, answers while its 8th best set ends before the job
  // it stopped at, and walks on otherwise, also for a gang claimant's later pods with its first
  // pod's victims out. With the self-checks on, every answer is asserted equal to a fresh ranking of
  // the queue's nodes and the walk asserted in victim order; the decisions must be the same with
  // them off.
  const std::string classes = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: build}\nvalue: 100\n---\n"
                              "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n---\n";
  const bool checksWere = tessera::actions::selfChecks();
  std::mt19937 rng(29);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int severalClaimants = 0;
  for (int c = 0; c < 30; ++c) {
    std::string nodes;
    const std::string yaml = preemptCluster(rng, classes + queue("q", "512"), 40 + pick(31), 10, 25, /*varied=*/true, nodes);
    INFO("case " << c << "\n" << nodes << yaml);
    severalClaimants += placedSeveral(decisionsCheckedAlike("preempt", nodes, yaml));  // aborts on a wrong answer
  }
  tessera::actions::setSelfChecks(checksWere);
  CHECK(severalClaimants > 20);
}

}  // namespace
