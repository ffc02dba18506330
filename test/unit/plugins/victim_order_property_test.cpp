// Property of the victim order (issue 15, item 2; the proportion plugin's victim sequence) over
// random queue trees: Session::victimLess is a strict total order on the running pods (irreflexive,
// asymmetric, transitive over every triple) whatever the tree, shares, gangs and surplus pods; and
// while the order is held (one claimant's search, Session::holdVictimOrder), evicting a job does
// not change how the other jobs' pods compare. The comparison this replaced (each victim with only its own chunk
// gone, compared where the queue paths diverge) broke transitivity on such trees: x < y < z < x.
// A failure prints the seed and the cluster. TESSERA_VICTIM_ORDER_CASES sets the count (default
// 400; 60 under a sanitizer).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_plugins.h"
#include "support/splitmix.h"
#include "support/test_cluster.h"
#include "tessera/framework/args.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"
#include "tessera/plugins/factories.h"

namespace {

using tessera::framework::Session;
using tessera::framework::SessionTask;
using tessera::framework::TaskState;

using Rng = tessera::testing::SplitMix64;

using tessera::testing::makePlugin;


std::string queueYaml(const std::string& name, const std::string& parent, int quota, int weight, int created) {
  std::ostringstream y;
  y << "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: " << name
    << ", creationTimestamp: \"2025-12-01T00:00:" << (created < 10 ? "0" : "") << created << "Z\"}\nspec:\n";
  if (!parent.empty()) y << "  parentQueue: " << parent << "\n";
  y << "  resources:\n    gpu: {quota: \"" << quota << "\", limit: \"-1\", overQuotaWeight: \"" << weight
    << "\"}\n    cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
    << "    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";
  return y.str();
}

/// A random cluster: one or two departments of one to three teams (or a team at the top level),
/// 16 GPUs on two nodes, running single pods and gangs (some elastic: pods above minMember),
/// two priorities, and pending pods so that queues ask for more than they hold.
std::string randomCluster(Rng& rng) {
  std::ostringstream y;
  y << "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 50\n---\n"
    << "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 100\n---\n";
  std::vector<std::string> leaves;
  int created = 0;
  const int depts = 1 + rng.below(2);
  for (int d = 0; d < depts; ++d) {
    const std::string dept = std::string("dept") + std::to_string(d);
    y << queueYaml(dept, "", rng.below(9), 1 + rng.below(3), created++);
    const int teams = 1 + rng.below(3);
    for (int t = 0; t < teams; ++t) {
      leaves.push_back(dept + "-team" + std::to_string(t));
      y << queueYaml(leaves.back(), dept, rng.below(5), 1 + rng.below(3), created++);
    }
  }
  if (rng.below(2)) {
    leaves.push_back("solo");
    y << queueYaml("solo", "", rng.below(5), 1 + rng.below(3), created++);
  }
  int used[2] = {0, 0};
  auto podYaml = [&](const std::string& name, const std::string& q, int gpus, const std::string& cls,
                     const std::string& group, bool run, int minute) {
    std::string node;
    if (run) {
      const int n = used[0] + gpus <= 8 ? 0 : (used[1] + gpus <= 8 ? 1 : -1);
      if (n < 0) run = false;
      else used[n] += gpus, node = std::string("n") + std::to_string(n + 1);
    }
    std::ostringstream when;
    when << "2025-12-31T0" << minute / 60 << ":" << (minute % 60 < 10 ? "0" : "") << minute % 60 << ":00Z";
    const std::string ts = when.str();
    y << "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " << name << "\n  namespace: t\n  creationTimestamp: \"" << ts
      << "\"\n  labels: {tessera.dev/queue: " << q << "}\n";
    if (!group.empty()) y << "  annotations: {pod-group-name: " << group << "}\n";
    y << "spec:\n  schedulerName: tessera\n  priorityClassName: " << cls << "\n";
    if (run) y << "  nodeName: " << node << "\n";
    y << "  containers: [{name: c, image: busybox, resources: {requests: {cpu: \"1\", nvidia.com/gpu: \"" << gpus
      << "\"}, limits: {nvidia.com/gpu: \"" << gpus << "\"}}}]\n";
    if (run) y << "status: {phase: Running, startTime: \"" << ts << "\"}\n";
    y << "---\n";
  };
  const int jobs = 3 + rng.below(5);
  for (int j = 0; j < jobs; ++j) {
    const std::string q = leaves[size_t(rng.below(int(leaves.size())))];
    const std::string cls = rng.below(2) ? "high" : "low";
    const int minute = rng.below(500);
    const std::string name = std::string("j") + std::to_string(j);
    if (rng.below(2)) {
      podYaml(name, q, 1 + rng.below(2), cls, "", true, minute);
      continue;
    }
    const int pods = 2 + rng.below(2), minMember = 1 + rng.below(pods);
    y << "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " << name
      << ", namespace: t, creationTimestamp: \"2025-12-31T00:00:00Z\"}\nspec: {minMember: " << minMember
      << ", queue: " << q << ", priorityClassName: " << cls << "}\n---\n";
    for (int p = 0; p < pods; ++p) podYaml(name + "-" + std::to_string(p), q, 1, cls, name, true, minute + p);
  }
  for (int p = 0; p < 3; ++p)  // pending work: queues ask for more than they hold
    podYaml(std::string("wait") + std::to_string(p), leaves[size_t(rng.below(int(leaves.size())))], 1 + rng.below(4), "low", "",
            false, 600);
  return y.str();
}

bool runningTask(const SessionTask& t) { return t.state == TaskState::Running || t.state == TaskState::Bound; }

/// Cases per property: `full`, or `sanitized` under a sanitizer; TESSERA_VICTIM_ORDER_CASES overrides.
int caseCount(int full, int sanitized) {
#if defined(__SANITIZE_ADDRESS__)
  int cases = sanitized;
#else
  int cases = full;
  (void)sanitized;
#endif
  if (const char* n = std::getenv("TESSERA_VICTIM_ORDER_CASES")) cases = std::atoi(n);
  return cases;
}

/// Two nodes of 8 GPUs and `yaml` (randomCluster), started.
void startCluster(tessera::testing::TestCluster& c, const std::string& yaml) {
  c.create(tessera::testing::nodeYaml("n1", "64", "8") + "---\n" + tessera::testing::nodeYaml("n2", "64", "8"));
  c.create(yaml);
  c.start();
}

/// The plugins the victim order depends on.
auto victimOrderConfig() {
  return tessera::testing::configWith(
      {makePlugin("priority", tessera::plugins::makePriority), makePlugin("proportion", tessera::plugins::makeProportion)});
}

}  // namespace

