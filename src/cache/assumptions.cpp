#include "assumptions.h"

namespace tessera::cache {

bool Assumptions::apply(const PodReport& report, const api::Pod* pod, api::Time now, api::Duration ttl) {
  const std::string& key = report.podKey;
  switch (report.op) {
    case PodReport::Op::AssumeBound:
    case PodReport::Op::AssumeBinding: {
      // A pod deleted (or bound elsewhere) meanwhile: nothing to assume.
      if (!pod || !pod->nodeName.empty()) return false;
      const api::Time expiry = report.op == PodReport::Op::AssumeBound ? now + ttl : kInFlight;
      bound_[key] = AssumedBind{report.node, expiry, report.gpuGroups};
      return true;
    }
    case PodReport::Op::BindingDone: {
      auto it = bound_.find(key);
      if (it == bound_.end() || it->second.expiry != kInFlight) return false;  // confirmed already
      it->second.expiry = now + ttl;
      return false;  // nothing visible changes
    }
    case PodReport::Op::BindingFailed:
      bound_.erase(key);
      if (pod) backoff_[key] = report.until;
      return true;
    case PodReport::Op::AssumeEvicted: evicted_.insert(key); return true;
    case PodReport::Op::EvictionFailed: evicted_.erase(key); return true;
    case PodReport::Op::Forget:
      bound_.erase(key);
      evicted_.erase(key);
      return true;
  }
  return false;
}

std::vector<std::string> Assumptions::expireBinds(api::Time now) {
  std::vector<std::string> gone;
  for (const auto& [key, a] : bound_)
    if (a.expiry < now) gone.push_back(key);
  for (const auto& key : gone) bound_.erase(key);
  return gone;
}

std::vector<std::string> Assumptions::endBackoffs(api::Time now) {
  std::vector<std::string> gone;
  for (const auto& [key, until] : backoff_)
    if (until <= now) gone.push_back(key);
  for (const auto& key : gone) backoff_.erase(key);
  return gone;
}

}  // namespace tessera::cache
