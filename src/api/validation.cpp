// The validation layer (validation.h). Messages keep the wording the scheduler has always shown
// (scenarios match on it): "parent queue \"x\" does not exist (orphaned)", "parent cycle a -> b -> a".
#include "tessera/api/validation.h"

#include <set>

#include "tessera/api/gpu_request.h"
#include "tessera/api/quantity.h"
#include "tessera/api/resources.h"

namespace tessera::api {

namespace {

std::string quote(const std::string& s) { return "\"" + s + "\""; }

Problem problemOf(Kind kind, const ObjectMeta& meta, std::string field, std::string message) {
  return Problem{kind, meta.namespace_, meta.name, std::move(field), std::move(message)};
}

/// A queue amount as users write it: "unlimited" for -1.
std::string amountText(std::string_view resource, int64_t v) {
  return v == -1 ? std::string("unlimited") : formatResourceAmount(resource, v);
}

bool hasLevels(const TopologyConstraint& c) {
  return !c.requiredTopologyLevel.empty() || !c.preferredTopologyLevel.empty();
}

/// One constraint resolved against its Topology: field name and message of the first problem.
std::optional<std::pair<std::string, std::string>> checkConstraint(const TopologyConstraint& c,
                                                                   const std::string& topologyName,
                                                                   const std::string& path, const PodGroupRefs& refs) {
  if (!hasLevels(c)) return std::nullopt;
  if (topologyName.empty())
    return std::pair{path + ".topology",
                     std::string("required when requiredTopologyLevel or preferredTopologyLevel is set")};
  const Topology* t = refs.topology(topologyName);
  if (!t) return std::pair{path + ".topology", "Topology " + quote(topologyName) + " not found"};
  auto levelIndex = [&](const std::string& label) -> int {
    for (size_t l = 0; l < t->levels.size(); ++l)
      if (t->levels[l].nodeLabel == label) return static_cast<int>(l);
    return -1;
  };
  auto unknown = [&](const char* field, const std::string& label) {
    std::string names;
    for (const auto& l : t->levels) names += (names.empty() ? "" : ", ") + l.nodeLabel;
    return std::pair{path + "." + field,
                     quote(label) + " is not a level of Topology " + topologyName + " (levels: " + names + ")"};
  };
  const int req = c.requiredTopologyLevel.empty() ? -1 : levelIndex(c.requiredTopologyLevel);
  const int pref = c.preferredTopologyLevel.empty() ? -1 : levelIndex(c.preferredTopologyLevel);
  if (!c.requiredTopologyLevel.empty() && req < 0) return unknown("requiredTopologyLevel", c.requiredTopologyLevel);
  if (!c.preferredTopologyLevel.empty() && pref < 0) return unknown("preferredTopologyLevel", c.preferredTopologyLevel);
  if (req >= 0 && pref >= 0 && pref < req)
    return std::pair{path + ".preferredTopologyLevel",
                     quote(c.preferredTopologyLevel) + " is above requiredTopologyLevel " +
                         quote(c.requiredTopologyLevel) + " in Topology " + topologyName};
  return std::nullopt;
}

}  // namespace

std::string Problem::objectRef(Kind kind, const std::string& ns, const std::string& name) {
  return std::string(kindInfo(kind).name) + "/" + (ns.empty() ? "" : ns + "/") + name;
}

std::string Problem::text() const {
  if (field.empty()) return message;
  return std::string(kindInfo(kind).name) + " " + (namespace_.empty() ? "" : namespace_ + "/") + name + ": " + detail();
}

// ---- Queue ----

std::optional<Problem> validateQueueSpec(const Queue& q) {
  struct Res {
    const char* shortName;
    std::string_view resource;
    const QueueResource* r;
  };
  const Res all[] = {
      {"gpu", kResourceGpu, &q.gpu}, {"cpu", kResourceCpu, &q.cpu}, {"memory", kResourceMemory, &q.memory}};
  for (const Res& x : all) {
    const std::string field = std::string("spec.resources.") + x.shortName;
    const QueueResource& r = *x.r;
    // Conversion keeps other negatives distinct from -1 (e.g. "-1m" of GPU becomes -2).
    if (r.quota < -1)
      return problemOf(Kind::Queue, q.meta, field + ".quota",
                       amountText(x.resource, r.quota) + " is invalid (only -1, unlimited, may be negative)");
    if (r.limit < -1)
      return problemOf(Kind::Queue, q.meta, field + ".limit",
                       amountText(x.resource, r.limit) + " is invalid (only -1, no limit, may be negative)");
    if (r.limit >= 0 && r.quota > r.limit)
      return problemOf(Kind::Queue, q.meta, field + ".limit",
                       amountText(x.resource, r.limit) + " is below the quota " + amountText(x.resource, r.quota));
    if (r.overQuotaWeightMilli < 0)
      return problemOf(Kind::Queue, q.meta, field + ".overQuotaWeight",
                       "must not be negative, got " + formatResourceAmount(kResourceCpu, r.overQuotaWeightMilli));
  }
  return std::nullopt;
}

std::map<std::string, Problem> validateQueues(const std::vector<const Queue*>& queues,
                                              const std::map<std::string, Problem>& known) {
  std::map<std::string, const Queue*> byName;
  for (const Queue* q : queues)
    if (q) byName.emplace(q->meta.name, q);
  std::map<std::string, Problem> out = known;
  // Own problems, then missing parents.
  for (const auto& [name, q] : byName) {
    if (out.count(name)) continue;
    if (auto p = validateQueueSpec(*q)) {
      out.emplace(name, std::move(*p));
      continue;
    }
    if (!q->parentQueue.empty() && !byName.count(q->parentQueue))
      out.emplace(name, problemOf(Kind::Queue, q->meta, "spec.parentQueue",
                                  "parent queue " + quote(q->parentQueue) + " does not exist (orphaned)"));
  }
  // Cycles: walk up from every queue; a queue met twice is on a cycle, and so is every queue from
  // it around the loop. Queues that merely lead into a cycle inherit below.
  for (const auto& [start, _] : byName) {
    std::set<std::string> seen;
    for (std::string cur = start; !cur.empty();) {
      auto it = byName.find(cur);
      if (it == byName.end()) break;
      if (!seen.insert(cur).second) {
        std::string text = cur;
        for (std::string d = byName.at(cur)->parentQueue; d != cur; d = byName.at(d)->parentQueue) text += " -> " + d;
        text += " -> " + cur;
        for (std::string d = cur;;) {
          const Queue& dq = *byName.at(d);
          if (!out.count(d))
            out.emplace(d, problemOf(Kind::Queue, dq.meta, "spec.parentQueue", "parent cycle " + text + " (orphaned)"));
          d = dq.parentQueue;
          if (d == cur) break;
        }
        break;
      }
      cur = it->second->parentQueue;
    }
  }
  // Inherited: the nearest invalid ancestor (its own problem, not an inherited one, is quoted).
  std::map<std::string, Problem> inherited;
  for (const auto& [name, q] : byName) {
    if (out.count(name)) continue;
    std::set<std::string> seen{name};
    for (std::string cur = q->parentQueue; !cur.empty() && byName.count(cur) && seen.insert(cur).second;
         cur = byName.at(cur)->parentQueue) {
      auto bad = out.find(cur);
      if (bad != out.end()) {
        inherited.emplace(name, problemOf(Kind::Queue, q->meta, "spec.parentQueue",
                                          "ancestor queue " + cur + ": " + bad->second.detail()));
        break;
      }
    }
  }
  out.merge(inherited);
  return out;
}

// ---- PodGroup ----

std::optional<Problem> validatePodGroup(const PodGroup& pg, const PodGroupRefs& refs) {
  if (pg.minMember < 1)
    return problemOf(podGroupKind(pg), pg.meta, "spec.minMember",
                     "must be at least 1, got " + std::to_string(pg.minMember));
  std::set<std::string> names;
  for (size_t i = 0; i < pg.subGroups.size(); ++i) {
    const SubGroup& sg = pg.subGroups[i];
    const std::string path = "spec.subGroups[" + std::to_string(i) + "]";
    if (sg.name.empty()) return problemOf(podGroupKind(pg), pg.meta, path + ".name", "required");
    if (!names.insert(sg.name).second)
      return problemOf(podGroupKind(pg), pg.meta, path + ".name", quote(sg.name) + " is used by an earlier subgroup");
    if (sg.minMember < 1)
      return problemOf(podGroupKind(pg), pg.meta, path + ".minMember",
                       "must be at least 1, got " + std::to_string(sg.minMember));
  }
  // The queue the PodGroup names: a queue label wins over spec.queue (as the cache resolves it).
  if (refs.queueExists) {
    std::string field = "spec.queue";
    const std::string* queue = &pg.queue;
    for (const char* key : {keys::kQueueLabel, keys::kQueueLabelKai})
      if (const std::string* v = pg.meta.label(key)) {
        field = std::string("metadata.labels[") + key + "]", queue = v;
        break;
      }
    if (!queue->empty() && !refs.queueExists(*queue))
      return problemOf(podGroupKind(pg), pg.meta, field, "Queue " + quote(*queue) + " does not exist");
  }
  if (!pg.priorityClassName.empty() && refs.priorityClassExists && !refs.priorityClassExists(pg.priorityClassName))
    return problemOf(podGroupKind(pg), pg.meta, "spec.priorityClassName",
                     "PriorityClass " + quote(pg.priorityClassName) + " does not exist");
  return validateTopologyConstraints(pg, refs);
}

std::optional<Problem> validateTopologyConstraints(const PodGroup& pg, const PodGroupRefs& refs) {
  if (!refs.topology) return std::nullopt;
  const TopologyConstraint& gc = pg.topologyConstraint;
  if (auto r = checkConstraint(gc, gc.topology, "spec.topologyConstraint", refs))
    return problemOf(podGroupKind(pg), pg.meta, r->first, r->second);
  for (size_t i = 0; i < pg.subGroups.size(); ++i) {
    const TopologyConstraint& sc = pg.subGroups[i].topologyConstraint;
    const std::string path = "spec.subGroups[" + std::to_string(i) + "].topologyConstraint";
    if (!sc.topology.empty() && !gc.topology.empty() && sc.topology != gc.topology)
      return problemOf(podGroupKind(pg), pg.meta, path + ".topology",
                       quote(sc.topology) + " differs from spec.topologyConstraint.topology " + quote(gc.topology));
    if (auto r = checkConstraint(sc, sc.topology.empty() ? gc.topology : sc.topology, path, refs))
      return problemOf(podGroupKind(pg), pg.meta, r->first, r->second);
  }
  return std::nullopt;
}

// ---- Node ----

std::optional<Problem> validateNode(const Node& node) {
  auto mib = nodeGpuMemoryMiB(node);
  if (!mib.ok()) {
    const std::string* v = node.meta.label(keys::kNodeGpuMemoryLabel);
    return problemOf(Kind::Node, node.meta, std::string("metadata.labels[") + keys::kNodeGpuMemoryLabel + "]",
                     quote(v ? *v : "") + " is not a positive integer number of MiB");
  }
  // The node's GPU-sharing settings: an invalid one is ignored (the cluster's applies), and said.
  if (NodeGpuSettings g = nodeGpuSettings(node); !g.errors.empty()) {
    Problem p = problemOf(Kind::Node, node.meta, g.errors.front().field, g.errors.front().message);
    p.ignored = true;
    return p;
  }
  return std::nullopt;
}

}  // namespace tessera::api
