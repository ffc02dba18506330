// JSON -> api objects. Every accessor checks the JSON type before reading, so nlohmann never throws on
// well-formed JSON values; a try/catch at each public entry point is a last line of defence. Errors read
// "<Kind> <ns>/<name>: <field path>: <problem>".
#include "tessera/api/convert.h"

#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/quantity.h"

namespace tessera::api {
namespace {

using nlohmann::json;

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string typeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    default: return "value";
  }
}

/// The member `key` of `j` when `j` is an object and the member is present and not null.
const json* member(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string stringMember(const json& j, std::string_view key) {
  const json* v = member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

/// Object description for error messages; `fallbackKind` when the JSON has no kind (list items).
std::string describe(const json& j, std::string_view fallbackKind) {
  std::string kind = stringMember(j, "kind");
  if (kind.empty()) kind = fallbackKind.empty() ? "object" : std::string(fallbackKind);
  const json* meta = member(j, "metadata");
  std::string name = meta ? stringMember(*meta, "name") : "";
  std::string ns = meta ? stringMember(*meta, "namespace") : "";
  if (name.empty()) name = "<unnamed>";
  return kind + " " + (ns.empty() ? name : ns + "/" + name);
}

std::string join(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  return std::string(a) + "." + std::string(b);
}
std::string index(std::string_view a, size_t i) { return std::string(a) + "[" + std::to_string(i) + "]"; }

/// Conversion context: builds errors naming the object and the field.
class Ctx {
 public:
  explicit Ctx(std::string object) : object_(std::move(object)) {}
  Error err(std::string_view field, std::string_view problem) const {
    return makeError(object_ + ": " + std::string(field) + ": " + std::string(problem), 422);
  }
  Error typeErr(std::string_view field, std::string_view want, const json& got) const {
    return err(field, "expected " + std::string(want) + ", got " + typeName(got));
  }

 private:
  std::string object_;
};

#define TRY(expr)                        \
  do {                                   \
    Status status_ = (expr);             \
    if (!status_) return status_.error(); \
  } while (0)

// ---- scalar readers: `path` is the full field path of j[key]; absent (or null) leaves `out` alone ----

Status readString(const Ctx& c, const json& j, std::string_view key, std::string_view path, std::string& out) {
  const json* v = member(j, key);
  if (!v) return {};
  if (!v->is_string()) return c.typeErr(path, "a string", *v);
  out = v->get<std::string>();
  return {};
}

Status readBool(const Ctx& c, const json& j, std::string_view key, std::string_view path, bool& out) {
  const json* v = member(j, key);
  if (!v) return {};
  if (!v->is_boolean()) return c.typeErr(path, "a boolean", *v);
  out = v->get<bool>();
  return {};
}

Status intValue(const Ctx& c, const json& v, std::string_view path, int64_t lo, int64_t hi, int64_t& out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return c.err(path, "value " + std::to_string(u) + " out of range");
    out = static_cast<int64_t>(u);
    return {};
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return c.err(path, "value " + std::to_string(i) + " out of range");
    out = i;
    return {};
  }
  if (v.is_number_float()) return c.err(path, "expected an integer, got " + v.dump());
  return c.typeErr(path, "an integer", v);
}

Status readInt64(const Ctx& c, const json& j, std::string_view key, std::string_view path, int64_t& out) {
  const json* v = member(j, key);
  if (!v) return {};
  return intValue(c, *v, path, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), out);
}

Status readInt32(const Ctx& c, const json& j, std::string_view key, std::string_view path, int32_t& out) {
  const json* v = member(j, key);
  if (!v) return {};
  int64_t x = 0;
  TRY(intValue(c, *v, path, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), x));
  out = static_cast<int32_t>(x);
  return {};
}

Status readOptInt64(const Ctx& c, const json& j, std::string_view key, std::string_view path,
                    std::optional<int64_t>& out) {
  const json* v = member(j, key);
  if (!v) return {};
  int64_t x = 0;
  TRY(readInt64(c, j, key, path, x));
  out = x;
  return {};
}

Status readTime(const Ctx& c, const json& j, std::string_view key, std::string_view path, std::optional<Time>& out) {
  const json* v = member(j, key);
  if (!v) return {};
  if (!v->is_string()) return c.typeErr(path, "an RFC 3339 time string", *v);
  auto t = parseTime(v->get_ref<const std::string&>());
  if (!t) return c.err(path, t.error().message);
  out = *t;
  return {};
}

Status readDuration(const Ctx& c, const json& j, std::string_view key, std::string_view path,
                    std::optional<Duration>& out) {
  const json* v = member(j, key);
  if (!v) return {};
  if (!v->is_string()) return c.typeErr(path, "a duration string", *v);
  auto d = parseDuration(v->get_ref<const std::string&>());
  if (!d) return c.err(path, d.error().message);
  out = *d;
  return {};
}

