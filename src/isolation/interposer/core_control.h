#pragma once
/// The compute limit's controller (docs/isolation.md, "Compute limit"): pure arithmetic over what
/// the watcher measured, no globals, no clock, so it is testable in-process. The runtime
/// (core_limit.cpp) keeps one per GPU and calls step() once per control period.
///
/// Model. Kernel launches spend tokens from a bucket, one token per thread block of the grid (as
/// HAMi-core does); the watcher refills the bucket at `rate` tokens per period. How many tokens
/// one percent of the GPU is worth depends on the kernels, so the rate is not computed from the
/// GPU's size but calibrated from the feedback: over the last periods the process spent
/// `consumed` tokens per period while NVML saw the pod at `pod` percent, so the share `limit`
/// costs consumed * limit / pod tokens per period. The controller moves the rate halfway towards
/// that each period, by at most a factor of 2, so a noisy or lagging NVML sample cannot make it
/// swing. Spending measured rather than the rate granted is what keeps an idle or demand-limited
/// pod from winding the rate up. (No libm: the library links nothing but libc, libdl, libpthread.)

#include "config.h"

namespace tessera::interposer {

/// One NVML reading of a GPU over its recent sample window.
struct CoreSample {
  bool valid = false;       ///< false: nothing usable was measured; the controller keeps its state
  int pod = 0;              ///< SM utilization of this pod's processes, percent of the GPU
  int total = 0;            ///< SM utilization of every process on the GPU, this pod's included
  bool othersKnown = true;  ///< false when `pod` could not be told apart from `total` (see core_limit.cpp)
};

/// Below this utilization of other processes the GPU counts as idle for the burst policy.
inline constexpr int kBurstIdlePercent = 5;
/// The rate never drops below this many tokens per period, so a throttled pod always progresses.
inline constexpr double kMinCoreRate = 16;

struct CoreControl {
  int limit = 0;  ///< percent, 1..99
  CorePolicy policy = CorePolicy::kStrict;
  /// Launches are not throttled. True until the first calibration (nothing to calibrate on before
  /// the pod has run and been measured), and under kBurst while no one else uses the GPU.
  bool open = true;
  bool calibrated = false;
  double rate = 0;       ///< tokens per period while not open
  double consumed = -1;  ///< smoothed tokens spent per period (-1: no period seen yet)

  /// One control period: `spent` tokens were spent by this process in it; `sample` is NVML's view.
  void step(double spent, const CoreSample& sample);
};

}  // namespace tessera::interposer
