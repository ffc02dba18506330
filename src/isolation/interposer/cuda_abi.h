#pragma once
/// Our own declarations of the few CUDA driver API and NVML types the interposer needs.
///
/// The interposer always compiles against these (never against cuda.h), so the build is the same
/// whether or not a CUDA toolkit is installed. When cuda.h is available, cuda_abi_check.cpp
/// static_asserts that every value and layout below matches the real header.
///
/// Everything lives in namespace tessera::cu so it can sit beside cuda.h in the check TU; the
/// exported hooks are extern "C", so the namespace does not affect their symbol names.

#include <cstddef>
#include <cstdint>

namespace tessera::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  ///< CUdeviceptr_v2 (64-bit builds)
using CUdeviceptrV1 = unsigned int;      ///< CUdeviceptr_v1, used by the pre-3.2 entry points
using cuuint64_t = std::uint64_t;
using CUmemGenericAllocationHandle = unsigned long long;

// Opaque handles: only ever passed through.
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUarray = struct CUarray_st*;
using CUmipmappedArray = struct CUmipmappedArray_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUgraphEdgeData = struct CUgraphEdgeData_st;
using CUfunction = struct CUfunc_st*;
using CUlaunchAttribute = struct CUlaunchAttribute_st;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_PERMITTED = 800;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

// CUdriverProcAddress_flags
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1ULL << 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1ULL << 1;

// CUdriverProcAddressQueryResult
using CUdriverProcAddressQueryResult = int;
inline constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
inline constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
inline constexpr int CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr int CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10;

struct CUuuid {
  char bytes[16];
};

struct CUmemLocation {
  int type;  ///< CUmemLocationType
  int id;
};

struct CUmemAllocationProp {
  int type;                  ///< CUmemAllocationType
  int requestedHandleTypes;  ///< CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemPoolProps {
  int allocType;
  int handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  std::size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};

/// CUDA_MEM_ALLOC_NODE_PARAMS_v1 and _v2 have the same layout.
struct CUDA_MEM_ALLOC_NODE_PARAMS {
  CUmemPoolProps poolProps;
  const void* accessDescs;
  std::size_t accessDescCount;
  std::size_t bytesize;
  CUdeviceptr dptr;  ///< out
};

/// CUgraphNodeParams: 16 bytes of header, a 232-byte union, 8 reserved bytes.
struct CUgraphNodeParams {
  int type;  ///< CUgraphNodeType
  int reserved0[3];
  union {
    long long reserved1[29];
    CUDA_MEM_ALLOC_NODE_PARAMS alloc;
  };
  long long reserved2;
};

struct CUDA_GRAPH_INSTANTIATE_PARAMS {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  int result_out;  ///< CUgraphInstantiateResult
};

using CUarray_format = int;

struct CUDA_ARRAY_DESCRIPTOR {  ///< _v2
  std::size_t Width;
  std::size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
};

struct CUDA_ARRAY_DESCRIPTOR_V1 {
  unsigned int Width;
  unsigned int Height;
  CUarray_format Format;
  unsigned int NumChannels;
};

struct CUDA_ARRAY3D_DESCRIPTOR {  ///< _v2
  std::size_t Width;
  std::size_t Height;
  std::size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

struct CUDA_ARRAY3D_DESCRIPTOR_V1 {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

struct CUDA_ARRAY_MEMORY_REQUIREMENTS {
  std::size_t size;
  std::size_t alignment;
  unsigned int reserved[4];
};

/// CUlaunchConfig of cuLaunchKernelEx (only the grid is read).
struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

inline constexpr unsigned int kArray3DLayered = 0x01;  // CUDA_ARRAY3D_LAYERED
inline constexpr unsigned int kArray3DCubemap = 0x04;  // CUDA_ARRAY3D_CUBEMAP

// ---- NVML -------------------------------------------------------------------------------------
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;
inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};

/// nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v2 / _v3.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  ///< NVML_VALUE_NOT_AVAILABLE when the driver does not say
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
/// nvmlProcessInfo_v1_t of the unversioned nvmlDeviceGetComputeRunningProcesses.
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;

/// nvmlProcessUtilizationSample_t of nvmlDeviceGetProcessUtilization: one per process that used
/// the GPU in the last sample period; the utilizations are percent of the GPU.
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  ///< CPU timestamp in microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

/// NVML_STRUCT_VERSION(Memory, 2)
inline constexpr unsigned int nvmlMemory_v2 = static_cast<unsigned int>(sizeof(nvmlMemory_v2_t) | (2U << 24U));

}  // namespace tessera::cu
