#pragma once
/// Intra-node GPU topology: the node annotation tessera.dev/gpu-topology (docs/gpu-sharing.md,
/// "Intra-node GPU topology"), the NVLink graph built from it, NVLink islands, and the choice of k
/// GPUs among a node's free devices. A pure library: no session, no cache; the gpushare plugin calls
/// it for requests of several whole GPUs or several fraction devices.
///
/// The choice, in order of preference (HAMi's two-stage rule, seed 003):
///  1. all k GPUs inside one NVLink island of free GPUs; among the islands that can hold them the
///     smallest (best fit: the largest islands stay intact for later large requests); equal sizes:
///     the higher score, then the lowest device index;
///  2. otherwise whole islands, largest first, until the rest fits into one island (chosen as in 1);
///  3. inside an island, the subset with the highest score = 10 × (NVLink weight among the chosen
///     GPUs) − (NVLink weight from the chosen GPUs to the island's other free GPUs): strongly
///     connected GPUs first, then the fewest links severed (least fragmentation).
/// Every tie ends on the lexicographically smallest list of device indices: the result is
/// deterministic.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/api/objects.h"
#include "tessera/api/result.h"

namespace tessera::plugins::gputopo {

/// The node annotation holding the GPU link matrix.
inline constexpr const char* kGpuTopologyAnnotation = "tessera.dev/gpu-topology";
/// Most GPUs a topology may describe (the annotation is refused above this).
inline constexpr int kMaxGpus = 256;
/// Most NVLinks between two GPUs ("NV<n>", n in 1..kMaxLinks).
inline constexpr int kMaxLinks = 64;

/// How two GPUs are connected: nvidia-smi topo -m's legend. NVLink is the only kind that forms
/// islands; the PCIe/SMP kinds are kept for diagnostics.
enum class LinkKind { Self, NvLink, Pix, Pxb, Phb, Node, Sys };

/// A node's GPU topology, indexed by device index (NVML index order, as the matrix rows).
struct GpuTopology {
  int gpuCount = 0;
  std::vector<std::string> uuids;  ///< "gpus" when given (one per device), else empty
  std::vector<LinkKind> kinds;     ///< gpuCount × gpuCount, row-major
  std::vector<int> nvlinks;        ///< gpuCount × gpuCount bonded NVLink count (0 = none), symmetric

  LinkKind kind(int a, int b) const { return kinds[static_cast<size_t>(a) * gpuCount + b]; }
  /// NVLinks between a and b; 0 when either is outside the matrix.
  int links(int a, int b) const {
    if (a < 0 || b < 0 || a >= gpuCount || b >= gpuCount) return 0;
    return nvlinks[static_cast<size_t>(a) * gpuCount + b];
  }
};

/// Parses the annotation's JSON text. `nodeName` only names the node in errors, which read
/// `Node n1: annotation tessera.dev/gpu-topology: matrix[0][2]: "NVx" is not a link type (...)`.
api::Result<GpuTopology> parseGpuTopology(const std::string& nodeName, const std::string& text);

/// The node's topology from its annotation; nullopt when the node has no such annotation.
api::Result<std::optional<GpuTopology>> nodeGpuTopology(const api::Node& node);

/// Connected components of the NVLink graph (Boost.Graph) over `devices` (every device of the
/// topology when empty). Each island is sorted; islands are ordered by their lowest index. Devices
/// outside the matrix are islands of their own.
std::vector<std::vector<int>> nvlinkIslands(const GpuTopology& topology, const std::vector<int>& devices = {});

/// The chosen devices and what the choice costs.
struct GpuChoice {
  std::vector<int> devices;  ///< sorted ascending
  int islandsUsed = 0;       ///< NVLink islands (of free GPUs) the choice spans; 1 = the preferred case
  int64_t linkWeight = 0;    ///< NVLinks among the chosen GPUs (sum over pairs)
  int64_t cutWeight = 0;     ///< NVLinks from the chosen GPUs to free GPUs left behind (fragmentation)
  /// 10 × linkWeight − cutWeight: higher is better; comparable across nodes for the same k
  /// (a node-order plugin ranks nodes with it).
  int64_t score = 0;
};

/// Chooses `k` devices out of `freeDevices` (duplicates and negative indices ignored; indices
/// outside the matrix count as GPUs without NVLink). nullopt when fewer than k are free; k <= 0
/// gives an empty choice. Exact for islands where C(n, k) <= 5000 subsets, otherwise a greedy
/// growth from each seed GPU (O(n² k)).
std::optional<GpuChoice> chooseGpus(const GpuTopology& topology, const std::vector<int>& freeDevices, int k);

/// "NV12", "SYS", ...: the matrix cell text of a link kind (NvLink with its count).
std::string linkText(LinkKind kind, int links);

}  // namespace tessera::plugins::gputopo
