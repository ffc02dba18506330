// `tessera reserve` as a child process against the test API server, with the fake NVML of the
// isolation tests (two 8 GiB GPUs, UUIDs GPU-7e55e7a0-0000-4000-8000-00000000000<i>) found through
// LD_LIBRARY_PATH: the pod's annotations appear, SIGTERM ends it with exit 0; without NVML, or
// without a way to tell its GPU, it exits 1 with a clear message.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"

namespace {

namespace fs = std::filesystem;
using namespace tessera;
using cache::Json;

fs::path tempDir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("tessera-reserve-it-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

/// A `tessera reserve` child with its own environment; the destructor kills it if still running.
class ReserveProcess {
 public:
  ReserveProcess(std::vector<std::string> args, const std::map<std::string, std::string>& env,
                 const std::string& name) {
    log_ = (tempDir() / (name + ".log")).string();
    args.insert(args.begin(), {TESSERA_BINARY, "reserve"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> envStrings;
    for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : envStrings) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
  }
  ~ReserveProcess() {
    if (pid_ > 0) signalAndWait(SIGKILL);
  }
  /// Sends `sig` and reaps; returns the wait status.
  int signalAndWait(int sig) {
    ::kill(pid_, sig);
    return wait();
  }
  int wait() {
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

template <class Cond>
bool eventually(Cond cond, int seconds = 60) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval, not a timing assumption
  }
  return false;
}

std::string kubeconfig(const std::string& url) {
  const fs::path kc = tempDir() / "kubeconfig";
  std::ofstream(kc) << "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                       "clusters: [{name: t, cluster: {server: \""
                    << url
                    << "\"}}]\n"
                       "contexts: [{name: t, context: {cluster: t}}]\n";
  return kc.string();
}

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
  const std::string kc = kubeconfig(server.url());
  createReservationPod(cluster, "r1");
  createReservationPod(cluster, "r2");

  SECTION("by index, pod from the downward-API variables") {
    ReserveProcess p({"--kubeconfig", kc},
                     {{"LD_LIBRARY_PATH", TESSERA_FAKE_DRIVER_DIR},
                      {"NVIDIA_VISIBLE_DEVICES", "1"},
                      {"POD_NAME", "r1"},
                      {"POD_NAMESPACE", "tessera-reservation"}},
                     "reserve-r1");
    INFO(p.log());
    REQUIRE(eventually([&] { return !annotation(cluster, "r1", "tessera.dev/gpu-uuid").empty(); }));
    CHECK(annotation(cluster, "r1", "tessera.dev/gpu-uuid") == "GPU-7e55e7a0-0000-4000-8000-000000000001");
    CHECK(annotation(cluster, "r1", "tessera.dev/gpu-memory-mib") == "8192");
    // The other annotations and labels stay (a merge patch).
    auto pod = cluster.get(api::Kind::Pod, "tessera-reservation", "r1");
    CHECK((*pod)["metadata"]["labels"]["tessera.dev/gpu-group"] == "g-r1");
    const int status = p.signalAndWait(SIGTERM);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(p.log().find("annotated pod tessera-reservation/r1 with "
                       "tessera.dev/gpu-uuid=GPU-7e55e7a0-0000-4000-8000-000000000001") != std::string::npos);
  }
  SECTION("by UUID, pod from flags, NVML library by path") {
    ReserveProcess p({"--kubeconfig", kc, "--pod-name", "r2", "--pod-namespace", "tessera-reservation",
                      "--nvml-library", std::string(TESSERA_FAKE_DRIVER_DIR) + "/libnvidia-ml.so.1"},
                     {{"NVIDIA_VISIBLE_DEVICES", "GPU-7e55e7a0-0000-4000-8000-000000000000"},
                      {"FAKE_CUDA_DEVICE_MEMORY", "25769803776"}},
                     "reserve-r2");
    INFO(p.log());
    REQUIRE(eventually([&] { return !annotation(cluster, "r2", "tessera.dev/gpu-uuid").empty(); }));
    CHECK(annotation(cluster, "r2", "tessera.dev/gpu-uuid") == "GPU-7e55e7a0-0000-4000-8000-000000000000");
    CHECK(annotation(cluster, "r2", "tessera.dev/gpu-memory-mib") == "24576");
    const int status = p.signalAndWait(SIGINT);
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
  const std::string kc = kubeconfig(server.url());
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    int exitCode;
    std::string message;
  };
  const std::string fake = TESSERA_FAKE_DRIVER_DIR;
  const std::vector<Case> cases = {
      {"no NVML",
       {"--kubeconfig", kc, "--nvml-library", "/nonexistent/libnvidia-ml.so.1"},
       {{"POD_NAME", "r9"}, {"POD_NAMESPACE", "tessera-reservation"}},
       1,
       "tessera reserve: pod tessera-reservation/r9: cannot load the NVIDIA management library "
       "/nonexistent/libnvidia-ml.so.1"},
      {"two GPUs and no NVIDIA_VISIBLE_DEVICES",
       {"--kubeconfig", kc},
       {{"LD_LIBRARY_PATH", fake}, {"POD_NAME", "r9"}, {"POD_NAMESPACE", "tessera-reservation"}},
       1,
       "NVML sees 2 GPUs and NVIDIA_VISIBLE_DEVICES=\"\" does not name exactly one of them"},
      {"a UUID NVML does not know",
       {"--kubeconfig", kc},
       {{"LD_LIBRARY_PATH", fake},
        {"NVIDIA_VISIBLE_DEVICES", "GPU-nope"},
        {"POD_NAME", "r9"},
        {"POD_NAMESPACE", "tessera-reservation"}},
       1,
       "NVML sees 2 GPUs and NVIDIA_VISIBLE_DEVICES=\"GPU-nope\": no GPU with that UUID"},
      {"an index out of range",
       {"--kubeconfig", kc},
       {{"LD_LIBRARY_PATH", fake},
        {"NVIDIA_VISIBLE_DEVICES", "5"},
        {"POD_NAME", "r9"},
        {"POD_NAMESPACE", "tessera-reservation"}},
       1,
       "NVML sees 2 GPUs and NVIDIA_VISIBLE_DEVICES=\"5\": no GPU with that index"},
      {"no pod name",
       {"--kubeconfig", kc},
       {{"LD_LIBRARY_PATH", fake}},
       2,
       "the pod's name is unknown: set POD_NAME (downward API metadata.name) or --pod-name"},
      {"the pod does not exist",
       {"--kubeconfig", kc},
       {{"LD_LIBRARY_PATH", fake},
        {"NVIDIA_VISIBLE_DEVICES", "0"},
        {"POD_NAME", "gone"},
        {"POD_NAMESPACE", "tessera-reservation"}},
       1,
       "tessera reserve: annotating pod tessera-reservation/gone:"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    ReserveProcess p(c.args, c.env, "reserve-fail");
    const int status = p.wait();
    INFO(p.log());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == c.exitCode);
    CHECK(p.log().find(c.message) != std::string::npos);
  }
  server.stop();
}
