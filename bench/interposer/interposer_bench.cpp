#include "interposer_bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace tessera::bench {

namespace {

constexpr std::size_t kAllocBytes = 1 << 20;

struct Options {
  std::uint64_t iterations = 100000;
  std::vector<int> threads = {1, 8};
  int repeat = 3;
};

struct Paths {
  std::string worker;
  std::string interposer;
  std::string fakeDriverDir;
};

// Baked in at build time; overridable for relocated installs.
std::string locate(const char* envName, const char* baked, const char* besideExe) {
  if (const char* env = std::getenv(envName); env != nullptr && env[0] != '\0') return env;
  if (baked[0] != '\0' && access(baked, R_OK) == 0) return baked;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/'));
    std::string candidate = dir + "/" + besideExe;
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return baked;
}

bool parse(int argc, char** argv, Options* opt) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    auto valueOf = [&](const std::string& name, std::string* out) {
      if (arg == name && i + 1 < argc) {
        *out = argv[++i];
        return true;
      }
      if (arg.rfind(name + "=", 0) == 0) {
        *out = arg.substr(name.size() + 1);
        return true;
      }
      return false;
    };
    std::string v;
    if (valueOf("--iterations", &v)) {
      opt->iterations = std::strtoull(v.c_str(), nullptr, 10);
      if (opt->iterations == 0) return false;
    } else if (valueOf("--repeat", &v)) {
      opt->repeat = std::max(1, std::atoi(v.c_str()));
    } else if (valueOf("--threads", &v)) {
      opt->threads.clear();
      std::stringstream list(v);
      std::string item;
      while (std::getline(list, item, ',')) {
        int t = std::atoi(item.c_str());
        if (t <= 0) return false;
        opt->threads.push_back(t);
      }
      if (opt->threads.empty()) return false;
    } else if (arg == "--help" || arg == "-h") {
      return false;
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "tessera-bench interposer: unknown option %s\n", arg.c_str());
      return false;
    }
    // Anything else (e.g. the subcommand name itself) is ignored.
  }
  return true;
}

struct Sample {
  bool ok = false;
  double cpuNs = 0;
  double wallNs = 0;
  std::string error;
};

// What one worker run measures: alloc+free pairs or kernel launches, with or without the
// interposer, and any extra environment (a core limit, the fake's GPU count).
struct Case {
  const char* mode = "alloc";
  bool preload = false;
  std::vector<std::string> env;
};

Sample runWorker(const Paths& paths, const Options& opt, int threads, const Case& c, const std::string& region) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) == 0 || std::strncmp(*e, "LD_LIBRARY_PATH=", 16) == 0 ||
        std::strncmp(*e, "GPU_MEMORY_LIMIT=", 17) == 0 || std::strncmp(*e, "GPU_CORE_LIMIT", 14) == 0 ||
        std::strncmp(*e, "TESSERA_", 8) == 0 || std::strncmp(*e, "FAKE_CUDA_", 10) == 0) {
      continue;
    }
    env.emplace_back(*e);
  }
  env.push_back("LD_LIBRARY_PATH=" + paths.fakeDriverDir);
  if (c.preload) {
    env.push_back("LD_PRELOAD=" + paths.interposer);
    env.push_back("GPU_MEMORY_LIMIT=1099511627776");  // 1 TiB: never the limiting factor here
    env.push_back("TESSERA_ISOLATION_REGION=" + region);
  }
  for (const auto& e : c.env) env.push_back(e);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string t = std::to_string(threads), n = std::to_string(opt.iterations), b = std::to_string(kAllocBytes),
              m = c.mode;
  std::vector<char*> args = {const_cast<char*>(paths.worker.c_str()), t.data(), n.data(), b.data(), m.data(), nullptr};

  Sample sample;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    sample.error = "pipe failed";
    return sample;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, paths.worker.c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    sample.error = "cannot start " + paths.worker + ": " + std::strerror(rc);
    return sample;
  }
  std::string text;
  char buf[1024];
  ssize_t got;
  while ((got = read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(got));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::map<std::string, std::string> kv;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || kv.count("cpu_ns_per_pair") == 0) {
    sample.error = "worker failed (status " + std::to_string(status) + ", failures=" + kv["failures"] + ")";
    return sample;
  }
  sample.ok = true;
  sample.cpuNs = std::strtod(kv["cpu_ns_per_pair"].c_str(), nullptr);
  sample.wallNs = std::strtod(kv["wall_ns_per_pair"].c_str(), nullptr);
  return sample;
}

// Best of `repeat` runs: the least disturbed by the rest of the machine.
Sample best(const Paths& paths, const Options& opt, int threads, const Case& c, const std::string& region) {
  Sample result;
  for (int r = 0; r < opt.repeat; ++r) {
    Sample s = runWorker(paths, opt, threads, c, region);
    if (!s.ok) return s;
    if (!result.ok || s.cpuNs < result.cpuNs) result = s;
  }
  return result;
}

}  // namespace

