// proportion: hierarchical queues with quota (deserved), limit and over-quota weight, KAI's fair-share
// division, DRF queue order, capacity checks (OverLimit, NonPreemptibleOverQuota), and the queue
// rules of reclaim. Per-session state lives in State; the plugin object holds only its arguments.
#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tessera/api/gpu_request.h"
#include "tessera/api/quantity.h"
#include "tessera/framework/carried_order.h"
#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"
#include "tessera/plugins/proportion.h"
#include "victim_sequence.h"

namespace tessera::plugins {
namespace {

using framework::Session;
using framework::SessionJob;
using framework::SessionQueue;
using framework::SessionTask;
using framework::TaskState;
using proportion::Amounts;
using proportion::kResources;

constexpr const char* kResourceNames[kResources] = {"nvidia.com/gpu", "cpu", "memory"};
constexpr const char* kShortNames[kResources] = {"gpu", "cpu", "memory"};
using i128 = __int128;

Amounts amountsOf(const api::Resources& r) { return {r.milliGpu, r.milliCpu, r.memory}; }
api::Resources resourcesOf(const Amounts& a) {
  api::Resources r;
  r.milliGpu = a[0];
  r.milliCpu = a[1];
  r.memory = a[2];
  return r;
}
std::string fmt(int r, int64_t v) {
  return v == proportion::kUnlimited ? std::string("unlimited") : api::formatResourceAmount(kResourceNames[r], v);
}

struct ProportionArgs {
  int64_t reclaimerSaturationMilli = 1000;
};

/// A queue in this session's tree (indexed like Session::queues()). What the queue order compares
/// at every turn (compareQueues: where two queues' paths meet, their priorities, whether a kept
/// QueueKey holds) comes first, on one cache line with the amounts a key is worked out from.
struct alignas(64) QNode {
  const api::Queue* obj = nullptr;
  int parent = -1;
  int depth = 0;  ///< how many ancestors it has
  int top = -1;   ///< its top-level ancestor (itself at the top)
  int32_t priority = 100;
  /// Changes whenever `allocated` or a task state in the subtree does (QueueKey, victim sequences),
  /// and returns to its value when they return to theirs (onAllocate).
  uint64_t allocatedVersion = 0;
  Amounts allocated{0, 0, 0};  ///< subtree, tasks holding or promised resources (not releasing)
  Amounts fairShare{0, 0, 0};
  Amounts deserved{0, 0, 0}, limit{-1, -1, -1}, weight{1000, 1000, 1000};
  Amounts allocatedNP{0, 0, 0};  ///< the non-preemptible part
  Amounts requested{0, 0, 0};    ///< subtree: allocated + pending
  /// What reclaim never takes a queue below: its fair share, or what its quota guarantees
  /// (min(quota, requested, limit)) when over-committed quotas scaled the fair share under that.
  Amounts kept{0, 0, 0};
  std::vector<int> children;
  std::string problem;  ///< non-empty: unusable (not found, orphaned, invalid)
};
static_assert(offsetof(QNode, allocated) + sizeof(Amounts) <= 64, "QNode: what the queue order reads on one cache line");


class State {
 public:
  struct TurnRequest {
    int32_t ready = -1, pending = -1;
    Amounts request{0, 0, 0};
  };
  struct Surplus {
    bool known = false;
    uint64_t version = 0;  ///< the job's (SessionJob::version: which of its pods run, not only how many)
    std::vector<uint8_t> pods;
  };
  /// A queue's own pods in victim order as the last session left them (ownOrder): (index of the
  /// job in that session's snapshot, task index).
  using CarriedOrder = std::vector<std::pair<int32_t, int32_t>>;
  /// The per-job arrays, emptied, between sessions: the plugin keeps them so that each session
  /// reuses their memory (issue 16).
  struct Kept {
    std::vector<TurnRequest> turn;
    std::vector<Surplus> surplus;
    proportion::VictimSequence sequence;
    /// The last session's own-queue orders by queue name, and its snapshot (kept alive: its jobs
    /// are matched with the next session's by object, so a job the cache did not touch keeps its
    /// task indices).
    std::unordered_map<std::string, CarriedOrder> orders;
    std::shared_ptr<const cache::Snapshot> ordersOf;
  };

  State(Session& ssn, ProportionArgs args, Kept& kept)
      : ssn_(ssn), args_(args), sequence_(std::move(kept.sequence)), carried_(std::move(kept.orders)),
        carriedOf_(std::move(kept.ordersOf)) {
    framework::borrowKept(kept.turn, turnCache_);
    framework::borrowKept(kept.surplus, surplus_);
    build();
  }
  void giveBack(Kept& kept) {
    framework::returnKept(kept.turn, turnCache_);
    framework::returnKept(kept.surplus, surplus_);
    kept.sequence = std::move(sequence_);
    // Each queue's order as last built in this session, or, not built in it, as carried in.
    if (!sequenceIndexed_) {  // none built: the carried orders stand as they are
      kept.orders = std::move(carried_);
      kept.ordersOf = std::move(carriedOf_);
      return;
    }
    kept.orders.clear();
    for (size_t q = 0; q < ownOrder_.size(); ++q) {
      const std::string& name = ssn_.queues()[q].name;
      if (!ownOrder_[q].empty()) {
        CarriedOrder& out = kept.orders[name];
        out.reserve(ownOrder_[q].size());
        for (const SessionTask* t : ownOrder_[q]) out.emplace_back(t->job, t->index);
      } else if (auto it = carriedOf_ ? carried_.find(name) : carried_.end(); it != carried_.end()) {
        CarriedOrder& out = kept.orders[name];
        for (const auto& [wasJob, task] : it->second)
          if (const int now = carriedJobNow(wasJob); now >= 0) out.emplace_back(now, task);
      }
    }
    kept.ordersOf = kept.orders.empty() ? nullptr : ssn_.sharedSnapshot();
  }

  api::Status jobProblem(const SessionJob& job) const {
    if (job.queue < 0) return api::Status::success();  // the session reports a missing queue itself
    const QNode& q = q_[job.queue];
    const std::string& name = ssn_.queues()[job.queue].name;
    if (!q.problem.empty()) return api::makeError("queue " + name + ": " + q.problem);
    if (!q.children.empty()) return api::makeError("queue " + name + " has child queues: only leaf queues take jobs");
    return api::Status::success();
  }

  /// Whether the two jobs ask the same for their next turn (all compareQueues reads of a job).
  bool sameTurnRequest(const SessionJob& a, const SessionJob& b) { return turnRequest(a) == turnRequest(b); }

  int compareQueues(int l, int r, const SessionJob* lJob, const SessionJob* rJob) {
    ensureDivided();
    // Compare where the two paths diverge: the children of their lowest common ancestor.
    // Walk both up to the same depth, then together, to the children of their lowest common
    // ancestor (no allocation: this runs for every heap operation of allocate).
    int a = l, b = r;
    if (q_[a].parent != q_[b].parent) {  // siblings (the queue order's case) need no walk
      int da = q_[a].depth, db = q_[b].depth;
      for (; da > db; --da) {
        if (q_[a].parent == b) return 0;  // one contains the other
        a = q_[a].parent;
      }
      for (; db > da; --db) {
        if (q_[b].parent == a) return 0;
        b = q_[b].parent;
      }
      if (a == b) return 0;
      while (q_[a].parent != q_[b].parent) a = q_[a].parent, b = q_[b].parent;
    }
    if (a == b) return 0;
    const QueueKey& ka = queueKey(a, lJob);
    const QueueKey& kb = queueKey(b, rJob);
    if (ka.over != kb.over) return ka.over ? 1 : -1;
    if (ka.starved != kb.starved) return ka.starved ? -1 : 1;
    if (q_[a].priority != q_[b].priority) return q_[a].priority > q_[b].priority ? -1 : 1;
    if (int c = compareFractions(ka.withJob, kb.withJob)) return c;
    if (int c = compareFractions(ka.without, kb.without)) return c;
    const api::Time ta = q_[a].obj ? q_[a].obj->meta.creationTimestamp : api::Time{};
    const api::Time tb = q_[b].obj ? q_[b].obj->meta.creationTimestamp : api::Time{};
    if (ta != tb) return ta < tb ? -1 : 1;
    return ssn_.queues()[a].name < ssn_.queues()[b].name ? -1 : 1;
  }

  /// "Reason: queue q: resource amounts": a check of queue `q` that refused, its reason and the
  /// queue's name kept apart for the callers that act on them (the victim search).
  api::Error queueError(const char* reason, int q, const std::string& amounts, int r) const {
    const std::string& name = ssn_.queues()[q].name;
    std::string message = std::string(reason) + ": queue ";
    const size_t nameAt = message.size();
    message += name + ": " + kResourceNames[r] + " " + amounts;
    return api::makeReasonError(reason, std::move(message), nameAt, name.size());
  }

  api::Status capacity(const SessionJob& job, const api::Resources& request) const {
    if (job.queue < 0) return api::Status::success();
    const Amounts req = amountsOf(request);
    for (int c = job.queue; c >= 0; c = q_[c].parent) {
      const QNode& q = q_[c];
      for (int r = 0; r < kResources; ++r) {
        if (req[r] <= 0) continue;
        if (q.limit[r] >= 0 && q.allocated[r] + req[r] > q.limit[r])
          return queueError("OverLimit", c,
                            fmt(r, q.allocated[r]) + " + " + fmt(r, req[r]) + " > limit " + fmt(r, q.limit[r]), r);
        if (!job.preemptible && q.deserved[r] >= 0 && q.allocatedNP[r] + req[r] > q.deserved[r])
          return queueError("NonPreemptibleOverQuota", c,
                            "non-preemptible " + fmt(r, q.allocatedNP[r]) + " + " + fmt(r, req[r]) + " > quota " +
                                fmt(r, q.deserved[r]),
                            r);
      }
    }
    return api::Status::success();
  }

