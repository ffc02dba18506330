#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace tessera::interposer {

namespace {

// Serialises the flock sections among the threads of this process (flock alone does not).
constinit pthread_mutex_t gRegionMutex = PTHREAD_MUTEX_INITIALIZER;

void saturatingSub(std::atomic<std::uint64_t>& counter, std::uint64_t bytes) {
  std::uint64_t current = counter.load(std::memory_order_relaxed);
  while (!counter.compare_exchange_weak(current, current >= bytes ? current - bytes : 0,
                                        std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
}

bool headerMatches(const RegionHeader* layout) {
  return layout->magic == kRegionMagic && layout->version == kRegionVersion &&
         layout->layoutSize == sizeof(RegionLayout) && layout->maxDevices == kMaxDevices &&
         layout->maxProcs == kMaxProcs;
}

// A slot's owner is gone if the pid does not exist, is a zombie, or was reused by a process
// that started at a different time.
bool processGone(int pid, std::uint64_t startTime) {
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::uint64_t actualStart = 0;
  char state = '?';
  if (!readProcStat(pid, &actualStart, &state)) {
    // kill() said it exists; without /proc we cannot tell more. Assume alive (never
    // reclaim a live process's usage: that could let the container exceed its limit).
    return false;
  }
  if (state == 'Z' || state == 'X') return true;
  return startTime != 0 && actualStart != startTime;
}

}  // namespace

bool readProcStat(int pid, std::uint64_t* startTime, char* state) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ppid ..." - comm may contain spaces and ')', so search from the end.
  char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;
  *state = *p;
  // Field 3 is the state; the start time is field 22, i.e. 19 fields further on.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  std::uint64_t value = 0;
  while (*p >= '0' && *p <= '9') value = value * 10 + static_cast<std::uint64_t>(*p++ - '0');
  *startTime = value;
  return true;
}

bool Region::lock() {
  pthread_mutex_lock(&gRegionMutex);
  while (flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      pthread_mutex_unlock(&gRegionMutex);
      return false;
    }
  }
  return true;
}

void Region::unlock() {
  flock(fd_, LOCK_UN);
  pthread_mutex_unlock(&gRegionMutex);
}

