#pragma once
/// The binder's GPU-sharing work (BRIEF.md, "reservation pods" and "fractional pod's GPU env"):
/// before a fractional pod is bound, each of its GPU groups gets a reservation pod on the node
/// (namespace tessera-reservation, `tessera reserve`, nvidia.com/gpu: 1) whose reported GPU UUID
/// goes into the pod's GPU ConfigMap (NVIDIA_VISIBLE_DEVICES, GPU_MEMORY_LIMIT,
/// CUDA_DEVICE_MEMORY_LIMIT, GPU_PORTION), and the pod is labelled with its group. Waiting for a
/// UUID holds no binder worker: prepare() answers "ask again after uuidPoll" and the binder parks
/// the bind (pre_bind.h), so a slow device plugin delays only the binds on its GPUs. After each
/// cycle, reservation pods no fractional pod uses any more are deleted, and fractional pods whose
/// reservation pod vanished are reported (and evicted, if configured).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "tessera/api/clock.h"
#include "tessera/api/gpu_request.h"
#include "tessera/api/result.h"
#include "tessera/binder/pre_bind.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/cache/snapshot.h"
#include "tessera/framework/session.h"

namespace tessera::binder {

struct GpuBindingOptions {
  std::string reservationNamespace = "tessera-reservation";
  /// Image of reservation pods (the tessera image: its entrypoint has `tessera reserve`).
  /// `tessera run` uses its own pod's image unless --reservation-image says otherwise.
  std::string reservationImage = "ghcr.io/tessera-sched/tessera:latest";
  std::string reservationServiceAccount = "tessera-reservation";
  /// How long a bind waits for its reservation pods to report their GPU UUIDs before it gives up
  /// (deletes those that did not report and fails), from its first attempt, on the clock.
  std::chrono::milliseconds uuidTimeout{60'000};
  /// How often to look for the UUID while waiting (real time; the bind is parked in between).
  std::chrono::milliseconds uuidPoll{250};
  /// A group prepared for a bind is not garbage-collected for this long unless the cache shows
  /// a pod in it (informer lag must not cost a reservation pod: KAI lost pods there).
  api::Duration inflightGrace{60'000};
  /// Evict running fractional pods whose reservation pod vanished (else: an event only).
  bool evictOrphans = false;
  /// The cluster's isolation backend (`tessera run --isolation`). Under Hard, a fraction placed on
  /// a node without the label nvidia.com/gpu.memory is refused (the interposer could not limit its
  /// memory); the pod's own tessera.dev/isolation annotation wins. Unset: not checked.
  api::Isolation isolation = api::Isolation::Unset;
  std::string component = "tessera";
};

/// Thread-safe: prepare() may run concurrently for different pods; work on one GPU group is
/// serialized (one look at a time, never held while waiting). collectGarbage() is called from one
/// thread at a time.
class GpuBinding {
 public:
  GpuBinding(cache::ClusterClient& client, const api::Clock& clock, GpuBindingOptions options = {});
  ~GpuBinding();

  /// Reservation pods (created when missing), UUIDs, ConfigMap, group labels: everything a
  /// fractional pod needs before its bind (a PreBindFn). One look, no waiting: while a reservation
  /// pod has not reported its UUID, answers retryAfter = uuidPoll; once uuidTimeout has passed
  /// since `since` (or the kubelet refused the pod), deletes the reservation pods that did not
  /// report and fails. Binds waiting on the same group each look for themselves, so all of them
  /// go on once its UUID is there. An error names the pod, the group and what failed.
  PreBindOutcome prepare(const framework::SessionResult::Bind& bind, api::Time since);

  /// Deletes reservation pods of groups no fractional pod holds (except groups with a bind in
  /// flight), and reports fractional pods whose group lost its reservation pod. `snapshot` must be
  /// current (taken after the cycle's binds), or the cycle's own with the cycle's `decisions`
  /// (their groups count as in flight: an asynchronous binder may not have reached them yet).
  void collectGarbage(const cache::Snapshot& snapshot, const framework::SessionResult* decisions = nullptr);

  /// Name of the reservation pod of a GPU group.
  static std::string reservationPodName(const std::string& group);
  /// The reservation pod of `group` on `node` as the binder creates it. It passes the PodSecurity
  /// `restricted` level (runs as uid 65532, no privilege escalation, no capabilities, RuntimeDefault
  /// seccomp): `tessera reserve` only reads NVML (the GPU's device nodes and driver library come
  /// from the NVIDIA runtime, as for any nvidia.com/gpu container) and calls the API server.
  static cache::Json reservationPod(const GpuBindingOptions& options, const std::string& group,
                                    const std::string& node);

  /// Reservation pods deleted / orphaned pods reported since start (metrics, tests).
  uint64_t deletedReservations() const;
  uint64_t orphansReported() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::binder
