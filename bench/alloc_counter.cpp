// Replaces the global operator new (plain and array, throwing and nothrow) of tessera-bench to count
// what it allocates; the memory still comes from malloc, so the allocator under test (glibc, or one
// preloaded) is the one measured, and the default operator delete (free) releases it. Aligned forms
// are left to the library: nothing in the scheduler over-aligns.
#include "alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<uint64_t> bytes{0};
std::atomic<uint64_t> calls{0};

void* counted(std::size_t n) noexcept {
  bytes.fetch_add(n, std::memory_order_relaxed);
  calls.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}

void* countedOrThrow(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}

}  // namespace

namespace tessera::bench {

AllocCount allocated() {
  return {bytes.load(std::memory_order_relaxed), calls.load(std::memory_order_relaxed)};
}

}  // namespace tessera::bench

void* operator new(std::size_t n) { return countedOrThrow(n); }
void* operator new[](std::size_t n) { return countedOrThrow(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
