#include "tessera/binder/binder.h"
#include "tessera/binder/events.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace tessera::binder {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// One core/v1 Event to create.
struct EventSpec {
  api::Kind kind = api::Kind::Pod;
  std::string ns, name, uid, type, reason, message;
};

/// The status queue: PodScheduled=False conditions coalesced per pod (only the latest message of a
/// pod is written; one equal to the last written is not written again) and deduplicated Events,
/// written in order by one thread.
class StatusWriter {
 public:
  StatusWriter(cache::ClusterClient& client, const api::Clock& clock, const BinderOptions& options)
      : client_(client), clock_(clock), options_(options) {
    thread_ = std::thread([this] { loop(); });
  }

  ~StatusWriter() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

  /// Many pods' messages at once (one lock for a whole cycle).
  void conditions(std::vector<std::pair<std::string, std::string>> podMessages) {
    std::lock_guard lock(mu_);
    for (auto& [key, message] : podMessages) {
      auto pending = pending_.find(key);
      if (pending != pending_.end()) {
        pending->second = std::move(message);  // coalesced: the queued write takes the latest message
        continue;
      }
      auto last = lastCondition_.find(key);
      if (last != lastCondition_.end() && last->second == message) continue;  // nothing new to say
      pending_.emplace(key, std::move(message));
      queue_.push_back(Item{true, key, {}});
    }
    cv_.notify_all();
  }

  /// The pod is being bound: its queued condition is dropped, and this waits until no condition
  /// write of it is in progress (so a stale PodScheduled=False cannot land after the bind).
  void settle(const std::string& podKey) {
    std::unique_lock lock(mu_);
    pending_.erase(podKey);
    lastCondition_.erase(podKey);
    idle_.wait(lock, [&] { return writing_ != podKey; });
  }

  void event(EventSpec e) {
    if (!options_.writeEvents) return;
    std::lock_guard lock(mu_);
    if (!dedupe(e)) return;
    queue_.push_back(Item{false, {}, std::move(e)});
    cv_.notify_all();
  }

  /// Waits until the queue is empty and nothing is being written.
  void waitIdle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

  /// Drops what is queued (shutdown).
  void discard() {
    std::lock_guard lock(mu_);
    queue_.clear();
    pending_.clear();
  }

  size_t backlog() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

  bool idle() const {
    std::lock_guard lock(mu_);
    return queue_.empty() && !busy_;
  }

 private:
  struct Item {
    bool condition = false;
    std::string podKey;  ///< condition: its message is pending_[podKey]
    EventSpec event;
  };

  /// True when the event is new for (object, reason); records it as the last one. Under mu_.
  bool dedupe(const EventSpec& e) {
    const std::string key =
        std::string(api::kindInfo(e.kind).name) + "/" + e.ns + "/" + e.name + "/" + e.reason;
    auto it = lastEvent_.find(key);
    if (it != lastEvent_.end() && it->second == e.message) return false;  // no event per cycle
    lastEvent_[key] = e.message;
    return true;
  }

  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Item item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      if (item.condition) {
        auto it = pending_.find(item.podKey);
        if (it != pending_.end()) {
          std::string message = std::move(it->second);
          pending_.erase(it);
          writing_ = item.podKey;
          lock.unlock();
          const bool written = writeCondition(item.podKey, message);
          lock.lock();
          writing_.clear();
          if (written) lastCondition_[item.podKey] = message;
        }
      } else {
        lock.unlock();
        createEvent(item.event);
        lock.lock();
      }
      busy_ = false;
      idle_.notify_all();
    }
  }

  bool writeCondition(const std::string& podKey, const std::string& message) {
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
      return false;
    }
    if (options_.writeEvents) {
      EventSpec e{api::Kind::Pod, ns, name, "", "Warning", "FailedScheduling", message};
      if (res->contains("metadata")) e.uid = (*res)["metadata"].value("uid", "");
      bool fresh;
      {
        std::lock_guard lock(mu_);
        fresh = dedupe(e);
      }
      if (fresh) createEvent(e);
    }
    return true;
  }

  void createEvent(const EventSpec& e) {
    const api::KindInfo& ki = api::kindInfo(e.kind);
    const cache::Json ev =
        makeEvent(e.kind, e.ns, e.name, e.uid, e.type, e.reason, e.message, options_.component, clock_.now());
    auto res = client_.create(api::Kind::Event, ev);
    if (!res.ok())
      std::fprintf(stderr, "tessera: recording event on %s %s/%s: %s\n", std::string(ki.name).c_str(), e.ns.c_str(),
                   e.name.c_str(), res.error().message.c_str());
  }

  cache::ClusterClient& client_;
  const api::Clock& clock_;
  const BinderOptions& options_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<Item> queue_;
  std::map<std::string, std::string> pending_;        ///< pod key -> message to write
  std::map<std::string, std::string> lastCondition_;  ///< pod key -> message last written
  std::map<std::string, std::string> lastEvent_;      ///< "Kind/ns/name/reason" -> message last written
  std::string writing_;                                ///< pod whose condition is being written
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace

