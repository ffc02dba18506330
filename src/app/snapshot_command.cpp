// `tessera snapshot`: a live cluster's scheduling inputs as a scenario file (snapshot.h), listed
// through the same HTTP client as `tessera run`.
#include <fstream>
#include <sstream>

#include "tessera/api/convert.h"
#include "tessera/api/flags.h"
#include "tessera/app/registry.h"
#include "tessera/app/run.h"
#include "tessera/app/snapshot.h"
#include "tessera/cache/http_client.h"
#include "tessera/framework/config.h"

namespace tessera::app {

namespace {

const char* const kSnapshotUsage =
    "usage: tessera snapshot (--kubeconfig PATH [--context NAME] | --in-cluster) [-o FILE]\n"
    "                        [--config FILE (the daemon's; default: built-in defaults)]\n"
    "                        [--scheduler-name NAME] [--anonymize] [--v 0] [--log-format text|json]\n"
    "Writes the cluster's scheduling inputs (nodes, pods of interest, PodGroups, Queues, Topologies,\n"
    "PriorityClasses, namespaces, workloads of pending pods, the config) as a scenario file that\n"
    "`tessera simulate FILE` replays. --anonymize renames every name consistently.\n";

struct SnapshotFlags {
  std::string kubeconfig, context, output, configFile, schedulerName;
  bool inCluster = false, anonymize = false;
};

api::Result<SnapshotFlags> parseSnapshotFlags(const std::vector<std::string>& args) {
  SnapshotFlags f;
  api::FlagCursor flag(args);
  while (flag.next()) {
    const std::string& a = flag.name();
    TESSERA_ASSIGN_OR_RETURN(const bool logFlag, applyLogFlag(a, [&] { return flag.value(); }));
    if (logFlag) continue;
    auto text = [&](std::string& out) -> api::Status {
      TESSERA_ASSIGN_OR_RETURN(out, flag.value());
      return api::Status::success();
    };
    api::Status st = api::Status::success();
    if (a == "--kubeconfig") st = text(f.kubeconfig);
    else if (a == "--context") st = text(f.context);
    else if (a == "--in-cluster") f.inCluster = flag.boolean();
    else if (a == "-o" || a == "--output") st = text(f.output);
    else if (a == "--config") st = text(f.configFile);
    else if (a == "--scheduler-name") st = text(f.schedulerName);
    else if (a == "--anonymize") f.anonymize = flag.boolean();
    else return api::makeError("unknown flag " + a);
    TESSERA_TRY(st);
  }
  if (f.inCluster == !f.kubeconfig.empty())
    return api::makeError("exactly one of --kubeconfig PATH and --in-cluster is required");
  return f;
}

/// The config file as the scenario's `config` map (validated as the daemon would load it), and the
/// scheduler name it sets.
api::Result<nlohmann::json> readConfig(const std::string& path, std::string& schedulerName) {
  if (path.empty()) {
    if (schedulerName.empty()) schedulerName = framework::Config{}.schedulerName;
    return nlohmann::json();
  }
  std::ifstream in(path);
  if (!in) return api::makeError("cannot read config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto config = framework::loadConfigYaml(builtinRegistry(), ss.str());
  if (!config.ok()) return api::makeError(path + ": " + config.error().message);
  auto docs = api::yamlToJson(ss.str());
  if (!docs.ok()) return api::makeError(path + ": " + docs.error().message);
  if (schedulerName.empty()) schedulerName = config->schedulerName;
  return docs->empty() || docs->front().is_null() ? nlohmann::json() : docs->front();
}

}  // namespace

int snapshotCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (api::helpRequested(args)) {
    out << kSnapshotUsage;
    return 0;
  }
  auto flags = parseSnapshotFlags(args);
  if (!flags.ok()) {
    err << "tessera snapshot: " << flags.error().message << "\n" << kSnapshotUsage;
    return 2;
  }
  auto fail = [&](const std::string& message) {
    err << "tessera snapshot: " << message << "\n";
    return 1;
  };
  SnapshotOptions options;
  options.schedulerName = flags->schedulerName;
  auto config = readConfig(flags->configFile, options.schedulerName);
  if (!config.ok()) return fail(config.error().message);
  options.config = std::move(config).value();
  options.anonymize = flags->anonymize;

  auto rc = flags->inCluster ? cache::inClusterConfig() : cache::loadKubeconfig(flags->kubeconfig, flags->context);
  if (!rc.ok()) return fail(rc.error().message);
  cache::HttpClientOptions co;
  co.qps = 0;  // a handful of paged lists: the server's Priority and Fairness bounds them
  co.maxRetries = 3;
  auto client = cache::makeHttpClient(*rc, co);
  if (!client.ok()) return fail(client.error().message);
  api::SystemClock clock;
  options.capturedAt = clock.now();
  options.source = "tessera snapshot of " + rc->server + " at " + api::formatTime(options.capturedAt);
  auto doc = captureScenario(**client, options);
  if (!doc.ok()) return fail(doc.error().message);

  const std::string text = "# " + std::string(options.anonymize ? "An anonymized" : "A") +
                           " snapshot of a cluster's scheduling inputs: `tessera simulate FILE` replays it.\n" +
                           toYaml(*doc);
  if (flags->output.empty() || flags->output == "-") {
    out << text << std::flush;
    return 0;
  }
  std::ofstream file(flags->output);
  if (!(file << text) || !file.flush()) return fail("cannot write " + flags->output);
  err << "tessera snapshot: wrote " << flags->output << " (" << (*doc)["objects"].size() << " objects)\n";
  return 0;
}

}  // namespace tessera::app