/// Map of string to string; a non-string value is an error naming its key.
Status readStringMap(const Ctx& c, const json& j, std::string_view key, std::string_view path, StringMap& out) {
  const json* v = member(j, key);
  if (!v) return {};
  if (!v->is_object()) return c.typeErr(path, "a map of strings", *v);
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string()) return c.typeErr(std::string(path) + "[" + quote(k) + "]", "a string", val);
    out[k] = val.get<std::string>();
  }
  return {};
}

/// Array member; absent leaves `out` null. A non-array is an error.
Status readArray(const Ctx& c, const json& j, std::string_view key, std::string_view path, const json*& out) {
  out = member(j, key);
  if (out && !out->is_array()) return c.typeErr(path, "a list", *out);
  return {};
}

/// Object member; absent leaves `out` null.
Status readObject(const Ctx& c, const json& j, std::string_view key, std::string_view path, const json*& out) {
  out = member(j, key);
  if (out && !out->is_object()) return c.typeErr(path, "an object", *out);
  return {};
}

/// Quantity text of a JSON value: strings as written, numbers as their decimal text.
Result<std::string> quantityText(const Ctx& c, const json& v, std::string_view path) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) return v.dump();  // shortest round-trip text ("0.5", "1e+30"); NaN dumps as null
  return c.typeErr(path, "a quantity (string or number)", v);
}

Result<int64_t> quantity(const Ctx& c, const json& v, std::string_view path, bool milli) {
  auto text = quantityText(c, v, path);
  if (!text) return text.error();
  auto q = milli ? parseQuantityMilli(*text) : parseQuantityValue(*text);
  if (!q) return c.err(path, q.error().message);
  return *q;
}

/// Kubernetes' IsExtendedResourceName, simplified: domain-prefixed and not kubernetes.io/ or requests.*.
bool isExtendedResource(std::string_view name) {
  return name.find('/') != std::string_view::npos && name.find("kubernetes.io/") == std::string_view::npos &&
         name.substr(0, 9) != "requests.";
}

/// A resource list (requests, limits, capacity, ...) into Resources; negatives are errors.
/// `pods` (when non-null) receives the "pods" entry, which Resources does not hold.
Status readResourceList(const Ctx& c, const json& j, std::string_view key, std::string_view path, Resources& out,
                        std::optional<int64_t>* pods = nullptr) {
  const json* list = nullptr;
  TRY(readObject(c, j, key, path, list));
  if (!list) return {};
  for (const auto& [name, v] : list->items()) {
    const std::string field = join(path, name);
    auto amount = quantity(c, v, field, isMilliResource(name));
    if (!amount) return amount.error();
    if (*amount < 0) return c.err(field, "negative quantity " + quote(quantityText(c, v, field).value()));
    if (name == kResourcePods) {
      if (pods) *pods = *amount;
      continue;
    }
    out.set(name, *amount);
  }
  return {};
}

// ---- metadata ----

Status readMeta(const Ctx& c, const json& j, ObjectMeta& m) {
  const json* meta = nullptr;
  TRY(readObject(c, j, "metadata", "metadata", meta));
  if (!meta) return {};
  const json& md = *meta;
  TRY(readString(c, md, "name", "metadata.name", m.name));
  TRY(readString(c, md, "namespace", "metadata.namespace", m.namespace_));
  TRY(readString(c, md, "generateName", "metadata.generateName", m.generateName));
  TRY(readString(c, md, "uid", "metadata.uid", m.uid));
  TRY(readString(c, md, "resourceVersion", "metadata.resourceVersion", m.resourceVersion));
  TRY(readStringMap(c, md, "labels", "metadata.labels", m.labels));
  TRY(readStringMap(c, md, "annotations", "metadata.annotations", m.annotations));
  std::optional<Time> created;
  TRY(readTime(c, md, "creationTimestamp", "metadata.creationTimestamp", created));
  m.creationTimestamp = created.value_or(Time{0});
  TRY(readTime(c, md, "deletionTimestamp", "metadata.deletionTimestamp", m.deletionTimestamp));
  TRY(readOptInt64(c, md, "deletionGracePeriodSeconds", "metadata.deletionGracePeriodSeconds",
                   m.deletionGracePeriodSeconds));
  const json* owners = nullptr;
  TRY(readArray(c, md, "ownerReferences", "metadata.ownerReferences", owners));
  if (owners) {
    for (size_t i = 0; i < owners->size(); ++i) {
      const json& o = (*owners)[i];
      const std::string p = index("metadata.ownerReferences", i);
      if (!o.is_object()) return c.typeErr(p, "an object", o);
      OwnerReference r;
      TRY(readString(c, o, "apiVersion", join(p, "apiVersion"), r.apiVersion));
      TRY(readString(c, o, "kind", join(p, "kind"), r.kind));
      TRY(readString(c, o, "name", join(p, "name"), r.name));
      TRY(readString(c, o, "uid", join(p, "uid"), r.uid));
      TRY(readBool(c, o, "controller", join(p, "controller"), r.controller));
      m.ownerReferences.push_back(std::move(r));
    }
  }
  return {};
}

