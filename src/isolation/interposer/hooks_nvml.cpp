// NVML memory queries report the container's limit, like cuMemGetInfo.
//
// The real functions come from libnvidia-ml.so.1, opened on first use (an application calling
// these has normally loaded it already). The GPU is identified by its UUID, the same key the CUDA
// side uses, so NVML and CUDA agree on usage whatever the device ordering.

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <time.h>

#include <atomic>
#include <cstring>

#include "glibc_compat.h"
#include "hooks.h"
#include "runtime.h"

using namespace tessera::cu;           // NOLINT: ABI vocabulary
using namespace tessera::interposer;   // NOLINT

namespace {

using GetMemoryInfo = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using GetMemoryInfoV2 = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
using GetUuid = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using Init = nvmlReturn_t (*)();
using GetHandleByUuid = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using GetProcesses = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using GetProcessesV1 = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
using GetProcessUtilization = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                               unsigned long long);

constinit pthread_once_t gNvmlOnce = PTHREAD_ONCE_INIT;
constinit GetMemoryInfo gGetMemoryInfo = nullptr;
constinit GetMemoryInfoV2 gGetMemoryInfoV2 = nullptr;
constinit GetUuid gGetUuid = nullptr;
constinit Init gInit = nullptr;
constinit GetHandleByUuid gGetHandleByUuid = nullptr;
constinit GetProcesses gGetProcesses = nullptr;  // _v3, else _v2 (same struct)
constinit GetProcessesV1 gGetProcessesV1 = nullptr;
constinit GetProcessUtilization gGetProcessUtilization = nullptr;  // the compute limit (core_limit.cpp)

void loadNvml() {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (nvml == nullptr) nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (nvml == nullptr) {
    const char* err = dlerror();
    logError("cannot load libnvidia-ml.so.1 (%s); NVML memory queries fail", err ? err : "unknown error");
    return;
  }
  DlsymFn lookup = realDlsym();
  gGetMemoryInfo = reinterpret_cast<GetMemoryInfo>(lookup(nvml, "nvmlDeviceGetMemoryInfo"));
  gGetMemoryInfoV2 = reinterpret_cast<GetMemoryInfoV2>(lookup(nvml, "nvmlDeviceGetMemoryInfo_v2"));
  gGetUuid = reinterpret_cast<GetUuid>(lookup(nvml, "nvmlDeviceGetUUID"));
  // For measuring this process's context (runtime.cpp, chargeContext).
  gInit = reinterpret_cast<Init>(lookup(nvml, "nvmlInit_v2"));
  gGetHandleByUuid = reinterpret_cast<GetHandleByUuid>(lookup(nvml, "nvmlDeviceGetHandleByUUID"));
  gGetProcesses = reinterpret_cast<GetProcesses>(lookup(nvml, "nvmlDeviceGetComputeRunningProcesses_v3"));
  if (gGetProcesses == nullptr) {
    gGetProcesses = reinterpret_cast<GetProcesses>(lookup(nvml, "nvmlDeviceGetComputeRunningProcesses_v2"));
  }
  gGetProcessesV1 = reinterpret_cast<GetProcessesV1>(lookup(nvml, "nvmlDeviceGetComputeRunningProcesses"));
  gGetProcessUtilization = reinterpret_cast<GetProcessUtilization>(lookup(nvml, "nvmlDeviceGetProcessUtilization"));
}

// This process's entry in a process list, or NVML_VALUE_NOT_AVAILABLE.
template <class Info>
unsigned long long ownUsage(const Info* list, unsigned int count) {
  const unsigned int self = static_cast<unsigned int>(getpid());
  for (unsigned int i = 0; i < count; ++i) {
    if (list[i].pid == self) return list[i].usedGpuMemory;
  }
  return NVML_VALUE_NOT_AVAILABLE;
}

void initNvml() {
  init();
  pthread_once(&gNvmlOnce, loadNvml);
}

// The limit and the container's usage for `device`; limit 0 when it cannot be identified.
void limitForNvmlDevice(nvmlDevice_t device, std::uint64_t* limit, std::uint64_t* used) {
  *limit = 0;
  *used = 0;
  if (failClosed() || gGetUuid == nullptr) return;
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (gGetUuid(device, text, sizeof text) != NVML_SUCCESS) return;
  Uuid uuid{};
  if (!parseUuid(text, std::strlen(text), &uuid)) return;
  limitAndUsedByUuid(uuid, limit, used);
}

void clamp(std::uint64_t limit, std::uint64_t used, unsigned long long* total, unsigned long long* freeOut,
           unsigned long long* usedOut) {
  if (limit > *total) limit = *total;
  std::uint64_t available = used >= limit ? 0 : limit - used;
  if (available > *freeOut) available = *freeOut;
  *total = limit;
  *freeOut = available;
  *usedOut = used > limit ? limit : used;
}

}  // namespace

