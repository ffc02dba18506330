// Statement: allocate / pipeline / evict change the session's working state at once; rollback to
// a checkpoint, nested checkpoints, discard and pipelineAllocated + rollback leave the state
// identical to what it was, compared field by field over every node, job, task and queue;
// commit hands the operations to the session, and close() turns them into binds, pipelines and
// evictions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"

namespace Catch {
template <>
struct StringMaker<tessera::framework::TaskState> {
  static std::string convert(tessera::framework::TaskState s) { return tessera::framework::toString(s); }
};
}  // namespace Catch

namespace {

using tessera::api::Resources;
using tessera::framework::Operation;
using tessera::framework::Session;
using tessera::framework::SessionJob;
using tessera::framework::SessionTask;
using tessera::framework::Statement;
using tessera::framework::TaskState;
using tessera::testing::nodeIndex;
using tessera::testing::taskOf;
using tessera::testing::TestCluster;

// ---- the complete working state of a session, copied out ----

struct NodeRec {
  std::string name;
  Resources idle, releasing, pipelined;
  int32_t podCount = 0, releasingPods = 0, pipelinedPods = 0;
  std::vector<std::string> addedPorts;  // "port/protocol@hostIP", in order
};
struct TaskRec {
  std::string key;
  TaskState state = TaskState::Pending;
  int node = -1;
};
struct JobRec {
  std::string key;
  int32_t readyCount = 0, pendingCount = 0, pipelinedCount = 0, releasingCount = 0;
  Resources allocated;
  std::vector<TaskRec> tasks;
};
struct QueueRec {
  std::string name;
  Resources allocated;
};
struct State {
  std::vector<NodeRec> nodes;
  std::vector<JobRec> jobs;
  std::vector<QueueRec> queues;
};

State capture(const Session& ssn) {
  State s;
  for (const auto& n : ssn.nodes()) {
    NodeRec r{n.name(), n.idle, n.releasing, n.pipelined, n.podCount, n.releasingPods, n.pipelinedPods, {}};
    for (const auto& p : n.addedPorts) r.addedPorts.push_back(std::to_string(p.port) + "/" + p.protocol + "@" + p.hostIP);
    s.nodes.push_back(std::move(r));
  }
  for (const auto& j : ssn.jobs()) {
    JobRec r{j.key(), j.readyCount, j.pendingCount, j.pipelinedCount, j.releasingCount, j.allocated, {}};
    for (const auto& t : j.tasks) r.tasks.push_back({t.info->key, t.state, t.node});
    s.jobs.push_back(std::move(r));
  }
  for (const auto& q : ssn.queues()) s.queues.push_back({q.name, q.allocated});
  return s;
}

std::string res(const Resources& r) { return "{" + r.toString() + "}"; }

/// Every field that differs between `a` and `b`, named; empty when identical.
std::vector<std::string> differences(const State& a, const State& b) {
  std::vector<std::string> d;
  auto field = [&](const std::string& what, const auto& x, const auto& y, auto show) {
    if (!(x == y)) d.push_back(what + ": " + show(x) + " != " + show(y));
  };
  auto str = [](const auto& v) { return std::string(v); };
  auto num = [](const auto& v) { return std::to_string(v); };
  auto ports = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (const auto& p : v) s += (s.size() > 1 ? ", " : "") + p;
    return s + "]";
  };
  auto state = [](TaskState t) { return std::string(tessera::framework::toString(t)); };
  field("node count", a.nodes.size(), b.nodes.size(), num);
  for (size_t i = 0; i < std::min(a.nodes.size(), b.nodes.size()); ++i) {
    const NodeRec& x = a.nodes[i];
    const NodeRec& y = b.nodes[i];
    const std::string w = "node " + x.name;
    field(w + " name", x.name, y.name, str);
    field(w + " idle", x.idle, y.idle, res);
    field(w + " releasing", x.releasing, y.releasing, res);
    field(w + " pipelined", x.pipelined, y.pipelined, res);
    field(w + " podCount", x.podCount, y.podCount, num);
    field(w + " releasingPods", x.releasingPods, y.releasingPods, num);
    field(w + " pipelinedPods", x.pipelinedPods, y.pipelinedPods, num);
    field(w + " addedPorts", x.addedPorts, y.addedPorts, ports);
  }
  field("job count", a.jobs.size(), b.jobs.size(), num);
  for (size_t i = 0; i < std::min(a.jobs.size(), b.jobs.size()); ++i) {
    const JobRec& x = a.jobs[i];
    const JobRec& y = b.jobs[i];
    const std::string w = "job " + x.key;
    field(w + " key", x.key, y.key, str);
    field(w + " readyCount", x.readyCount, y.readyCount, num);
    field(w + " pendingCount", x.pendingCount, y.pendingCount, num);
    field(w + " pipelinedCount", x.pipelinedCount, y.pipelinedCount, num);
    field(w + " releasingCount", x.releasingCount, y.releasingCount, num);
    field(w + " allocated", x.allocated, y.allocated, res);
    field(w + " task count", x.tasks.size(), y.tasks.size(), num);
    for (size_t t = 0; t < std::min(x.tasks.size(), y.tasks.size()); ++t) {
      const std::string tw = "task " + x.tasks[t].key;
      field(tw + " key", x.tasks[t].key, y.tasks[t].key, str);
      field(tw + " state", x.tasks[t].state, y.tasks[t].state, state);
      field(tw + " node", x.tasks[t].node, y.tasks[t].node, num);
    }
  }
  field("queue count", a.queues.size(), b.queues.size(), num);
  for (size_t i = 0; i < std::min(a.queues.size(), b.queues.size()); ++i) {
    field("queue " + a.queues[i].name + " name", a.queues[i].name, b.queues[i].name, str);
    field("queue " + a.queues[i].name + " allocated", a.queues[i].allocated, b.queues[i].allocated, res);
  }
  return d;
}

