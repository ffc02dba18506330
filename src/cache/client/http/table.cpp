#include "table.h"

#include <exception>
#include <functional>
#include <vector>

#include "discovery.h"

namespace tessera::cache::http {

namespace {

using Cell = std::function<Json(const Json& object, api::Time now)>;

struct Column {
  PrinterColumn def;
  Cell cell;
};

const Json& at(const Json& j, std::initializer_list<const char*> path) {
  static const Json null;
  const Json* cur = &j;
  for (const char* p : path) {
    if (!cur->is_object()) return null;
    auto it = cur->find(p);
    if (it == cur->end()) return null;
    cur = &*it;
  }
  return *cur;
}

std::string str(const Json& j, std::initializer_list<const char*> path, const std::string& fallback = {}) {
  const Json& v = at(j, path);
  return v.is_string() ? v.get<std::string>() : fallback;
}

Json age(const std::string& timestamp, api::Time now) {
  if (timestamp.empty()) return "<unknown>";
  auto t = api::parseTime(timestamp);
  if (!t.ok()) return "<invalid>";
  return humanDuration((now - *t).millis / 1000);
}

Column column(const char* name, const char* type, int priority, const char* description, Cell cell,
              const char* format = "") {
  return Column{PrinterColumn{name, type, format, description, "", priority}, std::move(cell)};
}

Column nameColumn() {
  return column("Name", "string", 0, "Name must be unique within a namespace.",
                [](const Json& o, api::Time) { return Json(str(o, {"metadata", "name"})); }, "name");
}

Column ageColumn() {
  return column("Age", "string", 0, "CreationTimestamp of the object.", [](const Json& o, api::Time now) {
    return age(str(o, {"metadata", "creationTimestamp"}), now);
  });
}

// ---- built-in kinds: the columns kube-apiserver prints ----

std::string podStatus(const Json& pod) {
  std::string reason = str(pod, {"status", "reason"}, str(pod, {"status", "phase"}, "Unknown"));
  for (const Json& cs : at(pod, {"status", "containerStatuses"})) {
    if (auto w = str(cs, {"state", "waiting", "reason"}); !w.empty()) reason = w;
    else if (auto t = str(cs, {"state", "terminated", "reason"}); !t.empty()) reason = t;
  }
  if (at(pod, {"metadata", "deletionTimestamp"}).is_string() && reason != "Succeeded" && reason != "Failed")
    reason = "Terminating";
  return reason;
}

std::vector<Column> podColumns() {
  return {nameColumn(),
          column("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic.",
                 [](const Json& o, api::Time) {
                   size_t ready = 0;
                   for (const Json& cs : at(o, {"status", "containerStatuses"}))
                     if (cs.value("ready", false)) ++ready;
                   const Json& containers = at(o, {"spec", "containers"});
                   return Json(std::to_string(ready) + "/" + std::to_string(containers.is_array() ? containers.size() : 0));
                 }),
          column("Status", "string", 0, "The aggregate status of the containers in this pod.",
                 [](const Json& o, api::Time) { return Json(podStatus(o)); }),
          column("Restarts", "string", 0, "The number of times the containers in this pod have been restarted.",
                 [](const Json& o, api::Time) {
                   int64_t n = 0;
                   for (const Json& cs : at(o, {"status", "containerStatuses"})) n += cs.value("restartCount", int64_t{0});
                   return Json(std::to_string(n));
                 }),
          ageColumn(),
          column("IP", "string", 1, "IP address allocated to the pod.",
                 [](const Json& o, api::Time) { return Json(str(o, {"status", "podIP"}, "<none>")); }),
          column("Node", "string", 1, "Name of the node where the pod is running.",
                 [](const Json& o, api::Time) { return Json(str(o, {"spec", "nodeName"}, "<none>")); }),
          column("Nominated Node", "string", 1, "Name of the node nominated for the pod.",
                 [](const Json& o, api::Time) { return Json(str(o, {"status", "nominatedNodeName"}, "<none>")); })};
}

std::vector<Column> nodeColumns() {
  return {nameColumn(),
          column("Status", "string", 0, "The status of the node",
                 [](const Json& o, api::Time) {
                   std::string s = "Unknown";
                   for (const Json& c : at(o, {"status", "conditions"}))
                     if (c.value("type", "") == "Ready") s = c.value("status", "") == "True" ? "Ready" : "NotReady";
                   if (at(o, {"spec", "unschedulable"}) == true) s += ",SchedulingDisabled";
                   return Json(s);
                 }),
          column("Roles", "string", 0, "The roles of the node",
                 [](const Json& o, api::Time) {
                   std::string roles;
                   const Json& labels = at(o, {"metadata", "labels"});
                   if (labels.is_object())
                     for (auto it = labels.begin(); it != labels.end(); ++it)
                       if (it.key().starts_with("node-role.kubernetes.io/"))
                         roles += (roles.empty() ? "" : ",") + it.key().substr(24);
                   return Json(roles.empty() ? "<none>" : roles);
                 }),
          ageColumn(),
          column("Version", "string", 0, "Kubelet Version reported by the node.",
                 [](const Json& o, api::Time) { return Json(str(o, {"status", "nodeInfo", "kubeletVersion"}, "")); })};
}

std::vector<Column> eventColumns() {
  return {column("Last Seen", "string", 0, "Time when the most recent occurrence of this event was recorded.",
                 [](const Json& o, api::Time now) {
                   std::string t = str(o, {"lastTimestamp"}, str(o, {"eventTime"}, str(o, {"firstTimestamp"})));
                   return age(t, now);
                 }),
          column("Type", "string", 0, "Type of this event (Normal, Warning).",
                 [](const Json& o, api::Time) { return Json(str(o, {"type"})); }),
          column("Reason", "string", 0, "Why the action was taken.",
                 [](const Json& o, api::Time) { return Json(str(o, {"reason"})); }),
          column("Object", "string", 0, "The object that this event is about.",
                 [](const Json& o, api::Time) {
                   std::string kind = str(o, {"involvedObject", "kind"});
                   for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                   return Json(kind + "/" + str(o, {"involvedObject", "name"}));
                 }),
          column("Message", "string", 0, "A human-readable description of the status of this operation.",
                 [](const Json& o, api::Time) { return Json(str(o, {"message"})); }),
          column("Source", "string", 1, "The component reporting this event.",
                 [](const Json& o, api::Time) {
                   return Json(str(o, {"source", "component"}, str(o, {"reportingComponent"})));
                 }),
          column("Count", "string", 1, "The number of times this event has occurred.",
                 [](const Json& o, api::Time) { return Json(std::to_string(o.value("count", int64_t{1}))); }),
          column("Name", "string", 1, "The name of the event.",
                 [](const Json& o, api::Time) { return Json(str(o, {"metadata", "name"})); })};
}

std::vector<Column> builtinColumns(api::Kind kind) {
  switch (kind) {
    case api::Kind::Pod: return podColumns();
    case api::Kind::Node: return nodeColumns();
    case api::Kind::Event: return eventColumns();
    case api::Kind::Namespace:
      return {nameColumn(),
              column("Status", "string", 0, "The status of the namespace",
                     [](const Json& o, api::Time) { return Json(str(o, {"status", "phase"}, "Active")); }),
              ageColumn()};
    case api::Kind::ConfigMap:
      return {nameColumn(), column("Data", "string", 0, "Number of data entries.",
                                   [](const Json& o, api::Time) {
                                     const Json& d = at(o, {"data"});
                                     return Json(std::to_string(d.is_object() ? d.size() : 0));
                                   }),
              ageColumn()};
    case api::Kind::PriorityClass:
      return {nameColumn(),
              column("Value", "integer", 0, "The priority value.",
                     [](const Json& o, api::Time) { return at(o, {"value"}).is_number() ? at(o, {"value"}) : Json(0); }),
              column("Global-Default", "boolean", 0, "Whether this is the default priority class.",
                     [](const Json& o, api::Time) { return Json(at(o, {"globalDefault"}) == true); }),
              ageColumn()};
    case api::Kind::Lease:
      return {nameColumn(),
              column("Holder", "string", 0, "The holder of the lease.",
                     [](const Json& o, api::Time) { return Json(str(o, {"spec", "holderIdentity"}, "")); }),
              ageColumn()};
    case api::Kind::Job:
      return {nameColumn(),
              column("Status", "string", 0, "Status of the job.",
                     [](const Json& o, api::Time) {
                       std::string s = "Running";
                       for (const Json& c : at(o, {"status", "conditions"}))
                         if (c.value("status", "") == "True" && (c.value("type", "") == "Complete" || c.value("type", "") == "Failed"))
                           s = c.value("type", "");
                       return Json(s);
                     }),
              column("Completions", "string", 0, "The completed pods of the desired ones.",
                     [](const Json& o, api::Time) {
                       const Json& want = at(o, {"spec", "completions"});
                       return Json(std::to_string(at(o, {"status", "succeeded"}).is_number() ? at(o, {"status", "succeeded"}).get<int64_t>() : 0) +
                                   "/" + (want.is_number() ? std::to_string(want.get<int64_t>()) : std::string("1")));
                     }),
              ageColumn()};
    default: return {nameColumn(), ageColumn()};
  }
}

// ---- CRD columns: additionalPrinterColumns with the JSONPath subset CRDs use ----

/// `.a.b\.c[*].d` -> the values found (several through [*]).
void evalPath(const Json& node, std::string_view path, std::vector<const Json*>& out) {
  if (path.empty()) {
    out.push_back(&node);
    return;
  }
  if (path.starts_with("[*]")) {
    if (node.is_array())
      for (const Json& e : node) evalPath(e, path.substr(3), out);
    return;
  }
  if (path.front() == '[') {
    const size_t close = path.find(']');
    if (close == std::string_view::npos || !node.is_array()) return;
    try {
      const size_t i = std::stoul(std::string(path.substr(1, close - 1)));
      if (i < node.size()) evalPath(node[i], path.substr(close + 1), out);
    } catch (const std::exception&) {
    }
    return;
  }
  if (path.front() != '.') return;
  path.remove_prefix(1);
  std::string field;
  size_t i = 0;
  for (; i < path.size() && path[i] != '.' && path[i] != '['; ++i) {
    if (path[i] == '\\' && i + 1 < path.size()) ++i;
    field.push_back(path[i]);
  }
  if (!node.is_object()) return;
  auto it = node.find(field);
  if (it != node.end()) evalPath(*it, path.substr(i), out);
}

Column crdColumn(const PrinterColumn& def) {
  return Column{def, [def](const Json& o, api::Time now) -> Json {
                  std::vector<const Json*> found;
                  evalPath(o, def.jsonPath, found);
                  if (found.empty() || (found.size() == 1 && found[0]->is_null())) return nullptr;
                  if (def.type == "date" && found[0]->is_string()) return age(found[0]->get<std::string>(), now);
                  if (found.size() == 1 && (def.type == "integer" || def.type == "number" || def.type == "boolean"))
                    return *found[0];
                  std::string text;
                  for (const Json* v : found) text += (text.empty() ? "" : ",") + (v->is_string() ? v->get<std::string>() : v->dump());
                  return text;
                }};
}

std::vector<Column> columnsOf(api::Kind kind) {
  const ResourceFacts& facts = resourceFacts(kind);
  if (!facts.schema.is_object()) return builtinColumns(kind);
  std::vector<Column> out{nameColumn()};
  for (const PrinterColumn& c : facts.printerColumns) out.push_back(crdColumn(c));
  if (facts.printerColumns.empty()) out.push_back(ageColumn());
  return out;
}

}  // namespace

std::string humanDuration(int64_t s) {
  if (s < -1) return "<invalid>";
  if (s < 0) return "0s";
  if (s < 120) return std::to_string(s) + "s";
  const int64_t m = s / 60, h = s / 3600, d = h / 24;
  auto pair = [](int64_t a, const char* ua, int64_t b, const char* ub) {
    return std::to_string(a) + ua + (b == 0 ? std::string() : std::to_string(b) + ub);
  };
  if (m < 10) return pair(m, "m", s % 60, "s");
  if (m < 180) return std::to_string(m) + "m";
  if (h < 8) return pair(h, "h", m % 60, "m");
  if (h < 48) return std::to_string(h) + "h";
  if (h < 24 * 8) return pair(d, "d", h % 24, "h");
  if (h < 24 * 365 * 2) return std::to_string(d) + "d";
  if (h < 24 * 365 * 8) return pair(d / 365, "y", d % 365, "d");
  return std::to_string(d / 365) + "y";
}

TableRequest tableRequest(std::string_view accept, std::string_view includeObject) {
  TableRequest r;
  // The first media type the client lists is the one it prefers; kubectl lists Table v1 first.
  const std::string_view first = accept.substr(0, accept.find(','));
  if (first.find("as=Table") != std::string_view::npos && first.find("g=meta.k8s.io") != std::string_view::npos)
    r.tableVersion = first.find("v=v1beta1") != std::string_view::npos ? "v1beta1" : "v1";
  if (includeObject == "None" || includeObject == "Object") r.includeObject = std::string(includeObject);
  return r;
}

namespace {

Json tableOf(const std::vector<Column>& columns, const Json& items, const TableRequest& request, api::Time now,
             const std::string& resourceVersion, const std::string& continueToken) {
  Json defs = Json::array();
  for (const Column& c : columns)
    defs.push_back({{"name", c.def.name}, {"type", c.def.type}, {"format", c.def.format},
                    {"description", c.def.description}, {"priority", c.def.priority}});
  Json rows = Json::array();
  for (const Json& o : items) {
    Json cells = Json::array();
    for (const Column& c : columns) cells.push_back(c.cell(o, now));
    Json row = {{"cells", std::move(cells)}};
    const std::string metaVersion = "meta.k8s.io/" + request.tableVersion;
    if (request.includeObject == "Object") row["object"] = o;
    else if (request.includeObject == "Metadata")
      row["object"] = {{"kind", "PartialObjectMetadata"}, {"apiVersion", metaVersion},
                       {"metadata", o.value("metadata", Json::object())}};
    rows.push_back(std::move(row));
  }
  Json meta = Json::object();
  if (!resourceVersion.empty()) meta["resourceVersion"] = resourceVersion;
  if (!continueToken.empty()) meta["continue"] = continueToken;
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/" + request.tableVersion},
          {"metadata", meta},
          {"columnDefinitions", defs},
          {"rows", rows}};
}

}  // namespace

Json toTable(api::Kind kind, const Json& items, const TableRequest& request, api::Time now,
             const std::string& resourceVersion, const std::string& continueToken) {
  return tableOf(columnsOf(kind), items, request, now, resourceVersion, continueToken);
}

Json toTable(const std::vector<PrinterColumn>& printerColumns, const Json& items, const TableRequest& request,
             api::Time now, const std::string& resourceVersion, const std::string& continueToken) {
  std::vector<Column> columns{nameColumn()};
  for (const PrinterColumn& c : printerColumns) columns.push_back(crdColumn(c));
  if (printerColumns.empty()) columns.push_back(ageColumn());
  return tableOf(columns, items, request, now, resourceVersion, continueToken);
}

}  // namespace tessera::cache::http
