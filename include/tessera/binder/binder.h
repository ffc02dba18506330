#pragma once
/// The binder makes a session's decisions real through the ClusterClient: evictions (a
/// DisruptionTarget condition, then DELETE), binds (POST pods/binding), and what users read:
/// the PodScheduled condition and deduplicated core/v1 Events on pods and PodGroups.
/// Each bind and eviction is recorded in the cache as an assumption until the watch confirms it.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/framework/scheduler.h"

namespace tessera::binder {

/// Work that must be done before a pod is bound (GPU reservation pod, GPU ConfigMap, group label):
/// an error fails that bind with its message. May be called from binder threads concurrently for
/// different pods; the callee serializes what must be serialized (one GPU group at a time).
using PreBindFn = std::function<api::Status(const framework::SessionResult::Bind&)>;
/// Runs at the end of apply(), once every bind and eviction of the result is done (GPU
/// reservation garbage collection).
using AfterApplyFn = std::function<void(const framework::SessionResult&)>;

struct BinderOptions {
  std::string component = "tessera";  ///< Event source.component
  bool writeEvents = true;
  PreBindFn preBind;        ///< optional
  AfterApplyFn afterApply;  ///< optional
};

/// Outcome of one bind or eviction, for timelines and metrics.
struct BindRecord {
  enum class Kind { Bind, Evict };
  Kind kind = Kind::Bind;
  std::string podKey, node;
  bool ok = true;
  std::string error;
};

/// Synchronous binder: every request is made inside apply(). Not thread-safe.
class Binder final : public framework::CommitSink {
 public:
  Binder(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, BinderOptions options = {});
  ~Binder() override;

  void apply(const framework::SessionResult& result, const cache::Snapshot& snapshot) override;

  /// Records of the last apply(), in order (evictions first, then binds).
  const std::vector<BindRecord>& lastRecords() const { return records_; }

 private:
  void evict(const framework::SessionResult::Evict& e);
  void bind(const framework::SessionResult::Bind& b);
  void reportUnschedulable(const std::string& podKey, const std::string& message);
  void reportJob(const std::string& jobKey, const std::string& message);
  /// Creates a core/v1 Event unless the same (object, reason, message) was the last one reported.
  void event(api::Kind kind, const std::string& ns, const std::string& name, const std::string& uid,
             const std::string& type, const std::string& reason, const std::string& message);

  cache::ClusterClient& client_;
  cache::Cache& cache_;
  const api::Clock& clock_;
  BinderOptions options_;
  std::vector<BindRecord> records_;
  std::map<std::string, std::string> lastCondition_;  ///< pod key -> message last written
  std::map<std::string, std::string> lastEvent_;      ///< "Kind/ns/name/reason" -> message last written
  uint64_t eventCounter_ = 0;
};

}  // namespace tessera::binder
