// The functions declared in tessera/cache/snapshot.h: lookups on the immutable view and the GPU
// group arithmetic shared by the cache and the plugins. (Building a snapshot: snapshot_builder.cpp.)
#include "tessera/cache/snapshot.h"

#include <algorithm>

namespace tessera::cache {

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

bool taskTieLess(const TaskInfo& l, const TaskInfo& r) {
  const api::ObjectMeta& lp = l.pod->meta;
  const api::ObjectMeta& rp = r.pod->meta;
  if (lp.creationTimestamp != rp.creationTimestamp) return lp.creationTimestamp < rp.creationTimestamp;
  if (lp.uid != rp.uid) return lp.uid < rp.uid;
  return l.key < r.key;
}

const NodeInfo* Snapshot::findNode(const std::string& name) const {
  auto it =
      std::lower_bound(nodes.begin(), nodes.end(), name,
                       [](const std::shared_ptr<const NodeInfo>& n, const std::string& k) { return n->name < k; });
  return it != nodes.end() && (*it)->name == name ? it->get() : nullptr;
}

const JobInfo* Snapshot::findJob(const std::string& key) const {
  auto it = std::lower_bound(jobs.begin(), jobs.end(), key,
                             [](const JobInfo* j, const std::string& k) { return j->key < k; });
  return it != jobs.end() && (*it)->key == key ? *it : nullptr;
}

void JobList::push_back(std::shared_ptr<const JobInfo> job) {
  // Into the last chunk when push_back made it and no copy of this list holds it (own_ and
  // chunks_ are its two holders here); else into a new one.
  if (!own_ || chunks_.empty() || chunks_.back() != own_ || own_.use_count() > 2) {
    own_ = std::make_shared<Chunk>();
    chunks_.push_back(own_);
  }
  view_.push_back(job.get());
  own_->push_back(std::move(job));
}

void JobList::appendChunk(std::shared_ptr<const Chunk> chunk) {
  for (const auto& job : *chunk) view_.push_back(job.get());
  chunks_.push_back(std::move(chunk));
  own_.reset();
}

std::vector<int> Snapshot::jobIndicesIn(const Snapshot& later, bool sameObjectOnly) const {
  const auto& now = later.jobs;
  std::vector<int> out(jobs.size(), -1);
  for (size_t i = 0, j = 0; i < jobs.size() && j < now.size();) {
    const bool same = jobs[i] == now[j];
    if (same || jobs[i]->key == now[j]->key) {
      if (same || !sameObjectOnly) out[i] = static_cast<int>(j);
      ++i, ++j;
    } else if (jobs[i]->key < now[j]->key) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

const api::Problem* Snapshot::findInvalid(const std::string& ref) const {
  auto it = invalid.find(ref);
  return it == invalid.end() ? nullptr : &it->second;
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
  if (spec.memoryMiB > 0)
    each = gpuMemoryMiB > 0 ? std::min<int64_t>(1000, (spec.memoryMiB * 1000 + gpuMemoryMiB - 1) / gpuMemoryMiB) : 1000;
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

}  // namespace tessera::cache
