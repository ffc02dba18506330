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
      {{{"tessera.dev/gpu-cores", "30"}},
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
