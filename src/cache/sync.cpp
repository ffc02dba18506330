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

/// metadata.name of an object as the API server sent it; "" when absent or malformed.
std::string nameOf(const Json& object) {
  if (!object.is_object()) return {};
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return {};
  auto name = meta->find("name");
  return name != meta->end() && name->is_string() ? name->get<std::string>() : std::string();
}

/// The string at object[a][b], or "" (no copy of the object; malformed parts read as absent).
std::string stringAt(const Json& object, const char* a, const char* b) {
  if (!object.is_object()) return {};
  auto outer = object.find(a);
  if (outer == object.end() || !outer->is_object()) return {};
  auto inner = outer->find(b);
  return inner != outer->end() && inner->is_string() ? inner->get<std::string>() : std::string();
}

}  // namespace

ClusterSync::ClusterSync(ClusterClient& client, Inbox& inbox, const CacheOptions& options)
    : client_(client), inbox_(inbox), options_(options) {}

ClusterSync::~ClusterSync() { stop(); }

api::Status ClusterSync::start(ClusterState& state) {
  // Cluster-wide definitions first so pods resolve against them; nodes before pods, so a sharded
  // cache knows its pool's nodes when it keeps the pods bound to them.
  static constexpr Kind kWatched[] = {Kind::PriorityClass, Kind::Queue,           Kind::Topology,
                                      Kind::Node,          Kind::VolcanoPodGroup, Kind::SchedulerPluginsPodGroup,
                                      Kind::PodGroup,      Kind::Pod};
  std::set<std::string> poolAtPodList;  // sharded: the pool's nodes the pod list is filtered against
  for (Kind kind : kWatched) {
    if (kind == Kind::Pod && options_.shard.sharded()) {
      std::lock_guard<std::mutex> lock(nodesMu_);
      poolAtPodList = poolNodes_;
    }
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
    if (options_.shard.sharded() && kind == Kind::Node) {
      std::lock_guard<std::mutex> lock(nodesMu_);
      for (const auto& item : listed->items)
        if (auto name = nameOf(item); !name.empty()) poolNodes_.insert(name);
    }
    for (const auto& item : listed->items) state.apply(kind, WatchEvent{WatchEventType::Added, item});
    auto handles = startWatches(kind, *listed);
    if (!handles.ok())
      return api::makeError("watching " + resource(kind) + ": " + handles.error().message, handles.error().code);
    std::lock_guard<std::mutex> lock(mu_);
    watches_[kind] = std::move(handles).value();
  }
  // Sharded: a node that joined the pool while the pods were being listed (before joins are held)
  // may have pods the list left out: list them again.
  bool joinedDuringStart = false;
  {
    std::lock_guard<std::mutex> lock(nodesMu_);
    if (options_.shard.sharded())
      for (const auto& name : poolNodes_) joinedDuringStart = joinedDuringStart || !poolAtPodList.count(name);
    synced_ = true;  // under nodesMu_: from here on trackNode (which reads it under the lock) holds joins
  }
  if (joinedDuringStart) requestRelist(Kind::Pod);
  return api::Status::success();
}

void ClusterSync::stop() {
  std::map<Kind, Watches> watches;
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
  for (auto& [kind, ws] : watches)
    for (auto& w : ws)
      if (w) w->stop();
}

std::vector<ListOptions> ClusterSync::streams(Kind kind) const {
  const api::ShardScope& shard = options_.shard;
  if (!shard.sharded() || (kind != Kind::Node && kind != Kind::Pod)) return {ListOptions{}};
  ListOptions own;
  own.labelSelector = shard.selector();
  if (kind == Kind::Node) return {own};
  ListOptions others;  // bound pods of the other pools: kept when on one of our nodes (keepPod)
  others.labelSelector = shard.othersSelector();
  others.fieldSelector = "spec.nodeName!=";
  return {own, others};
}

