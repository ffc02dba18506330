// Fractional GPUs end to end through `tessera run` (a child process) against the test API server:
// reservation pod -> GPU UUID -> ConfigMap -> bind, a kill -9 between the reservation and the bind
// (nothing orphaned, the pod ends bound with a correct ConfigMap), and garbage collection back to
// zero reservation pods. Waits poll with generous deadlines as a safety net only.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <set>

#include "support/daemon_process.h"
#include "tessera/api/convert.h"
#include "tessera/app/run.h"
#include "tessera/cache/http_server.h"

using namespace tessera;
using cache::Json;
using testing::eventually;

namespace {

namespace fs = std::filesystem;

const char* const kCluster = R"(
objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
  - {apiVersion: v1, kind: Namespace, metadata: {name: tessera-reservation}}
  - apiVersion: scheduling.tessera.dev/v1alpha1
    kind: Queue
    metadata: {name: default}
    spec:
      resources:
        gpu: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {kubernetes.io/hostname: gpu-1, nvidia.com/gpu.memory: "81920", nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
    status:
      allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "2"}
      conditions: [{type: Ready, status: "True"}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: frac, namespace: team-a, annotations: {gpu-fraction: "0.5"}}
    spec:
      schedulerName: tessera
      containers:
        - {name: c, image: x, resources: {requests: {cpu: "1"}}}
)";

testing::DaemonProcess daemon(const std::string& url, const std::string& identity, std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), "--leader-elect=false");
  return testing::DaemonProcess(TESSERA_BINARY, testing::scratchDir("tessera-gpu-it"), url, identity, std::move(extra));
}

std::vector<Json> reservationPods(cache::MemoryCluster& cluster, bool includeTerminating = false) {
  cache::ListOptions o;
  o.namespace_ = "tessera-reservation";
  auto pods = cluster.list(api::Kind::Pod, o);
  REQUIRE(pods.ok());
  std::vector<Json> out;
  for (const auto& p : pods->items)
    if (includeTerminating || !p["metadata"].contains("deletionTimestamp")) out.push_back(p);
  return out;
}

std::string nodeOf(cache::MemoryCluster& cluster, const std::string& ns, const std::string& name) {
  auto p = cluster.get(api::Kind::Pod, ns, name);
  return p.ok() ? (*p)["spec"].value("nodeName", "") : "";
}

size_t configMapCount(cache::MemoryCluster& cluster) {
  auto cms = cluster.list(api::Kind::ConfigMap);
  REQUIRE(cms.ok());
  return cms->items.size();
}

/// kCluster in the embedded cluster, served over HTTP on 127.0.0.1 (kubelet every 50 ms).
struct Env {
  api::SystemClock clock;
  cache::MemoryCluster cluster{clock};
  std::unique_ptr<cache::ApiServer> server_;
  cache::ApiServer& server;

  explicit Env(const std::string& fileName) : server_(start(fileName)), server(*server_) {}

 private:
  std::unique_ptr<cache::ApiServer> start(const std::string& fileName) {
    const fs::path file = testing::scratchDir("tessera-gpu-it") / fileName;
    std::ofstream(file) << kCluster;
    REQUIRE(app::loadScenarioObjects(file.string(), cluster, clock.now()).ok());
    cache::ApiServerOptions so;
    so.kubeletPeriodMs = 50;
    auto s = std::make_unique<cache::ApiServer>(cluster, so);
    REQUIRE(s->start().ok());
    return s;
  }
};

}  // namespace

