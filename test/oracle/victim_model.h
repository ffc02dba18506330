#pragma once
/// The exhaustive victim oracle of issue 15: a small cluster as plain structs (the single source of
/// truth: it is rendered as a scenario file for the real scheduler and read here for the expected
/// outcome), and the brute-force search that says which victims preempt, reclaim or consolidate
/// must evict for one pending job.
///
/// The rules the oracle holds the scheduler to (docs/fairness.md, issue 15, KAI-Scheduler's
/// solvers and proportion plugin):
///
/// VICTIM SETS. A set takes from each job either pods that leave it at or above its minMember
/// (surplus pods of an elastic job, any of them) or all of its running pods (a gang goes whole).
/// For the order below, a job is seen as chunks: one surplus pod at a time (newest first), then,
/// once at its minimum, the rest together.
///
/// WHO MAY BE A VICTIM. Never a non-preemptible job (priority >= 100), never the claimant.
///   preempt:     jobs of the claimant's own (leaf) queue with strictly lower priority;
///   reclaim:     jobs of any other leaf queue;
///   consolidate: any job; its pods are moved (evicted and placed again), nobody loses resources.
///
/// VICTIM ORDER, one sequence of chunks built step by step as if every chunk before were taken
/// (KAI's victim queue: JobsOrderByQueues with VictimQueue, reversed queue and job order):
///   1. queues, top-down through the tree, among the sibling queues that still hold a candidate
///      (KAI's reversed queue order with victims): a queue above its fair share in some resource
///      goes first (its "kept" share: the fair share, but never below min(quota, requested, limit)
///      where the division scaled an over-committed quota down; KAI's fair share is never below
///      min(quota, requested)); then one above its quota (not starved); then the larger dominant share of what
///      it would still hold after the chunks already in the sequence and its own next chunk are
///      taken, max over gpu/cpu/memory of remaining / fair share (a positive amount over a zero
///      share is infinite); then the larger dominant share as it stands; then the newer queue
///      (creation order). The first two use the allocation before any victim, as KAI does; KAI's
///      lower-queue-priority-first key is left out (the oracle's queues all have priority 100),
///      and where KAI subtracts only the best leaf's earlier victims from a parent, the oracle
///      subtracts all of the parent's;
///   2. jobs inside the chosen leaf queue: the lower job priority first; then a job still above
///      its minMember (a surplus pod) before one at its minimum (a whole gang); then the newer job;
///   3. inside a job: surplus pods newest first, then the rest of the job as one chunk.
///   For preempt the candidates all live in one leaf queue, so only 2 and 3 matter.
///
/// THE EXPECTED SET. The chunk sequence read pod by pod (a whole chunk's pods newest first) is the
/// victim order. Among the sets that are allowed and let the claimant fit, the first in "colex"
/// order over it: the one whose last pod comes earliest; on a tie, the one whose next-to-last pod
/// comes earliest, and so on. Roughly: take victims in order until the claimant fits, then walk
/// back from the last one taken to the first and drop every pod the claimant can do without (a
/// gang's pods only together). That set is minimal (no allowed proper subset fits) and prefers
/// the most expendable victims; fewer victims never outweighs the order (issue 15, item 1).
///
/// FITS. The claimant's pending pods (all of them: claimants here have minMember = pod count)
/// fit on the nodes with the set's pods removed: cpu, pod slots, whole GPUs (a free device each)
/// and fractions (a device whose shares sum to at most 1, or a free one), inside one rack when
/// the claimant's PodGroup requires the rack level. For consolidate the moved pods must be placed
/// again as well (anywhere, without topology constraints). Queue rules on the claimant's path,
/// leaf to top, with the set's pods removed from their queues (not for consolidate), each only
/// for the resources the claimant asks for (as Tessera's capacity checks; KAI compares all):
///   limit:     remaining gpu + claimant gpu <= limit (issue 15, item 9: freeing a limit counts);
///   non-preemptible claimant: non-preemptible gpu + claimant gpu <= quota (victims never change it);
///   reclaim:   remaining + claimant <= fair share, except for a top-level queue
///              that is the only top-level queue (KAI's reclaimingQueuesRemainWithinBoundaries);
///              and, unit by unit in victim order (a single pod, or a whole gang's last
///              minMember pods together), at the level just below the lowest common
///              ancestor of claimant and victim queue: the victim side must still be above its
///              kept share before the chunk is taken (MaintainFairShare), or the claimant side is
///              within its quota with the claimant added and the victim side above its quota
///              (GuaranteeDeservedQuota);
///              and the claimant side, with the whole set gone (victims under it taken for
///              other units count) and the claimant added, within its fair share times
///              proportion.reclaimerSaturationMultiplier (each resource the claimant asks for;
///              at 1 the fair-share rule on the claimant's path holds it already).
/// When the claimant fits with no victim at all (allocate places it), nothing is evicted.
///
/// OTHER PENDING JOBS. A "decoy" (sometimes): a job of the claimant's class (queue and priority),
/// older, so its turn comes first, of another shape, that neither fits as things are nor has an
/// allowed set that lets it fit (the brute force says so with the decoy as claimant): its turn
/// must change nothing, and what the search learned in it (per claimant class, rooms, rankings,
/// failed scans) must not change the claimant's answer. A "huge" job (sometimes): no node holds it.
/// Both count in their queue's request, so in the division.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/plugins/proportion.h"

