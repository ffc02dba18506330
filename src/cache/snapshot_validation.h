#pragma once
// Fills Snapshot::invalid from the snapshot's own objects (api/validation.h): the queue forest,
// every PodGroup of a job, every node's labels. Private to the cache library.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "tessera/api/validation.h"
#include "tessera/cache/snapshot.h"

namespace tessera::cache {

/// The verdicts of earlier snapshots' queues, PodGroups and nodes, by object: an object unchanged
/// since (the same shared object: the cache replaces an object it updates) is not validated again.
/// A PodGroup's verdict also depends on which queues, priority classes and topologies exist: those
/// are dropped when any of them changes. The objects are held, so that an address is never reused
/// for another object while its verdict is kept; entries of objects gone are swept once they are
/// as many as the live ones (no allocation per object per cycle).
struct ValidationMemo {
  template <class T>
  struct Verdict {
    std::shared_ptr<const T> object;
    std::optional<api::Problem> problem;
    uint64_t seen = 0;  ///< the last snapshot that held the object
  };
  template <class T>
  using Verdicts = std::unordered_map<const T*, Verdict<T>>;
  /// What the PodGroups of one chunk of a snapshot's job list (JobList) came to: the same chunk
  /// in the next snapshot holds the same jobs, so its PodGroups are not looked up again.
  struct ChunkVerdict {
    std::vector<api::Problem> problems;
    size_t podGroups = 0;
  };
  uint64_t generation = 0;
  Verdicts<api::PodGroup> podGroups;
  /// By chunk of the last snapshot's job list (alive while the next one is validated: an address
  /// is that chunk).
  std::unordered_map<const void*, ChunkVerdict> chunks;
  Verdicts<api::Node> nodes;
  /// The queue forest's problems, for the queue objects (and conversion errors) they were found in.
  std::vector<const api::Queue*> queues;
  std::vector<std::string> badQueues;
  std::map<std::string, api::Problem> queueProblems;
};

/// Validates the objects of `s` and records every problem in `s.invalid`. O(queues × depth + jobs
/// + nodes) lookups; called once per snapshot. PodGroups and nodes unchanged since `last` (the
/// previous snapshot, null for the first) keep their verdicts from `memo`.
void validateSnapshot(Snapshot& s, const Snapshot* last, ValidationMemo& memo);

}  // namespace tessera::cache
