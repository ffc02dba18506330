// The object store, watch fan-out and write verbs of the in-memory cluster. The simulated kubelet and
// device plugin live in kubelet.cpp; selectors and strategic merge in their own files.
#include "tessera/cache/memory_cluster.h"
#include "tessera/api/objects.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>
#include <utility>

#include "selectors.h"
#include "store.h"
#include "strategic_merge.h"

namespace tessera::cache {

using memory::HistoryEntry;
using memory::Key;
using memory::keyText;
using memory::podTerminal;
using memory::stringAt;
using memory::terminating;

namespace {

/// Kinds whose .status is a subresource: PUT/PATCH on the object leave it alone.
bool hasStatusSubresource(api::Kind kind) {
  return kind == api::Kind::Pod || kind == api::Kind::Node || kind == api::Kind::PodGroup ||
         kind == api::Kind::Queue;
}

/// `pods "team-a/big-0"`: how Kubernetes names an object in errors (with the namespace added).
std::string describe(api::Kind kind, const Key& key) {
  return std::string(api::kindInfo(kind).plural) + " \"" + keyText(key) + "\"";
}

api::Error notFound(api::Kind kind, const Key& key) { return api::makeError(describe(kind, key) + " not found", 404); }

api::Error conflict(api::Kind kind, const Key& key) {
  return api::makeError("Operation cannot be fulfilled on " + describe(kind, key) +
                            ": the object has been modified; please apply your changes to the latest version "
                            "and try again",
                        409);
}

std::optional<uint64_t> parseRv(const std::string& text) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

// Continue tokens are opaque to clients: hex of "RV\nnamespace\nname".
std::string encodeContinue(uint64_t rv, const Key& last) {
  static const char* digits = "0123456789abcdef";
  std::string raw = std::to_string(rv) + "\n" + last.first + "\n" + last.second;
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::optional<std::pair<uint64_t, Key>> decodeContinue(const std::string& token) {
  if (token.size() % 2 != 0) return std::nullopt;
  std::string raw;
  for (size_t i = 0; i < token.size(); i += 2) {
    int v = 0;
    auto [p, ec] = std::from_chars(token.data() + i, token.data() + i + 2, v, 16);
    if (ec != std::errc() || p != token.data() + i + 2) return std::nullopt;
    raw.push_back(static_cast<char>(v));
  }
  size_t a = raw.find('\n');
  size_t b = a == std::string::npos ? a : raw.find('\n', a + 1);
  if (b == std::string::npos) return std::nullopt;
  auto rv = parseRv(raw.substr(0, a));
  if (!rv) return std::nullopt;
  return std::make_pair(*rv, Key{raw.substr(a + 1, b - a - 1), raw.substr(b + 1)});
}

class MemoryWatchHandle final : public WatchHandle {
 public:
  MemoryWatchHandle(std::weak_ptr<memory::WatchHub> hub, uint64_t id) : hub_(std::move(hub)), id_(id) {}
  ~MemoryWatchHandle() override { stop(); }
  // Takes the store lock: when it returns, no delivery to this watcher is in progress on another
  // thread, and none will start. Called from inside this watcher's own callback it only unregisters.
  void stop() override {
    if (auto hub = hub_.lock()) {
      std::lock_guard lock(hub->mu);
      hub->watchers.erase(id_);
    }
  }

 private:
  const std::weak_ptr<memory::WatchHub> hub_;
  const uint64_t id_;
};

struct FlagReset {
  bool& flag;
  bool value;
  ~FlagReset() { flag = value; }
};

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Impl

std::optional<api::Error> MemoryCluster::Impl::fault(const std::string& verb) {
  int call = ++callCounts[verb];
  auto it = faults.find(verb);
  if (it == faults.end()) return std::nullopt;
  if (--it->second.remaining > 0) return std::nullopt;
  int code = it->second.code;
  faults.erase(it);
  return api::makeError("injected failure of " + verb + " (call " + std::to_string(call) + ")", code);
}

Json* MemoryCluster::Impl::find(api::Kind kind, const Key& key) {
  auto& store = objects[kind];
  auto it = store.find(key);
  return it == store.end() ? nullptr : &it->second;
}

Key MemoryCluster::Impl::keyFor(api::Kind kind, const std::string& ns, const std::string& name) const {
  return Key{api::kindInfo(kind).namespaced ? ns : std::string(), name};
}

api::Result<Key> MemoryCluster::Impl::keyOf(api::Kind kind, const Json& object) const {
  const api::KindInfo& info = api::kindInfo(kind);
  if (!object.is_object()) return api::makeError(std::string(info.name) + ": the object is not a JSON object", 422);
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) {
    return api::makeError(std::string(info.name) + ": metadata: Required value", 422);
  }
  std::string name = stringAt(*meta, "name");
  if (name.empty()) return api::makeError(std::string(info.name) + ": metadata.name: Required value", 422);
  if (!info.namespaced) return Key{"", name};
  std::string ns = stringAt(*meta, "namespace");
  if (ns.empty()) {
    return api::makeError(std::string(info.name) + " " + name + ": metadata.namespace: Required value", 422);
  }
  return Key{ns, name};
}

std::string MemoryCluster::Impl::nextUid() {
  char buf[48];
  std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012llu", static_cast<unsigned long long>(++uidCounter));
  return buf;
}

std::string MemoryCluster::Impl::generatedName(const std::string& prefix, api::Kind kind, const std::string& ns) {
  // Kubernetes appends 5 random characters from this alphabet; here they come from a counter through a
  // bijection of [0, 27^5), so names are deterministic yet do not look sequential.
  static constexpr std::string_view alphabet = "bcdfghjklmnpqrstvwxz2456789";
  constexpr uint64_t space = 27ull * 27 * 27 * 27 * 27;
  while (true) {
    uint64_t x = (++nameCounter * 7919 + 4201) % space;
    std::string name = prefix;
    for (int i = 0; i < 5; ++i) {
      name.push_back(alphabet[x % 27]);
      x /= 27;
    }
    if (find(kind, keyFor(kind, ns, name)) == nullptr) return name;
  }
}

Json MemoryCluster::Impl::commit(api::Kind kind, const Key& key, WatchEventType type, Json object,
                                 Json previous) {
  ++rv;
  object["metadata"]["resourceVersion"] = std::to_string(rv);
  auto& store = objects[kind];
  if (type == WatchEventType::Deleted) {
    store.erase(key);
    pendingOwners.push_back(stringAt(object, "metadata", "uid"));
  } else {
    const Json* refs = object["metadata"].contains("ownerReferences") ? &object["metadata"]["ownerReferences"] : nullptr;
    const bool refsChanged =
        type == WatchEventType::Added || !previous.is_object() || !previous.contains("metadata") ||
        !previous["metadata"].is_object() || !previous["metadata"].contains("ownerReferences") ||
        (refs && previous["metadata"]["ownerReferences"] != *refs);
    if (refs && refs->is_array() && refsChanged)
      for (const auto& ref : *refs)
        if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string())
          dependents.emplace(ref["uid"].get<std::string>(), std::make_pair(kind, key));
    store[key] = object;
  }
  if (kind == api::Kind::Pod) {
    // The device plugin frees a pod's devices once its containers stop or it leaves its node.
    auto it = devices.find(stringAt(object, "metadata", "uid"));
    if (it != devices.end() && (type == WatchEventType::Deleted || podTerminal(object) ||
                                stringAt(object, "spec", "nodeName") != it->second.node)) {
      devices.erase(it);
    }
  }
  auto entry = std::make_shared<HistoryEntry>();
  entry->rv = rv;
  entry->kind = kind;
  entry->key = key;
  entry->event = WatchEvent{type, object};
  entry->previous = std::move(previous);
  history.push_back(entry);
  trimHistory();
  undelivered.push_back(std::move(entry));
  deliver();
  // Dependents of deleted objects go after them (their events follow the owner's).
  while (!collecting && !pendingOwners.empty()) {
    collecting = true;
    std::string owner = std::move(pendingOwners.back());
    pendingOwners.pop_back();
    collectDependentsLocked(owner);
    collecting = false;
  }
  return object;
}

void MemoryCluster::Impl::collectDependentsLocked(const std::string& ownerUid) {
  if (ownerUid.empty()) return;
  auto [from, to] = dependents.equal_range(ownerUid);
  std::vector<std::pair<api::Kind, Key>> candidates;
  for (auto it = from; it != to; ++it) candidates.push_back(it->second);
  dependents.erase(from, to);
  for (const auto& [kind, key] : candidates) {
    Json* obj = find(kind, key);
    if (!obj || !obj->contains("metadata") || !(*obj)["metadata"].contains("ownerReferences")) continue;
    bool owned = false;
    for (const auto& ref : (*obj)["metadata"]["ownerReferences"])
      owned = owned || (ref.is_object() && ref.value("uid", "") == ownerUid);
    if (!owned) continue;  // the reference was removed since
    Json copy = *obj;
    commit(kind, key, WatchEventType::Deleted, copy, copy);
  }
}

void MemoryCluster::Impl::trimHistory() {
  while (history.size() > window) {
    compactedRv = history.front()->rv;
    history.pop_front();
  }
}

void MemoryCluster::Impl::deliver() {
  // Re-entrant calls (a callback that writes) only queue: the outermost loop delivers in RV order.
  if (delivering) return;
  delivering = true;
  FlagReset reset{delivering, false};
  while (!undelivered.empty()) {
    std::shared_ptr<const HistoryEntry> entry = std::move(undelivered.front());
    undelivered.pop_front();
    std::vector<std::pair<uint64_t, std::shared_ptr<WatchCallback>>> targets;
    std::vector<std::shared_ptr<const memory::WatchFilter>> filters;
    for (const auto& [id, w] : hub->watchers) {
      if (w.kind == entry->kind && entry->rv > w.fromRv) {
        targets.emplace_back(id, w.callback);
        filters.push_back(w.filter);
      }
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      const auto& [id, callback] = targets[i];
      if (hub->watchers.count(id) == 0) continue;  // stopped by an earlier callback
      if (filters[i]) filters[i]->deliver(*callback, *entry);
      else (*callback)(entry->event);
    }
  }
}

api::Result<Json> MemoryCluster::Impl::createLocked(api::Kind kind, Json object, bool keepUid) {
  const api::KindInfo& info = api::kindInfo(kind);
  if (!object.is_object()) return api::makeError(std::string(info.name) + ": the object is not a JSON object", 422);
  if (!object.contains("metadata") || object["metadata"].is_null()) object["metadata"] = Json::object();
  if (!object["metadata"].is_object()) return api::makeError(std::string(info.name) + ": metadata: must be an object", 422);
  Json& meta = object["metadata"];
  if (!info.namespaced) meta.erase("namespace");
  if (stringAt(meta, "name").empty() && !stringAt(meta, "generateName").empty()) {
    meta["name"] = generatedName(stringAt(meta, "generateName"), kind, stringAt(meta, "namespace"));
  }
  TESSERA_ASSIGN_OR_RETURN(const Key key, keyOf(kind, object));
  if (find(kind, key) != nullptr) return api::makeError(describe(kind, key) + " already exists", 409);
  if (auto e = validate(kind, key, object)) return *e;
  ensureTypeMeta(kind, object);
  if (!keepUid || stringAt(meta, "uid").empty()) meta["uid"] = nextUid();
  if (stringAt(meta, "creationTimestamp").empty()) meta["creationTimestamp"] = api::formatTime(clock.now());
  if (kind == api::Kind::Pod) {
    if (!object.contains("status") || object["status"].is_null()) object["status"] = Json::object();
    if (stringAt(object["status"], "phase").empty()) object["status"]["phase"] = "Pending";
  }
  Json stored = commit(kind, key, WatchEventType::Added, std::move(object), Json());
  if (kind == api::Kind::Pod && isReservationPod(stored)) {
    startReservationLocked(key);
    if (const Json* now = find(kind, key)) return *now;
  }
  return stored;
}

Json MemoryCluster::Impl::modify(api::Kind kind, const Key& key, const Json& current, Json next) {
  Json same = next;
  same["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"];
  if (same == current) return current;
  Json previous = current;  // `current` refers into the store, which commit overwrites
  return commit(kind, key, WatchEventType::Modified, std::move(next), std::move(previous));
}

api::Result<Json> MemoryCluster::Impl::write(api::Kind kind, const Key& key, const Json& current, Json next) {
  ensureTypeMeta(kind, next);
  if (auto e = validate(kind, key, next)) return *e;
  return modify(kind, key, current, std::move(next));
}

namespace {

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/// RFC 1123 label: lower-case alphanumerics and '-', alphanumeric at both ends, at most 63.
bool dnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return alnum(c) || c == '-'; });
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 in all.
bool dnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (size_t b = 0;;) {
    const size_t e = s.find('.', b);
    if (!dnsLabel(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b))) return false;
    if (e == std::string_view::npos) return true;
    b = e + 1;
  }
}

