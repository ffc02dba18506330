#pragma once
/// Scheduling shards (docs/sharding.md): a Tessera instance started with `--shard NAME` schedules one
/// node pool. Nodes, pods, PodGroups and Queues carry their pool in the label tessera.dev/node-pool;
/// the default shard (a SchedulingShard without spec.nodePool) takes the objects without it.
#include <optional>
#include <string>

#include "tessera/api/objects.h"

namespace tessera::api {

namespace keys {
inline constexpr const char* kNodePoolLabel = "tessera.dev/node-pool";
}  // namespace keys

/// The node pool one scheduler instance serves. Unsharded (the default) it serves everything.
struct ShardScope {
  /// nullopt: not sharded; "": the default shard (objects without the label); else the label's value.
  std::optional<std::string> pool;

  static ShardScope unsharded() { return {}; }
  static ShardScope of(std::string nodePool) { return ShardScope{std::move(nodePool)}; }

  bool sharded() const { return pool.has_value(); }
  /// The pool `labels` name: the label's value, "" when absent.
  static std::string poolOf(const StringMap& labels);
  /// Whether an object with these labels is this shard's: always unsharded; else its pool is ours.
  bool owns(const StringMap& labels) const { return !pool || poolOf(labels) == *pool; }
  /// The label selector of this shard's objects ("tessera.dev/node-pool=a100", or
  /// "!tessera.dev/node-pool" for the default shard); "" unsharded.
  std::string selector() const;
  /// The label selector of every other shard's objects ("tessera.dev/node-pool!=a100", or
  /// "tessera.dev/node-pool" for the default shard); "" unsharded.
  std::string othersSelector() const;
  /// "node pool a100", "the default node pool (no tessera.dev/node-pool label)", "every node".
  std::string describe() const;
};

}  // namespace tessera::api
