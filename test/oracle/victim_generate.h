#pragma once
/// Random small clusters for the victim oracle, and their scenario files (schema v1,
/// ../shared/scenarios/SCHEMA.md).
#include <cstdint>
#include <string>

#include "victim_model.h"

namespace tessera::oracle {

/// A cluster of 1-4 nodes (optionally in two racks), a queue tree (flat, or a parent with two
/// children beside a top-level queue) with GPU quotas, limits and weights, up to 8 running pods
/// (single pods, gangs, elastic jobs; whole GPUs, fractions, cpu only; priorities 50-125), one
/// pending claimant job, sometimes a pending job too large for any node, sometimes a decoy that
/// goes first (victim_model.h) and, for reclaim, sometimes a saturation multiplier below 1.
/// Deterministic in `seed` (its own generator, no std distributions).
Case generate(uint64_t seed);

/// `c` (a case with topology) with every node a rack of its own: up to four domains for a
/// rack-constrained claimant, where generate() makes two at most. Stricter for every rack-bound
/// job, so a decoy or a hopeless job stays what it was.
Case withOneNodeRacks(Case c);

/// What names a case's variant after its seed ("-one-node-racks", "-alone"; "" for the case as
/// generated): the scenario's name and its file's.
std::string variantSuffix(const Case& c);

/// The scenario file: the objects, one cycle with `actions: [allocate, <mode>]` (the victim action
/// alone for an `actionAlone` case), and, when `e` is given, the expected evictions and the
/// claimant's expected state as expectations.
std::string renderScenario(const Case& c, const Expected* e);

/// Seconds after 2025-12-31T00:00:00Z as RFC 3339.
std::string timeAt(int seconds);

}  // namespace tessera::oracle