/// Checks that j is an object and, when it names a kind, that it is `kind`.
Status checkKind(const Ctx& c, const json& j, std::string_view kind) {
  if (!j.is_object()) return c.err("(root)", "expected an object, got " + typeName(j));
  const json* k = member(j, "kind");
  if (k && (!k->is_string() || k->get_ref<const std::string&>() != kind))
    return c.err("kind", "expected " + std::string(kind) + ", got " + k->dump());
  return {};
}

Status readConditions(const Ctx& c, const json& j, std::string_view key, std::string_view path,
                      std::vector<Condition>& out) {
  const json* arr = nullptr;
  TRY(readArray(c, j, key, path, arr));
  if (!arr) return {};
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& e = (*arr)[i];
    const std::string p = index(path, i);
    if (!e.is_object()) return c.typeErr(p, "an object", e);
    Condition cond;
    TRY(readString(c, e, "type", join(p, "type"), cond.type));
    TRY(readString(c, e, "status", join(p, "status"), cond.status));
    TRY(readString(c, e, "reason", join(p, "reason"), cond.reason));
    TRY(readString(c, e, "message", join(p, "message"), cond.message));
    TRY(readTime(c, e, "lastTransitionTime", join(p, "lastTransitionTime"), cond.lastTransitionTime));
    out.push_back(std::move(cond));
  }
  return {};
}

Result<TaintEffect> taintEffect(const Ctx& c, const std::string& s, std::string_view path) {
  if (s == "NoSchedule") return TaintEffect::NoSchedule;
  if (s == "PreferNoSchedule") return TaintEffect::PreferNoSchedule;
  if (s == "NoExecute") return TaintEffect::NoExecute;
  return c.err(path, "unknown effect " + quote(s) + " (want NoSchedule, PreferNoSchedule or NoExecute)");
}

// ---- Pod ----

Status readSelectorRequirements(const Ctx& c, const json& term, std::string_view key, std::string_view path,
                                std::vector<NodeSelectorRequirement>& out) {
  const json* arr = nullptr;
  TRY(readArray(c, term, key, path, arr));
  if (!arr) return {};
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& e = (*arr)[i];
    const std::string p = index(path, i);
    if (!e.is_object()) return c.typeErr(p, "an object", e);
    NodeSelectorRequirement r;
    TRY(readString(c, e, "key", join(p, "key"), r.key));
    std::string op;
    TRY(readString(c, e, "operator", join(p, "operator"), op));
    if (op == "In") r.op = SelectorOperator::In;
    else if (op == "NotIn") r.op = SelectorOperator::NotIn;
    else if (op == "Exists") r.op = SelectorOperator::Exists;
    else if (op == "DoesNotExist") r.op = SelectorOperator::DoesNotExist;
    else if (op == "Gt") r.op = SelectorOperator::Gt;
    else if (op == "Lt") r.op = SelectorOperator::Lt;
    else return c.err(join(p, "operator"), "unknown operator " + quote(op) + " (want In, NotIn, Exists, DoesNotExist, Gt or Lt)");
    const json* values = nullptr;
    TRY(readArray(c, e, "values", join(p, "values"), values));
    if (values) {
      for (size_t k = 0; k < values->size(); ++k) {
        const json& v = (*values)[k];
        if (!v.is_string()) return c.typeErr(index(join(p, "values"), k), "a string", v);
        r.values.push_back(v.get<std::string>());
      }
    }
    out.push_back(std::move(r));
  }
  return {};
}

Status readAffinity(const Ctx& c, const json& spec, Pod& pod) {
  const json* affinity = nullptr;
  const json* nodeAffinity = nullptr;
  const json* required = nullptr;
  const json* terms = nullptr;
  TRY(readObject(c, spec, "affinity", "spec.affinity", affinity));
  if (!affinity) return {};
  TRY(readObject(c, *affinity, "nodeAffinity", "spec.affinity.nodeAffinity", nodeAffinity));
  if (!nodeAffinity) return {};
  const std::string reqPath = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
  TRY(readObject(c, *nodeAffinity, "requiredDuringSchedulingIgnoredDuringExecution", reqPath, required));
  if (!required) return {};
  const std::string termsPath = reqPath + ".nodeSelectorTerms";
  TRY(readArray(c, *required, "nodeSelectorTerms", termsPath, terms));
  if (!terms) return {};
  for (size_t i = 0; i < terms->size(); ++i) {
    const json& t = (*terms)[i];
    const std::string p = index(termsPath, i);
    if (!t.is_object()) return c.typeErr(p, "an object", t);
    NodeSelectorTerm term;
    TRY(readSelectorRequirements(c, t, "matchExpressions", join(p, "matchExpressions"), term.matchExpressions));
    TRY(readSelectorRequirements(c, t, "matchFields", join(p, "matchFields"), term.matchFields));
    pod.requiredNodeAffinity.push_back(std::move(term));
  }
  return {};
}

