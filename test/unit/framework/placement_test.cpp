// findPlacement keeps per-placement-key node rankings up to date lazily, and explains failures from
// per-class tallies and a free-amount index; scanPlacement is the plain scan over every node. Over
// random clusters and random sequences of allocate, pipeline, evict, checkpoint and rollback, inside
// and outside node domains, both must always choose the same node the same way, and give the same
// reasons when nothing fits. The same with the topology plugin planning gangs (its key parts: a
// preferred level's bonus orders nodes per job, subgroup domains change which nodes pass).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"

namespace {

using tessera::framework::Placement;
using tessera::framework::Session;
using tessera::framework::SessionTask;
using tessera::framework::Statement;
using tessera::framework::TaskState;
using tessera::testing::TestCluster;

std::string randomCluster(std::mt19937& rng) {
  std::string y;
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int nodes = 6 + pick(10);
  for (int i = 0; i < nodes; ++i) {
    const std::string name = "n" + std::to_string(i);
    const int gpus = pick(3) == 0 ? 0 : 1 + pick(8);
    std::string meta = "  labels: {pool: " + std::string(pick(2) ? "a" : "b") + "}\n";
    std::string spec;
    if (pick(5) == 0) spec = "spec:\n  taints: [{key: dedicated, value: x, effect: NoSchedule}]\n";
    std::string ready = pick(10) == 0 ? "False" : "True";
    y += "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n" + meta + spec +
         "status:\n  allocatable: {cpu: \"" + std::to_string(8 + pick(56)) + "\", memory: 256Gi, pods: \"" +
         std::to_string(3 + pick(20)) + "\", nvidia.com/gpu: \"" + std::to_string(gpus) +
         "\"}\n  conditions: [{type: Ready, status: \"" + ready + "\"}]\n";
    // Some running pods, some of them terminating (releasing).
    const int running = pick(3);
    for (int r = 0; r < running && gpus > 0; ++r) {
      const bool terminating = pick(2) == 0;
      y += "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: run-" + name + "-" + std::to_string(r) +
           "\n  labels: {tessera.dev/queue: q}\n" +
           (terminating ? "  deletionTimestamp: \"2026-01-01T00:00:30Z\"\n" : "") +
           "spec:\n  schedulerName: tessera\n  nodeName: " + name +
           "\n  containers: [{name: c, resources: {requests: {cpu: \"2\", nvidia.com/gpu: \"1\"}, limits: "
           "{nvidia.com/gpu: \"1\"}}}]\nstatus: {phase: Running}\n";
    }
  }
  y += "---\napiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n";
  const int pending = 20 + pick(30);
  for (int i = 0; i < pending; ++i) {
    const int gpus = pick(4);
    std::string ann;
    const int policy = pick(3);
    if (policy == 1) ann = "  annotations: {tessera.dev/node-policy: spread}\n";
    if (policy == 2) ann = "  annotations: {tessera.dev/node-policy: binpack}\n";
    std::string extra;
    if (pick(4) == 0) extra += "  tolerations: [{key: dedicated, operator: Exists}]\n";
    if (pick(5) == 0) extra += "  nodeSelector: {pool: a}\n";
    if (pick(8) == 0) extra += "  containers: [{name: c, ports: [{containerPort: 80, hostPort: 8080}], resources: {requests: {cpu: \"1\"}}}]\n";
    else if (pick(6) == 0)  // more cpu or memory than any node has: the free-amount index refuses it
      extra += "  containers: [{name: c, resources: {requests: {cpu: \"" + std::string(pick(2) ? "100" : "1") +
               "\", memory: " + (pick(2) ? "300Gi" : "1Gi") + "}}}]\n";
    else
      extra += "  containers: [{name: c, resources: {requests: {cpu: \"" + std::to_string(1 + pick(8)) +
               "\", nvidia.com/gpu: \"" + std::to_string(gpus) + "\"}, limits: {nvidia.com/gpu: \"" +
               std::to_string(gpus) + "\"}}}]\n";
    y += "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p" + std::to_string(i) +
         "\n  labels: {tessera.dev/queue: q}\n" + ann + "spec:\n  schedulerName: tessera\n" + extra;
  }
  return y;
}

/// randomCluster() with a Topology over the nodes' `pool` label and gangs of the queue: some
/// preferring one pool, some with subgroups each required inside one pool.
std::string randomTopologyCluster(std::mt19937& rng) {
  std::string y = randomCluster(rng);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  y += "---\napiVersion: scheduling.tessera.dev/v1alpha1\nkind: Topology\nmetadata: {name: pools}\n"
       "spec:\n  levels: [{nodeLabel: pool}]\n";
  const int gangs = 3 + pick(4);
  for (int g = 0; g < gangs; ++g) {
    const std::string name = "g" + std::to_string(g);
    const bool subgroups = pick(3) != 0;
    y += "---\napiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
         ", namespace: default}\nspec:\n  minMember: 2\n  queue: q\n";
    if (subgroups)
      y += "  subGroups:\n  - {name: a, minMember: 1, topologyConstraint: {topology: pools, requiredTopologyLevel: pool}}\n"
           "  - {name: b, minMember: 1, topologyConstraint: {topology: pools, requiredTopologyLevel: pool}}\n";
    else if (const int tc = pick(3); tc < 2)  // (gangs alike but for their constraints: signatures tell them apart)
      y += tc == 0 ? "  topologyConstraint: {topology: pools, preferredTopologyLevel: pool}\n"
                   : "  topologyConstraint: {topology: pools, requiredTopologyLevel: pool}\n";
    // Half the gangs ask one shape for all their pods, from few: gangs alike but for their
    // constraints show up (jobSignature must tell them apart).
    const bool alike = pick(2) == 0;
    const int alikeCpu = 1 << pick(2), alikeGpu = pick(2);
    for (int i = 0; i < 2 + pick(3); ++i)
      y += "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "-" + std::to_string(i) +
           "\n  namespace: default\n  labels: {tessera.dev/queue: q" +
           (subgroups ? std::string(", tessera.dev/subgroup: ") + (i % 2 ? "b" : "a") : std::string()) +
           "}\n  annotations: {pod-group-name: " + name + "}\nspec:\n  schedulerName: tessera\n"
           // Shapes shared with the plain pending pods (cpu 1-8): a gang's pods then share a placement
           // class with them, and only the plan's key parts tell their rankings and tallies apart.
           "  containers: [{name: c, resources: {requests: {cpu: \"" + std::to_string(alike ? alikeCpu : 1 << pick(4)) +
           "\", nvidia.com/gpu: \"" + std::to_string(alike ? alikeGpu : pick(3)) + "\"}, limits: {nvidia.com/gpu: \"" +
           std::to_string(pick(1)) + "\"}}}]\n";
  }
  return y;
}

void requireSame(const Placement& fast, const Placement& scan, const std::string& what) {
  INFO(what << ": ranked node " << fast.node << (fast.pipelined ? " (pipelined)" : "") << ", scanned node "
            << scan.node << (scan.pipelined ? " (pipelined)" : "") << "; scan reason: " << scan.reason);
  REQUIRE(fast.node == scan.node);
  REQUIRE(fast.pipelined == scan.pipelined);
  if (fast.node < 0) REQUIRE(fast.reason == scan.reason);
}

/// A session opened over `objects` with the default config.
struct OpenSession {
  explicit OpenSession(const std::string& objects) {
    cluster.create(objects);
    cluster.start();
    auto loaded = tessera::framework::loadConfig(tessera::testing::testRegistry(), nullptr);
    REQUIRE(loaded.ok());
    config = std::move(*loaded);
    session = std::make_unique<Session>(cluster.snapshot(), config, cluster.clock);
    session->open();
  }
  TestCluster cluster;
  tessera::framework::Config config;
  std::unique_ptr<Session> session;
};

/// One random change of the session inside `stmt`, in this order of draws: which change; for a
/// placement, which pending task, then where `place` puts it (applied when it found a node); an
/// eviction of a running task; a checkpoint; a rollback to the last one.
template <class Place>
void randomChange(Session& ssn, Statement& stmt, std::vector<Statement::Checkpoint>& checkpoints, std::mt19937& rng,
                  Place&& place) {
  std::vector<SessionTask*> pending, running;
  for (auto& j : ssn.jobs())
    for (auto& t : j.tasks) {
      if (t.state == TaskState::Pending) pending.push_back(&t);
      if (t.state == TaskState::Running) running.push_back(&t);
    }
  const int action = static_cast<int>(rng() % 10);
  if (action < 6 && !pending.empty()) {
    SessionTask& t = *pending[rng() % pending.size()];
    const Placement p = place(t);
    if (p.node >= 0) {
      if (p.pipelined) stmt.pipeline(t, p.node);
      else stmt.allocate(t, p.node);
    }
  } else if (action == 6 && !running.empty()) {
    stmt.evict(*running[rng() % running.size()], "test");
  } else if (action == 7) {
    checkpoints.push_back(stmt.checkpoint());
  } else if (action >= 8 && !checkpoints.empty()) {
    stmt.rollback(checkpoints.back());
    checkpoints.pop_back();
  }
}

}  // namespace

