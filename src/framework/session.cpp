#include "tessera/framework/session.h"

#include <algorithm>
#include <map>

#include "tessera/framework/action.h"
#include "tessera/framework/plugin.h"

namespace tessera::framework {

const char* toString(TaskState s) {
  switch (s) {
    case TaskState::Pending: return "Pending";
    case TaskState::Allocated: return "Allocated";
    case TaskState::Pipelined: return "Pipelined";
    case TaskState::Bound: return "Bound";
    case TaskState::Running: return "Running";
    case TaskState::Releasing: return "Releasing";
    case TaskState::Succeeded: return "Succeeded";
    case TaskState::Failed: return "Failed";
  }
  return "Unknown";
}

bool isReadyState(TaskState s) {
  return s == TaskState::Allocated || s == TaskState::Pipelined || s == TaskState::Bound ||
         s == TaskState::Running || s == TaskState::Succeeded;
}

bool holdsNodeResources(TaskState s) {
  return s == TaskState::Allocated || s == TaskState::Bound || s == TaskState::Running ||
         s == TaskState::Releasing;
}

namespace {

TaskState fromCache(cache::TaskStatus s) {
  switch (s) {
    case cache::TaskStatus::Pending: return TaskState::Pending;
    case cache::TaskStatus::Bound: return TaskState::Bound;
    case cache::TaskStatus::Running: return TaskState::Running;
    case cache::TaskStatus::Releasing: return TaskState::Releasing;
    case cache::TaskStatus::Succeeded: return TaskState::Succeeded;
    case cache::TaskStatus::Failed: return TaskState::Failed;
  }
  return TaskState::Pending;
}

int64_t levelOf(int64_t milliGpu) { return milliGpu <= 0 ? 0 : milliGpu / 1000; }

}  // namespace

Session::Session(std::shared_ptr<const cache::Snapshot> snapshot, const Config& config, const api::Clock& clock)
    : snapshot_(std::move(snapshot)), config_(config), clock_(clock), now_(clock.now()) {
  buildState();
}

Session::~Session() = default;

void Session::buildState() {
  const cache::Snapshot& s = *snapshot_;
  nodes_.resize(s.nodes.size());
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const cache::NodeInfo& info = *s.nodes[i];
    SessionNode& n = nodes_[i];
    n.info = &info;
    n.index = static_cast<int>(i);
    n.idle = info.allocatable - info.used;
    n.releasing = info.releasing;
    n.podCount = info.podCount;
  }
  buildGpuGroups();
  gpuShortage_ = nodes_.empty() ? std::string("no nodes available")
                               : "insufficient " + std::string(api::kResourceGpu) + " (" + std::to_string(nodes_.size()) +
                                     (nodes_.size() == 1 ? " node)" : " nodes)");
  // GPU levels index.
  nodeVersion_.assign(nodes_.size(), 0);
  nodeLevel_.assign(nodes_.size(), 0);
  gpuLevelPos_.assign(nodes_.size(), 0);
  for (const SessionNode& n : nodes_) {
    const int lvl = static_cast<int>(levelOf(n.futureIdle().milliGpu));
    if (static_cast<int>(gpuLevels_.size()) <= lvl) gpuLevels_.resize(lvl + 1);
    nodeLevel_[n.index] = lvl;
    gpuLevelPos_[n.index] = static_cast<int>(gpuLevels_[lvl].size());
    gpuLevels_[lvl].push_back(n.index);
  }

  queues_.reserve(s.queues.size());
  for (const auto& [name, q] : s.queues) {
    SessionQueue sq;
    sq.info = q.get();
    sq.index = static_cast<int>(queues_.size());
    sq.name = name;
    sq.queue = q->queue.get();
    sq.allocated = q->allocated;
    queueIndex_[name] = sq.index;
    queues_.push_back(std::move(sq));
  }

  const api::PriorityClass* globalDefault = nullptr;
  for (const auto& [name, pc] : s.priorityClasses)
    if (pc->globalDefault && (!globalDefault || pc->value > globalDefault->value)) globalDefault = pc.get();