Status readTolerations(const Ctx& c, const json& spec, Pod& pod) {
  const json* arr = nullptr;
  TRY(readArray(c, spec, "tolerations", "spec.tolerations", arr));
  if (!arr) return {};
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& e = (*arr)[i];
    const std::string p = index("spec.tolerations", i);
    if (!e.is_object()) return c.typeErr(p, "an object", e);
    Toleration t;
    TRY(readString(c, e, "key", join(p, "key"), t.key));
    std::string op;
    TRY(readString(c, e, "operator", join(p, "operator"), op));
    if (op.empty() || op == "Equal") t.op = TolerationOperator::Equal;
    else if (op == "Exists") t.op = TolerationOperator::Exists;
    else return c.err(join(p, "operator"), "unknown operator " + quote(op) + " (want Equal or Exists)");
    TRY(readString(c, e, "value", join(p, "value"), t.value));
    std::string effect;
    TRY(readString(c, e, "effect", join(p, "effect"), effect));
    if (!effect.empty()) {
      auto eff = taintEffect(c, effect, join(p, "effect"));
      if (!eff) return eff.error();
      t.effect = *eff;
    }
    TRY(readOptInt64(c, e, "tolerationSeconds", join(p, "tolerationSeconds"), t.tolerationSeconds));
    pod.tolerations.push_back(std::move(t));
  }
  return {};
}

/// One container's effective requests: requests, with each absent request defaulted to its limit.
/// Extended resources must be whole numbers and, when both are given, request == limit.
Status containerRequests(const Ctx& c, const json& container, std::string_view path, Resources& out) {
  const json* res = nullptr;
  TRY(readObject(c, container, "resources", join(path, "resources"), res));
  if (!res) return {};
  const std::string resPath = join(path, "resources");
  const json* requests = nullptr;
  const json* limits = nullptr;
  TRY(readObject(c, *res, "requests", join(resPath, "requests"), requests));
  TRY(readObject(c, *res, "limits", join(resPath, "limits"), limits));
  // Parse limits first so requests can be compared against them.
  std::map<std::string, int64_t> limitMilli;
  auto parseEntry = [&](const std::string& name, const json& v, const std::string& field,
                        int64_t& milliOut) -> Status {
    auto text = quantityText(c, v, field);
    if (!text) return text.error();
    auto milli = parseQuantityMilli(*text);
    if (!milli) return c.err(field, milli.error().message);
    if (*milli < 0) return c.err(field, "negative quantity " + quote(*text));
    if (isExtendedResource(name) && *milli % 1000 != 0) {
      std::string hint = name == kResourceGpu ? " (use the gpu-fraction annotation to share a GPU)" : "";
      return c.err(field, "extended resource " + name + " must be a whole number, got " + quote(*text) + hint);
    }
    milliOut = *milli;
    return {};
  };
  std::map<std::string, int64_t> amounts;  // name -> milli
  if (limits) {
    for (const auto& [name, v] : limits->items()) {
      int64_t m = 0;
      TRY(parseEntry(name, v, join(join(resPath, "limits"), name), m));
      limitMilli[name] = m;
      amounts[name] = m;  // request defaults to the limit
    }
  }
  if (requests) {
    for (const auto& [name, v] : requests->items()) {
      const std::string field = join(join(resPath, "requests"), name);
      int64_t m = 0;
      TRY(parseEntry(name, v, field, m));
      auto lim = limitMilli.find(name);
      if (isExtendedResource(name) && lim != limitMilli.end() && lim->second != m)
        return c.err(field, "extended resource " + name + " request " + formatResourceAmount(kResourceGpu, m) +
                                " must equal its limit " + formatResourceAmount(kResourceGpu, lim->second));
      amounts[name] = m;
    }
  }
  for (const auto& [name, milli] : amounts) {
    if (isMilliResource(name)) {
      out.set(name, milli);
    } else {
      // Base units rounded up, as Quantity.Value() (milli is itself rounded up, so this is exact).
      out.set(name, milli / 1000 + (milli % 1000 != 0 ? 1 : 0));
    }
  }
  return {};
}

