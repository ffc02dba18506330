// A CUDA "application" run by the isolation tests with libtessera-cuda.so preloaded.
//
//   iso_probe <scenario> [args...]
//
// It links the fake libcuda.so.1 / libnvidia-ml.so.1 directly (direct calls), and also reaches the
// driver through dlopen + dlsym and through cuGetProcAddress(_v2). It asserts nothing itself: it
// prints `key=value` lines that the Catch2 tests check. Exit status 0 unless a scenario could not
// run at all.

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_abi.h"
#include "fake_state.h"

using namespace tessera::cu;  // NOLINT

// The fake driver's exports, called directly (resolved to the interposer when it is preloaded).
extern "C" {
CUresult cuInit(unsigned int);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr*, std::size_t);
CUresult cuMemAlloc(CUdeviceptrV1*, unsigned int);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemFree(CUdeviceptrV1);
CUresult cuMemGetInfo_v2(std::size_t*, std::size_t*);
CUresult cuMemGetInfo(unsigned int*, unsigned int*);
CUresult cuDeviceTotalMem_v2(std::size_t*, CUdevice);
CUresult cuMemAllocPitch_v2(CUdeviceptr*, std::size_t*, std::size_t, std::size_t, unsigned int);
CUresult cuMemAllocManaged(CUdeviceptr*, std::size_t, unsigned int);
CUresult cuMemAllocAsync(CUdeviceptr*, std::size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr*, std::size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemCreate(CUmemGenericAllocationHandle*, std::size_t, const CUmemAllocationProp*, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuArrayCreate_v2(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
CUresult cuArray3DCreate_v2(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuGraphCreate(CUgraph*, unsigned int);
CUresult cuGraphAddMemAllocNode(CUgraphNode*, CUgraph, const CUgraphNode*, std::size_t, CUDA_MEM_ALLOC_NODE_PARAMS*);
CUresult cuGraphAddNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, std::size_t,
                           CUgraphNodeParams*);
CUresult cuGraphDestroy(CUgraph);
CUresult cuGraphDestroyNode(CUgraphNode);
CUresult cuGraphInstantiateWithFlags(CUgraphExec*, CUgraph, unsigned long long);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                        void**, void**);
CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void**);
nvmlReturn_t nvmlInit_v2();
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t*);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t*);
}

