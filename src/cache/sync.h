#pragma once
// Keeps the cache in step with the cluster: the initial list, one watch per kind, and a relist
// when a watch fails. Private to the cache library.
#include <atomic>
#include <chrono>
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
/// Sharded (CacheOptions::shard, docs/sharding.md), the API server filters at the watch: nodes by
/// the shard's label selector; pods in two streams, the shard's own (its label selector) and the
/// bound pods of every other pool (its complement, spec.nodeName set), of which only those on the
/// shard's nodes are kept (foreign pods such as DaemonSets', and pods left on a node that moved
/// here). A node that joins the pool after the start is held back until a relist of the pods has
/// brought in the pods already running on it, so no cycle sees the node without them.
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

  /// Sharded: waits (up to `limit`) until no node that joined the pool is still held back for the
  /// pods' relist (the simulator, so that a cycle after a node changed pool is deterministic).
  void awaitJoins(std::chrono::milliseconds limit);

  /// True once start() has listed every kind. Thread-safe.
  bool synced() const { return synced_; }
  /// Relists done after watch errors since start. Thread-safe.
  uint64_t relists() const { return relists_; }

 private:
  /// Every object of `kind` over its streams (one, or two for sharded pods), and the resourceVersion
  /// each stream's watch starts from.
  struct Listed {
    std::vector<Json> items;
    std::vector<std::string> resourceVersions;  ///< one per stream
  };
  using Watches = std::vector<std::unique_ptr<WatchHandle>>;
  /// The selectors of the list/watch streams of `kind` (one with none, unsharded).
  std::vector<ListOptions> streams(api::Kind kind) const;
  api::Result<Listed> listAll(api::Kind kind);
  api::Result<ListResult> listStream(api::Kind kind, const ListOptions& selectors);
  api::Result<Watches> startWatches(api::Kind kind, const Listed& listed);
  api::Result<std::unique_ptr<WatchHandle>> startWatch(api::Kind kind, const ListOptions& selectors,
                                                      const std::string& rv);
  void requestRelist(api::Kind kind);
  void relistLoop();
  /// Sharded: whether a pod (its JSON) is kept: unbound, ours by scheduler and pool, or on one of
  /// the shard's nodes.
  bool keepPod(const Json& pod) const;
  /// Sharded: the node watch's side - the pool's node names and the joining nodes. False when the
  /// event is held back until the pods' relist (a node that joined the pool).
  bool trackNode(const WatchEvent& ev, InboxItem& item);
  /// Sharded, after a relist of nodes: the pool's node names become the listed ones; listed nodes
  /// new to the pool are taken out of `nodes` and held as joining (a pod relist is requested).
  void refreshPool(std::vector<Json>& nodes);
  /// Sharded, after a pod relist was queued: the held events of the nodes in `joined`.
  void releaseJoined(const std::set<std::string>& joined);

  ClusterClient& client_;
  Inbox& inbox_;
  const CacheOptions& options_;

  std::mutex mu_;
  std::condition_variable relistCv_;
  std::map<api::Kind, Watches> watches_;
  std::set<api::Kind> relistQueue_;
  bool stopping_ = false;
  std::thread worker_;
  std::atomic<uint64_t> relists_{0};
  /// Optional kinds whose absence (404: CRD not installed) was logged; the relist worker's after
  /// start().
  std::set<api::Kind> absentReported_;
  std::atomic<bool> synced_{false};
  /// Sharded: the names of the pool's nodes (the node watch's view) and, for nodes that joined after
  /// the start, their latest event held until the pods' relist. Guarded by nodesMu_ (taken on the
  /// watch threads and the relist worker; never while calling the client).
  mutable std::mutex nodesMu_;
  std::set<std::string> poolNodes_;
  std::map<std::string, InboxItem> joining_;
  std::condition_variable joinsCv_;  ///< with nodesMu_: joining_ emptied
};

/// Applies a relist of `kind` (every object `items` holds) to `state`: listed objects are
/// upserted, and the objects of that kind `state` holds (failed conversions included) that the
/// list lacks are deleted. Runs on the state's owner thread (Cache::snapshot()).
void reconcile(ClusterState& state, api::Kind kind, const std::vector<Json>& items);

}  // namespace tessera::cache
