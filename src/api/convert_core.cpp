// Core Kubernetes kinds from JSON: Pod, Node, PriorityClass, ConfigMap (Namespace is metadata only).
// Metadata is read by the entry points in convert.cpp; these read the rest.
#include <map>
#include <string>

#include "converters.h"
#include "tessera/api/quantity.h"

namespace tessera::api {
namespace {

// ---- Pod ----

Result<SelectorOperator> selectorOperator(const JsonReader& field, const std::string& op) {
  if (op == "In") return SelectorOperator::In;
  if (op == "NotIn") return SelectorOperator::NotIn;
  if (op == "Exists") return SelectorOperator::Exists;
  if (op == "DoesNotExist") return SelectorOperator::DoesNotExist;
  if (op == "Gt") return SelectorOperator::Gt;
  if (op == "Lt") return SelectorOperator::Lt;
  return field.error("unknown operator " + quote(op) + " (want In, NotIn, Exists, DoesNotExist, Gt or Lt)");
}

Status readSelectorRequirements(const JsonReader& term, std::string_view key,
                                std::vector<NodeSelectorRequirement>& out) {
  return term.forEachObject(key, [&](const JsonReader& e) -> Status {
    NodeSelectorRequirement r;
    TESSERA_TRY(e.read("key", r.key));
    std::string op;
    TESSERA_TRY(e.read("operator", op));
    TESSERA_ASSIGN_OR_RETURN(r.op, selectorOperator(e.member("operator"), op));
    TESSERA_TRY(e.read("values", r.values));
    out.push_back(std::move(r));
    return {};
  });
}

/// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.
Status readAffinity(const JsonReader& spec, Pod& pod) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader affinity, spec.object("affinity"));
  if (!affinity) return {};
  TESSERA_ASSIGN_OR_RETURN(const JsonReader nodeAffinity, affinity.object("nodeAffinity"));
  if (!nodeAffinity) return {};
  TESSERA_ASSIGN_OR_RETURN(const JsonReader required,
                           nodeAffinity.object("requiredDuringSchedulingIgnoredDuringExecution"));
  if (!required) return {};
  return required.forEachObject("nodeSelectorTerms", [&](const JsonReader& t) -> Status {
    NodeSelectorTerm term;
    TESSERA_TRY(readSelectorRequirements(t, "matchExpressions", term.matchExpressions));
    TESSERA_TRY(readSelectorRequirements(t, "matchFields", term.matchFields));
    pod.requiredNodeAffinity.push_back(std::move(term));
    return {};
  });
}

Status readTolerations(const JsonReader& spec, Pod& pod) {
  return spec.forEachObject("tolerations", [&](const JsonReader& e) -> Status {
    Toleration t;
    TESSERA_TRY(e.read("key", t.key));
    std::string op;
    TESSERA_TRY(e.read("operator", op));
    if (op.empty() || op == "Equal") t.op = TolerationOperator::Equal;
    else if (op == "Exists") t.op = TolerationOperator::Exists;
    else return e.member("operator").error("unknown operator " + quote(op) + " (want Equal or Exists)");
    TESSERA_TRY(e.read("value", t.value));
    std::string effect;
    TESSERA_TRY(e.read("effect", effect));
    if (!effect.empty()) {
      TESSERA_ASSIGN_OR_RETURN(t.effect, taintEffect(e.member("effect"), effect));
    }
    TESSERA_TRY(e.read("tolerationSeconds", t.tolerationSeconds));
    pod.tolerations.push_back(std::move(t));
    return {};
  });
}

/// Kubernetes' IsExtendedResourceName, simplified: domain-prefixed and not kubernetes.io/ or requests.*.
bool isExtendedResource(std::string_view name) {
  return name.find('/') != std::string_view::npos && name.find("kubernetes.io/") == std::string_view::npos &&
         name.substr(0, 9) != "requests.";
}

/// One entry of a container's requests or limits, in thousandths. Negative amounts are errors, and so
/// are fractions of extended resources.
Result<int64_t> containerAmount(const JsonReader& entry) {
  TESSERA_ASSIGN_OR_RETURN(const std::string text, entry.quantityText());
  auto milli = parseQuantityMilli(text);
  if (!milli) return entry.error(milli.error().message);
  if (*milli < 0) return entry.error("negative quantity " + quote(text));
  const std::string_view name = entry.key();
  if (isExtendedResource(name) && *milli % 1000 != 0) {
    std::string hint = name == kResourceGpu ? " (use the gpu-fraction annotation to share a GPU)" : "";
    return entry.error("extended resource " + std::string(name) + " must be a whole number, got " + quote(text) + hint);
  }
  return *milli;
}

