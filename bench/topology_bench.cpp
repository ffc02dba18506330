// tessera-bench topology: the cost of topology-aware placement (issue 8).
//   tessera-bench topology [--nodes 4000] [--rack-size 100] [--gangs 2000] [--gang-size 8] [--fill 0.75]
//                          [--cycles 5] [--seed 1] [--actions allocate|all|a,b,...] [--only plain|topology]
// The same generated cluster is scheduled twice: once with every PodGroup carrying
// requiredTopologyLevel rack, once without a constraint. Each cycle is snapshot + session with the
// actions; decisions are not committed, so every cycle does the same work. The last line is JSON.
#include "topology_bench.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_generator.h"
#include "tessera/api/clock.h"
#include "tessera/app/registry.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/config.h"
#include "tessera/framework/session.h"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kRackLabel = "topology.example.com/rack";
const int64_t kBase = 1767225600;  // 2026-01-01T00:00:00Z

struct TopologySpec {
  int nodes = 4000;
  int rackSize = 100;
  int gangs = 2000;
  int gangSize = 8;
  double fill = 0.75;  ///< expected fraction of GPUs held by running pods (binomial per node)
  uint64_t seed = 1;
};

std::string ts(int64_t sec) { return api::formatTime(api::Time{sec * 1000}); }

Json resources(const std::string& gpus) {
  return {{"requests", {{"cpu", "8"}, {"memory", "64Gi"}, {"nvidia.com/gpu", gpus}}}, {"limits", {{"nvidia.com/gpu", gpus}}}};
}

Json podJson(const std::string& ns, const std::string& name, const std::string& queue, const std::string& group,
             int64_t created, const std::string& nodeName) {
  Json meta = {{"name", name},
               {"namespace", ns},
               {"uid", "pod-" + name},
               {"creationTimestamp", ts(created)},
               {"labels", {{"tessera.dev/queue", queue}}}};
  if (!group.empty()) meta["annotations"] = {{"pod-group-name", group}};
  Json spec = {{"schedulerName", "tessera"},
               {"containers", {{{"name", "worker"}, {"image", "nvcr.io/nvidia/pytorch:24.05-py3"}, {"resources", resources("1")}}}}};
  Json status = {{"phase", "Pending"}};
  if (!nodeName.empty()) {
    spec["nodeName"] = nodeName;
    status = {{"phase", "Running"}, {"startTime", ts(created + 60)}};
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}, {"status", status}};
}

