// tessera-gpu-memcheck: checks libtessera-cuda.so against a real GPU and driver.
//
//   LD_PRELOAD=/path/libtessera-cuda.so GPU_MEMORY_LIMIT=<bytes> tessera-gpu-memcheck [chunk MiB]
//
// Through the CUDA runtime (which reaches the driver via cuGetProcAddress), it checks that:
//   1. cudaMemGetInfo reports the limit as the total;
//   2. cudaMalloc in chunks stops with cudaErrorMemoryAllocation at or below the limit;
//   3. freeing credits: after cudaFree the same amount can be allocated again;
//   4. cudaMallocAsync (legacy and per-thread default stream) and cudaMallocManaged are refused
//      beyond the limit too.
// Prints one line per check and exits 0 when all hold. Without the interposer (or without
// GPU_MEMORY_LIMIT) it only reports what it sees and exits 2.

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

cudaError_t tesseraMallocAsyncPerThread(void** p, size_t bytes);
cudaError_t tesseraFreeAsyncPerThread(void* p);
cudaError_t tesseraSyncPerThread();

namespace {

int failures = 0;

void check(bool ok, const char* what, unsigned long long a, unsigned long long b) {
  std::printf("%s %s (%llu vs %llu)\n", ok ? "PASS" : "FAIL", what, a, b);
  if (!ok) ++failures;
}

// Allocates `chunk`-sized blocks until the runtime refuses; returns the bytes obtained.
unsigned long long fill(size_t chunk, std::vector<void*>* blocks, cudaError_t* last) {
  unsigned long long total = 0;
  while (true) {
    void* p = nullptr;
    *last = cudaMalloc(&p, chunk);
    if (*last != cudaSuccess) break;
    blocks->push_back(p);
    total += chunk;
  }
  cudaGetLastError();  // clear the sticky-free error state for later calls
  return total;
}

void drain(std::vector<void*>* blocks) {
  for (void* p : *blocks) cudaFree(p);
  blocks->clear();
}

}  // namespace

int main(int argc, char** argv) {
  const size_t chunk = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64) << 20;
  const char* limitText = std::getenv("GPU_MEMORY_LIMIT");
  const unsigned long long limit = limitText ? std::strtoull(limitText, nullptr, 10) : 0;
  const bool preloaded = std::getenv("LD_PRELOAD") && std::strstr(std::getenv("LD_PRELOAD"), "tessera-cuda");

  cudaError_t rc = cudaSetDevice(0);
  if (rc != cudaSuccess) {
    std::printf("cudaSetDevice: %s\n", cudaGetErrorString(rc));
    return 1;
  }
  size_t freeBytes = 0, totalBytes = 0;
  rc = cudaMemGetInfo(&freeBytes, &totalBytes);
  std::printf("cudaMemGetInfo: %s free=%zu total=%zu\n", cudaGetErrorString(rc), freeBytes, totalBytes);
  if (!preloaded || limit == 0) {
    std::printf("libtessera-cuda.so is not preloaded or GPU_MEMORY_LIMIT is unset: nothing to verify\n");
    return 2;
  }
  check(totalBytes == limit, "cudaMemGetInfo total equals GPU_MEMORY_LIMIT", totalBytes, limit);
  check(freeBytes <= limit, "cudaMemGetInfo free within the limit", freeBytes, limit);

  std::vector<void*> blocks;
  cudaError_t last = cudaSuccess;
  unsigned long long got = fill(chunk, &blocks, &last);
  std::printf("cudaMalloc stopped after %llu bytes: %s\n", got, cudaGetErrorString(last));
  check(got <= limit, "cudaMalloc total within the limit", got, limit);
  check(got + chunk > limit - (limit / 10), "cudaMalloc reached close to the limit", got + chunk, limit);
  check(last == cudaErrorMemoryAllocation, "refusal is an out-of-memory error", last, cudaErrorMemoryAllocation);

  void* extra = nullptr;
  check(cudaMallocManaged(&extra, chunk) == cudaErrorMemoryAllocation, "cudaMallocManaged refused when full", 0, 0);
  cudaGetLastError();
  check(cudaMallocAsync(&extra, chunk, 0) == cudaErrorMemoryAllocation, "cudaMallocAsync refused when full", 0, 0);
  cudaGetLastError();
  check(tesseraMallocAsyncPerThread(&extra, chunk) == cudaErrorMemoryAllocation,
        "cudaMallocAsync (per-thread stream) refused when full", 0, 0);
  cudaGetLastError();

  drain(&blocks);
  cudaDeviceSynchronize();
  unsigned long long again = fill(chunk, &blocks, &last);
  check(again == got, "after cudaFree the same amount is available again", again, got);
  drain(&blocks);

  void* p = nullptr;
  rc = tesseraMallocAsyncPerThread(&p, chunk);
  check(rc == cudaSuccess, "cudaMallocAsync (per-thread stream) within the limit", rc, cudaSuccess);
  if (rc == cudaSuccess) tesseraFreeAsyncPerThread(p);
  tesseraSyncPerThread();

  std::printf("%s: %d failed check(s)\n", failures == 0 ? "OK" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
