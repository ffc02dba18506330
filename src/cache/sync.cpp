#include "sync.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "tessera/api/convert.h"
#include "tessera/api/log.h"

namespace tessera::cache {

using api::Kind;

namespace {

/// Other schedulers' PodGroups: read where their CRDs are installed; most clusters have neither.
bool foreignKind(Kind kind) { return kind == Kind::VolcanoPodGroup || kind == Kind::SchedulerPluginsPodGroup; }

/// Kinds whose CRD a cluster may lack: without it the cache starts and schedules without them
/// (one warning; one info line for other schedulers' kinds), and picks them up once the API server serves them.
bool optionalKind(Kind kind) { return kind == Kind::Topology || foreignKind(kind); }

/// "podgroups", or "podgroups.scheduling.volcano.sh" for another scheduler's kind of the same name.
std::string resource(Kind kind) {
  const api::KindInfo& info = api::kindInfo(kind);
  return foreignKind(kind) ? std::string(info.plural) + "." + std::string(info.group) : std::string(info.plural);
}

/// The API server does not serve the kind at all (its CRD is not installed).
bool notServed(Kind kind, const api::Error& e) { return optionalKind(kind) && e.code == 404; }

}  // namespace

ClusterSync::ClusterSync(ClusterClient& client, Inbox& inbox, const CacheOptions& options)
    : client_(client), inbox_(inbox), options_(options) {}

ClusterSync::~ClusterSync() { stop(); }

api::Status ClusterSync::start(ClusterState& state) {
  // Cluster-wide definitions first so pods resolve against them.
  static constexpr Kind kWatched[] = {Kind::PriorityClass, Kind::Queue,           Kind::Topology,
                                      Kind::Node,          Kind::VolcanoPodGroup, Kind::SchedulerPluginsPodGroup,
                                      Kind::PodGroup,      Kind::Pod};
  for (Kind kind : kWatched) {
    auto listed = listAll(kind);
    if (!listed.ok() && notServed(kind, listed.error())) {
      if (foreignKind(kind))
        log::info("listing ", resource(kind), ": ", listed.error().message, " (CRD not installed): pods naming such "
                  "PodGroups find them once the API server serves them");
      else
        log::warning("listing ", resource(kind), ": ", listed.error().message, " (is the ", api::kindInfo(kind).name,
                     " CRD installed?): scheduling without them; they are picked up once the API server serves them");
      absentReported_.insert(kind);  // before the worker starts (requestRelist); the worker's alone after
      requestRelist(kind);           // retried quietly with backoff (up to 30 s) until served
      continue;
    }
    if (!listed.ok())
      return api::makeError("listing " + resource(kind) + ": " + listed.error().message,
                            listed.error().code);
    for (const auto& item : listed->items) state.apply(kind, WatchEvent{WatchEventType::Added, item});
    auto handle = startWatch(kind, listed->resourceVersion);
    if (!handle.ok())
      return api::makeError("watching " + resource(kind) + ": " + handle.error().message,
                            handle.error().code);
    std::lock_guard<std::mutex> lock(mu_);
    watches_[kind] = std::move(handle).value();
  }
  synced_ = true;
  return api::Status::success();
}

void ClusterSync::stop() {
  std::map<Kind, std::unique_ptr<WatchHandle>> watches;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    relistCv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    watches.swap(watches_);
  }
  for (auto& [kind, w] : watches)
    if (w) w->stop();
}

/// Lists every page of `kind`. An expired continue token (410) restarts the list.
api::Result<ListResult> ClusterSync::listAll(Kind kind) {
  for (int restart = 0;; ++restart) {
    ListOptions o;
    o.limit = options_.listPageSize;
    ListResult all;
    bool expired = false;
    for (;;) {
      auto page = client_.list(kind, o);
      if (!page.ok()) {
        if (page.error().code == 410 && !o.continueToken.empty() && restart < 3) {
          expired = true;
          break;
        }
        return page.error();
      }
      if (all.resourceVersion.empty()) all.resourceVersion = page->resourceVersion;
      for (auto& item : page->items) all.items.push_back(std::move(item));
      if (page->continueToken.empty()) return all;
      o.continueToken = page->continueToken;
    }
    if (!expired) return all;
  }
}