/// Nodes in racks (labels rack and hostname), each with a binomial(8, fill) number of running
/// 1-GPU pods, 10 unlimited queues, a Topology "dc" (rack, hostname), and `gangs` pending gangs of
/// `gangSize` 1-GPU pods, constrained to one rack when `constrained`.
GeneratedCluster generate(const TopologySpec& spec, bool constrained) {
  GeneratedCluster out;
  std::mt19937_64 rng(spec.seed);
  auto add = [&](api::Kind k, Json j) { out.objects.push_back({k, std::move(j)}); };
  std::vector<std::string> queues;
  for (int q = 0; q < 10; ++q) {
    queues.push_back("team-" + std::to_string(q));
    Json r = {{"quota", "-1"}, {"limit", "-1"}, {"overQuotaWeight", "1"}};
    add(api::Kind::Queue, {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                           {"kind", "Queue"},
                           {"metadata", {{"name", queues.back()}, {"creationTimestamp", ts(kBase - 86400)}}},
                           {"spec", {{"resources", {{"gpu", r}, {"cpu", r}, {"memory", r}}}}}});
  }
  add(api::Kind::Topology, {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                            {"kind", "Topology"},
                            {"metadata", {{"name", "dc"}}},
                            {"spec", {{"levels", {{{"nodeLabel", kRackLabel}}, {{"nodeLabel", "kubernetes.io/hostname"}}}}}}});
  std::binomial_distribution<int> used(8, spec.fill);
  int64_t created = kBase - 7 * 86400;
  for (int n = 0; n < spec.nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    Json res = {{"cpu", "128"}, {"memory", "1Ti"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
    add(api::Kind::Node,
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata",
          {{"name", name},
           {"labels",
            {{"kubernetes.io/hostname", name},
             {kRackLabel, "rack-" + std::to_string(n / spec.rackSize)},
             {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
             {"nvidia.com/gpu.memory", "81920"}}}}},
         {"status", {{"capacity", res}, {"allocatable", res}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
    const int k = used(rng);
    for (int p = 0; p < k; ++p, ++out.runningPods) {
      const std::string& q = queues[out.runningPods % queues.size()];
      add(api::Kind::Pod, podJson("ns-" + q, std::string(name) + "-run-" + std::to_string(p), q, "", ++created, name));
    }
  }
  for (int g = 0; g < spec.gangs; ++g, ++out.gangs) {
    const std::string& q = queues[g % queues.size()];
    const std::string ns = "ns-" + q;
    const std::string pg = "gang-" + std::to_string(g);
    ++created;
    Json pgSpec = {{"minMember", spec.gangSize}, {"queue", q}};
    if (constrained) pgSpec["topologyConstraint"] = {{"topology", "dc"}, {"requiredTopologyLevel", kRackLabel}};
    add(api::Kind::PodGroup, {{"apiVersion", "scheduling.tessera.dev/v1alpha1"},
                              {"kind", "PodGroup"},
                              {"metadata", {{"name", pg}, {"namespace", ns}, {"uid", "pg-" + pg}, {"creationTimestamp", ts(created)}}},
                              {"spec", pgSpec}});
    for (int i = 0; i < spec.gangSize; ++i, ++out.pendingPods)
      add(api::Kind::Pod, podJson(ns, pg + "-" + std::to_string(i), q, pg, created, ""));
  }
  return out;
}

double msSince(SteadyClock::time_point t) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t).count();
}

double threadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double loadAverage() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Run {
  double cycleMs = 0, cpuMs = 0, allocMs = 0;
  size_t placed = 0, pendingJobs = 0;
};

Run runCycles(const TopologySpec& spec, bool constrained, const framework::Config& config, int cycles) {
  GeneratedCluster gen = generate(spec, constrained);
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster unused(clock);  // the cache is fed directly; the client is never started
  auto cache = std::make_unique<cache::Cache>(unused, clock);
  for (auto& o : gen.objects) cache->applyEvent(o.kind, cache::WatchEvent{cache::WatchEventType::Added, std::move(o.object)});
  gen.objects.clear();
  std::vector<double> wall, cpu, alloc;
  Run run;
  framework::SchedulerState state;  // kept across cycles, as the daemon's Scheduler does
  for (int c = 0; c < cycles; ++c) {
    auto t0 = SteadyClock::now();
    const double cpu0 = threadCpuMs();
    framework::Session session(cache->snapshot(), config, clock, &state);
    session.open();
    auto t1 = SteadyClock::now();
    session.runActions();
    alloc.push_back(msSince(t1));
    framework::SessionResult r = session.close();
    wall.push_back(msSince(t0));
    cpu.push_back(threadCpuMs() - cpu0);
    run.placed = r.binds.size() + r.pipelined.size();
    run.pendingJobs = r.jobs.size();
    std::printf("%-9s cycle %d: %7.2f ms wall, %7.2f ms cpu (actions %.2f), %zu pods placed, %zu jobs pending\n",
                constrained ? "topology" : "plain", c + 1, wall.back(), cpu.back(), alloc.back(), run.placed,
                run.pendingJobs);
  }
  run.cycleMs = median(wall);
  run.cpuMs = median(cpu);
  run.allocMs = median(alloc);
  cache.release();  // not torn down: not what the benchmark measures
  return run;
}

/// runCycles in a child process, so that each mode starts from a fresh heap (the first run's
/// cache would otherwise fragment the second's) and peak RSS is per mode.
Run runIsolated(const TopologySpec& spec, bool constrained, const framework::Config& config, int cycles) {
  int fds[2];
  if (pipe(fds) != 0) return runCycles(spec, constrained, config, cycles);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Run r = runCycles(spec, constrained, config, cycles);
    std::fflush(stdout);
    const ssize_t n = write(fds[1], &r, sizeof r);
    std::_Exit(n == static_cast<ssize_t>(sizeof r) ? 0 : 1);
  }
  close(fds[1]);
  Run r;
  const ssize_t n = pid > 0 ? read(fds[0], &r, sizeof r) : -1;
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  if (n != static_cast<ssize_t>(sizeof r)) {
    std::fprintf(stderr, "tessera-bench topology: the %s run failed\n", constrained ? "topology" : "plain");
    std::exit(1);
  }
  return r;
}

bool flag(int& i, int argc, char** argv, const char* name, std::string& value) {
  if (std::strcmp(argv[i], name) != 0) return false;
  if (i + 1 >= argc) {
    std::fprintf(stderr, "tessera-bench topology: %s needs a value\n", name);
    std::exit(2);
  }
  value = argv[++i];
  return true;
}

}  // namespace

int runTopologyBench(int argc, char** argv) {
  TopologySpec spec;
  int cycles = 5;
  std::string actions = "allocate", only;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (flag(i, argc, argv, "--nodes", v)) spec.nodes = std::stoi(v);
    else if (flag(i, argc, argv, "--rack-size", v)) spec.rackSize = std::max(1, std::stoi(v));
    else if (flag(i, argc, argv, "--gangs", v)) spec.gangs = std::stoi(v);
    else if (flag(i, argc, argv, "--gang-size", v)) spec.gangSize = std::max(1, std::stoi(v));
    else if (flag(i, argc, argv, "--fill", v)) spec.fill = std::clamp(std::stod(v), 0.0, 1.0);
    else if (flag(i, argc, argv, "--cycles", v)) cycles = std::max(1, std::stoi(v));
    else if (flag(i, argc, argv, "--seed", v)) spec.seed = std::stoull(v);
    else if (flag(i, argc, argv, "--actions", v)) actions = v;
    else if (flag(i, argc, argv, "--only", v)) only = v;  // "plain" or "topology" (for profiling)
    else {
      std::fprintf(stderr, "tessera-bench topology: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  Json overrides = Json::object();
  if (actions != "all") {
    overrides["actions"] = Json::array();
    for (size_t start = 0;;) {
      const size_t comma = actions.find(',', start);
      overrides["actions"].push_back(actions.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  auto config = framework::loadConfig(app::builtinRegistry(), &overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "tessera-bench: %s\n", config.error().message.c_str());
    return 1;
  }
  const int racks = (spec.nodes + spec.rackSize - 1) / spec.rackSize;
  std::printf("cluster: %d nodes x 8 GPUs in %d racks of %d, ~%.0f%% of GPUs busy, %d pending gangs of %d x 1 GPU; actions: %s\n",
              spec.nodes, racks, spec.rackSize, spec.fill * 100, spec.gangs, spec.gangSize, actions.c_str());
  const Run plain = only == "topology" ? Run{} : runIsolated(spec, false, *config, cycles);
  const Run topo = only == "plain" ? Run{} : runIsolated(spec, true, *config, cycles);
  const double ratio = plain.cycleMs > 0 ? topo.cycleMs / plain.cycleMs : 0;
  const double cpuRatio = plain.cpuMs > 0 ? topo.cpuMs / plain.cpuMs : 0;
  std::printf("median cycle: %.2f ms wall / %.2f ms cpu with requiredTopologyLevel rack, %.2f / %.2f ms without "
              "(%.2fx wall, %.2fx cpu)\n",
              topo.cycleMs, topo.cpuMs, plain.cycleMs, plain.cpuMs, ratio, cpuRatio);
  Json out = {{"benchmark", "topology"},
              {"nodes", spec.nodes},
              {"racks", racks},
              {"rack_size", spec.rackSize},
              {"pending_gangs", spec.gangs},
              {"gang_size", spec.gangSize},
              {"fill", spec.fill},
              {"cycles", cycles},
              {"actions", actions},
              {"median_cycle_ms_topology", topo.cycleMs},
              {"median_cycle_ms_plain", plain.cycleMs},
              {"median_cycle_cpu_ms_topology", topo.cpuMs},
              {"median_cycle_cpu_ms_plain", plain.cpuMs},
              {"actions_ms_topology", topo.allocMs},
              {"actions_ms_plain", plain.allocMs},
              {"ratio", ratio},
              {"cpu_ratio", cpuRatio},
              {"load_average_1m", loadAverage()},
              {"pods_placed_topology", topo.placed},
              {"pods_placed_plain", plain.placed},
              {"pending_jobs_topology", topo.pendingJobs},
              {"pending_jobs_plain", plain.pendingJobs}};
  std::cout << out.dump() << std::endl;
  std::_Exit(0);
}

}  // namespace tessera::bench
