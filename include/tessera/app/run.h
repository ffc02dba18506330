#pragma once
/// The daemon (`tessera run`) and the test API server command (`tessera serve-cluster`).
#include <ostream>
#include <string>
#include <vector>

#include "tessera/api/result.h"
#include "tessera/cache/memory_cluster.h"

namespace tessera::app {

/// `tessera run (--kubeconfig PATH [--context NAME] | --in-cluster) [--config FILE] [flags]`:
/// schedules against a real API server until SIGTERM/SIGINT. Returns the exit code.
int runCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// `tessera serve-cluster FILE [--address A] [--port N]`: serves a scenario's objects over HTTP
/// (the test API server, simulated kubelet on) until SIGTERM/SIGINT.
int serveClusterCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// Creates a scenario file's `objects` in `cluster` (namespace defaulted to "default"; objects
/// without a creationTimestamp are stamped one second apart ending one second before `start`,
/// as the scenario engine does). Errors name the file and the object's index.
api::Status loadScenarioObjects(const std::string& path, cache::MemoryCluster& cluster, api::Time start);

}  // namespace tessera::app
