// tessera.dev/gpu-cores and tessera.dev/gpu-cores-policy: parsing and the GPU_CORE_LIMIT the binder
// writes into the pod's GPU ConfigMap (docs/isolation.md, "Compute limit").
#include <catch2/catch.hpp>

#include "tessera/api/gpu_request.h"

using namespace tessera;  // NOLINT

namespace {
api::Result<api::PodGpuSpec> parse(const api::StringMap& annotations) {
  return api::parsePodGpuSpec(annotations, api::Resources{});
}
}  // namespace

TEST_CASE("gpu-cores: the compute limit follows gpu-cores, else the fraction; whole GPUs get none") {
  struct Case {
    api::StringMap annotations;
    int32_t percent;
  };
  const Case cases[] = {
      {{{"gpu-fraction", "0.25"}}, 25},
      {{{"gpu-fraction", "0.5"}}, 50},
      {{{"gpu-fraction", "0.333"}}, 33},
      {{{"gpu-fraction", "0.125"}}, 13},  // rounded to the nearest percent
      {{{"gpu-fraction", "0.001"}}, 1},   // never 0 (that would mean no limit)
      {{{"gpu-fraction", "0.999"}}, 0},   // 100%: no limit
      {{{"gpu-fraction", "0.25"}, {"tessera.dev/gpu-cores", "60"}}, 60},
      {{{"gpu-fraction", "0.25"}, {"tessera.dev/gpu-cores", "100"}}, 0},
      {{{"gpu-memory", "4096"}}, 0},  // by memory, no explicit share: no compute limit
      {{{"gpu-memory", "4096"}, {"tessera.dev/gpu-cores", "30"}}, 30},
      {{{"gpu-fraction", "0.5"}, {"gpu-fraction-num-devices", "2"}, {"tessera.dev/gpu-cores", "40"}}, 40},
      {{}, 0},  // not a shared pod
  };
  for (const auto& c : cases) {
    auto spec = parse(c.annotations);
    REQUIRE(spec.ok());
    INFO("fraction " << spec->fractionMilli << " cores " << spec->corePercent);
    CHECK(api::gpuCoreLimitPercent(*spec) == c.percent);
  }
  auto burst = parse({{"gpu-fraction", "0.25"}, {"tessera.dev/gpu-cores-policy", "burst"}});
  REQUIRE(burst.ok());
  CHECK(burst->coresPolicy == api::GpuCoresPolicy::Burst);
  auto strict = parse({{"gpu-fraction", "0.25"}, {"tessera.dev/gpu-cores-policy", "strict"}});
  REQUIRE(strict.ok());
  CHECK(strict->coresPolicy == api::GpuCoresPolicy::Strict);
  CHECK(parse({{"gpu-fraction", "0.25"}})->coresPolicy == api::GpuCoresPolicy::Unset);
}

TEST_CASE("gpu-cores: the compute a share takes of its GPU (for coreScaling) is gpu-cores, else the fraction") {
  struct Case {
    api::StringMap annotations;
    int64_t milli;
  };
  const Case cases[] = {
      {{{"gpu-fraction", "0.25"}}, 250},
      {{{"gpu-fraction", "0.333"}}, 333},  // exact: three of them fit in one GPU's compute
      {{{"gpu-fraction", "0.999"}}, 999},  // counted although its limit is none
      {{{"gpu-fraction", "0.25"}, {"tessera.dev/gpu-cores", "60"}}, 600},
      {{{"gpu-fraction", "0.25"}, {"tessera.dev/gpu-cores", "100"}}, 1000},
      {{{"gpu-memory", "4096"}}, 0},  // no compute limit: takes none (HAMi)
      {{{"gpu-memory", "4096"}, {"tessera.dev/gpu-cores", "30"}}, 300},
      {{{"tessera.dev/gpu-cores", "30"}}, 300},  // a compute share alone
      {{{"gpu-fraction", "0.5"}, {"gpu-fraction-num-devices", "2"}, {"tessera.dev/gpu-cores", "40"}}, 400},
      {{}, 0},
  };
  for (const auto& c : cases) {
    auto spec = parse(c.annotations);
    REQUIRE(spec.ok());
    INFO("fraction " << spec->fractionMilli << " cores " << spec->corePercent);
    CHECK(api::gpuComputeMilli(*spec) == c.milli);
  }
  // gpuSharing.defaultCores counts like a given gpu-cores.
  auto defaulted = api::parsePodGpuSpec({{"gpu-memory", "4096"}}, api::Resources{}, api::GpuShareDefaults{0, 20});
  REQUIRE(defaulted.ok());
  CHECK(api::gpuComputeMilli(*defaulted) == 200);
}

