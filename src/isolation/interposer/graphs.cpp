// Graph memory-node records (see graphs.h). Plain C storage (malloc/realloc): the interposer has
// no libstdc++ at run time.

#include "graphs.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>

#include "glibc_compat.h"
#include "hooks.h"
#include "runtime.h"

namespace tessera::interposer {

namespace {

struct Record {
  const void* owner;
  cu::CUdeviceptr dptr;
  std::uint64_t bytes;
  int device;
  bool exec;           ///< owner is a CUgraphExec (else a CUgraph)
  bool launchCharged;  ///< charged by the graphChargeLaunch call in progress
};

constinit pthread_mutex_t gGraphMutex = PTHREAD_MUTEX_INITIALIZER;
constinit Record* gRecords = nullptr;
constinit std::size_t gCount = 0;
constinit std::size_t gCapacity = 0;
constinit std::atomic<std::size_t> gPublished{0};  // gCount, readable without the mutex

using cuGraphGetNodes_t = cu::CUresult (*)(cu::CUgraph, cu::CUgraphNode*, std::size_t*);
using cuGraphNodeGetType_t = cu::CUresult (*)(cu::CUgraphNode, int*);
using cuGraphMemAllocNodeGetParams_t = cu::CUresult (*)(cu::CUgraphNode, cu::CUDA_MEM_ALLOC_NODE_PARAMS*);

// Credits `dptr` if it is charged as a graph allocation (never an ordinary allocation that the
// driver may have placed at an address a destroyed graph used before).
void uncharge(cu::CUdeviceptr dptr) {
  const std::uint64_t packed = devicePointers().find(dptr);
  if (packed == 0 || (packed & kGraphCharge) == 0) return;
  const std::uint64_t removed = devicePointers().remove(dptr);
  if (removed != 0) credit(chargeDevice(removed), chargeBytes(removed));
}

// Adds a record unless (owner, dptr) is known. Requires gGraphMutex.
void addLocked(const void* owner, bool exec, cu::CUdeviceptr dptr, std::uint64_t bytes, int device) {
  for (std::size_t i = 0; i < gCount; ++i) {
    if (gRecords[i].owner == owner && gRecords[i].dptr == dptr) return;
  }
  if (gCount == gCapacity) {
    const std::size_t capacity = gCapacity == 0 ? 64 : gCapacity * 2;
    auto* grown = static_cast<Record*>(std::realloc(gRecords, capacity * sizeof(Record)));
    if (grown == nullptr) {
      // Without a record the address stays charged until an explicit free: the safe side.
      logError("out of memory recording a graph allocation; it stays charged until freed");
      return;
    }
    gRecords = grown;
    gCapacity = capacity;
  }
  gRecords[gCount++] = Record{owner, dptr, bytes, device, exec, false};
  gPublished.store(gCount, std::memory_order_release);
}

// Removes the records matching `match` and credits each of their addresses that no remaining
// record holds. Requires gGraphMutex.
template <class Match>
void forgetLocked(Match&& match) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < gCount; ++i) {
    if (match(gRecords[i])) continue;
    const Record keep = gRecords[i];
    gRecords[i] = gRecords[kept];
    gRecords[kept++] = keep;
  }
  // [kept, gCount) are the removed records.
  for (std::size_t i = kept; i < gCount; ++i) {
    bool held = false;
    for (std::size_t j = 0; j < kept && !held; ++j) held = gRecords[j].dptr == gRecords[i].dptr;
    if (!held) uncharge(gRecords[i].dptr);
  }
  gCount = kept;
  gPublished.store(gCount, std::memory_order_release);
}

}  // namespace

bool graphRecordsExist() { return gPublished.load(std::memory_order_acquire) != 0; }

void graphRecordNode(cu::CUgraph graph, cu::CUdeviceptr dptr, std::uint64_t bytes, int device) {
  pthread_mutex_lock(&gGraphMutex);
  addLocked(graph, false, dptr, bytes, device);
  pthread_mutex_unlock(&gGraphMutex);
}

