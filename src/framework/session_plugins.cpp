// The session's extension points (KAI's session_plugins.go): plugins register their callbacks in
// onSessionOpen, in tier order; the queries below dispatch to them. Orders end on a unique key so
// that every order is total; checks stop at the first plugin that rejects.
#include "tessera/framework/session.h"

#include <algorithm>

#include "tessera/api/shard.h"
#include "tessera/framework/carried_order.h"

namespace tessera::framework {

// ---- registration ----

void Session::addJobOrderFn(const std::string& p, JobOrderFn fn) { jobOrder_.push_back({p, std::move(fn)}); }
void Session::addTaskOrderFn(const std::string& p, TaskOrderFn fn) { taskOrder_.push_back({p, std::move(fn)}); }
void Session::addQueueOrderFn(const std::string& p, QueueOrderFn fn) {
  queueOrder_.push_back({p, std::move(fn)});
  headSameOf_.clear();
}
void Session::addQueueHeadSameFn(const std::string& p, QueueHeadSameFn fn) {
  queueHeadSame_.push_back({p, std::move(fn)});
  headSameOf_.clear();
}
void Session::addJobValidFn(const std::string& p, JobValidFn fn) { jobValid_.push_back({p, std::move(fn)}); }
void Session::addJobReadyFn(const std::string& p, JobReadyFn fn) { jobReady_.push_back({p, std::move(fn)}); }
void Session::addPrePredicateFn(const std::string& p, PrePredicateFn fn) {
  prePredicate_.push_back({p, std::move(fn)});
}
void Session::addPredicateFn(const std::string& p, PredicateFn fn) { predicate_.push_back({p, std::move(fn)}); }
void Session::addNodeOrderFn(const std::string& p, NodeOrderFn fn) { nodeOrder_.push_back({p, std::move(fn)}); }
void Session::addGpuOrderFn(const std::string& p, GpuOrderFn fn) { gpuOrder_.push_back({p, std::move(fn)}); }
void Session::addPreemptableFn(const std::string& p, VictimFn fn) { preemptable_.push_back({p, std::move(fn)}); }
void Session::addReclaimableFn(const std::string& p, VictimFn fn, ClaimantKeyFn key, VictimFn bound) {
  reclaimable_.push_back({p, std::move(fn)});
  reclaimableBounds_.push_back(std::move(bound));
  if (key) reclaimKeys_.push_back(std::move(key));
}
void Session::addReclaimBoundSplitFn(const std::string& p, ReclaimQueuesFn queues, VictimJobFn job,
                                     ReclaimQueuesNowFn queuesNow) {
  reclaimSplits_.push_back({p, std::move(queues), std::move(job), std::move(queuesNow)});
}
void Session::addPreemptableSplitFn(const std::string& p, VictimJobFn job, VictimPairFn pair) {
  preemptSplits_.push_back({p, std::move(job), std::move(pair)});
}
void Session::addReclaimTreeFn(const std::string& p, ReclaimTreeFn fn) { reclaimTrees_.push_back({p, std::move(fn)}); }
void Session::addCapacityFn(const std::string& p, CapacityFn fn) { capacity_.push_back({p, std::move(fn)}); }
void Session::addPlacementKeyFn(const std::string& p, PlacementKeyFn fn, KeyPart part, PlacementKeyJobFn keysJob) {
  const size_t at = part == KeyPart::Order ? placementKey_.size() : verdictKeyFns_++;
  placementKey_.insert(placementKey_.begin() + static_cast<std::ptrdiff_t>(at), {p, std::move(fn)});
  placementKeyJobs_.insert(placementKeyJobs_.begin() + static_cast<std::ptrdiff_t>(at), std::move(keysJob));
}
void Session::addJobDomainsFn(const std::string& p, JobDomainsFn fn) { jobDomains_.push_back({p, std::move(fn)}); }
void Session::addCanReclaimFn(const std::string& p, JobCheckFn fn) { canReclaim_.push_back({p, std::move(fn)}); }
void Session::addReclaimBoundsFn(const std::string& p, CapacityFn fn) { reclaimBounds_.push_back({p, std::move(fn)}); }
void Session::addVictimOrderKeepFn(const std::string& p, TaskEventFn beforeChange) {
  victimOrderKeep_.push_back({p, std::move(beforeChange)});
}
void Session::addVictimOrderFn(const std::string& p, VictimOrderFn fn, VictimOrderVersionFn version,
                               bool byJobsInQueue) {
  victimOrder_.push_back({p, std::move(fn)});
  victimOrderByJobs_ = victimOrderByJobs_ && byJobsInQueue;
  if (version) victimOrderVersion_.push_back({p, std::move(version)});
}
void Session::addAllocateHandler(const std::string& p, TaskEventFn onAllocate, TaskEventFn onDeallocate) {
  if (onAllocate) onAllocate_.push_back({p, std::move(onAllocate)});
  if (onDeallocate) onDeallocate_.push_back({p, std::move(onDeallocate)});
}

// ---- orders: plugin verdicts first, then a unique key so every order is total ----

bool Session::jobLess(const SessionJob& l, const SessionJob& r) const {
  for (const auto& f : jobOrder_)
    if (int c = f.fn(l, r)) return c < 0;
  // The creation time copied into the session's job (its cache entry is cold): ~60,000 comparisons
  // a cycle order 30,000 jobs (jobsInOrder), most of them decided here.
  if (l.created != r.created) return l.created < r.created;
  // (One comparison of the uids, not an inequality and then an order: pods created in the same
  // second, thousands in a burst, are ordered here.)
  if (const int c = l.info->uid.compare(r.info->uid)) return c < 0;
  return l.key() < r.key();
}

const std::vector<int>& Session::jobsInOrder() const {
  if (jobOrderCache_.size() != jobs_.size()) sortJobs(/*pendingOnly=*/false, jobOrderCache_);
  return jobOrderCache_;
}

const std::vector<int>& Session::pendingJobsInOrder() const {
  if (pendingJobOrderMade_) return pendingJobOrder_;
  pendingJobOrderMade_ = true;
  // The pending jobs alone, sorted: jobsInOrder()'s order of them (jobLess is total), without
  // ordering the running jobs, most of a busy cluster's, that no action gives a turn.
  sortJobs(/*pendingOnly=*/true, pendingJobOrder_);
  return pendingJobOrder_;
}

void Session::sortJobs(bool pendingOnly, std::vector<int>& out) const {
  auto wanted = [&](size_t j) { return !pendingOnly || jobs_[j].pendingCount > 0; };
  auto less = [&](int a, int b) { return jobLess(jobs_[static_cast<size_t>(a)], jobs_[static_cast<size_t>(b)]); };
  // Most jobs were in the last session's order too (every job's, or its pending ones'), in an
  // order that still holds: start from it. Jobs are matched by key (both snapshots list them
  // sorted by key). The last order's jobs are kept where each still comes after the one kept
  // before it and before the next; the others (moved, or new) are sorted and merged in. The result
  // is sorted whatever the last order was: it only saves comparisons (a full sort of 30,000 jobs
  // costs ~450,000 of them, this ~30,000 when few changed).
  std::vector<int> carried;
  std::vector<char> placed(jobs_.size(), 0);
  if (prevOrderSnapshot_ && !prevJobOrder_.empty()) {
    const std::vector<int>& toNow = jobsNowOf(*prevOrderSnapshot_);
    carried.reserve(jobs_.size());
    for (int w : prevJobOrder_)
      if (w >= 0 && static_cast<size_t>(w) < toNow.size() && toNow[static_cast<size_t>(w)] >= 0) {
        const auto n = static_cast<size_t>(toNow[static_cast<size_t>(w)]);
        if (!placed[n] && wanted(n)) placed[n] = 1, carried.push_back(static_cast<int>(n));
      }
  }
  std::vector<int> kept, moved;
  kept.reserve(carried.size());
  splitCarried(carried, less, kept, moved, [&](size_t i) {
    // In the last order, not in memory's: each job is asked for ahead of its comparisons.
    if (i + 8 < carried.size()) __builtin_prefetch(&jobs_[static_cast<size_t>(carried[i + 8])]);
  });
  for (size_t j = 0; j < jobs_.size(); ++j)
    if (!placed[j] && wanted(j)) moved.push_back(static_cast<int>(j));
  std::sort(moved.begin(), moved.end(), less);
  out.resize(kept.size() + moved.size());
  std::merge(kept.begin(), kept.end(), moved.begin(), moved.end(), out.begin(), less);
}

bool Session::taskLess(const SessionTask& l, const SessionTask& r) const {
  if (int c = pluginTaskOrder(l, r)) return c < 0;
  return cache::taskTieLess(*l.info, *r.info);
}

int Session::pluginTaskOrder(const SessionTask& l, const SessionTask& r) const {
  for (const auto& f : taskOrder_)
    if (int c = f.fn(l, r)) return c;
  return 0;
}

bool Session::queueLess(const SessionQueue& l, const SessionQueue& r, const SessionJob* lJob,
                        const SessionJob* rJob) const {
  for (const auto& f : queueOrder_)
    if (int c = f.fn(l, r, lJob, rJob)) return c < 0;
  return l.name < r.name;
}

bool Session::queueHeadSame(const SessionQueue& q, const SessionJob& a, const SessionJob& b) const {
  if (headSameOf_.size() != queueOrder_.size()) {  // each queue order's own check, matched by plugin once
    headSameOf_.clear();
    for (const auto& order : queueOrder_) {
      auto same = std::find_if(queueHeadSame_.begin(), queueHeadSame_.end(),
                               [&](const Named<QueueHeadSameFn>& f) { return f.plugin == order.plugin; });
      headSameOf_.push_back(same == queueHeadSame_.end() ? -1 : static_cast<int>(same - queueHeadSame_.begin()));
    }
  }
  for (int same : headSameOf_)
    if (same < 0 || !queueHeadSame_[static_cast<size_t>(same)].fn(q, a, b)) return false;
  return true;
}

namespace {
/// Victim order's last word: the newest pod first, then the pod key.
bool newerPodFirst(const SessionTask& l, const SessionTask& r) {
  const auto& lp = l.pod().meta;
  const auto& rp = r.pod().meta;
  if (lp.creationTimestamp != rp.creationTimestamp) return lp.creationTimestamp > rp.creationTimestamp;
  return l.info->key < r.info->key;
}
}  // namespace

bool Session::victimLess(const SessionTask& l, const SessionTask& r) const {
  for (const auto& f : victimOrder_)
    if (int c = f.fn(l, r)) return c < 0;
  if (l.job == r.job) return victimTieRank(l) < victimTieRank(r);  // newerPodFirst, ranked once per job
  return newerPodFirst(l, r);
}

void Session::addVictimWalkFn(const std::string& p, VictimWalkFn fn, QueueVictimWalkFn queueWalk) {
  victimWalk_.push_back({p, std::move(fn)});
  queueVictimWalk_.push_back({p, std::move(queueWalk)});
}

bool Session::walkVictims(const VictimVisitFn& visit, const VictimTreeFn& tree) const {
  // The walk is the order only when its plugin decides every comparison it can (the rest are
  // ties it walks in victimLess's own tie order).
  if (victimOrder_.size() != 1 || victimWalk_.size() != 1 || victimWalk_[0].plugin != victimOrder_[0].plugin)
    return false;
  victimWalk_[0].fn(visit, tree);
  return true;
}

bool Session::walkQueueVictims(int queue, const VictimVisitFn& visit) const {
  if (victimOrder_.size() != 1 || victimWalk_.size() != 1 || victimWalk_[0].plugin != victimOrder_[0].plugin ||
      !queueVictimWalk_[0].fn)
    return false;
  return queueVictimWalk_[0].fn(queue, visit);
}

uint64_t Session::victimOrderVersion(bool live) const {
  uint64_t v = 0;  // the newest-pod tie-break reads the pods alone: it never changes
  for (const auto& f : victimOrderVersion_) v = v * 0x9E3779B97F4A7C15ull + f.fn(live);
  return v;
}

int32_t Session::victimTieRankSorted(const SessionTask& t) const {
  const SessionJob& job = jobs_[static_cast<size_t>(t.job)];
  if (victimTieKnown_.size() != jobs_.size()) victimTieKnown_.assign(jobs_.size(), 0);
  if (victimTieRank_.size() != tasks_.size()) victimTieRank_.resize(tasks_.size());
  if (!victimTieKnown_[static_cast<size_t>(t.job)]) {
    victimTieKnown_[static_cast<size_t>(t.job)] = 1;
    std::vector<int32_t>& byAge = victimTieScratch_;
    byAge.resize(job.tasks.size());
    for (size_t i = 0; i < byAge.size(); ++i) byAge[i] = static_cast<int32_t>(i);
    std::sort(byAge.begin(), byAge.end(), [&](int32_t a, int32_t b) {
      return newerPodFirst(job.tasks[static_cast<size_t>(a)], job.tasks[static_cast<size_t>(b)]);
    });
    const size_t base = slotOf(job.tasks.front());
    for (size_t i = 0; i < byAge.size(); ++i) victimTieRank_[base + static_cast<size_t>(byAge[i])] = static_cast<int32_t>(i);
  }
  return victimTieRank_[slotOf(t)];
}

// ---- checks off the hot path: the first rejection wins ----

const std::vector<int>& Session::jobsNowOf(const cache::Snapshot& earlier) const {
  if (jobsNowOf_ != &earlier) {
    jobsNow_ = earlier.jobIndicesIn(*snapshot_, /*sameObjectOnly=*/false);
    jobsNowOf_ = &earlier;
  }
  return jobsNow_;
}

namespace {

/// Whether every verdict of Session::checkJobValid that reads more than the job would read the
/// same in `a` and `b`: the same queues (the same objects), queues of other pools, priority classes
/// and topologies (the same objects), and the same problems (Snapshot::invalid).
bool sameValidityContext(const cache::Snapshot& a, const cache::Snapshot& b) {
  auto sameMaps = [](const auto& x, const auto& y, auto same) {
    if (x.size() != y.size()) return false;
    for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j)
      if (i->first != j->first || !same(i->second, j->second)) return false;
    return true;
  };
  auto sameObject = [](const auto& x, const auto& y) { return x == y; };
  auto sameProblem = [](const api::Problem& x, const api::Problem& y) {
    return x.kind == y.kind && x.namespace_ == y.namespace_ && x.name == y.name && x.field == y.field &&
           x.message == y.message && x.ignored == y.ignored;
  };
  return sameMaps(a.queues, b.queues, [](const auto& x, const auto& y) { return x->queue == y->queue; }) &&
         a.otherPoolQueues == b.otherPoolQueues && sameMaps(a.priorityClasses, b.priorityClasses, sameObject) &&
         sameMaps(a.topologies, b.topologies, sameObject) && sameMaps(a.invalid, b.invalid, sameProblem);
}

}  // namespace

