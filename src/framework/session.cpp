// A session's state (KAI's session.go): the working state built from the snapshot, lookups, the
// reasons jobs fail for, open and close. Elsewhere: plugin hooks (session_plugins.cpp), placement
// search (placement.cpp), working-state changes with their undos (statement.cpp), GPU sharing
// (session_gpu.cpp).
#include "tessera/framework/session.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <system_error>

#include "tessera/api/log.h"
#include "tessera/framework/action.h"
#include "tessera/framework/helper_thread.h"
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

}  // namespace

const std::vector<api::SubGroup>& SessionJob::subGroups() const {
  static const std::vector<api::SubGroup> kNone;
  return info->podGroup ? info->podGroup->subGroups : kNone;
}

int SessionJob::shortSubGroup() const {
  const std::vector<api::SubGroup>& groups = subGroups();
  for (size_t g = 0; g < subGroupReady.size(); ++g)
    if (subGroupReady[g] < groups[g].minMember) return static_cast<int>(g);
  return -1;
}

/// The arrays a session sizes by the cluster (see SchedulerState::sessionStorage). A session moves
/// each one in when it is built and back, emptied (the jobs and tasks not: see lend), when it is
/// destroyed; a second session alive at the same time finds them taken and allocates its own.
struct SessionStorage {
  /// The session build's second thread (Session::buildState), started by the first session large
  /// enough; `helperTaken` while a session builds with it (another one at that time builds alone).
  std::unique_ptr<HelperThread> helper;
  std::atomic<bool> helperTaken{false};
  bool helperFailureLogged = false;  ///< creating the helper failed once (startHelper)
  /// Kept with its elements, as the last session left them (buildNodes sets each one whole, and
  /// reuses its GPU groups' memory, their ids' strings included: an allocation each, each cycle).
  std::vector<SessionNode> nodes;
  std::vector<SessionJob> jobs;
  std::vector<SessionTask> tasks;
  std::vector<std::string> keys;
  std::vector<int> classes;
  std::vector<int> taskOrders;
  std::vector<uint8_t> taskOrderKnown;
  std::vector<int> jobOrder, pendingJobOrder;
  std::vector<Operation> committed;  ///< ~20,000 a busy cycle: grown once, not doubled each cycle
  /// The last session's job order and its snapshot (Session::jobsInOrder starts from them).
  std::vector<int> lastJobOrder;
  std::shared_ptr<const cache::Snapshot> lastOrderSnapshot;
  std::vector<Session::ValidMemo> valid;
  /// The last session's verdicts, their snapshot and plugins (Session::seedValidity starts from them).
  std::vector<Session::ValidMemo> lastValid;
  std::vector<api::Error> lastValidErrors;
  std::shared_ptr<const cache::Snapshot> lastValidSnapshot;
  std::vector<std::string> lastValidPlugins;
  std::vector<Session::SignatureMemo> signatures;
  std::vector<int32_t> victimTieRank;
  std::vector<uint8_t> victimTieKnown;
  std::vector<std::vector<int>> taskGpus;  ///< every element empty (Session::taskGpus_)
  std::vector<uint32_t> taskGpuSlots;
  std::vector<int> levelPos, nodeLevel;
  std::vector<uint64_t> nodeSlots;
  std::string nodeNames;
  std::vector<uint32_t> nodeNameEnd;
  /// Not the session's: the result's lists, handed back by recycleResult() once read. The lists of
  /// names come back with their elements, and close() writes the next result over them in place
  /// (NamedList): their strings' buffers serve again, so that writing a cycle's ~10,000 pod keys,
  /// node names and reasons neither allocates nor moves an element.
  std::vector<SessionResult::Bind> binds;
  std::vector<SessionResult::Evict> evictions;
  std::vector<SessionResult::Pipeline> pipelined;
  std::vector<SessionResult::JobStatus> resultJobs;
  std::vector<SessionResult::PodStatus> resultPods;
  /// Elements a shorter result left over, with their buffers, for a longer one.
  std::vector<SessionResult::Bind> bindPool;
  std::vector<SessionResult::Evict> evictPool;
  std::vector<SessionResult::Pipeline> pipelinePool;

