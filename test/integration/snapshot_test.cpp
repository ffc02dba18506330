// Round trip of `tessera snapshot` (issue 17, item 6): `tessera serve-cluster` serves a scenario's
// cluster, `tessera run` schedules it, `tessera snapshot` captures it, and `tessera check` replays
// the captured file with the live daemon's placements as expectations. Before the daemon runs, with
// bound and new pending pods in between (a gang, a workload the pod grouper groups, another
// scheduler's pod), anonymized, and from the daemon's own /debug/snapshot. Waits poll with
// generous deadlines as a safety net only: "idle" is three cycles (the daemon's /metrics) with no
// change in placements.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/daemon_process.h"
#include "tessera/api/convert.h"
#include "tessera/cache/http_client.h"

using namespace tessera;
using nlohmann::json;
using testing::eventually;
using testing::httpGet;

namespace {

namespace fs = std::filesystem;

/// pod "ns/name" -> node ("" while pending): the pods of scheduler tessera that have not finished.
using Placements = std::map<std::string, std::string>;

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `tessera ARGS...` to completion; returns {exit code, its output}.
std::pair<int, std::string> runTessera(const fs::path& dir, const std::string& name, std::vector<std::string> args) {
  args.insert(args.begin(), TESSERA_BINARY);
  const fs::path log = dir / (name + ".log");
  fs::remove(log);
  testing::ChildProcess p(args, log.string());
  const int status = p.wait();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, readFile(log)};
}

int healthPort(const std::string& log) {
  std::smatch m;
  static const std::regex re("health and metrics on [0-9.]+:([0-9]+)");
  return std::regex_search(log, m, re) ? std::stoi(m[1]) : 0;
}

/// From one /metrics scrape: cycles run so far (-1 if absent), and binds and evictions in flight
/// after the last cycle.
std::pair<long, long> cyclesAndInFlight(int port) {
  const std::string metrics = httpGet(port, "/metrics");
  std::smatch m;
  static const std::regex cyclesRe("tessera_cycle_duration_seconds_count\\{phase=\"total\"\\} ([0-9.e+]+)");
  static const std::regex inFlightRe("tessera_binder_queue\\{what=\"in_flight\"\\} ([0-9.e+]+)");
  const long cycles = std::regex_search(metrics, m, cyclesRe) ? static_cast<long>(std::stod(m[1])) : -1;
  const long inFlight = std::regex_search(metrics, m, inFlightRe) ? static_cast<long>(std::stod(m[1])) : -1;
  return {cycles, inFlight};
}

/// `tessera serve-cluster FILE --port 0` and an HTTP client of the test's own.
struct ServedCluster {
  fs::path dir;
  testing::ChildProcess process;
  std::string url;
  std::unique_ptr<cache::ClusterClient> client;
  std::string kubeconfig;

  ServedCluster(const fs::path& d, const std::string& file)
      : dir(d), process({TESSERA_BINARY, "serve-cluster", file, "--port", "0"}, (d / "serve-cluster.log").string()) {
    static const std::regex re(" at (http://[0-9.]+:[0-9]+)");
    REQUIRE(eventually([&] {
      std::smatch m;
      const std::string log = process.log();
      if (!std::regex_search(log, m, re)) return false;
      url = m[1];
      return true;
    }));
    cache::RestConfig rc;
    rc.server = url;
    auto c = cache::makeHttpClient(rc);
    REQUIRE(c.ok());
    client = std::move(c).value();
    kubeconfig = testing::writeKubeconfig(dir, "snapshot", url);
  }

  Placements placements() {
    Placements out;
    auto pods = client->list(api::Kind::Pod);
    REQUIRE(pods.ok());
    for (const auto& p : pods->items) {
      if (p["spec"].value("schedulerName", "") != "tessera") continue;
      const std::string phase = p.contains("status") ? p["status"].value("phase", "") : "";
      if (phase == "Succeeded" || phase == "Failed" || p["metadata"].contains("deletionTimestamp")) continue;
      out[p["metadata"].value("namespace", "") + "/" + p["metadata"].value("name", "")] =
          p["spec"].value("nodeName", "");
    }
    return out;
  }