TEST_CASE("victim order property: a strict total order on random queue trees, held while a search evicts",
          "[proportion][victims][property]") {
  const int cases = caseCount(400, 60);
  for (int seed = 1; seed <= cases; ++seed) {
    Rng rng{uint64_t(seed)};
    const std::string yaml = randomCluster(rng);
    INFO("seed " << seed << "\n" << yaml);
    tessera::testing::TestCluster c;
    startCluster(c, yaml);
    auto cfg = victimOrderConfig();
    Session ssn(c.snapshot(), cfg, c.clock);
    ssn.open();
    std::vector<SessionTask*> pods;
    for (auto& j : ssn.jobs())
      for (auto& t : j.tasks)
        if (runningTask(t)) pods.push_back(&t);
    auto less = [&](const SessionTask* a, const SessionTask* b) { return ssn.victimLess(*a, *b); };
    auto checkOrder = [&](const std::vector<SessionTask*>& v) {
      for (const SessionTask* a : v) {
        REQUIRE_FALSE(less(a, a));
        for (const SessionTask* b : v) {
          if (a == b) continue;
          INFO(a->info->key << " vs " << b->info->key);
          REQUIRE(less(a, b) != less(b, a));
          if (!less(a, b)) continue;
          for (const SessionTask* x : v)
            if (less(b, x)) {
              INFO("then " << x->info->key);
              REQUIRE(less(a, x));
            }
        }
      }
    };
    checkOrder(pods);
    // Held: a search's evictions leave the order of the pods as it was when the hold began.
    if (pods.size() < 3) continue;
    std::vector<std::vector<bool>> before(pods.size(), std::vector<bool>(pods.size()));
    tessera::framework::HeldVictimOrder held(ssn);
    for (size_t a = 0; a < pods.size(); ++a)
      for (size_t b = 0; b < pods.size(); ++b) before[a][b] = less(pods[a], pods[b]);
    // A search takes a job whole (or its surplus pods one by one): evict one job's running pods;
    // the other jobs' pods compare as before (a job's own pods may reorder as it shrinks).
    tessera::framework::Statement stmt(ssn);
    const int goneJob = pods[size_t(rng.below(int(pods.size())))]->job;
    for (SessionTask* t : pods)
      if (t->job == goneJob) stmt.evict(*t, "property test");
    for (size_t a = 0; a < pods.size(); ++a)
      for (size_t b = 0; b < pods.size(); ++b) {
        if (pods[a]->job == goneJob || pods[b]->job == goneJob) continue;
        INFO("held, after evicting job " << ssn.jobs()[goneJob].info->key << ": " << pods[a]->info->key << " vs "
                                         << pods[b]->info->key);
        REQUIRE(less(pods[a], pods[b]) == before[a][b]);
      }
    stmt.discard();
  }
}

