#include "tessera/app/registry.h"

#include "tessera/actions/factories.h"
#include "tessera/plugins/factories.h"

namespace tessera::app {

void registerBuiltins(framework::Registry& registry) {
#define TESSERA_PLUGIN(name, factory) registry.addPlugin(name, factory);
#include "plugins.def"
#undef TESSERA_PLUGIN
#define TESSERA_ACTION(name, factory) registry.addAction(name, factory);
#include "actions.def"
#undef TESSERA_ACTION
}

const framework::Registry& builtinRegistry() {
  static const framework::Registry registry = [] {
    framework::Registry r;
    registerBuiltins(r);
    return r;
  }();
  return registry;
}

}  // namespace tessera::app
