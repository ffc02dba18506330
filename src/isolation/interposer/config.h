#pragma once
/// Parsing of the interposer's environment. Pure functions over strings: no allocation, no
/// globals, no libstdc++ runtime, so they are usable from inside the preloaded library and
/// testable in-process.

#include <cstddef>
#include <cstdint>

namespace tessera::interposer {

/// Most GPUs one container can see; also the device table size in the shared region.
inline constexpr int kMaxDevices = 32;
/// Longest accepted path for the shared accounting file.
inline constexpr std::size_t kMaxPathLength = 512;
/// Default location of the shared accounting file (see docs/isolation.md).
inline constexpr const char kDefaultRegionPath[] = "/tmp/tessera-cuda.region";
/// What a process's CUDA context is charged per GPU when NVML cannot measure it
/// (TESSERA_CONTEXT_RESERVE_MIB overrides; docs/isolation.md, "Context memory").
inline constexpr std::uint64_t kDefaultContextReserveMiB = 256;

struct Uuid {
  unsigned char bytes[16];
};

inline bool operator==(const Uuid& a, const Uuid& b) {
  for (int i = 0; i < 16; ++i) {
    if (a.bytes[i] != b.bytes[i]) return false;
  }
  return true;
}

/// Parses a strict decimal byte count: one or more ASCII digits, no sign, no whitespace, no
/// suffix, no leading zero (except "0" itself), at most INT64_MAX. Returns false otherwise.
bool parseDecimalBytes(const char* text, std::uint64_t* out);

/// Parses "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or "MIG-..."; hex case-insensitive) into 16
/// bytes. `len` is the number of characters to read from `text`.
bool parseUuid(const char* text, std::size_t len, Uuid* out);

/// Formats as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". `out` must hold at least 41 bytes.
void formatUuid(const Uuid& uuid, char* out);

struct DeviceLimit {
  Uuid uuid;
  std::uint64_t limit;
};

enum class LogLevel { kInfo, kDebug };

/// GPU_CORE_LIMIT_POLICY (docs/isolation.md, "Compute limit"): kStrict holds the pod to its share
/// always (HAMi's GPU_CORE_UTILIZATION_POLICY=force); kBurst lets it use the whole GPU while no
/// other process does (HAMi's default, with contention measured here rather than by a monitor).
enum class CorePolicy { kStrict, kBurst };

/// Everything the interposer reads from the environment, parsed once.
struct Config {
  /// False when isolation cannot be enforced as configured; `error` says why. The library then
  /// fails closed: cuInit and every charged allocation are refused.
  bool valid = false;
  char error[640] = {};
  std::uint64_t defaultLimit = 0;
  DeviceLimit perDevice[kMaxDevices] = {};
  int perDeviceCount = 0;
  char regionPath[kMaxPathLength] = {};
  LogLevel logLevel = LogLevel::kInfo;
  /// Bytes charged for this process's context on each GPU it uses when NVML has no figure.
  std::uint64_t contextReserve = kDefaultContextReserveMiB << 20;
  /// GPU_CORE_LIMIT: the pod's share of each GPU's SMs in percent, 1..99; 0 = no compute limit
  /// (unset, empty, 0 or 100). Kernel launches are throttled only when this is non-zero.
  int coreLimit = 0;
  CorePolicy corePolicy = CorePolicy::kStrict;
  /// The pod and container, from the downward API (the webhook sets them; empty when unset).
  char podUid[48] = {};
  char podNamespace[64] = {};
  char podName[256] = {};
  char containerName[64] = {};

  /// The limit for the GPU with this UUID: its per-device entry, else the default limit.
  std::uint64_t limitFor(const Uuid& uuid) const;
};

/// `getenvFn` abstracts getenv so tests can feed an environment without touching the process's.
using GetEnvFn = const char* (*)(const char* name);

/// Reads GPU_MEMORY_LIMIT, TESSERA_GPU_MEMORY_LIMITS, TESSERA_ISOLATION_REGION,
/// TESSERA_CONTEXT_RESERVE_MIB, GPU_CORE_LIMIT, GPU_CORE_LIMIT_POLICY, TESSERA_ISOLATION_LOG and the
/// identity variables TESSERA_POD_UID, TESSERA_POD_NAMESPACE, TESSERA_POD_NAME,
/// TESSERA_CONTAINER_NAME. Loading the library means isolation is requested, so a missing or
/// malformed GPU_MEMORY_LIMIT (or context reserve, or a malformed core limit or policy) yields
/// valid == false.
void loadConfig(GetEnvFn getenvFn, Config* out);

}  // namespace tessera::interposer