const std::vector<std::string> kNone;

// ---- the cluster ----

std::string pod(const std::string& name, const std::string& body) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: team\n" + body;
}

std::string podSpec(const std::string& requests, const std::string& ports = "", const std::string& extraSpec = "") {
  return "spec:\n  schedulerName: tessera\n" + extraSpec +
         "  containers:\n  - name: main\n    image: busybox\n    resources:\n      requests: " + requests + "\n" +
         (ports.empty() ? "" : "    ports: " + ports + "\n");
}

/// Three nodes; a running pod with a host port on n1; on n2 a running pod and a terminating one
/// (releasing); a gang g of three pending pods (minMember 2, one with a host port); a pending
/// single pod in another queue.
void buildCluster(TestCluster& c) {
  c.create(R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: q-a}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: q-b}
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: team}
spec: {minMember: 2, queue: q-a}
)");
  c.create(tessera::testing::nodeYaml("n1", "16", "4"));
  c.create(tessera::testing::nodeYaml("n2", "16", "4"));
  c.create(tessera::testing::nodeYaml("n3", "4", "0"));
  c.create(pod("run-0", "  labels: {tessera.dev/queue: q-a}\n" +
                            podSpec("{cpu: \"2\", memory: 1Gi, nvidia.com/gpu: \"1\"}", "[{containerPort: 80, hostPort: 8080}]",
                                    "  nodeName: n1\n") +
                            "status: {phase: Running}\n"));
  c.create(pod("run-1", "  labels: {tessera.dev/queue: q-b}\n" +
                            podSpec("{cpu: \"1\", nvidia.com/gpu: \"1\"}", "", "  nodeName: n2\n") +
                            "status: {phase: Running}\n"));
  c.create(pod("old", "  labels: {tessera.dev/queue: q-a}\n  deletionTimestamp: \"2026-01-01T00:00:30Z\"\n" +
                          podSpec("{cpu: \"1\", nvidia.com/gpu: \"2\"}", "", "  nodeName: n2\n") +
                          "status: {phase: Running}\n"));
  c.create(pod("g-0", "  annotations: {pod-group-name: g}\n" +
                          podSpec("{cpu: \"1\", nvidia.com/gpu: \"1\"}", "[{containerPort: 90, hostPort: 9000}]")));
  c.create(pod("g-1", "  annotations: {pod-group-name: g}\n" + podSpec("{cpu: \"1\", nvidia.com/gpu: \"1\"}")));
  c.create(pod("g-2", "  annotations: {pod-group-name: g}\n" + podSpec("{cpu: \"1\", nvidia.com/gpu: \"1\"}")));
  c.create(pod("solo", "  labels: {tessera.dev/queue: q-b}\n" +
                           podSpec("{cpu: 500m}", "[{containerPort: 70, hostPort: 7000, protocol: UDP}]")));
  c.start();
}

