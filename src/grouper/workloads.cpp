// The per-kind rules of the pod grouper (KAI-Scheduler's PodGrouper plugins, rewritten): which
// workload a pod belongs to, its gang size, subgroups, queue, priority class and overrides.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "tessera/api/log.h"
#include "tessera/api/objects.h"
#include "tessera/api/shard.h"
#include "tessera/grouper/grouper.h"

namespace tessera::grouper {
namespace {

const Json& at(const Json& j, std::initializer_list<const char*> path) {
  static const Json kNull;
  const Json* cur = &j;
  for (const char* p : path) {
    if (!cur->is_object()) return kNull;
    auto it = cur->find(p);
    if (it == cur->end()) return kNull;
    cur = &*it;
  }
  return *cur;
}

std::string text(const Json& j, std::initializer_list<const char*> path) {
  const Json& v = at(j, path);
  return v.is_string() ? v.get<std::string>() : std::string();
}

/// An integer field; `fallback` when absent or not an integer.
int64_t integer(const Json& j, std::initializer_list<const char*> path, int64_t fallback) {
  const Json& v = at(j, path);
  return v.is_number_integer() ? v.get<int64_t>() : fallback;
}

std::string metaMap(const Json& obj, const char* map, const char* key) {
  const Json& m = at(obj, {"metadata", map});
  if (!m.is_object()) return {};
  auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}
std::string label(const Json& obj, const char* key) { return metaMap(obj, "labels", key); }
std::string annotation(const Json& obj, const char* key) { return metaMap(obj, "annotations", key); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// Where overrides and labels are looked up: the workload objects top down, then the pod.
std::vector<const Json*> sources(const Json& pod, const std::vector<Owner>& owners) {
  std::vector<const Json*> out;
  for (auto it = owners.rbegin(); it != owners.rend(); ++it)
    if (it->object.is_object()) out.push_back(&it->object);
  out.push_back(&pod);
  return out;
}

std::string firstAnnotation(const std::vector<const Json*>& from, const char* key) {
  for (const Json* o : from)
    if (auto v = annotation(*o, key); !v.empty()) return v;
  return {};
}

/// The replica specs of a Kubeflow training-operator job, by spec field.
const char* replicaSpecsField(const std::string& kind) {
  if (kind == "PyTorchJob") return "pytorchReplicaSpecs";
  if (kind == "TFJob") return "tfReplicaSpecs";
  if (kind == "MPIJob") return "mpiReplicaSpecs";
  if (kind == "XGBoostJob") return "xgbReplicaSpecs";
  if (kind == "PaddleJob") return "paddleReplicaSpecs";
  if (kind == "JAXJob") return "jaxReplicaSpecs";
  return nullptr;
}

bool isAppsKind(const std::string& kind) {
  return kind == "ReplicaSet" || kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" ||
         kind == "ReplicationController";
}

std::string pgName(const std::string& kind, const std::string& name, const std::string& suffix = {}) {
  std::string n = "pg-" + lower(kind) + "-" + name + suffix;
  if (n.size() > 253) n.resize(253);
  while (!n.empty() && !std::isalnum(static_cast<unsigned char>(n.back()))) n.pop_back();  // a DNS subdomain
  return n;
}

// ---- per-kind rules: fill minMember, subgroups, the pod's subgroup; return false if not applicable

void kubeflow(PodGroupPlan& plan, const Json& pod, const Owner& job) {
  const Json& specs = at(job.object, {"spec", replicaSpecsField(job.kind)});
  int64_t all = 0;
  if (specs.is_object()) {
    for (auto it = specs.begin(); it != specs.end(); ++it) {
      const int64_t replicas = integer(*it, {"replicas"}, 1);
      all += replicas;
      plan.subGroups.push_back({lower(it.key()), replicas});
    }
  }
  plan.podSubGroup = lower(label(pod, "training.kubeflow.org/replica-type"));
  plan.minMember = std::max<int64_t>(all, 1);
  // PyTorch elastic: the master(s) plus elasticPolicy.minReplicas workers.
  if (job.kind == "PyTorchJob" && at(job.object, {"spec", "elasticPolicy", "minReplicas"}).is_number_integer()) {
    int64_t masters = 0;
    if (specs.is_object() && specs.contains("Master")) masters = integer(specs["Master"], {"replicas"}, 1);
    plan.minMember = masters + integer(job.object, {"spec", "elasticPolicy", "minReplicas"}, 1);
    plan.subGroups.clear();  // workers above the minimum are elastic
  }
  const Json& policy = at(job.object, {"spec", "runPolicy", "schedulingPolicy"});
  if (at(policy, {"minAvailable"}).is_number_integer()) {
    plan.minMember = integer(policy, {"minAvailable"}, plan.minMember);
    plan.subGroups.clear();
  }
  if (plan.subGroups.empty()) plan.podSubGroup.clear();
  if (auto q = text(policy, {"queue"}); !q.empty()) plan.queue = q;
  if (auto pc = text(policy, {"priorityClass"}); !pc.empty()) plan.priorityClassName = pc;
}

/// One gang of all replicated jobs (a subgroup each); with `startupPolicyOrder: InOrder` the jobs
/// start one after the other, so each replicated job is a gang of its own (as KAI groups it): one
/// gang of all would wait for pods the JobSet controller creates only once earlier jobs run.
void jobSet(PodGroupPlan& plan, const Json& pod, const Owner& set) {
  const std::string mine = label(pod, "jobset.sigs.k8s.io/replicatedjob-name");
  const bool inOrder = text(set.object, {"spec", "startupPolicy", "startupPolicyOrder"}) == "InOrder";
  int64_t all = 0;
  const Json& jobs = at(set.object, {"spec", "replicatedJobs"});
  if (jobs.is_array()) {
    for (const Json& rj : jobs) {
      const int64_t n = integer(rj, {"replicas"}, 1) * integer(rj, {"template", "spec", "parallelism"}, 1);
      if (inOrder && !mine.empty() && text(rj, {"name"}) == mine) {
        plan.name = pgName(set.kind, set.name, "-" + mine);
        plan.minMember = std::max<int64_t>(n, 1);
        plan.subGroups.clear();
        return;
      }
      all += n;
      plan.subGroups.push_back({text(rj, {"name"}), n});
    }
  }
  plan.minMember = std::max<int64_t>(all, 1);
  plan.podSubGroup = mine;
}

void rayCluster(PodGroupPlan& plan, const Json& pod, const Owner& cluster) {
  plan.subGroups.push_back({"head", 1});
  int64_t min = 1;
  const Json& groups = at(cluster.object, {"spec", "workerGroupSpecs"});
  if (groups.is_array()) {
    for (const Json& g : groups) {
      const int64_t n = integer(g, {"minReplicas"}, 0) * integer(g, {"numOfHosts"}, 1);
      min += n;
      plan.subGroups.push_back({text(g, {"groupName"}), n});
    }
  }
  plan.minMember = min;  // workers above minReplicas are elastic
  plan.podSubGroup = label(pod, "ray.io/node-type") == "head" ? "head" : label(pod, "ray.io/group");
}

void leaderWorkerSet(PodGroupPlan& plan, const Json& pod, const Owner& lws) {
  const int64_t size = integer(lws.object, {"spec", "leaderWorkerTemplate", "size"}, 1);
  plan.name = pgName(lws.kind, lws.name, "-" + label(pod, "leaderworkerset.sigs.k8s.io/group-index"));
  plan.minMember = size;
  plan.subGroups = {{"leader", 1}, {"workers", size - 1}};
  const std::string worker = label(pod, "leaderworkerset.sigs.k8s.io/worker-index");
  plan.podSubGroup = worker.empty() || worker == "0" ? "leader" : "workers";
}

/// Keeps the subgroups a PodGroup may declare (named, unique, minMember >= 1: a Ray worker group
/// with minReplicas 0 has none); a pod whose subgroup was dropped gets no subgroup label.
void normalizeSubGroups(PodGroupPlan& plan) {
  std::vector<SubGroupPlan> kept;
  for (auto& sg : plan.subGroups) {
    const bool seen = std::any_of(kept.begin(), kept.end(), [&](const SubGroupPlan& k) { return k.name == sg.name; });
    if (!sg.name.empty() && sg.minMember >= 1 && !seen) kept.push_back(std::move(sg));
  }
  plan.subGroups = std::move(kept);
  const bool known = std::any_of(plan.subGroups.begin(), plan.subGroups.end(),
                                 [&](const SubGroupPlan& k) { return k.name == plan.podSubGroup; });
  if (!known) plan.podSubGroup.clear();
}

/// The workload that decides the gang: the lowest owner of a gang kind, else a batch Job, else
/// (apps kinds, bare pods) the pod itself, else the top unknown owner.
const Owner* decidingOwner(const std::vector<Owner>& owners) {
  for (const Owner& o : owners) {
    if (!o.object.is_object()) continue;
    if (o.kind == "RayCluster" || o.kind == "JobSet" || o.kind == "LeaderWorkerSet" || replicaSpecsField(o.kind))
      return &o;
  }
  return nullptr;
}

/// The default priority class of a workload whose top-level kind is `kind`: the kind's entry, else
/// its category's; empty when neither.
std::string kindDefault(const std::string& kind, const DefaultPriorityClasses& defaults) {
  if (auto d = defaults.find(kind); d != defaults.end()) return d->second;
  if (auto c = defaults.find(std::string(workloadCategory(kind))); c != defaults.end()) return c->second;
  return {};
}

/// Services and bare pods are groups of one already. They get a PodGroup of their own (owned by,
/// and gone with, the pod) only for what a pod cannot say itself: its namespace's queue, a topology
/// constraint, or its kind's default priority class (when it names none itself).
bool ownGroupWanted(const Json& namespaceObject, bool topology, const std::string& podPriorityClass,
                    const std::string& kindPriorityClass) {
  const bool namespaceQueue = namespaceObject.is_object() && !label(namespaceObject, api::keys::kQueueLabel).empty();
  return namespaceQueue || topology || (!kindPriorityClass.empty() && podPriorityClass.empty());
}

}  // namespace

bool isBarePod(const api::Pod& pod) {
  return pod.meta.ownerReferences.empty() && !pod.meta.labels.count(kLwsNameLabel);
}

bool barePodGetsGroup(const api::Pod& pod, const Json& namespaceObject, const DefaultPriorityClasses& defaults) {
  auto topology = pod.meta.annotations.find(keys::kTopology);
  return ownGroupWanted(namespaceObject, topology != pod.meta.annotations.end() && !topology->second.empty(),
                        pod.priorityClassName, kindDefault("Pod", defaults));
}

std::string_view workloadCategory(const std::string& kind) {
  return isAppsKind(kind) || kind == "Pod" || kind == "LeaderWorkerSet" || kind == "RayService" ? "inference"
                                                                                                : "training";
}

std::optional<PodGroupPlan> planFor(const Json& pod, const std::vector<Owner>& owners, const Json& namespaceObject,
                                    const DefaultPriorityClasses& defaults) {
  const auto from = sources(pod, owners);
  if (lower(firstAnnotation(from, keys::kPodGrouping)) == "false") return std::nullopt;
  // The default priority class of the workload's kind (its top owner's; "Pod" for a bare pod).
  const std::string defaultPriority = kindDefault(owners.empty() ? "Pod" : owners.back().kind, defaults);

  PodGroupPlan plan;
  plan.namespace_ = text(pod, {"metadata", "namespace"});
  if (const Owner* gang = decidingOwner(owners)) {
    plan.owner = *gang;
    plan.name = pgName(gang->kind, gang->name);
    if (gang->kind == "RayCluster") rayCluster(plan, pod, *gang);
    else if (gang->kind == "JobSet") jobSet(plan, pod, *gang);
    else if (gang->kind == "LeaderWorkerSet") leaderWorkerSet(plan, pod, *gang);
    else kubeflow(plan, pod, *gang);
  } else if (!owners.empty() && owners.front().kind == "Job" && owners.front().object.is_object()) {
    plan.owner = owners.front();  // batch Job: independent pods unless min-member says otherwise
    plan.name = pgName("Job", plan.owner.name);
  } else if (owners.empty() || isAppsKind(owners.back().kind)) {
    // Services and bare pods: a PodGroup of their own only for what they cannot say themselves.
    if (!ownGroupWanted(namespaceObject, !firstAnnotation(from, keys::kTopology).empty(),
                        text(pod, {"spec", "priorityClassName"}), defaultPriority))
      return std::nullopt;
    plan.owner = Owner{"v1", "Pod", text(pod, {"metadata", "name"}), text(pod, {"metadata", "uid"}), Json()};
    plan.name = pgName("Pod", plan.owner.name);
  } else {
    plan.owner = owners.back();  // an owner kind we do not know: independent, owner recorded
    plan.name = pgName(plan.owner.kind, plan.owner.name);
  }

  if (auto mm = firstAnnotation(from, keys::kMinMember); !mm.empty()) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(mm.data(), mm.data() + mm.size(), v);
    if (ec == std::errc() && end == mm.data() + mm.size() && v >= 1) {
      plan.minMember = v;
      plan.subGroups.clear();
      plan.podSubGroup.clear();
    } else {
      log::warning("pod grouper: ", plan.owner.kind, " ", plan.namespace_, "/", plan.owner.name, ": annotation ",
                   keys::kMinMember, ": not a positive integer: \"", mm, "\" (ignored)");
    }
  }
  normalizeSubGroups(plan);
  plan.minMember = std::max<int64_t>(plan.minMember, 1);
  plan.topology = firstAnnotation(from, keys::kTopology);
  plan.requiredTopologyLevel = firstAnnotation(from, keys::kRequiredTopologyLevel);
  plan.preferredTopologyLevel = firstAnnotation(from, keys::kPreferredTopologyLevel);

