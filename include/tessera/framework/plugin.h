#pragma once
/// A plugin: created once from typed arguments when the config loads; each cycle it registers its
/// callbacks on the Session (KAI's extension points).
#include <string>

namespace tessera::framework {

class Session;

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual const std::string& name() const = 0;
  /// Registers callbacks on `session`. Called at the start of every cycle.
  virtual void onSessionOpen(Session& session) = 0;
  /// Called when the session closes (after the actions ran).
  virtual void onSessionClose(Session& session) {}
};

}  // namespace tessera::framework
