#pragma once
// Victim search shared by reclaim, preempt and consolidate (internal to src/actions).
//
// Node by node: for each pending pod of the claimant that does not fit as things are, pick the node
// whose minimal set of useful victims ends earliest in victim order (ties: fewest victims, node
// score, then name), evict them there (a gang at its minimum goes whole, an elastic job gives up
// surplus pods one at a time), and pipeline the pod onto the released resources. Everything happens
// inside one Statement: committed only when the claimant's gang is satisfied, discarded otherwise.
// Searching node by node keeps the victim set small: a global victim order would evict pods on
// many nodes before any single node had room. Consolidation first searches by the victim sequence,
// as KAI does (victim_sequence_solver.cpp): its moved pods must find room again, and node by node
// misses sets where a pod moves for a moved pod.
#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "job_placement.h"
#include "tessera/framework/node_ranking.h"
#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"

namespace tessera::actions {

namespace victims_detail {
/// A pod that holds its node's resources and is not leaving.
inline bool running(const framework::SessionTask& t) {
  return t.state == framework::TaskState::Running || t.state == framework::TaskState::Bound;
}
/// Amounts as the victim search's resource bounds count them: milli-GPU, milli-CPU, memory.
using Room = std::array<int64_t, 3>;
/// A node's room once what leaves it has left and the pods promised it came: future idle, and the
/// free units of its GPU groups as thousandths of a GPU. (The three amounts are summed here:
/// SessionNode::futureIdle() would copy the extended resources too, on a hot path.)
inline Room futureRoom(const framework::SessionNode& n) {
  Room r{n.idle.milliGpu + n.releasing.milliGpu - n.pipelined.milliGpu,
         n.idle.milliCpu + n.releasing.milliCpu - n.pipelined.milliCpu,
         n.idle.memory + n.releasing.memory - n.pipelined.memory};
  for (const framework::SessionGpuGroup& g : n.gpuGroups)
    if (g.capacity > 0 && g.futureFree() > 0) r[0] += g.futureFree() * 1000 / g.capacity;
  return r;
}
/// What a pod takes on its node as the bounds count it: its share of a GPU counted as GPU.
inline Room podRoom(const framework::SessionTask& t) {
  const api::Resources& r = t.nodeRequest();
  return {r.milliGpu + (t.sharesGpu() ? t.request().milliGpu : 0), r.milliCpu, r.memory};
}
/// Pods of the job that still run (not releasing).
inline int runningCount(const framework::SessionJob& j) {
  int n = 0;
  for (const framework::SessionTask& t : j.tasks) n += running(t) ? 1 : 0;
  return n;
}
}  // namespace victims_detail

/// A running task as a victim: indices into Session::jobs() and the job's tasks.
using VictimSearchVictim = framework::TaskRef;

/// What one chunk of victims gives back on a node, and what a claimant lacks there (victim_nodes.cpp).
struct VictimFreed;
struct VictimLack;

enum class VictimMode {
  Reclaim,      ///< victims in other queues (Session::reclaimable)
  Preempt,      ///< victims in the claimant's queue (Session::preemptable)
  Consolidate,  ///< preemptible single pods that can be placed again elsewhere
};

class VictimSearch {
 public:
  VictimSearch(framework::Session& ssn, VictimMode mode, int maxVictims = 1 << 30);
  ~VictimSearch();

  /// Tries to make room for `job`'s turn: its gang minimum while below it, else one more pod (KAI:
  /// a ready job asks for its next pod through reclaim and preempt too, one pod per turn). On
  /// success the evictions and placements are committed and true is returned; otherwise nothing
  /// changes and `reason` says why.
  bool run(framework::SessionJob& job, std::string& reason);
  /// Consolidation: whether no claimant's turn can fit in the cluster's free resources (releasing
  /// ones counted, shared GPUs' room too) by GPUs alone, whatever pods move: every pending pod needs
  /// more GPU than is free in all (Session::pendingGpuMilliFloor). Nothing is searched then.
  bool clusterTooFullToMove();
  /// forEachJobTurn's QueueSpentFn for preempt: after a turn that found no eligible victim in the
  /// claimant's queue, whether every later job of the queue (`rest`, in job order) would end its
  /// turn the same way, so that the queue takes no more turns in this action (they would change
  /// nothing: decisions are those of taking them).
  bool queueSpent(std::span<const int> rest);

