#include "tessera/api/gpu_request.h"

#include "tessera/api/text.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace tessera::api {

namespace {

std::string quoted(const std::string& v) { return api::quoteValue(v); }

Error bad(const char* key, const std::string& value, const std::string& what) {
  return makeError(std::string("annotation ") + key + ": " + quoted(value) + " " + what, 422);
}

/// A positive decimal integer without sign or spaces, up to `max`.
std::optional<int64_t> parsePositiveInt(const std::string& s, int64_t max) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0 || v > max) return std::nullopt;
  return v;
}

/// What is wrong with `s` when parsePositiveInt(s, max) refused it: a number of digits above `max`
/// (however long) "is too large: at most MAX"; anything else `otherwise`.
std::string positiveIntProblem(const std::string& s, int64_t max, const std::string& otherwise) {
  const bool digitsOnly = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  if (digitsOnly && s.find_first_not_of('0') != std::string::npos)
    return "is too large: at most " + std::to_string(max);
  return otherwise;
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(start, comma - start);
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    start = comma + 1;
  }
  return out;
}

std::optional<GpuPolicy> parsePolicy(const std::string& v) {
  if (v == "binpack") return GpuPolicy::Binpack;
  if (v == "spread") return GpuPolicy::Spread;
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> parseDecimalMilli(const std::string& text) {
  if (text.empty() || text.size() > 32) return std::nullopt;
  size_t i = 0;
  int64_t whole = 0;
  bool digits = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (whole > 1'000'000) return std::nullopt;
    whole = whole * 10 + (text[i] - '0');
    ++i, digits = true;
  }
  // Thousandths plus the next digit, for rounding to nearest.
  int64_t frac = 0;
  int places = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    bool fracDigits = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (places < 4) frac = frac * 10 + (text[i] - '0'), ++places;
      ++i, fracDigits = true;
    }
    if (!fracDigits && !digits) return std::nullopt;
    digits = true;
  }
  if (!digits || i != text.size()) return std::nullopt;
  while (places < 4) frac *= 10, ++places;
  return whole * 1000 + (frac + 5) / 10;
}

namespace {

/// tessera.dev/use-gpu-uuid and nouse-gpu-uuid, else HAMi's nvidia.com/use-gpuuuid and
/// nouse-gpuuuid. Each a comma list of GPU UUIDs (GPU-... or MIG-...).
Status readGpuUuidRules(const StringMap& annotations, PodGpuSpec& spec) {
  auto read = [&](const char* key, const char* alias, std::vector<std::string>& out) -> Status {
    const char* used = key;
    auto it = annotations.find(std::string_view(key));
    if (it == annotations.end()) it = annotations.find(std::string_view(used = alias));
    if (it == annotations.end()) return Status::success();
    out = splitList(it->second);
    if (out.empty()) return bad(used, it->second, "names no GPU UUID");
    for (const std::string& u : out)
      if (u.rfind("GPU-", 0) != 0 && u.rfind("MIG-", 0) != 0)
        return bad(used, it->second, "has " + quoted(u) + ", not a GPU UUID (GPU-... or MIG-..., as nvidia-smi -L prints)");
    return Status::success();
  };
  if (auto st = read(keys::kUseGpuUuid, keys::kHamiUseGpuUuid, spec.useGpuUuids); !st.ok()) return st;
  return read(keys::kNoUseGpuUuid, keys::kHamiNoUseGpuUuid, spec.avoidGpuUuids);
}

}  // namespace

bool PodGpuSpec::gpuUuidAllowed(const std::string& uuid) const {
  if (!filtersGpuUuids()) return true;
  if (uuid.empty()) return false;
  if (!useGpuUuids.empty() && std::find(useGpuUuids.begin(), useGpuUuids.end(), uuid) == useGpuUuids.end()) return false;
  return std::find(avoidGpuUuids.begin(), avoidGpuUuids.end(), uuid) == avoidGpuUuids.end();
}

Result<PodGpuSpec> parseGpuUuidRules(const StringMap& annotations) {
  PodGpuSpec spec;
  if (auto st = readGpuUuidRules(annotations, spec); !st.ok()) return st.error();
  return spec;
}

