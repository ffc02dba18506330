// libFuzzer target: the Kubernetes quantity parser. Any byte string is parsed as a quantity in every
// unit family; whatever parses must format back to a quantity that parses to the same amount.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/api/quantity.h"

namespace {

constexpr std::string_view kResources[] = {"cpu", "memory", "nvidia.com/gpu", "pods", "ephemeral-storage",
                                           "example.com/foo"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::api;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)parseQuantityMilli(text);
  (void)parseQuantityValue(text);
  for (std::string_view res : kResources) {
    auto amount = parseResourceAmount(res, text);
    if (!amount.ok()) continue;
    // Round trip: the formatted amount is a quantity naming exactly the same amount.
    const std::string formatted = formatResourceAmount(res, *amount);
    auto again = parseResourceAmount(res, formatted);
    if (!again.ok() || *again != *amount) __builtin_trap();
  }
  return 0;
}
