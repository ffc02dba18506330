// The Cache facade: wires its four parts together and owns the thread boundary between them.
//   cluster_state.h     the objects and their accounting (thread-free)
//   assumptions.h       what the binder reported ahead of the watch (thread-free)
//   inbox.h             the one queue from other threads to the scheduling thread
//   sync.h              list, watch and relist (the client's threads, one relist worker)
//   snapshot_builder.h  the immutable per-cycle view
#include "tessera/cache/cache.h"

#include <atomic>
#include <chrono>
#include <utility>

#include "cluster_state.h"
#include "inbox.h"
#include "snapshot_builder.h"
#include "sync.h"

namespace tessera::cache {

/// Ownership by thread:
/// - any thread: `inbox` (its own lock), the atomic `expired` counter;
/// - the scheduling thread (start(), then snapshot() and applyEvent()): `state`, `builder`, `drained`;
/// - `sync` owns the watches and the relist worker (see sync.h); it only pushes to `inbox`.
/// Declaration order is destruction order reversed: `sync` (whose threads use `inbox` and
/// `options`) is destroyed first.
struct Cache::Impl {
  const api::Clock& clock;
  const CacheOptions options;
  Inbox inbox;
  std::vector<InboxItem> drained;  ///< drainInbox's batch: its storage goes back to the inbox
  ClusterState state;
  SnapshotBuilder builder;
  std::atomic<uint64_t> expired{0};
  ClusterSync sync;

  Impl(ClusterClient& client, const api::Clock& k, CacheOptions o)
      : clock(k), options(std::move(o)), state(k, options.schedulerName, options.isolation, options.gpuDefaults, options.shard),
        sync(client, inbox, options) {}

  /// Applies what the binder reported about a pod.
  void applyReport(const PodReport& report) {
    if (state.assumptions().apply(report, state.findPod(report.podKey), clock.now(), options.assumeTtl))
      state.refreshPod(report.podKey);
  }

  /// Forgets assumed binds past their TTL (counted) and shows pods whose backoff ended again.
  void expireAssumptions() {
    const api::Time now = clock.now();
    for (const auto& key : state.assumptions().expireBinds(now)) {
      ++expired;
      state.refreshPod(key);
    }
    for (const auto& key : state.assumptions().endBackoffs(now)) state.refreshPod(key);
  }

  /// Applies everything queued, in arrival order.
  void drainInbox() {
    inbox.drain(drained);
    for (auto& item : drained) {
      switch (item.op) {
        case InboxItem::Op::Event: state.apply(item.kind, item.event, &item.pod); break;
        case InboxItem::Op::Replace: reconcile(state, item.kind, *item.replace); break;
        case InboxItem::Op::Report: applyReport(item.report); break;
      }
    }
    Inbox::recycle(drained);  // what the items hold goes now; their storage waits for the next drain
  }

  void report(PodReport::Op op, const std::string& podKey, const std::string& node = {},
              std::vector<std::string> gpuGroups = {}, api::Time until = {}) {
    InboxItem item;
    item.op = InboxItem::Op::Report;
    item.report.op = op;
    item.report.podKey = podKey;
    item.report.node = node;
    item.report.gpuGroups = std::move(gpuGroups);
    item.report.until = until;
    inbox.push(std::move(item));
  }
};

Cache::Cache(ClusterClient& client, const api::Clock& clock, CacheOptions options)
    : impl_(std::make_unique<Impl>(client, clock, std::move(options))) {}

Cache::~Cache() { stop(); }

api::Status Cache::start() { return impl_->sync.start(impl_->state); }

void Cache::stop() { impl_->sync.stop(); }

std::shared_ptr<const Snapshot> Cache::snapshot() {
  if (impl_->options.awaitJoins) impl_->sync.awaitJoins(std::chrono::milliseconds(10'000));
  impl_->drainInbox();
  impl_->expireAssumptions();
  return impl_->builder.build(impl_->state, impl_->clock.now());
}

std::vector<std::shared_ptr<const api::Pod>> Cache::takeUngroupedPods(const std::vector<std::string>& alsoKeys) {
  impl_->drainInbox();
  return impl_->state.takeUngroupedPods(alsoKeys);
}

void Cache::holdUngroupedPods(bool on) { impl_->state.holdUngroupedPods(on); }

std::vector<std::pair<std::string, std::string>> Cache::takeMisroutedPods() {
  impl_->drainInbox();
  return impl_->state.takeMisroutedPods();
}

void Cache::assumeBound(const std::string& podKey, const std::string& node) {
  impl_->report(PodReport::Op::AssumeBound, podKey, node);
}

void Cache::assumeBinding(const std::string& podKey, const std::string& node,
                          const std::vector<std::string>& gpuGroups) {
  impl_->report(PodReport::Op::AssumeBinding, podKey, node, gpuGroups);
}

void Cache::bindingDone(const std::string& podKey) { impl_->report(PodReport::Op::BindingDone, podKey); }

void Cache::bindingFailed(const std::string& podKey, api::Time backoffUntil) {
  impl_->report(PodReport::Op::BindingFailed, podKey, {}, {}, backoffUntil);
}

void Cache::assumeEvicted(const std::string& podKey) { impl_->report(PodReport::Op::AssumeEvicted, podKey); }

void Cache::evictionFailed(const std::string& podKey) { impl_->report(PodReport::Op::EvictionFailed, podKey); }

void Cache::forgetAssumed(const std::string& podKey) { impl_->report(PodReport::Op::Forget, podKey); }

uint64_t Cache::expiredAssumptions() const { return impl_->expired; }

bool Cache::synced() const { return impl_->sync.synced(); }

uint64_t Cache::relists() const { return impl_->sync.relists(); }

void Cache::applyEvent(api::Kind kind, const WatchEvent& event) { impl_->state.apply(kind, event); }

}  // namespace tessera::cache
