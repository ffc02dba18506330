// Tessera's scheduling kinds from JSON: PodGroup (and other schedulers' PodGroups), Queue, Topology. Metadata is read by the entry
// points in convert.cpp; these read the rest.
#include <string>

#include "converters.h"
#include "tessera/api/quantity.h"

namespace tessera::api {
namespace {

// ---- PodGroup ----

Status readTopologyConstraint(const JsonReader& parent, TopologyConstraint& out) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader tc, parent.object("topologyConstraint"));
  if (!tc) return {};
  TESSERA_TRY(tc.read("topology", out.topology));
  TESSERA_TRY(tc.read("requiredTopologyLevel", out.requiredTopologyLevel));
  TESSERA_TRY(tc.read("preferredTopologyLevel", out.preferredTopologyLevel));
  return {};
}

Result<Preemptibility> preemptibility(const JsonReader& field, const std::string& text) {
  if (text.empty()) return Preemptibility::Unset;
  if (text == "preemptible") return Preemptibility::Preemptible;
  if (text == "non-preemptible") return Preemptibility::NonPreemptible;
  return field.error("unknown value " + quote(text) + " (want preemptible or non-preemptible)");
}

// ---- Queue ----

/// One quota setting. "-1" (exactly) means unlimited and is kept as -1 even for milli resources.
Status readQueueAmount(const JsonReader& resource, std::string_view key, bool milli, int64_t& out) {
  const JsonReader field = resource.member(key);
  if (!field) return {};
  TESSERA_ASSIGN_OR_RETURN(const std::string text, field.quantityText());
  auto exact = parseQuantityMilli(text);
  if (!exact) {
    // Values too large for milli units may still fit in base units (memory in bytes).
    if (milli) return field.error(exact.error().message);
    auto value = parseQuantityValue(text);
    if (!value) return field.error(value.error().message);
    out = *value;
    return {};
  }
  if (*exact == -1000) {
    out = -1;
    return {};
  }
  if (milli) {
    // Other negatives are kept for validation to report; keep them distinct from the -1 sentinel.
    out = *exact == -1 ? -2 : *exact;
  } else {
    auto value = parseQuantityValue(text);
    if (!value) return field.error(value.error().message);
    out = *value == -1 ? -2 : *value;  // e.g. "-0.5" rounds away from zero to -1: not "unlimited"
  }
  return {};
}

Status readQueueResource(const JsonReader& resource, bool milli, QueueResource& out) {
  if (!resource.json().is_object()) return resource.typeError("an object");
  TESSERA_TRY(resource.forEachMember([](const JsonReader& field) -> Status {
    const std::string_view k = field.key();
    if (k != "quota" && k != "limit" && k != "overQuotaWeight")
      return field.error("unknown field (want quota, limit or overQuotaWeight)");
    return {};
  }));
  TESSERA_TRY(readQueueAmount(resource, "quota", milli, out.quota));
  TESSERA_TRY(readQueueAmount(resource, "limit", milli, out.limit));
  const JsonReader weight = resource.member("overQuotaWeight");
  if (weight) {
    TESSERA_ASSIGN_OR_RETURN(out.overQuotaWeightMilli, weight.quantity(true));
  }
  return {};
}

/// spec.resources: gpu, cpu and memory quota settings; a null entry is not set.
Status readQueueResources(const JsonReader& spec, Queue& q) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader resources, spec.object("resources"));
  return resources.forEachMember([&](const JsonReader& resource) -> Status {
    const std::string_view name = resource.key();
    if (!resource) return {};
    if (name == "gpu") return readQueueResource(resource, true, q.gpu);
    if (name == "cpu") return readQueueResource(resource, true, q.cpu);
    if (name == "memory") return readQueueResource(resource, false, q.memory);
    return resource.error("unknown resource " + quote(name) + " (want gpu, cpu or memory)");
  });
}

}  // namespace

