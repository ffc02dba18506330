#pragma once
// Shared by the actions (internal to src/actions): jobs in queue order, placing a job's pending
// pods inside a Statement, and the reason texts users read.
#include <functional>
#include <string>
#include <vector>

#include "tessera/framework/session.h"
#include "tessera/framework/statement.h"

namespace tessera::actions {

/// "pod ns/name" or "PodGroup ns/name", for messages.
std::string describeJob(const framework::SessionJob& job);

/// "1 pod" / "3 pods".
std::string pods(int n);

/// Calls `fn` for every valid job with pending pods, queue by queue in queue order (the queue's
/// order re-evaluated after each job, as its share changes), and within a queue in job order.
/// `filter` picks the jobs; invalid jobs get their reason when `reportInvalid`.
void forEachPendingJob(framework::Session& ssn, const std::function<bool(const framework::SessionJob&)>& filter,
                       bool reportInvalid, const std::function<void(framework::SessionJob&)>& fn);

/// Pending tasks of the job, in task order.
std::vector<int> pendingTasks(const framework::Session& ssn, const framework::SessionJob& job);

/// The checks of a task before any node is considered: the plugins' pre-predicates, then its
/// queue's capacity. Fails with the first reason.
api::Status taskAllowed(const framework::Session& ssn, const framework::SessionJob& job,
                        const framework::SessionTask& task);

/// Where one task goes, or why it cannot: task-level checks, queue capacity, then the nodes.
framework::Placement placeTask(framework::Session& ssn, const framework::SessionJob& job,
                               const framework::SessionTask& task, bool allowPipeline);

/// Places the job's pending pods inside `stmt` (inside `domain` when given): the gang's minimum
/// all-or-nothing, pods above it where they fit. Returns whether the job is then ready; on failure
/// the statement is rolled back to where it was and `reason`/`ready` say why. `failed` counts pods
/// above minMember that did not fit.
bool placePending(framework::Session& ssn, framework::Statement& stmt, framework::SessionJob& job,
                  const framework::NodeDomain* domain, bool allowPipeline, std::string& reason, int& ready,
                  int& failed);

/// Like placePending, trying the job's topology domains in turn when a plugin constrains it.
bool placeInDomains(framework::Session& ssn, framework::Statement& stmt, framework::SessionJob& job,
                    bool allowPipeline, std::string& reason, int& ready, int& failed);

/// Records the job's reason: "gang 3/4: 1 pod unschedulable: <reason>" or "pod unschedulable: ...".
void failJob(framework::Session& ssn, framework::SessionJob& job, int ready, const std::string& reason);

}  // namespace tessera::actions
