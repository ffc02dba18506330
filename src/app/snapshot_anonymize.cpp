// `tessera snapshot --anonymize`: deterministic, consistent renames over a captured object set.
// Two passes over the same traversal: the first collects every name by category, the second
// replaces each with its number in the sorted order of the originals (so ties that a plugin breaks
// by name break the same way in the replay).
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessera/api/convert.h"
#include "tessera/api/objects.h"
#include "tessera/app/snapshot.h"
#include "tessera/grouper/grouper.h"
#include "snapshot_internal.h"

namespace tessera::app {

namespace {

using Json = nlohmann::json;

enum class Cat { Namespace, Node, Pod, PodGroup, Queue, Topology, Priority, Workload, Value };

const char* prefixOf(Cat c) {
  switch (c) {
    case Cat::Namespace: return "ns";
    case Cat::Node: return "node";
    case Cat::Pod: return "pod";
    case Cat::PodGroup: return "pg";
    case Cat::Queue: return "queue";
    case Cat::Topology: return "topology";
    case Cat::Priority: return "priority";
    case Cat::Workload: return "wl";
    case Cat::Value: return "v";
  }
  return "x";
}

/// Names that mean something by themselves: kept.
bool reserved(Cat c, const std::string& name) {
  if (name.empty()) return true;
  switch (c) {
    case Cat::Namespace:
      return name == "default" || name.rfind("kube-", 0) == 0 || name == api::keys::kReservationNamespace;
    case Cat::Queue: return name == api::keys::kDefaultQueue;
    case Cat::Priority: return name.rfind("system-", 0) == 0;
    default: return false;
  }
}

using Visit = std::function<void(Cat, std::string&)>;

void visitString(Json& parent, const char* key, Cat c, const Visit& f) {
  if (!parent.is_object() || !parent.contains(key) || !parent[key].is_string()) return;
  std::string s = parent[key].get<std::string>();
  f(c, s);
  parent[key] = s;
}

/// A label of a pod, PodGroup, Namespace, Queue or workload: references by key, other values as
/// opaque values (renamed consistently, so selectors still match).
void visitLabels(Json& labels, const Visit& f) {
  if (!labels.is_object()) return;
  for (auto& [k, v] : labels.items()) {
    if (!v.is_string()) continue;
    std::string s = v.get<std::string>();
    if (k == api::keys::kQueueLabel || k == api::keys::kQueueLabelKai) f(Cat::Queue, s);
    else if (k == api::keys::kPodGroupLabelSchedulerPlugins) f(Cat::PodGroup, s);
    else if (k == "kubernetes.io/metadata.name") f(Cat::Namespace, s);
    else if (k.rfind("tessera.dev/", 0) == 0 || k.rfind("kai.scheduler/", 0) == 0) continue;  // read as they are
    else f(Cat::Value, s);
    v = s;
  }
}

void visitAnnotations(Json& ann, const Visit& f) {
  if (!ann.is_object()) return;
  visitString(ann, api::keys::kPodGroupAnnotation, Cat::PodGroup, f);
  visitString(ann, api::keys::kPodGroupAnnotationVolcano, Cat::PodGroup, f);
  visitString(ann, grouper::keys::kTopology, Cat::Topology, f);
  if (ann.contains(grouper::keys::kWorkloadAnnotation) && ann[grouper::keys::kWorkloadAnnotation].is_string()) {
    // "<apiVersion>/<Kind>/<name>": the name is the last segment.
    std::string s = ann[grouper::keys::kWorkloadAnnotation].get<std::string>();
    const size_t slash = s.rfind('/');
    std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
    f(Cat::Workload, name);
    ann[grouper::keys::kWorkloadAnnotation] = (slash == std::string::npos ? "" : s.substr(0, slash + 1)) + name;
  }
}

/// Node selector requirements naming nodes (hostname label, metadata.name field).
void visitNodeTerms(Json& terms, const Visit& f) {
  if (!terms.is_array()) return;
  for (auto& t : terms) {
    Json* term = &t;
    if (t.is_object() && t.contains("preference")) term = &t["preference"];  // preferred terms
    if (!term->is_object()) continue;
    for (const char* list : {"matchExpressions", "matchFields"}) {
      if (!term->contains(list) || !(*term)[list].is_array()) continue;
      for (auto& req : (*term)[list]) {
        if (!req.is_object()) continue;
        const std::string key = req.value("key", "");
        if (key != "kubernetes.io/hostname" && key != "metadata.name") continue;
        if (!req.contains("values") || !req["values"].is_array()) continue;
        for (auto& v : req["values"])
          if (v.is_string()) {
            std::string s = v.get<std::string>();
            f(Cat::Node, s);
            v = s;
          }
      }
    }
  }
}

/// Label selectors over pods (pod affinity and anti-affinity: Tessera does not read them, but
/// their values are the pods' label values): renamed as those are; `namespaces` as namespaces.
void visitPodSelectors(Json& j, const Visit& f) {
  if (j.is_array()) {
    for (auto& x : j) visitPodSelectors(x, f);
    return;
  }
  if (!j.is_object()) return;
  for (auto& [k, v] : j.items()) {
    if (k == "matchLabels") {
      visitLabels(v, f);
    } else if (k == "matchExpressions" && v.is_array()) {
      for (auto& req : v) {
        if (!req.is_object() || !req.contains("values") || !req["values"].is_array()) continue;
        Json labels = Json::object();  // as labels, so keys Tessera reads keep their meaning
        const std::string key = req.value("key", "");
        for (auto& value : req["values"]) {
          if (!value.is_string()) continue;
          labels[key] = value;
          visitLabels(labels, f);
          value = labels[key];
        }
      }
    } else if (k == "namespaces" && v.is_array()) {
      for (auto& ns : v)
        if (ns.is_string()) {
          std::string name = ns.get<std::string>();
          f(Cat::Namespace, name);
          ns = name;
        }
    } else if (v.is_object() || v.is_array()) {
      visitPodSelectors(v, f);
    }
  }
}

void visitPodSpec(Json& spec, const Visit& f) {
  if (!spec.is_object()) return;
  visitString(spec, "nodeName", Cat::Node, f);
  visitString(spec, "priorityClassName", Cat::Priority, f);
  if (spec.contains("nodeSelector") && spec["nodeSelector"].is_object())
    visitString(spec["nodeSelector"], "kubernetes.io/hostname", Cat::Node, f);
  if (spec.contains("affinity") && spec["affinity"].is_object())
    for (const char* k : {"podAffinity", "podAntiAffinity"})
      if (spec["affinity"].contains(k)) visitPodSelectors(spec["affinity"][k], f);
  if (spec.contains("topologySpreadConstraints")) visitPodSelectors(spec["topologySpreadConstraints"], f);
  if (spec.contains("affinity") && spec["affinity"].is_object() && spec["affinity"].contains("nodeAffinity")) {
    Json& na = spec["affinity"]["nodeAffinity"];
    if (na.is_object()) {
      if (na.contains("requiredDuringSchedulingIgnoredDuringExecution") &&
          na["requiredDuringSchedulingIgnoredDuringExecution"].is_object())
        visitNodeTerms(na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"], f);
      if (na.contains("preferredDuringSchedulingIgnoredDuringExecution"))
        visitNodeTerms(na["preferredDuringSchedulingIgnoredDuringExecution"], f);
    }
  }
}

void visitMeta(Json& meta, const Visit& f, bool nodeLabels) {
  if (!meta.is_object()) return;
  visitString(meta, "namespace", Cat::Namespace, f);
  if (meta.contains("labels")) {
    if (nodeLabels) {
      if (meta["labels"].is_object()) visitString(meta["labels"], "kubernetes.io/hostname", Cat::Node, f);
    } else {
      visitLabels(meta["labels"], f);
    }
  }
  if (meta.contains("annotations")) visitAnnotations(meta["annotations"], f);
  if (meta.contains("ownerReferences") && meta["ownerReferences"].is_array())
    for (auto& ref : meta["ownerReferences"])
      visitString(ref, "name", ref.is_object() && ref.value("kind", "") == "PodGroup" ? Cat::PodGroup : Cat::Workload,
                  f);
}

/// Pod templates and selectors anywhere inside a workload's spec.
void visitNested(Json& j, const Visit& f) {
  if (j.is_array()) {
    for (auto& x : j) visitNested(x, f);
    return;
  }
  if (!j.is_object()) return;
  if (j.contains("metadata") && j["metadata"].is_object()) visitMeta(j["metadata"], f, false);
  if (j.contains("containers")) visitPodSpec(j, f);
  if (j.contains("matchLabels")) visitLabels(j["matchLabels"], f);
  for (auto& [k, v] : j.items())
    if (k != "metadata" && k != "matchLabels" && (v.is_object() || v.is_array())) visitNested(v, f);
}

/// Every name and reference of one object.
void visitObject(Json& o, const Visit& f) {
  auto kind = api::kindOf(o);
  if (!kind.ok() || !o.contains("metadata")) return;
  Json& meta = o["metadata"];
  std::optional<Cat> self;
  switch (*kind) {
    case api::Kind::Namespace: self = Cat::Namespace; break;
    case api::Kind::Node: self = Cat::Node; break;
    case api::Kind::Pod: self = Cat::Pod; break;
    case api::Kind::PodGroup:
    case api::Kind::VolcanoPodGroup:
    case api::Kind::SchedulerPluginsPodGroup: self = Cat::PodGroup; break;
    case api::Kind::Queue: self = Cat::Queue; break;
    case api::Kind::Topology: self = Cat::Topology; break;
    case api::Kind::PriorityClass: self = Cat::Priority; break;
    default:
      if (grouper::isWorkloadKind(*kind)) self = Cat::Workload;
  }
  if (self) visitString(meta, "name", *self, f);
  visitMeta(meta, f, *kind == api::Kind::Node);
  Json* spec = o.contains("spec") && o["spec"].is_object() ? &o["spec"] : nullptr;
  switch (*kind) {
    case api::Kind::Pod:
      if (spec) visitPodSpec(*spec, f);
      if (o.contains("status")) visitString(o["status"], "nominatedNodeName", Cat::Node, f);
      break;
    case api::Kind::PodGroup:
    case api::Kind::VolcanoPodGroup:
    case api::Kind::SchedulerPluginsPodGroup:
      if (!spec) break;
      visitString(*spec, "queue", Cat::Queue, f);
      visitString(*spec, "priorityClassName", Cat::Priority, f);
      if (spec->contains("topologyConstraint"))
        visitString((*spec)["topologyConstraint"], "topology", Cat::Topology, f);
      break;
    case api::Kind::Queue:
      if (spec) visitString(*spec, "parentQueue", Cat::Queue, f);
      break;
    default:
      if (grouper::isWorkloadKind(*kind) && spec) visitNested(*spec, f);
  }
}

// ---------------------------------------------------------------- free text

bool keptAnnotation(const std::string& k) {
  return k == api::keys::kPodGroupAnnotation || k == api::keys::kPodGroupAnnotationVolcano ||
         k == api::keys::kGpuFraction || k == api::keys::kGpuMemory || k == api::keys::kGpuFractionNumDevices ||
         k.rfind("tessera.dev/", 0) == 0 || k.rfind("kai.scheduler/", 0) == 0 || k.rfind("sim.tessera.dev/", 0) == 0;
}

void dropAnnotations(Json& meta) {
  if (!meta.is_object() || !meta.contains("annotations") || !meta["annotations"].is_object()) return;
  Json kept = Json::object();
  for (auto& [k, v] : meta["annotations"].items())
    if (keptAnnotation(k)) kept[k] = v;
  if (kept.empty()) meta.erase("annotations");
  else meta["annotations"] = std::move(kept);
}

/// A container reduced to what scheduling reads: resources, host ports, the isolation wiring.
Json scrubContainer(const Json& c, size_t index) {
  std::string name = std::to_string(index);
  name.insert(name.begin(), 'c');  // (not "c" + to_string: GCC 12 warns -Wrestrict falsely)
  Json out = {{"name", name}, {"image", "image"}};
  if (!c.is_object()) return out;
  if (c.contains("resources")) out["resources"] = c["resources"];
  if (c.contains("ports") && c["ports"].is_array()) {
    Json ports = Json::array();
    for (const auto& p : c["ports"]) {
      if (!p.is_object()) continue;
      Json q = Json::object();
      for (const char* k : {"containerPort", "hostPort", "hostIP", "protocol"})
        if (p.contains(k)) q[k] = p[k];
      ports.push_back(std::move(q));
    }
    out["ports"] = std::move(ports);
  }
  if (c.contains("env") && c["env"].is_array())
    for (const auto& e : c["env"])
      if (e.is_object() && e.value("name", "") == api::keys::kIsolationRegionEnv) out["env"] = Json::array({e});
  return out;
}

void scrubContainers(Json& spec) {
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    Json out = Json::array();
    for (size_t i = 0; i < spec[list].size(); ++i) out.push_back(scrubContainer(spec[list][i], i));
    spec[list] = std::move(out);
  }
}

using snapshot_detail::keepOnly;

void dropMessages(Json& status) {
  if (!status.is_object()) return;
  status.erase("message");
  if (status.contains("conditions") && status["conditions"].is_array())
    for (auto& c : status["conditions"])
      if (c.is_object()) c.erase("message");
}

/// Pod spec fields kept: what scheduling reads.
const char* const kPodSpecKept[] = {"schedulerName",
                                    "nodeName",
                                    "priorityClassName",
                                    "priority",
                                    "preemptionPolicy",
                                    "nodeSelector",
                                    "affinity",
                                    "tolerations",
                                    "overhead",
                                    "restartPolicy",
                                    "terminationGracePeriodSeconds",
                                    "containers",
                                    "initContainers"};

void scrubPodSpec(Json& spec) {
  if (!spec.is_object()) return;
  Json kept = Json::object();
  for (const char* k : kPodSpecKept)
    if (spec.contains(k)) kept[k] = spec[k];
  scrubContainers(kept);
  spec = std::move(kept);
}

void scrubNested(Json& j) {
  if (j.is_array()) {
    for (auto& x : j) scrubNested(x);
    return;
  }
  if (!j.is_object()) return;
  if (j.contains("metadata")) dropAnnotations(j["metadata"]);
  if (j.contains("containers")) scrubPodSpec(j);
  for (auto& [k, v] : j.items())
    if (v.is_object() || v.is_array()) scrubNested(v);
}

void scrubObject(Json& o) {
  auto kind = api::kindOf(o);
  if (!kind.ok()) return;
  if (o.contains("metadata")) dropAnnotations(o["metadata"]);
  switch (*kind) {
    case api::Kind::Pod:
      if (o.contains("spec")) scrubPodSpec(o["spec"]);
      if (o.contains("status")) {
        keepOnly(o["status"], {"phase", "startTime", "conditions", "reason", "nominatedNodeName"});
        dropMessages(o["status"]);
      }
      break;
    case api::Kind::Node:
      if (o.contains("spec")) keepOnly(o["spec"], {"taints", "unschedulable"});
      if (o.contains("status")) {
        keepOnly(o["status"], {"capacity", "allocatable", "conditions", "phase"});
        dropMessages(o["status"]);
      }
      break;
    case api::Kind::PodGroup:
    case api::Kind::VolcanoPodGroup:
    case api::Kind::SchedulerPluginsPodGroup:
    case api::Kind::Queue:
      if (o.contains("status")) dropMessages(o["status"]);
      break;
    case api::Kind::PriorityClass: o.erase("description"); break;
    default:
      if (grouper::isWorkloadKind(*kind)) {
        o.erase("status");
        if (o.contains("spec")) scrubNested(o["spec"]);
      }
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::vector<Json> anonymizeObjects(const std::vector<Json>& objects) {
  std::vector<Json> out = objects;
  // Pass 1: every name, by category.
  std::map<Cat, std::set<std::string>> seen;
  for (auto& o : out)
    visitObject(o, [&](Cat c, std::string& s) {
      if (!reserved(c, s)) seen[c].insert(s);
    });
  std::map<Cat, std::map<std::string, std::string>> renamed;
  for (const auto& [c, names] : seen) {
    const size_t width = std::to_string(names.size()).size();
    size_t i = 0;
    for (const auto& n : names) {
      std::string num = std::to_string(++i);
      renamed[c][n] = std::string(prefixOf(c)) + "-" + std::string(width - num.size(), '0') + num;
    }
  }
  // A PodGroup the pod grouper made ("pg-<kind>-<workload>[suffix]") keeps the grouper's shape with
  // the workload's new name, so pods of that workload grouped in the replay join it as they would.
  for (const auto& o : out) {
    auto kind = api::kindOf(o);
    if (!kind.ok() || *kind != api::Kind::PodGroup || !o.contains("metadata") || !o["metadata"].is_object()) continue;
    const Json ann = o["metadata"].value("annotations", Json::object());
    if (!ann.is_object() || !ann.contains(grouper::keys::kWorkloadAnnotation)) continue;
    const std::string w = ann.value(grouper::keys::kWorkloadAnnotation, "");
    const size_t s2 = w.rfind('/'), s1 = s2 == std::string::npos || s2 == 0 ? std::string::npos : w.rfind('/', s2 - 1);
    if (s1 == std::string::npos) continue;
    const std::string wkind = lower(w.substr(s1 + 1, s2 - s1 - 1)), name = w.substr(s2 + 1);
    const std::string pg = o["metadata"].value("name", "");
    const std::string generated = "pg-" + wkind + "-" + name;
    auto wl = renamed[Cat::Workload].find(name);
    if (pg.rfind(generated, 0) != 0 || wl == renamed[Cat::Workload].end()) continue;
    renamed[Cat::PodGroup][pg] = "pg-" + wkind + "-" + wl->second + pg.substr(generated.size());
  }
  // Pass 2: replace, then drop free text.
  for (auto& o : out) {
    visitObject(o, [&](Cat c, std::string& s) {
      auto it = renamed[c].find(s);
      if (it != renamed[c].end()) s = it->second;
    });
    scrubObject(o);
  }
  return out;
}

}  // namespace tessera::app