  size_t taskCount = 0;
  for (const auto& j : s.jobs) taskCount += j->tasks.size();
  tasks_.resize(taskCount);
  size_t taskOffset = 0;
  // Many jobs share a queue and a priority class: remember the last lookups.
  const std::string* lastQueueName = nullptr;
  int lastQueue = -1;
  const std::string* lastClassName = nullptr;
  int32_t lastClassValue = 0;
  jobs_.resize(s.jobs.size());
  for (size_t i = 0; i < s.jobs.size(); ++i) {
    const cache::JobInfo& info = *s.jobs[i];
    SessionJob& j = jobs_[i];
    j.info = &info;
    j.index = static_cast<int>(i);
    if (!lastQueueName || *lastQueueName != info.queue) {
      auto qit = queueIndex_.find(info.queue);
      lastQueue = (qit != queueIndex_.end() && queues_[qit->second].queue) ? qit->second : -1;
      lastQueueName = &info.queue;
    }
    j.queue = lastQueue;
    // A PodGroup's priority class decides for the whole gang; otherwise the value admission
    // copied into the pod's spec.priority, else the pod's class, else the global default.
    const bool groupClass = info.podGroup && !info.podGroup->priorityClassName.empty();
    if (!groupClass && info.podPriority) {
      j.priority = *info.podPriority;
    } else if (!info.priorityClassName.empty()) {
      if (!lastClassName || *lastClassName != info.priorityClassName) {
        auto pc = s.priorityClasses.find(info.priorityClassName);
        lastClassValue = pc != s.priorityClasses.end() ? pc->second->value : 0;
        lastClassName = &info.priorityClassName;
      }
      j.priority = lastClassValue;
    } else {
      j.priority = globalDefault ? globalDefault->value : 0;
    }
    switch (info.preemptibility) {
      case api::Preemptibility::Preemptible: j.preemptible = true; break;
      case api::Preemptibility::NonPreemptible: j.preemptible = false; break;
      case api::Preemptibility::Unset: j.preemptible = j.priority < 100; break;
    }
    j.tasks = std::span<SessionTask>(tasks_.data() + taskOffset, info.tasks.size());
    taskOffset += info.tasks.size();
    for (size_t t = 0; t < info.tasks.size(); ++t) {
      SessionTask& st = j.tasks[t];
      st.info = &info.tasks[t];
      st.job = j.index;
      st.index = static_cast<int>(t);
      st.state = fromCache(st.info->status);
      if (isReadyState(st.state)) j.readyCount++;
      if (st.state == TaskState::Pending) j.pendingCount++;
    }
    j.allocated = info.allocated;
    j.minMember_ = info.minMember;
  }
}

void Session::setUnschedulable(SessionJob& job, std::string_view reason) {
  if (reason.empty()) {
    job.reason = -1;
    return;
  }
  auto it = reasonIndex_.find(reason);
  if (it == reasonIndex_.end()) {
    reasons_.emplace_back(reason);
    it = reasonIndex_.emplace(reasons_.back(), static_cast<int32_t>(reasons_.size() - 1)).first;
  }
  job.reason = it->second;
}

const std::string& Session::reasonOf(const SessionJob& job) const {
  static const std::string kNone;
  return job.reason < 0 ? kNone : reasons_[job.reason];
}

int Session::findNode(const std::string& name) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), name,
                             [](const SessionNode& n, const std::string& k) { return n.name() < k; });
  return it != nodes_.end() && it->name() == name ? it->index : -1;
}

int Session::findJob(const std::string& key) const {
  auto it = std::lower_bound(jobs_.begin(), jobs_.end(), key,
                             [](const SessionJob& j, const std::string& k) { return j.key() < k; });
  return it != jobs_.end() && it->key() == key ? it->index : -1;
}

int Session::findQueue(const std::string& name) const {
  auto it = queueIndex_.find(name);
  return it == queueIndex_.end() ? -1 : it->second;
}

void Session::open() {
  for (const auto& p : config_.plugins) p->onSessionOpen(*this);
}

void Session::runActions() {
  for (const auto& a : config_.actions) a->execute(*this);
}

