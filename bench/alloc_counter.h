#pragma once
// What the bench process allocated through operator new (every C++ container and string; not C
// libraries' own malloc calls): cumulative bytes and calls, read before and after a cycle.
#include <cstdint>

namespace tessera::bench {

struct AllocCount {
  uint64_t bytes = 0;
  uint64_t calls = 0;
};

/// Cumulative since the process started (all threads).
AllocCount allocated();

}  // namespace tessera::bench