bool tessera::interposer::measureContextBytes(const Uuid& uuid, std::uint64_t* bytes) {
  initNvml();
  if (gInit == nullptr || gGetHandleByUuid == nullptr || (gGetProcesses == nullptr && gGetProcessesV1 == nullptr)) {
    return false;
  }
  if (gInit() != NVML_SUCCESS) return false;  // reference-counted by NVML: harmless if the app did it too
  char text[48];
  formatUuid(uuid, text);
  nvmlDevice_t device = nullptr;
  if (gGetHandleByUuid(text, &device) != NVML_SUCCESS) return false;
  // A fixed buffer: 64 processes on one GPU is plenty; more, and we fall back to the default.
  constexpr unsigned int kMaxListed = 64;
  unsigned long long usage = NVML_VALUE_NOT_AVAILABLE;
  unsigned int count = kMaxListed;
  if (gGetProcesses != nullptr) {
    nvmlProcessInfo_t list[kMaxListed];
    if (gGetProcesses(device, &count, list) == NVML_SUCCESS) usage = ownUsage(list, count);
  } else {
    nvmlProcessInfo_v1_t list[kMaxListed];
    if (gGetProcessesV1(device, &count, list) == NVML_SUCCESS) usage = ownUsage(list, count);
  }
  TESSERA_TRACE("NVML per-process usage of %s for pid %d: %llu", text, static_cast<int>(getpid()), usage);
  if (usage == NVML_VALUE_NOT_AVAILABLE) return false;
  *bytes = usage;
  return true;
}

bool tessera::interposer::sampleSmUtilization(const Uuid& uuid, const int* pids, int count, int* pod, int* total,
                                              bool* podSeen) {
  initNvml();
  *pod = 0;
  *total = 0;
  *podSeen = false;
  if (gInit == nullptr || gGetHandleByUuid == nullptr || gGetProcessUtilization == nullptr) return false;
  // Once per process (NVML counts initialisations; the watcher asks ten times a second).
  static constinit std::atomic<bool> initialised{false};
  if (!initialised.load(std::memory_order_acquire)) {
    if (gInit() != NVML_SUCCESS) return false;
    initialised.store(true, std::memory_order_release);
  }
  char text[48];
  formatUuid(uuid, text);
  nvmlDevice_t device = nullptr;
  if (gGetHandleByUuid(text, &device) != NVML_SUCCESS) return false;
  // Samples of the last second (NVML keeps one per process that used the GPU in its last period).
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const unsigned long long since =
      (static_cast<unsigned long long>(now.tv_sec) - 1) * 1000000ULL + static_cast<unsigned long long>(now.tv_nsec) / 1000;
  constexpr unsigned int kMaxSamples = 128;
  nvmlProcessUtilizationSample_t samples[kMaxSamples];
  unsigned int n = kMaxSamples;
  const nvmlReturn_t rc = gGetProcessUtilization(device, samples, &n, since);
  if (rc == NVML_ERROR_NOT_FOUND) return true;  // no process used the GPU lately
  if (rc != NVML_SUCCESS) return false;
  if (n > kMaxSamples) n = kMaxSamples;
  for (unsigned int i = 0; i < n; ++i) {
    const int util = samples[i].smUtil > 100 ? 100 : static_cast<int>(samples[i].smUtil);
    *total += util;
    for (int p = 0; p < count; ++p) {
      if (static_cast<unsigned int>(pids[p]) == samples[i].pid) {
        *pod += util;
        *podSeen = true;
        break;
      }
    }
  }
  if (*total > 100) *total = 100;
  if (*pod > 100) *pod = 100;
  return true;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  initNvml();
  if (gGetMemoryInfo == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = gGetMemoryInfo(device, memory);
  if (rc != NVML_SUCCESS) return rc;
  std::uint64_t limit = 0, used = 0;
  limitForNvmlDevice(device, &limit, &used);
  clamp(limit, used, &memory->total, &memory->free, &memory->used);
  TESSERA_TRACE("nvmlDeviceGetMemoryInfo = 0 total=%llu free=%llu used=%llu", memory->total, memory->free,
                memory->used);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  initNvml();
  if (gGetMemoryInfoV2 == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = gGetMemoryInfoV2(device, memory);
  if (rc != NVML_SUCCESS) return rc;
  std::uint64_t limit = 0, used = 0;
  limitForNvmlDevice(device, &limit, &used);
  // Driver-reserved memory is outside the container's budget: total = used + free.
  memory->reserved = 0;
  clamp(limit, used, &memory->total, &memory->free, &memory->used);
  TESSERA_TRACE("nvmlDeviceGetMemoryInfo_v2 = 0 total=%llu free=%llu used=%llu", memory->total, memory->free,
                memory->used);
  return NVML_SUCCESS;
}