/// The decisions of one apply(), shared by the tasks that carry them out.
struct Batch {
  uint64_t seq = 0;
  std::vector<framework::SessionResult::Evict> evictions;
  std::vector<framework::SessionResult::Bind> binds;
  std::vector<bool> bindQueued;  ///< false: refused at apply time (already recorded)
  std::shared_ptr<const framework::SessionResult> result;  ///< kept for afterApply only
  std::vector<BindRecord> records;                       ///< evictions, then binds
  std::atomic<size_t> evictionsLeft{0}, opsLeft{0};
};

struct Binder::Impl {
  cache::ClusterClient& client;
  cache::Cache& cache;
  const api::Clock& clock;
  BinderOptions options;
  StatusWriter status;

  mutable std::mutex mu;  ///< guards everything below
  std::condition_variable workCv, idleCv;
  std::deque<std::function<void()>> queue;
  size_t running = 0;
  bool stopping = false;
  std::set<std::string> inFlight;  ///< pods with a bind or eviction queued or running
  struct Failures {
    std::string uid;  ///< a new pod of the same name starts afresh
    int count = 0;
    api::Time until;
  };
  std::map<std::string, Failures> failures;  ///< pods whose last bind failed
  std::shared_ptr<Batch> last;
  uint64_t nextSeq = 0;

  std::mutex afterMu;  ///< afterApply ordering
  std::map<uint64_t, std::shared_ptr<Batch>> afterReady;
  uint64_t afterNext = 0;
  bool afterRunning = false;

  std::vector<std::thread> threads;

  Impl(cache::ClusterClient& c, cache::Cache& k, const api::Clock& cl, BinderOptions o)
      : client(c), cache(k), clock(cl), options(std::move(o)), status(c, cl, options) {
    const int n = std::max(1, options.workers);
    for (int i = 0; i < n; ++i) threads.emplace_back([this] { work(); });
  }

  ~Impl() {
    {
      std::unique_lock lock(mu);
      idleCv.wait(lock, [&] { return queue.empty() && running == 0; });  // binds already started finish
      stopping = true;
      workCv.notify_all();
    }
    for (auto& t : threads) t.join();
    status.discard();
  }

  void work() {
    std::unique_lock lock(mu);
    for (;;) {
      workCv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping
      auto task = std::move(queue.front());
      queue.pop_front();
      ++running;
      lock.unlock();
      task();
      lock.lock();
      --running;
      if (queue.empty() && running == 0) idleCv.notify_all();
    }
  }

  /// Under mu.
  void enqueue(std::function<void()> task) {
    queue.push_back(std::move(task));
    workCv.notify_one();
  }

  void submit(std::function<void()> task) {
    std::lock_guard lock(mu);
    enqueue(std::move(task));
  }

  /// Backoff after the `n`th consecutive failure: initial * 2^(n-1), capped.
  api::Duration backoffFor(int n) const {
    int64_t d = std::max<int64_t>(1, options.backoffInitial.millis);
    for (int i = 1; i < n && d < options.backoffMax.millis; ++i) d *= 2;
    return api::Duration{std::min<int64_t>(d, std::max<int64_t>(options.backoffMax.millis, 1))};
  }

  void record(Batch& batch, size_t slot, BindRecord rec) {
    if (options.onRecord) options.onRecord(rec);
    batch.records[slot] = std::move(rec);
  }

  /// One operation of the batch finished: the last one hands the batch to afterApply.
  void opDone(const std::shared_ptr<Batch>& batch) {
    if (batch->opsLeft.fetch_sub(1) == 1) batchDone(batch);
  }

  void batchDone(const std::shared_ptr<Batch>& batch) {
    if (!options.afterApply) return;
    std::unique_lock lock(afterMu);
    afterReady.emplace(batch->seq, batch);
    if (afterRunning) return;  // the thread running one picks this up
    afterRunning = true;
    for (auto it = afterReady.find(afterNext); it != afterReady.end(); it = afterReady.find(afterNext)) {
      auto b = std::move(it->second);
      afterReady.erase(it);
      ++afterNext;
      lock.unlock();
      options.afterApply(*b->result);
      lock.lock();
    }
    afterRunning = false;
  }

