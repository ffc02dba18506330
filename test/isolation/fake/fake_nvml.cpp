// A fake libnvidia-ml.so.1 matching fake_cuda.cpp's devices (same UUIDs, same shared usage).

#include <time.h>

#include <cstdio>
#include <cstring>

#include "cuda_abi.h"
#include "fake_state.h"

using namespace tessera::cu;  // NOLINT
namespace fake = tessera::fake;

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {
fake::State* state() {
  static fake::State* s = fake::mapState(std::getenv("FAKE_CUDA_STATE"));
  return s;
}
int indexOf(nvmlDevice_t d) { return static_cast<int>(reinterpret_cast<std::uintptr_t>(d)) - 1; }
bool valid(nvmlDevice_t d) { return indexOf(d) >= 0 && indexOf(d) < fake::kDevices; }
}  // namespace

FAKE_API nvmlReturn_t nvmlInit_v2() { return NVML_SUCCESS; }
FAKE_API nvmlReturn_t nvmlInit() { return NVML_SUCCESS; }
FAKE_API nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }
FAKE_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  if (!n) return NVML_ERROR_INVALID_ARGUMENT;
  *n = fake::kDevices;
  return NVML_SUCCESS;
}
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (!d || i >= static_cast<unsigned>(fake::kDevices)) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(i + 1));
  return NVML_SUCCESS;
}
FAKE_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out, unsigned int len) {
  if (!valid(d) || !out || len < 41) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned char b[16];
  fake::deviceUuid(indexOf(d), b);
  std::snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return NVML_SUCCESS;
}
FAKE_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out, unsigned int len) {
  if (!valid(d) || !out || len < 16) return NVML_ERROR_INVALID_ARGUMENT;
  std::snprintf(out, len, "Fake GPU %d", indexOf(d));
  return NVML_SUCCESS;
}
FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  if (!valid(d) || !m) return NVML_ERROR_INVALID_ARGUMENT;
  std::uint64_t used = state()->devices[indexOf(d)].used.load();
  m->total = fake::deviceMemory();
  m->used = used;
  m->free = m->total - used;
  return NVML_SUCCESS;
}
FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* m) {
  if (!valid(d) || !m || m->version != nvmlMemory_v2) return NVML_ERROR_INVALID_ARGUMENT;
  std::uint64_t used = state()->devices[indexOf(d)].used.load();
  m->total = fake::deviceMemory();
  m->reserved = 64ULL << 20;
  m->used = used;
  m->free = m->total - used - m->reserved;
  return NVML_SUCCESS;
}
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* d) {
  if (!uuid || !d) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < fake::kDevices; ++i) {
    char text[64];
    nvmlDevice_t candidate = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(i + 1));
    if (nvmlDeviceGetUUID(candidate, text, sizeof text) == NVML_SUCCESS && std::strcmp(text, uuid) == 0) {
      *d = candidate;
      return NVML_SUCCESS;
    }
  }
  return 6;  // NVML_ERROR_NOT_FOUND
}

namespace {
// The processes using device `d`, as the fake driver recorded them. FAKE_NVML_HIDE_PROCESSES=1
// lists none, as NVML does in a container whose pid namespace the driver does not translate.
template <class Info>
nvmlReturn_t listProcesses(nvmlDevice_t d, unsigned int* count, Info* infos) {
  if (!valid(d) || !count) return NVML_ERROR_INVALID_ARGUMENT;
  const char* hide = std::getenv("FAKE_NVML_HIDE_PROCESSES");
  unsigned int n = 0;
  const unsigned int capacity = infos ? *count : 0;
  bool tooSmall = false;
  for (const auto& p : state()->processes) {
    const int pid = p.pid.load();
    const std::uint64_t used = p.used[indexOf(d)].load();
    if (pid == 0 || used == 0 || (hide && std::strcmp(hide, "1") == 0)) continue;
    if (n < capacity) {
      infos[n] = Info{};
      infos[n].pid = static_cast<unsigned int>(pid);
      infos[n].usedGpuMemory = used;
    } else {
      tooSmall = true;
    }
    ++n;
  }
  *count = n;
  return tooSmall ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}
}  // namespace

FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_t* p) {
  return listProcesses(d, n, p);
}
FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_t* p) {
  return listProcesses(d, n, p);
}
FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_v1_t* p) {
  return listProcesses(d, n, p);
}

// Per-process SM utilization over the last FAKE_NVML_UTIL_WINDOW_MS (default 200) ms: the share of
// that window the process's kernels occupied the device (fake_cuda.cpp, "kernel launches"). One
// sample per process that used the device; NVML_ERROR_NOT_FOUND when none did, as NVML answers.
FAKE_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t* samples,
                                                      unsigned int* count, unsigned long long /*lastSeen*/) {
  if (!valid(d) || !count) return NVML_ERROR_INVALID_ARGUMENT;
  const char* env = std::getenv("FAKE_NVML_UTIL_WINDOW_MS");
  const std::uint64_t windowNs = (env != nullptr ? std::strtoull(env, nullptr, 10) : 200) * 1000000ULL;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::uint64_t now = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);
  const unsigned long long stamp = static_cast<unsigned long long>(wall.tv_sec) * 1000000ULL + wall.tv_nsec / 1000;
  const unsigned int capacity = samples ? *count : 0;
  unsigned int n = 0;
  for (const auto& p : state()->processes) {
    const int pid = p.pid.load();
    if (pid == 0) continue;
    const std::uint64_t busy = fake::busyWithin(p, indexOf(d), now - windowNs, now);
    if (busy == 0) continue;
    if (n < capacity) {
      samples[n] = nvmlProcessUtilizationSample_t{};
      samples[n].pid = static_cast<unsigned int>(pid);
      samples[n].timeStamp = stamp;
      samples[n].smUtil = static_cast<unsigned int>((busy * 100 + windowNs / 2) / windowNs);
    }
    ++n;
  }
  if (n == 0) return NVML_ERROR_NOT_FOUND;
  const bool tooSmall = n > capacity;
  *count = n;
  return tooSmall ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}
