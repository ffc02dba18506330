#pragma once
/// tessera-bench topology: cycle time with and without a required rack level on every gang.
namespace tessera::bench {

/// `argv[0]` is "topology"; prints per-cycle lines and a JSON summary as the last line.
int runTopologyBench(int argc, char** argv);

}  // namespace tessera::bench
