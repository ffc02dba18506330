#include "config.h"

#include <cstdio>
#include <cstring>

namespace tessera::interposer {

namespace {

constexpr std::uint64_t kMaxLimit = 0x7fffffffffffffffULL;

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Copies at most `max` characters of `text` for an error message, replacing control characters
// so a hostile value cannot forge extra log lines.
void quoteForMessage(const char* text, std::size_t len, char* out, std::size_t outSize) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < len && text[i] != '\0' && n + 4 < outSize; ++i) {
    char c = text[i];
    out[n++] = (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (n + 4 < outSize || len > n) {
    if (len > n && text[n] != '\0') {
      out[n++] = '.';
      out[n++] = '.';
      out[n++] = '.';
    }
  }
  out[n] = '\0';
}

bool parseDecimalRange(const char* text, std::size_t len, std::uint64_t* out) {
  if (len == 0) return false;
  if (len > 1 && text[0] == '0') return false;  // "010": ambiguous (octal?) - reject
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < len; ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return false;
    std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (kMaxLimit - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

}  // namespace

bool parseDecimalBytes(const char* text, std::uint64_t* out) {
  if (text == nullptr) return false;
  return parseDecimalRange(text, std::strlen(text), out);
}

bool parseUuid(const char* text, std::size_t len, Uuid* out) {
  // "GPU-" + 8-4-4-4-12 hex digits = 4 + 36 characters.
  if (len != 40) return false;
  if (std::strncmp(text, "GPU-", 4) != 0 && std::strncmp(text, "MIG-", 4) != 0) return false;
  const char* p = text + 4;
  int byte = 0;
  for (int i = 0; i < 36; ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (p[i] != '-') return false;
      continue;
    }
    int hi = hexValue(p[i]);
    int lo = (i + 1 < 36) ? hexValue(p[i + 1]) : -1;
    if (hi < 0 || lo < 0) return false;
    out->bytes[byte++] = static_cast<unsigned char>(hi * 16 + lo);
    ++i;
  }
  return byte == 16;
}

void formatUuid(const Uuid& uuid, char* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::memcpy(out, "GPU-", 4);
  char* p = out + 4;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = kHex[uuid.bytes[i] >> 4];
    *p++ = kHex[uuid.bytes[i] & 0xf];
  }
  *p = '\0';
}

std::uint64_t Config::limitFor(const Uuid& uuid) const {
  for (int i = 0; i < perDeviceCount; ++i) {
    if (perDevice[i].uuid == uuid) return perDevice[i].limit;
  }
  return defaultLimit;
}

namespace {

// "GPU-<uuid>=<bytes>[,GPU-<uuid>=<bytes>...]"
bool parseDeviceLimits(const char* text, Config* cfg) {
  const char* p = text;
  char quoted[96];
  while (true) {
    const char* end = std::strchr(p, ',');
    std::size_t len = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
    const char* eq = static_cast<const char*>(std::memchr(p, '=', len));
    Uuid uuid{};
    std::uint64_t limit = 0;
    if (eq == nullptr || !parseUuid(p, static_cast<std::size_t>(eq - p), &uuid) ||
        !parseDecimalRange(eq + 1, len - static_cast<std::size_t>(eq - p) - 1, &limit)) {
      quoteForMessage(p, len, quoted, sizeof quoted);
      std::snprintf(cfg->error, sizeof cfg->error,
                    "TESSERA_GPU_MEMORY_LIMITS entry '%s' is invalid (expected GPU-<uuid>=<decimal bytes>, "
                    "comma-separated)",
                    quoted);
      return false;
    }
    for (int i = 0; i < cfg->perDeviceCount; ++i) {
      if (cfg->perDevice[i].uuid == uuid) {
        quoteForMessage(p, len, quoted, sizeof quoted);
        std::snprintf(cfg->error, sizeof cfg->error, "TESSERA_GPU_MEMORY_LIMITS lists a GPU twice ('%s')", quoted);
        return false;
      }
    }
    if (cfg->perDeviceCount == kMaxDevices) {
      std::snprintf(cfg->error, sizeof cfg->error, "TESSERA_GPU_MEMORY_LIMITS lists more than %d GPUs", kMaxDevices);
      return false;
    }
    cfg->perDevice[cfg->perDeviceCount++] = DeviceLimit{uuid, limit};
    if (end == nullptr) return true;
    p = end + 1;
  }
}

void copyIdentity(GetEnvFn getenvFn, const char* name, char* out, std::size_t size) {
  const char* value = getenvFn(name);
  if (value == nullptr) return;
  // Labels for the monitor: keep printable ASCII only, truncate to the field.
  std::size_t n = 0;
  for (; value[n] != '\0' && n + 1 < size; ++n) out[n] = (value[n] > 0x20 && value[n] < 0x7f) ? value[n] : '_';
  out[n] = '\0';
}

// GPU_CORE_LIMIT (percent of the SMs, 0..100; unset, "" , 0 and 100 mean no limit) and
// GPU_CORE_LIMIT_POLICY (strict | burst; unset or "" = strict).
bool parseCoreLimit(GetEnvFn getenvFn, Config* cfg) {
  char quoted[96];
  if (const char* cores = getenvFn("GPU_CORE_LIMIT"); cores != nullptr && cores[0] != '\0') {
    std::uint64_t percent = 0;
    if (!parseDecimalBytes(cores, &percent) || percent > 100) {
      quoteForMessage(cores, std::strlen(cores), quoted, sizeof quoted);
      std::snprintf(cfg->error, sizeof cfg->error,
                    "GPU_CORE_LIMIT='%s' is not a percentage of the GPU's compute (expected an integer from 0 to "
                    "100, e.g. 25; 0 or 100 = no limit; no sign, '%%', spaces or leading zeros)",
                    quoted);
      return false;
    }
    cfg->coreLimit = percent == 100 ? 0 : static_cast<int>(percent);
  }
  if (const char* policy = getenvFn("GPU_CORE_LIMIT_POLICY"); policy != nullptr && policy[0] != '\0') {
    if (std::strcmp(policy, "strict") == 0) {
      cfg->corePolicy = CorePolicy::kStrict;
    } else if (std::strcmp(policy, "burst") == 0) {
      cfg->corePolicy = CorePolicy::kBurst;
    } else {
      quoteForMessage(policy, std::strlen(policy), quoted, sizeof quoted);
      std::snprintf(cfg->error, sizeof cfg->error,
                    "GPU_CORE_LIMIT_POLICY='%s' is not a known policy (valid: strict, burst)", quoted);
      return false;
    }
  }
  return true;
}

}  // namespace

void loadConfig(GetEnvFn getenvFn, Config* cfg) {
  *cfg = Config{};
  copyIdentity(getenvFn, "TESSERA_POD_UID", cfg->podUid, sizeof cfg->podUid);
  copyIdentity(getenvFn, "TESSERA_POD_NAMESPACE", cfg->podNamespace, sizeof cfg->podNamespace);
  copyIdentity(getenvFn, "TESSERA_POD_NAME", cfg->podName, sizeof cfg->podName);
  copyIdentity(getenvFn, "TESSERA_CONTAINER_NAME", cfg->containerName, sizeof cfg->containerName);
  const char* log = getenvFn("TESSERA_ISOLATION_LOG");
  cfg->logLevel = (log != nullptr && std::strcmp(log, "debug") == 0) ? LogLevel::kDebug : LogLevel::kInfo;

  const char* region = getenvFn("TESSERA_ISOLATION_REGION");
  if (region == nullptr) region = kDefaultRegionPath;
  char quoted[96];
  if (region[0] != '/' || std::strlen(region) >= kMaxPathLength) {
    quoteForMessage(region, std::strlen(region), quoted, sizeof quoted);
    std::snprintf(cfg->error, sizeof cfg->error,
                  "TESSERA_ISOLATION_REGION='%s' must be an absolute path shorter than %zu bytes", quoted,
                  kMaxPathLength);
    return;
  }
  std::memcpy(cfg->regionPath, region, std::strlen(region) + 1);

  const char* limit = getenvFn("GPU_MEMORY_LIMIT");
  if (limit == nullptr) {
    std::snprintf(cfg->error, sizeof cfg->error,
                  "GPU_MEMORY_LIMIT is not set, but the isolation library is loaded (isolation requested)");
    return;
  }
  if (!parseDecimalBytes(limit, &cfg->defaultLimit)) {
    quoteForMessage(limit, std::strlen(limit), quoted, sizeof quoted);
    std::snprintf(cfg->error, sizeof cfg->error,
                  "GPU_MEMORY_LIMIT='%s' is not a decimal byte count (expected digits only, e.g. 1073741824; "
                  "no units, sign, spaces or leading zeros)",
                  quoted);
    return;
  }
  const char* perDevice = getenvFn("TESSERA_GPU_MEMORY_LIMITS");
  if (perDevice != nullptr && perDevice[0] != '\0' && !parseDeviceLimits(perDevice, cfg)) return;
  if (const char* reserve = getenvFn("TESSERA_CONTEXT_RESERVE_MIB")) {
    std::uint64_t mib = 0;
    if (!parseDecimalBytes(reserve, &mib) || mib > (1ULL << 24)) {
      quoteForMessage(reserve, std::strlen(reserve), quoted, sizeof quoted);
      std::snprintf(cfg->error, sizeof cfg->error,
                    "TESSERA_CONTEXT_RESERVE_MIB='%s' is not a decimal count of MiB (digits only, at most 16777216)",
                    quoted);
      return;
    }
    cfg->contextReserve = mib << 20;
  }
  if (!parseCoreLimit(getenvFn, cfg)) return;
  cfg->valid = true;
}

}  // namespace tessera::interposer