namespace {

void out(const char* key, long long value) { std::printf("%s=%lld\n", key, value); }
void outStr(const char* key, const char* value) { std::printf("%s=%s\n", key, value ? value : "(null)"); }

std::uint64_t arg(int argc, char** argv, int i, std::uint64_t fallback) {
  return i < argc ? std::strtoull(argv[i], nullptr, 10) : fallback;
}

void useDevice(int device) {
  CUcontext ctx = nullptr;
  cuDevicePrimaryCtxRetain(&ctx, device);
  cuCtxSetCurrent(ctx);
}

std::uint64_t usedNow() {
  std::size_t f = 0, t = 0;
  cuMemGetInfo_v2(&f, &t);
  return t - f;
}

// Basename of the object that defines `fn`.
const char* ownerOf(void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "none";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

const char* symbolOf(void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_sname == nullptr) return "none";
  return info.dli_sname;
}

// alloc <bytes> <bytes2>: direct calls. Allocate, query, over-allocate twice, free, re-allocate.
int direct(int argc, char** argv) {
  const std::uint64_t first = arg(argc, argv, 2, 600ULL << 20);
  const std::uint64_t second = arg(argc, argv, 3, first);
  out("init", cuInit(0));
  useDevice(0);
  CUdeviceptr a = 0, b = 0, c = 0;
  out("alloc1", cuMemAlloc_v2(&a, first));
  std::size_t f = 0, t = 0;
  out("info", cuMemGetInfo_v2(&f, &t));
  out("free_after_alloc1", static_cast<long long>(f));
  out("total", static_cast<long long>(t));
  out("alloc2", cuMemAlloc_v2(&b, second));
  out("alloc2_again", cuMemAlloc_v2(&b, second));
  out("free1", cuMemFree_v2(a));
  cuMemGetInfo_v2(&f, &t);
  out("free_after_free1", static_cast<long long>(f));
  out("alloc3", cuMemAlloc_v2(&c, second));
  out("free3", cuMemFree_v2(c));
  out("unknown_free", cuMemFree_v2(0xdead0000ULL));
  out("used_end", static_cast<long long>(usedNow()));
  // Legacy 32-bit entry points are charged too.
  CUdeviceptrV1 v1 = 0;
  out("alloc_v1_over", cuMemAlloc(&v1, static_cast<unsigned int>(0xF0000000U)));
  out("alloc_v1", cuMemAlloc(&v1, 1U << 20));
  out("used_v1", static_cast<long long>(usedNow()));
  out("free_v1", cuMemFree(v1));
  unsigned int f32 = 0, t32 = 0;
  out("info_v1", cuMemGetInfo(&f32, &t32));
  out("total_v1", t32);
  return 0;
}

using AllocFn = CUresult (*)(CUdeviceptr*, std::size_t);
using FreeFn = CUresult (*)(CUdeviceptr);
using InfoFn = CUresult (*)(std::size_t*, std::size_t*);
using InitFn = CUresult (*)(unsigned int);
using AsyncAllocFn = CUresult (*)(CUdeviceptr*, std::size_t, CUstream);
using AsyncFreeFn = CUresult (*)(CUdeviceptr, CUstream);
using GpaV2Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using GpaFn = CUresult (*)(const char*, void**, int, cuuint64_t);

// dlsym <bytes>: dlopen the driver and look everything up by name.
int viaDlsym(int argc, char** argv) {
  const std::uint64_t bytes = arg(argc, argv, 2, 600ULL << 20);
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == nullptr) return 2;
  auto init = reinterpret_cast<InitFn>(dlsym(h, "cuInit"));
  auto alloc = reinterpret_cast<AllocFn>(dlsym(h, "cuMemAlloc_v2"));
  auto release = reinterpret_cast<FreeFn>(dlsym(h, "cuMemFree_v2"));
  auto info = reinterpret_cast<InfoFn>(dlsym(h, "cuMemGetInfo_v2"));
  outStr("cuMemAlloc_v2_owner", ownerOf(reinterpret_cast<void*>(alloc)));
  outStr("cuMemFree_v2_owner", ownerOf(reinterpret_cast<void*>(release)));
  outStr("cuDeviceGetName_owner", ownerOf(dlsym(h, "cuDeviceGetName")));
  outStr("missing", dlsym(h, "cuNoSuchFunction") == nullptr ? "null" : "found");
  outStr("default_owner", ownerOf(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")));
  outStr("puts_owner", ownerOf(dlsym(RTLD_DEFAULT, "puts")));
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  outStr("nvml_owner", ownerOf(nvml ? dlsym(nvml, "nvmlDeviceGetMemoryInfo") : nullptr));
  outStr("nvml_name_owner", ownerOf(nvml ? dlsym(nvml, "nvmlDeviceGetName") : nullptr));
  out("init", init(0));
  useDevice(0);
  CUdeviceptr a = 0, b = 0;
  out("alloc1", alloc(&a, bytes));
  out("alloc2", alloc(&b, bytes));
  std::size_t f = 0, t = 0;
  info(&f, &t);
  out("total", static_cast<long long>(t));
  out("free1", release(a));
  out("alloc3", alloc(&b, bytes));
  out("free3", release(b));
  return 0;
}

// gpa <bytes>: cuGetProcAddress_v2 / cuGetProcAddress, with and without the per-thread flag.
int viaGetProcAddress(int argc, char** argv) {
  const std::uint64_t bytes = arg(argc, argv, 2, 600ULL << 20);
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == nullptr) return 2;
  auto gpa = reinterpret_cast<GpaV2Fn>(dlsym(h, "cuGetProcAddress_v2"));
  outStr("gpa_owner", ownerOf(reinterpret_cast<void*>(gpa)));
  struct Query {
    const char* key;
    const char* symbol;
    int version;
    cuuint64_t flags;
  };
  const Query queries[] = {
      {"alloc_12000", "cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"alloc_3000", "cuMemAlloc", 3000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"alloc_ptds", "cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"async_legacy", "cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM},
      {"async_ptsz", "cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"freeasync_ptsz", "cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"pool_ptsz", "cuMemAllocFromPoolAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"async_11000", "cuMemAllocAsync", 11000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"graphnode_12020", "cuGraphAddNode", 12020, CU_GET_PROC_ADDRESS_DEFAULT},
      {"graphnode_12080", "cuGraphAddNode", 12080, CU_GET_PROC_ADDRESS_DEFAULT},
      {"gpa_12000", "cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"gpa_11030", "cuGetProcAddress", 11030, CU_GET_PROC_ADDRESS_DEFAULT},
      {"name", "cuDeviceGetName", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"launch_12000", "cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"launch_ptsz", "cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"launchex_12000", "cuLaunchKernelEx", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"coop_ptsz", "cuLaunchCooperativeKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"nosuch", "cuNoSuchFunction", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
  };
  for (const Query& q : queries) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status = -1;
    CUresult rc = gpa(q.symbol, &fn, q.version, q.flags, &status);
    char key[96];
    std::snprintf(key, sizeof key, "%s_rc", q.key);
    out(key, rc);
    std::snprintf(key, sizeof key, "%s_status", q.key);
    out(key, status);
    std::snprintf(key, sizeof key, "%s_owner", q.key);
    outStr(key, ownerOf(fn));
    std::snprintf(key, sizeof key, "%s_symbol", q.key);
    outStr(key, symbolOf(fn));
  }

  void* fn = nullptr;
  gpa("cuInit", &fn, 12000, 0, nullptr);
  out("init", reinterpret_cast<InitFn>(fn)(0));
  useDevice(0);
  gpa("cuMemAlloc", &fn, 12000, 0, nullptr);
  auto alloc = reinterpret_cast<AllocFn>(fn);
  gpa("cuMemFree", &fn, 12000, 0, nullptr);
  auto release = reinterpret_cast<FreeFn>(fn);
  CUdeviceptr a = 0, b = 0;
  out("alloc1", alloc(&a, bytes));
  out("alloc2", alloc(&b, bytes));
  out("free1", release(a));

  // Per-thread-stream variants end up in the driver's _ptsz functions, still charged.
  gpa("cuMemAllocAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr);
  auto allocPtsz = reinterpret_cast<AsyncAllocFn>(fn);
  gpa("cuMemFreeAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr);
  auto freePtsz = reinterpret_cast<AsyncFreeFn>(fn);
  out("ptsz_alloc1", allocPtsz(&a, bytes, nullptr));
  out("ptsz_alloc2", allocPtsz(&b, bytes, nullptr));
  out("ptsz_used", static_cast<long long>(usedNow()));
  out("ptsz_free1", freePtsz(a, nullptr));
  out("ptsz_used_after", static_cast<long long>(usedNow()));

  // The legacy entry point, obtained through the v2 one, behaves the same.
  gpa("cuGetProcAddress", &fn, 11030, 0, nullptr);
  auto legacy = reinterpret_cast<GpaFn>(fn);
  void* viaLegacy = nullptr;
  out("legacy_rc", legacy("cuMemAllocAsync", &viaLegacy, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
  outStr("legacy_symbol", symbolOf(viaLegacy));
  outStr("legacy_owner", ownerOf(viaLegacy));
  return 0;
}

// kinds <limit>: every charged allocator, checking the charge through cuMemGetInfo.
int kinds(int argc, char** argv) {
  out("init", cuInit(0));
  useDevice(0);
  CUdeviceptr p = 0;
  std::uint64_t base = usedNow();
  std::size_t pitch = 0;
  out("pitch_rc", cuMemAllocPitch_v2(&p, &pitch, 1000, 100, 4));
  out("pitch", static_cast<long long>(pitch));
  out("pitch_charged", static_cast<long long>(usedNow() - base));
  out("pitch_free", cuMemFree_v2(p));
  out("after_pitch", static_cast<long long>(usedNow() - base));

  out("managed_rc", cuMemAllocManaged(&p, 3 << 20, 1));
  out("managed_charged", static_cast<long long>(usedNow() - base));
  out("managed_free", cuMemFree_v2(p));

  out("async_rc", cuMemAllocAsync(&p, 5 << 20, nullptr));
  out("async_charged", static_cast<long long>(usedNow() - base));
  out("async_free", cuMemFreeAsync(p, nullptr));

  out("pool_rc", cuMemAllocFromPoolAsync(&p, 7 << 20, nullptr, nullptr));
  out("pool_charged", static_cast<long long>(usedNow() - base));
  out("pool_free", cuMemFree_v2(p));  // a synchronous free of a pool allocation credits too

  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle handle = 0;
  out("create_rc", cuMemCreate(&handle, 2 << 20, &prop, 0));
  out("create_charged", static_cast<long long>(usedNow() - base));
  out("release_rc", cuMemRelease(handle));
  prop.location.type = 2;  // host: not GPU memory
  out("create_host_rc", cuMemCreate(&handle, 2 << 20, &prop, 0));
  out("create_host_charged", static_cast<long long>(usedNow() - base));
  out("release_host_rc", cuMemRelease(handle));

  CUarray array = nullptr;
  CUDA_ARRAY_DESCRIPTOR d2{1024, 1024, 0x20, 4};
  out("array_rc", cuArrayCreate_v2(&array, &d2));
  out("array_charged", static_cast<long long>(usedNow() - base));
  out("array_destroy", cuArrayDestroy(array));
  CUDA_ARRAY3D_DESCRIPTOR d3{256, 256, 16, 0x01, 1, 0};
  out("array3d_rc", cuArray3DCreate_v2(&array, &d3));
  out("array3d_charged", static_cast<long long>(usedNow() - base));
  out("array3d_destroy", cuArrayDestroy(array));
  CUmipmappedArray mip = nullptr;
  CUDA_ARRAY3D_DESCRIPTOR dm{2048, 2048, 0, 0x20, 4, 0};
  out("mip_rc", cuMipmappedArrayCreate(&mip, &dm, 4));
  out("mip_charged", static_cast<long long>(usedNow() - base));
  out("mip_destroy", cuMipmappedArrayDestroy(mip));

  CUgraph graph = nullptr;
  cuGraphCreate(&graph, 0);
  CUgraphNode node = nullptr;
  CUDA_MEM_ALLOC_NODE_PARAMS ap{};
  ap.poolProps.allocType = 1;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.poolProps.location.id = 0;
  ap.bytesize = 9 << 20;
  out("graph_rc", cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &ap));
  out("graph_charged", static_cast<long long>(usedNow() - base));
  out("graph_free", cuMemFree_v2(ap.dptr));
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  np.alloc = ap;
  np.alloc.bytesize = 11 << 20;
  out("graphnode_rc", cuGraphAddNode_v2(&node, graph, nullptr, nullptr, 0, &np));
  out("graphnode_charged", static_cast<long long>(usedNow() - base));
  out("graphnode_free", cuMemFree_v2(np.alloc.dptr));
  cuGraphDestroy(graph);

  // Over the limit through each kind.
  const std::uint64_t limit = arg(argc, argv, 2, 1ULL << 30);
  out("managed_over", cuMemAllocManaged(&p, limit + 1, 1));
  out("async_over", cuMemAllocAsync(&p, limit + 1, nullptr));
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  out("create_over", cuMemCreate(&handle, limit + 1, &prop, 0));
  CUDA_ARRAY_DESCRIPTOR huge{65536, 65536, 0x20, 4};
  out("array_over", cuArrayCreate_v2(&array, &huge));
  ap.bytesize = limit + 1;
  out("graph_over", cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &ap));
  out("pitch_over", cuMemAllocPitch_v2(&p, &pitch, 1 << 20, (limit >> 20) + 1, 4));
  out("used_end", static_cast<long long>(usedNow() - base));
  return 0;
}

// queries <device>: memory queries report the limit; NULL out-parameters are tolerated.
int queries(int argc, char** argv) {
  const int device = static_cast<int>(arg(argc, argv, 2, 0));
  out("init", cuInit(0));
  useDevice(device);
  CUdeviceptr p = 0;
  out("alloc", cuMemAlloc_v2(&p, 100ULL << 20));
  std::size_t f = 0, t = 0, total = 0;
  out("info", cuMemGetInfo_v2(&f, &t));
  out("free", static_cast<long long>(f));
  out("total", static_cast<long long>(t));
  out("info_null_free", cuMemGetInfo_v2(nullptr, &t));
  out("info_null_both", cuMemGetInfo_v2(nullptr, nullptr));
  out("devtotal", cuDeviceTotalMem_v2(&total, device));
  out("devtotal_bytes", static_cast<long long>(total));
  out("devtotal_null", cuDeviceTotalMem_v2(nullptr, device));
  out("nvml_init", nvmlInit_v2());
  nvmlDevice_t dev = nullptr;
  nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(device), &dev);
  nvmlMemory_t m{};
  out("nvml", nvmlDeviceGetMemoryInfo(dev, &m));
  out("nvml_total", static_cast<long long>(m.total));
  out("nvml_used", static_cast<long long>(m.used));
  out("nvml_free", static_cast<long long>(m.free));
  out("nvml_null", nvmlDeviceGetMemoryInfo(dev, nullptr));
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  out("nvml2", nvmlDeviceGetMemoryInfo_v2(dev, &m2));
  out("nvml2_total", static_cast<long long>(m2.total));
  out("nvml2_used", static_cast<long long>(m2.used));
  out("nvml2_free", static_cast<long long>(m2.free));
  out("nvml2_null", nvmlDeviceGetMemoryInfo_v2(dev, nullptr));
  out("free_rc", cuMemFree_v2(p));
  return 0;
}

// hammer <threads> <iterations> <bytes>: alloc/free in a loop; counts successes and refusals.
// A start line on stdin (or EOF) releases all threads together.
int hammer(int argc, char** argv) {
  const int threads = static_cast<int>(arg(argc, argv, 2, 32));
  const std::uint64_t iterations = arg(argc, argv, 3, 1000);
  const std::uint64_t bytes = arg(argc, argv, 4, 64ULL << 20);
  out("init", cuInit(0));
  char go = 0;
  if (read(STDIN_FILENO, &go, 1) < 0) return 2;  // wait for the test's start signal (EOF)
  std::atomic<long long> ok{0}, oom{0}, other{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      useDevice(0);
      // Each thread keeps up to two allocations alive, freeing the older one after each new one.
      CUdeviceptr held[2] = {0, 0};
      for (std::uint64_t i = 0; i < iterations; ++i) {
        CUdeviceptr& slot = held[i % 2];
        if (slot != 0) {
          if (cuMemFree_v2(slot) != CUDA_SUCCESS) ++other;
          slot = 0;
        }
        CUresult rc = cuMemAlloc_v2(&slot, bytes + static_cast<std::uint64_t>((t * 7 + i) % 5) * (1 << 20));
        if (rc == CUDA_SUCCESS) {
          ++ok;
        } else {
          slot = 0;
          ++(rc == CUDA_ERROR_OUT_OF_MEMORY ? oom : other);
        }
      }
      for (CUdeviceptr p : held) {
        if (p != 0 && cuMemFree_v2(p) != CUDA_SUCCESS) ++other;
      }
    });
  }
  for (auto& w : workers) w.join();
  out("ok", ok);
  out("oom", oom);
  out("other", other);
  out("used_end", static_cast<long long>(usedNow()));
  return 0;
}

// hold <bytes>: allocate, say so, then wait (until killed or stdin closes).
int hold(int argc, char** argv) {
  out("init", cuInit(0));
  useDevice(0);
  CUdeviceptr p = 0;
  out("alloc", cuMemAlloc_v2(&p, arg(argc, argv, 2, 700ULL << 20)));
  outStr("ready", "1");
  std::fflush(stdout);
  char c = 0;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  return 0;
}

// failclosed: what a process sees when isolation cannot be enforced.
int failClosed(int, char**) {
  out("init", cuInit(0));
  useDevice(0);
  CUdeviceptr p = 0;
  out("alloc", cuMemAlloc_v2(&p, 1 << 20));
  out("alloc_again", cuMemAlloc_v2(&p, 1 << 20));
  CUdeviceptr q = 0;
  out("async", cuMemAllocAsync(&q, 1 << 20, nullptr));
  std::size_t f = 1, t = 1;
  out("info", cuMemGetInfo_v2(&f, &t));
  out("total", static_cast<long long>(t));
  return 0;
}

// devices <bytes>: allocate on device 0 and device 1 (per-device limits).
int devices(int argc, char** argv) {
  const std::uint64_t bytes = arg(argc, argv, 2, 600ULL << 20);
  out("init", cuInit(0));
  for (int d = 0; d < 2; ++d) {
    useDevice(d);
    CUdeviceptr p = 0;
    char key[32];
    std::snprintf(key, sizeof key, "dev%d_alloc", d);
    out(key, cuMemAlloc_v2(&p, bytes));
    std::size_t f = 0, t = 0;
    cuMemGetInfo_v2(&f, &t);
    std::snprintf(key, sizeof key, "dev%d_total", d);
    out(key, static_cast<long long>(t));
  }
  return 0;
}

// allocs <bytes>...: allocate each size in turn (cuMemAlloc_v2) and report each result and what
// cuMemGetInfo says, then say ready and hold everything until stdin closes (one pod's container).
int allocs(int argc, char** argv) {
  out("init", cuInit(0));
  useDevice(0);
  std::size_t f = 0, t = 0;
  out("info_before", cuMemGetInfo_v2(&f, &t));
  out("free_before", static_cast<long long>(f));
  for (int i = 2; i < argc; ++i) {
    CUdeviceptr p = 0;
    char key[32];
    std::snprintf(key, sizeof key, "alloc%d", i - 2);
    out(key, cuMemAlloc_v2(&p, std::strtoull(argv[i], nullptr, 10)));
  }
  cuMemGetInfo_v2(&f, &t);
  out("free", static_cast<long long>(f));
  out("total", static_cast<long long>(t));
  outStr("ready", "1");
  std::fflush(stdout);
  char c = 0;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  return 0;
}

// graphs: memory-allocation nodes are credited when their node, graph or executable graph goes,
// and charged again by a launch after an explicit free.
int graphs(int, char**) {
  out("init", cuInit(0));
  useDevice(0);
  const std::uint64_t base = usedNow();
  auto used = [&] { return static_cast<long long>(usedNow() - base); };
  auto allocNode = [](CUgraph g, std::uint64_t bytes, CUgraphNode* node) {
    CUDA_MEM_ALLOC_NODE_PARAMS ap{};
    ap.poolProps.allocType = 1;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = bytes;
    CUresult rc = cuGraphAddMemAllocNode(node, g, nullptr, 0, &ap);
    return std::make_pair(rc, ap.dptr);
  };
  CUgraph g = nullptr;
  cuGraphCreate(&g, 0);
  CUgraphNode n1 = nullptr, n2 = nullptr;
  auto [rc1, p1] = allocNode(g, 10 << 20, &n1);
  auto [rc2, p2] = allocNode(g, 20 << 20, &n2);
  (void)p2;
  out("nodes_rc", rc1 == 0 && rc2 == 0 ? 0 : 1);
  out("after_nodes", used());
  out("destroy_node", cuGraphDestroyNode(n2));
  out("after_destroy_node", used());
  CUgraphExec exec = nullptr;
  out("instantiate", cuGraphInstantiateWithFlags(&exec, g, 0));
  out("after_instantiate", used());
  out("free_explicit", cuMemFree_v2(p1));
  out("after_free", used());
  out("launch1", cuGraphLaunch(exec, nullptr));
  out("after_launch1", used());
  out("launch2", cuGraphLaunch(exec, nullptr));
  out("after_launch2", used());
  out("graph_destroy", cuGraphDestroy(g));
  out("after_graph_destroy", used());  // the executable graph still holds the node's memory
  out("exec_destroy", cuGraphExecDestroy(exec));
  out("after_exec_destroy", used());

  // A launch whose allocation no longer fits is refused before it reaches the driver.
  CUgraph big = nullptr;
  cuGraphCreate(&big, 0);
  CUgraphNode nb = nullptr;
  auto [rcb, pb] = allocNode(big, 600ULL << 20, &nb);
  out("big_node", rcb);
  CUgraphExec bigExec = nullptr;
  cuGraphInstantiateWithFlags(&bigExec, big, 0);
  cuMemFree_v2(pb);
  CUdeviceptr other = 0;
  out("other_alloc", cuMemAlloc_v2(&other, 500ULL << 20));
  out("big_launch_refused", cuGraphLaunch(bigExec, nullptr));
  out("after_refused", used());
  cuMemFree_v2(other);
  out("big_launch", cuGraphLaunch(bigExec, nullptr));
  out("after_big_launch", used());
  cuGraphExecDestroy(bigExec);
  cuGraphDestroy(big);

  // A graph destroyed without being instantiated gives its nodes back.
  CUgraph plain = nullptr;
  cuGraphCreate(&plain, 0);
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  np.alloc.bytesize = 30 << 20;
  CUgraphNode n3 = nullptr;
  out("addnode", cuGraphAddNode_v2(&n3, plain, nullptr, nullptr, 0, &np));
  out("after_addnode", used());
  out("plain_destroy", cuGraphDestroy(plain));
  out("used_end", used());
  return 0;
}

}  // namespace

// launch <threads> <run ms> <warmup ms> <blocks>: after stdin closes (the start signal), each
// thread launches kernels of <blocks> blocks in a loop for <run ms>, thread i through
// cuLaunchKernel, cuLaunchKernelEx or cuLaunchCooperativeKernel (i mod 3). Prints the launches and
// `util`: the percent of the time after <warmup ms> that this process's kernels occupied device 0,
// read from the fake driver's record (FAKE_CUDA_STATE).
int launches(int argc, char** argv) {
  const int threads = static_cast<int>(arg(argc, argv, 2, 1));
  const std::uint64_t runMs = arg(argc, argv, 3, 2000), warmupMs = arg(argc, argv, 4, 1000);
  const unsigned blocks = static_cast<unsigned>(arg(argc, argv, 5, 100));
  tessera::fake::State* state = tessera::fake::mapState(std::getenv("FAKE_CUDA_STATE"));
  tessera::fake::ProcessState* self = tessera::fake::processEntry(state, static_cast<int>(getpid()));
  if (self == nullptr) return 2;
  out("init", cuInit(0));
  outStr("ready", "1");
  std::fflush(stdout);
  char c = 0;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  auto nowNs = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
  };
  const std::uint64_t start = nowNs(), measureFrom = start + warmupMs * 1000000ULL, end = start + runMs * 1000000ULL;
  std::atomic<long long> failures{0}, total{0};
  std::atomic<std::uint64_t> busyAtWarmup{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      useDevice(0);
      CUlaunchConfig config{};
      config.gridDimX = blocks;
      config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = 128;
      config.blockDimY = config.blockDimZ = 1;
      while (nowNs() < end) {
        CUresult rc = 0;
        switch (t % 3) {
          case 0: rc = cuLaunchKernel(nullptr, blocks, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr); break;
          case 1: rc = cuLaunchKernelEx(&config, nullptr, nullptr, nullptr); break;
          default: rc = cuLaunchCooperativeKernel(nullptr, blocks, 1, 1, 128, 1, 1, 0, nullptr, nullptr); break;
        }
        if (rc != 0) failures.fetch_add(1);
        total.fetch_add(1);
      }
    });
  }
  // Device time used after the warm-up: the busy counter read at its start and at the end.
  const std::uint64_t warmupLeft = measureFrom > nowNs() ? measureFrom - nowNs() : 0;
  timespec wait{static_cast<time_t>(warmupLeft / 1000000000ULL), static_cast<long>(warmupLeft % 1000000000ULL)};
  nanosleep(&wait, nullptr);
  const std::uint64_t measuredStart = nowNs();
  busyAtWarmup.store(self->busyNs[0].load());
  for (auto& w : workers) w.join();
  const std::uint64_t measuredNs = nowNs() - measuredStart;
  const std::uint64_t busy = self->busyNs[0].load() - busyAtWarmup.load();
  out("launches", total.load());
  out("failures", failures.load());
  out("util", static_cast<long long>((busy * 100 + measuredNs / 2) / (measuredNs == 0 ? 1 : measuredNs)));
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::fprintf(stderr, "usage: iso_probe <direct|dlsym|gpa|kinds|queries|hammer|hold|failclosed|devices|allocs|graphs|launch> ...\n");
    return 2;
  }
  const std::string scenario = argv[1];
  if (scenario == "direct") return direct(argc, argv);
  if (scenario == "dlsym") return viaDlsym(argc, argv);
  if (scenario == "gpa") return viaGetProcAddress(argc, argv);
  if (scenario == "kinds") return kinds(argc, argv);
  if (scenario == "queries") return queries(argc, argv);
  if (scenario == "hammer") return hammer(argc, argv);
  if (scenario == "hold") return hold(argc, argv);
  if (scenario == "failclosed") return failClosed(argc, argv);
  if (scenario == "devices") return devices(argc, argv);
  if (scenario == "allocs") return allocs(argc, argv);
  if (scenario == "graphs") return graphs(argc, argv);
  if (scenario == "launch") return launches(argc, argv);
  std::fprintf(stderr, "iso_probe: unknown scenario %s\n", argv[1]);
  return 2;
}