std::vector<std::string> Session::jobValidPlugins() const {
  std::vector<std::string> names;
  for (const auto& f : jobValid_) names.push_back(f.plugin);
  return names;
}

void Session::seedValidity() const {
  validCache_.assign(jobs_.size(), ValidMemo{});
  validErrors_.clear();
  const cache::Snapshot* last = prevValidSnapshot_.get();
  if (!last || prevValid_.size() != last->jobs.size() || prevValidPlugins_ != jobValidPlugins() ||
      !sameValidityContext(*last, *snapshot_))
    return;
  // Entries are shared between snapshots until the cache changes them (copy on write, and the last
  // snapshot still holds the old one): the same object is the same job, pods and PodGroup. With no
  // pod leaving then or now (releasing 0), its pods' states the checks read are the same too.
  const std::vector<int>& toNow = jobsNowOf(*last);
  for (size_t w = 0; w < toNow.size(); ++w) {
    const int n = toNow[w];
    const ValidMemo& was = prevValid_[w];
    if (n < 0 || was.releasing != 0 || last->jobs[w] != snapshot_->jobs[static_cast<size_t>(n)]) continue;
    ValidMemo& memo = validCache_[static_cast<size_t>(n)];
    memo.releasing = 0;
    if (was.error >= 0) {
      memo.error = static_cast<int32_t>(validErrors_.size());
      validErrors_.push_back(prevValidErrors_[static_cast<size_t>(was.error)]);
    }
  }
}

