#pragma once
/// The daemon (`tessera run`) and the test API server command (`tessera serve-cluster`).
#include <functional>
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

/// The logging flags of `tessera run` and `serve-cluster`: `--v N` (klog's verbosity; `-v` too)
/// and `--log-format text|json`. When `name` is one of them, reads its value with `value`, applies
/// it (log::setVerbosity / setFormat) and returns true; false for other flags; an error for a bad value.
api::Result<bool> applyLogFlag(const std::string& name, const std::function<api::Result<std::string>()>& value);

/// Creates a scenario file's `objects` in `cluster` (namespace defaulted to "default"; objects
/// without a creationTimestamp are stamped one second apart ending one second before `start`,
/// as the scenario engine does). Errors name the file and the object's index.
api::Status loadScenarioObjects(const std::string& path, cache::MemoryCluster& cluster, api::Time start);

}  // namespace tessera::app
