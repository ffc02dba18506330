// The scenario runner: loads a scenario file, builds the embedded cluster, runs the real scheduler
// (app::Pipeline, synchronous) step by step, and checks expectations (scenario_expect.cpp) against
// the cluster's objects; `tessera simulate` prints the timeline (scenario_report.cpp).
#include "tessera/app/scenario.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "scenario_internal.h"
#include "tessera/api/convert.h"
#include "tessera/api/flags.h"
#include "tessera/app/pipeline.h"
#include "tessera/cache/field_validation.h"
#include "tessera/app/registry.h"
#include "tessera/app/shard.h"
#include "tessera/app/ui_state.h"
#include "tessera/framework/config.h"
#include "tessera/grouper/grouper.h"

namespace tessera::app {

namespace scenario {

std::pair<std::string, std::string> splitPodRef(const std::string& ref) {
  auto slash = ref.find('/');
  if (slash == std::string::npos) return {"default", ref};
  return {ref.substr(0, slash), ref.substr(slash + 1)};
}

api::Error malformed(const std::string& where, const std::string& message) {
  return api::makeError(where + ": " + message);
}

}  // namespace scenario

namespace {

using api::Kind;
using scenario::Json;
using scenario::malformed;

const char* const kTopKeys[] = {"name", "description", "source", "config", "clock", "objects", "steps", "expect"};

bool isTopKey(const std::string& k) {
  return std::any_of(std::begin(kTopKeys), std::end(kTopKeys), [&](const char* x) { return k == x; });
}

std::string topKeys() {
  std::string s;
  for (const char* x : kTopKeys) s += (s.empty() ? "" : ", ") + std::string(x);
  return s;
}

/// Everything one running scenario holds.
class Runner {
 public:
  Runner(std::string file, const ScenarioOptions& options) : file_(std::move(file)), options_(options) {}

  ScenarioOutcome run() {
    outcome_.file = file_;
    outcome_.name = std::filesystem::path(file_).filename().string();
    api::Status st = load();
    if (st.ok()) st = execute();
    if (!st.ok()) {
      outcome_.loadError = true;
      outcome_.failures.push_back(file_ + ": " + st.error().message);
    }
    return std::move(outcome_);
  }

  // ---------------------------------------------------------------- steps (the table's handlers)
  api::Status cycles(const Json& v, const std::string& w) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return malformed(w, "must be a non-negative integer");
    runCycles(v.get<int>());
    return api::Status::success();
  }

  api::Status advance(const Json& v, const std::string& w) {
    if (!v.is_string()) return malformed(w, "must be a duration like \"90s\"");
    auto d = api::parseDuration(v.get<std::string>());
    if (!d.ok()) return malformed(w, d.error().message);
    clock_->advance(*d);
    note("advance " + v.get<std::string>() + " -> " + api::formatTime(clock_->now()));
    for (const auto& p : cluster_->completeExpired()) note("  completed " + p);
    return api::Status::success();
  }

  api::Status apply(const Json& v, const std::string& w) {
    if (!v.is_array()) return malformed(w, "must be a list of manifests");
    for (size_t j = 0; j < v.size(); ++j) {
      const std::string at = w + "[" + std::to_string(j) + "]";
      if (!v[j].is_object() || !v[j].contains("metadata") || !v[j]["metadata"].is_object())
        return malformed(at, "must be a manifest with metadata");
      TESSERA_TRY(createObject(v[j], at, /*replace=*/true));
      note("apply " + api::describeObject(v[j]));
    }
    return api::Status::success();
  }

  api::Status remove(const Json& v, const std::string& w) {
    TESSERA_ASSIGN_OR_RETURN(const auto refs, refList(v, w));
    for (const auto& ref : refs) TESSERA_TRY(deleteRef(ref, w));
    return api::Status::success();
  }

