// tessera-bench cycle / suite: scheduling cycles (snapshot + session with the actions) over cluster
// shapes chosen to show the cliffs of issue 16, not to flatter:
//   default             the generated GPU cluster (90% of GPUs busy, gangs and singles, 100 queues),
//                       200 pods arrive and leave per cycle, allocate only (issue 2's "full cycle");
//   unschedulable       nodes of 4 cpu and as many pending pods asking 8 cpu (no GPU): nothing fits;
//   steady              the default cluster with every action, the decisions committed between
//                       cycles as the daemon's binder does (binds and evictions assumed in the
//                       cache), running pods finishing and new ones arriving;
//   preferred-topology  the default cluster with every PodGroup preferring one rack;
//   fractional          most singles ask for half a GPU, running ones share GPUs two by two;
//   churn-nodes         the default cluster with nodes relabelled, removed and re-added every cycle.
// Every shape but `default` runs every action of the default config. Only steady commits its
// decisions (--commit makes any shape do so): the others face the same work every cycle. Only the
// cycle is timed; the events fed between cycles (the watch's work in a daemon) are not.
#include "cycle_bench.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "alloc_counter.h"
#include "cluster_generator.h"
#include "cpu_time.h"
#include "tessera/actions/factories.h"
#include "tessera/api/malloc_tuning.h"
#include "tessera/app/registry.h"
#include "tessera/app/ui_state.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/action.h"
#include "tessera/framework/config.h"
#include "tessera/framework/session.h"

