#pragma once
/// Prototypes of every exported hook (C ABI, default visibility). Their signatures are the CUDA
/// driver's / NVML's; the types come from cuda_abi.h.

#include "cuda_abi.h"

#define TESSERA_HOOK_API extern "C" __attribute__((visibility("default")))

namespace tessera::interposer::abi {
using namespace tessera::cu;  // NOLINT: the ABI types are this file's vocabulary
}

// clang-format off
#define TESSERA_ABI tessera::interposer::abi

TESSERA_HOOK_API TESSERA_ABI::CUresult cuInit(unsigned int flags);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, TESSERA_ABI::cuuint64_t flags);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, TESSERA_ABI::cuuint64_t flags, TESSERA_ABI::CUdriverProcAddressQueryResult* symbolStatus);

TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAlloc(TESSERA_ABI::CUdeviceptrV1* dptr, unsigned int bytesize);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAlloc_v2(TESSERA_ABI::CUdeviceptr* dptr, std::size_t bytesize);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAllocPitch(TESSERA_ABI::CUdeviceptrV1* dptr, unsigned int* pitch, unsigned int widthInBytes, unsigned int height, unsigned int elementSizeBytes);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAllocPitch_v2(TESSERA_ABI::CUdeviceptr* dptr, std::size_t* pitch, std::size_t widthInBytes, std::size_t height, unsigned int elementSizeBytes);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAllocManaged(TESSERA_ABI::CUdeviceptr* dptr, std::size_t bytesize, unsigned int flags);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAllocAsync(TESSERA_ABI::CUdeviceptr* dptr, std::size_t bytesize, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAllocAsync_ptsz(TESSERA_ABI::CUdeviceptr* dptr, std::size_t bytesize, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAllocFromPoolAsync(TESSERA_ABI::CUdeviceptr* dptr, std::size_t bytesize, TESSERA_ABI::CUmemoryPool pool, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemAllocFromPoolAsync_ptsz(TESSERA_ABI::CUdeviceptr* dptr, std::size_t bytesize, TESSERA_ABI::CUmemoryPool pool, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemFree(TESSERA_ABI::CUdeviceptrV1 dptr);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemFree_v2(TESSERA_ABI::CUdeviceptr dptr);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemFreeAsync(TESSERA_ABI::CUdeviceptr dptr, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemFreeAsync_ptsz(TESSERA_ABI::CUdeviceptr dptr, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemCreate(TESSERA_ABI::CUmemGenericAllocationHandle* handle, std::size_t size, const TESSERA_ABI::CUmemAllocationProp* prop, unsigned long long flags);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemRelease(TESSERA_ABI::CUmemGenericAllocationHandle handle);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuArrayCreate(TESSERA_ABI::CUarray* array, const TESSERA_ABI::CUDA_ARRAY_DESCRIPTOR_V1* desc);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuArrayCreate_v2(TESSERA_ABI::CUarray* array, const TESSERA_ABI::CUDA_ARRAY_DESCRIPTOR* desc);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuArray3DCreate(TESSERA_ABI::CUarray* array, const TESSERA_ABI::CUDA_ARRAY3D_DESCRIPTOR_V1* desc);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuArray3DCreate_v2(TESSERA_ABI::CUarray* array, const TESSERA_ABI::CUDA_ARRAY3D_DESCRIPTOR* desc);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuArrayDestroy(TESSERA_ABI::CUarray array);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMipmappedArrayCreate(TESSERA_ABI::CUmipmappedArray* array, const TESSERA_ABI::CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int numLevels);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMipmappedArrayDestroy(TESSERA_ABI::CUmipmappedArray array);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphAddMemAllocNode(TESSERA_ABI::CUgraphNode* node, TESSERA_ABI::CUgraph graph, const TESSERA_ABI::CUgraphNode* deps, std::size_t numDeps, TESSERA_ABI::CUDA_MEM_ALLOC_NODE_PARAMS* params);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphAddNode(TESSERA_ABI::CUgraphNode* node, TESSERA_ABI::CUgraph graph, const TESSERA_ABI::CUgraphNode* deps, std::size_t numDeps, TESSERA_ABI::CUgraphNodeParams* params);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphAddNode_v2(TESSERA_ABI::CUgraphNode* node, TESSERA_ABI::CUgraph graph, const TESSERA_ABI::CUgraphNode* deps, const TESSERA_ABI::CUgraphEdgeData* edgeData, std::size_t numDeps, TESSERA_ABI::CUgraphNodeParams* params);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphDestroyNode(TESSERA_ABI::CUgraphNode node);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphDestroy(TESSERA_ABI::CUgraph graph);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphInstantiate(TESSERA_ABI::CUgraphExec* exec, TESSERA_ABI::CUgraph graph, TESSERA_ABI::CUgraphNode* errorNode, char* log, std::size_t logSize);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphInstantiate_v2(TESSERA_ABI::CUgraphExec* exec, TESSERA_ABI::CUgraph graph, TESSERA_ABI::CUgraphNode* errorNode, char* log, std::size_t logSize);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphInstantiateWithFlags(TESSERA_ABI::CUgraphExec* exec, TESSERA_ABI::CUgraph graph, unsigned long long flags);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphInstantiateWithParams(TESSERA_ABI::CUgraphExec* exec, TESSERA_ABI::CUgraph graph, TESSERA_ABI::CUDA_GRAPH_INSTANTIATE_PARAMS* params);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphInstantiateWithParams_ptsz(TESSERA_ABI::CUgraphExec* exec, TESSERA_ABI::CUgraph graph, TESSERA_ABI::CUDA_GRAPH_INSTANTIATE_PARAMS* params);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphExecDestroy(TESSERA_ABI::CUgraphExec exec);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphLaunch(TESSERA_ABI::CUgraphExec exec, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuGraphLaunch_ptsz(TESSERA_ABI::CUgraphExec exec, TESSERA_ABI::CUstream stream);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuLaunchKernel(TESSERA_ABI::CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, TESSERA_ABI::CUstream stream, void** kernelParams, void** extra);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuLaunchKernel_ptsz(TESSERA_ABI::CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, TESSERA_ABI::CUstream stream, void** kernelParams, void** extra);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuLaunchKernelEx(const TESSERA_ABI::CUlaunchConfig* config, TESSERA_ABI::CUfunction f, void** kernelParams, void** extra);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuLaunchKernelEx_ptsz(const TESSERA_ABI::CUlaunchConfig* config, TESSERA_ABI::CUfunction f, void** kernelParams, void** extra);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuLaunchCooperativeKernel(TESSERA_ABI::CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, TESSERA_ABI::CUstream stream, void** kernelParams);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuLaunchCooperativeKernel_ptsz(TESSERA_ABI::CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, TESSERA_ABI::CUstream stream, void** kernelParams);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemGetInfo(unsigned int* free, unsigned int* total);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuDeviceTotalMem(unsigned int* bytes, TESSERA_ABI::CUdevice dev);
TESSERA_HOOK_API TESSERA_ABI::CUresult cuDeviceTotalMem_v2(std::size_t* bytes, TESSERA_ABI::CUdevice dev);

TESSERA_HOOK_API TESSERA_ABI::nvmlReturn_t nvmlDeviceGetMemoryInfo(TESSERA_ABI::nvmlDevice_t device, TESSERA_ABI::nvmlMemory_t* memory);
TESSERA_HOOK_API TESSERA_ABI::nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(TESSERA_ABI::nvmlDevice_t device, TESSERA_ABI::nvmlMemory_v2_t* memory);

TESSERA_HOOK_API void* dlsym(void* handle, const char* name) noexcept;
// clang-format on

namespace tessera::interposer {
// Signatures of the driver functions we call but do not wrap (TESSERA_REAL in symbols.def).
using cuCtxGetDevice_t = cu::CUresult (*)(cu::CUdevice*);
using cuDeviceGetCount_t = cu::CUresult (*)(int*);
using cuDeviceGetUuid_t = cu::CUresult (*)(cu::CUuuid*, cu::CUdevice);
using cuDeviceGetUuid_v2_t = cu::CUresult (*)(cu::CUuuid*, cu::CUdevice);
using cuArrayGetMemoryRequirements_t = cu::CUresult (*)(cu::CUDA_ARRAY_MEMORY_REQUIREMENTS*, cu::CUarray, cu::CUdevice);
using cuMipmappedArrayGetMemoryRequirements_t = cu::CUresult (*)(cu::CUDA_ARRAY_MEMORY_REQUIREMENTS*,
                                                                 cu::CUmipmappedArray, cu::CUdevice);
}  // namespace tessera::interposer
