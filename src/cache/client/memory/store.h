#pragma once
/// The state behind MemoryCluster: objects, the resourceVersion counter, the bounded event history,
/// the watchers, the simulated device plugin's allocations and the injected faults. Internal.
///
/// Locking: every public MemoryCluster call takes `shared->mu` (recursive) for its whole duration.
/// Watch callbacks run with it held, in resourceVersion order; a write made from inside a callback is
/// queued and delivered after the current event, so every watcher still sees RV order.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "selectors.h"
#include "tessera/cache/memory_cluster.h"

namespace tessera::cache::memory {

/// namespace (empty for cluster-scoped kinds), name: std::pair orders as Kubernetes lists do.
using Key = std::pair<std::string, std::string>;

/// "ns/name", or "name" for cluster-scoped objects.
inline std::string keyText(const Key& key) { return key.first.empty() ? key.second : key.first + "/" + key.second; }

/// j[a] (or j[a][b]) when it is a string, else "".
inline std::string stringAt(const Json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object()) return "";
  auto it = j.find(a);
  if (it == j.end()) return "";
  if (b != nullptr) {
    if (!it->is_object()) return "";
    auto jt = it->find(b);
    if (jt == it->end() || !jt->is_string()) return "";
    return jt->get<std::string>();
  }
  return it->is_string() ? it->get<std::string>() : "";
}

/// status.phase is Succeeded or Failed: the pod holds no resources.
inline bool podTerminal(const Json& pod) {
  std::string phase = stringAt(pod, "status", "phase");
  return phase == "Succeeded" || phase == "Failed";
}

/// metadata.deletionTimestamp is set.
inline bool terminating(const Json& object) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return false;
  auto ts = meta->find("deletionTimestamp");
  return ts != meta->end() && !ts->is_null();
}

struct HistoryEntry;

/// What a selected watch sees (ClusterClient::watchSelected): its selectors, and each event turned
/// into what a watcher with them sees, as kube-apiserver's watch cache does it.
struct WatchFilter {
  LabelSelector labels;
  FieldSelector fields;
  std::string namespace_;  ///< empty: every namespace
  bool selects(const Json& object) const;
  /// Calls `callback` with the event this watcher sees for `entry`, if any: a Modified becomes
  /// Added when the object starts matching and Deleted (its previous content at the event's
  /// version) when it stops; an event of an object that never matched is not delivered. The
  /// entry's own event is passed when it is seen as is (no copy).
  void deliver(const WatchCallback& callback, const HistoryEntry& entry) const;
};

struct Watcher {
  api::Kind kind;
  std::shared_ptr<WatchCallback> callback;  ///< shared so a callback may stop its own watch
  uint64_t fromRv = 0;                      ///< events with RV <= fromRv were replayed already
  std::shared_ptr<const WatchFilter> filter;  ///< null: every object of the kind
};

/// What watch handles share with the cluster; outlives the cluster while a handle exists.
struct WatchHub {
  std::recursive_mutex mu;
  std::map<uint64_t, Watcher> watchers;
  uint64_t nextId = 1;
};

struct HistoryEntry {
  uint64_t rv = 0;
  api::Kind kind;
  Key key;
  WatchEvent event;
  Json previous;  ///< the state before the write (null for Added): lets list serve pages at an older RV
};

inline bool WatchFilter::selects(const Json& object) const {
  if (!object.is_object()) return false;
  auto meta = object.find("metadata");
  const bool hasMeta = meta != object.end() && meta->is_object();
  if (!namespace_.empty() && (!hasMeta || meta->value("namespace", std::string()) != namespace_)) return false;
  static const Json kNone;
  auto labelsAt = hasMeta ? meta->find("labels") : object.end();
  return labels.matches(hasMeta && labelsAt != meta->end() ? *labelsAt : kNone) && fields.matches(object);
}

inline void WatchFilter::deliver(const WatchCallback& callback, const HistoryEntry& entry) const {
  const WatchEvent& ev = entry.event;
  const bool now = selects(ev.object);
  if (ev.type != WatchEventType::Modified) {
    if (now) callback(ev);
    return;
  }
  const bool before = entry.previous.is_object() && selects(entry.previous);
  if (now && before) {
    callback(ev);
  } else if (now) {
    callback(WatchEvent{WatchEventType::Added, ev.object});
  } else if (before) {
    WatchEvent gone{WatchEventType::Deleted, entry.previous};
    gone.object["metadata"]["resourceVersion"] = std::to_string(entry.rv);  // the event's version
    callback(gone);
  }
}

