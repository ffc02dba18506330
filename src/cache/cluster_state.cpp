#include "cluster_state.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "tessera/api/convert.h"

namespace tessera::cache {

using api::Kind;

namespace {

/// Copy-on-write: the cache owns entries through shared_ptr<T>; a published snapshot shares them as
/// shared_ptr<const T>. Before a mutation, an entry still referenced by a snapshot is cloned.
template <class T>
T& mutableEntry(std::shared_ptr<T>& p) {
  if (p.use_count() > 1) p = std::make_shared<T>(*p);
  return *p;
}

const std::string* firstOf(const api::StringMap& m, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = m.find(k);
    if (it != m.end() && !it->second.empty()) return &it->second;
  }
  return nullptr;
}

/// The PodGroup name the pod names (the first non-empty of api::keys::kPodGroupKeys); null: none.
const std::string* podGroupOf(const api::Pod& pod) {
  for (const api::keys::PodGroupKey& k : api::keys::kPodGroupKeys) {
    const api::StringMap& m = k.annotation ? pod.meta.annotations : pod.meta.labels;
    if (auto it = m.find(k.key); it != m.end() && !it->second.empty()) return &it->second;
  }
  return nullptr;
}

std::string jobKeyOf(const api::Pod& pod) {
  if (const auto* pg = podGroupOf(pod)) return "PodGroup/" + pod.meta.namespace_ + "/" + *pg;
  return "Pod/" + pod.meta.namespace_ + "/" + pod.meta.name;
}

int32_t parseTaskPriority(const api::Pod& pod) {
  const auto* v = firstOf(pod.meta.labels, {api::keys::kTaskPriorityLabel, api::keys::kTaskPriorityLabelKai});
  if (!v) return 0;
  try {
    size_t pos = 0;
    long long x = std::stoll(*v, &pos);
    if (pos != v->size()) return 0;
    return static_cast<int32_t>(std::clamp<long long>(x, INT32_MIN, INT32_MAX));
  } catch (...) {
    return 0;
  }
}

/// errors_'s key: "Kind/ns/name"; other schedulers' kinds are qualified by their group
/// ("PodGroup.scheduling.volcano.sh/ns/name") so that they never mix with Tessera's.
std::string errorKey(Kind kind, const std::string& nsName) {
  const api::KindInfo& info = api::kindInfo(kind);
  std::string k(info.name);
  if (kind == Kind::VolcanoPodGroup || kind == Kind::SchedulerPluginsPodGroup) k.append(".").append(info.group);
  return k.append("/").append(nsName);
}

/// The GPU a group holds by itself: one, while fractional pods use it and no reservation pod does.
int64_t groupHold(const GpuGroupInfo& g) { return !g.reserved && g.pods > 0 ? 1000 : 0; }

}  // namespace

ClusterState::ClusterState(const api::Clock& clock, std::string schedulerName, api::Isolation isolation,
                           api::GpuShareDefaults gpuDefaults, api::ShardScope shard)
    : clock_(clock),
      schedulerName_(std::move(schedulerName)),
      isolation_(isolation),
      gpuDefaults_(gpuDefaults),
      shard_(std::move(shard)) {}

// ---- status of a pod as the scheduler sees it ----
TaskStatus ClusterState::statusOf(const std::string& key, const api::Pod& pod, std::string& node) const {
  node = pod.nodeName;
  if (pod.phase == api::PodPhase::Succeeded) return TaskStatus::Succeeded;
  if (pod.phase == api::PodPhase::Failed) return TaskStatus::Failed;
  if (node.empty()) {
    const AssumedBind* a = assumptions_.bound(key);
    if (!a) return TaskStatus::Pending;
    node = a->node;
    return TaskStatus::Bound;
  }
  if (pod.terminating() || assumptions_.evicting(key)) return TaskStatus::Releasing;
  return pod.phase == api::PodPhase::Running ? TaskStatus::Running : TaskStatus::Bound;
}

NodeInfo& ClusterState::nodeEntry(const std::string& name) {
  dirtyNodes_.insert(name);
  auto& p = nodes_[name];
  if (!p) {
    p = std::make_shared<NodeInfo>();
    p->name = name;
  }
  return mutableEntry(p);
}

QueueInfo& ClusterState::queueEntry(const std::string& name) {
  auto& p = queues_[name];
  if (!p) {
    p = std::make_shared<QueueInfo>();
    p->name = name;
  }
  return mutableEntry(p);
}

// ---- node accounting ----

/// Runs `fn` on the node's group `id` (created on demand), keeping the node's GPU use exact;
/// an unused, unreserved group is dropped.
template <class Fn>
void ClusterState::withGpuGroup(NodeInfo& n, const std::string& id, Fn&& fn) {
  auto it = std::lower_bound(n.gpuGroups.begin(), n.gpuGroups.end(), id,
                             [](const GpuGroupInfo& g, const std::string& k) { return g.id < k; });
  if (it == n.gpuGroups.end() || it->id != id) {
    it = n.gpuGroups.insert(it, GpuGroupInfo{});
    it->id = id;
  }
  const int64_t before = groupHold(*it);
  fn(*it);
  n.used.milliGpu += groupHold(*it) - before;
  if (!it->reserved && it->pods <= 0) n.gpuGroups.erase(it);
}

