#pragma once
/// `tessera monitor`: the node agent that shows what each pod really uses of its GPUs
/// (docs/metrics.md, "Node metrics"; docs/isolation.md, "tessera monitor").
///
/// It reads the accounting regions the hard-isolation interposer keeps, one per pod
/// (include/tessera/isolation/region_layout.h): in the pod's emptyDir, on the node at
/// <kubelet root>/pods/<pod UID>/volumes/kubernetes.io~empty-dir/tessera-regions/gpu.region (the
/// webhook's default), and in the older hostPath layout <region dir>/<pod UID>/gpu.region; it
/// serves them as Prometheus metrics per pod, container and GPU. Regions are opened read-only and mapped
/// PROT_READ: the monitor never writes a byte into one. Its only write is removing the folder of
/// a pod that the API server no longer knows and whose region no live process holds.
#include <cstdint>
#include <iosfwd>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessera/api/result.h"

namespace tessera::monitor {

/// One GPU as a pod's region records it.
struct GpuState {
  std::string uuid;      ///< "GPU-8f6c..."
  uint64_t limit = 0;    ///< the pod's limit on this GPU, shared by all its containers
  uint64_t charged = 0;  ///< what the region has charged, dead processes not yet reclaimed included
  uint64_t peak = 0;
  uint64_t refused = 0;  ///< allocations refused over the limit, whole pod
};

/// One container's use of one GPU (`gpu` indexes PodRegion::gpus).
struct ContainerGpu {
  std::string container;  ///< "" when the process did not say (TESSERA_CONTAINER_NAME unset)
  size_t gpu = 0;
  uint64_t used = 0;     ///< bytes charged by the container's live processes (contexts included)
  uint64_t refused = 0;  ///< its allocations refused over the pod's limit (a counter)
  int processes = 0;     ///< its live processes holding memory on this GPU
};

/// A snapshot of one pod's region.
struct PodRegion {
  std::string path;
  std::string dirName;                ///< the folder's name: the pod's UID as the webhook laid it out
  std::string uid, namespace_, name;  ///< from the region (the downward API); empty when unset
  std::vector<GpuState> gpus;
  std::vector<ContainerGpu> containers;  ///< every (container, GPU) pair, containers in table order
  int liveProcesses = 0;                 ///< processes holding a slot, whatever they use
};

/// Reads a region without writing to it. Errors: cannot open/map, not a region of this version.
api::Result<PodRegion> readRegion(const std::string& path);

/// Reads <dir>/*/gpu.region, sorted by folder name. A region that cannot be read is skipped and
/// described in `problems`.
std::vector<PodRegion> scanRegions(const std::string& dir, std::vector<std::string>* problems = nullptr);

/// The folder of pod `podUid`'s region emptyDir under the kubelet's pods folder
/// (`<podsDir>/<uid>/volumes/kubernetes.io~empty-dir/tessera-regions`).
std::string podVolumeRegionDir(const std::string& podsDir, const std::string& podUid);

/// Reads the regions in the pods' emptyDirs under the kubelet's pods folder (podVolumeRegionDir of
/// every pod folder), sorted by pod UID; PodRegion::dirName is the UID. Pods without the volume,
/// or whose processes have not started CUDA yet, are skipped silently; a region that cannot be
/// read is described in `problems`.
std::vector<PodRegion> scanPodVolumes(const std::string& podsDir, std::vector<std::string>* problems = nullptr);

/// Where the monitor looks: either may be empty (not read).
struct RegionSources {
  std::string podsDir;    ///< the kubelet's pods folder (default /var/lib/kubelet/pods)
  std::string regionDir;  ///< the hostPath layout's folder (default /var/lib/tessera/regions)
};

/// Both layouts, sorted by dirName (a pod's UID): a pod has its region in one of them.
std::vector<PodRegion> scanAll(const RegionSources& sources, std::vector<std::string>* problems = nullptr);

/// Prometheus text (format 0.0.4) for these regions: tessera_gpu_memory_used_bytes,
/// tessera_gpu_memory_limit_bytes, tessera_gpu_alloc_refused_total, tessera_gpu_processes.
std::string renderMetrics(const std::vector<PodRegion>& regions);

/// One HTTP answer of the monitor.
struct Reply {
  int code = 200;
  std::string contentType;
  std::string body;
};
/// GET /metrics (the regions of `sources`, read now) and GET /healthz; 404 and 405 otherwise.
/// Regions that cannot be read are logged and left out.
Reply handleRequest(const RegionSources& sources, const std::string& method, const std::string& path);

/// Removes the folders of pods that are gone, in the hostPath layout (the kubelet removes a pod's
/// emptyDir itself). A folder is removed once its name has been missing
/// from the API server's pods on this node for `graceSeconds` (one sweep to the next), and only
/// when no live process holds its region (checked under the region's lock, so a process that
/// opens the file meanwhile notices and opens a fresh one).
class Cleaner {
 public:
  Cleaner(std::string dir, int64_t graceSeconds) : dir_(std::move(dir)), graceSeconds_(graceSeconds) {}

  /// The pod folders now, to pass to sweep() after listing the pods: a folder that exists before
  /// the list was taken belongs to a pod the list shows, unless that pod is gone.
  std::vector<std::string> folders() const;
  /// `folders`: from folders(), taken before `livePodUids` was listed. `now`: seconds, any epoch.
  /// Returns the folders removed.
  std::vector<std::string> sweep(const std::vector<std::string>& folders, const std::set<std::string>& livePodUids,
                                 int64_t now);

 private:
  std::string dir_;
  int64_t graceSeconds_;
  std::map<std::string, int64_t> missingSince_;
};

/// `tessera monitor [--kubelet-pods-dir DIR] [--region-dir DIR] [--address A] [--port 9402] [--in-cluster |
/// --kubeconfig PATH
/// [--context NAME]] [--node-name NAME] [--cleanup-interval 60] [--stale-grace 300]`.
/// Serves /metrics and /healthz until SIGTERM. Without API access it never removes anything.
int monitorCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::monitor
