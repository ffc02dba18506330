#pragma once
// Publishes the ClusterState as an immutable Snapshot per cycle. Private to the cache library.
#include <cstdint>
#include <memory>

#include "cluster_state.h"
#include "snapshot_validation.h"
#include "tessera/api/clock.h"
#include "tessera/cache/snapshot.h"

namespace tessera::cache {

/// Builds each snapshot from the last one: its sorted node and job lists are reused and only the
/// entries the state marked dirty are re-read (one merge pass, O(last + dirty · log n)); queues,
/// priority classes, topologies and conversion errors are copied (small). Then validates it
/// (snapshot_validation.h), objects unchanged since the last snapshot by their last verdict.
///
/// Thread-safety: none. Owned by the scheduling thread (Cache::snapshot()), like the state it reads.
class SnapshotBuilder {
 public:
  /// The next snapshot (generation + 1, taken at `now`); clears the state's dirty sets.
  std::shared_ptr<const Snapshot> build(ClusterState& state, api::Time now);

 private:
  uint64_t generation_ = 0;
  std::shared_ptr<const Snapshot> last_;
  ValidationMemo validation_;  ///< verdicts of last_'s PodGroups and nodes
};

}  // namespace tessera::cache