api::Status Session::jobValid(const SessionJob& job) const {
  if (validCache_.size() != jobs_.size()) seedValidity();
  ValidMemo& memo = validCache_[static_cast<size_t>(job.index)];
  if (memo.releasing != job.releasingCount) {
    api::Status status = checkJobValid(job);
    memo.releasing = job.releasingCount;
    if (status.ok()) {
      memo.error = -1;
    } else if (memo.error >= 0) {  // checked again (a pod of it left): its error's slot is reused
      validErrors_[static_cast<size_t>(memo.error)] = status.error();
    } else {
      memo.error = static_cast<int32_t>(validErrors_.size());
      validErrors_.push_back(status.error());
    }
  }
  if (memo.error < 0) return api::Status::success();
  return validErrors_[static_cast<size_t>(memo.error)];
}

api::Status Session::checkJobValid(const SessionJob& job) const {
  const cache::JobInfo& info = *job.info;
  if (job.queue < 0) {
    // A Queue that exists but could not be read (a malformed quantity) is invalid, not missing.
    if (const api::Problem* p = snapshot().findInvalid(api::Problem::objectRef(api::Kind::Queue, "", info.queue)))
      return api::makeError("queue \"" + info.queue + "\" is invalid: " + p->text());
    if (auto other = snapshot().otherPoolQueues.find(info.queue); other != snapshot().otherPoolQueues.end())
      return api::makeError("queue \"" + info.queue + "\" belongs to node pool " + other->second + " (its label " +
                            api::keys::kNodePoolLabel + "), not to this scheduler's shard: label the pod or its " +
                            "PodGroup " + api::keys::kNodePoolLabel + "=" + other->second + ", or use a queue of this pool");
    return api::makeError("queue \"" + info.queue + "\" not found (Queue " + info.queue + " does not exist)");
  }
  // A pod naming a PriorityClass that does not exist, with no spec.priority set by admission (a
  // real API server refuses such pods; an embedded cluster or a class deleted before admission
  // ran may not): not scheduled at a guessed priority. (A PodGroup's class is validated with it.)
  if (!info.podPriority && !info.priorityClassName.empty() &&
      !(info.podGroup && !info.podGroup->priorityClassName.empty()) &&
      !snapshot().priorityClasses.count(info.priorityClassName))
    return api::makeError("PriorityClass \"" + info.priorityClassName +
                          "\" not found (named by the pod's spec.priorityClassName)");
  for (const auto& f : jobValid_) TESSERA_TRY(f.fn(job));
  return api::Status::success();
}