  /// Gives the result being made the kept lists (those of names with their elements).
  void lendResult(SessionResult& r) {
    r.binds = std::move(binds);
    r.evictions = std::move(evictions);
    r.pipelined = std::move(pipelined);
    borrowKept(resultJobs, r.jobs);
    borrowKept(resultPods, r.pods);
  }
  /// Keeps a result's lists once read (those of names with their elements).
  void keepResult(SessionResult& r) {
    auto keepNamed = [](auto& kept, auto& mine) {
      if (mine.capacity() >= kept.capacity()) kept = std::move(mine);
    };
    keepNamed(binds, r.binds);
    keepNamed(evictions, r.evictions);
    keepNamed(pipelined, r.pipelined);
    returnKept(resultJobs, r.jobs);
    returnKept(resultPods, r.pods);
  }

  /// Calls f(kept, mine) for each array and the session's member it backs.
  template <class F>
  void each(Session& s, F&& f) {
    f(keys, s.keyCache_);
    f(classes, s.classCache_);
    f(taskOrders, s.taskOrderCache_);
    f(taskOrderKnown, s.taskOrderKnown_);
    f(jobOrder, s.jobOrderCache_);
    f(pendingJobOrder, s.pendingJobOrder_);
    f(committed, s.committed_);
    f(valid, s.validCache_);
    f(signatures, s.signatureCache_);
    f(victimTieRank, s.victimTieRank_);
    f(victimTieKnown, s.victimTieKnown_);
    f(taskGpuSlots, s.taskGpuSlots_);
    f(levelPos, s.gpuLevelPos_);
    f(nodeLevel, s.nodeLevel_);
    f(nodeSlots, s.nodeSlots_);
    f(nodeNames, s.nodeNames_);
    f(nodeNameEnd, s.nodeNameEnd_);
  }
  static constexpr auto borrow = [](auto& kept, auto& mine) { borrowKept(kept, mine); };
  static constexpr auto giveBack = [](auto& kept, auto& mine) { returnKept(kept, mine); };
  void lend(Session& s) {
    each(s, borrow);
    // The jobs, tasks and nodes keep their elements, as the last session left them: buildJobs and
    // buildNodes set each one whole (so neither sizing them here nor emptying them at the end
    // writes them once more; a node's GPU groups keep their memory).
    s.jobs_ = std::move(jobs);
    s.tasks_ = std::move(tasks);
    s.nodes_ = std::move(nodes);
    s.taskGpus_ = std::move(taskGpus);
    s.prevJobOrder_ = std::move(lastJobOrder);
    s.prevOrderSnapshot_ = std::move(lastOrderSnapshot);
    s.prevValid_ = std::move(lastValid);
    s.prevValidErrors_ = std::move(lastValidErrors);
    s.prevValidSnapshot_ = std::move(lastValidSnapshot);
    s.prevValidPlugins_ = std::move(lastValidPlugins);
  }
  void takeBack(Session& s) {
    if (!s.jobs_.empty() && s.jobOrderCache_.size() == s.jobs_.size()) {  // this session's order
      s.prevJobOrder_.assign(s.jobOrderCache_.begin(), s.jobOrderCache_.end());
      s.prevOrderSnapshot_ = s.snapshot_;
    } else if (!s.jobs_.empty() && s.pendingJobOrderMade_) {  // (its pending jobs' only)
      s.prevJobOrder_.assign(s.pendingJobOrder_.begin(), s.pendingJobOrder_.end());
      s.prevOrderSnapshot_ = s.snapshot_;
    }
    lastJobOrder = std::move(s.prevJobOrder_);
    lastOrderSnapshot = std::move(s.prevOrderSnapshot_);
    if (!s.jobs_.empty() && s.validCache_.size() == s.jobs_.size()) {  // this session's verdicts
      std::swap(s.prevValid_, s.validCache_);  // (the last ones' array is given back below, emptied)
      s.prevValidErrors_ = std::move(s.validErrors_);
      s.prevValidSnapshot_ = s.snapshot_;
      s.prevValidPlugins_ = s.jobValidPlugins();
    }
    lastValid = std::move(s.prevValid_);
    lastValidErrors = std::move(s.prevValidErrors_);
    lastValidSnapshot = std::move(s.prevValidSnapshot_);
    lastValidPlugins = std::move(s.prevValidPlugins_);
    for (uint32_t slot : s.taskGpuSlots_)  // (every other element is empty already)
      if (slot < s.taskGpus_.size()) s.taskGpus_[slot].clear();
    each(s, giveBack);
    if (s.jobs_.capacity() >= jobs.capacity()) jobs = std::move(s.jobs_);
    if (s.tasks_.capacity() >= tasks.capacity()) tasks = std::move(s.tasks_);
    if (s.nodes_.capacity() >= nodes.capacity()) nodes = std::move(s.nodes_);
    if (s.taskGpus_.size() >= taskGpus.size()) taskGpus = std::move(s.taskGpus_);
  }
};