Status podRequests(const Ctx& c, const json& spec, Pod& pod) {
  const json* containers = nullptr;
  const json* inits = nullptr;
  TRY(readArray(c, spec, "containers", "spec.containers", containers));
  TRY(readArray(c, spec, "initContainers", "spec.initContainers", inits));
  Resources sum;
  if (containers) {
    for (size_t i = 0; i < containers->size(); ++i) {
      const json& ct = (*containers)[i];
      const std::string p = index("spec.containers", i);
      if (!ct.is_object()) return c.typeErr(p, "an object", ct);
      Resources r;
      TRY(containerRequests(c, ct, p, r));
      sum += r;
    }
  }
  // kube-scheduler's PodRequests: restartable (sidecar) init containers keep running, so they add to
  // the containers' sum and to every later init container's peak.
  Resources initPeak, sidecars;
  if (inits) {
    for (size_t i = 0; i < inits->size(); ++i) {
      const json& ct = (*inits)[i];
      const std::string p = index("spec.initContainers", i);
      if (!ct.is_object()) return c.typeErr(p, "an object", ct);
      Resources r;
      TRY(containerRequests(c, ct, p, r));
      std::string restartPolicy;
      TRY(readString(c, ct, "restartPolicy", join(p, "restartPolicy"), restartPolicy));
      if (restartPolicy == "Always") {
        sum += r;
        sidecars += r;
        initPeak.maxWith(sidecars);
      } else {
        initPeak.maxWith(r + sidecars);
      }
    }
  }
  sum.maxWith(initPeak);
  Resources overhead;
  TRY(readResourceList(c, spec, "overhead", "spec.overhead", overhead));
  sum += overhead;
  sum.normalize();
  pod.requests = std::move(sum);
  return {};
}

Status readHostPorts(const Ctx& c, const json& spec, Pod& pod) {
  const json* containers = member(spec, "containers");
  if (!containers || !containers->is_array()) return {};
  for (size_t i = 0; i < containers->size(); ++i) {
    const json& ct = (*containers)[i];
    const std::string p = index("spec.containers", i);
    const json* ports = nullptr;
    TRY(readArray(c, ct, "ports", join(p, "ports"), ports));
    if (!ports) continue;
    for (size_t k = 0; k < ports->size(); ++k) {
      const json& port = (*ports)[k];
      const std::string pp = index(join(p, "ports"), k);
      if (!port.is_object()) return c.typeErr(pp, "an object", port);
      int32_t hostPort = 0;
      TRY(readInt32(c, port, "hostPort", join(pp, "hostPort"), hostPort));
      if (hostPort <= 0) continue;
      if (hostPort > 65535) return c.err(join(pp, "hostPort"), "port " + std::to_string(hostPort) + " out of range");
      HostPort hp;
      hp.port = hostPort;
      TRY(readString(c, port, "protocol", join(pp, "protocol"), hp.protocol));
      if (hp.protocol.empty()) hp.protocol = "TCP";
      TRY(readString(c, port, "hostIP", join(pp, "hostIP"), hp.hostIP));
      pod.hostPorts.push_back(std::move(hp));
    }
  }
  return {};
}

Result<Pod> podFromJsonImpl(const json& j) {
  Ctx c(describe(j, "Pod"));
  TRY(checkKind(c, j, "Pod"));
  Pod pod;
  TRY(readMeta(c, j, pod.meta));
  const json* spec = nullptr;
  TRY(readObject(c, j, "spec", "spec", spec));
  if (spec) {
    const json& s = *spec;
    TRY(readString(c, s, "schedulerName", "spec.schedulerName", pod.schedulerName));
    TRY(readString(c, s, "nodeName", "spec.nodeName", pod.nodeName));
    TRY(readString(c, s, "priorityClassName", "spec.priorityClassName", pod.priorityClassName));
    if (member(s, "priority")) {
      int32_t prio = 0;
      TRY(readInt32(c, s, "priority", "spec.priority", prio));
      pod.priority = prio;
    }
    TRY(readStringMap(c, s, "nodeSelector", "spec.nodeSelector", pod.nodeSelector));
    TRY(readAffinity(c, s, pod));
    TRY(readTolerations(c, s, pod));
    TRY(podRequests(c, s, pod));
    TRY(readHostPorts(c, s, pod));
    TRY(readOptInt64(c, s, "terminationGracePeriodSeconds", "spec.terminationGracePeriodSeconds",
                     pod.terminationGracePeriodSeconds));
  }
  const json* status = nullptr;
  TRY(readObject(c, j, "status", "status", status));
  if (status) {
    std::string phase;
    TRY(readString(c, *status, "phase", "status.phase", phase));
    if (phase.empty() || phase == "Pending") pod.phase = PodPhase::Pending;
    else if (phase == "Running") pod.phase = PodPhase::Running;
    else if (phase == "Succeeded") pod.phase = PodPhase::Succeeded;
    else if (phase == "Failed") pod.phase = PodPhase::Failed;
    else if (phase == "Unknown") pod.phase = PodPhase::Unknown;
    else return c.err("status.phase", "unknown phase " + quote(phase));
    TRY(readTime(c, *status, "startTime", "status.startTime", pod.startTime));
    TRY(readConditions(c, *status, "conditions", "status.conditions", pod.conditions));
  }
  return pod;
}

// ---- Node ----

