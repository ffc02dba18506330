#pragma once
/// One process's view of its pod's accounting region (layout and liveness rules:
/// include/tessera/isolation/region_layout.h).
///
/// Concurrency: the allocation fast path is one CAS on devices[d].used plus one add on the
/// caller's own slot; no lock. Creation, device registration, slot claims and reclaiming dead
/// processes are rare and serialised by flock() on the file (plus a process-local mutex, since
/// flock does not exclude threads sharing one open file description).

#include <cstddef>
#include <cstdint>

#include "config.h"
#include "tessera/isolation/region_layout.h"

namespace tessera::interposer {

using isolation::kMaxContainers;
using isolation::kMaxProcs;
using isolation::kRegionMagic;
using isolation::kRegionVersion;
using isolation::RegionContainer;
using isolation::RegionDevice;
using isolation::RegionHeader;
using isolation::RegionLayout;
using isolation::RegionPod;
using isolation::RegionProc;
static_assert(isolation::kMaxDevices == kMaxDevices, "config.h and region_layout.h disagree");

/// Who is attaching: the pod (recorded once in the region) and the container (a refusal counter
/// per container). Empty strings are fine.
struct ProcessIdentity {
  const char* podUid = "";
  const char* podNamespace = "";
  const char* podName = "";
  const char* container = "";
};

/// Not copyable; a single instance lives in the runtime (tests make several to play processes).
class Region {
 public:
  constexpr Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  // No destructor: the runtime's instance is constant-initialised and must not register one.

  /// Unmaps and closes (tests; the runtime keeps its region for the life of the process).
  void close();

  /// Opens or creates the file and validates its header. On failure writes a message to `error`
  /// and returns false; the caller fails closed. A file removed by `tessera monitor` between our
  /// open and our lock is noticed (no links left) and opened again, so every process of a pod
  /// always joins the same file.
  bool open(const char* path, char* error, std::size_t errorSize);

  /// Claims a slot for the calling process (reclaiming dead ones first) and holds its liveness
  /// lock; records the pod's identity if the region has none yet. False when full.
  bool attachProcess(const ProcessIdentity& who, char* error, std::size_t errorSize);

  /// In a fork child: forgets the parent's slot and closes the inherited descriptor (its locks are
  /// the parent's). The next locked operation reopens the file. Async-signal-safe.
  void detachAfterFork();

  /// Finds or registers the device; returns its index or -1 when the table is full.
  /// `*effectiveLimit` becomes min(limit, limit recorded in the region).
  int registerDevice(const Uuid& uuid, std::uint64_t limit, std::uint64_t* effectiveLimit);

  /// Index of an already registered device, or -1. Lock-free.
  int findDevice(const Uuid& uuid) const;

  /// Charges `bytes` to device `dev` if the pod stays within `limit`. Lock-free unless the charge
  /// would fail, in which case dead processes are reclaimed once and the charge retried.
  /// `*usedOut` receives the usage seen when refusing.
  bool reserve(int dev, std::uint64_t bytes, std::uint64_t limit, std::uint64_t* usedOut);

  /// Credits `bytes` back. Saturates at zero.
  void release(int dev, std::uint64_t bytes);

  /// Counts one refused allocation on `dev` for the pod and for this process's container.
  void countRefusal(int dev);

  /// Reclaims the usage of every slot whose process is gone. Returns bytes reclaimed.
  std::uint64_t reclaimDead();

  /// True when slot `index` is owned by a live process other than this Region's owner.
  bool slotAlive(int index) const;

  std::uint64_t used(int dev) const;
  /// Bytes this process has charged on `dev` (0 when not attached).
  std::uint64_t usedBySelf(int dev) const;
  bool attached() const { return slot_ != nullptr; }
  RegionLayout* layout() const { return layout_; }

 private:
  bool lock();
  void unlock();
  bool reopen();
  bool lockSlot(int index);
  int containerIndexLocked(const char* name);
  std::uint64_t reclaimDeadLocked();

  RegionLayout* layout_ = nullptr;
  RegionProc* slot_ = nullptr;
  int fd_ = -1;
  char path_[kMaxPathLength] = {};
};

/// Reads the start time (clock ticks since boot) and run state of `pid` from /proc.
/// Returns false if the process does not exist or /proc is unreadable.
bool readProcStat(int pid, std::uint64_t* startTime, char* state);

}  // namespace tessera::interposer