 private:
  using Victim = VictimSearchVictim;
  /// The ready count the current claimant's turn ends at: one pod above what it had when ready at
  /// the start of run(); 0 while below its gang minimum (the turn ends when the gang is ready).
  int32_t turnTarget_ = 0;
  /// Whether the claimant's turn is done (its gang minimum, or its one more pod).
  bool turnDone(const framework::SessionJob& job) const;
  /// Pods the claimant still needs in this turn.
  int turnMissing(const framework::SessionJob& job) const;
  /// run() inside `domain` (null: anywhere). `trial`: on success the victims are left in
  /// evictedNow_ and the statement is discarded.
  /// `victimsFirst` (consolidation, second try): each pod makes room with victims before taking
  /// free room.
  bool runIn(framework::SessionJob& job, const framework::NodeDomain* domain, std::string& reason, bool trial,
             bool victimsFirst = false);
  // ---- bounds by resources alone (victim_bounds.cpp) ----
  /// Whether `domain` could hold the gang's missing pods with every victim gone that may become
  /// eligible in the turn (eligible(bound=true)).
  /// `domainIndex`: domainId(domain); `want`: turnNeeds(job); `rooms`: roomsFor(job).
  struct ClassRooms;
  bool mayHold(const framework::SessionJob& job, const framework::NodeDomain& domain, int domainIndex,
               const api::Resources& want, ClassRooms& rooms);
  /// mayHold()'s room (gpu, cpu, memory) in two parts, each per node and per domain asked (the
  /// sum over its nodes), current as of a node change log position: what is free or releasing
  /// (the same for every claimant: base*_), and what the eligible victims of one claimant class
  /// hold (ClassRooms). A node changed since is evaluated again and the sums of the domains holding
  /// it move by the difference: a domain of thousands of nodes is not summed again per claimant.
  struct ClassRooms {
    std::vector<uint8_t> known;  ///< per node: `room` and `version` evaluated (else unset)
    /// Per node, allocated without being set (most nodes of a preempt class are never asked: its
    /// victims run on its queue's nodes only): what its eligible victims hold, and the node's
    /// version when that was evaluated.
    std::unique_ptr<victims_detail::Room[]> room;
    std::unique_ptr<uint32_t[]> version;
    std::vector<std::optional<victims_detail::Room>> sums;  ///< per domain id (domainId())
    size_t syncedAt = 0;
    /// The commits (commits_) when its rooms were first evaluated (reclaim), and how much of
    /// jobNodes_ they have seen (roomsFor()).
    size_t madeAt = 0, jobNodesAt = 0;
    /// Reclaim with the bound split by queue (Session::reclaimBoundQueues): the class is that
    /// verdict per queue, and a node's room the sum of what its queues' pods hold (partHeldOn).
    bool byQueue = false;
    /// Preempt with every filter split (Session::preemptableSplit): a node's room is the sum of
    /// what its pods hold per queue and priority, where the claimant's pair part lets them go.
    bool byLevel = false;
    std::vector<uint8_t> queues;
  };
  std::vector<victims_detail::Room> baseRoom_;                 ///< per node: futureRoom()
  std::vector<std::optional<victims_detail::Room>> baseSums_;  ///< per domain id
  size_t baseAt_ = 0;
  /// The victim room kept for claimants like `job` (appendClaimantKey).
  ClassRooms& roomsFor(const framework::SessionJob& job);
  /// What the pods on `node` that `job` may take in its turn hold (ClassRooms::room; mayBecomeEligible).
  victims_detail::Room victimRoomOn(const framework::SessionJob& job, int node);
  /// The same for a class of `rooms` (by queue or by level when it is: ClassRooms::byQueue, byLevel).
  victims_detail::Room classRoomOn(const framework::SessionJob& job, const ClassRooms& rooms, int node);
  /// What the running pods of `node` whose jobs the victim-job part of a split lets go (reclaim:
  /// Session::reclaimBoundJob; preempt: preemptableJob) hold, per queue (reclaim) or per queue and
  /// priority (preempt), with a job of each (`job`); read once per change of the node (and of
  /// their jobs: commitTurn).
  struct PartHeld {
    int queue;
    int32_t priority;  ///< (reclaim: 0)
    int job;
    victims_detail::Room room;
  };
  std::span<const PartHeld> partHeldOn(int node);
  std::vector<PartHeld> partHeld_;         ///< laid out as held_
  std::vector<uint32_t> partHeldCount_;    ///< per node
  std::vector<uint32_t> partHeldVersion_;  ///< per node: its version when read, plus one (0: never, or stale)
  std::vector<int8_t> partJob_;            ///< per job: the split's victim-job part (-1: not asked)
  std::vector<uint64_t> partJobVersion_;   ///< per job: its SessionJob::version then
  std::vector<uint8_t> queueBits_;         ///< roomsFor()'s buffer
  /// Brings the per-node rooms and the domain sums of `rooms` and of the base up to the log.
  void syncRooms(const framework::SessionJob& job, ClassRooms& rooms);
  /// With selfChecks() (factories.h): asserts that the kept sums of domain `id` are those of its
  /// nodes' current rooms, every one evaluated at the node's current version and what `job`'s
  /// victims there hold now.
  void checkRooms(const framework::SessionJob& job, const framework::NodeDomain& domain, size_t id,
                  const ClassRooms& rooms);
  /// A number for the domain's node set, the same for every domain over it in this action (the
  /// sets are the session's: NodeDomain::nodes); forEachDomainOf() lists the sets holding a node.
  int domainId(const framework::NodeDomain& domain);
  std::vector<int> domainIdsOf_;  ///< runInDomains: its domains' ids
  struct DomainKey {
    const int* nodes;
    size_t size;
    bool operator==(const DomainKey&) const = default;
  };
  struct DomainKeyHash {
    size_t operator()(const DomainKey& k) const {
      return std::hash<const int*>()(k.nodes) ^ (k.size * 0x9e3779b97f4a7c15ULL);
    }
  };
  std::unordered_map<DomainKey, int, DomainKeyHash> domainIds_;
  /// Calls `f(id)` for each domain id known that holds `node`.
  template <class F>
  void forEachDomainOf(int node, F&& f) const {
    if (static_cast<size_t>(node) >= domainHead_.size()) return;
    for (int e = domainHead_[static_cast<size_t>(node)]; e >= 0; e = domainLinks_[static_cast<size_t>(e)].next)
      f(domainLinks_[static_cast<size_t>(e)].domain);
  }
  /// Per node, the first of its (domain, next) links (-1: none): one list for every node, not a
  /// vector per node.
  std::vector<int> domainHead_;
  struct DomainLink {
    int domain, next;
  };
  std::vector<DomainLink> domainLinks_;
  // ---- the search in topology domains (victims.cpp) ----
  /// Whether the queue rules (limits, quota; reclaiming, the ancestors' fair shares) let every
  /// pending pod of `job` in as things stand: then no victim is taken for queue room.
  bool queueRulesHold(const framework::SessionJob& job) const;
  /// The first pod in victim order `job` may take on the domain's nodes; none when there is none.
  /// `bound`: the first that may become a victim in the turn (mayBecomeEligible). The verdicts it
  /// asked stand until the caller's resetVerdicts() (several domains share them).
  std::optional<Victim> earliestVictimIn(const framework::SessionJob& job, const framework::NodeDomain& domain,
                                         bool bound = false);
  std::vector<Victim> queueFirsts_;   ///< earliestVictimIn()'s first candidate of each queue met
  std::vector<int> queueFirstSlot_;   ///< per queue + 1: its place in queueFirsts_, or -1
  /// Whether what is free or releasing in the domain (numbered `domainIndex`, summed by mayHold)
  /// covers `want` by resources: only then may its turn need no victim on its nodes.
  bool freeRoomCovers(int domainIndex, const api::Resources& want) const;
  /// Whether the turn's pods fit in `domain` as things stand, no victim taken (the queue rules
  /// letting each in): what runIn() would place before making any room, tried and undone.
  bool fitsAsIs(framework::SessionJob& job, const framework::NodeDomain& domain);
  /// The latest (earliest) of a non-empty set in victim order.
  Victim latestOf(const std::vector<Victim>& set) const;
  Victim earliestOf(const std::vector<Victim>& set) const;
  std::map<std::string, ClassRooms> nodeRoom_;
  size_t commits_ = 0;
  /// The nodes running pods of the jobs each commit changed (the claimant, its victims' jobs),
  /// whose pods elsewhere may have become victims or stopped being ones (min runtime).
  std::vector<int> jobNodes_;
  /// commitTurn()'s scratch: the jobs and nodes a commit changed, and the claimant's message.
  std::vector<int> commitJobs_, commitNodes_;
  std::string commitMessage_;
  /// Domains of one level searched (and compared) at most per claimant: the cost of a search grows
  /// with the domains, and past a few the gain in victim order is small.
  static constexpr int kDomainTrials = 8;
  /// runIn(), for consolidation first by the victim sequence (solveBySequence), then node by node.
  bool searchIn(framework::SessionJob& job, const framework::NodeDomain* domain, std::string& reason, bool trial);
  /// A trial's solution as runIn() found it before its statement was undone (a prune's trial, or a
  /// search that left no pod out; not consolidation): the domain that wins among the trials, and
  /// the set a prune ends with, are taken by applying these operations again (replayIn) instead of
  /// searching once more.
  struct TrialSolution {
    std::vector<framework::Operation> ops;
    std::vector<Victim> evicted;  ///< evictedNow_
    int evictedCount = 0;
    bool queueFreed = false;
    bool orderChanged = false;
    bool pruned = false;  ///< the set a prune ended with: its replay is not pruned again
  };
  std::optional<TrialSolution> lastTrial_;  ///< set by a successful trial runIn() of those kinds
  /// What runIn(job, domain, trial=false) does where its trial found `s` (the session as then):
  /// the same operations, then the same end of the turn (finishTurn).
  bool replayIn(framework::SessionJob& job, const framework::NodeDomain* domain, const TrialSolution& s,
                std::string& reason);
  /// Applies `ops` (a statement's operations, as recorded) in `stmt`.
  void applyOps(framework::Statement& stmt, const std::vector<framework::Operation>& ops);
  /// Whether `a` frees what `b` frees: another pod of its job and subgroup on the same node, asking
  /// the same, neither on a shared GPU.
  bool alike(const framework::SessionTask& a, const framework::SessionTask& b) const;
  /// Whether a victim evicted in `ops` has a running pod alike (finishTurn's trade; cheap).
  bool mayTradeAlike(const std::vector<framework::Operation>& ops) const;
  /// With the turn undone: trades each victim evicted in `ops` for the earliest running pod alike
  /// that comes before it in victim order and `job` may take. Whether any was traded.
  bool tradeAlike(const framework::SessionJob& job, std::vector<framework::Operation>& ops);
  /// runIn()'s end once the turn's pods are placed in `stmt`: none evicted (allocate's business), a
  /// trial (undone), a prune, or the commit.
  bool finishTurn(framework::Statement& stmt, framework::SessionJob& job, const framework::NodeDomain* domain,
                  size_t needed, int evicted, bool queueFreed, bool trial, std::string& reason, bool pruned = false);

