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

}  // namespace tessera::actions