TEST_CASE("gpu: kill -9 between reservation and bind, restart: nothing orphaned, bound with a correct ConfigMap") {
  Env env("cluster.yaml");
  auto& cluster = env.cluster;
  auto& server = env.server;

  // The reservation pod will not report its GPU: the first daemon waits between reservation and bind.
  cluster.holdReservations(true);
  {
    auto first = daemon(server.url(), "first", {"--reservation-timeout", "10m"});
    REQUIRE(eventually([&] { return !reservationPods(cluster).empty(); }));
    INFO(first.log());
    first.kill(SIGKILL);
  }
  CHECK(nodeOf(cluster, "team-a", "frac").empty());  // killed before the bind
  cluster.holdReservations(false);  // the device plugin catches up

  auto second = daemon(server.url(), "second");
  const bool bound = eventually([&] { return !nodeOf(cluster, "team-a", "frac").empty(); });
  INFO(second.log());
  REQUIRE(bound);
  CHECK(nodeOf(cluster, "team-a", "frac") == "gpu-1");

  // Its group's reservation pod is the only one left (an unused one is collected), and the
  // ConfigMap names that reservation's GPU with half of 80 GiB.
  auto pod = cluster.get(api::Kind::Pod, "team-a", "frac");
  REQUIRE(pod.ok());
  const std::string group = (*pod)["metadata"]["labels"].value("tessera.dev/gpu-group", "");
  REQUIRE(!group.empty());
  REQUIRE(eventually([&] { return reservationPods(cluster).size() == 1; }));
  const Json res = reservationPods(cluster).front();
  CHECK(res["metadata"]["labels"].value("tessera.dev/gpu-group", "") == group);
  CHECK(res["spec"].value("nodeName", "") == "gpu-1");
  const std::string uuid = res["metadata"]["annotations"].value("tessera.dev/gpu-uuid", "");
  REQUIRE(!uuid.empty());
  auto cm = cluster.get(api::Kind::ConfigMap, "team-a", "frac-tessera-gpu");
  REQUIRE(cm.ok());
  CHECK((*cm)["data"].value("NVIDIA_VISIBLE_DEVICES", "") == uuid);
  CHECK((*cm)["data"].value("GPU_MEMORY_LIMIT", "") == std::to_string(40960LL * 1024 * 1024));
  CHECK((*cm)["data"].value("CUDA_DEVICE_MEMORY_LIMIT", "") == std::to_string(40960LL * 1024 * 1024));
  CHECK((*cm)["data"].value("GPU_PORTION", "") == "0.5");
  CHECK((*cm)["data"].value("GPU_CORE_LIMIT", "") == "50");  // the fraction: no tessera.dev/gpu-cores
  CHECK((*cm)["data"].value("CUDA_DEVICE_SM_LIMIT", "") == "50");
  CHECK((*cm)["data"].value("GPU_CORE_LIMIT_POLICY", "") == "strict");
  CHECK((*cm)["metadata"]["ownerReferences"][0].value("uid", "") == (*pod)["metadata"].value("uid", ""));
  CHECK(configMapCount(cluster) == 1);

  // The pod completes: its reservation goes; the pod is deleted: its ConfigMap goes with it.
  REQUIRE(cluster.finishPod("team-a", "frac", true).ok());
  REQUIRE(eventually([&] { return reservationPods(cluster, /*includeTerminating=*/true).empty(); }));
  REQUIRE(cluster.forceRemove(api::Kind::Pod, "team-a", "frac").ok());
  CHECK(configMapCount(cluster) == 0);
  CHECK(second.kill(SIGTERM) == 0);
  server.stop();
}

TEST_CASE("gpu: a reservation pod that never reports its GPU fails the bind with a reason and is deleted") {
  Env env("cluster-timeout.yaml");
  auto& cluster = env.cluster;
  auto& server = env.server;
  cluster.holdReservations(true);
  auto d = daemon(server.url(), "timeout", {"--reservation-timeout", "300ms"});
  // The binder gives up, deletes the reservation pod and says why in an event on the pod.
  auto failedBindEvent = [&] {
    auto evs = cluster.list(api::Kind::Event);
    if (!evs.ok()) return false;
    for (const auto& e : evs->items)
      if (e.value("reason", "") == "FailedBinding" && e["involvedObject"].value("name", "") == "frac" &&
          e.value("message", "").find("did not report its GPU UUID") != std::string::npos)
        return true;
    return false;
  };
  const bool reported = eventually(failedBindEvent);
  INFO(d.log());
  REQUIRE(reported);
  CHECK(nodeOf(cluster, "team-a", "frac").empty());
  // Once the device plugin works again, the pod is bound.
  cluster.holdReservations(false);
  REQUIRE(eventually([&] { return !nodeOf(cluster, "team-a", "frac").empty(); }));
  REQUIRE(eventually([&] { return reservationPods(cluster).size() == 1; }));
  CHECK(d.kill(SIGTERM) == 0);
  server.stop();
}

