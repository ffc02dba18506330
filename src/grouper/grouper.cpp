// The pod grouper's pass: take the pending pods that name no PodGroup (listed, or handed over by the
// cache), walk their owners through the client, create or adopt the PodGroup (planFor,
// workloads.cpp) and point the pods at it.
#include "tessera/grouper/grouper.h"

#include <algorithm>
#include <map>
#include <set>

#include "tessera/api/kinds.h"
#include "tessera/api/log.h"
#include "tessera/api/objects.h"

namespace tessera::grouper {
namespace {

constexpr int kMaxOwnerDepth = 8;  // a cycle of ownerReferences must not loop forever

std::string str(const Json& j, const char* a, const char* b) {
  if (!j.is_object() || !j.contains(a) || !j[a].is_object() || !j[a].contains(b) || !j[a][b].is_string()) return {};
  return j[a][b].get<std::string>();
}

/// obj.metadata.<field>, or null (const operator[] on a missing key is undefined behaviour).
const Json& metadataField(const Json& obj, const char* field) {
  static const Json kNull;
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return kNull;
  auto it = meta->find(field);
  return it == meta->end() ? kNull : *it;
}

// A pod with any PodGroup key, even empty, is passed over (the cache files a pod under a
// PodGroup only when the key names one: cluster_state.cpp's podGroupOf).
bool hasPodGroupKey(const Json& pod) {
  return std::any_of(std::begin(api::keys::kPodGroupKeys), std::end(api::keys::kPodGroupKeys), [&pod](const auto& k) {
    const Json& m = metadataField(pod, k.annotation ? "annotations" : "labels");
    return m.is_object() && m.contains(k.key);
  });
}

bool hasPodGroupKey(const api::Pod& pod) {
  return std::any_of(std::begin(api::keys::kPodGroupKeys), std::end(api::keys::kPodGroupKeys), [&pod](const auto& k) {
    return (k.annotation ? pod.meta.annotations : pod.meta.labels).count(k.key) > 0;
  });
}

/// The controller reference of an object (else its first reference); null when it has none.
const Json* controllerRef(const Json& obj) {
  const Json& refs = metadataField(obj, "ownerReferences");
  if (!refs.is_array()) return nullptr;
  for (const Json& r : refs)
    if (r.is_object() && r.value("controller", false)) return &r;
  return !refs.empty() && refs[0].is_object() ? &refs[0] : nullptr;
}

/// The workload kind an ownerReference names; the version is not compared (MPIJob v2beta1 and
/// JobSet v1alpha2 are read at the version the kind table names).
std::optional<api::Kind> workloadKind(const std::string& apiVersion, const std::string& kind) {
  const auto slash = apiVersion.find('/');
  const std::string group = slash == std::string::npos ? std::string() : apiVersion.substr(0, slash);
  for (api::Kind k : api::kAllKinds) {
    const api::KindInfo& info = api::kindInfo(k);
    if (isWorkloadKind(k) && info.name == kind && info.group == group) return k;
  }
  return std::nullopt;
}

}  // namespace

Json podJson(const api::Pod& pod) {
  Json meta = {{"name", pod.meta.name}, {"namespace", pod.meta.namespace_}, {"uid", pod.meta.uid}};
  if (!pod.meta.resourceVersion.empty()) meta["resourceVersion"] = pod.meta.resourceVersion;
  if (!pod.meta.labels.empty()) meta["labels"] = Json(pod.meta.labels);
  if (!pod.meta.annotations.empty()) meta["annotations"] = Json(pod.meta.annotations);
  if (pod.meta.deletionTimestamp) meta["deletionTimestamp"] = api::formatTime(*pod.meta.deletionTimestamp);
  if (!pod.meta.ownerReferences.empty()) {
    Json refs = Json::array();
    for (const api::OwnerReference& r : pod.meta.ownerReferences)
      refs.push_back({{"apiVersion", r.apiVersion}, {"kind", r.kind}, {"name", r.name}, {"uid", r.uid},
                      {"controller", r.controller}});
    meta["ownerReferences"] = std::move(refs);
  }
  Json spec = {{"schedulerName", pod.schedulerName}};
  if (!pod.priorityClassName.empty()) spec["priorityClassName"] = pod.priorityClassName;
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(meta)}, {"spec", std::move(spec)}};
}