Result<PodGpuSpec> parsePodGpuSpec(const StringMap& annotations, const Resources& requests,
                                   const GpuShareDefaults& defaults) {
  PodGpuSpec spec;
  auto get = [&](const char* key) -> const std::string* {
    auto it = annotations.find(std::string_view(key));
    return it == annotations.end() ? nullptr : &it->second;
  };
  if (const std::string* v = get(keys::kGpuFraction)) {
    auto milli = parseDecimalMilli(*v);
    if (!milli) return bad(keys::kGpuFraction, *v, "is not a number between 0 and 1 (exclusive)");
    if (*milli <= 0 || *milli >= 1000)
      return bad(keys::kGpuFraction, *v,
                 *milli <= 0 ? "is out of range: must be above 0 (at least 0.001)"
                             : "is out of range: must be below 1 (request whole GPUs with nvidia.com/gpu)");
    spec.fractionMilli = *milli;
  }
  if (const std::string* v = get(keys::kGpuMemory)) {
    constexpr int64_t kMaxMiB = int64_t{1} << 40;
    auto mib = parsePositiveInt(*v, kMaxMiB);
    if (!mib)
      return bad(keys::kGpuMemory, *v, positiveIntProblem(*v, kMaxMiB, "is not a positive integer number of MiB"));
    spec.memoryMiB = *mib;
  }
  if (spec.fractionMilli > 0 && spec.memoryMiB > 0)
    return makeError(std::string("annotations ") + keys::kGpuFraction + " and " + keys::kGpuMemory +
                         " are both set: give one of them",
                     422);
  if (const std::string* v = get(keys::kGpuFractionNumDevices)) {
    constexpr int64_t kMaxDevices = 1024;
    auto n = parsePositiveInt(*v, kMaxDevices);
    if (!n)
      return bad(keys::kGpuFractionNumDevices, *v, positiveIntProblem(*v, kMaxDevices, "is not an integer of at least 1"));
    if (!spec.shared())
      return makeError(std::string("annotation ") + keys::kGpuFractionNumDevices + " needs " + keys::kGpuFraction +
                           " or " + keys::kGpuMemory,
                       422);
    spec.numDevices = static_cast<int32_t>(*n);
  }
  if (spec.shared() && requests.milliGpu > 0)
    return makeError(std::string("annotation ") + (spec.fractionMilli > 0 ? keys::kGpuFraction : keys::kGpuMemory) +
                         " cannot be combined with a whole nvidia.com/gpu request (" +
                         std::to_string(requests.milliGpu / 1000) + ")",
                     422);
  if (const std::string* v = get(keys::kGpuPolicy)) {
    auto p = parsePolicy(*v);
    if (!p) return bad(keys::kGpuPolicy, *v, "is not a known policy (valid: binpack, spread)");
    spec.gpuPolicy = *p;
  }
  if (const std::string* v = get(keys::kNodePolicy)) {
    auto p = parsePolicy(*v);
    if (!p) return bad(keys::kNodePolicy, *v, "is not a known policy (valid: binpack, spread)");
    spec.nodePolicy = *p;
  }
  if (const std::string* v = get(keys::kUseGpuType)) {
    spec.useGpuTypes = splitList(*v);
    if (spec.useGpuTypes.empty()) return bad(keys::kUseGpuType, *v, "names no GPU model");
  }
  if (const std::string* v = get(keys::kAvoidGpuType)) {
    spec.avoidGpuTypes = splitList(*v);
    if (spec.avoidGpuTypes.empty()) return bad(keys::kAvoidGpuType, *v, "names no GPU model");
  } else if (const std::string* alias = get(keys::kNoUseGpuType)) {
    spec.avoidGpuTypes = splitList(*alias);
    if (spec.avoidGpuTypes.empty()) return bad(keys::kNoUseGpuType, *alias, "names no GPU model");
  }
  if (auto st = readGpuUuidRules(annotations, spec); !st.ok()) return st.error();
  if (const std::string* v = get(keys::kGpuCores)) {
    auto percent = parsePositiveInt(*v, 100);
    if (!percent)
      return bad(keys::kGpuCores, *v,
                 positiveIntProblem(*v, 100, "is not a whole percent of the GPU's compute from 1 to 100"));
    spec.corePercent = static_cast<int32_t>(*percent);
  }
  if (const std::string* v = get(keys::kGpuCoresPolicy)) {
    if (*v == "strict") spec.coresPolicy = GpuCoresPolicy::Strict;
    else if (*v == "burst") spec.coresPolicy = GpuCoresPolicy::Burst;
    else return bad(keys::kGpuCoresPolicy, *v, "is not a known policy (valid: strict, burst)");
  }
  // A compute share alone (HAMi's gpucores without gpumem): the memory is the cluster's default,
  // else the same share of the GPU as the compute.
  if (spec.corePercent > 0 && !spec.shared() && requests.milliGpu == 0) {
    if (defaults.memoryMiB > 0) spec.memoryMiB = defaults.memoryMiB, spec.memoryDefaulted = true;
    else if (spec.corePercent < 100) spec.fractionMilli = int64_t{10} * spec.corePercent;
  }
  // A memory share without a compute share: the cluster's default compute limit (HAMi's defaultCores).
  if (spec.memoryMiB > 0 && spec.corePercent == 0 && defaults.corePercent > 0) spec.corePercent = defaults.corePercent;
  if ((spec.corePercent > 0 || spec.coresPolicy != GpuCoresPolicy::Unset) && !spec.shared())
    return makeError(std::string("annotation ") + (spec.corePercent > 0 ? keys::kGpuCores : keys::kGpuCoresPolicy) +
                         " needs " + keys::kGpuFraction + " or " + keys::kGpuMemory +
                         " (a pod with whole GPUs has all of their compute)",
                     422);
  if (spec.filtersGpuUuids() && !spec.shared())
    return makeError(std::string("annotation ") + (spec.useGpuUuids.empty() ? keys::kNoUseGpuUuid : keys::kUseGpuUuid) +
                         " needs " + keys::kGpuFraction + " or " + keys::kGpuMemory +
                         " (whole GPUs are chosen by the device plugin, not the scheduler)",
                     422);
  if (const std::string* v = get(keys::kIsolation)) {
    if (*v == "hard") spec.isolation = Isolation::Hard;
    else if (*v == "mps") spec.isolation = Isolation::Mps;
    else if (*v == "none") spec.isolation = Isolation::None;
    else return bad(keys::kIsolation, *v, "is not a known isolation backend (valid: hard, mps, none)");
  }
  return spec;
}