/// A label value, or the name part of a label key: at most 63 of [A-Za-z0-9_.-], alphanumeric at
/// both ends (a value may be empty).
bool qualifiedPart(std::string_view s, bool mayBeEmpty) {
  if (s.empty()) return mayBeEmpty;
  auto an = [](char c) { return alnum(c) || (c >= 'A' && c <= 'Z'); };
  if (s.size() > 63 || !an(s.front()) || !an(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return an(c) || c == '-' || c == '_' || c == '.'; });
}

/// Pod fields an update may not change: the spec less what kube-apiserver lets change
/// (container images, activeDeadlineSeconds, tolerations, terminationGracePeriodSeconds,
/// schedulingGates); nodeName is set by the binding subresource only.
Json immutablePodSpec(const Json& pod) {
  Json spec = pod.contains("spec") && pod["spec"].is_object() ? pod["spec"] : Json::object();
  for (const char* list : {"containers", "initContainers"})
    if (spec.contains(list) && spec[list].is_array())
      for (Json& c : spec[list])
        if (c.is_object()) c.erase("image");
  for (const char* field : {"activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"})
    spec.erase(field);
  return spec;
}

std::optional<api::Error> podSpecChanged(const std::string& who, const Json& current, const Json& next) {
  if (immutablePodSpec(current) == immutablePodSpec(next)) return std::nullopt;
  return api::makeError(who + "is invalid: spec: Forbidden: pod updates may not change fields other than "
                              "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                              "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
                              "tolerations), `spec.terminationGracePeriodSeconds`",
                        422);
}

}  // namespace

