#pragma once
// What the cache assumes about pods ahead of the watch: binds the binder made or has in flight,
// evictions it started, and pods whose bind failed (hidden until their backoff ends). Private to
// the cache library.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/api/clock.h"
#include "tessera/api/objects.h"

namespace tessera::cache {

/// One report of the binder about a pod (Cache::assume*, binding*, eviction*, forgetAssumed).
struct PodReport {
  enum class Op { AssumeBound, AssumeBinding, BindingDone, BindingFailed, AssumeEvicted, EvictionFailed, Forget };
  Op op = Op::AssumeBound;
  std::string podKey;                  ///< "ns/name"
  std::string node;                    ///< AssumeBound, AssumeBinding: where the pod goes
  std::vector<std::string> gpuGroups;  ///< AssumeBinding of a fractional pod: the groups it gets
  api::Time until;                     ///< BindingFailed: end of the pod's backoff
};

/// A bind the cache counts before the watch shows it.
struct AssumedBind {
  std::string node;
  /// When it is forgotten unless confirmed; Assumptions::kInFlight while the bind is in flight.
  api::Time expiry;
  /// GPU groups the bind gives a fractional pod: counted before the watch shows its labels.
  std::vector<std::string> gpuGroups;
};

/// The assumption tables: assumed binds, assumed evictions, bind backoffs. Thread-free: owned by
/// the ClusterState that consults them, so by the scheduling thread (the binder's reports reach
/// it through the Cache's Inbox, in order with the watch events). Lookups are O(log n).
class Assumptions {
 public:
  /// `slack`: how many more entries than twice the assumed binds the expiry queue may hold before
  /// it is rebuilt (tests make it 0).
  explicit Assumptions(size_t slack = 1024) : slack_(slack) {}

  /// Expiry of a bind still in flight: never (the binder reports its outcome).
  static constexpr api::Time kInFlight{INT64_MAX};

  /// The assumed bind of `podKey`, or null.
  const AssumedBind* bound(const std::string& podKey) const {
    auto it = bound_.find(podKey);
    return it == bound_.end() ? nullptr : &it->second;
  }
  /// True while an eviction of `podKey` is assumed (the pod counts as releasing).
  bool evicting(const std::string& podKey) const { return evicted_.count(podKey) > 0; }
  /// True while `podKey` is in its bind backoff. Reads the clock only when some pod backs off.
  bool backingOff(const std::string& podKey, const api::Clock& clock) const {
    if (backoff_.empty()) return false;
    auto it = backoff_.find(podKey);
    return it != backoff_.end() && clock.now() < it->second;
  }

  /// Records one binder report. `pod`: the pod as the cache holds it now (null when unknown).
  /// Returns true when the pod's status may have changed (the caller re-evaluates it). An assumed
  /// bind of a pod that is gone or already bound is ignored; AssumeBound expires `ttl` after `now`.
  bool apply(const PodReport& report, const api::Pod* pod, api::Time now, api::Duration ttl);

  /// Forgets assumed binds that expired before `now`; returns their pods, sorted. O(those) (and
  /// of the confirmed binds whose expiry passed since): not a scan of every assumed bind.
  std::vector<std::string> expireBinds(api::Time now);
  /// Ends the backoffs due at `now`; returns their pods, sorted.
  std::vector<std::string> endBackoffs(api::Time now);

  // ---- what the watch shows ends assumptions ----

  /// The watch shows the pod bound (ours confirmed, or bound elsewhere): no assumed bind, no backoff.
  void podBound(const std::string& podKey) {
    bound_.erase(podKey);
    backoff_.erase(podKey);
  }
  /// The watch shows the pod terminating or terminated: the assumed eviction is done.
  void podReleasing(const std::string& podKey) { evicted_.erase(podKey); }
  /// The pod is gone: every assumption about it is forgotten.
  void podDeleted(const std::string& podKey) {
    bound_.erase(podKey);
    evicted_.erase(podKey);
    backoff_.erase(podKey);
  }

 private:
  /// Gives `key`'s assumed bind the expiry `expiry`.
  void expireAt(const std::string& key, api::Time expiry);

  std::map<std::string, AssumedBind> bound_;
  /// Assumed binds by expiry, soonest first (expireBinds). An entry whose bind was confirmed,
  /// forgotten or given another expiry since is dropped when it comes up; the queue is rebuilt
  /// from bound_ when such entries outnumber the live ones.
  using Due = std::pair<api::Time, std::string>;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  size_t slack_;
  std::set<std::string> evicted_;
  /// Pods whose bind failed, hidden from snapshots until their backoff ends.
  std::map<std::string, api::Time> backoff_;
};

}  // namespace tessera::cache