struct Fixture {
  TestCluster cluster;
  tessera::framework::Config config;
  std::unique_ptr<Session> ssn;

  Fixture() {
    buildCluster(cluster);
    auto cfg = tessera::framework::loadConfig(tessera::testing::testRegistry(), nullptr);
    REQUIRE(cfg.ok());
    config = std::move(cfg).value();
    ssn = std::make_unique<Session>(cluster.snapshot(), config, cluster.clock);
    ssn->open();
  }
  SessionTask& task(const std::string& name) {
    const std::string key = "team/" + name;
    if (name.rfind("g-", 0) == 0) return taskOf(*ssn, "PodGroup/team/g", key);
    return taskOf(*ssn, "Pod/" + key, key);
  }
  int node(const std::string& name) { return nodeIndex(*ssn, name); }
  const tessera::framework::SessionNode& nodeOf(const std::string& name) { return ssn->nodes()[node(name)]; }
  SessionJob& gang() { return ssn->jobs()[ssn->findJob("PodGroup/team/g")]; }
  const tessera::framework::SessionQueue& queue(const std::string& name) { return ssn->queues()[ssn->findQueue(name)]; }
};

Resources gpus(int64_t n, int64_t milliCpu) {
  Resources r;
  r.milliGpu = n * 1000;
  r.milliCpu = milliCpu;
  return r;
}

}  // namespace

TEST_CASE("the session starts from the snapshot", "[statement]") {
  Fixture f;
  const auto& n1 = f.nodeOf("n1");
  CHECK(n1.idle.milliGpu == 3000);
  CHECK(n1.podCount == 1);
  CHECK(n1.addedPorts.empty());
  const auto& n2 = f.nodeOf("n2");
  CHECK(n2.idle.milliGpu == 1000);
  CHECK(n2.releasing.milliGpu == 2000);
  CHECK(n2.podCount == 2);
  CHECK(n2.releasingPods == 1);  // old
  CHECK(n2.futurePods() == 1);
  CHECK(f.gang().pendingCount == 3);
  CHECK(f.gang().readyCount == 0);
  CHECK(f.task("run-0").state == TaskState::Running);
  CHECK(f.task("old").state == TaskState::Releasing);
  Resources qa = gpus(3, 3000);  // run-0 and old
  qa.memory = 1LL << 30;
  CHECK(f.queue("q-a").allocated == qa);
}

TEST_CASE("allocate, pipeline and evict change the state at once; rollback restores it field by field", "[statement]") {
  Fixture f;
  const State before = capture(*f.ssn);
  Statement stmt(*f.ssn);
  const auto cp = stmt.checkpoint();

  stmt.allocate(f.task("g-0"), f.node("n1"));
  stmt.pipeline(f.task("g-1"), f.node("n2"));
  stmt.evict(f.task("run-0"), "test");

  // Later reads see the changes.
  const auto& n1 = f.nodeOf("n1");
  CHECK(n1.idle == before.nodes[0].idle - gpus(1, 1000));
  CHECK(n1.podCount == 2);
  REQUIRE(n1.addedPorts.size() == 1);
  CHECK(n1.addedPorts[0].port == 9000);
  CHECK(n1.releasing.milliGpu == 1000);  // run-0 evicted
  CHECK(n1.releasingPods == 1);
  CHECK(n1.futurePods() == 1);  // g-0 stays, run-0 leaves
  const auto& n2 = f.nodeOf("n2");
  CHECK(n2.pipelined == gpus(1, 1000));
  CHECK(n2.pipelinedPods == 1);
  CHECK(n2.idle == before.nodes[1].idle);  // a pipelined pod takes nothing idle
  CHECK(f.task("g-0").state == TaskState::Allocated);
  CHECK(f.task("g-0").node == f.node("n1"));
  CHECK(f.task("g-1").state == TaskState::Pipelined);
  CHECK(f.task("g-1").node == f.node("n2"));
  CHECK(f.task("run-0").state == TaskState::Releasing);
  CHECK(f.gang().readyCount == 2);
  CHECK(f.gang().pendingCount == 1);
  CHECK(f.gang().pipelinedCount == 1);
  CHECK(f.gang().allocated == gpus(2, 2000));
  CHECK(stmt.operations().size() == 3);
  CHECK_FALSE(differences(before, capture(*f.ssn)).empty());

  stmt.rollback(cp);
  CHECK(differences(before, capture(*f.ssn)) == kNone);
  CHECK(stmt.operations().empty());
}