void ClusterState::addGpuUse(NodeInfo& n, const PodEntry& e, TaskStatus st, int sign) {
  for (const auto& id : e.gpuGroups)
    withGpuGroup(n, id, [&](GpuGroupInfo& g) {
      const int64_t compute = e.gpuSpec ? api::gpuComputeMilli(*e.gpuSpec) : 0;
      g.used += sign * e.gpuUnits;
      g.compute += sign * compute;
      if (st == TaskStatus::Releasing) g.releasing += sign * e.gpuUnits, g.computeReleasing += sign * compute;
      g.pods += sign;
    });
  if (!e.reservationGroup.empty())
    withGpuGroup(n, e.reservationGroup, [&](GpuGroupInfo& g) {
      if (sign > 0) {
        g.reserved = true;
        g.reservationPod = e.pod->meta.key();
        const std::string* uuid = e.pod->meta.annotation(api::keys::kGpuUuidAnnotation);
        g.uuid = uuid ? *uuid : std::string();
      } else if (g.reservationPod == e.pod->meta.key()) {
        g.reserved = false;
        g.reservationPod.clear();
        g.uuid.clear();
      }
    });
}

void ClusterState::addToNode(const std::string& key, const api::Pod& pod, TaskStatus st, const std::string& node,
                             bool ours) {
  NodeInfo& n = nodeEntry(node);
  n.used += pod.requests;
  if (!ours) n.foreignUsed += pod.requests;
  if (st == TaskStatus::Releasing) n.releasing += pod.requests, n.releasingPods++;
  n.podCount++;
  n.pods.insert(std::upper_bound(n.pods.begin(), n.pods.end(), key), key);
  n.usedPorts.insert(n.usedPorts.end(), pod.hostPorts.begin(), pod.hostPorts.end());
}

void ClusterState::removeFromNode(const std::string& key, const api::Pod& pod, TaskStatus st, const std::string& node,
                                  bool ours) {
  NodeInfo& n = nodeEntry(node);
  n.used -= pod.requests;
  if (!ours) {
    n.foreignUsed -= pod.requests;
    n.foreignUsed.normalize();
  }
  if (st == TaskStatus::Releasing) n.releasing -= pod.requests, n.releasingPods--;
  n.used.normalize();
  n.releasing.normalize();
  n.podCount--;
  auto it = std::lower_bound(n.pods.begin(), n.pods.end(), key);
  if (it != n.pods.end() && *it == key) n.pods.erase(it);
  for (const auto& hp : pod.hostPorts) {
    auto pit = std::find_if(n.usedPorts.begin(), n.usedPorts.end(), [&](const api::HostPort& u) {
      return u.port == hp.port && u.protocol == hp.protocol && u.hostIP == hp.hostIP;
    });
    if (pit != n.usedPorts.end()) n.usedPorts.erase(pit);
  }
  if (!n.node && n.podCount == 0) nodes_.erase(node);
}

// ---- job accounting ----
/// Takes the job's queue contribution back before a change; see addJobToQueue.
void ClusterState::removeJobFromQueue(const JobInfo& job) {
  if (job.allocated.isZero()) return;
  QueueInfo& q = queueEntry(job.queue);
  q.allocated -= job.allocated;
  q.allocated.normalize();
  if (!q.queue && q.allocated.isZero()) queues_.erase(job.queue);  // an undeclared queue nothing uses
}
void ClusterState::addJobToQueue(const JobInfo& job) {
  if (job.allocated.isZero()) return;
  queueEntry(job.queue).allocated += job.allocated;
}