  api::Status canReclaim(const SessionJob& job) {
    ensureDivided();
    if (job.queue < 0) return api::makeError("no queue");
    // The claimant's own queue only: whether its ancestors may grow depends on where the victim is
    // (a reclaim between siblings does not change their parent's allocation); reclaimable() checks
    // the level where the two paths diverge.
    const Amounts req = turnRequest(job);
    const QNode& q = q_[job.queue];
    for (int r = 0; r < kResources; ++r)
      if (req[r] > 0 && q.allocated[r] + req[r] > q.fairShare[r]) {
        // Asked by the victim search, which does not show it (Session::explainFailures off):
        // the amounts are not formatted, and the words fit a string's own buffer (no allocation
        // for each of the thousands of turns refused here a cycle).
        if (!ssn_.explainsFailures()) return api::makeError("over fair share");
        return api::makeError("queue " + ssn_.queues()[job.queue].name +
                              " would exceed its fair share: " + kResourceNames[r] + " " + fmt(r, q.allocated[r]) +
                              " + " + fmt(r, req[r]) + " > " + fmt(r, q.fairShare[r]));
      }
    // A limit that blocks (OverLimit) may still be relieved by victims under it (issue 15, item
    // 9): the victim search decides.
    return capacity(job, resourcesOf(req));
  }

  /// KAI's reclaimingQueuesRemainWithinBoundaries for the claimant's ancestors (its own queue is
  /// canReclaim's): each stays within its fair share with `request` added, except a top-level
  /// queue that is the only one. Victims under the ancestor (in sibling queues) make room in it.
  api::Status reclaimBounds(const SessionJob& job, const api::Resources& request) {
    ensureDivided();
    if (job.queue < 0) return api::Status::success();
    const Amounts req = amountsOf(request);
    for (int c = q_[job.queue].parent; c >= 0; c = q_[c].parent) {
      const QNode& q = q_[c];
      if (q.parent < 0 && topLevel_ == 1) break;
      for (int r = 0; r < kResources; ++r)
        if (req[r] > 0 && q.allocated[r] + req[r] > q.fairShare[r])
          return queueError("OverFairShare", c,
                            fmt(r, q.allocated[r]) + " + " + fmt(r, req[r]) + " > fair share " + fmt(r, q.fairShare[r]),
                            r);
    }
    return api::Status::success();
  }

  /// KAI's reclaim rules, compared between the two queues that share a parent where the paths of
  /// claimant and victim diverge (KAI compares siblings only): the victim's side gives back only
  /// while it is above its fair share, or above its deserved quota when the claimant's side is still
  /// within its own; the claimant's side stays within its fair share times the saturation multiplier.
  bool reclaimable(const SessionJob& claimant, const SessionTask& victim) {
    int a = -1, b = -1;
    return reclaimSides(claimant, victim, a, b) && sidesAllow(claimant, a, b);
  }
  /// The queue rules of reclaimable() between the claimant's side `a` and the victim's side `b`.
  bool sidesAllow(const SessionJob& claimant, int a, int b) {
    const Amounts req = turnRequest(claimant);
    return mayTake(a, b, req, q_[a].allocated) && saturationOk(a, req, q_[a].allocated);
  }

  /// Whether a pod under top-level queue `top` may be reclaimable() for `claimant` (ReclaimTreeFn):
  /// in another tree than the claimant's, every such pod's sides are the two top-level queues, so
  /// the queue rules say it for all of them at once. In its own tree: pod by pod.
  bool reclaimableUnder(const SessionJob& claimant, int top) {
    ensureDivided();
    if (claimant.queue < 0) return false;
    const int mine = q_[claimant.queue].top;
    return mine == top || sidesAllow(claimant, mine, top);
  }

  /// An upper bound of reclaimable() over the claimant's turn (addReclaimableFn's bound): victims
  /// the turn takes under the claimant side's queue lower its allocation, and with it what the
  /// quota and saturation checks on that side see, so a pod refused now may be taken once others
  /// are gone (pods of a sibling queue free their parent's share for pods elsewhere). Checked with
  /// that side holding only what no victim of the claimant frees (leavable()).
  bool reclaimableBound(const SessionJob& claimant, const SessionTask& victim) {
    int a = -1, b = -1;
    if (!reclaimSides(claimant, victim, a, b)) return false;
    return sidesBound(turnRequest(claimant), a, b, heldBound(a, claimant.queue));
  }
  /// What claimant side `a` holds for reclaimableBound() (claimant queue `cq`): all but what the
  /// claimant's victims under it may free.
  Amounts heldBound(int a, int cq) const {
    Amounts held = q_[a].allocated;
    const Amounts gone = leavable(a, cq);
    for (int r = 0; r < kResources; ++r) held[r] -= gone[r];
    return held;
  }
  /// reclaimableBound()'s queue rules between claimant side `a` (holding `held`, heldBound) and
  /// victim side `b`, for a turn asking `req`.
  bool sidesBound(const Amounts& req, int a, int b, const Amounts& held) const {
    return mayTake(a, b, req, held) && saturationOk(a, req, held);
  }

  /// reclaimableBound() split (addReclaimBoundSplitFn), its queue part: per victim queue, the queue
  /// rules between the claimant's side and the victim's (reclaimSides' queue part, sidesBound).
  void reclaimBoundQueues(const SessionJob& claimant, std::vector<uint8_t>& perQueue) {
    ensureDivided();
    perQueue.assign(q_.size(), 0);
    if (claimant.queue < 0) return;
    const int cq = claimant.queue;
    const Amounts req = turnRequest(claimant);
    // The claimant's side is its queue or an ancestor: what each holds is summed once.
    std::vector<std::optional<Amounts>>& held = boundHeld_;
    held.assign(static_cast<size_t>(q_[cq].depth) + 1, std::nullopt);
    for (size_t vq = 0; vq < q_.size(); ++vq) {
      int a = -1, b = -1;
      if (!queueSides(cq, static_cast<int>(vq), a, b)) continue;
      std::optional<Amounts>& h = held[static_cast<size_t>(q_[a].depth)];
      if (!h) h = heldBound(a, cq);
      perQueue[vq] = sidesBound(req, a, b, *h) ? 1 : 0;
    }
  }
  /// reclaimable() split the same way, as things stand (addReclaimBoundSplitFn's `queuesNow`), for
  /// the victim queues `queues`: reclaimSides' queue part and sidesAllow(); the job part is
  /// reclaimBoundJob().
  void reclaimQueuesNow(const SessionJob& claimant, std::span<const int> queues, std::vector<uint8_t>& perQueue) {
    ensureDivided();
    if (claimant.queue < 0) return;
    const Amounts req = turnRequest(claimant);
    for (int vq : queues) {
      int a = -1, b = -1;
      perQueue[static_cast<size_t>(vq)] =
          queueSides(claimant.queue, vq, a, b) && sidesBound(req, a, b, q_[a].allocated) ? 1 : 0;
    }
  }
  /// Its victim-job part (of reclaimable() too): a preemptible job not protected by its min runtime.
  bool reclaimBoundJob(const SessionJob& vj) const {
    return vj.queue >= 0 && vj.preemptible && !protectedByMinRuntime(vj, &api::Queue::reclaimMinRuntime);
  }

  /// What reclaimable() reads of the claimant besides its queue: its turn's request, which the
  /// quota and saturation checks add to the claimant's side (framework::ClaimantKeyFn).
  void reclaimKey(const SessionJob& claimant, std::string& key) {
    const Amounts req = turnRequest(claimant);
    key.append(reinterpret_cast<const char*>(req.data()), sizeof req);
  }

  /// Victims: the most over-share queue first, then the lowest job priority, then surplus pods of
  /// an elastic job before a job at its minimum, then the newer job (then the session's
  /// tie-breaks: lowest task priority, newest pod, key).
  int compareVictims(const SessionTask& l, const SessionTask& r) {
    ensureDivided();
    const SessionJob& lj = ssn_.jobs()[l.job];
    const SessionJob& rj = ssn_.jobs()[r.job];
    if (lj.queue != rj.queue && lj.queue >= 0 && rj.queue >= 0)
      if (int c = compareVictimQueues(l, r)) return c;
    if (lj.priority != rj.priority) return lj.priority < rj.priority ? -1 : 1;
    // An elastic job's surplus pods before a job at its minimum (which would go whole), as KAI.
    const bool lSurplus = surplusPod(l), rSurplus = surplusPod(r);
    if (lSurplus != rSurplus) return lSurplus ? -1 : 1;
    if (lj.index != rj.index) {  // the newer job first; a job's pods stay together (its chunk)
      if (lj.created != rj.created) return lj.created > rj.created ? -1 : 1;
      return lj.info->key < rj.info->key ? -1 : 1;
    }
    const bool lRunning = running(l), rRunning = running(r);  // pods leaving after the job's others
    if (lRunning != rRunning) return lRunning ? -1 : 1;
    if (l.taskPriority != r.taskPriority) return l.taskPriority < r.taskPriority ? -1 : 1;
    return 0;
  }
  static bool running(const SessionTask& t) { return t.state == TaskState::Running || t.state == TaskState::Bound; }

  /// Whether `t` is one of its job's surplus pods: the first readyCount - minMember of its running
  /// pods in the order the job gives them up (lower task priority, newer pod, key). The others go
  /// with the job whole once it is at its minimum, and are ordered as such (KAI's victim queue puts
  /// an elastic job back in order after each surplus pod: once at its minimum, behind newer jobs).
  bool surplusPod(const SessionTask& t) const {
    const SessionJob& j = ssn_.jobs()[t.job];
    // (Inline: every victim comparison asks, mostly of jobs at or below their minimum.)
    return j.readyCount > j.minMember() && surplusOfElastic(t, j);
  }
  [[gnu::noinline]] bool surplusOfElastic(const SessionTask& t, const SessionJob& j) const {
    const int32_t extra = j.readyCount - j.minMember();
    if (surplus_.size() < ssn_.jobs().size()) surplus_.resize(ssn_.jobs().size());
    Surplus& s = surplus_[static_cast<size_t>(t.job)];
    if (!s.known || s.version != j.version) {  // a pod placed or evicted since
      s.known = true;
      s.version = j.version;
      std::vector<const SessionTask*> running;
      for (const SessionTask& x : j.tasks)
        if (x.state == framework::TaskState::Running || x.state == framework::TaskState::Bound) running.push_back(&x);
      std::sort(running.begin(), running.end(), [](const SessionTask* a, const SessionTask* b) {
        if (a->taskPriority != b->taskPriority) return a->taskPriority < b->taskPriority;
        const auto& ta = a->pod().meta.creationTimestamp;
        const auto& tb = b->pod().meta.creationTimestamp;
        if (ta != tb) return ta > tb;
        return a->info->key < b->info->key;
      });
      s.pods.assign(j.tasks.size(), 0);
      for (size_t k = 0; k < running.size() && k < static_cast<size_t>(extra); ++k) s.pods[running[k]->index] = 1;
    }
    return s.pods[static_cast<size_t>(t.index)] != 0;
  }

