// tessera.dev/use-gpu-uuid, nouse-gpu-uuid (HAMi's nvidia.com/use-gpuuuid, nouse-gpuuuid as aliases)
// and nouse-gpu-type: parsing, errors naming the annotation, and which UUIDs a pod may use.
#include <catch2/catch.hpp>

#include "tessera/api/gpu_request.h"

using namespace tessera;  // NOLINT

namespace {
api::Result<api::PodGpuSpec> parse(const api::StringMap& annotations, int64_t milliGpu = 0) {
  api::Resources requests;
  requests.milliGpu = milliGpu;
  return api::parsePodGpuSpec(annotations, requests);
}
}  // namespace

TEST_CASE("gpu uuid rules: pin and avoid lists, HAMi aliases, the Tessera key wins") {
  auto pinned = parse({{"gpu-fraction", "0.5"}, {"tessera.dev/use-gpu-uuid", "GPU-a, GPU-b"}});
  REQUIRE(pinned.ok());
  CHECK(pinned->useGpuUuids == std::vector<std::string>{"GPU-a", "GPU-b"});
  CHECK(pinned->gpuUuidAllowed("GPU-a"));
  CHECK(pinned->gpuUuidAllowed("GPU-b"));
  CHECK_FALSE(pinned->gpuUuidAllowed("GPU-c"));
  CHECK_FALSE(pinned->gpuUuidAllowed(""));  // a GPU not known yet is never assumed to be the pinned one

  auto avoiding = parse({{"gpu-memory", "4096"}, {"nvidia.com/nouse-gpuuuid", "GPU-bad"}});
  REQUIRE(avoiding.ok());
  CHECK(avoiding->avoidGpuUuids == std::vector<std::string>{"GPU-bad"});
  CHECK_FALSE(avoiding->gpuUuidAllowed("GPU-bad"));
  CHECK(avoiding->gpuUuidAllowed("GPU-good"));
  CHECK_FALSE(avoiding->gpuUuidAllowed(""));

  auto both = parse({{"gpu-fraction", "0.5"},
                     {"tessera.dev/use-gpu-uuid", "GPU-a,GPU-b"},
                     {"nvidia.com/use-gpuuuid", "GPU-z"},
                     {"tessera.dev/nouse-gpu-uuid", "GPU-b"}});
  REQUIRE(both.ok());
  CHECK(both->useGpuUuids == std::vector<std::string>{"GPU-a", "GPU-b"});
  CHECK(both->gpuUuidAllowed("GPU-a"));
  CHECK_FALSE(both->gpuUuidAllowed("GPU-b"));  // avoided wins over pinned
  CHECK_FALSE(both->gpuUuidAllowed("GPU-z"));

  auto none = parse({{"gpu-fraction", "0.5"}});
  REQUIRE(none.ok());
  CHECK_FALSE(none->filtersGpuUuids());
  CHECK(none->gpuUuidAllowed(""));

  // The binder reads the rules alone.
  auto rules = api::parseGpuUuidRules({{"nvidia.com/use-gpuuuid", "MIG-1"}});
  REQUIRE(rules.ok());
  CHECK(rules->useGpuUuids == std::vector<std::string>{"MIG-1"});
}

TEST_CASE("gpu uuid rules: bad values are refused with the annotation named") {
  auto notUuid = parse({{"gpu-fraction", "0.5"}, {"tessera.dev/use-gpu-uuid", "GPU-a,0"}});
  REQUIRE_FALSE(notUuid.ok());
  CHECK(notUuid.error().message.find("tessera.dev/use-gpu-uuid") != std::string::npos);
  CHECK(notUuid.error().message.find("\"0\", not a GPU UUID") != std::string::npos);

  auto empty = parse({{"gpu-fraction", "0.5"}, {"nvidia.com/nouse-gpuuuid", " , "}});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message.find("nvidia.com/nouse-gpuuuid") != std::string::npos);

  // Whole GPUs are the device plugin's choice: a rule the scheduler could not keep is refused.
  auto whole = parse({{"tessera.dev/use-gpu-uuid", "GPU-a"}}, 1000);
  REQUIRE_FALSE(whole.ok());
  CHECK(whole.error().message.find("needs gpu-fraction or gpu-memory") != std::string::npos);
}

TEST_CASE("gpu type rules: nouse-gpu-type is read as avoid-gpu-type, which wins when both are set") {
  auto alias = parse({{"tessera.dev/nouse-gpu-type", "Tesla-T4"}});
  REQUIRE(alias.ok());
  CHECK(alias->avoidGpuTypes == std::vector<std::string>{"Tesla-T4"});
  auto both = parse({{"tessera.dev/avoid-gpu-type", "A10"}, {"tessera.dev/nouse-gpu-type", "Tesla-T4"}});
  REQUIRE(both.ok());
  CHECK(both->avoidGpuTypes == std::vector<std::string>{"A10"});
}