/// Re-derives what a job takes from its PodGroup and pods (queue, priority, minMember, age).
void ClusterState::deriveJob(JobInfo& job) {
  job.podGroup.reset();
  job.podGroupMissing = false;
  const api::Pod* first = job.tasks.empty() ? nullptr : job.tasks.front().pod.get();
  if (!job.isSingleton()) {
    job.podGroup = findPodGroup(job.namespace_ + "/" + job.name);
    job.podGroupMissing = job.podGroup == nullptr;
  }
  const api::PodGroup* pg = job.podGroup.get();
  job.staleMarked = pg && pg->meta.annotation(api::keys::kStaleSinceAnnotation) != nullptr;
  job.topologyKey = pg && !pg->topologyConstraint.empty() ? topologyKeys_.intern(topologyKeyOf(pg->topologyConstraint)) : nullptr;
  if (pg) {
    job.uid = pg->meta.uid;
    job.creationTime = pg->meta.creationTimestamp;
    job.minMember = pg->minMember;
    job.preemptibility = pg->preemptibility;
    job.priorityClassName = pg->priorityClassName;
  } else {
    job.minMember = job.isSingleton() ? 1 : static_cast<int32_t>(job.tasks.size());
    job.preemptibility = api::Preemptibility::Unset;
    job.priorityClassName.clear();
    job.uid = first ? first->meta.uid : std::string();
    job.creationTime = api::Time{INT64_MAX};
    for (const auto& t : job.tasks) job.creationTime = std::min(job.creationTime, t.pod->meta.creationTimestamp);
  }
  if (job.priorityClassName.empty() && first) job.priorityClassName = first->priorityClassName;
  job.podPriority = first ? first->priority : std::nullopt;
  // Queue: label on the PodGroup or pod, else the PodGroup's spec.queue, else "default".
  const std::string* q = nullptr;
  if (pg) q = firstOf(pg->meta.labels, {api::keys::kQueueLabel, api::keys::kQueueLabelKai});
  if (!q && first) q = firstOf(first->meta.labels, {api::keys::kQueueLabel, api::keys::kQueueLabelKai});
  if (!q && pg && !pg->queue.empty()) q = &pg->queue;
  job.queue = q ? *q : api::keys::kDefaultQueue;
  job.pendingPlacementKey = nullptr;
  job.pendingMinGpus = INT64_MAX;
  job.pendingMinWholeGpus = INT64_MAX;
  job.pendingSharesGpu = false;
  job.pendingMinGpuMilli = INT64_MAX;
  job.tasksCreatedTogether = std::all_of(job.tasks.begin(), job.tasks.end(), [&](const TaskInfo& t) {
    return t.pod->meta.creationTimestamp == job.tasks.front().pod->meta.creationTimestamp;
  });
  job.tieOrder.clear();  // made again once per snapshot (orderDirtyJobs), not at every pod event
  bool seen = false;
  for (const auto& t : job.tasks) {
    if (t.status != TaskStatus::Pending) continue;
    job.pendingMinGpus = std::min<int64_t>(job.pendingMinGpus, t.nodeRequest.milliGpu / 1000);
    if (t.sharesGpu()) job.pendingSharesGpu = true;
    else job.pendingMinWholeGpus = std::min<int64_t>(job.pendingMinWholeGpus, t.nodeRequest.milliGpu / 1000);
    job.pendingMinGpuMilli = std::min(job.pendingMinGpuMilli, t.gpuNeedMilli());
    if (!seen) job.pendingPlacementKey = t.placementKey.get(), seen = true;
    else if (job.pendingPlacementKey != t.placementKey.get()) job.pendingPlacementKey = nullptr;
  }
}

void ClusterState::orderDirtyJobs(bool all) {
  auto order = [](JobInfo& job) {
    job.tieOrder.resize(job.tasks.size());
    for (size_t i = 0; i < job.tasks.size(); ++i) job.tieOrder[i] = static_cast<int32_t>(i);
    std::sort(job.tieOrder.begin(), job.tieOrder.end(), [&](int32_t a, int32_t b) {
      return taskTieLess(job.tasks[static_cast<size_t>(a)], job.tasks[static_cast<size_t>(b)]);
    });
  };
  if (all) {
    for (auto& [key, p] : jobs_)
      if (p->tieOrder.size() != p->tasks.size()) order(mutableEntry(p));
    return;
  }
  for (const std::string& key : dirtyJobs_)
    if (auto it = jobs_.find(key); it != jobs_.end() && it->second->tieOrder.size() != it->second->tasks.size())
      order(mutableEntry(it->second));
}

/// Runs `fn` on a mutable copy of the job, keeping queue totals and derived fields exact.
template <class Fn>
void ClusterState::withJob(const std::string& key, Fn&& fn) {
  dirtyJobs_.insert(key);
  auto& p = jobs_[key];
  if (!p) {
    p = std::make_shared<JobInfo>();
    p->setKey(key);
    // "PodGroup/ns/name" or "Pod/ns/name"
    auto a = key.find('/');
    auto b = key.find('/', a + 1);
    p->namespace_ = key.substr(a + 1, b - a - 1);
    p->name = key.substr(b + 1);
  }
  removeJobFromQueue(*p);
  JobInfo& job = mutableEntry(p);
  fn(job);
  deriveJob(job);
  if (job.tasks.empty()) {
    jobs_.erase(key);
    return;
  }
  addJobToQueue(job);
}

void ClusterState::countTask(JobInfo& job, const TaskInfo& t, int sign) {
  switch (t.status) {
    case TaskStatus::Pending: job.pendingCount += sign; break;
    case TaskStatus::Succeeded: job.succeededCount += sign; break;
    case TaskStatus::Failed: job.failedCount += sign; break;
    default: job.allocatedCount += sign; break;
  }
  auto add = [&](api::Resources& total) {
    if (sign > 0) {
      total += t.request;
    } else {
      total -= t.request;
      total.normalize();
    }
  };
  if (holdsResources(t.status)) add(job.allocated);
  if (t.status == TaskStatus::Releasing) add(job.releasing);
  if (t.status == TaskStatus::Pending) add(job.pendingRequest);
}

