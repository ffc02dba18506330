// `tessera monitor`: flags, the /metrics server, and the periodic sweep of stale pod folders.
// Diagnostics go through api/log.h.
#include <ctime>
#include <iostream>

#include "tessera/api/flags.h"
#include "tessera/api/log.h"
#include "tessera/api/signals.h"
#include "tessera/cache/http_client.h"
#include "tessera/cache/http_server.h"
#include "tessera/monitor/monitor.h"

namespace tessera::monitor {

namespace {

const char* const kUsage =
    "usage: tessera monitor [--kubelet-pods-dir /var/lib/kubelet/pods] [--region-dir /var/lib/tessera/regions]\n"
    "                       [--address 0.0.0.0] [--port 9402]\n"
    "                       [--in-cluster | --kubeconfig PATH [--context NAME]] [--node-name NAME]\n"
    "                       [--cleanup-interval 60] [--stale-grace 300]\n"
    "  Serves the GPU memory each pod uses against its limit on /metrics (docs/metrics.md), read\n"
    "  from the pods' tessera-regions emptyDirs under --kubelet-pods-dir and from the hostPath\n"
    "  layout under --region-dir (an empty value skips either).\n"
    "  With API access (pods get/list), removes the --region-dir folders of pods gone from this node\n"
    "  (--node-name, default $NODE_NAME) for --stale-grace seconds.\n";

struct Flags {
  std::string podsDir = "/var/lib/kubelet/pods";
  std::string regionDir = "/var/lib/tessera/regions";
  std::string address = "0.0.0.0";
  int port = 9402;
  bool inCluster = false;
  std::string kubeconfig, context, nodeName;
  int64_t cleanupInterval = 60, staleGrace = 300;
};

api::Result<int64_t> parseCount(const std::string& flag, const std::string& v, int64_t min, int64_t max) {
  int64_t n = 0;
  if (v.empty() || v.size() > 12) return api::makeError(flag + ": \"" + v + "\" is not a number");
  for (char c : v) {
    if (c < '0' || c > '9') return api::makeError(flag + ": \"" + v + "\" is not a number");
    n = n * 10 + (c - '0');
  }
  if (n < min || n > max)
    return api::makeError(flag + ": " + v + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) +
                          "]");
  return n;
}

api::Result<Flags> parseFlags(const std::vector<std::string>& args) {
  Flags f;
  if (const char* node = std::getenv("NODE_NAME")) f.nodeName = node;
  api::FlagCursor flag(args);
  while (flag.next()) {
    const std::string& a = flag.name();
    if (a == "--help" || a == "-h") return api::makeError("", 1);
    if (a == "--in-cluster") {
      f.inCluster = flag.boolean();
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(const std::string v, flag.value());
    if (a == "--region-dir") f.regionDir = v;
    else if (a == "--kubelet-pods-dir") f.podsDir = v;
    else if (a == "--address") f.address = v;
    else if (a == "--kubeconfig") f.kubeconfig = v;
    else if (a == "--context") f.context = v;
    else if (a == "--node-name") f.nodeName = v;
    else if (a == "--port") {
      TESSERA_ASSIGN_OR_RETURN(int64_t port, parseCount(a, v, 0, 65535));
      f.port = static_cast<int>(port);
    } else if (a == "--cleanup-interval") {
      TESSERA_ASSIGN_OR_RETURN(f.cleanupInterval, parseCount(a, v, 1, 86400));
    } else if (a == "--stale-grace") {
      TESSERA_ASSIGN_OR_RETURN(f.staleGrace, parseCount(a, v, 0, 86400 * 7));
    } else {
      return api::makeError("unknown flag " + a);
    }
  }
  if (!f.regionDir.empty() && f.regionDir[0] != '/') return api::makeError("--region-dir must be an absolute path");
  if (!f.podsDir.empty() && f.podsDir[0] != '/') return api::makeError("--kubelet-pods-dir must be an absolute path");
  if (f.regionDir.empty() && f.podsDir.empty())
    return api::makeError("--kubelet-pods-dir and --region-dir are both empty: there is nothing to read");
  if ((f.inCluster || !f.kubeconfig.empty()) && f.nodeName.empty())
    return api::makeError(
        "cleaning up needs the node's name: set NODE_NAME (downward API spec.nodeName) or --node-name");
  return f;
}

/// The UIDs of the pods bound to `node`, or an error (then nothing is removed this round).
api::Result<std::set<std::string>> podsOnNode(cache::ClusterClient& client, const std::string& node) {
  cache::ListOptions options;
  options.fieldSelector = "spec.nodeName=" + node;
  std::set<std::string> uids;
  do {
    TESSERA_ASSIGN_OR_RETURN(cache::ListResult page, client.list(api::Kind::Pod, options));
    for (const cache::Json& pod : page.items) {
      auto md = pod.find("metadata");
      if (md == pod.end() || !md->is_object()) continue;
      auto uid = md->find("uid");
      if (uid != md->end() && uid->is_string()) uids.insert(uid->get<std::string>());
    }
    options.continueToken = page.continueToken;
  } while (!options.continueToken.empty());
  return uids;
}

}  // namespace

Reply handleRequest(const RegionSources& sources, const std::string& method, const std::string& path) {
  if (method != "GET" && method != "HEAD") return {405, "text/plain", "use GET\n"};
  if (path == "/healthz") return {200, "text/plain", "ok\n"};
  if (path != "/metrics") return {404, "text/plain", "not found (paths: /metrics, /healthz)\n"};
  std::vector<std::string> problems;
  auto regions = scanAll(sources, &problems);
  for (const auto& p : problems) log::warning("monitor: ", p);
  return {200, "text/plain; version=0.0.4", renderMetrics(regions)};
}

int monitorCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto flags = parseFlags(args);
  if (!flags.ok()) {
    if (flags.error().code == 1) {
      out << kUsage;
      return 0;
    }
    err << "tessera monitor: " << flags.error().message << "\n" << kUsage;
    return 2;
  }
  const Flags& f = *flags;
  // Before any thread starts: only sigwait takes the termination signals.
  api::blockTerminationSignals();

