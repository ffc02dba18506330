// The status writer (status_writer.h): producers queue writes in memory (the desired state computed
// on the scheduler thread by update(), and the binder's conditions and events); one writer (the
// background thread or drain()) writes the queue in order, state before Events, one write at a
// time, under writeMu, so two versions of one object are never written out of order and settle()
// can wait for a pod's condition write to finish.
#include "tessera/binder/status_writer.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "tessera/api/log.h"
#include "tessera/api/quantity.h"
#include "tessera/api/text.h"
#include "tessera/api/validation.h"
#include "tessera/binder/events.h"

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
  // The message may quote what a user wrote (an annotation's bytes): JSON must be UTF-8.
  return Json{{"type", type}, {"status", status ? "True" : "False"}, {"reason", reason}, {"message", api::validUtf8(message)}};
}

// The keys writes are deduplicated and coalesced on: the object (its ref) and what about it.
std::string statusKey(const std::string& ref) { return "status:" + ref; }
std::string conditionKey(const std::string& ref, const std::string& reason) {
  return "condition:" + ref + "/" + reason;
}
std::string eventKey(const std::string& ref, const std::string& reason) { return "event:" + ref + "/" + reason; }

}  // namespace

struct StatusWriter::Impl {
  /// One queued write.
  struct Item {
    enum class Type { Status, PodCondition, Event, EventCount, Annotation, Put } type = Type::Status;
    api::Kind kind = api::Kind::PodGroup;
    std::string ns, name;  ///< the object written (EventCount: the Event)
    std::string ref;       ///< the object it is about (Problem::objectRef): what pruning follows
    /// Status: the status object; PodCondition: the condition (stamped when written); Annotation:
    /// the merge patch; Put: the object; EventCount: the patch of count and lastTimestamp
    Json body;
    EventSpec event;     ///< Event: the event; PodCondition: the event that follows it once written
    std::string key;     ///< deduplicated (and, unless an event of a decision, coalesced) on
    std::string digest;  ///< the content deduplicated on (without timestamps)
    bool onlyOurs = false;      ///< PodCondition: written only on an unbound pod of our scheduler
    bool dedupeFollow = false;  ///< PodCondition: the event that follows is deduplicated on its own key
  };
  /// What was last queued under a key.
  struct Mark {
    std::string digest;
    bool desired = false;  ///< queued by update(), which forgets it once it stops wanting it
    std::string ref;       ///< the object it is about
  };
  /// An Event written, and how often it happened since (its series).
  struct Series {
    std::string ref, uid, message;  ///< the object (and its UID) and the event's message
    std::string dedupKey;           ///< the mark that suppresses the repetitions (event or condition)
    std::string eventNs, eventName;
    int64_t count = 1, written = 1;  ///< occurrences; occurrences the Event says
    api::Time lastWrite;
  };

  cache::ClusterClient& client;
  const api::Clock& clock;
  StatusWriterOptions options;

  mutable std::mutex mu;  // guards everything below up to writeMu
  std::condition_variable cv, idle;
  std::map<std::string, Item> queued;  ///< by queue key (the write's key; events of decisions: a sequence)
  /// Queue keys in the order first queued, per lane: the state users read (settled ones are
  /// skipped), then Events (written once no state write waits; never settled, so its size is
  /// what waits there).
  std::deque<std::string> order, eventOrder;
  uint64_t droppedInBurst = 0;  ///< Events dropped since the Event lane was last empty
  uint64_t sequence = 0;
  std::map<std::string, Mark> written;  ///< key -> last queued (erased when a write fails)
  std::map<std::string, Series> series;  ///< by seriesKey (the object and the event's reason)
  std::optional<api::Time> lastPrune;    ///< scheduler thread
  std::string writing;                  ///< key of the write in progress
  StatusWriterStats stats;
  bool stopping = false;