/// One container's effective requests: requests, with each absent request defaulted to its limit.
/// Extended resources must be whole numbers and, when both are given, request == limit.
Status containerRequests(const JsonReader& container, Resources& out) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader res, container.object("resources"));
  if (!res) return {};
  TESSERA_ASSIGN_OR_RETURN(const JsonReader requests, res.object("requests"));
  TESSERA_ASSIGN_OR_RETURN(const JsonReader limits, res.object("limits"));
  // Limits first, so requests can be compared against them.
  std::map<std::string, int64_t, std::less<>> limitMilli;
  std::map<std::string, int64_t, std::less<>> amounts;  // name -> milli
  TESSERA_TRY(limits.forEachMember([&](const JsonReader& entry) -> Status {
    TESSERA_ASSIGN_OR_RETURN(const int64_t m, containerAmount(entry));
    limitMilli[std::string(entry.key())] = m;
    amounts[std::string(entry.key())] = m;  // the request defaults to the limit
    return {};
  }));
  TESSERA_TRY(requests.forEachMember([&](const JsonReader& entry) -> Status {
    const std::string_view name = entry.key();
    TESSERA_ASSIGN_OR_RETURN(const int64_t m, containerAmount(entry));
    auto lim = limitMilli.find(name);
    if (isExtendedResource(name) && lim != limitMilli.end() && lim->second != m)
      return entry.error("extended resource " + std::string(name) + " request " +
                         formatResourceAmount(kResourceGpu, m) + " must equal its limit " +
                         formatResourceAmount(kResourceGpu, lim->second));
    amounts[std::string(name)] = m;
    return {};
  }));
  for (const auto& [name, milli] : amounts) {
    if (isMilliResource(name)) {
      out.set(name, milli);
    } else {
      // Base units rounded up, as Quantity.Value() (milli is itself rounded up, so this is exact).
      out.set(name, milli / 1000 + (milli % 1000 != 0 ? 1 : 0));
    }
  }
  return {};
}

/// kube-scheduler's PodRequests: max(sum(containers), peak of the init containers) + overhead.
Status podRequests(const JsonReader& spec, Pod& pod) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader containers, spec.list("containers"));
  TESSERA_ASSIGN_OR_RETURN(const JsonReader inits, spec.list("initContainers"));
  Resources sum;
  TESSERA_TRY(containers.forEachObject([&](const JsonReader& ct) -> Status {
    Resources r;
    TESSERA_TRY(containerRequests(ct, r));
    sum += r;
    return {};
  }));
  // Restartable (sidecar) init containers keep running, so they add to the containers' sum and to
  // every later init container's peak.
  Resources initPeak, sidecars;
  TESSERA_TRY(inits.forEachObject([&](const JsonReader& ct) -> Status {
    Resources r;
    TESSERA_TRY(containerRequests(ct, r));
    std::string restartPolicy;
    TESSERA_TRY(ct.read("restartPolicy", restartPolicy));
    if (restartPolicy == "Always") {
      sum += r;
      sidecars += r;
      initPeak.maxWith(sidecars);
    } else {
      initPeak.maxWith(r + sidecars);
    }
    return {};
  }));
  sum.maxWith(initPeak);
  Resources overhead;
  TESSERA_TRY(readResourceList(spec, "overhead", overhead));
  sum += overhead;
  sum.normalize();
  pod.requests = std::move(sum);
  return {};
}

/// Host ports of the containers. Runs after podRequests, which has checked that spec.containers is a
/// list of objects.
Status readHostPorts(const JsonReader& spec, Pod& pod) {
  return spec.forEachObject("containers", [&](const JsonReader& ct) -> Status {
    return ct.forEachObject("ports", [&](const JsonReader& port) -> Status {
      int32_t hostPort = 0;
      TESSERA_TRY(port.read("hostPort", hostPort));
      if (hostPort <= 0) return {};
      if (hostPort > 65535) return port.member("hostPort").error("port " + std::to_string(hostPort) + " out of range");
      HostPort hp;
      hp.port = hostPort;
      TESSERA_TRY(port.read("protocol", hp.protocol));
      if (hp.protocol.empty()) hp.protocol = "TCP";
      TESSERA_TRY(port.read("hostIP", hp.hostIP));
      pod.hostPorts.push_back(std::move(hp));
      return {};
    });
  });
}

/// Whether every container carries the webhook's hard-isolation env entry (keys::kIsolationRegionEnv).
Status readIsolationWiring(const JsonReader& spec, Pod& pod) {
  size_t containers = 0, wired = 0;
  TESSERA_TRY(spec.forEachObject("containers", [&](const JsonReader& ct) -> Status {
    ++containers;
    bool found = false;
    TESSERA_TRY(ct.forEachObject("env", [&](const JsonReader& e) -> Status {
      std::string name;
      TESSERA_TRY(e.read("name", name));
      found = found || name == keys::kIsolationRegionEnv;
      return {};
    }));
    wired += found;
    return {};
  }));
  pod.hardIsolationWired = containers > 0 && wired == containers;
  return {};
}

