#include "tessera/framework/registry.h"

namespace tessera::framework {

void Registry::addPlugin(const std::string& name, PluginFactory factory) { plugins_[name] = std::move(factory); }
void Registry::addAction(const std::string& name, ActionFactory factory) { actions_[name] = std::move(factory); }

const PluginFactory* Registry::plugin(const std::string& name) const {
  auto it = plugins_.find(name);
  return it == plugins_.end() ? nullptr : &it->second;
}

const ActionFactory* Registry::action(const std::string& name) const {
  auto it = actions_.find(name);
  return it == actions_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::pluginNames() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : plugins_) out.push_back(n);
  return out;
}

std::vector<std::string> Registry::actionNames() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : actions_) out.push_back(n);
  return out;
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace tessera::framework
