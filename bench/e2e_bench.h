#pragma once
/// tessera-bench e2e: `tessera run` (a child process) against the test API server over HTTP.
/// Creates the pods over HTTP from concurrent creators, measures pods bound per second (first
/// creation to last bind) and creation-to-bind latency (p50, p99) from the server's side; then the
/// server's ceiling: the same creations and binds from a raw load generator with no scheduling
/// (binds from as many threads as the daemon's bind workers). Last line: one JSON object with both
/// and their ratio (scheduler / raw).
namespace tessera::bench {

/// `argv[0]` is "e2e".
int runE2eBench(int argc, char** argv);

}  // namespace tessera::bench
