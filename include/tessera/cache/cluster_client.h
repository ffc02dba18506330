#pragma once
/// The one seam between Tessera and a Kubernetes API: list, watch, get, create, update, patch, delete,
/// bind. Two implementations: the embedded in-memory cluster (memory_cluster.h) and the HTTP client.
/// Nothing above this seam knows which one it talks to. Objects travel as Kubernetes JSON.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/kinds.h"
#include "tessera/api/result.h"

namespace tessera::cache {

using Json = nlohmann::json;

struct ListOptions {
  std::string namespace_;      ///< empty = all namespaces
  std::string labelSelector;   ///< "a=b,c!=d,e in (x,y)"; empty = everything
  std::string fieldSelector;   ///< "spec.nodeName=n1,spec.schedulerName!=x"; empty = everything
  int64_t limit = 0;           ///< page size; 0 = no paging
  std::string continueToken;   ///< from a previous ListResult
};

struct ListResult {
  std::vector<Json> items;
  std::string resourceVersion;  ///< the collection's RV: watch from here
  std::string continueToken;    ///< non-empty while more pages remain
};

enum class WatchEventType { Added, Modified, Deleted, Bookmark, Error };

struct WatchEvent {
  WatchEventType type = WatchEventType::Added;
  /// The object; for Bookmark only metadata.resourceVersion; for Error a Status (code 410 = relist).
  Json object;
};

/// Invoked for each event. Implementations document on which thread; the in-memory cluster calls it
/// synchronously inside the mutating call with its store lock held, so a callback must not call back
/// into the client (the cache only enqueues).
using WatchCallback = std::function<void(const WatchEvent&)>;

/// A running watch. Destroying it (or stop()) stops delivery; no callback runs after stop() returns.
class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
  virtual void stop() = 0;
};

enum class PatchType { Merge, StrategicMerge, JsonPatch };

struct DeleteOptions {
  std::optional<int64_t> gracePeriodSeconds;  ///< unset = the object's default
  std::string preconditionUid;                ///< non-empty: delete only if the uid matches (409 otherwise)
};

/// Errors use api::Error::code with HTTP semantics: 404 NotFound, 409 AlreadyExists/Conflict,
/// 410 Gone (watch RV too old), 422 Invalid, 0 transport failure.
class ClusterClient {
 public:
  virtual ~ClusterClient() = default;

  virtual api::Result<ListResult> list(api::Kind kind, const ListOptions& options = {}) = 0;
  /// Watches `kind` from `resourceVersion` (exclusive: events after it). An RV older than the
  /// implementation's window fails with code 410 (or an Error event) and the caller must relist.
  virtual api::Result<std::unique_ptr<WatchHandle>> watch(api::Kind kind, const std::string& resourceVersion,
                                                          WatchCallback callback) = 0;
  /// As watch(), for the objects `selectors` select (labelSelector, fieldSelector; namespace_; the
  /// paging fields are ignored). As kube-apiserver does, an object that starts matching arrives as
  /// Added and one that stops matching as Deleted (with its last matching content). This default
  /// serves only empty selectors (the plain watch); both implementations override it.
  virtual api::Result<std::unique_ptr<WatchHandle>> watchSelected(api::Kind kind, const std::string& resourceVersion,
                                                                  const ListOptions& selectors, WatchCallback callback);
  virtual api::Result<Json> get(api::Kind kind, const std::string& ns, const std::string& name) = 0;
  /// POST; sets uid, resourceVersion, creationTimestamp (when absent). 409 if the name is taken.
  virtual api::Result<Json> create(api::Kind kind, const Json& object) = 0;
  /// PUT with the object's metadata.resourceVersion; 409 Conflict when stale. Status is not changed.
  virtual api::Result<Json> update(api::Kind kind, const Json& object) = 0;
  /// PUT on the status subresource: only .status is taken from `object`.
  virtual api::Result<Json> updateStatus(api::Kind kind, const Json& object) = 0;
  virtual api::Result<Json> patch(api::Kind kind, const std::string& ns, const std::string& name, PatchType type,
                                  const Json& patch, bool statusSubresource = false) = 0;
  /// DELETE. A pod bound to a node and still running gets metadata.deletionTimestamp and stays until
  /// its containers stop; other objects go at once.
  virtual api::Status remove(api::Kind kind, const std::string& ns, const std::string& name,
                             const DeleteOptions& options = {}) = 0;
  /// POST pods/NAME/binding. 409 when the pod already has spec.nodeName; `uid` (if non-empty) must match.
  virtual api::Status bind(const std::string& ns, const std::string& name, const std::string& uid,
                           const std::string& node) = 0;
};

}  // namespace tessera::cache