void ClusterState::removeTask(const std::string& jobKey, const std::string& podKey) {
  withJob(jobKey, [&](JobInfo& job) {
    auto it = std::lower_bound(job.tasks.begin(), job.tasks.end(), podKey,
                               [](const TaskInfo& t, const std::string& k) { return t.key < k; });
    if (it == job.tasks.end() || it->key != podKey) return;
    countTask(job, *it, -1);
    job.tasks.erase(it);
  });
}

void ClusterState::addTask(const std::string& jobKey, const std::string& podKey, const PodEntry& e, TaskStatus st,
                           const std::string& node) {
  const std::shared_ptr<const api::Pod>& pod = e.pod;
  withJob(jobKey, [&](JobInfo& job) {
    TaskInfo t;
    t.pod = pod;
    t.key = podKey;
    t.uid = pod->meta.uid;
    t.status = st;
    t.nodeName = holdsResources(st) ? node : std::string();
    t.request = pod->requests;
    t.nodeRequest = pod->requests;
    t.gpuSpec = e.gpuSpec;
    t.gpuSpecError = e.gpuSpecError;
    t.gpuSpecInvalid = !t.gpuSpecError.empty();
    t.nodeConstraints = pod->nodeSelector.empty() && pod->requiredNodeAffinity.empty() && pod->hostPorts.empty()
                            ? NodeConstraints::None
                            : NodeConstraints::Some;
    // Queues are charged a share of a GPU: the fraction (milli-GPU), the memory as a portion of the
    // GPUs of the node the pod is on, MIG instances as the part of a GPU each is (pending: on the
    // largest GPUs seen). The node is still asked for what the pod requests (nodeRequest).
    auto gpuMemory = [&] {
      if (holdsResources(st))
        if (auto nit = nodes_.find(node); nit != nodes_.end()) return nit->second->gpuMemoryMiB;
      return maxGpuMemoryMiB_;
    };
    if (e.gpuSpec && e.gpuSpec->shared()) {
      t.request.milliGpu = gpuChargeMilli(*e.gpuSpec, gpuMemory());
      t.gpuGroups = e.gpuGroups;
    }
    if (!pod->requests.scalars.empty()) t.request.milliGpu += api::migGpuMilli(pod->requests, gpuMemory());
    t.taskPriority = parseTaskPriority(*pod);
    if (const auto* sg = firstOf(pod->meta.labels, {api::keys::kSubGroupLabel, api::keys::kSubGroupLabelKai}))
      t.subGroup = *sg;
    t.assumed = pod->nodeName.empty() && st == TaskStatus::Bound;
    t.placementKey = placementKeys_.intern(taskPlacementKey(*pod, t.request, podKey, t.gpuSpecError));
    countTask(job, t, +1);
    auto it = std::lower_bound(job.tasks.begin(), job.tasks.end(), podKey,
                               [](const TaskInfo& x, const std::string& k) { return x.key < k; });
    job.tasks.insert(it, std::move(t));
  });
}

// ---- pods ----
namespace {
/// A pod the pod grouper may give a PodGroup: ours, unbound, not terminating, naming no group.
bool ungrouped(const PodEntry& e) {
  return e.ours && e.pod->nodeName.empty() && !e.pod->terminating() && !e.pod->terminated() &&
         podGroupOf(*e.pod) == nullptr;
}
}  // namespace

std::vector<std::shared_ptr<const api::Pod>> ClusterState::takeUngroupedPods(const std::vector<std::string>& alsoKeys) {
  ungroupedChanged_.insert(alsoKeys.begin(), alsoKeys.end());
  std::vector<std::shared_ptr<const api::Pod>> out;
  std::vector<std::string> held;
  for (const std::string& key : ungroupedChanged_) {
    auto it = pods_.find(key);
    if (it == pods_.end() || !ungrouped(it->second)) continue;
    out.push_back(it->second.pod);
    // Held (upsertPod) only with owners: a bare pod is in its job already, nothing to re-file.
    if (offered_.insert(key).second && holdUngrouped_ && !it->second.pod->meta.ownerReferences.empty())
      held.push_back(key);
  }
  ungroupedChanged_.clear();
  // Offered now: a pod the grouper leaves alone joins its own job (the grouper's patch, if any,
  // arrives as a change of the pod).
  for (const std::string& key : held) refreshPod(key);
  ungroupedChanged_.clear();  // refreshPod marked them changed again: they were just offered
  return out;
}

void ClusterState::removePod(const std::string& key) {
  auto it = pods_.find(key);
  if (it != pods_.end()) takeOut(it);
}

ClusterState::Pods::node_type ClusterState::takeOut(Pods::iterator it) {
  Pods::node_type held = pods_.extract(it);
  const std::string& key = held.key();
  const PodEntry& e = held.mapped();
  ungroupedChanged_.erase(key);
  if (holdsResources(e.status)) {
    auto nit = nodes_.find(e.node);
    if (nit != nodes_.end()) addGpuUse(mutableEntry(nit->second), e, e.status, -1), dirtyNodes_.insert(e.node);
    removeFromNode(key, *e.pod, e.status, e.node, e.ours || e.reservation);
  }
  if (!e.jobKey.empty()) removeTask(e.jobKey, key);
  return held;
}

