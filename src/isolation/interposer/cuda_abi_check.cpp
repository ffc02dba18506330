// Compile-time cross-check of cuda_abi.h against the real CUDA headers.
//
// Only compiled when cuda.h was found (TESSERA_ISOLATION_USE_CUDA_HEADERS). Produces no code; a
// mismatch between our declarations and the toolkit's is a build error rather than a silent
// memory-layout bug inside every GPU process.

#include <cuda.h>

#include <cstddef>
#include <type_traits>

#include "cuda_abi.h"

namespace t = tessera::cu;

#define TESSERA_SAME_LAYOUT(ours, theirs)                                                  \
  static_assert(sizeof(t::ours) == sizeof(theirs), #ours " size differs from " #theirs); \
  static_assert(alignof(t::ours) == alignof(theirs), #ours " alignment differs from " #theirs)

#define TESSERA_SAME_OFFSET(ours, theirs, field) \
  static_assert(offsetof(t::ours, field) == offsetof(theirs, field), #ours "::" #field " offset differs")

static_assert(t::CUDA_SUCCESS == CUDA_SUCCESS);
static_assert(t::CUDA_ERROR_INVALID_VALUE == CUDA_ERROR_INVALID_VALUE);
static_assert(t::CUDA_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(t::CUDA_ERROR_NOT_INITIALIZED == CUDA_ERROR_NOT_INITIALIZED);
static_assert(t::CUDA_ERROR_INVALID_CONTEXT == CUDA_ERROR_INVALID_CONTEXT);
static_assert(t::CUDA_ERROR_NOT_FOUND == CUDA_ERROR_NOT_FOUND);
static_assert(t::CUDA_ERROR_NOT_PERMITTED == CUDA_ERROR_NOT_PERMITTED);
static_assert(t::CUDA_ERROR_NOT_SUPPORTED == CUDA_ERROR_NOT_SUPPORTED);
static_assert(sizeof(t::CUresult) == sizeof(CUresult));
static_assert(sizeof(t::CUdevice) == sizeof(CUdevice));
static_assert(std::is_same_v<t::CUdeviceptr, CUdeviceptr_v2>);
static_assert(std::is_same_v<t::CUmemGenericAllocationHandle, CUmemGenericAllocationHandle>);
static_assert(std::is_same_v<t::cuuint64_t, cuuint64_t>);

static_assert(t::CU_GET_PROC_ADDRESS_DEFAULT == CU_GET_PROC_ADDRESS_DEFAULT);
static_assert(t::CU_GET_PROC_ADDRESS_LEGACY_STREAM == CU_GET_PROC_ADDRESS_LEGACY_STREAM);
static_assert(t::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
static_assert(t::CU_GET_PROC_ADDRESS_SUCCESS == CU_GET_PROC_ADDRESS_SUCCESS);
static_assert(t::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
static_assert(t::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
static_assert(sizeof(t::CUdriverProcAddressQueryResult) == sizeof(CUdriverProcAddressQueryResult));
static_assert(t::CU_MEM_LOCATION_TYPE_DEVICE == CU_MEM_LOCATION_TYPE_DEVICE);
static_assert(t::CU_GRAPH_NODE_TYPE_MEM_ALLOC == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
static_assert(t::kArray3DLayered == CUDA_ARRAY3D_LAYERED);
static_assert(t::kArray3DCubemap == CUDA_ARRAY3D_CUBEMAP);

TESSERA_SAME_LAYOUT(CUuuid, CUuuid);
TESSERA_SAME_LAYOUT(CUmemLocation, CUmemLocation);
TESSERA_SAME_LAYOUT(CUmemAllocationProp, CUmemAllocationProp);
TESSERA_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, location);
TESSERA_SAME_LAYOUT(CUmemPoolProps, CUmemPoolProps);
TESSERA_SAME_OFFSET(CUmemPoolProps, CUmemPoolProps, location);
TESSERA_SAME_LAYOUT(CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS_v1);
TESSERA_SAME_LAYOUT(CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS_v2);
TESSERA_SAME_OFFSET(CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS_v1, bytesize);
TESSERA_SAME_OFFSET(CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS_v1, dptr);
TESSERA_SAME_LAYOUT(CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR_v2);
TESSERA_SAME_LAYOUT(CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR_v2);
TESSERA_SAME_LAYOUT(CUDA_ARRAY_MEMORY_REQUIREMENTS, CUDA_ARRAY_MEMORY_REQUIREMENTS_v1);
#if CUDA_VERSION >= 11060
TESSERA_SAME_LAYOUT(CUlaunchConfig, CUlaunchConfig);
TESSERA_SAME_OFFSET(CUlaunchConfig, CUlaunchConfig, gridDimZ);
TESSERA_SAME_OFFSET(CUlaunchConfig, CUlaunchConfig, hStream);
#endif
#if CUDA_VERSION >= 12000
TESSERA_SAME_LAYOUT(CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_GRAPH_INSTANTIATE_PARAMS);
TESSERA_SAME_OFFSET(CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_GRAPH_INSTANTIATE_PARAMS, result_out);
#endif

#if CUDA_VERSION >= 12020
TESSERA_SAME_LAYOUT(CUgraphNodeParams, CUgraphNodeParams);
TESSERA_SAME_OFFSET(CUgraphNodeParams, CUgraphNodeParams, alloc);
#endif