api::Status Session::prePredicate(const SessionJob& job, const SessionTask& task) const {
  for (const auto& f : prePredicate_) TESSERA_TRY(f.fn(job, task));
  return api::Status::success();
}

api::Status Session::capacityCheck(const SessionJob& job, const api::Resources& request) const {
  for (const auto& f : capacity_) TESSERA_TRY(f.fn(job, request));
  return api::Status::success();
}

api::Status Session::canReclaim(const SessionJob& job) const {
  if (canReclaim_.empty()) return api::makeError("no plugin allows reclaiming");
  for (const auto& f : canReclaim_) TESSERA_TRY(f.fn(job));
  return api::Status::success();
}

api::Status Session::reclaimBounds(const SessionJob& job, const api::Resources& request) const {
  for (const auto& f : reclaimBounds_) TESSERA_TRY(f.fn(job, request));
  return api::Status::success();
}

JobDomainsPtr Session::jobDomains(const SessionJob& job, DomainRoom room) const {
  for (const auto& f : jobDomains_)
    if (JobDomainsPtr d = f.fn(job, room)) return d;
  return nullptr;
}

// ---- the hot path: per task and node ----

bool Session::jobReady(const SessionJob& job) const {
  for (const auto& f : jobReady_)
    if (!f.fn(job)) return false;
  return true;
}