// ---- registration ----
void Session::addJobOrderFn(const std::string& p, JobOrderFn fn) { jobOrder_.push_back({p, std::move(fn)}); }
void Session::addTaskOrderFn(const std::string& p, TaskOrderFn fn) { taskOrder_.push_back({p, std::move(fn)}); }
void Session::addQueueOrderFn(const std::string& p, QueueOrderFn fn) { queueOrder_.push_back({p, std::move(fn)}); }
void Session::addJobValidFn(const std::string& p, JobValidFn fn) { jobValid_.push_back({p, std::move(fn)}); }
void Session::addJobReadyFn(const std::string& p, JobReadyFn fn) { jobReady_.push_back({p, std::move(fn)}); }
void Session::addPrePredicateFn(const std::string& p, PrePredicateFn fn) { prePredicate_.push_back({p, std::move(fn)}); }
void Session::addPredicateFn(const std::string& p, PredicateFn fn) { predicate_.push_back({p, std::move(fn)}); }
void Session::addNodeOrderFn(const std::string& p, NodeOrderFn fn) { nodeOrder_.push_back({p, std::move(fn)}); }
void Session::addGpuOrderFn(const std::string& p, GpuOrderFn fn) { gpuOrder_.push_back({p, std::move(fn)}); }
void Session::addPreemptableFn(const std::string& p, VictimFn fn) { preemptable_.push_back({p, std::move(fn)}); }
void Session::addReclaimableFn(const std::string& p, VictimFn fn) { reclaimable_.push_back({p, std::move(fn)}); }
void Session::addCapacityFn(const std::string& p, CapacityFn fn) { capacity_.push_back({p, std::move(fn)}); }
void Session::addPlacementKeyFn(const std::string& p, PlacementKeyFn fn) { placementKey_.push_back({p, std::move(fn)}); }
void Session::addCanReclaimFn(const std::string& p, JobCheckFn fn) { canReclaim_.push_back({p, std::move(fn)}); }

std::optional<std::string> Session::canReclaim(const SessionJob& job) const {
  if (canReclaim_.empty()) return std::string("no plugin allows reclaiming");
  for (const auto& f : canReclaim_)
    if (auto r = f.fn(job)) return r;
  return std::nullopt;
}

void Session::addVictimOrderFn(const std::string& p, VictimOrderFn fn) { victimOrder_.push_back({p, std::move(fn)}); }

bool Session::victimLess(const SessionTask& l, const SessionTask& r) const {
  for (const auto& f : victimOrder_)
    if (int c = f.fn(l, r)) return c < 0;
  const auto& lp = l.pod().meta;
  const auto& rp = r.pod().meta;
  if (lp.creationTimestamp != rp.creationTimestamp) return lp.creationTimestamp > rp.creationTimestamp;  // newest first
  return l.info->key < r.info->key;
}

void Session::addJobDomainsFn(const std::string& p, JobDomainsFn fn) { jobDomains_.push_back({p, std::move(fn)}); }

std::optional<std::vector<NodeDomain>> Session::jobDomains(const SessionJob& job, std::string& reason) const {
  for (const auto& f : jobDomains_)
    if (auto d = f.fn(job, reason)) return d;
  return std::nullopt;
}

void Session::addAllocateHandler(const std::string& p, TaskEventFn onAllocate, TaskEventFn onDeallocate) {
  if (onAllocate) onAllocate_.push_back({p, std::move(onAllocate)});
  if (onDeallocate) onDeallocate_.push_back({p, std::move(onDeallocate)});
}

// ---- orders: plugin verdicts first, then a unique key so every order is total ----
bool Session::jobLess(const SessionJob& l, const SessionJob& r) const {
  for (const auto& f : jobOrder_)
    if (int c = f.fn(l, r)) return c < 0;
  if (l.info->creationTime != r.info->creationTime) return l.info->creationTime < r.info->creationTime;
  if (l.info->uid != r.info->uid) return l.info->uid < r.info->uid;
  return l.key() < r.key();
}

bool Session::taskLess(const SessionTask& l, const SessionTask& r) const {
  for (const auto& f : taskOrder_)
    if (int c = f.fn(l, r)) return c < 0;
  const auto& lp = l.pod().meta;
  const auto& rp = r.pod().meta;
  if (lp.creationTimestamp != rp.creationTimestamp) return lp.creationTimestamp < rp.creationTimestamp;
  if (lp.uid != rp.uid) return lp.uid < rp.uid;
  return l.info->key < r.info->key;
}

bool Session::queueLess(const SessionQueue& l, const SessionQueue& r, const SessionJob* lJob,
                        const SessionJob* rJob) const {
  for (const auto& f : queueOrder_)
    if (int c = f.fn(l, r, lJob, rJob)) return c < 0;
  return l.name < r.name;
}

std::optional<std::string> Session::jobInvalid(const SessionJob& job) const {
  if (job.queue < 0) return "queue \"" + job.info->queue + "\" not found (Queue " + job.info->queue + " does not exist)";
  for (const auto& f : jobValid_)
    if (auto r = f.fn(job)) return r;
  return std::nullopt;
}