  // ---- consolidation by the victim sequence (victim_sequence_solver.cpp) ----
  /// KAI's solver for consolidation: eligible chunks are taken cluster-wide in victim order until
  /// the claimant's turn and every moved pod fit (a trial placement: the claimant's pods first,
  /// then the moved pods, largest first); then, walking back from the chunk before the last, every
  /// chunk the set can do without is dropped. The set found is the first minimal one in victim
  /// order among the first chunks (kSequencePods pods), which node by node can miss: a pod moved
  /// to make room for a moved pod, a gang moved whole to a node its claimant leaves free.
  enum class SequenceResult {
    Solved,
    NoVictimsNeeded,
    Blocked,  ///< a queue rule refuses the turn wherever it runs (`reason` says which)
    Failed,   ///< no set among the first chunks: node by node may still find one
  };
  SequenceResult solveBySequence(framework::SessionJob& job, const framework::NodeDomain* domain, bool trial,
                                 std::string& reason);
  /// Whether the claimant's turn and the pods of `set` (moved elsewhere) fit once `set` is evicted.
  /// `commit`: the placements are committed; otherwise undone, the set left in evictedNow_.
  bool placesWith(framework::SessionJob& job, const framework::NodeDomain* domain, const std::vector<Victim>& set,
                  bool commit);
  /// Whether some pod of the claimant's turn could fit on a node `set` touches (inside `domain`)
  /// with everything there gone: a necessary condition, cheap next to placesWith().
  bool mayPlaceWith(const framework::NodeDomain* domain, const std::vector<Victim>& set);
  /// The first running pods in victim order, cluster-wide (a merge of onNode()).
  const std::vector<Victim>& sequenceHead();
  std::vector<Victim> sequenceHead_;
  bool sequenceBuilt_ = false;
  size_t sequenceAt_ = 0;  ///< commits_ when sequenceHead_ was built
  static constexpr int kSequencePods = 48;
  /// Placements placesWith() tries at most in one call, and solveBySequence() in all its calls
  /// for one claimant (each may scan every node): past them the search falls back to node by node.
  static constexpr int kPackSteps = 512, kSolveSteps = 2048;
  /// Up to this many nodes, placesWith() tries every node for every pod, not only the ones the
  /// set touches and the best-ranked one.
  static constexpr int kPackEveryNode = 64;
  int solveSteps_ = 0;
  /// The claimant's pods of this turn, in the order they are placed (set by solveBySequence for
  /// its trials: a trial is undone before the next, so they stay pending throughout).
  std::vector<framework::SessionTask*> turn_;
  /// run() for a claimant constrained to topology domains (see NodeDomain::rank).
  bool runInDomains(framework::SessionJob& job, const std::vector<framework::NodeDomain>& domains, std::string& reason);
  /// Whether victim set `a` comes before `b`: its latest victim is earlier in victim order, and
  /// so on down; then fewer victims.
  bool earlier(std::vector<Victim> a, std::vector<Victim> b) const;
  /// Drops victims a claimant with several pods did without (pruneWalk), then commits the set it
  /// ended with.
  bool prune(framework::SessionJob& job, const framework::NodeDomain* domain, std::vector<Victim> best,
             std::string& reason);
  /// The walk of a prune: from the latest victim of `best` in victim order to the first, the
  /// search runs again without it (a pod of an elastic job on its own where the job keeps its
  /// minimum, else its whole job), among `best`'s victims only, and keeps the result when it is a
  /// subset. `best` ends as the set kept; returns the last kept trial's solution (none when no
  /// trial was kept). Leaves the prune's state (pruning_, the exclusions) for endPrune(): a final
  /// search runs under it.
  std::optional<TrialSolution> pruneWalk(framework::SessionJob& job, const framework::NodeDomain* domain,
                                         std::vector<Victim>& best);
  void endPrune();
  /// How the prune's walk leaves `v` of `set` out: the pod on its own where its job keeps its
  /// minimum without it (several of its pods in the set), else (false) the job's pods in the set.
  bool leftOutAlone(const std::vector<Victim>& set, const Victim& v) const;
  /// The victims of `best` no prune trial can leave alone: each part the walk would leave alone
  /// (a pod, or a job's pods) without which the turn cannot fit by resources (mayFitWith). Every
  /// subset a search can succeed with holds them all. Empty where mayFitWith gives no bound.
  std::vector<Victim> neededOf(const framework::SessionJob& job, const framework::NodeDomain* domain,
                               const std::vector<Victim>& best);
  /// runIn()'s pending pods, per depth of nested runIn() calls (a deque: a buffer stays put while
  /// a deeper call adds one).
  struct RunBuffers {
    std::vector<int> pending, tryNodes;
  };
  std::deque<RunBuffers> runAt_;  ///< by runIn depth: its buffers (PendingScope)
  size_t runInDepth_ = 0;
  /// The claimant's pending pods in the order they are tried (Session::pendingTaskOrder), in the
  /// buffer of the caller's depth, which is entered while the scope lives (runIn, fitsAsIs).
  struct PendingScope {
    PendingScope(VictimSearch& search, const framework::SessionJob& job);
    ~PendingScope() { --depth; }
    PendingScope(const PendingScope&) = delete;
    PendingScope& operator=(const PendingScope&) = delete;
    size_t& depth;
    std::vector<int>& pending;
    std::vector<int>& tryNodes;  ///< the nodes candidates() names for the pod being placed
  };
  std::vector<Victim> neededWithout_;  ///< neededOf()'s scratch
  std::vector<int> neededJobs_;
  /// Whether a prune could find a smaller set than `set`, the turn's victims (finishTurn's rule):
  /// several pods were placed one after another (or queue room and node room were made), and the
  /// set holds several victim jobs, or several pods of one job of which one could stay.
  /// `applied`: the set's evictions are in the session (its jobs' running counts are after them).
  bool prunable(size_t needed, bool queueFreed, const std::vector<Victim>& set, bool applied) const;
  bool pruning_ = false;
  /// Whether the turn's pods could fit with only the pods of `set` evicted, by resources alone:
  /// every node of the domain (all nodes when null) counts the claimant pods its future idle room
  /// (free units of its GPU groups included) plus what `set` holds there would take, ignoring
  /// every other rule. Never false where a search could succeed with a subset of `set`; true
  /// (no bound) for consolidation, GPU shares, and turns whose pods do not all ask alike
  /// (victim_bounds.cpp).
  bool mayFitWith(const framework::SessionJob& job, const framework::NodeDomain* domain,
                  const std::vector<Victim>& set);
  std::vector<std::pair<int, victims_detail::Room>> fitFreed_;  ///< mayFitWith(): what the set frees per node
  /// Reclaim: whether the turn's first pods could pass their queue path's fair-share bound
  /// (Session::reclaimBounds) with every pod of `set` evicted. A search among a subset of `set`
  /// checks each of them, the ones before placed, after evicting some of `set` at most; evictions
  /// only lower what queues hold against fair shares fixed for the session: where this is false,
  /// every such search fails (victim_bounds.cpp).
  /// `leading`: leadingAlikeRequest(job), the same for every trial of one prune.
  bool reclaimBoundsMayHold(const framework::SessionJob& job, const api::Resources& leading,
                            const std::vector<Victim>& set);
  /// The sum of the requests of the turn's leading pending pods that ask alike (see above).
  api::Resources leadingAlikeRequest(const framework::SessionJob& job) const;
  /// mayFitWith()'s count over all nodes of the claimant pods their room holds, per pod request
  /// (gpu, cpu, memory), kept current through the node change log.
  struct FreeFit {
    std::vector<int64_t> perNode;
    int64_t total = 0;
    size_t at = 0;  ///< node change log position of the counts
  };
  std::map<std::array<int64_t, 3>, FreeFit> freeFit_;
  std::vector<int> excluded_;  ///< victim jobs left alone while pruning
  /// Single victim pods left alone while pruning, or (one pod) by runIn's retry without a first victim.
  std::vector<VictimSearchVictim> excludedPods_;
  bool podExcluded(const VictimSearchVictim& v) const {
    return std::any_of(excludedPods_.begin(), excludedPods_.end(),
                       [&](const VictimSearchVictim& x) { return x.job == v.job && x.task == v.task; });
  }
  /// While pruning: the jobs of the set being pruned and the nodes their pods run on (both
  /// ascending). Only they may give victims, so that every trial looks for a subset of that set
  /// (a trial free to take other victims finds a set that is not one, and the prune keeps none).
  std::vector<int> pruneJobs_, pruneNodes_;
  uint32_t pruneSeq_ = 0;  ///< counts prunes and retries: rankings and failures found inside one are its own
  /// The suffix of ranking and failure keys that tells a prune's trials, or a retry without a
  /// victim, apart from the plain search (empty for it).
  std::string pruneKey() const;
  /// Per job: 1 when every pod it runs is on a node of the session, 0 when one is not (a node
  /// gone or invalid: that pod cannot be evicted with its node's accounting, so the job is no
  /// victim), -1 not known yet.
  mutable std::vector<int8_t> onSessionNodes_;
  bool onSessionNodes(const framework::SessionJob& job) const;
  /// Whether victim `a` goes before `b` in victim order (Session::victimLess).
  bool victimBefore(const Victim& a, const Victim& b) const {
    return ssn_.victimLess(ssn_.task(a.job, a.task), ssn_.task(b.job, b.task));
  }
  /// Sorts `v` in victim order (`latestFirst`: reversed). Victim order is one strict total order
  /// (the victim sequence, docs/fairness.md), so any sort gives the same result; a stable one stays
  /// safe should a plugin's order ever not be (std::sort may then read outside the range).
  void sortInVictimOrder(std::span<Victim> v, bool latestFirst = false) const {
    if (latestFirst) std::stable_sort(v.begin(), v.end(), [&](const Victim& a, const Victim& b) { return victimBefore(b, a); });
    else std::stable_sort(v.begin(), v.end(), [&](const Victim& a, const Victim& b) { return victimBefore(a, b); });
  }
  /// Commits a claimant's turn made room for with `evicted` victims, and says what its pipelined
  /// pods wait for.
  void commitTurn(framework::Statement& stmt, framework::SessionJob& job, int evicted);
  /// Why a victim is evicted (shared by all the evictions that give it: Operation::reason).
  using Reason = std::shared_ptr<const std::string>;
  /// "preempted by <claimant> (priority p)" and the like (`queueLimit`: victims taken for queue room).
  std::string whyText(const framework::SessionJob& job, bool queueLimit) const;
  /// whyText(job, false), built once per claimant.
  const Reason& claimantWhy(const framework::SessionJob& job);
  Reason why_;
  int whyJob_ = -1;
  /// Evicts `task` in `stmt`, recording it in evictedNow_.
  void evict(framework::Statement& stmt, framework::SessionTask& task, const Reason& why);
  std::vector<Victim> evictedNow_;  ///< the victims of the current runIn()
  /// `bound`: whether `victim` may become eligible in the claimant's turn, as its other victims go
  /// (Session::reclaimableBound; preempt's and consolidation's verdicts read nothing a victim
  /// changes on the claimant's side).
  bool eligible(const framework::SessionJob& claimant, const framework::SessionTask& victim, bool bound = false) const;
  /// eligible()'s part that no filter decides: the victim job is not the claimant's, preemptible,
  /// on the session's nodes, and not left out by a prune.
  bool jobMayGive(const framework::SessionJob& claimant, const framework::SessionJob& vj) const;
  /// False when no pod on `node` can be a victim of `job` in this mode (cheap: no pod is asked).
  bool mayHaveVictims(const framework::SessionJob& job, int node) const;
  /// The tasks evicted together with `v`: its whole gang when the gang is at its minimum; none
  /// when `v` must wait for surplus pods of its job's other subgroups.
  std::vector<Victim> chunkOf(const Victim& v) const;
  /// How `v` may be taken once `taken` are gone: alone (a surplus pod of its job and of its
  /// subgroup), later (another subgroup still has a surplus pod), or with its whole job.
  enum class Take { Surplus, Wait, Whole };
  Take takeOf(const Victim& v, const std::vector<Victim>& taken) const;
  /// Whether an earlier action of this cycle placed pods of the job (bound or pipelined): such a
  /// job gives surplus pods only, never its whole gang (the new pods would start without it).
  static bool placedThisCycle(const framework::SessionJob& j) { return j.pendingCount < j.infoPendingCount; }
  /// The node `t` runs or is placed on (a running pod of the snapshot by its node's name); -1: none.
  int nodeOf(const framework::SessionTask& t) const { return t.node >= 0 ? t.node : ssn_.findNode(t.info->nodeName); }
  void indexNodes();
  /// Evicts the victims choose() picks on `node`, then places `task` there. False (and the
  /// statement rolled back to where it was) when the node cannot be made to fit.
  bool makeRoomOn(framework::Statement& stmt, framework::SessionJob& job, framework::SessionTask& task, int node,
                  int& evicted);
  /// One try of makeRoomOn: kPlaced, kFailed, or the victim job the set could not take after all
  /// (consolidation: its pods could not be placed again; reclaim: no longer eligible).
  static constexpr int kPlaced = -1, kFailed = -2;
  int makeRoomOnce(framework::Statement& stmt, framework::SessionJob& job, framework::SessionTask& task, int node,
                   int& evicted);
  std::vector<int> unmovable_;  ///< victim jobs choose() leaves alone on this node (makeRoomOn)
  /// When a limit of the claimant's queue or an ancestor blocks `task`, evicts eligible victims
  /// counted under that limit, in victim order, until it no longer does. False (nothing evicted)
  /// when they cannot.
  bool freeQueueRoom(framework::Statement& stmt, framework::SessionJob& job, framework::SessionTask& task,
                     int& evicted);
  /// Builds queueTop_ and topRunning_ once (queues do not change within a session, and no pod
  /// starts running in one).
  void indexQueues();
  std::vector<int> queueTop_;  ///< per queue: its top-level ancestor (itself at the top; parent cycles cut)
  std::vector<std::vector<Victim>> topRunning_;  ///< per top-level queue: pods running under it when indexed, in job order
  /// Per top-level queue: its jobs with running pods, each with its pods' range in topRunning_.
  struct TopJob {
    int job = -1;
    uint32_t from = 0, to = 0;
  };
  std::vector<std::vector<TopJob>> topJobs_;
  std::vector<std::vector<TopJob>> queueJobs_;  ///< per queue: its own entries of topJobs_
  std::vector<std::vector<int>> topQueues_;     ///< per top-level queue: the queues under it with such jobs
  std::vector<uint8_t> queueNow_;               ///< freeQueueRoom(): Session::reclaimQueuesNow's verdicts
  /// Which of GPUs, cpu and memory (bits 0-2) `r` asks for, with kAskedKnown set.
  static uint8_t askedMask(const api::Resources& r);
  static constexpr uint8_t kAskedKnown = 0x80;
  /// Per top-level queue, per pod of topRunning_: its askedMask(), or 0 until freeQueueRoom() reads it.
  std::vector<std::vector<uint8_t>> topAsked_;
  /// Self-check of freeQueueRoom()'s verdicts by queue (queueNow_) against eligible().
  void checkQueueVerdicts(const framework::SessionJob& job, size_t top) const;
  /// Whether the queue rules let `task` be placed as things stand: its queue path's limits (and
  /// non-preemptible quota); reclaiming, its ancestors' fair shares too (Session::reclaimBounds).
  api::Status queueRoom(const framework::SessionJob& job, const framework::SessionTask& task) const;
  /// Whether victims could relieve the capacity failure `why` (an OverLimit this mode can free,
  /// or reclaiming an ancestor's OverFairShare), decided from its reason and queue name.
  bool relievable(const framework::SessionJob& job, const api::Error& why) const;
  /// The claimant key of freeQueueRoom()'s failures, written into queueRoomKey_ (a kept buffer).
  const std::string& queueRoomKey(const framework::SessionJob& job, const framework::SessionTask& task);
  /// What the eligible victims of `job` depend on (framework::VictimFn): its queue, priority and
  /// preemptibility, and reclaiming, the plugins' ClaimantKeyFn parts. Rooms, rankings and failed
  /// queue-room scans are kept per this key.
  void appendClaimantKey(const framework::SessionJob& job, std::string& key) const;
  std::string roomsKey_;  ///< roomsFor()'s buffer
  std::string queueRoomKey_;
  bool queueRoomKnownFailed(const framework::SessionJob& job, const framework::SessionTask& task);
  /// freeQueueRoom() failures by claimant key, with the node change count at that moment.
  std::map<std::string, size_t> queueRoomFailedAt_;
  /// freeQueueRoom()'s candidates, one group per queue: queueGroupPods_[g] holds group g's, the
  /// ones from its `next` on not taken yet.
  struct QueueCands {
    int queue = -1;
    size_t next = 0;
  };
  std::vector<QueueCands> queueGroups_;
  std::vector<int> queueGroupOf_;  ///< per queue: its group while freeQueueRoom() builds them, else -1
  std::vector<std::vector<Victim>> queueGroupPods_;  ///< freeQueueRoom()'s buffers, one per group
  /// Places the evicted pods of a consolidation again, anywhere (after the claimant took its
  /// room), moving other pods for one that finds no room (moveFor) up to kMaxChain deep. Returns
  /// -1, or the job of the first pod that finds no place.
  int replace(framework::Statement& stmt, const std::vector<Victim>& victims, int& evicted, int depth);
  /// Moves pods to make room for the moved pod `v` on one node and reserves it there.
  bool moveFor(framework::Statement& stmt, const Victim& v, int& evicted, int depth);
  static constexpr int kMaxChain = 2;
  int chainLimit_ = 0;  ///< how deep replace() may move pods for moved pods (tryOn())
  /// makeRoomOn() on `nodes` in turn until one succeeds (consolidation: chains last).
  bool tryOn(framework::Statement& stmt, framework::SessionJob& job, framework::SessionTask& task,
             const std::vector<int>& nodes, int& evicted);
  Reason movedWhy_;  ///< the eviction reason of the consolidation in progress

