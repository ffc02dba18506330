#pragma once
/// The kinds of objects Tessera reads and writes, with their REST coordinates.
#include <optional>
#include <string>
#include <string_view>

namespace tessera::api {

enum class Kind {
  Pod,
  Node,
  PodGroup,
  Queue,
  Topology,
  PriorityClass,
  Namespace,
  ConfigMap,
  Event,
  Lease,
  // Workload kinds the pod grouper reads (src/grouper): owners of pods, never scheduled themselves.
  Job,
  JobSet,
  PyTorchJob,
  TFJob,
  MPIJob,
  XGBoostJob,
  PaddleJob,
  JAXJob,
  TrainJob,
  RayCluster,
  RayJob,
  RayService,
  LeaderWorkerSet,
  // Other schedulers' PodGroups (read only, optional: watched where their CRDs are installed).
  VolcanoPodGroup,
  SchedulerPluginsPodGroup,
  /// A scheduling shard (docs/sharding.md): read by `tessera run --shard NAME`, status written by it.
  SchedulingShard,
};

struct KindInfo {
  Kind kind;
  std::string_view name;        ///< "Pod"
  std::string_view group;       ///< "" for core, "scheduling.tessera.dev", ...
  std::string_view version;     ///< "v1", "v1alpha1"
  std::string_view plural;      ///< "pods"
  bool namespaced;
  std::string apiVersion() const {
    return group.empty() ? std::string(version) : std::string(group) + "/" + std::string(version);
  }
};

inline constexpr std::string_view kTesseraGroup = "scheduling.tessera.dev";

/// Static facts about a kind.
const KindInfo& kindInfo(Kind kind);
/// Looks a kind up by apiVersion and kind name ("v1", "Pod"); nullopt when unknown.
std::optional<Kind> kindFromApiVersion(std::string_view apiVersion, std::string_view kindName);
/// Looks a kind up by its name alone ("Pod", "Queue"); "PodGroup" is Tessera's.
std::optional<Kind> kindFromName(std::string_view kindName);
/// All kinds, in enum order.
inline constexpr Kind kAllKinds[] = {Kind::Pod,       Kind::Node,          Kind::PodGroup,  Kind::Queue,
                                     Kind::Topology,  Kind::PriorityClass, Kind::Namespace, Kind::ConfigMap,
                                     Kind::Event,     Kind::Lease,         Kind::Job,       Kind::JobSet,
                                     Kind::PyTorchJob, Kind::TFJob,        Kind::MPIJob,    Kind::XGBoostJob,
                                     Kind::PaddleJob, Kind::JAXJob,        Kind::TrainJob,  Kind::RayCluster,
                                     Kind::RayJob,    Kind::RayService,    Kind::LeaderWorkerSet,
                                     Kind::VolcanoPodGroup, Kind::SchedulerPluginsPodGroup, Kind::SchedulingShard};

}  // namespace tessera::api