std::optional<api::Error> MemoryCluster::Impl::validate(api::Kind kind, const Key& key, const Json& object) {
  const std::string who = std::string(api::kindInfo(kind).name) + " " + keyText(key) + ": ";
  const Json& meta = object["metadata"];
  // Names and labels as kube-apiserver validates them (what Tessera writes must pass a real server).
  const bool label = kind == api::Kind::Namespace;
  if (!(label ? dnsLabel(key.second) : dnsSubdomain(key.second)))
    return api::makeError(who + "metadata.name: Invalid value: \"" + key.second + "\": a lowercase RFC 1123 " +
                              (label ? "label must be at most 63" : "subdomain must be at most 253") +
                              " characters of lower case alphanumerics, '-'" + (label ? "" : " or '.'") +
                              ", and start and end with an alphanumeric character",
                          422);
  if (auto labels = meta.find("labels"); labels != meta.end() && labels->is_object())
    for (auto kv = labels->begin(); kv != labels->end(); ++kv) {
      const std::string& k = kv.key();
      const size_t slash = k.find('/');
      const bool keyOk = slash == std::string::npos
                             ? qualifiedPart(k, false)
                             : dnsSubdomain(std::string_view(k).substr(0, slash)) &&
                                   qualifiedPart(std::string_view(k).substr(slash + 1), false);
      if (!keyOk)
        return api::makeError(who + "metadata.labels: Invalid value: \"" + k + "\": not a valid label key " +
                                  "(an optional DNS subdomain prefix and '/', and a name of at most 63 of [A-Za-z0-9_.-])",
                              422);
      if (kv->is_string() && !qualifiedPart(kv->get_ref<const std::string&>(), true))
        return api::makeError(who + "metadata.labels[" + k + "]: Invalid value: " + kv->dump() +
                                  ": a label value must be empty or at most 63 of [A-Za-z0-9_.-], alphanumeric at "
                                  "both ends",
                              422);
    }
  for (const char* map : {"labels", "annotations"}) {
    auto it = meta.find(map);
    if (it == meta.end() || it->is_null()) continue;
    if (!it->is_object()) return api::makeError(who + "metadata." + map + ": must be a map of strings", 422);
    for (auto kv = it->begin(); kv != it->end(); ++kv) {
      if (!kv->is_string()) {
        return api::makeError(who + "metadata." + map + "." + kv.key() + ": must be a string, not " + kv->dump(),
                              422);
      }
    }
  }
  for (const char* field : {"spec", "status"}) {
    auto it = object.find(field);
    if (it != object.end() && !it->is_null() && !it->is_object()) {
      return api::makeError(who + field + ": must be an object", 422);
    }
  }
  return std::nullopt;
}

