// tessera monitor: regions written by real processes (the interposer's own Region class, in forked
// children), read back read-only, served as Prometheus text over HTTP on 127.0.0.1, and the folders
// of gone pods removed. No sleeps: children signal readiness through a pipe and wait on another.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include <catch2/catch.hpp>

#include "region.h"
#include "tessera/cache/http_server.h"
#include "tessera/monitor/monitor.h"

using namespace tessera;  // NOLINT

namespace {

constexpr uint64_t kMiB = 1ULL << 20;
const char* const kUuid = "GPU-7e55e7a0-0000-4000-8000-000000000000";

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tessera-monitor-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

/// What one pretend process of a pod does to its region before it reports ready.
struct Work {
  std::string container;
  uint64_t bytes = 0;
  int refusals = 0;
  uint64_t limit = 1ULL << 30;
  std::string podUid = "5d1c0a4e-uid", podNamespace = "ml", podName = "trainer-0";
};

/// A forked child holding a slot in a region until release() (or kill()).
class Writer {
 public:
  Writer(const std::string& path, const Work& w) {
    int ready[2], hold[2];
    REQUIRE(pipe(ready) == 0);
    REQUIRE(pipe(hold) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(hold[1]);
      interposer::Region region;
      char error[512];
      interposer::ProcessIdentity who;
      who.podUid = w.podUid.c_str();
      who.podNamespace = w.podNamespace.c_str();
      who.podName = w.podName.c_str();
      who.container = w.container.c_str();
      interposer::Uuid uuid{};
      uuid.bytes[0] = 0x7e, uuid.bytes[1] = 0x55, uuid.bytes[2] = 0xe7, uuid.bytes[3] = 0xa0, uuid.bytes[6] = 0x40,
      uuid.bytes[8] = 0x80;
      uint64_t limit = 0, used = 0;
      bool ok = region.open(path.c_str(), error, sizeof error) && region.attachProcess(who, error, sizeof error);
      const int dev = ok ? region.registerDevice(uuid, w.limit, &limit) : -1;
      ok = dev >= 0 && (w.bytes == 0 || region.reserve(dev, w.bytes, limit, &used));
      for (int i = 0; ok && i < w.refusals; ++i) region.countRefusal(dev);
      const char status = ok ? '1' : '0';
      if (write(ready[1], &status, 1) != 1) _exit(3);
      char c;
      while (read(hold[0], &c, 1) > 0) {}
      _exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    hold_ = hold[1];
    char status = 0;
    REQUIRE(read(ready[0], &status, 1) == 1);
    ::close(ready[0]);
    REQUIRE(status == '1');
  }
  ~Writer() { release(); }
  /// Lets the child exit normally; its slot stays claimed but its lock is gone (a dead process).
  void release() {
    if (pid_ <= 0) return;
    ::close(hold_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int hold_ = -1;
};

std::string podFolder(const TempDir& dir, const std::string& uid) {
  const std::string folder = dir.path + "/" + uid;
  std::filesystem::create_directories(folder);
  return folder;
}

/// The value of the sample `name{labels}` in Prometheus text, or -1.
double sample(const std::string& text, const std::string& name, const std::map<std::string, std::string>& labels) {
  std::string want = name + "{";
  bool first = true;
  for (const auto& [k, v] : labels) {  // prometheus-cpp writes labels sorted by name
    want += (first ? "" : ",") + k + "=\"" + v + "\"";
    first = false;
  }
  want += "} ";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(want, 0) == 0) return std::stod(line.substr(want.size()));
  }
  return -1;
}

/// GET over a plain socket (Connection: close); returns the whole response.
std::string httpGet(uint16_t port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return response;
}

}  // namespace

TEST_CASE("monitor: a pod's region read back per container and GPU, live processes only") {
  TempDir dir;
  const std::string path = podFolder(dir, "5d1c0a4e-uid") + "/gpu.region";
  Writer main(path, {"main", 300 * kMiB, 0});
  Writer main2(path, {"main", 100 * kMiB, 0});
  Writer sidecar(path, {"sidecar", 200 * kMiB, 3});
  {
    Writer gone(path, {"loader", 50 * kMiB, 1});  // exits without freeing: charged, but not used
  }
  auto region = monitor::readRegion(path);
  REQUIRE(region.ok());
  CHECK(region->uid == "5d1c0a4e-uid");
  CHECK(region->namespace_ == "ml");
  CHECK(region->name == "trainer-0");
  CHECK(region->liveProcesses == 3);
  REQUIRE(region->gpus.size() == 1);
  CHECK(region->gpus[0].uuid == kUuid);
  CHECK(region->gpus[0].limit == (1ULL << 30));
  CHECK(region->gpus[0].charged == 650 * kMiB);  // the dead process's 50 MiB wait to be reclaimed
  CHECK(region->gpus[0].refused == 4);
  REQUIRE(region->containers.size() == 3);
  CHECK(region->containers[0].container == "main");
  CHECK(region->containers[0].used == 400 * kMiB);
  CHECK(region->containers[0].processes == 2);
  CHECK(region->containers[1].container == "sidecar");
  CHECK(region->containers[1].used == 200 * kMiB);
  CHECK(region->containers[1].refused == 3);
  CHECK(region->containers[2].container == "loader");
  CHECK(region->containers[2].used == 0);
  CHECK(region->containers[2].processes == 0);
  CHECK(region->containers[2].refused == 1);  // a counter outlives the process

  const std::string text = monitor::renderMetrics({*region});
  const std::map<std::string, std::string> main_{
      {"namespace", "ml"}, {"pod", "trainer-0"}, {"container", "main"}, {"uuid", kUuid}};
  CHECK(sample(text, "tessera_gpu_memory_used_bytes", main_) == 400.0 * kMiB);
  CHECK(sample(text, "tessera_gpu_processes", main_) == 2);
  CHECK(sample(text, "tessera_gpu_alloc_refused_total",
               {{"namespace", "ml"}, {"pod", "trainer-0"}, {"container", "sidecar"}, {"uuid", kUuid}}) == 3);
  CHECK(sample(text, "tessera_gpu_memory_limit_bytes", {{"namespace", "ml"}, {"pod", "trainer-0"}, {"uuid", kUuid}}) ==
        1024.0 * kMiB);
  CHECK(text.find("# TYPE tessera_gpu_alloc_refused_total counter") != std::string::npos);
  CHECK(text.find("# TYPE tessera_gpu_memory_used_bytes gauge") != std::string::npos);

  // Read-only is enough: the monitor needs no write access to a region.
  REQUIRE(chmod(path.c_str(), 0444) == 0);
  CHECK(monitor::readRegion(path).ok());
}

TEST_CASE("monitor: regions that are not ours are skipped with a reason") {
  TempDir dir;
  const std::string bad = podFolder(dir, "bad") + "/gpu.region";
  FILE* f = std::fopen(bad.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("not a region", f);
  std::fclose(f);
  podFolder(dir, "no-cuda-yet");  // a folder without a region: nothing to say
  Writer ok(podFolder(dir, "good") + "/gpu.region", {"main", kMiB, 0});
  std::vector<std::string> problems;
  auto regions = monitor::scanRegions(dir.path, &problems);
  REQUIRE(regions.size() == 1);
  CHECK(regions[0].dirName == "good");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("not a version 2 accounting region") != std::string::npos);
}

TEST_CASE("monitor: /metrics over HTTP on 127.0.0.1, from a region a test process writes") {
  TempDir dir;
  Writer writer(podFolder(dir, "9f00-uid") + "/gpu.region",
                {"main", 123 * kMiB, 2, 1ULL << 30, "9f00-uid", "team-a", "job-7"});
  const monitor::RegionSources sources{"", dir.path};
  cache::HttpServer server(
      [sources](const std::string& method, const std::string& path) {
        monitor::Reply r = monitor::handleRequest(sources, method, path);
        return cache::HttpReply{r.code, r.contentType, r.body};
      },
      "127.0.0.1", 0);
  REQUIRE(server.start().ok());
  const std::string metrics = httpGet(server.port(), "/metrics");
  INFO(metrics);
  CHECK(metrics.rfind("HTTP/1.1 200", 0) == 0);
  const std::map<std::string, std::string> labels{
      {"namespace", "team-a"}, {"pod", "job-7"}, {"container", "main"}, {"uuid", kUuid}};
  const std::string body = metrics.substr(metrics.find("\r\n\r\n") + 4);
  CHECK(sample(body, "tessera_gpu_memory_used_bytes", labels) == 123.0 * kMiB);
  CHECK(sample(body, "tessera_gpu_alloc_refused_total", labels) == 2);
  CHECK(sample(body, "tessera_gpu_processes", labels) == 1);
  CHECK(httpGet(server.port(), "/healthz").rfind("HTTP/1.1 200", 0) == 0);
  CHECK(httpGet(server.port(), "/nope").rfind("HTTP/1.1 404", 0) == 0);

  // The writer exits: the next scrape shows the container with nothing in use.
  writer.release();
  const std::string after = httpGet(server.port(), "/metrics");
  CHECK(sample(after.substr(after.find("\r\n\r\n") + 4), "tessera_gpu_memory_used_bytes", labels) == 0);
  server.stop();
}

TEST_CASE("monitor: regions in the pods' emptyDirs under the kubelet's folder, and in the hostPath layout") {
  // The kubelet's layout: <pods>/<uid>/volumes/kubernetes.io~empty-dir/<volume>/ (the webhook's
  // default), beside a pod of the older hostPath layout admitted before the upgrade.
  TempDir pods, legacy;
  const std::string a = monitor::podVolumeRegionDir(pods.path, "aaaa-uid");
  CHECK(a == pods.path + "/aaaa-uid/volumes/kubernetes.io~empty-dir/tessera-regions");
  std::filesystem::create_directories(a);
  std::filesystem::create_directories(pods.path + "/cccc-uid/volumes/kubernetes.io~empty-dir/cache");  // not ours
  std::filesystem::create_directories(pods.path + "/dddd-uid/volumes/kubernetes.io~empty-dir/tessera-regions");
  Writer inPod(a + "/gpu.region", {"main", 5 * kMiB, 0, 1ULL << 30, "aaaa-uid", "ml", "nb-0"});
  Writer inLegacy(podFolder(legacy, "bbbb-uid") + "/gpu.region",
                  {"main", 7 * kMiB, 0, 1ULL << 30, "bbbb-uid", "ml", "old-0"});

  auto fromPods = monitor::scanPodVolumes(pods.path);
  REQUIRE(fromPods.size() == 1);
  CHECK(fromPods[0].dirName == "aaaa-uid");
  CHECK(fromPods[0].name == "nb-0");

  std::vector<std::string> problems;
  auto all = monitor::scanAll({pods.path, legacy.path}, &problems);
  CHECK(problems.empty());
  REQUIRE(all.size() == 2);
  CHECK(all[0].dirName == "aaaa-uid");
  CHECK(all[1].dirName == "bbbb-uid");
  CHECK(all[1].name == "old-0");
  CHECK(monitor::scanAll({"", legacy.path}).size() == 1);
  CHECK(monitor::scanAll({pods.path, ""}).size() == 1);

  monitor::Reply r = monitor::handleRequest({pods.path, legacy.path}, "GET", "/metrics");
  CHECK(r.code == 200);
  CHECK(sample(r.body, "tessera_gpu_memory_used_bytes",
               {{"namespace", "ml"}, {"pod", "nb-0"}, {"container", "main"}, {"uuid", kUuid}}) == 5.0 * kMiB);
  CHECK(sample(r.body, "tessera_gpu_memory_used_bytes",
               {{"namespace", "ml"}, {"pod", "old-0"}, {"container", "main"}, {"uuid", kUuid}}) == 7.0 * kMiB);
}

TEST_CASE("monitor: folders of gone pods are removed after the grace, never while a process holds them") {
  TempDir dir;
  podFolder(dir, "live-pod");
  Writer deadWriter(podFolder(dir, "gone-dead") + "/gpu.region", {"main", kMiB, 0});
  deadWriter.release();                                                               // the pod's last process exited
  Writer busyWriter(podFolder(dir, "gone-busy") + "/gpu.region", {"main", kMiB, 0});  // force-deleted pod
  podFolder(dir, "gone-empty");
  const std::set<std::string> live{"live-pod"};

  monitor::Cleaner cleaner(dir.path, 100);
  auto folders = cleaner.folders();
  CHECK(folders == std::vector<std::string>{"gone-busy", "gone-dead", "gone-empty", "live-pod"});
  CHECK(cleaner.sweep(folders, live, 1000).empty());  // first seen missing
  CHECK(cleaner.sweep(cleaner.folders(), live, 1099).empty());
  CHECK(cleaner.sweep(cleaner.folders(), live, 1100) == std::vector<std::string>{"gone-dead", "gone-empty"});
  CHECK(std::filesystem::exists(dir.path + "/live-pod"));
  CHECK(std::filesystem::exists(dir.path + "/gone-busy/gpu.region"));
  CHECK_FALSE(std::filesystem::exists(dir.path + "/gone-dead"));

  // A folder whose pod comes back (a list that lagged) starts its grace again.
  CHECK(cleaner.sweep(cleaner.folders(), {"live-pod", "gone-busy"}, 1200).empty());
  busyWriter.release();
  CHECK(cleaner.sweep(cleaner.folders(), live, 1250).empty());
  CHECK(cleaner.sweep(cleaner.folders(), live, 1350) == std::vector<std::string>{"gone-busy"});
  CHECK(cleaner.folders() == std::vector<std::string>{"live-pod"});
}
