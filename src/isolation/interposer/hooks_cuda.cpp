// Exported CUDA driver API wrappers: charge before the driver allocates, credit after it frees.
//
// Pattern of every allocator: resolve the device -> reserve (CAS in the shared region; refused
// with CUDA_ERROR_OUT_OF_MEMORY over the limit) -> call the driver -> on failure roll the
// reservation back; on success record (bytes, device) under the returned handle. Frees remove
// the record first (so a handle the driver hands out again cannot be confused with the old one),
// call the driver, and credit only when the driver succeeded. Unknown handles pass straight through.

#include <climits>
#include <cstdint>

#include "hooks.h"
#include "runtime.h"

using namespace tessera::cu;           // NOLINT: ABI vocabulary
using namespace tessera::interposer;   // NOLINT

namespace {

constexpr std::uint64_t kPitchAlignment = 512;        // cuMemAllocPitch's usual pitch granularity
constexpr std::uint64_t kArrayRowAlignment = 512;     // CUDA array row granularity (estimate)
constexpr std::uint64_t kArrayAllocationGranule = 64 * 1024;  // array allocations are page-granular

std::uint64_t mulSat(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

std::uint64_t roundUpSat(std::uint64_t value, std::uint64_t granule) {
  std::uint64_t r;
  if (__builtin_add_overflow(value, granule - 1, &r)) return UINT64_MAX;
  return r / granule * granule;
}

// Charges `bytes` to device `index` (or the current context's device when -1), runs `driverCall`,
// records the new pointer; `undo` frees it if it cannot be recorded.
template <class Call, class Undo>
CUresult chargedPointerAlloc(const char* api, std::uint64_t* key, std::uint64_t bytes, int index, Call&& driverCall,
                             Undo&& undo) {
  CUresult rc = CUDA_SUCCESS;
  if (index < 0 && (rc = currentDevice(&index)) != CUDA_SUCCESS) return rc;
  if ((rc = charge(index, bytes, api)) != CUDA_SUCCESS) return rc;
  rc = driverCall();
  if (rc != CUDA_SUCCESS) {
    credit(index, bytes);
    return rc;
  }
  if (!track(devicePointers(), *key, packCharge(bytes, index))) {
    undo();
    credit(index, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// Removes the record of `key` from `table`, runs the driver's free, credits on success.
template <class Table, class Call>
CUresult chargedFree(Table& table, std::uint64_t key, Call&& driverCall) {
  const std::uint64_t packed = table.remove(key);
  const CUresult rc = driverCall();
  if (packed == 0) return rc;  // not ours (or already freed): the driver decides
  if (rc == CUDA_SUCCESS) {
    credit(chargeDevice(packed), chargeBytes(packed));
  } else if (!table.insert(key, packed)) {
    // The driver kept the allocation but we cannot record it again: keep it charged (safe).
  }
  return rc;
}

CUresult allocDevice(Sym sym, CUdeviceptr* dptr, std::size_t bytes, auto&& driverCall, auto&& undo) {
  if (dptr == nullptr || bytes == 0) return driverCall();  // the driver reports the error
  std::uint64_t key = 0;
  CUresult rc = chargedPointerAlloc(
      symName(sym), &key, bytes, -1,
      [&] {
        CUresult r = driverCall();
        key = *dptr;
        return r;
      },
      undo);
  TESSERA_TRACE("%s(%zu bytes) = %d ptr=0x%llx", symName(sym), bytes, rc, rc == CUDA_SUCCESS ? *dptr : 0ULL);
  return rc;
}

// Bytes per element of a CUDA array, rounded up; unknown formats assume the largest (16).
std::uint64_t texelBytes(CUarray_format format, unsigned int channels) {
  const std::uint64_t ch = channels == 0 ? 1 : channels;
  switch (format) {
    case 0x01: case 0x08: return 1 * ch;                   // (UN)SIGNED_INT8
    case 0x02: case 0x09: case 0x10: return 2 * ch;        // (UN)SIGNED_INT16, HALF
    case 0x03: case 0x0a: case 0x20: return 4 * ch;        // (UN)SIGNED_INT32, FLOAT
    case 0xc0: case 0xc6: return 1;                        // [US]NORM_INT8X1
    case 0xc1: case 0xc7: case 0xc3: case 0xc9: return 2;  // INT8X2, INT16X1
    case 0xc2: case 0xc8: case 0xc4: case 0xca: return 4;  // INT8X4, INT16X2
    case 0xc5: case 0xcb: return 8;                        // INT16X4
    case 0x50: return 4;                                   // UNORM_INT_101010_2
    case 0xb0: case 0xa2: case 0xa5: return 2;             // NV12, NV16, YUY2 (1.5-2 bytes)
    case 0x9f: case 0xa1: case 0xa3: case 0xa4: case 0xa6: case 0xa7: case 0xa8: case 0xa9: return 4;
    case 0xb1: return 8;                                   // Y416
    case 0xb2: return 3;                                   // Y444_PLANAR8
    case 0xb3: return 6;                                   // Y444_PLANAR10
    default:
      if (format >= 0x91 && format <= 0x9e) return 1;      // BC1-BC7: at most 1 byte per texel
      return 16;
  }
}

// Conservative estimate of a CUDA array's footprint: texels x element size, rows padded to 512
// bytes, the total rounded up to 64 KiB. The driver's own requirement, when it reports one, is
// charged instead if larger (see docs/isolation.md).
std::uint64_t arrayBytes(std::uint64_t width, std::uint64_t height, std::uint64_t depth, CUarray_format format,
                         unsigned int channels) {
  std::uint64_t row = roundUpSat(mulSat(width == 0 ? 1 : width, texelBytes(format, channels)), kArrayRowAlignment);
  std::uint64_t total = mulSat(mulSat(row, height == 0 ? 1 : height), depth == 0 ? 1 : depth);
  return roundUpSat(total, kArrayAllocationGranule);
}

std::uint64_t mipmappedBytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned int levels) {
  const bool layered = (d.Flags & (kArray3DLayered | kArray3DCubemap)) != 0;
  std::uint64_t total = 0;
  for (unsigned int level = 0; level < (levels == 0 ? 1U : levels) && level < 64; ++level) {
    std::uint64_t w = d.Width >> level, h = d.Height >> level, z = layered ? d.Depth : (d.Depth >> level);
    std::uint64_t bytes = arrayBytes(w == 0 ? 1 : w, d.Height == 0 ? 0 : (h == 0 ? 1 : h),
                                     d.Depth == 0 ? 0 : (z == 0 ? 1 : z), d.Format, d.NumChannels);
    if (__builtin_add_overflow(total, bytes, &total)) return UINT64_MAX;
  }
  return total;
}

// Charges an array's estimate, creates it, then tops the charge up to the driver's reported
// requirement if that is larger.
template <class Handle, class Create, class Requirements, class Destroy>
CUresult chargedArray(const char* api, Handle* handle, std::uint64_t estimate, Create&& create,
                      Requirements&& requirements, Destroy&& destroy) {
  if (handle == nullptr) return create();
  int index = -1;
  CUdevice ordinal = 0;
  CUresult rc = currentDevice(&index, &ordinal);
  if (rc != CUDA_SUCCESS) return rc;
  if ((rc = charge(index, estimate, api)) != CUDA_SUCCESS) return rc;
  if ((rc = create()) != CUDA_SUCCESS) {
    credit(index, estimate);
    TESSERA_TRACE("%s = %d (driver)", api, rc);
    return rc;
  }
  std::uint64_t charged = estimate;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  if (requirements(&req, *handle, ordinal) == CUDA_SUCCESS && req.size > estimate) {
    if (charge(index, req.size - estimate, api) != CUDA_SUCCESS) {
      destroy(*handle);
      credit(index, estimate);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    charged = req.size;
  }
  if (!track(arrays(), reinterpret_cast<std::uint64_t>(*handle), packCharge(charged, index))) {
    destroy(*handle);
    credit(index, charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TESSERA_TRACE("%s = %d array=%p charged %llu bytes", api, rc, static_cast<void*>(*handle),
                static_cast<unsigned long long>(charged));
  return CUDA_SUCCESS;
}

CUresult arrayRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUarray array, CUdevice ordinal) {
  auto fn = TESSERA_REAL_HELPER(cuArrayGetMemoryRequirements);
  return fn == nullptr ? CUDA_ERROR_NOT_FOUND : fn(req, array, ordinal);
}

CUresult mipmappedRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUmipmappedArray array, CUdevice ordinal) {
  auto fn = TESSERA_REAL_HELPER(cuMipmappedArrayGetMemoryRequirements);
  return fn == nullptr ? CUDA_ERROR_NOT_FOUND : fn(req, array, ordinal);
}

void destroyArray(CUarray array) {
  if (auto fn = TESSERA_REAL_FN(cuArrayDestroy)) fn(array);
}

// Limit-adjusted memory figures for the current context's device.
void reportedMemory(std::uint64_t driverFree, std::uint64_t driverTotal, std::uint64_t* freeOut,
                    std::uint64_t* totalOut) {
  int index = -1;
  std::uint64_t limit = 0, used = 0;
  if (!failClosed() && currentDevice(&index) == CUDA_SUCCESS) {
    limit = limitOf(index);
    // This process's context is charged before it is reported on (docs: "Context memory"); when it
    // does not fit, nothing else does either.
    used = contextReady(index) ? usedOf(index) : limit;
  }
  if (limit > driverTotal) limit = driverTotal;
  std::uint64_t available = used >= limit ? 0 : limit - used;
  if (available > driverFree) available = driverFree;  // other tenants may hold the rest
  *freeOut = available;
  *totalOut = limit;
}

}  // namespace

// ---- initialisation -----------------------------------------------------------------------------

CUresult cuInit(unsigned int flags) {
  TESSERA_REQUIRE_REAL(cuInit);
  if (failClosed()) {
    TESSERA_TRACE("cuInit(%u) refused: fail closed", flags);
    return CUDA_ERROR_NOT_PERMITTED;
  }
  CUresult rc = real(flags);
  TESSERA_TRACE("cuInit(%u) = %d", flags, rc);
  return rc;
}

// ---- linear device memory -----------------------------------------------------------------------

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, std::size_t bytes) {
  TESSERA_REQUIRE_REAL(cuMemAlloc_v2);
  return allocDevice(
      Sym::cuMemAlloc_v2, dptr, bytes, [&] { return real(dptr, bytes); },
      [&] {
        if (auto f = TESSERA_REAL_FN(cuMemFree_v2)) f(*dptr);
      });
}

CUresult cuMemAlloc(CUdeviceptrV1* dptr, unsigned int bytes) {
  TESSERA_REQUIRE_REAL(cuMemAlloc);
  if (dptr == nullptr || bytes == 0) return real(dptr, bytes);
  std::uint64_t key = 0;
  CUresult rc = chargedPointerAlloc(
      "cuMemAlloc", &key, bytes, -1,
      [&] {
        CUresult r = real(dptr, bytes);
        key = *dptr;
        return r;
      },
      [&] {
        if (auto f = TESSERA_REAL_FN(cuMemFree)) f(*dptr);
      });
  TESSERA_TRACE("cuMemAlloc(%u bytes) = %d ptr=0x%x", bytes, rc, rc == CUDA_SUCCESS ? *dptr : 0U);
  return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, std::size_t bytes, unsigned int flags) {
  TESSERA_REQUIRE_REAL(cuMemAllocManaged);
  return allocDevice(
      Sym::cuMemAllocManaged, dptr, bytes, [&] { return real(dptr, bytes, flags); },
      [&] {
        if (auto f = TESSERA_REAL_FN(cuMemFree_v2)) f(*dptr);
      });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, std::size_t* pitch, std::size_t width, std::size_t height,
                            unsigned int elementSize) {
  TESSERA_REQUIRE_REAL(cuMemAllocPitch_v2);
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return real(dptr, pitch, width, height, elementSize);
  }
  int index = -1;
  CUresult rc = currentDevice(&index);
  if (rc != CUDA_SUCCESS) return rc;
  // The pitch is only known afterwards: charge an estimate, then settle to pitch x height.
  const std::uint64_t estimate = mulSat(roundUpSat(width, kPitchAlignment), height);
  if ((rc = charge(index, estimate, "cuMemAllocPitch_v2")) != CUDA_SUCCESS) return rc;
  if ((rc = real(dptr, pitch, width, height, elementSize)) != CUDA_SUCCESS) {
    credit(index, estimate);
    TESSERA_TRACE("cuMemAllocPitch_v2(%zu x %zu) = %d (driver)", width, height, rc);
    return rc;
  }
  const std::uint64_t actual = mulSat(*pitch, height);
  bool ok = true;
  if (actual > estimate) {
    ok = charge(index, actual - estimate, "cuMemAllocPitch_v2") == CUDA_SUCCESS;
    if (!ok) credit(index, estimate);
  } else if (actual < estimate) {
    credit(index, estimate - actual);
  }
  if (ok && !track(devicePointers(), *dptr, packCharge(actual, index))) {
    credit(index, actual);
    ok = false;
  }
  if (!ok) {
    if (auto f = TESSERA_REAL_FN(cuMemFree_v2)) f(*dptr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TESSERA_TRACE("cuMemAllocPitch_v2(%zu x %zu) = 0 ptr=0x%llx pitch=%zu charged %llu", width, height, *dptr, *pitch,
                static_cast<unsigned long long>(actual));
  return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch(CUdeviceptrV1* dptr, unsigned int* pitch, unsigned int width, unsigned int height,
                         unsigned int elementSize) {
  TESSERA_REQUIRE_REAL(cuMemAllocPitch);
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return real(dptr, pitch, width, height, elementSize);
  }
  int index = -1;
  CUresult rc = currentDevice(&index);
  if (rc != CUDA_SUCCESS) return rc;
  const std::uint64_t estimate = mulSat(roundUpSat(width, kPitchAlignment), height);
  if ((rc = charge(index, estimate, "cuMemAllocPitch")) != CUDA_SUCCESS) return rc;
  if ((rc = real(dptr, pitch, width, height, elementSize)) != CUDA_SUCCESS) {
    credit(index, estimate);
    return rc;
  }
  const std::uint64_t actual = static_cast<std::uint64_t>(*pitch) * height;
  bool ok = true;
  if (actual > estimate) {
    ok = charge(index, actual - estimate, "cuMemAllocPitch") == CUDA_SUCCESS;
    if (!ok) credit(index, estimate);
  } else if (actual < estimate) {
    credit(index, estimate - actual);
  }
  if (ok && !track(devicePointers(), *dptr, packCharge(actual, index))) {
    credit(index, actual);
    ok = false;
  }
  if (!ok) {
    if (auto f = TESSERA_REAL_FN(cuMemFree)) f(*dptr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TESSERA_TRACE("cuMemAllocPitch(%u x %u) = 0 ptr=0x%x pitch=%u", width, height, *dptr, *pitch);
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  TESSERA_REQUIRE_REAL(cuMemFree_v2);
  CUresult rc = chargedFree(devicePointers(), dptr, [&] { return real(dptr); });
  TESSERA_TRACE("cuMemFree_v2(0x%llx) = %d", dptr, rc);
  return rc;
}

CUresult cuMemFree(CUdeviceptrV1 dptr) {
  TESSERA_REQUIRE_REAL(cuMemFree);
  CUresult rc = chargedFree(devicePointers(), dptr, [&] { return real(dptr); });
  TESSERA_TRACE("cuMemFree(0x%x) = %d", dptr, rc);
  return rc;
}

// ---- stream-ordered allocation ------------------------------------------------------------------
// The credit of an asynchronous free happens when it is enqueued, not when the stream reaches it;
// see docs/isolation.md.

#define TESSERA_ASYNC_ALLOC(name, freeName)                                                          \
  CUresult name(CUdeviceptr* dptr, std::size_t bytes, CUstream stream) {                             \
    TESSERA_REQUIRE_REAL(name);                                                                      \
    return allocDevice(                                                                              \
        Sym::name, dptr, bytes, [&] { return real(dptr, bytes, stream); },                           \
        [&] {                                                                                        \
          if (auto f = TESSERA_REAL_FN(freeName)) f(*dptr, stream);                                  \
        });                                                                                          \
  }
TESSERA_ASYNC_ALLOC(cuMemAllocAsync, cuMemFreeAsync)
TESSERA_ASYNC_ALLOC(cuMemAllocAsync_ptsz, cuMemFreeAsync_ptsz)
#undef TESSERA_ASYNC_ALLOC

#define TESSERA_POOL_ALLOC(name, freeName)                                                           \
  CUresult name(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, CUstream stream) {          \
    TESSERA_REQUIRE_REAL(name);                                                                      \
    return allocDevice(                                                                              \
        Sym::name, dptr, bytes, [&] { return real(dptr, bytes, pool, stream); },                     \
        [&] {                                                                                        \
          if (auto f = TESSERA_REAL_FN(freeName)) f(*dptr, stream);                                  \
        });                                                                                          \
  }
TESSERA_POOL_ALLOC(cuMemAllocFromPoolAsync, cuMemFreeAsync)
TESSERA_POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz, cuMemFreeAsync_ptsz)
#undef TESSERA_POOL_ALLOC

#define TESSERA_ASYNC_FREE(name)                                                               \
  CUresult name(CUdeviceptr dptr, CUstream stream) {                                           \
    TESSERA_REQUIRE_REAL(name);                                                                \
    CUresult rc = chargedFree(devicePointers(), dptr, [&] { return real(dptr, stream); });     \
    TESSERA_TRACE(#name "(0x%llx) = %d", dptr, rc);                                            \
    return rc;                                                                                 \
  }
TESSERA_ASYNC_FREE(cuMemFreeAsync)
TESSERA_ASYNC_FREE(cuMemFreeAsync_ptsz)
#undef TESSERA_ASYNC_FREE

// ---- virtual memory management -----------------------------------------------------------------

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  TESSERA_REQUIRE_REAL(cuMemCreate);
  // Only device-resident physical memory is charged; host / host-NUMA locations are not GPU memory.
  if (handle == nullptr || prop == nullptr || size == 0 || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    CUresult rc = real(handle, size, prop, flags);
    TESSERA_TRACE("cuMemCreate(%zu bytes, not device memory) = %d", size, rc);
    return rc;
  }
  int index = -1;
  CUresult rc = deviceIndex(prop->location.id, &index);
  if (rc != CUDA_SUCCESS) return rc;
  if ((rc = charge(index, size, "cuMemCreate")) != CUDA_SUCCESS) return rc;
  if ((rc = real(handle, size, prop, flags)) != CUDA_SUCCESS) {
    credit(index, size);
    TESSERA_TRACE("cuMemCreate(%zu bytes, device %d) = %d (driver)", size, prop->location.id, rc);
    return rc;
  }
  if (!track(physicalHandles(), *handle, packCharge(size, index))) {
    if (auto f = TESSERA_REAL_FN(cuMemRelease)) f(*handle);
    credit(index, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TESSERA_TRACE("cuMemCreate(%zu bytes, device %d) = 0 handle=0x%llx", size, prop->location.id, *handle);
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  TESSERA_REQUIRE_REAL(cuMemRelease);
  CUresult rc = chargedFree(physicalHandles(), handle, [&] { return real(handle); });
  TESSERA_TRACE("cuMemRelease(0x%llx) = %d", handle, rc);
  return rc;
}

// ---- CUDA arrays --------------------------------------------------------------------------------

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  TESSERA_REQUIRE_REAL(cuArrayCreate_v2);
  if (desc == nullptr) return real(array, desc);
  return chargedArray(
      "cuArrayCreate_v2", array, arrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels),
      [&] { return real(array, desc); }, arrayRequirements, destroyArray);
}

CUresult cuArrayCreate(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_V1* desc) {
  TESSERA_REQUIRE_REAL(cuArrayCreate);
  if (desc == nullptr) return real(array, desc);
  return chargedArray(
      "cuArrayCreate", array, arrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels),
      [&] { return real(array, desc); }, arrayRequirements, destroyArray);
}

CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  TESSERA_REQUIRE_REAL(cuArray3DCreate_v2);
  if (desc == nullptr) return real(array, desc);
  return chargedArray(
      "cuArray3DCreate_v2", array,
      arrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels),
      [&] { return real(array, desc); }, arrayRequirements, destroyArray);
}

CUresult cuArray3DCreate(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR_V1* desc) {
  TESSERA_REQUIRE_REAL(cuArray3DCreate);
  if (desc == nullptr) return real(array, desc);
  return chargedArray(
      "cuArray3DCreate", array, arrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels),
      [&] { return real(array, desc); }, arrayRequirements, destroyArray);
}

CUresult cuArrayDestroy(CUarray array) {
  TESSERA_REQUIRE_REAL(cuArrayDestroy);
  CUresult rc = chargedFree(arrays(), reinterpret_cast<std::uint64_t>(array), [&] { return real(array); });
  TESSERA_TRACE("cuArrayDestroy(%p) = %d", static_cast<void*>(array), rc);
  return rc;
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels) {
  TESSERA_REQUIRE_REAL(cuMipmappedArrayCreate);
  if (desc == nullptr) return real(array, desc, levels);
  return chargedArray(
      "cuMipmappedArrayCreate", array, mipmappedBytes(*desc, levels), [&] { return real(array, desc, levels); },
      mipmappedRequirements, [](CUmipmappedArray a) {
        if (auto f = TESSERA_REAL_FN(cuMipmappedArrayDestroy)) f(a);
      });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  TESSERA_REQUIRE_REAL(cuMipmappedArrayDestroy);
  CUresult rc = chargedFree(arrays(), reinterpret_cast<std::uint64_t>(array), [&] { return real(array); });
  TESSERA_TRACE("cuMipmappedArrayDestroy(%p) = %d", static_cast<void*>(array), rc);
  return rc;
}

// ---- queries: report the limit ------------------------------------------------------------------

CUresult cuMemGetInfo_v2(std::size_t* freeOut, std::size_t* totalOut) {
  TESSERA_REQUIRE_REAL(cuMemGetInfo_v2);
  std::size_t driverFree = 0, driverTotal = 0;
  CUresult rc = real(&driverFree, &driverTotal);
  if (rc != CUDA_SUCCESS) {
    TESSERA_TRACE("cuMemGetInfo_v2 = %d (driver)", rc);
    return rc;
  }
  std::uint64_t f = 0, t = 0;
  reportedMemory(driverFree, driverTotal, &f, &t);
  if (freeOut != nullptr) *freeOut = f;
  if (totalOut != nullptr) *totalOut = t;
  TESSERA_TRACE("cuMemGetInfo_v2 = 0 free=%llu total=%llu", static_cast<unsigned long long>(f),
                static_cast<unsigned long long>(t));
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int* freeOut, unsigned int* totalOut) {
  TESSERA_REQUIRE_REAL(cuMemGetInfo);
  unsigned int driverFree = 0, driverTotal = 0;
  CUresult rc = real(&driverFree, &driverTotal);
  if (rc != CUDA_SUCCESS) {
    TESSERA_TRACE("cuMemGetInfo = %d (driver)", rc);
    return rc;
  }
  std::uint64_t f = 0, t = 0;
  reportedMemory(driverFree, driverTotal, &f, &t);
  if (freeOut != nullptr) *freeOut = static_cast<unsigned int>(f);   // <= driverFree, fits
  if (totalOut != nullptr) *totalOut = static_cast<unsigned int>(t);
  TESSERA_TRACE("cuMemGetInfo = 0 free=%llu total=%llu", static_cast<unsigned long long>(f),
                static_cast<unsigned long long>(t));
  return CUDA_SUCCESS;
}

namespace {
std::uint64_t reportedTotal(CUdevice dev, std::uint64_t driverTotal) {
  int index = -1;
  std::uint64_t limit = 0;
  if (!failClosed() && deviceIndex(dev, &index) == CUDA_SUCCESS) limit = limitOf(index);
  return limit < driverTotal ? limit : driverTotal;
}
}  // namespace

CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  TESSERA_REQUIRE_REAL(cuDeviceTotalMem_v2);
  if (bytes == nullptr) return real(bytes, dev);
  std::size_t driverTotal = 0;
  CUresult rc = real(&driverTotal, dev);
  if (rc != CUDA_SUCCESS) return rc;
  *bytes = reportedTotal(dev, driverTotal);
  TESSERA_TRACE("cuDeviceTotalMem_v2(%d) = 0 total=%zu", dev, *bytes);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  TESSERA_REQUIRE_REAL(cuDeviceTotalMem);
  if (bytes == nullptr) return real(bytes, dev);
  unsigned int driverTotal = 0;
  CUresult rc = real(&driverTotal, dev);
  if (rc != CUDA_SUCCESS) return rc;
  *bytes = static_cast<unsigned int>(reportedTotal(dev, driverTotal));
  TESSERA_TRACE("cuDeviceTotalMem(%d) = 0 total=%u", dev, *bytes);
  return CUDA_SUCCESS;
}