void MemoryCluster::Impl::ensureTypeMeta(api::Kind kind, Json& object) {
  const api::KindInfo& info = api::kindInfo(kind);
  if (!object.contains("apiVersion")) object["apiVersion"] = info.apiVersion();
  if (!object.contains("kind")) object["kind"] = std::string(info.name);
}

std::vector<Key> MemoryCluster::Impl::podsInCreationOrder() const {
  std::vector<std::pair<std::string, Key>> byUid;
  auto it = objects.find(api::Kind::Pod);
  if (it == objects.end()) return {};
  for (const auto& [key, pod] : it->second) byUid.emplace_back(stringAt(pod, "metadata", "uid"), key);
  std::sort(byUid.begin(), byUid.end());
  std::vector<Key> out;
  out.reserve(byUid.size());
  for (auto& [uid, key] : byUid) out.push_back(std::move(key));
  return out;
}

// ---------------------------------------------------------------------------------------------------
// MemoryCluster

MemoryCluster::MemoryCluster(const api::Clock& clock) : impl_(std::make_unique<Impl>(clock)) {}

MemoryCluster::~MemoryCluster() {
  // Handles that outlive the cluster keep the hub alive; with no watchers left their stop() is a no-op.
  auto lock = impl_->lock();
  impl_->hub->watchers.clear();
}

