// The status writer (status_writer.h): desired state computed in memory on the scheduler thread,
// written by one writer (the background thread or drain()) in batches of coalesced, deduplicated
// writes. All writes of a batch happen under writeMu_, and a batch is taken from the queue under it
// too, so two versions of one object are never written out of order.
#include "tessera/binder/status_writer.h"
#include "tessera/binder/events.h"

#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tessera/api/quantity.h"
#include "tessera/api/validation.h"

namespace tessera::binder {

namespace {

using Json = cache::Json;

/// The reason of every condition and event about an invalid object.
constexpr const char* kInvalidSpec = "InvalidSpec";

Json resourceList(const api::Resources& r) {
  Json out = Json::object();
  auto put = [&](std::string_view name, int64_t v) {
    if (v >= 0) out[std::string(name)] = api::formatResourceAmount(name, v);
  };
  put(api::kResourceGpu, r.milliGpu);
  put(api::kResourceCpu, r.milliCpu);
  put(api::kResourceMemory, r.memory);
  return out;
}

Json condition(const std::string& type, bool status, const std::string& reason, const std::string& message) {
  return Json{{"type", type}, {"status", status ? "True" : "False"}, {"reason", reason}, {"message", message}};
}

}  // namespace

struct StatusWriter::Impl {
  /// One queued write. Keyed (and coalesced) by `key`.
  struct Item {
    enum class Type { Status, PodCondition, Event } type = Type::Status;
    api::Kind kind = api::Kind::PodGroup;
    std::string ns, name;
    Json body;           ///< Status: the status object; PodCondition: the condition; Event: {reason, message}
    std::string digest;  ///< the content deduplicated on (without timestamps)
  };

  cache::ClusterClient& client;
  const api::Clock& clock;
  StatusWriterOptions options;

  std::mutex mu;  // guards everything below up to writeMu
  std::condition_variable cv;
  std::map<std::string, Item> queue;           ///< coalescing: the newest write per key
  std::map<std::string, std::string> written;  ///< key -> digest last queued (erased when a write fails)
  StatusWriterStats stats;
  bool stopping = false;

  std::mutex writeMu;  // one batch at a time
  /// Transition times of the conditions last queued, by object key then type: (status, time).
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> transitions;  // scheduler thread
  std::set<std::string> seen;  ///< keys wanted by the current update() (scheduler thread)
  /// What a PodGroup's status was last computed from (scheduler thread).
  struct JobMemo {
    std::shared_ptr<const cache::JobInfo> job;
    int32_t placed = 0;
    std::string problem, unschedulable;
    bool operator==(const JobMemo& o) const {
      return job == o.job && placed == o.placed && problem == o.problem && unschedulable == o.unschedulable;
    }
  };
  std::map<std::string, JobMemo> jobMemo;
  std::thread worker;

