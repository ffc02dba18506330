#pragma once
/// What the scheduler remembers from one cycle to the next, apart from the cluster: the time-aware
/// usage history and since when each gang is stale. One SchedulerState per scheduler (the
/// Scheduler owns it; every session it runs is handed it), so that a config reload, which rebuilds
/// every plugin and action object, resets none of it. A restart keeps it through the cluster: the
/// usage history is saved to a ConfigMap (app::Pipeline) and the stale-gang timer is an annotation
/// on the PodGroup (stalegangeviction). Scheduler thread only, like the session.
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/result.h"

namespace tessera::framework {

/// Each queue's allocation over time, compact enough to be saved: time is cut into buckets of a
/// fixed length (window / 60, at least 1 s; aligned on multiples of it since the epoch) and each
/// bucket keeps the integrals of what every queue held (subtree totals) and of the cluster's
/// capacity over the part of it that was recorded; the last sample is kept as is, because it holds
/// until the next one. Memory and the saved form are O(buckets x queues with usage), whatever the
/// cycle rate. Exact when the window starts on a bucket boundary and without decay; otherwise the
/// oldest bucket counts pro rata, and decay weighs each bucket at the middle of its counted part.
class UsageHistory {
 public:
  using Amounts = std::array<int64_t, 3>;   ///< gpu (milli), cpu (milli), memory (bytes)
  using Integrals = std::array<double, 3>;  ///< amount x milliseconds
  /// What each queue (with its children) held at one time, and what the cluster could hold.
  struct Sample {
    api::Time at;
    std::map<std::string, Amounts> held;
    Amounts capacity{0, 0, 0};
    bool operator==(const Sample&) const = default;
  };
  struct Bucket {
    int64_t start = 0;         ///< unix ms, a multiple of the bucket length
    int64_t from = 0, to = 0;  ///< the recorded part, [from, to), inside the bucket
    std::map<std::string, Integrals> used;
    Integrals capacity{0, 0, 0};
    bool operator==(const Bucket&) const = default;
  };

  /// Folds the time since the last sample (at the last sample's amounts) into the buckets, makes `s`
  /// the last sample and drops buckets that lie entirely before `s.at - window`. A different window
  /// than last time re-buckets what is kept (pro rata). A sample older than the last one replaces it.
  void record(Sample s, api::Duration window);
  /// Per queue, the decayed integral of what it held over [now - window, now), divided by the
  /// cluster's capacity integrated alike (per resource; 0 where the capacity is 0). Queues with no
  /// recorded usage are absent.
  std::map<std::string, Integrals> usage(api::Time now, api::Duration window, api::Duration halfLife) const;

  bool empty() const { return !last_ && buckets_.empty(); }
  const std::optional<Sample>& last() const { return last_; }
  const std::deque<Bucket>& buckets() const { return buckets_; }
  int64_t bucketMillis() const { return bucketMillis_; }
  bool operator==(const UsageHistory&) const = default;

  /// The saved form (a ConfigMap's data, docs/operations.md): {"version": 1, "bucketMillis",
  /// "last": {"at", "held", "capacity"}, "buckets": [{"start", "from", "to", "capacity", "used"}]},
  /// times in unix milliseconds; doubles round-trip exactly.
  nlohmann::json toJson() const;
  /// Reads the saved form; an error names the field. Unknown fields are ignored.
  static api::Result<UsageHistory> fromJson(const nlohmann::json& j);

 private:
  void fold(int64_t from, int64_t to, const Sample& held);
  void rebucket(int64_t bucketMillis);

  int64_t bucketMillis_ = 0;    ///< 0 until the first record
  std::deque<Bucket> buckets_;  ///< ascending start
  std::optional<Sample> last_;
};

/// The bucket length for a window: window / 60, at least one second.
int64_t usageBucketMillis(api::Duration window);

struct SessionStorage;  // session.cpp

/// Arrays kept, emptied, from one session to the next so that their memory is reused rather than
/// freed and faulted in again (issue 16): `borrowKept` gives the kept array to `mine`, emptied;
/// `returnKept` empties `mine` (its elements' own memory is freed, the array's is not) and keeps it
/// unless a larger one is kept already.
template <class Vec>
void borrowKept(Vec& kept, Vec& mine) {
  mine = std::move(kept);
  mine.clear();
}
template <class Vec>
void returnKept(Vec& kept, Vec& mine) {
  mine.clear();
  if (mine.capacity() >= kept.capacity()) kept = std::move(mine);
}

struct SchedulerState {
  /// timeaware: the usage history (restored from its ConfigMap at start and on becoming leader).
  UsageHistory usage;
  /// timeaware: set when the history is due to be saved (its saveInterval passed); the pipeline
  /// hands it to the status writer and clears it.
  bool usageSaveDue = false;
  api::Time usageSavedAt{0};  ///< the last time usageSaveDue was set
  /// stalegangeviction: since when each stale gang (job key) is stale, for the cycles before its
  /// PodGroup's annotation (tessera.dev/stale-since) is written and seen; the annotation wins.
  std::map<std::string, api::Time> staleSince;
  /// The session's largest arrays (per node, job and pod), emptied but not freed between cycles:
  /// each session takes them when it is built and gives them back when it is destroyed, so a
  /// cycle writes into memory the last cycle already faulted in, whatever the allocator does with
  /// freed blocks (issue 16). Null until the first session.
  std::shared_ptr<SessionStorage> sessionStorage;
  /// A session of at least this many jobs builds them on two threads at once, chunk by chunk, the
  /// second a helper thread kept in sessionStorage (Session::buildState); tests set 1, or SIZE_MAX
  /// for one thread.
  size_t splitBuildJobs = 2048;
  /// Tests: creating that helper thread fails, as std::thread's constructor may when the process
  /// can have no more threads (the session then builds and closes on one).
  bool helperThreadFails = false;
};

}  // namespace tessera::framework