int runInterposerBench(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) {
    std::fprintf(stderr, "usage: tessera-bench interposer [--iterations N] [--threads 1,8] [--repeat R]\n");
    return 2;
  }
  const Paths paths{locate("TESSERA_INTERPOSER_BENCH_WORKER", TESSERA_BENCH_WORKER_PATH,
                           "tessera-interposer-bench-worker"),
                    locate("TESSERA_INTERPOSER_LIB", TESSERA_INTERPOSER_LIB_PATH, "libtessera-cuda.so"),
                    locate("TESSERA_FAKE_CUDA_DIR", TESSERA_FAKE_CUDA_DIR_PATH, "isolation-fake-driver")};

  char dir[] = "/dev/shm/tessera-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string region = std::string(dir) + "/region";

  std::printf("interposer benchmark: cuMemAlloc_v2 + cuMemFree_v2 of %zu bytes, fake driver, %llu pairs per thread, "
              "best of %d\n",
              kAllocBytes, static_cast<unsigned long long>(opt.iterations), opt.repeat);
  std::printf("%8s %14s %14s %12s %14s %16s\n", "threads", "baseline ns", "interposed ns", "added ns",
              "added per call", "added ns (wall)");
  std::string json = "{\"benchmark\":\"interposer\",\"alloc_bytes\":" + std::to_string(kAllocBytes) +
                     ",\"iterations_per_thread\":" + std::to_string(opt.iterations) + ",\"results\":[";
  bool ok = true;
  for (std::size_t i = 0; i < opt.threads.size(); ++i) {
    const int threads = opt.threads[i];
    Sample base = best(paths, opt, threads, Case{"alloc", false, {}}, region);
    Sample hooked = base.ok ? best(paths, opt, threads, Case{"alloc", true, {}}, region) : Sample{};
    if (!base.ok || !hooked.ok) {
      std::fprintf(stderr, "tessera-bench interposer: %s\n", (!base.ok ? base : hooked).error.c_str());
      ok = false;
      break;
    }
    char row[512];
    const double added = hooked.cpuNs - base.cpuNs;
    std::snprintf(row, sizeof row, "%8d %14.1f %14.1f %12.1f %14.1f %16.1f\n", threads, base.cpuNs, hooked.cpuNs,
                  added, added / 2, hooked.wallNs - base.wallNs);
    std::fputs(row, stdout);
    char entry[512];
    std::snprintf(entry, sizeof entry,
                  "%s{\"threads\":%d,\"baseline_ns_per_pair\":%.1f,\"interposed_ns_per_pair\":%.1f,"
                  "\"added_ns_per_pair\":%.1f,\"added_ns_per_hooked_call\":%.1f,"
                  "\"baseline_wall_ns_per_pair\":%.1f,\"interposed_wall_ns_per_pair\":%.1f}",
                  i == 0 ? "" : ",", threads, base.cpuNs, hooked.cpuNs, added, added / 2, base.wallNs, hooked.wallNs);
    json += entry;
  }
  json += "]";

  // Kernel launches: the compute limit's cost. With GPU_CORE_LIMIT set the bucket never runs dry
  // here (the fake's kernels take no device time, so the pod never shows as busy and the watcher
  // keeps it open): what is measured is the launch path's fixed cost, one atomic subtraction, plus
  // cuCtxGetDevice when the process sees more than one GPU.
  std::printf("\nkernel launches: cuLaunchKernel (128 blocks, no device time), fake driver, %llu per thread, best of %d\n",
              static_cast<unsigned long long>(opt.iterations), opt.repeat);
  std::printf("%8s %12s %12s %10s %16s %10s %17s %10s\n", "threads", "baseline ns", "hooked ns", "added ns",
              "core limit ns", "added ns", "limit, 2 GPUs ns", "added ns");
  json += ",\"launch_results\":[";
  for (std::size_t i = 0; ok && i < opt.threads.size(); ++i) {
    const int threads = opt.threads[i];
    const Case cases[] = {
        {"launch", false, {"FAKE_CUDA_DEVICES=1"}},
        {"launch", true, {"FAKE_CUDA_DEVICES=1"}},
        {"launch", true, {"FAKE_CUDA_DEVICES=1", "GPU_CORE_LIMIT=50"}},
        {"launch", true, {"GPU_CORE_LIMIT=50"}},
    };
    Sample s[4];
    for (int k = 0; k < 4; ++k) {
      s[k] = best(paths, opt, threads, cases[k], region);
      if (!s[k].ok) {
        std::fprintf(stderr, "tessera-bench interposer: %s\n", s[k].error.c_str());
        ok = false;
        break;
      }
    }
    if (!ok) break;
    char row[512];
    std::snprintf(row, sizeof row, "%8d %12.1f %12.1f %10.1f %16.1f %10.1f %17.1f %10.1f\n", threads, s[0].cpuNs,
                  s[1].cpuNs, s[1].cpuNs - s[0].cpuNs, s[2].cpuNs, s[2].cpuNs - s[0].cpuNs, s[3].cpuNs,
                  s[3].cpuNs - s[0].cpuNs);
    std::fputs(row, stdout);
    char entry[512];
    std::snprintf(entry, sizeof entry,
                  "%s{\"threads\":%d,\"baseline_ns_per_launch\":%.1f,\"hooked_ns_per_launch\":%.1f,"
                  "\"added_ns_per_launch\":%.1f,\"core_limit_ns_per_launch\":%.1f,"
                  "\"core_limit_added_ns_per_launch\":%.1f,\"core_limit_two_gpus_ns_per_launch\":%.1f,"
                  "\"core_limit_two_gpus_added_ns_per_launch\":%.1f}",
                  i == 0 ? "" : ",", threads, s[0].cpuNs, s[1].cpuNs, s[1].cpuNs - s[0].cpuNs, s[2].cpuNs,
                  s[2].cpuNs - s[0].cpuNs, s[3].cpuNs, s[3].cpuNs - s[0].cpuNs);
    json += entry;
  }
  json += "],\"target_added_ns_per_hooked_call\":100,\"ok\":";
  json += ok ? "true" : "false";
  json += "}";
  unlink(region.c_str());
  rmdir(dir);
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace tessera::bench