namespace tessera::oracle {

enum class Mode { Preempt, Reclaim, Consolidate };
const char* modeName(Mode m);

using Amounts = plugins::proportion::Amounts;            ///< {milli-GPU, milli-CPU, bytes}
inline constexpr int64_t kPodMemory = int64_t(1) << 30;  ///< every pod asks 1Gi
inline constexpr int64_t kNodeMemory = int64_t(64) << 30;

struct OQueue {
  std::string name;
  int parent = -1;
  int64_t quotaGpu = 0;   ///< milli-GPU, >= 0 (cpu and memory quotas are -1)
  int64_t limitGpu = -1;  ///< milli-GPU or -1
  int64_t weight = 1;
  bool leaf = true;
};

struct ONode {
  std::string name;
  int gpus = 0;
  int64_t cpu = 0;  ///< milli-CPU
  int pods = 110;   ///< allocatable pod slots
  int rack = -1;    ///< -1: no topology labels
};

struct OPod {
  std::string name;
  int job = -1;
  int node = -1;    ///< -1: pending
  int device = -1;  ///< fractional running pods: the device (GPU group) on the node
  int64_t cpu = 1000;
  int wholeGpus = 0;
  int64_t fracMilli = 0;  ///< > 0: a fractional pod (gpu-fraction)
  int created = 0;        ///< seconds after the base time
};

struct OJob {
  std::string name;
  int queue = 0;
  int priority = 50;
  int minMember = 1;
  bool podGroup = false;      ///< false: a single pod without PodGroup
  bool rackRequired = false;  ///< PodGroup topologyConstraint requiredTopologyLevel = rack
  int created = 0;
  std::vector<int> pods;
  bool preemptible() const { return priority < 100; }
};

struct Case {
  uint64_t seed = 0;
  Mode mode = Mode::Preempt;
  bool topology = false;
  std::vector<ONode> nodes;
  std::vector<OQueue> queues;
  std::vector<OJob> jobs;
  std::vector<OPod> pods;
  int claimant = -1;  ///< job index
  int hopeless = -1;  ///< job index of a pending job no node can hold, or -1
  int decoy = -1;     ///< job index of the decoy (above), or -1
  int64_t saturationMilli = 1000;  ///< proportion.reclaimerSaturationMultiplier x 1000
  bool oneNodeRacks = false;       ///< withOneNodeRacks(): each node a rack of its own
  /// The victim action runs alone (no allocate before it): a claimant that fits without victims
  /// takes none and stays pending (placing it is allocate's job, docs/fairness.md).
  bool actionAlone = false;
};

/// One step of the victim sequence.
struct Chunk {
  int job = -1;
  std::vector<int> pods;
  bool whole = false;  ///< the rest of the job at its minimum
};

struct Expected {
  Amounts request{0, 0, 0};         ///< the claimant's pending pods
  std::vector<Amounts> fairShare;   ///< per queue
  std::vector<Amounts> kept;        ///< per queue: what reclaim leaves it (fair share, or quota: keptShares)
  std::vector<Chunk> sequence;      ///< the victim order, chunk by chunk
  std::vector<int> order;           ///< the same, pod by pod (a whole chunk newest first)
  bool fitsWithoutVictims = false;  ///< allocate places the claimant
  bool solvable = false;            ///< some allowed victim set lets it fit
  std::vector<int> victims;         ///< the expected set (pod indices, sorted)
};

/// Computes what the action must do for the claimant.
Expected expectedOutcome(const Case& c);

/// The verdict on an actual eviction set (pod indices), for the report.
struct Verdict {
  bool ok = true;
  std::string rule;  ///< "(a) fit", "(b) minimal", "(c) allowed", "(d) order", "placement"
  std::string detail;
};
Verdict judge(const Case& c, const Expected& e, const std::vector<int>& evicted, bool claimantPlaced);

/// Whether `victims` (pod indices) is an allowed set and lets the claimant fit (for the report and
/// the model's own tests).
bool allowedAndFits(const Case& c, const Expected& e, const std::vector<int>& victims, std::string* why = nullptr);

}  // namespace tessera::oracle