TEST_CASE("gpu-cores: bad values are refused naming the annotation") {
  const std::pair<api::StringMap, std::string> cases[] = {
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-cores", "0"}},
       "annotation tessera.dev/gpu-cores: \"0\" is not a whole percent of the GPU's compute from 1 to 100"},
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-cores", "25%"}},
       "annotation tessera.dev/gpu-cores: \"25%\" is not a whole percent of the GPU's compute from 1 to 100"},
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-cores", "0.5"}},
       "annotation tessera.dev/gpu-cores: \"0.5\" is not a whole percent of the GPU's compute from 1 to 100"},
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-cores", "101"}},
       "annotation tessera.dev/gpu-cores: \"101\" is too large: at most 100"},
      {{{"gpu-fraction", "0.5"}, {"tessera.dev/gpu-cores-policy", "force"}},
       "annotation tessera.dev/gpu-cores-policy: \"force\" is not a known policy (valid: strict, burst)"},
      {{{"tessera.dev/gpu-cores", "100"}},  // alone and without a default memory: no share to derive
       "annotation tessera.dev/gpu-cores needs gpu-fraction or gpu-memory (a pod with whole GPUs has all of their "
       "compute)"},
      {{{"tessera.dev/gpu-cores-policy", "burst"}},
       "annotation tessera.dev/gpu-cores-policy needs gpu-fraction or gpu-memory (a pod with whole GPUs has all of "
       "their compute)"},
  };
  for (const auto& [annotations, message] : cases) {
    auto spec = parse(annotations);
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.error().message == message);
    CHECK(spec.error().code == 422);
  }
}

TEST_CASE("a compute share alone takes the cluster's default memory, else the same share of memory; a memory share "
          "takes the default compute limit",
          "[gpu][cores]") {
  using tessera::api::GpuShareDefaults;
  using tessera::api::parsePodGpuSpec;
  const tessera::api::StringMap coresOnly{{"tessera.dev/gpu-cores", "30"}};
  // No defaults: gpu-cores 30 is a 0.3 share of the GPU, limited to 30%.
  auto plain = parsePodGpuSpec(coresOnly, {});
  REQUIRE(plain.ok());
  CHECK(plain->fractionMilli == 300);
  CHECK(plain->memoryMiB == 0);
  CHECK_FALSE(plain->memoryDefaulted);
  CHECK(tessera::api::gpuCoreLimitPercent(*plain) == 30);
  // A default memory: the share is that memory, and says it was defaulted.
  auto withMemory = parsePodGpuSpec(coresOnly, {}, GpuShareDefaults{20000, 0});
  REQUIRE(withMemory.ok());
  CHECK(withMemory->fractionMilli == 0);
  CHECK(withMemory->memoryMiB == 20000);
  CHECK(withMemory->memoryDefaulted);
  CHECK(tessera::api::gpuCoreLimitPercent(*withMemory) == 30);
  // The pod's own size wins over the default; whole-GPU pods take no default.
  auto own = parsePodGpuSpec({{"tessera.dev/gpu-cores", "30"}, {"gpu-memory", "5000"}}, {}, GpuShareDefaults{20000, 40});
  REQUIRE(own.ok());
  CHECK(own->memoryMiB == 5000);
  CHECK_FALSE(own->memoryDefaulted);
  CHECK(tessera::api::gpuCoreLimitPercent(*own) == 30);
  tessera::api::Resources whole;
  whole.milliGpu = 1000;
  CHECK_FALSE(parsePodGpuSpec(coresOnly, whole, GpuShareDefaults{20000, 40}).ok());
  // defaultCores: a gpu-memory pod without gpu-cores; a fraction keeps its own share.
  auto memory = parsePodGpuSpec({{"gpu-memory", "10000"}}, {}, GpuShareDefaults{0, 40});
  REQUIRE(memory.ok());
  CHECK(tessera::api::gpuCoreLimitPercent(*memory) == 40);
  auto fraction = parsePodGpuSpec({{"gpu-fraction", "0.25"}}, {}, GpuShareDefaults{0, 40});
  REQUIRE(fraction.ok());
  CHECK(tessera::api::gpuCoreLimitPercent(*fraction) == 25);
  // gpu-cores 100 alone with a default memory: a memory share with no compute limit.
  auto full = parsePodGpuSpec({{"tessera.dev/gpu-cores", "100"}}, {}, GpuShareDefaults{20000, 0});
  REQUIRE(full.ok());
  CHECK(full->memoryMiB == 20000);
  CHECK(tessera::api::gpuCoreLimitPercent(*full) == 0);
}

