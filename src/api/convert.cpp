// JSON -> api objects: the entry points of tessera/api/convert.h and the object parts every kind
// shares (metadata, conditions, resource lists). The kinds' own fields are read in convert_core.cpp
// and convert_scheduling.cpp, all through JsonReader (json_reader.h), so errors read
// "<Kind> <ns>/<name>: <field path>: <problem>". A try/catch at each entry point is a last line of
// defence against an exception slipping past the reader's type checks.
#include "tessera/api/convert.h"

#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "converters.h"
#include "tessera/api/quantity.h"

namespace tessera::api {

using nlohmann::json;

// ---- shared object parts ----

Status readObjectMeta(const JsonReader& object, ObjectMeta& m) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader md, object.object("metadata"));
  if (!md) return {};
  TESSERA_TRY(md.read("name", m.name));
  TESSERA_TRY(md.read("namespace", m.namespace_));
  TESSERA_TRY(md.read("generateName", m.generateName));
  TESSERA_TRY(md.read("uid", m.uid));
  TESSERA_TRY(md.read("resourceVersion", m.resourceVersion));
  TESSERA_TRY(md.read("labels", m.labels));
  TESSERA_TRY(md.read("annotations", m.annotations));
  std::optional<Time> created;
  TESSERA_TRY(md.read("creationTimestamp", created));
  m.creationTimestamp = created.value_or(Time{0});
  TESSERA_TRY(md.read("deletionTimestamp", m.deletionTimestamp));
  TESSERA_TRY(md.read("deletionGracePeriodSeconds", m.deletionGracePeriodSeconds));
  return md.forEachObject("ownerReferences", [&](const JsonReader& o) -> Status {
    OwnerReference r;
    TESSERA_TRY(o.read("apiVersion", r.apiVersion));
    TESSERA_TRY(o.read("kind", r.kind));
    TESSERA_TRY(o.read("name", r.name));
    TESSERA_TRY(o.read("uid", r.uid));
    TESSERA_TRY(o.read("controller", r.controller));
    m.ownerReferences.push_back(std::move(r));
    return {};
  });
}

Status readConditions(const JsonReader& parent, std::string_view key, std::vector<Condition>& out) {
  return parent.forEachObject(key, [&](const JsonReader& e) -> Status {
    Condition cond;
    TESSERA_TRY(e.read("type", cond.type));
    TESSERA_TRY(e.read("status", cond.status));
    TESSERA_TRY(e.read("reason", cond.reason));
    TESSERA_TRY(e.read("message", cond.message));
    TESSERA_TRY(e.read("lastTransitionTime", cond.lastTransitionTime));
    out.push_back(std::move(cond));
    return {};
  });
}

Status readResourceList(const JsonReader& parent, std::string_view key, Resources& out, std::optional<int64_t>* pods) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader list, parent.object(key));
  return list.forEachMember([&](const JsonReader& entry) -> Status {
    const std::string_view name = entry.key();
    TESSERA_ASSIGN_OR_RETURN(const int64_t amount, entry.quantity(isMilliResource(name)));
    if (amount < 0) return entry.error("negative quantity " + quote(entry.quantityText().value()));
    if (name == kResourcePods) {
      if (pods) *pods = amount;
    } else {
      out.set(name, amount);
    }
    return {};
  });
}

Result<TaintEffect> taintEffect(const JsonReader& field, const std::string& text) {
  if (text == "NoSchedule") return TaintEffect::NoSchedule;
  if (text == "PreferNoSchedule") return TaintEffect::PreferNoSchedule;
  if (text == "NoExecute") return TaintEffect::NoExecute;
  return field.error("unknown effect " + quote(text) + " (want NoSchedule, PreferNoSchedule or NoExecute)");
}

// ---- entry points ----