std::vector<int> Session::pendingTaskOrder(const SessionJob& job, int* minimum) const {
  std::vector<int> order;
  pendingTaskOrder(job, order, minimum);
  return order;
}

void Session::pendingTaskOrder(const SessionJob& job, std::vector<int>& order, int* minimum) const {
  // Task order depends on the pods only: sorted once per job and session, then filtered.
  if (taskOrderKnown_.size() != jobs_.size()) {
    taskOrderKnown_.assign(jobs_.size(), 0);
    taskOrderCache_.resize(tasks_.size());
  }
  const std::span<int> all = job.tasks.empty()
                                 ? std::span<int>()
                                 : std::span<int>(taskOrderCache_).subspan(slotOf(job.tasks.front()), job.tasks.size());
  if (!taskOrderKnown_[static_cast<size_t>(job.index)]) {
    taskOrderKnown_[static_cast<size_t>(job.index)] = 1;
    const std::vector<int32_t>& tie = job.info->tieOrder;
    if (tie.size() == all.size()) {
      // The cache keeps the tasks in the order of taskLess's last words (its pods are read there,
      // not here, where each is a memory miss): sorted stably by the plugins' orders, that is
      // taskLess's order. A small job by insertion (its tasks mostly tie in every plugin order).
      std::copy(tie.begin(), tie.end(), all.begin());
      auto before = [&](int a, int b) { return pluginTaskOrder(job.tasks[a], job.tasks[b]) < 0; };
      if (all.size() > 32) {
        std::stable_sort(all.begin(), all.end(), before);
      } else {
        for (size_t i = 1; i < all.size(); ++i)
          for (size_t k = i; k > 0 && before(all[k], all[k - 1]); --k) std::swap(all[k], all[k - 1]);
      }
    } else {
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
      std::sort(all.begin(), all.end(), [&](int a, int b) { return taskLess(job.tasks[a], job.tasks[b]); });
    }
  }
  order.clear();
  order.reserve(static_cast<size_t>(job.pendingCount));
  for (int ti : all)
    if (job.tasks[ti].state == TaskState::Pending) order.push_back(ti);
  const bool ready = jobReady(job);
  if (minimum) *minimum = 0;
  if (ready || order.empty()) return;
  const int gangMissing = std::max(1, job.minMember() - job.readyCount);
  if (job.subGroupReady.empty()) {
    if (minimum) *minimum = std::min(gangMissing, static_cast<int>(order.size()));
    return;
  }
  // Each subgroup's missing minimum first, then the rest in task order; the first of the rest
  // complete the PodGroup's minMember.
  const std::vector<api::SubGroup>& groups = job.subGroups();
  std::vector<int> out;
  out.reserve(order.size());
  std::vector<char> taken(order.size(), 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    int missing = groups[g].minMember - job.subGroupReady[g];
    for (size_t i = 0; i < order.size() && missing > 0; ++i)
      if (!taken[i] && job.tasks[order[i]].subGroup == static_cast<int32_t>(g)) {
        taken[i] = 1;
        out.push_back(order[i]);
        --missing;
      }
  }
  const int picked = static_cast<int>(out.size());
  for (size_t i = 0; i < order.size(); ++i)
    if (!taken[i]) out.push_back(order[i]);
  if (minimum) *minimum = std::min(std::max(picked, gangMissing), static_cast<int>(out.size()));
  order.swap(out);
}