  void create(const std::string& yaml) {
    auto docs = api::yamlToJson(yaml);
    REQUIRE(docs.ok());
    for (auto& o : *docs) {
      if (o.is_null()) continue;
      auto kind = api::kindOf(o);
      REQUIRE(kind.ok());
      auto created = client->create(*kind, o);
      INFO(api::describeObject(o));
      REQUIRE(created.ok());
    }
  }
};

/// Runs until the daemon has gone three cycles without a placement changing and with nothing in
/// flight after the last one; returns the placements.
Placements untilIdle(ServedCluster& cluster, testing::DaemonProcess& daemon) {
  REQUIRE(eventually([&] { return healthPort(daemon.log()) > 0; }));
  const int port = healthPort(daemon.log());
  Placements last;
  long since = -1;
  const bool idle = eventually(
      [&] {
        const auto [now, inFlight] = cyclesAndInFlight(port);
        Placements p = cluster.placements();
        if (now < 1) return false;
        if (since < 0 || p != last) {
          last = std::move(p);
          since = now;
          return false;
        }
        return now >= since + 3 && inFlight == 0;
      },
      90, 50);
  INFO(daemon.log());
  REQUIRE(idle);
  return last;
}

/// The captured scenario with `cycles` cycles and then the live placements as expectations.
json withExpectations(const std::string& capturedYaml, const Placements& live, int cyclesToRun) {
  auto docs = api::yamlToJson(capturedYaml);
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 1);
  json doc = docs->front();
  json expect = {{"bound", json::object()}, {"pending", json::array()}};
  for (const auto& [pod, node] : live) {
    if (node.empty()) expect["pending"].push_back(pod);
    else expect["bound"][pod] = node;
  }
  doc["steps"] = json::array({json{{"cycles", cyclesToRun}}, json{{"expect", expect}}});
  return doc;
}

/// `tessera check` on the captured file with the live placements as expectations (written as JSON,
/// which is YAML): passes when the replay makes the live daemon's decisions.
void checkReplay(const fs::path& dir, const std::string& name, const std::string& captured, const Placements& live,
                 int cyclesToRun) {
  const fs::path file = dir / (name + "-replay.yaml");
  std::ofstream(file) << withExpectations(captured, live, cyclesToRun).dump(2);
  auto [rc, out] = runTessera(dir, name + "-check", {"check", file.string()});
  INFO("tessera check " << file.string() << ":\n" << out);
  CHECK(rc == 0);
}

