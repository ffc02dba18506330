#include "tessera/binder/binder.h"

#include <cstdio>

namespace tessera::binder {

namespace {

/// Splits "ns/name".
std::pair<std::string, std::string> splitKey(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

}  // namespace

Binder::Binder(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, BinderOptions options)
    : client_(client), cache_(cache), clock_(clock), options_(std::move(options)) {}

Binder::~Binder() = default;

void Binder::apply(const framework::SessionResult& result, const cache::Snapshot&) {
  records_.clear();
  for (const auto& e : result.evictions) evict(e);
  for (const auto& b : result.binds) bind(b);
  for (const auto& p : result.pods) reportUnschedulable(p.task->key, result.podMessage(p));
  for (const auto& j : result.jobs) reportJob(j.job->key, result.message(j));
  if (options_.afterApply) options_.afterApply(result);
}

void Binder::evict(const framework::SessionResult::Evict& e) {
  auto [ns, name] = splitKey(e.podKey);
  const std::string now = api::formatTime(clock_.now());
  // Tell the workload why before it goes (Kubernetes' DisruptionTarget convention).
  cache::Json patch = {{"status",
                        {{"conditions",
                          {{{"type", "DisruptionTarget"},
                            {"status", "True"},
                            {"reason", "PreemptionByScheduler"},
                            {"message", e.reason},
                            {"lastTransitionTime", now}}}}}}};
  (void)client_.patch(api::Kind::Pod, ns, name, cache::PatchType::StrategicMerge, patch, /*status=*/true);
  cache::DeleteOptions opts;
  opts.preconditionUid = e.podUid;
  auto st = client_.remove(api::Kind::Pod, ns, name, opts);
  BindRecord rec{BindRecord::Kind::Evict, e.podKey, e.node, st.ok(), st.ok() ? "" : st.error().message};
  if (st.ok()) {
    cache_.assumeEvicted(e.podKey);
    event(api::Kind::Pod, ns, name, e.podUid, "Warning", "Preempted", e.reason);
  } else {
    std::fprintf(stderr, "tessera: evicting pod %s: %s\n", e.podKey.c_str(), st.error().message.c_str());
  }
  records_.push_back(std::move(rec));
}

void Binder::bind(const framework::SessionResult::Bind& b) {
  auto [ns, name] = splitKey(b.podKey);
  if (options_.preBind && !b.gpus.empty()) {
    auto prep = options_.preBind(b);
    if (!prep.ok()) {
      std::fprintf(stderr, "tessera: preparing GPUs of pod %s on %s: %s\n", b.podKey.c_str(), b.node.c_str(),
                   prep.error().message.c_str());
      event(api::Kind::Pod, ns, name, b.podUid, "Warning", "FailedBinding", prep.error().message);
      records_.push_back(BindRecord{BindRecord::Kind::Bind, b.podKey, b.node, false, prep.error().message});
      return;
    }
  }
  auto st = client_.bind(ns, name, b.podUid, b.node);
  bool ok = st.ok();
  std::string error = ok ? "" : st.error().message;
  if (!ok && st.error().code == 409) {
    // Already bound: a success if it is bound where we wanted it.
    auto pod = client_.get(api::Kind::Pod, ns, name);
    if (pod.ok() && pod->contains("spec") && (*pod)["spec"].value("nodeName", "") == b.node) ok = true, error.clear();
  }
  if (ok) {
    cache_.assumeBound(b.podKey, b.node);
    lastCondition_.erase(b.podKey);
    event(api::Kind::Pod, ns, name, b.podUid, "Normal", "Scheduled",
          "Successfully assigned " + b.podKey + " to " + b.node);
  } else {
    std::fprintf(stderr, "tessera: binding pod %s to %s: %s\n", b.podKey.c_str(), b.node.c_str(), error.c_str());
  }
  records_.push_back(BindRecord{BindRecord::Kind::Bind, b.podKey, b.node, ok, error});
}

void Binder::reportUnschedulable(const std::string& podKey, const std::string& message) {
  auto it = lastCondition_.find(podKey);
  if (it != lastCondition_.end() && it->second == message) return;  // nothing new to say
  auto [ns, name] = splitKey(podKey);
  cache::Json patch = {{"status",
                        {{"conditions",
                          {{{"type", "PodScheduled"},
                            {"status", "False"},
                            {"reason", "Unschedulable"},
                            {"message", message},
                            {"lastTransitionTime", api::formatTime(clock_.now())}}}}}}};
  auto res = client_.patch(api::Kind::Pod, ns, name, cache::PatchType::StrategicMerge, patch, /*status=*/true);
  if (!res.ok()) {
    std::fprintf(stderr, "tessera: updating status of pod %s: %s\n", podKey.c_str(), res.error().message.c_str());
    return;
  }
  lastCondition_[podKey] = message;
  std::string uid;
  if (res->contains("metadata")) uid = (*res)["metadata"].value("uid", "");
  event(api::Kind::Pod, ns, name, uid, "Warning", "FailedScheduling", message);
}

void Binder::reportJob(const std::string& jobKey, const std::string& message) {
  if (jobKey.rfind("PodGroup/", 0) != 0) return;  // a group of one: its pod carries the message
  auto [ns, name] = splitKey(jobKey.substr(9));
  event(api::Kind::PodGroup, ns, name, "", "Warning", "Unschedulable", message);
}

void Binder::event(api::Kind kind, const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& type, const std::string& reason, const std::string& message) {
  if (!options_.writeEvents) return;
  const api::KindInfo& ki = api::kindInfo(kind);
  const std::string key = std::string(ki.name) + "/" + ns + "/" + name + "/" + reason;
  auto it = lastEvent_.find(key);
  if (it != lastEvent_.end() && it->second == message) return;  // deduplicated: no event per cycle
  lastEvent_[key] = message;
  const std::string now = api::formatTime(clock_.now());
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".%016llx", static_cast<unsigned long long>(++eventCounter_));
  cache::Json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name + suffix}, {"namespace", ns.empty() ? "default" : ns}}},
      {"involvedObject",
       {{"apiVersion", ki.apiVersion()}, {"kind", std::string(ki.name)}, {"namespace", ns}, {"name", name}, {"uid", uid}}},
      {"reason", reason},
      {"message", message},
      {"type", type},
      {"source", {{"component", options_.component}}},
      {"count", 1},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
  };
  auto res = client_.create(api::Kind::Event, ev);
  if (!res.ok())
    std::fprintf(stderr, "tessera: recording event on %s %s/%s: %s\n", std::string(ki.name).c_str(), ns.c_str(),
                 name.c_str(), res.error().message.c_str());
}

}  // namespace tessera::binder
