// The pod grouper in `tessera run` against the test API server: a PyTorchJob's pods, written as its
// operator would, get a PodGroup owned by the job and are bound whole or not at all; deleting the
// job deletes the PodGroup. Waits poll the cluster (safety net only; no wall-clock assertions).
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <unistd.h>

#include "support/daemon_process.h"
#include "tessera/app/run.h"
#include "tessera/cache/http_server.h"

using namespace tessera;
using cache::Json;

namespace {

namespace fs = std::filesystem;

fs::path grouperTempDir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("tessera-grouper-it-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

int boundWithLabel(cache::MemoryCluster& cluster, const std::string& key, const std::string& value) {
  int n = 0;
  auto pods = cluster.list(api::Kind::Pod);  // held: a range-for over a temporary's member dangles
  REQUIRE(pods.ok());
  for (const auto& p : pods->items)
    if (p["metadata"].value("labels", Json::object()).value(key, "") == value &&
        !p["spec"].value("nodeName", "").empty())
      ++n;
  return n;
}

bool scheduledFalse(cache::MemoryCluster& cluster, const std::string& name) {
  auto p = cluster.get(api::Kind::Pod, "default", name);
  if (!p.ok() || !p->contains("status")) return false;
  for (const auto& c : (*p)["status"].value("conditions", Json::array()))
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return true;
  return false;
}

Json workerPod(const std::string& name, const Json& job) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"labels", {{"job", job["metadata"]["name"]}, {"training.kubeflow.org/replica-type", "worker"}}},
            {"ownerReferences", Json::array({{{"apiVersion", "kubeflow.org/v1"},
                                              {"kind", "PyTorchJob"},
                                              {"name", job["metadata"]["name"]},
                                              {"uid", job["metadata"]["uid"]},
                                              {"controller", true}}})}}},
          {"spec",
           {{"schedulerName", "tessera"},
            {"containers",
             {{{"name", "main"},
               {"image", "busybox"},
               {"resources", {{"requests", {{"cpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
}

}  // namespace

TEST_CASE("daemon: a PyTorchJob is gang-scheduled with no hand-written PodGroup, which goes with the job") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  // Queue default, node n1 (3 GPUs), PyTorchJob train (master + 3 workers) and its 4 pods.
  REQUIRE(app::loadScenarioObjects(std::string(TESSERA_SOURCE_DIR) + "/test/scenarios/workloads/pytorchjob-gang.yaml",
                                   cluster, clock.now())
              .ok());
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  testing::DaemonProcess d(TESSERA_BINARY, grouperTempDir(), server.url(), "grouper", {"--leader-elect=false"});
  INFO(d.log());

  // Room for 3 of 4: the gang waits whole.
  REQUIRE(testing::eventually([&] { return scheduledFalse(cluster, "train-worker-2"); }));
  CHECK(boundWithLabel(cluster, "job", "train") == 0);
  auto pg = cluster.get(api::Kind::PodGroup, "default", "pg-pytorchjob-train");
  REQUIRE(pg.ok());
  CHECK((*pg)["spec"]["minMember"] == 4);
  CHECK((*pg)["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob");
  CHECK((*pg)["metadata"]["ownerReferences"][0]["uid"] ==
        cluster.get(api::Kind::PyTorchJob, "default", "train").value()["metadata"]["uid"]);

  // A second job of 4 submitted while the daemon runs, on the same room for 3: not split either
  // (the cycle that first sees its pods sees them in their gang).
  Json late = {{"apiVersion", "kubeflow.org/v1"},
               {"kind", "PyTorchJob"},
               {"metadata", {{"name", "late"}, {"namespace", "default"}}},
               {"spec", {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 4}}}}}}}};
  late = cluster.create(api::Kind::PyTorchJob, late).value();
  for (const char* name : {"late-worker-0", "late-worker-1", "late-worker-2", "late-worker-3"})
    REQUIRE(cluster.create(api::Kind::Pod, workerPod(name, late)).ok());
  REQUIRE(testing::eventually([&] { return scheduledFalse(cluster, "late-worker-3"); }));
  CHECK(boundWithLabel(cluster, "job", "late") == 0);
  CHECK(boundWithLabel(cluster, "job", "train") == 0);

  // One more GPU: the older job binds whole, the other still waits whole.
  Json n2 = cluster.get(api::Kind::Node, "", "n1").value();
  n2["metadata"] = {{"name", "n2"}, {"labels", {{"kubernetes.io/hostname", "n2"}}}};
  n2["status"]["allocatable"]["nvidia.com/gpu"] = "1";
  REQUIRE(cluster.create(api::Kind::Node, n2).ok());
  REQUIRE(testing::eventually([&] { return boundWithLabel(cluster, "job", "train") == 4; }));
  CHECK(boundWithLabel(cluster, "job", "late") == 0);

  // The job goes: its PodGroup goes with it.
  REQUIRE(cluster.remove(api::Kind::PyTorchJob, "default", "train").ok());
  CHECK(cluster.get(api::Kind::PodGroup, "default", "pg-pytorchjob-train").error().code == 404);
  CHECK(d.kill(SIGTERM) == 0);
  server.stop();
}
