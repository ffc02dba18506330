#pragma once
// The cache's one queue between threads: watch events, relisted kinds and the binder's reports,
// applied by the scheduling thread in arrival order. Private to the cache library.
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "assumptions.h"
#include "tessera/api/kinds.h"
#include "tessera/api/objects.h"
#include "tessera/api/result.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache {

/// One queued change: a watch event, (after a relist) the full list of a kind to reconcile, or
/// something the binder reports about a pod (applied in arrival order with the watch events, so a
/// bind's outcome can never overtake the binder's assumption it follows).
struct InboxItem {
  enum class Op { Event, Replace, Report };
  Op op = Op::Event;
  api::Kind kind = api::Kind::Pod;                   ///< Event, Replace
  WatchEvent event;                                  ///< Event
  std::shared_ptr<const std::vector<Json>> replace;  ///< Replace: every object of `kind` listed
  /// Event of a pod: its object already converted on the watch's thread (the costly part of
  /// applying it), so the scheduling thread's snapshot() only files it.
  std::optional<api::Result<api::Pod>> pod;
  PodReport report;  ///< Report
};

/// Thread-safe: push() from any thread (watch callbacks, the relist worker, the binder); drain()
/// from the scheduling thread. One mutex, held only to append or to swap the batch out.
class Inbox {
 public:
  void push(InboxItem item) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(item));
  }
  /// Moves everything queued so far, in arrival order, into `batch` (whose old items are dropped);
  /// the inbox is left empty. The two take turns with their storage: `batch`'s, kept by the caller
  /// from the last drain, becomes the inbox's, so a steady stream of events reuses two buffers
  /// instead of growing a new one between drains (each growth faulted fresh pages in: ~3% of a
  /// busy daemon's CPU).
  void drain(std::vector<InboxItem>& batch) {
    recycle(batch);
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(items_);
  }

  /// Drops a drained batch's items once applied; its storage is kept for the next drain unless a
  /// burst (a relist, a first sync) grew it past kKeepItems: that is released now, not held
  /// through the cycle that follows.
  static void recycle(std::vector<InboxItem>& batch) {
    batch.clear();
    if (batch.capacity() > kKeepItems) std::vector<InboxItem>().swap(batch);
  }

  /// The most items' storage a drained buffer keeps for reuse (a few MB).
  static constexpr size_t kKeepItems = 8192;

 private:
  std::mutex mu_;
  std::vector<InboxItem> items_;
};

}  // namespace tessera::cache
