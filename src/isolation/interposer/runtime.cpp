#include "runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core_limit.h"
#include "glibc_compat.h"
#include "hooks.h"
#include "region.h"

namespace tessera::interposer {

namespace {

constexpr const char* kSymNames[] = {
#define TESSERA_HOOK(name) #name,
#define TESSERA_REAL(name) #name,
#include "symbols.def"
};
static_assert(sizeof(kSymNames) / sizeof(kSymNames[0]) == kSymCount);

// Highest device ordinal we map; larger ordinals fail closed.
constexpr int kMaxOrdinals = 64;

// --- process-wide state: constant-initialised, written by init() under pthread_once -----------
constinit pthread_once_t gOnce = PTHREAD_ONCE_INIT;
constinit std::atomic<bool> gInitDone{false};
constinit Config gConfig{};
constinit Region gRegion{};
constinit bool gFailClosed = false;
constinit char gFailReason[768] = {};
constinit std::atomic<bool> gFailReported{false};
constinit std::atomic<bool> gOomReported{false};
constinit std::atomic<bool> gAttached{false};
constinit std::atomic<int> gLogLevel{-1};  // -1 not read yet, 0 info, 1 debug
constinit std::atomic<void*> gReal[kSymCount] = {};
constinit std::atomic<int> gOrdinalToIndex[kMaxOrdinals] = {};  // region index + 1; 0 unknown
constinit std::uint64_t gLimits[kMaxDevices] = {};                // effective limit per index
constinit pthread_mutex_t gDeviceMutex = PTHREAD_MUTEX_INITIALIZER;
// Per region index: 1 once this process's context on that GPU is charged (docs: "Context memory").
constinit std::atomic<unsigned char> gContextCharged[kMaxDevices] = {};

constinit PtrTable<18> gDevicePointers{};
constinit PtrTable<14> gArrays{};
constinit PtrTable<14> gPhysicalHandles{};

void vlog(const char* level, const char* fmt, va_list args) {
  char line[1024];
  int n = std::snprintf(line, sizeof line, "tessera-cuda[%d]: %s", static_cast<int>(getpid()), level);
  if (n < 0) return;
  int m = std::vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n), fmt, args);
  if (m < 0) return;
  std::size_t len = static_cast<std::size_t>(n) + static_cast<std::size_t>(m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  // One write() per line so concurrent processes do not interleave within a line.
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;
}

void afterForkInChild() {
  // The child has its own pid: it must charge a slot of its own (claimed lazily), and it has no
  // CUDA context of its own yet.
  gRegion.detachAfterFork();
  gAttached.store(false, std::memory_order_release);
  for (auto& charged : gContextCharged) charged.store(0, std::memory_order_relaxed);
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  std::memcpy(&gDeviceMutex, &fresh, sizeof fresh);
  coreLimitAfterFork();
}

ProcessIdentity identity() {
  ProcessIdentity who;
  who.podUid = gConfig.podUid;
  who.podNamespace = gConfig.podNamespace;
  who.podName = gConfig.podName;
  who.container = gConfig.containerName;
  return who;
}

void failClosedBecause(const char* reason) {
  if (gFailClosed) return;
  gFailClosed = true;
  std::snprintf(gFailReason, sizeof gFailReason, "%s", reason);
}

void initOnce() {
  loadConfig([](const char* name) -> const char* { return std::getenv(name); }, &gConfig);
  gLogLevel.store(gConfig.logLevel == LogLevel::kDebug ? 1 : 0, std::memory_order_relaxed);
  if (!gConfig.valid) failClosedBecause(gConfig.error);
  if (gConfig.valid) coreLimitConfigure(gConfig);

  // RTLD_NOLOAD first: an application that already loaded a particular libcuda keeps it.
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == nullptr) cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == nullptr) {
    const char* err = dlerror();
    logError("cannot load the CUDA driver libcuda.so.1 (%s); every CUDA call will fail", err ? err : "unknown error");
  } else {
    // A lookup through the driver's own handle finds the driver's definition, not our export.
    DlsymFn lookup = realDlsym();
    for (int i = 0; i < kSymCount; ++i) gReal[i].store(lookup(cuda, kSymNames[i]), std::memory_order_release);
  }

  if (!gFailClosed) {
    char error[512];
    if (!gRegion.open(gConfig.regionPath, error, sizeof error)) {
      failClosedBecause(error);
    } else if (!gRegion.attachProcess(identity(), error, sizeof error)) {
      failClosedBecause(error);
    } else {
      gAttached.store(true, std::memory_order_release);
    }
  }
  pthread_atfork(nullptr, nullptr, afterForkInChild);
  gInitDone.store(true, std::memory_order_release);
  TESSERA_TRACE("initialised: limit=%llu region=%s fail_closed=%d", static_cast<unsigned long long>(gConfig.defaultLimit),
                gConfig.regionPath, gFailClosed ? 1 : 0);
}