namespace {

/// One operation of a search, by job and task index: evict a running pod, reserve an evicted one's
/// way back on node 0 (consolidation), or pipeline a pending pod onto node 0.
struct Op {
  enum Kind { Evict, Reserve, Pipeline } kind;
  int job, task;
};

void apply(Session& ssn, tessera::framework::Statement& stmt, const std::vector<Op>& ops) {
  for (const Op& op : ops) {
    SessionTask& t = ssn.task(op.job, op.task);
    if (op.kind == Op::Evict) stmt.evict(t, "property test");
    else if (op.kind == Op::Reserve) stmt.reserve(t, 0);
    else stmt.pipeline(t, 0);
  }
}

/// victimLess between every two pods running now (by job and task index: the same in two sessions
/// of one snapshot).
std::vector<std::vector<int>> orderMatrix(Session& ssn) {
  std::vector<const SessionTask*> pods;
  for (const auto& j : ssn.jobs())
    for (const auto& t : j.tasks)
      if (runningTask(t)) pods.push_back(&t);
  std::vector<std::vector<int>> m;
  for (const SessionTask* a : pods)
    for (const SessionTask* b : pods)
      if (ssn.victimLess(*a, *b)) m.push_back({a->job, a->index, b->job, b->index});
  return m;
}

}  // namespace

TEST_CASE("victim order property: after trials rolled back, the order is the one of the state reached",
          "[proportion][victims][property]") {
  // The plugin keeps what it built (victim sequences, queue keys) while a queue subtree's state
  // fingerprint stands; a trial undone returns the fingerprint to where it was. The order a session
  // reaches through trials, reserves and rollbacks must be the order a fresh session computes for
  // the same state.
  const int cases = caseCount(250, 40);
  for (int seed = 1; seed <= cases; ++seed) {
    Rng rng{uint64_t(seed) * 7919};
    const std::string yaml = randomCluster(rng);
    INFO("seed " << seed << "\n" << yaml);
    tessera::testing::TestCluster c;
    startCluster(c, yaml);
    auto cfg = victimOrderConfig();
    auto session = [&] {
      auto s = std::make_unique<Session>(c.snapshot(), cfg, c.clock);
      s->open();
      return s;
    };
    auto ssn = session();
    // Random operations over the session's tasks: evict a running job's pods (one of them, or all),
    // reserve the first evicted pod's return, pipeline a pending pod.
    auto randomOps = [&](const std::vector<Op>& taken) {
      std::vector<Op> ops;
      std::vector<int> runningJobs, pending;
      for (const auto& j : ssn->jobs()) {
        bool any = false;
        for (const auto& t : j.tasks) {
          const bool gone = std::any_of(taken.begin(), taken.end(), [&](const Op& o) { return o.job == j.index && o.task == t.index; });
          if (gone) continue;
          any = any || runningTask(t);
          if (t.state == TaskState::Pending) pending.push_back(j.index * 1000 + t.index);
        }
        if (any) runningJobs.push_back(j.index);
      }
      if (!runningJobs.empty()) {
        const int job = runningJobs[size_t(rng.below(int(runningJobs.size())))];
        const bool whole = rng.below(2) == 0;
        std::vector<int> left;  // its running pods not taken yet
        for (const auto& t : ssn->jobs()[job].tasks)
          if (runningTask(t) && std::none_of(taken.begin(), taken.end(), [&](const Op& o) { return o.job == job && o.task == t.index; }))
            left.push_back(t.index);
        // Whole, or any one of them: a trial that took one pod and a state that took another leave
        // the job as many pods, not the same ones (an elastic job's surplus pods differ).
        if (whole) {
          for (int ti : left) ops.push_back({Op::Evict, job, ti});
        } else {
          ops.push_back({Op::Evict, job, left[size_t(rng.below(int(left.size())))]});
        }
        if (rng.below(2) == 0) ops.push_back({Op::Reserve, ops.front().job, ops.front().task});
      }
      if (!pending.empty() && rng.below(2) == 0) {
        const int p = pending[size_t(rng.below(int(pending.size())))];
        ops.push_back({Op::Pipeline, p / 1000, p % 1000});
      }
      return ops;
    };
    auto expect = [&](const std::vector<Op>& state, const char* when) {
      auto fresh = session();
      tessera::framework::Statement stmt(*fresh);
      apply(*fresh, stmt, state);
      INFO(when);
      REQUIRE(orderMatrix(*ssn) == orderMatrix(*fresh));
    };
    (void)orderMatrix(*ssn);  // builds what the plugin keeps, at the start
    std::vector<Op> kept;
    for (int round = 0; round < 3; ++round) {
      // Two trials one after the other (a search's domains, a prune's walk): each searched under,
      // then undone, nothing compared between them.
      for (int t = 0; t < 2; ++t) {
        const std::vector<Op> trial = randomOps(kept);
        tessera::framework::Statement stmt(*ssn);
        apply(*ssn, stmt, trial);
        std::vector<Op> state = kept;
        state.insert(state.end(), trial.begin(), trial.end());
        expect(state, "inside a trial");
        stmt.discard();
      }
      expect(kept, "after the trial was undone");
      const std::vector<Op> more = randomOps(kept);  // then operations that stay
      tessera::framework::Statement stmt(*ssn);
      apply(*ssn, stmt, more);
      stmt.commit();
      kept.insert(kept.end(), more.begin(), more.end());
      // A search's hold right after (the trees built before `more` are stale), its first
      // comparison inside a trial: the pods of the jobs the trial leaves alone compare as the hold
      // began, as a fresh session at `kept` orders them, whatever the trial changed.
      {
        tessera::framework::HeldVictimOrder held(*ssn, /*keep=*/true);
        const std::vector<Op> trial = randomOps(kept);
        tessera::framework::Statement inTrial(*ssn);
        apply(*ssn, inTrial, trial);
        auto fresh = session();
        tessera::framework::Statement freshStmt(*fresh);
        apply(*fresh, freshStmt, kept);
        std::vector<const SessionTask*> alone;
        for (const auto& j : ssn->jobs())
          if (std::none_of(trial.begin(), trial.end(), [&](const Op& o) { return o.job == j.index; }))
            for (const auto& t : j.tasks)
              if (runningTask(t)) alone.push_back(&t);
        for (const SessionTask* a : alone)
          for (const SessionTask* b : alone) {
            INFO("held, inside a trial: " << a->info->key << " vs " << b->info->key);
            REQUIRE(ssn->victimLess(*a, *b) == fresh->victimLess(fresh->task(a->job, a->index), fresh->task(b->job, b->index)));
          }
        inTrial.discard();
      }
      expect(kept, "after operations that stay");
    }
  }
}