  /// KAI's victim queue order between victims of two queues (victim_sequence.h): compared at the
  /// two queues just below the lowest common ancestor, each with everything its side gives up to
  /// and including the victim's chunk gone (compareGiving). A pod of a queue that is the other's
  /// ancestor (a parent queue that still runs pods) comes first. <0 when l goes first.
  [[gnu::noinline]] int compareVictimQueues(const SessionTask& l, const SessionTask& r) {
    const SessionJob& lj = ssn_.jobs()[l.job];
    const SessionJob& rj = ssn_.jobs()[r.job];
    if (!sequenceIndexed_) indexSequence();
    // The lowest common ancestor (-1: different top-level trees), then each side's child of it.
    int a = lj.queue, b = rj.queue, da = q_[a].depth, db = q_[b].depth;
    for (; da > db; --da) a = q_[a].parent;
    for (; db > da; --db) b = q_[b].parent;
    while (a != b) a = q_[a].parent, b = q_[b].parent;
    if (a == lj.queue) return -1;
    if (a == rj.queue) return 1;
    int ca = lj.queue, cb = rj.queue;
    while (q_[ca].parent != a) ca = q_[ca].parent;
    while (q_[cb].parent != a) cb = q_[cb].parent;
    const int level = q_[ca].depth;
    const std::optional<proportion::Share> sl = shareBy(l, level);
    const std::optional<proportion::Share> sr = shareBy(r, level);
    if (sl && sr) return compareGiving(ca, *sl, cb, *sr);
    // A pod in no sequence (placed in this session, not running): its own chunk, as things stand.
    auto after = [&](int q, const SessionJob& j, const SessionTask& t) {
      const Amounts chunk = amountsOf(surplusPod(t) ? t.request() : j.allocated);
      return shareAfter(snapshotOf(q), q, chunk);
    };
    return compareGiving(snapshotOf(ca), ca, after(ca, lj, l), snapshotOf(cb), cb, after(cb, rj, r));
  }

  /// What compareGiving() reads of a queue: taken when its sequence is built, so that the order
  /// stays one order while the queue's allocation moves (Session::holdVictimOrder).
  struct Snapshot {
    bool overFair = false, overDeserved = false;
    Amounts allocated{0, 0, 0};
    proportion::Share stood;  ///< its dominant share as it stood
  };
  Snapshot snapshotOf(int q) const {
    Snapshot s{overFair(q), overDeserved(q), q_[q].allocated, {}};
    s.stood = shareAfter(s, q, {0, 0, 0});
    return s;
  }
  proportion::Share shareAfter(const Snapshot& s, int q, const Amounts& given) const {
    Amounts held = s.allocated;
    for (int r = 0; r < kResources; ++r) held[r] -= given[r];
    const Fraction f = share(q, held);
    return {f.first, f.second};
  }
  /// Siblings `a` and `b`, at shares `sa` / `sb` once each has given what its victim sequence
  /// holds up to the victims compared: a queue above its fair share first, then one above its quota,
  /// then the larger of those shares, then the larger share as it stood, then the newer queue.
  /// <0: a gives first.
  int compareGiving(const Snapshot& qa, int a, const proportion::Share& sa, const Snapshot& qb, int b,
                    const proportion::Share& sb) const {
    if (qa.overFair != qb.overFair) return qa.overFair ? -1 : 1;
    if (qa.overDeserved != qb.overDeserved) return qa.overDeserved ? -1 : 1;
    if (int c = compareFractions({sb.num, sb.den}, {sa.num, sa.den})) return c;  // larger share first
    if (int c = compareFractions({qb.stood.num, qb.stood.den}, {qa.stood.num, qa.stood.den})) return c;
    const api::Time ta = q_[a].obj ? q_[a].obj->meta.creationTimestamp : api::Time{};
    const api::Time tb = q_[b].obj ? q_[b].obj->meta.creationTimestamp : api::Time{};
    if (ta != tb) return ta > tb ? -1 : 1;  // the newer queue first
    return a > b ? -1 : 1;
  }
  int compareGiving(int a, const proportion::Share& sa, int b, const proportion::Share& sb) const {
    return compareGiving(sequenceSnap_[static_cast<size_t>(a)], a, sa, sequenceSnap_[static_cast<size_t>(b)], b, sb);
  }

  /// The share of `t`'s ancestor at `level` once it has given its victim sequence up to `t`'s
  /// chunk (none when `t` is in none: not running or leaving). Builds the sequence of `t`'s
  /// top-level queue when it is stale: its allocation moved since it was built (while the victim
  /// order is held: moved before the hold began, and not built since).
  std::optional<proportion::Share> shareBy(const SessionTask& t, int level) {
    const int q = ssn_.jobs()[t.job].queue;
    const int top = q_[q].top;
    ensureBuilt(top);
    const int slot = taskSlot_[static_cast<size_t>(t.job)] + t.index;
    if (level > 0) {
      const proportion::Share* s = sequence_.share(slot, level);
      return s ? std::optional<proportion::Share>(*s) : std::nullopt;
    }
    // Shares at the top level (victims of two trees compared) need the tree's own merge, made on
    // the first such comparison since the build (the source reads what the build recorded).
    SequenceSource src(*this);
    return sequence_.shareAtTop(slot, top, src);
  }

  /// Builds top-level queue `top`'s sequence when it is stale: its allocation moved since it was
  /// built (while the victim order is held: moved before the hold began, and not built since).
  void ensureBuilt(int top) {
    const bool held = ssn_.victimOrderHeld();
    const uint64_t epoch = ssn_.victimOrderEpoch();
    if (held) takeHold();
    TopBuild& b = topBuilt_[static_cast<size_t>(top)];
    const uint64_t now = q_[top].allocatedVersion;
    bool stale = !b.built;
    if (!stale && held) stale = b.epoch != epoch && b.version != heldVersion_[static_cast<size_t>(top)];
    else if (!stale) stale = b.version != now;
    if (stale) {
      SequenceSource src(*this);
      sequence_.build(top, src);
      b = {true, now, held ? epoch : 0};
    }
  }

  /// Every pod of the victim sequences (running or leaving) in victim order, the order
  /// compareVictims gives them, to `visit` until it returns false (Session::walkVictims), but the
  /// pods of the top-level trees `tree` says no to: each
  /// top-level tree's sequence, merged across trees as compareVictimQueues compares them (by each
  /// tree's share once it has given up to the pod's chunk). A top-level queue without children is
  /// walked without building its sequence (LeafWalk): a reclaimer walks after every commit, and a
  /// build costs a pass over every pod of the tree.
  void walkVictims(const framework::VictimVisitFn& visit, const framework::VictimTreeFn& tree) {
    ensureDivided();
    if (!sequenceIndexed_) indexSequence();
    if (ssn_.victimOrderHeld()) takeHold();
    SequenceSource src(*this);
    using Entry = proportion::VictimSequence::Entry;
    struct Head {
      int top;
      const std::vector<Entry>* seq;  ///< a built sequence, or null: leafWalks_[leaf]
      size_t at;
      int leaf;
      proportion::Share share{};  ///< a built sequence's, at `at` (VictimSequence::shareAtTop)
    };
    auto atTop = [&](Head& h) { h.share = *sequence_.shareAtTop((*h.seq)[h.at].slot, h.top, src); };
    std::vector<Head> heads;
    if (leafWalks_.size() < q_.size()) leafWalks_.resize(q_.size());  // by queue; never resized during a walk
    struct Active {  // a build during the walk (a comparison in `visit`) leaves the walks' orders alone
      State& st;
      ~Active() {
        for (LeafWalk& w : st.leafWalks_) w.active = false;
      }
    } active{*this};
    for (size_t q = 0; q < q_.size(); ++q) {
      const int top = static_cast<int>(q);
      if (q_[q].parent >= 0) continue;
      if (tree && !tree(top)) continue;  // none of its pods need be visited: neither ordered nor built
      if (q_[q].children.empty() && leafWalkable(top)) {
        LeafWalk& w = leafWalks_[q];
        startLeafWalk(w, top);
        if (nextChunk(w)) heads.push_back({top, nullptr, 0, top});
        continue;
      }
      ensureBuilt(top);
      const std::vector<Entry>& seq = sequence_.sequenceOf(top, src);
      if (!seq.empty()) {
        heads.push_back({top, &seq, 0, -1});
        atTop(heads.back());
      }
    }
    auto snapOf = [&](const Head& h) -> const Snapshot& {
      return h.seq ? sequenceSnap_[static_cast<size_t>(h.top)] : leafWalks_[static_cast<size_t>(h.leaf)].snap;
    };
    auto shareOf = [&](const Head& h) {
      return h.seq ? h.share : leafWalks_[static_cast<size_t>(h.leaf)].share;
    };
    auto later = [&](const Head& a, const Head& b) {
      return compareGiving(snapOf(a), a.top, shareOf(a), snapOf(b), b.top, shareOf(b)) > 0;
    };
    std::make_heap(heads.begin(), heads.end(), later);
    while (!heads.empty()) {
      // The next pod comes from the tree that gives first; the pods of one chunk share its share,
      // so they follow one another.
      std::pop_heap(heads.begin(), heads.end(), later);
      Head& h = heads.back();
      bool more = false;
      if (h.seq) {
        const int slot = (*h.seq)[h.at].slot;
        const int job = slotJob_[static_cast<size_t>(slot)];
        const SessionJob& j = ssn_.jobs()[static_cast<size_t>(job)];
        if (!visit(j.tasks[static_cast<size_t>(slot - taskSlot_[static_cast<size_t>(job)])])) return;
        more = ++h.at < h.seq->size();
        if (more && (*h.seq)[h.at].chunk != (*h.seq)[h.at - 1].chunk) atTop(h);  // (a chunk's pods share one)
      } else {
        LeafWalk& w = leafWalks_[static_cast<size_t>(h.leaf)];
        if (!visit(*w.chunk[w.c])) return;
        more = ++w.c < w.chunk.size() || nextChunk(w);
      }
      if (more) std::push_heap(heads.begin(), heads.end(), later);
      else heads.pop_back();
    }
  }