/// Pods created while no daemon runs: a gang, a workload's pods with no PodGroup (the pod grouper
/// makes one), single pods, and another scheduler's pod already on a node.
const char* const kMorePods = R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: pair, namespace: ml}
spec: {minMember: 2, queue: research}
---
apiVersion: v1
kind: Pod
metadata: {name: pair-0, namespace: ml, annotations: {pod-group-name: pair}}
spec:
  schedulerName: tessera
  containers: [{name: c, image: x, resources: {requests: {cpu: "2", nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: pair-1, namespace: ml, annotations: {pod-group-name: pair}}
spec:
  schedulerName: tessera
  containers: [{name: c, image: x, resources: {requests: {cpu: "2", nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: foreign, namespace: ml}
spec:
  schedulerName: default-scheduler
  nodeName: l40s-c2
  containers: [{name: c, image: x, resources: {requests: {cpu: "2", nvidia.com/gpu: "2"}, limits: {nvidia.com/gpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: ml, labels: {tessera.dev/queue: research}}
spec:
  schedulerName: tessera
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: infer-big, namespace: ml, labels: {tessera.dev/queue: research}}
spec:
  schedulerName: tessera
  nodeSelector: {dedicated: inference}
  tolerations: [{key: dedicated, operator: Equal, value: inference, effect: NoSchedule}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "8", nvidia.com/gpu: "4"}, limits: {nvidia.com/gpu: "4"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: cpu-only, namespace: ml, labels: {tessera.dev/queue: research}}
spec:
  schedulerName: tessera
  containers: [{name: c, image: x, resources: {requests: {cpu: "40"}}}]
)";

/// A batch Job of 2 (min-member 2) whose pods name no PodGroup.
std::string jobPods(const std::string& jobUid) {
  std::string pods;
  for (const char* name : {"batch-0", "batch-1"})
    pods += std::string("---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: ") + name +
            "\n  namespace: ml\n  labels: {tessera.dev/queue: research}\n"
            "  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: batch, uid: " +
            jobUid +
            ", controller: true}]\nspec:\n  schedulerName: tessera\n"
            "  containers: [{name: c, image: x, resources: {requests: {cpu: \"4\"}}}]\n";
  return pods;
}

/// The objects of a captured file, in file order.
std::vector<json> capturedObjects(const std::string& yaml) {
  auto docs = api::yamlToJson(yaml);
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 1);
  return docs->front()["objects"].get<std::vector<json>>();
}

std::string keyOf(const json& o) {
  const std::string ns = o["metadata"].value("namespace", "");
  return ns.empty() ? o["metadata"].value("name", "") : ns + "/" + o["metadata"].value("name", "");
}

}  // namespace

TEST_CASE("snapshot: tessera snapshot of serve-cluster replays to the live daemon's decisions, anonymized too") {
  const fs::path dir = testing::scratchDir("tessera-snapshot-it");
  ServedCluster cluster(dir, std::string(TESSERA_SOURCE_DIR) + "/config/examples/demo.yaml");
  const std::string config = (dir / "config.yaml").string();
  std::ofstream(config) << "schedulePeriod: 200ms\n";  // what DaemonProcess writes: the running config

  // ---- 1. Nothing scheduled yet: the replay places what the daemon places.
  auto [rc1, out1] = runTessera(
      dir, "snapshot-1",
      {"snapshot", "--kubeconfig", cluster.kubeconfig, "--config", config, "-o", (dir / "before.yaml").string()});
  INFO(out1);
  REQUIRE(rc1 == 0);
  const std::string before = readFile(dir / "before.yaml");
  CHECK(before.find("schedulePeriod: \"200ms\"") != std::string::npos);
  Placements live1;
  {
    testing::DaemonProcess daemon(TESSERA_BINARY, dir, cluster.url, "first");
    live1 = untilIdle(cluster, daemon);
    CHECK(daemon.kill(SIGTERM) == 0);
  }
  CHECK(live1.at("ml/pretrain-0") != "");
  CHECK(live1.at("ml/sweep-0") == "");  // the demo's sweep gang fits nowhere
  checkReplay(dir, "before", before, live1, 3);

  // ---- 2. Bound pods, and new work placed among them: the replay starts from the same state.
  auto job = cluster.client->create(api::Kind::Job, json::parse(R"({"apiVersion": "batch/v1", "kind": "Job",
      "metadata": {"name": "batch", "namespace": "ml", "annotations": {"tessera.dev/min-member": "2"}},
      "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}})"));
  REQUIRE(job.ok());
  cluster.create(kMorePods + jobPods((*job)["metadata"]["uid"].get<std::string>()));
  auto [rc2, out2] = runTessera(
      dir, "snapshot-2",
      {"snapshot", "--kubeconfig", cluster.kubeconfig, "--config", config, "-o", (dir / "during.yaml").string()});
  INFO(out2);
  REQUIRE(rc2 == 0);
  auto [rc3, out3] = runTessera(dir, "snapshot-3",
                                {"snapshot", "--kubeconfig", cluster.kubeconfig, "--config", config, "--anonymize",
                                 "-o", (dir / "anonymized.yaml").string()});
  INFO(out3);
  REQUIRE(rc3 == 0);
  const std::string during = readFile(dir / "during.yaml");
  const std::string anonymized = readFile(dir / "anonymized.yaml");
  CHECK(during.find("kind: \"Job\"") != std::string::npos);  // the workload the grouper reads
  CHECK(during.find("\"foreign\"") != std::string::npos);    // another scheduler's pod holds GPUs
  Placements live2;
  {
    testing::DaemonProcess daemon(TESSERA_BINARY, dir, cluster.url, "second");
    live2 = untilIdle(cluster, daemon);
    CHECK(daemon.kill(SIGTERM) == 0);
  }
  CHECK(live2.at("ml/pretrain-0") == live1.at("ml/pretrain-0"));
  CHECK(live2.at("ml/infer-big") == "infer-1");
  checkReplay(dir, "during", during, live2, 3);

  // ---- 3. Anonymized: no original name, and the same placements under the new names. The two
  // captures list the same objects in the same order (the anonymizer renames, never reorders).
  const auto plainObjects = capturedObjects(during);
  const auto anonObjects = capturedObjects(anonymized);
  REQUIRE(plainObjects.size() == anonObjects.size());
  std::map<std::string, std::string> rename;  // "ns/pod" and node names
  std::set<std::string> originals = {"ml", "research", "pretrain", "sweep", "pair", "batch"};
  for (size_t i = 0; i < plainObjects.size(); ++i) {
    REQUIRE(plainObjects[i]["kind"] == anonObjects[i]["kind"]);
    rename[keyOf(plainObjects[i])] = keyOf(anonObjects[i]);
    if (plainObjects[i]["kind"] == "Pod" || plainObjects[i]["kind"] == "Node")
      originals.insert(plainObjects[i]["metadata"].value("name", ""));
  }
  for (const auto& name : originals) {
    INFO(name);
    CHECK(anonymized.find("\"" + name + "\"") == std::string::npos);
  }
  Placements anonLive;
  for (const auto& [pod, node] : live2) {
    INFO(pod << " -> " << node);
    REQUIRE(rename.count(pod) == 1);
    REQUIRE((node.empty() || rename.count(node) == 1));
    anonLive[rename[pod]] = node.empty() ? "" : rename[node];
  }
  checkReplay(dir, "anonymized", anonymized, anonLive, 3);
}

TEST_CASE("snapshot: tessera run serves /debug/snapshot on its health port; the replay keeps the settled state") {
  const fs::path dir = testing::scratchDir("tessera-snapshot-debug-it");
  ServedCluster cluster(dir, std::string(TESSERA_SOURCE_DIR) + "/config/examples/demo.yaml");
  testing::DaemonProcess daemon(TESSERA_BINARY, dir, cluster.url, "debug");
  const Placements live = untilIdle(cluster, daemon);
  const int port = healthPort(daemon.log());
  const std::string captured = httpGet(port, "/debug/snapshot");
  INFO(captured);
  REQUIRE(captured.find("kind: \"Pod\"") != std::string::npos);
  CHECK(captured.find("schedulePeriod: \"200ms\"") != std::string::npos);  // the running config
  checkReplay(dir, "debug", captured, live, 1);  // bound pods stay, pending ones still do not fit
  const std::string anonymized = httpGet(port, "/debug/snapshot/anonymized");
  CHECK(anonymized.find("kind: \"Pod\"") != std::string::npos);
  CHECK(anonymized.find("pretrain") == std::string::npos);
  CHECK(httpGet(port, "/healthz") == "ok\n");
  CHECK(daemon.kill(SIGTERM) == 0);

  testing::DaemonProcess off(TESSERA_BINARY, dir, cluster.url, "off", {"--debug-snapshot=false"});
  REQUIRE(
      eventually([&] { return healthPort(off.log()) > 0 && httpGet(healthPort(off.log()), "/healthz") == "ok\n"; }));
  CHECK(httpGet(healthPort(off.log()), "/debug/snapshot") == "not found\n");
  CHECK(off.kill(SIGTERM) == 0);
}
