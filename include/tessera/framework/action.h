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
};

}  // namespace tessera::framework
