// tessera-bench: benchmarks that print numbers (never part of the test suite).
//   tessera-bench cycle [--shape NAME] [--nodes N] [--pods N] [--cycles N] [--churn N] [--fill F] [--seed S]
//   tessera-bench suite [--nodes N] [--pods N] [--cycles N]   (every shape, one JSON line each)
//   tessera-bench e2e [--nodes N] [--pods N] ...   (the daemon over HTTP vs the API server's ceiling)
//   tessera-bench interposer ...   (hard-isolation interposer overhead; see docs/isolation.md)
// The last line of every benchmark is one JSON object.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_generator.h"
#include "cycle_bench.h"
#include "e2e_bench.h"
#include "topology_bench.h"
#include "tessera/api/malloc_tuning.h"
#include "tessera/app/registry.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/config.h"
#include "tessera/framework/session.h"

#ifdef TESSERA_HAVE_INTERPOSER_BENCH
#include "interposer/interposer_bench.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// CPU time of this thread in ms: unlike wall time, not inflated when other processes share the cores.
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double peakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

bool flag(int& i, int argc, char** argv, const char* name, std::string& value) {
  if (std::strcmp(argv[i], name) != 0) return false;
  if (i + 1 >= argc) {
    std::fprintf(stderr, "tessera-bench: %s needs a value\n", name);
    std::exit(2);
  }
  value = argv[++i];
  return true;
}