// Slow path after fork: the child claims a slot of its own.
bool ensureAttached() {
  if (gAttached.load(std::memory_order_acquire)) return true;
  pthread_mutex_lock(&gDeviceMutex);
  bool ok = gAttached.load(std::memory_order_acquire);
  if (!ok && !gFailClosed) {
    char error[512];
    ok = gRegion.attachProcess(identity(), error, sizeof error);
    if (ok) {
      gAttached.store(true, std::memory_order_release);
    } else {
      failClosedBecause(error);
    }
  }
  pthread_mutex_unlock(&gDeviceMutex);
  return ok;
}

cu::CUresult resolveOrdinal(cu::CUdevice ordinal, int* index) {
  pthread_mutex_lock(&gDeviceMutex);
  int known = gOrdinalToIndex[ordinal].load(std::memory_order_acquire);
  if (known != 0) {
    pthread_mutex_unlock(&gDeviceMutex);
    *index = known - 1;
    return cu::CUDA_SUCCESS;
  }
  cu::CUuuid raw{};
  cu::CUresult rc = cu::CUDA_ERROR_NOT_INITIALIZED;
  if (auto getUuid = TESSERA_REAL_HELPER(cuDeviceGetUuid_v2)) {
    rc = getUuid(&raw, ordinal);
  } else if (auto getUuidV1 = TESSERA_REAL_HELPER(cuDeviceGetUuid)) {
    rc = getUuidV1(&raw, ordinal);
  }
  if (rc != cu::CUDA_SUCCESS) {
    pthread_mutex_unlock(&gDeviceMutex);
    logError("cannot read the UUID of GPU %d (error %d); its allocations are refused", ordinal, rc);
    return rc;
  }
  Uuid uuid{};
  std::memcpy(uuid.bytes, raw.bytes, 16);
  std::uint64_t limit = 0;
  int found = gRegion.registerDevice(uuid, gConfig.limitFor(uuid), &limit);
  if (found < 0) {
    pthread_mutex_unlock(&gDeviceMutex);
    logError("the shared accounting file has no room for GPU %d (at most %d GPUs); its allocations are refused",
             ordinal, kMaxDevices);
    return cu::CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (limit != gConfig.limitFor(uuid)) {
    char text[48];
    formatUuid(uuid, text);
    logError("another process of this container registered %s with limit %llu; using the lower limit %llu", text,
             static_cast<unsigned long long>(gRegion.layout()->devices[found].limit),
             static_cast<unsigned long long>(limit));
  }
  gLimits[found] = limit;
  gOrdinalToIndex[ordinal].store(found + 1, std::memory_order_release);
  pthread_mutex_unlock(&gDeviceMutex);
  char text[48];
  formatUuid(uuid, text);
  TESSERA_TRACE("device %d is %s (slot %d), limit %llu bytes", ordinal, text, found,
                static_cast<unsigned long long>(limit));
  *index = found;
  return cu::CUDA_SUCCESS;
}

}  // namespace

const char* symName(Sym sym) { return kSymNames[static_cast<int>(sym)]; }

void* symWrapper(Sym sym) {
  switch (sym) {
#define TESSERA_HOOK(name) \
  case Sym::name:          \
    return reinterpret_cast<void*>(&::name);
#include "symbols.def"
    default:
      return nullptr;
  }
}

Sym hookByName(const char* name) {
  static constexpr Sym kHooks[] = {
#define TESSERA_HOOK(name) Sym::name,
#include "symbols.def"
  };
  for (Sym sym : kHooks) {
    if (std::strcmp(kSymNames[static_cast<int>(sym)], name) == 0) return sym;
  }
  return Sym::kCount;
}

DlsymFn realDlsym() {
  static constinit std::atomic<DlsymFn> cached{nullptr};
  DlsymFn fn = cached.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  // glibc >= 2.34 exports dlsym@@GLIBC_2.34 from libc; older ones GLIBC_2.2.5 (x86-64) or
  // GLIBC_2.17 (aarch64) from libdl. RTLD_NEXT from here reaches them, skipping our override.
  static constexpr const char* kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (const char* version : kVersions) {
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (fn != nullptr) break;
  }
  if (fn == nullptr) {
    static constexpr char kMsg[] = "tessera-cuda: cannot find the C library's dlsym; aborting\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    (void)ignored;
    abort();
  }
  cached.store(fn, std::memory_order_release);
  return fn;
}

