#pragma once
// A pod's placement key: what it asks for and where it may go (requests, node selector, required
// node affinity, tolerations, host ports, the annotations Tessera's plugins read). Pods with equal
// keys place alike, so the session shares one node ranking and one failure tally among them
// (framework/placement.cpp). The cache builds each pod's key once, when the pod arrives, and
// interns it: pods of one shape share one string, and equal keys are one pointer.
#include <memory>
#include <string>
#include <unordered_map>

#include "tessera/api/objects.h"

namespace tessera::cache {

/// The key of `pod` asking for `request` (its charged request: TaskInfo::request).
std::string podPlacementKey(const api::Pod& pod, const api::Resources& request);

/// A task's key: podPlacementKey, made the pod's own (`podKey`) when its GPU annotations are
/// refused (`gpuSpecError`): such a pod is refused in its own words (its reason names it), so it
/// shares no placement class with another pod and nothing decided for a class (rankings, failures
/// of jobs alike: Session::jobSignature) is taken for it from another or given to one.
std::string taskPlacementKey(const api::Pod& pod, const api::Resources& request, const std::string& podKey,
                             const std::string& gpuSpecError);

/// A PodGroup's topology constraint as one string (each part with its length: unambiguous), empty
/// for none: interned (JobInfo::topologyKey), jobs with equal constraints share one pointer.
std::string topologyKeyOf(const api::TopologyConstraint& tc);

/// Interns keys: equal keys get one shared string while any holder keeps it. Entries nobody holds
/// are dropped now and then (the table never grows past twice what is held).
class KeyInterner {
 public:
  std::shared_ptr<const std::string> intern(std::string key);
  size_t size() const { return keys_.size(); }

 private:
  std::unordered_map<std::string, std::weak_ptr<const std::string>> keys_;
  size_t pruneAt_ = 1024;
};

}  // namespace tessera::cache