TEST_CASE("findPlacement's cached rankings always agree with a full scan", "[placement]") {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    OpenSession open(randomCluster(rng));
    Session& ssn = *open.session;
    Statement stmt(ssn);
    std::vector<Statement::Checkpoint> checkpoints;
    // Two domains (a name stands for one node set within a session): even and odd nodes.
    std::vector<tessera::framework::NodeDomain> domains(2);
    std::vector<int> members[2];  // the domains' node lists (a NodeDomain points at its maker's)
    for (int d = 0; d < 2; ++d) {
      domains[d].name = d == 0 ? "even" : "odd";
      for (const auto& n : ssn.nodes())
        if (n.index % 2 == d) members[d].push_back(n.index);
      domains[d].nodes = members[d];
    }
    for (int step = 0; step < 200; ++step)
      randomChange(ssn, stmt, checkpoints, rng, [&](SessionTask& t) {
        const bool allowPipeline = rng() % 2 == 0;
        const unsigned where = rng() % 4;
        ssn.restrictTo(where < 2 ? &domains[where] : nullptr);
        const Placement scan = ssn.scanPlacement(t, allowPipeline);
        const Placement fast = ssn.findPlacement(t, allowPipeline);
        ssn.restrictTo(nullptr);
        requireSame(fast, scan, "seed " + std::to_string(seed) + " step " + std::to_string(step) + " task " + t.info->key);
        return fast;
      });
    stmt.discard();
  }
}