  void evict(const std::shared_ptr<Batch>& batch, size_t i) {
    const auto& e = batch->evictions[i];
    const auto t0 = std::chrono::steady_clock::now();
    auto [ns, name] = splitKey(e.podKey);
    // Tell the workload why before it goes (Kubernetes' DisruptionTarget convention).
    cache::Json patch = {{"status",
                          {{"conditions",
                            {{{"type", "DisruptionTarget"},
                              {"status", "True"},
                              {"reason", "PreemptionByScheduler"},
                              {"message", e.reason},
                              {"lastTransitionTime", api::formatTime(clock.now())}}}}}}};
    (void)client.patch(api::Kind::Pod, ns, name, cache::PatchType::StrategicMerge, patch, /*status=*/true);
    cache::DeleteOptions opts;
    opts.preconditionUid = e.podUid;
    auto st = client.remove(api::Kind::Pod, ns, name, opts);
    BindRecord rec{BindRecord::Kind::Evict, e.podKey, e.node, st.ok(), st.ok() ? "" : st.error().message,
                   secondsSince(t0)};
    if (st.ok()) {
      status.event(EventSpec{api::Kind::Pod, ns, name, e.podUid, "Warning", "Preempted", e.reason});
    } else {
      cache.evictionFailed(e.podKey);
      std::fprintf(stderr, "tessera: evicting pod %s: %s\n", e.podKey.c_str(), st.error().message.c_str());
    }
    record(*batch, i, std::move(rec));
    {
      std::lock_guard lock(mu);
      inFlight.erase(e.podKey);
    }
    // The last eviction of the batch releases its binds.
    if (batch->evictionsLeft.fetch_sub(1) == 1) queueBinds(batch);
    opDone(batch);
  }

  void queueBinds(const std::shared_ptr<Batch>& batch) {
    std::lock_guard lock(mu);
    for (size_t i = 0; i < batch->binds.size(); ++i)
      if (batch->bindQueued[i]) enqueue([this, batch, i] { bind(batch, i); });
  }

  void bind(const std::shared_ptr<Batch>& batch, size_t i) {
    const auto& b = batch->binds[i];
    const size_t slot = batch->evictions.size() + i;
    const auto t0 = std::chrono::steady_clock::now();
    auto [ns, name] = splitKey(b.podKey);
    bool ok = true;
    std::string error;
    if (options.preBind && !b.gpus.empty()) {
      auto prep = options.preBind(b);
      if (!prep.ok()) {
        ok = false;
        error = prep.error().message;
        std::fprintf(stderr, "tessera: preparing GPUs of pod %s on %s: %s\n", b.podKey.c_str(), b.node.c_str(),
                     error.c_str());
      }
    }
    if (ok) {
      status.settle(b.podKey);
      auto st = client.bind(ns, name, b.podUid, b.node);
      ok = st.ok();
      if (!ok) error = st.error().message;
      if (!ok && st.error().code == 409) {
        // Already bound: a success if it is bound where we wanted it.
        auto pod = client.get(api::Kind::Pod, ns, name);
        if (pod.ok() && pod->contains("spec") && (*pod)["spec"].value("nodeName", "") == b.node) ok = true, error.clear();
      }
      if (!ok)
        std::fprintf(stderr, "tessera: binding pod %s to %s: %s\n", b.podKey.c_str(), b.node.c_str(), error.c_str());
    }
    {
      std::lock_guard lock(mu);
      inFlight.erase(b.podKey);
      if (ok) {
        failures.erase(b.podKey);
      } else {
        Failures& f = failures[b.podKey];
        if (f.uid != b.podUid) f = Failures{b.podUid, 0, {}};
        ++f.count;
        f.until = clock.now() + backoffFor(f.count);
        cache.bindingFailed(b.podKey, f.until);
      }
    }
    if (ok) {
      cache.bindingDone(b.podKey);
      status.event(EventSpec{api::Kind::Pod, ns, name, b.podUid, "Normal", "Scheduled",
                             "Successfully assigned " + b.podKey + " to " + b.node});
    } else {
      status.event(EventSpec{api::Kind::Pod, ns, name, b.podUid, "Warning", "FailedBinding", error});
    }
    record(*batch, slot, BindRecord{BindRecord::Kind::Bind, b.podKey, b.node, ok, error, secondsSince(t0)});
    opDone(batch);
  }

