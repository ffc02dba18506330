#pragma once
/// A Statement is an operation log with inverses and save points over a Session's working state
/// (RocksDB-style): allocate / pipeline / evict change the session at once, so later reads see
/// them; rollback undoes back to a checkpoint in reverse order; commit hands the operations, in
/// order, to the session's committed list (and from there to the binder); discard undoes all.
/// A statement that is neither committed nor discarded is discarded by its destructor.
#include <string>
#include <vector>

#include "tessera/framework/session.h"

namespace tessera::framework {

class Statement {
 public:
  explicit Statement(Session& session) : session_(session), ops_(session.borrowOpLog()) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  /// Places a Pending task on idle resources of `node`.
  void allocate(SessionTask& task, int node);
  /// Places a Pending task on the future idle (releasing) resources of `node`.
  void pipeline(SessionTask& task, int node);
  /// Evicts a task that holds node resources: its resources become releasing. `reason` says why.
  void evict(SessionTask& task, std::shared_ptr<const std::string> reason);
  void evict(SessionTask& task, std::string reason) {
    evict(task, std::make_shared<const std::string>(std::move(reason)));
  }
  /// Holds future room on `node` for an evicted task that will come back there (consolidation).
  void reserve(const SessionTask& evicted, int node);
  /// Turns the Allocated tasks of `job` (this cycle's, from this statement or an earlier one) into
  /// Pipelined ones on the same nodes (a gang is bound together or not at all).
  void pipelineAllocated(int job);

  using Checkpoint = size_t;
  Checkpoint checkpoint() const { return ops_.size(); }
  /// Undoes every operation after `cp`, newest first.
  void rollback(Checkpoint cp);
  void discard() { rollback(0); }
  void commit();

  const std::vector<Operation>& operations() const { return ops_; }

 private:
  /// Reverts `op` through the session's undo of its type.
  void undo(const Operation& op);

  Session& session_;
  std::vector<Operation> ops_;
};

}  // namespace tessera::framework