TEST_CASE("findPlacement agrees with a full scan while topology plans rank and restrict nodes per job",
          "[placement][topology]") {
  // A job planned again gets other subgroup domains and bonuses: rankings and failure tallies
  // kept from an earlier plan must not answer for the new one.
  int constrainedTries = 0;
  for (unsigned seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    OpenSession open(randomTopologyCluster(rng));
    Session& ssn = *open.session;
    Statement stmt(ssn);
    for (int step = 0; step < 200; ++step) {
      std::vector<SessionTask*> pending;
      for (auto& j : ssn.jobs())
        for (auto& t : j.tasks)
          if (t.state == TaskState::Pending) pending.push_back(&t);
      if (pending.empty()) break;
      SessionTask& t = *pending[rng() % pending.size()];
      const bool allowPipeline = rng() % 2 == 0;
      // As the actions do: the job's domains first (the plugin plans the job), then one of them.
      auto domains = ssn.jobDomains(ssn.jobs()[t.job]);
      const tessera::framework::NodeDomain* domain = nullptr;
      if (domains && !domains->domains.empty()) {
        domain = &domains->domains[rng() % domains->domains.size()];
        ++constrainedTries;
      }
      ssn.restrictTo(domain);
      const Placement scan = ssn.scanPlacement(t, allowPipeline);
      const Placement fast = ssn.findPlacement(t, allowPipeline);
      ssn.restrictTo(nullptr);
      requireSame(fast, scan, "seed " + std::to_string(seed) + " step " + std::to_string(step) + " task " + t.info->key);
      if (fast.node >= 0 && rng() % 3 == 0) {
        if (fast.pipelined) stmt.pipeline(t, fast.node);
        else stmt.allocate(t, fast.node);
      }
    }
    stmt.discard();
  }
  REQUIRE(constrainedTries > 100);  // the plugin did plan jobs
}