  /// The victims to evict on one node so that a task fits there.
  struct Chosen {
    std::vector<std::vector<Victim>> chunks;  ///< in victim order; a gang's pods in one chunk
    int count = 0;                            ///< pods in all chunks
    int64_t slots = 0;                        ///< of them, pods on the node (pod slots freed)
    Victim last;                              ///< the latest in victim order
  };
  /// Walks the node's victims in victim order, taking a chunk (a surplus pod, or a gang at its
  /// minimum whole) only when it gives back something the task still lacks there (cpu, memory,
  /// pod slots, extended resources, whole GPUs, or units of the GPU group a fractional task
  /// would join), until the task fits; then, walking back from the last chunk taken, drops every
  /// chunk the task can do without (the set is minimal). None when no eligible set makes room.
  /// `keepChunks` false: only the count, slots and last victim are filled (ranking nodes).
  std::optional<Chosen> choose(const framework::SessionJob& job, const framework::SessionTask& task, int node,
                               bool keepChunks);
  // choose()'s buffers, kept to spare allocations on the hot path.
  std::unique_ptr<VictimLack> lack_;
  std::vector<Victim> scratch_, taken_;
  std::vector<VictimFreed> freed_;
  std::vector<std::pair<int, int>> takenPods_;
  std::vector<int> whole_;
  // The verdicts below are asked hundreds of thousands of times a cycle, mostly of a job already
  // judged in the scan: that answer is read here, inline; the first one is worked out (and, in
  // reclaim's self-checks, checked) out of line.
  /// eligible(), asked once per victim job until resetVerdicts(). A releasing pod says nothing
  /// about its job: asked of running pods only, so that the verdict holds for the job.
  bool eligibleCached(const framework::SessionJob& job, const Victim& v) {
    return victims_detail::running(ssn_.task(v.job, v.task)) && eligibleRunning(job, v);
  }
  /// eligibleCached() of a pod known to run (heldOn()): its task is not read again.
  bool eligibleRunning(const framework::SessionJob& job, const Victim& v) {
    if (const int8_t e = knownVerdict(verdict_, v); e >= 0) return e == 1;
    return firstVerdict(job, v);
  }
  /// eligible(bound=true) of a pod known to run, asked once per victim job until resetVerdicts():
  /// the victim rooms mayHold() sizes domains by. (Preempt's and consolidation's verdicts read
  /// nothing of the claimant's side a victim moves.)
  bool mayBecomeEligible(const framework::SessionJob& job, const Victim& v) {
    return mode_ == VictimMode::Reclaim ? cachedVerdict(boundVerdict_, job, v, /*bound=*/true) : eligibleRunning(job, v);
  }
  /// eligible(`bound`) of `v`'s job, kept in `verdicts` (verdict_ or boundVerdict_) until
  /// resetVerdicts().
  bool cachedVerdict(std::vector<int8_t>& verdicts, const framework::SessionJob& job, const Victim& v, bool bound) {
    if (const int8_t e = knownVerdict(verdicts, v); e >= 0) return e == 1;
    return judge(verdicts, job, v, bound);
  }
  /// `v`'s job's verdict in `verdicts`; -1 when not judged yet in this scan.
  static int8_t knownVerdict(const std::vector<int8_t>& verdicts, const Victim& v) {
    const auto j = static_cast<size_t>(v.job);
    return j < verdicts.size() ? verdicts[j] : int8_t{-1};
  }
  /// Judges `v`'s job for cachedVerdict(), and eligibleRunning()'s first verdict of a job.
  bool judge(std::vector<int8_t>& verdicts, const framework::SessionJob& job, const Victim& v, bool bound);
  bool firstVerdict(const framework::SessionJob& job, const Victim& v);
  /// A running pod of a node and what it holds there (victims_detail::podRoom).
  struct HeldPod {
    Victim pod;
    victims_detail::Room room;
  };
  /// The running pods of `node` with what they hold, read from their tasks once per change of the
  /// node (its NodeChangeLog version): victimRoomOn() sums them for every claimant class and every
  /// commit without visiting the tasks again. Laid out as onNode(), in no order.
  std::span<const HeldPod> heldOn(int node);
  std::vector<HeldPod> held_;         ///< node n's in [nodeStart[n], nodeStart[n] + heldCount_[n])
  std::vector<uint32_t> heldCount_;   ///< per node
  std::vector<uint32_t> heldVersion_; ///< per node: its version when read, plus one (0: never)
  void resetVerdicts();

