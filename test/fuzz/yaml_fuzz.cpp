// libFuzzer target: the YAML loader behind scenario files and manifests (api::yamlToJson), and
// every converter on the documents it yields.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::api;
  auto docs = yamlToJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!docs.ok()) return 0;
  for (const auto& j : *docs) {
    (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    auto kind = kindOf(j);
    if (!kind.ok()) continue;
    (void)describeObject(j);
    (void)podFromJson(j);
    (void)queueFromJson(j);
    (void)podGroupFromJson(j);
    (void)nodeFromJson(j);
  }
  return 0;
}
