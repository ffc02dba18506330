// The web UI's state (ui/STATE.md) from a session result and its snapshot, the publisher the
// daemon hands each cycle to, and the compiled-in page.
#include "tessera/app/ui_state.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "tessera/api/gpu_request.h"
#include "tessera/plugins/gpu_topology.h"

namespace tessera::app {

using nlohmann::json;

// The page, generated from ui/index.html at configure time (src/app/CMakeLists.txt).
extern const char kUiIndexHtml[];

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// A quantity in natural units; -1 for unlimited or unset (any negative).
double amount(int64_t v, double unit) { return v < 0 ? -1.0 : static_cast<double>(v) / unit; }

json queueJson(const framework::SessionResult::QueueReport& q, const api::Queue* spec) {
  struct Res {
    const char* name;
    const api::QueueResource* setting;
    int64_t api::Resources::*field;
    double unit;
  };
  const Res resources[] = {
      {"gpu", spec ? &spec->gpu : nullptr, &api::Resources::milliGpu, 1000.0},
      {"cpu", spec ? &spec->cpu : nullptr, &api::Resources::milliCpu, 1000.0},
      {"memory", spec ? &spec->memory : nullptr, &api::Resources::memory, kGiB},
  };
  json out = {{"name", q.name}, {"parent", q.parent}, {"problem", q.problem}};
  json& rs = out["resources"] = json::object();
  for (size_t i = 0; i < std::size(resources); ++i) {
    const Res& r = resources[i];
    rs[r.name] = {{"quota", r.setting ? amount(r.setting->quota, r.unit) : -1.0},
                  {"limit", r.setting ? amount(r.setting->limit, r.unit) : -1.0},
                  {"deserved", amount(q.deserved.*r.field, r.unit)},
                  {"fairShare", amount(q.fairShare.*r.field, r.unit)},
                  {"allocated", amount(q.allocated.*r.field, r.unit)},
                  {"requested", amount(q.requested.*r.field, r.unit)}};
    if (q.usagePpm) rs[r.name]["usage"] = static_cast<double>((*q.usagePpm)[i]) / 1e6;
  }
  return out;
}

bool finished(cache::TaskStatus s) { return s == cache::TaskStatus::Succeeded || s == cache::TaskStatus::Failed; }

/// The reason a scheduler wrote on the job's first pending pod (condition PodScheduled=False), for
/// a state computed without running the actions (serve-cluster's UI); "" when none.
std::string writtenReason(const cache::JobInfo& j) {
  for (const cache::TaskInfo& t : j.tasks)
    if (t.status == cache::TaskStatus::Pending && t.pod)
      for (const api::Condition& c : t.pod->conditions)
        if (c.type == "PodScheduled" && c.status == "False" && !c.message.empty()) return c.message;
  return "";
}

/// Jobs with pending pods first (every one of them), then running ones up to kUiJobs in all;
/// `omitted` counts the running ones left out.
json jobsJson(const framework::SessionResult& r, api::Time now, size_t& omitted) {
  // By key: the report pairs a cycle's reasons with the snapshot taken after it.
  std::unordered_map<std::string_view, const std::string*> reasons;
  for (const auto& j : r.jobs) reasons[j.job->key] = &r.message(j);
  std::set<std::string> pipelined;
  for (const auto& p : r.pipelined) pipelined.insert(p.podKey);
  json out = json::array(), runningJobs = json::array();
  omitted = 0;
  for (const auto& jp : r.snapshot->jobs) {
    const cache::JobInfo& j = *jp;
    int pods = 0, placed = 0, pending = 0;
    bool anyPipelined = false;
    for (const cache::TaskInfo& t : j.tasks) {
      if (finished(t.status)) continue;
      ++pods;
      if (cache::holdsResources(t.status)) ++placed;
      else ++pending;
      anyPipelined = anyPipelined || pipelined.count(t.key) > 0;
    }
    if (pods == 0) continue;
    const char* status = anyPipelined ? "pipelined" : pending == 0 ? "running" : placed > 0 ? "partial" : "pending";
    if (pending == 0 && !anyPipelined && runningJobs.size() + out.size() >= kUiJobs) {
      ++omitted;
      continue;
    }
    auto reason = reasons.find(j.key);
    std::string why = reason == reasons.end() || (pending == 0 && !anyPipelined) ? std::string() : *reason->second;
    if (why.empty() && pending > 0) why = writtenReason(j);
    (pending == 0 && !anyPipelined ? runningJobs : out).push_back({{"key", j.key},
                   {"namespace", j.namespace_},
                   {"name", j.name},
                   {"kind", j.isSingleton() ? "Pod" : "PodGroup"},
                   {"queue", j.queue},
                   {"status", status},
                   {"placed", placed},
                   {"minMember", j.minMember},
                   {"pods", pods},
                   {"reason", std::move(why)},
                   {"ageSeconds", std::max<int64_t>(0, (now - j.creationTime).millis / 1000)},
                   {"priorityClass", j.priorityClassName}});
  }
  for (json& j : runningJobs) {
    if (out.size() >= kUiJobs) ++omitted;
    else out.push_back(std::move(j));
  }
  return out;
}

/// Where each pod holding resources is, for the GPU grid: its task and job.
struct PodRef {
  const cache::TaskInfo* task;
  const cache::JobInfo* job;
};

json topologyOf(const cache::Snapshot& s, const api::Node& node) {
  json out = json::array();
  for (const auto& [name, topo] : s.topologies) {
    json levels = json::array();
    for (const api::TopologyLevel& l : topo->levels)
      if (const std::string* v = node.meta.label(l.nodeLabel)) levels.push_back(json::array({l.nodeLabel, *v}));
    if (!levels.empty()) return levels;  // the first topology that places the node
  }
  return out;
}

/// `uuids`: the node's GPUs by device index (tessera.dev/gpu-topology `gpus`), to place shared GPUs.
json gpusJson(const cache::NodeInfo& n, const std::unordered_map<std::string, PodRef>& pods,
              const std::vector<std::string>& uuids) {
  json cells = json::array();
  const int64_t units = n.gpuUnits();
  int64_t held = 0;
  // Whole GPUs of our pods, then of other schedulers' pods (which GPU each got is the device
  // plugin's: known by pod only).
  for (const std::string& key : n.pods) {
    auto it = pods.find(key);
    if (it == pods.end() || it->second.task->sharesGpu()) continue;
    for (int64_t g = 0; g < it->second.task->request.milliGpu / 1000; ++g, ++held)
      cells.push_back({{"kind", "whole"}, {"pod", key}, {"queue", it->second.job->queue}});
  }
  for (int64_t g = 0; g < n.foreignUsed.milliGpu / 1000; ++g, ++held)
    cells.push_back({{"kind", "whole"}, {"pod", ""}, {"queue", ""}, {"foreign", true}});
  for (const cache::GpuGroupInfo& g : n.gpuGroups) {
    json occupants = json::array();
    for (const std::string& key : n.pods) {
      auto it = pods.find(key);
      if (it == pods.end() || !it->second.task->sharesGpu()) continue;
      const cache::TaskInfo& t = *it->second.task;
      if (std::find(t.gpuGroups.begin(), t.gpuGroups.end(), g.id) == t.gpuGroups.end()) continue;
      occupants.push_back({{"pod", key},
                           {"queue", it->second.job->queue},
                           {"share", static_cast<double>(cache::gpuUnitsOn(*t.gpuSpec, n)) / static_cast<double>(units)},
                           {"releasing", t.status == cache::TaskStatus::Releasing}});
    }
    json cell = {{"kind", "shared"},
                 {"group", g.id},
                 {"uuid", g.uuid},
                 {"reservationPod", g.reservationPod},
                 {"free", std::clamp(static_cast<double>(units - g.used) / static_cast<double>(units), 0.0, 1.0)},
                 {"occupants", std::move(occupants)}};
    if (auto at = std::find(uuids.begin(), uuids.end(), g.uuid); !g.uuid.empty() && at != uuids.end())
      cell["index"] = at - uuids.begin();
    cells.push_back(std::move(cell));
    ++held;
  }
  for (int32_t g = 0; g < n.gpusExcluded; ++g) cells.push_back({{"kind", "excluded"}});
  const int64_t free = n.allocatable.milliGpu / 1000 - held;
  for (int64_t g = 0; g < free; ++g) cells.push_back({{"kind", "free"}});
  return cells;
}

json nodesJson(const cache::Snapshot& s) {
  std::unordered_map<std::string, PodRef> pods;
  for (const auto& j : s.jobs)
    for (const cache::TaskInfo& t : j->tasks)
      if (cache::holdsResources(t.status)) pods.emplace(t.key, PodRef{&t, j});
  json out = json::array();
  for (const auto& np : s.nodes) {
    const cache::NodeInfo& n = *np;
    if (!n.node) continue;
    const api::Node& node = *n.node;
    const std::string* model = node.meta.label(api::keys::kNodeGpuProductLabel);
    json islands = json::array();
    std::vector<std::string> uuids;
    if (auto topo = plugins::gputopo::nodeGpuTopology(node); topo.ok() && topo->has_value()) {
      uuids = (*topo)->uuids;
      for (const auto& island : plugins::gputopo::nvlinkIslands(**topo))
        if (island.size() > 1) islands.push_back(island);
    }
    json mig = json::object();
    for (const auto& [name, count] : n.allocatable.scalars)
      if (api::parseMigProfile(name)) mig[name] = {{"allocatable", count}, {"used", n.used.get(name)}};
    out.push_back({{"name", n.name},
                   {"ready", node.ready},
                   {"topology", topologyOf(s, node)},
                   {"gpuModel", model ? *model : std::string()},
                   {"gpuMemoryMiB", n.gpuMemoryMiB},
                   {"cpu", {{"allocatable", amount(n.allocatable.milliCpu, 1000.0)}, {"used", amount(n.used.milliCpu, 1000.0)}}},
                   {"memory", {{"allocatable", amount(n.allocatable.memory, kGiB)}, {"used", amount(n.used.memory, kGiB)}}},
                   {"gpus", gpusJson(n, pods, uuids)},
                   {"nvlinkIslands", std::move(islands)},
                   {"mig", std::move(mig)}});
  }
  return out;
}

json cyclesJson(const std::deque<UiCycle>& cycles) {
  json out = json::array();
  for (const UiCycle& c : cycles) {
    json evictions = json::array();
    for (const auto& e : c.evictions) evictions.push_back({{"pod", e.podKey}, {"node", e.node}, {"reason", e.reason}});
    out.push_back({{"cycle", c.stats.cycle},
                   {"at", api::formatTime(c.at)},
                   {"totalMs", c.stats.totalMs},
                   {"snapshotMs", c.stats.snapshotMs},
                   {"actionsMs", c.stats.actionsMs},
                   {"commitMs", c.stats.commitMs},
                   {"binds", c.stats.binds},
                   {"pipelined", c.stats.pipelined},
                   {"pendingJobs", c.stats.pendingJobs},
                   {"evictions", std::move(evictions)}});
  }
  return out;
}

}  // namespace