TEST_CASE("gpu: with one bind worker, a bind waiting for its GPU UUID does not hold up a CPU pod's bind") {
  Env env("cluster-parked.yaml");
  auto& cluster = env.cluster;
  auto& server = env.server;
  cluster.holdReservations(true);  // a slow device plugin
  auto d = daemon(server.url(), "parked", {"--bind-workers", "1", "--reservation-timeout", "10m", "--v", "4"});
  REQUIRE(eventually([&] { return !reservationPods(cluster).empty(); }));  // frac's bind waits for the UUID
  // A CPU pod arrives: the one worker is free for it (issue 18, item 8; before, it sat in frac's wait).
  Json cpu = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "cpu"}, {"namespace", "team-a"}}},
              {"spec",
               {{"schedulerName", "tessera"},
                {"containers", {{{"name", "c"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}}};
  REQUIRE(cluster.create(api::Kind::Pod, cpu).ok());
  const bool cpuBound = eventually([&] { return !nodeOf(cluster, "team-a", "cpu").empty(); }, 30);
  INFO(d.log());
  REQUIRE(cpuBound);
  CHECK(nodeOf(cluster, "team-a", "frac").empty());  // still waiting for its GPU
  cluster.holdReservations(false);                   // the device plugin catches up: frac goes on
  const bool fracBound = eventually([&] { return nodeOf(cluster, "team-a", "frac") == "gpu-1"; });
  INFO(d.log());
  std::string res;
  for (const auto& p : reservationPods(cluster, true)) res += p.dump() + "\n";
  INFO(res);
  REQUIRE(fracBound);
  CHECK(d.kill(SIGTERM) == 0);
  server.stop();
}

TEST_CASE("gpu: under hard isolation a fractional pod the webhook did not wire stays pending with a reason") {
  Env env("cluster-unwired.yaml");
  auto& cluster = env.cluster;
  auto& server = env.server;
  auto d = daemon(server.url(), "unwired", {"--isolation", "hard"});
  // kCluster's pod `frac` was admitted without the webhook (no TESSERA_ISOLATION_REGION).
  auto reason = [&] {
    auto evs = cluster.list(api::Kind::Event);
    if (!evs.ok()) return false;
    for (const auto& e : evs->items)
      if (e.value("reason", "") == "FailedScheduling" && e["involvedObject"].value("name", "") == "frac" &&
          e.value("message", "").find("not wired for hard GPU isolation") != std::string::npos)
        return true;
    return false;
  };
  const bool refused = eventually(reason);
  INFO(d.log());
  REQUIRE(refused);
  CHECK(nodeOf(cluster, "team-a", "frac").empty());
  CHECK(reservationPods(cluster).empty());
  // Recreated while the webhook is up (its wiring present), the same pod is bound.
  auto pod = cluster.get(api::Kind::Pod, "team-a", "frac");
  REQUIRE(pod.ok());
  Json wired = *pod;
  wired["metadata"] = {{"name", "frac-wired"}, {"namespace", "team-a"}, {"annotations", {{"gpu-fraction", "0.5"}}}};
  wired["spec"]["containers"][0]["env"] = {{{"name", "TESSERA_ISOLATION_REGION"}, {"value", "/var/run/tessera/region"}}};
  wired.erase("status");
  REQUIRE(cluster.create(api::Kind::Pod, wired).ok());
  CHECK(eventually([&] { return !nodeOf(cluster, "team-a", "frac-wired").empty(); }));
  CHECK(nodeOf(cluster, "team-a", "frac").empty());
  CHECK(d.kill(SIGTERM) == 0);
  server.stop();
}
