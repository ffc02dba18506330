// Reading pods' accounting regions read-only, and removing the folders of pods that are gone.
// The layout and the liveness rule (a slot is live while its byte is write-locked) are in
// include/tessera/isolation/region_layout.h.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "tessera/isolation/region_layout.h"
#include "tessera/monitor/monitor.h"

namespace tessera::monitor {

namespace {

namespace iso = tessera::isolation;

/// An open, read-only region file; closes itself.
class RegionFile {
 public:
  explicit RegionFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) {}
  ~RegionFile() {
    if (map_ != nullptr) munmap(map_, sizeof(iso::RegionLayout));
    if (fd_ >= 0) ::close(fd_);
  }
  RegionFile(const RegionFile&) = delete;
  RegionFile& operator=(const RegionFile&) = delete;

  int fd() const { return fd_; }

  /// Maps the file after checking its size and header.
  api::Result<const iso::RegionLayout*> map(const std::string& path) {
    if (fd_ < 0) return api::makeError(path + ": " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd_, &st) != 0) return api::makeError(path + ": " + std::strerror(errno));
    iso::RegionHeader header{};
    if (st.st_size != static_cast<off_t>(sizeof(iso::RegionLayout)) ||
        pread(fd_, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header) ||
        header.magic != iso::kRegionMagic || header.version != iso::kRegionVersion ||
        header.layoutSize != sizeof(iso::RegionLayout))
      return api::makeError(path + ": not a version " + std::to_string(iso::kRegionVersion) +
                            " accounting region (written by another libtessera-cuda?)");
    void* mem = mmap(nullptr, sizeof(iso::RegionLayout), PROT_READ, MAP_SHARED, fd_, 0);
    if (mem == MAP_FAILED) return api::makeError(path + ": cannot map: " + std::strerror(errno));
    map_ = mem;
    return static_cast<const iso::RegionLayout*>(mem);
  }

  /// True when some process holds slot `index`'s lock (F_GETLK sees both open file description
  /// locks and POSIX locks, and needs no write access).
  bool slotAlive(int index) const {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(iso::slotLockOffset(index));
    fl.l_len = 1;
    if (fcntl(fd_, F_GETLK, &fl) != 0) return true;  // cannot tell: count it as live
    return fl.l_type != F_UNLCK;
  }

  /// True when any slot's lock is held: one F_GETLK over every slot's byte.
  bool anySlotAlive() const {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(iso::kSlotLockBegin);
    fl.l_len = static_cast<off_t>(iso::kSlotLockLength);
    if (fcntl(fd_, F_GETLK, &fl) != 0) return true;
    return fl.l_type != F_UNLCK;
  }

 private:
  int fd_;
  void* map_ = nullptr;
};

std::string field(const char* text, size_t size) { return std::string(text, strnlen(text, size)); }

std::string formatUuid(const unsigned char* b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 0xf];
  }
  return out;
}

/// Folder names under `dir` (no dot entries), sorted.
std::vector<std::string> subfolders(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) out.emplace_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

api::Result<PodRegion> readRegion(const std::string& path) {
  RegionFile file(path);
  TESSERA_ASSIGN_OR_RETURN(const iso::RegionLayout* layout, file.map(path));
  PodRegion region;
  region.path = path;
  if (layout->pod.state.load(std::memory_order_acquire) == 1) {
    region.uid = field(layout->pod.uid, sizeof layout->pod.uid);
    region.namespace_ = field(layout->pod.namespace_, sizeof layout->pod.namespace_);
    region.name = field(layout->pod.name, sizeof layout->pod.name);
  }
  // Region device index -> position in region.gpus.
  int gpuOf[iso::kMaxDevices];
  for (int d = 0; d < iso::kMaxDevices; ++d) {
    gpuOf[d] = -1;
    const iso::RegionDevice& dev = layout->devices[d];
    if (dev.state.load(std::memory_order_acquire) != 1) continue;
    gpuOf[d] = static_cast<int>(region.gpus.size());
    region.gpus.push_back(GpuState{formatUuid(dev.uuid), dev.limit, dev.used.load(std::memory_order_relaxed),
                                   dev.peak.load(std::memory_order_relaxed),
                                   dev.refused.load(std::memory_order_relaxed)});
  }
  // Containers in table order; each gets a row per GPU.
  int rowOf[iso::kMaxContainers];
  for (int c = 0; c < iso::kMaxContainers; ++c) {
    rowOf[c] = -1;
    const iso::RegionContainer& container = layout->containers[c];
    if (container.state.load(std::memory_order_acquire) != 1) continue;
    rowOf[c] = static_cast<int>(region.containers.size());
    for (int d = 0; d < iso::kMaxDevices; ++d) {
      if (gpuOf[d] < 0) continue;
      region.containers.push_back(ContainerGpu{field(container.name, sizeof container.name),
                                               static_cast<size_t>(gpuOf[d]), 0,
                                               container.refused[d].load(std::memory_order_relaxed), 0});
    }
  }
  for (int p = 0; p < iso::kMaxProcs; ++p) {
    const iso::RegionProc& proc = layout->procs[p];
    if (proc.pid.load(std::memory_order_acquire) == 0 || !file.slotAlive(p)) continue;
    ++region.liveProcesses;
    if (proc.container < 0 || proc.container >= iso::kMaxContainers || rowOf[proc.container] < 0) continue;
    size_t row = static_cast<size_t>(rowOf[proc.container]);
    for (int d = 0; d < iso::kMaxDevices; ++d) {
      if (gpuOf[d] < 0) continue;
      const uint64_t used = proc.used[d].load(std::memory_order_relaxed);
      ContainerGpu& cell = region.containers[row++];
      cell.used += used;
      if (used > 0) ++cell.processes;
    }
  }
  return region;
}

