#pragma once
// What the bench process allocated through operator new (every C++ container and string; not C
// libraries' own malloc calls): cumulative bytes and calls, read before and after a cycle. And,
// on request, where: one allocation in N of the parts being sampled, by call stack.
#include <cstdint>
#include <cstdio>

namespace tessera::bench {

struct AllocCount {
  uint64_t bytes = 0;
  uint64_t calls = 0;
};

/// Cumulative since the process started (all threads).
AllocCount allocated();

/// Takes the call stack of one allocation in `every` (0: none) while sampling is on.
void setAllocationSampling(uint32_t every);
void sampleAllocations(bool on);
/// The sampled call sites, most frequent first (`top` of them), each with how many allocations
/// it stands for (samples times `every`) per `cycles`, its callers named through addr2line.
void printAllocationSites(std::FILE* out, int top, int cycles);

}  // namespace tessera::bench
