#pragma once
/// The accounting region shared by every process of one container: a memory-mapped file.
///
/// Layout (version 1), all fields native-endian, the file exactly sizeof(RegionLayout) bytes:
///   header   magic "TSRCUDA1" (kRegionMagic), version, layout size, table sizes
///   devices  kMaxDevices entries keyed by GPU UUID: the container's bytes in use and peak
///   procs    kMaxProcs per-process slots: pid, start time, bytes charged per device
///
/// Invariant: devices[d].used == sum over live slots of procs[p].used[d], except for the two
/// instructions between the device CAS and the slot add (a SIGKILL there leaves phantom usage:
/// safe, never over the limit).
///
/// Concurrency: the allocation fast path is one CAS on devices[d].used plus one add on the
/// caller's own slot; no lock. Creation, device registration, slot claims and reclaiming dead
/// processes are rare and serialised by flock() on the file (plus a process-local mutex, since
/// flock does not exclude threads sharing one open file description).

#include <atomic>
#include <cstdint>

#include "config.h"

namespace tessera::interposer {

inline constexpr std::uint64_t kRegionMagic = 0x3141445543525354ULL;  // "TSRCUDA1" little-endian
inline constexpr std::uint32_t kRegionVersion = 1;
inline constexpr int kMaxProcs = 1024;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared atomics must be address-free");
static_assert(std::atomic<std::int32_t>::is_always_lock_free, "shared atomics must be address-free");

struct alignas(64) RegionDevice {
  std::atomic<std::uint32_t> state;  ///< 0 free, 1 registered (uuid and limit valid)
  std::uint32_t reserved;
  unsigned char uuid[16];
  std::uint64_t limit;               ///< limit recorded by the first process to register the GPU
  std::atomic<std::uint64_t> used;   ///< bytes charged by all processes of the container
  std::atomic<std::uint64_t> peak;   ///< high-water mark of `used`
};

struct alignas(64) RegionProc {
  std::atomic<std::int32_t> pid;     ///< 0 free, > 0 owner
  std::uint32_t reserved;
  std::uint64_t startTime;           ///< /proc/<pid>/stat field 22, to detect pid reuse
  std::atomic<std::uint64_t> used[kMaxDevices];
};

struct RegionHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t layoutSize;
  std::uint32_t maxDevices;
  std::uint32_t maxProcs;
  unsigned char reserved[40];
};
static_assert(sizeof(RegionHeader) == 64);

struct RegionLayout {
  RegionHeader header;
  RegionDevice devices[kMaxDevices];
  RegionProc procs[kMaxProcs];
};

/// One process's view of the region. Not copyable; a single instance lives in the runtime.
class Region {
 public:
  constexpr Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  /// Opens or creates the file and validates its header. On failure writes a message to `error`
  /// and returns false; the caller fails closed.
  bool open(const char* path, char* error, std::size_t errorSize);

  /// Claims a slot for the calling process (reclaiming dead ones first). False when full.
  bool attachProcess(char* error, std::size_t errorSize);

  /// Forgets the slot (after fork, in the child) without touching shared state.
  void detachAfterFork();

  /// Finds or registers the device; returns its index or -1 when the table is full.
  /// `*effectiveLimit` becomes min(limit, limit recorded in the region).
  int registerDevice(const Uuid& uuid, std::uint64_t limit, std::uint64_t* effectiveLimit);

  /// Index of an already registered device, or -1. Lock-free.
  int findDevice(const Uuid& uuid) const;

  /// Charges `bytes` to device `dev` if the container stays within `limit`. Lock-free unless the
  /// charge would fail, in which case dead processes are reclaimed once and the charge retried.
  /// `*usedOut` receives the usage seen when refusing.
  bool reserve(int dev, std::uint64_t bytes, std::uint64_t limit, std::uint64_t* usedOut);

  /// Credits `bytes` back. Saturates at zero.
  void release(int dev, std::uint64_t bytes);

  /// Reclaims the usage of every slot whose process is gone. Returns bytes reclaimed.
  std::uint64_t reclaimDead();

  std::uint64_t used(int dev) const;
  bool attached() const { return slot_ != nullptr; }
  RegionLayout* layout() const { return layout_; }

 private:
  bool lock();
  void unlock();
  std::uint64_t reclaimDeadLocked();

  RegionLayout* layout_ = nullptr;
  RegionProc* slot_ = nullptr;
  int fd_ = -1;
};

/// Reads the start time (clock ticks since boot) and run state of `pid` from /proc.
/// Returns false if the process does not exist or /proc is unreadable.
bool readProcStat(int pid, std::uint64_t* startTime, char* state);

}  // namespace tessera::interposer
