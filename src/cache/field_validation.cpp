// Unknown fields of a manifest (include/tessera/cache/field_validation.h): ObjectMeta and the
// envelope of every kind by hand, the parts of Pods and Nodes scenarios write, and Tessera's CRDs by
// the openAPIV3Schema embedded from deploy/crds (discovery.cpp).
#include "tessera/cache/field_validation.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "discovery.h"  // src/cache/client/http: the CRDs' schemas

namespace tessera::cache {

namespace {

using Names = std::vector<std::string_view>;

bool listed(const Names& names, const std::string& key) {
  return std::find(names.begin(), names.end(), key) != names.end();
}

const Names kObjectMeta = {"name",          "generateName",      "namespace",
                           "selfLink",      "uid",               "resourceVersion",
                           "generation",    "creationTimestamp", "deletionTimestamp",
                           "deletionGracePeriodSeconds",         "labels",
                           "annotations",   "ownerReferences",   "finalizers",
                           "managedFields"};
const Names kPodSpec = {"activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers",
                        "dnsConfig", "dnsPolicy", "enableServiceLinks", "ephemeralContainers", "hostAliases",
                        "hostIPC", "hostNetwork", "hostPID", "hostUsers", "hostname", "hostnameOverride",
                        "imagePullSecrets", "initContainers", "nodeName", "nodeSelector", "os", "overhead",
                        "preemptionPolicy", "priority", "priorityClassName", "readinessGates", "resourceClaims",
                        "resources", "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates",
                        "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN",
                        "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds", "tolerations",
                        "topologySpreadConstraints", "volumes"};
const Names kContainer = {"args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle",
                          "livenessProbe", "name", "ports", "readinessProbe", "resizePolicy", "resources",
                          "restartPolicy", "restartPolicyRules", "securityContext", "startupProbe", "stdin",
                          "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty",
                          "volumeDevices", "volumeMounts", "workingDir"};
const Names kContainerResources = {"limits", "requests", "claims"};
const Names kNodeSpec = {"podCIDR", "podCIDRs", "providerID", "unschedulable", "taints", "configSource", "externalID"};
const Names kNodeStatus = {"capacity", "allocatable", "phase", "conditions", "addresses", "daemonEndpoints",
                           "nodeInfo", "images", "volumesInUse", "volumesAttached", "config", "runtimeHandlers",
                           "features", "declaredFeatures"};
const Names kEvent = {"involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                      "type", "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance"};

/// The kind's own top-level fields besides apiVersion, kind and metadata.
const Names& topLevel(api::Kind kind) {
  static const Names configMap = {"data", "binaryData", "immutable"};
  static const Names priorityClass = {"value", "globalDefault", "preemptionPolicy", "description"};
  static const Names other = {"spec", "status"};
  switch (kind) {
    case api::Kind::ConfigMap: return configMap;
    case api::Kind::PriorityClass: return priorityClass;
    case api::Kind::Event: return kEvent;
    default: return other;
  }
}

class Walker {
 public:
  std::vector<std::string> out;

  void unknown(const std::string& path) { out.push_back(path); }

  /// `obj`'s keys against `names`; returns false when `obj` is not a map (its type is the
  /// converter's to judge, not an unknown field).
  bool keys(const Json& obj, const Names& names, const std::string& path) {
    if (!obj.is_object()) return false;
    for (const auto& [k, v] : obj.items())
      if (!listed(names, k)) unknown(path + k);
    return true;
  }

  /// A value against an openAPIV3Schema node (structural schemas, as CRDs must have).
  void schema(const Json& v, const Json& s, const std::string& path) {
    if (!s.is_object() || s.value("x-kubernetes-preserve-unknown-fields", false)) return;
    if (v.is_object()) {
      const Json* props = s.contains("properties") && s["properties"].is_object() ? &s["properties"] : nullptr;
      const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
      if (!props && !extra) {
        // A map without declared fields keeps none (the server prunes them): each is unknown.
        for (const auto& [k, x] : v.items()) unknown(path + k);
        return;
      }
      for (const auto& [k, x] : v.items()) {
        if (props && props->contains(k)) schema(x, (*props)[k], path + k + ".");
        else if (extra && extra->is_object()) schema(x, *extra, path + k + ".");
        else if (!(extra && extra->is_boolean() && extra->get<bool>())) unknown(path + k);
      }
    } else if (v.is_array() && s.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i) schema(v[i], s["items"], trimDot(path) + "[" + std::to_string(i) + "].");
    }
  }

  static std::string trimDot(const std::string& p) { return !p.empty() && p.back() == '.' ? p.substr(0, p.size() - 1) : p; }

  void pod(const Json& obj) {
    if (!obj.contains("spec")) return;
    const Json& spec = obj["spec"];
    if (!keys(spec, kPodSpec, "spec.")) return;
    for (const char* list : {"containers", "initContainers"}) {
      if (!spec.contains(list) || !spec[list].is_array()) continue;
      for (size_t i = 0; i < spec[list].size(); ++i) {
        const Json& c = spec[list][i];
        const std::string at = std::string("spec.") + list + "[" + std::to_string(i) + "].";
        if (keys(c, kContainer, at) && c.contains("resources")) keys(c["resources"], kContainerResources, at + "resources.");
      }
    }
  }
};

}  // namespace

std::vector<std::string> unknownFields(api::Kind kind, const Json& obj) {
  Walker w;
  if (!obj.is_object()) return {};
  const Names& own = topLevel(kind);
  for (const auto& [k, v] : obj.items())
    if (k != "apiVersion" && k != "kind" && k != "metadata" && !listed(own, k)) w.unknown(k);
  if (obj.contains("metadata")) w.keys(obj["metadata"], kObjectMeta, "metadata.");
  const Json& crd = http::resourceFacts(kind).schema;
  if (crd.is_object() && crd.contains("properties") && crd["properties"].is_object()) {
    for (const char* part : {"spec", "status"})
      if (obj.contains(part) && crd["properties"].contains(part)) w.schema(obj[part], crd["properties"][part], std::string(part) + ".");
  } else if (kind == api::Kind::Pod) {
    w.pod(obj);
  } else if (kind == api::Kind::Node) {
    if (obj.contains("spec")) w.keys(obj["spec"], kNodeSpec, "spec.");
    if (obj.contains("status")) w.keys(obj["status"], kNodeStatus, "status.");
  }
  return w.out;
}

std::vector<std::string> unknownFields(const Json& schema, const Json& obj) {
  Walker w;
  if (!obj.is_object()) return {};
  if (obj.contains("metadata")) w.keys(obj["metadata"], kObjectMeta, "metadata.");
  if (!schema.is_object() || schema.value("x-kubernetes-preserve-unknown-fields", false)) return w.out;
  const Json props = schema.contains("properties") && schema["properties"].is_object() ? schema["properties"]
                                                                                      : Json::object();
  for (const auto& [k, v] : obj.items()) {
    if (k == "apiVersion" || k == "kind" || k == "metadata") continue;
    if (props.contains(k)) w.schema(v, props[k], k + ".");
    else w.unknown(k);
  }
  return w.out;
}

}  // namespace tessera::cache