  std::mutex writeMu;  // one writer at a time
  /// Transition times of the conditions last queued, by object key then type: (status, time).
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> transitions;  // scheduler thread
  std::set<std::string> seen;  ///< keys wanted by the current update() (scheduler thread)
  /// What a PodGroup's status was last computed from (scheduler thread).
  struct JobMemo {
    std::shared_ptr<const cache::JobInfo> job;
    int32_t placed = 0;
    std::string problem, unschedulable;
    std::string phase{};  ///< the phase written from it (not compared)
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

  // ---------------------------------------------------------------- the queue (any thread)

  /// Under mu. Queues `item` unless its digest is the one last queued under its key; a write of
  /// the same key still queued is replaced (`coalesce`) or kept before it (events of decisions).
  void enqueue(Item item, bool coalesce, bool desired) {
    auto mark = written.find(item.key);
    if (mark != written.end() && mark->second.digest == item.digest) {
      if (item.type == Item::Type::Event || item.type == Item::Type::PodCondition) repeated(item);
      return;
    }
    std::string queueKey = coalesce ? item.key : "#" + std::to_string(sequence++);
    const bool event = isEvent(item);
    auto it = queued.find(queueKey);
    if (event && it == queued.end() && options.maxQueuedEvents > 0 && eventOrder.size() >= options.maxQueuedEvents) {
      // Not marked written: the same event wanted again later is queued then.
      ++stats.eventsDropped;
      if (droppedInBurst++ == 0)
        log::warning("status writer: ", eventOrder.size(),
                     " Events wait to be written (the API server takes them slower than they come): new ones are "
                     "dropped until the backlog shrinks (tessera_events_dropped_total)");
      return;
    }
    written.insert_or_assign(item.key, Mark{item.digest, desired, item.ref});
    ++stats.queued;
    if (it != queued.end()) {
      it->second = std::move(item);
      ++stats.coalesced;
    } else {
      queued.emplace(queueKey, std::move(item));
      (event ? eventOrder : order).push_back(std::move(queueKey));
    }
    cv.notify_all();
  }

  /// The lane of a write: Events (and their count bumps) are best effort, behind the state.
  static bool isEvent(const Item& item) {
    return item.type == Item::Type::Event || item.type == Item::Type::EventCount;
  }

  /// Under mu. Forgets `key` if `digest` is still the last content queued under it.
  void forget(const std::string& key, const std::string& digest) {
    auto it = written.find(key);
    if (it != written.end() && it->second.digest == digest) written.erase(it);
  }

  static std::string seriesKey(const EventSpec& e) {
    return eventKey(api::Problem::objectRef(e.kind, e.ns, e.name), e.reason);
  }

  /// Under mu. `item` (an event, or a condition whose event follows it) repeats what was last
  /// queued under its key: one more occurrence in the written Event's series; its count is patched
  /// once eventSeriesInterval has passed since the last write.
  void repeated(const Item& item) {
    auto it = series.find(seriesKey(item.event));
    if (it == series.end() || it->second.message != item.event.message) return;  // not written (yet)
    Series& sr = it->second;
    ++sr.count;
    const api::Time now = clock.now();
    if (now - sr.lastWrite < options.eventSeriesInterval) return;
    sr.lastWrite = now;
    Item bump;
    bump.type = Item::Type::EventCount;
    bump.kind = api::Kind::Event;
    bump.ns = sr.eventNs;
    bump.name = sr.eventName;
    bump.ref = sr.ref;
    bump.key = "series:" + it->first;
    bump.digest = std::to_string(sr.count);
    bump.body = Json{{"count", sr.count}, {"lastTimestamp", api::formatTime(now)}};
    bump.event = item.event;
    enqueue(std::move(bump), /*coalesce=*/true, /*desired=*/false);
  }

  /// Under mu. The Event `created` (as the server returned it) starts the series of `e`.
  void startSeries(const EventSpec& e, const Json& created, const std::string& dedupKey) {
    const Json meta = created.value("metadata", Json::object());
    Series sr;
    sr.ref = api::Problem::objectRef(e.kind, e.ns, e.name);
    sr.uid = e.uid;
    sr.message = e.message;
    sr.dedupKey = dedupKey;
    sr.eventNs = meta.value("namespace", "");
    sr.eventName = meta.value("name", "");
    sr.lastWrite = clock.now();
    series.insert_or_assign(seriesKey(e), std::move(sr));
  }

