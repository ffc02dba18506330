#pragma once
/// Kubernetes quantities ("100m", "1.5", "2Gi", "1e3", "500M", "0.1") parsed exactly into int64.
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/api/result.h"

namespace tessera::api {

/// Parses a quantity and returns value × 1000 rounded up (Kubernetes MilliValue()).
/// Rejects garbage, empty strings, and values that overflow int64.
Result<int64_t> parseQuantityMilli(std::string_view text);
/// Parses a quantity and returns its value rounded up to an integer (Kubernetes Value()).
Result<int64_t> parseQuantityValue(std::string_view text);
/// Parses the amount of resource `name`: milli units for cpu and nvidia.com/gpu, base units otherwise.
Result<int64_t> parseResourceAmount(std::string_view name, std::string_view text);
/// True for resources held in milli units (cpu, nvidia.com/gpu).
bool isMilliResource(std::string_view name);
/// Formats a resource amount back as a quantity ("500m", "4", "32Gi", "0.5").
std::string formatResourceAmount(std::string_view name, int64_t amount);

}  // namespace tessera::api