bool Region::open(const char* path, char* error, std::size_t errorSize) {
  bool created = true;
  int fd = ::open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) {
    std::snprintf(error, errorSize, "cannot open the shared accounting file %s: %s", path, std::strerror(errno));
    return false;
  }
  // Every process of the container, whatever its uid, must be able to join.
  if (created) (void)fchmod(fd, 0666);
  fd_ = fd;
  if (!lock()) {
    std::snprintf(error, errorSize, "cannot lock %s: %s", path, std::strerror(errno));
    ::close(fd);
    fd_ = -1;
    return false;
  }
  bool ok = false;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    std::snprintf(error, errorSize, "cannot stat %s: %s", path, std::strerror(errno));
  } else if (st.st_size == 0) {
    // New file: size it, then write the header last so a reader never sees a half-made one.
    if (ftruncate(fd, sizeof(RegionLayout)) != 0) {
      std::snprintf(error, errorSize, "cannot size %s: %s", path, std::strerror(errno));
    } else {
      void* mem = mmap(nullptr, sizeof(RegionLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (mem == MAP_FAILED) {
        std::snprintf(error, errorSize, "cannot map %s: %s", path, std::strerror(errno));
      } else {
        layout_ = static_cast<RegionLayout*>(mem);
        layout_->header.version = kRegionVersion;
        layout_->header.layoutSize = sizeof(RegionLayout);
        layout_->header.maxDevices = kMaxDevices;
        layout_->header.maxProcs = kMaxProcs;
        std::atomic_thread_fence(std::memory_order_release);
        layout_->header.magic = kRegionMagic;
        ok = true;
      }
    }
  } else {
    RegionHeader header{};
    ssize_t n = pread(fd, &header, sizeof header, 0);
    if (n != static_cast<ssize_t>(sizeof header) || !headerMatches(&header) || st.st_size != static_cast<off_t>(sizeof(RegionLayout))) {
      std::snprintf(error, errorSize,
                    "the shared accounting file %s has an unknown format (magic 0x%016llx version %u size %lld; "
                    "expected magic 0x%016llx version %u size %zu) - it was written by a different "
                    "libtessera-cuda",
                    path, static_cast<unsigned long long>(header.magic), header.version, static_cast<long long>(st.st_size),
                    static_cast<unsigned long long>(kRegionMagic), kRegionVersion, sizeof(RegionLayout));
    } else {
      void* mem = mmap(nullptr, sizeof(RegionLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (mem == MAP_FAILED) {
        std::snprintf(error, errorSize, "cannot map %s: %s", path, std::strerror(errno));
      } else {
        layout_ = static_cast<RegionLayout*>(mem);
        ok = true;
      }
    }
  }
  unlock();
  if (!ok) {
    ::close(fd);
    fd_ = -1;
    layout_ = nullptr;
  }
  return ok;
}

bool Region::attachProcess(char* error, std::size_t errorSize) {
  const int pid = static_cast<int>(getpid());
  std::uint64_t startTime = 0;
  char state = '?';
  if (!readProcStat(pid, &startTime, &state)) startTime = 0;
  if (!lock()) {
    std::snprintf(error, errorSize, "cannot lock the shared accounting file: %s", std::strerror(errno));
    return false;
  }
  reclaimDeadLocked();
  RegionProc* found = nullptr;
  for (RegionProc& proc : layout_->procs) {
    if (proc.pid.load(std::memory_order_acquire) == 0) {
      found = &proc;
      break;
    }
  }
  if (found != nullptr) {
    for (auto& used : found->used) used.store(0, std::memory_order_relaxed);
    found->startTime = startTime;
    found->pid.store(pid, std::memory_order_release);
    slot_ = found;
  }
  unlock();
  if (found == nullptr) {
    std::snprintf(error, errorSize, "all %d process slots of the shared accounting file are in use", kMaxProcs);
    return false;
  }
  return true;
}

void Region::detachAfterFork() {
  slot_ = nullptr;
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  std::memcpy(&gRegionMutex, &fresh, sizeof fresh);  // the parent's lock holder does not exist here
}

int Region::findDevice(const Uuid& uuid) const {
  for (int i = 0; i < kMaxDevices; ++i) {
    const RegionDevice& dev = layout_->devices[i];
    if (dev.state.load(std::memory_order_acquire) == 1 && std::memcmp(dev.uuid, uuid.bytes, 16) == 0) return i;
  }
  return -1;
}

int Region::registerDevice(const Uuid& uuid, std::uint64_t limit, std::uint64_t* effectiveLimit) {
  int index = findDevice(uuid);
  if (index < 0) {
    if (!lock()) return -1;
    index = findDevice(uuid);
    if (index < 0) {
      for (int i = 0; i < kMaxDevices; ++i) {
        RegionDevice& dev = layout_->devices[i];
        if (dev.state.load(std::memory_order_acquire) == 0) {
          std::memcpy(dev.uuid, uuid.bytes, 16);
          dev.limit = limit;
          dev.state.store(1, std::memory_order_release);
          index = i;
          break;
        }
      }
    }
    unlock();
  }
  if (index >= 0) {
    std::uint64_t recorded = layout_->devices[index].limit;
    *effectiveLimit = recorded < limit ? recorded : limit;
  }
  return index;
}

bool Region::reserve(int dev, std::uint64_t bytes, std::uint64_t limit, std::uint64_t* usedOut) {
  RegionDevice& device = layout_->devices[dev];
  bool reclaimed = false;
  std::uint64_t current = device.used.load(std::memory_order_relaxed);
  while (true) {
    if (bytes > limit || current > limit - bytes) {
      if (reclaimed || reclaimDead() == 0) {
        *usedOut = current;
        return false;
      }
      reclaimed = true;
      current = device.used.load(std::memory_order_relaxed);
      continue;
    }
    if (device.used.compare_exchange_weak(current, current + bytes, std::memory_order_acq_rel,
                                          std::memory_order_relaxed)) {
      break;
    }
  }
  // A SIGKILL between the CAS above and this add leaves `bytes` charged to nobody: phantom usage
  // that errs on the safe side (see region.h).
  slot_->used[dev].fetch_add(bytes, std::memory_order_relaxed);
  const std::uint64_t now = current + bytes;
  std::uint64_t peak = device.peak.load(std::memory_order_relaxed);
  while (now > peak && !device.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return true;
}

void Region::release(int dev, std::uint64_t bytes) {
  // Slot first, device second: a SIGKILL in between leaves phantom usage, never negative usage.
  saturatingSub(slot_->used[dev], bytes);
  saturatingSub(layout_->devices[dev].used, bytes);
}

std::uint64_t Region::used(int dev) const { return layout_->devices[dev].used.load(std::memory_order_relaxed); }

std::uint64_t Region::reclaimDead() {
  if (!lock()) return 0;
  std::uint64_t bytes = reclaimDeadLocked();
  unlock();
  return bytes;
}

std::uint64_t Region::reclaimDeadLocked() {
  const int self = static_cast<int>(getpid());
  std::uint64_t total = 0;
  for (RegionProc& proc : layout_->procs) {
    int pid = proc.pid.load(std::memory_order_acquire);
    if (pid == 0 || &proc == slot_) continue;
    // A slot with our own pid that is not ours belongs to an earlier image of this process
    // (before exec) or to an earlier process with a recycled pid: its memory is gone.
    if (pid != self && !processGone(pid, proc.startTime)) continue;
    for (int d = 0; d < kMaxDevices; ++d) {
      std::uint64_t bytes = proc.used[d].exchange(0, std::memory_order_acq_rel);
      if (bytes != 0) {
        saturatingSub(layout_->devices[d].used, bytes);
        total += bytes;
      }
    }
    proc.pid.store(0, std::memory_order_release);
  }
  return total;
}

}  // namespace tessera::interposer
