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

/// Applies `mode` to the process's malloc. Keep is not applied when GLIBC_TUNABLES already sets a
/// malloc threshold (the operator's choice wins). Returns what is in effect, for the log:
/// "keep freed memory", "glibc defaults" or "GLIBC_TUNABLES".
std::string tuneMalloc(MallocMode mode);

}  // namespace tessera::api