void ClusterState::upsertPod(std::shared_ptr<const api::Pod> pod) {
  const std::string key = pod->meta.key();
  // A pod held already keeps its table entry: taken out with its accounting undone, filled again
  // below, and put back where it was (one lookup, where removing and adding it again took three).
  auto at = pods_.lower_bound(key);
  Pods::node_type held;
  if (at != pods_.end() && at->first == key) held = takeOut(at++);  // `at`: the entry after it, where it goes back
  auto keep = [&](PodEntry&& entry) {
    if (held.empty()) {
      pods_.emplace_hint(at, key, std::move(entry));
    } else {
      held.mapped() = std::move(entry);
      pods_.insert(at, std::move(held));
    }
  };
  PodEntry e;
  e.pod = std::move(pod);
  e.ours = e.pod->schedulerName == schedulerName_;
  bool misrouted = false;
  if (e.ours && shard_.sharded()) {
    // Another pool's pod (its label, else its PodGroup's pool) counts as another scheduler's; an
    // unbound one without the label is the default shard's to route (takeMisroutedPods), and is
    // kept (in no job) so that a change of its PodGroup's pool files it again.
    const std::string pool = podPool(*e.pod);
    if (pool != *shard_.pool) {
      e.ours = false;
      if (e.pod->nodeName.empty() && !e.pod->terminating() && !e.pod->meta.label(api::keys::kNodePoolLabel))
        misrouted_[key] = pool, misrouted = true;
    }
  }
  if (ungrouped(e)) ungroupedChanged_.insert(key);
  e.status = statusOf(key, *e.pod, e.node);
  if (!e.ours && !holdsResources(e.status)) {  // another scheduler's concern
    if (misrouted) keep(std::move(e));
    return;
  }
  if (e.ours && e.status == TaskStatus::Pending && assumptions_.backingOff(key, clock_)) {
    keep(std::move(e));  // kept, but in no job until its backoff ends
    return;
  }
  if (e.ours) parseGpu(e);
  // A GPU reservation pod (the binder's, one per GPU group) is ours in spirit: its GPU is shared
  // by our fractional pods, so it is not foreign use.
  if (e.pod->meta.namespace_ == api::keys::kReservationNamespace)
    if (const std::string* g = e.pod->meta.label(api::keys::kGpuGroupLabel); g && !g->empty()) {
      e.reservation = true;
      if (!e.pod->terminating()) e.reservationGroup = *g;
    }
  if (holdsResources(e.status)) {
    addToNode(key, *e.pod, e.status, e.node, e.ours || e.reservation);
    NodeInfo& n = nodeEntry(e.node);
    if (e.gpuSpec && e.gpuSpec->shared()) {
      // Bound by us and not confirmed yet: the bind's groups (the pod's labels may be missing, or
      // stale from an earlier failed attempt); else the groups its labels name.
      const AssumedBind* a = e.pod->nodeName.empty() ? assumptions_.bound(key) : nullptr;
      e.gpuGroups = a && !a->gpuGroups.empty() ? a->gpuGroups : gpuGroupsOf(e.pod->meta);
      e.gpuUnits = gpuUnitsOn(*e.gpuSpec, n);
    }
    addGpuUse(n, e, e.status, +1);
  }
  // A workload's pod the pod grouper has not looked at yet waits in no job, so no cycle sees one
  // pod of a gang as a group of one (takeUngroupedPods releases it).
  if (e.ours && holdUngrouped_ && !e.pod->meta.ownerReferences.empty() && !offered_.count(key) && ungrouped(e)) {
    keep(std::move(e));
    return;
  }
  if (e.ours) {
    e.jobKey = jobKeyOf(*e.pod);
    addTask(e.jobKey, key, e, e.status, e.node);
  }
  keep(std::move(e));
}

/// Parses the pod's GPU annotations once per pod version.
void ClusterState::parseGpu(PodEntry& e) const {
  const auto& ann = e.pod->meta.annotations;
  if (ann.empty()) return;
  auto spec = api::parsePodGpuSpec(ann, e.pod->requests, gpuDefaults_);
  if (!spec.ok()) {
    e.gpuSpecError = "Pod " + e.pod->meta.key() + ": " + spec.error().message;
    return;
  }
  api::PodGpuSpec& g = *spec;
  const api::Isolation isolation = g.isolation != api::Isolation::Unset ? g.isolation : isolation_;
  g.hardIsolation = isolation_ != api::Isolation::Unset && isolation == api::Isolation::Hard;
  if (isolation_ != api::Isolation::Unset && g.shared() && isolation == api::Isolation::Hard &&
      !e.pod->hardIsolationWired && e.pod->nodeName.empty()) {  // a bound pod's GPU use still counts
    // Admitted without the webhook's mutation (webhook down under failurePolicy Ignore, or out of
    // its scope): bound as is it would run with no GPU memory limit. docs/install.md
    e.gpuSpecError = "Pod " + e.pod->meta.key() + ": not wired for hard GPU isolation by the Tessera webhook (no " +
                     api::keys::kIsolationRegionEnv +
                     " in its containers); it would run without a GPU memory limit: recreate it while the "
                     "webhook is up";
    return;
  }
  if (g.shared() || g.filtersGpuTypes() || g.gpuPolicy != api::GpuPolicy::Unset ||
      g.nodePolicy != api::GpuPolicy::Unset || g.isolation != api::Isolation::Unset)
    e.gpuSpec = std::make_shared<const api::PodGpuSpec>(std::move(spec).value());
}