// A job's task order (Session::pendingTaskOrder) starts from the order the cache keeps of the
// task order's last words (oldest pod, uid, key: JobInfo::tieOrder) and sorts it by the plugins'
// orders alone: over random gangs whose pods tie often (a few creation times, task priorities
// from the tessera.dev/task-priority label, uids unrelated to the names), it must be exactly the
// order of sorting by Session::taskLess.
TEST_CASE("pendingTaskOrder: the cache's tie order sorted by the plugins' task orders is taskLess's order",
          "[placement][taskorder]") {
  // Half the pods before the cache starts (its first snapshot orders every job), half after (the
  // second orders the jobs they changed); gangs of 2-9 pods (sorted by insertion), and sometimes
  // of 33-48 (a stable sort).
  int ordersNotByName = 0, bigJobs = 0, grownJobs = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    std::string y = "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n";
    y += "---\napiVersion: v1\nkind: Node\nmetadata: {name: n0}\nstatus:\n  allocatable: {cpu: \"8\", memory: 64Gi, "
         "pods: \"110\"}\n  conditions: [{type: Ready, status: \"True\"}]\n";
    std::string later;
    const int gangs = 2 + pick(4);
    for (int g = 0; g < gangs; ++g) {
      const std::string name = "g" + std::to_string(g);
      const int pods = pick(6) == 0 ? 33 + pick(16) : 2 + pick(8);
      bigJobs += pods > 32 ? 1 : 0;
      y += "---\napiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata: {name: " + name +
           ", namespace: default}\nspec:\n  minMember: " + std::to_string(pods) + "\n  queue: q\n";
      for (int i = 0; i < pods; ++i) {
        std::string labels = "tessera.dev/queue: q";
        if (pick(2)) labels += ", tessera.dev/task-priority: \"" + std::to_string(5 * pick(3)) + "\"";
        (i % 2 ? later : y) +=
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "-" + std::to_string(i) +
            "\n  namespace: default\n  uid: u" + std::to_string(rng() % 100000) + "-" + std::to_string(i) +
            "\n  creationTimestamp: \"2026-01-01T00:00:0" + std::to_string(pick(3)) + "Z\"\n  labels: {" + labels +
            "}\n  annotations: {pod-group-name: " + name +
            "}\nspec:\n  schedulerName: tessera\n  containers: [{name: c, resources: {requests: {cpu: "
            "\"1\"}}}]\n";
      }
    }
    OpenSession open(y);
    auto check = [&](Session& ssn, size_t round) {
      for (const auto& j : ssn.jobs()) {
        std::vector<int> expected(j.tasks.size());
        for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int>(i);
        std::sort(expected.begin(), expected.end(), [&](int a, int b) { return ssn.taskLess(j.tasks[a], j.tasks[b]); });
        INFO("seed " << seed << " round " << round << " job " << j.info->key);
        REQUIRE(j.info->tieOrder.size() == j.tasks.size());  // (the cache made it: the fast path runs)
        REQUIRE(ssn.pendingTaskOrder(j) == expected);
        ordersNotByName += std::is_sorted(expected.begin(), expected.end()) ? 0 : 1;
      }
    };
    check(*open.session, 1);
    const size_t before = open.session->jobs().size() > 0 ? open.session->jobs()[0].tasks.size() : 0;
    open.session->close();
    open.cluster.create(later);
    Session second(open.cluster.snapshot(), open.config, open.cluster.clock);
    second.open();
    check(second, 2);
    grownJobs += !second.jobs().empty() && second.jobs()[0].tasks.size() > before ? 1 : 0;
    second.close();
  }
  REQUIRE(ordersNotByName > 20);  // the cases order pods otherwise than by name, often
  REQUIRE(bigJobs > 5);
  REQUIRE(grownJobs > 20);  // the second snapshot did see the jobs grow
}

