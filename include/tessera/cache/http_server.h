#pragma once
/// HTTP servers on 127.0.0.1 (or any address), Boost.Beast kept inside src/cache/client/http:
///  - ApiServer: the embedded cluster (MemoryCluster) served with the Kubernetes REST semantics the
///    daemon relies on, plus fault injection. For integration tests, `tessera serve-cluster` and the
///    end-to-end bench.
///  - HttpServer: a tiny request -> reply server (the daemon's /healthz, /readyz, /metrics).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tessera/api/result.h"
#include "tessera/cache/memory_cluster.h"

namespace tessera::cache {

/// One request as Kubernetes authorization sees it: RBAC verb, API group, resource, subresource.
struct ApiRequestRecord {
  std::string verb;         ///< get, list, watch, create, update, patch, delete
  std::string apiGroup;     ///< "" for the core group
  std::string resource;     ///< plural, "pods"
  std::string subresource;  ///< "", "status", "binding"
  std::string namespace_;   ///< empty: cluster-scoped, or all namespaces
  std::string name;         ///< empty for collections
};

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  ///< 0: any free port (read it back with port())
  int threads = 2;
  /// BOOKMARK events on watches that asked for them, this often (0: only when a watch times out).
  int64_t bookmarkIntervalMs = 0;
  /// A watch from a compacted RV is answered with HTTP 410 instead of 200 + an ERROR event
  /// (real servers do either, depending on the version and the watch cache).
  bool goneAsHttpStatus = false;
  /// Runs the simulated kubelet (MemoryCluster::kubeletTick, completeExpired) this often; 0 = never.
  int64_t kubeletPeriodMs = 0;
  /// Optional: called for every request whose path names a known resource, before fault injection,
  /// on a server thread (RBAC coverage tests record what the daemon asks for).
  std::function<void(const ApiRequestRecord&)> onRequest;
  /// Optional: RBAC as the API server's authorizer applies it; a request it refuses is answered
  /// 403 Forbidden (as kube-apiserver words it) and not served. Called on a server thread.
  std::function<bool(const ApiRequestRecord&)> authorize;
  /// Ages the AGE-like cells of Table answers (kubectl get); null: the system clock.
  const api::Clock* clock = nullptr;
  /// Every write (any method but GET) is answered this many milliseconds late, without holding a
  /// server thread: a real API server commits each write to etcd, about 1,000 binds/s at 16
  /// concurrent requests, so ~16 ms a write (tessera-bench e2e --server-latency). 0: none.
  int64_t writeLatencyMs = 0;
};

/// Serves `cluster` at http://host:port. REST paths /api/v1/... and /apis/GROUP/VERSION/...:
/// list (labelSelector, fieldSelector, limit, continue; 410 for an expired continue token), watch
/// (chunked stream of events from resourceVersion; bookmarks when allowWatchBookmarks=true; ends
/// after timeoutSeconds; a compacted RV gets 410), get, create (POST, 409 AlreadyExists), update
/// (PUT, 409 Conflict on a stale RV), status subresource (PUT/PATCH .../status), patch (merge,
/// strategic merge, JSON patch by Content-Type), delete (DeleteOptions body: gracePeriodSeconds,
/// preconditions.uid) and pods/NAME/binding (409 for a pod already bound).
/// Watches honour label and field selectors. For kubectl: discovery (/version, /api, /apis, each
/// group-version's resources with verbs, short names, categories), OpenAPI v3 documents, Table
/// answers (Accept: application/json;as=Table;v=v1;g=meta.k8s.io) for list, get and watch, and
/// YAML request bodies (src/cache/client/http/discovery.h, table.h).
/// Thread-safe; fault-injection calls may come from any thread.
class ApiServer {
 public:
  ApiServer(MemoryCluster& cluster, ApiServerOptions options = {});
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  api::Status start();
  void stop();
  uint16_t port() const;
  std::string url() const;  ///< "http://127.0.0.1:PORT"

  // ---- fault injection ----
  /// The next `n` requests (of HTTP method `method`, e.g. "POST"; empty = any, watches included)
  /// are answered `code` (500, 429, ...) without being executed; with `retryAfterSeconds` >= 0 the
  /// answer carries `Retry-After` (as API Priority and Fairness's 429s do).
  void failNextRequests(int n, int code, const std::string& method = {}, int retryAfterSeconds = -1);
  /// Every answer waits this long first (0: none). Watches are not delayed once streaming.
  void delayResponses(int64_t millis);
  /// Closes every open watch stream mid-stream, without the terminating chunk.
  void dropWatches();
  /// Forgets the watch history (as etcd compaction does): watches from an older RV get 410.
  void compact();
  /// Whether the resource of `kind` is served (a CRD installed or not): when not, every request
  /// naming it gets 404 "the server could not find the requested resource", as a real server
  /// answers for a CRD that is not installed. All kinds are served at start.
  void setServed(api::Kind kind, bool served);
  /// Open watch streams now.
  size_t openWatches() const;
  /// Requests answered since start (watches counted once).
  uint64_t requestCount() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

struct HttpReply {
  int code = 200;
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
};
/// `method`, `path` (no query) -> reply. Runs on the server's thread; must not block for long.
using HttpHandler = std::function<HttpReply(const std::string& method, const std::string& path)>;

/// A small HTTP/1.1 server with `threads` I/O threads (the handler may run on several at once when
/// more than one). Thread-safe start/stop.
class HttpServer {
 public:
  HttpServer(HttpHandler handler, std::string host = "0.0.0.0", uint16_t port = 0, int threads = 1);
  ~HttpServer();
  api::Status start();
  void stop();
  uint16_t port() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tessera::cache