/// Re-evaluates a pod after an assumption about it changed.
void ClusterState::refreshPod(const std::string& key) {
  auto it = pods_.find(key);
  if (it == pods_.end()) return;
  auto pod = it->second.pod;
  upsertPod(std::move(pod));
}

// ---- watch events ----

namespace {

/// A resourceVersion as a number, when it is one (kube-apiserver's are etcd revisions).
std::optional<uint64_t> numericRv(const std::string& rv) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  if (ec != std::errc() || end != rv.data() + rv.size() || rv.empty()) return std::nullopt;
  return v;
}

}  // namespace

void ClusterState::onPod(const WatchEvent& ev, std::optional<api::Result<api::Pod>>* converted) {
  if (ev.type == WatchEventType::Deleted) {
    auto meta = api::metaFromJson(ev.object);
    if (!meta.ok()) return;
    const std::string key = meta->key();
    misrouted_.erase(key);
    if (shard_.sharded()) {
      // Sharded, pods come in two streams: a pod whose pool label changed leaves one (Deleted) and
      // enters the other (Added) at the same version, in either order. A real deletion is always
      // newer than what is held; a Deleted no newer than the held version is such a move.
      auto held = pods_.find(key);
      auto at = numericRv(meta->resourceVersion);
      auto heldAt = held != pods_.end() ? numericRv(held->second.pod->meta.resourceVersion) : std::nullopt;
      if (at && heldAt && *heldAt >= *at) return;
    }
    assumptions_.podDeleted(key);
    errors_.erase("Pod/" + key);
    offered_.erase(key);
    removePod(key);
    return;
  }
  auto pod = converted && *converted ? std::move(**converted) : api::podFromJson(ev.object);
  if (!pod.ok()) {
    recordError(Kind::Pod, ev.object, pod.error().message);
    return;  // keep the last good state of the pod, if any
  }
  const std::string key = pod->meta.key();
  errors_.erase("Pod/" + key);
  if (!pod->nodeName.empty()) assumptions_.podBound(key);  // the watch confirmed (or overrode) our bind
  if (pod->terminating() || pod->terminated()) assumptions_.podReleasing(key);
  upsertPod(std::make_shared<const api::Pod>(std::move(pod).value()));
}

void ClusterState::recordError(Kind kind, const Json& obj, const std::string& message) {
  auto meta = api::metaFromJson(obj);
  ConversionError e{kind, meta.ok() ? meta->namespace_ : "", meta.ok() ? meta->name : "", message};
  errors_[errorKey(kind, (e.namespace_.empty() ? "" : e.namespace_ + "/") + e.name)] = e;
}

void ClusterState::onNode(const WatchEvent& ev) {
  if (ev.type == WatchEventType::Deleted) {
    auto meta = api::metaFromJson(ev.object);
    if (!meta.ok()) return;
    errors_.erase("Node/" + meta->name);
    auto it = nodes_.find(meta->name);
    if (it == nodes_.end()) return;
    dirtyNodes_.insert(meta->name);
    NodeInfo& n = mutableEntry(it->second);
    n.node.reset();
    if (n.podCount == 0) nodes_.erase(it);
    return;
  }
  auto node = api::nodeFromJson(ev.object);
  if (!node.ok()) {
    recordError(Kind::Node, ev.object, node.error().message);
    return;
  }
  errors_.erase("Node/" + node->meta.name);
  NodeInfo& n = nodeEntry(node->meta.name);
  n.allocatable = node->allocatable;
  n.gpuMemoryMiB = 0;
  n.gpuLabelError.clear();
  auto mem = api::nodeGpuMemoryMiB(*node);
  if (!mem.ok()) n.gpuLabelError = mem.error().message;
  else if (*mem) n.gpuMemoryMiB = **mem, maxGpuMemoryMiB_ = std::max(maxGpuMemoryMiB_, **mem);
  // Per-node GPU-sharing settings; an invalid one is the validation layer's to report (an Event).
  api::NodeGpuSettings g = api::nodeGpuSettings(*node);
  n.gpuSplitCount = g.splitCount;
  n.gpuMemoryScalingMilli = g.memoryScalingMilli;
  n.gpuCoreScalingMilli = g.coreScalingMilli;
  n.gpusExcluded = static_cast<int32_t>(std::min<int64_t>(g.excludedCount(), n.allocatable.milliGpu / 1000));
  n.allocatable.milliGpu -= int64_t{1000} * n.gpusExcluded;
  n.excludedGpuUuids = std::move(g.excludedUuids);
  n.migGpuMilli = api::migGpuMilli(n.allocatable, n.gpuMemoryMiB);
  n.migMode = g.migMode;
  n.takesAnyPod = node->ready && !node->unschedulable &&
                  std::all_of(node->taints.begin(), node->taints.end(),
                              [](const api::Taint& t) { return t.effect == api::TaintEffect::PreferNoSchedule; });
  n.node = std::make_shared<const api::Node>(std::move(node).value());
}