namespace {

/// Waits for the session storage's helper thread and frees it for the next user, when the frame
/// whose work it runs goes, thrown or not (the helper reads that frame).
struct HelperJoin {
  SessionStorage& storage;
  ~HelperJoin() noexcept(false) {
    try {
      storage.helper->wait();
    } catch (...) {
      if (!std::uncaught_exceptions()) throw;  // (else this frame's own one goes on)
    }
    storage.helperTaken = false;
  }
};

/// Starts `work` on the storage's helper thread unless another session holds it. False, with
/// nothing started and the helper free, when it is held or cannot be had (no thread could be
/// created): the caller then does all the work on its own thread.
bool startHelper(SessionStorage& storage, bool creationFails, std::function<void()> work) {
  if (storage.helperTaken.exchange(true)) return false;
  try {
    if (!storage.helper) {
      if (creationFails)  // (SchedulerState::helperThreadFails, for tests)
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "thread");
      storage.helper = std::make_unique<HelperThread>();
    }
    storage.helper->start(std::move(work));
    return true;
  } catch (const std::exception& e) {
    storage.helperTaken = false;
    if (!storage.helperFailureLogged)  // (tried again each session: logged once)
      log::warning("session: no second thread (", e.what(), "): sessions are built and closed on one");
    storage.helperFailureLogged = true;
    return false;
  }
}

}  // namespace

Session::Session(std::shared_ptr<const cache::Snapshot> snapshot, const Config& config, const api::Clock& clock,
                 SchedulerState* state)
    : snapshot_(std::move(snapshot)), config_(config), clock_(clock), now_(clock.now()), state_(state) {
  if (!state_) {
    ownState_ = std::make_unique<SchedulerState>();
    state_ = ownState_.get();
  }
  if (!state_->sessionStorage) state_->sessionStorage = std::make_shared<SessionStorage>();
  state_->sessionStorage->lend(*this);
  buildState();
}

void recycleResult(SchedulerState& state, SessionResult&& result) {
  if (state.sessionStorage) state.sessionStorage->keepResult(result);
}

Session::~Session() {
  // Its arrays go back to the storage (jobs_, tasks_ and nodes_ with their elements: see SessionStorage::lend).
  if (state_ && state_->sessionStorage) state_->sessionStorage->takeBack(*this);
}

void Session::buildNodes() {
  const cache::Snapshot& s = *snapshot_;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const cache::NodeInfo& info = *s.nodes[i];
    SessionNode& n = nodes_[i];
    // Set whole: the element may be the last session's (SessionStorage), whose arrays keep their
    // memory: the host ports emptied, the GPU groups rebuilt in place (buildGpuGroups).
    std::vector<api::HostPort> ports = std::move(n.addedPorts);
    std::vector<SessionGpuGroup> groups = std::move(n.gpuGroups);
    n = SessionNode{};
    ports.clear();
    n.addedPorts = std::move(ports);
    n.gpuGroups = std::move(groups);
    n.info = &info;
    n.index = static_cast<int>(i);
    n.idle = info.allocatable - info.used;
    n.releasing = info.releasing;
    n.podCount = info.podCount;
    n.releasingPods = info.releasingPods;
    n.allocatablePods = info.node->allocatablePods;
    n.takesAnyPod = info.takesAnyPod;
    n.ownMilliCpu = info.allocatable.milliCpu - info.foreignUsed.milliCpu;
    n.ownMemory = info.allocatable.memory - info.foreignUsed.memory;
    n.ownMilliGpu = info.allocatable.milliGpu - info.foreignUsed.milliGpu;
    const GpuSharingConfig& gs = config_.gpuSharing;
    const int64_t scaling = info.gpuMemoryScalingMilli > 0 ? info.gpuMemoryScalingMilli : gs.memoryScalingMilli;
    n.gpuCapacity = info.gpuUnits() * scaling / 1000;
    n.gpuSplitCount = info.gpuSplitCount > 0 ? info.gpuSplitCount : gs.splitCount;
    n.gpuComputeCapacity = info.gpuCoreScalingMilli > 0 ? info.gpuCoreScalingMilli : gs.coreScalingMilli;
  }
  buildGpuGroups();
  buildPlacementIndex();
}

