#pragma once
/// `tessera run --shard NAME` (docs/sharding.md): the SchedulingShard object a sharded daemon reads
/// at start (its node pool and config overrides) and the status it writes while it leads.
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/result.h"
#include "tessera/api/shard.h"
#include "tessera/cache/cluster_client.h"
#include "tessera/cache/snapshot.h"

namespace tessera::app {

struct ShardSpec {
  std::string name;
  api::ShardScope scope;   ///< its spec.nodePool ("" : the default shard)
  nlohmann::json config;   ///< spec.config (null: none): merged over the config file
};

/// A SchedulingShard's name and spec, checked: spec.nodePool a string, spec.config an object (both
/// optional). Errors name the object and the field.
api::Result<ShardSpec> shardFromJson(const nlohmann::json& object);

/// Reads SchedulingShard `name` (404: an error saying to create it) and checks that no other
/// SchedulingShard claims the same pool (two shards would decide for the same nodes and pods:
/// 409). Errors name the object and the field (a bad spec: 422); other codes are the API's (0: the
/// server could not be reached), worth retrying.
api::Result<ShardSpec> loadShard(cache::ClusterClient& client, const std::string& name);

/// For an unsharded daemon: no SchedulingShard may exist (it would schedule their pools' nodes
/// too: 409 naming them). A cluster without the CRD (404) has none; one whose RBAC does not let us
/// list them (403) is not checked (a warning). Other errors are the API's.
api::Status checkUnsharded(cache::ClusterClient& client);

/// The status a shard's leader writes: its nodes, queues and pending pods as `snapshot` has them,
/// and `leader` (the Lease holder's identity), at `now`.
nlohmann::json shardStatus(const cache::Snapshot& snapshot, const std::string& leader, api::Time now);

}  // namespace tessera::app