  /// Queue `q`'s own running pods (and maybe leaving ones) in victim order, to `visit` until it
  /// returns false (Session::walkQueueVictims): inside one queue two pods compare by their jobs
  /// alone, as they stand (a hold keeps only the order between queues: compareVictimQueues), so
  /// this is its own order as last made with the jobs changed since sorted in (LeafWalk), no
  /// sequence built, held or not.
  bool walkQueue(int q, const framework::VictimVisitFn& visit) {
    if (q < 0 || static_cast<size_t>(q) >= q_.size()) return false;
    ensureDivided();
    if (!sequenceIndexed_) indexSequence();
    if (leafWalks_.size() < q_.size()) leafWalks_.resize(q_.size());
    LeafWalk& w = leafWalks_[static_cast<size_t>(q)];
    if (w.active) return false;  // (walkVictims() is walking it)
    struct Active {
      LeafWalk& w;
      ~Active() { w.active = false; }
    } active{w};
    startLeafWalk(w, q);
    for (const SessionTask* t = nextOwn(w, false); t; t = nextOwn(w, false))
      if (!visit(*t)) break;
    return true;
  }

  /// walkVictims()'s view of a top-level queue without children: its own order as last built
  /// (ownOrder_), the pods of jobs changed since sorted in as the walk meets them (a job's pods
  /// compare by their jobs alone inside a queue, so the others keep their places), its chunks
  /// as the sequence makes them (SequenceSource::ownPods) and its share after each (shareAfter).
  struct LeafWalk {
    int q = -1;
    bool active = false;                    ///< walkVictims() is walking it
    Snapshot snap;                          ///< snapshotOf(q) as the walk began
    uint32_t stamp = 0;                     ///< walkChanged_ of the jobs changed since ownOrder_[q]
    const std::vector<const SessionTask*>* order = nullptr;  ///< ownOrder_[q], or keptCopy once rebuilt
    std::vector<const SessionTask*> keptCopy;  ///< ownOrder_[q] as the walk began, if rebuilt during it
    size_t kept = 0;                        ///< next in *order
    std::vector<const SessionTask*> moved;  ///< pods of the jobs changed since, in victim order
    size_t at = 0;                          ///< next in moved
    Amounts given{0, 0, 0};                 ///< what its chunks so far give back
    std::vector<const SessionTask*> chunk;  ///< the current chunk's pods
    size_t c = 0;                           ///< next in chunk
    proportion::Share share;                ///< once the current chunk is given
  };
  std::vector<LeafWalk> leafWalks_;
  /// Per queue: how far ownOrder() last read its Session::jobChanges() (the jobs changed since are
  /// read from there).
  std::vector<size_t> orderChangesAt_;
  /// More of the queue's jobs changed than kLeafWalkMoved, or more changes of its jobs to read than
  /// kLeafWalkChanges, since a queue's ownOrder(): a walk orders it again first.
  static constexpr size_t kLeafWalkMoved = 32, kLeafWalkChanges = 512;
  std::vector<int> leafChanged_;  ///< startLeafWalk()'s buffer
  std::vector<uint32_t> walkChanged_;  ///< per job: the stamp of the last walk that found it changed
  uint32_t walkStamps_ = 0;

  /// Whether queue `q` may be walked lazily now: the order compareVictims gives its pods is the
  /// order as things stand. Outside a hold, always; in one, when nothing in it changed since the
  /// hold began and it was not built in this hold at another state (a trial's, since undone).
  bool leafWalkable(int q) const {
    if (!ssn_.victimOrderHeld()) return true;
    const uint64_t now = q_[q].allocatedVersion;
    const TopBuild& b = topBuilt_[static_cast<size_t>(q)];
    return now == heldVersion_[static_cast<size_t>(q)] &&
           !(b.built && b.epoch == ssn_.victimOrderEpoch() && b.version != now);
  }
  static bool inSequence(const SessionTask& t) { return running(t) || t.state == TaskState::Releasing; }
  /// Whether a pod of a victim sequence gives back its request: running and preemptible (any
  /// other is never a victim and holds no place in a chunk).
  bool givesBack(const SessionTask& t) const { return running(t) && ssn_.jobs()[t.job].preemptible; }
  /// Whether it goes with its job whole (the job's pods in a row make one chunk), not alone.
  bool goesWhole(const SessionTask& t) const { return givesBack(t) && !surplusPod(t); }

  void startLeafWalk(LeafWalk& w, int q) {
    const std::vector<int>& log = ssn_.jobChanges(q);
    size_t& at = orderChangesAt_[static_cast<size_t>(q)];
    if (ownOrder_[static_cast<size_t>(q)].empty()) ownOrder(q);  // not ordered yet (or nothing to order)
    std::vector<int>& changed = leafChanged_;  // the queue's jobs changed since its order was made
    changed.assign(log.begin() + static_cast<std::ptrdiff_t>(at), log.end());
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    std::erase_if(changed, [&](int ji) { return orderVersion_[static_cast<size_t>(ji)] == ssn_.jobs()[ji].version; });
    if (changed.empty()) {
      at = log.size();  // every job as ordered: the order stands
    } else if (changed.size() > kLeafWalkMoved || log.size() - at > kLeafWalkChanges) {
      ownOrder(q);  // ordered again once enough moved, rather than sorted in at every walk
      changed.clear();
    }
    if (walkChanged_.size() != ssn_.jobs().size()) walkChanged_.assign(ssn_.jobs().size(), 0);
    if (++walkStamps_ == 0) std::fill(walkChanged_.begin(), walkChanged_.end(), 0), walkStamps_ = 1;
    w.q = q;
    w.active = true;
    w.stamp = walkStamps_;
    w.order = &ownOrder_[static_cast<size_t>(q)];
    w.snap = snapshotOf(q);
    w.kept = 0;
    w.moved.clear();
    w.at = 0;
    for (int ji : changed) {
      walkChanged_[static_cast<size_t>(ji)] = w.stamp;
      for (const SessionTask& t : ssn_.jobs()[ji].tasks)
        if (inSequence(t)) w.moved.push_back(&t);
    }
    std::sort(w.moved.begin(), w.moved.end(), [&](const SessionTask* x, const SessionTask* y) { return ssn_.victimLess(*x, *y); });
    w.given = {0, 0, 0};
    w.chunk.clear();
    w.c = 0;
  }
  /// The walk's next own running pod (peek: left in place), or null at the end. A leaving pod is
  /// skipped: it gives back nothing (its chunk's share is the one before), is no victim, and comes
  /// after its job's running pods (ownOrder), so it ends no chunk early.
  const SessionTask* nextOwn(LeafWalk& w, bool peek) {
    const std::vector<const SessionTask*>& kept = *w.order;
    while (w.kept < kept.size() &&
           (walkChanged_[static_cast<size_t>(kept[w.kept]->job)] == w.stamp || !running(*kept[w.kept])))
      ++w.kept;  // in moved, or leaving
    while (w.at < w.moved.size() && !running(*w.moved[w.at])) ++w.at;
    const SessionTask* k = w.kept < kept.size() ? kept[w.kept] : nullptr;
    const SessionTask* m = w.at < w.moved.size() ? w.moved[w.at] : nullptr;
    const bool takeMoved = m && (!k || ssn_.victimLess(*m, *k));
    if (!peek) (takeMoved ? w.at : w.kept)++;
    return takeMoved ? m : k;
  }
  /// Fills the walk's next chunk (a surplus pod, a pod that is no victim, or the consecutive pods
  /// of a job that goes whole) and its share once given; false at the end.
  bool nextChunk(LeafWalk& w) {
    w.chunk.clear();
    w.c = 0;
    const SessionTask* t = nextOwn(w, false);
    if (!t) return false;
    w.chunk.push_back(t);
    if (goesWhole(*t))
      for (const SessionTask* n = nextOwn(w, true); n && n->job == t->job && goesWhole(*n); n = nextOwn(w, true))
        w.chunk.push_back(nextOwn(w, false));
    for (const SessionTask* x : w.chunk)
      if (givesBack(*x)) {
        const Amounts a = amountsOf(x->request());
        for (int r = 0; r < kResources; ++r) w.given[r] += a[r];
      }
    w.share = shareAfter(w.snap, w.q, w.given);
    return true;
  }

  /// Before pod `t` changes in a hold that keeps its order (Session::addVictimOrderKeepFn): its
  /// top-level tree, when the hold would build it (moved since its last build) and nothing in it
  /// moved yet in the hold, is built now, at the hold's state. Else its first comparison would
  /// build it at whatever state the search is in then (a trial's), and later trials would read
  /// that build.
  void keepHeld(const SessionTask& t) {
    const int q = ssn_.jobs()[t.job].queue;
    if (q < 0) return;
    ensureDivided();
    if (!sequenceIndexed_) indexSequence();
    takeHold();
    const int top = q_[q].top;
    if (q_[top].allocatedVersion == heldVersion_[static_cast<size_t>(top)]) ensureBuilt(top);
  }

