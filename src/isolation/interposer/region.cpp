#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "glibc_compat.h"

namespace tessera::interposer {

namespace {

// Serialises the flock sections among the threads of this process (flock alone does not).
constinit pthread_mutex_t gRegionMutex = PTHREAD_MUTEX_INITIALIZER;

void saturatingSub(std::atomic<std::uint64_t>& counter, std::uint64_t bytes) {
  std::uint64_t current = counter.load(std::memory_order_relaxed);
  while (!counter.compare_exchange_weak(current, current >= bytes ? current - bytes : 0, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {}
}

bool headerMatches(const RegionHeader* h) {
  return h->magic == kRegionMagic && h->version == kRegionVersion && h->layoutSize == sizeof(RegionLayout) &&
         h->maxDevices == kMaxDevices && h->maxProcs == kMaxProcs && h->maxContainers == kMaxContainers;
}

// Copies a NUL-terminated string into a fixed field, truncating.
void copyField(char* out, std::size_t size, const char* in) {
  std::size_t n = in == nullptr ? 0 : std::strlen(in);
  if (n >= size) n = size - 1;
  if (n > 0) std::memcpy(out, in, n);
  out[n] = '\0';
}

// fstat through the system call: glibc's fstat symbol is GLIBC_2.33 and the interposer must load
// with glibc 2.17 (docs/isolation.md, "glibc floor"). On x86-64 and aarch64 the kernel's struct
// stat is glibc's.
int statFd(int fd, struct stat* st) { return static_cast<int>(syscall(SYS_fstat, fd, st)); }

// Lock commands: open file description locks (Linux 3.15+) are owned by the descriptor, so two
// Regions of one process (the tests) see each other, and a fork child does not inherit the
// parent's ownership. Older kernels answer EINVAL: fall back to process-owned POSIX locks.
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#endif

int lockCommand(int fd, int ofdCmd, int posixCmd, struct flock* fl) {
  int rc = fcntl(fd, ofdCmd, fl);
  if (rc != 0 && errno == EINVAL) {
    fl->l_pid = 0;
    rc = fcntl(fd, posixCmd, fl);
  }
  return rc;
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

bool Region::reopen() {
  if (path_[0] == '\0') return false;
  int fd = ::open(path_, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  fd_ = fd;
  return true;
}

bool Region::lock() {
  pthread_mutex_lock(&gRegionMutex);
  if (fd_ < 0 && !reopen()) {
    pthread_mutex_unlock(&gRegionMutex);
    return false;
  }
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
  copyField(path_, sizeof path_, path);
  // A handful of tries: each retry means `tessera monitor` removed the file of a pod it believed
  // gone between our open and our lock.
  for (int attempt = 0; attempt < 8; ++attempt) {
    int fd = ::open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    const bool created = fd >= 0;
    if (fd < 0 && errno == EEXIST) fd = ::open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      std::snprintf(error, errorSize, "cannot open the shared accounting file %s: %s", path, std::strerror(errno));
      return false;
    }
    // Every process of the pod, whatever its uid, must be able to join.
    if (created) (void)fchmod(fd, 0666);
    fd_ = fd;
    if (!lock()) {
      std::snprintf(error, errorSize, "cannot lock %s: %s", path, std::strerror(errno));
      close();
      return false;
    }
    bool ok = false;
    bool retry = false;
    struct stat st {};
    if (statFd(fd, &st) != 0) {
      std::snprintf(error, errorSize, "cannot stat %s: %s", path, std::strerror(errno));
    } else if (st.st_nlink == 0) {
      retry = true;
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
          layout_->header.maxContainers = kMaxContainers;
          std::atomic_thread_fence(std::memory_order_release);
          layout_->header.magic = kRegionMagic;
          ok = true;
        }
      }
    } else {
      RegionHeader header{};
      ssize_t n = pread(fd, &header, sizeof header, 0);
      if (n != static_cast<ssize_t>(sizeof header) || !headerMatches(&header) ||
          st.st_size != static_cast<off_t>(sizeof(RegionLayout))) {
        std::snprintf(error, errorSize,
                      "the shared accounting file %s has an unknown format (magic 0x%016llx version %u size %lld; "
                      "expected magic 0x%016llx version %u size %zu) - it was written by a different "
                      "libtessera-cuda",
                      path, static_cast<unsigned long long>(header.magic), header.version,
                      static_cast<long long>(st.st_size), static_cast<unsigned long long>(kRegionMagic), kRegionVersion,
                      sizeof(RegionLayout));
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
    if (ok) return true;
    close();
    if (!retry) return false;
  }
  std::snprintf(error, errorSize, "the shared accounting file %s keeps being removed while it is opened", path);
  return false;
}

void Region::close() {
  if (layout_ != nullptr) munmap(layout_, sizeof(RegionLayout));
  if (fd_ >= 0) ::close(fd_);
  layout_ = nullptr;
  slot_ = nullptr;
  fd_ = -1;
}

bool Region::lockSlot(int index) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(isolation::slotLockOffset(index));
  fl.l_len = 1;
  return lockCommand(fd_, F_OFD_SETLK, F_SETLK, &fl) == 0;
}

bool Region::slotAlive(int index) const {
  if (fd_ < 0) return true;  // cannot tell: never reclaim a possibly live process's usage
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(isolation::slotLockOffset(index));
  fl.l_len = 1;
  if (lockCommand(fd_, F_OFD_GETLK, F_GETLK, &fl) != 0) return true;
  return fl.l_type != F_UNLCK;
}

int Region::containerIndexLocked(const char* name) {
  int freeIndex = -1;
  for (int i = 0; i < kMaxContainers; ++i) {
    RegionContainer& c = layout_->containers[i];
    if (c.state.load(std::memory_order_acquire) == 0) {
      if (freeIndex < 0) freeIndex = i;
      continue;
    }
    if (std::strncmp(c.name, name, sizeof c.name - 1) == 0) return i;
  }
  if (freeIndex >= 0) {
    RegionContainer& c = layout_->containers[freeIndex];
    copyField(c.name, sizeof c.name, name);
    c.state.store(1, std::memory_order_release);
  }
  return freeIndex;
}

bool Region::attachProcess(const ProcessIdentity& who, char* error, std::size_t errorSize) {
  const int pid = static_cast<int>(getpid());
  std::uint64_t startTime = 0;
  char state = '?';
  if (!readProcStat(pid, &startTime, &state)) startTime = 0;
  if (!lock()) {
    std::snprintf(error, errorSize, "cannot lock the shared accounting file: %s", std::strerror(errno));
    return false;
  }
  reclaimDeadLocked();
  RegionPod& pod = layout_->pod;
  if (pod.state.load(std::memory_order_acquire) == 0 && who.podUid != nullptr && who.podUid[0] != '\0') {
    copyField(pod.uid, sizeof pod.uid, who.podUid);
    copyField(pod.namespace_, sizeof pod.namespace_, who.podNamespace);
    copyField(pod.name, sizeof pod.name, who.podName);
    pod.state.store(1, std::memory_order_release);
  }
  const int container = containerIndexLocked(who.container == nullptr ? "" : who.container);
  RegionProc* found = nullptr;
  bool lockFailed = false;
  for (int i = 0; i < kMaxProcs; ++i) {
    RegionProc& proc = layout_->procs[i];
    if (proc.pid.load(std::memory_order_acquire) != 0) continue;
    if (!lockSlot(i)) {  // held by someone: never claim it (should not happen under flock)
      lockFailed = true;
      continue;
    }
    found = &proc;
    break;
  }
  if (found != nullptr) {
    for (auto& used : found->used) used.store(0, std::memory_order_relaxed);
    found->startTime = startTime;
    found->container = container;
    found->pid.store(pid, std::memory_order_release);
    slot_ = found;
  }
  unlock();
  if (found == nullptr) {
    std::snprintf(error, errorSize, "%s",
                  lockFailed ? "cannot take a process slot's lock in the shared accounting file"
                             : "all process slots of the shared accounting file are in use");
    return false;
  }
  return true;
}

void Region::detachAfterFork() {
  slot_ = nullptr;
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  std::memcpy(&gRegionMutex, &fresh, sizeof fresh);  // the parent's lock holder does not exist here
  // The inherited descriptor is the parent's: its flock and slot lock are shared with the parent.
  // The mapping stays; lock() opens a descriptor of our own when one is needed.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
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
  // that errs on the safe side (see region_layout.h).
  slot_->used[dev].fetch_add(bytes, std::memory_order_relaxed);
  const std::uint64_t now = current + bytes;
  std::uint64_t peak = device.peak.load(std::memory_order_relaxed);
  while (now > peak && !device.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  return true;
}

void Region::release(int dev, std::uint64_t bytes) {
  // Slot first, device second: a SIGKILL in between leaves phantom usage, never negative usage.
  saturatingSub(slot_->used[dev], bytes);
  saturatingSub(layout_->devices[dev].used, bytes);
}

void Region::countRefusal(int dev) {
  layout_->devices[dev].refused.fetch_add(1, std::memory_order_relaxed);
  if (slot_ != nullptr && slot_->container >= 0) {
    layout_->containers[slot_->container].refused[dev].fetch_add(1, std::memory_order_relaxed);
  }
}

std::uint64_t Region::used(int dev) const { return layout_->devices[dev].used.load(std::memory_order_relaxed); }

std::uint64_t Region::usedBySelf(int dev) const {
  return slot_ == nullptr ? 0 : slot_->used[dev].load(std::memory_order_relaxed);
}

std::uint64_t Region::reclaimDead() {
  if (!lock()) return 0;
  std::uint64_t bytes = reclaimDeadLocked();
  unlock();
  return bytes;
}

std::uint64_t Region::reclaimDeadLocked() {
  std::uint64_t total = 0;
  for (int i = 0; i < kMaxProcs; ++i) {
    RegionProc& proc = layout_->procs[i];
    if (proc.pid.load(std::memory_order_acquire) == 0 || &proc == slot_) continue;
    // Whoever claimed the slot holds its lock until it dies or execs (the descriptor is
    // close-on-exec), in whatever pid namespace it runs: no pid comparison needed.
    if (slotAlive(i)) continue;
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
