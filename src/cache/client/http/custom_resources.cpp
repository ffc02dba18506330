// CRDs and the objects of the kinds they define (custom_resources.h): a small store of JSON objects
// keyed by resource ("group/plural") and (namespace, name), with its own RV counter, history and
// watchers, and what discovery and Table answers say about each kind.
#include "custom_resources.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <set>

#include "rest_paths.h"
#include "../memory/selectors.h"
#include "../memory/strategic_merge.h"
#include "tessera/cache/field_validation.h"

namespace tessera::cache::http {

namespace {

using Key = std::pair<std::string, std::string>;  // namespace ("" when cluster-scoped), name

constexpr const char* kCrdGroup = "apiextensions.k8s.io";
constexpr const char* kCrdPlural = "customresourcedefinitions";

/// The customresourcedefinitions resource itself; its Table shows NAME and CREATED AT, as a real one.
const CustomKind& crdKind() {
  static const CustomKind k = [] {
    CustomKind c;
    c.group = kCrdGroup;
    c.plural = kCrdPlural;
    c.singular = "customresourcedefinition";
    c.kind = "CustomResourceDefinition";
    c.listKind = "CustomResourceDefinitionList";
    c.versions = {"v1"};
    c.namespaced = false;
    c.shortNames = {"crd", "crds"};
    c.categories = {"api-extensions"};
    c.printerColumns = {PrinterColumn{"Created At", "string", "date-time", "", ".metadata.creationTimestamp", 0}};
    return c;
  }();
  return k;
}

bool isCrd(const CustomKind& k) { return k.group == kCrdGroup && k.plural == kCrdPlural; }

/// Whether Tessera has an api::Kind for group/plural (served by the MemoryCluster).
bool builtin(const std::string& group, const std::string& plural) {
  for (api::Kind k : api::kAllKinds) {
    const api::KindInfo& ki = api::kindInfo(k);
    if (ki.group == group && ki.plural == plural) return true;
  }
  return false;
}

std::string str(const Json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) return out;
  for (const Json& s : j[key])
    if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

/// The kind a CRD defines; a 422 naming the field when the CRD lacks what a real server requires.
api::Result<CustomKind> readCrd(const Json& crd) {
  const std::string name = str(crd.value("metadata", Json::object()), "name");
  auto invalid = [&](const std::string& what) {
    return api::makeError("CustomResourceDefinition.apiextensions.k8s.io \"" + name + "\" is invalid: " + what, 422);
  };
  const Json spec = crd.value("spec", Json::object());
  const Json names = spec.is_object() ? spec.value("names", Json::object()) : Json::object();
  CustomKind k;
  k.group = str(spec, "group");
  k.plural = str(names, "plural");
  k.kind = str(names, "kind");
  if (k.group.empty()) return invalid("spec.group: Required value");
  if (k.plural.empty()) return invalid("spec.names.plural: Required value");
  if (k.kind.empty()) return invalid("spec.names.kind: Required value");
  if (name != k.plural + "." + k.group)
    return invalid("metadata.name: Invalid value: \"" + name + "\": must be spec.names.plural+\".\"+spec.group");
  k.singular = str(names, "singular");
  if (k.singular.empty()) {
    k.singular = k.kind;
    for (char& c : k.singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  k.listKind = str(names, "listKind");
  if (k.listKind.empty()) k.listKind = k.kind + "List";
  const std::string scope = str(spec, "scope");
  if (scope != "Namespaced" && scope != "Cluster")
    return invalid("spec.scope: Unsupported value: \"" + scope + "\": supported values: \"Cluster\", \"Namespaced\"");
  k.namespaced = scope == "Namespaced";
  k.shortNames = strings(names, "shortNames");
  k.categories = strings(names, "categories");
  const Json versions = spec.is_object() ? spec.value("versions", Json::array()) : Json::array();
  if (!versions.is_array() || versions.empty()) return invalid("spec.versions: Required value");
  for (const Json& v : versions) {
    if (!v.is_object() || str(v, "name").empty()) return invalid("spec.versions[].name: Required value");
    if (!v.value("served", false)) continue;
    if (k.versions.empty()) {
      k.statusSubresource = v.contains("subresources") && v["subresources"].is_object() &&
                            v["subresources"].contains("status");
      if (v.contains("additionalPrinterColumns") && v["additionalPrinterColumns"].is_array())
        for (const Json& c : v["additionalPrinterColumns"])
          if (c.is_object())
            k.printerColumns.push_back(PrinterColumn{str(c, "name"), c.value("type", "string"), str(c, "format"),
                                                     str(c, "description"), str(c, "jsonPath"),
                                                     c.value("priority", 0)});
      if (v.contains("schema") && v["schema"].is_object()) k.schema = v["schema"].value("openAPIV3Schema", Json());
    }
    k.versions.push_back(str(v, "name"));
  }
  return k;
}

std::optional<uint64_t> parseRv(const std::string& text) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

struct Event {
  uint64_t rv;
  std::string resource;
  WatchEvent event;
};

struct Watcher {
  std::string resource;
  std::shared_ptr<WatchCallback> callback;
};

/// What watch handles share with the store; outlives it while a handle exists.
struct Hub {
  std::recursive_mutex mu;
  std::map<uint64_t, Watcher> watchers;
  uint64_t nextId = 1;
};

class Handle final : public WatchHandle {
 public:
  Handle(std::weak_ptr<Hub> hub, uint64_t id) : hub_(std::move(hub)), id_(id) {}
  ~Handle() override { stop(); }
  void stop() override {
    if (auto hub = hub_.lock()) {
      std::lock_guard lock(hub->mu);
      hub->watchers.erase(id_);
    }
  }

 private:
  const std::weak_ptr<Hub> hub_;
  const uint64_t id_;
};

/// The OpenAPI v3 schema name a real server gives a custom kind: the group reversed ("com.example.v1.Widget").
std::string schemaName(const CustomKind& k, const std::string& version) {
  std::string reversed, group = k.group;
  while (!group.empty()) {
    const auto dot = group.rfind('.');
    if (!reversed.empty()) reversed += '.';
    reversed.append(group, dot == std::string::npos ? 0 : dot + 1);
    group = dot == std::string::npos ? "" : group.substr(0, dot);
  }
  return reversed + "." + version + "." + k.kind;
}

/// The OpenAPI v3 document of one custom group-version: what kubectl reads to learn that the server
/// validates fields (the fieldValidation parameter), and each kind's schema for `kubectl explain`.
Json openApi(const std::vector<CustomKind>& kinds, const std::string& version) {
  Json paths = Json::object(), schemas = Json::object();
  for (const CustomKind& k : kinds) {
    const Json gvk = {{"group", k.group}, {"version", version}, {"kind", k.kind}};
    const std::string ref = "#/components/schemas/" + schemaName(k, version);
    auto param = [](const char* name, const char* in) {
      Json p = {{"name", name}, {"in", in}, {"schema", {{"type", "string"}, {"uniqueItems", true}}}};
      if (std::string(in) == "path") p["required"] = true;
      return p;
    };
    const Json fieldParams = Json::array({param("fieldManager", "query"), param("fieldValidation", "query")});
    auto operation = [&](const char* action, bool withBody, bool patch) {
      Json op = {{"x-kubernetes-action", action},
                 {"x-kubernetes-group-version-kind", gvk},
                 {"responses", {{"200", {{"description", "OK"},
                                         {"content", {{"application/json", {{"schema", {{"$ref", ref}}}}}}}}}}}};
      if (withBody) {
        Json content = Json::object();
        if (patch)
          for (const char* ct : {"application/json-patch+json", "application/merge-patch+json"})
            content[ct] = {{"schema", {{"type", "object"}}}};
        else content["application/json"] = {{"schema", {{"$ref", ref}}}};
        op["requestBody"] = {{"content", content}};
        op["parameters"] = fieldParams;
      }
      return op;
    };
    Json common = Json::array();
    if (k.namespaced) common.push_back(param("namespace", "path"));
    const std::string collection = "/apis/" + k.group + "/" + version +
                                   (k.namespaced ? "/namespaces/{namespace}/" : "/") + k.plural;
    Json one = {{"get", operation("get", false, false)},
                {"put", operation("put", true, false)},
                {"patch", operation("patch", true, true)},
                {"delete", operation("delete", false, false)}};
    Json oneParams = common;
    oneParams.push_back(param("name", "path"));
    one["parameters"] = oneParams;
    paths[collection] = {{"get", operation("list", false, false)},
                         {"post", operation("post", true, false)},
                         {"parameters", common}};
    paths[collection + "/{name}"] = std::move(one);
    // A real server adds the envelope to the CRD's schema; without one the object keeps any field.
    Json schema = k.schema.is_object() ? k.schema
                                       : Json{{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
    if (isCrd(k)) schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
    schema["properties"]["apiVersion"] = {{"type", "string"}};
    schema["properties"]["kind"] = {{"type", "string"}};
    schema["properties"]["metadata"] = {{"type", "object"}};
    schema["x-kubernetes-group-version-kind"] = Json::array({gvk});
    schemas[schemaName(k, version)] = std::move(schema);
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes CRD Swagger"}, {"version", "v0.1.0"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

}  // namespace

struct CustomResources::Impl {
  const api::Clock* clock;
  std::shared_ptr<Hub> hub = std::make_shared<Hub>();
  std::map<std::string, CustomKind> kinds;              ///< by key(): the served custom kinds
  std::map<std::string, std::map<Key, Json>> objects;  ///< by resource key, then (namespace, name)
  uint64_t rv = 1;
  uint64_t uids = 0;
  std::deque<Event> history;
  static constexpr size_t kWindow = 10000;
  uint64_t compactedRv = 1;

  api::Time now() const { return clock ? clock->now() : api::SystemClock().now(); }

  std::string describe(const CustomKind& k, const Key& key) const {
    return k.plural + "." + k.group + " \"" + (key.first.empty() ? key.second : key.first + "/" + key.second) + "\"";
  }

  Key keyOf(const CustomTarget& t, const std::string& name) const {
    return Key{t.kind.namespaced ? t.ns : std::string(), name};
  }

  /// Records a write and delivers it. `object` is null for a delete of `previous`.
  Json commit(const std::string& resource, const Key& key, WatchEventType type, Json object) {
    ++rv;
    if (type == WatchEventType::Deleted) {
      object["metadata"]["resourceVersion"] = std::to_string(rv);
      objects[resource].erase(key);
    } else {
      object["metadata"]["resourceVersion"] = std::to_string(rv);
      objects[resource][key] = object;
    }
    history.push_back(Event{rv, resource, WatchEvent{type, object}});
    while (history.size() > kWindow) {
      compactedRv = history.front().rv;
      history.pop_front();
    }
    for (auto& [id, w] : std::map<uint64_t, Watcher>(hub->watchers))
      if (w.resource == resource) (*w.callback)(history.back().event);
    return object;
  }

  /// CRD side effects: a new or changed CRD (re)defines its kind unless Tessera knows it; null: the CRD
  /// went, with its objects.
  void defineKind(const Json& crd, bool removed) {
    auto kind = readCrd(crd);
    if (!kind.ok() || builtin(kind->group, kind->plural)) return;
    const std::string resource = kind->key();
    if (!removed) {
      kinds[resource] = std::move(kind).value();
      return;
    }
    kinds.erase(resource);
    auto it = objects.find(resource);
    if (it == objects.end()) return;
    const std::map<Key, Json> gone = std::move(it->second);
    objects.erase(it);
    for (const auto& [key, object] : gone) commit(resource, key, WatchEventType::Deleted, object);
  }

  /// A CRD as a real server reports it once established.
  static void establish(Json& crd) {
    Json names = crd["spec"].value("names", Json::object());
    auto k = readCrd(crd);
    if (k.ok()) {
      names["singular"] = k->singular;
      names["listKind"] = k->listKind;
    }
    Json conditions = Json::array();
    for (const char* type : {"NamesAccepted", "Established"})
      conditions.push_back({{"type", type}, {"status", "True"}, {"reason", type == std::string("Established")
                                                                                 ? "InitialNamesAccepted"
                                                                                 : "NoConflicts"}});
    Json stored = Json::array();
    for (const Json& v : crd["spec"].value("versions", Json::array()))
      if (v.value("storage", false)) stored.push_back(v.value("name", ""));
    crd["status"] = {{"acceptedNames", names}, {"conditions", conditions}, {"storedVersions", stored}};
  }

  /// Checks shared by create, update and patch: the envelope names this resource, metadata is a map.
  std::optional<api::Error> check(const CustomTarget& t, const Json& object) const {
    if (!object.is_object()) return api::makeError("the body must be an object", 400);
    if (!object.contains("metadata") || !object["metadata"].is_object())
      return api::makeError(t.kind.kind + ": metadata: Required value", 422);
    const std::string apiVersion = str(object, "apiVersion"), kind = str(object, "kind");
    const std::string want = t.kind.group + "/" + t.version;
    if ((!apiVersion.empty() && apiVersion != want) || (!kind.empty() && kind != t.kind.kind))
      return api::makeError("the API version in the data (" + apiVersion + ") does not match the expected API "
                                "version (" + want + ")",
                            400);
    if (str(object["metadata"], "name").empty())
      return api::makeError(t.kind.kind + ".metadata.name: Required value: name or generateName is required", 422);
    if (isCrd(t.kind)) {
      auto k = readCrd(object);
      if (!k.ok()) return k.error();
    }
    return std::nullopt;
  }

  /// Writes `next` over `current` (a no-op write changes nothing, as in Kubernetes).
  api::Result<Json> write(const CustomTarget& t, const Key& key, const Json& current, Json next) {
    if (auto e = check(t, next)) return *e;
    if (str(next["metadata"], "name") != key.second || (t.kind.namespaced && str(next["metadata"], "namespace") != key.first))
      return api::makeError(describe(t.kind, key) + ": metadata.name and metadata.namespace are immutable", 422);
    for (const char* immutable : {"uid", "creationTimestamp"}) next["metadata"][immutable] = current["metadata"][immutable];
    next["apiVersion"] = current["apiVersion"];
    next["kind"] = current["kind"];
    if (current.value("spec", Json()) != next.value("spec", Json()))
      next["metadata"]["generation"] = current["metadata"].value("generation", 1) + 1;
    else next["metadata"]["generation"] = current["metadata"].value("generation", 1);
    if (isCrd(t.kind)) establish(next);
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"];
    if (next == current) return next;
    Json stored = commit(t.kind.key(), key, WatchEventType::Modified, std::move(next));
    if (isCrd(t.kind)) defineKind(stored, false);
    return stored;
  }
};

CustomResources::CustomResources(const api::Clock* clock) : impl_(std::make_shared<Impl>()) { impl_->clock = clock; }
CustomResources::~CustomResources() = default;

std::optional<CustomTarget> CustomResources::resolve(std::string_view path) const {
  std::vector<std::string> parts;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    const auto slash = path.find('/');
    parts.push_back(urlDecode(path.substr(0, slash)));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  if (parts.size() < 4 || parts[0] != "apis") return std::nullopt;
  CustomTarget t;
  t.version = parts[2];
  size_t i = 3;
  if (parts[i] == "namespaces" && i + 2 < parts.size()) {
    t.ns = parts[i + 1];
    i += 2;
  }
  const std::string resource = parts[1] + "/" + parts[i++];
  std::lock_guard lock(impl_->hub->mu);
  if (resource == crdKind().key()) {
    t.kind = crdKind();
  } else {
    auto it = impl_->kinds.find(resource);
    if (it == impl_->kinds.end()) return std::nullopt;
    t.kind = it->second;
  }
  if (std::find(t.kind.versions.begin(), t.kind.versions.end(), t.version) == t.kind.versions.end())
    return std::nullopt;
  if (!t.ns.empty() && !t.kind.namespaced) return std::nullopt;
  if (i < parts.size()) t.name = parts[i++];
  if (i < parts.size()) t.subresource = parts[i++];
  if (i < parts.size()) return std::nullopt;
  if (!t.subresource.empty() && !(t.subresource == "status" && t.kind.statusSubresource)) return std::nullopt;
  return t;
}

api::Result<ListResult> CustomResources::list(const CustomTarget& t, const std::string& labelSelector,
                                              const std::string& fieldSelector) const {
  auto labels = memory::LabelSelector::parse(labelSelector);
  if (!labels.ok()) return api::makeError(labels.error().message, 400);
  // metadata.name and metadata.namespace: what a real server supports for every custom resource
  // (the fields a ConfigMap's selector takes).
  auto fields = memory::FieldSelector::parse(fieldSelector, api::Kind::ConfigMap);
  if (!fields.ok()) return api::makeError(fields.error().message, 400);
  std::lock_guard lock(impl_->hub->mu);
  ListResult out;
  out.resourceVersion = std::to_string(impl_->rv);
  auto it = impl_->objects.find(t.kind.key());
  if (it == impl_->objects.end()) return out;
  for (const auto& [key, object] : it->second) {
    if (t.kind.namespaced && !t.ns.empty() && key.first != t.ns) continue;
    const Json& meta = object["metadata"];
    if (!labels->matches(meta.contains("labels") ? meta["labels"] : Json()) || !fields->matches(object)) continue;
    out.items.push_back(object);
  }
  return out;
}

api::Result<Json> CustomResources::get(const CustomTarget& t) const {
  std::lock_guard lock(impl_->hub->mu);
  const Key key = impl_->keyOf(t, t.name);
  auto it = impl_->objects.find(t.kind.key());
  if (it != impl_->objects.end())
    if (auto jt = it->second.find(key); jt != it->second.end()) return jt->second;
  return api::makeError(impl_->describe(t.kind, key) + " not found", 404);
}

api::Result<Json> CustomResources::create(const CustomTarget& t, Json object) {
  std::lock_guard lock(impl_->hub->mu);
  // The CRD may have gone since resolve(): its objects must not outlive it.
  if (!isCrd(t.kind) && !impl_->kinds.count(t.kind.key()))
    return api::makeError("the server could not find the requested resource", 404);
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object() &&
      str(object["metadata"], "name").empty() && !str(object["metadata"], "generateName").empty())
    object["metadata"]["name"] = str(object["metadata"], "generateName") + std::to_string(impl_->rv + 1);
  if (auto e = impl_->check(t, object)) return *e;
  Json& meta = object["metadata"];
  if (t.kind.namespaced) meta["namespace"] = t.ns.empty() ? str(meta, "namespace") : t.ns;
  else meta.erase("namespace");
  if (t.kind.namespaced && str(meta, "namespace").empty())
    return api::makeError("the server could not find the requested resource: a namespace is required", 404);
  const Key key = impl_->keyOf(t, str(meta, "name"));
  if (impl_->objects[t.kind.key()].count(key))
    return api::makeError(impl_->describe(t.kind, key) + " already exists", 409);
  object["apiVersion"] = t.kind.group + "/" + t.version;
  object["kind"] = t.kind.kind;
  char uid[48];
  std::snprintf(uid, sizeof uid, "00000000-0000-4000-9000-%012llu", static_cast<unsigned long long>(++impl_->uids));
  meta["uid"] = uid;
  meta["creationTimestamp"] = api::formatTime(impl_->now());
  meta["generation"] = 1;
  if (isCrd(t.kind)) Impl::establish(object);
  else if (t.kind.statusSubresource) object.erase("status");
  Json stored = impl_->commit(t.kind.key(), key, WatchEventType::Added, std::move(object));
  if (isCrd(t.kind)) impl_->defineKind(stored, false);
  return stored;
}

api::Result<Json> CustomResources::update(const CustomTarget& t, Json object) {
  std::lock_guard lock(impl_->hub->mu);
  TESSERA_ASSIGN_OR_RETURN(const Json current, get(t));
  if (!object.is_object()) return api::makeError("the body must be an object", 400);
  const std::string sent = object.contains("metadata") ? str(object["metadata"], "resourceVersion") : "";
  if (!sent.empty() && sent != str(current["metadata"], "resourceVersion"))
    return api::makeError("Operation cannot be fulfilled on " + impl_->describe(t.kind, impl_->keyOf(t, t.name)) +
                              ": the object has been modified; please apply your changes to the latest version and "
                              "try again",
                          409);
  if (t.kind.statusSubresource) {
    if (t.subresource == "status") {
      Json next = current;
      next["status"] = object.value("status", Json());
      object = std::move(next);
    } else if (current.contains("status")) {
      object["status"] = current["status"];
    } else {
      object.erase("status");
    }
  }
  return impl_->write(t, impl_->keyOf(t, t.name), current, std::move(object));
}

api::Result<Json> CustomResources::patch(const CustomTarget& t, PatchType type, const Json& patch) {
  std::lock_guard lock(impl_->hub->mu);
  TESSERA_ASSIGN_OR_RETURN(const Json current, get(t));
  Json patched;
  try {
    switch (type) {
      case PatchType::Merge: patched = current, patched.merge_patch(patch); break;
      case PatchType::StrategicMerge:
        // Only CRDs themselves take it (a built-in type); server.cpp refuses it for custom objects.
        if (!patch.is_object()) return api::makeError("the strategic merge patch is not an object", 422);
        patched = memory::strategicMerge(current, patch);
        break;
      case PatchType::JsonPatch: patched = current.patch(patch); break;
    }
  } catch (const std::exception& e) {
    return api::makeError("patch of " + impl_->describe(t.kind, impl_->keyOf(t, t.name)) + " failed: " + e.what(), 422);
  }
  if (t.kind.statusSubresource && patched.is_object()) {
    // The status subresource changes only .status; the object itself everything else.
    Json next = t.subresource == "status" ? current : patched;
    const Json& from = t.subresource == "status" ? patched : current;
    if (from.contains("status")) next["status"] = from["status"];
    else next.erase("status");
    patched = std::move(next);
  }
  return impl_->write(t, impl_->keyOf(t, t.name), current, std::move(patched));
}

api::Result<Json> CustomResources::remove(const CustomTarget& t) {
  std::lock_guard lock(impl_->hub->mu);
  TESSERA_ASSIGN_OR_RETURN(const Json current, get(t));
  Json gone = impl_->commit(t.kind.key(), impl_->keyOf(t, t.name), WatchEventType::Deleted, current);
  if (isCrd(t.kind)) impl_->defineKind(current, true);
  return gone;
}

api::Result<std::unique_ptr<WatchHandle>> CustomResources::watch(const CustomTarget& t,
                                                                 const std::string& resourceVersion,
                                                                 WatchCallback callback) {
  std::lock_guard lock(impl_->hub->mu);
  uint64_t from = impl_->rv;
  if (!resourceVersion.empty() && resourceVersion != "0") {
    auto rv = parseRv(resourceVersion);
    if (!rv) return api::makeError("invalid resourceVersion \"" + resourceVersion + "\"", 400);
    if (*rv < impl_->compactedRv)
      return api::makeError("too old resource version: " + resourceVersion + " (" +
                                std::to_string(impl_->compactedRv) + ")",
                            410);
    if (*rv > impl_->rv) return api::makeError("Too large resource version: " + resourceVersion, 504);
    from = *rv;
  }
  auto cb = std::make_shared<WatchCallback>(std::move(callback));
  const std::string resource = t.kind.key();
  if (resourceVersion.empty() || resourceVersion == "0") {
    // "From now" starts with the current objects as ADDED events, as a real server's watch does.
    auto it = impl_->objects.find(resource);
    if (it != impl_->objects.end())
      for (const auto& [key, object] : it->second) (*cb)(WatchEvent{WatchEventType::Added, object});
  } else {
    for (const Event& e : impl_->history)
      if (e.rv > from && e.resource == resource) (*cb)(e.event);
  }
  const uint64_t id = impl_->hub->nextId++;
  impl_->hub->watchers[id] = Watcher{resource, std::move(cb)};
  return std::unique_ptr<WatchHandle>(std::make_unique<Handle>(impl_->hub, id));
}

std::string CustomResources::resourceVersion() const {
  std::lock_guard lock(impl_->hub->mu);
  return std::to_string(impl_->rv);
}

std::optional<Json> CustomResources::discovery(std::string_view path, std::optional<Json> builtinDoc) const {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  std::vector<CustomKind> kinds{crdKind()};
  {
    std::lock_guard lock(impl_->hub->mu);
    for (const auto& [key, k] : impl_->kinds) kinds.push_back(k);
  }
  if (path == "/openapi/v3") {
    if (!builtinDoc) return builtinDoc;
    // The hash changes with every write here, so that kubectl refetches a group's document when a
    // CRD changes (its cache is keyed by it).
    const std::string hash = resourceVersion();
    for (const CustomKind& k : kinds)
      for (const std::string& v : k.versions)
        (*builtinDoc)["paths"]["apis/" + k.group + "/" + v] = {
            {"serverRelativeURL", "/openapi/v3/apis/" + k.group + "/" + v + "?hash=crd-" + hash}};
    return builtinDoc;
  }
  if (path.starts_with("/openapi/v3/apis/") && !builtinDoc) {
    const std::string gv(path.substr(std::string_view("/openapi/v3/apis/").size()));
    const auto slash = gv.find('/');
    if (slash == std::string::npos) return builtinDoc;
    const std::string group = gv.substr(0, slash), version = gv.substr(slash + 1);
    std::vector<CustomKind> here;
    for (const CustomKind& k : kinds)
      if (k.group == group && std::find(k.versions.begin(), k.versions.end(), version) != k.versions.end())
        here.push_back(k);
    if (here.empty()) return builtinDoc;
    return openApi(here, version);
  }
  if (path == "/apis") {
    if (!builtinDoc) return builtinDoc;
    Json& groups = (*builtinDoc)["groups"];
    for (const CustomKind& k : kinds) {
      Json* group = nullptr;
      for (Json& g : groups)
        if (g.value("name", "") == k.group) group = &g;
      if (!group) {
        groups.push_back({{"name", k.group}, {"versions", Json::array()}});
        group = &groups.back();
      }
      for (const std::string& v : k.versions) {
        Json gv = {{"groupVersion", k.group + "/" + v}, {"version", v}};
        bool listed = false;
        for (const Json& x : (*group)["versions"]) listed = listed || x == gv;
        if (!listed) (*group)["versions"].push_back(gv);
      }
      if (!group->contains("preferredVersion")) (*group)["preferredVersion"] = (*group)["versions"].front();
    }
    return builtinDoc;
  }
  if (!path.starts_with("/apis/")) return builtinDoc;
  const std::string groupVersion(path.substr(6));
  const auto slash = groupVersion.find('/');
  if (slash == std::string::npos || groupVersion.find('/', slash + 1) != std::string::npos) return builtinDoc;
  const std::string group = groupVersion.substr(0, slash), version = groupVersion.substr(slash + 1);
  Json resources = Json::array();
  for (const CustomKind& k : kinds) {
    if (k.group != group || std::find(k.versions.begin(), k.versions.end(), version) == k.versions.end()) continue;
    Json r = {{"name", k.plural},   {"singularName", k.singular}, {"namespaced", k.namespaced},
              {"kind", k.kind},     {"verbs", Json::array({"create", "delete", "get", "list", "patch", "update",
                                                             "watch"})}};
    if (!k.shortNames.empty()) r["shortNames"] = k.shortNames;
    if (!k.categories.empty()) r["categories"] = k.categories;
    resources.push_back(std::move(r));
    if (k.statusSubresource)
      resources.push_back({{"name", k.plural + "/status"}, {"singularName", ""}, {"namespaced", k.namespaced},
                           {"kind", k.kind}, {"verbs", Json::array({"get", "patch", "update"})}});
  }
  if (resources.empty()) return builtinDoc;
  if (!builtinDoc)
    builtinDoc = Json{{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", groupVersion},
                      {"resources", Json::array()}};
  for (Json& r : resources) (*builtinDoc)["resources"].push_back(std::move(r));
  return builtinDoc;
}

std::vector<std::string> CustomResources::unknownFields(const CustomKind& kind, const Json& object) {
  if (isCrd(kind)) return {};  // the CRD type's own fields are not checked (as other built-in specs)
  return cache::unknownFields(kind.schema, object);
}

}  // namespace tessera::cache::http
