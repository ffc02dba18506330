#pragma once
/// tessera-bench e2e: `tessera run` (a child process) against the test API server over HTTP.
/// Creates the pods over HTTP from concurrent creators, measures pods bound per second (first
/// creation to last bind) and creation-to-bind latency (p50, p99) from the server's side, once with
/// the daemon's default client configuration (its --kube-api-qps/--kube-api-burst defaults) and
/// once with an unlimited client (--client picks one); and the server's ceiling: the same creations
/// and binds from a raw load generator with no scheduling (binds from as many threads as the
/// daemon's bind workers), run before and after the scheduler's runs, the ceiling being the mean of
/// the two (a drift of the machine during the runs cancels out). --server-latency MS answers every
/// write that late (a real API server with etcd). Last line: one JSON object with all runs and
/// their ratios (scheduler / ceiling; "raw" is the ceiling, "raw_before" and "raw_after" its runs).
namespace tessera::bench {

/// `argv[0]` is "e2e".
int runE2eBench(int argc, char** argv);

}  // namespace tessera::bench
