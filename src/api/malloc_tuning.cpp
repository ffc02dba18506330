#include "tessera/api/malloc_tuning.h"

#include <malloc.h>

#include <climits>
#include <cstdlib>
#include <cstring>

namespace tessera::api {

std::string tuneMalloc(MallocMode mode) {
  if (mode == MallocMode::Default) return "glibc defaults";
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && (std::strstr(tunables, "malloc.trim_threshold") || std::strstr(tunables, "malloc.mmap_threshold")))
    return "GLIBC_TUNABLES";
#if defined(__GLIBC__)
  // glibc refuses an mmap threshold above half its largest heap (32 MiB on 64-bit); larger blocks
  // keep their own mmaps. Setting either value also stops glibc adjusting the mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  return "keep freed memory";
#else
  return "allocator defaults";
#endif
}

}  // namespace tessera::api