struct DeviceAllocation {
  std::string node;
  std::vector<int> devices;
};

struct Fault {
  int remaining = 0;
  int code = 500;
};

}  // namespace tessera::cache::memory

namespace tessera::cache {

struct MemoryCluster::Impl {
  using Key = memory::Key;

  explicit Impl(const api::Clock& c) : clock(c), hub(std::make_shared<memory::WatchHub>()) {}

  const api::Clock& clock;
  std::shared_ptr<memory::WatchHub> hub;
  std::map<api::Kind, std::map<Key, Json>> objects;
  /// The RV of the last write. Starts at 1 so that an empty cluster lists at "1", not "0" (which a
  /// watch reads as "from now"): a list-then-watch never misses a write made between the two.
  uint64_t rv = 1;
  uint64_t uidCounter = 0;
  uint64_t nameCounter = 0;
  std::deque<std::shared_ptr<const memory::HistoryEntry>> history;
  size_t window = 10000;
  uint64_t compactedRv = 1;  ///< highest RV no longer in `history`: watching from below it is 410
  std::deque<std::shared_ptr<const memory::HistoryEntry>> undelivered;
  bool delivering = false;
  std::map<std::string, memory::DeviceAllocation> devices;  ///< by pod uid
  std::vector<std::string> pendingOwners;  ///< uids of deleted objects whose dependents must go
  /// Owner uid -> objects that named it in ownerReferences (checked again when used: entries of
  /// objects changed or deleted since are skipped).
  std::multimap<std::string, std::pair<api::Kind, Key>> dependents;
  bool collecting = false;
  bool holdReservations = false;  ///< fault injection: reservation pods are not started
  std::map<std::string, memory::Fault> faults;
  std::map<std::string, int> callCounts;

  std::unique_lock<std::recursive_mutex> lock() const { return std::unique_lock(hub->mu); }

  /// Counts a call of `verb`; an error when failNthCall armed this one.
  std::optional<api::Error> fault(const std::string& verb);

  Json* find(api::Kind kind, const Key& key);
  /// Key of an object, validated: 422 naming the field when metadata.name / metadata.namespace are
  /// missing. For cluster-scoped kinds the namespace is dropped.
  api::Result<Key> keyOf(api::Kind kind, const Json& object) const;
  Key keyFor(api::Kind kind, const std::string& ns, const std::string& name) const;

  /// Records a write: bumps the RV, stores (or erases for Deleted) the object, releases devices of pods
  /// that stopped, appends to the history and delivers the event. Returns the stored object.
  Json commit(api::Kind kind, const Key& key, WatchEventType type, Json object, Json previous);
  void trimHistory();
  void deliver();

  api::Result<Json> createLocked(api::Kind kind, Json object, bool keepUid);
  /// Writes `next` as the new state of `key` unless it equals `current` (a no-op write changes
  /// neither the RV nor emits an event, as in Kubernetes).
  Json modify(api::Kind kind, const Key& key, const Json& current, Json next);
  /// modify() after checking what a client sent is a well-formed object (see validate()).
  api::Result<Json> write(api::Kind kind, const Key& key, const Json& current, Json next);
  /// The shape checks the API server's decoding would make: metadata an object, labels and annotations
  /// maps of strings, spec and status objects. Errors are 422 naming the object and the field.
  static std::optional<api::Error> validate(api::Kind kind, const Key& key, const Json& object);
  /// Sets apiVersion and kind from the kind when absent.
  static void ensureTypeMeta(api::Kind kind, Json& object);
  std::string nextUid();
  std::string generatedName(const std::string& prefix, api::Kind kind, const std::string& ns);

  /// Pod keys in creation order (by uid; uids sort in creation order).
  std::vector<Key> podsInCreationOrder() const;
  void completeExpiredLocked(std::vector<std::string>& completed);
  /// The simulated device plugin and `tessera reserve` for a GPU reservation pod created on a node
  /// (namespace tessera-reservation, label tessera.dev/gpu-group): it gets the lowest free GPU at
  /// once, starts Running and reports a UUID in tessera.dev/gpu-uuid; Failed when no GPU is free.
  void startReservationLocked(const Key& key);
  /// A GPU reservation pod Tessera's binder created on a node: what startReservationLocked starts.
  static bool isReservationPod(const Json& pod);
  /// Kubernetes' garbage collector: objects owned (ownerReferences) by a deleted object go too.
  void collectDependentsLocked(const std::string& ownerUid);
};

}  // namespace tessera::cache
