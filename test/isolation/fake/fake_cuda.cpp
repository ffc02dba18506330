// A fake libcuda.so.1 for tests and the benchmark: two devices with fixed memory, allocations
// that only move counters, and the driver's own usage and high-water mark recorded in shared
// state (fake_state.h). It implements the slice of the driver API the interposer touches, plus
// cuGetProcAddress(_v2) with the real driver's version and per-thread-stream rules.

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_abi.h"
#include "fake_state.h"

using namespace tessera::cu;  // NOLINT
namespace fake = tessera::fake;

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

struct Allocation {
  std::uint64_t bytes;
  int device;
  bool graph = false;  ///< a graph memory node's address: reserved for the graph's life, never reused
};

// Graph objects: nodes in a graph, and the allocation nodes an executable graph was made from.
struct FakeNode {
  int type;
  CUDA_MEM_ALLOC_NODE_PARAMS alloc;
  struct FakeGraph* graph;
};
struct FakeGraph {
  std::vector<FakeNode*> nodes;
};
struct FakeExec {
  std::vector<std::pair<std::uint64_t, Allocation>> allocs;
};

struct Driver {
  fake::State* state = nullptr;
  std::uint64_t memory = 0;
  std::uint64_t pitchAlignment = 512;
  std::mutex mutex;
  std::unordered_map<std::uint64_t, Allocation> pointers;  // device pointers and handles
  std::vector<std::uint64_t> freeAddresses;                 // reused LIFO, as a driver's VA allocator would
  std::atomic<std::uint64_t> nextAddress{0x7f0000000000ULL};
  std::atomic<std::uint32_t> nextAddressV1{0x10000000U};
  std::atomic<std::uint64_t> nextHandle{1};
  std::atomic<bool> initialized{false};
  std::unordered_map<std::uint64_t, int> graphHolders;  // graph address -> graphs and execs holding it
  bool contextCreated[fake::kDevices] = {};
};

Driver& driver() {
  static Driver* d = [] {
    auto* drv = new Driver;
    drv->state = fake::mapState(std::getenv("FAKE_CUDA_STATE"));
    drv->memory = fake::deviceMemory();
    if (const char* a = std::getenv("FAKE_CUDA_PITCH_ALIGN")) drv->pitchAlignment = std::strtoull(a, nullptr, 10);
    return drv;
  }();
  return *d;
}

thread_local int tCurrentDevice = -1;

void count(fake::Call call) { driver().state->calls[static_cast<int>(call)].fetch_add(1, std::memory_order_relaxed); }

int currentDevice() { return tCurrentDevice >= 0 ? tCurrentDevice : 0; }

// What this process uses per device (NVML's per-process list).
fake::ProcessState* self() {
  static fake::ProcessState* p = fake::processEntry(driver().state, static_cast<int>(getpid()));
  return p;
}

// Takes `bytes` of device memory, recording the high-water mark; fails when the device is full.
bool take(int device, std::uint64_t bytes) {
  fake::DeviceState& dev = driver().state->devices[device];
  std::uint64_t used = dev.used.load();
  do {
    if (used + bytes > driver().memory) return false;
  } while (!dev.used.compare_exchange_weak(used, used + bytes));
  std::uint64_t now = used + bytes;
  std::uint64_t high = dev.highWater.load();
  while (now > high && !dev.highWater.compare_exchange_weak(high, now)) {
  }
  if (fake::ProcessState* p = self()) p->used[device].fetch_add(bytes);
  return true;
}

void give(int device, std::uint64_t bytes) {
  driver().state->devices[device].used.fetch_sub(bytes);
  if (fake::ProcessState* p = self()) p->used[device].fetch_sub(bytes);
}