TEST_CASE("nested checkpoints roll back one level at a time", "[statement]") {
  Fixture f;
  Statement stmt(*f.ssn);
  const State s0 = capture(*f.ssn);
  const auto cp0 = stmt.checkpoint();
  stmt.allocate(f.task("g-0"), f.node("n1"));
  const State s1 = capture(*f.ssn);
  const auto cp1 = stmt.checkpoint();
  stmt.pipeline(f.task("g-1"), f.node("n2"));
  stmt.evict(f.task("run-1"), "inner");
  const State s2 = capture(*f.ssn);
  const auto cp2 = stmt.checkpoint();
  stmt.allocate(f.task("solo"), f.node("n1"));
  stmt.allocate(f.task("g-2"), f.node("n1"));
  CHECK_FALSE(differences(s2, capture(*f.ssn)).empty());

  stmt.rollback(cp2);
  CHECK(differences(s2, capture(*f.ssn)) == kNone);
  SECTION("one level at a time") {
    stmt.rollback(cp1);
    CHECK(differences(s1, capture(*f.ssn)) == kNone);
    stmt.rollback(cp0);
    CHECK(differences(s0, capture(*f.ssn)) == kNone);
  }
  SECTION("straight to the outermost") {
    stmt.rollback(cp0);
    CHECK(differences(s0, capture(*f.ssn)) == kNone);
  }
  SECTION("new work after a rollback rolls back too") {
    stmt.rollback(cp1);
    stmt.allocate(f.task("g-1"), f.node("n2"));
    stmt.allocate(f.task("g-2"), f.node("n1"));
    stmt.rollback(cp1);
    CHECK(differences(s1, capture(*f.ssn)) == kNone);
  }
}

TEST_CASE("discard undoes everything", "[statement]") {
  Fixture f;
  const State before = capture(*f.ssn);
  Statement stmt(*f.ssn);
  stmt.allocate(f.task("g-0"), f.node("n1"));
  stmt.allocate(f.task("g-1"), f.node("n1"));
  stmt.evict(f.task("run-0"), "x");
  stmt.pipeline(f.task("g-2"), f.node("n2"));
  stmt.allocate(f.task("solo"), f.node("n3"));
  stmt.discard();
  CHECK(differences(before, capture(*f.ssn)) == kNone);
  CHECK(stmt.operations().empty());
}

TEST_CASE("a statement left open is discarded by its destructor", "[statement]") {
  Fixture f;
  const State before = capture(*f.ssn);
  {
    Statement stmt(*f.ssn);
    stmt.allocate(f.task("g-0"), f.node("n1"));
    stmt.evict(f.task("run-1"), "x");
  }
  CHECK(differences(before, capture(*f.ssn)) == kNone);
  CHECK(f.ssn->committed().empty());
}

