#pragma once
/// `tessera reserve`: the process of a GPU reservation pod (docs/gpu-sharing.md). It finds the one
/// GPU its container was given through NVML (libnvidia-ml.so.1, loaded with dlopen: the build needs
/// no NVIDIA headers or libraries), writes the GPU's UUID and memory to its own pod's annotations
/// tessera.dev/gpu-uuid and tessera.dev/gpu-memory-mib, then waits for SIGTERM and exits 0.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "tessera/api/result.h"

namespace tessera::reserve {

/// Annotation holding the reserved GPU's total memory in MiB (tessera.dev/gpu-uuid is in api::keys).
inline constexpr const char* kGpuMemoryMiBAnnotation = "tessera.dev/gpu-memory-mib";

/// The GPU found through NVML.
struct GpuInfo {
  std::string uuid;  ///< "GPU-8f6c..."
  uint64_t memoryBytes = 0;
  unsigned index = 0;    ///< NVML index
  unsigned visible = 0;  ///< GPUs NVML sees
};

/// Loads NVML from `library` (a name for the dynamic loader or a path), initialises it and picks
/// the GPU: the only one NVML sees (a container given one GPU), else the one NVIDIA_VISIBLE_DEVICES
/// (`visibleDevices`, empty = unset) names by UUID or index. Errors say what is missing.
api::Result<GpuInfo> findGpu(const std::string& library, const std::string& visibleDevices);

/// `tessera reserve [--kubeconfig PATH [--context NAME]] [--pod-name N] [--pod-namespace NS]
/// [--nvml-library libnvidia-ml.so.1]`. Without --kubeconfig: the in-cluster service account.
/// Pod name and namespace default to POD_NAME / POD_NAMESPACE (downward API). Returns the exit code.
int reserveCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::reserve
