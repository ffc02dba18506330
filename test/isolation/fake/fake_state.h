#pragma once
// State of the fake CUDA driver that tests inspect: per-device bytes in use and the driver's own
// high-water mark, plus call counters per entry point. Lives in a file shared by every process
// of a test (FAKE_CUDA_STATE=<path>), or in process memory when the variable is unset.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace tessera::fake {

inline constexpr int kDevices = 2;
inline constexpr std::uint64_t kDefaultDeviceMemory = 8ULL << 30;  // 8 GiB each

// Entry points whose calls are counted (to prove which variant actually ran).
#define TESSERA_FAKE_COUNTED(X)                                                                    \
  X(cuMemAlloc) X(cuMemAlloc_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync) \
  X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) X(cuMemFree_v2) X(cuMemFree)  \
  X(cuMemAllocPitch_v2) X(cuMemAllocManaged) X(cuMemCreate) X(cuMemRelease) X(cuArrayCreate_v2)       \
  X(cuArray3DCreate_v2) X(cuMipmappedArrayCreate) X(cuGraphAddMemAllocNode) X(cuGraphAddNode)         \
  X(cuGraphAddNode_v2) X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuLaunchKernel) X(cuLaunchKernel_ptsz)    \
  X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz)

enum class Call : int {
#define X(name) name,
  TESSERA_FAKE_COUNTED(X)
#undef X
      kCount
};

struct DeviceState {
  std::atomic<std::uint64_t> used;
  std::atomic<std::uint64_t> highWater;
  /// Compute: the device runs one kernel at a time, in launch order; this is when the last one
  /// launched ends (CLOCK_MONOTONIC ns). See fake_cuda.cpp, "kernel launches".
  std::atomic<std::uint64_t> busyUntil;
};

/// When one kernel of a process occupied a device (CLOCK_MONOTONIC ns, [start, end)).
struct BusyInterval {
  std::atomic<std::uint64_t> start;
  std::atomic<std::uint64_t> end;
  std::atomic<int> device;
};
inline constexpr int kIntervals = 1024;  ///< per process, a ring: enough for NVML's sample window

/// What one process uses on each device, as NVML's per-process list reports it.
struct ProcessState {
  std::atomic<int> pid;  ///< 0 free
  std::atomic<std::uint64_t> used[kDevices];
  std::atomic<std::uint64_t> launches;          ///< kernel launches that reached the driver
  std::atomic<std::uint64_t> busyNs[kDevices];  ///< device time its kernels took, in total
  std::atomic<std::uint64_t> nextInterval;
  BusyInterval intervals[kIntervals];
};
inline constexpr int kProcesses = 64;

struct State {
  DeviceState devices[kDevices];
  std::atomic<std::uint64_t> calls[static_cast<int>(Call::kCount)];
  ProcessState processes[kProcesses];
};

/// The calling process's entry (claimed on first use), or nullptr when the table is full.
inline ProcessState* processEntry(State* state, int pid) {
  for (ProcessState& p : state->processes) {
    if (p.pid.load() == pid) return &p;
  }
  for (ProcessState& p : state->processes) {
    int expected = 0;
    if (p.pid.compare_exchange_strong(expected, pid)) return &p;
    if (expected == pid) return &p;
  }
  return nullptr;
}

/// Maps the state named by FAKE_CUDA_STATE (creating it), or returns process-local state.
inline State* mapState(const char* path) {
  static State local{};
  if (path == nullptr || path[0] == '\0') return &local;
  int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return &local;
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size < static_cast<off_t>(sizeof(State))) {
    if (ftruncate(fd, sizeof(State)) != 0) {
      ::close(fd);
      return &local;
    }
  }
  void* mem = mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return mem == MAP_FAILED ? &local : static_cast<State*>(mem);
}

/// FAKE_CUDA_CONTEXT_BYTES: device memory a process's first context on a device takes (default 0).
inline std::uint64_t contextBytes() {
  const char* env = std::getenv("FAKE_CUDA_CONTEXT_BYTES");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 0;
}

/// FAKE_CUDA_NS_PER_BLOCK: device time one thread block of a kernel takes (default 0: launches
/// take no device time and never wait).
inline std::uint64_t nsPerBlock() {
  const char* env = std::getenv("FAKE_CUDA_NS_PER_BLOCK");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 0;
}

/// Device time process `p` used on `device` within [from, to) (CLOCK_MONOTONIC ns).
inline std::uint64_t busyWithin(const ProcessState& p, int device, std::uint64_t from, std::uint64_t to) {
  std::uint64_t busy = 0;
  for (const BusyInterval& i : p.intervals) {
    if (i.device.load() != device) continue;
    std::uint64_t s = i.start.load(), e = i.end.load();
    if (e <= from || s >= to || e <= s) continue;
    if (s < from) s = from;
    if (e > to) e = to;
    busy += e - s;
  }
  return busy;
}

inline std::uint64_t deviceMemory() {
  const char* env = std::getenv("FAKE_CUDA_DEVICE_MEMORY");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : kDefaultDeviceMemory;
}

/// UUID bytes of fake device `i`: GPU-7e55e7a0-0000-4000-8000-00000000000<i>.
inline void deviceUuid(int i, unsigned char out[16]) {
  static constexpr unsigned char kBase[16] = {0x7e, 0x55, 0xe7, 0xa0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0};
  for (int b = 0; b < 16; ++b) out[b] = kBase[b];
  out[15] = static_cast<unsigned char>(i);
}

}  // namespace tessera::fake
