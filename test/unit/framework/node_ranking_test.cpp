// NodeRanking on its own: a heap of node evaluations kept current against a NodeChangeLog. The
// session's findPlacement and the victim search rely on exactly these rules: only nodes logged
// since the last use are re-evaluated (once each, in the order of their first change), an entry whose node changed
// after it was evaluated never comes out, and the best entries handed out stay ranked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "tessera/framework/node_ranking.h"

namespace {

using tessera::framework::NodeChangeLog;
using tessera::framework::NodeRanking;

struct Entry {
  int64_t score = 0;
  int node = -1;
  uint32_t version = 0;
};

/// Higher score first, then the lower node index.
struct Before {
  bool operator()(const Entry& a, const Entry& b) const {
    if (a.score != b.score) return a.score > b.score;
    return a.node < b.node;
  }
};

/// Scores per node (absent: the node does not qualify), evaluated against a change log.
struct Nodes {
  NodeChangeLog log;
  std::map<int, int64_t> score;
  std::vector<int> evaluated;  ///< nodes evaluated, in order

  explicit Nodes(size_t n) { log.reset(n); }
  std::optional<Entry> evaluate(int node) {
    evaluated.push_back(node);
    auto it = score.find(node);
    if (it == score.end()) return std::nullopt;
    return Entry{it->second, node, log.version(node)};
  }
  /// Changes a node's score (nullopt: no longer qualifies) and logs the change.
  void change(int node, std::optional<int64_t> s) {
    if (s) score[node] = *s;
    else score.erase(node);
    log.touch(node);
  }
  std::vector<Entry> all(size_t n) {
    std::vector<Entry> out;
    for (int i = 0; i < static_cast<int>(n); ++i)
      if (auto e = evaluate(i)) out.push_back(*e);
    return out;
  }
};

std::vector<int> nodesOf(const std::vector<Entry>& entries) {
  std::vector<int> out;
  for (const Entry& e : entries) out.push_back(e.node);
  return out;
}

using V = std::vector<int>;

}  // namespace

TEST_CASE("node change log: versions and the log of changes", "[node_ranking]") {
  NodeChangeLog log;
  log.reset(3);
  CHECK(log.size() == 0);
  CHECK(log.version(1) == 0);
  log.touch(1);
  log.touch(2);
  log.touch(1);
  CHECK(log.version(0) == 0);
  CHECK(log.version(1) == 2);
  CHECK(log.version(2) == 1);
  CHECK(log.changes() == V{1, 2, 1});
  CHECK(log.size() == 3);
  log.reset(2);
  CHECK(log.size() == 0);
  CHECK(log.version(1) == 0);
}

TEST_CASE("node ranking: best first, ties by the caller's order", "[node_ranking]") {
  Nodes n(5);
  n.score = {{0, 10}, {1, 30}, {2, 30}, {4, 20}};  // node 3 does not qualify
  NodeRanking<Entry, Before> r;
  r.assign(n.all(5), n.log);
  REQUIRE(r.top(n.log));
  CHECK(r.top(n.log)->node == 1);  // 30, lower index than node 2
  CHECK(nodesOf(r.best(10, n.log)) == V{1, 2, 4, 0});
  CHECK(nodesOf(r.best(2, n.log)) == V{1, 2});
  // Handed-out entries stay ranked.
  CHECK(nodesOf(r.best(10, n.log)) == V{1, 2, 4, 0});
  CHECK(r.size() == 4);
}

TEST_CASE("node ranking: an empty ranking has no top", "[node_ranking]") {
  Nodes n(2);
  NodeRanking<Entry, Before> r;
  r.assign(n.all(2), n.log);
  CHECK(r.top(n.log) == nullptr);
  CHECK(r.best(3, n.log).empty());
  r.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(r.top(n.log) == nullptr);
}

TEST_CASE("node ranking: refresh re-evaluates only the nodes changed since, once each", "[node_ranking]") {
  Nodes n(6);
  n.score = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}};
  n.change(5, 6);  // logged before the ranking starts: already counted in its evaluation
  NodeRanking<Entry, Before> r;
  r.assign(n.all(6), n.log);
  n.evaluated.clear();

  r.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(n.evaluated.empty());  // nothing changed since

  n.change(2, 100);
  n.change(0, 50);
  n.change(2, 101);
  r.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(n.evaluated == V{2, 0});  // in the order of their first change, a node once
  CHECK(nodesOf(r.best(3, n.log)) == V{2, 0, 5});

  n.evaluated.clear();
  r.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(n.evaluated.empty());
}

TEST_CASE("node ranking: an entry whose node changed since never comes out", "[node_ranking]") {
  Nodes n(4);
  n.score = {{0, 40}, {1, 30}, {2, 20}, {3, 10}};
  NodeRanking<Entry, Before> r;
  r.assign(n.all(4), n.log);

  SECTION("the node no longer qualifies") {
    n.change(0, std::nullopt);
    r.refresh(n.log, [&](int node) { return n.evaluate(node); });
    REQUIRE(r.top(n.log));
    CHECK(r.top(n.log)->node == 1);
    CHECK(nodesOf(r.best(4, n.log)) == V{1, 2, 3});
  }
  SECTION("the node ranks lower now") {
    n.change(0, 5);
    r.refresh(n.log, [&](int node) { return n.evaluate(node); });
    CHECK(nodesOf(r.best(4, n.log)) == V{1, 2, 3, 0});
    CHECK(r.best(4, n.log).back().score == 5);
  }
  SECTION("changed but not yet refreshed: the stale entry is dropped, the node is missing") {
    n.change(1, 99);
    REQUIRE(r.top(n.log));
    CHECK(r.top(n.log)->node == 0);
    CHECK(nodesOf(r.best(4, n.log)) == V{0, 2, 3});
    r.refresh(n.log, [&](int node) { return n.evaluate(node); });
    CHECK(nodesOf(r.best(4, n.log)) == V{1, 0, 2, 3});
  }
  SECTION("top drops stale entries on the way") {
    n.change(0, std::nullopt);
    n.change(1, std::nullopt);
    const size_t before = r.size();
    REQUIRE(r.top(n.log));
    CHECK(r.top(n.log)->node == 2);
    CHECK(r.size() == before - 2);
  }
}

