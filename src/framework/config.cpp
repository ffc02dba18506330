#include "tessera/framework/config.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"
#include "tessera/api/gpu_request.h"
#include "tessera/framework/action.h"
#include "tessera/framework/args.h"
#include "tessera/framework/plugin.h"
#include "tessera/framework/registry.h"

namespace tessera::framework {

namespace {

using Json = nlohmann::json;

const char* const kTopLevelKeys[] = {"schedulerName", "schedulePeriod", "actions", "actionArgs",
                                     "plugins",       "tiers",          "podGrouper",
                                     "gpuSharing",    "shard"};

api::Result<std::vector<std::string>> stringList(const Json& j, const std::string& where) {
  if (!j.is_array()) return api::makeError(where + ": must be a list of names, got " + j.dump());
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string())
      return api::makeError(where + "[" + std::to_string(i) + "]: must be a name, got " + j[i].dump());
    out.push_back(j[i].get<std::string>());
  }
  return out;
}

/// podGrouper: {defaultPriorityClass: {KIND or CATEGORY: PRIORITYCLASS}}.
api::Result<PodGrouperConfig> podGrouperConfig(const Json& root) {
  PodGrouperConfig out;
  if (!root.contains("podGrouper") || root["podGrouper"].is_null()) return out;
  const Json& g = root["podGrouper"];
  if (!g.is_object()) return api::makeError("config.podGrouper: must be a map, got " + g.dump());
  for (const auto& [k, v] : g.items()) {
    if (k != "defaultPriorityClass")
      return api::makeError("config.podGrouper: unknown key \"" + k + "\" (valid: defaultPriorityClass)");
    if (v.is_null()) continue;
    if (!v.is_object())
      return api::makeError("config.podGrouper.defaultPriorityClass: must be a map of workload kind or category "
                            "(training, inference) to a PriorityClass name, got " + v.dump());
    for (const auto& [kind, name] : v.items()) {
      if (!name.is_string())
        return api::makeError("config.podGrouper.defaultPriorityClass." + kind + ": must be a PriorityClass name, got " +
                              name.dump());
      if (!name.get<std::string>().empty()) out.defaultPriorityClass[kind] = name.get<std::string>();
    }
  }
  return out;
}