void graphAdopt(cu::CUgraph graph, const void* owner) {
  auto getNodes = reinterpret_cast<cuGraphGetNodes_t>(realFn(Sym::cuGraphGetNodes));
  auto nodeType = reinterpret_cast<cuGraphNodeGetType_t>(realFn(Sym::cuGraphNodeGetType));
  auto allocParams = reinterpret_cast<cuGraphMemAllocNodeGetParams_t>(realFn(Sym::cuGraphMemAllocNodeGetParams));
  if (getNodes == nullptr || nodeType == nullptr || allocParams == nullptr) return;
  std::size_t count = 0;
  if (getNodes(graph, nullptr, &count) != cu::CUDA_SUCCESS || count == 0) return;
  auto* nodes = static_cast<cu::CUgraphNode*>(std::malloc(count * sizeof(cu::CUgraphNode)));
  if (nodes == nullptr) return;
  if (getNodes(graph, nodes, &count) == cu::CUDA_SUCCESS) {
    for (std::size_t i = 0; i < count; ++i) {
      int type = -1;
      cu::CUDA_MEM_ALLOC_NODE_PARAMS params{};
      if (nodeType(nodes[i], &type) != cu::CUDA_SUCCESS || type != cu::CU_GRAPH_NODE_TYPE_MEM_ALLOC) continue;
      if (allocParams(nodes[i], &params) != cu::CUDA_SUCCESS || params.bytesize == 0) continue;
      // A captured allocation is tracked as an ordinary one: mark it as the graph's.
      std::uint64_t packed = devicePointers().find(params.dptr);
      int device = packed != 0 ? chargeDevice(packed) : -1;
      if (packed != 0 && (packed & kGraphCharge) == 0 && devicePointers().remove(params.dptr) == packed &&
          !devicePointers().insert(params.dptr, packed | kGraphCharge)) {
        credit(device, chargeBytes(packed));  // cannot happen: the slot was just freed
      }
      if (device < 0) {
        const cu::CUresult found = params.poolProps.location.type == cu::CU_MEM_LOCATION_TYPE_DEVICE
                                       ? deviceIndex(params.poolProps.location.id, &device)
                                       : currentDevice(&device);
        if (found != cu::CUDA_SUCCESS) continue;
      }
      pthread_mutex_lock(&gGraphMutex);
      addLocked(owner, owner != graph, params.dptr, params.bytesize, device);
      pthread_mutex_unlock(&gGraphMutex);
    }
  }
  std::free(nodes);
}

void graphForget(const void* owner) {
  pthread_mutex_lock(&gGraphMutex);
  forgetLocked([&](const Record& r) { return r.owner == owner; });
  pthread_mutex_unlock(&gGraphMutex);
}

void graphForgetNode(cu::CUdeviceptr dptr) {
  pthread_mutex_lock(&gGraphMutex);
  forgetLocked([&](const Record& r) { return !r.exec && r.dptr == dptr; });
  pthread_mutex_unlock(&gGraphMutex);
}

cu::CUresult graphChargeLaunch(cu::CUgraphExec exec, const char* api) {
  pthread_mutex_lock(&gGraphMutex);
  cu::CUresult rc = cu::CUDA_SUCCESS;
  for (std::size_t i = 0; i < gCount && rc == cu::CUDA_SUCCESS; ++i) {
    Record& r = gRecords[i];
    if (r.owner != exec || devicePointers().find(r.dptr) != 0) continue;  // still charged
    if ((rc = charge(r.device, r.bytes, api)) != cu::CUDA_SUCCESS) break;
    if (!track(devicePointers(), r.dptr, packCharge(r.bytes, r.device) | kGraphCharge)) {
      credit(r.device, r.bytes);
      rc = cu::CUDA_ERROR_OUT_OF_MEMORY;
      break;
    }
    r.launchCharged = true;
  }
  for (std::size_t i = 0; i < gCount; ++i) {
    if (!gRecords[i].launchCharged) continue;
    gRecords[i].launchCharged = false;
    if (rc != cu::CUDA_SUCCESS) uncharge(gRecords[i].dptr);  // refused: the launch does not happen
  }
  pthread_mutex_unlock(&gGraphMutex);
  return rc;
}

}  // namespace tessera::interposer
