#pragma once
/// An action: one named step of a cycle (allocate, consolidate, reclaim, preempt, backfill, ...).
#include <string>

namespace tessera::framework {

class Session;

class Action {
 public:
  virtual ~Action() = default;
  virtual const std::string& name() const = 0;
  virtual void execute(Session& session) = 0;
  /// Whether it reads the running pods by node (Session::runningIndex), as the victim actions do:
  /// the session then looks up each running pod's node while it is built, its cache entry at hand.
  virtual bool indexesRunningPods() const { return false; }
};

}  // namespace tessera::framework