CUresult allocate(unsigned long long* key, std::uint64_t bytes, int device, bool v1 = false) {
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!take(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(driver().mutex);
  std::uint64_t address = 0;
  if (!v1 && !driver().freeAddresses.empty()) {
    address = driver().freeAddresses.back();
    driver().freeAddresses.pop_back();
  } else {
    address = v1 ? driver().nextAddressV1.fetch_add(1U << 12) : driver().nextAddress.fetch_add(std::uint64_t{1} << 21);
  }
  driver().pointers[address] = Allocation{bytes, device};
  *key = address;
  return CUDA_SUCCESS;
}

CUresult allocateHandle(unsigned long long* key, std::uint64_t bytes, int device) {
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!take(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::uint64_t handle = driver().nextHandle.fetch_add(1);
  std::lock_guard<std::mutex> lock(driver().mutex);
  driver().pointers[handle] = Allocation{bytes, device};
  *key = handle;
  return CUDA_SUCCESS;
}

CUresult release(std::uint64_t key) {
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(driver().mutex);
    auto it = driver().pointers.find(key);
    if (it == driver().pointers.end()) return CUDA_ERROR_INVALID_VALUE;
    a = it->second;
    driver().pointers.erase(it);
    if (key >= 0x7f0000000000ULL && !a.graph) driver().freeAddresses.push_back(key);
  }
  give(a.device, a.bytes);
  return CUDA_SUCCESS;
}

std::uint64_t elementBytes(CUarray_format format, unsigned channels) {
  std::uint64_t c = channels == 0 ? 1 : channels;
  switch (format) {
    case 0x01: case 0x08: return c;
    case 0x02: case 0x09: case 0x10: return 2 * c;
    default: return 4 * c;
  }
}

// The fake lays arrays out in 2 MiB pages, so its requirement exceeds the interposer's estimate.
std::uint64_t arrayFootprint(std::uint64_t w, std::uint64_t h, std::uint64_t d, CUarray_format f, unsigned ch) {
  std::uint64_t row = (w * elementBytes(f, ch) + 511) / 512 * 512;
  std::uint64_t bytes = row * (h ? h : 1) * (d ? d : 1);
  return (bytes + (2ULL << 20) - 1) / (2ULL << 20) * (2ULL << 20);
}

struct FakeArray {
  std::uint64_t bytes;
  int device;
};

CUresult createArray(void** out, std::uint64_t bytes) {
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  int device = currentDevice();
  if (!take(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = new FakeArray{bytes, device};
  return CUDA_SUCCESS;
}

CUresult destroyArray(void* array) {
  if (array == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* a = static_cast<FakeArray*>(array);
  give(a->device, a->bytes);
  delete a;
  return CUDA_SUCCESS;
}

CUresult addNode(CUgraph g, int type, CUDA_MEM_ALLOC_NODE_PARAMS* p, CUgraphNode* node) {
  if (g == nullptr || node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* graph = reinterpret_cast<FakeGraph*>(g);
  auto* n = new FakeNode{type, {}, graph};
  if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    if (p == nullptr) {
      delete n;
      return CUDA_ERROR_INVALID_VALUE;
    }
    int device = p->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p->poolProps.location.id : currentDevice();
    unsigned long long key = 0;
    // Simplification: memory is taken when the node is made (a real driver takes it at launch).
    CUresult rc = allocate(&key, p->bytesize, device);
    if (rc != CUDA_SUCCESS) {
      delete n;
      return rc;
    }
    std::lock_guard<std::mutex> lock(driver().mutex);
    driver().pointers[key].graph = true;
    driver().graphHolders[key] = 1;
    p->dptr = key;
    n->alloc = *p;
  }
  std::lock_guard<std::mutex> lock(driver().mutex);
  graph->nodes.push_back(n);
  *node = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}

// One holder (graph node or executable graph) lets go of a graph address; the last one frees it.
void dropGraphAddress(std::uint64_t dptr) {
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(driver().mutex);
    auto holders = driver().graphHolders.find(dptr);
    if (holders == driver().graphHolders.end() || --holders->second > 0) return;
    driver().graphHolders.erase(holders);
    auto it = driver().pointers.find(dptr);
    if (it == driver().pointers.end()) return;  // freed explicitly, not launched since
    a = it->second;
    driver().pointers.erase(it);
  }
  give(a.device, a.bytes);
}

void destroyNode(FakeNode* n) {
  if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) dropGraphAddress(n->alloc.dptr);
  delete n;
}

CUresult instantiate(CUgraphExec* exec, CUgraph g) {
  if (exec == nullptr || g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new FakeExec;
  std::lock_guard<std::mutex> lock(driver().mutex);
  for (FakeNode* n : reinterpret_cast<FakeGraph*>(g)->nodes) {
    if (n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) continue;
    ++driver().graphHolders[n->alloc.dptr];
    const int device = n->alloc.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? n->alloc.poolProps.location.id
                                                                                       : currentDevice();
    e->allocs.push_back({n->alloc.dptr, Allocation{n->alloc.bytesize, device, true}});
  }
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

// A launch backs every allocation node whose memory was freed since with memory again.
CUresult launch(CUgraphExec exec) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [dptr, a] : reinterpret_cast<FakeExec*>(exec)->allocs) {
    {
      std::lock_guard<std::mutex> lock(driver().mutex);
      if (driver().pointers.count(dptr) != 0) continue;
    }
    if (!take(a.device, a.bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> lock(driver().mutex);
    driver().pointers[dptr] = a;
  }
  return CUDA_SUCCESS;
}

}  // namespace

// ---- init, devices, contexts ---------------------------------------------------------------------

FAKE_API CUresult cuInit(unsigned int) {
  driver().initialized = true;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 12080;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGetCount(int* n) {
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  // FAKE_CUDA_DEVICES=1: a container that sees one GPU (the usual fractional pod).
  const char* env = std::getenv("FAKE_CUDA_DEVICES");
  *n = env != nullptr && std::atoi(env) >= 1 && std::atoi(env) <= fake::kDevices ? std::atoi(env) : fake::kDevices;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (!d || ordinal < 0 || ordinal >= fake::kDevices) return CUDA_ERROR_INVALID_VALUE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice d) {
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!uuid || d < 0 || d >= fake::kDevices) return CUDA_ERROR_INVALID_VALUE;
  fake::deviceUuid(d, reinterpret_cast<unsigned char*>(uuid->bytes));
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice d) { return cuDeviceGetUuid(uuid, d); }
FAKE_API CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  if (!name || len < 16) return CUDA_ERROR_INVALID_VALUE;
  std::strncpy(name, d == 0 ? "Fake GPU 0" : "Fake GPU 1", static_cast<std::size_t>(len));
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  if (!ctx || d < 0 || d >= fake::kDevices) return CUDA_ERROR_INVALID_VALUE;
  // The first context of this process on the device takes FAKE_CUDA_CONTEXT_BYTES, as a real one
  // takes hundreds of MiB the interposer never sees allocated.
  const std::uint64_t context = fake::contextBytes();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(driver().mutex);
    first = !driver().contextCreated[d];
    driver().contextCreated[d] = true;
  }
  if (first && context > 0 && !take(d, context)) return CUDA_ERROR_OUT_OF_MEMORY;
  *ctx = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(d + 1));
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  tCurrentDevice = static_cast<int>(reinterpret_cast<std::uintptr_t>(ctx)) - 1;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuCtxGetDevice(CUdevice* d) {
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  *d = currentDevice();
  return CUDA_SUCCESS;
}

// ---- linear memory -----------------------------------------------------------------------------

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr* p, std::size_t bytes) {
  count(fake::Call::cuMemAlloc_v2);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return allocate(p, bytes, currentDevice());
}
FAKE_API CUresult cuMemAlloc(CUdeviceptrV1* p, unsigned int bytes) {
  count(fake::Call::cuMemAlloc);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long key = 0;
  CUresult rc = allocate(&key, bytes, currentDevice(), true);
  if (rc == CUDA_SUCCESS) *p = static_cast<CUdeviceptrV1>(key);
  return rc;
}
FAKE_API CUresult cuMemAllocManaged(CUdeviceptr* p, std::size_t bytes, unsigned int) {
  count(fake::Call::cuMemAllocManaged);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return allocate(p, bytes, currentDevice());
}
FAKE_API CUresult cuMemAllocPitch_v2(CUdeviceptr* p, std::size_t* pitch, std::size_t w, std::size_t h, unsigned) {
  count(fake::Call::cuMemAllocPitch_v2);
  if (!p || !pitch || w == 0 || h == 0) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t align = driver().pitchAlignment;
  std::uint64_t real = (w + align - 1) / align * align;
  CUresult rc = allocate(p, real * h, currentDevice());
  if (rc == CUDA_SUCCESS) *pitch = real;
  return rc;
}
FAKE_API CUresult cuMemAllocPitch(CUdeviceptrV1* p, unsigned* pitch, unsigned w, unsigned h, unsigned) {
  if (!p || !pitch || w == 0 || h == 0) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t align = driver().pitchAlignment;
  std::uint64_t real = (w + align - 1) / align * align;
  unsigned long long key = 0;
  CUresult rc = allocate(&key, real * h, currentDevice(), true);
  if (rc == CUDA_SUCCESS) {
    *p = static_cast<CUdeviceptrV1>(key);
    *pitch = static_cast<unsigned>(real);
  }
  return rc;
}
FAKE_API CUresult cuMemFree_v2(CUdeviceptr p) {
  count(fake::Call::cuMemFree_v2);
  return release(p);
}
FAKE_API CUresult cuMemFree(CUdeviceptrV1 p) {
  count(fake::Call::cuMemFree);
  return release(p);
}

