// NVML through dlopen, with the few declarations it needs (no nvml.h): the reservation pod's GPU
// UUID and memory. Types and constants follow nvml.h (stable C ABI since NVML 1.0; the _v2 entry
// points since 2012, with the unversioned ones as a fallback).
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "tessera/reserve/reserve.h"

namespace tessera::reserve {

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned*);
using HandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using UuidFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);

/// dlopen handle, closed on scope exit (after nvmlShutdown).
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

template <class Fn>
Fn symbol(void* handle, const char* name, const char* fallback = nullptr) {
  void* p = dlsym(handle, name);
  if (!p && fallback) p = dlsym(handle, fallback);
  return reinterpret_cast<Fn>(p);
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

api::Result<GpuInfo> findGpu(const std::string& library, const std::string& visibleDevices) {
  Library lib;
  lib.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const char* why = dlerror();
    return api::makeError("cannot load the NVIDIA management library " + library + " (" +
                          (why ? why : "unknown reason") +
                          "): the NVIDIA driver is not visible in this container. A GPU reservation pod needs a node "
                          "with the NVIDIA driver, the NVIDIA container runtime and a nvidia.com/gpu: 1 request");
  }
  auto init = symbol<InitFn>(lib.handle, "nvmlInit_v2", "nvmlInit");
  auto shutdown = symbol<ShutdownFn>(lib.handle, "nvmlShutdown");
  auto count = symbol<CountFn>(lib.handle, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  auto handleByIndex = symbol<HandleFn>(lib.handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  auto getUuid = symbol<UuidFn>(lib.handle, "nvmlDeviceGetUUID");
  auto getMemory = symbol<MemoryFn>(lib.handle, "nvmlDeviceGetMemoryInfo");
  auto errorString = symbol<ErrorStringFn>(lib.handle, "nvmlErrorString");
  for (auto [fn, name] : {std::pair<bool, const char*>{init != nullptr, "nvmlInit_v2"},
                          {shutdown != nullptr, "nvmlShutdown"},
                          {count != nullptr, "nvmlDeviceGetCount_v2"},
                          {handleByIndex != nullptr, "nvmlDeviceGetHandleByIndex_v2"},
                          {getUuid != nullptr, "nvmlDeviceGetUUID"},
                          {getMemory != nullptr, "nvmlDeviceGetMemoryInfo"}})
    if (!fn) return api::makeError(library + " has no " + name + ": not an NVML library, or too old");
  auto failed = [&](const char* what, nvmlReturn_t rc) {
    const char* text = errorString ? errorString(rc) : nullptr;
    return api::makeError(std::string(what) + " failed: NVML error " + std::to_string(rc) +
                          (text ? std::string(" (") + text + ")" : std::string()));
  };
  if (nvmlReturn_t rc = init(); rc != NVML_SUCCESS) return failed("nvmlInit", rc);
  struct Shutdown {
    ShutdownFn fn;
    ~Shutdown() { fn(); }
  } shutdownOnExit{shutdown};

  unsigned n = 0;
  if (nvmlReturn_t rc = count(&n); rc != NVML_SUCCESS) return failed("nvmlDeviceGetCount", rc);
  if (n == 0) return api::makeError("NVML sees no GPU: the container was given none (request nvidia.com/gpu: 1)");

  auto uuidOf = [&](unsigned i, nvmlDevice_t& dev, std::string& uuid) -> api::Status {
    if (nvmlReturn_t rc = handleByIndex(i, &dev); rc != NVML_SUCCESS)
      return failed(("nvmlDeviceGetHandleByIndex(" + std::to_string(i) + ")").c_str(), rc);
    char buf[kUuidBufferSize] = {0};
    if (nvmlReturn_t rc = getUuid(dev, buf, sizeof buf); rc != NVML_SUCCESS) return failed("nvmlDeviceGetUUID", rc);
    uuid.assign(buf, strnlen(buf, sizeof buf));
    if (uuid.empty()) return api::makeError("nvmlDeviceGetUUID returned an empty UUID for GPU " + std::to_string(i));
    return api::Status::success();
  };

  GpuInfo info;
  info.visible = n;
  nvmlDevice_t dev = nullptr;
  const std::string want = trim(visibleDevices);
  if (n == 1) {
    // The container runtime already restricted NVML to the container's GPU.
    info.index = 0;
    TESSERA_TRY(uuidOf(0, dev, info.uuid));
  } else {
    // NVML sees several GPUs (run outside a container, or a runtime that does not restrict NVML):
    // NVIDIA_VISIBLE_DEVICES must name exactly one, by UUID or by index.
    const std::string where = "NVML sees " + std::to_string(n) + " GPUs and NVIDIA_VISIBLE_DEVICES=\"" + want + "\"";
    if (want.empty() || want.find(',') != std::string::npos || want == "all" || want == "none" || want == "void")
      return api::makeError(where + " does not name exactly one of them (a reservation pod holds one GPU)");
    const bool isIndex =
        std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    bool found = false;
    if (isIndex) {
      const unsigned long i = want.size() > 4 ? n : std::stoul(want);
      if (i >= n) return api::makeError(where + ": no GPU with that index");
      info.index = static_cast<unsigned>(i);
      TESSERA_TRY(uuidOf(info.index, dev, info.uuid));
      found = true;
    } else {
      for (unsigned i = 0; i < n && !found; ++i) {
        std::string u;
        TESSERA_TRY(uuidOf(i, dev, u));
        if (u == want) found = true, info.index = i, info.uuid = u;
      }
      if (!found) return api::makeError(where + ": no GPU with that UUID");
    }
  }
  nvmlMemory_t mem{};
  if (nvmlReturn_t rc = getMemory(dev, &mem); rc != NVML_SUCCESS) return failed("nvmlDeviceGetMemoryInfo", rc);
  info.memoryBytes = mem.total;
  return info;
}

}  // namespace tessera::reserve