// Session::jobSignature against its definition, computed from scratch: two jobs share a signature
// exactly when their topology constraints, queues, priorities, preemptibility, missing pods,
// subgroups' names and missing minimums and pending pods' placement classes (each with its subgroup, in
// pendingTaskOrder) are equal; a job constrained by topology with pods placed, or with constrained
// subgroups, has none. Asked again after every random allocate, pipeline, evict and rollback: a
// signature kept past a change of the job's tasks would differ from the fresh definition.
TEST_CASE("jobSignature: jobs share one exactly when they place alike, kept only while their tasks stay",
          "[placement][signature]") {
  using Key = std::vector<std::string>;
  for (unsigned seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    OpenSession open(randomTopologyCluster(rng));
    Session& ssn = *open.session;
    Statement stmt(ssn);
    std::vector<Statement::Checkpoint> checkpoints;
    auto definition = [&](const tessera::framework::SessionJob& j, int missing) -> std::optional<Key> {
      Key k;
      if (const auto* pg = j.info->podGroup.get()) {
        if (!pg->topologyConstraint.empty()) {
          if (j.readyCount > 0 || j.pendingCount < static_cast<int>(j.tasks.size())) return std::nullopt;
          k.push_back(pg->topologyConstraint.topology + "/" + pg->topologyConstraint.requiredTopologyLevel + "/" +
                      pg->topologyConstraint.preferredTopologyLevel);
        }
        for (const auto& sg : pg->subGroups)
          if (!sg.topologyConstraint.empty()) return std::nullopt;
      }
      k.push_back(std::to_string(j.queue) + "/" + std::to_string(j.priority) + "/" + std::to_string(j.preemptible) +
                  "/" + std::to_string(missing));
      for (size_t g = 0; g < j.subGroupReady.size(); ++g)
        k.push_back("sg " + j.subGroups()[g].name + " " + std::to_string(j.subGroups()[g].minMember - j.subGroupReady[g]));
      for (int ti : ssn.pendingTaskOrder(j)) {
        const SessionTask& t = j.tasks[static_cast<size_t>(ti)];
        k.push_back(std::to_string(ssn.placementClass(t)) +
                    (j.subGroupReady.empty() ? std::string() : "@" + std::to_string(t.subGroup)));
      }
      return k;
    };
    for (int step = 0; step < 120; ++step) {
      std::vector<std::pair<int, std::optional<Key>>> seen;  // (signature, definition) per pending job
      for (const auto& j : ssn.jobs()) {
        if (j.pendingCount == 0) continue;
        // One pod at a time (as the victim actions ask of a ready job): a signature kept past a
        // change of the job's pending pods would not show in `missing`.
        const int missing = 1;
        const int sig = ssn.jobSignature(j, missing);
        std::optional<Key> def = definition(j, missing);
        INFO("seed " << seed << " step " << step << " job " << j.key());
        REQUIRE((sig < 0) == !def.has_value());
        for (const auto& [otherSig, otherDef] : seen)
          if (def && otherDef) REQUIRE((sig == otherSig) == (*def == *otherDef));
        seen.push_back({sig, std::move(def)});
      }
      randomChange(ssn, stmt, checkpoints, rng,
                   [&](SessionTask& t) { return ssn.findPlacement(t, /*allowPipeline=*/true); });
    }
    stmt.discard();
  }
}

