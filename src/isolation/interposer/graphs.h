#pragma once
/// Accounting of CUDA graph memory nodes (docs/isolation.md, "Graphs").
///
/// A memory-allocation node fixes its address when it is created, and the driver backs it with
/// memory each time an instantiated graph (CUgraphExec) that contains it is launched. The bytes are
/// charged from the node's creation (or, for graphs built by stream capture, from the capture's
/// cuMemAllocAsync) and stay charged while a graph or an executable graph that contains the node
/// exists, whatever the frees inside the graph do (the driver's graph pool keeps that memory). An
/// explicit cuMemFree of the address credits it; a later launch charges it again, or is refused
/// with CUDA_ERROR_OUT_OF_MEMORY when it no longer fits. Destroying the last graph or executable
/// graph (or the node) that holds an address credits it.
///
/// Records: (owner = CUgraph or CUgraphExec, address, bytes, device) in a small array behind a
/// mutex: graph calls are rare next to allocations, and launches look only when records exist.

#include <cstdint>

#include "cuda_abi.h"

namespace tessera::interposer {

/// Records that `graph` holds the allocation node at `dptr` (charged by the caller and tracked in
/// devicePointers() with kGraphCharge).
void graphRecordNode(cu::CUgraph graph, cu::CUdeviceptr dptr, std::uint64_t bytes, int device);

/// Reads `graph`'s memory-allocation nodes from the driver (cuGraphGetNodes, cuGraphNodeGetType,
/// cuGraphMemAllocNodeGetParams) and records them under `owner` (the graph itself, or an
/// executable graph instantiated from it). Allocations made by stream capture become graph
/// allocations here. No-op when the driver lacks those functions.
void graphAdopt(cu::CUgraph graph, const void* owner);

/// Forgets everything `owner` holds; credits each address no other graph or executable graph holds.
void graphForget(const void* owner);

/// Forgets graph (not executable-graph) records of `dptr` after cuGraphDestroyNode; credits the
/// address when no executable graph holds it.
void graphForgetNode(cu::CUdeviceptr dptr);

/// Before launching `exec`: charges every address it holds that is not charged now (freed since).
/// On CUDA_ERROR_OUT_OF_MEMORY nothing this call charged stays charged and the launch must not
/// happen. (When the driver itself then fails the launch, the charges stay until the graph goes:
/// the safe side.)
cu::CUresult graphChargeLaunch(cu::CUgraphExec exec, const char* api);

/// True when any graph record exists (cheap: launches skip everything otherwise).
bool graphRecordsExist();

}  // namespace tessera::interposer