namespace {

/// Checks that the object is a JSON object and, when it names a kind, that it is `kind`.
Status checkKind(const JsonReader& object, std::string_view kind) {
  if (!object.json().is_object()) return object.typeError("an object");
  const JsonReader k = object.member("kind");
  if (k && (!k.json().is_string() || k.json().get_ref<const std::string&>() != kind))
    return k.error("expected " + std::string(kind) + ", got " + k.json().dump());
  return {};
}

/// Describes the object, checks its kind, reads metadata and then the kind's body (when given).
/// Turns any exception that slipped past the reader's type checks into an error.
template <class T>
Result<T> convertObject(const json& j, std::string_view kind, Status (*readBody)(const JsonReader&, T&)) {
  try {
    const std::string object = describeJson(j, kind);
    const JsonReader root(j, object);
    TESSERA_TRY(checkKind(root, kind));
    T out;
    TESSERA_TRY(readObjectMeta(root, out.meta));
    if (readBody) TESSERA_TRY(readBody(root, out));
    return out;
  } catch (const std::exception& e) {
    return makeError(describeJson(j, kind) + ": " + e.what(), 422);
  }
}

}  // namespace

Result<Pod> podFromJson(const json& j) { return convertObject<Pod>(j, "Pod", readPodBody); }
Result<Node> nodeFromJson(const json& j) { return convertObject<Node>(j, "Node", readNodeBody); }
Result<PodGroup> podGroupFromJson(const json& j) { return convertObject<PodGroup>(j, "PodGroup", readPodGroupBody); }
Result<PodGroup> foreignPodGroupFromJson(Kind kind, const json& j) {
  if (kind == Kind::VolcanoPodGroup) return convertObject<PodGroup>(j, "PodGroup", readVolcanoPodGroupBody);
  if (kind == Kind::SchedulerPluginsPodGroup)
    return convertObject<PodGroup>(j, "PodGroup", readSchedulerPluginsPodGroupBody);
  return podGroupFromJson(j);
}
Result<Queue> queueFromJson(const json& j) { return convertObject<Queue>(j, "Queue", readQueueBody); }
Result<Topology> topologyFromJson(const json& j) { return convertObject<Topology>(j, "Topology", readTopologyBody); }
Result<PriorityClass> priorityClassFromJson(const json& j) {
  return convertObject<PriorityClass>(j, "PriorityClass", readPriorityClassBody);
}
Result<Namespace> namespaceFromJson(const json& j) { return convertObject<Namespace>(j, "Namespace", nullptr); }
Result<ConfigMap> configMapFromJson(const json& j) {
  return convertObject<ConfigMap>(j, "ConfigMap", readConfigMapBody);
}

Result<ObjectMeta> metaFromJson(const json& j) {
  try {
    const std::string object = describeJson(j, "");
    const JsonReader root(j, object);
    if (!j.is_object()) return root.typeError("an object");
    ObjectMeta m;
    TESSERA_TRY(readObjectMeta(root, m));
    return m;
  } catch (const std::exception& e) {
    return makeError(describeJson(j, "") + ": " + e.what(), 422);
  }
}

std::string describeObject(const json& j) {
  try {
    return describeJson(j, "");
  } catch (const std::exception&) {
    return "object <unnamed>";
  }
}

Result<Kind> kindOf(const json& j) {
  try {
    const std::string what = describeJson(j, "");
    if (!j.is_object()) return makeError(what + ": expected an object, got " + jsonTypeName(j), 422);
    const JsonReader root(j, what);
    const JsonReader av = root.member("apiVersion");
    const JsonReader k = root.member("kind");
    if (!k || !k.json().is_string() || k.json().get_ref<const std::string&>().empty()) return k.error("required");
    if (!av || !av.json().is_string() || av.json().get_ref<const std::string&>().empty()) return av.error("required");
    const std::string& kind = k.json().get_ref<const std::string&>();
    const std::string& apiVersion = av.json().get_ref<const std::string&>();
    auto found = kindFromApiVersion(apiVersion, kind);
    if (!found) return makeError(what + ": unknown kind " + quote(kind) + " (apiVersion " + apiVersion + ")", 422);
    return *found;
  } catch (const std::exception& e) {
    return makeError(std::string("object: ") + e.what(), 422);
  }
}

}  // namespace tessera::api
