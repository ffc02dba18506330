// MIG profiles (the NVIDIA device plugin's mixed strategy): which resources are profiles, and the
// part of a GPU each instance is charged as (docs/gpu-sharing.md, "MIG").
#include <catch2/catch.hpp>

#include "tessera/api/gpu_request.h"

using namespace tessera;  // NOLINT

TEST_CASE("mig: profile resource names parse; other resources are not profiles") {
  auto p = api::parseMigProfile("nvidia.com/mig-3g.40gb");
  REQUIRE(p);
  CHECK(p->computeSlices == 3);
  CHECK(p->memoryGb == 40);
  auto me = api::parseMigProfile("nvidia.com/mig-1g.10gb+me");
  REQUIRE(me);
  CHECK(me->memoryGb == 10);
  for (const char* other : {"nvidia.com/gpu", "nvidia.com/mig-", "nvidia.com/mig-1g", "nvidia.com/mig-1g.10",
                            "nvidia.com/mig-1g.10gbx", "nvidia.com/mig-0g.10gb", "nvidia.com/mig-9g.10gb",
                            "nvidia.com/mig-1g.0gb", "example.com/mig-1g.10gb", "nvidia.com/mig-g.10gb"}) {
    INFO(other);
    CHECK_FALSE(api::parseMigProfile(other));
  }
}

TEST_CASE("mig: an instance is charged its memory over the GPU's in eighths, else its compute over 7") {
  struct Case {
    const char* profile;
    int64_t gpuMiB;
    int64_t milli;
  };
  const Case cases[] = {
      {"nvidia.com/mig-1g.10gb", 81920, 125},  // A100/H100 80GB
      {"nvidia.com/mig-1g.20gb", 81920, 250},
      {"nvidia.com/mig-2g.20gb", 81920, 250},
      {"nvidia.com/mig-3g.40gb", 81920, 500},
      {"nvidia.com/mig-4g.40gb", 81920, 500},
      {"nvidia.com/mig-7g.80gb", 81920, 1000},
      {"nvidia.com/mig-7g.80gb", 81559, 1000},  // the label as the driver reports it
      {"nvidia.com/mig-1g.5gb", 40960, 125},    // A100 40GB
      {"nvidia.com/mig-3g.20gb", 40960, 500},
      {"nvidia.com/mig-1g.6gb", 24576, 250},    // A30: 4 memory slices, each two eighths
      {"nvidia.com/mig-1g.12gb", 96256, 125},   // H100 NVL 94GB
      {"nvidia.com/mig-3g.47gb", 96256, 500},
      {"nvidia.com/mig-1g.10gb", 0, 143},       // no nvidia.com/gpu.memory label: 1 of 7
      {"nvidia.com/mig-3g.40gb", 0, 429},
      {"nvidia.com/mig-7g.80gb", 0, 1000},
      {"nvidia.com/mig-1g.1gb", 81920, 125},    // never below one eighth
      {"nvidia.com/mig-7g.200gb", 81920, 1000}, // never above the whole GPU
  };
  for (const auto& c : cases) {
    INFO(c.profile << " on " << c.gpuMiB << " MiB");
    auto p = api::parseMigProfile(c.profile);
    REQUIRE(p);
    CHECK(api::migShareMilli(*p, c.gpuMiB) == c.milli);
  }
  api::Resources r;
  r.milliGpu = 1000;  // whole GPUs are not MIG instances
  r.set("nvidia.com/mig-1g.10gb", 3);
  r.set("nvidia.com/mig-3g.40gb", 1);
  r.set("example.com/foo", 5);
  CHECK(api::migGpuMilli(r, 81920) == 3 * 125 + 500);
  CHECK(api::migGpuMilli(api::Resources{}, 81920) == 0);
}