Result<Node> nodeFromJsonImpl(const json& j) {
  Ctx c(describe(j, "Node"));
  TRY(checkKind(c, j, "Node"));
  Node node;
  TRY(readMeta(c, j, node.meta));
  const json* spec = nullptr;
  TRY(readObject(c, j, "spec", "spec", spec));
  if (spec) {
    TRY(readBool(c, *spec, "unschedulable", "spec.unschedulable", node.unschedulable));
    const json* taints = nullptr;
    TRY(readArray(c, *spec, "taints", "spec.taints", taints));
    if (taints) {
      for (size_t i = 0; i < taints->size(); ++i) {
        const json& e = (*taints)[i];
        const std::string p = index("spec.taints", i);
        if (!e.is_object()) return c.typeErr(p, "an object", e);
        Taint t;
        TRY(readString(c, e, "key", join(p, "key"), t.key));
        TRY(readString(c, e, "value", join(p, "value"), t.value));
        std::string effect;
        TRY(readString(c, e, "effect", join(p, "effect"), effect));
        if (effect.empty()) return c.err(join(p, "effect"), "required");
        auto eff = taintEffect(c, effect, join(p, "effect"));
        if (!eff) return eff.error();
        t.effect = *eff;
        node.taints.push_back(std::move(t));
      }
    }
  }
  const json* status = nullptr;
  TRY(readObject(c, j, "status", "status", status));
  if (status) {
    std::optional<int64_t> capPods, allocPods;
    TRY(readResourceList(c, *status, "capacity", "status.capacity", node.capacity, &capPods));
    if (member(*status, "allocatable")) {
      TRY(readResourceList(c, *status, "allocatable", "status.allocatable", node.allocatable, &allocPods));
    } else {
      node.allocatable = node.capacity;
      allocPods = capPods;
    }
    node.allocatablePods = allocPods.value_or(110);
    node.capacity.normalize();
    node.allocatable.normalize();
    TRY(readConditions(c, *status, "conditions", "status.conditions", node.conditions));
    for (const auto& cond : node.conditions)
      if (cond.type == "Ready") node.ready = cond.status == "True";
  }
  return node;
}

// ---- PodGroup ----

Status readTopologyConstraint(const Ctx& c, const json& j, std::string_view path, TopologyConstraint& out) {
  const json* tc = nullptr;
  TRY(readObject(c, j, "topologyConstraint", path, tc));
  if (!tc) return {};
  TRY(readString(c, *tc, "topology", join(path, "topology"), out.topology));
  TRY(readString(c, *tc, "requiredTopologyLevel", join(path, "requiredTopologyLevel"), out.requiredTopologyLevel));
  TRY(readString(c, *tc, "preferredTopologyLevel", join(path, "preferredTopologyLevel"), out.preferredTopologyLevel));
  return {};
}

Result<PodGroup> podGroupFromJsonImpl(const json& j) {
  Ctx c(describe(j, "PodGroup"));
  TRY(checkKind(c, j, "PodGroup"));
  PodGroup pg;
  TRY(readMeta(c, j, pg.meta));
  const json* spec = nullptr;
  TRY(readObject(c, j, "spec", "spec", spec));
  if (spec) {
    const json& s = *spec;
    // Kept as given even when < 1: validation (with its own event) happens in the scheduler.
    TRY(readInt32(c, s, "minMember", "spec.minMember", pg.minMember));
    TRY(readString(c, s, "queue", "spec.queue", pg.queue));
    TRY(readString(c, s, "priorityClassName", "spec.priorityClassName", pg.priorityClassName));
    std::string pre;
    TRY(readString(c, s, "preemptibility", "spec.preemptibility", pre));
    if (pre.empty()) pg.preemptibility = Preemptibility::Unset;
    else if (pre == "preemptible") pg.preemptibility = Preemptibility::Preemptible;
    else if (pre == "non-preemptible") pg.preemptibility = Preemptibility::NonPreemptible;
    else return c.err("spec.preemptibility", "unknown value " + quote(pre) + " (want preemptible or non-preemptible)");
    TRY(readTopologyConstraint(c, s, "spec.topologyConstraint", pg.topologyConstraint));
    const json* subs = nullptr;
    TRY(readArray(c, s, "subGroups", "spec.subGroups", subs));
    if (subs) {
      for (size_t i = 0; i < subs->size(); ++i) {
        const json& e = (*subs)[i];
        const std::string p = index("spec.subGroups", i);
        if (!e.is_object()) return c.typeErr(p, "an object", e);
        SubGroup sg;
        TRY(readString(c, e, "name", join(p, "name"), sg.name));
        TRY(readInt32(c, e, "minMember", join(p, "minMember"), sg.minMember));
        TRY(readTopologyConstraint(c, e, join(p, "topologyConstraint"), sg.topologyConstraint));
        pg.subGroups.push_back(std::move(sg));
      }
    }
  }
  const json* status = nullptr;
  TRY(readObject(c, j, "status", "status", status));
  if (status) {
    const json& st = *status;
    TRY(readString(c, st, "phase", "status.phase", pg.status.phase));
    TRY(readInt32(c, st, "running", "status.running", pg.status.running));
    TRY(readInt32(c, st, "pending", "status.pending", pg.status.pending));
    TRY(readInt32(c, st, "succeeded", "status.succeeded", pg.status.succeeded));
    TRY(readInt32(c, st, "failed", "status.failed", pg.status.failed));
    TRY(readConditions(c, st, "conditions", "status.conditions", pg.status.conditions));
  }
  return pg;
}

