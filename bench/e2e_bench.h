#pragma once
/// tessera-bench e2e: `tessera run` (a child process) against the test API server over HTTP.
/// Creates the pods over HTTP from concurrent creators, measures pods bound per second (first
/// creation to last bind) and creation-to-bind latency (p50, p99) from the server's side, once with
/// the daemon's default client configuration (its --kube-api-qps/--kube-api-burst defaults) and
/// once with an unlimited client (--client picks one); then the server's ceiling: the same creations
/// and binds from a raw load generator with no scheduling (binds from as many threads as the
/// daemon's bind workers). --server-latency MS answers every write that late (a real API server
/// with etcd). Last line: one JSON object with all runs and their ratios (scheduler / raw).
namespace tessera::bench {

/// `argv[0]` is "e2e".
int runE2eBench(int argc, char** argv);

}  // namespace tessera::bench