bool Session::predicate(const SessionTask& task, const SessionNode& node, std::string& reason) const {
  for (const auto& f : predicate_)
    if (!f.fn(task, node, reason)) return false;
  return true;
}

int64_t Session::nodeScore(const SessionTask& task, const SessionNode& node) const {
  int64_t s = 0;
  for (const auto& f : nodeOrder_) s += f.fn(task, node);
  return s;
}

int64_t Session::gpuScore(const SessionTask& task, const SessionNode& node, int gpuGroup) const {
  int64_t s = 0;
  for (const auto& f : gpuOrder_) s += f.fn(task, node, gpuGroup);
  return s;
}

bool Session::preemptable(const SessionJob& claimant, const SessionTask& victim) const {
  for (const auto& f : preemptable_)
    if (!f.fn(claimant, victim)) return false;
  return !preemptable_.empty();
}

namespace {
/// Whether `plugin` registered one of `filters` (a split counts only for a filter of its plugin's).
template <class Filters>
bool filterOf(const Filters& filters, const std::string& plugin) {
  return std::any_of(filters.begin(), filters.end(), [&](const auto& f) { return f.plugin == plugin; });
}
}  // namespace

bool Session::preemptableSplit() const {
  // Every filter split, and every split a filter's: the parts then need not ask which count.
  auto split = [&](const auto& f) { return filterOf(preemptSplits_, f.plugin); };
  auto filter = [&](const PreemptableSplit& s) { return filterOf(preemptable_, s.plugin); };
  return !preemptable_.empty() && std::all_of(preemptable_.begin(), preemptable_.end(), split) &&
         std::all_of(preemptSplits_.begin(), preemptSplits_.end(), filter);
}

