#include "tessera/cache/cache.h"

#include "snapshot_validation.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "tessera/api/convert.h"

namespace tessera::cache {

using api::Kind;

const char* toString(TaskStatus s) {
  switch (s) {
    case TaskStatus::Pending: return "Pending";
    case TaskStatus::Bound: return "Bound";
    case TaskStatus::Running: return "Running";
    case TaskStatus::Releasing: return "Releasing";
    case TaskStatus::Succeeded: return "Succeeded";
    case TaskStatus::Failed: return "Failed";
  }
  return "Unknown";
}

const NodeInfo* Snapshot::findNode(const std::string& name) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), name,
                             [](const std::shared_ptr<const NodeInfo>& n, const std::string& k) { return n->name < k; });
  return it != nodes.end() && (*it)->name == name ? it->get() : nullptr;
}

const GpuGroupInfo* NodeInfo::findGpuGroup(const std::string& id) const {
  auto it = std::lower_bound(gpuGroups.begin(), gpuGroups.end(), id,
                             [](const GpuGroupInfo& g, const std::string& k) { return g.id < k; });
  return it != gpuGroups.end() && it->id == id ? &*it : nullptr;
}

int64_t gpuUnitsOn(const api::PodGpuSpec& spec, const NodeInfo& node) {
  if (spec.fractionMilli > 0) return spec.fractionMilli * (node.gpuMemoryMiB > 0 ? node.gpuMemoryMiB : 1);
  if (spec.memoryMiB > 0 && node.gpuMemoryMiB > 0) return spec.memoryMiB * 1000;
  return 0;
}

int64_t gpuChargeMilli(const api::PodGpuSpec& spec, int64_t gpuMemoryMiB) {
  int64_t each = spec.fractionMilli;
  if (spec.memoryMiB > 0) each = gpuMemoryMiB > 0 ? std::min<int64_t>(1000, (spec.memoryMiB * 1000 + gpuMemoryMiB - 1) / gpuMemoryMiB) : 1000;
  return each * spec.numDevices;
}

