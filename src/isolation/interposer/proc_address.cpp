// The two indirect ways to reach a driver function: dlsym and cuGetProcAddress.
//
// dlsym: an application (or the CUDA runtime) that dlopens libcuda.so.1 and looks functions up
// by name must get our wrappers, or it bypasses the limit. The override answers hooked cu*/nvml*
// names with the wrapper and tail-calls the C library for everything else, so dlsym(RTLD_NEXT)
// in other libraries still resolves relative to *their* caller.
//
// cuGetProcAddress(_v2): the CUDA runtime (12.x+) fetches every driver entry point this way,
// naming a base symbol ("cuMemAlloc") plus the CUDA version it was built for and a stream mode.
// We ask the real driver first, so its answer (found / not found / version not sufficient) is
// authoritative; then, if the function it returned is one we wrap, we hand out the wrapper of
// exactly that variant: the driver's pointer is matched against the real variants we resolved,
// and failing that (a driver whose table pointers differ from its exports) our own
// version/flags table picks the variant the same way the driver does.

#include <dlfcn.h>

#include <cstring>

#include "hooks.h"
#include "runtime.h"

using namespace tessera::cu;           // NOLINT: ABI vocabulary
using namespace tessera::interposer;   // NOLINT

namespace {

struct ProcEntry {
  const char* symbol;  ///< base name as passed to cuGetProcAddress
  int minVersion;      ///< first CUDA version (1000 * major + 10 * minor) this variant serves
  Sym variant;         ///< legacy-stream (default) variant
  Sym perThread;       ///< per-thread-default-stream variant (_ptsz / _ptds), or Sym::kCount
};

constexpr Sym kNone = Sym::kCount;

// Sorted by symbol, then version ascending. Versions from cudaTypedefs.h (PFN_<name>_v<version>).
constexpr ProcEntry kProcTable[] = {
    {"cuArray3DCreate", 2000, Sym::cuArray3DCreate, kNone},
    {"cuArray3DCreate", 3020, Sym::cuArray3DCreate_v2, kNone},
    {"cuArrayCreate", 2000, Sym::cuArrayCreate, kNone},
    {"cuArrayCreate", 3020, Sym::cuArrayCreate_v2, kNone},
    {"cuArrayDestroy", 2000, Sym::cuArrayDestroy, kNone},
    {"cuDeviceTotalMem", 2000, Sym::cuDeviceTotalMem, kNone},
    {"cuDeviceTotalMem", 3020, Sym::cuDeviceTotalMem_v2, kNone},
    {"cuGetProcAddress", 11030, Sym::cuGetProcAddress, kNone},
    {"cuGetProcAddress", 12000, Sym::cuGetProcAddress_v2, kNone},
    {"cuGraphAddMemAllocNode", 11040, Sym::cuGraphAddMemAllocNode, kNone},
    {"cuGraphAddNode", 12020, Sym::cuGraphAddNode, kNone},
    {"cuGraphAddNode", 12030, Sym::cuGraphAddNode_v2, kNone},
    {"cuGraphDestroy", 10000, Sym::cuGraphDestroy, kNone},
    {"cuGraphDestroyNode", 10000, Sym::cuGraphDestroyNode, kNone},
    {"cuGraphExecDestroy", 10000, Sym::cuGraphExecDestroy, kNone},
    {"cuGraphInstantiate", 10000, Sym::cuGraphInstantiate, kNone},
    {"cuGraphInstantiate", 11000, Sym::cuGraphInstantiate_v2, kNone},
    {"cuGraphInstantiate", 12000, Sym::cuGraphInstantiateWithFlags, kNone},
    {"cuGraphInstantiateWithFlags", 11040, Sym::cuGraphInstantiateWithFlags, kNone},
    {"cuGraphInstantiateWithParams", 12000, Sym::cuGraphInstantiateWithParams, Sym::cuGraphInstantiateWithParams_ptsz},
    {"cuGraphLaunch", 10000, Sym::cuGraphLaunch, Sym::cuGraphLaunch_ptsz},
    {"cuInit", 2000, Sym::cuInit, kNone},
    {"cuLaunchCooperativeKernel", 9000, Sym::cuLaunchCooperativeKernel, Sym::cuLaunchCooperativeKernel_ptsz},
    {"cuLaunchKernel", 4000, Sym::cuLaunchKernel, Sym::cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", 11060, Sym::cuLaunchKernelEx, Sym::cuLaunchKernelEx_ptsz},
    {"cuMemAlloc", 2000, Sym::cuMemAlloc, kNone},
    {"cuMemAlloc", 3020, Sym::cuMemAlloc_v2, kNone},
    {"cuMemAllocAsync", 11020, Sym::cuMemAllocAsync, Sym::cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, Sym::cuMemAllocFromPoolAsync, Sym::cuMemAllocFromPoolAsync_ptsz},
    {"cuMemAllocManaged", 6000, Sym::cuMemAllocManaged, kNone},
    {"cuMemAllocPitch", 2000, Sym::cuMemAllocPitch, kNone},
    {"cuMemAllocPitch", 3020, Sym::cuMemAllocPitch_v2, kNone},
    {"cuMemCreate", 10020, Sym::cuMemCreate, kNone},
    {"cuMemFree", 2000, Sym::cuMemFree, kNone},
    {"cuMemFree", 3020, Sym::cuMemFree_v2, kNone},
    {"cuMemFreeAsync", 11020, Sym::cuMemFreeAsync, Sym::cuMemFreeAsync_ptsz},
    {"cuMemGetInfo", 2000, Sym::cuMemGetInfo, kNone},
    {"cuMemGetInfo", 3020, Sym::cuMemGetInfo_v2, kNone},
    {"cuMemRelease", 10020, Sym::cuMemRelease, kNone},
    {"cuMipmappedArrayCreate", 5000, Sym::cuMipmappedArrayCreate, kNone},
    {"cuMipmappedArrayDestroy", 5000, Sym::cuMipmappedArrayDestroy, kNone},
};

// The wrapper to hand out for `symbol` given the driver's answer `driverFn`, or kNone.
Sym chooseVariant(const char* symbol, int cudaVersion, cuuint64_t flags, void* driverFn) {
  const ProcEntry* best = nullptr;
  const ProcEntry* oldest = nullptr;
  for (const ProcEntry& entry : kProcTable) {
    if (std::strcmp(entry.symbol, symbol) != 0) continue;
    if (oldest == nullptr) oldest = &entry;
    // 1. The driver returned exactly one of the real variants we resolved: wrap that one.
    if (realFn(entry.variant) == driverFn) return entry.variant;
    if (entry.perThread != kNone && realFn(entry.perThread) == driverFn) return entry.perThread;
    if (entry.minVersion <= cudaVersion) best = &entry;
  }
  if (oldest == nullptr) return kNone;  // not a function we wrap: pass the driver's answer through
  // The driver found a function we wrap at a version older than any we list: still wrap it (the
  // oldest variant) rather than let an allocator through uncharged.
  if (best == nullptr) best = oldest;
  // 2. Otherwise decide as the driver does: newest variant not newer than the requested version;
  //    the per-thread variant when asked for per-thread default-stream semantics.
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 && best->perThread != kNone) {
    return best->perThread;
  }
  return best->variant;
}

void substitute(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  Sym sym = chooseVariant(symbol, cudaVersion, flags, *pfn);
  if (sym == kNone) {
    TESSERA_TRACE("cuGetProcAddress(%s, %d, 0x%llx): passed through", symbol, cudaVersion,
                  static_cast<unsigned long long>(flags));
    return;
  }
  // Make sure the wrapper can reach the function the driver gave (normally already resolved).
  adoptRealFn(sym, *pfn);
  *pfn = symWrapper(sym);
  TESSERA_TRACE("cuGetProcAddress(%s, %d, 0x%llx): -> %s wrapper", symbol, cudaVersion,
                static_cast<unsigned long long>(flags), symName(sym));
}

}  // namespace

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  init();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (auto real = TESSERA_REAL_FN(cuGetProcAddress_v2)) {
    rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  } else if (auto legacy = TESSERA_REAL_FN(cuGetProcAddress)) {
    rc = legacy(symbol, pfn, cudaVersion, flags);
    if (symbolStatus != nullptr) {
      *symbolStatus = rc == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (rc == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr) {
    substitute(symbol, pfn, cudaVersion, flags);
  } else {
    TESSERA_TRACE("cuGetProcAddress_v2(%s, %d, 0x%llx) = %d", symbol ? symbol : "(null)", cudaVersion,
                  static_cast<unsigned long long>(flags), rc);
  }
  return rc;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  init();
  CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
  if (auto real = TESSERA_REAL_FN(cuGetProcAddress)) {
    rc = real(symbol, pfn, cudaVersion, flags);
  } else if (auto v2 = TESSERA_REAL_FN(cuGetProcAddress_v2)) {
    rc = v2(symbol, pfn, cudaVersion, flags, nullptr);
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (rc == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr) {
    substitute(symbol, pfn, cudaVersion, flags);
  } else {
    TESSERA_TRACE("cuGetProcAddress(%s, %d, 0x%llx) = %d", symbol ? symbol : "(null)", cudaVersion,
                  static_cast<unsigned long long>(flags), rc);
  }
  return rc;
}

// ---- dlsym ----------------------------------------------------------------------------------------

namespace {

void* nvmlWrapper(const char* name) {
  if (std::strcmp(name, "nvmlDeviceGetMemoryInfo") == 0) return reinterpret_cast<void*>(&::nvmlDeviceGetMemoryInfo);
  if (std::strcmp(name, "nvmlDeviceGetMemoryInfo_v2") == 0) {
    return reinterpret_cast<void*>(&::nvmlDeviceGetMemoryInfo_v2);
  }
  return nullptr;
}

// Out of line so that dlsym() itself stays a leaf that tail-calls the C library.
__attribute__((noinline)) void* hookedLookup(void* handle, const char* name) {
  void* wrapper = nullptr;
  if (name[0] == 'c') {
    Sym sym = hookByName(name);
    if (sym != Sym::kCount) wrapper = symWrapper(sym);
  } else {
    wrapper = nvmlWrapper(name);
  }
  if (wrapper == nullptr) return nullptr;
  // Only answer for a handle that really provides the name (a library without it must still
  // report "not found"). RTLD_NEXT is evaluated relative to this library, which is close enough:
  // every object that could define a driver symbol is loaded after the preloaded interposer.
  void* real = realDlsym()(handle, name);
  TESSERA_TRACE("dlsym(%p, %s) -> %s", handle, name, real != nullptr ? "wrapper" : "not found");
  return real != nullptr ? wrapper : nullptr;
}

}  // namespace

void* dlsym(void* handle, const char* name) noexcept {
  // <dlfcn.h> declares `name` nonnull, which lets the compiler drop a plain NULL test; callers do
  // pass NULL, so hide the value from the optimiser before testing it.
  const char* checked = name;
  asm("" : "+r"(checked));
  if (checked != nullptr && ((checked[0] == 'c' && checked[1] == 'u') ||
                          (checked[0] == 'n' && checked[1] == 'v' && checked[2] == 'm' && checked[3] == 'l'))) {
    void* wrapper = hookedLookup(handle, name);
    if (wrapper != nullptr) return wrapper;
  }
  // A tail call (the library is always built with optimisation and no stack protector), so the
  // C library sees our caller's return address and RTLD_NEXT keeps its meaning for the caller.
  return realDlsym()(handle, name);
}
