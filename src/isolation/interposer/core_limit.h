#pragma once
/// The compute limit (GPU_CORE_LIMIT, docs/isolation.md "Compute limit"): kernel launches spend
/// tokens from a per-GPU bucket that a watcher thread refills at the rate core_control.h
/// calibrates from NVML's SM utilization of the pod.
///
/// Cost on the launch path: with no limit, the one predictable branch of coreLimited(); with a
/// limit, one atomic subtraction while the bucket holds tokens (plus cuCtxGetDevice when the
/// process sees more than one GPU). No thread exists unless a limit is set and a kernel launched.
/// The bucket is per process; the utilization it is steered by is the pod's (every process of
/// the pod that the shared region lists), so the pod as a whole is held to its share.

#include <cstdint>

#include "config.h"

namespace tessera::interposer {

namespace core_detail {
/// GPU_CORE_LIMIT once init() has run and the limit can be enforced; 0 otherwise.
extern int gCoreLimit;
}  // namespace core_detail

/// True when kernel launches are throttled. Requires init().
inline bool coreLimited() { return __builtin_expect(core_detail::gCoreLimit != 0, 0); }

/// Called by init() with the parsed configuration (a valid one).
void coreLimitConfigure(const Config& cfg);

/// Spends `blocks` tokens for a launch on the calling thread's current GPU, sleeping in short
/// steps while the bucket is empty. Starts the watcher on first use.
void throttleLaunch(std::uint64_t blocks);

/// In a fork child: the watcher thread did not survive; the next launch starts a new one.
void coreLimitAfterFork();

}  // namespace tessera::interposer