TEST_CASE("victim order property: a session that starts from the last session's orders orders as a fresh one",
          "[proportion][victims][property]") {
  // The plugin carries each queue's own-pod order from one session to the next (for the jobs the
  // cache did not change) and keeps of it only what still holds. A session after one that moved
  // pods (evictions it left in its order), after pods that went away or came, and after a priority
  // class changed its value (the jobs' objects unchanged, their order not) must order the pods as a
  // session of plugins that never ran before.
  const int cases = caseCount(250, 40);
  for (int seed = 1; seed <= cases; ++seed) {
    Rng rng{uint64_t(seed) * 104729};
    const std::string yaml = randomCluster(rng);
    INFO("seed " << seed << "\n" << yaml);
    tessera::testing::TestCluster c;
    startCluster(c, yaml);
    auto cfg = victimOrderConfig();  // one set of plugins for the sessions in turn
    for (int round = 0; round < 3; ++round) {
      INFO("round " << round);
      {
        Session ssn(c.snapshot(), cfg, c.clock);
        ssn.open();
        (void)orderMatrix(ssn);  // every queue's order built
        // Evict some running pods (one job's, or one pod) and order again: the orders the session
        // leaves have those pods leaving, which the next session (nothing committed) does not see.
        std::vector<Op> ops;
        for (const auto& j : ssn.jobs())
          for (const auto& t : j.tasks)
            if (runningTask(t) && rng.below(4) == 0) ops.push_back({Op::Evict, j.index, t.index});
        tessera::framework::Statement stmt(ssn);
        apply(ssn, stmt, ops);
        stmt.commit();
        (void)orderMatrix(ssn);
        (void)ssn.close();
      }
      {
        Session carried(c.snapshot(), cfg, c.clock);
        carried.open();
        auto freshCfg = victimOrderConfig();
        Session fresh(c.snapshot(), freshCfg, c.clock);
        fresh.open();
        REQUIRE(orderMatrix(carried) == orderMatrix(fresh));
        (void)carried.close();
      }
      // Between sessions: a running pod goes away, and a priority class changes its value (every
      // job keeps its cache object; their order changes).
      std::vector<std::string> running;
      {
        auto lookCfg = victimOrderConfig();
        Session look(c.snapshot(), lookCfg, c.clock);
        look.open();
        for (const auto& j : look.jobs())
          for (const auto& t : j.tasks)
            if (runningTask(t)) running.push_back(t.info->key);
      }
      if (!running.empty() && rng.below(2) == 0) {
        const std::string& key = running[size_t(rng.below(int(running.size())))];
        REQUIRE(c.cluster.forceRemove(tessera::api::Kind::Pod, key.substr(0, key.find('/')), key.substr(key.find('/') + 1)).ok());
      }
      const int value = rng.below(3) == 0 ? 150 : (round % 2 ? 50 : 100);
      REQUIRE(c.cluster.apply(tessera::api::Kind::PriorityClass,
                              tessera::testing::manifests("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
                                                          "metadata: {name: low}\nvalue: " + std::to_string(value) + "\n")
                                  .front())
                  .ok());
    }
  }
}
