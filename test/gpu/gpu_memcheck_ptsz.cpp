// Compiled with per-thread default-stream semantics: the runtime fetches the driver's _ptsz
// entry points (cuGetProcAddress with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda_runtime_api.h>

cudaError_t tesseraMallocAsyncPerThread(void** p, size_t bytes) { return cudaMallocAsync(p, bytes, 0); }
cudaError_t tesseraFreeAsyncPerThread(void* p) { return cudaFreeAsync(p, 0); }
cudaError_t tesseraSyncPerThread() { return cudaStreamSynchronize(0); }