void init() {
  if (gInitDone.load(std::memory_order_acquire)) return;
  pthread_once(&gOnce, initOnce);
}

void* realFn(Sym sym) { return gReal[static_cast<int>(sym)].load(std::memory_order_acquire); }

void* adoptRealFn(Sym sym, void* fn) {
  void* expected = nullptr;
  std::atomic<void*>& slot = gReal[static_cast<int>(sym)];
  if (slot.compare_exchange_strong(expected, fn, std::memory_order_acq_rel)) return fn;
  return expected;
}

cu::CUresult missingEntryPoint(Sym sym) {
  TESSERA_TRACE("%s: the CUDA driver does not provide it", symName(sym));
  return realFn(Sym::cuInit) == nullptr ? cu::CUDA_ERROR_NOT_INITIALIZED : cu::CUDA_ERROR_NOT_FOUND;
}

bool failClosed() {
  if (!gFailClosed) return false;
  if (!gFailReported.exchange(true, std::memory_order_relaxed)) {
    logError("GPU memory isolation is requested (libtessera-cuda is loaded) but cannot be enforced: %s. "
             "Failing closed: CUDA initialisation and GPU memory allocations are refused.",
             gFailReason);
  }
  return true;
}

cu::CUresult deviceIndex(cu::CUdevice ordinal, int* index) {
  if (failClosed()) return cu::CUDA_ERROR_OUT_OF_MEMORY;  // refuse before asking the driver anything
  if (ordinal < 0 || ordinal >= kMaxOrdinals) {
    logError("GPU ordinal %d is beyond the %d the interposer supports; its allocations are refused", ordinal,
             kMaxOrdinals);
    return cu::CUDA_ERROR_OUT_OF_MEMORY;
  }
  int known = gOrdinalToIndex[ordinal].load(std::memory_order_acquire);
  if (known != 0) {
    *index = known - 1;
    return cu::CUDA_SUCCESS;
  }
  if (gRegion.layout() == nullptr) return cu::CUDA_ERROR_OUT_OF_MEMORY;  // fail closed
  return resolveOrdinal(ordinal, index);
}

cu::CUresult currentDevice(int* index, cu::CUdevice* ordinalOut) {
  if (failClosed()) return cu::CUDA_ERROR_OUT_OF_MEMORY;
  auto getDevice = TESSERA_REAL_HELPER(cuCtxGetDevice);
  if (getDevice == nullptr) return cu::CUDA_ERROR_NOT_INITIALIZED;
  cu::CUdevice ordinal = -1;
  cu::CUresult rc = getDevice(&ordinal);
  if (rc != cu::CUDA_SUCCESS) return rc;
  if (ordinalOut != nullptr) *ordinalOut = ordinal;
  return deviceIndex(ordinal, index);
}

namespace {

cu::CUresult refuse(int index, std::uint64_t bytes, std::uint64_t used, const char* api) {
  gRegion.countRefusal(index);
  if (!gOomReported.exchange(true, std::memory_order_relaxed)) {
    char text[48];
    Uuid uuid{};
    std::memcpy(uuid.bytes, gRegion.layout()->devices[index].uuid, 16);
    formatUuid(uuid, text);
    logError("GPU memory limit reached on %s: %s of %llu bytes refused with CUDA_ERROR_OUT_OF_MEMORY "
             "(%llu of %llu bytes already in use by this pod; GPU_MEMORY_LIMIT). "
             "Further refusals in this process are not reported.",
             text, api, static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(used),
             static_cast<unsigned long long>(gLimits[index]));
  }
  TESSERA_TRACE("%s: %llu bytes refused (used %llu, limit %llu)", api, static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(used), static_cast<unsigned long long>(gLimits[index]));
  return cu::CUDA_ERROR_OUT_OF_MEMORY;
}

// Charges this process's context on GPU `index` once: NVML's figure for this process when it has
// one, else TESSERA_CONTEXT_RESERVE_MIB. Refused (and tried again later) when it does not fit.
bool chargeContext(int index, std::uint64_t* usedOut) {
  pthread_mutex_lock(&gDeviceMutex);
  bool ok = gContextCharged[index].load(std::memory_order_acquire) != 0;
  if (!ok) {
    Uuid uuid{};
    std::memcpy(uuid.bytes, gRegion.layout()->devices[index].uuid, 16);
    std::uint64_t measured = 0;
    const bool viaNvml = measureContextBytes(uuid, &measured);
    std::uint64_t bytes = gConfig.contextReserve;
    if (viaNvml) {
      const std::uint64_t self = gRegion.usedBySelf(index);  // our allocations are in NVML's figure too
      bytes = measured > self ? measured - self : 0;
    }
    ok = bytes == 0 || gRegion.reserve(index, bytes, gLimits[index], usedOut);
    if (ok) gContextCharged[index].store(1, std::memory_order_release);
    TESSERA_TRACE("context on region device %d: %llu bytes (%s) %s", index, static_cast<unsigned long long>(bytes),
                  viaNvml ? "measured by NVML" : "TESSERA_CONTEXT_RESERVE_MIB", ok ? "charged" : "do not fit");
  }
  pthread_mutex_unlock(&gDeviceMutex);
  return ok;
}

}  // namespace