/// Re-derives every job of a PodGroup after the PodGroup changed.
void ClusterState::refreshPodGroupJob(const std::string& nsName) {
  const std::string key = "PodGroup/" + nsName;
  if (jobs_.count(key)) withJob(key, [](JobInfo&) {});
}

std::map<std::string, std::shared_ptr<const api::PodGroup>>& ClusterState::podGroupTable(Kind kind) {
  if (kind == Kind::VolcanoPodGroup) return volcanoPodGroups_;
  if (kind == Kind::SchedulerPluginsPodGroup) return schedulerPluginsPodGroups_;
  return podGroups_;
}

std::shared_ptr<const api::PodGroup> ClusterState::findPodGroup(const std::string& nsName) const {
  for (const auto* table : {&podGroups_, &volcanoPodGroups_, &schedulerPluginsPodGroups_})
    if (auto it = table->find(nsName); it != table->end()) return it->second;
  return nullptr;
}

void ClusterState::onPodGroup(Kind kind, const WatchEvent& ev) {
  auto meta = api::metaFromJson(ev.object);
  if (!meta.ok()) return;
  const std::string k = meta->key();
  auto& table = podGroupTable(kind);
  const std::string errKey = errorKey(kind, k);
  const std::string poolBefore = shard_.sharded() && table.count(k) ? podGroupPool(*table[k]) : std::string();
  if (ev.type == WatchEventType::Deleted) {
    table.erase(k);
    errors_.erase(errKey);
  } else {
    auto pg = api::foreignPodGroupFromJson(kind, ev.object);
    if (!pg.ok()) {
      recordError(kind, ev.object, pg.error().message);
      return;
    }
    errors_.erase(errKey);
    table[k] = std::make_shared<const api::PodGroup>(std::move(pg).value());
  }
  // Sharded: a PodGroup of another pool is held (its pool decides where its unlabelled pods go)
  // but its job is not this shard's; its pods are filed again when its pool changes.
  if (shard_.sharded() && (table.count(k) ? podGroupPool(*table[k]) : std::string()) != poolBefore)
    refreshPodGroupPods(k);
  refreshPodGroupJob(k);
}

std::string ClusterState::podGroupPool(const api::PodGroup& pg) const {
  if (const std::string* label = pg.meta.label(api::keys::kNodePoolLabel)) return *label;
  auto it = queuePools_.find(pg.queue);
  return it == queuePools_.end() ? std::string() : it->second;
}

std::string ClusterState::podPool(const api::Pod& pod) const {
  if (const std::string* label = pod.meta.label(api::keys::kNodePoolLabel)) return *label;
  if (const std::string* pgName = podGroupOf(pod)) {
    auto pg = findPodGroup(pod.meta.namespace_ + "/" + *pgName);
    return pg ? podGroupPool(*pg) : std::string();
  }
  // A pod without a PodGroup is a job of its own: its queue label's Queue decides.
  if (const std::string* queue = firstOf(pod.meta.labels, {api::keys::kQueueLabel, api::keys::kQueueLabelKai}))
    if (auto it = queuePools_.find(*queue); it != queuePools_.end()) return it->second;
  return {};
}

void ClusterState::refreshPodGroupPods(const std::string& nsName) {
  const auto slash = nsName.find('/');
  if (slash == std::string::npos) return;
  const std::string ns = nsName.substr(0, slash), name = nsName.substr(slash + 1);
  std::vector<std::string> keys;
  for (auto it = pods_.lower_bound(ns + "/"); it != pods_.end() && it->first.compare(0, ns.size() + 1, ns + "/") == 0;
       ++it)
    if (const std::string* pg = podGroupOf(*it->second.pod); pg && *pg == name) keys.push_back(it->first);
  for (const auto& key : keys) refreshPod(key);
}

std::vector<std::pair<std::string, std::string>> ClusterState::takeMisroutedPods() {
  std::vector<std::pair<std::string, std::string>> out(misrouted_.begin(), misrouted_.end());
  misrouted_.clear();
  return out;
}

