// End to end over HTTP(S): a fractional pod made with generateName goes through the webhook (a real
// HTTPS client trusting the test CA), is created in the test API server, scheduled by `tessera run`
// (a child process), gets a reservation pod whose UUID the simulated kubelet reports (it plays the
// device plugin and `tessera reserve`), its GPU ConfigMap under the name the webhook chose, and is
// bound. Waits poll with generous deadlines as a safety net only.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/webhook/server.h"
#include "webhook_tls.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace tessera;
using cache::Json;

fs::path tempDir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("tessera-webhook-e2e-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

template <class Cond>
bool eventually(Cond cond, int seconds = 90) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval, not a timing assumption
  }
  return false;
}

/// `tessera run` against `url`; SIGKILLed by the destructor if still running.
class Daemon {
 public:
  explicit Daemon(const std::string& url) {
    const fs::path kc = tempDir() / "kubeconfig";
    std::ofstream(kc) << "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                         "clusters: [{name: t, cluster: {server: \""
                      << url
                      << "\"}}]\n"
                         "contexts: [{name: t, context: {cluster: t}}]\n";
    std::ofstream(tempDir() / "config.yaml") << "schedulePeriod: 200ms\n";
    log_ = (tempDir() / "daemon.log").string();
    std::vector<std::string> args = {TESSERA_BINARY,
                                     "run",
                                     "--kubeconfig",
                                     kc.string(),
                                     "--health-port",
                                     "0",
                                     "--health-address",
                                     "127.0.0.1",
                                     "--leader-elect=false",
                                     "--debounce",
                                     "10ms",
                                     "--config",
                                     (tempDir() / "config.yaml").string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
  }
  ~Daemon() {
    if (pid_ > 0) stop(SIGKILL);
  }
  int stop(int sig) {
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

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
  Json toCreate = admitted;
  toCreate["metadata"]["namespace"] = "ml";
  auto created = cluster.create(api::Kind::Pod, toCreate);
  REQUIRE(created.ok());
  const std::string podName = (*created)["metadata"]["name"];
  CHECK(podName + "-tessera-gpu" != cmName);  // the name the API server picked is not the one admission saw

  Daemon daemon(api.url());
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

  const int status = daemon.stop(SIGTERM);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  hook.stop();
  api.stop();
}
