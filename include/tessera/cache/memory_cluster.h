#pragma once
/// The embedded in-memory cluster: an object store with resourceVersions and watch fan-out, plus a
/// simulated kubelet and GPU device plugin (semantics in ../shared/scenarios/SCHEMA.md). Used by
/// `tessera simulate` / `tessera check`, by tests, and (served over HTTP) by integration tests.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache {

/// Thread-safe (one mutex). Watch callbacks run synchronously, in resourceVersion order, inside
/// the mutating call. ResourceVersions are decimal integers, increasing across all kinds.
/// UIDs are assigned in creation order and sort in creation order.
/// watch() replays the events after the given RV to the callback before it returns (so the callback
/// may run before the caller holds the handle).
class MemoryCluster final : public ClusterClient {
 public:
  /// `clock` supplies creationTimestamp, deletionTimestamp, startTime; must outlive the cluster.
  explicit MemoryCluster(const api::Clock& clock);
  ~MemoryCluster() override;

  api::Result<ListResult> list(api::Kind kind, const ListOptions& options = {}) override;
  api::Result<std::unique_ptr<WatchHandle>> watch(api::Kind kind, const std::string& resourceVersion,
                                                  WatchCallback callback) override;
  api::Result<std::unique_ptr<WatchHandle>> watchSelected(api::Kind kind, const std::string& resourceVersion,
                                                          const ListOptions& selectors,
                                                          WatchCallback callback) override;
  api::Result<Json> get(api::Kind kind, const std::string& ns, const std::string& name) override;
  api::Result<Json> create(api::Kind kind, const Json& object) override;
  api::Result<Json> update(api::Kind kind, const Json& object) override;
  api::Result<Json> updateStatus(api::Kind kind, const Json& object) override;
  api::Result<Json> patch(api::Kind kind, const std::string& ns, const std::string& name, PatchType type,
                          const Json& patch, bool statusSubresource = false) override;
  api::Status remove(api::Kind kind, const std::string& ns, const std::string& name,
                     const DeleteOptions& options = {}) override;
  api::Status bind(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) override;

  // ---- Simulation controls (not part of the ClusterClient seam) ----

  /// Create, or replace (keeping uid) if an object of that kind/namespace/name exists.
  api::Result<Json> apply(api::Kind kind, const Json& object);
  /// Removes an object at once, whatever its state (no grace period).
  api::Status forceRemove(api::Kind kind, const std::string& ns, const std::string& name);
  /// The pod's containers exit: phase Succeeded (or Failed), resources freed.
  api::Status finishPod(const std::string& ns, const std::string& name, bool succeeded);

  /// What the simulated kubelet did in one tick (for timelines).
  struct KubeletReport {
    std::vector<std::string> started;     ///< pods that became Running ("ns/name")
    std::vector<std::string> removed;     ///< terminating pods that went away
    std::vector<std::string> recreated;   ///< evicted pods recreated by their "controller"
    std::vector<std::string> completed;   ///< pods that reached their sim.tessera.dev/duration
    std::vector<std::string> rejected;    ///< bound pods the kubelet refused (phase Failed, reason OutOf<resource>)
  };
  /// One kubelet step, run after each scheduling cycle: terminating pods go away (recreated as new
  /// unbound pods when annotated sim.tessera.dev/recreate: "true"); bound Pending pods start Running
  /// (startTime = now) and get GPU device indices (lowest free first); Running pods annotated
  /// sim.tessera.dev/duration complete once that much time has passed since they started.
  KubeletReport kubeletTick();
  /// Completes pods whose sim.tessera.dev/duration has elapsed (called after the clock advances).
  std::vector<std::string> completeExpired();
  /// GPU device indices held by a running pod on its node (empty when none).
  std::vector<int> devicesOf(const std::string& ns, const std::string& name) const;

  /// Fault injection for tests: while held, GPU reservation pods created on a node stay Pending
  /// without a GPU UUID (as if the device plugin or `tessera reserve` were slow); releasing starts
  /// the held ones.
  void holdReservations(bool hold);

  /// Number of watch events kept for watch-from-RV; older RVs get 410.
  void setWatchWindow(size_t events);
  /// Fault injection for tests: fail the Nth future call of `verb` ("bind", "create", "remove",
  /// "patch", "update", "list", "watch"; also "get"; updateStatus counts as "update") with the given
  /// code (1-based; 0 disables).
  void failNthCall(const std::string& verb, int n, int code = 500);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::cache
