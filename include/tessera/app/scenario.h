#pragma once
/// Scenario files (../shared/scenarios/SCHEMA.md): a small cluster as Kubernetes manifests, steps,
/// and expectations, run by the real scheduler (cache, snapshot, session, actions, plugins, binder)
/// against the embedded in-memory cluster with a virtual clock.
#include <ostream>
#include <string>

#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace tessera::app {

struct ScenarioOutcome {
  std::string file;
  std::string name;         ///< the scenario's `name` (the file name when it could not be read)
  std::string description;  ///< the scenario's `description` ("" when none)
  bool loadError = false;   ///< the file itself is malformed
  std::vector<std::string> failures;  ///< each: the key, what was expected and what was found
  int expectationsChecked = 0;
  bool passed() const { return !loadError && failures.empty(); }
};

struct ScenarioOptions {
  /// When set, a readable timeline (binds, pipelines, evictions, pending reasons, kubelet) is
  /// written here cycle by cycle.
  std::ostream* timeline = nullptr;
  /// When set, filled with the report of ui/STATE.md ("Reports"): the UI's state after each cycle,
  /// the timeline lines of each cycle, and the expectations (`tessera simulate --html`).
  nlohmann::json* report = nullptr;
};

/// Runs one scenario file.
ScenarioOutcome runScenarioFile(const std::string& path, const ScenarioOptions& options = {});

/// Expands FILE|DIR arguments into scenario files (*.yaml, *.yml; directories recursively, sorted).
std::vector<std::string> collectScenarioFiles(const std::vector<std::string>& args, std::vector<std::string>& errors);

/// `tessera check FILE|DIR...`: returns the process exit code.
int checkCommand(const std::vector<std::string>& args, std::ostream& out);
/// `tessera simulate FILE`: returns the process exit code.
int simulateCommand(const std::vector<std::string>& args, std::ostream& out);

}  // namespace tessera::app