#define FAKE_ASYNC(name)                                                              \
  FAKE_API CUresult name(CUdeviceptr* p, std::size_t bytes, CUstream) {               \
    count(fake::Call::name);                                                          \
    if (!p) return CUDA_ERROR_INVALID_VALUE;                                          \
    return allocate(p, bytes, currentDevice());                                       \
  }
FAKE_ASYNC(cuMemAllocAsync)
FAKE_ASYNC(cuMemAllocAsync_ptsz)
#define FAKE_POOL(name)                                                               \
  FAKE_API CUresult name(CUdeviceptr* p, std::size_t bytes, CUmemoryPool, CUstream) { \
    count(fake::Call::name);                                                          \
    if (!p) return CUDA_ERROR_INVALID_VALUE;                                          \
    return allocate(p, bytes, currentDevice());                                       \
  }
FAKE_POOL(cuMemAllocFromPoolAsync)
FAKE_POOL(cuMemAllocFromPoolAsync_ptsz)
#define FAKE_FREE_ASYNC(name)                          \
  FAKE_API CUresult name(CUdeviceptr p, CUstream) {    \
    count(fake::Call::name);                           \
    return release(p);                                 \
  }
FAKE_FREE_ASYNC(cuMemFreeAsync)
FAKE_FREE_ASYNC(cuMemFreeAsync_ptsz)

