// The binder (binder.h): a pool of workers runs a cycle's evictions, then its binds; a bind whose
// GPUs are not ready yet is parked (no worker held) and queued again when its retry is due; what
// users read about them goes to the status writer, which owns every status write and its thread.
#include "tessera/binder/binder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "tessera/api/log.h"
#include "tessera/binder/events.h"

namespace tessera::binder {

namespace {

constexpr const char* kNotLeading = "not leading: dropped before reaching the API server";

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

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
  uint64_t epoch = 0;  ///< leadership epoch of the cycle that decided it (BinderOptions::leaderEpoch)
};

/// When a bind first started: kept across its parkings, for the record's duration and preBind's
/// timeout.
struct BindStart {
  std::chrono::steady_clock::time_point t0;
  api::Time since;  ///< the binder's clock
};

struct Binder::Impl {
  cache::ClusterClient& client;
  cache::Cache& cache;
  const api::Clock& clock;
  BinderOptions options;
  std::unique_ptr<StatusWriter> ownStatus;  ///< when no writer was given (tests, tools)
  StatusWriter& status;

  mutable std::mutex mu;  ///< guards everything below
  std::condition_variable workCv, idleCv;
  std::deque<std::function<void()>> queue;
  /// Binds whose preBind said "not ready", by when to ask again (then parking order). A worker
  /// moves those due to the back of `queue`; none waits for them meanwhile.
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> parkedBinds;
  size_t waiting = 0;  ///< binds parked at least once and not done: in parkedBinds, queued again or running
  size_t running = 0;
  bool stopping = false;
  std::set<std::string> inFlight;  ///< pods with a bind or eviction queued, running or parked
  struct Failures {
    std::string uid;  ///< a new pod of the same name starts afresh
    int count = 0;
    api::Time until;
  };
  std::map<std::string, Failures> failures;  ///< pods whose last bind failed
  std::shared_ptr<Batch> last;
  uint64_t nextSeq = 0;
  FencingDrops dropped;  ///< binds and evictions dropped unsent by fencing

  std::mutex afterMu;  ///< afterApply ordering
  std::map<uint64_t, std::shared_ptr<Batch>> afterReady;
  uint64_t afterNext = 0;
  bool afterRunning = false;

  std::vector<std::thread> threads;

  Impl(cache::ClusterClient& c, cache::Cache& k, const api::Clock& cl, StatusWriter* s, BinderOptions o)
      : client(c),
        cache(k),
        clock(cl),
        options(std::move(o)),
        ownStatus(s ? nullptr : std::make_unique<StatusWriter>(c, cl)),
        status(s ? *s : *ownStatus) {
    const int n = std::max(1, options.workers);
    for (int i = 0; i < n; ++i) threads.emplace_back([this] { work(); });
  }

  ~Impl() {
    {
      std::unique_lock lock(mu);
      idleCv.wait(lock, [&] { return idle(); });  // binds already started or parked finish
      stopping = true;
      workCv.notify_all();
    }
    for (auto& t : threads) t.join();
  }

  /// Under mu. Nothing queued, running or parked.
  bool idle() const { return queue.empty() && running == 0 && parkedBinds.empty(); }

  /// Under mu. Parked binds whose retry is due go to the back of the queue: a retry waits its turn
  /// behind binds queued meanwhile, and never jumps ahead of them.
  void releaseDue() {
    const auto now = std::chrono::steady_clock::now();
    size_t released = 0;
    for (auto it = parkedBinds.begin(); it != parkedBinds.end() && it->first <= now; it = parkedBinds.erase(it)) {
      queue.push_back(std::move(it->second));
      ++released;
    }
    if (released > 1) workCv.notify_all();  // this worker takes one; idle ones the others
  }

