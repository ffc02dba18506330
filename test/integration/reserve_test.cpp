// `tessera reserve` as a child process against the test API server, with the fake NVML of the
// isolation tests (two 8 GiB GPUs, UUIDs GPU-7e55e7a0-0000-4000-8000-00000000000<i>) found through
// LD_LIBRARY_PATH: the pod's annotations appear, SIGTERM ends it with exit 0; without NVML, or
// without a way to tell its GPU, it exits 1 with a clear message.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "support/daemon_process.h"
#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"

namespace {

namespace fs = std::filesystem;
using namespace tessera;
using cache::Json;

fs::path tempDir() { return testing::scratchDir("tessera-reserve-it"); }

/// `tessera reserve` with `args` and exactly `env` ("NAME=value") as its environment, its output in a
/// fresh `name`.log.
testing::ChildProcess reserve(std::vector<std::string> args, std::vector<std::string> env, const std::string& name) {
  args.insert(args.begin(), {TESSERA_BINARY, "reserve"});
  const fs::path log = tempDir() / (name + ".log");
  fs::remove(log);
  return testing::ChildProcess(std::move(args), log.string(), std::move(env), testing::ChildProcess::Environment::Only);
}

using testing::eventually;

void createReservationPod(cache::MemoryCluster& cluster, const std::string& name) {
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", "tessera-reservation"}, {"labels", {{"tessera.dev/gpu-group", "g-" + name}}}}},
      {"spec", {{"nodeName", "n1"}, {"containers", {{{"name", "reserve"}, {"image", "tessera"}}}}}}};
  REQUIRE(cluster.create(api::Kind::Pod, pod).ok());
}

std::string annotation(cache::MemoryCluster& cluster, const std::string& name, const std::string& key) {
  auto p = cluster.get(api::Kind::Pod, "tessera-reservation", name);
  if (!p.ok()) return "";
  const Json& md = (*p)["metadata"];
  if (!md.contains("annotations") || !md["annotations"].contains(key)) return "";
  return md["annotations"][key].get<std::string>();
}

}  // namespace

TEST_CASE("tessera reserve writes its GPU's UUID to its pod and exits 0 on SIGTERM") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  cache::ApiServer server(cluster);
  REQUIRE(server.start().ok());
  const std::string kc = testing::writeKubeconfig(tempDir(), "reserve", server.url());
  createReservationPod(cluster, "r1");
  createReservationPod(cluster, "r2");

  SECTION("by index, pod from the downward-API variables") {
    auto p = reserve({"--kubeconfig", kc},
                     {std::string("LD_LIBRARY_PATH=") + TESSERA_FAKE_DRIVER_DIR, "NVIDIA_VISIBLE_DEVICES=1",
                      "POD_NAME=r1", "POD_NAMESPACE=tessera-reservation"},
                     "reserve-r1");
    INFO(p.log());
    REQUIRE(eventually([&] { return !annotation(cluster, "r1", "tessera.dev/gpu-uuid").empty(); }, 60));
    CHECK(annotation(cluster, "r1", "tessera.dev/gpu-uuid") == "GPU-7e55e7a0-0000-4000-8000-000000000001");
    CHECK(annotation(cluster, "r1", "tessera.dev/gpu-memory-mib") == "8192");
    // The other annotations and labels stay (a merge patch).
    auto pod = cluster.get(api::Kind::Pod, "tessera-reservation", "r1");
    CHECK((*pod)["metadata"]["labels"]["tessera.dev/gpu-group"] == "g-r1");
    const int status = p.kill(SIGTERM);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(p.log().find("annotated pod tessera-reservation/r1 with "
                       "tessera.dev/gpu-uuid=GPU-7e55e7a0-0000-4000-8000-000000000001") != std::string::npos);
  }
  SECTION("by UUID, pod from flags, NVML library by path") {
    auto p = reserve({"--kubeconfig", kc, "--pod-name", "r2", "--pod-namespace", "tessera-reservation",
                      "--nvml-library", std::string(TESSERA_FAKE_DRIVER_DIR) + "/libnvidia-ml.so.1"},
                     {"NVIDIA_VISIBLE_DEVICES=GPU-7e55e7a0-0000-4000-8000-000000000000",
                      "FAKE_CUDA_DEVICE_MEMORY=25769803776"},
                     "reserve-r2");
    INFO(p.log());
    REQUIRE(eventually([&] { return !annotation(cluster, "r2", "tessera.dev/gpu-uuid").empty(); }, 60));
    CHECK(annotation(cluster, "r2", "tessera.dev/gpu-uuid") == "GPU-7e55e7a0-0000-4000-8000-000000000000");
    CHECK(annotation(cluster, "r2", "tessera.dev/gpu-memory-mib") == "24576");
    const int status = p.kill(SIGINT);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  server.stop();
}

TEST_CASE("tessera reserve fails clearly without NVML, without its GPU, or without its pod") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  cache::ApiServer server(cluster);
  REQUIRE(server.start().ok());
  const std::string kc = testing::writeKubeconfig(tempDir(), "reserve", server.url());
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::vector<std::string> env;
    int exitCode;
    std::string message;
  };
  const std::string fake = std::string("LD_LIBRARY_PATH=") + TESSERA_FAKE_DRIVER_DIR;
  const std::vector<Case> cases = {
      {"no NVML",
       {"--kubeconfig", kc, "--nvml-library", "/nonexistent/libnvidia-ml.so.1"},
       {"POD_NAME=r9", "POD_NAMESPACE=tessera-reservation"},
       1,
       "tessera reserve: pod tessera-reservation/r9: cannot load the NVIDIA management library "
       "/nonexistent/libnvidia-ml.so.1"},
      {"two GPUs and no NVIDIA_VISIBLE_DEVICES",
       {"--kubeconfig", kc},
       {fake, "POD_NAME=r9", "POD_NAMESPACE=tessera-reservation"},
       1,
       "NVML sees 2 GPUs and NVIDIA_VISIBLE_DEVICES=\"\" does not name exactly one of them"},
      {"a UUID NVML does not know",
       {"--kubeconfig", kc},
       {fake,
        "NVIDIA_VISIBLE_DEVICES=GPU-nope",
        "POD_NAME=r9",
        "POD_NAMESPACE=tessera-reservation"},
       1,
       "NVML sees 2 GPUs and NVIDIA_VISIBLE_DEVICES=\"GPU-nope\": no GPU with that UUID"},
      {"an index out of range",
       {"--kubeconfig", kc},
       {fake,
        "NVIDIA_VISIBLE_DEVICES=5",
        "POD_NAME=r9",
        "POD_NAMESPACE=tessera-reservation"},
       1,
       "NVML sees 2 GPUs and NVIDIA_VISIBLE_DEVICES=\"5\": no GPU with that index"},
      {"no pod name",
       {"--kubeconfig", kc},
       {fake},
       2,
       "the pod's name is unknown: set POD_NAME (downward API metadata.name) or --pod-name"},
      {"the pod does not exist",
       {"--kubeconfig", kc},
       {fake,
        "NVIDIA_VISIBLE_DEVICES=0",
        "POD_NAME=gone",
        "POD_NAMESPACE=tessera-reservation"},
       1,
       "tessera reserve: annotating pod tessera-reservation/gone:"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    auto p = reserve(c.args, c.env, "reserve-fail");
    const int status = p.wait();
    INFO(p.log());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == c.exitCode);
    CHECK(p.log().find(c.message) != std::string::npos);
  }
  server.stop();
}