TEST_CASE("pipelineAllocated turns the job's allocations into pipelines on the same nodes; rollback restores",
          "[statement]") {
  Fixture f;
  const State before = capture(*f.ssn);
  Statement stmt(*f.ssn);
  stmt.allocate(f.task("g-0"), f.node("n1"));
  stmt.allocate(f.task("g-1"), f.node("n1"));
  stmt.pipeline(f.task("g-2"), f.node("n2"));
  stmt.pipelineAllocated(f.gang().index);

  for (const char* name : {"g-0", "g-1"}) {
    CHECK(f.task(name).state == TaskState::Pipelined);
    CHECK(f.task(name).node == f.node("n1"));
  }
  CHECK(f.task("g-2").state == TaskState::Pipelined);
  const auto& n1 = f.nodeOf("n1");
  CHECK(n1.idle == before.nodes[0].idle);  // nothing taken from idle any more
  CHECK(n1.podCount == before.nodes[0].podCount);
  CHECK(n1.addedPorts.empty());
  CHECK(n1.pipelined == gpus(2, 2000));
  CHECK(f.gang().pipelinedCount == 3);
  CHECK(f.gang().readyCount == 3);
  CHECK(f.gang().pendingCount == 0);
  CHECK(f.gang().allocated == gpus(3, 3000));
  // The allocations stay in the log, followed by one Repipeline each, so a rollback can undo them.
  REQUIRE(stmt.operations().size() == 5);
  CHECK(stmt.operations()[2].type == Operation::Type::Pipeline);
  CHECK(stmt.operations()[3].type == Operation::Type::Repipeline);
  CHECK(stmt.operations()[4].type == Operation::Type::Repipeline);

  stmt.discard();
  CHECK(differences(before, capture(*f.ssn)) == kNone);
}

TEST_CASE("rollback to a checkpoint taken before pipelineAllocated restores the allocations", "[statement]") {
  // pipelineAllocated must not rewrite operations logged before the checkpoint: the state at the
  // checkpoint (tasks Allocated, idle taken) is restored by a rollback.
  Fixture f;
  Statement stmt(*f.ssn);
  stmt.allocate(f.task("g-0"), f.node("n1"));
  stmt.allocate(f.task("g-1"), f.node("n1"));
  const State allocated = capture(*f.ssn);
  const auto cp = stmt.checkpoint();
  stmt.pipeline(f.task("g-2"), f.node("n2"));
  stmt.pipelineAllocated(f.gang().index);
  CHECK(f.task("g-0").state == TaskState::Pipelined);
  stmt.rollback(cp);
  CHECK(differences(allocated, capture(*f.ssn)) == kNone);
  CHECK(f.task("g-0").state == TaskState::Allocated);
}

TEST_CASE("pipelineAllocated leaves other jobs' allocations in the same statement alone", "[statement]") {
  // Host ports placed this cycle are undone exactly, not last-in-first-out per node: here the
  // gang's allocation on n1 is not the newest one there.
  Fixture f;
  Statement stmt(*f.ssn);
  const State before = capture(*f.ssn);
  stmt.allocate(f.task("g-0"), f.node("n1"));   // host port 9000
  stmt.allocate(f.task("solo"), f.node("n1"));  // host port 7000/UDP, another job
  stmt.pipelineAllocated(f.gang().index);

  CHECK(f.task("solo").state == TaskState::Allocated);
  CHECK(f.task("g-0").state == TaskState::Pipelined);
  const auto& n1 = f.nodeOf("n1");
  REQUIRE(n1.addedPorts.size() == 1);
  CHECK(n1.addedPorts[0].port == 7000);  // solo's port stays; g-0's is gone
  CHECK(n1.podCount == before.nodes[0].podCount + 1);

  stmt.discard();
  CHECK(differences(before, capture(*f.ssn)) == kNone);
}

TEST_CASE("two statements on one node: discarding the older keeps the newer one's host ports", "[statement]") {
  Fixture f;
  const State before = capture(*f.ssn);
  Statement first(*f.ssn);
  first.allocate(f.task("g-0"), f.node("n1"));  // 9000
  Statement second(*f.ssn);
  second.allocate(f.task("solo"), f.node("n1"));  // 7000
  first.discard();
  const auto& n1 = f.nodeOf("n1");
  REQUIRE(n1.addedPorts.size() == 1);
  CHECK(n1.addedPorts[0].port == 7000);
  second.discard();
  CHECK(differences(before, capture(*f.ssn)) == kNone);
}