FAKE_API CUresult cuMemCreate(CUmemGenericAllocationHandle* h, std::size_t size, const CUmemAllocationProp* prop,
                              unsigned long long) {
  count(fake::Call::cuMemCreate);
  if (!h || !prop || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    *h = driver().nextHandle.fetch_add(1) | (1ULL << 40);  // host memory: not device usage
    return CUDA_SUCCESS;
  }
  return allocateHandle(h, size, prop->location.id);
}
FAKE_API CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  count(fake::Call::cuMemRelease);
  if (h & (1ULL << 40)) return CUDA_SUCCESS;
  return release(h);
}

// ---- arrays --------------------------------------------------------------------------------------

FAKE_API CUresult cuArrayCreate_v2(CUarray* a, const CUDA_ARRAY_DESCRIPTOR* d) {
  count(fake::Call::cuArrayCreate_v2);
  if (!a || !d) return CUDA_ERROR_INVALID_VALUE;
  return createArray(reinterpret_cast<void**>(a), arrayFootprint(d->Width, d->Height, 1, d->Format, d->NumChannels));
}
FAKE_API CUresult cuArrayCreate(CUarray* a, const CUDA_ARRAY_DESCRIPTOR_V1* d) {
  if (!a || !d) return CUDA_ERROR_INVALID_VALUE;
  return createArray(reinterpret_cast<void**>(a), arrayFootprint(d->Width, d->Height, 1, d->Format, d->NumChannels));
}
FAKE_API CUresult cuArray3DCreate_v2(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  count(fake::Call::cuArray3DCreate_v2);
  if (!a || !d) return CUDA_ERROR_INVALID_VALUE;
  return createArray(reinterpret_cast<void**>(a),
                     arrayFootprint(d->Width, d->Height, d->Depth, d->Format, d->NumChannels));
}
FAKE_API CUresult cuArray3DCreate(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR_V1* d) {
  if (!a || !d) return CUDA_ERROR_INVALID_VALUE;
  return createArray(reinterpret_cast<void**>(a),
                     arrayFootprint(d->Width, d->Height, d->Depth, d->Format, d->NumChannels));
}
FAKE_API CUresult cuArrayDestroy(CUarray a) { return destroyArray(a); }
FAKE_API CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* r, CUarray a, CUdevice) {
  if (!r || !a) return CUDA_ERROR_INVALID_VALUE;
  r->size = reinterpret_cast<FakeArray*>(a)->bytes;
  r->alignment = 2ULL << 20;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuMipmappedArrayCreate(CUmipmappedArray* a, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
  count(fake::Call::cuMipmappedArrayCreate);
  if (!a || !d || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t total = 0;
  for (unsigned l = 0; l < levels; ++l) {
    std::uint64_t w = d->Width >> l, h = d->Height >> l, z = d->Depth >> l;
    total += arrayFootprint(w ? w : 1, d->Height ? (h ? h : 1) : 0, d->Depth ? (z ? z : 1) : 0, d->Format,
                            d->NumChannels);
  }
  return createArray(reinterpret_cast<void**>(a), total);
}
FAKE_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) { return destroyArray(a); }
FAKE_API CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* r, CUmipmappedArray a,
                                                        CUdevice) {
  if (!r || !a) return CUDA_ERROR_INVALID_VALUE;
  r->size = reinterpret_cast<FakeArray*>(a)->bytes;
  r->alignment = 2ULL << 20;
  return CUDA_SUCCESS;
}

