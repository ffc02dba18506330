#pragma once
/// How the process's allocator (glibc malloc) treats the memory it frees. A scheduler builds the
/// same large structures every cycle (snapshot lists, session arrays, placement scratch); memory
/// handed back to the kernel between cycles is faulted in again the next one, which costs little
/// on some machines and most of the cycle on others (issue 16: 81 ms vs 650 ms on one 2-core VM).
/// docs/operations.md, "Memory".
#include <string>

namespace tessera::api {

enum class MallocMode {
  Default,  ///< glibc's defaults
  /// Freed memory stays in the process for the next cycle: the heap top is never trimmed
  /// (M_TRIM_THRESHOLD at its maximum) and blocks up to 32 MiB come from the heap rather than from
  /// mmaps of their own (M_MMAP_THRESHOLD at glibc's maximum). RSS stays near its peak.
  Keep,
};

/// Makes glibc's malloc back its heap with transparent huge pages (its `glibc.malloc.hugetlb=1`
/// tunable: each heap extension is madvise(MADV_HUGEPAGE)d), which glibc reads only when a process
/// starts: re-executes the process (/proc/self/exe, same arguments and pid) with the tunable added
/// to GLIBC_TUNABLES. Returns without doing so when GLIBC_TUNABLES already names malloc.hugetlb
/// (the operator's choice, or this process was re-executed), when TESSERA_MALLOC_HUGEPAGES is 0,
/// when the kernel's transparent huge pages are off (`never`) or unknown, or when the exec fails.
/// A scheduler reads its cluster state every cycle (hundreds of MB at 4,000 nodes and 140,000
/// pods): with 2 MiB pages the TLB covers it, and a cycle takes 10-15% less CPU on the bench.
/// Call it first thing in main(), before any thread starts. docs/operations.md, "Memory".
void useHugePages(char** argv);

/// Whether glibc's malloc asks for huge pages in this process (GLIBC_TUNABLES has
/// glibc.malloc.hugetlb set to 1 or 2).
bool hugePagesInUse();

/// Applies `mode` to the process's malloc. Keep is not applied when GLIBC_TUNABLES already sets a
/// malloc threshold (the operator's choice wins). Returns what is in effect, for the log:
/// "keep freed memory", "glibc defaults" or "GLIBC_TUNABLES", with ", huge pages" when
/// hugePagesInUse().
std::string tuneMalloc(MallocMode mode);

/// What the last tuneMalloc() returned ("glibc defaults" before any): for the daemon's startup line.
const std::string& mallocInEffect();

}  // namespace tessera::api