// ---- Queue ----

/// One quota setting. "-1" (exactly) means unlimited and is kept as -1 even for milli resources.
Status readQueueAmount(const Ctx& c, const json& r, std::string_view key, std::string_view path, bool milli,
                       int64_t& out) {
  const json* v = member(r, key);
  if (!v) return {};
  auto text = quantityText(c, *v, path);
  if (!text) return text.error();
  auto exact = parseQuantityMilli(*text);
  if (!exact) {
    // Values too large for milli units may still fit in base units (memory in bytes).
    if (milli) return c.err(path, exact.error().message);
    auto value = parseQuantityValue(*text);
    if (!value) return c.err(path, value.error().message);
    out = *value;
    return {};
  }
  if (*exact == -1000) {
    out = -1;
    return {};
  }
  if (milli) {
    // Other negatives are kept for validation to report; keep them distinct from the -1 sentinel.
    out = *exact == -1 ? -2 : *exact;
  } else {
    auto value = parseQuantityValue(*text);
    if (!value) return c.err(path, value.error().message);
    out = *value == -1 ? -2 : *value;  // e.g. "-0.5" rounds away from zero to -1: not "unlimited"
  }
  return {};
}

Status readQueueResource(const Ctx& c, const json& v, std::string_view path, bool milli, QueueResource& out) {
  if (!v.is_object()) return c.typeErr(path, "an object", v);
  for (const auto& [k, _] : v.items()) {
    if (k != "quota" && k != "limit" && k != "overQuotaWeight")
      return c.err(join(path, k), "unknown field (want quota, limit or overQuotaWeight)");
  }
  TRY(readQueueAmount(c, v, "quota", join(path, "quota"), milli, out.quota));
  TRY(readQueueAmount(c, v, "limit", join(path, "limit"), milli, out.limit));
  const json* w = member(v, "overQuotaWeight");
  if (w) {
    auto weight = quantity(c, *w, join(path, "overQuotaWeight"), true);
    if (!weight) return weight.error();
    out.overQuotaWeightMilli = *weight;
  }
  return {};
}

Result<Queue> queueFromJsonImpl(const json& j) {
  Ctx c(describe(j, "Queue"));
  TRY(checkKind(c, j, "Queue"));
  Queue q;
  TRY(readMeta(c, j, q.meta));
  const json* spec = nullptr;
  TRY(readObject(c, j, "spec", "spec", spec));
  if (spec) {
    const json& s = *spec;
    TRY(readString(c, s, "parentQueue", "spec.parentQueue", q.parentQueue));
    TRY(readInt32(c, s, "priority", "spec.priority", q.priority));
    const json* res = nullptr;
    TRY(readObject(c, s, "resources", "spec.resources", res));
    if (res) {
      for (const auto& [name, v] : res->items()) {
        const std::string p = join("spec.resources", name);
        if (v.is_null()) continue;
        if (name == "gpu") TRY(readQueueResource(c, v, p, true, q.gpu));
        else if (name == "cpu") TRY(readQueueResource(c, v, p, true, q.cpu));
        else if (name == "memory") TRY(readQueueResource(c, v, p, false, q.memory));
        else return c.err(p, "unknown resource " + quote(name) + " (want gpu, cpu or memory)");
      }
    }
    TRY(readDuration(c, s, "preemptMinRuntime", "spec.preemptMinRuntime", q.preemptMinRuntime));
    TRY(readDuration(c, s, "reclaimMinRuntime", "spec.reclaimMinRuntime", q.reclaimMinRuntime));
  }
  const json* status = nullptr;
  TRY(readObject(c, j, "status", "status", status));
  if (status) {
    TRY(readResourceList(c, *status, "allocated", "status.allocated", q.status.allocated));
    TRY(readResourceList(c, *status, "requested", "status.requested", q.status.requested));
    TRY(readResourceList(c, *status, "fairShare", "status.fairShare", q.status.fairShare));
    TRY(readConditions(c, *status, "conditions", "status.conditions", q.status.conditions));
  }
  return q;
}

// ---- the rest ----

Result<Topology> topologyFromJsonImpl(const json& j) {
  Ctx c(describe(j, "Topology"));
  TRY(checkKind(c, j, "Topology"));
  Topology t;
  TRY(readMeta(c, j, t.meta));
  const json* spec = nullptr;
  TRY(readObject(c, j, "spec", "spec", spec));
  const json* levels = nullptr;
  if (spec) TRY(readArray(c, *spec, "levels", "spec.levels", levels));
  if (levels) {
    for (size_t i = 0; i < levels->size(); ++i) {
      const json& e = (*levels)[i];
      const std::string p = index("spec.levels", i);
      if (!e.is_object()) return c.typeErr(p, "an object", e);
      TopologyLevel level;
      TRY(readString(c, e, "nodeLabel", join(p, "nodeLabel"), level.nodeLabel));
      if (level.nodeLabel.empty()) return c.err(join(p, "nodeLabel"), "required");
      t.levels.push_back(std::move(level));
    }
  }
  return t;
}