// ---- graphs --------------------------------------------------------------------------------------

FAKE_API CUresult cuGraphCreate(CUgraph* g, unsigned int) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  *g = reinterpret_cast<CUgraph>(new FakeGraph);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphDestroy(CUgraph g) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  auto* graph = reinterpret_cast<FakeGraph*>(g);
  for (FakeNode* n : graph->nodes) destroyNode(n);
  delete graph;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph g, const CUgraphNode*, std::size_t,
                                         CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  count(fake::Call::cuGraphAddMemAllocNode);
  return addNode(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, p, node);
}
FAKE_API CUresult cuGraphAddNode(CUgraphNode* node, CUgraph g, const CUgraphNode*, std::size_t, CUgraphNodeParams* p) {
  count(fake::Call::cuGraphAddNode);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addNode(g, p->type, &p->alloc, node);
}
FAKE_API CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph g, const CUgraphNode*, const CUgraphEdgeData*,
                                    std::size_t, CUgraphNodeParams* p) {
  count(fake::Call::cuGraphAddNode_v2);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return addNode(g, p->type, &p->alloc, node);
}
FAKE_API CUresult cuGraphDestroyNode(CUgraphNode node) {
  if (!node) return CUDA_ERROR_INVALID_VALUE;
  auto* n = reinterpret_cast<FakeNode*>(node);
  {
    std::lock_guard<std::mutex> lock(driver().mutex);
    auto& nodes = n->graph->nodes;
    nodes.erase(std::remove(nodes.begin(), nodes.end(), n), nodes.end());
  }
  destroyNode(n);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, std::size_t* count) {
  if (!g || !count) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(driver().mutex);
  const auto& all = reinterpret_cast<FakeGraph*>(g)->nodes;
  if (nodes == nullptr) {
    *count = all.size();
    return CUDA_SUCCESS;
  }
  const std::size_t n = std::min(*count, all.size());
  for (std::size_t i = 0; i < *count; ++i) nodes[i] = i < n ? reinterpret_cast<CUgraphNode>(all[i]) : nullptr;
  *count = n;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphNodeGetType(CUgraphNode node, int* type) {
  if (!node || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = reinterpret_cast<FakeNode*>(node)->type;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  if (!node || !out) return CUDA_ERROR_INVALID_VALUE;
  auto* n = reinterpret_cast<FakeNode*>(node);
  if (n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_INVALID_VALUE;
  *out = n->alloc;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph g, unsigned long long) {
  return instantiate(exec, g);
}
FAKE_API CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph g, CUgraphNode*, char*, std::size_t) {
  return instantiate(exec, g);
}
FAKE_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (!exec) return CUDA_ERROR_INVALID_VALUE;
  auto* e = reinterpret_cast<FakeExec*>(exec);
  for (auto& entry : e->allocs) dropGraphAddress(entry.first);
  delete e;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream) {
  count(fake::Call::cuGraphLaunch);
  return launch(exec);
}
FAKE_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream) {
  count(fake::Call::cuGraphLaunch_ptsz);
  return launch(exec);
}

