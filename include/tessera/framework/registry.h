#pragma once
/// Explicit registries of actions and plugins by name, filled from one list called from main
/// (src/app/registrations.cpp); no static self-registration.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/api/result.h"
#include "tessera/framework/args.h"

namespace tessera::framework {

class Action;
class Plugin;

using PluginFactory = std::function<api::Result<std::shared_ptr<Plugin>>(Args& args)>;
using ActionFactory = std::function<api::Result<std::shared_ptr<Action>>(Args& args)>;

class Registry {
 public:
  void addPlugin(const std::string& name, PluginFactory factory);
  void addAction(const std::string& name, ActionFactory factory);
  const PluginFactory* plugin(const std::string& name) const;
  const ActionFactory* action(const std::string& name) const;
  std::vector<std::string> pluginNames() const;  ///< sorted
  std::vector<std::string> actionNames() const;  ///< sorted

 private:
  std::map<std::string, PluginFactory> plugins_;
  std::map<std::string, ActionFactory> actions_;
};

/// "a, b, c".
std::string joinNames(const std::vector<std::string>& names);

}  // namespace tessera::framework
