#pragma once
/// The contract between the binder and the work done before a bind (GpuBinding::prepare): a
/// preBind either finishes (ok, or an error that fails the bind) or says it cannot go on yet and
/// when to ask again. A bind waiting so is parked by the binder: it holds no worker meanwhile, so a
/// slow device plugin delays only the binds that need its GPU (issue 18, item 8).
#include <chrono>
#include <functional>
#include <optional>

#include "tessera/api/clock.h"
#include "tessera/api/result.h"
#include "tessera/framework/session.h"

namespace tessera::binder {

/// What a preBind answers for one bind.
struct PreBindOutcome {
  api::Status status;  ///< an error fails the bind with its message
  /// Set (with `status` ok): not ready yet (a GPU reservation pod has not reported its GPU UUID).
  /// The binder parks the bind and calls preBind again for it once this much (real) time has passed.
  std::optional<std::chrono::milliseconds> retryAfter;
  /// With an error: a failure the next cycle can repair (no backoff, the pod is schedulable again at
  /// once): a reservation pod was given a GPU the pod's device rules exclude, and keeps it, so that
  /// the device plugin gives the next one another GPU.
  bool retryAtOnce = false;

  static PreBindOutcome done(api::Status st = {}) { return PreBindOutcome{std::move(st), std::nullopt}; }
  static PreBindOutcome waitFor(std::chrono::milliseconds d) { return PreBindOutcome{{}, d}; }
  static PreBindOutcome failedRetryAtOnce(api::Error e) { return PreBindOutcome{std::move(e), std::nullopt, true}; }
};

/// Work that must be done before a pod is bound (GPU reservation pod, GPU ConfigMap, group label).
/// `since` is when the binder first asked for this bind (its clock): a callee that waits for
/// something measures its timeout from there, and must answer done (an error) once it is over.
/// Called from binder threads concurrently for different pods, and again for the same bind after
/// each retryAfter; the callee serializes what must be serialized (one GPU group at a time) and
/// must not block for long (that is what retryAfter is for).
using PreBindFn = std::function<PreBindOutcome(const framework::SessionResult::Bind& bind, api::Time since)>;

}  // namespace tessera::binder