  /// PodScheduled=False with `reason`, followed once written by a Warning event `eventReason`.
  static Item podCondition(const std::string& ns, const std::string& name, const std::string& uid,
                           const std::string& reason, const std::string& message, const std::string& eventReason) {
    Item item;
    item.type = Item::Type::PodCondition;
    item.kind = api::Kind::Pod;
    item.ns = ns;
    item.name = name;
    item.body = condition("PodScheduled", false, reason, message);
    item.event = EventSpec{api::Kind::Pod, ns, name, uid, "Warning", eventReason, message};
    item.ref = api::Problem::objectRef(api::Kind::Pod, ns, name);
    item.key = conditionKey(item.ref, reason);
    item.digest = item.body.dump() + uid;  // a pod recreated under the same name is a new one
    return item;
  }

  static Item eventItem(EventSpec e) {
    Item item;
    item.type = Item::Type::Event;
    item.kind = e.kind;
    item.ns = e.ns;
    item.name = e.name;
    item.ref = api::Problem::objectRef(e.kind, e.ns, e.name);
    item.key = eventKey(item.ref, e.reason);
    item.digest = e.message + e.uid;
    item.event = std::move(e);
    return item;
  }

  void podsUnschedulable(std::vector<UnschedulablePod> pods) {
    std::lock_guard lock(mu);
    for (auto& pod : pods) {
      auto [ns, name] = splitKey(pod.key);
      Item item = podCondition(ns, name, pod.uid, "Unschedulable", pod.message, "FailedScheduling");
      item.dedupeFollow = true;
      enqueue(std::move(item), /*coalesce=*/true, /*desired=*/false);
    }
  }

  void event(EventSpec e) {
    if (!options.writeEvents) return;
    Item item = eventItem(std::move(e));
    std::lock_guard lock(mu);
    enqueue(std::move(item), /*coalesce=*/false, /*desired=*/false);
  }

  void settle(const std::string& podKey) {
    auto [ns, name] = splitKey(podKey);
    const std::string key = conditionKey(api::Problem::objectRef(api::Kind::Pod, ns, name), "Unschedulable");
    std::unique_lock lock(mu);
    queued.erase(key);
    written.erase(key);
    idle.wait(lock, [&] { return writing != key; });
  }

  // ---------------------------------------------------------------- desired state (scheduler thread)

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
    const std::string ref = api::Problem::objectRef(kind, ns, name);
    const std::string key = statusKey(ref);
    seen.insert(key);
    std::string digest = status.dump();
    {
      std::lock_guard lock(mu);
      auto it = written.find(key);
      if (it != written.end() && it->second.digest == digest) return;
    }
    // Stamped only when queued: the next identical update is a no-op, and keeps the times.
    if (status.contains("conditions")) stampConditions(ref, status["conditions"]);
    Item item;
    item.kind = kind;
    item.ns = ns;
    item.name = name;
    item.ref = ref;
    item.body = std::move(status);
    item.key = key;
    item.digest = std::move(digest);
    std::lock_guard lock(mu);
    enqueue(std::move(item), /*coalesce=*/true, /*desired=*/true);
  }

  /// PodScheduled=False (InvalidSpec) on a pod that could not be converted, with its event.
  void wantInvalidPod(const std::string& ns, const std::string& name, const std::string& message) {
    Item item = podCondition(ns, name, "", kInvalidSpec, message, kInvalidSpec);
    item.onlyOurs = true;
    seen.insert(item.key);
    std::lock_guard lock(mu);
    enqueue(std::move(item), /*coalesce=*/true, /*desired=*/true);
  }

  void wantEvent(api::Kind kind, const std::string& ns, const std::string& name, const std::string& message) {
    if (!options.writeEvents) return;
    Item item = eventItem(EventSpec{kind, ns, name, "", "Warning", kInvalidSpec, message});
    seen.insert(item.key);
    std::lock_guard lock(mu);
    enqueue(std::move(item), /*coalesce=*/true, /*desired=*/true);
  }