api::Result<ListResult> MemoryCluster::list(api::Kind kind, const ListOptions& options) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("list")) return *e;
  TESSERA_ASSIGN_OR_RETURN(const memory::LabelSelector labels, memory::LabelSelector::parse(options.labelSelector));
  TESSERA_ASSIGN_OR_RETURN(const memory::FieldSelector fields,
                           memory::FieldSelector::parse(options.fieldSelector, kind));

  uint64_t atRv = impl_->rv;
  std::optional<Key> after;
  if (!options.continueToken.empty()) {
    auto token = decodeContinue(options.continueToken);
    if (!token || token->first > impl_->rv) return api::makeError("invalid continue token", 400);
    if (token->first < impl_->compactedRv) {
      return api::makeError("the provided continue parameter is too old to display a consistent list result; "
                            "restart the list without the continue parameter",
                            410);
    }
    atRv = token->first;
    after = token->second;
  }

  // Pages after the first show the store as it was at the first page's RV: undo the later writes.
  const std::map<Key, Json>* source = &impl_->objects[kind];
  std::map<Key, Json> past;
  if (atRv < impl_->rv) {
    bool copied = false;
    for (auto it = impl_->history.rbegin(); it != impl_->history.rend() && (*it)->rv > atRv; ++it) {
      const HistoryEntry& e = **it;
      if (e.kind != kind) continue;
      if (!copied) {
        past = *source;
        copied = true;
      }
      if (e.previous.is_null()) {
        past.erase(e.key);
      } else {
        past[e.key] = e.previous;
      }
    }
    if (copied) source = &past;
  }

  const bool namespaced = api::kindInfo(kind).namespaced;
  auto selected = [&](const Key& key, const Json& object) {
    if (namespaced && !options.namespace_.empty() && key.first != options.namespace_) return false;
    const Json& meta = object["metadata"];
    return labels.matches(meta.contains("labels") ? meta["labels"] : Json()) && fields.matches(object);
  };

  ListResult result;
  result.resourceVersion = std::to_string(atRv);
  const Key* last = nullptr;
  for (auto it = after ? source->upper_bound(*after) : source->begin(); it != source->end(); ++it) {
    if (!selected(it->first, it->second)) continue;
    if (options.limit > 0 && static_cast<int64_t>(result.items.size()) == options.limit) {
      result.continueToken = encodeContinue(atRv, *last);  // another item matches: more pages remain
      break;
    }
    result.items.push_back(it->second);
    last = &it->first;
  }
  return result;
}

api::Result<std::unique_ptr<WatchHandle>> MemoryCluster::watch(api::Kind kind, const std::string& resourceVersion,
                                                               WatchCallback callback) {
  return watchSelected(kind, resourceVersion, ListOptions{}, std::move(callback));
}

api::Result<std::unique_ptr<WatchHandle>> MemoryCluster::watchSelected(api::Kind kind,
                                                                       const std::string& resourceVersion,
                                                                       const ListOptions& selectors,
                                                                       WatchCallback callback) {
  std::shared_ptr<memory::WatchFilter> filter;
  if (!selectors.labelSelector.empty() || !selectors.fieldSelector.empty() || !selectors.namespace_.empty()) {
    filter = std::make_shared<memory::WatchFilter>();
    TESSERA_ASSIGN_OR_RETURN(filter->labels, memory::LabelSelector::parse(selectors.labelSelector));
    TESSERA_ASSIGN_OR_RETURN(filter->fields, memory::FieldSelector::parse(selectors.fieldSelector, kind));
    filter->namespace_ = selectors.namespace_;
  }
  auto lock = impl_->lock();
  if (auto e = impl_->fault("watch")) return *e;
  Impl& s = *impl_;
  uint64_t from = s.rv;
  if (!resourceVersion.empty() && resourceVersion != "0") {
    auto parsed = parseRv(resourceVersion);
    if (!parsed) return api::makeError("invalid resourceVersion \"" + resourceVersion + "\"", 400);
    from = *parsed;
  }
  if (from < s.compactedRv) {
    return api::makeError("too old resource version: " + resourceVersion + " (" + std::to_string(s.compactedRv) + ")",
                          410);
  }
  // A version this store never reached (a client of a server that lost its state: restarted
  // serve-cluster, etcd restored): refused as kube-apiserver's watch cache does once it gave up
  // waiting for it (504, cause ResourceVersionTooLarge), so the client relists instead of waiting
  // for events that may never come.
  if (from > s.rv) {
    return api::makeError("Too large resource version: " + resourceVersion + ", current: " + std::to_string(s.rv), 504);
  }
  auto shared = std::make_shared<WatchCallback>(std::move(callback));
  std::vector<std::shared_ptr<const HistoryEntry>> replay;
  for (const auto& e : s.history) {
    if (e->rv > from && e->kind == kind) replay.push_back(e);
  }
  const uint64_t upTo = std::max(from, s.rv);
  {
    // Writes made by the callback during the replay are queued, then delivered to this watcher too.
    const bool wasDelivering = s.delivering;
    s.delivering = true;
    FlagReset reset{s.delivering, wasDelivering};
    for (const auto& e : replay) {
      if (filter) filter->deliver(*shared, *e);
      else (*shared)(e->event);
    }
  }
  uint64_t id = s.hub->nextId++;
  s.hub->watchers.emplace(id, memory::Watcher{kind, shared, upTo, std::move(filter)});
  s.deliver();
  return std::unique_ptr<WatchHandle>(std::make_unique<MemoryWatchHandle>(s.hub, id));
}

