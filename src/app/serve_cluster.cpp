// `tessera serve-cluster FILE`: a scenario's cluster served over HTTP, for kubectl and for tests.
#include <csignal>
#include <memory>
#include <mutex>
#include <optional>
#include <fstream>
#include <sstream>

#include "tessera/api/convert.h"
#include "tessera/api/flags.h"
#include "tessera/api/signals.h"
#include "tessera/app/registry.h"
#include "tessera/app/run.h"
#include "tessera/app/ui_state.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/http_server.h"
#include "tessera/framework/config.h"
#include "tessera/framework/session.h"

namespace tessera::app {

api::Status loadScenarioObjects(const std::string& path, cache::MemoryCluster& cluster, api::Time start) {
  std::ifstream in(path);
  if (!in) return api::makeError(path + ": cannot open file");
  std::stringstream buf;
  buf << in.rdbuf();
  auto docs = api::yamlToJson(buf.str());
  if (!docs.ok()) return api::makeError(path + ": " + docs.error().message);
  if (docs->size() != 1 || !docs->front().is_object()) return api::makeError(path + ": not a scenario (one YAML map)");
  const cache::Json& doc = docs->front();
  if (!doc.contains("objects")) return api::Status::success();
  const cache::Json& objs = doc["objects"];
  if (!objs.is_array()) return api::makeError(path + ": objects: must be a list of manifests");
  int64_t missing = 0;
  for (const auto& o : objs)
    if (!(o.is_object() && o.contains("metadata") && o["metadata"].is_object() &&
          o["metadata"].contains("creationTimestamp")))
      ++missing;
  int64_t k = 0;
  for (size_t i = 0; i < objs.size(); ++i) {
    cache::Json obj = objs[i];
    const std::string where = path + ": objects[" + std::to_string(i) + "]";
    if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object())
      return api::makeError(where + ": must be a manifest with metadata");
    auto kind = api::kindOf(obj);
    if (!kind.ok()) return api::makeError(where + ": " + kind.error().message);
    if (api::kindInfo(*kind).namespaced && !obj["metadata"].contains("namespace")) obj["metadata"]["namespace"] = "default";
    if (!obj["metadata"].contains("creationTimestamp"))
      obj["metadata"]["creationTimestamp"] = api::formatTime(start + api::Duration{-(missing - k++) * 1000});
    auto r = cluster.create(*kind, obj);
    if (!r.ok()) return api::makeError(where + ": " + r.error().message);
  }
  return api::Status::success();
}

namespace {
const char* const kServeClusterUsage =
    "usage: tessera serve-cluster FILE [--address 127.0.0.1] [--port N] [--ui-port N] [--v 0]\n"
    "                             [--log-format text|json]\n"
    "  --ui-port N  the web UI of the embedded cluster on --address (0: any free port; default: off)\n";

/// The web UI of the embedded cluster (docs/ui.md): what it holds as a scheduler with the default
/// config sees it. Each request takes a snapshot through a cache of its own and opens a session
/// without running actions: queue figures are this moment's; the reasons of pending pods are those
/// the scheduler running against the cluster wrote on them (condition PodScheduled).
class ClusterUi {
 public:
  ClusterUi(cache::ClusterClient& cluster, const api::Clock& clock)
      : clock_(clock), config_(framework::loadConfig(builtinRegistry(), nullptr).value()), cache_(cluster, clock) {}
  api::Status start() { return cache_.start(); }
  std::string stateJson() {
    std::lock_guard<std::mutex> lock(mu_);
    framework::Session session(cache_.snapshot(), config_, clock_);
    session.open();
    const framework::SessionResult r = session.close();
    return uiStateJson(&r, {}, clock_.now(), "serve-cluster", config_.schedulerName).dump();
  }

 private:
  std::mutex mu_;
  const api::Clock& clock_;
  framework::Config config_;
  cache::Cache cache_;
};
}  // namespace

int serveClusterCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (api::helpRequested(args)) {
    out << kServeClusterUsage;
    return 0;
  }
  std::string file, address = "127.0.0.1";
  int port = 0, uiPort = -1;
  api::FlagCursor flag(args);
  while (flag.next()) {
    const std::string& a = flag.name();
    auto fail = [&](const std::string& message) {
      err << "tessera serve-cluster: " << message << "\n";
      return 2;
    };
    auto applied = applyLogFlag(a, [&] { return flag.value(); });
    if (!applied.ok()) return fail(applied.error().message);
    if (*applied) continue;
    if (a == "--address" || a == "--port" || a == "--ui-port") {
      auto v = flag.value();
      if (!v.ok()) return fail(v.error().message);
      if (a == "--address") address = *v;
      else if (a == "--port") port = std::atoi(v->c_str());
      else uiPort = std::atoi(v->c_str());
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown flag " + a);
    } else {
      file = a;
    }
  }
  if (file.empty()) {
    err << kServeClusterUsage;
    return 2;
  }
  api::blockTerminationSignals();
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  if (auto st = loadScenarioObjects(file, cluster, clock.now()); !st.ok()) {
    err << "tessera serve-cluster: " << st.error().message << "\n";
    return 1;
  }
  cache::ApiServerOptions so;
  so.host = address;
  so.port = static_cast<uint16_t>(port);
  so.kubeletPeriodMs = 200;
  so.bookmarkIntervalMs = 60'000;
  so.clock = &clock;
  cache::ApiServer server(cluster, so);
  if (auto st = server.start(); !st.ok()) {
    err << "tessera serve-cluster: " << st.error().message << "\n";
    return 1;
  }
  std::unique_ptr<ClusterUi> clusterUi;
  std::optional<cache::HttpServer> ui;
  if (uiPort >= 0) {
    clusterUi = std::make_unique<ClusterUi>(cluster, clock);
    if (auto st = clusterUi->start(); !st.ok()) {
      err << "tessera serve-cluster: web UI: " << st.error().message << "\n";
      return 1;
    }
    ui.emplace(
        [&](const std::string& method, const std::string& path) -> cache::HttpReply {
          if (method != "GET") return {405, "text/plain", "the UI is read-only\n"};
          if (path == "/" || path == "/index.html") return {200, "text/html; charset=utf-8", std::string(uiPage())};
          if (path == "/api/v1/state") return {200, "application/json", clusterUi->stateJson()};
          return {404, "text/plain", "not found\n"};
        },
        address, static_cast<uint16_t>(uiPort), /*threads=*/1);
    if (auto st = ui->start(); !st.ok()) {
      err << "tessera serve-cluster: web UI: " << st.error().message << "\n";
      return 1;
    }
    out << "web UI on http://" << address << ":" << ui->port() << "/\n";
  }
  out << "serving " << file << " at " << server.url() << "\n"
      << "  kubectl --server " << server.url() << " get pods -A\n"
      << "  kubeconfig for tessera run: clusters[].cluster.server: " << server.url() << "\n"
      << std::flush;
  const int sig = api::waitForTerminationSignal();
  out << "tessera serve-cluster: signal " << sig << ", stopping\n";
  if (ui) ui->stop();
  server.stop();
  return 0;
}

}  // namespace tessera::app