Result<PriorityClass> priorityClassFromJsonImpl(const json& j) {
  Ctx c(describe(j, "PriorityClass"));
  TRY(checkKind(c, j, "PriorityClass"));
  PriorityClass pc;
  TRY(readMeta(c, j, pc.meta));
  if (!member(j, "value")) return c.err("value", "required");
  TRY(readInt32(c, j, "value", "value", pc.value));
  TRY(readBool(c, j, "globalDefault", "globalDefault", pc.globalDefault));
  TRY(readString(c, j, "preemptionPolicy", "preemptionPolicy", pc.preemptionPolicy));
  if (pc.preemptionPolicy.empty()) pc.preemptionPolicy = "PreemptLowerPriority";
  if (pc.preemptionPolicy != "PreemptLowerPriority" && pc.preemptionPolicy != "Never")
    return c.err("preemptionPolicy", "unknown value " + quote(pc.preemptionPolicy) + " (want PreemptLowerPriority or Never)");
  return pc;
}

Result<Namespace> namespaceFromJsonImpl(const json& j) {
  Ctx c(describe(j, "Namespace"));
  TRY(checkKind(c, j, "Namespace"));
  Namespace ns;
  TRY(readMeta(c, j, ns.meta));
  return ns;
}

Result<ConfigMap> configMapFromJsonImpl(const json& j) {
  Ctx c(describe(j, "ConfigMap"));
  TRY(checkKind(c, j, "ConfigMap"));
  ConfigMap cm;
  TRY(readMeta(c, j, cm.meta));
  TRY(readStringMap(c, j, "data", "data", cm.data));
  return cm;
}

Result<ObjectMeta> metaFromJsonImpl(const json& j) {
  Ctx c(describe(j, ""));
  if (!j.is_object()) return c.err("(root)", "expected an object, got " + typeName(j));
  ObjectMeta m;
  TRY(readMeta(c, j, m));
  return m;
}

/// Runs a conversion, turning any exception that slipped past the type checks into an error.
template <class F>
auto guarded(const json& j, std::string_view kind, F f) -> decltype(f(j)) {
  try {
    return f(j);
  } catch (const std::exception& e) {
    return makeError(describe(j, kind) + ": " + e.what(), 422);
  }
}

}  // namespace

std::string describeObject(const json& j) {
  try {
    return describe(j, "");
  } catch (const std::exception&) {
    return "object <unnamed>";
  }
}

Result<Pod> podFromJson(const json& j) { return guarded(j, "Pod", podFromJsonImpl); }
Result<Node> nodeFromJson(const json& j) { return guarded(j, "Node", nodeFromJsonImpl); }
Result<PodGroup> podGroupFromJson(const json& j) { return guarded(j, "PodGroup", podGroupFromJsonImpl); }
Result<Queue> queueFromJson(const json& j) { return guarded(j, "Queue", queueFromJsonImpl); }
Result<Topology> topologyFromJson(const json& j) { return guarded(j, "Topology", topologyFromJsonImpl); }
Result<PriorityClass> priorityClassFromJson(const json& j) {
  return guarded(j, "PriorityClass", priorityClassFromJsonImpl);
}
Result<Namespace> namespaceFromJson(const json& j) { return guarded(j, "Namespace", namespaceFromJsonImpl); }
Result<ConfigMap> configMapFromJson(const json& j) { return guarded(j, "ConfigMap", configMapFromJsonImpl); }
Result<ObjectMeta> metaFromJson(const json& j) { return guarded(j, "", metaFromJsonImpl); }

Result<Kind> kindOf(const json& j) {
  try {
    const std::string what = describe(j, "");
    if (!j.is_object()) return makeError(what + ": expected an object, got " + typeName(j), 422);
    const json* av = member(j, "apiVersion");
    const json* k = member(j, "kind");
    if (!k || !k->is_string() || k->get_ref<const std::string&>().empty())
      return makeError(what + ": kind: required", 422);
    if (!av || !av->is_string() || av->get_ref<const std::string&>().empty())
      return makeError(what + ": apiVersion: required", 422);
    const std::string& kind = k->get_ref<const std::string&>();
    const std::string& apiVersion = av->get_ref<const std::string&>();
    auto found = kindFromApiVersion(apiVersion, kind);
    if (!found) return makeError(what + ": unknown kind " + quote(kind) + " (apiVersion " + apiVersion + ")", 422);
    return *found;
  } catch (const std::exception& e) {
    return makeError(std::string("object: ") + e.what(), 422);
  }
}

}  // namespace tessera::api
