// GPU sharing in the session: fractional tasks take their share from GPU groups (one physical GPU
// each), opening a group on a whole idle GPU when none suits them. The choice among a node's groups
// is the GpuOrderFn's (GPU-axis binpack or spread, plugin nodeorder); ties go to the lower group
// index, existing groups before new ones.
#include <algorithm>
#include <cstdio>

#include "tessera/api/gpu_request.h"
#include "tessera/framework/session.h"

namespace tessera::framework {

namespace {

const std::vector<int> kNoGpus;

/// Keeps a group's `vacating` and the node's releasing GPUs in step: a GPU whose fractional pods
/// are all leaving, or whose reservation pod holds it for no pod (the binder deletes it), becomes a
/// whole releasing GPU (a whole-GPU pod may be pipelined onto it).
void updateVacating(SessionGpuGroup& g, SessionNode& node) {
  const bool emptyReserved = g.used == 0 && g.tasks == 0 && g.info && g.info->reserved;
  const bool v =
      g.capacity > 0 && g.opened == 0 && g.pipelined == 0 && ((g.used > 0 && g.releasing >= g.used) || emptyReserved);
  if (v == g.vacating) return;
  g.vacating = v;
  node.releasing.milliGpu += v ? 1000 : -1000;
}

int64_t unitsOf(const SessionTask& task, const SessionNode& node) {
  return cache::gpuUnitsOn(*task.info->gpuSpec, *node.info);
}

int64_t computeOf(const SessionTask& task) { return api::gpuComputeMilli(*task.info->gpuSpec); }

/// Whether a fractional pod may take units of group `g`: it is open (not an excluded GPU, not a
/// closed slot) and holds fewer pods than the node's split count (room in memory and compute is
/// SessionGpuGroup::hasRoom's). A vacating group's GPU counts as a whole releasing GPU; the group
/// is joined (and keeps its GPU) only while no promise on the node relies on that release.
bool joinable(const SessionGpuGroup& g, const SessionNode& node) {
  if (g.capacity <= 0 || g.tasks >= node.gpuSplitCount) return false;
  return !g.vacating || node.pipelined.milliGpu + 1000 <= node.idle.milliGpu + node.releasing.milliGpu;
}

/// tessera.dev/use-gpu-uuid and nouse-gpu-uuid: a pod with such rules joins only groups whose
/// reservation pod reported an allowed UUID (a group of unknown GPU is not joined).
bool deviceAllowed(const SessionTask& task, const SessionGpuGroup& g) {
  const api::PodGpuSpec& spec = *task.info->gpuSpec;
  return !spec.filtersGpuUuids() || (g.info && spec.gpuUuidAllowed(g.info->uuid));
}

}  // namespace

void Session::buildGpuGroups() {
  for (SessionNode& n : nodes_) {
    // The node's groups may hold the last session's (buildNodes): each set whole, its id's string
    // reused; those beyond the cache's go.
    const size_t count = n.info->gpuGroups.size();
    if (n.gpuGroups.size() > count) n.gpuGroups.resize(count);
    n.gpuGroups.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      const cache::GpuGroupInfo& g = n.info->gpuGroups[k];
      SessionGpuGroup sg;
      sg.info = &g;
      if (k < n.gpuGroups.size()) sg.id = std::move(n.gpuGroups[k].id);
      sg.id.assign(g.id);
      // A group on a GPU the node excludes (tessera.dev/gpu-exclude) keeps its pods, takes no more.
      const bool excluded = !g.uuid.empty() && std::find(n.info->excludedGpuUuids.begin(),
                                                         n.info->excludedGpuUuids.end(), g.uuid) != n.info->excludedGpuUuids.end();
      sg.capacity = excluded ? 0 : n.gpuCapacity;
      sg.computeCapacity = excluded ? 0 : n.gpuComputeCapacity;
      // Its GPU is both out of allocatable (excluded) and held (used): counted once.
      if (excluded) n.idle.milliGpu += 1000;
      sg.used = g.used;
      sg.releasing = g.releasing;
      sg.compute = g.compute;
      sg.computeReleasing = g.computeReleasing;
      sg.tasks = g.pods;
      if (k < n.gpuGroups.size()) n.gpuGroups[k] = std::move(sg);
      else n.gpuGroups.push_back(std::move(sg));
      updateVacating(n.gpuGroups[k], n);
    }
  }
}

