#pragma once
// The scenario engine's parts (scenario.h is its public face):
//  - scenario.cpp: the runner (loading, steps, cycles) and the check / simulate commands;
//  - scenario_expect.cpp: the expectations, one table of {key, handler};
//  - scenario_report.cpp: the timeline `tessera simulate` prints, cycle by cycle.
// Malformed input is an api::Error naming the position ("steps[2].expect.bound: must be a map"); the
// runner prefixes the file. Unmet expectations are not errors: they are the scenario's failures.
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/result.h"
#include "tessera/app/scenario.h"
#include "tessera/binder/binder.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/scheduler.h"

namespace tessera::app::scenario {

using Json = nlohmann::json;

/// "ns/name" -> (ns, name); a bare name is in "default".
std::pair<std::string, std::string> splitPodRef(const std::string& ref);

/// An error at a position of the file: "<where>: <message>".
api::Error malformed(const std::string& where, const std::string& message);

// ---------------------------------------------------------------- expectations (scenario_expect.cpp)

/// What expectations read: the cluster's objects, the cache's view, and what the runner saw.
struct Observed {
  cache::MemoryCluster& cluster;
  cache::Cache& cache;
  const std::set<std::string>& evicted;                     ///< pods evicted so far (ok records)
  const std::map<std::string, std::string>& lastPipelined;  ///< pod -> node, of the last cycle
};

/// Checks one `expect` map (at `where`). Each key counts in outcome.expectationsChecked; each unmet
/// expectation adds a line to outcome.failures. An unknown key or a malformed value is an error.
api::Status checkExpectations(const Json& expect, const std::string& where, const Observed& observed,
                              ScenarioOutcome& outcome);

// ---------------------------------------------------------------- timeline (scenario_report.cpp)

/// One cycle: its head line, evictions, binds (with GPU groups), pipelines, pending jobs, queues.
void printCycle(std::ostream& out, int cycle, api::Time now, const framework::SessionResult& result,
                const framework::CycleStats& stats, const std::vector<binder::BindRecord>& records);

/// What the simulated kubelet did after the cycle.
void printKubelet(std::ostream& out, const cache::MemoryCluster::KubeletReport& report);

}  // namespace tessera::app::scenario
