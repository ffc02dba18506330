#include "tessera/framework/statement.h"

namespace tessera::framework {

Statement::~Statement() { discard(); }

void Statement::allocate(SessionTask& task, int node) {
  Operation op{Operation::Type::Allocate, task.job, task.index, node, task.state, task.node, {}};
  session_.applyAllocate(task, node);
  ops_.push_back(std::move(op));
}

void Statement::pipeline(SessionTask& task, int node) {
  Operation op{Operation::Type::Pipeline, task.job, task.index, node, task.state, task.node, {}};
  session_.applyPipeline(task, node);
  ops_.push_back(std::move(op));
}

void Statement::evict(SessionTask& task, std::string reason) {
  const TaskState prev = task.state;
  const int prevNode = task.node;
  session_.applyEvict(task);  // resolves task.node
  ops_.push_back(Operation{Operation::Type::Evict, task.job, task.index, task.node, prev, prevNode, std::move(reason)});
}

void Statement::pipelineAllocated(int job) {
  // Newest first, so per-node LIFO bookkeeping (host ports) unwinds in order.
  for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
    Operation& op = *it;
    if (op.job != job || op.type != Operation::Type::Allocate) continue;
    SessionTask& task = session_.task(op.job, op.task);
    if (task.state != TaskState::Allocated) continue;
    session_.undo(op);
    session_.applyPipeline(task, op.node);
    op.type = Operation::Type::Pipeline;
  }
}

void Statement::rollback(Checkpoint cp) {
  while (ops_.size() > cp) {
    session_.undo(ops_.back());
    ops_.pop_back();
  }
}

void Statement::commit() {
  session_.commitOperations(std::move(ops_));
  ops_.clear();
}

}  // namespace tessera::framework
