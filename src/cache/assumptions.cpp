#include "assumptions.h"

#include <algorithm>

namespace tessera::cache {

bool Assumptions::apply(const PodReport& report, const api::Pod* pod, api::Time now, api::Duration ttl) {
  const std::string& key = report.podKey;
  switch (report.op) {
    case PodReport::Op::AssumeBound:
    case PodReport::Op::AssumeBinding: {
      // A pod deleted (or bound elsewhere) meanwhile: nothing to assume.
      if (!pod || !pod->nodeName.empty()) return false;
      const api::Time expiry = report.op == PodReport::Op::AssumeBound ? now + ttl : kInFlight;
      bound_[key] = AssumedBind{report.node, kInFlight, report.gpuGroups};
      expireAt(key, expiry);
      return true;
    }
    case PodReport::Op::BindingDone: {
      auto it = bound_.find(key);
      if (it == bound_.end() || it->second.expiry != kInFlight) return false;  // confirmed already
      expireAt(key, now + ttl);
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

void Assumptions::expireAt(const std::string& key, api::Time expiry) {
  bound_.at(key).expiry = expiry;
  if (expiry == kInFlight) return;  // the binder reports how it ends
  if (due_.size() > 2 * bound_.size() + slack_) {  // mostly binds confirmed or gone since: rebuilt
    std::vector<Due> live;
    for (const auto& [k, a] : bound_)
      if (a.expiry != kInFlight) live.emplace_back(a.expiry, k);
    due_ = decltype(due_)(std::greater<Due>(), std::move(live));
    return;  // (`key`'s expiry is among them)
  }
  due_.emplace(expiry, key);
}

std::vector<std::string> Assumptions::expireBinds(api::Time now) {
  std::vector<std::string> gone;
  while (!due_.empty() && due_.top().first < now) {
    const Due& next = due_.top();
    auto it = bound_.find(next.second);
    // Still assumed, with this expiry (not confirmed, forgotten or assumed again since).
    if (it != bound_.end() && it->second.expiry == next.first) {
      gone.push_back(next.second);
      bound_.erase(it);
    }
    due_.pop();
  }
  std::sort(gone.begin(), gone.end());  // (each once: a bind is erased when its entry comes up)
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