  /// The first comparison of a hold (or the first ask of its fingerprint): where each tree stood.
  void takeHold() {
    const uint64_t epoch = ssn_.victimOrderEpoch();
    if (heldEpoch_ == epoch) return;
    heldEpoch_ = epoch;
    for (size_t i = 0; i < q_.size(); ++i) heldVersion_[i] = q_[i].allocatedVersion;
    heldAll_ = allVersion_;
  }

  /// The victim order's fingerprint (Session::victimOrderVersion): what every queue holds, as
  /// the toggles of its tasks' states (onAllocate), which also covers what the order reads of the
  /// jobs (surplus pods, running pods). While held: as the hold took it.
  uint64_t victimOrderVersion(bool live) {
    if (live || !ssn_.victimOrderHeld()) return allVersion_;
    if (!sequenceIndexed_) indexSequence();  // heldVersion_ is sized there
    takeHold();
    return heldAll_;
  }

  /// The victim sequence's view of this session (victim_sequence.h).
  class SequenceSource final : public proportion::VictimSequence::Source {
   public:
    explicit SequenceSource(State& st) : st_(st) {}
    void ownPods(int q, std::vector<proportion::VictimSequence::Pod>& out) override {
      st_.sequenceSnap_[static_cast<size_t>(q)] = st_.snapshotOf(q);
      const SessionTask* prev = nullptr;  // the last pod of a whole chunk
      for (const SessionTask* t : st_.ownOrder(q)) {
        const bool whole = st_.goesWhole(*t);
        out.push_back({st_.taskSlot_[static_cast<size_t>(t->job)] + t->index, whole && prev && prev->job == t->job,
                       st_.givesBack(*t) ? amountsOf(t->request()) : Amounts{0, 0, 0}});
        prev = whole ? t : nullptr;
      }
    }
    const std::vector<int>& children(int q) const override { return st_.q_[q].children; }
    uint64_t version(int q) const override { return st_.q_[q].allocatedVersion; }
    proportion::Share shareAfter(int q, const Amounts& given) const override {
      return st_.shareAfter(st_.sequenceSnap_[static_cast<size_t>(q)], q, given);
    }
    int compareChildren(int a, const proportion::Share& sa, int b, const proportion::Share& sb) const override {
      return st_.compareGiving(a, sa, b, sb);
    }

   private:
    State& st_;
  };

  /// Queue `q`'s own pods (running or leaving) in victim order. Kept between builds: a build
  /// starts from the last order, keeps the pods of jobs that did not change since, and sorts in
  /// only the others (new, or of a job that changed), so a queue that changed by a few pods costs a
  /// pass and a few binary searches, not a sort.
  const std::vector<const SessionTask*>& ownOrder(int q) {
    auto less = [&](const SessionTask* x, const SessionTask* y) { return ssn_.victimLess(*x, *y); };
    auto slot = [&](const SessionTask& t) { return static_cast<size_t>(taskSlot_[static_cast<size_t>(t.job)] + t.index); };
    std::vector<const SessionTask*>& order = ownOrder_[static_cast<size_t>(q)];
    if (static_cast<size_t>(q) < leafWalks_.size()) {
      LeafWalk& w = leafWalks_[static_cast<size_t>(q)];
      if (w.active && w.order == &order) {  // a walk reads it: it keeps the order it began with
        w.keptCopy = order;
        w.order = &w.keptCopy;
      }
    }
    ++orderStamp_;
    orderKept_.clear();
    orderMoved_.clear();
    if (order.empty()) {
      carriedOrder(q, less);  // the queue's first order in this session: from the last session's
    } else {
      // Two pods of one queue compare by their jobs alone (priority, surplus pod or whole job,
      // age) and, inside a job, by running state and task priority: the pods of a job unchanged
      // since the last order (SessionJob::version) keep their places among themselves.
      for (const SessionTask* t : order)
        if (inSequence(*t)) {
          orderSeen_[slot(*t)] = orderStamp_;
          const bool same = orderVersion_[static_cast<size_t>(t->job)] == ssn_.jobs()[t->job].version;
          (same ? orderKept_ : orderMoved_).push_back(t);
        }
    }
    for (int ji : queueJobs_[static_cast<size_t>(q)])
      for (const SessionTask& t : ssn_.jobs()[ji].tasks)
        if (inSequence(t) && orderSeen_[slot(t)] != orderStamp_) orderMoved_.push_back(&t);
    std::sort(orderMoved_.begin(), orderMoved_.end(), less);
    // Each moved pod goes where it belongs among the kept ones (a binary search from the last one
    // placed): what a merge gives, with a few comparisons per moved pod instead of one per pod.
    order.clear();
    auto from = orderKept_.cbegin();
    for (const SessionTask* m : orderMoved_) {
      const auto at = std::upper_bound(from, orderKept_.cend(), m, less);
      order.insert(order.end(), from, at);
      order.push_back(m);
      from = at;
    }
    order.insert(order.end(), from, orderKept_.cend());
    for (int ji : queueJobs_[static_cast<size_t>(q)]) orderVersion_[static_cast<size_t>(ji)] = ssn_.jobs()[ji].version;
    orderChangesAt_[static_cast<size_t>(q)] = ssn_.jobChanges(q).size();
    return order;
  }

  /// ownOrder()'s start for queue `q` when this session has not ordered it yet: the pods of the
  /// last session's order for it whose job is the same cache object (unchanged since), in that
  /// order, each kept when it still comes after the pod kept before it and before the next one
  /// (as Session::jobsInOrder carries the job order): orderKept_ is sorted whatever was carried;
  /// the others go to orderMoved_ and are sorted in. One or two comparisons per pod instead of a
  /// sort.
  template <typename Less>
  void carriedOrder(int q, const Less& less) {
    const auto it = carriedOf_ ? carried_.find(ssn_.queues()[static_cast<size_t>(q)].name) : carried_.end();
    if (it == carried_.end()) return;
    std::vector<const SessionTask*>& pods = orderCarried_;
    pods.clear();
    for (const auto& [wasJob, task] : it->second) {
      const int ji = carriedJobNow(wasJob);
      if (ji < 0) continue;
      const SessionJob& j = ssn_.jobs()[static_cast<size_t>(ji)];
      if (j.queue != q || task < 0 || static_cast<size_t>(task) >= j.tasks.size()) continue;
      const SessionTask& t = j.tasks[static_cast<size_t>(task)];
      const size_t slot = static_cast<size_t>(taskSlot_[static_cast<size_t>(ji)] + t.index);
      if (!(running(t) || t.state == TaskState::Releasing) || orderSeen_[slot] == orderStamp_) continue;
      orderSeen_[slot] = orderStamp_;
      pods.push_back(&t);
    }
    framework::splitCarried(pods, less, orderKept_, orderMoved_, [](size_t) {});
  }

  /// The index now of the carried snapshot's job `wasJob` (-1: gone, or changed since: the cache
  /// replaced its object, so its tasks may be others). The map is made once per session.
  int carriedJobNow(int wasJob) {
    if (!carriedOf_) return -1;
    if (!carriedMapped_) {
      carriedMapped_ = true;
      carriedJob_ = carriedOf_->jobIndicesIn(ssn_.snapshot(), /*sameObjectOnly=*/true);
    }
    return wasJob >= 0 && static_cast<size_t>(wasJob) < carriedJob_.size() ? carriedJob_[static_cast<size_t>(wasJob)] : -1;
  }

  /// Lists each queue's jobs and numbers every task (taskSlot_ per job, slotJob_ per slot).
  void indexSequence() {
    sequenceIndexed_ = true;
    const size_t nq = q_.size();
    // Only the jobs with pods in the sequence (running or leaving): no pod becomes one within a
    // session (a pod placed is allocated or pipelined; one evicted was running, and an undone
    // eviction runs again), so the jobs listed now are all a queue's order ever holds.
    queueJobs_.assign(nq, {});
    for (const SessionJob& j : ssn_.jobs()) {
      if (j.queue < 0 || (j.readyCount == 0 && j.releasingCount == 0)) continue;
      if (std::any_of(j.tasks.begin(), j.tasks.end(),
                      [](const SessionTask& t) { return running(t) || t.state == TaskState::Releasing; }))
        queueJobs_[static_cast<size_t>(j.queue)].push_back(j.index);
    }
    // The slots of one queue's pods are adjacent, and those of one tree: a build walks a queue's
    // pods and writes their shares by slot, so numbered by job (queues interleaved) the shares of
    // a tree's 3,000 pods lie across every pod's slots, a cache miss each.
    taskSlot_.assign(ssn_.jobs().size(), -1);
    slotJob_.clear();
    int slots = 0;
    auto number = [&](const SessionJob& j) {
      taskSlot_[static_cast<size_t>(j.index)] = slots;
      slots += static_cast<int>(j.tasks.size());
      slotJob_.insert(slotJob_.end(), j.tasks.size(), j.index);
    };
    std::vector<int> stack;  // the queues, depth first from each top-level one
    for (size_t r = nq; r-- > 0;)
      if (q_[r].parent < 0) stack.push_back(static_cast<int>(r));
    while (!stack.empty()) {
      const int q = stack.back();
      stack.pop_back();
      for (int ji : queueJobs_[static_cast<size_t>(q)]) number(ssn_.jobs()[static_cast<size_t>(ji)]);
      const std::vector<int>& kids = q_[q].children;
      stack.insert(stack.end(), kids.rbegin(), kids.rend());
    }
    for (const SessionJob& j : ssn_.jobs())
      if (taskSlot_[static_cast<size_t>(j.index)] < 0) number(j);
    ownOrder_.resize(nq);
    for (auto& o : ownOrder_) o.clear();
    orderChangesAt_.assign(nq, 0);
    orderSeen_.assign(static_cast<size_t>(slots), 0);
    orderVersion_.assign(ssn_.jobs().size(), ~uint64_t{0});
    orderStamp_ = 0;
    topBuilt_.assign(nq, TopBuild{});
    heldVersion_.assign(nq, 0);
    heldEpoch_ = ~uint64_t{0};
    sequenceSnap_.assign(nq, Snapshot{});
    sequence_.reset(nq, static_cast<size_t>(slots));
  }