bool Session::preemptableJob(const SessionJob& victimJob) const {
  for (const PreemptableSplit& s : preemptSplits_)
    if (!s.job(victimJob)) return false;
  return true;
}

bool Session::preemptablePair(const SessionJob& claimant, const SessionJob& victimJob) const {
  for (const PreemptableSplit& s : preemptSplits_)
    if (!s.pair(claimant, victimJob)) return false;
  return true;
}

bool Session::reclaimable(const SessionJob& claimant, const SessionTask& victim) const {
  for (const auto& f : reclaimable_)
    if (!f.fn(claimant, victim)) return false;
  return !reclaimable_.empty();
}

bool Session::reclaimableBound(const SessionJob& claimant, const SessionTask& victim) const {
  for (size_t i = 0; i < reclaimable_.size(); ++i)
    if (!(reclaimableBounds_[i] ? reclaimableBounds_[i] : reclaimable_[i].fn)(claimant, victim)) return false;
  return !reclaimable_.empty();
}

bool Session::reclaimableUnder(const SessionJob& claimant, int topQueue) const {
  for (const auto& f : reclaimTrees_)
    if (!f.fn(claimant, topQueue)) return false;
  return !reclaimable_.empty();
}

void Session::reclaimClaimantKey(const SessionJob& claimant, std::string& key) const {
  for (const ClaimantKeyFn& f : reclaimKeys_) f(claimant, key);
}

bool Session::reclaimFilterOf(const std::string& plugin) const { return filterOf(reclaimable_, plugin); }

bool Session::reclaimFiltersSplit(bool now) const {
  auto split = [&](const auto& f) {
    return std::any_of(reclaimSplits_.begin(), reclaimSplits_.end(), [&](const ReclaimBoundSplit& s) {
      return s.plugin == f.plugin && (!now || s.queuesNow);
    });
  };
  return !reclaimable_.empty() && std::all_of(reclaimable_.begin(), reclaimable_.end(), split);
}

void Session::combineReclaimSplits(const SessionJob& claimant, std::span<const int> queues, bool now,
                                   std::vector<uint8_t>& perQueue) const {
  perQueue.assign(queues_.size(), 0);
  for (int q : queues) perQueue[static_cast<size_t>(q)] = 1;
  for (const ReclaimBoundSplit& s : reclaimSplits_) {
    if (!reclaimFilterOf(s.plugin)) continue;  // (a split of no filter's)
    splitScratch_.assign(queues_.size(), 0);
    if (now) s.queuesNow(claimant, queues, splitScratch_);
    else s.queues(claimant, splitScratch_);
    for (int q : queues) {
      uint8_t& v = perQueue[static_cast<size_t>(q)];
      v = v && splitScratch_[static_cast<size_t>(q)];
    }
  }
}

bool Session::reclaimBoundQueues(const SessionJob& claimant, std::vector<uint8_t>& perQueue) const {
  if (!reclaimFiltersSplit(/*now=*/false)) return false;
  if (allQueues_.size() != queues_.size()) {
    allQueues_.resize(queues_.size());
    for (size_t q = 0; q < queues_.size(); ++q) allQueues_[q] = static_cast<int>(q);
  }
  combineReclaimSplits(claimant, allQueues_, /*now=*/false, perQueue);
  return true;
}

bool Session::reclaimQueuesNow(const SessionJob& claimant, std::span<const int> queues,
                               std::vector<uint8_t>& perQueue) const {
  if (!reclaimFiltersSplit(/*now=*/true)) return false;
  combineReclaimSplits(claimant, queues, /*now=*/true, perQueue);
  return true;
}

bool Session::reclaimBoundJob(const SessionJob& victimJob) const {
  for (const ReclaimBoundSplit& s : reclaimSplits_)
    if (reclaimFilterOf(s.plugin) && !s.job(victimJob)) return false;
  return true;
}

// ---- notifications ----

void Session::notifyAllocate(const SessionTask& task) const {
  for (const auto& f : onAllocate_) f.fn(task);
}

void Session::notifyDeallocate(const SessionTask& task) const {
  for (const auto& f : onDeallocate_) f.fn(task);
}

}  // namespace tessera::framework