api::Result<Json> MemoryCluster::get(api::Kind kind, const std::string& ns, const std::string& name) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("get")) return *e;
  Key key = impl_->keyFor(kind, ns, name);
  const Json* object = impl_->find(kind, key);
  if (object == nullptr) return notFound(kind, key);
  return *object;
}

api::Result<Json> MemoryCluster::create(api::Kind kind, const Json& object) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("create")) return *e;
  return impl_->createLocked(kind, object, /*keepUid=*/false);
}

api::Result<Json> MemoryCluster::update(api::Kind kind, const Json& object) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("update")) return *e;
  TESSERA_ASSIGN_OR_RETURN(const Key key, impl_->keyOf(kind, object));
  const Json* current = impl_->find(kind, key);
  if (current == nullptr) return notFound(kind, key);
  const Json& meta = (*current)["metadata"];
  std::string rv = stringAt(object, "metadata", "resourceVersion");
  if (!rv.empty() && rv != stringAt(meta, "resourceVersion")) return conflict(kind, key);
  std::string uid = stringAt(object, "metadata", "uid");
  if (!uid.empty() && uid != stringAt(meta, "uid")) {
    return api::makeError("Precondition failed: UID in object meta: " + uid + ", does not match " +
                              describe(kind, key) + " uid " + stringAt(meta, "uid"),
                          409);
  }
  if (kind == api::Kind::Pod)
    if (auto e = podSpecChanged(describe(kind, key) + " ", *current, object)) return *e;
  Json next = object;
  Json& nextMeta = next["metadata"];
  if (!api::kindInfo(kind).namespaced) nextMeta.erase("namespace");
  // Set by the server only.
  for (const char* field : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"}) {
    if (meta.contains(field)) {
      nextMeta[field] = meta[field];
    } else {
      nextMeta.erase(field);
    }
  }
  if (hasStatusSubresource(kind)) {
    if (current->contains("status")) {
      next["status"] = (*current)["status"];
    } else {
      next.erase("status");
    }
  }
  return impl_->write(kind, key, *current, std::move(next));
}

api::Result<Json> MemoryCluster::updateStatus(api::Kind kind, const Json& object) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("update")) return *e;
  TESSERA_ASSIGN_OR_RETURN(const Key key, impl_->keyOf(kind, object));
  const Json* current = impl_->find(kind, key);
  if (current == nullptr) return notFound(kind, key);
  std::string rv = stringAt(object, "metadata", "resourceVersion");
  if (!rv.empty() && rv != stringAt(*current, "metadata", "resourceVersion")) return conflict(kind, key);
  Json next = *current;
  if (object.contains("status")) {
    next["status"] = object["status"];
  } else {
    next.erase("status");
  }
  return impl_->write(kind, key, *current, std::move(next));
}

