#pragma once
// splitmix64 for the property tests: the same numbers on every platform and standard library, so a
// failing seed reproduces anywhere. (The victim oracle seeds it its own way: its seeds are named in
// notes and scenario files.)
#include <cstdint>

namespace tessera::testing {

struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (n > 0).
  int64_t below(int64_t n) { return int64_t(next() % uint64_t(n)); }
};

}  // namespace tessera::testing