bool Session::jobReady(const SessionJob& job) const {
  for (const auto& f : jobReady_)
    if (!f.fn(job)) return false;
  return true;
}

std::optional<std::string> Session::prePredicate(const SessionJob& job, const SessionTask& task) const {
  for (const auto& f : prePredicate_)
    if (auto r = f.fn(job, task)) return r;
  return std::nullopt;
}

bool Session::predicate(const SessionTask& task, const SessionNode& node, std::string& reason) const {
  for (const auto& f : predicate_)
    if (!f.fn(task, node, reason)) return false;
  return true;
}

int64_t Session::nodeScore(const SessionTask& task, const SessionNode& node) const {
  int64_t s = 0;
  for (const auto& f : nodeOrder_) s += f.fn(task, node);
  return s;
}

int64_t Session::gpuScore(const SessionTask& task, const SessionNode& node, int gpuGroup) const {
  int64_t s = 0;
  for (const auto& f : gpuOrder_) s += f.fn(task, node, gpuGroup);
  return s;
}

bool Session::preemptable(const SessionJob& claimant, const SessionTask& victim) const {
  for (const auto& f : preemptable_)
    if (!f.fn(claimant, victim)) return false;
  return !preemptable_.empty();
}

bool Session::reclaimable(const SessionJob& claimant, const SessionTask& victim) const {
  for (const auto& f : reclaimable_)
    if (!f.fn(claimant, victim)) return false;
  return !reclaimable_.empty();
}

std::optional<std::string> Session::capacityCheck(const SessionJob& job, const api::Resources& request) const {
  for (const auto& f : capacity_)
    if (auto r = f.fn(job, request)) return r;
  return std::nullopt;
}

// ---- placement ----
namespace {

bool rankedBefore(const auto& a, const auto& b) {
  if (a.fitsNow != b.fitsNow) return a.fitsNow;
  if (a.score != b.score) return a.score > b.score;
  return a.node < b.node;
}

/// Heap comparator: "a is worse than b", so the best entry is on top.
struct Worse {
  template <class T>
  bool operator()(const T& a, const T& b) const { return rankedBefore(b, a); }
};

void appendSelector(std::string& key, const api::NodeSelectorRequirement& r) {
  key += r.key;
  key += static_cast<char>('0' + static_cast<int>(r.op));
  for (const auto& v : r.values) key += v + ",";
  key += ';';
}

}  // namespace

std::string Session::placementKey(const SessionTask& task) const {
  const api::Pod& pod = task.pod();
  const api::Resources& r = task.request();
  std::string key;
  key.reserve(128);
  key += std::to_string(r.milliCpu) + "/" + std::to_string(r.memory) + "/" + std::to_string(r.milliGpu);
  for (const auto& [n, v] : r.scalars) key += "/" + n + "=" + std::to_string(v);
  key += "|sel:";
  for (const auto& [k, v] : pod.nodeSelector) key += k + "=" + v + ",";
  key += "|aff:";
  for (const auto& term : pod.requiredNodeAffinity) {
    for (const auto& e : term.matchExpressions) appendSelector(key, e);
    key += "f:";
    for (const auto& e : term.matchFields) appendSelector(key, e);
    key += "||";
  }
  key += "|tol:";
  for (const auto& t : pod.tolerations) {
    key += t.key + (t.op == api::TolerationOperator::Exists ? "?" : "=") + t.value + ":";
    key += t.effect ? std::to_string(static_cast<int>(*t.effect)) : "*";
    key += ",";
  }
  key += "|ports:";
  for (const auto& hp : pod.hostPorts) key += std::to_string(hp.port) + hp.protocol + hp.hostIP + ",";
  // Only the annotations Tessera's plugins read: per-pod annotations (a Job's completion index,
  // a restart stamp) must not split pods that place alike into separate rankings.
  static constexpr const char* kPlacementAnnotations[] = {
      api::keys::kNodePolicy, api::keys::kGpuPolicy,  api::keys::kGpuFraction, api::keys::kGpuMemory,
      api::keys::kGpuFractionNumDevices, api::keys::kUseGpuType, api::keys::kAvoidGpuType};
  key += "|ann:";
  for (const char* k : kPlacementAnnotations)
    if (const std::string* v = pod.meta.annotation(k)) key += std::string(k) + "=" + *v + "\n";
  for (const auto& f : placementKey_) {
    key += "|" + f.plugin + ":";
    f.fn(task, key);
  }
  return key;
}