api::Result<ClusterSync::Listed> ClusterSync::listAll(Kind kind) {
  Listed all;
  for (const ListOptions& selectors : streams(kind)) {
    TESSERA_ASSIGN_OR_RETURN(ListResult page, listStream(kind, selectors));
    all.resourceVersions.push_back(page.resourceVersion);
    const bool filter = kind == Kind::Pod && options_.shard.sharded();
    for (auto& item : page.items)
      if (!filter || keepPod(item)) all.items.push_back(std::move(item));
  }
  return all;
}

/// Lists every page of one stream of `kind`. An expired continue token (410) restarts the list.
api::Result<ListResult> ClusterSync::listStream(Kind kind, const ListOptions& selectors) {
  for (int restart = 0;; ++restart) {
    ListOptions o = selectors;
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

api::Result<ClusterSync::Watches> ClusterSync::startWatches(Kind kind, const Listed& listed) {
  Watches handles;
  const auto selectors = streams(kind);
  for (size_t i = 0; i < selectors.size(); ++i) {
    auto handle = startWatch(kind, selectors[i], listed.resourceVersions.at(i));
    if (!handle.ok()) {
      for (auto& h : handles) h->stop();
      return handle.error();
    }
    handles.push_back(std::move(handle).value());
  }
  return handles;
}

bool ClusterSync::keepPod(const Json& pod) const {
  const std::string node = stringAt(pod, "spec", "nodeName");
  if (node.empty()) return true;
  if (stringAt(pod, "spec", "schedulerName") == options_.schedulerName) {
    // Ours and of this pool, wherever it runs (its gang stays whole).
    std::string pool;
    if (auto meta = pod.find("metadata"); meta != pod.end() && meta->is_object())
      pool = stringAt(*meta, "labels", api::keys::kNodePoolLabel);
    if (pool == *options_.shard.pool) return true;
  }
  std::lock_guard<std::mutex> lock(nodesMu_);
  return poolNodes_.count(node) > 0;
}

bool ClusterSync::trackNode(const WatchEvent& ev, InboxItem& item) {
  const std::string name = nameOf(ev.object);
  if (name.empty()) return true;
  bool relist = false;
  {
    std::lock_guard<std::mutex> lock(nodesMu_);
    if (ev.type == WatchEventType::Deleted) {
      poolNodes_.erase(name);
      if (joining_.erase(name) && joining_.empty()) joinsCv_.notify_all();
      return true;
    }
    if (ev.type != WatchEventType::Added && ev.type != WatchEventType::Modified) return true;
    if (auto held = joining_.find(name); held != joining_.end()) {
      held->second = std::move(item);  // still joining: the latest version waits with it
      return false;
    }
    if (poolNodes_.insert(name).second && synced_) {
      joining_.emplace(name, std::move(item));
      relist = true;
    }
  }
  if (!relist) return true;
  log::info("node ", name, " joined ", options_.shard.describe(), ": relisting pods to find those already on it");
  requestRelist(Kind::Pod);
  return false;
}

void ClusterSync::refreshPool(std::vector<Json>& nodes) {
  bool joined = false;
  {
    std::lock_guard<std::mutex> lock(nodesMu_);
    std::set<std::string> listed;
    std::vector<Json> kept;
    kept.reserve(nodes.size());
    for (auto& node : nodes) {
      const std::string name = nameOf(node);
      listed.insert(name);
      if (name.empty() || poolNodes_.count(name) || joining_.count(name)) {
        if (auto held = joining_.find(name); held != joining_.end())
          held->second.event = WatchEvent{WatchEventType::Added, std::move(node)};  // still joining
        else
          kept.push_back(std::move(node));
        continue;
      }
      // Joined while the watch was down: held back until the pods' relist, as a watched join is.
      InboxItem item;
      item.kind = Kind::Node;
      item.event = WatchEvent{WatchEventType::Added, std::move(node)};
      joining_.emplace(name, std::move(item));
      joined = true;
    }
    for (auto it = joining_.begin(); it != joining_.end();)
      it = listed.count(it->first) ? std::next(it) : joining_.erase(it);
    poolNodes_ = std::move(listed);
    nodes = std::move(kept);
    if (joining_.empty()) joinsCv_.notify_all();
  }
  if (joined) requestRelist(Kind::Pod);
}

void ClusterSync::releaseJoined(const std::set<std::string>& joined) {
  std::unique_lock<std::mutex> lock(nodesMu_);
  for (const auto& name : joined)
    if (auto it = joining_.find(name); it != joining_.end()) {
      inbox_.push(std::move(it->second));  // under the lock: awaitJoins() returns after the push
      joining_.erase(it);
    }
  if (joining_.empty()) joinsCv_.notify_all();
}

void ClusterSync::awaitJoins(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(nodesMu_);
  joinsCv_.wait_for(lock, limit, [&] { return joining_.empty(); });
}

/// Starts one watch of `kind` from `rv`; its events (and a relist request on Error) go to the inbox.
api::Result<std::unique_ptr<WatchHandle>> ClusterSync::startWatch(Kind kind, const ListOptions& selectors,
                                                                 const std::string& rv) {
  return client_.watchSelected(kind, rv, selectors, [this, kind](const WatchEvent& ev) {
    InboxItem item;
    item.kind = kind;
    item.event.type = ev.type;
    const bool sharded = options_.shard.sharded();
    if (kind == Kind::Pod && (ev.type == WatchEventType::Added || ev.type == WatchEventType::Modified)) {
      if (sharded && !keepPod(ev.object)) return;  // bound on another pool's node
      // Converted here, not on the scheduling thread; the JSON is kept only to report an error
      // (building and freeing its tree was most of what a snapshot cost under a pod storm).
      item.pod = api::podFromJson(ev.object);
      if (!item.pod->ok()) item.event.object = ev.object;
    } else {
      item.event.object = ev.object;
    }
    if (sharded && kind == Kind::Node && !trackNode(ev, item)) {
      if (options_.onEvent) options_.onEvent();
      return;
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

/// The relist worker: stops the failed watches, lists, queues the replacement, watches again.
void ClusterSync::relistLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    relistCv_.wait(lock, [&] { return stopping_ || !relistQueue_.empty(); });
    if (stopping_) return;
    const Kind kind = *relistQueue_.begin();
    relistQueue_.erase(relistQueue_.begin());
    Watches old = std::move(watches_[kind]);
    lock.unlock();
    for (auto& w : old)
      if (w) w->stop();  // not from inside its callback: this is the worker thread
    old.clear();
    api::Duration delay = options_.relistRetry;
    for (;;) {
      // The nodes that joined the pool before this list: their pods are in it.
      std::set<std::string> joined;
      if (kind == Kind::Pod && options_.shard.sharded()) {
        std::lock_guard<std::mutex> nodes(nodesMu_);
        for (const auto& [name, item] : joining_) joined.insert(name);
      }
      auto listed = listAll(kind);
      api::Result<Watches> handles = api::makeError("not listed");
      const size_t count = listed.ok() ? listed->items.size() : 0;
      if (listed.ok() && kind == Kind::Node && options_.shard.sharded()) refreshPool(listed->items);
      if (listed.ok()) {
        // The list first, then the watches from its versions: their events come after it.
        InboxItem item;
        item.op = InboxItem::Op::Replace;
        item.kind = kind;
        item.replace = std::make_shared<const std::vector<Json>>(std::move(listed->items));
        inbox_.push(std::move(item));
        handles = startWatches(kind, *listed);
        // The joined nodes after the pods on them, and once the watches carry their changes.
        if (handles.ok() && !joined.empty()) releaseJoined(joined);
      }
      if (handles.ok()) {
        absentReported_.erase(kind);
        ++relists_;
        log::info("relisted ", resource(kind), ": ", count, " objects; watching again");
        if (options_.onEvent) options_.onEvent();
        lock.lock();
        if (stopping_) {
          lock.unlock();
          for (auto& h : *handles) h->stop();
          return;
        }
        watches_[kind] = std::move(handles).value();
        break;
      }
      const api::Error& err = listed.ok() ? handles.error() : listed.error();
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