  api::Status finish(const Json& v, const std::string& w, bool succeeded) {
    TESSERA_ASSIGN_OR_RETURN(const auto refs, refList(v, w));
    for (const auto& ref : refs) {
      auto [ns, name] = scenario::splitPodRef(ref);
      auto st = cluster_->finishPod(ns, name, succeeded);
      if (!st.ok()) return malformed(w, ref + ": " + st.error().message);
      note(std::string(succeeded ? "complete " : "fail ") + ref);
    }
    return api::Status::success();
  }

  api::Status expect(const Json& v, const std::string& w) {
    const scenario::Observed observed{*cluster_, *cache_, evicted_, lastPipelined_};
    const size_t failedBefore = outcome_.failures.size();
    const int checkedBefore = outcome_.expectationsChecked;
    api::Status st = scenario::checkExpectations(v, w, observed, outcome_);
    if (options_.report && st.ok()) reportExpectations(w, failedBefore, outcome_.expectationsChecked - checkedBefore);
    return st;
  }

 private:
  // ---------------------------------------------------------------- loading
  api::Status load() {
    std::ifstream in(file_);
    if (!in) return api::makeError("cannot open file");
    std::stringstream buf;
    buf << in.rdbuf();
    TESSERA_ASSIGN_OR_RETURN(auto docs, api::yamlToJson(buf.str()));
    if (docs.size() != 1) return api::makeError("expected one YAML document, got " + std::to_string(docs.size()));
    doc_ = std::move(docs.front());
    if (!doc_.is_object()) return api::makeError("a scenario must be a map");
    for (const auto& [k, v] : doc_.items())
      if (!isTopKey(k)) return malformed(k, "unknown key (valid: " + topKeys() + ")");
    if (!doc_.contains("name") || !doc_["name"].is_string() || doc_["name"].get<std::string>().empty())
      return malformed("name", "required string");
    outcome_.name = doc_["name"].get<std::string>();
    if (doc_.contains("description") && doc_["description"].is_string())
      outcome_.description = doc_["description"].get<std::string>();

    const Json* cfg = doc_.contains("config") ? &doc_["config"] : nullptr;
    auto config = framework::loadConfig(builtinRegistry(), cfg);
    if (!config.ok()) return malformed("config", config.error().message);
    config_ = std::move(config).value();

    api::Time start = api::parseTime("2026-01-01T00:00:00Z").value();
    if (doc_.contains("clock")) {
      if (!doc_["clock"].is_string()) return malformed("clock", "must be an RFC 3339 time string");
      auto t = api::parseTime(doc_["clock"].get<std::string>());
      if (!t.ok()) return malformed("clock", t.error().message);
      start = *t;
    }
    clock_ = std::make_unique<api::FakeClock>(start);
    cluster_ = std::make_unique<cache::MemoryCluster>(*clock_);
    if (doc_.contains("objects")) TESSERA_TRY(createObjects(doc_["objects"], start));

    cache::CacheOptions co;
    co.schedulerName = config_.schedulerName;
    if (!config_.shard.empty()) {
      // A shard of the embedded cluster (docs/sharding.md): its SchedulingShard is among the objects.
      auto shard = loadShard(*cluster_, config_.shard);
      if (!shard.ok()) return malformed("config.shard", shard.error().message);
      if (!shard->config.is_null()) {
        Json merged = cfg ? *cfg : Json::object();
        merged.merge_patch(shard->config);
        auto withShard = framework::loadConfig(builtinRegistry(), &merged);
        if (!withShard.ok())
          return malformed("config.shard", "SchedulingShard " + config_.shard + " spec.config: " + withShard.error().message);
        config_ = std::move(withShard).value();
      }
      co.schedulerName = config_.schedulerName;
      co.shard = shard->scope;
      co.awaitJoins = true;
    }
    co.gpuDefaults = config_.gpuSharing.defaults;
    cache_ = std::make_unique<cache::Cache>(*cluster_, *clock_, std::move(co));
    if (auto st = cache_->start(); !st.ok()) return api::makeError("starting the cache: " + st.error().message);
    PipelineOptions po;
    po.synchronous = true;  // a cycle's binds and status writes complete within it, deterministically
    pipeline_ = std::make_unique<Pipeline>(*cluster_, *cache_, *clock_, config_, std::move(po));
    return api::Status::success();
  }