api::Result<Config> build(const Registry& registry, const Json& root) {
  if (!root.is_object()) return api::makeError("config: must be a map, got " + root.dump());
  for (const auto& [k, v] : root.items()) {
    if (std::find_if(std::begin(kTopLevelKeys), std::end(kTopLevelKeys), [&key = k](const char* x) { return key == x; }) ==
        std::end(kTopLevelKeys)) {
      std::string valid;
      for (const char* x : kTopLevelKeys) valid += (valid.empty() ? "" : ", ") + std::string(x);
      return api::makeError("config: unknown key \"" + k + "\" (valid: " + valid + ")");
    }
  }
  Config cfg;
  Args top("config", &root);
  cfg.schedulerName = top.getString("schedulerName", cfg.schedulerName);
  cfg.schedulePeriod = top.getDuration("schedulePeriod", cfg.schedulePeriod);
  cfg.shard = top.getString("shard", cfg.shard);
  if (cfg.schedulerName.empty()) return api::makeError("config.schedulerName: must not be empty");
  if (cfg.schedulePeriod.millis <= 0) return api::makeError("config.schedulePeriod: must be positive");
  TESSERA_ASSIGN_OR_RETURN(cfg.podGrouper, podGrouperConfig(root));
  {
    const Json* g = root.contains("gpuSharing") && !root["gpuSharing"].is_null() ? &root["gpuSharing"] : nullptr;
    if (g && !g->is_object()) return api::makeError("config.gpuSharing: must be a map, got " + g->dump());
    Args gs("config.gpuSharing", g);
    cfg.gpuSharing.splitCount =
        static_cast<int32_t>(gs.getInt("splitCount", cfg.gpuSharing.splitCount, 1, api::kMaxGpuSplitCount));
    cfg.gpuSharing.memoryScalingMilli =
        gs.getMilli("memoryScaling", cfg.gpuSharing.memoryScalingMilli, 1, api::kMaxGpuMemoryScalingMilli);
    cfg.gpuSharing.coreScalingMilli =
        gs.getMilli("coreScaling", cfg.gpuSharing.coreScalingMilli, 1, api::kMaxGpuCoreScalingMilli);
    cfg.gpuSharing.defaults.memoryMiB = gs.getInt("defaultMemory", 0, 0, int64_t{1} << 40);
    cfg.gpuSharing.defaults.corePercent = static_cast<int32_t>(gs.getInt("defaultCores", 0, 0, 100));
    TESSERA_TRY(gs.finish());
  }

  // Actions.
  const Json empty = Json::object();
  const Json& actionArgs = root.contains("actionArgs") ? root["actionArgs"] : empty;
  if (!actionArgs.is_object() && !actionArgs.is_null())
    return api::makeError("config.actionArgs: must be a map, got " + actionArgs.dump());
  std::vector<std::string> actionNames;
  if (root.contains("actions")) {
    TESSERA_ASSIGN_OR_RETURN(actionNames, stringList(root["actions"], "config.actions"));
  }
  std::set<std::string> seen;
  for (const auto& name : actionNames) {
    const ActionFactory* f = registry.action(name);
    if (!f)
      return api::makeError("config.actions: unknown action \"" + name + "\" (valid: " +
                            joinNames(registry.actionNames()) + ")");
    if (!seen.insert(name).second) return api::makeError("config.actions: action \"" + name + "\" listed twice");
    const Json* a = actionArgs.is_object() && actionArgs.contains(name) ? &actionArgs[name] : nullptr;
    Args args("config.actionArgs." + name, a);
    TESSERA_ASSIGN_OR_RETURN(auto action, (*f)(args));
    TESSERA_TRY(args.finish());
    cfg.actions.push_back(std::move(action));
  }
  if (actionArgs.is_object())
    for (const auto& [name, v] : actionArgs.items())
      if (!registry.action(name))
        return api::makeError("config.actionArgs: unknown action \"" + name + "\" (valid: " +
                              joinNames(registry.actionNames()) + ")");

  // Plugins and tiers.
  const Json& plugins = root.contains("plugins") ? root["plugins"] : empty;
  if (!plugins.is_object() && !plugins.is_null())
    return api::makeError("config.plugins: must be a map, got " + plugins.dump());
  std::vector<std::vector<std::string>> tiers;
  if (root.contains("tiers")) {
    const Json& t = root["tiers"];
    if (!t.is_array()) return api::makeError("config.tiers: must be a list of lists of plugin names");
    for (size_t i = 0; i < t.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(auto names, stringList(t[i], "config.tiers[" + std::to_string(i) + "]"));
      tiers.push_back(std::move(names));
    }
  }
  std::vector<std::string> order;
  std::set<std::string> listed;
  for (const auto& tier : tiers)
    for (const auto& name : tier) {
      if (!registry.plugin(name))
        return api::makeError("config.tiers: unknown plugin \"" + name + "\" (valid: " +
                              joinNames(registry.pluginNames()) + ")");
      if (!listed.insert(name).second) return api::makeError("config.tiers: plugin \"" + name + "\" listed twice");
      order.push_back(name);
    }
  if (plugins.is_object())
    for (const auto& [name, v] : plugins.items()) {
      if (!registry.plugin(name))
        return api::makeError("config.plugins: unknown plugin \"" + name + "\" (valid: " +
                              joinNames(registry.pluginNames()) + ")");
      if (!listed.count(name)) {
        order.push_back(name);
        tiers.push_back({name});
        listed.insert(name);
      }
    }
  for (const auto& name : order) {
    const Json* p = plugins.is_object() && plugins.contains(name) ? &plugins[name] : nullptr;
    Args args("config.plugins." + name, p);
    const bool enabled = args.getBool("enabled", true);
    TESSERA_ASSIGN_OR_RETURN(auto plugin, (*registry.plugin(name))(args));
    TESSERA_TRY(args.finish());
    if (enabled) cfg.plugins.push_back(std::move(plugin));
  }
  cfg.tiers = std::move(tiers);
  for (const char* k : kTopLevelKeys) top.allow(k);
  TESSERA_TRY(top.finish());
  return cfg;
}

}  // namespace

api::Result<Config> loadConfig(const Registry& registry, const nlohmann::json* overrides) {
  auto defaults = api::yamlToJson(defaultConfigYaml());
  if (!defaults.ok()) return api::makeError("built-in default config: " + defaults.error().message);
  Json merged = defaults->empty() ? Json::object() : defaults->front();
  if (overrides && !overrides->is_null()) {
    if (!overrides->is_object()) return api::makeError("config: must be a map, got " + overrides->dump());
    merged.merge_patch(*overrides);
  }
  return build(registry, merged);
}

api::Result<Config> loadConfigYaml(const Registry& registry, const std::string& yamlText) {
  auto docs = api::yamlToJson(yamlText);
  if (!docs.ok()) return api::makeError("config: " + docs.error().message);
  if (docs->size() > 1) return api::makeError("config: expected one YAML document, got " + std::to_string(docs->size()));
  if (docs->empty()) return loadConfig(registry, nullptr);
  return loadConfig(registry, &docs->front());
}

}  // namespace tessera::framework