void Session::buildState() {
  const cache::Snapshot& s = *snapshot_;
  queueChanged_.assign(s.queues.size(), 0);
  jobChanges_.resize(s.queues.size());
  for (std::vector<int>& changes : jobChanges_) changes.clear();
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

  // Where the jobs' tasks go in tasks_, from the snapshot's counts (one array read, not every job
  // visited): the jobs in chunks (about 32, of 8 to 1,024 jobs), each chunk's first task's place.
  const size_t n = s.jobs.size();
  const size_t kChunk = std::clamp<size_t>(n / 32, 8, 1024);
  const bool counted = s.jobTaskCounts.size() == n;
  std::vector<size_t> chunkAt;  // chunk c holds jobs [c * kChunk, ...) and their tasks from chunkAt[c]
  chunkAt.reserve(n / kChunk + 2);
  size_t taskCount = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % kChunk == 0) chunkAt.push_back(taskCount);
    taskCount += counted ? s.jobTaskCounts[i] : s.jobs[i]->tasks.size();
  }
  chunkAt.push_back(taskCount);
  const size_t chunks = chunkAt.size() - 1;
  const bool indexRunning = std::any_of(config_.actions.begin(), config_.actions.end(),
                                        [](const auto& a) { return a->indexesRunningPods(); });
  nodes_.resize(s.nodes.size());
  if (indexRunning) findNode(std::string());  // its table, built before two threads read it
  tasks_.resize(taskCount);
  jobs_.resize(n);
  // Two threads: the helper builds the first chunk, this one the last once it has filled the
  // nodes, then each takes the next chunk not yet taken until none is left, so that neither waits
  // for the other long whatever the jobs' sizes. Who builds a job changes nothing of what is built.
  std::atomic<size_t> nextChunk{0};
  auto buildChunk = [&](size_t c, BuildTotals& totals) {
    const size_t end = buildJobs(c * kChunk, std::min(n, (c + 1) * kChunk), chunkAt[c], globalDefault, indexRunning, totals);
    TESSERA_ASSERT(end == chunkAt[c + 1]);  // the snapshot's counts were its jobs'
  };
  auto buildChunks = [&](size_t first, size_t last, BuildTotals& totals) {
    buildChunk(first, totals);
    for (size_t c; (c = nextChunk.fetch_add(1, std::memory_order_relaxed)) < last;) buildChunk(c, totals);
  };
  SessionStorage& storage = *state_->sessionStorage;
  BuildTotals totals, second;
  totals.opened.resize(queues_.size());
  second.opened.resize(queues_.size());
  nextChunk = 1;  // on two threads: the others, between the two first ones
  if (chunks >= 2 && n >= state_->splitBuildJobs &&
      startHelper(storage, state_->helperThreadFails, [&] { buildChunks(0, chunks - 1, second); })) {
    {
      const HelperJoin join{storage};
      buildNodes();
      buildChunks(chunks - 1, chunks - 1, totals);
    }
    totals.add(second);
  } else {
    buildNodes();
    for (size_t c = 0; c < chunks; ++c) buildChunk(c, totals);
  }
  for (size_t q = 0; q < queues_.size(); ++q) queues_[q].opened = totals.opened[q];
  pendingGpuFloor_ = totals.gpuFloor;
  pendingSharesGpu_ = totals.sharesGpu;
  pendingGpuMilliFloor_ = totals.gpuMilliFloor;
  pendingTopologyJobs_ = totals.topologyJobs;
}

void Session::BuildTotals::add(const BuildTotals& o) {
  gpuFloor = std::min(gpuFloor, o.gpuFloor);
  sharesGpu = sharesGpu || o.sharesGpu;
  gpuMilliFloor = std::min(gpuMilliFloor, o.gpuMilliFloor);
  topologyJobs += o.topologyJobs;
  for (size_t q = 0; q < opened.size(); ++q) opened[q] += o.opened[q];
}