  /// The file's `objects`. Those without a creationTimestamp are created one second apart, in file
  /// order, ending one second before the virtual start time.
  api::Status createObjects(const Json& objs, api::Time start) {
    if (!objs.is_array()) return malformed("objects", "must be a list of manifests");
    int64_t missing = 0;
    for (const auto& o : objs)
      if (!(o.is_object() && o.contains("metadata") && o["metadata"].is_object() &&
            o["metadata"].contains("creationTimestamp")))
        ++missing;
    int64_t k = 0;
    for (size_t i = 0; i < objs.size(); ++i) {
      Json obj = objs[i];
      const std::string where = "objects[" + std::to_string(i) + "]";
      if (!obj.is_object()) return malformed(where, "must be a manifest (a map)");
      if (!obj.contains("metadata") || !obj["metadata"].is_object())
        return malformed(where + ".metadata", "required map");
      if (!obj["metadata"].contains("creationTimestamp"))
        obj["metadata"]["creationTimestamp"] = api::formatTime(start + api::Duration{-(missing - k++) * 1000});
      TESSERA_TRY(createObject(obj, where, /*replace=*/false));
    }
    return api::Status::success();
  }

  /// Validates a manifest the way the API server would (kind known, object convertible) and
  /// creates (or, for `apply`, replaces) it.
  api::Status createObject(Json obj, const std::string& where, bool replace) {
    auto kind = api::kindOf(obj);
    if (!kind.ok()) return malformed(where, kind.error().message);
    const api::KindInfo& ki = api::kindInfo(*kind);
    if (ki.namespaced && !obj["metadata"].contains("namespace")) obj["metadata"]["namespace"] = "default";
    api::Status valid = api::Status::success();
    switch (*kind) {
      case Kind::Pod: if (auto r = api::podFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::Node: if (auto r = api::nodeFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::PodGroup: if (auto r = api::podGroupFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::VolcanoPodGroup:
      case Kind::SchedulerPluginsPodGroup:
        if (auto r = api::foreignPodGroupFromJson(*kind, obj); !r.ok()) valid = r.error();
        break;
      case Kind::Queue: if (auto r = api::queueFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::Topology: if (auto r = api::topologyFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::PriorityClass: if (auto r = api::priorityClassFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::Namespace: if (auto r = api::namespaceFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::ConfigMap: if (auto r = api::configMapFromJson(obj); !r.ok()) valid = r.error(); break;
      case Kind::SchedulingShard: if (auto r = shardFromJson(obj); !r.ok()) valid = r.error(); break;
      default:
        if (grouper::isWorkloadKind(*kind)) break;  // owners of pods, read by the pod grouper as given
        return malformed(where, "kind " + std::string(ki.name) + " cannot be given in a scenario");
    }
    if (!valid.ok()) return malformed(where, valid.error().message);
    // Read strictly, as kubectl apply --validate=strict would: a field the API server does not know
    // (a `spec:` indented under `metadata:`, a misspelt key) would make a test pass vacuously.
    if (auto unknown = cache::unknownFields(*kind, obj); !unknown.empty()) {
      std::string more = unknown.size() > 1 ? " (and " + std::to_string(unknown.size() - 1) + " more)" : "";
      return malformed(where, api::describeObject(obj) + ": unknown field \"" + unknown.front() + "\"" + more);
    }
    auto res = replace ? cluster_->apply(*kind, obj) : cluster_->create(*kind, obj);
    if (!res.ok()) return malformed(where, res.error().message);
    return api::Status::success();
  }

  // ---------------------------------------------------------------- running
  api::Status execute();

  api::Result<std::vector<std::string>> refList(const Json& v, const std::string& where) const {
    if (!v.is_array()) return malformed(where, "must be a list of references");
    std::vector<std::string> out;
    for (const auto& r : v) {
      if (!r.is_string()) return malformed(where, "references are strings, got " + r.dump());
      out.push_back(r.get<std::string>());
    }
    return out;
  }

  api::Status deleteRef(const std::string& ref, const std::string& where) {
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
      if (!k) return malformed(where, "unknown kind in \"" + ref + "\"");
      kind = *k;
      if (parts.size() == 3) ns = parts[1], name = parts[2];
      else name = parts[1];
    } else {
      return malformed(where, "bad reference \"" + ref + "\" (ns/name, Kind/name or Kind/ns/name)");
    }
    auto st = cluster_->remove(kind, ns, name);
    if (!st.ok()) return malformed(where, ref + ": " + st.error().message);
    note("delete " + ref);
    return api::Status::success();
  }

  void note(const std::string& line) {
    if (options_.timeline) *options_.timeline << line << "\n";
    if (options_.report) reportNotes_.push_back(line);
  }

  // ---------------------------------------------------------------- the HTML report
  /// After a cycle: the UI's state of the cluster as the cycle left it (a fresh snapshot, with the
  /// cycle's queue figures and reasons), and the cycle's timeline lines.
  void reportCycle(const framework::SessionResult& result, const framework::CycleStats& stats,
                   const std::vector<binder::BindRecord>& records, const cache::MemoryCluster::KubeletReport& kubelet) {
    Json& report = *options_.report;
    std::ostringstream text;
    for (const std::string& n : reportNotes_) text << n << "\n";
    reportNotes_.clear();
    scenario::printCycle(text, cycle_, clock_->now(), result, stats, records);
    scenario::printKubelet(text, kubelet);
    Json lines = Json::array();
    std::istringstream in(text.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    reportCycles_.push_back({stats, clock_->now(), result.evictions});
    reportCycles_.back().stats.cycle = static_cast<uint64_t>(cycle_);
    while (reportCycles_.size() > kUiCycles) reportCycles_.pop_front();
    framework::SessionResult after = result;
    after.snapshot = cache_->snapshot();
    report["states"].push_back(uiStateJson(&after, reportCycles_, clock_->now(), "simulate", config_.schedulerName));
    report["timeline"].push_back(std::move(lines));
  }

  /// One `expect` step: an item that says it held, or one per unmet expectation.
  void reportExpectations(const std::string& where, size_t failedBefore, int checked) {
    Json& report = *options_.report;
    const int state = static_cast<int>(report["states"].size()) - 1;
    if (outcome_.failures.size() == failedBefore) {
      report["expectations"].push_back({{"state", state}, {"ok", true},
                                        {"text", where + ": " + std::to_string(checked) + " expectations hold"}});
      return;
    }
    for (size_t i = failedBefore; i < outcome_.failures.size(); ++i)
      report["expectations"].push_back({{"state", state}, {"ok", false}, {"text", outcome_.failures[i]}});
  }

  void runCycles(int n) {
    for (int i = 0; i < n; ++i) {
      framework::CycleStats stats;
      framework::SessionResult result = pipeline_->runCycle(&stats);
      ++cycle_;
      lastPipelined_.clear();
      for (const auto& p : result.pipelined) lastPipelined_[p.podKey] = p.node;
      const auto& records = pipeline_->binder().lastRecords();
      for (const auto& rec : records)
        if (rec.kind == binder::BindRecord::Kind::Evict && rec.ok) evicted_.insert(rec.podKey);
      if (options_.timeline) scenario::printCycle(*options_.timeline, cycle_, clock_->now(), result, stats, records);
      auto report = cluster_->kubeletTick();
      if (options_.timeline) scenario::printKubelet(*options_.timeline, report);
      if (options_.report) reportCycle(result, stats, records, report);
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
  std::unique_ptr<Pipeline> pipeline_;
  int cycle_ = 0;
  std::set<std::string> evicted_;
  std::map<std::string, std::string> lastPipelined_;
  std::vector<std::string> reportNotes_;  ///< steps since the last cycle, for the report's timeline
  std::deque<UiCycle> reportCycles_;
};

/// One kind of step: its key in the file and what it does.
struct Step {
  const char* key;
  api::Status (*run)(Runner&, const Json& value, const std::string& where);
};

const Step kSteps[] = {
    {"cycles", [](Runner& r, const Json& v, const std::string& w) { return r.cycles(v, w); }},
    {"advance", [](Runner& r, const Json& v, const std::string& w) { return r.advance(v, w); }},
    {"apply", [](Runner& r, const Json& v, const std::string& w) { return r.apply(v, w); }},
    {"delete", [](Runner& r, const Json& v, const std::string& w) { return r.remove(v, w); }},
    {"complete", [](Runner& r, const Json& v, const std::string& w) { return r.finish(v, w, true); }},
    {"fail", [](Runner& r, const Json& v, const std::string& w) { return r.finish(v, w, false); }},
    {"expect", [](Runner& r, const Json& v, const std::string& w) { return r.expect(v, w); }},
};

std::string stepKeys() {
  std::string s;
  for (const auto& step : kSteps) s += (s.empty() ? "" : ", ") + std::string(step.key);
  return s;
}

api::Status Runner::execute() {
  if (!doc_.contains("steps")) {
    runCycles(1);
    if (doc_.contains("expect")) TESSERA_TRY(expect(doc_["expect"], "expect"));
    return api::Status::success();
  }
  if (doc_.contains("expect"))
    return malformed("expect", "top-level expect is only allowed without steps (put it in a step)");
  const Json& steps = doc_["steps"];
  if (!steps.is_array()) return malformed("steps", "must be a list");
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string where = "steps[" + std::to_string(i) + "]";
    const Json& step = steps[i];
    if (!step.is_object() || step.size() != 1)
      return malformed(where, "each step is a map with exactly one key (" + stepKeys() + ")");
    const std::string key = step.begin().key();
    const auto* s = std::find_if(std::begin(kSteps), std::end(kSteps), [&](const Step& x) { return key == x.key; });
    if (s == std::end(kSteps)) return malformed(where, "unknown step \"" + key + "\" (valid: " + stepKeys() + ")");
    TESSERA_TRY(s->run(*this, step.begin().value(), where + "." + key));
  }
  return api::Status::success();
}

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
  if (args.empty() || api::helpRequested(args)) {
    out << "usage: tessera check FILE|DIR...\n";
    return args.empty() ? 2 : 0;
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
  const bool help = api::helpRequested(args);
  std::string file, html;
  bool usage = help;
  for (size_t i = 0; i < args.size() && !usage; ++i) {
    if (args[i] == "--html" && i + 1 < args.size()) html = args[++i];
    else if (args[i].rfind("--html=", 0) == 0) html = args[i].substr(7);
    else if (file.empty() && args[i].rfind("--", 0) != 0) file = args[i];
    else usage = true;
  }
  if (usage || file.empty()) {
    out << "usage: tessera simulate FILE [--html OUT.html]\n"
           "  --html OUT.html  also write the run as one self-contained HTML page (docs/ui.md)\n";
    return help ? 0 : 2;
  }
  ScenarioOptions opts;
  opts.timeline = &out;
  Json report = {{"states", Json::array()}, {"timeline", Json::array()}, {"expectations", Json::array()}};
  if (!html.empty()) opts.report = &report;
  ScenarioOutcome o = runScenarioFile(file, opts);
  if (o.loadError) {
    for (const auto& m : o.failures) out << "error: " << m << "\n";
    return 1;
  }
  if (!html.empty()) {
    report["scenario"] = o.name;
    report["description"] = o.description;
    report["passed"] = o.failures.empty();
    std::ofstream page(html, std::ios::binary);
    page << uiReportPage(report);
    if (!page.good()) {
      out << "error: cannot write " << html << "\n";
      return 1;
    }
    out << "report written to " << html << "\n";
  }
  out << "\n" << o.name << ": " << o.expectationsChecked << " expectations checked, "
      << (o.failures.empty() ? "all hold" : std::to_string(o.failures.size()) + " unmet") << "\n";
  for (const auto& m : o.failures) out << "  " << m << "\n";
  return o.failures.empty() ? 0 : 1;
}

}  // namespace tessera::app
