#pragma once
// Keeps the cache in step with the cluster: the initial list, one watch per kind, and a relist
// when a watch fails. Private to the cache library.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_state.h"
#include "inbox.h"
#include "tessera/api/kinds.h"
#include "tessera/api/result.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache {

/// Lists and watches every kind the cache keeps, feeding the Inbox; relists a kind whose watch
/// reports an Error event (410 Gone, or any other), retrying failed lists with backoff. An optional
/// kind the API server does not serve (Topology without its CRD: 404) does not stop the start: it
/// is logged once and listed again with backoff until it is served.
///
/// Threads and ownership:
/// - start() and stop() run on the owner's thread (the Cache's); start() applies the initial
///   lists to the ClusterState directly, before any snapshot reads it.
/// - Watch callbacks run on the client's threads (the in-memory cluster: inside the mutating call,
///   under its store lock): they only convert a pod, push to the Inbox and notify.
/// - One relist worker thread, started on first need, joined by stop(). `mu_` guards `watches_`,
///   `relistQueue_` and `stopping_`; it is never held while calling the client.
class ClusterSync {
 public:
  /// `client`, `inbox` and `options` are borrowed and must outlive this object.
  ClusterSync(ClusterClient& client, Inbox& inbox, const CacheOptions& options);
  /// Stops (see stop()).
  ~ClusterSync();
  ClusterSync(const ClusterSync&) = delete;
  ClusterSync& operator=(const ClusterSync&) = delete;

  /// Lists every kind (cluster-wide definitions first, so pods resolve against them), applies the
  /// objects to `state` and starts the watches from the lists' resourceVersions. Fails if a list
  /// or a watch fails.
  api::Status start(ClusterState& state);
  /// Stops the relist worker and every watch; no callback runs after it returns. Idempotent.
  void stop();

  /// True once start() has listed every kind. Thread-safe.
  bool synced() const { return synced_; }
  /// Relists done after watch errors since start. Thread-safe.
  uint64_t relists() const { return relists_; }

 private:
  api::Result<ListResult> listAll(api::Kind kind);
  api::Result<std::unique_ptr<WatchHandle>> startWatch(api::Kind kind, const std::string& rv);
  void requestRelist(api::Kind kind);
  void relistLoop();

  ClusterClient& client_;
  Inbox& inbox_;
  const CacheOptions& options_;

  std::mutex mu_;
  std::condition_variable relistCv_;
  std::map<api::Kind, std::unique_ptr<WatchHandle>> watches_;
  std::set<api::Kind> relistQueue_;
  bool stopping_ = false;
  std::thread worker_;
  std::atomic<uint64_t> relists_{0};
  /// Optional kinds whose absence (404: CRD not installed) was logged; the relist worker's after
  /// start().
  std::set<api::Kind> absentReported_;
  std::atomic<bool> synced_{false};
};

/// Applies a relist of `kind` (every object `items` holds) to `state`: listed objects are
/// upserted, and the objects of that kind `state` holds (failed conversions included) that the
/// list lacks are deleted. Runs on the state's owner thread (Cache::snapshot()).
void reconcile(ClusterState& state, api::Kind kind, const std::vector<Json>& items);

}  // namespace tessera::cache