bool Session::gpuShareFits(const SessionTask& task, const SessionNode& node, bool future) const {
  const int64_t units = unitsOf(task, node), compute = computeOf(task);
  if (units <= 0 || units > node.gpuCapacity || compute > node.gpuComputeCapacity || node.gpuSplitCount < 1)
    return false;
  int64_t count = 0, vacating = 0;
  const int32_t want = task.info->gpuSpec->numDevices;
  for (const SessionGpuGroup& g : node.gpuGroups)
    if (joinable(g, node) && deviceAllowed(task, g) && g.hasRoom(units, compute, future)) {
      if (++count >= want) return true;
      vacating += g.vacating ? 1 : 0;
    }
  // A vacating group counted above is not counted again as a whole releasing GPU.
  const int64_t wholeMilli =
      future ? node.idle.milliGpu + node.releasing.milliGpu - node.pipelined.milliGpu - 1000 * vacating
             : node.idle.milliGpu;
  count += std::max<int64_t>(0, wholeMilli / 1000);
  return count >= want;
}

bool Session::fits(const SessionTask& task, const SessionNode& node, bool future) const {
  const api::Resources& req = task.nodeRequest();
  if (!req.fitsIn(future ? node.futureIdle() : node.idle)) return false;
  // A pod slot: now, one not held by a pod (leaving or not); later, one the pods staying and the
  // pipelined ones leave (the predicates refuse a node without it).
  if ((future ? node.futurePods() : node.podCount) + 1 > node.node().allocatablePods) return false;
  return !task.sharesGpu() || gpuShareFits(task, node, future);
}

const std::vector<int>& Session::gpuGroupsOf(const SessionTask& task) const {
  const size_t slot = slotOf(task);
  return slot < taskGpus_.size() ? taskGpus_[slot] : kNoGpus;
}