std::optional<Session::RankedNode> Session::rank(const SessionTask& task, const SessionNode& n) const {
  std::string reason;
  if (!predicate(task, n, reason)) return std::nullopt;
  if (!fits(task, n, /*future=*/true)) return std::nullopt;
  RankedNode r;
  r.fitsNow = fits(task, n, /*future=*/false);
  r.score = nodeScore(task, n);
  r.node = n.index;
  r.version = nodeVersion_[n.index];
  return r;
}

Placement Session::findPlacement(const SessionTask& task, bool allowPipeline) {
  const int64_t need = levelOf(task.nodeRequest().milliGpu);
  if (need > maxFreeGpus()) {
    // No node has that many GPUs free, even counting releasing ones: no need to look.
    Placement p;
    p.reason = gpuShortageReason();
    return p;
  }
  // Inside a domain (a rack, say) the ranking covers the domain's nodes only, kept per domain name:
  // many gangs placed rack by rack reuse one ranking per rack.
  // The key of a task is built once per session (the same pod is often tried by several actions).
  const size_t slot = static_cast<size_t>(&task - tasks_.data());
  if (keyCache_.size() != tasks_.size()) keyCache_.resize(tasks_.size());
  if (keyCache_[slot].empty()) keyCache_[slot] = placementKey(task);
  std::string key = keyCache_[slot];
  if (domain_) key += "|domain:" + domain_->name;
  auto [it, fresh] = rankings_.try_emplace(std::move(key));
  Ranking& rk = it->second;
  if (fresh) {
    if (domain_) {
      for (int ni : domain_->nodes)
        if (nodeLevel_[ni] >= need)
          if (auto r = rank(task, nodes_[ni])) rk.heap.push_back(*r);
    } else {
      for (size_t lvl = static_cast<size_t>(need); lvl < gpuLevels_.size(); ++lvl)
        for (int ni : gpuLevels_[lvl])
          if (auto r = rank(task, nodes_[ni])) rk.heap.push_back(*r);
    }
    std::make_heap(rk.heap.begin(), rk.heap.end(), Worse{});
  } else {
    // Fold in the nodes (of the domain) that changed since this ranking was last used.
    for (size_t i = rk.changesSeen; i < nodeChanges_.size(); ++i) {
      const int ni = nodeChanges_[i];
      if (domain_ && !std::binary_search(domain_->nodes.begin(), domain_->nodes.end(), ni)) continue;
      if (auto r = rank(task, nodes_[ni])) {
        rk.heap.push_back(*r);
        std::push_heap(rk.heap.begin(), rk.heap.end(), Worse{});
      }
    }
  }
  rk.changesSeen = nodeChanges_.size();
  while (!rk.heap.empty() && rk.heap.front().version != nodeVersion_[rk.heap.front().node]) {
    std::pop_heap(rk.heap.begin(), rk.heap.end(), Worse{});
    rk.heap.pop_back();
  }
  if (!rk.heap.empty()) {
    const RankedNode& best = rk.heap.front();
    if (best.fitsNow || allowPipeline) {
      Placement p;
      p.node = best.node;
      p.pipelined = !best.fitsNow;
      return p;
    }
  }
  return scanPlacement(task, allowPipeline);  // nothing fits: the full scan says why
}