  /// Preempt stays inside the claimant's queue and spares a job its queue's preemptMinRuntime
  /// protects: the queues' part and the victim job's (Session::addPreemptableSplitFn).
  bool preemptable(const SessionJob& claimant, const SessionTask& victim) const {
    const SessionJob& vj = ssn_.jobs()[victim.job];
    return preemptablePair(claimant, vj) && preemptableJob(vj);
  }
  static bool preemptablePair(const SessionJob& claimant, const SessionJob& vj) {
    return claimant.queue >= 0 && claimant.queue == vj.queue;
  }
  bool preemptableJob(const SessionJob& vj) const { return !protectedByMinRuntime(vj, &api::Queue::preemptMinRuntime); }

  /// What an allocation event toggles for a task: placed (allocate / pipeline and their undo),
  /// evicted (evict and its undo) or reserved to come back (consolidation's reserve and its undo).
  enum class Toggle : uint64_t { Placed = 0, Evicted = 1, Reserved = 2 };
  static uint64_t taskId(const SessionTask& t) { return (static_cast<uint64_t>(t.job) << 32) | static_cast<uint32_t>(t.index); }
  Toggle toggleOf(const SessionTask& t, int sign) {
    const uint64_t id = taskId(t);
    if (t.state != TaskState::Releasing) return running(t) ? Toggle::Evicted : Toggle::Placed;  // undo of evict, or placed / unplaced
    if (sign > 0) {  // a reserve: an evicted pod comes back
      reserved_.insert(id);
      return Toggle::Reserved;
    }
    return reserved_.erase(id) ? Toggle::Reserved : Toggle::Evicted;  // undo of a reserve, or an eviction
  }
  /// A fixed random 64-bit key per task and toggle.
  static uint64_t toggleKey(const SessionTask& t, Toggle what) {
    return framework::fingerprintKey(taskId(t) * 4 + static_cast<uint64_t>(what));
  }

  void onAllocate(const SessionTask& t, int sign) {
    const SessionJob& j = ssn_.jobs()[t.job];
    // A fingerprint of the subtree's task states, not a counter: each event and its undo toggle the
    // same key, so a trial rolled back leaves the version where it was, and what was built for
    // that state (victim sequences, queue keys) still holds.
    const uint64_t key = toggleKey(t, toggleOf(t, sign));
    allVersion_ ^= key;  // every pod's: the victim order reads the jobs' running pods too
    if (j.queue < 0) return;
    const Amounts a = amountsOf(t.request());
    for (int c = j.queue; c >= 0; c = q_[c].parent) {
      q_[c].allocatedVersion ^= key;
      for (int r = 0; r < kResources; ++r) {
        q_[c].allocated[r] += sign * a[r];
        if (!j.preemptible) q_[c].allocatedNP[r] += sign * a[r];
      }
    }
  }

  std::vector<framework::SessionResult::QueueReport> reports() {
    ensureDivided();
    std::vector<framework::SessionResult::QueueReport> out;
    for (const SessionQueue& sq : ssn_.queues()) {
      const QNode& q = q_[sq.index];
      if (!q.obj && q.allocated == Amounts{0, 0, 0}) continue;
      framework::SessionResult::QueueReport rep;
      rep.name = sq.name;
      rep.parent = q.obj ? q.obj->parentQueue : "";
      rep.deserved = resourcesOf(q.deserved);
      rep.fairShare = resourcesOf(q.fairShare);
      rep.allocated = resourcesOf(q.allocated);
      rep.requested = resourcesOf(q.requested);
      rep.problem = q.obj ? q.problem : "not found";
      if (const auto& usage = ssn_.queueUsage()) {
        auto u = usage->usagePpm.find(sq.name);
        rep.usagePpm = u != usage->usagePpm.end() ? u->second : std::array<int64_t, 3>{0, 0, 0};
      }
      out.push_back(std::move(rep));
    }
    return out;
  }

 private:
  void build() {
    const auto& queues = ssn_.queues();
    q_.resize(queues.size());
    queueKeys_.assign(queues.size(), QueueKey{});  // (none computed: queueKey() works each out on first use)
    // Settings and validity of each queue object.
    for (const SessionQueue& sq : queues) {
      QNode& q = q_[sq.index];
      q.obj = sq.queue;
      if (!q.obj) {
        q.problem = "Queue " + sq.name + " not found";
        continue;
      }
      q.priority = q.obj->priority;
      const api::QueueResource* res[kResources] = {&q.obj->gpu, &q.obj->cpu, &q.obj->memory};
      for (int r = 0; r < kResources; ++r) {
        q.deserved[r] = res[r]->quota;
        q.limit[r] = res[r]->limit;
        q.weight[r] = res[r]->overQuotaWeightMilli;
      }
      // Validity is the validation layer's (api/validation.h, computed with the snapshot): an
      // invalid queue, or one under an invalid ancestor, takes no part in the tree.
      if (const api::Problem* p = ssn_.snapshot().findInvalid(api::Problem::objectRef(api::Kind::Queue, "", sq.name)))
        q.problem = p->detail();
    }
    // The tree as declared (an invalid child still makes its parent a non-leaf, and what its pods
    // hold still counts up the tree), with parent cycles cut: every queue on one is invalid.
    for (QNode& q : q_)
      if (q.obj && !q.obj->parentQueue.empty())
        if (int p = ssn_.findQueue(q.obj->parentQueue); p >= 0 && queues[p].queue) q.parent = p;
    for (size_t i = 0; i < q_.size(); ++i) {
      std::set<int> seen;
      for (int c = static_cast<int>(i); c >= 0; c = q_[c].parent)
        if (!seen.insert(c).second) {
          q_[c].parent = -1;
          break;
        }
    }
    for (size_t i = 0; i < q_.size(); ++i) {
      if (q_[i].parent >= 0) q_[q_[i].parent].children.push_back(static_cast<int>(i));
      int top = static_cast<int>(i);
      for (; q_[top].parent >= 0; top = q_[top].parent) ++q_[i].depth;
      q_[i].top = top;
    }
    for (const QNode& q : q_) topLevel_ += q.parent < 0 ? 1 : 0;

    // What each subtree holds and asks for: at session open the working state is the cache's,
    // whose per-job totals the session summed by queue as it built its jobs.
    for (const SessionQueue& sq : queues) {
      const framework::QueueOpenTotals& o = sq.opened;
      const Amounts held{o.held.milliGpu, o.held.milliCpu, o.held.memory};
      const Amounts heldNP{o.heldNonPreemptible.milliGpu, o.heldNonPreemptible.milliCpu, o.heldNonPreemptible.memory};
      const Amounts pending{o.pending.milliGpu, o.pending.milliCpu, o.pending.memory};
      for (int c = sq.index; c >= 0; c = q_[c].parent)
        for (int r = 0; r < kResources; ++r) {
          q_[c].allocated[r] += held[r];
          q_[c].allocatedNP[r] += heldNP[r];
          q_[c].requested[r] += held[r] + pending[r];
        }
    }
  }

  /// The fair shares, computed on first use (after every plugin opened: time-aware usage).
  void ensureDivided() {
    if (!divided_) divide();  // (inline: every comparison asks)
  }
  [[gnu::noinline]] void divide() {
    divided_ = true;
    Amounts capacity{0, 0, 0};
    for (const auto& n : ssn_.nodes()) {
      const api::Node& node = n.node();
      if (!node.ready) continue;
      Amounts a = amountsOf(n.info->allocatable);
      a[0] += n.info->migGpuMilli;  // MIG instances count as the part of a GPU each is
      Amounts f = amountsOf(n.info->foreignUsed);
      f[0] += api::migGpuMilli(n.info->foreignUsed, n.info->gpuMemoryMiB);  // those other schedulers' pods hold
      for (int r = 0; r < kResources; ++r) capacity[r] += std::max<int64_t>(0, a[r] - f[r]);
    }
    std::vector<proportion::DivisionQueue> dq;
    std::vector<int> toDq(q_.size(), -1), fromDq;
    for (size_t i = 0; i < q_.size(); ++i)
      if (q_[i].obj && q_[i].problem.empty()) {
        toDq[i] = static_cast<int>(dq.size());
        fromDq.push_back(static_cast<int>(i));
        proportion::DivisionQueue d;
        d.name = ssn_.queues()[i].name;
        d.priority = q_[i].priority;
        d.deserved = q_[i].deserved;
        d.limit = q_[i].limit;
        d.weight = q_[i].weight;
        d.requested = q_[i].requested;
        dq.push_back(std::move(d));
      }
    for (size_t k = 0; k < dq.size(); ++k) {
      const int p = q_[fromDq[k]].parent;
      dq[k].parent = p >= 0 ? toDq[p] : -1;
    }
    adjustWeights(dq);
    proportion::divide(dq, capacity);
    for (size_t k = 0; k < dq.size(); ++k) {
      QNode& q = q_[fromDq[k]];
      q.fairShare = dq[k].fairShare;
      // The division never hands out more than exists, so over-committed quotas are scaled down
      // (division.cpp); reclaim still honours the quota itself, as KAI does (its fair shares are
      // never below min(quota, requested)).
      for (int r = 0; r < kResources; ++r) {
        int64_t guaranteed = q.deserved[r] < 0 ? 0 : std::min(q.deserved[r], q.requested[r]);
        if (q.limit[r] >= 0) guaranteed = std::min(guaranteed, q.limit[r]);
        q.kept[r] = std::max(q.fairShare[r], guaranteed);
      }
    }
  }