// ---- queries -------------------------------------------------------------------------------------

FAKE_API CUresult cuMemGetInfo_v2(std::size_t* freeOut, std::size_t* totalOut) {
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!freeOut || !totalOut) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t used = driver().state->devices[currentDevice()].used.load();
  *totalOut = driver().memory;
  *freeOut = used >= driver().memory ? 0 : driver().memory - used;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuMemGetInfo(unsigned* freeOut, unsigned* totalOut) {
  std::size_t f = 0, t = 0;
  CUresult rc = cuMemGetInfo_v2(freeOut ? &f : nullptr, totalOut ? &t : nullptr);
  if (rc != CUDA_SUCCESS) return rc;
  *freeOut = f > 0xffffffffULL ? 0xffffffffU : static_cast<unsigned>(f);
  *totalOut = t > 0xffffffffULL ? 0xffffffffU : static_cast<unsigned>(t);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice d) {
  if (!bytes || d < 0 || d >= fake::kDevices) return CUDA_ERROR_INVALID_VALUE;
  *bytes = driver().memory;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceTotalMem(unsigned* bytes, CUdevice d) {
  if (!bytes || d < 0 || d >= fake::kDevices) return CUDA_ERROR_INVALID_VALUE;
  *bytes = driver().memory > 0xffffffffULL ? 0xffffffffU : static_cast<unsigned>(driver().memory);
  return CUDA_SUCCESS;
}

// ---- kernel launches ------------------------------------------------------------------------------
// The device runs one kernel at a time, first launched first run: a launch reserves the next
// blocks x FAKE_CUDA_NS_PER_BLOCK ns after whatever the device already has queued, records the
// interval for NVML (fake_nvml.cpp computes utilization from it), and returns when its kernel has
// finished, like a launch followed by a stream synchronize. So processes that launch at the same
// time share the device in proportion to how much they launch, and one that is held back leaves
// the device to the others.

namespace {
std::uint64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

CUresult launch(fake::Call call, std::uint64_t blocks) {
  count(call);
  if (!driver().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  const int device = currentDevice();
  fake::ProcessState* p = self();
  if (p != nullptr) p->launches.fetch_add(1);
  const std::uint64_t ns = blocks * fake::nsPerBlock();
  if (ns == 0 || p == nullptr) return CUDA_SUCCESS;
  std::atomic<std::uint64_t>& busyUntil = driver().state->devices[device].busyUntil;
  const std::uint64_t now = monotonicNs();
  std::uint64_t queued = busyUntil.load(), start = 0, end = 0;
  do {
    start = queued > now ? queued : now;
    end = start + ns;
  } while (!busyUntil.compare_exchange_weak(queued, end));
  fake::BusyInterval& slot = p->intervals[p->nextInterval.fetch_add(1) % fake::kIntervals];
  slot.device.store(device);
  slot.end.store(0);  // readers skip it while it is rewritten
  slot.start.store(start);
  slot.end.store(end);
  p->busyNs[device].fetch_add(ns);
  timespec until{static_cast<time_t>(end / 1000000000ULL), static_cast<long>(end % 1000000000ULL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
  return CUDA_SUCCESS;
}
}  // namespace

FAKE_API CUresult cuLaunchKernel(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned, unsigned, unsigned,
                                 unsigned, CUstream, void**, void**) {
  return launch(fake::Call::cuLaunchKernel, std::uint64_t{gx} * gy * gz);
}
FAKE_API CUresult cuLaunchKernel_ptsz(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned, unsigned, unsigned,
                                      unsigned, CUstream, void**, void**) {
  return launch(fake::Call::cuLaunchKernel_ptsz, std::uint64_t{gx} * gy * gz);
}
FAKE_API CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction, void**, void**) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return launch(fake::Call::cuLaunchKernelEx, std::uint64_t{c->gridDimX} * c->gridDimY * c->gridDimZ);
}
FAKE_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction, void**, void**) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return launch(fake::Call::cuLaunchKernelEx_ptsz, std::uint64_t{c->gridDimX} * c->gridDimY * c->gridDimZ);
}
FAKE_API CUresult cuLaunchCooperativeKernel(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned, unsigned,
                                            unsigned, unsigned, CUstream, void**) {
  return launch(fake::Call::cuLaunchCooperativeKernel, std::uint64_t{gx} * gy * gz);
}
FAKE_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned,
                                                 unsigned, unsigned, unsigned, CUstream, void**) {
  return launch(fake::Call::cuLaunchCooperativeKernel_ptsz, std::uint64_t{gx} * gy * gz);
}

