#pragma once
// A plugin made by its factory with default arguments, for the plugin unit tests (needs the
// plugins' libraries, unlike test_cluster.h).
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "tessera/framework/args.h"
#include "tessera/plugins/factories.h"

namespace tessera::testing {

inline std::shared_ptr<framework::Plugin> makePlugin(const char* name,
                                                     plugins::PluginResult (*factory)(framework::Args&)) {
  framework::Args args(std::string("plugins.") + name, nullptr);
  auto p = factory(args);
  REQUIRE(p.ok());
  return std::move(p).value();
}

}  // namespace tessera::testing
