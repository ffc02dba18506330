#pragma once

namespace tessera::bench {

/// `tessera-bench interposer [--iterations N] [--threads 1,8] [--repeat R]`
///
/// Measures the cost of an alloc+free pair (cuMemAlloc_v2 + cuMemFree_v2, 1 MiB) against the fake
/// CUDA driver, without and with libtessera-cuda.so preloaded, for each thread count. Each
/// measurement runs in a fresh helper process (the preload must be in place at exec). Prints a
/// table, then one JSON object as the last line. Returns 0, or 1 when a helper failed.
int runInterposerBench(int argc, char** argv);

}  // namespace tessera::bench