  /// Time-aware fairness: s_i = max(0, w_i + k (w_i - U_i)), w_i the queue's weight normalized
  /// among its siblings, U_i its recent usage as a fraction of the cluster.
  void adjustWeights(std::vector<proportion::DivisionQueue>& dq) const {
    const auto& usage = ssn_.queueUsage();
    if (!usage) return;
    for (int r = 0; r < kResources; ++r) {
      std::vector<i128> siblingSum(dq.size() + 1, 0);
      auto slot = [&](const proportion::DivisionQueue& d) { return d.parent < 0 ? dq.size() : size_t(d.parent); };
      for (const auto& d : dq) siblingSum[slot(d)] += d.weight[r];
      std::vector<int64_t> adjusted(dq.size());
      for (size_t k = 0; k < dq.size(); ++k) {
        const i128 sum = siblingSum[slot(dq[k])];
        const int64_t w = sum > 0 ? static_cast<int64_t>(static_cast<i128>(dq[k].weight[r]) * 1'000'000 / sum) : 0;
        auto it = usage->usagePpm.find(dq[k].name);
        const int64_t u = it == usage->usagePpm.end() ? 0 : it->second[r];
        adjusted[k] = std::max<int64_t>(0, w + usage->kMilli * (w - u) / 1000);
      }
      for (size_t k = 0; k < dq.size(); ++k) dq[k].weight[r] = adjusted[k];
    }
  }

  /// What the job asks for in its next turn of allocate, as KAI's queue order adds it
  /// (GetTasksToAllocateInitResource): its gang minimum while below it, else its next pod. Kept per
  /// job while its ready and pending counts stay as they were (allocate's queue order asks for it
  /// on every comparison).
  Amounts turnRequest(const SessionJob& job) {
    if (const std::optional<Amounts> all = allPendingRequest(job)) return *all;  // (no cache needed)
    if (turnCache_.empty()) turnCache_.resize(ssn_.jobs().size());
    TurnRequest& c = turnCache_[static_cast<size_t>(job.index)];
    if (c.ready != job.readyCount || c.pending != job.pendingCount) {
      c.ready = job.readyCount;
      c.pending = job.pendingCount;
      c.request = minimumRequest(job);
    }
    return c.request;
  }

  /// minimumRequest() where the turn needs every pending pod and they are the snapshot's: their
  /// sum as the cache counted it (copied into the session's job); none otherwise.
  std::optional<Amounts> allPendingRequest(const SessionJob& job) const {
    if (!job.subGroupReady.empty() || job.pendingCount <= 0 || job.pendingCount != job.infoPendingCount)
      return std::nullopt;
    const int need = ssn_.jobReady(job) ? 1 : std::max(1, job.minMember() - job.readyCount);
    if (need < job.pendingCount) return std::nullopt;
    return Amounts{job.infoPendingMilliGpu, job.infoPendingMilliCpu, job.infoPendingMemory};  // (amountsOf's order)
  }

  /// What the job needs for its next step: its first pending pods up to the gang minimum, each
  /// subgroup's first (Session::pendingTaskOrder); one pod once the job is ready. Reclaim and
  /// preempt make room for that, not for every pod above minMember.
  Amounts minimumRequest(const SessionJob& job) const {
    if (const std::optional<Amounts> all = allPendingRequest(job)) return *all;  // the same pods as the snapshot's
    if (job.subGroupReady.empty() && job.pendingCount > 0) {
      // Without subgroups the pods needed are the first `need` in task order. When that is all of
      // them, or they all ask alike (gangs mostly do), no order is needed: a sum does.
      const int need = ssn_.jobReady(job) ? 1 : std::max(1, job.minMember() - job.readyCount);
      const api::Resources* first = nullptr;
      bool alike = true;
      api::Resources all;
      for (const SessionTask& t : job.tasks) {
        if (t.state != TaskState::Pending) continue;
        if (!first) first = &t.request();
        else if (alike && !(t.request() == *first)) alike = false;
        all += t.request();
      }
      if (need >= job.pendingCount) return amountsOf(all);
      if (alike) {
        Amounts one = amountsOf(*first);
        for (int r = 0; r < kResources; ++r) one[r] *= need;
        return one;
      }
    }
    int minimum = 0;
    const std::vector<int> order = ssn_.pendingTaskOrder(job, &minimum);
    const size_t need = static_cast<size_t>(std::max(1, minimum));
    Amounts a{0, 0, 0};
    for (size_t i = 0; i < order.size() && i < need; ++i) {
      const Amounts x = amountsOf(job.tasks[order[i]].request());
      for (int r = 0; r < kResources; ++r) a[r] += x[r];
    }
    return a;
  }

  bool over(int q, const Amounts& job) const {
    for (int r = 0; r < kResources; ++r)
      if (q_[q].allocated[r] + job[r] > q_[q].fairShare[r] && (job[r] > 0 || q_[q].allocated[r] > 0)) return true;
    return false;
  }

  bool starved(int q, const Amounts& job) const {
    bool any = false;
    for (int r = 0; r < kResources; ++r) {
      if (job[r] <= 0) continue;
      any = true;
      if (q_[q].deserved[r] >= 0 && q_[q].allocated[r] + job[r] > q_[q].deserved[r]) return false;
    }
    return any;
  }

  /// A fraction num / den of two amounts; den 0 = infinite. Compared exactly through 128-bit
  /// products of the 64-bit terms (one multiply each: the queue order and the victim order compare
  /// shares at every step).
  using Fraction = std::pair<int64_t, int64_t>;
  /// Dominant share (allocated + job) / fair share: the largest fraction over the resources.
  Fraction dominant(int q, const Amounts& j) const {
    Amounts held = q_[q].allocated;
    for (int r = 0; r < kResources; ++r) held[r] += j[r];
    return share(q, held);
  }
  /// Dominant share of `held` in queue `q`: held / fair share, the largest over the resources.
  Fraction share(int q, const Amounts& held) const {
    int64_t bn = 0, bd = 1;
    for (int r = 0; r < kResources; ++r) {
      const int64_t n = held[r], d = q_[q].fairShare[r];
      if (n <= 0) continue;
      if (d <= 0) return {1, 0};
      if (static_cast<i128>(n) * bd > static_cast<i128>(bn) * d) bn = n, bd = d;
    }
    return {bn, bd};
  }
  /// Two dominant shares compared exactly; <0 when a is smaller.
  static int compareFractions(const Fraction& a, const Fraction& b) {
    const auto [an, ad] = a;
    const auto [bn, bd] = b;
    if (ad == 0 || bd == 0) {
      if (ad == 0 && bd == 0) return 0;
      return ad == 0 ? 1 : -1;
    }
    const i128 l = static_cast<i128>(an) * bd, r = static_cast<i128>(bn) * ad;
    return l < r ? -1 : (l > r ? 1 : 0);
  }
  /// What compareQueues() asks of one side (queue `q` with the turn request of `job`, its head; none
  /// when null), kept per queue while its allocation and that job's ready and pending counts stay
  /// as they were: the queue order compares the same queues over and over between allocations.
  /// (One cache line.)
  struct alignas(64) QueueKey {
    uint64_t version = ~uint64_t{0};  ///< QNode::allocatedVersion it was computed at
    const SessionJob* job = nullptr;
    int32_t ready = -1, pending = -1;  ///< the job's counts it was computed at (turnRequest)
    bool over = false, starved = false;
    bool ownKnown = false;  ///< `without` computed (at `version`)
    Fraction withJob{0, 1}, without{0, 1};
  };
  static_assert(sizeof(QueueKey) == 64, "QueueKey: one cache line");
  const QueueKey& queueKey(int q, const SessionJob* job) {
    const QueueKey& k = queueKeys_[static_cast<size_t>(q)];  // (the kept key read inline; worked out again out of line)
    const int32_t ready = job ? job->readyCount : -1, pending = job ? job->pendingCount : -1;
    if (k.version == q_[q].allocatedVersion && k.job == job && k.ready == ready && k.pending == pending) return k;
    return makeQueueKey(q, job);
  }
  [[gnu::noinline]] const QueueKey& makeQueueKey(int q, const SessionJob* job) {
    QueueKey& k = queueKeys_[static_cast<size_t>(q)];
    const Amounts request = job ? turnRequest(*job) : Amounts{0, 0, 0};
    // (Mostly a new head job, the queue's allocation as it was: its own share stands.)
    if (!k.ownKnown || k.version != q_[q].allocatedVersion) k.without = dominant(q, {0, 0, 0}), k.ownKnown = true;
    k.version = q_[q].allocatedVersion;
    k.job = job;
    k.ready = job ? job->readyCount : -1;
    k.pending = job ? job->pendingCount : -1;
    k.over = over(q, request);
    k.starved = starved(q, request);
    k.withJob = dominant(q, request);
    return k;
  }

