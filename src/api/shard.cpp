#include "tessera/api/shard.h"

namespace tessera::api {

std::string ShardScope::poolOf(const StringMap& labels) {
  auto it = labels.find(std::string_view(keys::kNodePoolLabel));
  return it == labels.end() ? std::string() : it->second;
}

std::string ShardScope::selector() const {
  if (!pool) return {};
  return pool->empty() ? "!" + std::string(keys::kNodePoolLabel) : std::string(keys::kNodePoolLabel) + "=" + *pool;
}

std::string ShardScope::othersSelector() const {
  if (!pool) return {};
  return pool->empty() ? std::string(keys::kNodePoolLabel) : std::string(keys::kNodePoolLabel) + "!=" + *pool;
}

std::string ShardScope::describe() const {
  if (!pool) return "every node";
  if (pool->empty()) return "the default node pool (no " + std::string(keys::kNodePoolLabel) + " label)";
  return "node pool " + *pool;
}

}  // namespace tessera::api