TEST_CASE("statements borrow emptied operation logs from the session: never another's operations", "[statement]") {
  // (Session::borrowOpLog: a finished statement's log is lent to the next one.)
  Fixture f;
  const State before = capture(*f.ssn);
  {
    Statement a(*f.ssn);
    a.allocate(f.task("solo"), f.node("n3"));
    a.evict(f.task("run-0"), "make room");
    {
      Statement nested(*f.ssn);  // opened while `a` holds its log
      CHECK(nested.operations().empty());
      nested.allocate(f.task("g-0"), f.node("n1"));
      CHECK(nested.operations().size() == 1);
      CHECK(a.operations().size() == 2);
    }  // discarded: its log goes back, emptied
    CHECK(a.operations().size() == 2);
  }  // discarded too
  CHECK(differences(before, capture(*f.ssn)) == kNone);
  for (int i = 0; i < 3; ++i) {
    Statement next(*f.ssn);  // a lent log starts empty
    CHECK(next.operations().empty());
    next.allocate(f.task("solo"), f.node("n3"));
    REQUIRE(next.operations().size() == 1);
    CHECK(next.operations()[0].type == Operation::Type::Allocate);
  }
  CHECK(differences(before, capture(*f.ssn)) == kNone);
  CHECK(f.ssn->committed().empty());
}

TEST_CASE("commit moves the operations, in order, to the session; close reports them", "[statement]") {
  Fixture f;
  {
    Statement a(*f.ssn);
    a.allocate(f.task("solo"), f.node("n3"));
    a.evict(f.task("run-0"), "make room");
    a.commit();
    CHECK(a.operations().empty());
    const State afterCommit = capture(*f.ssn);
    a.discard();  // nothing left to undo
    CHECK(differences(afterCommit, capture(*f.ssn)) == kNone);
  }
  {
    Statement b(*f.ssn);
    b.allocate(f.task("g-0"), f.node("n1"));
    b.allocate(f.task("g-1"), f.node("n1"));
    b.pipeline(f.task("g-2"), f.node("n2"));
    b.pipelineAllocated(f.gang().index);
    b.commit();
  }
  {
    Statement c(*f.ssn);  // dropped: never reaches the session
    c.evict(f.task("run-1"), "dropped");
  }
  const auto& ops = f.ssn->committed();
  REQUIRE(ops.size() == 7);
  CHECK(ops[0].type == Operation::Type::Allocate);
  CHECK(ops[1].type == Operation::Type::Evict);
  REQUIRE(ops[1].reason);
  CHECK(*ops[1].reason == "make room");
  CHECK(ops[2].type == Operation::Type::Allocate);
  CHECK(ops[3].type == Operation::Type::Allocate);
  CHECK(ops[4].type == Operation::Type::Pipeline);
  CHECK(ops[5].type == Operation::Type::Repipeline);
  CHECK(ops[6].type == Operation::Type::Repipeline);
  CHECK(f.task("run-1").state == TaskState::Running);

  auto result = f.ssn->close();
  REQUIRE(result.binds.size() == 1);
  CHECK(result.binds[0].podKey == "team/solo");
  CHECK(result.binds[0].node == "n3");
  CHECK_FALSE(result.binds[0].podUid.empty());
  REQUIRE(result.evictions.size() == 1);
  CHECK(result.evictions[0].podKey == "team/run-0");
  CHECK(result.evictions[0].node == "n1");
  CHECK(result.evictions[0].reason == "make room");
  REQUIRE(result.pipelined.size() == 3);
  std::vector<std::string> pipelined;
  for (const auto& p : result.pipelined) pipelined.push_back(p.podKey + "@" + p.node);
  std::sort(pipelined.begin(), pipelined.end());
  CHECK(pipelined == std::vector<std::string>{"team/g-0@n1", "team/g-1@n1", "team/g-2@n2"});
}

