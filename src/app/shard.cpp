#include "tessera/app/shard.h"

#include "tessera/api/clock.h"
#include "tessera/api/log.h"

namespace tessera::app {

api::Result<ShardSpec> shardFromJson(const nlohmann::json& object) {
  ShardSpec s;
  if (!object.is_object()) return api::makeError("SchedulingShard: not an object", 422);
  if (auto meta = object.find("metadata"); meta != object.end() && meta->is_object())
    if (auto name = meta->find("name"); name != meta->end() && name->is_string()) s.name = name->get<std::string>();
  const std::string what = "SchedulingShard " + s.name + ": ";
  auto specAt = object.find("spec");
  const nlohmann::json spec = specAt == object.end() || specAt->is_null() ? nlohmann::json::object() : *specAt;
  if (!spec.is_object()) return api::makeError(what + "spec: must be an object", 422);
  std::string pool;
  if (auto it = spec.find("nodePool"); it != spec.end() && !it->is_null()) {
    if (!it->is_string()) return api::makeError(what + "spec.nodePool: must be a string", 422);
    pool = it->get<std::string>();
  }
  s.scope = api::ShardScope::of(pool);
  if (auto it = spec.find("config"); it != spec.end() && !it->is_null()) {
    if (!it->is_object()) return api::makeError(what + "spec.config: must be an object (config file keys)", 422);
    s.config = *it;
  }
  return s;
}

api::Result<ShardSpec> loadShard(cache::ClusterClient& client, const std::string& name) {
  auto object = client.get(api::Kind::SchedulingShard, "", name);
  if (!object.ok()) {
    if (object.error().code == 404)
      return api::makeError("SchedulingShard " + name +
                                " not found: create it first (kubectl apply -f; docs/sharding.md), or run without --shard",
                            404);
    return api::makeError("reading SchedulingShard " + name + ": " + object.error().message, object.error().code);
  }
  TESSERA_ASSIGN_OR_RETURN(ShardSpec spec, shardFromJson(*object));
  auto all = client.list(api::Kind::SchedulingShard);
  if (!all.ok()) return api::makeError("listing SchedulingShards: " + all.error().message, all.error().code);
  for (const auto& other : all->items) {
    auto o = shardFromJson(other);
    if (!o.ok() || o->name == spec.name) continue;
    if (*o->scope.pool == *spec.scope.pool)
      return api::makeError("SchedulingShard " + spec.name + " and SchedulingShard " + o->name + " both schedule " +
                            spec.scope.describe() + " (spec.nodePool): one pool, one shard",
                            409);
  }
  return spec;
}

api::Status checkUnsharded(cache::ClusterClient& client) {
  auto all = client.list(api::Kind::SchedulingShard);
  if (!all.ok()) {
    if (all.error().code == 404) return api::Status::success();  // the CRD is not installed: no shards
    if (all.error().code == 403) {  // RBAC of an older install: not checked, said once
      log::warning("cannot list SchedulingShards (", all.error().message,
                   "): not checking that no scheduling shard runs beside this unsharded scheduler");
      return api::Status::success();
    }
    return api::makeError("listing SchedulingShards: " + all.error().message, all.error().code);
  }
  std::string names;
  for (const auto& item : all->items)
    if (auto s = shardFromJson(item); s.ok()) names += (names.empty() ? "" : ", ") + s->name;
  if (names.empty()) return api::Status::success();
  return api::makeError("SchedulingShards exist (" + names +
                            "): an unsharded scheduler beside them would place pods on their nodes too; run with "
                            "--shard NAME (a SchedulingShard without spec.nodePool is the default shard), or delete "
                            "them (docs/sharding.md)",
                        409);
}

nlohmann::json shardStatus(const cache::Snapshot& snapshot, const std::string& leader, api::Time now) {
  int64_t nodes = 0, queues = 0, pending = 0;
  for (const auto& n : snapshot.nodes)
    if (n->node) ++nodes;
  for (const auto& [name, q] : snapshot.queues)
    if (q->queue) ++queues;
  for (const auto& j : snapshot.jobs) pending += j->pendingCount;
  return {{"nodes", nodes},
          {"queues", queues},
          {"pendingPods", pending},
          {"leader", leader},
          {"lastUpdateTime", api::formatTime(now)}};
}

}  // namespace tessera::app
