#pragma once
// Fills Snapshot::invalid from the snapshot's own objects (api/validation.h): the queue forest,
// every PodGroup of a job, every node's labels. Private to the cache library.
#include "tessera/cache/snapshot.h"

namespace tessera::cache {

/// Validates the objects of `s` and records every problem in `s.invalid`. O(queues × depth + jobs
/// + nodes) lookups; called once per snapshot.
void validateSnapshot(Snapshot& s);

}  // namespace tessera::cache