size_t Session::buildJobs(size_t from, size_t to, size_t offset, const api::PriorityClass* globalDefault,
                          bool indexRunning, BuildTotals& totals) {
  const cache::Snapshot& s = *snapshot_;
  // Many jobs share a queue and a priority class: remember the last lookups.
  const std::string* lastQueueName = nullptr;
  int lastQueue = -1;
  const std::string* lastClassName = nullptr;
  int32_t lastClassValue = 0;
  // The jobs live apart from one another in the cache's heap: at 100,000 jobs this loop waits on
  // memory more than it computes. Each job is asked for ahead of its turn, and the fields read of
  // its tasks a little later (once the job itself has arrived to say where they are).
  // (The lines asked for are those holding the fields read below: a job's fields from its creation
  // time to the amounts it is releasing, the first ones of the JobInfo, span five or six lines; a
  // task's, from its status to its subgroup, one or two.)
  constexpr size_t kJobAhead = 8, kTasksAhead = 4;
  for (size_t i = from; i < to; ++i) {
    if (i + kJobAhead < to) {
      const cache::JobInfo& ahead = *s.jobs[i + kJobAhead];
      const char* start = reinterpret_cast<const char*>(&ahead.creationTime);
      const char* end = reinterpret_cast<const char*>(&ahead.releasing.milliGpu + 1);
      for (const char* p = start; p < end; p += 64) __builtin_prefetch(p);
      __builtin_prefetch(end - 1);
    }
    if (i + kTasksAhead < to) {
      const cache::JobInfo& ahead = *s.jobs[i + kTasksAhead];
      if (ahead.podGroup) __builtin_prefetch(ahead.podGroup.get());
      for (const cache::TaskInfo& t : ahead.tasks) {
        __builtin_prefetch(&t.status);
        __builtin_prefetch(reinterpret_cast<const char*>(&t.subGroup + 1) - 1);
      }
    }
    const cache::JobInfo& info = *s.jobs[i];
    SessionJob& j = jobs_[i];
    j = SessionJob{};  // (an element the last session left)
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
    j.created = info.creationTime;
    j.tasksCreatedTogether = info.tasksCreatedTogether;
    j.singleton = info.isSingleton();
    j.staleMarked = info.staleMarked;
    TESSERA_ASSERT(offset + info.tasks.size() <= tasks_.size());
    j.tasks = std::span<SessionTask>(tasks_.data() + offset, info.tasks.size());
    offset += info.tasks.size();
    const std::vector<api::SubGroup>& subGroups = j.subGroups();
    j.subGroupReady.assign(subGroups.size(), 0);
    for (size_t t = 0; t < info.tasks.size(); ++t) {
      SessionTask& st = j.tasks[t];
      st = SessionTask{};
      st.info = &info.tasks[t];
      st.job = j.index;
      st.index = static_cast<int>(t);
      st.state = fromCache(st.info->status);
      st.taskPriority = st.info->taskPriority;
      st.gpuSpecInvalid = st.info->gpuSpecInvalid;
      st.anyNode = st.info->nodeConstraints == cache::NodeConstraints::None;
      // A running pod's node, while its cache entry is at hand (its name lies beside the status),
      // when an action will index every running pod by node (runningIndex): it would read each
      // entry again for it.
      if (indexRunning && (st.state == TaskState::Running || st.state == TaskState::Bound))
        st.node = findNode(st.info->nodeName);
      if (!subGroups.empty() && !st.info->subGroup.empty())
        for (size_t g = 0; g < subGroups.size(); ++g)
          if (subGroups[g].name == st.info->subGroup) st.subGroup = static_cast<int32_t>(g);
      if (isReadyState(st.state)) countReady(j, st, +1);
      if (st.state == TaskState::Pending) j.pendingCount++;
      if (st.state == TaskState::Releasing) j.releasingCount++;
    }
    j.allocated = info.allocated;
    if (j.queue >= 0) {
      QueueOpenTotals& q = totals.opened[static_cast<size_t>(j.queue)];
      const CoreAmounts held{info.allocated.milliGpu - info.releasing.milliGpu,
                             info.allocated.milliCpu - info.releasing.milliCpu,
                             info.allocated.memory - info.releasing.memory};
      q.held += held;
      if (!j.preemptible) q.heldNonPreemptible += held;
      q.pending += CoreAmounts{info.pendingRequest.milliGpu, info.pendingRequest.milliCpu, info.pendingRequest.memory};
    }
    j.minMember_ = info.minMember;
    j.infoPendingKey = info.pendingPlacementKey;
    j.infoPendingCount = info.pendingCount;
    j.infoPendingMilliCpu = info.pendingRequest.milliCpu;
    j.infoPendingMemory = info.pendingRequest.memory;
    j.infoPendingMilliGpu = info.pendingRequest.milliGpu;
    const api::PodGroup* pg = info.podGroup.get();
    j.subGroupTopology = pg && std::any_of(pg->subGroups.begin(), pg->subGroups.end(),
                                           [](const api::SubGroup& sg) { return !sg.topologyConstraint.empty(); });
    j.topologyConstrained = pg && (!pg->topologyConstraint.empty() || j.subGroupTopology);
    if (j.pendingCount > 0) {
      if (j.topologyConstrained) ++totals.topologyJobs;
      // The cache's figures when it counted these pending pods (on the line of the fields read
      // above); a job built otherwise (tests) reads its tasks.
      if (j.pendingCount == info.pendingCount) {
        totals.gpuFloor = std::min(totals.gpuFloor, info.pendingMinWholeGpus);
        totals.sharesGpu = totals.sharesGpu || info.pendingSharesGpu;
        totals.gpuMilliFloor = std::min(totals.gpuMilliFloor, info.pendingMinGpuMilli);
      } else {
        for (const SessionTask& t : j.tasks) {
          if (t.state != TaskState::Pending) continue;
          if (t.sharesGpu()) totals.sharesGpu = true;
          else totals.gpuFloor = std::min<int64_t>(totals.gpuFloor, t.nodeRequest().milliGpu / 1000);
          totals.gpuMilliFloor = std::min(totals.gpuMilliFloor, t.info->gpuNeedMilli());
        }
      }
    }
  }
  return offset;
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

const std::vector<int>& Session::allNodes() const {
  if (allNodes_.size() != nodes_.size()) {
    allNodes_.resize(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) allNodes_[i] = static_cast<int>(i);
  }
  return allNodes_;
}

int Session::findNode(const std::string& name) const {
  // A hash each, not a binary search of string compares; one open-addressed array of node
  // indices (twice the nodes, a power of two), not a hash map's entry per node. A slot's hash
  // bits turn away almost every other name before one is compared.
  constexpr uint64_t kEmpty = ~uint64_t{0};
  const std::hash<std::string_view> hash;
  auto nameOf = [&](size_t i) {
    const uint32_t from = i == 0 ? 0 : nodeNameEnd_[i - 1];
    return std::string_view(nodeNames_).substr(from, nodeNameEnd_[i] - from);
  };
  if (nodeSlots_.empty() && !nodes_.empty()) {
    size_t size = 2;
    while (size < 2 * nodes_.size()) size <<= 1;
    nodeSlots_.assign(size, kEmpty);
    nodeNames_.clear();
    nodeNameEnd_.clear();
    // From the snapshot's nodes (nodes_ in the same order), which buildState asks before it fills nodes_.
    for (size_t i = 0; i < snapshot_->nodes.size(); ++i) {
      const std::string& name = snapshot_->nodes[i]->name;
      nodeNames_ += name;
      nodeNameEnd_.push_back(static_cast<uint32_t>(nodeNames_.size()));
      const size_t h = hash(name);
      size_t at = h & (size - 1);
      while (nodeSlots_[at] != kEmpty) at = (at + 1) & (size - 1);
      nodeSlots_[at] = (static_cast<uint64_t>(h) >> 32 << 32) | static_cast<uint32_t>(i);
    }
  }
  if (nodeSlots_.empty()) return -1;
  const size_t mask = nodeSlots_.size() - 1;
  const size_t h = hash(name);
  const uint64_t tag = static_cast<uint64_t>(h) >> 32 << 32;
  for (size_t at = h & mask; nodeSlots_[at] != kEmpty; at = (at + 1) & mask) {
    const uint64_t slot = nodeSlots_[at];
    if ((slot & ~uint64_t{0xffffffff}) != tag) continue;
    const auto index = static_cast<uint32_t>(slot);
    if (nameOf(index) == name) return static_cast<int>(index);
  }
  return -1;
}

const RunningIndex& Session::runningIndex() {
  if (runningBuilt_) return running_;
  runningBuilt_ = true;
  auto isRunning = [](const SessionTask& t) { return t.state == TaskState::Running || t.state == TaskState::Bound; };
  // Two passes over the jobs with ready pods (most pending jobs have none: their tasks are not
  // read): count per node, then place each task at its node's next slot.
  std::vector<uint32_t>& start = running_.nodeStart;
  start.assign(nodes_.size() + 1, 0);
  // Running pods' nodes were looked up when the session was built if an action said it would ask
  // (Action::indexesRunningPods); else (a search run on its own, as in tests) here.
  for (size_t ji = 0; ji < jobs_.size(); ++ji) {
    SessionJob& j = jobs_[ji];
    if (j.readyCount == 0) continue;
    for (SessionTask& t : j.tasks) {
      if (!isRunning(t)) continue;
      if (t.node < 0) t.node = findNode(t.info->nodeName);
      if (t.node >= 0) ++start[static_cast<size_t>(t.node) + 1];
    }
  }
  for (size_t n = 0; n < nodes_.size(); ++n) start[n + 1] += start[n];
  running_.tasks.resize(start.back());
  std::vector<uint32_t> at(start.begin(), start.end() - 1);
  for (const SessionJob& j : jobs_) {
    if (j.readyCount == 0) continue;
    for (const SessionTask& t : j.tasks)
      if (isRunning(t) && t.node >= 0) running_.tasks[at[static_cast<size_t>(t.node)]++] = TaskRef{j.index, t.index};
  }
  running_.queueNodes.assign(queues_.size(), {});
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (uint32_t i = start[n]; i < start[n + 1]; ++i) {
      if (i + 8 < running_.tasks.size()) __builtin_prefetch(&jobs_[static_cast<size_t>(running_.tasks[i + 8].job)]);
      const int q = jobs_[static_cast<size_t>(running_.tasks[i].job)].queue;
      if (q < 0) continue;
      std::vector<int>& nodes = running_.queueNodes[static_cast<size_t>(q)];
      if (nodes.empty() || nodes.back() != static_cast<int>(n)) nodes.push_back(static_cast<int>(n));
    }
  return running_;
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

std::string SessionResult::podMessage(const PodStatus& p) const {
  if (p.pipelinedTo) return "pipelined to node " + *p.pipelinedTo + ": waiting for resources being released";
  return messages[jobs[p.jobStatus].message];
}

void Session::annotate(const SessionJob& job, std::string key, std::optional<std::string> value) {
  // Only Tessera's own PodGroups: another scheduler's (Volcano, scheduler-plugins) is never written.
  if (!job.info->podGroup || job.info->podGroup->source != api::PodGroupSource::Tessera) return;
  annotations_.push_back({job.info->namespace_, job.info->name, std::move(key), std::move(value)});
}

namespace {

/// A result's list of names written over a kept one: entry `size` is the next one written (an old
/// entry, its strings keeping their buffers, while there is one; then one from the pool, then a new
/// one: the caller assigns every field), and done() hands the entries past the written ones to the
/// pool.
template <class T>
struct NamedList {
  std::vector<T>& list;
  std::vector<T>& pool;
  size_t size = 0;
  T& next() {
    if (size < list.size()) return list[size++];
    ++size;
    if (pool.empty()) return list.emplace_back();
    list.push_back(std::move(pool.back()));
    pool.pop_back();
    return list.back();
  }
  void done() {
    while (list.size() > size) {
      pool.push_back(std::move(list.back()));
      list.pop_back();
    }
  }
};

}  // namespace

SessionResult Session::close() {
  TESSERA_ASSERT(!closed_);
  closed_ = true;
  for (const auto& p : config_.plugins) p->onSessionClose(*this);
  SessionResult r;
  // The lists of a result handed back (recycleResult), if any.
  SessionStorage& storage = *state_->sessionStorage;
  storage.lendResult(r);
  r.snapshot = snapshot_;
  // A big result is written on two threads, as the session was built: the helper writes the
  // evictions and lists the jobs left waiting, this one the binds and pipelined pods. Each list
  // is one thread's, in commit order; the two read the session and write nothing the other reads.
  if (jobs_.size() >= state_->splitBuildJobs && startHelper(storage, state_->helperThreadFails, [&] {
        writeOperations(r, storage, /*evictionsOnly=*/true);
        listWaitingJobs(r);
      })) {
    const HelperJoin join{storage};
    writeOperations(r, storage, /*evictionsOnly=*/false);
  } else {
    writeOperations(r, storage, /*evictionsOnly=*/true);
    writeOperations(r, storage, /*evictionsOnly=*/false);
    listWaitingJobs(r);
  }
  r.queues = std::move(queueReports_);
  r.messages = std::move(reasons_);
  r.annotations = std::move(annotations_);
  reasonIndex_.clear();
  return r;
}

void Session::writeOperations(SessionResult& r, SessionStorage& storage, bool evictionsOnly) const {
  NamedList<SessionResult::Bind> binds{r.binds, storage.bindPool};
  NamedList<SessionResult::Evict> evictions{r.evictions, storage.evictPool};
  NamedList<SessionResult::Pipeline> pipelined{r.pipelined, storage.pipelinePool};
  auto mine = [evictionsOnly](const Operation& op) {
    return op.type != Operation::Type::Reserve && (op.type == Operation::Type::Evict) == evictionsOnly;
  };
  // ~20,000 operations on a busy cycle, each reading a job, its task's cache entry and that entry's
  // strings, all far apart: each is asked for a few operations ahead, one step per stage (the job
  // says where the task is, the task where its entry is, the entry where its strings are).
  constexpr size_t kJobAhead = 16, kTaskAhead = 12, kEntryAhead = 8, kKeyAhead = 4;
  const size_t opCount = committed_.size();
  for (size_t i = 0; i < opCount; ++i) {
    if (i + kJobAhead < opCount && mine(committed_[i + kJobAhead])) __builtin_prefetch(&jobs_[committed_[i + kJobAhead].job]);
    if (i + kTaskAhead < opCount && mine(committed_[i + kTaskAhead])) {
      const Operation& ahead = committed_[i + kTaskAhead];
      __builtin_prefetch(&jobs_[ahead.job].tasks[ahead.task]);
    }
    if (i + kEntryAhead < opCount && mine(committed_[i + kEntryAhead])) {
      const Operation& ahead = committed_[i + kEntryAhead];
      const cache::TaskInfo* info = jobs_[ahead.job].tasks[ahead.task].info;
      __builtin_prefetch(info);
      __builtin_prefetch(reinterpret_cast<const char*>(info) + 64);
    }
    if (i + kKeyAhead < opCount && mine(committed_[i + kKeyAhead])) {
      const Operation& ahead = committed_[i + kKeyAhead];
      const cache::TaskInfo* info = jobs_[ahead.job].tasks[ahead.task].info;
      __builtin_prefetch(info->key.data());
      __builtin_prefetch(info->uid.data());
    }
    const Operation& op = committed_[i];
    if (!mine(op)) continue;
    const SessionTask& t = jobs_[op.job].tasks[op.task];
    switch (op.type) {
      case Operation::Type::Allocate:
        if (t.state == TaskState::Allocated) {
          SessionResult::Bind& b = binds.next();
          b.podKey = t.info->key;
          b.podUid = t.info->uid;
          b.node = nodes_[op.node].name();
          b.gpus.clear();
          b.jobKey = jobs_[op.job].info->key;
          b.gpuCorePercent = -1;
          b.defaultedMemoryMiB = 0;
          if (t.sharesGpu()) {
            b.gpuCorePercent = api::gpuCoreLimitPercent(*t.info->gpuSpec);
            if (t.info->gpuSpec->memoryDefaulted) b.defaultedMemoryMiB = t.info->gpuSpec->memoryMiB;
            const SessionNode& n = nodes_[op.node];
            const int64_t units = cache::gpuUnitsOn(*t.info->gpuSpec, *n.info);
            for (int gi : gpuGroupsOf(t)) {
              const SessionGpuGroup& g = n.gpuGroups[gi];
              SessionResult::GpuAssignment a;
              a.group = g.id;
              a.newGroup = g.info == nullptr;
              // The share of the physical GPU (memory scaling widens the group, not the pod's share).
              a.portionMilli = std::min<int64_t>(1000, units * 1000 / n.info->gpuUnits());
              a.memoryMiB = n.info->gpuMemoryMiB > 0 ? units / 1000 : 0;
              b.gpus.push_back(std::move(a));
            }
          }
        }
        break;
      case Operation::Type::Pipeline:
      case Operation::Type::Repipeline:
        if (t.state == TaskState::Pipelined) {
          SessionResult::Pipeline& p = pipelined.next();
          p.podKey = t.info->key;
          p.node = nodes_[op.node].name();
        }
        break;
      case Operation::Type::Evict:
        if (t.state == TaskState::Releasing) {
          SessionResult::Evict& e = evictions.next();
          e.podKey = t.info->key;
          e.podUid = t.info->uid;
          e.node = nodes_[op.node].name();
          if (op.reason) e.reason = *op.reason;
          else e.reason.clear();
        }
        break;
      case Operation::Type::Reserve:
        break;
    }
  }
  if (evictionsOnly) {
    evictions.done();
  } else {
    binds.done();
    pipelined.done();
  }
}

void Session::listWaitingJobs(SessionResult& r) {
  // Jobs with pending or pipelined pods that were tried this cycle, in one pass over the jobs (a
  // pass reads 30,000 jobs' first lines at scale; the recycled lists have the room most cycles).
  auto listed = [](const SessionJob& j) { return j.pipelinedCount > 0 || (j.pendingCount > 0 && j.reason >= 0); };
  for (SessionJob& j : jobs_) {
    if (!listed(j)) continue;
    const auto jobIndex = static_cast<uint32_t>(r.jobs.size());
    if (j.reason < 0) setUnschedulable(j, "pipelined: waiting for resources being released");
    r.jobs.push_back({j.info, static_cast<uint32_t>(j.reason)});
    for (const SessionTask& t : j.tasks) {
      if (t.state == TaskState::Pending) r.pods.push_back({t.info, jobIndex, nullptr});
      else if (t.state == TaskState::Pipelined) r.pods.push_back({t.info, jobIndex, &nodes_[t.node].name()});
    }
  }
}

}  // namespace tessera::framework
