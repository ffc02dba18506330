#pragma once
/// The GPU-sharing and GPU-placement annotations of a pod (BRIEF.md, "Conventions"), parsed and
/// validated in one place: the scheduler (cache), the admission webhook and the fuzzers use this.
/// Every error names the annotation key and the bad value.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/api/objects.h"
#include "tessera/api/resources.h"
#include "tessera/api/result.h"

namespace tessera::api {

enum class GpuPolicy { Unset, Binpack, Spread };
/// tessera.dev/isolation: how the GPU memory limit is enforced (docs/isolation.md).
enum class Isolation { Unset, Hard, Mps, None };
/// tessera.dev/gpu-cores-policy: strict holds the pod to its compute share; burst lets it use idle compute.
enum class GpuCoresPolicy { Unset, Strict, Burst };

/// A pod's GPU annotations after validation.
struct PodGpuSpec {
  /// gpu-fraction in thousandths of a GPU (1..999); 0 when not given.
  int64_t fractionMilli = 0;
  /// gpu-memory in MiB (> 0); 0 when not given.
  int64_t memoryMiB = 0;
  /// gpu-fraction-num-devices: GPUs each holding the fraction (or the memory); >= 1.
  int32_t numDevices = 1;
  GpuPolicy gpuPolicy = GpuPolicy::Unset;   ///< tessera.dev/gpu-policy
  GpuPolicy nodePolicy = GpuPolicy::Unset;  ///< tessera.dev/node-policy
  std::vector<std::string> useGpuTypes;     ///< tessera.dev/use-gpu-type (comma list)
  std::vector<std::string> avoidGpuTypes;   ///< tessera.dev/avoid-gpu-type (comma list)
  std::vector<std::string> useGpuUuids;     ///< tessera.dev/use-gpu-uuid (comma list of GPU UUIDs)
  std::vector<std::string> avoidGpuUuids;   ///< tessera.dev/nouse-gpu-uuid (comma list of GPU UUIDs)
  Isolation isolation = Isolation::Unset;   ///< tessera.dev/isolation
  /// tessera.dev/gpu-cores: percent of each GPU's compute (1..100); 0 when not given.
  int32_t corePercent = 0;
  GpuCoresPolicy coresPolicy = GpuCoresPolicy::Unset;  ///< tessera.dev/gpu-cores-policy
  /// The memory is the cluster's default (config gpuSharing.defaultMemory), not an annotation of
  /// the pod: the binder writes it on the pod at bind, so that it stays what the pod got.
  bool memoryDefaulted = false;
  /// Set by the scheduler's cache, not read from annotations: the pod runs under hard isolation
  /// (its tessera.dev/isolation, else the cluster's --isolation, when that is set).
  bool hardIsolation = false;