api::Result<Json> MemoryCluster::patch(api::Kind kind, const std::string& ns, const std::string& name, PatchType type,
                                       const Json& patch, bool statusSubresource) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("patch")) return *e;
  Key key = impl_->keyFor(kind, ns, name);
  const Json* current = impl_->find(kind, key);
  if (current == nullptr) return notFound(kind, key);
  const api::KindInfo& info = api::kindInfo(kind);
  if (type == PatchType::StrategicMerge && info.group == api::kTesseraGroup) {
    // As the API server does for custom resources: catches code that would only work in simulation.
    return api::makeError("the body of the request was in an unknown format - accepted media types include: "
                          "application/json-patch+json, application/merge-patch+json (strategic merge patch "
                          "is not supported for " + std::string(info.plural) + ")",
                          415);
  }
  Json patched;
  try {
    switch (type) {
      case PatchType::Merge:
        patched = *current;
        patched.merge_patch(patch);
        break;
      case PatchType::StrategicMerge:
        if (!patch.is_object()) return api::makeError("strategic merge patch of " + describe(kind, key) + " is not an object", 422);
        patched = memory::strategicMerge(*current, patch);
        break;
      case PatchType::JsonPatch:
        patched = current->patch(patch);
        break;
    }
  } catch (const std::exception& e) {
    return api::makeError("patch of " + describe(kind, key) + " failed: " + e.what(), 422);
  }
  auto patchedKey = impl_->keyOf(kind, patched);
  if (!patchedKey) return api::makeError("patch of " + describe(kind, key) + ": " + patchedKey.error().message, 422);
  if (*patchedKey != key) {
    return api::makeError("patch of " + describe(kind, key) + ": metadata.name and metadata.namespace are immutable",
                          422);
  }
  const Json& meta = (*current)["metadata"];
  // A resourceVersion in the patch is a precondition, as in Kubernetes.
  std::string rv = stringAt(patched, "metadata", "resourceVersion");
  if (!rv.empty() && rv != stringAt(meta, "resourceVersion")) return conflict(kind, key);
  for (const char* field : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"}) {
    if (meta.contains(field)) {
      patched["metadata"][field] = meta[field];
    } else {
      patched["metadata"].erase(field);
    }
  }
  Json next;
  if (statusSubresource) {
    next = *current;
    if (patched.contains("status")) {
      next["status"] = patched["status"];
    } else {
      next.erase("status");
    }
  } else {
    if (kind == api::Kind::Pod)
      if (auto e = podSpecChanged(describe(kind, key) + " ", *current, patched)) return *e;
    next = std::move(patched);
    if (hasStatusSubresource(kind)) {
      if (current->contains("status")) {
        next["status"] = (*current)["status"];
      } else {
        next.erase("status");
      }
    }
  }
  return impl_->write(kind, key, *current, std::move(next));
}

api::Status MemoryCluster::remove(api::Kind kind, const std::string& ns, const std::string& name,
                                  const DeleteOptions& options) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("remove")) return *e;
  Key key = impl_->keyFor(kind, ns, name);
  const Json* current = impl_->find(kind, key);
  if (current == nullptr) return notFound(kind, key);
  std::string uid = stringAt(*current, "metadata", "uid");
  if (!options.preconditionUid.empty() && options.preconditionUid != uid) {
    return api::makeError("Precondition failed: UID in precondition: " + options.preconditionUid +
                              ", UID in object meta: " + uid + " (" + describe(kind, key) + ")",
                          409);
  }
  const bool graceful =
      kind == api::Kind::Pod && !stringAt(*current, "spec", "nodeName").empty() && !podTerminal(*current);
  if (!graceful) {
    impl_->commit(kind, key, WatchEventType::Deleted, *current, *current);
    return api::Status::success();
  }
  if (terminating(*current)) return api::Status::success();
  // A bound, running pod stays (holding its node's resources) until the kubelet sees its containers
  // stop: the next kubeletTick(), whatever the grace period.
  int64_t grace = 30;
  auto spec = current->find("spec");
  if (options.gracePeriodSeconds) {
    grace = *options.gracePeriodSeconds;
  } else if (spec != current->end() && spec->is_object() && spec->contains("terminationGracePeriodSeconds") &&
             (*spec)["terminationGracePeriodSeconds"].is_number_integer()) {
    grace = (*spec)["terminationGracePeriodSeconds"].get<int64_t>();
  }
  grace = std::max<int64_t>(grace, 0);
  Json next = *current;
  next["metadata"]["deletionTimestamp"] = api::formatTime(impl_->clock.now() + api::Duration{grace * 1000});
  next["metadata"]["deletionGracePeriodSeconds"] = grace;
  impl_->modify(kind, key, *current, std::move(next));
  return api::Status::success();
}

