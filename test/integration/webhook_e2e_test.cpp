// End to end over HTTP(S): a fractional pod made with generateName goes through the webhook (a real
// HTTPS client trusting the test CA), is created in the test API server, scheduled by `tessera run`
// (a child process), gets a reservation pod whose UUID the simulated kubelet reports (it plays the
// device plugin and `tessera reserve`), its GPU ConfigMap under the name the webhook chose, and is
// bound. Waits poll with generous deadlines as a safety net only.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <string>
#include <sys/wait.h>

#include "support/daemon_process.h"
#include "support/pod_security.h"
#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/webhook/server.h"
#include "webhook_tls.h"

namespace {

namespace fs = std::filesystem;
using namespace tessera;
using cache::Json;
using testing::eventually;

fs::path tempDir() { return testing::scratchDir("tessera-webhook-e2e"); }

Json gpuNode(const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.memory", "81920"}}}}},
              {"status",
               {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}}},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json defaultQueue() {
  const Json unlimited = {{"quota", "-1"}, {"limit", "-1"}, {"overQuotaWeight", "1"}};
  return Json{{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
              {"kind", "Queue"},
              {"metadata", {{"name", "default"}}},
              {"spec", {{"resources", {{"gpu", unlimited}, {"cpu", unlimited}, {"memory", unlimited}}}}}};
}

Json notebook() {
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"generateName", "nb-"}, {"annotations", {{"gpu-fraction", "0.5"}}}}},
      {"spec",
       {{"schedulerName", "tessera"},
        {"containers", {{{"name", "main"}, {"image", "pytorch"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}}};
}

std::string annotationOf(const Json& obj, const std::string& key) {
  const Json& md = obj["metadata"];
  if (!md.contains("annotations") || !md["annotations"].contains(key)) return "";
  return md["annotations"][key].get<std::string>();
}

}  // namespace

TEST_CASE("end to end: webhook mutation -> scheduling -> reservation pod -> UUID -> ConfigMap -> bind") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  REQUIRE(cluster.create(api::Kind::Queue, defaultQueue()).ok());
  REQUIRE(cluster.create(api::Kind::Node, gpuNode("gpu-1")).ok());
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;  // the simulated kubelet starts reservation pods and reports their UUIDs
  cache::ApiServer api(cluster, so);
  REQUIRE(api.start().ok());

  const auto pki = testing::makeTestPki({"localhost"}, {"127.0.0.1"}, 41);
  const std::string cert = (tempDir() / "tls.crt").string(), key = (tempDir() / "tls.key").string();
  testing::writeFileAtomically(cert, pki.serverCertPem);
  testing::writeFileAtomically(key, pki.serverKeyPem);
  webhook::ServerOptions wo;
  wo.address = "127.0.0.1";
  wo.port = 0;
  wo.certFile = cert;
  wo.keyFile = key;
  webhook::Server hook(wo);
  auto port = hook.start();
  REQUIRE(port.ok());

  // Admission as the API server does it: mutate, then name the pod (generateName), then store it.
  const Json admitted = testing::admitPod(*port, pki.caCertPem, notebook(), "ml");
  const std::string cmName = annotationOf(admitted, "tessera.dev/gpu-configmap");
  REQUIRE(cmName.rfind("nb-", 0) == 0);
  REQUIRE(cmName.size() == std::string("nb-xxxxx-tessera-gpu").size());
  // PodSecurity (issue 18, item 7): the admitted pod passes `baseline`.
  CHECK(testing::baselineViolations(admitted).empty());
  Json toCreate = admitted;
  toCreate["metadata"]["namespace"] = "ml";
  auto created = cluster.create(api::Kind::Pod, toCreate);
  REQUIRE(created.ok());
  const std::string podName = (*created)["metadata"]["name"];
  CHECK(podName + "-tessera-gpu" != cmName);  // the name the API server picked is not the one admission saw

  testing::DaemonProcess daemon(TESSERA_BINARY, tempDir(), api.url(), "e2e", {"--leader-elect=false"});
  INFO(daemon.log());
  REQUIRE(eventually([&] {
    auto p = cluster.get(api::Kind::Pod, "ml", podName);
    return p.ok() && !(*p)["spec"].value("nodeName", "").empty();
  }));
  auto pod = cluster.get(api::Kind::Pod, "ml", podName);
  REQUIRE(pod.ok());
  CHECK((*pod)["spec"]["nodeName"] == "gpu-1");
  CHECK((*pod)["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"] == cmName);

  // The reservation pod holds the GPU and reported its UUID.
  cache::ListOptions inReservations;
  inReservations.namespace_ = "tessera-reservation";
  auto reservations = cluster.list(api::Kind::Pod, inReservations);
  REQUIRE(reservations.ok());
  REQUIRE(reservations->items.size() == 1);
  const Json& r = reservations->items[0];
  CHECK(r["spec"]["nodeName"] == "gpu-1");
  CHECK(r["metadata"]["labels"].contains("tessera.dev/gpu-group"));
  const std::string uuid = annotationOf(r, "tessera.dev/gpu-uuid");
  CHECK(uuid.rfind("GPU-", 0) == 0);
  // As the daemon created it, it passes `restricted` (the namespace enforces it in deploy/).
  CHECK(testing::restrictedViolations(r).empty());

  // The ConfigMap, under the webhook's name, owned by the pod, with the GPU environment.
  auto cm = cluster.get(api::Kind::ConfigMap, "ml", cmName);
  REQUIRE(cm.ok());
  const Json& data = (*cm)["data"];
  CHECK(data["NVIDIA_VISIBLE_DEVICES"] == uuid);
  CHECK(data["GPU_PORTION"] == "0.5");
  CHECK(data["GPU_MEMORY_LIMIT"] == std::to_string(int64_t{40960} * 1024 * 1024));  // 0.5 × 81920 MiB
  CHECK(data["CUDA_DEVICE_MEMORY_LIMIT"] == data["GPU_MEMORY_LIMIT"]);
  REQUIRE((*cm)["metadata"].contains("ownerReferences"));
  CHECK((*cm)["metadata"]["ownerReferences"][0]["name"] == podName);
  CHECK((*cm)["metadata"]["ownerReferences"][0]["kind"] == "Pod");

  const int status = daemon.kill(SIGTERM);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  hook.stop();
  api.stop();
}
