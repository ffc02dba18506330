#pragma once
// The built-in actions and plugins, registered from the same lists as the tessera binary
// (src/app/actions.def, plugins.def), for tests that do not link tessera_app.
#include "tessera/actions/factories.h"
#include "tessera/framework/registry.h"
#include "tessera/plugins/factories.h"

namespace tessera::testing {

inline const framework::Registry& testRegistry() {
  static const framework::Registry registry = [] {
    framework::Registry r;
#define TESSERA_PLUGIN(name, factory) r.addPlugin(name, factory);
#include "../src/app/plugins.def"
#undef TESSERA_PLUGIN
#define TESSERA_ACTION(name, factory) r.addAction(name, factory);
#include "../src/app/actions.def"
#undef TESSERA_ACTION
    return r;
  }();
  return registry;
}

}  // namespace tessera::testing
