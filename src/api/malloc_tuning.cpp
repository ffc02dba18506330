#include "tessera/api/malloc_tuning.h"

#include <malloc.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace tessera::api {

namespace {

constexpr const char* kHugeTlb = "glibc.malloc.hugetlb";
/// Set before the re-exec: a process started with it never re-executes again (should glibc ever
/// drop GLIBC_TUNABLES, as it does for set-user-ID programs, there is no loop).
constexpr const char* kReexecMark = "TESSERA_MALLOC_REEXEC";

std::string& lastMode() {
  static std::string mode = "glibc defaults";
  return mode;
}

/// Whether the kernel gives transparent huge pages to a region that asks (`always` or `madvise`).
bool kernelHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return false;
  return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}

}  // namespace

// glibc.malloc.hugetlb came with glibc 2.35 (older ones ignore it).
#if defined(__GLIBC__) && defined(__linux__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define TESSERA_MALLOC_HUGETLB 1
#endif

void useHugePages(char** argv) {
#if defined(TESSERA_MALLOC_HUGETLB)
  if (const char* mark = std::getenv(kReexecMark); mark && *mark) return;
  if (const char* off = std::getenv("TESSERA_MALLOC_HUGEPAGES"); off && std::strcmp(off, "0") == 0) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, kHugeTlb)) return;
  if (!kernelHugePages()) return;
  const std::string before = tunables ? tunables : "";
  const std::string with = (before.empty() ? "" : before + ":") + kHugeTlb + "=1";
  setenv("GLIBC_TUNABLES", with.c_str(), 1);
  setenv(kReexecMark, "1", 1);
  execv("/proc/self/exe", argv);
  // The exec failed (no /proc, say): on as things are.
  if (tunables) setenv("GLIBC_TUNABLES", before.c_str(), 1);
  else unsetenv("GLIBC_TUNABLES");
  unsetenv(kReexecMark);
#else
  (void)argv;
#endif
}

bool hugePagesInUse() {
#if defined(TESSERA_MALLOC_HUGETLB)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const char* at = tunables ? std::strstr(tunables, kHugeTlb) : nullptr;
  if (!at) return false;
  at += std::strlen(kHugeTlb);
  return at[0] == '=' && (at[1] == '1' || at[1] == '2');
#else
  return false;
#endif
}

namespace {

/// tuneMalloc()'s work (tuneMalloc keeps what it returns for mallocInEffect()).
std::string applyMalloc(MallocMode mode) {
  if (mode == MallocMode::Default) return "glibc defaults";
  const std::string pages = hugePagesInUse() ? ", huge pages" : "";
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && (std::strstr(tunables, "malloc.trim_threshold") || std::strstr(tunables, "malloc.mmap_threshold")))
    return "GLIBC_TUNABLES" + pages;
#if defined(__GLIBC__)
  // glibc refuses an mmap threshold above half its largest heap (32 MiB on 64-bit); larger blocks
  // keep their own mmaps. Setting either value also stops glibc adjusting the mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  return "keep freed memory" + pages;
#else
  return "allocator defaults";
#endif
}

}  // namespace

const std::string& mallocInEffect() { return lastMode(); }

std::string tuneMalloc(MallocMode mode) {
  return lastMode() = applyMalloc(mode);
}

}  // namespace tessera::api
