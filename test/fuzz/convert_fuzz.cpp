// libFuzzer target: Kubernetes JSON -> api objects. The bytes are parsed as JSON (without
// exceptions); whatever parses goes through every converter. Errors are fine, crashes are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::api;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  (void)kindOf(j);
  (void)describeObject(j);
  (void)metaFromJson(j);
  (void)podFromJson(j);
  (void)nodeFromJson(j);
  (void)podGroupFromJson(j);
  (void)queueFromJson(j);
  (void)topologyFromJson(j);
  (void)priorityClassFromJson(j);
  (void)namespaceFromJson(j);
  (void)configMapFromJson(j);
  return 0;
}
