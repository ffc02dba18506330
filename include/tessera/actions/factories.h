#pragma once
/// Factories of the built-in actions; registered by name from src/app/actions.def.
#include <memory>

#include "tessera/api/result.h"
#include "tessera/framework/action.h"
#include "tessera/framework/args.h"

namespace tessera::actions {

using ActionResult = api::Result<std::shared_ptr<framework::Action>>;

/// allocate: places pending jobs, queue by queue, gang all-or-nothing, with pipelining.
ActionResult makeAllocate(framework::Args& args);
/// consolidate: moves preemptible pods elsewhere so a pending job fits (each moved pod re-placed).
ActionResult makeConsolidate(framework::Args& args);
/// reclaim: a queue below its fair share takes resources back from queues above theirs.
ActionResult makeReclaim(framework::Args& args);
/// preempt: inside a queue, higher priority evicts strictly lower-priority preemptible jobs.
ActionResult makePreempt(framework::Args& args);
/// backfill: places what fits on idle resources, leaving this cycle's pipelined room alone.
ActionResult makeBackfill(framework::Args& args);
/// stalegangeviction: evicts gangs running below minMember for longer than a grace period.
ActionResult makeStaleGangEviction(framework::Args& args);

/// Self-checks: the victim search asserts that what it keeps up to date across claimants (the
/// room of each topology domain) equals a recount from scratch. On in builds without NDEBUG (the
/// sanitizer build); tests and `tessera-bench cycle --check` turn it on in any build.
void setSelfChecks(bool on);
bool selfChecks();

}  // namespace tessera::actions