namespace tessera::bench {
namespace {

// The frame every cycle after the first runs in: scripts/bench-misses.sh has callgrind count inside
// it only (its --toggle-collect), so that loads and cache misses are those of the steady cycles,
// without the first one's building of what later ones keep.
[[gnu::noinline]] void laterCycle(const std::function<void()>& body) { body(); }

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

const char* const kShapes[] = {"default", "unschedulable", "steady", "preferred-topology", "fractional", "churn-nodes"};
const int64_t kBase = 1767225600;  // 2026-01-01T00:00:00Z

struct Options {
  std::string shape = "default";
  int nodes = 4000;
  int pods = -1;  ///< -1: the shape's default (140,000; unschedulable: as many as nodes)
  int cycles = 10;
  int churn = 200;       ///< pods arriving (and leaving) per cycle
  int nodeChurn = 20;    ///< churn-nodes: nodes relabelled per cycle (and one removed, one re-added)
  double fill = 0.9;
  uint64_t seed = 1;
  std::string actions;   ///< "": the shape's default ("allocate" for default, else "all")
  bool commit = false;   ///< commit decisions between cycles as steady does (any shape)
  bool check = false;    ///< verify that the shape placed what it should (ctest)
  bool reasons = false;  ///< print how many pending jobs gave each reason in the last cycle
  bool quiet = false;    ///< only the JSON line (suite)
  int shapeTimeoutS = 600;  ///< suite: a shape still running after this is killed and reported
  /// "keep": malloc as the daemon sets it (api::tuneMalloc); "default": glibc's own.
  std::string malloc = "keep";
  /// > 0: publish each cycle to the web UI's publisher (as `tessera run --ui-port` does) while a
  /// thread builds its state JSON every this many ms (a page polling): the cycle time must not move.
  int uiPollMs = 0;
  /// > 0: sample one allocation in this many in the timed parts of the cycles after the first, and
  /// print the call sites (stderr) at the end.
  uint32_t allocSites = 0;
  /// Build and close each session on this thread alone, without the session's helper thread (as
  /// the daemon does below 2,048 jobs): scripts/bench-misses.sh counts one thread's work, whose
  /// share would otherwise depend on how the two threads raced.
  bool oneThread = false;
};

double msSince(SteadyClock::time_point t) { return std::chrono::duration<double, std::milli>(SteadyClock::now() - t).count(); }

/// CPU time of this thread in ms: unlike wall time, not inflated when other processes share the cores.
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

long minorFaults() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

double peakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

double loadAverage() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/// The machine's memory latency as it stands: nanoseconds per load of a pointer chase through a
/// random cycle over 8 MiB (mapped for the probe and unmapped after, out of the heap). A cycle's
/// actions wait mostly on such loads, and a VM's memory slows 1.5-2x for minutes at a time (other
/// tenants): the figure says which phase a run met. Not a cycle's cost: taken outside the cycles.
double memoryLatencyNs() {
  constexpr size_t kEntries = (size_t{8} << 20) / sizeof(uint32_t);
  constexpr int kLoads = 1'000'000;
  void* mem = mmap(nullptr, kEntries * sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return -1;
  auto* next = static_cast<uint32_t*>(mem);
  for (size_t i = 0; i < kEntries; ++i) next[i] = static_cast<uint32_t>(i);
  std::mt19937 rng(16);
  for (size_t i = kEntries - 1; i > 0; --i)  // Sattolo: one cycle through every entry
    std::swap(next[i], next[std::uniform_int_distribution<size_t>(0, i - 1)(rng)]);
  uint32_t at = 0;
  const auto start = SteadyClock::now();
  for (int k = 0; k < kLoads; ++k) at = next[at];
  const double ns = std::chrono::duration<double, std::nano>(SteadyClock::now() - start).count() / kLoads;
  volatile uint32_t sink = at;  // (the chase is not optimised away)
  (void)sink;
  munmap(mem, kEntries * sizeof(uint32_t));
  return ns;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  if (p == 50 && v.size() % 2 == 0) return (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));  // nearest rank
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
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

bool knownShape(const std::string& s) {
  return std::find(std::begin(kShapes), std::end(kShapes), s) != std::end(kShapes);
}

/// The default config with `actions` ("all" keeps the default list; else a comma list).
api::Result<framework::Config> configFor(const std::string& actions) {
  if (actions == "all") return framework::loadConfig(app::builtinRegistry(), nullptr);
  Json overrides = {{"actions", Json::array()}};
  for (size_t start = 0;;) {
    const size_t comma = actions.find(',', start);
    overrides["actions"].push_back(actions.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return framework::loadConfig(app::builtinRegistry(), &overrides);
}

/// What the per-shape checks look at, from every cycle.
struct CycleOutcome {
  size_t binds = 0, pipelined = 0, evictions = 0, fractionalBinds = 0, pendingJobs = 0;
  size_t rebinds = 0;         ///< steady: pods bound again although an earlier cycle bound them
  size_t cpuShortJobs = 0;    ///< jobs whose reason names insufficient cpu
  /// FNV-1a over every decision and reason of the cycle (binds with their GPUs, evictions with
  /// their reasons, pipelined pods, pending jobs' messages): a change that must not change
  /// behaviour keeps it, cycle by cycle.
  uint64_t digest = 0;
};

uint64_t decisionsDigest(const framework::SessionResult& r) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&](std::string_view s) {
    for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator: "ab","c" differs from "a","bc"
  };
  for (const auto& b : r.binds) {
    add(b.podKey), add(b.node);
    for (const auto& g : b.gpus) add(g.group), add(std::to_string(g.portionMilli));
  }
  for (const auto& e : r.evictions) add(e.podKey), add(e.reason);
  for (const auto& p : r.pipelined) add(p.podKey), add(p.node);
  for (const auto& j : r.jobs) add(j.job->key), add(r.message(j));
  return h;
}

/// The shape's checks (ctest): a description of what went wrong, or "" when it placed what it should.
std::string checkShape(const Options& o, const GeneratedCluster& gen, const std::vector<CycleOutcome>& out) {
  if (out.empty()) return "no cycle ran";
  for (size_t c = 0; c < out.size(); ++c) {
    const CycleOutcome& r = out[c];
    const std::string at = "cycle " + std::to_string(c + 1) + ": ";
    if (o.shape == "unschedulable") {
      if (r.binds + r.pipelined > 0) return at + "placed pods that fit nowhere";
      if (r.pendingJobs != static_cast<size_t>(gen.pendingPods)) return at + "not every pod reported pending";
      if (r.cpuShortJobs != r.pendingJobs) return at + "a pending pod's reason does not name insufficient cpu";
      continue;
    }
    if (o.shape == "steady") {
      if (r.rebinds > 0) return at + "bound pods that an earlier cycle had bound (decisions not committed)";
      if (c == 0 && r.binds == 0) return at + "placed nothing";
      continue;
    }
    if (r.binds + r.pipelined == 0) return at + "placed nothing";
    if (o.shape == "fractional" && r.fractionalBinds == 0) return at + "placed no fractional pod";
  }
  if (o.shape == "steady") {
    size_t total = 0;
    for (const CycleOutcome& r : out) total += r.binds;
    if (out.size() > 1 && total <= out.front().binds) return "no pod bound after the first cycle";
  }
  return "";
}

/// Runs one shape; prints per-cycle lines (unless quiet) and the JSON line. Returns the exit code.
int runShape(const Options& o) {
  setAllocationSampling(o.allocSites);
  const std::string mallocMode =
      api::tuneMalloc(o.malloc == "default" ? api::MallocMode::Default : api::MallocMode::Keep);
  ClusterSpec spec;
  spec.nodes = o.nodes;
  spec.runningFill = o.fill;
  spec.seed = o.seed;
  if (o.pods >= 0) spec.pods = o.pods;
  if (o.shape == "preferred-topology") spec.preferredTopology = true;
  if (o.shape == "fractional") spec.fractionalShare = 0.8;
  const std::string actions = !o.actions.empty() ? o.actions : o.shape == "default" ? "allocate" : "all";
  auto config = configFor(actions);
  if (!config.ok()) {
    std::fprintf(stderr, "tessera-bench: %s\n", config.error().message.c_str());
    return 1;
  }

  const double latencyBefore = memoryLatencyNs();  // (before the cluster: the probe's pages stay under the peak)
  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster unused(clock);  // the cache is fed directly; the client is never started
  auto cachePtr = std::make_unique<cache::Cache>(unused, clock);
  cache::Cache& cache = *cachePtr;
  // Objects go into the cache as they are generated: a 500,000-pod cluster is never held as JSON.
  auto t0 = SteadyClock::now();
  const ObjectSink sink = [&](api::Kind k, Json&& j) { cache.applyEvent(k, {cache::WatchEventType::Added, std::move(j)}); };
  GeneratedCluster gen = o.shape == "unschedulable" ? generateUnschedulableCluster(o.nodes, o.pods >= 0 ? o.pods : o.nodes, sink)
                                                    : generateCluster(spec, sink);
  const double loadMs = msSince(t0);
  const int churn = o.shape == "unschedulable" ? 0 : o.churn;
  const bool commit = o.shape == "steady" || o.commit;
  if (!o.quiet) {
    std::printf("shape: %s, actions: %s\n", o.shape.c_str(), actions.c_str());
    std::printf("cluster: %d nodes, %d pods (%d running, %d pending, %d gangs); generated and loaded in %.0f ms\n", o.nodes,
                gen.runningPods + gen.pendingPods, gen.runningPods, gen.pendingPods, gen.gangs, loadMs);
  }

  std::deque<std::string> running(gen.runningSingles.begin(), gen.runningSingles.end());  // steady: oldest first
  gen.runningSingles.clear();
  gen.runningSingles.shrink_to_fit();
  std::vector<std::string> evicted;  // steady: evicted last cycle, gone by the next
  std::set<std::string> bound;       // steady: every pod a cycle bound
  std::vector<double> wallMs, cpuMs, processCpuMsPerCycle, snapMs, openMs, actionsMs, closeMs;
  std::map<std::string, std::vector<double>> perActionMs;  // action name -> its time in each cycle
  std::vector<CycleOutcome> outcomes;
  framework::SchedulerState state;  // what the daemon's Scheduler keeps across cycles (session storage included)
  if (o.oneThread) state.splitBuildJobs = std::numeric_limits<size_t>::max();
  uint64_t allocBytes = 0, allocCalls = 0;  // through operator new, cycles after the first
  long faults = 0, firstCycleFaults = 0;  // minor faults of the cycles after the first, and of the first
  int churnSeq = 0;
  auto deletePod = [&](const std::string& key) {
    const size_t slash = key.find('/');
    cache.applyEvent(api::Kind::Pod, {cache::WatchEventType::Deleted,
                                      Json{{"metadata", {{"namespace", key.substr(0, slash)}, {"name", key.substr(slash + 1)}}}}});
  };
  int removedNode = -1;  // churn-nodes: the node removed last cycle, re-added this one
  // --ui-poll: the daemon's UI publisher, and a "page" building its state on another thread.
  std::unique_ptr<app::UiPublisher> ui;
  std::atomic<bool> stopPolling{false};
  std::vector<double> uiStateMs, uiPublishMs;
  size_t uiStateBytes = 0;
  std::thread poller;
  if (o.uiPollMs > 0) {
    ui = std::make_unique<app::UiPublisher>("tessera");
    poller = std::thread([&] {
      while (!stopPolling) {
        const auto t0 = SteadyClock::now();
        uiStateBytes = ui->stateJson()->size();
        uiStateMs.push_back(msSince(t0));
        std::this_thread::sleep_for(std::chrono::milliseconds(o.uiPollMs));
      }
    });
  }
  for (int c = 0; c < o.cycles; ++c) {
    // ---- between cycles (not timed): what the watch brings ----
    for (int k = 0; k < churn; ++k, ++churnSeq) {
      const std::string name = "churn-" + std::to_string(churnSeq);
      cache.applyEvent(api::Kind::Pod, {cache::WatchEventType::Added,
                                        makePendingPod("ns-churn", name, "dept-0-team-0", kBase + churnSeq)});
      if (commit) {  // running pods finish, oldest first
        if (!running.empty()) deletePod(running.front()), running.pop_front();
      } else if (churnSeq >= churn) {  // the arrivals of the cycle before last leave again
        deletePod("ns-churn/churn-" + std::to_string(churnSeq - churn));
      }
    }
    for (const std::string& key : evicted) deletePod(key);
    evicted.clear();
    if (o.shape == "churn-nodes" && o.nodes > 0) {
      for (int k = 0; k < o.nodeChurn; ++k) {
        const int n = static_cast<int>((static_cast<int64_t>(c) * o.nodeChurn + k) * 7919 % o.nodes);
        char name[32];
        std::snprintf(name, sizeof name, "node-%05d", n);
        cache.applyEvent(api::Kind::Node, {cache::WatchEventType::Modified,
                                           makeNode(name, spec.gpusPerNode, n / 32, {{"bench.tessera.dev/generation", std::to_string(c)}})});
      }
      char name[32];
      if (removedNode >= 0) {
        std::snprintf(name, sizeof name, "node-%05d", removedNode);
        cache.applyEvent(api::Kind::Node, {cache::WatchEventType::Added, makeNode(name, spec.gpusPerNode, removedNode / 32)});
      }
      removedNode = o.nodes - 1 - c % std::max(1, o.nodes / 10);  // the emptiest nodes are last
      std::snprintf(name, sizeof name, "node-%05d", removedNode);
      cache.applyEvent(api::Kind::Node, {cache::WatchEventType::Deleted, Json{{"metadata", {{"name", name}}}}});
    }

    // ---- the cycle (timed) ----
    const long f0 = minorFaults();
    sampleAllocations(c > 0);
    const AllocCount a0 = allocated();
    const double cpu0 = threadCpuMs(), processCpu0 = processCpuMs();
    auto c0 = SteadyClock::now();
    decltype(cache.snapshot()) snap;
    framework::SessionResult r;
    const std::function<void()> cycle = [&] {
      snap = cache.snapshot();
      snapMs.push_back(msSince(c0));
      auto c1 = SteadyClock::now();
      framework::Session session(snap, *config, clock, &state);
      session.open();
      openMs.push_back(msSince(c1));
      auto c2 = SteadyClock::now();
      for (const auto& a : config->actions) {  // session.runActions(), each action timed
        const auto a0 = SteadyClock::now();
        a->execute(session);
        perActionMs[a->name()].push_back(msSince(a0));
      }
      actionsMs.push_back(msSince(c2));
      auto c3 = SteadyClock::now();
      r = session.close();
      closeMs.push_back(msSince(c3));
    };
    if (c == 0) cycle();
    else laterCycle(cycle);
    snap.reset();
    sampleAllocations(false);
    wallMs.push_back(msSince(c0));
    cpuMs.push_back(threadCpuMs() - cpu0);
    processCpuMsPerCycle.push_back(processCpuMs() - processCpu0);  // the session's helper thread too
    const long cycleFaults = minorFaults() - f0;
    (c == 0 ? firstCycleFaults : faults) += cycleFaults;
    if (c > 0) {  // as the faults: the cycles after the first
      const AllocCount a1 = allocated();
      allocBytes += a1.bytes - a0.bytes;
      allocCalls += a1.calls - a0.calls;
    }

    CycleOutcome out;
    out.binds = r.binds.size();
    out.pipelined = r.pipelined.size();
    out.evictions = r.evictions.size();
    out.pendingJobs = r.jobs.size();
    for (const auto& b : r.binds) out.fractionalBinds += b.gpus.empty() ? 0 : 1;
    out.digest = decisionsDigest(r);
    if (o.check)
      for (const auto& j : r.jobs) out.cpuShortJobs += r.message(j).find("insufficient cpu") != std::string::npos ? 1 : 0;

    // ---- commit (steady, --commit): what the binder reports, as the daemon does ----
    if (commit) {
      for (const auto& b : r.binds) {
        std::vector<std::string> groups;
        for (const auto& g : b.gpus) groups.push_back(g.group);
        cache.assumeBinding(b.podKey, b.node, groups);
        cache.bindingDone(b.podKey);
        if (!bound.insert(b.podKey).second) ++out.rebinds;
        // Singles finish later, oldest first (a gang's pods are left running: one leaving breaks it).
        if (b.podKey.rfind("ns-churn/", 0) == 0 || b.podKey.find("/single-") != std::string::npos) running.push_back(b.podKey);
      }
      for (const auto& e : r.evictions) {
        cache.assumeEvicted(e.podKey);
        evicted.push_back(e.podKey);
      }
    }
    outcomes.push_back(out);
    if (o.reasons && c + 1 == o.cycles) {  // what holds the pending jobs back, most common first
      std::map<std::string, int> count;
      for (const auto& j : r.jobs) ++count[r.message(j)];
      std::vector<std::pair<int, std::string>> byCount;
      for (auto& [m, n] : count) byCount.push_back({n, m});
      std::sort(byCount.rbegin(), byCount.rend());
      for (size_t i = 0; i < byCount.size() && i < 12; ++i)
        std::printf("reason %6d: %s\n", byCount[i].first, byCount[i].second.substr(0, 220).c_str());
    }
    if (ui) {  // after the timed cycle, as the daemon's loop does
      const auto p0 = SteadyClock::now();
      framework::CycleStats stats;
      stats.cycle = static_cast<uint64_t>(c + 1);
      stats.totalMs = wallMs.back();
      ui->publish(std::make_shared<const framework::SessionResult>(std::move(r)), stats, clock.now());
      uiPublishMs.push_back(msSince(p0));
    } else {
      framework::recycleResult(state, std::move(r));  // as the daemon's loop does without a UI
    }
    if (!o.quiet)
    {
      std::string each;
      for (const auto& a : config->actions) each += " " + a->name() + " " + std::to_string(std::lround(perActionMs[a->name()].back()));
      std::printf("cycle %2d: %7.2f ms wall, %7.2f ms cpu (snapshot %.2f, actions %.2f:%s), %zu bound, %zu pipelined, "
                  "%zu evicted, %zu jobs pending, %ld minor faults, decisions %016llx\n",
                  c + 1, wallMs.back(), cpuMs.back(), snapMs.back(), actionsMs.back(), each.c_str(), out.binds,
                  out.pipelined, out.evictions, out.pendingJobs, cycleFaults, static_cast<unsigned long long>(out.digest));
    }
  }

  stopPolling = true;
  if (poller.joinable()) poller.join();
  const double peakRss = peakRssMb();  // (read before the second probe maps its pages)
  const double latencyAfter = memoryLatencyNs();
  const CycleOutcome& last = outcomes.empty() ? CycleOutcome{} : outcomes.back();
  Json line = {{"benchmark", "cycle"},
               {"shape", o.shape},
               {"actions", actions},
               {"nodes", o.nodes},
               {"pods", gen.runningPods + gen.pendingPods},
               {"running_pods", gen.runningPods},
               {"pending_pods", gen.pendingPods},
               {"cycles", o.cycles},
               {"committed", commit},
               {"malloc", mallocMode},
               {"median_cycle_ms", percentile(wallMs, 50)},
               {"p99_cycle_ms", percentile(wallMs, 99)},
               {"cpu_ms", percentile(cpuMs, 50)},
               {"process_cpu_ms", percentile(processCpuMsPerCycle, 50)},
               // The first cycle faults its working set in; the cycles after it show what a cycle costs.
               {"minor_faults_per_cycle", o.cycles > 1 ? static_cast<double>(faults) / (o.cycles - 1)
                                                       : static_cast<double>(firstCycleFaults)},
               {"minor_faults_first_cycle", firstCycleFaults},
               // What a cycle allocates (operator new, bytes and calls), mean over the cycles after the first.
               {"bytes_allocated_per_cycle", o.cycles > 1 ? static_cast<double>(allocBytes) / (o.cycles - 1) : 0.0},
               {"allocations_per_cycle", o.cycles > 1 ? static_cast<double>(allocCalls) / (o.cycles - 1) : 0.0},
               {"peak_rss_mb", peakRss},
               {"snapshot_ms", percentile(snapMs, 50)},
               {"session_open_ms", percentile(openMs, 50)},
               {"actions_ms", percentile(actionsMs, 50)},
               {"session_close_ms", percentile(closeMs, 50)},
               // The names the earlier `cycle` printed (README's older rows): the same figures.
               {"median_cycle_cpu_ms", percentile(cpuMs, 50)},
               {"allocate_ms", percentile(actionsMs, 50)},
               {"pods_placed_per_cycle", last.binds},
               {"pods_pipelined_per_cycle", last.pipelined},
               {"pods_placed_per_s", percentile(actionsMs, 50) > 0 ? static_cast<double>(last.binds) / (percentile(actionsMs, 50) / 1000.0) : 0.0},
               {"bound_last_cycle", last.binds},
               {"pipelined_last_cycle", last.pipelined},
               {"evicted_last_cycle", last.evictions},
               {"decisions_digest_last_cycle", [&] {
                  char hex[17];
                  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(last.digest));
                  return std::string(hex);
                }()},
               {"pending_jobs_last_cycle", last.pendingJobs},
               {"load_average_1m", loadAverage()},
               {"memory_latency_ns_before", latencyBefore},
               {"memory_latency_ns_after", latencyAfter}};
  for (const auto& [name, ms] : perActionMs) line["action_ms"][name] = percentile(ms, 50);  // medians
  if (o.oneThread) line["one_thread"] = true;  // (its session open is not the daemon's: no helper thread)
  if (ui) {
    line["ui_poll_ms"] = o.uiPollMs;
    line["ui_state_ms"] = percentile(uiStateMs, 50);  // building the state JSON (the poller's thread)
    line["ui_state_kb"] = static_cast<double>(uiStateBytes) / 1024.0;
    line["ui_publish_ms"] = percentile(uiPublishMs, 50);  // the scheduling thread's part
  }
  std::cout << line.dump() << std::endl;
  int rc = 0;
  if (o.check) {
    const std::string problem = checkShape(o, gen, outcomes);
    if (problem.empty()) std::printf("check %s: ok\n", o.shape.c_str());
    else std::printf("check %s FAILED: %s\n", o.shape.c_str(), problem.c_str()), rc = 1;
  }
  std::fflush(stdout);
  // Skip tearing down the cache: not what the benchmark measures.
  (void)cachePtr.release();
  printAllocationSites(stderr, 40, o.cycles - 1);
  std::_Exit(rc);
}

/// Parses the options shared by cycle and suite; false (after a message) on a bad argument.
bool parseOptions(int argc, char** argv, Options& o, bool suite) {
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (flag(i, argc, argv, "--nodes", v)) o.nodes = std::stoi(v);
    else if (flag(i, argc, argv, "--pods", v)) o.pods = std::stoi(v);
    else if (flag(i, argc, argv, "--cycles", v)) o.cycles = std::max(1, std::stoi(v));
    else if (flag(i, argc, argv, "--churn", v)) o.churn = std::max(0, std::stoi(v));
    else if (flag(i, argc, argv, "--node-churn", v)) o.nodeChurn = std::max(0, std::stoi(v));
    else if (flag(i, argc, argv, "--fill", v)) o.fill = std::clamp(std::stod(v), 0.0, 1.0);
    else if (flag(i, argc, argv, "--seed", v)) o.seed = std::stoull(v);
    else if (!suite && flag(i, argc, argv, "--actions", v)) o.actions = v;
    else if (!suite && flag(i, argc, argv, "--shape", v)) o.shape = v;
    else if (std::strcmp(argv[i], "--check") == 0) o.check = true;
    else if (std::strcmp(argv[i], "--reasons") == 0) o.reasons = true;
    else if (std::strcmp(argv[i], "--commit") == 0) o.commit = true;
    else if (suite && flag(i, argc, argv, "--shape-timeout", v)) o.shapeTimeoutS = std::max(1, std::stoi(v));
    else if (flag(i, argc, argv, "--malloc", v) && (v == "keep" || v == "default")) o.malloc = v;
    else if (flag(i, argc, argv, "--ui-poll", v)) o.uiPollMs = std::max(0, std::stoi(v));
    else if (!suite && std::strcmp(argv[i], "--one-thread") == 0) o.oneThread = true;
    else if (!suite && flag(i, argc, argv, "--alloc-sites", v))
      o.allocSites = static_cast<uint32_t>(std::max(0, std::stoi(v)));
    else {
      std::fprintf(stderr, "tessera-bench %s: unknown argument %s\n", argv[0], argv[i]);
      return false;
    }
  }
  if (!knownShape(o.shape)) {
    std::fprintf(stderr, "tessera-bench cycle: unknown shape %s (default, unschedulable, steady, preferred-topology, "
                         "fractional, churn-nodes)\n", o.shape.c_str());
    return false;
  }
  return true;
}

}  // namespace

