#pragma once
/// The accounting region of one pod: a memory-mapped file shared by every process of every
/// container of the pod (docs/isolation.md, "Pod-level accounting"). Written by the interposer
/// (libtessera-cuda.so, src/isolation/interposer), read by `tessera monitor` (src/monitor).
///
/// This header is the whole contract between the two: plain structs, std::atomic of lock-free
/// integers only (address-free, so the same bytes work in every process), no functions. The
/// interposer includes it without libstdc++ at run time.
///
/// Layout (version 2), native-endian, the file exactly sizeof(RegionLayout) bytes:
///   header      magic "TSRCUDA1", version, layout size, table sizes
///   pod         the pod's UID, namespace and name (written once, by the first process that knows them)
///   devices     kMaxDevices entries keyed by GPU UUID: limit, bytes in use, peak, refusals
///   containers  kMaxContainers entries keyed by container name: refusals per device
///   procs       kMaxProcs per-process slots: pid, container, bytes charged per device
///
/// Liveness: a process owns its slot while it holds an advisory write lock (fcntl, open file
/// description lock where the kernel has them) on the one byte at slotLockOffset(i). The kernel
/// drops the lock when the process dies or execs, whatever pid namespace it lived in, so any reader
/// can tell a dead slot with F_GETLK. No pid is ever compared across containers.
///
/// Invariant: devices[d].used == sum over live slots of procs[p].used[d], except for the two
/// instructions between the device CAS and the slot add (a SIGKILL there leaves phantom usage: safe).
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tessera::isolation {

inline constexpr std::uint64_t kRegionMagic = 0x3141445543525354ULL;  // "TSRCUDA1" little-endian
inline constexpr std::uint32_t kRegionVersion = 2;
inline constexpr int kMaxDevices = 32;
inline constexpr int kMaxContainers = 32;
inline constexpr int kMaxProcs = 1024;
/// The region's file name inside a pod's directory (`<region dir>/<pod UID>/gpu.region` on the node).
inline constexpr const char kRegionFileName[] = "gpu.region";
/// The name of the pod volume holding the region (the webhook's emptyDir): the node monitor finds
/// it at `<kubelet root>/pods/<pod UID>/volumes/kubernetes.io~empty-dir/tessera-regions/gpu.region`.
inline constexpr const char kRegionVolumeName[] = "tessera-regions";

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared atomics must be address-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "shared atomics must be address-free");
static_assert(std::atomic<std::int32_t>::is_always_lock_free, "shared atomics must be address-free");

struct RegionHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t layoutSize;
  std::uint32_t maxDevices;
  std::uint32_t maxProcs;
  std::uint32_t maxContainers;
  unsigned char reserved[36];
};
static_assert(sizeof(RegionHeader) == 64);

/// Who the region belongs to, from the downward API (TESSERA_POD_UID / _NAMESPACE / _NAME).
/// NUL-terminated, truncated to fit. Valid once `state` is 1; never changes afterwards.
struct RegionPod {
  std::atomic<std::uint32_t> state;
  std::uint32_t reserved;
  char uid[48];
  char namespace_[64];
  char name[256];
};

struct alignas(64) RegionDevice {
  std::atomic<std::uint32_t> state;  ///< 0 free, 1 registered (uuid and limit valid)
  std::uint32_t reserved;
  unsigned char uuid[16];
  std::uint64_t limit;                 ///< recorded by the first process (a later one uses the lower of it and its own)
  std::atomic<std::uint64_t> used;     ///< bytes charged by all processes of the pod
  std::atomic<std::uint64_t> peak;     ///< high-water mark of `used`
  std::atomic<std::uint64_t> refused;  ///< allocations refused over the limit, whole pod
};

struct alignas(64) RegionContainer {
  std::atomic<std::uint32_t> state;  ///< 0 free, 1 named
  std::uint32_t reserved;
  char name[64];  ///< TESSERA_CONTAINER_NAME ("" when unset), NUL-terminated
  std::atomic<std::uint64_t> refused[kMaxDevices];
};

struct alignas(64) RegionProc {
  std::atomic<std::int32_t> pid;  ///< 0 free; else the owner's pid in its own pid namespace (informational)
  std::int32_t container;         ///< index into containers, -1 when the table was full
  std::uint64_t startTime;        ///< /proc/<pid>/stat field 22 (informational)
  std::atomic<std::uint64_t> used[kMaxDevices];
};

struct RegionLayout {
  RegionHeader header;
  RegionPod pod;
  RegionDevice devices[kMaxDevices];
  RegionContainer containers[kMaxContainers];
  RegionProc procs[kMaxProcs];
};

/// File offset of the byte whose write lock marks slot `index` as owned by a live process.
inline constexpr std::size_t slotLockOffset(int index) {
  return offsetof(RegionLayout, procs) + static_cast<std::size_t>(index) * sizeof(RegionProc);
}
/// The byte range covering every slot's lock byte (one F_GETLK over it says whether any process lives).
inline constexpr std::size_t kSlotLockBegin = offsetof(RegionLayout, procs);
inline constexpr std::size_t kSlotLockLength = sizeof(RegionProc) * kMaxProcs;

}  // namespace tessera::isolation