  void update(const framework::SessionResult& result, const cache::Snapshot& s) {
    seen.clear();
    compute(result, s);
    emptied();
    wantAnnotations(result);
    if (!lastPrune || clock.now() - *lastPrune >= kPruneInterval) {
      lastPrune = clock.now();
      prune(s);
    }
    // Forget objects that are gone (or whose problem went away): the maps stay as large as the
    // cluster, and a problem that comes back is reported again. The binder's keys are its own.
    std::lock_guard lock(mu);
    for (auto it = written.begin(); it != written.end();)
      it = !it->second.desired || seen.count(it->first) || queued.count(it->first) ? std::next(it) : written.erase(it);
    for (auto it = transitions.begin(); it != transitions.end();)
      it = seen.count(statusKey(it->first)) ? std::next(it) : transitions.erase(it);
    for (auto it = jobMemo.begin(); it != jobMemo.end();)
      it = seen.count(statusKey(it->first)) ? std::next(it) : jobMemo.erase(it);
  }

  /// PodGroups whose jobs left the snapshot (every pod deleted) get the counts of no pods, once: a
  /// PodGroup never keeps `pending: 1` after its pods are gone. (A PodGroup deleted too: the write
  /// answers 404 and is dropped.)
  void emptied() {
    for (auto it = jobMemo.begin(); it != jobMemo.end();) {
      const cache::JobInfo& job = *it->second.job;
      if (seen.count(statusKey(it->first))) {  // the job's key is the PodGroup's ref
        ++it;
        continue;
      }
      const bool ended = it->second.phase == "Succeeded" || it->second.phase == "Failed";
      wantStatus(api::Kind::PodGroup, job.namespace_, job.name,
                 Json{{"phase", ended ? it->second.phase : "Pending"},
                      {"running", 0},
                      {"pending", 0},
                      {"succeeded", 0},
                      {"failed", 0},
                      {"scheduled", 0},
                      {"conditions", Json::array({condition("Valid", true, "Valid", ""),
                                                  condition("Unschedulable", false, "NoPods", "the PodGroup has no pods")})}});
      it = jobMemo.erase(it);
    }
  }

