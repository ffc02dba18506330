// The compute limit's runtime: the buckets, the launch path and the watcher thread
// (core_limit.h; the controller is core_control.cpp; docs/isolation.md, "Compute limit").
//
// The watcher wakes every kRefillNs. Each wake it refills the bucket of every GPU this process
// launched on by a tenth of the period's rate (capped at one period's worth, so an idle pod saves
// no more than that); every kRefillsPerPeriod wakes it samples NVML and steps the controller. In
// the open state the bucket is simply kept full. What the process spent is read back from the
// bucket itself (level after the last refill minus level now), so the launch path does nothing but
// the subtraction.

#include "core_limit.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "core_control.h"
#include "glibc_compat.h"
#include "hooks.h"
#include "runtime.h"

namespace tessera::interposer {

namespace core_detail {
constinit int gCoreLimit = 0;
}  // namespace core_detail

namespace {

constexpr long kRefillNs = 10'000'000;   // 10 ms
constexpr int kRefillsPerPeriod = 10;    // control period: 100 ms
constexpr long kWaitStepNs = 1'000'000;  // a throttled launch checks the bucket every 1 ms
constexpr std::int64_t kOpenLevel = std::int64_t{1} << 60;
// Periods in a row in which this process spent tokens but NVML listed none of the pod's processes
// before the whole GPU's utilization is taken as the pod's (see sample()).
constexpr int kUnseenPeriodsBeforeFallback = 5;

struct alignas(64) Bucket {
  std::atomic<std::int64_t> tokens{kOpenLevel};
  std::atomic<int> active{0};  // a launch happened on this GPU: the watcher looks after it
};

// Watcher-thread state per GPU ordinal; only the watcher touches it.
struct Watch {
  CoreControl control;
  std::int64_t lastLevel = kOpenLevel;  // bucket level right after the watcher last wrote it
  std::int64_t spent = 0;               // tokens spent in the current period
  int unseen = 0;
  bool haveUuid = false;
  bool uuidFailed = false;
  Uuid uuid{};
};

// gWatcherState
constexpr int kNotStarted = 0;
constexpr int kRunning = 1;
constexpr int kUnavailable = 2;  // pthread_create failed: launches are not throttled

constinit CorePolicy gPolicy = CorePolicy::kStrict;
constinit Bucket gBuckets[kMaxDevices] = {};
constinit Watch gWatch[kMaxDevices] = {};
constinit std::atomic<int> gWatcherState{kNotStarted};
constinit std::atomic<bool> gSingleDevice{false};  // the process sees one GPU: no per-launch lookup
constinit std::atomic<bool> gStop{false};
constinit std::atomic<bool> gInSample{false};
constinit std::atomic<bool> gFallbackReported{false};
constinit std::atomic<bool> gUnmeasuredReported{false};
constinit bool gAtexitRegistered = false;
constinit pthread_mutex_t gStartMutex = PTHREAD_MUTEX_INITIALIZER;

void sleepNs(long ns) {
  timespec ts{0, ns};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

void resetWatchState() {
  for (int d = 0; d < kMaxDevices; ++d) {
    gBuckets[d].tokens.store(kOpenLevel, std::memory_order_relaxed);
    gBuckets[d].active.store(0, std::memory_order_relaxed);
    Watch fresh;
    fresh.control.limit = core_detail::gCoreLimit;
    fresh.control.policy = gPolicy;
    gWatch[d] = fresh;
  }
}

// NVML's view of GPU `ordinal` (CoreSample::valid false when there is none to act on).
CoreSample sample(int ordinal, Watch& w) {
  CoreSample s;
  if (!w.haveUuid) {
    if (w.uuidFailed) return s;
    cu::CUuuid raw{};
    auto getUuid = TESSERA_REAL_HELPER(cuDeviceGetUuid_v2);
    if (getUuid == nullptr) getUuid = TESSERA_REAL_HELPER(cuDeviceGetUuid);
    if (getUuid == nullptr || getUuid(&raw, ordinal) != cu::CUDA_SUCCESS) {
      w.uuidFailed = true;
      logError("GPU_CORE_LIMIT: cannot read the UUID of GPU %d; its kernel launches are not throttled", ordinal);
      return s;
    }
    std::memcpy(w.uuid.bytes, raw.bytes, 16);
    w.haveUuid = true;
  }
  int pids[kMaxPodPids];
  const int count = podPids(pids, kMaxPodPids);
  int pod = 0, total = 0;
  bool podSeen = false;
  gInSample.store(true, std::memory_order_seq_cst);
  const bool ok =
      !gStop.load(std::memory_order_seq_cst) && sampleSmUtilization(w.uuid, pids, count, &pod, &total, &podSeen);
  gInSample.store(false, std::memory_order_release);
  if (!ok) {
    if (!gUnmeasuredReported.exchange(true, std::memory_order_relaxed)) {
      logError(
          "GPU_CORE_LIMIT=%d cannot be enforced: NVML does not report per-process SM utilization "
          "(nvmlDeviceGetProcessUtilization); kernel launches are not throttled",
          core_detail::gCoreLimit);
    }
    return s;
  }
  s.valid = true;
  s.pod = pod;
  s.total = total;
  if (podSeen || w.spent == 0 || total == 0) {
    w.unseen = 0;
    return s;
  }
  // We launched work and the GPU was busy, yet NVML lists none of the pod's processes: its pids
  // are not ours (a pid namespace the driver does not translate). Take everything on the GPU as
  // the pod's: never above the share, possibly below it under contention.
  if (++w.unseen < kUnseenPeriodsBeforeFallback) {
    s.valid = false;
    return s;
  }
  if (!gFallbackReported.exchange(true, std::memory_order_relaxed)) {
    logError(
        "GPU_CORE_LIMIT: NVML does not list this pod's processes (another pid namespace); the whole GPU's "
        "utilization is counted as the pod's, so the pod may get less than its %d%% when the GPU is shared",
        core_detail::gCoreLimit);
  }
  s.pod = total;
  s.othersKnown = false;
  return s;
}

// Refills (or keeps open) GPU `d`'s bucket and books what was spent since the last write.
void refill(int d, Watch& w) {
  std::atomic<std::int64_t>& tokens = gBuckets[d].tokens;
  if (w.control.open) {
    const std::int64_t level = tokens.exchange(kOpenLevel, std::memory_order_relaxed);
    w.spent += w.lastLevel - level;
    w.lastLevel = kOpenLevel;
    return;
  }
  const std::int64_t cap = static_cast<std::int64_t>(w.control.rate);
  std::int64_t add = static_cast<std::int64_t>(w.control.rate / kRefillsPerPeriod);
  if (add < 1) add = 1;
  std::int64_t level = tokens.load(std::memory_order_relaxed);
  std::int64_t next = 0;
  do {
    next = level > cap ? cap : (level + add > cap ? cap : level + add);
  } while (!tokens.compare_exchange_weak(level, next, std::memory_order_relaxed));
  w.spent += w.lastLevel - level;
  w.lastLevel = next;
}

void* watcherMain(void*) {
  std::uint64_t wake = 0;
  while (!gStop.load(std::memory_order_relaxed)) {
    sleepNs(kRefillNs);
    const bool control = ++wake % kRefillsPerPeriod == 0;
    for (int d = 0; d < kMaxDevices; ++d) {
      if (gBuckets[d].active.load(std::memory_order_relaxed) == 0) continue;
      Watch& w = gWatch[d];
      if (control) {
        const CoreSample s = sample(d, w);
        w.control.step(static_cast<double>(w.spent), s);
        TESSERA_TRACE("core limit: GPU %d spent=%lld pod=%d%% total=%d%% valid=%d -> %s rate=%.0f", d,
                      static_cast<long long>(w.spent), s.pod, s.total, s.valid ? 1 : 0,
                      w.control.open ? "open" : "limited", w.control.rate);
        w.spent = 0;
      }
      refill(d, w);
    }
  }
  return nullptr;
}

// At exit, the watcher must not be inside NVML while libnvidia-ml tears itself down.
void stopWatcher() {
  gStop.store(true, std::memory_order_seq_cst);
  for (int i = 0; i < 200 && gInSample.load(std::memory_order_seq_cst); ++i) sleepNs(kWaitStepNs);
}

void startWatcher() {
  pthread_mutex_lock(&gStartMutex);
  if (gWatcherState.load(std::memory_order_acquire) == kNotStarted) {
    int count = 0;
    auto getCount = TESSERA_REAL_HELPER(cuDeviceGetCount);
    gSingleDevice.store(getCount != nullptr && getCount(&count) == cu::CUDA_SUCCESS && count == 1,
                        std::memory_order_relaxed);
    if (!gAtexitRegistered) {
      gAtexitRegistered = true;
      atexit(stopWatcher);
    }
    // The thread takes no signals: the application's handlers stay on its own threads.
    sigset_t all, previous;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &previous);
    pthread_t thread;
    const int rc = pthread_create(&thread, nullptr, watcherMain, nullptr);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (rc == 0) {
      pthread_detach(thread);
      gWatcherState.store(kRunning, std::memory_order_release);
      TESSERA_TRACE("core limit: watcher started (GPU_CORE_LIMIT=%d, %s, %s)", core_detail::gCoreLimit,
                    gPolicy == CorePolicy::kBurst ? "burst" : "strict",
                    gSingleDevice.load() ? "one GPU" : "several GPUs");
    } else {
      gWatcherState.store(kUnavailable, std::memory_order_release);
      logError(
          "GPU_CORE_LIMIT=%d cannot be enforced: cannot start the watcher thread (%s); kernel launches are "
          "not throttled",
          core_detail::gCoreLimit, std::strerror(rc));
    }
  }
  pthread_mutex_unlock(&gStartMutex);
}

}  // namespace

void coreLimitConfigure(const Config& cfg) {
  gPolicy = cfg.corePolicy;
  core_detail::gCoreLimit = cfg.coreLimit;
  resetWatchState();
}

void throttleLaunch(std::uint64_t blocks) {
  int state = gWatcherState.load(std::memory_order_acquire);
  if (state != kRunning) {
    if (state == kNotStarted) startWatcher();
    if (gWatcherState.load(std::memory_order_acquire) != kRunning) return;
  }
  int d = 0;
  if (!gSingleDevice.load(std::memory_order_relaxed)) {
    auto getDevice = TESSERA_REAL_HELPER(cuCtxGetDevice);
    cu::CUdevice ordinal = -1;
    if (getDevice == nullptr || getDevice(&ordinal) != cu::CUDA_SUCCESS || ordinal < 0 || ordinal >= kMaxDevices) {
      return;  // no context: the driver refuses the launch itself
    }
    d = ordinal;
  }
  Bucket& bucket = gBuckets[d];
  if (bucket.active.load(std::memory_order_relaxed) == 0) bucket.active.store(1, std::memory_order_relaxed);
  const std::int64_t cost =
      blocks > static_cast<std::uint64_t>(kOpenLevel) ? kOpenLevel : static_cast<std::int64_t>(blocks);
  if (bucket.tokens.fetch_sub(cost, std::memory_order_relaxed) > 0) return;
  // The bucket was empty: this launch is paid for (the bucket is in debt) once the watcher has
  // refilled past the debt. Wait for that in short steps.
  while (bucket.tokens.load(std::memory_order_relaxed) < 0 && !gStop.load(std::memory_order_relaxed)) {
    sleepNs(kWaitStepNs);
  }
}

void coreLimitAfterFork() {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  std::memcpy(&gStartMutex, &fresh, sizeof fresh);
  gWatcherState.store(kNotStarted, std::memory_order_relaxed);
  gInSample.store(false, std::memory_order_relaxed);
  if (core_detail::gCoreLimit != 0) resetWatchState();
}

}  // namespace tessera::interposer