  Impl(cache::ClusterClient& c, const api::Clock& k, StatusWriterOptions o)
      : client(c), clock(k), options(std::move(o)) {
    if (options.background) worker = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mu);
      stopping = true;
      cv.notify_all();
    }
    if (worker.joinable()) worker.join();
  }

  // ---------------------------------------------------------------- desired state (scheduler thread)

  /// Queues `item` under `key` unless its digest is the one last queued.
  void want(const std::string& key, Item item) {
    seen.insert(key);
    item.digest = item.body.dump();
    std::lock_guard lock(mu);
    auto it = written.find(key);
    if (it != written.end() && it->second == item.digest) return;
    written[key] = item.digest;
    auto [q, inserted] = queue.insert_or_assign(key, std::move(item));
    (void)q;
    ++stats.queued;
    if (!inserted) ++stats.coalesced;
    cv.notify_all();
  }

  /// Adds lastTransitionTime to each condition: kept while its status stays, now when it changes.
  void stampConditions(const std::string& key, Json& conditions) {
    auto& known = transitions[key];
    const std::string now = api::formatTime(clock.now());
    for (Json& c : conditions) {
      const std::string type = c.value("type", ""), status = c.value("status", "");
      auto it = known.find(type);
      if (it == known.end() || it->second.first != status)
        it = known.insert_or_assign(type, std::pair{status, now}).first;
      c["lastTransitionTime"] = it->second.second;
    }
  }

  /// A status write: deduplicated on the content without timestamps, then stamped.
  void wantStatus(api::Kind kind, const std::string& ns, const std::string& name, Json status) {
    const std::string key = api::Problem::objectRef(kind, ns, name);
    seen.insert("status:" + key);
    const std::string digest = status.dump();
    {
      std::lock_guard lock(mu);
      auto it = written.find("status:" + key);
      if (it != written.end() && it->second == digest) return;
    }
    Json stamped = status;
    if (stamped.contains("conditions")) stampConditions(key, stamped["conditions"]);
    Item item{Item::Type::Status, kind, ns, name, std::move(stamped), {}};
    // The digest is the unstamped content: the next identical update is a no-op.
    std::lock_guard lock(mu);
    written["status:" + key] = digest;
    item.digest = digest;
    auto [q, inserted] = queue.insert_or_assign("status:" + key, std::move(item));
    (void)q;
    ++stats.queued;
    if (!inserted) ++stats.coalesced;
    cv.notify_all();
  }

  void wantEvent(api::Kind kind, const std::string& ns, const std::string& name, const std::string& message) {
    if (!options.writeEvents) return;
    want("event:" + api::Problem::objectRef(kind, ns, name),
         Item{Item::Type::Event, kind, ns, name, Json{{"reason", kInvalidSpec}, {"message", message}}, {}});
  }

  void update(const framework::SessionResult& result, const cache::Snapshot& s) {
    seen.clear();
    compute(result, s);
    // Forget objects that are gone (or whose problem went away): the maps stay as large as the
    // cluster, and a problem that comes back is reported again.
    std::lock_guard lock(mu);
    for (auto it = written.begin(); it != written.end();)
      it = seen.count(it->first) || queue.count(it->first) ? std::next(it) : written.erase(it);
    for (auto it = transitions.begin(); it != transitions.end();)
      it = seen.count("status:" + it->first) ? std::next(it) : transitions.erase(it);
    for (auto it = jobMemo.begin(); it != jobMemo.end();)
      it = seen.count("status:" + it->first) ? std::next(it) : jobMemo.erase(it);
  }

  void compute(const framework::SessionResult& result, const cache::Snapshot& s) {
    // Problems by object: conversion errors first (the newest version of the object), then the
    // validation layer's.
    std::map<std::string, std::string> problems;  // ref -> text
    for (const auto& e : s.conversionErrors)
      problems.emplace(api::Problem::objectRef(e.kind, e.namespace_, e.name), e.message);
    for (const auto& [ref, p] : s.invalid) problems.emplace(ref, p.text());

    // Jobs with pods this cycle left pending (not merely pipelined), and why.
    std::map<const cache::JobInfo*, const std::string*> unschedulable;
    for (const auto& p : result.pods)
      if (!p.pipelinedTo) {
        const auto& js = result.jobs[p.jobStatus];
        unschedulable.emplace(js.job, &result.message(js));
      }

    // Pods bound by this cycle: the snapshot was taken before them.
    std::set<std::string_view> boundNow;
    for (const auto& b : result.binds) boundNow.insert(b.podKey);

    // PodGroups of jobs.
    for (const auto& jp : s.jobs) {
      const cache::JobInfo& job = *jp;
      if (job.isSingleton() || !job.podGroup) continue;
      int32_t running = 0, placed = 0;
      for (const auto& t : job.tasks) {
        running += t.status == cache::TaskStatus::Running ? 1 : 0;
        placed += t.status == cache::TaskStatus::Pending && boundNow.count(t.key) ? 1 : 0;
      }
      const int32_t scheduled = job.allocatedCount + placed;
      auto prob = problems.find(job.key);
      auto un = unschedulable.find(&job);
      // Unchanged inputs (the snapshot shares an unchanged JobInfo with the last one): the status
      // is the one already queued; skip building it (thousands of PodGroups per cycle).
      JobMemo memo{jp, placed, prob != problems.end() ? prob->second : "",
                   un != unschedulable.end() ? *un->second : ""};
      const std::string statusKey = "status:" + api::Problem::objectRef(api::Kind::PodGroup, job.namespace_, job.name);
      if (auto m = jobMemo.find(job.key); m != jobMemo.end() && m->second == memo) {
        std::lock_guard lock(mu);
        if (written.count(statusKey)) {
          seen.insert(statusKey);
          continue;
        }
      }
      jobMemo.insert_or_assign(job.key, std::move(memo));
      const int32_t total = static_cast<int32_t>(job.tasks.size());
      std::string phase;
      if (prob != problems.end()) phase = "Unschedulable";
      else if (total > 0 && job.succeededCount + job.failedCount == total)
        phase = job.failedCount > 0 ? "Failed" : "Succeeded";
      else if (scheduled + job.succeededCount >= job.minMember) phase = "Running";
      else if (un != unschedulable.end()) phase = "Unschedulable";
      else phase = "Pending";
      Json conds = Json::array();
      if (prob != problems.end()) conds.push_back(condition("Valid", false, kInvalidSpec, prob->second));
      else conds.push_back(condition("Valid", true, "Valid", ""));
      if (un != unschedulable.end()) conds.push_back(condition("Unschedulable", true, "Unschedulable", *un->second));
      else if (prob != problems.end()) conds.push_back(condition("Unschedulable", true, kInvalidSpec, prob->second));
      else conds.push_back(condition("Unschedulable", false, "Schedulable", ""));
      Json status = {{"phase", phase},
                     {"running", running},
                     {"pending", job.pendingCount - placed},
                     {"succeeded", job.succeededCount},
                     {"failed", job.failedCount},
                     {"scheduled", scheduled},
                     {"conditions", std::move(conds)}};
      wantStatus(api::Kind::PodGroup, job.namespace_, job.name, std::move(status));
    }

    // Queues: every declared queue, with the proportion plugin's figures when it reported them.
    std::map<std::string, const framework::SessionResult::QueueReport*> reports;
    for (const auto& r : result.queues) reports.emplace(r.name, &r);
    for (const auto& [name, qi] : s.queues) {
      if (!qi->queue) continue;
      const std::string ref = api::Problem::objectRef(api::Kind::Queue, "", name);
      auto prob = problems.find(ref);
      Json status = Json::object();
      auto rep = reports.find(name);
      if (rep != reports.end()) {
        status["allocated"] = resourceList(rep->second->allocated);
        status["requested"] = resourceList(rep->second->requested);
        status["fairShare"] = resourceList(rep->second->fairShare);
      } else {
        status["allocated"] = resourceList(qi->allocated);
      }
      status["conditions"] = Json::array({prob != problems.end() ? condition("Valid", false, kInvalidSpec, prob->second)
                                                                 : condition("Valid", true, "Valid", "")});
      wantStatus(api::Kind::Queue, "", name, std::move(status));
    }

    // Objects the cache could not convert (and holds no earlier version of): the reason alone.
    for (const auto& e : s.conversionErrors) {
      const std::string ref = api::Problem::objectRef(e.kind, e.namespace_, e.name);
      if (e.kind == api::Kind::Queue && !s.queues.count(e.name)) {
        wantStatus(api::Kind::Queue, "", e.name,
                   Json{{"conditions", Json::array({condition("Valid", false, kInvalidSpec, e.message)})}});
      } else if (const cache::JobInfo* job = e.kind == api::Kind::PodGroup ? s.findJob(ref) : nullptr;
                 e.kind == api::Kind::PodGroup && !(job && job->podGroup)) {  // its pods' job knows no PodGroup
        wantStatus(api::Kind::PodGroup, e.namespace_, e.name,
                   Json{{"phase", "Unschedulable"},
                        {"conditions", Json::array({condition("Valid", false, kInvalidSpec, e.message),
                                                    condition("Unschedulable", true, kInvalidSpec, e.message)})}});
      } else if (e.kind == api::Kind::Pod) {
        want("podcondition:" + ref, Item{Item::Type::PodCondition,
                                         e.kind,
                                         e.namespace_,
                                         e.name,
                                         condition("PodScheduled", false, kInvalidSpec, e.message),
                                         {}});
      }
    }
    // Every problem gets one event on its object (deduplicated by message).
    for (const auto& [ref, text] : problems) {
      std::vector<std::string> parts;
      for (size_t b = 0, e; b <= ref.size(); b = e + 1) {
        e = ref.find('/', b);
        if (e == std::string::npos) e = ref.size();
        parts.push_back(ref.substr(b, e - b));
      }
      auto kind = api::kindFromName(parts[0]);
      if (!kind || *kind == api::Kind::Pod || parts.size() < 2) continue;  // pods: with their condition
      if (parts.size() == 3) wantEvent(*kind, parts[1], parts[2], text);
      else wantEvent(*kind, "", parts[1], text);
    }
  }

  // ---------------------------------------------------------------- writing (writer thread or drain)

  void run() {
    for (;;) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
      }
      drain();
    }
  }

  void drain() {
    std::lock_guard w(writeMu);
    std::map<std::string, Item> batch;
    {
      std::lock_guard lock(mu);
      batch.swap(queue);
    }
    for (auto& [key, item] : batch) {
      api::Status st = write(item);
      std::lock_guard lock(mu);
      if (st.ok()) {
        ++stats.written;
        continue;
      }
      // Forget it so that the next update() queues it again (a 404: the object is gone, or a new
      // one of that name will need its own write).
      auto it = written.find(key);
      if (it != written.end() && it->second == item.digest) written.erase(it);
      if (st.error().code == 404) continue;
      ++stats.failed;
      std::fprintf(stderr, "tessera: status of %s %s/%s: %s\n", std::string(api::kindInfo(item.kind).name).c_str(),
                   item.ns.c_str(), item.name.c_str(), st.error().message.c_str());
    }
  }

  api::Status write(Item& item) {
    switch (item.type) {
      case Item::Type::Status: {
        auto r = client.patch(item.kind, item.ns, item.name, cache::PatchType::Merge, Json{{"status", item.body}},
                              /*statusSubresource=*/true);
        return r.ok() ? api::Status::success() : api::Status(r.error());
      }
      case Item::Type::PodCondition: {
        // Only our own unbound pods: a pod of another scheduler, or one already bound, is not ours
        // to mark (its last good version may be running).
        auto pod = client.get(api::Kind::Pod, item.ns, item.name);
        if (!pod.ok()) return pod.error();
        const Json spec = pod->value("spec", Json::object());
        if (!spec.is_object() || spec.value("nodeName", "") != "" ||
            spec.value("schedulerName", "") != options.schedulerName)
          return api::Status::success();
        Json cond = item.body;
        cond["lastTransitionTime"] = api::formatTime(clock.now());
        auto r = client.patch(api::Kind::Pod, item.ns, item.name, cache::PatchType::StrategicMerge,
                              Json{{"status", {{"conditions", Json::array({cond})}}}}, /*statusSubresource=*/true);
        if (!r.ok()) return r.error();
        return event(api::Kind::Pod, item.ns, item.name, r->value("metadata", Json::object()).value("uid", ""),
                     item.body.value("message", ""));
      }
      case Item::Type::Event: {
        if (item.kind == api::Kind::Pod) return api::Status::success();  // written with its condition
        return event(item.kind, item.ns, item.name, "", item.body.value("message", ""));
      }
    }
    return api::Status::success();
  }

  api::Status event(api::Kind kind, const std::string& ns, const std::string& name, const std::string& uid,
                    const std::string& message) {
    if (!options.writeEvents) return api::Status::success();
    const Json ev = makeEvent(kind, ns, name, uid, "Warning", kInvalidSpec, message, options.component, clock.now());
    auto r = client.create(api::Kind::Event, ev);
    return r.ok() ? api::Status::success() : api::Status(r.error());
  }
};

StatusWriter::StatusWriter(cache::ClusterClient& client, const api::Clock& clock, StatusWriterOptions options)
    : impl_(std::make_unique<Impl>(client, clock, std::move(options))) {}

StatusWriter::~StatusWriter() = default;

void StatusWriter::update(const framework::SessionResult& result, const cache::Snapshot& snapshot) {
  impl_->update(result, snapshot);
}

void StatusWriter::drain() { impl_->drain(); }

StatusWriterStats StatusWriter::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace tessera::binder
