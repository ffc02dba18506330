// Exported CUDA graph wrappers: memory-allocation nodes are charged when created, held while a
// graph or executable graph contains them, charged again on a launch after an explicit free, and
// credited when the last holder is destroyed (graphs.h; docs/isolation.md, "Graphs").

#include <cstdint>

#include "graphs.h"
#include "hooks.h"
#include "runtime.h"

using namespace tessera::cu;          // NOLINT: ABI vocabulary
using namespace tessera::interposer;  // NOLINT

namespace {

using cuGraphNodeGetType_t = CUresult (*)(CUgraphNode, int*);
using cuGraphMemAllocNodeGetParams_t = CUresult (*)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS*);

// Shared by cuGraphAddMemAllocNode and cuGraphAddNode(_v2) with a memory-allocation node.
template <class Call>
CUresult chargedGraphAlloc(const char* api, CUgraph graph, CUDA_MEM_ALLOC_NODE_PARAMS* params, CUgraphNode* node,
                           Call&& driverCall) {
  if (params == nullptr || params->bytesize == 0) return driverCall();
  int index = -1;
  CUresult rc = CUDA_SUCCESS;
  if (params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    rc = deviceIndex(params->poolProps.location.id, &index);
  } else {
    rc = currentDevice(&index);
  }
  if (rc != CUDA_SUCCESS) return rc;
  const std::uint64_t bytes = params->bytesize;
  if ((rc = charge(index, bytes, api)) != CUDA_SUCCESS) return rc;
  if ((rc = driverCall()) != CUDA_SUCCESS) {
    credit(index, bytes);
    TESSERA_TRACE("%s(%zu bytes) = %d (driver)", api, params->bytesize, rc);
    return rc;
  }
  if (!track(devicePointers(), params->dptr, packCharge(bytes, index) | kGraphCharge)) {
    if (auto destroyNode = TESSERA_REAL_FN(cuGraphDestroyNode); destroyNode != nullptr && node != nullptr) {
      destroyNode(*node);
    }
    credit(index, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  graphRecordNode(graph, params->dptr, bytes, index);
  TESSERA_TRACE("%s(%zu bytes) = 0 ptr=0x%llx", api, params->bytesize, params->dptr);
  return CUDA_SUCCESS;
}

// After a successful instantiation: the executable graph holds the graph's allocation nodes.
CUresult instantiated(const char* api, CUresult rc, CUgraphExec* exec, CUgraph graph) {
  if (rc == CUDA_SUCCESS && exec != nullptr) {
    graphAdopt(graph, graph);  // a captured graph's allocations become the graph's
    graphAdopt(graph, *exec);
  }
  TESSERA_TRACE("%s = %d exec=%p", api, rc, exec != nullptr ? static_cast<void*>(*exec) : nullptr);
  return rc;
}

template <class Launch>
CUresult chargedLaunch(const char* api, CUgraphExec exec, Launch&& launch) {
  if (graphRecordsExist()) {
    if (CUresult rc = graphChargeLaunch(exec, api); rc != CUDA_SUCCESS) {
      TESSERA_TRACE("%s(%p) refused: its allocations do not fit", api, static_cast<void*>(exec));
      return rc;
    }
  }
  return launch();
}

}  // namespace

CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t numDeps,
                                CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  TESSERA_REQUIRE_REAL(cuGraphAddMemAllocNode);
  return chargedGraphAlloc("cuGraphAddMemAllocNode", graph, params, node,
                           [&] { return real(node, graph, deps, numDeps, params); });
}

CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, std::size_t numDeps,
                        CUgraphNodeParams* params) {
  TESSERA_REQUIRE_REAL(cuGraphAddNode);
  auto call = [&] { return real(node, graph, deps, numDeps, params); };
  if (params == nullptr || params->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return call();
  return chargedGraphAlloc("cuGraphAddNode", graph, &params->alloc, node, call);
}

CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                           std::size_t numDeps, CUgraphNodeParams* params) {
  TESSERA_REQUIRE_REAL(cuGraphAddNode_v2);
  auto call = [&] { return real(node, graph, deps, edges, numDeps, params); };
  if (params == nullptr || params->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return call();
  return chargedGraphAlloc("cuGraphAddNode_v2", graph, &params->alloc, node, call);
}

CUresult cuGraphDestroyNode(CUgraphNode node) {
  TESSERA_REQUIRE_REAL(cuGraphDestroyNode);
  // Read the node's address before it is gone.
  CUdeviceptr dptr = 0;
  auto nodeType = reinterpret_cast<cuGraphNodeGetType_t>(realFn(Sym::cuGraphNodeGetType));
  auto allocParams = reinterpret_cast<cuGraphMemAllocNodeGetParams_t>(realFn(Sym::cuGraphMemAllocNodeGetParams));
  int type = -1;
  if (nodeType != nullptr && allocParams != nullptr && nodeType(node, &type) == CUDA_SUCCESS &&
      type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    if (allocParams(node, &params) == CUDA_SUCCESS) dptr = params.dptr;
  }
  const CUresult rc = real(node);
  if (rc == CUDA_SUCCESS && dptr != 0) graphForgetNode(dptr);
  TESSERA_TRACE("cuGraphDestroyNode(%p) = %d", static_cast<void*>(node), rc);
  return rc;
}

CUresult cuGraphDestroy(CUgraph graph) {
  TESSERA_REQUIRE_REAL(cuGraphDestroy);
  graphAdopt(graph, graph);  // captured allocations the graph holds, read while it exists
  const CUresult rc = real(graph);
  if (rc == CUDA_SUCCESS) graphForget(graph);
  TESSERA_TRACE("cuGraphDestroy(%p) = %d", static_cast<void*>(graph), rc);
  return rc;
}

CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* errorNode, char* log, std::size_t size) {
  TESSERA_REQUIRE_REAL(cuGraphInstantiate);
  return instantiated("cuGraphInstantiate", real(exec, graph, errorNode, log, size), exec, graph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* errorNode, char* log, std::size_t size) {
  TESSERA_REQUIRE_REAL(cuGraphInstantiate_v2);
  return instantiated("cuGraphInstantiate_v2", real(exec, graph, errorNode, log, size), exec, graph);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  TESSERA_REQUIRE_REAL(cuGraphInstantiateWithFlags);
  return instantiated("cuGraphInstantiateWithFlags", real(exec, graph, flags), exec, graph);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  TESSERA_REQUIRE_REAL(cuGraphInstantiateWithParams);
  return instantiated("cuGraphInstantiateWithParams", real(exec, graph, params), exec, graph);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  TESSERA_REQUIRE_REAL(cuGraphInstantiateWithParams_ptsz);
  return instantiated("cuGraphInstantiateWithParams_ptsz", real(exec, graph, params), exec, graph);
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  TESSERA_REQUIRE_REAL(cuGraphExecDestroy);
  const CUresult rc = real(exec);
  if (rc == CUDA_SUCCESS) graphForget(exec);
  TESSERA_TRACE("cuGraphExecDestroy(%p) = %d", static_cast<void*>(exec), rc);
  return rc;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  TESSERA_REQUIRE_REAL(cuGraphLaunch);
  return chargedLaunch("cuGraphLaunch", exec, [&] { return real(exec, stream); });
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  TESSERA_REQUIRE_REAL(cuGraphLaunch_ptsz);
  return chargedLaunch("cuGraphLaunch_ptsz", exec, [&] { return real(exec, stream); });
}