int32_t gpuCoreLimitPercent(const PodGpuSpec& spec) {
  if (!spec.shared()) return 0;
  int64_t percent = spec.corePercent;
  if (percent == 0 && spec.fractionMilli > 0) percent = std::max<int64_t>(1, (spec.fractionMilli + 5) / 10);
  return percent >= 100 ? 0 : static_cast<int32_t>(percent);
}

int64_t gpuComputeMilli(const PodGpuSpec& spec) {
  if (!spec.shared()) return 0;
  return spec.corePercent > 0 ? int64_t{10} * spec.corePercent : spec.fractionMilli;
}

Result<std::optional<int64_t>> nodeGpuMemoryMiB(const Node& node) {
  const std::string* v = node.meta.label(keys::kNodeGpuMemoryLabel);
  if (!v) return std::optional<int64_t>{};
  auto mib = parsePositiveInt(*v, int64_t{1} << 40);
  if (!mib)
    return makeError("Node " + node.meta.name + ": label " + keys::kNodeGpuMemoryLabel + ": " + quoted(*v) +
                         " is not a positive integer number of MiB",
                     422);
  return std::optional<int64_t>{*mib};
}

NodeGpuSettings nodeGpuSettings(const Node& node) {
  NodeGpuSettings out;
  auto get = [&](const char* key) -> std::pair<const std::string*, const char*> {
    if (const std::string* v = node.meta.label(key)) return {v, "metadata.labels["};
    return {node.meta.annotation(key), "metadata.annotations["};
  };
  auto fail = [&](const char* where, const char* key, const std::string& value, const std::string& what) {
    out.errors.push_back({std::string(where) + key + "]", quoted(value) + " " + what + " (the cluster's setting applies)"});
  };
  if (auto [v, where] = get(keys::kNodeGpuSplitCount); v) {
    if (auto n = parsePositiveInt(*v, kMaxGpuSplitCount)) out.splitCount = static_cast<int32_t>(*n);
    else fail(where, keys::kNodeGpuSplitCount, *v,
              positiveIntProblem(*v, kMaxGpuSplitCount, "is not a whole number of pods per GPU of at least 1"));
  }
  if (auto [v, where] = get(keys::kNodeGpuMemoryScaling); v) {
    auto milli = parseDecimalMilli(*v);
    if (milli && *milli > 0 && *milli <= kMaxGpuMemoryScalingMilli) out.memoryScalingMilli = *milli;
    else fail(where, keys::kNodeGpuMemoryScaling, *v, "is not a decimal factor above 0 and at most 100 (like 1.5)");
  }
  if (auto [v, where] = get(keys::kNodeGpuCoreScaling); v) {
    auto milli = parseDecimalMilli(*v);
    if (milli && *milli > 0 && *milli <= kMaxGpuCoreScalingMilli) out.coreScalingMilli = *milli;
    else fail(where, keys::kNodeGpuCoreScaling, *v, "is not a decimal factor above 0 and at most 100 (like 1.5)");
  }
  if (auto [v, where] = get(keys::kNodeGpuExclude); v) {
    std::vector<std::string> uuids;
    std::vector<int32_t> indexes;
    bool ok = true;
    for (const std::string& item : splitList(*v)) {
      if (item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0) {
        if (std::find(uuids.begin(), uuids.end(), item) == uuids.end()) uuids.push_back(item);
      } else if (item == "0" || parsePositiveInt(item, 1023)) {
        const auto i = static_cast<int32_t>(item == "0" ? 0 : *parsePositiveInt(item, 1023));
        if (std::find(indexes.begin(), indexes.end(), i) == indexes.end()) indexes.push_back(i);
      } else {
        fail(where, keys::kNodeGpuExclude, *v,
             "has " + quoted(item) + ", neither a GPU UUID (GPU-...) nor a device index (0..1023)");
        ok = false;
        break;
      }
    }
    if (ok) out.excludedUuids = std::move(uuids), out.excludedIndexes = std::move(indexes);
  }
  if (auto [v, where] = get(keys::kNodeGpuMode); v) {
    if (*v == "mig") out.migMode = true;
    else fail(where, keys::kNodeGpuMode, *v, "is not a known GPU mode (valid: mig)");
  }
  return out;
}

