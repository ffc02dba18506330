#pragma once
// CustomResourceDefinitions in the test API server: the CRDs clients create
// (apiextensions.k8s.io/v1 customresourcedefinitions) and, for each CRD whose group and plural
// Tessera has no api::Kind for, its objects, stored as sent (JSON) and served by group and plural
// (list, watch, get, create, update, merge and JSON patch, delete), with discovery and Table columns
// from the CRD. A CRD for a kind Tessera knows (deploy/crds, Kubeflow's PyTorchJob, ...) is stored
// and changes nothing: that kind is served by the MemoryCluster as before.
//
// ResourceVersions come from this store's own counter, increasing across its resources: a list then
// watch of one resource is consistent, as clients need; clients never compare RVs across resources.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "discovery.h"
#include "tessera/api/clock.h"
#include "tessera/api/result.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache::http {

/// One resource a CRD defines (or the customresourcedefinitions resource itself).
struct CustomKind {
  std::string group, plural, singular, kind, listKind;
  std::vector<std::string> versions;  ///< served, in the CRD's order
  bool namespaced = true;
  std::vector<std::string> shortNames, categories;
  std::vector<PrinterColumn> printerColumns;  ///< of the first served version
  bool statusSubresource = false;
  Json schema;  ///< openAPIV3Schema of the first served version; null: none
  std::string key() const { return group + "/" + plural; }
};

/// A request path that names a custom resource (or a CRD), and what it names.
struct CustomTarget {
  CustomKind kind;
  std::string version, ns, name, subresource;
};

/// Thread-safe (one mutex). Watch callbacks run with it held, in resourceVersion order.
class CustomResources {
 public:
  explicit CustomResources(const api::Clock* clock);
  ~CustomResources();
  CustomResources(const CustomResources&) = delete;
  CustomResources& operator=(const CustomResources&) = delete;

  /// What `path` (no query) names when it is the CRD resource or a served custom resource.
  std::optional<CustomTarget> resolve(std::string_view path) const;

  /// Items matching the selectors (parse errors: 400), sorted by namespace and name, and the RV.
  api::Result<ListResult> list(const CustomTarget& t, const std::string& labelSelector,
                               const std::string& fieldSelector) const;
  api::Result<Json> get(const CustomTarget& t) const;
  api::Result<Json> create(const CustomTarget& t, Json object);
  /// PUT; 409 on a stale metadata.resourceVersion. On the status subresource only .status changes;
  /// otherwise .status is kept when the CRD declares the subresource.
  api::Result<Json> update(const CustomTarget& t, Json object);
  api::Result<Json> patch(const CustomTarget& t, PatchType type, const Json& patch);
  /// Deleting a CRD deletes its objects (each watcher sees them go) and stops serving its kind.
  api::Result<Json> remove(const CustomTarget& t);
  /// Events of `t`'s resource after `resourceVersion` ("" or "0": from now), then as they happen.
  /// 410 when the RV is older than the kept history.
  api::Result<std::unique_ptr<WatchHandle>> watch(const CustomTarget& t, const std::string& resourceVersion,
                                                  WatchCallback callback);
  std::string resourceVersion() const;

  /// Adds the served custom groups and resources to a discovery answer: `path` is "/apis" or
  /// "/apis/GROUP/VERSION"; `builtin` is what discoveryDocument answered (nullopt: nothing).
  std::optional<Json> discovery(std::string_view path, std::optional<Json> builtin) const;

  /// Unknown fields of a custom object by its CRD's schema (none without one).
  static std::vector<std::string> unknownFields(const CustomKind& kind, const Json& object);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tessera::cache::http