Placement Session::scanPlacement(const SessionTask& task, bool allowPipeline) const {
  const api::Resources& req = task.nodeRequest();
  std::map<std::string, int> reasons;
  int best = -1, bestFuture = -1;
  int64_t bestScore = 0, bestFutureScore = 0;
  std::vector<std::string> short_;
  std::string reason;

  auto visit = [&](int ni) {
    const SessionNode& n = nodes_[ni];
    reason.clear();
    if (!predicate(task, n, reason)) {
      reasons[reason]++;
      return;
    }
    const api::Resources future = n.futureIdle();
    const bool fitsFuture = fits(task, n, /*future=*/true);
    const bool fitsNow = fitsFuture && fits(task, n, /*future=*/false);
    if (fitsNow) {
      const int64_t s = nodeScore(task, n);
      if (best < 0 || s > bestScore) best = ni, bestScore = s;  // equal score: lower index = name order
      return;
    }
    if (fitsFuture && allowPipeline) {
      const int64_t s = nodeScore(task, n);
      if (bestFuture < 0 || s > bestFutureScore) bestFuture = ni, bestFutureScore = s;
      return;
    }
    short_.clear();
    req.insufficient(allowPipeline ? future : n.idle, short_);
    if (short_.empty() && task.sharesGpu() && !gpuShareFits(task, n, allowPipeline))
      short_.push_back(task.info->gpuSpec->numDevices > 1 ? "GPUs with room for the pod's GPU share"
                                                          : "GPU with room for the pod's GPU share");
    if (short_.empty()) short_.push_back("resources promised to pipelined pods");
    for (const auto& r : short_) reasons["insufficient " + r]++;
  };

  const int64_t need = levelOf(req.milliGpu);
  if (need > maxFreeGpus()) {
    // No node has that many GPUs free, even counting releasing ones: no need to look.
    Placement p;
    p.reason = gpuShortageReason();
    return p;
  }
  if (domain_) {
    for (int ni : domain_->nodes) visit(ni);
    const int outside = static_cast<int>(nodes_.size() - domain_->nodes.size());
    if (outside > 0) reasons["outside " + domain_->name] += outside;
  } else if (need > 0) {
    // Visit nodes by ascending index within levels that can hold the GPUs; others lack them.
    std::vector<int> candidates;
    for (size_t lvl = static_cast<size_t>(need); lvl < gpuLevels_.size(); ++lvl)
      candidates.insert(candidates.end(), gpuLevels_[lvl].begin(), gpuLevels_[lvl].end());
    std::sort(candidates.begin(), candidates.end());
    for (int ni : candidates) visit(ni);
    const int skipped = static_cast<int>(nodes_.size() - candidates.size());
    if (skipped > 0) reasons["insufficient " + std::string(api::kResourceGpu)] += skipped;
  } else {
    for (const SessionNode& n : nodes_) visit(n.index);
  }

  Placement p;
  if (best >= 0) {
    p.node = best;
    return p;
  }
  if (bestFuture >= 0) {
    p.node = bestFuture;
    p.pipelined = true;
    return p;
  }
  // Aggregate: most frequent reason first, then by text.
  std::vector<std::pair<std::string, int>> sorted(reasons.begin(), reasons.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (nodes_.empty()) p.reason = "no nodes available";
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i) p.reason += ", ";
    p.reason += sorted[i].first + " (" + std::to_string(sorted[i].second) + (sorted[i].second == 1 ? " node)" : " nodes)");
  }
  return p;
}

int64_t Session::maxFreeGpus() const {
  int64_t lvl = static_cast<int64_t>(gpuLevels_.size()) - 1;
  while (lvl > 0 && gpuLevels_[lvl].empty()) --lvl;
  return std::max<int64_t>(lvl, 0);
}


// ---- state changes (through Statement) ----
int Session::gpuLevel(const SessionNode& node) const {
  // Only the GPU part of futureIdle(): this runs on every change of a node, so no vector copies.
  return static_cast<int>(levelOf(node.idle.milliGpu + node.releasing.milliGpu - node.pipelined.milliGpu));
}

void Session::touchNode(const SessionNode& node) {
  ++nodeVersion_[node.index];
  nodeChanges_.push_back(node.index);
}

void Session::nodeChanged(const SessionNode& node) {
  touchNode(node);
  const int now = gpuLevel(node);
  const int old = nodeLevel_[node.index];
  if (now == old) return;
  auto& from = gpuLevels_[old];
  const int pos = gpuLevelPos_[node.index];
  from[pos] = from.back();
  gpuLevelPos_[from[pos]] = pos;
  from.pop_back();
  if (static_cast<int>(gpuLevels_.size()) <= now) gpuLevels_.resize(now + 1);
  gpuLevelPos_[node.index] = static_cast<int>(gpuLevels_[now].size());
  gpuLevels_[now].push_back(node.index);
  nodeLevel_[node.index] = now;
}

void Session::notifyAllocate(const SessionTask& task) const {
  for (const auto& f : onAllocate_) f.fn(task);
}
void Session::notifyDeallocate(const SessionTask& task) const {
  for (const auto& f : onDeallocate_) f.fn(task);
}

namespace {
/// Removes one occurrence of each of `ports` from `from`, newest first (not necessarily the last
/// entries: other statements may have placed pods on the node since).
void removePorts(std::vector<api::HostPort>& from, const std::vector<api::HostPort>& ports) {
  for (const auto& p : ports) {
    for (auto it = from.rbegin(); it != from.rend(); ++it)
      if (it->port == p.port && it->protocol == p.protocol && it->hostIP == p.hostIP) {
        from.erase(std::next(it).base());
        break;
      }
  }
}
}  // namespace

