#pragma once
// The per-kind converters behind tessera/api/convert.h, and the object parts they share. Private to
// tessera_api. convert.cpp owns the entry points: it describes the object, checks its kind, reads
// metadata and then calls the kind's body reader below, which reads the rest (spec, status, data).
//   core kinds (convert_core.cpp):             Pod, Node, PriorityClass, Namespace, ConfigMap
//   scheduling kinds (convert_scheduling.cpp): PodGroup, Queue, Topology
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json_reader.h"
#include "tessera/api/objects.h"
#include "tessera/api/resources.h"
#include "tessera/api/result.h"

namespace tessera::api {

// ---- shared object parts (convert.cpp) ----

/// metadata: name, namespace, labels, annotations, timestamps, ownerReferences.
Status readObjectMeta(const JsonReader& object, ObjectMeta& meta);
/// A list of status conditions under `key`; conditions are appended.
Status readConditions(const JsonReader& parent, std::string_view key, std::vector<Condition>& out);
/// A resource list (requests, capacity, allocated, ...) under `key` into `out`; negatives are errors.
/// `pods` (when non-null) receives the "pods" entry, which Resources does not hold.
Status readResourceList(const JsonReader& parent, std::string_view key, Resources& out,
                        std::optional<int64_t>* pods = nullptr);
/// NoSchedule, PreferNoSchedule or NoExecute; `field` names the field in the error.
Result<TaintEffect> taintEffect(const JsonReader& field, const std::string& text);

// ---- core kinds (convert_core.cpp): everything after metadata ----

Status readPodBody(const JsonReader& object, Pod& pod);
Status readNodeBody(const JsonReader& object, Node& node);
Status readPriorityClassBody(const JsonReader& object, PriorityClass& pc);
Status readConfigMapBody(const JsonReader& object, ConfigMap& cm);

// ---- scheduling kinds (convert_scheduling.cpp): everything after metadata ----

Status readPodGroupBody(const JsonReader& object, PodGroup& pg);
/// Volcano's PodGroup (spec.minMember, queue, priorityClassName) and scheduler-plugins' (spec.minMember).
Status readVolcanoPodGroupBody(const JsonReader& object, PodGroup& pg);
Status readSchedulerPluginsPodGroupBody(const JsonReader& object, PodGroup& pg);
Status readQueueBody(const JsonReader& object, Queue& queue);
Status readTopologyBody(const JsonReader& object, Topology& topology);

}  // namespace tessera::api
