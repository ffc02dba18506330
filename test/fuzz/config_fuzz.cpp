// libFuzzer target: a scheduler config file (framework::loadConfigYaml with every built-in action
// and plugin registered): unknown keys, wrong types and bad values must be errors, never crashes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/app/registry.h"
#include "tessera/framework/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)tessera::framework::loadConfigYaml(tessera::app::builtinRegistry(), text);
  return 0;
}