void Session::applyRepipeline(SessionTask& task) {
  TESSERA_ASSERT(task.state == TaskState::Allocated);
  SessionNode& n = nodes_[task.node];
  SessionJob& j = jobs_[task.job];
  n.idle += task.nodeRequest();
  n.idle.normalize();
  n.podCount--;
  removePorts(n.addedPorts, task.pod().hostPorts);
  n.pipelined += task.nodeRequest();
  nodeChanged(n);
  task.state = TaskState::Pipelined;
  j.pipelinedCount++;  // still ready, still counted in allocated
}

void Session::applyReserve(const SessionTask& task, int node) {
  SessionNode& n = nodes_[node];
  n.pipelined += task.nodeRequest();
  nodeChanged(n);
}

void Session::applyAllocate(SessionTask& task, int node) {
  TESSERA_ASSERT(task.state == TaskState::Pending);
  SessionNode& n = nodes_[node];
  SessionJob& j = jobs_[task.job];
  n.idle -= task.nodeRequest();
  if (task.sharesGpu()) takeGpus(task, n, /*pipelined=*/false);
  n.podCount++;
  n.addedPorts.insert(n.addedPorts.end(), task.pod().hostPorts.begin(), task.pod().hostPorts.end());
  nodeChanged(n);
  task.state = TaskState::Allocated;
  task.node = node;
  j.readyCount++;
  j.pendingCount--;
  j.allocated += task.request();
  if (j.queue >= 0) queues_[j.queue].allocated += task.request();
  notifyAllocate(task);
}

void Session::applyPipeline(SessionTask& task, int node) {
  TESSERA_ASSERT(task.state == TaskState::Pending);
  SessionNode& n = nodes_[node];
  SessionJob& j = jobs_[task.job];
  n.pipelined += task.nodeRequest();
  if (task.sharesGpu()) takeGpus(task, n, /*pipelined=*/true);
  nodeChanged(n);
  task.state = TaskState::Pipelined;
  task.node = node;
  j.readyCount++;
  j.pendingCount--;
  j.pipelinedCount++;
  j.allocated += task.request();
  if (j.queue >= 0) queues_[j.queue].allocated += task.request();
  notifyAllocate(task);
}

void Session::applyEvict(SessionTask& task) {
  TESSERA_ASSERT(task.state == TaskState::Bound || task.state == TaskState::Running);
  if (task.node < 0) task.node = findNode(task.info->nodeName);
  TESSERA_ASSERT(task.node >= 0);
  SessionNode& n = nodes_[task.node];
  SessionJob& j = jobs_[task.job];
  n.releasing += task.nodeRequest();
  if (task.sharesGpu()) releaseGpus(task, n, +1);
  nodeChanged(n);
  task.state = TaskState::Releasing;
  j.readyCount--;
  j.allocated -= task.request();
  if (j.queue >= 0) queues_[j.queue].allocated -= task.request();
  notifyDeallocate(task);
}