  // Queue: the pod's label, the workload's, the workload's own field, the namespace's, default.
  std::string queue;
  for (const char* key : {api::keys::kQueueLabel, api::keys::kQueueLabelKai}) {
    if (queue.empty()) queue = label(pod, key);
    for (auto it = from.begin(); queue.empty() && it != from.end(); ++it) queue = label(**it, key);
  }
  if (queue.empty()) queue = plan.queue;
  if (queue.empty() && namespaceObject.is_object()) queue = label(namespaceObject, api::keys::kQueueLabel);
  plan.queue = queue.empty() ? std::string(api::keys::kDefaultQueue) : queue;
  plan.nodePool = label(pod, api::keys::kNodePoolLabel);
  for (auto it = from.begin(); plan.nodePool.empty() && it != from.end(); ++it)
    plan.nodePool = label(**it, api::keys::kNodePoolLabel);
  // Priority: the workload's field (set above), else its priorityClassName label (KAI), else the pod's.
  for (auto it = from.begin(); plan.priorityClassName.empty() && it != from.end(); ++it)
    plan.priorityClassName = label(**it, "priorityClassName");
  if (plan.priorityClassName.empty()) plan.priorityClassName = text(pod, {"spec", "priorityClassName"});
  if (plan.priorityClassName.empty()) plan.priorityClassName = defaultPriority;  // the kind's default
  return plan;
}

Json podGroupObject(const PodGroupPlan& plan) {
  Json pg = {{"apiVersion", "scheduling.tessera.dev/v1alpha1"}, {"kind", "PodGroup"}};
  pg["metadata"] = {
      {"name", plan.name},
      {"namespace", plan.namespace_},
      {"labels", {{keys::kGeneratedLabel, "true"}}},
      {"annotations",
       {{keys::kWorkloadAnnotation, plan.owner.apiVersion + "/" + plan.owner.kind + "/" + plan.owner.name}}}};
  if (!plan.nodePool.empty()) pg["metadata"]["labels"][api::keys::kNodePoolLabel] = plan.nodePool;
  if (!plan.owner.uid.empty()) {
    pg["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", plan.owner.apiVersion},
                                                      {"kind", plan.owner.kind},
                                                      {"name", plan.owner.name},
                                                      {"uid", plan.owner.uid},
                                                      {"controller", true},
                                                      {"blockOwnerDeletion", false}}});
  }
  Json spec = {{"minMember", plan.minMember}, {"queue", plan.queue}};
  if (!plan.priorityClassName.empty()) spec["priorityClassName"] = plan.priorityClassName;
  if (!plan.topology.empty()) {
    Json tc = {{"topology", plan.topology}};
    if (!plan.requiredTopologyLevel.empty()) tc["requiredTopologyLevel"] = plan.requiredTopologyLevel;
    if (!plan.preferredTopologyLevel.empty()) tc["preferredTopologyLevel"] = plan.preferredTopologyLevel;
    spec["topologyConstraint"] = tc;
  }
  if (!plan.subGroups.empty()) {
    spec["subGroups"] = Json::array();
    for (const auto& sg : plan.subGroups) spec["subGroups"].push_back({{"name", sg.name}, {"minMember", sg.minMember}});
  }
  pg["spec"] = std::move(spec);
  return pg;
}

bool isWorkloadKind(api::Kind kind) {
  switch (kind) {
    case api::Kind::Job:
    case api::Kind::JobSet:
    case api::Kind::PyTorchJob:
    case api::Kind::TFJob:
    case api::Kind::MPIJob:
    case api::Kind::XGBoostJob:
    case api::Kind::PaddleJob:
    case api::Kind::JAXJob:
    case api::Kind::TrainJob:
    case api::Kind::RayCluster:
    case api::Kind::RayJob:
    case api::Kind::RayService:
    case api::Kind::LeaderWorkerSet: return true;
    default: return false;
  }
}

}  // namespace tessera::grouper