  /// The pod asks for part of a GPU (by fraction or by memory).
  bool shared() const { return fractionMilli > 0 || memoryMiB > 0; }
  /// The pod filters on GPU models.
  bool filtersGpuTypes() const { return !useGpuTypes.empty() || !avoidGpuTypes.empty(); }
  /// The pod pins or avoids GPUs by UUID.
  bool filtersGpuUuids() const { return !useGpuUuids.empty() || !avoidGpuUuids.empty(); }
  /// Whether the pod may use the GPU of this UUID (an unknown, empty UUID: only without UUID rules).
  bool gpuUuidAllowed(const std::string& uuid) const;
};

/// The cluster's defaults for a share that does not say all of its size (config gpuSharing;
/// HAMi's defaultMem and defaultCores). docs/gpu-sharing.md, "Defaults".
struct GpuShareDefaults {
  /// gpu-memory (MiB) of a pod that gives tessera.dev/gpu-cores alone; 0: its memory share is its
  /// compute share (gpu-cores 30 takes 0.3 of the GPU).
  int64_t memoryMiB = 0;
  /// tessera.dev/gpu-cores of a gpu-memory pod that gives none; 0: no compute limit.
  int32_t corePercent = 0;
};

/// Parses a pod's annotations. `requests` is the pod's effective request: a fraction or memory
/// request together with whole nvidia.com/gpu is an error. A pod that gives tessera.dev/gpu-cores
/// alone shares a GPU: it takes `defaults.memoryMiB` of memory, else the fraction its cores are
/// (gpu-cores 100 without a default memory is an error). Errors read
/// `annotation gpu-fraction: "1.5" is not a number between 0 and 1 (exclusive)`.
Result<PodGpuSpec> parsePodGpuSpec(const StringMap& annotations, const Resources& requests,
                                   const GpuShareDefaults& defaults = {});

/// The compute limit the interposer enforces for the pod (GPU_CORE_LIMIT, percent of each of its
/// GPUs): tessera.dev/gpu-cores when given, else the gpu-fraction in percent (rounded, at least 1);
/// 0 (no limit) for a pod that does not share a GPU, for a gpu-memory pod without gpu-cores, and
/// for 100.
int32_t gpuCoreLimitPercent(const PodGpuSpec& spec);

/// The compute a fractional pod takes of each of its GPUs, in thousandths of the GPU, for the cap on
/// a GPU's compute (config gpuSharing.coreScaling; HAMi's gpucores summed against deviceCoreScaling):
/// tessera.dev/gpu-cores (given or defaulted) x 10, else the gpu-fraction; 0 for a gpu-memory pod
/// without gpu-cores (no compute limit, as HAMi) and for a pod that does not share a GPU.
int64_t gpuComputeMilli(const PodGpuSpec& spec);

/// The GPU UUID rules of a pod's annotations alone (tessera.dev/use-gpu-uuid, nouse-gpu-uuid and
/// their HAMi aliases): what the binder checks against the GPU a reservation pod was given.
Result<PodGpuSpec> parseGpuUuidRules(const StringMap& annotations);

/// Parses a decimal fraction "0.25" / ".5" into thousandths, rounded to the nearest; nullopt when
/// the text is not a plain decimal number (no sign, no exponent).
std::optional<int64_t> parseDecimalMilli(const std::string& text);

/// The node label nvidia.com/gpu.memory (MiB per GPU): nullopt when absent; an error naming the
/// node and the label when it is not a positive integer.
Result<std::optional<int64_t>> nodeGpuMemoryMiB(const Node& node);

/// A node's own GPU-sharing settings (docs/gpu-sharing.md, "Per-node settings"), from its labels or
/// annotations (a label wins over an annotation of the same key). An unset or invalid setting is 0 /
/// empty: the node takes the cluster's (config gpuSharing); `errors` has each invalid one (the
/// validation layer reports the first as the node's problem: an Event on the node).
struct NodeGpuSettings {
  int32_t splitCount = 0;          ///< tessera.dev/gpu-split-count: fractional pods per GPU (1..1000)
  int64_t memoryScalingMilli = 0;  ///< tessera.dev/gpu-memory-scaling in thousandths (0.001..100)
  int64_t coreScalingMilli = 0;    ///< tessera.dev/gpu-core-scaling in thousandths (0.001..100)
  /// tessera.dev/gpu-exclude: GPUs out of scheduling, by UUID ("GPU-..." / "MIG-...") or by index.
  std::vector<std::string> excludedUuids;
  std::vector<int32_t> excludedIndexes;
  bool migMode = false;  ///< tessera.dev/gpu-mode: mig (no GPU shares on the node)
  struct Invalid {
    std::string field;    ///< "metadata.labels[tessera.dev/gpu-split-count]"
    std::string message;  ///< "\"ten\" is not a whole number ... (the cluster's setting applies)"
  };
  std::vector<Invalid> errors;
  /// Distinct GPUs excluded (a UUID and an index naming the same GPU count twice: use one form).
  int32_t excludedCount() const { return static_cast<int32_t>(excludedUuids.size() + excludedIndexes.size()); }
};
NodeGpuSettings nodeGpuSettings(const Node& node);

/// A MIG profile as the NVIDIA device plugin's `mixed` strategy names its resource:
/// "nvidia.com/mig-<C>g.<M>gb", optionally with a suffix such as "+me" (docs/gpu-sharing.md, "MIG").
struct MigProfile {
  int32_t computeSlices = 0;  ///< C: GPU instance slices (of 7)
  int64_t memoryGb = 0;       ///< M: its memory in GB
};
/// The profile of a resource name; nullopt for any other resource.
std::optional<MigProfile> parseMigProfile(std::string_view resource);
/// The share of one whole GPU (thousandths) that one instance of `profile` is: its memory over the
/// GPU's (`gpuMemoryMiB`, the node label nvidia.com/gpu.memory), in eighths (the GPU's memory
/// slices), between one eighth and the whole GPU; without the label, its compute slices over 7.
int64_t migShareMilli(const MigProfile& profile, int64_t gpuMemoryMiB);
/// What the MIG resources of `r` are worth in thousandths of a GPU (count x share of each profile):
/// what a queue is charged for a pod that requests them, and what a node's MIG instances add to the
/// cluster's GPUs.
int64_t migGpuMilli(const Resources& r, int64_t gpuMemoryMiB);

/// The largest values nodeGpuSettings and the config's gpuSharing accept.
inline constexpr int32_t kMaxGpuSplitCount = 1000;
inline constexpr int64_t kMaxGpuMemoryScalingMilli = 100'000;
inline constexpr int64_t kMaxGpuCoreScalingMilli = 100'000;

/// Name of the ConfigMap holding a fractional pod's GPU environment: the annotation
/// tessera.dev/gpu-configmap when the webhook set it, else "<pod name>-tessera-gpu".
std::string gpuConfigMapName(const ObjectMeta& pod);

namespace keys {
inline constexpr const char* kGpuConfigMapAnnotation = "tessera.dev/gpu-configmap";
/// All GPU groups of a multi-device fractional pod, comma-separated (the label holds the first).
inline constexpr const char* kGpuGroupsAnnotation = "tessera.dev/gpu-groups";
}  // namespace keys

}  // namespace tessera::api