  std::unique_ptr<cache::ClusterClient> client;
  if (f.inCluster || !f.kubeconfig.empty()) {
    auto rc = f.inCluster ? cache::inClusterConfig() : cache::loadKubeconfig(f.kubeconfig, f.context);
    if (!rc.ok()) {
      err << "tessera monitor: " << rc.error().message << "\n";
      return 1;
    }
    cache::HttpClientOptions co;
    co.qps = 2;
    co.burst = 4;
    co.ioThreads = 1;
    auto made = cache::makeHttpClient(*rc, co);
    if (!made.ok()) {
      err << "tessera monitor: " << made.error().message << "\n";
      return 1;
    }
    client = std::move(*made);
  } else {
    log::info("monitor: no API access (--in-cluster or --kubeconfig): region folders of gone pods are kept");
  }

  const RegionSources sources{f.podsDir, f.regionDir};
  cache::HttpServer server(
      [sources](const std::string& method, const std::string& path) {
        Reply r = handleRequest(sources, method, path);
        return cache::HttpReply{r.code, r.contentType, r.body};
      },
      f.address, static_cast<uint16_t>(f.port));
  if (auto st = server.start(); !st.ok()) {
    err << "tessera monitor: " << st.error().message << "\n";
    return 1;
  }
  log::info("monitor: regions in ", f.podsDir.empty() ? "" : podVolumeRegionDir(f.podsDir, "*"),
            f.podsDir.empty() || f.regionDir.empty() ? "" : " and ", f.regionDir, "; metrics on ", f.address, ":",
            server.port(), " (/metrics /healthz)");

  Cleaner cleaner(f.regionDir, f.staleGrace);
  while (true) {
    if (client && !f.regionDir.empty()) {
      // Folders first, pods second: a folder listed before the pods belongs to a listed pod
      // unless that pod is gone (the API object exists before the kubelet makes the folder).
      const std::vector<std::string> folders = cleaner.folders();
      auto uids = podsOnNode(*client, f.nodeName);
      if (!uids.ok()) {
        log::warning("monitor: listing the pods of node ", f.nodeName, ": ", uids.error().message,
                     " (nothing removed this round)");
      } else {
        for (const auto& gone : cleaner.sweep(folders, *uids, static_cast<int64_t>(std::time(nullptr))))
          log::info("monitor: removed the region folder of gone pod ", gone);
      }
    }
    if (int sig = api::waitForTerminationSignal(f.cleanupInterval * 1000); sig > 0) {
      log::info("monitor: signal ", sig, ", exiting");
      server.stop();
      return 0;
    }
  }
}

}  // namespace tessera::monitor
