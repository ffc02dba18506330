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

void Statement::reserve(const SessionTask& evicted, int node) {
  session_.applyReserve(evicted, node);
  ops_.push_back(Operation{Operation::Type::Reserve, evicted.job, evicted.index, node, evicted.state, evicted.node, {}});
}

void Statement::pipelineAllocated(int job) {
  // Appended as operations of their own, so a rollback past this point turns them back.
  const size_t end = ops_.size();
  for (size_t i = 0; i < end; ++i) {
    if (ops_[i].job != job || ops_[i].type != Operation::Type::Allocate) continue;
    SessionTask& task = session_.task(ops_[i].job, ops_[i].task);
    if (task.state != TaskState::Allocated) continue;
    Operation op{Operation::Type::Repipeline, task.job, task.index, task.node, task.state, task.node, {}};
    session_.applyRepipeline(task);
    ops_.push_back(std::move(op));
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