std::string Session::newGroupId(const SessionTask& task, const SessionNode& node, size_t k) const {
  // FNV-1a over node, pod uid and device number: stable for a placement, unique in practice.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
  };
  mix(node.name());
  mix(task.info->uid.empty() ? task.info->key : task.info->uid);
  mix(std::to_string(k));
  char buf[24];
  std::snprintf(buf, sizeof buf, "g-%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void Session::takeGpus(SessionTask& task, SessionNode& node, bool pipelined) {
  const int64_t units = unitsOf(task, node), compute = computeOf(task);
  const int32_t want = task.info->gpuSpec->numDevices;
  struct Candidate {
    int64_t score;
    int group;  // -1: a whole GPU, opening a new group
  };
  std::vector<Candidate> cands;
  int64_t vacating = 0;
  for (size_t i = 0; i < node.gpuGroups.size(); ++i) {
    const SessionGpuGroup& g = node.gpuGroups[i];
    if (joinable(g, node) && deviceAllowed(task, g) && g.hasRoom(units, compute, pipelined)) {
      cands.push_back({gpuScore(task, node, static_cast<int>(i)), static_cast<int>(i)});
      vacating += g.vacating ? 1 : 0;
    }
  }
  const int64_t wholeMilli =
      pipelined ? node.idle.milliGpu + node.releasing.milliGpu - node.pipelined.milliGpu - 1000 * vacating
                : node.idle.milliGpu;
  const int64_t whole = std::min<int64_t>(std::max<int64_t>(0, wholeMilli / 1000), want);
  if (whole > 0) {
    const int64_t s = gpuScore(task, node, -1);
    for (int64_t i = 0; i < whole; ++i) cands.push_back({s, -1});
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if ((a.group < 0) != (b.group < 0)) return b.group < 0;  // existing groups first
    return a.group < b.group;
  });
  TESSERA_ASSERT(static_cast<int32_t>(cands.size()) >= want);
  const size_t slot = slotOf(task);
  if (taskGpus_.size() < tasks_.size()) taskGpus_.resize(tasks_.size());  // (only grows: see taskGpus_)
  std::vector<int>& mine = taskGpus_[slot];
  if (mine.empty()) taskGpuSlots_.push_back(static_cast<uint32_t>(slot));
  mine.clear();
  for (int32_t k = 0; k < want; ++k) {
    int gi = cands[k].group;
    if (gi < 0) {
      SessionGpuGroup g;
      g.id = newGroupId(task, node, static_cast<size_t>(k));
      // A group of this id already on the node is one the pod did not join (its GPU is one the
      // pod's device rules exclude, kept by an earlier attempt's reservation pod): another id.
      auto taken = [&](const std::string& id) {
        return std::any_of(node.gpuGroups.begin(), node.gpuGroups.end(),
                           [&](const SessionGpuGroup& o) { return o.id == id && (o.info || o.opened != 0); });
      };
      for (size_t salt = 1; taken(g.id); ++salt) g.id = newGroupId(task, node, static_cast<size_t>(k) + salt * 4096);
      g.capacity = node.gpuCapacity;
      g.computeCapacity = node.gpuComputeCapacity;
      g.opened = pipelined ? 2 : 1;
      if (pipelined) node.pipelined.milliGpu += 1000;
      else node.idle.milliGpu -= 1000;
      gi = static_cast<int>(node.gpuGroups.size());
      node.gpuGroups.push_back(std::move(g));
    }
    SessionGpuGroup& g = node.gpuGroups[gi];
    if (pipelined) g.pipelined += units, g.computePipelined += compute;
    else g.used += units, g.compute += compute;
    g.tasks++;
    updateVacating(g, node);  // a pod joining a reserved, empty GPU keeps it
    mine.push_back(gi);
  }
}

void Session::returnGpus(SessionTask& task, SessionNode& node, bool pipelined) {
  const int64_t units = unitsOf(task, node), compute = computeOf(task);
  const size_t slot = slotOf(task);
  if (slot >= taskGpus_.size()) return;
  std::vector<int>& mine = taskGpus_[slot];
  // Newest first, so groups opened last are closed first (and can be popped).
  for (auto it = mine.rbegin(); it != mine.rend(); ++it) {
    SessionGpuGroup& g = node.gpuGroups[*it];
    if (pipelined) g.pipelined -= units, g.computePipelined -= compute;
    else g.used -= units, g.compute -= compute;
    g.tasks--;
    updateVacating(g, node);  // a promise withdrawn from a group whose pods all leave
    if (g.opened != 0 && g.tasks == 0) {
      if (g.opened == 2) node.pipelined.milliGpu -= 1000;
      else node.idle.milliGpu += 1000;
      if (*it == static_cast<int>(node.gpuGroups.size()) - 1) {
        node.gpuGroups.pop_back();
      } else {
        g.opened = 0;  // closed: kept as an empty slot so later indices stay valid
        g.capacity = 0;
        g.computeCapacity = 0;
      }
    }
  }
  mine.clear();
}

void Session::releaseGpus(SessionTask& task, SessionNode& node, int sign) {
  const int64_t units = unitsOf(task, node), compute = computeOf(task);
  const size_t slot = slotOf(task);
  if (slot < taskGpus_.size() && !taskGpus_[slot].empty()) {
    for (int gi : taskGpus_[slot]) {
      node.gpuGroups[gi].releasing += sign * units;
      node.gpuGroups[gi].computeReleasing += sign * compute;
      updateVacating(node.gpuGroups[gi], node);
    }
    return;
  }
  for (const std::string& id : task.info->gpuGroups)
    for (SessionGpuGroup& g : node.gpuGroups)
      if (g.id == id) {
        g.releasing += sign * units;
        g.computeReleasing += sign * compute;
        updateVacating(g, node);
      }
}

}  // namespace tessera::framework
