#pragma once
// The domains of one Topology over one session's nodes, and what a domain can hold. Private to the
// topology plugin.
//
// A node belongs to the tree only when it carries every level's label. Its domain at level l is
// the path of its label values from the top level down to l ("zone=z1/rack=r2"), so two racks
// named alike in different zones are different domains.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/api/objects.h"
#include "tessera/api/resources.h"
#include "tessera/framework/session.h"

namespace tessera::plugins::topology {

struct Domain {
  std::string id;          ///< path "zone=z1/rack=r2" (levels by their short names)
  int parent = -1;         ///< index at the level above; -1 at the top level
  std::vector<int> nodes;  ///< session node indices, ascending
  int idOrder = 0;         ///< its place among its level's domains by id: ties compare these, not ids
};

struct Level {
  std::string label;      ///< the node label key, as in the Topology
  std::string shortName;  ///< the key after its last '/', or the whole key when two levels share it
  std::vector<Domain> domains;  ///< in order of their first node (node names ascending)
  std::vector<int> nodeDomain;  ///< session node index -> domain index, -1 outside the tree
};

/// What a set of nodes can hold of some pods: how many, and how much is free there.
struct Room {
  int64_t pods = 0;
  int64_t freeGpu = 0;  ///< milli-GPUs of future idle (idle + releasing - promised)
  int64_t freeCpu = 0;  ///< milli-CPU of future idle
};

/// Pods of one request shape, `count` of them.
struct PodClass {
  api::Resources request;
  int64_t count = 0;
  std::string key;  ///< the request as text: equal requests, equal keys
  /// A fractional pod on one device: its GPU share is counted in the nodes' GPU groups (it may
  /// join an existing shared GPU) and whole GPUs, not in `request`'s milli-GPUs. Null otherwise.
  const api::PodGpuSpec* share = nullptr;
};

/// What a node offers: its future idle room (free now or releasing), its idle room now (releasing
/// resources not counted), or everything it has for the scheduler's pods (running pods evicted:
/// the room the victim actions search in).
enum class Basis { Free, Now, Capacity };

/// Resources already promised on some nodes by an earlier decision of the same plan (subgroups
/// placed before this one); nodes not in it are as the session says.
struct Overlay {
  std::map<int, std::pair<api::Resources, int64_t>> used;  ///< node -> (resources, pods)
};

/// Free future-idle resources and pod slots of a node, minus what `overlay` promised there.
/// Nodes that are not ready or are cordoned have nothing free.
std::pair<api::Resources, int64_t> freeOf(const framework::SessionNode& n, const Overlay* overlay,
                                          Basis basis = Basis::Free);
/// How many pods of `request` fit in `free` (INT64_MAX when the request is all zero).
int64_t fitCount(const api::Resources& free, const api::Resources& request);
/// `r -= request * k`.
void subtractTimes(api::Resources& r, const api::Resources& request, int64_t k);
/// A stable text key for a request (and a fractional pod's share).
std::string requestKey(const api::Resources& r, const api::PodGpuSpec* share = nullptr);

/// Room of `nodes` for `classes` (taken largest first, node by node, first fit). When `commit`
/// is set, what fits is recorded in it as promised. Cost: O(nodes x classes).
Room roomOf(const std::vector<int>& nodes, const std::vector<PodClass>& classes,
            const std::vector<framework::SessionNode>& sessionNodes, const Overlay* overlay, Overlay* commit,
            Basis basis = Basis::Free);

/// The domain tree of one Topology over the session's nodes, with a cache of rooms per (request
/// shape, domain) invalidated per domain when one of its nodes changes. Membership depends only on
/// the Topology and the Node objects, so the plugin keeps a tree across sessions while those are
/// the same objects (resetSession() drops the per-session rooms).
class DomainTree {
 public:
  /// Holds on to the Topology and Node objects it was built from (so that builtFrom() compares
  /// live objects, never a reused address).
  DomainTree(std::shared_ptr<const api::Topology> topology, const std::vector<framework::SessionNode>& nodes);

  /// Whether the tree was built from exactly these Topology and Node objects, in this order.
  bool builtFrom(const api::Topology* topology, const std::vector<framework::SessionNode>& nodes) const;
  /// Forgets the rooms of the previous session.
  void resetSession();

  const std::string& name() const { return name_; }
  const std::vector<Level>& levels() const { return levels_; }
  const Level& level(int l) const { return levels_[l]; }
  /// Index of the level whose nodeLabel is `label`, or -1.
  int levelOf(const std::string& label) const;
  /// Nodes carrying every level's label.
  int nodesInTree() const { return nodesInTree_; }
  /// Whether domain `d` of level `l` lies inside domain `scope` of level `scopeLevel`
  /// (scopeLevel < 0: the whole cluster).
  bool within(int l, int d, int scopeLevel, int scope) const;
  /// "topology.example.com/rack, kubernetes.io/hostname": every level's label key.
  std::string levelNames() const;

  struct CacheEntry {
    Room room;
    static constexpr uint32_t kNever = UINT32_MAX;
    uint32_t version = kNever;  ///< the domain's version when computed (never kNever once computed)
  };
  using RoomCache = std::vector<std::vector<CacheEntry>>;  ///< [level][domain]
  /// The room cache for pods shaped like `cls` on `basis` (created empty on first use).
  RoomCache& roomCache(const PodClass& cls, Basis basis = Basis::Free);
  /// Room of domain `d` at level `l` for pods shaped like `cls` (count ignored: as many as fit),
  /// from `cache` (roomCache(cls)) until a node of the domain changes (see nodeChanged).
  const Room& cachedRoom(RoomCache& cache, int l, int d, const PodClass& cls,
                         const std::vector<framework::SessionNode>& nodes, Basis basis = Basis::Free);
  /// Invalidates the cached rooms of every domain holding node `n`.
  void nodeChanged(int n);

 private:
  std::string name_;
  std::shared_ptr<const api::Topology> topology_;
  std::vector<std::shared_ptr<const api::Node>> nodeObjects_;
  std::vector<Level> levels_;
  int nodesInTree_ = 0;
  std::vector<std::vector<uint32_t>> versions_;  ///< [level][domain]
  std::map<std::string, RoomCache, std::less<>> cache_;  ///< request key -> rooms
};

}  // namespace tessera::plugins::topology
