// Replaces the global operator new (plain and array, throwing and nothrow) of tessera-bench to count
// what it allocates; the memory still comes from malloc, so the allocator under test (glibc, or one
// preloaded) is the one measured, and the default operator delete (free) releases it. Aligned forms
// are left to the library: nothing in the scheduler over-aligns.
//
// Where the allocations come from (`cycle --alloc-sites N`): one in N, while sampling is on, keeps
// its call stack (return addresses, in a fixed array: nothing is allocated while sampling); at the
// end the stacks are counted and named with addr2line.
#include "alloc_counter.h"

#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <vector>

namespace {

std::atomic<uint64_t> bytes{0};
std::atomic<uint64_t> calls{0};

constexpr int kFrames = 10;  // the sampling frames (operator new and what it calls), then the callers kept
constexpr size_t kMaxSamples = 1 << 18;
struct Stack {
  std::array<void*, kFrames> frames{};
  int depth = 0;
};
Stack* samples = nullptr;  // kMaxSamples, allocated when sampling is set up
std::atomic<size_t> sampled{0};
uint32_t every = 0;
std::atomic<bool> sampling{false};
std::atomic<uint64_t> tick{0};
thread_local bool inside = false;  // backtrace() may allocate on its first call: not sampled

/// Keeps the stack from `caller` (operator new's return address) on: however much of operator new
/// and what it calls the compiler inlined, the first frame kept is the allocating function's.
void sample(void* caller) {
  if (inside || (tick.fetch_add(1, std::memory_order_relaxed) + 1) % every != 0) return;
  const size_t i = sampled.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxSamples) return;
  inside = true;
  Stack& s = samples[i];
  const int depth = backtrace(s.frames.data(), kFrames);
  int from = 0;
  while (from < depth && s.frames[static_cast<size_t>(from)] != caller) ++from;
  if (from == depth) from = 0;  // (not found: the whole stack, sampling frames included)
  std::copy(s.frames.begin() + from, s.frames.begin() + depth, s.frames.begin());
  s.depth = depth - from;
  inside = false;
}

void* counted(std::size_t n, void* caller) noexcept {
  bytes.fetch_add(n, std::memory_order_relaxed);
  calls.fetch_add(1, std::memory_order_relaxed);
  if (sampling.load(std::memory_order_relaxed)) sample(caller);
  return std::malloc(n == 0 ? 1 : n);
}

void* countedOrThrow(std::size_t n, void* caller) {
  if (void* p = counted(n, caller)) return p;
  throw std::bad_alloc();
}

/// Function names of `addresses` (return addresses in this executable) through addr2line; "?"
/// where it gives none.
std::map<void*, std::string> nameAll(const std::vector<void*>& addresses) {
  std::map<void*, std::string> names;
  // backtrace_symbols gives "exe(+0xOFFSET)" for a position-independent executable's own code;
  // the call itself is the byte before the return address.
  char** syms = backtrace_symbols(addresses.data(), static_cast<int>(addresses.size()));
  std::string command = "addr2line -f -C -e /proc/" + std::to_string(getpid()) + "/exe";
  for (size_t i = 0; i < addresses.size(); ++i) {
    const std::string s = syms ? syms[i] : "";
    const size_t plus = s.find("(+0x");
    const unsigned long offset = plus == std::string::npos ? 1 : std::strtoul(s.c_str() + plus + 4, nullptr, 16);
    char hex[32];
    std::snprintf(hex, sizeof hex, " 0x%lx", offset - 1);
    command += hex;
  }
  std::free(syms);
  std::FILE* p = popen(command.c_str(), "r");
  char line[4096];
  for (size_t i = 0; p && i < addresses.size(); ++i) {
    std::string fn = std::fgets(line, sizeof line, p) ? line : "?";
    if (!std::fgets(line, sizeof line, p)) break;
    fn.erase(fn.find_last_not_of('\n') + 1);
    if (const size_t paren = fn.find('('); paren != std::string::npos && paren > 0) fn.erase(paren);
    // Its file:line where the binary has line tables (a -g build): which call in the function.
    std::string where = line;
    where.erase(where.find_last_not_of('\n') + 1);
    if (const size_t d = where.find(" (discriminator"); d != std::string::npos) where.erase(d);
    if (const size_t slash = where.rfind('/'); slash != std::string::npos) where.erase(0, slash + 1);
    const bool known = !where.empty() && where[0] != '?' && where.back() != '?';
    names[addresses[i]] = known ? fn + " (" + where + ")" : fn;
  }
  if (p) pclose(p);
  return names;
}

}  // namespace

namespace tessera::bench {

AllocCount allocated() {
  return {bytes.load(std::memory_order_relaxed), calls.load(std::memory_order_relaxed)};
}

void setAllocationSampling(uint32_t n) {
  every = n;
  if (n > 0 && !samples) samples = new Stack[kMaxSamples];
}

void sampleAllocations(bool on) { sampling.store(on && every > 0, std::memory_order_relaxed); }

void printAllocationSites(std::FILE* out, int top, int cycles) {
  const size_t n = std::min(sampled.load(), kMaxSamples);
  if (every == 0 || n == 0) return;
  sampleAllocations(false);
  std::map<std::vector<void*>, uint64_t> bySite;
  std::vector<void*> all;
  for (size_t i = 0; i < n; ++i) {
    const Stack& s = samples[i];
    std::vector<void*> site(s.frames.begin(), s.frames.begin() + s.depth);
    all.insert(all.end(), site.begin(), site.end());
    ++bySite[site];
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  const std::map<void*, std::string> names = nameAll(all);
  // Named; stacks that differ only in frames whose names are alike count as one site.
  std::map<std::string, uint64_t> merged;
  for (const auto& [site, count] : bySite) {
    std::string text;
    for (void* f : site) {
      auto it = names.find(f);
      text += (text.empty() ? "" : " <- ") + (it == names.end() ? std::string("?") : it->second);
    }
    merged[text] += count;
  }
  std::vector<std::pair<uint64_t, std::string>> rows;
  for (const auto& [text, count] : merged) rows.emplace_back(count, text);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::fprintf(out, "allocation sites: %zu samples, one allocation in %u, per cycle over %d cycles\n", n, every,
               cycles);
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < top; ++i)
    std::fprintf(out, "%9.0f  %s\n", static_cast<double>(rows[i].first) * every / std::max(1, cycles),
                 rows[i].second.c_str());
}

}  // namespace tessera::bench

void* operator new(std::size_t n) { return countedOrThrow(n, __builtin_return_address(0)); }
void* operator new[](std::size_t n) { return countedOrThrow(n, __builtin_return_address(0)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n, __builtin_return_address(0)); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n, __builtin_return_address(0)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
