#pragma once
// Shared by the actions (internal to src/actions): jobs in queue order, placing a job's pending
// pods inside a Statement, and the reason texts users read.
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"

namespace tessera::actions {

/// "pod ns/name" or "PodGroup ns/name", for messages.
std::string describeJob(const framework::SessionJob& job);
/// The same, appended to `out`.
void appendJob(std::string& out, const framework::SessionJob& job);

/// "1 pod" / "3 pods".
std::string pods(int n);

/// Each queue's parent in the tree (indices into Session::queues()), -1 for a top-level one or one
/// whose parent is not declared; a parent cycle is cut where it closes (every queue on one is
/// invalid anyway: the validation layer says so, and their jobs wait).
std::vector<int> queueParents(const framework::Session& ssn);

/// Gives every valid job with pending pods its turns, queue by queue in queue order, and within a
/// queue in job order. `fn` takes one turn of the job and returns whether the job asks for another
/// (allocate: one pod at a time above minMember); the job then stays its queue's next while it has
/// pending pods. After each turn, every queue whose share changed (the served one, victims' queues)
/// is re-ranked with its ancestors (framework::QueueOrder), so the order is always what a full
/// re-sort would give. `filter` picks the jobs; invalid jobs get their reason when `reportInvalid`.
///
/// After a turn that asks for no other, `spent` (when given) may say that none of the queue's later
/// jobs (`rest`, in job order) can change anything in this action: the queue then takes no more
/// turns. It may say so only when each of those turns would end without a change, whenever it
/// came: turns that change nothing do not move the other queues' turns, so the decisions are those
/// of taking them (preempt: a queue with no victim left for its claimants).
using QueueSpentFn = std::function<bool(std::span<const int> rest)>;
void forEachJobTurn(framework::Session& ssn, const std::function<bool(const framework::SessionJob&)>& filter,
                    bool reportInvalid, const std::function<bool(framework::SessionJob&)>& fn,
                    const QueueSpentFn& spent = {});

/// forEachJobTurn with one turn per job (the victim actions, backfill).
void forEachPendingJob(framework::Session& ssn, const std::function<bool(const framework::SessionJob&)>& filter,
                       bool reportInvalid, const std::function<void(framework::SessionJob&)>& fn);

/// Pending tasks of the job in the order they are tried: each subgroup's missing minimum first,
/// then the rest in task order (Session::pendingTaskOrder).
std::vector<int> pendingTasks(const framework::Session& ssn, const framework::SessionJob& job);

/// The checks of a task before any node is considered: the plugins' pre-predicates, then its
/// queue's capacity. Fails with the first reason.
api::Status taskAllowed(const framework::Session& ssn, const framework::SessionJob& job,
                        const framework::SessionTask& task);

/// Where one task goes, or why it cannot: task-level checks, queue capacity, then the nodes.
framework::Placement placeTask(framework::Session& ssn, const framework::SessionJob& job,
                               const framework::SessionTask& task, bool allowPipeline);

/// How much of a job one placement takes.
enum class Turn {
  Whole,  ///< the gang minimum (all or nothing), then every pod above it that fits
  Next,   ///< one turn of allocate (KAI): the gang minimum while below it, else one pod above it
};

/// Places the job's pending pods inside `stmt` (inside `domain` when given): the gang minimum all
/// or nothing, chosen per subgroup (each subgroup's minMember from its own pods, a pod that does not
/// fit replaced by the next of its subgroup), then pods above it as `turn` says (a Next turn above
/// the minimum tries the first pending pod not in `skip`). Returns whether what the turn had to
/// place was placed; on failure the statement is rolled back to where it was and `reason`/`ready`
/// say why. `failed` counts pods above minMember that did not fit.
bool placePending(framework::Session& ssn, framework::Statement& stmt, framework::SessionJob& job,
                  const framework::NodeDomain* domain, bool allowPipeline, Turn turn, const std::vector<int>* skip,
                  std::string& reason, int& ready, int& failed);

/// Like placePending, trying the job's topology domains in turn when a plugin constrains it.
bool placeInDomains(framework::Session& ssn, framework::Statement& stmt, framework::SessionJob& job,
                    bool allowPipeline, Turn turn, const std::vector<int>* skip, std::string& reason, int& ready,
                    int& failed);

/// Jobs that found no placement in one action, by signature, with the session's node change count
/// at that moment: a job like one that failed, with nothing changed on any node since, fails the
/// same way and is not searched again (KAI's scheduling signatures). What the failure said is kept
/// with it, so the reason a skipped job gets is the searched one's.
class ShapeFailures {
 public:
  struct Failure {
    bool known = false;
    size_t at = 0;         ///< Session::nodeChanges().size() when it failed
    int progress = 0;      ///< pods the failed search had placed before giving up (gang messages)
    std::string reason;
  };
  /// The failure of a job like `job`, or null when none is known as things stand.
  /// (signature: Session::jobSignature; -1 is never known.)
  const Failure* find(const framework::Session& ssn, int signature) const;
  void record(const framework::Session& ssn, int signature, int progress = 0, std::string reason = {});

 private:
  std::vector<Failure> bySignature_;
};

/// Records the job's reason: "gang 3/4: 1 pod unschedulable: <reason>" or "pod unschedulable: ...".
void failJob(framework::Session& ssn, framework::SessionJob& job, int ready, const std::string& reason);

}  // namespace tessera::actions