// ---- cuGetProcAddress ----------------------------------------------------------------------------

FAKE_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult* status);
FAKE_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);

namespace {
struct ProcVariant {
  const char* symbol;
  int version;
  void* fn;
  void* perThread;
};

#define FN(x) reinterpret_cast<void*>(&x)
const ProcVariant kProcs[] = {
    {"cuInit", 2000, FN(cuInit), nullptr},
    {"cuDriverGetVersion", 2020, FN(cuDriverGetVersion), nullptr},
    {"cuDeviceGet", 2000, FN(cuDeviceGet), nullptr},
    {"cuDeviceGetCount", 2000, FN(cuDeviceGetCount), nullptr},
    {"cuDeviceGetName", 2000, FN(cuDeviceGetName), nullptr},
    {"cuDeviceGetUuid", 9020, FN(cuDeviceGetUuid), nullptr},
    {"cuDeviceGetUuid", 11040, FN(cuDeviceGetUuid_v2), nullptr},
    {"cuDevicePrimaryCtxRetain", 7000, FN(cuDevicePrimaryCtxRetain), nullptr},
    {"cuCtxSetCurrent", 4000, FN(cuCtxSetCurrent), nullptr},
    {"cuCtxGetDevice", 2000, FN(cuCtxGetDevice), nullptr},
    {"cuMemAlloc", 2000, FN(cuMemAlloc), nullptr},
    {"cuMemAlloc", 3020, FN(cuMemAlloc_v2), nullptr},
    {"cuMemAllocPitch", 2000, FN(cuMemAllocPitch), nullptr},
    {"cuMemAllocPitch", 3020, FN(cuMemAllocPitch_v2), nullptr},
    {"cuMemFree", 2000, FN(cuMemFree), nullptr},
    {"cuMemFree", 3020, FN(cuMemFree_v2), nullptr},
    {"cuMemAllocManaged", 6000, FN(cuMemAllocManaged), nullptr},
    {"cuMemAllocAsync", 11020, FN(cuMemAllocAsync), FN(cuMemAllocAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, FN(cuMemAllocFromPoolAsync), FN(cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemFreeAsync", 11020, FN(cuMemFreeAsync), FN(cuMemFreeAsync_ptsz)},
    {"cuMemCreate", 10020, FN(cuMemCreate), nullptr},
    {"cuMemRelease", 10020, FN(cuMemRelease), nullptr},
    {"cuArrayCreate", 2000, FN(cuArrayCreate), nullptr},
    {"cuArrayCreate", 3020, FN(cuArrayCreate_v2), nullptr},
    {"cuArray3DCreate", 2000, FN(cuArray3DCreate), nullptr},
    {"cuArray3DCreate", 3020, FN(cuArray3DCreate_v2), nullptr},
    {"cuArrayDestroy", 2000, FN(cuArrayDestroy), nullptr},
    {"cuMipmappedArrayCreate", 5000, FN(cuMipmappedArrayCreate), nullptr},
    {"cuMipmappedArrayDestroy", 5000, FN(cuMipmappedArrayDestroy), nullptr},
    {"cuGraphCreate", 10000, FN(cuGraphCreate), nullptr},
    {"cuGraphDestroy", 10000, FN(cuGraphDestroy), nullptr},
    {"cuGraphDestroyNode", 10000, FN(cuGraphDestroyNode), nullptr},
    {"cuGraphGetNodes", 10000, FN(cuGraphGetNodes), nullptr},
    {"cuGraphNodeGetType", 10000, FN(cuGraphNodeGetType), nullptr},
    {"cuGraphMemAllocNodeGetParams", 11040, FN(cuGraphMemAllocNodeGetParams), nullptr},
    {"cuGraphInstantiate", 10000, FN(cuGraphInstantiate), nullptr},
    {"cuGraphInstantiate", 12000, FN(cuGraphInstantiateWithFlags), nullptr},
    {"cuGraphInstantiateWithFlags", 11040, FN(cuGraphInstantiateWithFlags), nullptr},
    {"cuGraphExecDestroy", 10000, FN(cuGraphExecDestroy), nullptr},
    {"cuGraphLaunch", 10000, FN(cuGraphLaunch), FN(cuGraphLaunch_ptsz)},
    {"cuLaunchKernel", 4000, FN(cuLaunchKernel), FN(cuLaunchKernel_ptsz)},
    {"cuLaunchKernelEx", 11060, FN(cuLaunchKernelEx), FN(cuLaunchKernelEx_ptsz)},
    {"cuLaunchCooperativeKernel", 9000, FN(cuLaunchCooperativeKernel), FN(cuLaunchCooperativeKernel_ptsz)},
    {"cuGraphAddMemAllocNode", 11040, FN(cuGraphAddMemAllocNode), nullptr},
    {"cuGraphAddNode", 12020, FN(cuGraphAddNode), nullptr},
    {"cuGraphAddNode", 12030, FN(cuGraphAddNode_v2), nullptr},
    {"cuMemGetInfo", 2000, FN(cuMemGetInfo), nullptr},
    {"cuMemGetInfo", 3020, FN(cuMemGetInfo_v2), nullptr},
    {"cuDeviceTotalMem", 2000, FN(cuDeviceTotalMem), nullptr},
    {"cuDeviceTotalMem", 3020, FN(cuDeviceTotalMem_v2), nullptr},
    {"cuGetProcAddress", 11030, FN(cuGetProcAddress), nullptr},
    {"cuGetProcAddress", 12000, FN(cuGetProcAddress_v2), nullptr},
};
#undef FN
}  // namespace

FAKE_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const ProcVariant* best = nullptr;
  bool exists = false;
  for (const ProcVariant& p : kProcs) {
    if (std::strcmp(p.symbol, symbol) != 0) continue;
    exists = true;
    if (p.version <= version) best = &p;
  }
  if (best == nullptr) {
    if (status) *status = exists ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->perThread ? best->perThread : best->fn;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
