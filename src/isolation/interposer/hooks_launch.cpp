// Kernel launches: the compute limit (GPU_CORE_LIMIT; core_limit.h, docs/isolation.md "Compute
// limit"). Each hook spends the grid's thread blocks from the bucket of the current GPU, waiting
// while it is empty, then calls the driver. Without a limit the only addition is one predictable
// branch. Graph launches (cuGraphLaunch) are not throttled: their work is not known at launch.

#include <cstdint>

#include "core_limit.h"
#include "hooks.h"
#include "runtime.h"

using namespace tessera::cu;          // NOLINT: ABI vocabulary
using namespace tessera::interposer;  // NOLINT

namespace {

inline std::uint64_t gridBlocks(unsigned int x, unsigned int y, unsigned int z) {
  return static_cast<std::uint64_t>(x) * y * z;
}

}  // namespace

#define TESSERA_LAUNCH_KERNEL(name)                                                                                \
  CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
                unsigned int bz, unsigned int shared, CUstream stream, void** params, void** extra) {              \
    TESSERA_REQUIRE_REAL(name);                                                                                    \
    if (coreLimited()) throttleLaunch(gridBlocks(gx, gy, gz));                                                     \
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);                                         \
  }
TESSERA_LAUNCH_KERNEL(cuLaunchKernel)
TESSERA_LAUNCH_KERNEL(cuLaunchKernel_ptsz)
#undef TESSERA_LAUNCH_KERNEL

#define TESSERA_LAUNCH_COOPERATIVE(name)                                                                           \
  CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
                unsigned int bz, unsigned int shared, CUstream stream, void** params) {                            \
    TESSERA_REQUIRE_REAL(name);                                                                                    \
    if (coreLimited()) throttleLaunch(gridBlocks(gx, gy, gz));                                                     \
    return real(f, gx, gy, gz, bx, by, bz, shared, stream, params);                                                \
  }
TESSERA_LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel)
TESSERA_LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel_ptsz)
#undef TESSERA_LAUNCH_COOPERATIVE

#define TESSERA_LAUNCH_EX(name)                                                            \
  CUresult name(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) { \
    TESSERA_REQUIRE_REAL(name);                                                            \
    if (coreLimited() && config != nullptr) {                                              \
      throttleLaunch(gridBlocks(config->gridDimX, config->gridDimY, config->gridDimZ));    \
    }                                                                                      \
    return real(config, f, params, extra);                                                 \
  }
TESSERA_LAUNCH_EX(cuLaunchKernelEx)
TESSERA_LAUNCH_EX(cuLaunchKernelEx_ptsz)
#undef TESSERA_LAUNCH_EX