void ClusterState::onQueue(const WatchEvent& ev) {
  auto meta = api::metaFromJson(ev.object);
  if (!meta.ok()) return;
  if (ev.type == WatchEventType::Deleted) {
    errors_.erase("Queue/" + meta->name);
    queuePools_.erase(meta->name);
    auto it = queues_.find(meta->name);
    if (it == queues_.end()) return;
    mutableEntry(it->second).queue.reset();
    if (it->second->allocated.isZero()) queues_.erase(it);
    return;
  }
  auto q = api::queueFromJson(ev.object);
  if (!q.ok()) {
    recordError(Kind::Queue, ev.object, q.error().message);
    return;
  }
  errors_.erase("Queue/" + meta->name);
  if (shard_.sharded()) {
    // A Queue without a pool is every shard's (its quota applies within each pool); one labelled
    // with another pool is not held here, only its pool (for its PodGroups) is.
    const std::string pool = api::ShardScope::poolOf(q->meta.labels);
    queuePools_[meta->name] = pool;
    if (!pool.empty() && pool != *shard_.pool) {
      if (auto it = queues_.find(meta->name); it != queues_.end()) {
        mutableEntry(it->second).queue.reset();
        if (it->second->allocated.isZero()) queues_.erase(it);
      }
      return;
    }
  }
  queueEntry(meta->name).queue = std::make_shared<const api::Queue>(std::move(q).value());
}

template <class T, class Conv>
void ClusterState::onSimple(Kind kind, const WatchEvent& ev, std::map<std::string, std::shared_ptr<const T>>& table,
                            Conv conv) {
  auto meta = api::metaFromJson(ev.object);
  if (!meta.ok()) return;
  const std::string errKey = errorKey(kind, meta->key());
  if (ev.type == WatchEventType::Deleted) {
    table.erase(meta->key());
    errors_.erase(errKey);
    return;
  }
  auto v = conv(ev.object);
  if (!v.ok()) {
    recordError(kind, ev.object, v.error().message);
    return;
  }
  errors_.erase(errKey);
  table[meta->key()] = std::make_shared<const T>(std::move(v).value());
}

void ClusterState::apply(Kind kind, const WatchEvent& ev, std::optional<api::Result<api::Pod>>* converted) {
  if (ev.type == WatchEventType::Bookmark || ev.type == WatchEventType::Error) return;
  switch (kind) {
    case Kind::Pod: onPod(ev, converted); break;
    case Kind::Node: onNode(ev); break;
    case Kind::PodGroup:
    case Kind::VolcanoPodGroup:
    case Kind::SchedulerPluginsPodGroup: onPodGroup(kind, ev); break;
    case Kind::Queue: onQueue(ev); break;
    case Kind::PriorityClass: onSimple(kind, ev, priorityClasses_, api::priorityClassFromJson); break;
    case Kind::Topology: onSimple(kind, ev, topologies_, api::topologyFromJson); break;
    default: break;
  }
}

// ---- relists ----

std::vector<std::string> ClusterState::heldKeys(Kind kind) const {
  std::vector<std::string> keys;
  auto addHeld = [&keys](const auto& table, auto held) {
    for (const auto& [k, v] : table)
      if (held(v)) keys.push_back(k);
  };
  auto any = [](const auto&) { return true; };
  // A NodeInfo kept only for the pods still bound to a deleted node, or a QueueInfo only for the
  // totals of an undeclared queue, stands for no object of the cluster.
  switch (kind) {
    case Kind::Pod: addHeld(pods_, any); break;
    case Kind::Node: addHeld(nodes_, [](const auto& n) { return n->node != nullptr; }); break;
    case Kind::PodGroup:
    case Kind::VolcanoPodGroup:
    case Kind::SchedulerPluginsPodGroup: addHeld(podGroupTable(kind), any); break;
    case Kind::Queue: addHeld(queues_, [](const auto& q) { return q->queue != nullptr; }); break;
    case Kind::PriorityClass: addHeld(priorityClasses_, any); break;
    case Kind::Topology: addHeld(topologies_, any); break;
    default: break;
  }
  // Objects that failed conversion are only in `errors_`.
  const std::string prefix = errorKey(kind, "");
  for (const auto& [k, e] : errors_)
    if (k.rfind(prefix, 0) == 0) keys.push_back(k.substr(prefix.size()));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

void ClusterState::remove(Kind kind, const std::string& key) {
  auto slash = key.find('/');
  Json meta = slash == std::string::npos ? Json{{"name", key}}
                                         : Json{{"namespace", key.substr(0, slash)}, {"name", key.substr(slash + 1)}};
  apply(kind, WatchEvent{WatchEventType::Deleted, Json{{"metadata", std::move(meta)}}});
  // The event's handler forgets the error too, unless the key does not read back as metadata.
  errors_.erase(errorKey(kind, key));
}

// ---- views ----

const api::Pod* ClusterState::findPod(const std::string& key) const {
  auto it = pods_.find(key);
  return it == pods_.end() ? nullptr : it->second.pod.get();
}

const NodeInfo* ClusterState::findNode(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : it->second.get();
}

const JobInfo* ClusterState::findJob(const std::string& key) const {
  auto it = jobs_.find(key);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const QueueInfo* ClusterState::findQueue(const std::string& name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : it->second.get();
}

}  // namespace tessera::cache