  void work() {
    std::unique_lock lock(mu);
    for (;;) {
      releaseDue();
      if (queue.empty()) {
        // stopping is set only once idle(): nothing parked is left behind.
        if (stopping) return;
        if (parkedBinds.empty()) {
          workCv.wait(lock);
        } else {
          // A copy: wait_until reads its deadline after unlocking, when another worker may have
          // released (erased) that parked bind.
          const auto due = parkedBinds.begin()->first;
          workCv.wait_until(lock, due);
        }
        continue;
      }
      auto task = std::move(queue.front());
      queue.pop_front();
      ++running;
      lock.unlock();
      task();
      lock.lock();
      --running;
      if (idle()) idleCv.notify_all();
    }
  }

  /// The bind's preBind is not ready: the bind leaves its worker and is queued again after `after`.
  /// It stays in inFlight (its pod assumed bound) and keeps its batch's opsLeft.
  void park(const std::shared_ptr<Batch>& batch, size_t i, BindStart start, std::chrono::milliseconds after,
            bool resumed) {
    if (log::v(4))
      log::info("bind of pod ", batch->binds[i].podKey, " parked for ", after.count(), " ms: its GPUs are not ready");
    std::lock_guard lock(mu);
    if (!resumed) ++waiting;
    parkedBinds.emplace(std::chrono::steady_clock::now() + after, [this, batch, i, start] { bind(batch, i, start); });
    workCv.notify_all();  // workers waiting with no deadline, or a later one, take this one's
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

  /// Fencing: whether the batch's leadership epoch still holds, asked right before each write.
  bool fenced(const Batch& batch) const {
    return options.leaderEpoch && (batch.epoch == 0 || options.leaderEpoch() != batch.epoch);
  }

  void evict(const std::shared_ptr<Batch>& batch, size_t i) {
    const auto& e = batch->evictions[i];
    const auto t0 = std::chrono::steady_clock::now();
    auto [ns, name] = splitKey(e.podKey);
    if (fenced(*batch)) {  // leadership lost since the cycle: nothing reaches the API server
      cache.evictionFailed(e.podKey);
      record(*batch, i, BindRecord{BindRecord::Kind::Evict, e.podKey, e.node, false, kNotLeading, 0});
      {
        std::lock_guard lock(mu);
        inFlight.erase(e.podKey);
        ++dropped.evictions;
      }
      if (batch->evictionsLeft.fetch_sub(1) == 1) queueBinds(batch);
      opDone(batch);
      return;
    }
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
      if (log::v(3)) log::info("evicted pod ", e.podKey, " from ", e.node, ": ", e.reason);
      status.event(EventSpec{api::Kind::Pod, ns, name, e.podUid, "Warning", "Preempted", e.reason});
    } else {
      cache.evictionFailed(e.podKey);
      log::error("evicting pod ", e.podKey, ": ", st.error().message);
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
      if (batch->bindQueued[i]) enqueue([this, batch, i] { bind(batch, i, std::nullopt); });
  }

  /// One attempt at the bind: `resumed` is set when it comes back from being parked.
  void bind(const std::shared_ptr<Batch>& batch, size_t i, std::optional<BindStart> resumed) {
    const auto& b = batch->binds[i];
    const size_t slot = batch->evictions.size() + i;
    const BindStart start = resumed ? *resumed : BindStart{std::chrono::steady_clock::now(), clock.now()};
    const auto t0 = start.t0;
    auto [ns, name] = splitKey(b.podKey);
    bool ok = true, retryAtOnce = false;
    std::string error;
    if (fenced(*batch)) {  // leadership lost since the cycle (or since it was parked): nothing is sent
      {
        std::lock_guard lock(mu);
        inFlight.erase(b.podKey);
        ++dropped.binds;
        if (resumed) --waiting;
      }
      cache.bindingFailed(b.podKey, clock.now());  // no backoff: the next leader places it afresh
      record(*batch, slot, BindRecord{BindRecord::Kind::Bind, b.podKey, b.node, false, kNotLeading, 0});
      opDone(batch);
      return;
    }
    if (options.preBind && !b.gpus.empty()) {
      auto prep = options.preBind(b, start.since);
      if (prep.status.ok() && prep.retryAfter) {  // e.g. a GPU UUID not reported yet: free the worker
        park(batch, i, start, *prep.retryAfter, resumed.has_value());
        return;
      }
      if (!prep.status.ok()) {
        ok = false;
        retryAtOnce = prep.retryAtOnce;
        error = prep.status.error().message;
        log::error("preparing GPUs of pod ", b.podKey, " on ", b.node, ": ", error);
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
      if (!ok) log::error("binding pod ", b.podKey, " to ", b.node, ": ", error);
    }
    {
      std::lock_guard lock(mu);
      inFlight.erase(b.podKey);
      if (resumed) --waiting;
      if (ok) {
        failures.erase(b.podKey);
      } else if (retryAtOnce) {
        cache.bindingFailed(b.podKey, clock.now());  // no backoff, and no failure counted
      } else {
        Failures& f = failures[b.podKey];
        if (f.uid != b.podUid) f = Failures{b.podUid, 0, {}};
        ++f.count;
        f.until = clock.now() + backoffFor(f.count);
        cache.bindingFailed(b.podKey, f.until);
      }
    }
    if (ok) {
      if (log::v(3)) log::info("bound pod ", b.podKey, " to ", b.node);
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
    batch->epoch = options.leaderEpoch ? options.leaderEpoch() : 0;
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
    std::vector<UnschedulablePod> messages;
    messages.reserve(result.pods.size());
    for (const auto& p : result.pods)
      messages.push_back({p.task->key, p.task->pod ? p.task->pod->meta.uid : "", result.podMessage(p)});
    if (!messages.empty()) status.podsUnschedulable(std::move(messages));
    for (const auto& j : result.jobs) {
      const std::string& key = j.job->key;
      if (key.rfind("PodGroup/", 0) != 0) continue;  // a group of one: its pod carries the message
      auto [ns, name] = splitKey(key.substr(9));
      const api::Kind kind = j.job->podGroup ? api::podGroupKind(*j.job->podGroup) : api::Kind::PodGroup;
      status.event(EventSpec{kind, ns, name, j.job->uid, "Warning", "Unschedulable", result.message(j)});
    }
    // Release the +1; afterApply must not run on this (the scheduling) thread.
    if (batch->opsLeft.fetch_sub(1) == 1) submit([this, batch] { batchDone(batch); });
  }
};

Binder::Binder(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, StatusWriter& status,
               BinderOptions options)
    : impl_(std::make_unique<Impl>(client, cache, clock, &status, std::move(options))) {}

Binder::Binder(cache::ClusterClient& client, cache::Cache& cache, const api::Clock& clock, BinderOptions options)
    : impl_(std::make_unique<Impl>(client, cache, clock, nullptr, std::move(options))) {}

Binder::~Binder() = default;

void Binder::apply(const framework::SessionResult& result, const cache::Snapshot&) { impl_->apply(result); }

void Binder::waitIdle() {
  for (;;) {
    {
      std::unique_lock lock(impl_->mu);
      impl_->idleCv.wait(lock, [&] { return impl_->idle(); });
    }
    impl_->status.drain();
    // A status write never queues binds, but a finishing bind queues status: check both again.
    std::lock_guard lock(impl_->mu);
    if (impl_->idle() && impl_->status.backlog() == 0) return;
  }
}

const std::vector<BindRecord>& Binder::lastRecords() const {
  static const std::vector<BindRecord> kNone;
  std::lock_guard lock(impl_->mu);
  return impl_->last ? impl_->last->records : kNone;
}

FencingDrops Binder::droppedByFencing() const {
  std::lock_guard lock(impl_->mu);
  return impl_->dropped;
}

size_t Binder::inFlight() const {
  std::lock_guard lock(impl_->mu);
  return impl_->inFlight.size();
}

size_t Binder::parked() const {
  std::lock_guard lock(impl_->mu);
  return impl_->waiting;
}

size_t Binder::backingOff() const {
  const api::Time now = impl_->clock.now();
  std::lock_guard lock(impl_->mu);
  size_t n = 0;
  for (const auto& [key, f] : impl_->failures)
    if (now < f.until) ++n;
  return n;
}

}  // namespace tessera::binder
