#pragma once
/// Conversion from Kubernetes JSON (and YAML) into the api value types.
/// Every error names the object ("Pod team-a/big-0") and the field ("spec.containers[0].resources.requests.cpu").
/// Exceptions from nlohmann/yaml-cpp never escape these functions.
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/api/kinds.h"
#include "tessera/api/objects.h"
#include "tessera/api/result.h"

namespace tessera::api {

Result<Pod> podFromJson(const nlohmann::json& j);
Result<Node> nodeFromJson(const nlohmann::json& j);
Result<PodGroup> podGroupFromJson(const nlohmann::json& j);
/// Another scheduler's PodGroup (Kind::VolcanoPodGroup: scheduling.volcano.sh/v1beta1 minMember,
/// queue, priorityClassName; Kind::SchedulerPluginsPodGroup: scheduling.x-k8s.io/v1alpha1
/// minMember) as a PodGroup with its `source` set; other fields of theirs are not read.
Result<PodGroup> foreignPodGroupFromJson(Kind kind, const nlohmann::json& j);
Result<Queue> queueFromJson(const nlohmann::json& j);
Result<Topology> topologyFromJson(const nlohmann::json& j);
Result<PriorityClass> priorityClassFromJson(const nlohmann::json& j);
Result<Namespace> namespaceFromJson(const nlohmann::json& j);
Result<ConfigMap> configMapFromJson(const nlohmann::json& j);
/// Only metadata (used for kinds without a dedicated type and for error messages).
Result<ObjectMeta> metaFromJson(const nlohmann::json& j);

/// The kind of a manifest from its apiVersion and kind fields; error names both when unknown.
Result<Kind> kindOf(const nlohmann::json& j);

/// "Pod team-a/big-0" or "Queue default": how errors refer to an object.
std::string describeObject(const nlohmann::json& j);

/// Parses YAML text (one or several documents) into JSON values. Plain scalars become
/// numbers / booleans / null where YAML 1.2 core schema says so; quoted scalars stay strings.
Result<std::vector<nlohmann::json>> yamlToJson(std::string_view text);

}  // namespace tessera::api
