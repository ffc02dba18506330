#pragma once
/// The registry of every built-in action and plugin (src/app/actions.def, plugins.def).
#include "tessera/framework/registry.h"

namespace tessera::app {

/// Registers all built-in actions and plugins. Called once from main (and by tests).
void registerBuiltins(framework::Registry& registry);
/// A registry with every built-in; built on first use.
const framework::Registry& builtinRegistry();

}  // namespace tessera::app