api::Result<Json> Grouper::readOwner(api::Kind kind, const std::string& ns, const std::string& name) {
  const std::string key = std::string(api::kindInfo(kind).name) + "/" + ns + "/" + name;
  auto it = owners_.find(key);
  if (it == owners_.end()) it = owners_.emplace(key, client_.get(kind, ns, name)).first;
  return it->second;
}

std::vector<Owner> Grouper::ownersOf(const Json& pod, bool& unresolved) {
  const std::string ns = str(pod, "metadata", "namespace");
  std::vector<Owner> owners;
  auto read = [&](Owner& o) {
    auto kind = workloadKind(o.apiVersion, o.kind);
    if (!kind) return;
    auto got = readOwner(*kind, ns, o.name);
    if (!got.ok()) {
      if (got.error().code != 404)
        log::warning("pod grouper: reading ", o.kind, " ", ns, "/", o.name, ": ", got.error().message);
      unresolved = true;
      return;
    }
    o.object = std::move(*got);
    o.uid = str(o.object, "metadata", "uid");
  };
  // LeaderWorkerSet pods hang under StatefulSets (the workers' under the leader pod): its labels
  // name the set directly.
  if (const Json& labels = metadataField(pod, "labels");
      labels.is_object() && labels.contains(kLwsNameLabel) && labels[kLwsNameLabel].is_string()) {
    const api::KindInfo& info = api::kindInfo(api::Kind::LeaderWorkerSet);
    Owner o{info.apiVersion(), std::string(info.name), labels[kLwsNameLabel].get<std::string>(), "", Json()};
    read(o);
    if (o.object.is_object()) return {std::move(o)};
  }
  const Json* ref = controllerRef(pod);
  for (int depth = 0; ref != nullptr && depth < kMaxOwnerDepth; ++depth) {
    Owner o{ref->value("apiVersion", ""), ref->value("kind", ""), ref->value("name", ""), ref->value("uid", ""),
            Json()};
    read(o);
    owners.push_back(std::move(o));
    ref = owners.back().object.is_object() ? controllerRef(owners.back().object) : nullptr;
  }
  return owners;
}

bool Grouper::ensurePodGroup(const PodGroupPlan& plan, GroupingReport& report) {
  const std::string key = plan.namespace_ + "/" + plan.name;
  auto existing = client_.get(api::Kind::PodGroup, plan.namespace_, plan.name);
  if (existing.ok()) return true;  // adopted as it is
  if (existing.error().code != 404) {
    log::warning("pod grouper: reading PodGroup ", key, ": ", existing.error().message);
    ++report.failures;
    return false;
  }
  auto created = client_.create(api::Kind::PodGroup, podGroupObject(plan));
  if (created.ok()) {
    log::info("pod grouper: created PodGroup ", key, " (minMember ", plan.minMember, ") for ", plan.owner.kind, " ",
              plan.owner.name);
    report.podGroups.push_back(std::move(*created));
    return true;
  }
  if (created.error().code == 409) return true;  // made meanwhile: adopted
  log::warning("pod grouper: creating PodGroup ", key, ": ", created.error().message);
  ++report.failures;
  return false;
}

void Grouper::retryLater(const Json& pod, const std::string& key, GroupingReport& report, const char* why) {
  if (++attempts_[key] >= kMaxAttempts) {
    log::warning("pod grouper: pod ", key, ": ", why, " after ", kMaxAttempts,
                 " passes; left as it is until the pod changes");
    attempts_.erase(key);
    givenUp_[key] = str(pod, "metadata", "resourceVersion");
    return;
  }
  report.retry.push_back(key);
}

GroupingReport Grouper::run(const std::string& schedulerName) {
  cache::ListOptions options;
  options.fieldSelector = "spec.schedulerName=" + schedulerName + ",spec.nodeName=";
  auto pods = client_.list(api::Kind::Pod, options);
  if (!pods.ok()) {
    log::warning("pod grouper: listing pods: ", pods.error().message);
    GroupingReport report;
    ++report.failures;
    return report;
  }
  return group(pods->items);
}

bool Grouper::givenUpOn(const std::string& key, const std::string& resourceVersion) {
  auto gave = givenUp_.find(key);
  if (gave == givenUp_.end()) return false;
  if (gave->second == resourceVersion) return true;
  givenUp_.erase(gave);  // it changed: try again
  return false;
}