std::vector<std::string> gpuGroupsOf(const api::ObjectMeta& meta) {
  std::vector<std::string> out;
  if (const std::string* all = meta.annotation(api::keys::kGpuGroupsAnnotation)) {
    size_t start = 0;
    while (start <= all->size()) {
      size_t comma = all->find(',', start);
      if (comma == std::string::npos) comma = all->size();
      if (comma > start) out.push_back(all->substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (out.empty())
    if (const std::string* g = meta.label(api::keys::kGpuGroupLabel); g && !g->empty()) out.push_back(*g);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const JobInfo* Snapshot::findJob(const std::string& key) const {
  auto it = std::lower_bound(jobs.begin(), jobs.end(), key,
                             [](const std::shared_ptr<const JobInfo>& j, const std::string& k) { return j->key < k; });
  return it != jobs.end() && (*it)->key == key ? it->get() : nullptr;
}

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

std::string jobKeyOf(const api::Pod& pod) {
  if (const auto* pg = firstOf(pod.meta.annotations, {api::keys::kPodGroupAnnotation, api::keys::kPodGroupAnnotationVolcano}))
    return "PodGroup/" + pod.meta.namespace_ + "/" + *pg;
  if (const auto* pg = firstOf(pod.meta.labels, {api::keys::kPodGroupLabelSchedulerPlugins}))
    return "PodGroup/" + pod.meta.namespace_ + "/" + *pg;
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

/// Per-pod bookkeeping: where its contributions went, so they can be taken back exactly.
struct PodEntry {
  std::shared_ptr<const api::Pod> pod;
  bool ours = false;
  TaskStatus status = TaskStatus::Pending;
  std::string node;    ///< node it is accounted on (holds resources)
  std::string jobKey;  ///< empty when not ours
  // GPU sharing: what the pod contributed to its node's GPU groups, taken back exactly.
  std::shared_ptr<const api::PodGpuSpec> gpuSpec;
  std::string gpuSpecError;
  std::vector<std::string> gpuGroups;  ///< groups a fractional pod holds
  int64_t gpuUnits = 0;                ///< units per group
  std::string reservationGroup;        ///< set for a live GPU reservation pod
  bool reservation = false;            ///< a GPU reservation pod (live or terminating)
};

}  // namespace

/// One queued change: a watch event, (after a relist) the full list of a kind to reconcile, or
/// something the binder reports about a pod (applied in arrival order with the watch events, so a
/// bind's outcome can never overtake the binder's assumption it follows).
struct InboxItem {
  enum class Op { Event, Replace, AssumeBound, AssumeBinding, BindingDone, BindingFailed, AssumeEvicted,
                  EvictionFailed, Forget };
  Op op = Op::Event;
  Kind kind = Kind::Pod;
  WatchEvent event;
  std::shared_ptr<const std::vector<Json>> replace;
  std::string podKey, node;
  std::vector<std::string> gpuGroups;  ///< AssumeBinding of a fractional pod
  api::Time until;  ///< BindingFailed: end of the pod's backoff
  /// A pod event's object already converted on the watch's thread (the costly part of applying
  /// it), so the scheduling thread's snapshot() only files it.
  std::optional<api::Result<api::Pod>> pod;
};

struct Cache::Impl {
  ClusterClient& client;
  const api::Clock& clock;
  CacheOptions options;

  std::mutex inboxMu;
  std::vector<InboxItem> inbox;

  /// Watches by kind, and the relist worker. watchMu guards watches, relistQueue, stopping.
  std::mutex watchMu;
  std::condition_variable relistCv;
  std::map<Kind, std::unique_ptr<WatchHandle>> watches;
  std::set<Kind> relistQueue;
  bool stopping = false;
  std::thread worker;
  std::atomic<uint64_t> relistCount{0};
  bool isSynced = false;

  std::map<std::string, PodEntry> pods;
  std::map<std::string, std::shared_ptr<NodeInfo>> nodes;
  std::map<std::string, std::shared_ptr<JobInfo>> jobs;
  std::map<std::string, std::shared_ptr<const api::PodGroup>> podGroups;  // "ns/name"
  std::map<std::string, std::shared_ptr<QueueInfo>> queues;
  std::map<std::string, std::shared_ptr<const api::PriorityClass>> priorityClasses;
  std::map<std::string, std::shared_ptr<const api::Topology>> topologies;
  std::map<std::string, ConversionError> errors;  // "Kind/ns/name"

  struct Assumed {
    std::string node;
    api::Time expiry;
    /// GPU groups the bind gives a fractional pod: counted before the watch shows its labels.
    std::vector<std::string> gpuGroups;
  };
  /// What changed since the last snapshot: the next one reuses the rest of the last one's lists.
  std::set<std::string> dirtyJobs, dirtyNodes;
  std::shared_ptr<const Snapshot> last;

  /// Expiry of a bind still in flight: never (the binder reports its outcome).
  static constexpr api::Time kInFlight{INT64_MAX};
  std::map<std::string, Assumed> assumedBound;
  std::set<std::string> assumedEvicted;
  /// Pods whose bind failed, hidden from snapshots until their backoff ends.
  std::map<std::string, api::Time> backoff;
  std::atomic<uint64_t> expired{0};
  uint64_t generation = 0;
  /// The largest nvidia.com/gpu.memory label seen: pending gpu-memory pods are charged against it.
  int64_t maxGpuMemoryMiB = 0;

  Impl(ClusterClient& c, const api::Clock& k, CacheOptions o) : client(c), clock(k), options(std::move(o)) {}

  // ---- status of a pod as the scheduler sees it ----
  TaskStatus statusOf(const std::string& key, const api::Pod& pod, std::string& node) const {
    node = pod.nodeName;
    if (pod.phase == api::PodPhase::Succeeded) return TaskStatus::Succeeded;
    if (pod.phase == api::PodPhase::Failed) return TaskStatus::Failed;
    if (node.empty()) {
      auto a = assumedBound.find(key);
      if (a == assumedBound.end()) return TaskStatus::Pending;
      node = a->second.node;
      return TaskStatus::Bound;
    }
    if (pod.terminating() || assumedEvicted.count(key)) return TaskStatus::Releasing;
    return pod.phase == api::PodPhase::Running ? TaskStatus::Running : TaskStatus::Bound;
  }

  NodeInfo& nodeEntry(const std::string& name) {
    dirtyNodes.insert(name);
    auto& p = nodes[name];
    if (!p) {
      p = std::make_shared<NodeInfo>();
      p->name = name;
    }
    return mutableEntry(p);
  }

  QueueInfo& queueEntry(const std::string& name) {
    auto& p = queues[name];
    if (!p) {
      p = std::make_shared<QueueInfo>();
      p->name = name;
    }
    return mutableEntry(p);
  }

  // ---- node accounting ----
  /// The GPU a group holds by itself: one, while fractional pods use it and no reservation pod does.
  static int64_t groupHold(const GpuGroupInfo& g) { return !g.reserved && g.pods > 0 ? 1000 : 0; }

  /// Runs `fn` on the node's group `id` (created on demand), keeping the node's GPU use exact;
  /// an unused, unreserved group is dropped.
  template <class Fn>
  void withGpuGroup(NodeInfo& n, const std::string& id, Fn&& fn) {
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

  void addGpuUse(NodeInfo& n, const PodEntry& e, TaskStatus st, int sign) {
    for (const auto& id : e.gpuGroups)
      withGpuGroup(n, id, [&](GpuGroupInfo& g) {
        g.used += sign * e.gpuUnits;
        if (st == TaskStatus::Releasing) g.releasing += sign * e.gpuUnits;
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

  void addToNode(const std::string& key, const api::Pod& pod, TaskStatus st, const std::string& node, bool ours) {
    NodeInfo& n = nodeEntry(node);
    n.used += pod.requests;
    if (!ours) n.foreignUsed += pod.requests;
    if (st == TaskStatus::Releasing) n.releasing += pod.requests;
    n.podCount++;
    n.pods.insert(std::upper_bound(n.pods.begin(), n.pods.end(), key), key);
    n.usedPorts.insert(n.usedPorts.end(), pod.hostPorts.begin(), pod.hostPorts.end());
  }

  void removeFromNode(const std::string& key, const api::Pod& pod, TaskStatus st, const std::string& node, bool ours) {
    NodeInfo& n = nodeEntry(node);
    n.used -= pod.requests;
    if (!ours) {
      n.foreignUsed -= pod.requests;
      n.foreignUsed.normalize();
    }
    if (st == TaskStatus::Releasing) n.releasing -= pod.requests;
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
    if (!n.node && n.podCount == 0) nodes.erase(node);
  }

  // ---- job accounting ----
  /// Takes the job's queue contribution back before a change; see addJobToQueue.
  void removeJobFromQueue(const JobInfo& job) {
    if (job.allocated.isZero()) return;
    QueueInfo& q = queueEntry(job.queue);
    q.allocated -= job.allocated;
    q.allocated.normalize();
    if (!q.queue && q.allocated.isZero()) queues.erase(job.queue);  // an undeclared queue nothing uses
  }
  void addJobToQueue(const JobInfo& job) {
    if (job.allocated.isZero()) return;
    queueEntry(job.queue).allocated += job.allocated;
  }

  /// Re-derives what a job takes from its PodGroup and pods (queue, priority, minMember, age).
  void deriveJob(JobInfo& job) {
    job.podGroup.reset();
    job.podGroupMissing = false;
    const api::Pod* first = job.tasks.empty() ? nullptr : job.tasks.front().pod.get();
    if (!job.isSingleton()) {
      auto it = podGroups.find(job.namespace_ + "/" + job.name);
      if (it != podGroups.end()) job.podGroup = it->second;
      else job.podGroupMissing = true;
    }
    const api::PodGroup* pg = job.podGroup.get();
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
  }

  /// Runs `fn` on a mutable copy of the job, keeping queue totals and derived fields exact.
  template <class Fn>
  void withJob(const std::string& key, Fn&& fn) {
    dirtyJobs.insert(key);
    auto& p = jobs[key];
    if (!p) {
      p = std::make_shared<JobInfo>();
      p->key = key;
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
      jobs.erase(key);
      return;
    }
    addJobToQueue(job);
  }

  static void countTask(JobInfo& job, const TaskInfo& t, int sign) {
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

  void removeTask(const std::string& jobKey, const std::string& podKey) {
    withJob(jobKey, [&](JobInfo& job) {
      auto it = std::lower_bound(job.tasks.begin(), job.tasks.end(), podKey,
                                 [](const TaskInfo& t, const std::string& k) { return t.key < k; });
      if (it == job.tasks.end() || it->key != podKey) return;
      countTask(job, *it, -1);
      job.tasks.erase(it);
    });
  }

  void addTask(const std::string& jobKey, const std::string& podKey, const PodEntry& e, TaskStatus st,
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
      if (e.gpuSpec && e.gpuSpec->shared()) {
        // Queues are charged the fraction (milli-GPU), or the memory as a portion of the GPUs of the
        // node it is on (pending: of the largest GPUs seen).
        int64_t mem = maxGpuMemoryMiB;
        if (holdsResources(st))
          if (auto nit = nodes.find(node); nit != nodes.end()) mem = nit->second->gpuMemoryMiB;
        t.request.milliGpu = gpuChargeMilli(*e.gpuSpec, mem);
        t.gpuGroups = e.gpuGroups;
      }
      t.taskPriority = parseTaskPriority(*pod);
      if (const auto* sg = firstOf(pod->meta.labels, {api::keys::kSubGroupLabel, api::keys::kSubGroupLabelKai}))
        t.subGroup = *sg;
      t.assumed = pod->nodeName.empty() && st == TaskStatus::Bound;
      countTask(job, t, +1);
      auto it = std::lower_bound(job.tasks.begin(), job.tasks.end(), podKey,
                                 [](const TaskInfo& x, const std::string& k) { return x.key < k; });
      job.tasks.insert(it, std::move(t));
    });
  }

  // ---- pods ----
  void removePod(const std::string& key) {
    auto it = pods.find(key);
    if (it == pods.end()) return;
    PodEntry e = std::move(it->second);
    pods.erase(it);
    if (holdsResources(e.status)) {
      auto nit = nodes.find(e.node);
      if (nit != nodes.end()) addGpuUse(mutableEntry(nit->second), e, e.status, -1), dirtyNodes.insert(e.node);
      removeFromNode(key, *e.pod, e.status, e.node, e.ours || e.reservation);
    }
    if (!e.jobKey.empty()) removeTask(e.jobKey, key);
  }

  void upsertPod(std::shared_ptr<const api::Pod> pod) {
    const std::string key = pod->meta.key();
    removePod(key);
    PodEntry e;
    e.pod = std::move(pod);
    e.ours = e.pod->schedulerName == options.schedulerName;
    e.status = statusOf(key, *e.pod, e.node);
    if (!e.ours && !holdsResources(e.status)) return;  // another scheduler's concern
    if (e.ours && e.status == TaskStatus::Pending && backingOff(key)) {
      pods.emplace(key, std::move(e));  // kept, but in no job until its backoff ends
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
        auto a = e.pod->nodeName.empty() ? assumedBound.find(key) : assumedBound.end();
        e.gpuGroups = a != assumedBound.end() && !a->second.gpuGroups.empty() ? a->second.gpuGroups
                                                                              : gpuGroupsOf(e.pod->meta);
        e.gpuUnits = gpuUnitsOn(*e.gpuSpec, n);
      }
      addGpuUse(n, e, e.status, +1);
    }
    if (e.ours) {
      e.jobKey = jobKeyOf(*e.pod);
      addTask(e.jobKey, key, e, e.status, e.node);
    }
    pods.emplace(key, std::move(e));
  }

  /// Parses the pod's GPU annotations once per pod version.
  void parseGpu(PodEntry& e) {
    const auto& ann = e.pod->meta.annotations;
    if (ann.empty()) return;
    auto spec = api::parsePodGpuSpec(ann, e.pod->requests);
    if (!spec.ok()) {
      e.gpuSpecError = "Pod " + e.pod->meta.key() + ": " + spec.error().message;
      return;
    }
    const api::PodGpuSpec& g = *spec;
    if (g.shared() || g.filtersGpuTypes() || g.gpuPolicy != api::GpuPolicy::Unset ||
        g.nodePolicy != api::GpuPolicy::Unset || g.isolation != api::Isolation::Unset)
      e.gpuSpec = std::make_shared<const api::PodGpuSpec>(std::move(spec).value());
  }

  bool backingOff(const std::string& key) const {
    if (backoff.empty()) return false;
    auto it = backoff.find(key);
    return it != backoff.end() && clock.now() < it->second;
  }

  /// Re-evaluates a pod after an assumption about it changed.
  void refreshPod(const std::string& key) {
    auto it = pods.find(key);
    if (it == pods.end()) return;
    auto pod = it->second.pod;
    upsertPod(std::move(pod));
  }

  void onPod(const WatchEvent& ev, std::optional<api::Result<api::Pod>>* converted = nullptr) {
    if (ev.type == WatchEventType::Deleted) {
      auto meta = api::metaFromJson(ev.object);
      if (!meta.ok()) return;
      const std::string key = meta->key();
      assumedBound.erase(key);
      assumedEvicted.erase(key);
      backoff.erase(key);
      errors.erase("Pod/" + key);
      removePod(key);
      return;
    }
    auto pod = converted && *converted ? std::move(**converted) : api::podFromJson(ev.object);
    if (!pod.ok()) {
      recordError(Kind::Pod, ev.object, pod.error().message);
      return;  // keep the last good state of the pod, if any
    }
    const std::string key = pod->meta.key();
    errors.erase("Pod/" + key);
    if (!pod->nodeName.empty()) {
      assumedBound.erase(key);  // the watch confirmed (or overrode) our bind
      backoff.erase(key);
    }
    if (pod->terminating() || pod->terminated()) assumedEvicted.erase(key);
    upsertPod(std::make_shared<const api::Pod>(std::move(pod).value()));
  }

  void recordError(Kind kind, const Json& obj, const std::string& message) {
    auto meta = api::metaFromJson(obj);
    ConversionError e{kind, meta.ok() ? meta->namespace_ : "", meta.ok() ? meta->name : "", message};
    errors[std::string(api::kindInfo(kind).name) + "/" + (e.namespace_.empty() ? "" : e.namespace_ + "/") + e.name] = e;
  }

  void onNode(const WatchEvent& ev) {
    if (ev.type == WatchEventType::Deleted) {
      auto meta = api::metaFromJson(ev.object);
      if (!meta.ok()) return;
      errors.erase("Node/" + meta->name);
      auto it = nodes.find(meta->name);
      if (it == nodes.end()) return;
      dirtyNodes.insert(meta->name);
      NodeInfo& n = mutableEntry(it->second);
      n.node.reset();
      if (n.podCount == 0) nodes.erase(it);
      return;
    }
    auto node = api::nodeFromJson(ev.object);
    if (!node.ok()) {
      recordError(Kind::Node, ev.object, node.error().message);
      return;
    }
    errors.erase("Node/" + node->meta.name);
    NodeInfo& n = nodeEntry(node->meta.name);
    n.allocatable = node->allocatable;
    n.gpuMemoryMiB = 0;
    n.gpuLabelError.clear();
    auto mem = api::nodeGpuMemoryMiB(*node);
    if (!mem.ok()) n.gpuLabelError = mem.error().message;
    else if (*mem) n.gpuMemoryMiB = **mem, maxGpuMemoryMiB = std::max(maxGpuMemoryMiB, **mem);
    n.node = std::make_shared<const api::Node>(std::move(node).value());
  }

  /// Re-derives every job of a PodGroup after the PodGroup changed.
  void refreshPodGroupJob(const std::string& nsName) {
    const std::string key = "PodGroup/" + nsName;
    if (jobs.count(key)) withJob(key, [](JobInfo&) {});
  }

  void onPodGroup(const WatchEvent& ev) {
    auto meta = api::metaFromJson(ev.object);
    if (!meta.ok()) return;
    const std::string k = meta->key();
    if (ev.type == WatchEventType::Deleted) {
      podGroups.erase(k);
      errors.erase("PodGroup/" + k);
    } else {
      auto pg = api::podGroupFromJson(ev.object);
      if (!pg.ok()) {
        recordError(Kind::PodGroup, ev.object, pg.error().message);
        return;
      }
      errors.erase("PodGroup/" + k);
      podGroups[k] = std::make_shared<const api::PodGroup>(std::move(pg).value());
    }
    refreshPodGroupJob(k);
  }

  void onQueue(const WatchEvent& ev) {
    auto meta = api::metaFromJson(ev.object);
    if (!meta.ok()) return;
    if (ev.type == WatchEventType::Deleted) {
      errors.erase("Queue/" + meta->name);
      auto it = queues.find(meta->name);
      if (it == queues.end()) return;
      mutableEntry(it->second).queue.reset();
      if (it->second->allocated.isZero()) queues.erase(it);
      return;
    }
    auto q = api::queueFromJson(ev.object);
    if (!q.ok()) {
      recordError(Kind::Queue, ev.object, q.error().message);
      return;
    }
    errors.erase("Queue/" + meta->name);
    queueEntry(meta->name).queue = std::make_shared<const api::Queue>(std::move(q).value());
  }

  template <class T, class Conv>
  void onSimple(Kind kind, const WatchEvent& ev, std::map<std::string, std::shared_ptr<const T>>& table, Conv conv) {
    auto meta = api::metaFromJson(ev.object);
    if (!meta.ok()) return;
    const std::string errKey = std::string(api::kindInfo(kind).name) + "/" + meta->key();
    if (ev.type == WatchEventType::Deleted) {
      table.erase(meta->key());
      errors.erase(errKey);
      return;
    }
    auto v = conv(ev.object);
    if (!v.ok()) {
      recordError(kind, ev.object, v.error().message);
      return;
    }
    errors.erase(errKey);
    table[meta->key()] = std::make_shared<const T>(std::move(v).value());
  }

  void apply(Kind kind, const WatchEvent& ev, std::optional<api::Result<api::Pod>>* converted = nullptr) {
    if (ev.type == WatchEventType::Bookmark || ev.type == WatchEventType::Error) return;
    switch (kind) {
      case Kind::Pod: onPod(ev, converted); break;
      case Kind::Node: onNode(ev); break;
      case Kind::PodGroup: onPodGroup(ev); break;
      case Kind::Queue: onQueue(ev); break;
      case Kind::PriorityClass: onSimple(kind, ev, priorityClasses, api::priorityClassFromJson); break;
      case Kind::Topology: onSimple(kind, ev, topologies, api::topologyFromJson); break;
      default: break;
    }
  }

  /// Upserts every listed object of `kind` and deletes the ones the cache holds that the list lacks.
  void reconcile(Kind kind, const std::vector<Json>& items) {
    std::set<std::string> present;
    for (const auto& item : items) {
      auto meta = api::metaFromJson(item);
      if (meta.ok()) present.insert(meta->key());
      apply(kind, WatchEvent{WatchEventType::Modified, item});
    }
    std::vector<std::string> gone;
    auto collect = [&](const std::string& key) {
      if (!present.count(key)) gone.push_back(key);
    };
    switch (kind) {
      case Kind::Pod: for (const auto& [k, e] : pods) collect(k); break;
      case Kind::Node: for (const auto& [k, n] : nodes) if (n->node) collect(k); break;
      case Kind::PodGroup: for (const auto& [k, pg] : podGroups) collect(k); break;
      case Kind::Queue: for (const auto& [k, q] : queues) if (q->queue) collect(k); break;
      case Kind::PriorityClass: for (const auto& [k, pc] : priorityClasses) collect(k); break;
      case Kind::Topology: for (const auto& [k, t] : topologies) collect(k); break;
      default: break;
    }
    // Objects that failed conversion are only in `errors`: they may be gone too.
    const std::string prefix = std::string(api::kindInfo(kind).name) + "/";
    for (const auto& [k, e] : errors)
      if (k.rfind(prefix, 0) == 0) collect(k.substr(prefix.size()));
    std::sort(gone.begin(), gone.end());
    gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
    for (const auto& key : gone) {
      auto slash = key.find('/');
      Json meta = slash == std::string::npos ? Json{{"name", key}}
                                             : Json{{"namespace", key.substr(0, slash)}, {"name", key.substr(slash + 1)}};
      apply(kind, WatchEvent{WatchEventType::Deleted, Json{{"metadata", std::move(meta)}}});
      errors.erase(prefix + key);
    }
  }

  /// Lists every page of `kind`. An expired continue token (410) restarts the list.
  api::Result<ListResult> listAll(Kind kind) {
    for (int restart = 0;; ++restart) {
      ListOptions o;
      o.limit = options.listPageSize;
      ListResult all;
      bool expired = false;
      for (;;) {
        auto page = client.list(kind, o);
        if (!page.ok()) {
          if (page.error().code == 410 && !o.continueToken.empty() && restart < 3) {
            expired = true;
            break;
          }
          return page.error();
        }
        if (all.resourceVersion.empty()) all.resourceVersion = page->resourceVersion;
        for (auto& item : page->items) all.items.push_back(std::move(item));
        if (page->continueToken.empty()) return all;
        o.continueToken = page->continueToken;
      }
      if (!expired) return all;
    }
  }

  /// Starts the watch of `kind` from `rv`; its events (and a relist request on Error) go to the inbox.
  api::Result<std::unique_ptr<WatchHandle>> startWatch(Kind kind, const std::string& rv) {
    return client.watch(kind, rv, [this, kind](const WatchEvent& ev) {
      InboxItem item;
      item.kind = kind;
      item.event.type = ev.type;
      if (kind == Kind::Pod && (ev.type == WatchEventType::Added || ev.type == WatchEventType::Modified)) {
        // Converted here, not on the scheduling thread; the JSON is kept only to report an error
        // (building and freeing its tree was most of what a snapshot cost under a pod storm).
        item.pod = api::podFromJson(ev.object);
        if (!item.pod->ok()) item.event.object = ev.object;
      } else {
        item.event.object = ev.object;
      }
      {
        std::lock_guard<std::mutex> lock(inboxMu);
        inbox.push_back(std::move(item));
      }
      if (ev.type == WatchEventType::Error) requestRelist(kind);
      if (options.onEvent) options.onEvent();
    });
  }

  void requestRelist(Kind kind) {
    std::lock_guard<std::mutex> lock(watchMu);
    if (stopping) return;
    relistQueue.insert(kind);
    if (!worker.joinable()) worker = std::thread([this] { relistLoop(); });
    relistCv.notify_all();
  }

  /// The relist worker: stops the failed watch, lists, queues the replacement, watches again.
  void relistLoop() {
    std::unique_lock<std::mutex> lock(watchMu);
    for (;;) {
      relistCv.wait(lock, [&] { return stopping || !relistQueue.empty(); });
      if (stopping) return;
      const Kind kind = *relistQueue.begin();
      relistQueue.erase(relistQueue.begin());
      std::unique_ptr<WatchHandle> old = std::move(watches[kind]);
      lock.unlock();
      if (old) old->stop();  // not from inside its callback: this is the worker thread
      old.reset();
      api::Duration delay = options.relistRetry;
      for (;;) {
        auto listed = listAll(kind);
        api::Result<std::unique_ptr<WatchHandle>> handle = api::makeError("not listed");
        if (listed.ok()) {
          {
            std::lock_guard<std::mutex> inboxLock(inboxMu);
            InboxItem item;
            item.op = InboxItem::Op::Replace;
            item.kind = kind;
            item.replace = std::make_shared<const std::vector<Json>>(std::move(listed->items));
            inbox.push_back(std::move(item));
          }
          handle = startWatch(kind, listed->resourceVersion);
        }
        if (handle.ok()) {
          ++relistCount;
          if (options.onEvent) options.onEvent();
          lock.lock();
          if (stopping) {
            lock.unlock();
            (*handle)->stop();
            return;
          }
          watches[kind] = std::move(handle).value();
          break;
        }
        const api::Error& err = listed.ok() ? handle.error() : listed.error();
        std::fprintf(stderr, "tessera: relisting %s: %s (retrying)\n",
                     std::string(api::kindInfo(kind).plural).c_str(), err.message.c_str());
        lock.lock();
        if (relistCv.wait_for(lock, std::chrono::milliseconds(delay.millis), [&] { return stopping; })) return;
        lock.unlock();
        delay.millis = std::min<int64_t>(delay.millis * 2, 30'000);
      }
    }
  }

  /// Forgets assumed binds past their TTL (counted) and shows pods whose backoff ended again.
  void expireAssumptions() {
    const api::Time now = clock.now();
    std::vector<std::string> gone;
    for (const auto& [key, a] : assumedBound)
      if (a.expiry < now) gone.push_back(key);
    for (const auto& key : gone) {
      assumedBound.erase(key);
      ++expired;
      refreshPod(key);
    }
    gone.clear();
    for (const auto& [key, until] : backoff)
      if (until <= now) gone.push_back(key);
    for (const auto& key : gone) {
      backoff.erase(key);
      refreshPod(key);
    }
  }

  /// Applies what the binder reported about a pod.
  void applyPodOp(const InboxItem& item) {
    const std::string& key = item.podKey;
    switch (item.op) {
      case InboxItem::Op::AssumeBound:
      case InboxItem::Op::AssumeBinding: {
        auto it = pods.find(key);
        // A pod deleted (or bound elsewhere) meanwhile: nothing to assume.
        if (it == pods.end() || !it->second.pod->nodeName.empty()) return;
        const api::Time expiry = item.op == InboxItem::Op::AssumeBound ? clock.now() + options.assumeTtl : kInFlight;
        assumedBound[key] = Assumed{item.node, expiry, item.gpuGroups};
        break;
      }
      case InboxItem::Op::BindingDone: {
        auto it = assumedBound.find(key);
        if (it == assumedBound.end() || it->second.expiry != kInFlight) return;  // confirmed already
        it->second.expiry = clock.now() + options.assumeTtl;
        return;  // nothing visible changes
      }
      case InboxItem::Op::BindingFailed:
        assumedBound.erase(key);
        if (pods.count(key)) backoff[key] = item.until;
        break;
      case InboxItem::Op::AssumeEvicted: assumedEvicted.insert(key); break;
      case InboxItem::Op::EvictionFailed: assumedEvicted.erase(key); break;
      case InboxItem::Op::Forget:
        assumedBound.erase(key);
        assumedEvicted.erase(key);
        break;
      default: return;
    }
    refreshPod(key);
  }

  void push(InboxItem item) {
    std::lock_guard<std::mutex> lock(inboxMu);
    inbox.push_back(std::move(item));
  }

  void pushPodOp(InboxItem::Op op, const std::string& podKey, const std::string& node = {}, api::Time until = {}) {
    InboxItem item;
    item.op = op;
    item.podKey = podKey;
    item.node = node;
    item.until = until;
    push(std::move(item));
  }

  void drainInbox() {
    std::vector<InboxItem> batch;
    {
      std::lock_guard<std::mutex> lock(inboxMu);
      batch.swap(inbox);
    }
    for (auto& item : batch) {
      if (item.op == InboxItem::Op::Event) apply(item.kind, item.event, &item.pod);
      else if (item.op == InboxItem::Op::Replace) reconcile(item.kind, *item.replace);
      else applyPodOp(item);
    }
  }

  /// The last snapshot's sorted list with the dirty keys re-read from `table`: one merge pass,
  /// no walk over the maps. `include` says whether an entry belongs in the list.
  template <class T, class Key, class Include>
  static void mergeInto(const std::vector<std::shared_ptr<const T>>& before, const std::set<std::string>& dirty,
                        const std::map<std::string, std::shared_ptr<T>>& table, Key key, Include include,
                        std::vector<std::shared_ptr<const T>>& out) {
    out.reserve(before.size() + dirty.size());
    auto b = before.begin();
    for (const std::string& d : dirty) {
      for (; b != before.end() && key(**b) < d; ++b) out.push_back(*b);
      if (b != before.end() && key(**b) == d) ++b;  // replaced (or dropped) below
      auto it = table.find(d);
      if (it != table.end() && include(*it->second)) out.push_back(it->second);
    }
    out.insert(out.end(), b, before.end());
  }

  std::shared_ptr<const Snapshot> build() {
    auto s = std::make_shared<Snapshot>();
    s->generation = ++generation;
    s->takenAt = clock.now();
    auto nodeName = [](const NodeInfo& n) -> const std::string& { return n.name; };
    auto jobKey = [](const JobInfo& j) -> const std::string& { return j.key; };
    auto hasNode = [](const NodeInfo& n) { return n.node != nullptr; };
    auto any = [](const JobInfo&) { return true; };
    if (last) {
      mergeInto(last->nodes, dirtyNodes, nodes, nodeName, hasNode, s->nodes);
      mergeInto(last->jobs, dirtyJobs, jobs, jobKey, any, s->jobs);
    } else {
      s->nodes.reserve(nodes.size());
      for (const auto& [name, n] : nodes)
        if (n->node) s->nodes.push_back(n);
      s->jobs.reserve(jobs.size());
      for (const auto& [key, j] : jobs) s->jobs.push_back(j);
    }
    dirtyNodes.clear();
    dirtyJobs.clear();
    for (const auto& [name, q] : queues) s->queues.emplace(name, q);
    s->priorityClasses = priorityClasses;
    s->topologies = topologies;
    s->conversionErrors.reserve(errors.size());
    for (const auto& [k, e] : errors) s->conversionErrors.push_back(e);
    validateSnapshot(*s);
    last = s;
    return s;
  }
};

Cache::Cache(ClusterClient& client, const api::Clock& clock, CacheOptions options)
    : impl_(std::make_unique<Impl>(client, clock, std::move(options))) {}

Cache::~Cache() { stop(); }

api::Status Cache::start() {
  // Cluster-wide definitions first so pods resolve against them.
  static constexpr Kind kWatched[] = {Kind::PriorityClass, Kind::Queue,    Kind::Topology,
                                      Kind::Node,          Kind::PodGroup, Kind::Pod};
  for (Kind kind : kWatched) {
    auto listed = impl_->listAll(kind);
    if (!listed.ok())
      return api::makeError("listing " + std::string(api::kindInfo(kind).plural) + ": " + listed.error().message,
                            listed.error().code);
    for (const auto& item : listed->items) impl_->apply(kind, WatchEvent{WatchEventType::Added, item});
    auto handle = impl_->startWatch(kind, listed->resourceVersion);
    if (!handle.ok())
      return api::makeError("watching " + std::string(api::kindInfo(kind).plural) + ": " + handle.error().message,
                            handle.error().code);
    std::lock_guard<std::mutex> lock(impl_->watchMu);
    impl_->watches[kind] = std::move(handle).value();
  }
  impl_->isSynced = true;
  return api::Status::success();
}

void Cache::stop() {
  std::map<Kind, std::unique_ptr<WatchHandle>> watches;
  {
    std::lock_guard<std::mutex> lock(impl_->watchMu);
    impl_->stopping = true;
    impl_->relistCv.notify_all();
  }
  if (impl_->worker.joinable()) impl_->worker.join();
  {
    std::lock_guard<std::mutex> lock(impl_->watchMu);
    watches.swap(impl_->watches);
  }
  for (auto& [kind, w] : watches)
    if (w) w->stop();
}

std::shared_ptr<const Snapshot> Cache::snapshot() {
  impl_->drainInbox();
  impl_->expireAssumptions();
  return impl_->build();
}

void Cache::assumeBound(const std::string& podKey, const std::string& node) {
  impl_->pushPodOp(InboxItem::Op::AssumeBound, podKey, node);
}

void Cache::assumeBinding(const std::string& podKey, const std::string& node,
                          const std::vector<std::string>& gpuGroups) {
  InboxItem item;
  item.op = InboxItem::Op::AssumeBinding;
  item.podKey = podKey;
  item.node = node;
  item.gpuGroups = gpuGroups;
  impl_->push(std::move(item));
}

void Cache::bindingDone(const std::string& podKey) { impl_->pushPodOp(InboxItem::Op::BindingDone, podKey); }

void Cache::bindingFailed(const std::string& podKey, api::Time backoffUntil) {
  impl_->pushPodOp(InboxItem::Op::BindingFailed, podKey, {}, backoffUntil);
}

void Cache::assumeEvicted(const std::string& podKey) { impl_->pushPodOp(InboxItem::Op::AssumeEvicted, podKey); }

void Cache::evictionFailed(const std::string& podKey) { impl_->pushPodOp(InboxItem::Op::EvictionFailed, podKey); }

void Cache::forgetAssumed(const std::string& podKey) { impl_->pushPodOp(InboxItem::Op::Forget, podKey); }

uint64_t Cache::expiredAssumptions() const { return impl_->expired; }

bool Cache::synced() const { return impl_->isSynced; }

uint64_t Cache::relists() const { return impl_->relistCount; }

void Cache::applyEvent(api::Kind kind, const WatchEvent& event) { impl_->apply(kind, event); }

}  // namespace tessera::cache
