// The scenario engine: loads a scenario file, builds the embedded cluster, runs the real scheduler
// step by step, and checks expectations against the cluster's objects.
#include "tessera/app/scenario.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"
#include "tessera/api/quantity.h"
#include "tessera/app/registry.h"
#include "tessera/binder/binder.h"
#include "tessera/binder/gpu_binding.h"
#include "tessera/binder/status_writer.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/config.h"
#include "tessera/framework/scheduler.h"

namespace tessera::app {

namespace {

using Json = nlohmann::json;
using api::Kind;

const char* const kTopKeys[] = {"name", "description", "source", "config", "clock", "objects", "steps", "expect"};
const char* const kStepKeys[] = {"cycles", "advance", "apply", "delete", "complete", "fail", "expect"};
const char* const kExpectKeys[] = {"bound",          "pending",         "evicted",     "notEvicted",
                                   "boundCount",     "sameNode",        "differentNodes", "sameGpu",
                                   "differentGpus",  "reservationPods", "gpuMemoryLimit", "queueAllocated",
                                   "unschedulableReason", "pipelined"};

template <size_t N>
bool oneOf(const std::string& k, const char* const (&list)[N]) {
  return std::any_of(std::begin(list), std::end(list), [&](const char* x) { return k == x; });
}

template <size_t N>
std::string listOf(const char* const (&list)[N]) {
  std::string s;
  for (const char* x : list) s += (s.empty() ? "" : ", ") + std::string(x);
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::pair<std::string, std::string> splitPodRef(const std::string& ref) {
  auto slash = ref.find('/');
  if (slash == std::string::npos) return {"default", ref};
  return {ref.substr(0, slash), ref.substr(slash + 1)};
}

/// A thrown scenario-file error (caught in runScenarioFile): names the file position and field.
struct ScenarioError {
  std::string message;
};

/// Everything one running scenario holds.
class Runner {
 public:
  Runner(std::string file, const ScenarioOptions& options) : file_(std::move(file)), options_(options) {}

  ScenarioOutcome run() {
    outcome_.file = file_;
    outcome_.name = std::filesystem::path(file_).filename().string();
    try {
      load();
      execute();
    } catch (const ScenarioError& e) {
      outcome_.loadError = true;
      outcome_.failures.push_back(e.message);
    }
    return std::move(outcome_);
  }

 private:
  // ---------------------------------------------------------------- loading
  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    throw ScenarioError{file_ + ": " + where + ": " + message};
  }

  void load() {
    std::ifstream in(file_);
    if (!in) throw ScenarioError{file_ + ": cannot open file"};
    std::stringstream buf;
    buf << in.rdbuf();
    auto docs = api::yamlToJson(buf.str());
    if (!docs.ok()) throw ScenarioError{file_ + ": " + docs.error().message};
    if (docs->size() != 1) throw ScenarioError{file_ + ": expected one YAML document, got " + std::to_string(docs->size())};
    doc_ = std::move(docs->front());
    if (!doc_.is_object()) throw ScenarioError{file_ + ": a scenario must be a map"};
    for (const auto& [k, v] : doc_.items())
      if (!oneOf(k, kTopKeys)) fail(k, "unknown key (valid: " + listOf(kTopKeys) + ")");
    if (!doc_.contains("name") || !doc_["name"].is_string() || doc_["name"].get<std::string>().empty())
      fail("name", "required string");
    outcome_.name = doc_["name"].get<std::string>();

    const Json* cfg = doc_.contains("config") ? &doc_["config"] : nullptr;
    auto config = framework::loadConfig(builtinRegistry(), cfg);
    if (!config.ok()) fail("config", config.error().message);
    config_ = std::move(config).value();

    api::Time start = api::parseTime("2026-01-01T00:00:00Z").value();
    if (doc_.contains("clock")) {
      if (!doc_["clock"].is_string()) fail("clock", "must be an RFC 3339 time string");
      auto t = api::parseTime(doc_["clock"].get<std::string>());
      if (!t.ok()) fail("clock", t.error().message);
      start = *t;
    }
    clock_ = std::make_unique<api::FakeClock>(start);
    cluster_ = std::make_unique<cache::MemoryCluster>(*clock_);

    if (doc_.contains("objects")) {
      const Json& objs = doc_["objects"];
      if (!objs.is_array()) fail("objects", "must be a list of manifests");
      // Objects without a creationTimestamp are created one second apart, in file order, ending
      // one second before the virtual start time.
      int64_t missing = 0;
      for (const auto& o : objs)
        if (!(o.is_object() && o.contains("metadata") && o["metadata"].is_object() &&
              o["metadata"].contains("creationTimestamp")))
          ++missing;
      int64_t k = 0;
      for (size_t i = 0; i < objs.size(); ++i) {
        Json obj = objs[i];
        const std::string where = "objects[" + std::to_string(i) + "]";
        if (!obj.is_object()) fail(where, "must be a manifest (a map)");
        if (!obj.contains("metadata") || !obj["metadata"].is_object()) fail(where + ".metadata", "required map");
        if (!obj["metadata"].contains("creationTimestamp"))
          obj["metadata"]["creationTimestamp"] = api::formatTime(start + api::Duration{-(missing - k++) * 1000});
        createObject(obj, where, /*replace=*/false);
      }
    }
    cache_ = std::make_unique<cache::Cache>(*cluster_, *clock_, cache::CacheOptions{config_.schedulerName});
    if (auto st = cache_->start(); !st.ok()) throw ScenarioError{file_ + ": starting the cache: " + st.error().message};
    gpu_ = std::make_unique<binder::GpuBinding>(*cluster_, *clock_);
    binder::BinderOptions bopts;
    bopts.preBind = [this](const framework::SessionResult::Bind& b) { return gpu_->prepare(b); };
    binder_ = std::make_unique<binder::Binder>(*cluster_, *cache_, *clock_, bopts);
    scheduler_ = std::make_unique<framework::Scheduler>(*cache_, config_, *clock_, *binder_);
    binder::StatusWriterOptions so;
    so.schedulerName = config_.schedulerName;
    so.background = false;  // written within the cycle (drain), deterministically
    statusWriter_ = std::make_unique<binder::StatusWriter>(*cluster_, *clock_, so);
  }

  /// Validates a manifest the way the API server would (kind known, object convertible) and
  /// creates (or, for `apply`, replaces) it.
  void createObject(Json obj, const std::string& where, bool replace) {
    auto kind = api::kindOf(obj);
    if (!kind.ok()) fail(where, kind.error().message);
    const api::KindInfo& ki = api::kindInfo(*kind);
    if (ki.namespaced && !obj["metadata"].contains("namespace")) obj["metadata"]["namespace"] = "default";
    api::Status valid = api::Status::success();
    switch (*kind) {
      case Kind::Pod: if (auto r = api::podFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::Node: if (auto r = api::nodeFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::PodGroup: if (auto r = api::podGroupFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::Queue: if (auto r = api::queueFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::Topology: if (auto r = api::topologyFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::PriorityClass: if (auto r = api::priorityClassFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::Namespace: if (auto r = api::namespaceFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::ConfigMap: if (auto r = api::configMapFromJson(obj); !r.ok()) valid = r.error(); break;
      default: fail(where, "kind " + std::string(ki.name) + " cannot be given in a scenario");
    }
    if (!valid.ok()) fail(where, valid.error().message);
    auto res = replace ? cluster_->apply(*kind, obj) : cluster_->create(*kind, obj);
    if (!res.ok()) fail(where, res.error().message);
  }

  // ---------------------------------------------------------------- steps
  void execute() {
    if (!doc_.contains("steps")) {
      runCycles(1);
      if (doc_.contains("expect")) checkExpect(doc_["expect"], "expect");
      return;
    }
    if (doc_.contains("expect")) fail("expect", "top-level expect is only allowed without steps (put it in a step)");
    const Json& steps = doc_["steps"];
    if (!steps.is_array()) fail("steps", "must be a list");
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::string where = "steps[" + std::to_string(i) + "]";
      const Json& step = steps[i];
      if (!step.is_object() || step.size() != 1) fail(where, "each step is a map with exactly one key (" + listOf(kStepKeys) + ")");
      const std::string key = step.begin().key();
      const Json& v = step.begin().value();
      if (!oneOf(key, kStepKeys)) fail(where, "unknown step \"" + key + "\" (valid: " + listOf(kStepKeys) + ")");
      if (key == "cycles") {
        if (!v.is_number_integer() || v.get<int64_t>() < 0) fail(where + ".cycles", "must be a non-negative integer");
        runCycles(v.get<int>());
      } else if (key == "advance") {
        if (!v.is_string()) fail(where + ".advance", "must be a duration like \"90s\"");
        auto d = api::parseDuration(v.get<std::string>());
        if (!d.ok()) fail(where + ".advance", d.error().message);
        clock_->advance(*d);
        note("advance " + v.get<std::string>() + " -> " + api::formatTime(clock_->now()));
        for (const auto& p : cluster_->completeExpired()) note("  completed " + p);
      } else if (key == "apply") {
        if (!v.is_array()) fail(where + ".apply", "must be a list of manifests");
        for (size_t j = 0; j < v.size(); ++j) {
          const std::string w = where + ".apply[" + std::to_string(j) + "]";
          if (!v[j].is_object() || !v[j].contains("metadata") || !v[j]["metadata"].is_object())
            fail(w, "must be a manifest with metadata");
          createObject(v[j], w, /*replace=*/true);
          note("apply " + api::describeObject(v[j]));
        }
      } else if (key == "delete") {
        for (const auto& ref : refList(v, where + ".delete")) deleteRef(ref, where + ".delete");
      } else if (key == "complete" || key == "fail") {
        for (const auto& ref : refList(v, where + "." + key)) {
          auto [ns, name] = splitPodRef(ref);
          auto st = cluster_->finishPod(ns, name, key == "complete");
          if (!st.ok()) fail(where + "." + key, ref + ": " + st.error().message);
          note(std::string(key == "complete" ? "complete " : "fail ") + ref);
        }
      } else if (key == "expect") {
        checkExpect(v, where + ".expect");
      }
    }
  }

  std::vector<std::string> refList(const Json& v, const std::string& where) const {
    if (!v.is_array()) fail(where, "must be a list of references");
    std::vector<std::string> out;
    for (const auto& r : v) {
      if (!r.is_string()) fail(where, "references are strings, got " + r.dump());
      out.push_back(r.get<std::string>());
    }
    return out;
  }

  void deleteRef(const std::string& ref, const std::string& where) {
    // "ns/name" for pods; "Kind/name" or "Kind/ns/name" otherwise.
    std::vector<std::string> parts;
    std::stringstream ss(ref);
    for (std::string p; std::getline(ss, p, '/');) parts.push_back(p);
    Kind kind = Kind::Pod;
    std::string ns, name;
    if (parts.size() == 2 && !api::kindFromName(parts[0])) {
      ns = parts[0], name = parts[1];
    } else if (parts.size() == 2 || parts.size() == 3) {
      auto k = api::kindFromName(parts[0]);
      if (!k) fail(where, "unknown kind in \"" + ref + "\"");
      kind = *k;
      if (parts.size() == 3) ns = parts[1], name = parts[2];
      else name = parts[1];
    } else {
      fail(where, "bad reference \"" + ref + "\" (ns/name, Kind/name or Kind/ns/name)");
    }
    auto st = cluster_->remove(kind, ns, name);
    if (!st.ok()) fail(where, ref + ": " + st.error().message);
    note("delete " + ref);
  }

  void note(const std::string& line) {
    if (options_.timeline) *options_.timeline << line << "\n";
  }

  void runCycles(int n) {
    for (int i = 0; i < n; ++i) {
      framework::CycleStats stats;
      framework::SessionResult result = scheduler_->runCycle(&stats);
      binder_->waitIdle();  // a cycle's binds, evictions and status writes complete within the cycle
      if (result.snapshot) statusWriter_->update(result, *result.snapshot);
      statusWriter_->drain();
      ++cycle_;
      lastPipelined_.clear();
      for (const auto& p : result.pipelined) lastPipelined_[p.podKey] = p.node;
      for (const auto& rec : binder_->lastRecords())
        if (rec.kind == binder::BindRecord::Kind::Evict && rec.ok) evicted_.insert(rec.podKey);
      // GPU reservation pods no fractional pod uses any more go at the end of the cycle.
      gpu_->collectGarbage(*cache_->snapshot());
      printCycle(result, stats);
      auto report = cluster_->kubeletTick();
      if (options_.timeline) {
        auto list = [&](const char* what, const std::vector<std::string>& v) {
          if (!v.empty()) {
            std::string s;
            for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
            note(std::string("  kubelet   ") + what + ": " + s);
          }
        };
        list("started", report.started);
        list("gone", report.removed);
        list("recreated", report.recreated);
        list("completed", report.completed);
      }
    }
  }

  void printCycle(const framework::SessionResult& r, const framework::CycleStats& stats) {
    if (!options_.timeline) return;
    char head[160];
    std::snprintf(head, sizeof head, "cycle %d @ %s  (%.2f ms: snapshot %.2f, actions %.2f, commit %.2f)", cycle_,
                  api::formatTime(clock_->now()).c_str(), stats.totalMs, stats.snapshotMs, stats.actionsMs,
                  stats.commitMs);
    note(head);
    for (const auto& e : r.evictions) {
      std::string failure;
      for (const auto& rec : binder_->lastRecords())
        if (rec.kind == binder::BindRecord::Kind::Evict && rec.podKey == e.podKey && !rec.ok) failure = rec.error;
      note("  evict     " + e.podKey + " on " + e.node + ": " + e.reason + (failure.empty() ? "" : "  FAILED: " + failure));
    }
    for (const auto& rec : binder_->lastRecords())
      if (rec.kind == binder::BindRecord::Kind::Bind) {
        // Fractional pods: which GPU group(s), and the share and limit on each.
        std::string gpus;
        for (const auto& b : r.binds)
          if (b.podKey == rec.podKey)
            for (const auto& g : b.gpus) {
              char share[96];
              std::snprintf(share, sizeof share, "%lld.%03lld GPU", static_cast<long long>(g.portionMilli / 1000),
                            static_cast<long long>(g.portionMilli % 1000));
              gpus += (gpus.empty() ? "  [" : "; ") + std::string("GPU group ") + g.group + (g.newGroup ? " (new)" : "") +
                      ": " + share + (g.memoryMiB > 0 ? ", " + std::to_string(g.memoryMiB) + " MiB" : "");
            }
        if (!gpus.empty()) gpus += "]";
        note("  bind      " + rec.podKey + " -> " + rec.node + gpus + (rec.ok ? "" : "  FAILED: " + rec.error));
      }
    for (const auto& p : r.pipelined) note("  pipeline  " + p.podKey + " -> " + p.node + " (waits for releasing resources)");
    for (const auto& j : r.jobs) {
      const std::string& key = j.job->key;
      note("  pending   " + (j.job->isSingleton() ? key.substr(4) : key) + ": " + r.message(j));
    }
    if (r.binds.empty() && r.evictions.empty() && r.pipelined.empty() && r.jobs.empty()) note("  (nothing to do)");
    printQueues(r);
  }

  /// One line per queue: GPUs deserved / fair share / allocated / requested (cpu when no GPUs).
  void printQueues(const framework::SessionResult& r) {
    if (r.queues.empty()) return;
    auto amount = [](std::string_view res, int64_t v) {
      return v < 0 ? std::string("unlimited") : api::formatResourceAmount(res, v);
    };
    for (const auto& q : r.queues) {
      const bool gpu = q.deserved.milliGpu != 0 || q.fairShare.milliGpu != 0 || q.allocated.milliGpu != 0 ||
                       q.requested.milliGpu != 0;
      const std::string_view res = gpu ? api::kResourceGpu : api::kResourceCpu;
      auto pick = [&](const api::Resources& x) { return gpu ? x.milliGpu : x.milliCpu; };
      std::string line = "  queue     " + q.name + (q.parent.empty() ? "" : " (in " + q.parent + ")") + ": " +
                         std::string(gpu ? "gpu" : "cpu") + " deserved " + amount(res, pick(q.deserved)) + ", fair share " +
                         amount(res, pick(q.fairShare)) + ", allocated " + amount(res, pick(q.allocated)) +
                         ", requested " + amount(res, pick(q.requested));
      if (!q.problem.empty()) line += "  [" + q.problem + "]";
      note(line);
    }
  }

  // ---------------------------------------------------------------- expectations
  Json pod(const std::string& ref) {
    auto [ns, name] = splitPodRef(ref);
    auto p = cluster_->get(Kind::Pod, ns, name);
    return p.ok() ? *p : Json();
  }

  static std::string nodeOf(const Json& p) {
    if (p.is_null() || !p.contains("spec")) return "";
    return p["spec"].value("nodeName", "");
  }

  void expectFail(const std::string& where, const std::string& what, const std::string& expected, const std::string& found) {
    outcome_.failures.push_back("scenario " + outcome_.name + ": " + where + ": " + what + ": expected " + expected +
                                ", found " + found);
  }

  std::vector<std::string> stringsOf(const Json& v, const std::string& where) const {
    if (!v.is_array()) fail(where, "must be a list");
    std::vector<std::string> out;
    for (const auto& x : v) {
      if (!x.is_string()) fail(where, "entries must be strings");
      out.push_back(x.get<std::string>());
    }
    return out;
  }

  void checkExpect(const Json& e, const std::string& where) {
    if (!e.is_object()) fail(where, "must be a map");
    for (const auto& [key, v] : e.items()) {
      if (!oneOf(key, kExpectKeys)) fail(where, "unknown expectation \"" + key + "\" (valid: " + listOf(kExpectKeys) + ")");
      const std::string w = where + "." + key;
      ++outcome_.expectationsChecked;
      if (key == "bound") expectBound(v, w);
      else if (key == "pending") expectPending(v, w);
      else if (key == "evicted" || key == "notEvicted") expectEvicted(v, w, key == "evicted");
      else if (key == "boundCount") expectBoundCount(v, w);
      else if (key == "sameNode" || key == "differentNodes") expectNodes(v, w, key == "sameNode");
      else if (key == "sameGpu" || key == "differentGpus") expectGpus(v, w, key == "sameGpu");
      else if (key == "reservationPods") expectReservationPods(v, w);
      else if (key == "gpuMemoryLimit") expectGpuMemoryLimit(v, w);
      else if (key == "queueAllocated") expectQueueAllocated(v, w);
      else if (key == "unschedulableReason") expectReason(v, w);
      else if (key == "pipelined") expectPipelined(v, w);
    }
  }

  void expectBound(const Json& v, const std::string& w) {
    if (!v.is_object()) fail(w, "must be a map of pod -> node");
    for (const auto& [ref, nodeJ] : v.items()) {
      if (!nodeJ.is_string()) fail(w, ref + ": node must be a string");
      const std::string want = nodeJ.get<std::string>();
      Json p = pod(ref);
      if (p.is_null()) {
        expectFail(w, ref, "bound to " + want, "no such pod");
        continue;
      }
      const std::string node = nodeOf(p);
      if (node.empty()) expectFail(w, ref, "bound to " + want, "not bound" + reasonSuffix(ref));
      else if (want != "*" && node != want) expectFail(w, ref, "bound to " + want, "bound to " + node);
    }
  }

  std::string reasonSuffix(const std::string& ref) {
    const std::string r = latestPodMessage(ref);
    return r.empty() ? "" : " (" + r + ")";
  }

  void expectPending(const Json& v, const std::string& w) {
    for (const auto& ref : stringsOf(v, w)) {
      Json p = pod(ref);
      if (p.is_null()) expectFail(w, ref, "pending", "no such pod");
      else if (!nodeOf(p).empty()) expectFail(w, ref, "pending", "bound to " + nodeOf(p));
    }
  }

  void expectEvicted(const Json& v, const std::string& w, bool want) {
    for (const auto& ref : stringsOf(v, w)) {
      const bool was = evicted_.count(ref) > 0;
      if (was != want) expectFail(w, ref, want ? "evicted" : "never evicted", was ? "evicted" : "never evicted");
    }
  }

  static bool boundAndLive(const Json& p) {
    if (nodeOf(p).empty()) return false;
    const std::string phase = p.contains("status") ? p["status"].value("phase", "") : "";
    return phase != "Succeeded" && phase != "Failed";
  }

  void expectBoundCount(const Json& v, const std::string& w) {
    if (!v.is_object()) fail(w, "must be a map of label selector -> count");
    for (const auto& [sel, n] : v.items()) {
      if (!n.is_number_integer()) fail(w, sel + ": count must be an integer");
      cache::ListOptions opts;
      opts.labelSelector = sel;
      auto pods = cluster_->list(Kind::Pod, opts);
      if (!pods.ok()) fail(w, sel + ": " + pods.error().message);
      int64_t count = 0;
      for (const auto& p : pods->items) count += boundAndLive(p) ? 1 : 0;
      if (count != n.get<int64_t>())
        expectFail(w, sel, std::to_string(n.get<int64_t>()) + " bound", std::to_string(count) + " bound");
    }
  }

  void expectNodes(const Json& v, const std::string& w, bool same) {
    if (!v.is_array()) fail(w, "must be a list of lists of pods");
    for (const auto& group : v) {
      auto refs = stringsOf(group, w);
      std::map<std::string, std::string> nodes;
      std::string desc;
      for (const auto& ref : refs) {
        nodes[ref] = nodeOf(pod(ref));
        desc += (desc.empty() ? "" : ", ") + ref + "@" + (nodes[ref].empty() ? "unbound" : nodes[ref]);
      }
      bool ok = true;
      std::set<std::string> distinct;
      for (const auto& [ref, n] : nodes) {
        if (n.empty()) ok = false;
        distinct.insert(n);
      }
      if (same) ok = ok && distinct.size() == 1;
      else ok = ok && distinct.size() == nodes.size();
      if (!ok) expectFail(w, "[" + desc + "]", same ? "all on one node" : "pairwise on different nodes", desc);
    }
  }

  /// The GPU group a fractional pod belongs to: the label tessera.dev/gpu-group the binder sets
  /// (fractional GPUs: the GPU-sharing work).
  std::string gpuGroupOf(const std::string& ref) {
    Json p = pod(ref);
    if (p.is_null() || !p["metadata"].contains("labels")) return "";
    return p["metadata"]["labels"].value(api::keys::kGpuGroupLabel, "");
  }

  void expectGpus(const Json& v, const std::string& w, bool same) {
    if (!v.is_array()) fail(w, "must be a list of lists of pods");
    for (const auto& group : v) {
      auto refs = stringsOf(group, w);
      std::set<std::string> distinct;
      std::string desc;
      bool ok = true;
      for (const auto& ref : refs) {
        const std::string g = gpuGroupOf(ref);
        if (g.empty()) ok = false;
        distinct.insert(g);
        desc += (desc.empty() ? "" : ", ") + ref + "@" + (g.empty() ? "no GPU group" : g);
      }
      ok = ok && (same ? distinct.size() == 1 : distinct.size() == refs.size());
      if (!ok) expectFail(w, "[" + desc + "]", same ? "one shared GPU" : "different GPUs", desc);
    }
  }

  void expectReservationPods(const Json& v, const std::string& w) {
    if (!v.is_number_integer()) fail(w, "must be an integer");
    cache::ListOptions opts;
    opts.namespace_ = api::keys::kReservationNamespace;
    auto pods = cluster_->list(Kind::Pod, opts);
    int64_t n = 0;
    if (pods.ok())
      for (const auto& p : pods->items)
        if (!p["metadata"].contains("deletionTimestamp")) ++n;
    if (n != v.get<int64_t>()) expectFail(w, "reservation pods", std::to_string(v.get<int64_t>()), std::to_string(n));
  }

  void expectGpuMemoryLimit(const Json& v, const std::string& w) {
    if (!v.is_object()) fail(w, "must be a map of pod -> MiB");
    for (const auto& [ref, mib] : v.items()) {
      if (!mib.is_number_integer()) fail(w, ref + ": MiB must be an integer");
      auto [ns, name] = splitPodRef(ref);
      auto cm = cluster_->get(Kind::ConfigMap, ns, name + "-tessera-gpu");
      std::string found = "no GPU ConfigMap " + ns + "/" + name + "-tessera-gpu";
      if (cm.ok() && cm->contains("data") && (*cm)["data"].contains("GPU_MEMORY_LIMIT")) {
        const std::string bytes = (*cm)["data"].value("GPU_MEMORY_LIMIT", "");
        try {
          const long long b = std::stoll(bytes);
          found = std::to_string(b / (1024 * 1024)) + " MiB";
          if (b == mib.get<int64_t>() * 1024 * 1024) continue;
        } catch (...) {
          found = "GPU_MEMORY_LIMIT=" + bytes;
        }
      }
      expectFail(w, ref, std::to_string(mib.get<int64_t>()) + " MiB", found);
    }
  }

  void expectQueueAllocated(const Json& v, const std::string& w) {
    if (!v.is_object()) fail(w, "must be a map of queue -> resources");
    auto snap = cache_->snapshot();
    // A parent's amount includes its children's.
    std::map<std::string, std::string> parent;
    for (const auto& [name, q] : snap->queues)
      if (q->queue) parent[name] = q->queue->parentQueue;
    std::map<std::string, api::Resources> total;
    for (const auto& [name, q] : snap->queues) {
      std::set<std::string> seen;
      for (std::string cur = name; !cur.empty() && seen.insert(cur).second;) {
        total[cur] += q->allocated;
        auto it = parent.find(cur);
        cur = it == parent.end() ? "" : it->second;
      }
    }
    for (const auto& [queue, res] : v.items()) {
      if (!res.is_object()) fail(w, queue + ": must be a map of resource -> amount");
      for (const auto& [rname, amount] : res.items()) {
        std::string full = rname == "gpu" ? std::string(api::kResourceGpu) : rname;
        std::string text = amount.is_string() ? amount.get<std::string>() : amount.dump();
        auto want = api::parseResourceAmount(full, text);
        if (!want.ok()) fail(w, queue + "." + rname + ": " + want.error().message);
        const int64_t have = total[queue].get(full);
        if (have != *want)
          expectFail(w, queue + " " + rname, text, api::formatResourceAmount(full, have));
      }
    }
  }

  /// Events about an object, oldest first (creation order).
  std::vector<Json> eventsFor(const std::string& kind, const std::string& ns, const std::string& name) {
    std::vector<Json> out;
    auto evs = cluster_->list(Kind::Event);
    if (!evs.ok()) return out;
    for (const auto& e : evs->items) {
      const Json& io = e.value("involvedObject", Json::object());
      if (io.value("kind", "") == kind && io.value("namespace", "") == ns && io.value("name", "") == name)
        out.push_back(e);
    }
    std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
      const std::string ra = a["metadata"].value("resourceVersion", ""), rb = b["metadata"].value("resourceVersion", "");
      return ra.size() != rb.size() ? ra.size() < rb.size() : ra < rb;  // the memory cluster's RVs are integers
    });
    return out;
  }

  std::string latestPodMessage(const std::string& ref) {
    Json p = pod(ref);
    if (p.is_null()) return "";
    if (p.contains("status") && p["status"].contains("conditions"))
      for (const auto& c : p["status"]["conditions"])
        if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return c.value("message", "");
    return "";
  }

  void expectReason(const Json& v, const std::string& w) {
    if (!v.is_object()) fail(w, "must be a map of reference -> substring");
    for (const auto& [ref, subJ] : v.items()) {
      if (!subJ.is_string()) fail(w, ref + ": substring must be a string");
      const std::string sub = lower(subJ.get<std::string>());
      std::vector<std::string> messages;
      std::vector<std::string> parts;
      std::stringstream ss(ref);
      for (std::string p; std::getline(ss, p, '/');) parts.push_back(p);
      std::vector<Json> events;
      if (parts.size() == 2 && parts[0] != "Queue") {
        messages.push_back(latestPodMessage(ref));
        events = eventsFor("Pod", parts[0], parts[1]);
      } else if (parts.size() == 2) {
        events = eventsFor("Queue", "", parts[1]);
        auto q = cluster_->get(Kind::Queue, "", parts[1]);
        if (q.ok() && q->contains("status") && (*q)["status"].contains("conditions"))
          for (const auto& c : (*q)["status"]["conditions"]) messages.push_back(c.value("message", ""));
      } else if (parts.size() == 3 && parts[0] == "PodGroup") {
        events = eventsFor("PodGroup", parts[1], parts[2]);
        auto pg = cluster_->get(Kind::PodGroup, parts[1], parts[2]);
        if (pg.ok() && pg->contains("status") && (*pg)["status"].contains("conditions"))
          for (const auto& c : (*pg)["status"]["conditions"]) messages.push_back(c.value("message", ""));
      } else {
        fail(w, "bad reference \"" + ref + "\" (ns/pod, Queue/name or PodGroup/ns/name)");
      }
      // The latest scheduling event (a Warning) counts, as does the current condition.
      for (auto it = events.rbegin(); it != events.rend(); ++it)
        if (it->value("type", "") == "Warning") {
          messages.push_back(it->value("message", ""));
          break;
        }
      bool ok = std::any_of(messages.begin(), messages.end(),
                            [&](const std::string& m) { return lower(m).find(sub) != std::string::npos; });
      if (!ok) {
        std::string found;
        for (const auto& m : messages)
          if (!m.empty()) found += (found.empty() ? "" : " | ") + ("\"" + m + "\"");
        expectFail(w, ref, "a reason containing \"" + subJ.get<std::string>() + "\"", found.empty() ? "no reason" : found);
      }
    }
  }

  void expectPipelined(const Json& v, const std::string& w) {
    if (!v.is_object()) fail(w, "must be a map of pod -> node");
    for (const auto& [ref, nodeJ] : v.items()) {
      if (!nodeJ.is_string()) fail(w, ref + ": node must be a string");
      const std::string want = nodeJ.get<std::string>();
      Json p = pod(ref);
      if (!nodeOf(p).empty()) {
        expectFail(w, ref, "pipelined to " + want, "bound to " + nodeOf(p));
        continue;
      }
      auto it = lastPipelined_.find(ref);
      if (it == lastPipelined_.end()) expectFail(w, ref, "pipelined to " + want, "not pipelined in the last cycle" + reasonSuffix(ref));
      else if (want != "*" && it->second != want) expectFail(w, ref, "pipelined to " + want, "pipelined to " + it->second);
    }
  }

  std::string file_;
  const ScenarioOptions& options_;
  ScenarioOutcome outcome_;
  Json doc_;
  framework::Config config_;
  std::unique_ptr<api::FakeClock> clock_;
  std::unique_ptr<cache::MemoryCluster> cluster_;
  std::unique_ptr<cache::Cache> cache_;
  std::unique_ptr<binder::GpuBinding> gpu_;
  std::unique_ptr<binder::Binder> binder_;
  std::unique_ptr<framework::Scheduler> scheduler_;
  std::unique_ptr<binder::StatusWriter> statusWriter_;
  int cycle_ = 0;
  std::set<std::string> evicted_;
  std::map<std::string, std::string> lastPipelined_;
};

}  // namespace

ScenarioOutcome runScenarioFile(const std::string& path, const ScenarioOptions& options) {
  return Runner(path, options).run();
}

std::vector<std::string> collectScenarioFiles(const std::vector<std::string>& args, std::vector<std::string>& errors) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(a, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file()) continue;
        const auto ext = it->path().extension().string();
        if (ext == ".yaml" || ext == ".yml") found.push_back(it->path().string());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(a, ec)) {
      files.push_back(a);
    } else {
      errors.push_back(a + ": no such file or directory");
    }
  }
  return files;
}

int checkCommand(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) {
    out << "usage: tessera check FILE|DIR...\n";
    return 2;
  }
  std::vector<std::string> errors;
  auto files = collectScenarioFiles(args, errors);
  int passed = 0, failed = static_cast<int>(errors.size());
  for (const auto& e : errors) out << "FAIL " << e << "\n";
  for (const auto& f : files) {
    ScenarioOutcome o = runScenarioFile(f);
    if (o.passed()) {
      ++passed;
      out << "ok   " << o.name << " (" << f << ")\n";
    } else {
      ++failed;
      out << "FAIL " << o.name << " (" << f << ")\n";
      for (const auto& msg : o.failures) out << "     " << msg << "\n";
    }
  }
  out << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

int simulateCommand(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() != 1) {
    out << "usage: tessera simulate FILE\n";
    return 2;
  }
  ScenarioOptions opts;
  opts.timeline = &out;
  ScenarioOutcome o = runScenarioFile(args[0], opts);
  if (o.loadError) {
    for (const auto& m : o.failures) out << "error: " << m << "\n";
    return 1;
  }
  out << "\n" << o.name << ": " << o.expectationsChecked << " expectations checked, "
      << (o.failures.empty() ? "all hold" : std::to_string(o.failures.size()) + " unmet") << "\n";
  for (const auto& m : o.failures) out << "  " << m << "\n";
  return o.failures.empty() ? 0 : 1;
}

}  // namespace tessera::app
