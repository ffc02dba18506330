// Statements and the session's working-state changes behind them: each operation (allocate,
// pipeline, evict, reserve, the repipelining of a gang) is written here three times, side by side:
// the Statement's entry point that logs it, Session::apply* that changes nodes, jobs and queues,
// and Session::undo* that reverts exactly that (rollback runs the undos newest first).
#include "tessera/framework/statement.h"

namespace tessera::framework {

namespace {

/// Removes one occurrence of each of `ports` from `from`, newest first (not necessarily the last
/// entries: other statements may have placed pods on the node since).
void removePorts(std::vector<api::HostPort>& from, const std::vector<api::HostPort>& ports) {
  for (const auto& p : ports) {
    for (auto it = from.rbegin(); it != from.rend(); ++it)
      if (it->port == p.port && it->protocol == p.protocol && it->hostIP == p.hostIP) {
        from.erase(std::next(it).base());
        break;
      }
  }
}

void addPorts(std::vector<api::HostPort>& to, const std::vector<api::HostPort>& ports) {
  to.insert(to.end(), ports.begin(), ports.end());
}

}  // namespace

Statement::~Statement() {
  discard();
  session_.returnOpLog(std::move(ops_));
}

void Session::finishUndo(const Operation& op, SessionTask& task, SessionNode& n, SessionJob& j) {
  n.idle.normalize();
  n.releasing.normalize();
  n.pipelined.normalize();
  j.allocated.normalize();
  if (j.queue >= 0) queues_[j.queue].allocated.normalize();
  nodeChanged(n);
  task.state = op.previous;
  task.node = op.previousNode;
}

void Session::countReady(SessionJob& j, const SessionTask& task, int delta) {
  j.readyCount += delta;
  if (task.subGroup >= 0) j.subGroupReady[static_cast<size_t>(task.subGroup)] += delta;
}

void Session::taskChanged(SessionJob& j, const SessionTask& task, Operation::Type change) {
  // One fixed key per (task, change); XOR makes the undo its own inverse and the version
  // independent of the order of the changes.
  j.version ^= fingerprintKey(static_cast<uint64_t>(task.index) << 3 | static_cast<uint64_t>(change));
  if (j.queue >= 0) jobChanges_[static_cast<size_t>(j.queue)].push_back(j.index);
}

void Session::chargeQueue(const SessionJob& j, const SessionTask& task, int sign) {
  if (j.queue < 0) return;
  if (sign > 0) queues_[j.queue].allocated += task.request();
  else queues_[j.queue].allocated -= task.request();
  if (!queueChanged_[static_cast<size_t>(j.queue)]) {
    queueChanged_[static_cast<size_t>(j.queue)] = 1;
    changedQueues_.push_back(j.queue);
  }
}

void Session::takeChangedQueues(std::vector<int>& out) {
  out.clear();
  out.swap(changedQueues_);  // both keep their memory: the caller's list is this one's next
  for (int q : out) queueChanged_[static_cast<size_t>(q)] = 0;
}

// ---- allocate: a Pending task onto idle resources ----

void Statement::allocate(SessionTask& task, int node) {
  Operation op{Operation::Type::Allocate, task.job, task.index, node, task.state, task.node, {}};
  session_.beforeTaskChange(task);
  session_.applyAllocate(task, node);
  ops_.push_back(std::move(op));
}

void Session::applyAllocate(SessionTask& task, int node) {
  TESSERA_ASSERT(task.state == TaskState::Pending);
  SessionNode& n = nodes_[node];
  SessionJob& j = jobs_[task.job];
  n.idle -= task.nodeRequest();
  if (task.sharesGpu()) takeGpus(task, n, /*pipelined=*/false);
  n.podCount++;
  addPorts(n.addedPorts, task.pod().hostPorts);
  nodeChanged(n);
  task.state = TaskState::Allocated;
  task.node = node;
  countReady(j, task, +1);
  taskChanged(j, task, Operation::Type::Allocate);
  j.pendingCount--;
  j.allocated += task.request();
  chargeQueue(j, task, +1);
  notifyAllocate(task);
}

void Session::undoAllocate(const Operation& op) {
  SessionTask& task = jobs_[op.job].tasks[op.task];
  SessionNode& n = nodes_[op.node];
  SessionJob& j = jobs_[op.job];
  TESSERA_ASSERT(task.state == TaskState::Allocated);
  n.idle += task.nodeRequest();
  if (task.sharesGpu()) returnGpus(task, n, /*pipelined=*/false);
  n.podCount--;
  removePorts(n.addedPorts, task.pod().hostPorts);
  countReady(j, task, -1);
  taskChanged(j, task, Operation::Type::Allocate);
  j.pendingCount++;
  j.allocated -= task.request();
  chargeQueue(j, task, -1);
  finishUndo(op, task, n, j);
  notifyDeallocate(task);
}

// ---- pipeline: a Pending task onto future idle (releasing) resources ----

void Statement::pipeline(SessionTask& task, int node) {
  Operation op{Operation::Type::Pipeline, task.job, task.index, node, task.state, task.node, {}};
  session_.beforeTaskChange(task);
  session_.applyPipeline(task, node);
  ops_.push_back(std::move(op));
}

void Session::applyPipeline(SessionTask& task, int node) {
  TESSERA_ASSERT(task.state == TaskState::Pending);
  SessionNode& n = nodes_[node];
  SessionJob& j = jobs_[task.job];
  n.pipelined += task.nodeRequest();
  n.pipelinedPods++;
  if (task.sharesGpu()) takeGpus(task, n, /*pipelined=*/true);
  nodeChanged(n);
  task.state = TaskState::Pipelined;
  task.node = node;
  countReady(j, task, +1);
  taskChanged(j, task, Operation::Type::Pipeline);
  j.pendingCount--;
  j.pipelinedCount++;
  j.allocated += task.request();
  chargeQueue(j, task, +1);
  notifyAllocate(task);
}

void Session::undoPipeline(const Operation& op) {
  SessionTask& task = jobs_[op.job].tasks[op.task];
  SessionNode& n = nodes_[op.node];
  SessionJob& j = jobs_[op.job];
  TESSERA_ASSERT(task.state == TaskState::Pipelined);
  n.pipelined -= task.nodeRequest();
  n.pipelinedPods--;
  if (task.sharesGpu()) returnGpus(task, n, /*pipelined=*/true);
  countReady(j, task, -1);
  taskChanged(j, task, Operation::Type::Pipeline);
  j.pendingCount++;
  j.pipelinedCount--;
  j.allocated -= task.request();
  chargeQueue(j, task, -1);
  finishUndo(op, task, n, j);
  notifyDeallocate(task);
}

// ---- evict: a task holding node resources turns Releasing ----

void Statement::evict(SessionTask& task, std::shared_ptr<const std::string> reason) {
  const TaskState prev = task.state;
  const int prevNode = task.node;
  session_.beforeTaskChange(task);
  session_.applyEvict(task);  // resolves task.node
  ops_.push_back(Operation{Operation::Type::Evict, task.job, task.index, task.node, prev, prevNode, std::move(reason)});
}

void Session::applyEvict(SessionTask& task) {
  TESSERA_ASSERT(task.state == TaskState::Bound || task.state == TaskState::Running);
  if (task.node < 0) task.node = findNode(task.info->nodeName);
  TESSERA_ASSERT(task.node >= 0);
  SessionNode& n = nodes_[task.node];
  SessionJob& j = jobs_[task.job];
  n.releasing += task.nodeRequest();
  n.releasingPods++;
  if (task.sharesGpu()) releaseGpus(task, n, +1);
  nodeChanged(n);
  task.state = TaskState::Releasing;
  j.releasingCount++;
  countReady(j, task, -1);
  taskChanged(j, task, Operation::Type::Evict);
  j.allocated -= task.request();
  chargeQueue(j, task, -1);
  notifyDeallocate(task);
}

void Session::undoEvict(const Operation& op) {
  SessionTask& task = jobs_[op.job].tasks[op.task];
  SessionNode& n = nodes_[op.node];
  SessionJob& j = jobs_[op.job];
  TESSERA_ASSERT(task.state == TaskState::Releasing);
  n.releasing -= task.nodeRequest();
  n.releasingPods--;
  j.releasingCount--;
  if (task.sharesGpu()) releaseGpus(task, n, -1);
  countReady(j, task, +1);
  taskChanged(j, task, Operation::Type::Evict);
  j.allocated += task.request();
  chargeQueue(j, task, +1);
  finishUndo(op, task, n, j);
  notifyAllocate(task);
}

// ---- reserve: future room held for an evicted pod that comes back on `node` ----

void Statement::reserve(const SessionTask& evicted, int node) {
  session_.beforeTaskChange(evicted);
  session_.applyReserve(evicted, node);
  ops_.push_back(Operation{Operation::Type::Reserve, evicted.job, evicted.index, node, evicted.state, evicted.node, {}});
}

void Session::applyReserve(const SessionTask& task, int node) {
  SessionNode& n = nodes_[node];
  n.pipelined += task.nodeRequest();
  n.pipelinedPods++;
  // A fractional pod's share is held in the GPU group it will join (its own groups are released
  // through the cache's group ids, not the session's record, so that record is free to hold this).
  if (task.sharesGpu()) takeGpus(jobs_[task.job].tasks[task.index], n, /*pipelined=*/true);
  nodeChanged(n);
  // A moved pod comes back: its queue still holds what it asks (limits and quotas count it while
  // other pods are placed), as before it was evicted.
  chargeQueue(jobs_[task.job], task, +1);
  notifyAllocate(task);
}

void Session::undoReserve(const Operation& op) {
  SessionTask& task = jobs_[op.job].tasks[op.task];
  SessionNode& n = nodes_[op.node];
  if (task.sharesGpu()) returnGpus(task, n, /*pipelined=*/true);
  n.pipelined -= task.nodeRequest();
  n.pipelined.normalize();
  n.pipelinedPods--;
  nodeChanged(n);
  chargeQueue(jobs_[task.job], task, -1);
  notifyDeallocate(task);
}

// ---- pipelineAllocated: a gang's Allocated tasks turn Pipelined (repipeline) ----

void Statement::pipelineAllocated(int job) {
  // Every Allocated task of the job this cycle, from this statement or an earlier one (allocate
  // gives an elastic job one pod per turn, each turn a statement of its own). Appended as
  // operations of their own, so a rollback past this point turns them back; an earlier statement's
  // Allocate then yields no bind (Session::close reads the tasks' final states).
  for (SessionTask& task : session_.jobs()[job].tasks) {
    if (task.state != TaskState::Allocated) continue;
    Operation op{Operation::Type::Repipeline, task.job, task.index, task.node, task.state, task.node, {}};
    session_.applyRepipeline(task);
    ops_.push_back(std::move(op));
  }
}

void Session::applyRepipeline(SessionTask& task) {
  TESSERA_ASSERT(task.state == TaskState::Allocated);
  SessionNode& n = nodes_[task.node];
  SessionJob& j = jobs_[task.job];
  n.idle += task.nodeRequest();
  n.idle.normalize();
  n.podCount--;
  n.pipelinedPods++;
  removePorts(n.addedPorts, task.pod().hostPorts);
  n.pipelined += task.nodeRequest();
  nodeChanged(n);
  task.state = TaskState::Pipelined;
  j.pipelinedCount++;  // still ready, still counted in allocated
  taskChanged(j, task, Operation::Type::Repipeline);
}

void Session::undoRepipeline(const Operation& op) {
  // Back to Allocated on the same node; the job's and queue's totals do not change.
  SessionTask& task = jobs_[op.job].tasks[op.task];
  SessionNode& n = nodes_[op.node];
  SessionJob& j = jobs_[op.job];
  TESSERA_ASSERT(task.state == TaskState::Pipelined);
  n.pipelined -= task.nodeRequest();
  n.pipelined.normalize();
  n.idle -= task.nodeRequest();
  n.podCount++;
  n.pipelinedPods--;
  addPorts(n.addedPorts, task.pod().hostPorts);
  j.pipelinedCount--;
  taskChanged(j, task, Operation::Type::Repipeline);
  nodeChanged(n);
  task.state = op.previous;
  task.node = op.previousNode;
}

// ---- rollback and commit ----

void Statement::undo(const Operation& op) {
  session_.beforeTaskChange(session_.jobs()[op.job].tasks[op.task]);
  switch (op.type) {
    case Operation::Type::Allocate: session_.undoAllocate(op); return;
    case Operation::Type::Pipeline: session_.undoPipeline(op); return;
    case Operation::Type::Evict: session_.undoEvict(op); return;
    case Operation::Type::Reserve: session_.undoReserve(op); return;
    case Operation::Type::Repipeline: session_.undoRepipeline(op); return;
  }
}

void Statement::rollback(Checkpoint cp) {
  while (ops_.size() > cp) {
    undo(ops_.back());
    ops_.pop_back();
  }
}

void Statement::commit() { session_.commitOperations(ops_); }

void Session::commitOperations(std::vector<Operation>& ops) {
  committed_.insert(committed_.end(), std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
  ops.clear();
}

}  // namespace tessera::framework