Status readPodGroupBody(const JsonReader& object, PodGroup& pg) {
  if (const std::string* since = pg.meta.annotation(keys::kStaleSinceAnnotation)) {
    if (auto t = parseTime(*since); t.ok()) pg.staleSince = *t;
  }
  TESSERA_ASSIGN_OR_RETURN(const JsonReader spec, object.object("spec"));
  if (spec) {
    // Kept as given even when < 1: validation (with its own event) happens in the scheduler.
    TESSERA_TRY(spec.read("minMember", pg.minMember));
    TESSERA_TRY(spec.read("queue", pg.queue));
    TESSERA_TRY(spec.read("priorityClassName", pg.priorityClassName));
    std::string pre;
    TESSERA_TRY(spec.read("preemptibility", pre));
    TESSERA_ASSIGN_OR_RETURN(pg.preemptibility, preemptibility(spec.member("preemptibility"), pre));
    TESSERA_TRY(readTopologyConstraint(spec, pg.topologyConstraint));
    TESSERA_TRY(spec.forEachObject("subGroups", [&](const JsonReader& e) -> Status {
      SubGroup sg;
      TESSERA_TRY(e.read("name", sg.name));
      TESSERA_TRY(e.read("minMember", sg.minMember));
      TESSERA_TRY(readTopologyConstraint(e, sg.topologyConstraint));
      pg.subGroups.push_back(std::move(sg));
      return {};
    }));
  }
  TESSERA_ASSIGN_OR_RETURN(const JsonReader status, object.object("status"));
  if (status) {
    TESSERA_TRY(status.read("phase", pg.status.phase));
    TESSERA_TRY(status.read("running", pg.status.running));
    TESSERA_TRY(status.read("pending", pg.status.pending));
    TESSERA_TRY(status.read("succeeded", pg.status.succeeded));
    TESSERA_TRY(status.read("failed", pg.status.failed));
    TESSERA_TRY(readConditions(status, "conditions", pg.status.conditions));
  }
  return {};
}

Status readVolcanoPodGroupBody(const JsonReader& object, PodGroup& pg) {
  pg.source = PodGroupSource::Volcano;
  TESSERA_ASSIGN_OR_RETURN(const JsonReader spec, object.object("spec"));
  if (!spec) return {};
  TESSERA_TRY(spec.read("minMember", pg.minMember));
  TESSERA_TRY(spec.read("queue", pg.queue));
  TESSERA_TRY(spec.read("priorityClassName", pg.priorityClassName));
  if (pg.minMember == 0) pg.minMember = 1;  // their "no gang"; negatives are left to validation
  return {};
}

Status readSchedulerPluginsPodGroupBody(const JsonReader& object, PodGroup& pg) {
  pg.source = PodGroupSource::SchedulerPlugins;
  TESSERA_ASSIGN_OR_RETURN(const JsonReader spec, object.object("spec"));
  if (spec) TESSERA_TRY(spec.read("minMember", pg.minMember));
  if (pg.minMember == 0) pg.minMember = 1;
  return {};
}

Status readQueueBody(const JsonReader& object, Queue& q) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader spec, object.object("spec"));
  if (spec) {
    TESSERA_TRY(spec.read("parentQueue", q.parentQueue));
    TESSERA_TRY(spec.read("priority", q.priority));
    TESSERA_TRY(readQueueResources(spec, q));
    TESSERA_TRY(spec.read("preemptMinRuntime", q.preemptMinRuntime));
    TESSERA_TRY(spec.read("reclaimMinRuntime", q.reclaimMinRuntime));
  }
  TESSERA_ASSIGN_OR_RETURN(const JsonReader status, object.object("status"));
  if (status) {
    TESSERA_TRY(readResourceList(status, "allocated", q.status.allocated));
    TESSERA_TRY(readResourceList(status, "requested", q.status.requested));
    TESSERA_TRY(readResourceList(status, "fairShare", q.status.fairShare));
    TESSERA_TRY(readConditions(status, "conditions", q.status.conditions));
  }
  return {};
}

Status readTopologyBody(const JsonReader& object, Topology& t) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader spec, object.object("spec"));
  if (!spec) return {};
  return spec.forEachObject("levels", [&](const JsonReader& e) -> Status {
    TopologyLevel level;
    TESSERA_TRY(e.read("nodeLabel", level.nodeLabel));
    if (level.nodeLabel.empty()) return e.member("nodeLabel").error("required");
    t.levels.push_back(std::move(level));
    return {};
  });
}

}  // namespace tessera::api