/// Starts the watch of `kind` from `rv`; its events (and a relist request on Error) go to the inbox.
api::Result<std::unique_ptr<WatchHandle>> ClusterSync::startWatch(Kind kind, const std::string& rv) {
  return client_.watch(kind, rv, [this, kind](const WatchEvent& ev) {
    InboxItem item;
    item.kind = kind;
    item.event.type = ev.type;
    if (kind == Kind::Pod && (ev.type == WatchEventType::Added || ev.type == WatchEventType::Modified)) {
      // Converted here, not on the scheduling thread; the JSON is kept only to report an error
      // (building and freeing its tree was most of what a snapshot cost under a pod storm).
      item.pod = api::podFromJson(ev.object);
      if (!item.pod->ok()) item.event.object = ev.object;
    } else {
      item.event.object = ev.object;
    }
    inbox_.push(std::move(item));
    if (ev.type == WatchEventType::Error) {
      log::info("watch ", resource(kind), " ended: ",
                ev.object.is_object() ? ev.object.value("message", std::string("error event")) : std::string("error event"),
                "; relisting");
      requestRelist(kind);
    }
    if (options_.onEvent) options_.onEvent();
  });
}

void ClusterSync::requestRelist(Kind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  relistQueue_.insert(kind);
  if (!worker_.joinable()) worker_ = std::thread([this] { relistLoop(); });
  relistCv_.notify_all();
}

/// The relist worker: stops the failed watch, lists, queues the replacement, watches again.
void ClusterSync::relistLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    relistCv_.wait(lock, [&] { return stopping_ || !relistQueue_.empty(); });
    if (stopping_) return;
    const Kind kind = *relistQueue_.begin();
    relistQueue_.erase(relistQueue_.begin());
    std::unique_ptr<WatchHandle> old = std::move(watches_[kind]);
    lock.unlock();
    if (old) old->stop();  // not from inside its callback: this is the worker thread
    old.reset();
    api::Duration delay = options_.relistRetry;
    for (;;) {
      auto listed = listAll(kind);
      api::Result<std::unique_ptr<WatchHandle>> handle = api::makeError("not listed");
      const size_t count = listed.ok() ? listed->items.size() : 0;
      if (listed.ok()) {
        InboxItem item;
        item.op = InboxItem::Op::Replace;
        item.kind = kind;
        item.replace = std::make_shared<const std::vector<Json>>(std::move(listed->items));
        inbox_.push(std::move(item));
        handle = startWatch(kind, listed->resourceVersion);
      }
      if (handle.ok()) {
        absentReported_.erase(kind);
        ++relists_;
        log::info("relisted ", resource(kind), ": ", count, " objects; watching again");
        if (options_.onEvent) options_.onEvent();
        lock.lock();
        if (stopping_) {
          lock.unlock();
          (*handle)->stop();
          return;
        }
        watches_[kind] = std::move(handle).value();
        break;
      }
      const api::Error& err = listed.ok() ? handle.error() : listed.error();
      // A kind not served (its CRD absent) was reported once (start(), or below when it goes away).
      if (!notServed(kind, err))
        log::warning("relisting ", resource(kind), ": ", err.message, " (retrying)");
      else if (absentReported_.insert(kind).second)
        log::warning("relisting ", resource(kind), ": ", err.message, " (the ", api::kindInfo(kind).name,
                     " CRD was removed?): scheduling without them until the API server serves them again");
      lock.lock();
      if (relistCv_.wait_for(lock, std::chrono::milliseconds(delay.millis), [&] { return stopping_; })) return;
      lock.unlock();
      delay.millis = std::min<int64_t>(delay.millis * 2, 30'000);
    }
  }
}

void reconcile(ClusterState& state, Kind kind, const std::vector<Json>& items) {
  std::set<std::string> present;
  for (const auto& item : items) {
    auto meta = api::metaFromJson(item);
    if (meta.ok()) present.insert(meta->key());
    state.apply(kind, WatchEvent{WatchEventType::Modified, item});
  }
  for (const auto& key : state.heldKeys(kind))
    if (!present.count(key)) state.remove(kind, key);
}

}  // namespace tessera::cache