const Json& Grouper::namespaceObject(const std::string& name, Namespaces& read) {
  auto it = read.find(name);
  if (it == read.end()) {
    auto got = client_.get(api::Kind::Namespace, "", name);
    it = read.emplace(name, got.ok() ? std::move(*got) : Json()).first;
  }
  return it->second;
}

GroupingReport Grouper::group(const std::vector<std::shared_ptr<const api::Pod>>& pods) {
  // The pods the pass would skip, and those planFor would plan nothing for (bare pods asking for
  // no PodGroup), are passed over before they are written as JSON: where bare pods are the rule,
  // writing them was most of the pass.
  Namespaces namespaces;
  std::vector<Json> items;
  for (const auto& pod : pods) {
    if (hasPodGroupKey(*pod) || pod->meta.deletionTimestamp) continue;
    if (isBarePod(*pod) && !barePodGetsGroup(*pod, namespaceObject(pod->meta.namespace_, namespaces), defaults_)) {
      if (!givenUp_.empty()) givenUpOn(pod->meta.key(), pod->meta.resourceVersion);  // (as the pass does)
      continue;
    }
    items.push_back(podJson(*pod));
  }
  return group(items, namespaces);
}

GroupingReport Grouper::group(const std::vector<Json>& pods) {
  Namespaces namespaces;
  return group(pods, namespaces);
}

GroupingReport Grouper::group(const std::vector<Json>& pods, Namespaces& namespaces) {
  GroupingReport report;
  owners_.clear();  // read afresh each pass: a workload edited since (min-member) is seen
  std::set<std::string> ensured;  // "ns/name" of PodGroups known to exist
  for (const Json& pod : pods) {
    if (hasPodGroupKey(pod) || !metadataField(pod, "deletionTimestamp").is_null()) continue;
    const std::string ns = str(pod, "metadata", "namespace");
    const std::string podName = str(pod, "metadata", "name");
    const std::string podKey = ns + "/" + podName;
    if (givenUpOn(podKey, str(pod, "metadata", "resourceVersion"))) continue;
    const Json& namespaceObj = namespaceObject(ns, namespaces);
    std::optional<PodGroupPlan> plan;
    bool unresolved = false;
    try {
      plan = planFor(pod, ownersOf(pod, unresolved), namespaceObj, defaults_);
    } catch (const std::exception& e) {  // a malformed ownerReference or workload spec
      log::warning("pod grouper: pod ", podKey, ": ", e.what(), " (left as it is)");
      ++report.failures;
      continue;
    }
    // An owner of a workload kind not readable yet: grouping now could make a gang's pods groups
    // of one; look again next pass.
    if (unresolved) {
      retryLater(pod, podKey, report, "its workload could not be read");
      continue;
    }
    if (!plan) {
      attempts_.erase(podKey);
      continue;
    }
    const std::string key = ns + "/" + plan->name;
    if (!ensured.count(key)) {
      if (!ensurePodGroup(*plan, report)) {
        retryLater(pod, podKey, report, "its PodGroup could not be written");
        continue;
      }
      ensured.insert(key);
    }
    Json patch = {{"metadata", {{"annotations", {{api::keys::kPodGroupAnnotation, plan->name}}}}}};
    const Json& labels = metadataField(pod, "labels");
    const bool hasSubGroup = labels.is_object() && (labels.contains(api::keys::kSubGroupLabel) ||
                                                    labels.contains(api::keys::kSubGroupLabelKai));
    if (!plan->podSubGroup.empty() && !hasSubGroup)
      patch["metadata"]["labels"] = {{api::keys::kSubGroupLabel, plan->podSubGroup}};
    auto patched = client_.patch(api::Kind::Pod, ns, podName, cache::PatchType::Merge, patch);
    if (!patched.ok()) {
      if (patched.error().code != 404) {
        log::warning("pod grouper: pointing pod ", podKey, " at ", plan->name, ": ", patched.error().message);
        ++report.failures;
        retryLater(pod, podKey, report, "it could not be patched");
      }
      continue;
    }
    attempts_.erase(podKey);
    report.pods.push_back(std::move(*patched));
  }
  // Pods not asked for again (grouped, decided, or gone) start from zero if they come back.
  const std::set<std::string> again(report.retry.begin(), report.retry.end());
  std::erase_if(attempts_, [&again](const auto& entry) { return !again.count(entry.first); });
  return report;
}

}  // namespace tessera::grouper