  /// A node where `task` fits after evicting `count` eligible victims; none when it cannot.
  struct Candidate {
    int count = 0;
    Victim last;  ///< the latest victim in victim order taken there: an earlier one is preferred
    int64_t negScore = 0;
    int node = -1;
    uint32_t version = 0;
  };
  std::optional<Candidate> evaluate(const framework::SessionJob& job, const framework::SessionTask& task, int node);
  bool better(const Candidate& a, const Candidate& b) const;
  struct Better {
    const VictimSearch* search;
    bool operator()(const Candidate& a, const Candidate& b) const { return search->better(a, b); }
  };
  /// Nodes to try for `task`, best first (at most `max`), from a full scan inside `domain`, or
  /// outside domains from a ranking kept per claimant shape and refreshed with the nodes that
  /// changed since (claimants of one shape then cost O(log n) each, not a scan each).
  /// Into `out` (cleared first).
  void candidates(const framework::SessionJob& job, const framework::SessionTask& task,
                  const framework::NodeDomain* domain, size_t max, std::vector<int>& out);
  std::vector<Candidate> top_;   ///< candidates()'s entries: a domain's, or a ranking's best (a kept buffer)
  std::vector<int> movedNodes_;  ///< candidates(): the nodes a kept ranking evaluates again

  framework::Session& ssn_;
  VictimMode mode_;
  int maxVictims_;
  bool indexed_ = false;
  /// The session's running tasks per node (Session::runningIndex), each node's in victim order
  /// once sortedOn_ (this action's copy: the order is the action's).
  std::vector<Victim> running_;
  const framework::RunningIndex* index_ = nullptr;
  std::span<Victim> onNode(int node) {
    return {running_.data() + index_->nodeStart[static_cast<size_t>(node)],
            running_.data() + index_->nodeStart[static_cast<size_t>(node) + 1]};
  }
  /// Per node: the victim order onNode() was last sorted in (victimsOn).
  struct SortStamp {
    bool sorted = false;
    bool lasting = false;  ///< sorted while the order in force was the live one: valid in any hold of that version
    uint64_t epoch = 0;    ///< the hold it was sorted in
    uint64_t version = 0;  ///< Session::victimOrderVersion() then
    uint64_t live = 0;     ///< Session::victimOrderVersion(live) then: what every pod was
    uint64_t jobs = 0;     ///< preempt: jobsStamp() then
  };
  /// Preempt, where victimsOn() groups a node's pods by queue and the session's victim order puts
  /// two pods of one queue in an order their jobs alone decide (Session::victimOrderByJobsInQueue):
  /// a fingerprint of the versions of the jobs of the node's pods. The list stays sorted while it
  /// holds (a sum of 64-bit fingerprints: one that moves changes it).
  uint64_t jobsStamp(std::span<const Victim> list) const;
  std::vector<SortStamp> sortedOn_;
  /// The node's running tasks in victim order (preempt: grouped by queue), sorted on first use and
  /// again once the order moved (a claimant's commit moves queue shares): a node the action never
  /// searches is never sorted.
  std::span<const Victim> victimsOn(int node);
  /// victimsOn()'s order: victim order, preempt's grouped by queue first.
  bool nodeOrderLess(const Victim& a, const Victim& b) const;
  std::vector<int8_t> verdict_;              ///< per victim job during one scan: -1 unknown, 0/1
  std::vector<int8_t> boundVerdict_;         ///< the same for mayBecomeEligible() (reclaim)
  std::vector<int> touched_;                 ///< verdict_ entries to reset after the scan
  /// Per claimant shape: nodes by victim order of their sets (better()), best score, lowest index.
  using Ranking = framework::NodeRanking<Candidate, Better>;
  /// A ranking and the victim order it was ranked in: the order's fingerprint
  /// (Session::victimOrderVersion) and, for preempt, how much of its queue's movedLog_ it has seen.
  struct KeptRanking {
    explicit KeptRanking(Better b) : ranking(b) {}
    Ranking ranking;
    uint64_t order = 0;
    size_t moved = 0;
    /// Reclaim: the turn (turnSeq_) that ranked or refreshed it while its own victims were out;
    /// 0 when none did. Who may be taken then read queue shares that turn's undo or commit moves
    /// back, on nodes the node log does not name: no other turn uses it.
    uint64_t onlyFor = 0;
    /// Preempt, made by a walk of the claimant's queue that stopped (walkOwnQueue()): the first pod
    /// of the job it stopped at, that job's version then, and the nodes it evaluated (ascending).
    /// A node it did not reach, running no pod of a job changed since (those nodes are evaluated
    /// again, movedLog_), has no set ending before that pod while its job stays as it was: the
    /// ranking answers while its `max`-th best set ends before it, and walks on otherwise.
    std::optional<Victim> horizon;
    uint64_t horizonVersion = 0;
    std::vector<int> reached;
  };
  uint64_t turnSeq_ = 0;  ///< counts runTurn() calls
  std::map<std::string, KeptRanking, std::less<>> rankings_;
  /// Preempt, per queue: nodes running pods of the jobs each commit in the queue changed (its
  /// claimant and its victims' jobs, all of the claimant's queue), in commit order. Inside one
  /// queue two pods compare by their jobs alone, so only on those nodes may a kept ranking of the
  /// queue's claimants have moved in evaluation or order (another queue's commits change the
  /// nodes they touch, which the node change log names).
  std::vector<std::vector<int>> movedLog_;
  /// movedLog_'s entry for `queue` (an empty one when none was made).
  const std::vector<int>& movedLogOf(int queue) const;
  /// Reclaim without a ranking made in the victim order as it stands: the best `max` nodes,
  /// exactly as a fresh ranking gives them, found by walking the victim order
  /// (Session::walkVictims, without the top-level trees none of whose pods the claimant may take)
  /// and evaluating each node when the walk first reaches a job with a pod there that the claimant
  /// may take, until the next job's first pod comes after the latest victim of the `max`-th best
  /// set found (a node's set ends no earlier than its earliest job). Nullopt without a walk.
  struct Walked {
    std::vector<int> nodes;    ///< the best `max`, best first
    std::vector<Candidate> all;  ///< every candidate the walk evaluated
    bool whole = false;        ///< it walked every victim: `all` is every node's candidate (rankAll's)
  };
  std::optional<Walked> walkCandidates(const framework::SessionJob& job, const framework::SessionTask& task,
                                       size_t max);
  /// One walk of the victim order (walkCandidates, walkOwnQueue): what it found and reached.
  struct WalkState {
    size_t keep = 0;                       ///< it stops once this many sets end before the next job
    std::vector<Candidate> best;           ///< at most `keep`, best first
    std::vector<Candidate> found;          ///< every candidate it evaluated
    std::vector<int> reachedNodes, reachedJobs;  ///< marked in walkNode_ / walkJob_ until endWalk()
    const framework::SessionTask* prev = nullptr;  ///< self-check: the walk is in victim order
    std::optional<Victim> stop;            ///< the first pod of the job it stopped at
  };
  WalkState walk_;  ///< the walk in progress (walks do not nest)
  /// Starts `w` afresh (its buffers' storage kept).
  void startWalk(WalkState& w, size_t keep);
  /// One pod of a walk: at a job's first pod, stops when `keep` sets end before it; else, when the
  /// claimant may take the job, evaluates the nodes running its pods not reached yet. False: stop.
  bool walkStep(const framework::SessionJob& job, const framework::SessionTask& task,
                const framework::SessionTask& t, WalkState& w);
  /// Clears the walk's marks.
  void endWalk(const WalkState& w);
  /// Preempt: ranks the nodes of `kept` (afresh when `fresh`, else on from what it holds, kept
  /// current) by walking the claimant's queue's own victim order (Session::walkQueueVictims) as
  /// walkCandidates() walks the whole order, until the `max`-th best set ends before the next job;
  /// sets kept.horizon (none when it walked every pod: the ranking is then every node's). False,
  /// with nothing changed, when no such walk is possible now.
  bool walkOwnQueue(const framework::SessionJob& job, const framework::SessionTask& task, size_t max,
                    KeptRanking& kept, bool fresh);
  /// Self-check: a whole walk found the nodes rankAll() finds.
  void checkWalkedAll(const framework::SessionJob& job, const framework::SessionTask& task,
                      const std::vector<Candidate>& walked);
  std::vector<uint8_t> walkNode_, walkJob_;  ///< walkStep(): nodes and jobs reached
  /// Every node a fresh ranking evaluates for `task` (reclaim: those running a pod it may take;
  /// preempt: the claimant's queue's; pruning: the pruned set's), unsorted.
  std::vector<Candidate> rankAll(const framework::SessionJob& job, const framework::SessionTask& task);
  /// Reclaim: the nodes running a pod `job` may take as things stand, ascending (a kept buffer).
  const std::vector<int>& reclaimNodes(const framework::SessionJob& job);
  std::vector<int> reclaimNodes_;
  /// The nodes of the best `max` of `all` (better()), best first, into `nodes` (cleared first).
  void bestOf(std::vector<Candidate>& all, size_t max, std::vector<int>& nodes) const;
  /// Self-check: `nodes` are the best `max` of rankAll(), in order.
  void checkCandidates(const framework::SessionJob& job, const framework::SessionTask& task,
                       const std::vector<int>& nodes, size_t max);
  std::string rankingKey_;  ///< candidates()'s key into rankings_ (a kept buffer)
  bool orderChanged_ = false;  ///< the current claimant took victims: rank nodes afresh (candidates())
  /// Preempt: whether any running pod of the claimant's queue may be taken by it; a claimant with
  /// none has nothing to search (asked once per queue, priority and preemptibility).
  bool queueHasVictims(const framework::SessionJob& job);
  /// Who a preempt claimant may take depends on these alone: its queue, priority, preemptibility.
  using ClaimantClass = std::tuple<int, int32_t, bool>;
  static ClaimantClass claimantClass(const framework::SessionJob& job) {
    return {job.queue, job.priority, job.preemptible};
  }
  std::map<ClaimantClass, bool> queueHasVictims_;
  /// Whether any running pod of the claimant's queue may be taken by it, now (queueHasVictims()'s
  /// answer, not kept).
  bool anyVictimFor(const framework::SessionJob& job);
  bool noVictimsTurn_ = false;        ///< the last run() ended at queueHasVictims()
  std::vector<uint8_t> spentAsked_;   ///< per queue: queueSpent() asked already (1), or said yes with selfChecks() on
  static constexpr uint8_t kSpentChecked = 2;
  /// run() itself (run() adds queueSpent()'s self-check).
  bool runTurn(framework::SessionJob& job, std::string& reason);
  /// What the turn's pods (the first turnMissing() pending ones in task order) need on nodes, a
  /// fractional pod's GPU share counted as GPU.
  api::Resources turnNeeds(const framework::SessionJob& job) const;
  ShapeFailures failed_;  ///< jobs that found no solution, by signature (Session::jobSignature)
  const std::vector<int>& queueNodes(int queue) const { return index_->queueNodes[static_cast<size_t>(queue)]; }
  /// The cluster's future idle and shared GPUs' room (consolidation's bound), recounted after changes.
  const api::Resources& clusterFree();
  api::Resources free_;                       ///< the cluster's future idle, as of freeAt_ changes
  size_t freeAt_ = 0;
  bool freeKnown_ = false;
};

}  // namespace tessera::actions
