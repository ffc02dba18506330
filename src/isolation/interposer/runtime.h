#pragma once
/// Process-wide state of the interposer and the accounting primitives the hooks share.
///
/// All state is constant-initialised (no static constructors). init() runs once, lazily, on the
/// first hooked call: it reads the environment, opens libcuda.so.1, resolves the real entry
/// points and joins the container's shared region. Everything after init is lock-free except
/// the first use of each GPU (UUID lookup and registration) and reclaiming dead processes.

#include <cstdint>

#include "config.h"
#include "cuda_abi.h"
#include "ptr_table.h"

namespace tessera::interposer {

enum class Sym : int {
#define TESSERA_HOOK(name) name,
#define TESSERA_REAL(name) name,
#include "symbols.def"
  kCount
};
inline constexpr int kSymCount = static_cast<int>(Sym::kCount);

/// Exported name of `sym` ("cuMemAlloc_v2").
const char* symName(Sym sym);
/// Our wrapper for `sym`, or nullptr for TESSERA_REAL entries.
void* symWrapper(Sym sym);
/// The Sym whose exported wrapper is called `name`, or Sym::kCount.
Sym hookByName(const char* name);

/// The C library's dlsym (ours is an override). Safe to call at any time, before init().
using DlsymFn = void* (*)(void*, const char*);
DlsymFn realDlsym();

/// Runs initialisation once; cheap afterwards.
void init();

/// The real driver function for `sym` (nullptr if the driver lacks it). Requires init().
void* realFn(Sym sym);
/// Records `fn` as the real function for `sym` if none was resolved (a driver that exposes an
/// entry point through cuGetProcAddress only). Returns the real function now on record.
void* adoptRealFn(Sym sym, void* fn);

#define TESSERA_REAL_FN(name) reinterpret_cast<decltype(&::name)>(::tessera::interposer::realFn(::tessera::interposer::Sym::name))
#define TESSERA_REAL_HELPER(name) \
  reinterpret_cast<::tessera::interposer::name##_t>(::tessera::interposer::realFn(::tessera::interposer::Sym::name))

/// What a hook returns when the driver lacks its real function (traced).
cu::CUresult missingEntryPoint(Sym sym);
/// Opening of every hook: initialise, fetch the real function, answer for a driver without it.
#define TESSERA_REQUIRE_REAL(name)                        \
  ::tessera::interposer::init();                          \
  auto real = TESSERA_REAL_FN(name);                      \
  if (real == nullptr) return ::tessera::interposer::missingEntryPoint(::tessera::interposer::Sym::name)

/// True when isolation cannot be enforced (bad configuration, unusable region). Reports the
/// reason on stderr the first time it is asked.
bool failClosed();

/// Region index (and optionally the ordinal) of the device of the calling thread's current context.
cu::CUresult currentDevice(int* index, cu::CUdevice* ordinalOut = nullptr);
/// Region index of device ordinal `ordinal`.
cu::CUresult deviceIndex(cu::CUdevice ordinal, int* index);

/// Reserves `bytes` on device `index` for call `api`. CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY
/// (with one stderr line per process the first time).
cu::CUresult charge(int index, std::uint64_t bytes, const char* api);
/// Returns a reservation.
void credit(int index, std::uint64_t bytes);

/// True once this process's CUDA context on device `index` is charged (charging it now if not
/// yet). False when it does not fit in what the pod has left: then nothing else fits either.
bool contextReady(int index);
/// NVML's figure for the memory this process uses on the GPU `uuid` (its context plus anything it
/// allocated). False when NVML is missing or does not list this process (another pid namespace,
/// MIG, or a driver that hides per-process usage). Defined in hooks_nvml.cpp.
bool measureContextBytes(const Uuid& uuid, std::uint64_t* bytes);

/// Most pids podPids() returns.
inline constexpr int kMaxPodPids = 256;
/// The pids of this pod's processes as the shared region records them (each in its own pid
/// namespace), this process first; at most `max`. Returns how many.
int podPids(int* out, int max);
/// SM utilization of the GPU `uuid` over NVML's recent sample window, in percent: of the processes
/// whose pid is in `pids` (`*pod`, `*podSeen` when NVML listed any of them) and of every process
/// (`*total`). False when NVML cannot say (no library, no per-process utilization). Defined in
/// hooks_nvml.cpp.
bool sampleSmUtilization(const Uuid& uuid, const int* pids, int count, int* pod, int* total, bool* podSeen);

/// The container's limit and current usage on device `index`.
std::uint64_t limitOf(int index);
std::uint64_t usedOf(int index);
/// Limit and usage for a GPU that may not be registered yet (NVML path). Requires init().
void limitAndUsedByUuid(const Uuid& uuid, std::uint64_t* limit, std::uint64_t* used);

/// Per-allocation records: (bytes, device, graph flag) packed into one non-zero word. The low 7
/// bits hold the device index + 1 (at most 32), bit 7 marks a graph memory node's allocation.
inline constexpr std::uint64_t kGraphCharge = 0x80;
inline std::uint64_t packCharge(std::uint64_t bytes, int index) {
  return (bytes << 8) | static_cast<std::uint64_t>(index + 1);
}
inline std::uint64_t chargeBytes(std::uint64_t packed) { return packed >> 8; }
inline int chargeDevice(std::uint64_t packed) { return static_cast<int>(packed & 0x7f) - 1; }

/// Device pointers (cuMemAlloc*, managed, async, graph alloc nodes).
PtrTable<18>& devicePointers();
/// CUarray and CUmipmappedArray handles.
PtrTable<14>& arrays();
/// CUmemGenericAllocationHandle from cuMemCreate.
PtrTable<14>& physicalHandles();

/// Records a successful allocation. On a full table returns false; the caller must undo the
/// allocation and credit the charge.
bool track(PtrTable<18>& table, std::uint64_t key, std::uint64_t packed);
bool track(PtrTable<14>& table, std::uint64_t key, std::uint64_t packed);

bool debugEnabled();
void logDebug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void logError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define TESSERA_TRACE(...)                                                         \
  do {                                                                             \
    if (::tessera::interposer::debugEnabled()) ::tessera::interposer::logDebug(__VA_ARGS__); \
  } while (0)

}  // namespace tessera::interposer