  void apply(const framework::SessionResult& result) {
    auto batch = std::make_shared<Batch>();
    batch->evictions = result.evictions;
    batch->binds = result.binds;
    batch->bindQueued.assign(batch->binds.size(), false);
    if (options.afterApply) batch->result = std::make_shared<const framework::SessionResult>(result);
    batch->records.resize(batch->evictions.size() + batch->binds.size());
    for (size_t i = 0; i < batch->evictions.size(); ++i) {
      const auto& e = batch->evictions[i];
      batch->records[i] = BindRecord{BindRecord::Kind::Evict, e.podKey, e.node, false, "not done", 0};
    }
    const api::Time now = clock.now();
    size_t ops = 0, evictions = 0;
    {
      std::lock_guard lock(mu);
      batch->seq = nextSeq++;
      last = batch;
      if (failures.size() > 1024) {  // forget pods that stopped failing long ago (or are gone)
        for (auto it = failures.begin(); it != failures.end();)
          it = it->second.until + options.backoffMax < now ? failures.erase(it) : std::next(it);
      }
      std::vector<size_t> evictNow;
      for (size_t i = 0; i < batch->evictions.size(); ++i) {
        const auto& e = batch->evictions[i];
        if (!inFlight.insert(e.podKey).second) {  // cannot happen: a pod being evicted is releasing
          batch->records[i].error = "a bind or eviction of this pod is in flight";
          continue;
        }
        cache.assumeEvicted(e.podKey);
        evictNow.push_back(i);
      }
      evictions = evictNow.size();
      for (size_t i = 0; i < batch->binds.size(); ++i) {
        const auto& b = batch->binds[i];
        BindRecord& rec = batch->records[batch->evictions.size() + i];
        rec = BindRecord{BindRecord::Kind::Bind, b.podKey, b.node, false, "not done", 0};
        // Defensive: the cache hides pods in backoff and counts in-flight binds as bound, so a
        // session should never place these; if one does, the bind is refused, not repeated.
        auto f = failures.find(b.podKey);
        if (f != failures.end() && f->second.uid == b.podUid && now < f->second.until) {
          rec.error = "backing off after a failed bind until " + api::formatTime(f->second.until);
          continue;
        }
        if (!inFlight.insert(b.podKey).second) {
          rec.error = "a bind or eviction of this pod is in flight";
          continue;
        }
        std::vector<std::string> groups;
        for (const auto& g : b.gpus) groups.push_back(g.group);
        cache.assumeBinding(b.podKey, b.node, groups);
        batch->bindQueued[i] = true;
        ++ops;
      }
      ops += evictions;
      batch->evictionsLeft = evictions;
      batch->opsLeft = ops + 1;  // +1: released below, once everything is queued
      for (size_t i : evictNow) enqueue([this, batch, i] { evict(batch, i); });
    }
    if (evictions == 0) queueBinds(batch);
    // Status: the pods left pending, coalesced per pod; PodGroup events.
    std::vector<std::pair<std::string, std::string>> messages;
    messages.reserve(result.pods.size());
    for (const auto& p : result.pods) messages.emplace_back(p.task->key, result.podMessage(p));
    if (!messages.empty()) status.conditions(std::move(messages));
    for (const auto& j : result.jobs) {
      const std::string& key = j.job->key;
      if (key.rfind("PodGroup/", 0) != 0) continue;  // a group of one: its pod carries the message
      auto [ns, name] = splitKey(key.substr(9));
      status.event(EventSpec{api::Kind::PodGroup, ns, name, "", "Warning", "Unschedulable", result.message(j)});
    }
    // Release the +1; afterApply must not run on this (the scheduling) thread.
    if (batch->opsLeft.fetch_sub(1) == 1) submit([this, batch] { batchDone(batch); });
  }
};

Binder::Binder(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, BinderOptions options)
    : impl_(std::make_unique<Impl>(client, cache, clock, std::move(options))) {}

Binder::~Binder() = default;

void Binder::apply(const framework::SessionResult& result, const cache::Snapshot&) { impl_->apply(result); }

void Binder::waitIdle() {
  for (;;) {
    {
      std::unique_lock lock(impl_->mu);
      impl_->idleCv.wait(lock, [&] { return impl_->queue.empty() && impl_->running == 0; });
    }
    impl_->status.waitIdle();
    // A status write never queues binds, but a finishing bind queues status: check both again.
    std::lock_guard lock(impl_->mu);
    if (impl_->queue.empty() && impl_->running == 0 && impl_->status.idle()) return;
  }
}

const std::vector<BindRecord>& Binder::lastRecords() const {
  static const std::vector<BindRecord> kNone;
  std::lock_guard lock(impl_->mu);
  return impl_->last ? impl_->last->records : kNone;
}

size_t Binder::inFlight() const {
  std::lock_guard lock(impl_->mu);
  return impl_->inFlight.size();
}

size_t Binder::statusBacklog() const { return impl_->status.backlog(); }

size_t Binder::backingOff() const {
  const api::Time now = impl_->clock.now();
  std::lock_guard lock(impl_->mu);
  size_t n = 0;
  for (const auto& [key, f] : impl_->failures)
    if (now < f.until) ++n;
  return n;
}

}  // namespace tessera::binder
