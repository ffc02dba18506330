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
///    a container before the binder wrote it), and the isolation backend's wiring (hard: the
///    interposer, copied by an init container into an emptyDir (or, with InterposerSource::HostPath,
///    a hostPath) + LD_PRELOAD, and the pod's one accounting region shared by all its containers,
///    an emptyDir; mps: the MPS pipe directory + CUDA_MPS_* env; none: nothing more). The default
///    hard wiring adds no hostPath, so the pod passes the PodSecurity `baseline` level
///    (docs/isolation.md, "PodSecurity").
/// Every other pod is allowed without a patch. Mutating twice adds nothing the second time.
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tessera/api/gpu_request.h"
#include "tessera/isolation/region_layout.h"

namespace tessera::webhook {

/// hard: where a pod's interposer library and accounting region come from.
enum class InterposerSource {
  /// The default. An init container (the interposer image) copies the library into an emptyDir
  /// that every container mounts read-only; the region lives in an emptyDir too, which the
  /// tessera-monitor DaemonSet finds under the kubelet's pod folder. No hostPath: the pod passes
  /// the PodSecurity `baseline` level.
  InitContainer,
  /// The layout before issue 18, item 7: hostPath volumes on the node folders the
  /// tessera-interposer DaemonSet (library) and tessera-monitor (regions, mode 0777) prepare.
  /// Pods so wired are refused by namespaces that enforce `baseline` or `restricted`.
  HostPath,
};

/// The webhook's settings (flags of `tessera webhook`).
struct Options {
  api::Isolation isolation = api::Isolation::Hard;  ///< default backend; the pod annotation overrides
  InterposerSource interposerSource = InterposerSource::InitContainer;
  /// Where every container sees libtessera-cuda.so (LD_PRELOAD=<dir>/libtessera-cuda.so); with
  /// InterposerSource::HostPath also the node folder it is mounted from.
  std::string interposerDir = "/usr/local/tessera/lib";
  /// InitContainer: the image the init container copies the library from (the Dockerfile's
  /// `interposer` stage; pulled IfNotPresent) and the library's path inside it.
  std::string interposerImage = "ghcr.io/tessera-sched/tessera-interposer:latest";
  std::string interposerImageLibrary = "/opt/tessera/lib/libtessera-cuda.so";
  std::string schedulerName = "tessera";
  std::string mpsPipeDir = "/tmp/nvidia-mps";  ///< the MPS control daemon's pipe directory
  /// hard with InterposerSource::HostPath: the node folder holding one sub-folder per pod (named by
  /// its UID) with the pod's accounting region; mode 0777, prepared by the tessera-monitor
  /// DaemonSet (docs/isolation.md).
  std::string regionHostDir = "/var/lib/tessera/regions";
};

/// Names used in the patches (stable: they make the mutation idempotent).
inline constexpr const char* kInterposerVolume = "tessera-interposer";
/// hard, InterposerSource::InitContainer: the init container, put first in spec.initContainers,
/// that copies the library into the kInterposerVolume emptyDir (mounted at kInterposerCopyPath in
/// it). It runs as uid 65532 with a `restricted` securityContext and is not wired itself.
inline constexpr const char* kInterposerInitContainer = "tessera-interposer";
inline constexpr const char* kInterposerCopyPath = "/tessera-interposer";
inline constexpr const char* kInterposerLibrary = "libtessera-cuda.so";
inline constexpr const char* kMpsVolume = "tessera-mps-pipe";
/// hard: the pod's region folder, mounted in every container at kRegionMountPath; the file is
/// isolation::kRegionFileName in it. An emptyDir (the monitor reads it on the node at
/// <kubelet root>/pods/<pod UID>/volumes/kubernetes.io~empty-dir/tessera-regions/), or with
/// InterposerSource::HostPath the node folder regionHostDir mounted with subPathExpr
/// $(TESSERA_POD_UID).
inline constexpr const char* kRegionVolume = isolation::kRegionVolumeName;
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