bool contextReady(int index) {
  if (gContextCharged[index].load(std::memory_order_acquire) != 0) return true;
  if (failClosed() || !ensureAttached()) return false;
  std::uint64_t used = 0;
  return chargeContext(index, &used);
}

cu::CUresult charge(int index, std::uint64_t bytes, const char* api) {
  if (failClosed() || !ensureAttached()) {
    failClosed();
    return cu::CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::uint64_t used = 0;
  if (gContextCharged[index].load(std::memory_order_acquire) == 0 && !chargeContext(index, &used)) {
    return refuse(index, bytes, used, api);
  }
  if (gRegion.reserve(index, bytes, gLimits[index], &used)) return cu::CUDA_SUCCESS;
  return refuse(index, bytes, used, api);
}

void credit(int index, std::uint64_t bytes) {
  if (!gAttached.load(std::memory_order_acquire)) return;  // charged by the parent before fork
  gRegion.release(index, bytes);
}

int podPids(int* out, int max) {
  int n = 0;
  const int self = static_cast<int>(getpid());
  if (n < max) out[n++] = self;
  const RegionLayout* layout = gRegion.layout();
  if (layout == nullptr) return n;
  for (int i = 0; i < kMaxProcs && n < max; ++i) {
    const int pid = layout->procs[i].pid.load(std::memory_order_relaxed);
    if (pid != 0 && pid != self) out[n++] = pid;
  }
  return n;
}

std::uint64_t limitOf(int index) { return gLimits[index]; }
std::uint64_t usedOf(int index) { return gRegion.used(index); }

void limitAndUsedByUuid(const Uuid& uuid, std::uint64_t* limit, std::uint64_t* used) {
  *limit = gFailClosed ? 0 : gConfig.limitFor(uuid);
  *used = 0;
  if (gRegion.layout() == nullptr) return;
  int index = gRegion.findDevice(uuid);
  if (index < 0) return;
  std::uint64_t recorded = gRegion.layout()->devices[index].limit;
  if (recorded < *limit) *limit = recorded;
  *used = gRegion.used(index);
}

PtrTable<18>& devicePointers() { return gDevicePointers; }
PtrTable<14>& arrays() { return gArrays; }
PtrTable<14>& physicalHandles() { return gPhysicalHandles; }

namespace {
template <class Table>
bool trackIn(Table& table, std::uint64_t key, std::uint64_t packed) {
  if (table.insert(key, packed)) return true;
  logError("allocation tracking table is full (more than %llu live allocations in one probe window); refusing "
           "the allocation",
           static_cast<unsigned long long>(Table::kCapacity));
  return false;
}
}  // namespace

bool track(PtrTable<18>& table, std::uint64_t key, std::uint64_t packed) { return trackIn(table, key, packed); }
bool track(PtrTable<14>& table, std::uint64_t key, std::uint64_t packed) { return trackIn(table, key, packed); }

bool debugEnabled() {
  int level = gLogLevel.load(std::memory_order_relaxed);
  if (level < 0) {
    // Before init (e.g. from the dlsym hook): read the variable directly.
    const char* env = std::getenv("TESSERA_ISOLATION_LOG");
    level = (env != nullptr && std::strcmp(env, "debug") == 0) ? 1 : 0;
    gLogLevel.store(level, std::memory_order_relaxed);
  }
  return level == 1;
}

void logDebug(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vlog("debug: ", fmt, args);
  va_end(args);
}

void logError(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vlog("", fmt, args);
  va_end(args);
}

}  // namespace tessera::interposer