void Session::undo(const Operation& op) {
  SessionTask& task = jobs_[op.job].tasks[op.task];
  SessionNode& n = nodes_[op.node];
  SessionJob& j = jobs_[op.job];
  if (op.type == Operation::Type::Reserve) {
    n.pipelined -= task.nodeRequest();
    n.pipelined.normalize();
    nodeChanged(n);
    return;
  }
  switch (op.type) {
    case Operation::Type::Allocate: {
      TESSERA_ASSERT(task.state == TaskState::Allocated);
      n.idle += task.nodeRequest();
      if (task.sharesGpu()) returnGpus(task, n, /*pipelined=*/false);
      n.podCount--;
      removePorts(n.addedPorts, task.pod().hostPorts);
      j.readyCount--;
      j.pendingCount++;
      break;
    }
    case Operation::Type::Pipeline: {
      TESSERA_ASSERT(task.state == TaskState::Pipelined);
      n.pipelined -= task.nodeRequest();
      if (task.sharesGpu()) returnGpus(task, n, /*pipelined=*/true);
      j.readyCount--;
      j.pendingCount++;
      j.pipelinedCount--;
      break;
    }
    case Operation::Type::Evict: {
      TESSERA_ASSERT(task.state == TaskState::Releasing);
      n.releasing -= task.nodeRequest();
      if (task.sharesGpu()) releaseGpus(task, n, -1);
      j.readyCount++;
      break;
    }
    case Operation::Type::Repipeline: {
      // Back to Allocated on the same node; the job's and queue's totals do not change.
      TESSERA_ASSERT(task.state == TaskState::Pipelined);
      n.pipelined -= task.nodeRequest();
      n.pipelined.normalize();
      n.idle -= task.nodeRequest();
      n.podCount++;
      n.addedPorts.insert(n.addedPorts.end(), task.pod().hostPorts.begin(), task.pod().hostPorts.end());
      j.pipelinedCount--;
      nodeChanged(n);
      task.state = op.previous;
      task.node = op.previousNode;
      return;
    }
  }
  if (op.type == Operation::Type::Evict) {
    j.allocated += task.request();
    if (j.queue >= 0) queues_[j.queue].allocated += task.request();
  } else {
    j.allocated -= task.request();
    if (j.queue >= 0) queues_[j.queue].allocated -= task.request();
  }
  n.idle.normalize();
  n.releasing.normalize();
  n.pipelined.normalize();
  j.allocated.normalize();
  if (j.queue >= 0) queues_[j.queue].allocated.normalize();
  nodeChanged(n);
  task.state = op.previous;
  task.node = op.previousNode;
  if (op.type == Operation::Type::Evict) notifyAllocate(task);
  else notifyDeallocate(task);
}

void Session::commitOperations(std::vector<Operation> ops) {
  committed_.insert(committed_.end(), std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
}

std::string SessionResult::podMessage(const PodStatus& p) const {
  if (p.pipelinedTo) return "pipelined to node " + *p.pipelinedTo + ": waiting for resources being released";
  return messages[jobs[p.jobStatus].message];
}

SessionResult Session::close() {
  TESSERA_ASSERT(!closed_);
  closed_ = true;
  for (const auto& p : config_.plugins) p->onSessionClose(*this);
  SessionResult r;
  r.snapshot = snapshot_;
  for (const Operation& op : committed_) {
    const SessionTask& t = jobs_[op.job].tasks[op.task];
    switch (op.type) {
      case Operation::Type::Allocate:
        if (t.state == TaskState::Allocated) {
          r.binds.push_back({t.info->key, t.info->uid, nodes_[op.node].name(), {}, jobs_[op.job].info->key});
          if (t.sharesGpu()) {
            const SessionNode& n = nodes_[op.node];
            const int64_t units = cache::gpuUnitsOn(*t.info->gpuSpec, *n.info);
            for (int gi : gpuGroupsOf(t)) {
              const SessionGpuGroup& g = n.gpuGroups[gi];
              SessionResult::GpuAssignment a;
              a.group = g.id;
              a.newGroup = g.info == nullptr;
              a.portionMilli = g.capacity > 0 ? units * 1000 / g.capacity : 0;
              a.memoryMiB = n.info->gpuMemoryMiB > 0 ? units / 1000 : 0;
              r.binds.back().gpus.push_back(std::move(a));
            }
          }
        }
        break;
      case Operation::Type::Pipeline:
      case Operation::Type::Repipeline:
        if (t.state == TaskState::Pipelined) r.pipelined.push_back({t.info->key, nodes_[op.node].name()});
        break;
      case Operation::Type::Evict:
        if (t.state == TaskState::Releasing)
          r.evictions.push_back({t.info->key, t.info->uid, nodes_[op.node].name(), op.reason});
        break;
      case Operation::Type::Reserve:
        break;
    }
  }
  for (SessionJob& j : jobs_) {
    if (j.pendingCount == 0 && j.pipelinedCount == 0) continue;
    if (j.reason < 0 && j.pipelinedCount == 0) continue;  // not tried this cycle
    const auto jobIndex = static_cast<uint32_t>(r.jobs.size());
    if (j.reason < 0) setUnschedulable(j, "pipelined: waiting for resources being released");
    r.jobs.push_back({j.info, static_cast<uint32_t>(j.reason)});
    for (const SessionTask& t : j.tasks) {
      if (t.state == TaskState::Pending) r.pods.push_back({t.info, jobIndex, nullptr});
      else if (t.state == TaskState::Pipelined) r.pods.push_back({t.info, jobIndex, &nodes_[t.node].name()});
    }
  }
  r.queues = std::move(queueReports_);
  r.messages = std::move(reasons_);
  reasonIndex_.clear();
  return r;
}

}  // namespace tessera::framework