std::vector<PodRegion> scanRegions(const std::string& dir, std::vector<std::string>* problems) {
  std::vector<PodRegion> out;
  for (const std::string& folder : subfolders(dir)) {
    const std::string path = dir + "/" + folder + "/" + iso::kRegionFileName;
    if (access(path.c_str(), F_OK) != 0) continue;  // a pod whose processes have not started CUDA yet
    auto region = readRegion(path);
    if (!region.ok()) {
      if (problems != nullptr) problems->push_back(region.error().message);
      continue;
    }
    region->dirName = folder;
    out.push_back(std::move(*region));
  }
  return out;
}

std::string podVolumeRegionDir(const std::string& podsDir, const std::string& podUid) {
  return podsDir + "/" + podUid + "/volumes/kubernetes.io~empty-dir/" + iso::kRegionVolumeName;
}

std::vector<PodRegion> scanPodVolumes(const std::string& podsDir, std::vector<std::string>* problems) {
  std::vector<PodRegion> out;
  for (const std::string& uid : subfolders(podsDir)) {
    const std::string path = podVolumeRegionDir(podsDir, uid) + "/" + iso::kRegionFileName;
    if (access(path.c_str(), F_OK) != 0) continue;  // not a hard pod, or no CUDA process yet
    auto region = readRegion(path);
    if (!region.ok()) {
      if (problems != nullptr) problems->push_back(region.error().message);
      continue;
    }
    region->dirName = uid;
    out.push_back(std::move(*region));
  }
  return out;
}

std::vector<PodRegion> scanAll(const RegionSources& sources, std::vector<std::string>* problems) {
  std::vector<PodRegion> out;
  if (!sources.podsDir.empty()) out = scanPodVolumes(sources.podsDir, problems);
  if (!sources.regionDir.empty())
    for (auto& r : scanRegions(sources.regionDir, problems)) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(),
                   [](const PodRegion& a, const PodRegion& b) { return a.dirName < b.dirName; });
  return out;
}

std::vector<std::string> Cleaner::folders() const { return subfolders(dir_); }

std::vector<std::string> Cleaner::sweep(const std::vector<std::string>& folders,
                                        const std::set<std::string>& livePodUids, int64_t now) {
  std::vector<std::string> removed;
  std::map<std::string, int64_t> stillMissing;
  for (const std::string& folder : folders) {
    if (livePodUids.count(folder) != 0) continue;
    auto seen = missingSince_.find(folder);
    const int64_t since = seen == missingSince_.end() ? now : seen->second;
    if (now - since < graceSeconds_) {
      stillMissing[folder] = since;
      continue;
    }
    const std::string folderPath = dir_ + "/" + folder;
    const std::string path = folderPath + "/" + iso::kRegionFileName;
    bool busy = false;
    RegionFile file(path);
    if (file.fd() >= 0) {
      // Under the region's lock: a process joining meanwhile waits, then sees the file unlinked
      // and opens a fresh one (region.cpp, Region::open).
      if (flock(file.fd(), LOCK_EX) == 0) {
        busy = file.anySlotAlive();
        if (!busy) unlink(path.c_str());
        flock(file.fd(), LOCK_UN);
      } else {
        busy = true;
      }
    }
    if (busy) {
      stillMissing[folder] = since;
      continue;
    }
    if (rmdir(folderPath.c_str()) == 0 || errno == ENOENT) removed.push_back(folder);
  }
  missingSince_ = std::move(stillMissing);
  return removed;
}

}  // namespace tessera::monitor