std::optional<MigProfile> parseMigProfile(std::string_view resource) {
  constexpr std::string_view kPrefix = "nvidia.com/mig-";
  if (resource.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view rest = resource.substr(kPrefix.size());  // "1g.10gb" or "1g.10gb+me"
  auto number = [&](int64_t& out) {
    size_t n = 0;
    out = 0;
    while (n < rest.size() && n < 6 && rest[n] >= '0' && rest[n] <= '9') out = out * 10 + (rest[n++] - '0');
    rest.remove_prefix(n);
    return n > 0 && out > 0;
  };
  MigProfile p;
  int64_t compute = 0;
  if (!number(compute) || rest.substr(0, 2) != "g.") return std::nullopt;
  rest.remove_prefix(2);
  if (!number(p.memoryGb) || rest.substr(0, 2) != "gb") return std::nullopt;
  rest.remove_prefix(2);
  if (!rest.empty() && rest.front() != '+') return std::nullopt;
  if (compute > 8) return std::nullopt;
  p.computeSlices = static_cast<int32_t>(compute);
  return p;
}

int64_t migShareMilli(const MigProfile& profile, int64_t gpuMemoryMiB) {
  if (gpuMemoryMiB <= 0) return std::min<int64_t>(1000, (int64_t{1000} * profile.computeSlices + 3) / 7);
  const int64_t eighths = (profile.memoryGb * 1024 * 8 * 2 + gpuMemoryMiB) / (2 * gpuMemoryMiB);  // rounded
  return std::clamp<int64_t>(eighths, 1, 8) * 125;
}

int64_t migGpuMilli(const Resources& r, int64_t gpuMemoryMiB) {
  int64_t total = 0;
  for (const auto& [name, count] : r.scalars)
    if (count > 0)
      if (auto p = parseMigProfile(name)) total += count * migShareMilli(*p, gpuMemoryMiB);
  return total;
}

std::string gpuConfigMapName(const ObjectMeta& pod) {
  if (const std::string* v = pod.annotation(keys::kGpuConfigMapAnnotation); v && !v->empty()) return *v;
  return pod.name + "-tessera-gpu";
}

}  // namespace tessera::api
