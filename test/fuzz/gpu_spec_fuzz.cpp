// libFuzzer target: the GPU-sharing annotation parser alone (api::parsePodGpuSpec), fast enough for
// millions of inputs. The input's lines are the values of gpu-fraction, gpu-memory,
// gpu-fraction-num-devices, tessera.dev/gpu-policy, tessera.dev/node-policy, use/avoid-gpu-type and
// tessera.dev/isolation, tessera.dev/gpu-cores and tessera.dev/gpu-cores-policy (an empty line
// leaves the key out); a first byte's low bit adds a whole-GPU request. Checked: no crash, and an
// accepted spec is in range (fraction 1..999 thousandths, memory > 0, devices >= 1, not both
// fraction and memory, never with whole GPUs, a compute limit of 0..99 percent and none without a
// share), and the units a node is charged are exact and positive.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/api/gpu_request.h"
#include "tessera/cache/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string in(reinterpret_cast<const char*>(data), size);
  const char* const keys[] = {api::keys::kGpuFraction, api::keys::kGpuMemory, api::keys::kGpuFractionNumDevices,
                              api::keys::kGpuPolicy,   api::keys::kNodePolicy, api::keys::kUseGpuType,
                              api::keys::kAvoidGpuType, api::keys::kIsolation, api::keys::kGpuCores,
                              api::keys::kGpuCoresPolicy};
  api::StringMap ann;
  size_t start = 0, k = 0;
  while (start <= in.size() && k < std::size(keys)) {
    size_t nl = in.find('\n', start);
    if (nl == std::string::npos) nl = in.size();
    if (nl > start) ann[keys[k]] = in.substr(start, nl - start);
    ++k;
    start = nl + 1;
  }
  api::Resources req;
  if (size > 0 && (data[0] & 1)) req.milliGpu = 1000;
  auto spec = api::parsePodGpuSpec(ann, req);
  if (!spec.ok()) {
    if (spec.error().message.empty()) std::abort();
    return 0;
  }
  const api::PodGpuSpec& s = *spec;
  if (s.fractionMilli < 0 || s.fractionMilli >= 1000 || s.memoryMiB < 0 || s.numDevices < 1) std::abort();
  if (s.fractionMilli > 0 && s.memoryMiB > 0) std::abort();
  if (s.shared() && req.milliGpu > 0) std::abort();
  const int32_t cores = api::gpuCoreLimitPercent(s);
  if (s.corePercent < 0 || s.corePercent > 100 || cores < 0 || cores > 99) std::abort();
  if (!s.shared() && (cores != 0 || s.corePercent != 0)) std::abort();
  if (s.fractionMilli > 0 && s.corePercent == 0 && cores == 0 && s.fractionMilli < 995) std::abort();
  if (s.shared()) {
    cache::NodeInfo n;
    for (int64_t mem : {int64_t{0}, int64_t{40960}, int64_t{81920}}) {
      n.gpuMemoryMiB = mem;
      const int64_t units = cache::gpuUnitsOn(s, n);
      if (units < 0) std::abort();
      if (s.fractionMilli > 0 && units != s.fractionMilli * (mem > 0 ? mem : 1)) std::abort();
      if (cache::gpuChargeMilli(s, mem) <= 0) std::abort();
    }
  }
  return 0;
}