TEST_CASE("node ranking: a node changed twice gives one candidate", "[node_ranking]") {
  Nodes n(3);
  n.score = {{0, 1}, {1, 2}, {2, 3}};
  NodeRanking<Entry, Before> r;
  r.assign(n.all(3), n.log);
  n.change(0, 10);
  n.change(0, 10);  // two entries of node 0 at its current version
  r.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(nodesOf(r.best(3, n.log)) == V{0, 2, 1});
  CHECK(nodesOf(r.best(3, n.log)) == V{0, 2, 1});
}

TEST_CASE("node ranking: rankings started at different times share one log", "[node_ranking]") {
  Nodes n(3);
  n.score = {{0, 1}, {1, 2}, {2, 3}};
  NodeRanking<Entry, Before> early;
  early.assign(n.all(3), n.log);
  n.change(0, 9);
  NodeRanking<Entry, Before> late;
  late.assign(n.all(3), n.log);  // already sees node 0 at 9
  n.change(1, 8);
  n.evaluated.clear();
  early.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(n.evaluated == V{0, 1});
  n.evaluated.clear();
  late.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(n.evaluated == V{1});
  CHECK(nodesOf(early.best(3, n.log)) == nodesOf(late.best(3, n.log)));
  CHECK(nodesOf(late.best(3, n.log)) == V{0, 1, 2});
}

TEST_CASE("node ranking: reevaluate ranks again nodes whose order moved without a change", "[node_ranking]") {
  Nodes n(5);
  n.score = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};  // node 4 does not qualify
  NodeRanking<Entry, Before> r;
  r.assign(n.all(5), n.log);
  n.change(0, 7);  // a logged change: folded in too
  // What the caller's order depends on moved on nodes 1, 3 and 4 (not logged).
  n.score[1] = 9;
  n.score.erase(3);
  n.score[4] = 5;
  n.evaluated.clear();
  r.reevaluate(V{1, 3, 4}, n.log, [&](int node) { return n.evaluate(node); });
  CHECK(n.evaluated == V{0, 1, 3, 4});  // the logged change, then the nodes named, once each
  CHECK(r.size() == 4);                 // the old entries of 0, 1 and 3 are gone
  CHECK(nodesOf(r.best(5, n.log)) == V{1, 0, 4, 2});
  n.evaluated.clear();
  r.refresh(n.log, [&](int node) { return n.evaluate(node); });
  CHECK(n.evaluated.empty());
}

TEST_CASE("node ranking: logged changes and reevaluated nodes give the order from scratch", "[node_ranking]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const size_t count = 1 + rng() % 12;
    Nodes n(count);
    for (int i = 0; i < static_cast<int>(count); ++i)
      if (rng() % 4) n.score[i] = rng() % 6;
    NodeRanking<Entry, Before> r;
    r.assign(n.all(count), n.log);
    for (int step = 0; step < 20; ++step) {
      const int node = static_cast<int>(rng() % count);
      const std::optional<int64_t> s = rng() % 4 ? std::optional<int64_t>(rng() % 6) : std::nullopt;
      if (rng() % 2) {
        n.change(node, s);  // logged: refresh or reevaluate folds it in
      } else {              // moved without a change: only reevaluate of that node sees it
        if (s) n.score[node] = *s;
        else n.score.erase(node);
        r.reevaluate(V{node}, n.log, [&](int x) { return n.evaluate(x); });
      }
      if (rng() % 3 == 0) r.refresh(n.log, [&](int x) { return n.evaluate(x); });
      r.refresh(n.log, [&](int x) { return n.evaluate(x); });
      std::vector<Entry> fresh = n.all(count);
      std::sort(fresh.begin(), fresh.end(), Before{});
      REQUIRE(nodesOf(r.best(count, n.log)) == nodesOf(fresh));
    }
  }
}

TEST_CASE("node change log: each node changed since once, a visit inside a visit skips none", "[node_ranking]") {
  NodeChangeLog log;
  log.reset(5);
  for (int n : {1, 2, 1, 3, 2, 4}) log.touch(n);
  V seen;
  log.forEachChangedSince(1, [&](int n) { seen.push_back(n); });
  CHECK(seen == V{2, 1, 3, 4});  // from position 1: in the order of their first change there
  V outer, inner;
  log.forEachChangedSince(0, [&](int n) {
    outer.push_back(n);
    if (n == 1 && inner.empty()) log.forEachChangedSince(0, [&](int m) { inner.push_back(m); });
  });
  CHECK(inner == V{1, 2, 3, 4});
  // The inner visit's marks hide the outer's: it may see a node again, but misses none.
  std::sort(outer.begin(), outer.end());
  outer.erase(std::unique(outer.begin(), outer.end()), outer.end());
  CHECK(outer == V{1, 2, 3, 4});
}