Result<PodPhase> podPhase(const JsonReader& field, const std::string& phase) {
  if (phase.empty() || phase == "Pending") return PodPhase::Pending;
  if (phase == "Running") return PodPhase::Running;
  if (phase == "Succeeded") return PodPhase::Succeeded;
  if (phase == "Failed") return PodPhase::Failed;
  if (phase == "Unknown") return PodPhase::Unknown;
  return field.error("unknown phase " + quote(phase));
}

// ---- Node ----

Status readTaints(const JsonReader& spec, Node& node) {
  return spec.forEachObject("taints", [&](const JsonReader& e) -> Status {
    Taint t;
    TESSERA_TRY(e.read("key", t.key));
    TESSERA_TRY(e.read("value", t.value));
    std::string effect;
    TESSERA_TRY(e.read("effect", effect));
    if (effect.empty()) return e.member("effect").error("required");
    TESSERA_ASSIGN_OR_RETURN(t.effect, taintEffect(e.member("effect"), effect));
    node.taints.push_back(std::move(t));
    return {};
  });
}

}  // namespace

Status readPodBody(const JsonReader& object, Pod& pod) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader spec, object.object("spec"));
  if (spec) {
    TESSERA_TRY(spec.read("schedulerName", pod.schedulerName));
    TESSERA_TRY(spec.read("nodeName", pod.nodeName));
    TESSERA_TRY(spec.read("priorityClassName", pod.priorityClassName));
    TESSERA_TRY(spec.read("priority", pod.priority));
    TESSERA_TRY(spec.read("nodeSelector", pod.nodeSelector));
    TESSERA_TRY(readAffinity(spec, pod));
    TESSERA_TRY(readTolerations(spec, pod));
    TESSERA_TRY(podRequests(spec, pod));
    TESSERA_TRY(readHostPorts(spec, pod));
    TESSERA_TRY(readIsolationWiring(spec, pod));
    TESSERA_TRY(spec.read("terminationGracePeriodSeconds", pod.terminationGracePeriodSeconds));
  }
  TESSERA_ASSIGN_OR_RETURN(const JsonReader status, object.object("status"));
  if (status) {
    std::string phase;
    TESSERA_TRY(status.read("phase", phase));
    TESSERA_ASSIGN_OR_RETURN(pod.phase, podPhase(status.member("phase"), phase));
    TESSERA_TRY(status.read("startTime", pod.startTime));
    TESSERA_TRY(readConditions(status, "conditions", pod.conditions));
  }
  return {};
}

Status readNodeBody(const JsonReader& object, Node& node) {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader spec, object.object("spec"));
  if (spec) {
    TESSERA_TRY(spec.read("unschedulable", node.unschedulable));
    TESSERA_TRY(readTaints(spec, node));
  }
  TESSERA_ASSIGN_OR_RETURN(const JsonReader status, object.object("status"));
  if (status) {
    std::optional<int64_t> capPods, allocPods;
    TESSERA_TRY(readResourceList(status, "capacity", node.capacity, &capPods));
    if (status.member("allocatable")) {
      TESSERA_TRY(readResourceList(status, "allocatable", node.allocatable, &allocPods));
    } else {
      node.allocatable = node.capacity;
      allocPods = capPods;
    }
    node.allocatablePods = allocPods.value_or(110);
    node.capacity.normalize();
    node.allocatable.normalize();
    TESSERA_TRY(readConditions(status, "conditions", node.conditions));
    for (const auto& cond : node.conditions)
      if (cond.type == "Ready") node.ready = cond.status == "True";
  }
  return {};
}

Status readPriorityClassBody(const JsonReader& object, PriorityClass& pc) {
  if (!object.member("value")) return object.member("value").error("required");
  TESSERA_TRY(object.read("value", pc.value));
  TESSERA_TRY(object.read("globalDefault", pc.globalDefault));
  TESSERA_TRY(object.read("preemptionPolicy", pc.preemptionPolicy));
  if (pc.preemptionPolicy.empty()) pc.preemptionPolicy = "PreemptLowerPriority";
  if (pc.preemptionPolicy != "PreemptLowerPriority" && pc.preemptionPolicy != "Never")
    return object.member("preemptionPolicy")
        .error("unknown value " + quote(pc.preemptionPolicy) + " (want PreemptLowerPriority or Never)");
  return {};
}

Status readConfigMapBody(const JsonReader& object, ConfigMap& cm) { return object.read("data", cm.data); }

}  // namespace tessera::api
