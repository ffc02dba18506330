#pragma once
// Test helpers for integration tests that run the real `tessera run` binary as a child process
// against the test API server: DaemonProcess and eventually(); ChildProcess for other subcommands.
#include <catch2/catch.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tessera/api/convert.h"
#include "tessera/cache/memory_cluster.h"

extern char** environ;

namespace tessera::testing {

/// A per-process scratch directory under the system temp dir, one per `prefix` (created if needed).
inline std::filesystem::path scratchDir(const std::string& prefix) {
  auto d = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

/// A child process (argv[0] is the binary) with stdout+stderr appended to `logFile`. Its environment
/// is this process's plus `env` ("NAME=value" entries, which replace inherited variables of the same
/// name), or only `env` with Environment::Only. The destructor kills it (SIGKILL) if still running.
class ChildProcess {
 public:
  enum class Environment { Inherit, Only };

  ChildProcess(std::vector<std::string> args, std::string logFile, std::vector<std::string> env = {},
               Environment environment = Environment::Inherit)
      : log_(std::move(logFile)) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> envs;
    if (environment == Environment::Inherit) {
      for (char** e = environ; *e; ++e) {
        const std::string_view entry(*e);
        const std::string_view name = entry.substr(0, entry.find('=') + 1);  // "NAME="
        const bool replaced =
            std::any_of(env.begin(), env.end(), [&](const std::string& v) { return v.rfind(name, 0) == 0; });
        if (!replaced) envs.emplace_back(entry);
      }
    }
    envs.insert(envs.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
  }
  ~ChildProcess() { kill(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// Sends `sig` without waiting (SIGHUP: reload the config file).
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  /// Waits for the process to exit by itself; returns its wait status.
  int wait() {
    if (pid_ <= 0) return -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  /// Sends `sig` and reaps the process; returns its wait status (or -1 if it was not running).
  int kill(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }
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

/// Writes a kubeconfig pointing at `url` (no auth) and returns its path.
inline std::string writeKubeconfig(const std::filesystem::path& dir, const std::string& name, const std::string& url) {
  const auto kc = dir / ("kubeconfig-" + name);
  std::ofstream(kc) << "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                       "clusters: [{name: t, cluster: {server: \"" << url << "\"}}]\n"
                       "contexts: [{name: t, context: {cluster: t}}]\n";
  return kc.string();
}

/// `tessera run` (the binary at `binary`) as a child process against the API server at `url`, with
/// its kubeconfig, a config file (schedulePeriod 200ms), health on an ephemeral port, a short
/// debounce and short leases in namespace `leaseNamespace`; `extra` flags come last (they win).
/// Files go to `dir`, named after `identity`. `env`: as ChildProcess's (added to this process's).
class DaemonProcess : public ChildProcess {
 public:
  DaemonProcess(const std::string& binary, const std::filesystem::path& dir, const std::string& url,
                const std::string& identity, std::vector<std::string> extra = {},
                const std::string& leaseNamespace = "default", std::vector<std::string> env = {})
      : ChildProcess(args(binary, dir, url, identity, std::move(extra), leaseNamespace),
                     (dir / ("daemon-" + identity + ".log")).string(), std::move(env)) {}

 private:
  static std::vector<std::string> args(const std::string& binary, const std::filesystem::path& dir,
                                       const std::string& url, const std::string& identity,
                                       std::vector<std::string> extra, const std::string& leaseNamespace) {
    std::ofstream(dir / "config.yaml") << "schedulePeriod: 200ms\n";
    std::vector<std::string> a = {binary, "run", "--kubeconfig", writeKubeconfig(dir, identity, url),
                                  "--health-port", "0", "--health-address", "127.0.0.1", "--identity", identity,
                                  "--lease-namespace", leaseNamespace, "--lease-duration", "3s",
                                  "--renew-deadline", "2s", "--retry-period", "200ms", "--debounce", "10ms",
                                  "--config", (dir / "config.yaml").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

/// Creates the objects of YAML manifests (documents separated by "---") in `cluster`, in order;
/// fails the test naming the object when one is refused.
inline void createObjects(cache::MemoryCluster& cluster, const std::string& yaml) {
  auto docs = api::yamlToJson(yaml);
  REQUIRE(docs.ok());
  for (const auto& d : *docs) {
    if (d.is_null()) continue;
    auto kind = api::kindOf(d);
    REQUIRE(kind.ok());
    auto created = cluster.create(*kind, d);
    INFO(d.dump());
    REQUIRE(created.ok());
  }
}

/// Polls `cond` until it holds; the deadline only guards against a hang.
template <class Cond>
bool eventually(Cond cond, int seconds = 90, int pollMillis = 20) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(pollMillis));  // polling interval, not a timing assumption
  }
  return false;
}

/// GET http://127.0.0.1:port/path: the body, or "" when it cannot be read.
inline std::string httpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  const size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

}  // namespace tessera::testing