  /// Above what reclaim must leave it (`kept`: its fair share, or its guaranteed quota).
  bool overFair(int q) const {
    for (int r = 0; r < kResources; ++r)
      if (q_[q].allocated[r] > q_[q].kept[r]) return true;
    return false;
  }
  bool overDeserved(int q) const {
    for (int r = 0; r < kResources; ++r)
      if (q_[q].deserved[r] >= 0 && q_[q].allocated[r] > q_[q].deserved[r]) return true;
    return false;
  }
  /// Whether queue `q`, holding `held`, stays within its quota with `job` added.
  bool withinDeserved(int q, const Amounts& job, const Amounts& held) const {
    for (int r = 0; r < kResources; ++r)
      if (job[r] > 0 && q_[q].deserved[r] >= 0 && held[r] + job[r] > q_[q].deserved[r]) return false;
    return true;
  }
  /// May claimant-side `c` (holding `held`) take from victim-side `v`?
  bool mayTake(int c, int v, const Amounts& job, const Amounts& held) const {
    return overFair(v) || (withinDeserved(c, job, held) && overDeserved(v));
  }
  bool saturationOk(int c, const Amounts& job, const Amounts& held) const {
    for (int r = 0; r < kResources; ++r)
      if (job[r] > 0 && static_cast<i128>(held[r] + job[r]) * 1000 >
                            static_cast<i128>(q_[c].fairShare[r]) * args_.reclaimerSaturationMilli)
        return false;
    return true;
  }
  /// reclaimable()'s sides: false when `victim` is no reclaim victim of `claimant` whatever the
  /// shares (same queue, not preemptible, protected by its min runtime, one queue the other's
  /// ancestor); else `a` and `b`, the claimant's and the victim's queue just below their lowest
  /// common ancestor (reclaim rules compare siblings, as KAI). Asked for every victim job: no
  /// allocation.
  bool reclaimSides(const SessionJob& claimant, const SessionTask& victim, int& a, int& b) {
    ensureDivided();
    const SessionJob& vj = ssn_.jobs()[victim.job];
    if (claimant.queue < 0 || vj.queue < 0 || claimant.queue == vj.queue || !vj.preemptible) return false;
    if (protectedByMinRuntime(vj, &api::Queue::reclaimMinRuntime)) return false;
    return queueSides(claimant.queue, vj.queue, a, b);
  }
  /// reclaimSides()'s queue part: false for one queue, or one the other's ancestor.
  bool queueSides(int cq, int vq, int& a, int& b) const {
    if (cq == vq) return false;
    a = cq, b = vq;
    for (int da = q_[a].depth, db = q_[b].depth; da != db;) {
      if (da > db) a = q_[a].parent, --da;
      else b = q_[b].parent, --db;
    }
    if (a == b) return false;
    while (q_[a].parent != q_[b].parent) a = q_[a].parent, b = q_[b].parent;
    return true;
  }
  /// What a claimant of queue `cq` may take out of `a` (cq or an ancestor of it) as victims: the
  /// preemptible pods of every queue under `a` off cq's own path (its own queue's pods are never its
  /// victims, nor an ancestor's own pods).
  Amounts leavable(int a, int cq) const {
    Amounts out{0, 0, 0};
    for (int below = cq; below != a;) {
      const int up = q_[below].parent;
      for (int ch : q_[up].children)
        if (ch != below)
          for (int r = 0; r < kResources; ++r) out[r] += q_[ch].allocated[r] - q_[ch].allocatedNP[r];
      below = up;
    }
    return out;
  }

  /// Whether the job has run for less than its queue's min runtime (`field`), inherited upward.
  /// Min-runtime protects a job's pods up to its minimum only: the surplus pods of an elastic job
  /// may be taken before it has passed (as KAI).
  bool protectedByMinRuntime(const SessionJob& job, std::optional<api::Duration> api::Queue::*field) const {
    return job.readyCount <= job.minMember() && youngerThan(job, field);
  }

  bool youngerThan(const SessionJob& job, std::optional<api::Duration> api::Queue::*field) const {
    std::optional<api::Duration> min;
    for (int c = job.queue; c >= 0 && !min; c = q_[c].parent)
      if (q_[c].obj && (q_[c].obj->*field)) min = q_[c].obj->*field;
    if (!min || min->millis <= 0) return false;
    std::optional<api::Time> started;
    for (const SessionTask& t : job.tasks)
      if (t.pod().startTime && (!started || *t.pod().startTime < *started)) started = t.pod().startTime;
    return started && ssn_.now() - *started < *min;
  }

  Session& ssn_;
  ProportionArgs args_;
  std::vector<QNode> q_;
  int topLevel_ = 0;  ///< queues without a parent (reclaimBounds: the only one is exempt)
  std::vector<std::optional<Amounts>> boundHeld_;  ///< reclaimBoundQueues(): per claimant side's depth
  bool divided_ = false;
  std::vector<TurnRequest> turnCache_;  ///< per job index (turnRequest)
  std::vector<QueueKey> queueKeys_;     ///< per queue (queueKey)
  std::unordered_set<uint64_t> reserved_;  ///< tasks reserved to come back (toggleOf)
  /// Per job index: which running pods are surplus (surplusPod), as of its ready and releasing
  /// counts (a pod evicted and another placed leave the ready count as it was).
  mutable std::vector<Surplus> surplus_;
  // The victim sequence (compareVictimQueues), built per top-level queue on demand.
  proportion::VictimSequence sequence_;
  bool sequenceIndexed_ = false;
  std::vector<int> taskSlot_;                ///< per job: its first task's slot in the sequence
  std::vector<int> slotJob_;                 ///< per slot: its job (indexSequence)
  std::vector<std::vector<int>> queueJobs_;  ///< per queue: its jobs with pods in the sequence
  struct TopBuild {
    bool built = false;
    uint64_t version = 0, epoch = 0;  ///< allocatedVersion and hold (0: none) it was built at
  };
  std::vector<TopBuild> topBuilt_;      ///< per top-level queue
  uint64_t heldEpoch_ = ~uint64_t{0};   ///< the hold heldVersion_ was taken in
  std::vector<uint64_t> heldVersion_;   ///< per queue: allocatedVersion when that hold began
  uint64_t allVersion_ = 0;             ///< every queue's toggles (the top-level allocatedVersions XORed)
  uint64_t heldAll_ = 0;                ///< allVersion_ when that hold began
  std::vector<Snapshot> sequenceSnap_;  ///< per queue, as of its top's last build
  std::vector<std::vector<const SessionTask*>> ownOrder_;  ///< per queue: ownOrder() as last built
  std::vector<uint32_t> orderSeen_;                        ///< per task slot: ownOrder()'s stamp
  uint32_t orderStamp_ = 0;
  std::vector<const SessionTask*> orderKept_, orderMoved_;  ///< ownOrder()'s buffers
  std::vector<uint64_t> orderVersion_;  ///< per job: its SessionJob::version at its queue's last ownOrder()
  std::unordered_map<std::string, CarriedOrder> carried_;  ///< Kept::orders, as the last session left them
  std::shared_ptr<const cache::Snapshot> carriedOf_;        ///< Kept::ordersOf
  std::vector<int> carriedJob_;                ///< per job of carriedOf_: its index now (-1: gone or changed)
  bool carriedMapped_ = false;                 ///< carriedJob_ is built (carriedJobNow)
  std::vector<const SessionTask*> orderCarried_;  ///< carriedOrder()'s buffer
};

class ProportionPlugin final : public framework::Plugin {
 public:
  explicit ProportionPlugin(ProportionArgs args) : args_(args) {}
  const std::string& name() const override { return name_; }

  void onSessionOpen(Session& ssn) override {
    auto st = std::make_shared<State>(ssn, args_, kept_);
    state_ = st;
    ssn.addJobValidFn(name_, [st](const SessionJob& j) { return st->jobProblem(j); });
    ssn.addQueueOrderFn(name_, [st](const SessionQueue& l, const SessionQueue& r, const SessionJob* lj,
                                    const SessionJob* rj) { return st->compareQueues(l.index, r.index, lj, rj); });
    // compareQueues reads the next jobs only through their turn requests.
    ssn.addQueueHeadSameFn(name_, [st](const SessionQueue&, const SessionJob& a, const SessionJob& b) {
      return st->sameTurnRequest(a, b);
    });
    ssn.addCapacityFn(name_, [st](const SessionJob& j, const api::Resources& req) { return st->capacity(j, req); });
    ssn.addCanReclaimFn(name_, [st](const SessionJob& j) { return st->canReclaim(j); });
    ssn.addReclaimBoundsFn(name_,
                           [st](const SessionJob& j, const api::Resources& req) { return st->reclaimBounds(j, req); });
    ssn.addReclaimableFn(
        name_, [st](const SessionJob& c, const SessionTask& v) { return st->reclaimable(c, v); },
        [st](const SessionJob& c, std::string& key) { st->reclaimKey(c, key); },
        [st](const SessionJob& c, const SessionTask& v) { return st->reclaimableBound(c, v); });
    ssn.addReclaimBoundSplitFn(
        name_, [st](const SessionJob& c, std::vector<uint8_t>& perQueue) { st->reclaimBoundQueues(c, perQueue); },
        [st](const SessionJob& vj) { return st->reclaimBoundJob(vj); },
        [st](const SessionJob& c, std::span<const int> queues, std::vector<uint8_t>& perQueue) {
          st->reclaimQueuesNow(c, queues, perQueue);
        });
    ssn.addPreemptableFn(name_, [st](const SessionJob& c, const SessionTask& v) { return st->preemptable(c, v); });
    ssn.addPreemptableSplitFn(
        name_, [st](const SessionJob& vj) { return st->preemptableJob(vj); },
        [](const SessionJob& c, const SessionJob& vj) { return State::preemptablePair(c, vj); });
    // Two pods of one queue compare by their jobs (priority, surplus pod or whole job, age) and,
    // inside a job, by their states and task priorities: nothing else (compareVictims).
    ssn.addVictimOrderFn(
        name_, [st](const SessionTask& l, const SessionTask& r) { return st->compareVictims(l, r); },
        [st](bool live) { return st->victimOrderVersion(live); }, /*byJobsInQueue=*/true);
    ssn.addVictimOrderKeepFn(name_, [st](const SessionTask& t) { st->keepHeld(t); });
    ssn.addReclaimTreeFn(name_, [st](const SessionJob& c, int top) { return st->reclaimableUnder(c, top); });
    ssn.addVictimWalkFn(
        name_,
        [st](const framework::VictimVisitFn& visit, const framework::VictimTreeFn& tree) { st->walkVictims(visit, tree); },
        [st](int q, const framework::VictimVisitFn& visit) { return st->walkQueue(q, visit); });
    ssn.addAllocateHandler(
        name_, [st](const SessionTask& t) { st->onAllocate(t, +1); }, [st](const SessionTask& t) { st->onAllocate(t, -1); });
  }

  void onSessionClose(Session& ssn) override {
    if (state_) {
      ssn.setQueueReports(state_->reports());
      state_->giveBack(kept_);
    }
    state_.reset();
  }

 private:
  std::string name_ = "proportion";
  ProportionArgs args_;
  std::shared_ptr<State> state_;
  State::Kept kept_;
};

}  // namespace

PluginResult makeProportion(framework::Args& args) {
  ProportionArgs a;
  a.reclaimerSaturationMilli = args.getMilli("reclaimerSaturationMultiplier", 1000, 0, 1'000'000'000);
  return std::shared_ptr<framework::Plugin>(std::make_shared<ProportionPlugin>(a));
}

}  // namespace tessera::plugins