json uiStateJson(const framework::SessionResult* r, const std::deque<UiCycle>& cycles, api::Time now,
                 const std::string& source, const std::string& schedulerName) {
  json out = {{"version", 1},
              {"source", source},
              {"schedulerName", schedulerName},
              {"now", api::formatTime(now)},
              {"cycle", cycles.empty() ? 0 : cycles.back().stats.cycle},
              {"queues", json::array()},
              {"jobs", json::array()},
              {"jobsOmitted", 0},
              {"nodes", json::array()},
              {"cycles", cyclesJson(cycles)}};
  if (!r || !r->snapshot) return out;
  for (const auto& q : r->queues) {
    auto it = r->snapshot->queues.find(q.name);
    out["queues"].push_back(queueJson(q, it != r->snapshot->queues.end() && it->second ? it->second->queue.get() : nullptr));
  }
  size_t omitted = 0;
  out["jobs"] = jobsJson(*r, now, omitted);
  out["jobsOmitted"] = omitted;
  out["nodes"] = nodesJson(*r->snapshot);
  return out;
}

void UiPublisher::publish(std::shared_ptr<const framework::SessionResult> r, const framework::CycleStats& stats,
                          api::Time now) {
  UiCycle c{stats, now, r ? r->evictions : std::vector<framework::SessionResult::Evict>{}};
  std::lock_guard<std::mutex> lock(mu_);
  last_ = std::move(r);
  lastAt_ = now;
  cycles_.push_back(std::move(c));
  ++published_;
  while (cycles_.size() > kUiCycles) cycles_.pop_front();
}

