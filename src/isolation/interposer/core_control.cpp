#include "core_control.h"

namespace tessera::interposer {

namespace {
double clampRate(double r) { return r < kMinCoreRate ? kMinCoreRate : r; }
}  // namespace

void CoreControl::step(double spent, const CoreSample& sample) {
  if (spent < 0) spent = 0;
  consumed = consumed < 0 ? spent : 0.5 * consumed + 0.5 * spent;
  if (!sample.valid) return;
  const int others = sample.total > sample.pod ? sample.total - sample.pod : 0;
  if (policy == CorePolicy::kBurst && sample.othersKnown && others < kBurstIdlePercent) {
    open = true;  // work-conserving: nobody else wants the GPU
    return;
  }
  if (sample.pod <= 0) {
    // The pod did not show on the GPU: idle, or NVML has not caught up with it yet. Keep the rate;
    // if the pod spends what it is given, let it have more (the measurement is lagging).
    if (!open && consumed >= 0.5 * rate) rate = clampRate(rate * 1.5);
    return;
  }
  const double desired = clampRate(consumed * limit / sample.pod);
  if (open || !calibrated) {
    // Leaving the open state: the first estimate is the best there is.
    rate = desired;
    open = false;
    calibrated = true;
    return;
  }
  double next = 0.5 * (rate + desired);
  if (next > 2 * rate) next = 2 * rate;
  if (next < 0.5 * rate) next = 0.5 * rate;
  rate = clampRate(next);
}

}  // namespace tessera::interposer