TEST_CASE("the pending GPU floors: when backfill's bound holds, no pending task fits now",
          "[placement]") {
  // Backfill and consolidation skip every job on these bounds (backfill.cpp, consolidate.cpp).
  // Over random clusters near full (whole-GPU pods, pods sharing a GPU in GPU groups, some
  // terminating) and random changes (placements, evictions, rollbacks): each floor is the least
  // of the tasks pending at the start and never more than a task pending now asks; maxIdleGpus and
  // maxGroupRoom are the best node's and group's; and whenever backfill's bound holds, no pending
  // task fits any node now (Session::fits, which backfill's placements go through).
  int above = 0, within = 0;
  for (unsigned seed = 1; seed <= 80; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    std::string y = "---\napiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n";
    auto podYaml = [&](const std::string& name, const std::string& node, bool terminating, const std::string& gpus,
                       const std::string& group, bool fractional) {
      return "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels: {tessera.dev/queue: q" +
             (group.empty() ? "" : ", tessera.dev/gpu-group: " + group) + "}\n" +
             (fractional ? "  annotations: {gpu-fraction: \"0.5\"}\n" : "") +
             (terminating ? "  deletionTimestamp: \"2026-01-01T00:00:30Z\"\n" : "") +
             "spec:\n  schedulerName: tessera\n" + (node.empty() ? "" : "  nodeName: " + node + "\n") +
             "  containers: [{name: c, resources: {requests: {cpu: \"1\"" +
             (gpus.empty() ? "" : ", nvidia.com/gpu: \"" + gpus + "\"") + "}" +
             (gpus.empty() ? "" : ", limits: {nvidia.com/gpu: \"" + gpus + "\"}") + "}}]\n" +
             (node.empty() ? "" : "status: {phase: Running}\n");
    };
    const int nodes = 3 + pick(6);
    for (int i = 0; i < nodes; ++i) {
      const std::string name = "n" + std::to_string(i);
      const int gpus = 2 + pick(4);
      y += "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: " + name +
           "\nstatus:\n  allocatable: {cpu: \"64\", memory: 256Gi, pods: \"40\", nvidia.com/gpu: \"" +
           std::to_string(gpus) + "\"}\n  conditions: [{type: Ready, status: \"True\"}]\n";
      // Most GPUs held, some by terminating pods (releasing: not idle), some by a GPU group of one
      // or two half-GPU pods (room left in the first case).
      const int held = gpus - pick(3);
      for (int g = 0; g < held; ++g) {
        const std::string pn = "run-" + name + "-" + std::to_string(g);
        if (pick(4) == 0) {
          const std::string group = "grp-" + pn;
          y += podYaml(pn + "-a", name, pick(4) == 0, "", group, true);
          if (pick(2)) y += podYaml(pn + "-b", name, false, "", group, true);
        } else {
          y += podYaml(pn, name, pick(4) == 0, "1", "", false);
        }
      }
    }
    const int pending = 4 + pick(10);
    const int mix = pick(3);  // 0: whole GPUs only; 1: some pods sharing one; 2: some asking none
    const int least = 1 + pick(2);  // the fewest whole GPUs a pending pod asks (2: above a node's 1 idle)
    for (int i = 0; i < pending; ++i) {
      const std::string name = "p" + std::to_string(i);
      const int kind = pick(5);
      if (mix == 1 && kind == 0) y += podYaml(name, "", false, "", "", true);
      else if (mix == 2 && kind == 0) y += podYaml(name, "", false, "", "", false);
      else y += podYaml(name, "", false, std::to_string(least + pick(3)), "", false);
    }
    OpenSession open(y);
    Session& ssn = *open.session;
    // The floors over the pending tasks: whole GPUs of those sharing none, whether one shares, and
    // milli-GPUs as consolidation counts them.
    auto floors = [&] {
      struct { int64_t whole = INT64_MAX, milli = INT64_MAX; bool shares = false; } f;
      for (const auto& j : ssn.jobs())
        for (const auto& t : j.tasks) {
          if (t.state != TaskState::Pending) continue;
          if (t.sharesGpu()) f.shares = true;
          else f.whole = std::min<int64_t>(f.whole, t.nodeRequest().milliGpu / 1000);
          f.milli = std::min<int64_t>(f.milli, t.nodeRequest().milliGpu + (t.sharesGpu() ? t.request().milliGpu : 0));
        }
      return f;
    };
    const auto start = floors();
    REQUIRE(ssn.pendingGpuFloor() == start.whole);
    REQUIRE(ssn.pendingSharesGpu() == start.shares);
    REQUIRE(ssn.pendingGpuMilliFloor() == start.milli);
    Statement stmt(ssn);
    std::vector<Statement::Checkpoint> checkpoints;
    for (int step = 0; step < 60; ++step) {
      INFO("seed " << seed << " step " << step);
      int64_t idle = 0, room = 0;
      for (const auto& n : ssn.nodes()) {
        idle = std::max(idle, n.idle.milliGpu / 1000);
        for (const auto& g : n.gpuGroups) room = std::max(room, g.free());
      }
      REQUIRE(ssn.maxIdleGpus() == idle);
      REQUIRE(ssn.maxGroupRoom() == room);
      const auto now = floors();
      REQUIRE(ssn.pendingGpuFloor() <= now.whole);
      REQUIRE(ssn.pendingGpuMilliFloor() <= now.milli);
      REQUIRE((ssn.pendingSharesGpu() || !now.shares));
      if (ssn.pendingGpuFloor() > idle && (!ssn.pendingSharesGpu() || (idle == 0 && ssn.maxGroupRoom() <= 0))) {
        ++above;
        for (const auto& j : ssn.jobs())
          for (const auto& t : j.tasks)
            if (t.state == TaskState::Pending)
              for (const auto& n : ssn.nodes()) REQUIRE_FALSE(ssn.fits(t, n, /*future=*/false));
      } else {
        ++within;
      }
      randomChange(ssn, stmt, checkpoints, rng,
                   [&](SessionTask& t) { return ssn.findPlacement(t, /*allowPipeline=*/rng() % 2 == 0); });
    }
    stmt.discard();
  }
  // Both sides of the bound were met (the test is not vacuous).
  CHECK(above > 100);
  CHECK(within > 100);
}