TEST_CASE("pipelineAllocated also turns a job's allocations committed by an earlier statement", "[statement]") {
  // Allocate gives an elastic job one pod per turn, each in a statement of its own: a later pod
  // that only fits on releasing resources holds back the ones bound by earlier turns.
  Fixture f;
  {
    Statement first(*f.ssn);
    first.allocate(f.task("g-0"), f.node("n1"));
    first.allocate(f.task("g-1"), f.node("n1"));
    first.commit();
  }
  const State afterFirst = capture(*f.ssn);
  Statement second(*f.ssn);
  second.pipeline(f.task("g-2"), f.node("n2"));
  second.pipelineAllocated(f.gang().index);
  CHECK(f.task("g-0").state == TaskState::Pipelined);
  CHECK(f.task("g-1").state == TaskState::Pipelined);
  SECTION("rolled back: the earlier statement's allocations stand") {
    second.discard();
    CHECK(differences(afterFirst, capture(*f.ssn)) == kNone);
  }
  SECTION("committed: nothing of the gang is bound") {
    second.commit();
    auto result = f.ssn->close();
    CHECK(result.binds.empty());
    std::vector<std::string> pipelined;
    for (const auto& p : result.pipelined) pipelined.push_back(p.podKey + "@" + p.node);
    std::sort(pipelined.begin(), pipelined.end());
    CHECK(pipelined == std::vector<std::string>{"team/g-0@n1", "team/g-1@n1", "team/g-2@n2"});
  }
}

TEST_CASE("random operations, pipelineAllocated and checkpoints always roll back exactly", "[statement]") {
  Fixture f;
  std::mt19937 rng(20260101);  // fixed seed: deterministic
  Statement stmt(*f.ssn);
  struct Saved {
    Statement::Checkpoint cp;
    State state;
  };
  std::vector<Saved> stack{{stmt.checkpoint(), capture(*f.ssn)}};
  int ops = 0, rollbacks = 0;
  for (int step = 0; step < 400; ++step) {
    const unsigned what = rng() % 10;
    if (what < 2) {
      stack.push_back({stmt.checkpoint(), capture(*f.ssn)});
      continue;
    }
    if (what == 2 && stack.size() > 1) {
      const size_t k = 1 + rng() % (stack.size() - 1);
      stmt.rollback(stack[k].cp);
      INFO("step " << step << ": rollback to save point " << k);
      REQUIRE(differences(stack[k].state, capture(*f.ssn)) == kNone);
      stack.resize(k + 1);
      ++rollbacks;
      continue;
    }
    // Some pending task onto some node, or evict some task holding resources.
    std::vector<SessionTask*> pending, holding;
    for (auto& j : f.ssn->jobs())
      for (auto& t : j.tasks) {
        if (t.state == TaskState::Pending) pending.push_back(&t);
        if (t.state == TaskState::Running || t.state == TaskState::Bound) holding.push_back(&t);
      }
    const int node = static_cast<int>(rng() % f.ssn->nodes().size());
    if (what < 6 && !pending.empty()) {
      stmt.allocate(*pending[rng() % pending.size()], node);
    } else if (what < 9 && !pending.empty()) {
      stmt.pipeline(*pending[rng() % pending.size()], node);
    } else if (!holding.empty()) {
      stmt.evict(*holding[rng() % holding.size()], "random");
    } else if (!pending.empty()) {
      stmt.allocate(*pending[rng() % pending.size()], node);
    }
    ++ops;
    if (rng() % 6 == 0) stmt.pipelineAllocated(static_cast<int>(rng() % f.ssn->jobs().size()));
  }
  stmt.rollback(stack[0].cp);
  CHECK(differences(stack[0].state, capture(*f.ssn)) == kNone);
  CHECK(ops > 100);
  CHECK(rollbacks > 10);
}

TEST_CASE("jobValid follows the job's own evictions and their rollback (its verdict is kept per job)",
          "[statement]") {
  // run-0 (minMember 1) is valid while it runs; evicted, it has no live pod left (the gang
  // plugin's count): invalid, until the eviction is rolled back.
  Fixture f;
  const SessionJob& job = f.ssn->jobs()[f.task("run-0").job];
  CHECK(f.ssn->jobValid(job).ok());
  Statement stmt(*f.ssn);
  const auto cp = stmt.checkpoint();
  stmt.evict(f.task("run-0"), "test");
  CHECK(job.releasingCount == 1);
  const auto invalid = f.ssn->jobValid(job);
  REQUIRE_FALSE(invalid.ok());
  CHECK(invalid.error().message.find("gang 0/1") != std::string::npos);
  stmt.rollback(cp);
  CHECK(job.releasingCount == 0);
  CHECK(f.ssn->jobValid(job).ok());
}
