// predicates: the kube-scheduler filters a batch scheduler needs, in kube-scheduler's order:
// node state (NotReady, cordoned), node selector and required node affinity, taints/tolerations
// (NoSchedule, NoExecute), host ports, max pods. Resource fit is the session's own check.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/framework/session.h"
#include "tessera/plugins/factories.h"

namespace tessera::plugins {
namespace {

using api::SelectorOperator;

bool parseInt(const std::string& s, long long& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtoll(s.c_str(), &end, 10);
  return end && *end == '\0';
}

bool matchRequirement(const api::NodeSelectorRequirement& req, const std::string* value) {
  switch (req.op) {
    case SelectorOperator::In:
      return value && std::find(req.values.begin(), req.values.end(), *value) != req.values.end();
    case SelectorOperator::NotIn:
      return !value || std::find(req.values.begin(), req.values.end(), *value) == req.values.end();
    case SelectorOperator::Exists: return value != nullptr;
    case SelectorOperator::DoesNotExist: return value == nullptr;
    case SelectorOperator::Gt:
    case SelectorOperator::Lt: {
      long long have = 0, want = 0;
      if (!value || req.values.size() != 1 || !parseInt(*value, have) || !parseInt(req.values[0], want)) return false;
      return req.op == SelectorOperator::Gt ? have > want : have < want;
    }
  }
  return false;
}

bool matchTerm(const api::NodeSelectorTerm& term, const api::Node& node) {
  if (term.matchExpressions.empty() && term.matchFields.empty()) return false;  // an empty term matches nothing
  for (const auto& req : term.matchExpressions)
    if (!matchRequirement(req, node.meta.label(req.key))) return false;
  for (const auto& req : term.matchFields) {
    if (req.key != "metadata.name") return false;
    if (!matchRequirement(req, &node.meta.name)) return false;
  }
  return true;
}

bool tolerates(const api::Toleration& t, const api::Taint& taint) {
  if (t.effect && *t.effect != taint.effect) return false;
  if (t.key.empty()) return t.op == api::TolerationOperator::Exists;
  if (t.key != taint.key) return false;
  return t.op == api::TolerationOperator::Exists || t.value == taint.value;
}

bool toleratesAll(const std::vector<api::Toleration>& tolerations, const api::Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(), [&](const auto& t) { return tolerates(t, taint); });
}

const char* effectName(api::TaintEffect e) {
  switch (e) {
    case api::TaintEffect::NoSchedule: return "NoSchedule";
    case api::TaintEffect::PreferNoSchedule: return "PreferNoSchedule";
    case api::TaintEffect::NoExecute: return "NoExecute";
  }
  return "";
}

bool portsConflict(const api::HostPort& a, const api::HostPort& b) {
  if (a.port != b.port || a.protocol != b.protocol) return false;
  auto wildcard = [](const std::string& ip) { return ip.empty() || ip == "0.0.0.0" || ip == "::"; };
  return wildcard(a.hostIP) || wildcard(b.hostIP) || a.hostIP == b.hostIP;
}

class PredicatesPlugin final : public framework::Plugin {
 public:
  const std::string& name() const override { return name_; }

  void onSessionOpen(framework::Session& ssn) override {
    // Nodes whose labels break a rule of api/validation.h take no new pods (their pods still
    // count); the node's own event carries the details. Looked up once per session, not per check.
    // A problem the node lives with (an ignored GPU-sharing setting) does not close it.
    std::vector<std::string> invalid;
    if (!ssn.snapshot().invalid.empty())
      for (const auto& sn : ssn.nodes())
        if (const api::Problem* p =
                ssn.snapshot().findInvalid(api::Problem::objectRef(api::Kind::Node, "", sn.name()));
            p && !p->ignored) {
          invalid.resize(ssn.nodes().size());
          std::string what = p->field;  // "metadata.labels[nvidia.com/gpu.memory]" -> "label nvidia.com/gpu.memory"
          if (what.rfind("metadata.labels[", 0) == 0 && what.back() == ']')
            what = "label " + what.substr(16, what.size() - 17);
          invalid[sn.index] = what.empty() ? "node object invalid" : "node has an invalid " + what;
        }
    ssn.addPredicateFn(name_, [invalid = std::move(invalid)](const framework::SessionTask& task,
                                                             const framework::SessionNode& sn, std::string& reason) {
      // A pod that names no node on a node that takes any pod: only the pod slot below can refuse it
      // (the pod's and the node's objects are not read: this is asked of thousands of pairs).
      const bool valid = static_cast<size_t>(sn.index) >= invalid.size() || invalid[sn.index].empty();
      if (task.anyNode && sn.takesAnyPod && valid) {
        if (sn.futurePods() + 1 > sn.allocatablePods) {
          reason = "too many pods";
          return false;
        }
        return true;
      }
      const api::Node& node = sn.node();
      const api::Pod& pod = task.pod();
      if (!node.ready) {
        reason = "node not ready";
        return false;
      }
      if (!valid) {
        reason = invalid[sn.index];
        return false;
      }
      if (node.unschedulable) {
        static const api::Taint kUnschedulable{"node.kubernetes.io/unschedulable", "", api::TaintEffect::NoSchedule};
        if (!toleratesAll(pod.tolerations, kUnschedulable)) {
          reason = "node unschedulable (cordoned)";
          return false;
        }
      }
      for (const auto& [k, v] : pod.nodeSelector) {
        const std::string* have = node.meta.label(k);
        if (!have || *have != v) {
          reason = "node didn't match Pod's node selector";
          return false;
        }
      }
      if (!pod.requiredNodeAffinity.empty() &&
          std::none_of(pod.requiredNodeAffinity.begin(), pod.requiredNodeAffinity.end(),
                       [&](const auto& term) { return matchTerm(term, node); })) {
        reason = "node didn't match Pod's node affinity/selector";
        return false;
      }
      for (const auto& taint : node.taints) {
        if (taint.effect == api::TaintEffect::PreferNoSchedule) continue;
        if (!toleratesAll(pod.tolerations, taint)) {
          reason = "untolerated taint " + taint.key + (taint.value.empty() ? "" : "=" + taint.value) + ":" +
                   effectName(taint.effect);
          return false;
        }
      }
      for (const auto& want : pod.hostPorts) {
        auto clash = [&](const api::HostPort& used) { return portsConflict(want, used); };
        if (std::any_of(sn.info->usedPorts.begin(), sn.info->usedPorts.end(), clash) ||
            std::any_of(sn.addedPorts.begin(), sn.addedPorts.end(), clash)) {
          reason = "host port " + std::to_string(want.port) + "/" + want.protocol + " in use";
          return false;
        }
      }
      // Slots of pods leaving are free by the time a pod pipelined here is bound (Session::fits
      // asks for a slot now before binding it now).
      if (sn.futurePods() + 1 > node.allocatablePods) {
        reason = "too many pods";
        return false;
      }
      return true;
    });
  }

 private:
  std::string name_ = "predicates";
};

}  // namespace

PluginResult makePredicates(framework::Args&) {
  return std::shared_ptr<framework::Plugin>(std::make_shared<PredicatesPlugin>());
}

}  // namespace tessera::plugins