int runCycleBench(int argc, char** argv) {
  Options o;
  if (!parseOptions(argc, argv, o, /*suite=*/false)) return 2;
  if (o.check) actions::setSelfChecks(true);  // the search's kept sums recounted too (slower)
  return runShape(o);
}

int runSuiteBench(int argc, char** argv) {
  Options base;
  if (!parseOptions(argc, argv, base, /*suite=*/true)) return 2;
  base.quiet = true;
  int failures = 0;
  for (const char* shape : kShapes) {
    Options o = base;
    o.shape = shape;
    // The unschedulable shape is as many 8-cpu pods as nodes (issue 16), whatever --pods says.
    if (o.shape == "unschedulable") o.pods = -1;
    std::fflush(stdout);
    const pid_t pid = fork();  // a fresh heap per shape, and its own peak RSS
    if (pid == 0) std::_Exit(runShape(o));
    int status = 0;
    pid_t done = 0;
    const auto start = SteadyClock::now();
    while (pid > 0 && (done = waitpid(pid, &status, WNOHANG)) == 0) {
      if (msSince(start) > o.shapeTimeoutS * 1000.0) {  // a cliff: say so rather than wait forever
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        std::cout << Json{{"benchmark", "cycle"}, {"shape", shape}, {"timed_out", true}, {"timeout_s", o.shapeTimeoutS},
                          {"load_average_1m", loadAverage()}}.dump()
                  << std::endl;
        break;
      }
      usleep(100 * 1000);
    }
    if (done != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "tessera-bench suite: shape %s failed\n", shape);
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace tessera::bench
