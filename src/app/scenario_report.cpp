// The timeline of `tessera simulate`: what each cycle decided and what the kubelet did after it.
#include <cstdio>

#include "scenario_internal.h"
#include "tessera/api/quantity.h"

namespace tessera::app::scenario {

namespace {

/// One line per queue: GPUs deserved / fair share / allocated / requested (cpu when no GPUs).
void printQueues(std::ostream& out, const framework::SessionResult& r) {
  auto amount = [](std::string_view res, int64_t v) {
    return v < 0 ? std::string("unlimited") : api::formatResourceAmount(res, v);
  };
  for (const auto& q : r.queues) {
    const bool gpu =
        q.deserved.milliGpu != 0 || q.fairShare.milliGpu != 0 || q.allocated.milliGpu != 0 || q.requested.milliGpu != 0;
    const std::string_view res = gpu ? api::kResourceGpu : api::kResourceCpu;
    auto pick = [&](const api::Resources& x) { return gpu ? x.milliGpu : x.milliCpu; };
    std::string line = "  queue     " + q.name + (q.parent.empty() ? "" : " (in " + q.parent + ")") + ": " +
                       std::string(gpu ? "gpu" : "cpu") + " deserved " + amount(res, pick(q.deserved)) +
                       ", fair share " + amount(res, pick(q.fairShare)) + ", allocated " +
                       amount(res, pick(q.allocated)) + ", requested " + amount(res, pick(q.requested));
    if (!q.problem.empty()) line += "  [" + q.problem + "]";
    out << line << "\n";
  }
}

/// Fractional pods: which GPU group(s), and the share and limit on each ("" for whole GPUs).
std::string gpuGroups(const framework::SessionResult& r, const std::string& podKey) {
  std::string gpus;
  for (const auto& b : r.binds)
    if (b.podKey == podKey)
      for (const auto& g : b.gpus) {
        char share[96];
        std::snprintf(share, sizeof share, "%lld.%03lld GPU", static_cast<long long>(g.portionMilli / 1000),
                      static_cast<long long>(g.portionMilli % 1000));
        gpus += (gpus.empty() ? "  [" : "; ") + std::string("GPU group ") + g.group + (g.newGroup ? " (new)" : "") +
                ": " + share + (g.memoryMiB > 0 ? ", " + std::to_string(g.memoryMiB) + " MiB" : "");
      }
  if (!gpus.empty()) gpus += "]";
  return gpus;
}

}  // namespace

void printCycle(std::ostream& out, int cycle, api::Time now, const framework::SessionResult& r,
                const framework::CycleStats& stats, const std::vector<binder::BindRecord>& records) {
  char head[160];
  std::snprintf(head, sizeof head, "cycle %d @ %s  (%.2f ms: snapshot %.2f, actions %.2f, commit %.2f)", cycle,
                api::formatTime(now).c_str(), stats.totalMs, stats.snapshotMs, stats.actionsMs, stats.commitMs);
  out << head << "\n";
  for (const auto& e : r.evictions) {
    std::string failure;
    for (const auto& rec : records)
      if (rec.kind == binder::BindRecord::Kind::Evict && rec.podKey == e.podKey && !rec.ok) failure = rec.error;
    out << "  evict     " << e.podKey << " on " << e.node << ": " << e.reason
        << (failure.empty() ? "" : "  FAILED: " + failure) << "\n";
  }
  for (const auto& rec : records)
    if (rec.kind == binder::BindRecord::Kind::Bind)
      out << "  bind      " << rec.podKey << " -> " << rec.node << gpuGroups(r, rec.podKey)
          << (rec.ok ? "" : "  FAILED: " + rec.error) << "\n";
  for (const auto& p : r.pipelined)
    out << "  pipeline  " << p.podKey << " -> " << p.node << " (waits for releasing resources)\n";
  for (const auto& j : r.jobs) {
    const std::string& key = j.job->key;
    out << "  pending   " << (j.job->isSingleton() ? key.substr(4) : key) << ": " << r.message(j) << "\n";
  }
  if (r.binds.empty() && r.evictions.empty() && r.pipelined.empty() && r.jobs.empty()) out << "  (nothing to do)\n";
  printQueues(out, r);
}

void printKubelet(std::ostream& out, const cache::MemoryCluster::KubeletReport& report) {
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    out << "  kubelet   " << what << ": " << s << "\n";
  };
  list("started", report.started);
  list("gone", report.removed);
  list("recreated", report.recreated);
  list("completed", report.completed);
}

}  // namespace tessera::app::scenario
