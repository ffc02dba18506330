#pragma once
/// The cluster cache: consumes watch events from a ClusterClient, keeps NodeInfo / JobInfo /
/// QueueInfo with totals maintained incrementally, and publishes an immutable Snapshot per cycle.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/result.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/cache/snapshot.h"

namespace tessera::cache {

struct CacheOptions {
  std::string schedulerName = "tessera";
  /// An assumed bind not confirmed by the watch within this time is forgotten (counted).
  api::Duration assumeTtl{60'000};
};

/// Thread-safety: watch callbacks may arrive on any thread (they only enqueue); every other
/// method is called from the scheduler's thread. Events are applied in arrival order at the start
/// of snapshot(), so a cycle sees a consistent state.
class Cache {
 public:
  Cache(ClusterClient& client, const api::Clock& clock, CacheOptions options = {});
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  /// Lists every kind and starts the watches. Fails if a list fails.
  api::Status start();
  /// Stops the watches.
  void stop();

  /// Applies queued events and returns the current immutable view.
  std::shared_ptr<const Snapshot> snapshot();

  /// Records that the binder bound `podKey` to `node`: counted as bound until the watch confirms.
  void assumeBound(const std::string& podKey, const std::string& node);
  /// Records that the binder evicted `podKey`: counted as releasing until the watch confirms.
  void assumeEvicted(const std::string& podKey);
  /// Forgets an assumption (the bind failed).
  void forgetAssumed(const std::string& podKey);
  /// Assumed binds that expired without confirmation since start.
  uint64_t expiredAssumptions() const;

  /// Test hook: apply one event directly (as if it arrived on the watch of `kind`).
  void applyEvent(api::Kind kind, const WatchEvent& event);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::cache