std::shared_ptr<const std::string> UiPublisher::stateJson() const {
  // One build per published cycle, however many pages poll (one at a time: the others wait for it).
  std::lock_guard<std::mutex> building(buildMu_);
  std::shared_ptr<const framework::SessionResult> r;
  std::deque<UiCycle> cycles;
  api::Time at;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (built_ && builtGeneration_ == published_) return built_;
    r = last_;
    cycles = cycles_;
    at = lastAt_;
    builtGeneration_ = published_;
  }
  built_ = std::make_shared<const std::string>(uiStateJson(r.get(), cycles, at, "daemon", schedulerName_).dump());
  return built_;
}

std::string_view uiPage() { return kUiIndexHtml; }

std::string uiReportPage(const json& report) {
  // Inside a <script> element, "</script>" or "<!--" in a string could end it early or hide its
  // end: <, > and & (only ever inside JSON strings) are written as \u escapes, which read the same.
  std::string data;
  for (char c : report.dump())
    if (c == '<') data += "\\u003c";
    else if (c == '>') data += "\\u003e";
    else if (c == '&') data += "\\u0026";
    else data += c;
  std::string page(kUiIndexHtml);
  const std::string marker = "<!--TESSERA_REPORT-->";
  const std::string script = "<script>window.TESSERA_REPORT = " + data + ";</script>";
  if (size_t at = page.find(marker); at != std::string::npos) page.replace(at, marker.size(), script);
  else page.insert(0, script);
  return page;
}

}  // namespace tessera::app
