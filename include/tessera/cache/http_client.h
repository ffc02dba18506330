#pragma once
/// The ClusterClient over HTTP(S): a real Kubernetes API server (or the test API server). Boost.Beast
/// and OpenSSL stay inside src/cache/client/http; this header is all callers see.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tessera/api/result.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache {

/// Where the API server is and how to authenticate: from a kubeconfig or the in-cluster files.
/// PEM contents are held as data (files are read when the config is loaded).
struct RestConfig {
  std::string server;            ///< "https://host:port" or "http://127.0.0.1:port"
  std::string caData;            ///< PEM; empty = the system's trust store
  bool insecureSkipTlsVerify = false;
  std::string token;             ///< bearer token
  std::string tokenFile;         ///< re-read periodically (bound service-account tokens rotate)
  std::string clientCertData;    ///< PEM
  std::string clientKeyData;     ///< PEM
  std::string tlsServerName;     ///< SNI / verification name override
};

/// Reads a kubeconfig (`context` empty = current-context). Relative file paths are resolved against
/// the kubeconfig's folder. Exec and auth-provider plugins are refused with a message saying so.
api::Result<RestConfig> loadKubeconfig(const std::string& path, const std::string& context = {});
/// Parses kubeconfig text (`baseDir` resolves relative paths).
api::Result<RestConfig> parseKubeconfig(const std::string& yamlText, const std::string& baseDir,
                                        const std::string& context = {});
/// The pod's service account: token and CA under /var/run/secrets/kubernetes.io/serviceaccount
/// (or `secretsDir`), server from KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT.
api::Result<RestConfig> inClusterConfig(const std::string& secretsDir = "/var/run/secrets/kubernetes.io/serviceaccount");

/// One finished API request, for metrics: verb ("GET", "LIST", "WATCH", "POST", ...), HTTP code
/// (0 = transport failure), seconds from send to answer.
using RequestObserver = std::function<void(const std::string& verb, int code, double seconds)>;

struct HttpClientOptions {
  double qps = 50;                    ///< client-side rate limit; <= 0 = unlimited
  int burst = 100;
  int ioThreads = 2;                  ///< threads running the I/O (the callers block on results)
  int64_t requestTimeoutMs = 30'000;  ///< every request (connect + write + read)
  int64_t connectTimeoutMs = 10'000;
  int maxRetries = 6;                 ///< for retryable failures (see makeHttpClient)
  int64_t retryInitialMs = 100;
  int64_t retryMaxMs = 5'000;
  int64_t watchTimeoutSeconds = 300;  ///< asked of the server (timeoutSeconds); reconnected after
  int64_t watchIdleTimeoutMs = 0;     ///< no byte for this long = dead stream; 0 = watchTimeout + 30 s
  int64_t watchReconnectInitialMs = 200;
  int64_t watchReconnectMaxMs = 10'000;
  int64_t tokenRefreshMs = 60'000;    ///< tokenFile re-read period
  std::string userAgent = "tessera/0.1.0";
  uint64_t seed = 1;                  ///< jitter
  RequestObserver observer;           ///< optional; called on I/O threads
};

/// Creates the HTTP client. Semantics on top of the ClusterClient contract:
///  - Retries with exponential backoff and jitter: 429 always (the server refused before doing
///    anything; Retry-After honoured); 5xx and transport errors only for reads (GET/LIST) and
///    idempotent writes (PUT with a resourceVersion, PATCH, DELETE). POST (create, bind) is not
///    retried blindly: the caller checks what happened (a bind answered 409 checks the pod's node).
///  - watch() returns at once; the stream runs on an I/O thread and reconnects by itself (with
///    backoff) from the last resourceVersion seen, bookmarks included. When the server says that
///    RV is gone (HTTP 410, or an ERROR event), the callback gets one Error event with a Status
///    object (code 410 for Gone) and the watch ends: the caller relists. Callbacks run on an I/O
///    thread, one at a time per watch, never after stop() returns.
/// Thread-safe: any number of threads may call it at once (one keep-alive connection each).
api::Result<std::unique_ptr<ClusterClient>> makeHttpClient(const RestConfig& config, HttpClientOptions options = {});

}  // namespace tessera::cache
