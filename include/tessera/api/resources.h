#pragma once
/// Integer resource vectors: milli-CPU, bytes of memory, milli-GPU, and any other resource by name.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::api {

inline constexpr std::string_view kResourceCpu = "cpu";
inline constexpr std::string_view kResourceMemory = "memory";
inline constexpr std::string_view kResourceGpu = "nvidia.com/gpu";
inline constexpr std::string_view kResourcePods = "pods";

/// A resource amount vector. cpu and nvidia.com/gpu are in thousandths, memory in bytes, other
/// resources ("scalars": extended resources, ephemeral-storage, hugepages-*) in their base unit
/// rounded up, as Kubernetes' Quantity.Value() does. Scalars are kept sorted by name.
/// Invariant: no scalar entry holds 0 after normalize() (operations keep entries they touch).
struct Resources {
  int64_t milliCpu = 0;
  int64_t memory = 0;
  int64_t milliGpu = 0;
  std::vector<std::pair<std::string, int64_t>> scalars;

  /// Amount of a resource by its Kubernetes name (0 when absent).
  int64_t get(std::string_view name) const;
  /// Sets a resource by its Kubernetes name.
  void set(std::string_view name, int64_t amount);

  Resources& operator+=(const Resources& o);
  Resources& operator-=(const Resources& o);
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  bool operator==(const Resources& o) const;

  /// Element-wise max (used for init containers).
  void maxWith(const Resources& o);
  /// True when every resource of *this is <= the same resource of `capacity` (absent = 0).
  bool fitsIn(const Resources& capacity) const;
  /// Appends to `out` the names of resources where *this exceeds `capacity`.
  void insufficient(const Resources& capacity, std::vector<std::string>& out) const;
  bool isZero() const;
  /// Drops scalar entries equal to zero.
  void normalize();
  /// "cpu: 4, memory: 32Gi, nvidia.com/gpu: 1".
  std::string toString() const;
};

}  // namespace tessera::api