api::Status MemoryCluster::bind(const std::string& ns, const std::string& name, const std::string& uid,
                                const std::string& node) {
  auto lock = impl_->lock();
  if (auto e = impl_->fault("bind")) return *e;
  const api::Kind kind = api::Kind::Pod;
  Key key{ns, name};
  const Json* pod = impl_->find(kind, key);
  if (pod == nullptr) return notFound(kind, key);
  std::string have = stringAt(*pod, "metadata", "uid");
  if (!uid.empty() && uid != have) {
    return api::makeError("Precondition failed: UID in precondition: " + uid + ", UID in object meta: " + have +
                              " (" + describe(kind, key) + ")",
                          409);
  }
  if (terminating(*pod)) {
    return api::makeError("pod " + keyText(key) + " is being deleted, cannot be assigned to a host", 409);
  }
  std::string assigned = stringAt(*pod, "spec", "nodeName");
  if (!assigned.empty()) {
    return api::makeError("pod " + keyText(key) + " is already assigned to node \"" + assigned + "\"", 409);
  }
  if (impl_->find(api::Kind::Node, Key{"", node}) == nullptr) {
    return api::makeError("nodes \"" + node + "\" not found", 404);
  }
  Json next = *pod;
  next["spec"]["nodeName"] = node;
  Json& status = next["status"];
  if (!status.is_object()) status = Json::object();
  Json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = Json::array();
  Json scheduled = {{"type", "PodScheduled"},
                    {"status", "True"},
                    {"lastProbeTime", nullptr},
                    {"lastTransitionTime", api::formatTime(impl_->clock.now())}};
  bool replaced = false;
  for (Json& c : conditions) {
    if (c.is_object() && stringAt(c, "type") == "PodScheduled") {
      c = scheduled;
      replaced = true;
    }
  }
  if (!replaced) conditions.push_back(std::move(scheduled));
  impl_->modify(kind, key, *pod, std::move(next));
  return api::Status::success();
}

api::Result<Json> MemoryCluster::apply(api::Kind kind, const Json& object) {
  auto lock = impl_->lock();
  const api::KindInfo& info = api::kindInfo(kind);
  Json next = object;
  if (next.is_object() && next.contains("metadata") && next["metadata"].is_object() && !info.namespaced) {
    next["metadata"].erase("namespace");
  }
  auto key = impl_->keyOf(kind, next);
  if (!key) {
    // No name: only generateName can make this a valid create.
    return impl_->createLocked(kind, std::move(next), /*keepUid=*/true);
  }
  const Json* current = impl_->find(kind, *key);
  if (current == nullptr) return impl_->createLocked(kind, std::move(next), /*keepUid=*/true);
  Json& meta = next["metadata"];
  const Json& was = (*current)["metadata"];
  if (stringAt(meta, "uid").empty()) meta["uid"] = was["uid"];
  if (stringAt(meta, "creationTimestamp").empty()) meta["creationTimestamp"] = was["creationTimestamp"];
  if (kind == api::Kind::Pod) {
    if (!next.contains("status") || next["status"].is_null()) next["status"] = Json::object();
    if (next["status"].is_object() && stringAt(next["status"], "phase").empty()) next["status"]["phase"] = "Pending";
  }
  return impl_->write(kind, *key, *current, std::move(next));
}

api::Status MemoryCluster::forceRemove(api::Kind kind, const std::string& ns, const std::string& name) {
  auto lock = impl_->lock();
  Key key = impl_->keyFor(kind, ns, name);
  const Json* current = impl_->find(kind, key);
  if (current == nullptr) return notFound(kind, key);
  impl_->commit(kind, key, WatchEventType::Deleted, *current, *current);
  return api::Status::success();
}

api::Status MemoryCluster::finishPod(const std::string& ns, const std::string& name, bool succeeded) {
  auto lock = impl_->lock();
  Key key{ns, name};
  const Json* pod = impl_->find(api::Kind::Pod, key);
  if (pod == nullptr) return notFound(api::Kind::Pod, key);
  Json next = *pod;
  if (!next["status"].is_object()) next["status"] = Json::object();
  next["status"]["phase"] = succeeded ? "Succeeded" : "Failed";
  impl_->modify(api::Kind::Pod, key, *pod, std::move(next));  // commit() releases the devices
  return api::Status::success();
}

std::vector<int> MemoryCluster::devicesOf(const std::string& ns, const std::string& name) const {
  auto lock = impl_->lock();
  auto store = impl_->objects.find(api::Kind::Pod);
  if (store == impl_->objects.end()) return {};
  auto pod = store->second.find(Key{ns, name});
  if (pod == store->second.end()) return {};
  auto it = impl_->devices.find(stringAt(pod->second, "metadata", "uid"));
  return it == impl_->devices.end() ? std::vector<int>{} : it->second.devices;
}

void MemoryCluster::setWatchWindow(size_t events) {
  auto lock = impl_->lock();
  impl_->window = events;
  impl_->trimHistory();
}

void MemoryCluster::failNthCall(const std::string& verb, int n, int code) {
  auto lock = impl_->lock();
  if (n <= 0) {
    impl_->faults.erase(verb);
  } else {
    impl_->faults[verb] = memory::Fault{n, code};
  }
}

}  // namespace tessera::cache
