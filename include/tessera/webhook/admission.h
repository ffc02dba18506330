#pragma once
/// The admission logic of `tessera webhook` (docs/gpu-sharing.md, "Admission webhook"), without any
/// HTTP: AdmissionReview v1 (admission.k8s.io/v1) in, AdmissionReview out.
///
/// For a Pod whose spec.schedulerName is ours:
///  - validation: the GPU annotations go through api::parsePodGpuSpec (the scheduler's own parser);
///    a bad one is refused (allowed=false, status.code 422, the message names the key and value);
///  - mutation (CREATE of a pod asking for a fraction or memory of a GPU): the GPU ConfigMap name
///    (annotation tessera.dev/gpu-configmap, generated when the pod has only generateName), envFrom of
///    that ConfigMap in every container and init container (not optional: the kubelet cannot start
///    a container before the binder wrote it), and the isolation backend's wiring (hard: interposer
///    hostPath + LD_PRELOAD, and the pod's one accounting region shared by all its containers;
///    mps: the MPS pipe directory + CUDA_MPS_* env; none: nothing more).
/// Every other pod is allowed without a patch. Mutating twice adds nothing the second time.
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tessera/api/gpu_request.h"

namespace tessera::webhook {

/// The webhook's settings (flags of `tessera webhook`).
struct Options {
  api::Isolation isolation = api::Isolation::Hard;       ///< default backend; the pod annotation overrides
  std::string interposerDir = "/usr/local/tessera/lib";  ///< host folder holding libtessera-cuda.so
  std::string schedulerName = "tessera";
  std::string mpsPipeDir = "/tmp/nvidia-mps";  ///< the MPS control daemon's pipe directory
  /// hard: the node folder holding one sub-folder per pod (named by its UID) with the pod's
  /// accounting region; mode 0777, prepared by the tessera-monitor DaemonSet (docs/isolation.md).
  std::string regionHostDir = "/var/lib/tessera/regions";
};

/// Names used in the patches (stable: they make the mutation idempotent).
inline constexpr const char* kInterposerVolume = "tessera-interposer";
inline constexpr const char* kInterposerLibrary = "libtessera-cuda.so";
inline constexpr const char* kMpsVolume = "tessera-mps-pipe";
/// hard: the per-pod region folder, mounted in every container at kRegionMountPath with
/// subPathExpr $(TESSERA_POD_UID); the file is isolation::kRegionFileName in it.
inline constexpr const char* kRegionVolume = "tessera-regions";
inline constexpr const char* kRegionMountPath = "/run/tessera";
inline constexpr const char* kPodUidEnv = "TESSERA_POD_UID";

/// Returns a fresh random suffix for generated ConfigMap names ([a-z0-9], 5 characters, as the API
/// server's generateName). Injected so tests are deterministic.
using SuffixSource = std::function<std::string()>;
/// A SuffixSource backed by a seeded PRNG (seeded from std::random_device when `seed` is 0).
/// Thread-safe.
SuffixSource randomSuffixes(uint64_t seed = 0);

/// The answer for one pod.
struct Decision {
  bool allowed = true;
  int code = 0;         ///< status.code when refused (422 for bad annotations)
  std::string message;  ///< status.message when refused
  /// JSONPatch operations (a JSON array); empty = no patch.
  std::string patch = "[]";
  bool hasPatch() const { return patch != "[]"; }
};

/// Reviews one pod. `operation` is the AdmissionRequest's ("CREATE", "UPDATE", ...); `oldPod` is
/// null except for UPDATE; `requestNamespace` fills a missing metadata.namespace. `mutate` false:
/// validation only (the /validate endpoint). Never throws.
Decision reviewPod(const std::string& operation, const nlohmann::json& pod, const nlohmann::json* oldPod, bool mutate,
                   const Options& options, const SuffixSource& suffix);

/// An HTTP answer: status, content type, body.
struct HttpAnswer {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  /// One line for the log: what was reviewed and the outcome ("mutate CREATE Pod ml/a: allowed,
  /// patched"); empty for health checks.
  std::string summary;
};

/// One HTTP request to the webhook. Paths: POST /mutate and /validate (AdmissionReview v1), GET
/// /healthz. A malformed AdmissionReview is answered 400 with a plain-text message naming what is
/// wrong; an unknown path 404; another method 405. Never throws.
HttpAnswer handleRequest(const std::string& method, const std::string& path, const std::string& body,
                         const Options& options, const SuffixSource& suffix);

/// Standard base64 (with padding), for the patch field.
std::string base64Encode(const std::string& data);

}  // namespace tessera::webhook
