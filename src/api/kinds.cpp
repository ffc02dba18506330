#include "tessera/api/kinds.h"

#include <iterator>

#include "tessera/api/result.h"

namespace tessera::api {
namespace {

// Indexed by Kind (enum order); checked by the static_assert and by unit tests.
constexpr KindInfo kKinds[] = {
    {Kind::Pod, "Pod", "", "v1", "pods", true},
    {Kind::Node, "Node", "", "v1", "nodes", false},
    {Kind::PodGroup, "PodGroup", kTesseraGroup, "v1alpha1", "podgroups", true},
    {Kind::Queue, "Queue", kTesseraGroup, "v1alpha1", "queues", false},
    {Kind::Topology, "Topology", kTesseraGroup, "v1alpha1", "topologies", false},
    {Kind::PriorityClass, "PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", false},
    {Kind::Namespace, "Namespace", "", "v1", "namespaces", false},
    {Kind::ConfigMap, "ConfigMap", "", "v1", "configmaps", true},
    {Kind::Event, "Event", "", "v1", "events", true},
    {Kind::Lease, "Lease", "coordination.k8s.io", "v1", "leases", true},
    {Kind::Job, "Job", "batch", "v1", "jobs", true},
    {Kind::JobSet, "JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", true},
    {Kind::PyTorchJob, "PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", true},
    {Kind::TFJob, "TFJob", "kubeflow.org", "v1", "tfjobs", true},
    {Kind::MPIJob, "MPIJob", "kubeflow.org", "v1", "mpijobs", true},
    {Kind::XGBoostJob, "XGBoostJob", "kubeflow.org", "v1", "xgboostjobs", true},
    {Kind::PaddleJob, "PaddleJob", "kubeflow.org", "v1", "paddlejobs", true},
    {Kind::JAXJob, "JAXJob", "kubeflow.org", "v1", "jaxjobs", true},
    {Kind::TrainJob, "TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", true},
    {Kind::RayCluster, "RayCluster", "ray.io", "v1", "rayclusters", true},
    {Kind::RayJob, "RayJob", "ray.io", "v1", "rayjobs", true},
    {Kind::RayService, "RayService", "ray.io", "v1", "rayservices", true},
    {Kind::LeaderWorkerSet, "LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", true},
    {Kind::VolcanoPodGroup, "PodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups", true},
    {Kind::SchedulerPluginsPodGroup, "PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", true},
    {Kind::SchedulingShard, "SchedulingShard", kTesseraGroup, "v1alpha1", "schedulingshards", false},
};
static_assert(std::size(kKinds) == std::size(kAllKinds));

}  // namespace

const KindInfo& kindInfo(Kind kind) {
  const auto i = static_cast<size_t>(kind);
  TESSERA_ASSERT(i < std::size(kKinds) && kKinds[i].kind == kind);
  return kKinds[i];
}

std::optional<Kind> kindFromApiVersion(std::string_view apiVersion, std::string_view kindName) {
  for (const auto& k : kKinds) {
    if (k.name != kindName) continue;
    const auto slash = apiVersion.find('/');
    const std::string_view group = slash == std::string_view::npos ? std::string_view() : apiVersion.substr(0, slash);
    const std::string_view version = slash == std::string_view::npos ? apiVersion : apiVersion.substr(slash + 1);
    if (group == k.group && version == k.version) return k.kind;
  }
  return std::nullopt;
}

std::optional<Kind> kindFromName(std::string_view kindName) {
  for (const auto& k : kKinds)
    if (k.name == kindName) return k.kind;
  return std::nullopt;
}

}  // namespace tessera::api