  /// How often update() forgets the binder's marks and the event series of objects gone.
  static constexpr api::Duration kPruneInterval{60'000};

  /// Forgets what the binder's writes remember about pods, PodGroups, queues, nodes and topologies
  /// no longer in the snapshot (update() forgets its own keys each cycle).
  void prune(const cache::Snapshot& s) {
    std::set<std::string> live;
    for (const auto& job : s.jobs) {
      live.insert(job->key);  // "PodGroup/ns/name" (any source) or "Pod/ns/name"
      for (const auto& t : job->tasks) live.insert("Pod/" + t.key);
    }
    for (const auto& [name, q] : s.queues) live.insert("Queue/" + name);
    for (const auto& n : s.nodes) live.insert("Node/" + n->name);
    for (const auto& [name, t] : s.topologies) live.insert("Topology/" + name);
    auto gone = [&live](const std::string& ref) {
      const std::string kind = ref.substr(0, ref.find('/'));
      const bool followed = kind == "Pod" || kind == "PodGroup" || kind == "Queue" || kind == "Node" || kind == "Topology";
      return followed && !live.count(ref);
    };
    std::lock_guard lock(mu);
    std::erase_if(series, [&](const auto& entry) { return gone(entry.second.ref); });
    std::erase_if(written, [&](const auto& entry) {
      return !entry.second.desired && !entry.second.ref.empty() && gone(entry.second.ref) && !queued.count(entry.first);
    });
  }

  void compute(const framework::SessionResult& result, const cache::Snapshot& s) {
    // Problems by object: conversion errors first (the newest version of the object), then the
    // validation layer's.
    struct Problem {
      api::Kind kind;  ///< of the object at fault (another scheduler's PodGroup: its own kind)
      std::string ns, name, text;
    };
    std::map<std::string, Problem> problems;  // by ref ("PodGroup/ns/name": the job's key too)
    for (const auto& e : s.conversionErrors)
      problems.emplace(api::Problem::objectRef(e.kind, e.namespace_, e.name),
                       Problem{e.kind, e.namespace_, e.name, e.message});
    for (const auto& [ref, p] : s.invalid) problems.emplace(ref, Problem{p.kind, p.namespace_, p.name, p.text()});

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
    // (By chunk: the memo keeps the job's entry, so that an entry freed since is never taken for
    // an unchanged one at the same address.)
    for (const auto& chunk : s.jobs.chunks()) {
      for (const std::shared_ptr<const cache::JobInfo>& jp : *chunk) {
        const cache::JobInfo& job = *jp;
        if (job.isSingleton() || !job.podGroup || job.podGroup->source != api::PodGroupSource::Tessera) continue;
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
        JobMemo memo{jp, placed, prob != problems.end() ? prob->second.text : "",
                     un != unschedulable.end() ? *un->second : ""};
        const std::string key = statusKey(api::Problem::objectRef(api::Kind::PodGroup, job.namespace_, job.name));
        if (auto m = jobMemo.find(job.key); m != jobMemo.end() && m->second == memo) {
          std::lock_guard lock(mu);
          if (written.count(key)) {
            seen.insert(key);
            continue;
          }
        }
        const int32_t total = static_cast<int32_t>(job.tasks.size());
        std::string phase;
        if (prob != problems.end()) phase = "Unschedulable";
        else if (total > 0 && job.succeededCount + job.failedCount == total)
          phase = job.failedCount > 0 ? "Failed" : "Succeeded";
        else if (scheduled + job.succeededCount >= job.minMember) phase = "Running";
        else if (un != unschedulable.end()) phase = "Unschedulable";
        else phase = "Pending";
        memo.phase = phase;
        jobMemo.insert_or_assign(job.key, std::move(memo));
        Json conds = Json::array();
        if (prob != problems.end()) conds.push_back(condition("Valid", false, kInvalidSpec, prob->second.text));
        else conds.push_back(condition("Valid", true, "Valid", ""));
        if (un != unschedulable.end()) conds.push_back(condition("Unschedulable", true, "Unschedulable", *un->second));
        else if (prob != problems.end())
          conds.push_back(condition("Unschedulable", true, kInvalidSpec, prob->second.text));
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
      status["conditions"] = Json::array({prob != problems.end() ? condition("Valid", false, kInvalidSpec, prob->second.text)
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
        wantInvalidPod(e.namespace_, e.name, e.message);
      }
    }
    // Every problem gets one event on its object (deduplicated by message).
    for (const auto& [ref, p] : problems)
      if (p.kind != api::Kind::Pod) wantEvent(p.kind, p.ns, p.name, p.text);  // pods: with their condition
  }

  /// PodGroup annotations the session asked for, while it asks (it stops once the watch shows
  /// them written; the key is then forgotten, so an annotation removed by hand is written again).
  void wantAnnotations(const framework::SessionResult& result) {
    for (const auto& a : result.annotations) {
      Item item;
      item.type = Item::Type::Annotation;
      item.kind = api::Kind::PodGroup;
      item.ns = a.ns;
      item.name = a.name;
      item.body = Json{{"metadata", {{"annotations", {{a.key, a.value ? Json(*a.value) : Json(nullptr)}}}}}};
      item.key = "annotation:" + api::Problem::objectRef(api::Kind::PodGroup, a.ns, a.name) + "/" + a.key;
      item.digest = item.body.dump();
      seen.insert(item.key);
      std::lock_guard lock(mu);
      enqueue(std::move(item), /*coalesce=*/true, /*desired=*/true);
    }
  }

  void put(api::Kind kind, Json object) {
    Item item;
    item.type = Item::Type::Put;
    item.kind = kind;
    const Json meta = object.value("metadata", Json::object());
    item.ns = meta.value("namespace", "");
    item.name = meta.value("name", "");
    item.key = "put:" + api::Problem::objectRef(kind, item.ns, item.name);
    item.digest = object.dump();
    item.body = std::move(object);
    std::lock_guard lock(mu);
    enqueue(std::move(item), /*coalesce=*/true, /*desired=*/false);
  }

  // ---------------------------------------------------------------- writing (writer thread or drain)

  void run() {
    for (;;) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stopping || !order.empty() || !eventOrder.empty(); });
        if (stopping) return;
      }
      drain();
    }
  }

  void drain() {
    std::lock_guard w(writeMu);
    for (;;) {
      Item item;
      {
        std::lock_guard lock(mu);
        if (stopping || (order.empty() && eventOrder.empty())) return;
        std::deque<std::string>& lane = order.empty() ? eventOrder : order;  // the state first
        auto it = queued.find(lane.front());
        lane.pop_front();
        if (&lane == &eventOrder && eventOrder.empty() && droppedInBurst > 0) {
          log::info("status writer: the Event backlog is written; ", droppedInBurst, " Events were dropped meanwhile");
          droppedInBurst = 0;
        }
        if (it == queued.end()) continue;  // settled
        item = std::move(it->second);
        queued.erase(it);
        writing = item.key;
      }
      if (options.mayWrite && !options.mayWrite()) {  // fenced: no longer the leader
        std::lock_guard lock(mu);
        writing.clear();
        idle.notify_all();
        forget(item.key, item.digest);  // a later leader's cycle may want it again
        ++stats.dropped;
        continue;
      }
      const api::Status st = write(item);
      {
        std::lock_guard lock(mu);
        writing.clear();
        idle.notify_all();
      }
      done(item, st);
    }
  }

  /// The one error path: counts the write; a failed one is forgotten so that the next identical
  /// write is queued again (a 404: the object is gone, or a new one of that name will need its own
  /// write) and logged.
  void done(const Item& item, const api::Status& st) {
    {
      std::lock_guard lock(mu);
      if (st.ok()) {
        ++stats.written;
        return;
      }
      forget(item.key, item.digest);
      if (st.error().code == 404) return;
      ++stats.failed;
    }
    log::error(describe(item), ": ", st.error().message);
  }

  static std::string describe(const Item& item) {
    const std::string object =
        std::string(api::kindInfo(item.kind).name) + " " + (item.ns.empty() ? item.name : item.ns + "/" + item.name);
    switch (item.type) {
      case Item::Type::Status: return "status of " + object;
      case Item::Type::PodCondition: return "condition PodScheduled of " + object;
      case Item::Type::Event: return "event " + item.event.reason + " on " + object;
      case Item::Type::EventCount: return "count of event " + item.name + " (" + item.event.reason + ")";
      case Item::Type::Annotation: return "annotations of " + object;
      case Item::Type::Put: return object;
    }
    return object;
  }

  api::Status write(const Item& item) {
    switch (item.type) {
      case Item::Type::Status: {
        auto r = client.patch(item.kind, item.ns, item.name, cache::PatchType::Merge, Json{{"status", item.body}},
                              /*statusSubresource=*/true);
        return r.ok() ? api::Status::success() : api::Status(r.error());
      }
      case Item::Type::PodCondition: return writePodCondition(item);
      case Item::Type::Event: {
        auto created = createEvent(item.event);
        if (!created.ok()) return api::Status(created.error());
        std::lock_guard lock(mu);
        startSeries(item.event, *created, item.key);
        return api::Status::success();
      }
      case Item::Type::EventCount: return bumpEvent(item);
      case Item::Type::Annotation: {
        auto r = client.patch(item.kind, item.ns, item.name, cache::PatchType::Merge, item.body);
        return r.ok() ? api::Status::success() : api::Status(r.error());
      }
      case Item::Type::Put: {
        auto r = client.update(item.kind, item.body);
        if (!r.ok() && r.error().code == 404) r = client.create(item.kind, item.body);
        return r.ok() ? api::Status::success() : api::Status(r.error());
      }
    }
    return api::Status::success();
  }

  /// The series' count and lastTimestamp on its Event. The Event gone (expired: the API server
  /// keeps Events an hour): the series ends, and the next repetition is written as a new Event.
  api::Status bumpEvent(const Item& item) {
    auto r = client.patch(api::Kind::Event, item.ns, item.name, cache::PatchType::Merge, item.body);
    if (r.ok()) return api::Status::success();
    if (r.error().code == 404) {
      std::lock_guard lock(mu);
      if (auto it = series.find(seriesKey(item.event)); it != series.end() && it->second.eventName == item.name) {
        written.erase(it->second.dedupKey);
        series.erase(it);
      }
    }
    return api::Status(r.error());
  }

  /// The condition, then the event that follows it (its failure is its own: the condition stays written).
  api::Status writePodCondition(const Item& item) {
    if (item.onlyOurs) {
      // A pod of another scheduler, or one already bound, is not ours to mark (its last good
      // version may be running).
      TESSERA_ASSIGN_OR_RETURN(const Json pod, client.get(api::Kind::Pod, item.ns, item.name));
      const Json spec = pod.value("spec", Json::object());
      if (!spec.is_object() || spec.value("nodeName", "") != "" ||
          spec.value("schedulerName", "") != options.schedulerName)
        return api::Status::success();
    }
    Json cond = item.body;
    cond["lastTransitionTime"] = api::formatTime(clock.now());
    TESSERA_ASSIGN_OR_RETURN(const Json patched,
                             client.patch(api::Kind::Pod, item.ns, item.name, cache::PatchType::StrategicMerge,
                                          Json{{"status", {{"conditions", Json::array({cond})}}}},
                                          /*statusSubresource=*/true));
    if (!options.writeEvents) return api::Status::success();
    Item follow = eventItem(item.event);
    follow.event.uid = patched.value("metadata", Json::object()).value("uid", "");
    if (item.dedupeFollow) {  // on its own key, as the events of decisions are
      std::lock_guard lock(mu);
      auto mark = written.find(follow.key);
      if (mark != written.end() && mark->second.digest == follow.digest) return api::Status::success();
      written.insert_or_assign(follow.key, Mark{follow.digest, false, follow.ref});
    }
    auto created = createEvent(follow.event);
    if (created.ok()) {
      std::lock_guard lock(mu);
      startSeries(follow.event, *created, item.key);  // repetitions come as the condition's
    }
    done(follow, created.ok() ? api::Status::success() : api::Status(created.error()));  // its own failure
    return api::Status::success();
  }

  /// Creates the Event; returns it as the server did (its name starts the series).
  api::Result<Json> createEvent(const EventSpec& e) {
    const Json ev = makeEvent(e.kind, e.ns, e.name, e.uid, e.type, e.reason, e.message, options.component, clock.now());
    return client.create(api::Kind::Event, ev);
  }
};

StatusWriter::StatusWriter(cache::ClusterClient& client, const api::Clock& clock, StatusWriterOptions options)
    : impl_(std::make_unique<Impl>(client, clock, std::move(options))) {}

StatusWriter::~StatusWriter() = default;

void StatusWriter::update(const framework::SessionResult& result, const cache::Snapshot& snapshot) {
  impl_->update(result, snapshot);
}

void StatusWriter::podsUnschedulable(std::vector<UnschedulablePod> pods) { impl_->podsUnschedulable(std::move(pods)); }

void StatusWriter::event(EventSpec e) { impl_->event(std::move(e)); }

void StatusWriter::put(api::Kind kind, cache::Json object) { impl_->put(kind, std::move(object)); }

void StatusWriter::settle(const std::string& podKey) { impl_->settle(podKey); }

void StatusWriter::drain() { impl_->drain(); }

size_t StatusWriter::remembered() const {
  std::lock_guard lock(impl_->mu);
  return impl_->written.size() + impl_->series.size();
}

size_t StatusWriter::backlog() const {
  std::lock_guard lock(impl_->mu);
  return impl_->queued.size();
}

StatusWriterStats StatusWriter::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace tessera::binder