/// The default config with `actions` ("all" keeps the default list; else a comma list).
tessera::api::Result<tessera::framework::Config> benchConfig(const std::string& actions) {
  using namespace tessera;
  if (actions == "all") return framework::loadConfig(app::builtinRegistry(), nullptr);
  nlohmann::json overrides = {{"actions", nlohmann::json::array()}};
  size_t start = 0;
  while (start <= actions.size()) {
    const size_t comma = actions.find(',', start);
    overrides["actions"].push_back(actions.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return framework::loadConfig(app::builtinRegistry(), &overrides);
}

/// `reclaim`: KAI's ReclaimLargeJobs: every GPU busy with preemptible 1-GPU pods of an over-share
/// queue, nodes/10 pending 8-GPU pods of a starved queue. `consolidate`: every node runs --busy
/// 1-GPU pods, nodes/10 pending pods of --claim GPUs fit nowhere until pods move (--busy 7
/// --claim 8: a node is freed only by moving its 7 pods to 7 other nodes, the shape the victim
/// sequence cannot solve and node by node must). One cycle with every action, repeated.
int victimBench(int argc, char** argv, bool consolidate) {
  using namespace tessera;
  int nodes = 1000, repeat = 3, busy = 5, claim = 4;
  const char* name = consolidate ? "consolidate" : "reclaim";
  for (int i = 2; i < argc; ++i) {
    std::string v;
    if (flag(i, argc, argv, "--nodes", v)) nodes = std::stoi(v);
    else if (flag(i, argc, argv, "--repeat", v)) repeat = std::stoi(v);
    else if (consolidate && flag(i, argc, argv, "--busy", v)) busy = std::clamp(std::stoi(v), 0, 8);
    else if (consolidate && flag(i, argc, argv, "--claim", v)) claim = std::clamp(std::stoi(v), 1, 8);
    else {
      std::fprintf(stderr, "tessera-bench %s: unknown argument %s\n", name, argv[i]);
      return 2;
    }
  }
  bench::GeneratedCluster gen =
      consolidate ? bench::generateConsolidateCluster(nodes, busy, claim) : bench::generateReclaimCluster(nodes);
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster unused(clock);
  cache::Cache cache(unused, clock);
  for (auto& o : gen.objects) cache.applyEvent(o.kind, cache::WatchEvent{cache::WatchEventType::Added, std::move(o.object)});
  gen.objects.clear();
  auto config = benchConfig("all");
  if (!config.ok()) {
    std::fprintf(stderr, "tessera-bench: %s\n", config.error().message.c_str());
    return 1;
  }
  if (consolidate)
    std::printf("cluster: %d nodes x 8 GPUs, %d running 1-GPU preemptible pods, %d pending %d-GPU pods (one queue)\n",
                nodes, gen.runningPods, gen.pendingPods, claim);
  else
    std::printf("cluster: %d nodes x 8 GPUs, %d running 1-GPU preemptible pods (queue busy), %d pending 8-GPU pods (queue starved)\n",
                nodes, gen.runningPods, gen.pendingPods);
  std::vector<double> wall, cpu;
  size_t evictions = 0, pipelined = 0;
  framework::SchedulerState state;  // kept across cycles, as the daemon's Scheduler does
  for (int r = 0; r < repeat; ++r) {  // decisions are not committed: every repetition does the same work
    auto c0 = Clock::now();
    const double cpu0 = threadCpuMs();
    auto snap = cache.snapshot();
    framework::Session session(snap, *config, clock, &state);
    session.open();
    session.runActions();
    framework::SessionResult res = session.close();
    wall.push_back(msSince(c0));
    cpu.push_back(threadCpuMs() - cpu0);
    evictions = res.evictions.size();
    pipelined = res.pipelined.size();
    std::printf("cycle: %.1f ms wall, %.1f ms cpu, %zu evictions, %zu pipelined\n", wall.back(), cpu.back(), evictions,
                pipelined);
  }
  nlohmann::json out = {{"benchmark", name},         {"nodes", nodes},
                        {"running_pods", gen.runningPods}, {"pending_pods", gen.pendingPods},
                        {"cycle_ms", median(wall)},   {"cycle_cpu_ms", median(cpu)},
                        {"evictions", evictions},     {"pipelined", pipelined},
                        {"peak_rss_mb", peakRssMb()}};
  std::cout << out.dump() << std::endl;
  std::_Exit(0);
}

void usage() {
  std::fprintf(stderr,
               "usage: tessera-bench cycle [--shape default|unschedulable|steady|preferred-topology|fractional|churn-nodes]\n"
               "                           [--nodes 4000] [--pods 140000] [--cycles 10] [--churn 200] [--node-churn 20]\n"
               "                           [--fill 0.9] [--seed 1] [--actions allocate|all|a,b,...] [--commit] [--check]\n"
               "                           [--malloc keep|default] [--ui-poll MS (publish to the web UI, polled)]\n"
               "                           [--alloc-sites N (one allocation in N: where the cycles allocate, on stderr)]\n"
               "                           [--one-thread (no session helper thread: scripts/bench-misses.sh)]\n"
               "       tessera-bench suite [--nodes 4000] [--pods 140000] [--cycles 10] [--churn 200] [--shape-timeout 600] [--check]\n"
               "                           [--malloc keep|default]\n"
               "       tessera-bench reclaim [--nodes 1000] [--repeat 3]\n"
               "       tessera-bench consolidate [--nodes 1000] [--repeat 3] [--busy 5] [--claim 4]\n"
               "       tessera-bench topology [--nodes 4000] [--rack-size 100] [--gangs 2000] [--gang-size 8] [--fill 0.75] [--cycles 5]\n"
               "       tessera-bench e2e [--nodes 500] [--pods 5000] [--creators 16] [--bind-workers 16] [--server-threads 2]\n"
               "                         [--debounce 100ms] [--timeout 600] [--tessera PATH] [--skip-raw]\n"
               "                         [--server-latency MS] [--client default|unlimited|both]\n"
               "                         [--shards N (also one daemon per node pool, N pools)]\n"
               "       tessera-bench interposer [ARGS]\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  const std::string cmd = argv[1];
  // The cycle benches measure malloc as the daemon sets it (`--malloc keep`, their default): huge
  // pages included (api::useHugePages re-executes the bench first, as the daemon does).
  if (cmd == "cycle" || cmd == "suite") {
    bool glibcDefaults = false;
    for (int i = 2; i + 1 < argc; ++i)
      if (std::strcmp(argv[i], "--malloc") == 0 && std::strcmp(argv[i + 1], "default") == 0) glibcDefaults = true;
    if (!glibcDefaults) tessera::api::useHugePages(argv);
  }
  if (cmd == "cycle") return tessera::bench::runCycleBench(argc - 1, argv + 1);
  if (cmd == "suite") return tessera::bench::runSuiteBench(argc - 1, argv + 1);
  if (cmd == "topology") return tessera::bench::runTopologyBench(argc - 1, argv + 1);
  if (cmd == "reclaim") return victimBench(argc, argv, /*consolidate=*/false);
  if (cmd == "consolidate") return victimBench(argc, argv, /*consolidate=*/true);
  if (cmd == "e2e") return tessera::bench::runE2eBench(argc - 1, argv + 1);
  if (cmd == "interposer") {
#ifdef TESSERA_HAVE_INTERPOSER_BENCH
    return tessera::bench::runInterposerBench(argc - 1, argv + 1);
#else
    std::fprintf(stderr, "tessera-bench: built without the interposer benchmark\n");
    return 2;
#endif
  }
  usage();
  return 2;
}
