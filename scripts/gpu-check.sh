#!/usr/bin/env bash
# Real-GPU check of the hard-isolation interposer (docs/isolation.md, "Verifying on a real GPU").
#
#   scripts/gpu-check.sh            builds libtessera-cuda.so alone (cmake -S src/isolation)
#   LIB=/path/libtessera-cuda.so scripts/gpu-check.sh     uses that library
#
# On a machine with an NVIDIA GPU and the CUDA toolkit it compiles a small CUDA program with nvcc,
# runs it with the interposer preloaded and GPU_MEMORY_LIMIT set, and checks:
#   1. allocations beyond the limit fail with CUDA_ERROR_OUT_OF_MEMORY (driver API) and
#      cudaErrorMemoryAllocation (runtime API), and the process got close to the limit first;
#   2. cuMemGetInfo and nvidia-smi (NVML) report the limit as the total;
#   3. two processes with the same region share one limit;
#   4. PyTorch's caching allocator, when torch is installed, sees the limit and hits it.
# Without a GPU (or without nvcc) it says so and exits 0: CI runs it everywhere and it only does
# something on GPU runners. Exit 1 when a check fails.
#
# Variables: LIMIT_MIB (default 4096), GPU (CUDA device ordinal, default 0), NVCC, BUILD (folder
# for the standalone interposer build, default build-gpu-check), KEEP=1 keeps the work folder.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIMIT_MIB=${LIMIT_MIB:-4096}
LIMIT=$((LIMIT_MIB * 1024 * 1024))
GPU=${GPU:-0}

skip() {
  echo "gpu-check: SKIPPED: $*"
  exit 0
}

command -v nvidia-smi >/dev/null 2>&1 || skip "no nvidia-smi on this machine (no NVIDIA driver)"
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${GPUS:-0}" -gt 0 ] || skip "nvidia-smi lists no GPU"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || skip "no CUDA toolkit (nvcc not found; set NVCC)"

WORK=$(mktemp -d /tmp/tessera-gpu-check.XXXXXX)
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; fi
FAILED=0
pass() { echo "PASS: $*"; }
fail() {
  echo "FAIL: $*"
  FAILED=1
}
expect() { # expect <actual> <wanted> <what>
  if [ "$1" = "$2" ]; then pass "$3"; else fail "$3: got '$1', want '$2'"; fi
}

# ---- the interposer -----------------------------------------------------------------------------
if [ -z "${LIB:-}" ]; then
  BUILD=${BUILD:-$ROOT/build-gpu-check}
  cmake -S "$ROOT/src/isolation" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" >/dev/null
  LIB=$BUILD/interposer/libtessera-cuda.so
fi
[ -f "$LIB" ] || { echo "gpu-check: $LIB does not exist"; exit 1; }
echo "gpu-check: $(nvidia-smi -L | sed -n "$((GPU + 1))p"), limit ${LIMIT_MIB} MiB, interposer $LIB"

# ---- the CUDA program -----------------------------------------------------------------------------
cat >"$WORK/check.cu" <<'CUDA'
// probe fill            allocate 64 MiB chunks (driver API) until refused; print what happened
// probe hold <MiB>      allocate that much, print "ready", hold it until stdin closes
// probe try <MiB>       try one allocation of that much; print its result
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  // The driver API first (the primary context, made current), as the CUDA runtime would.
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS || cuCtxSetCurrent(context) != CUDA_SUCCESS) {
    std::printf("init=failed\n");
    return 3;
  }
  size_t freeBytes = 0, total = 0;
  const CUresult info = cuMemGetInfo(&freeBytes, &total);
  std::printf("meminfo=%d free=%zu total=%zu\n", static_cast<int>(info), freeBytes, total);
  const size_t mib = 1 << 20;
  if (std::strcmp(argv[1], "fill") == 0) {
    std::vector<CUdeviceptr> held;
    size_t allocated = 0;
    CUresult rc = CUDA_SUCCESS;
    while (true) {
      CUdeviceptr p = 0;
      rc = cuMemAlloc(&p, 64 * mib);
      if (rc != CUDA_SUCCESS) break;
      held.push_back(p);
      allocated += 64 * mib;
    }
    void* q = nullptr;
    const cudaError_t runtime = cudaMalloc(&q, 64 * mib);
    std::printf("allocated=%zu refused_rc=%d runtime_rc=%d\n", allocated, static_cast<int>(rc),
                static_cast<int>(runtime));
    for (CUdeviceptr p : held) cuMemFree(p);
    CUdeviceptr again = 0;
    std::printf("after_free_rc=%d\n", static_cast<int>(cuMemAlloc(&again, allocated / 2)));
    return 0;
  }
  if (std::strcmp(argv[1], "hold") == 0 || std::strcmp(argv[1], "try") == 0) {
    CUdeviceptr p = 0;
    const size_t bytes = std::strtoull(argv[2], nullptr, 10) * mib;
    std::printf("alloc_rc=%d\n", static_cast<int>(cuMemAlloc(&p, bytes)));
    std::fflush(stdout);
    if (argv[1][0] == 'h') {
      std::printf("ready\n");
      std::fflush(stdout);
      char c;
      while (read(0, &c, 1) > 0) {
      }
    }
    return 0;
  }
  return 2;
}
CUDA
"$NVCC" -O2 -o "$WORK/probe" "$WORK/check.cu" -lcuda >/dev/null
echo "gpu-check: built the probe with $("$NVCC" --version | tail -n1)"

export CUDA_VISIBLE_DEVICES=$GPU
REGION=$WORK/gpu.region
under() {  # under <region> <command...>: run with the interposer and the limit
  local region=$1
  shift
  env LD_PRELOAD="$LIB" GPU_MEMORY_LIMIT="$LIMIT" TESSERA_ISOLATION_REGION="$region" "$@"
}
value() { sed -n "s/.*$1=\([-0-9]*\).*/\1/p" | sed -n 1p; }

# ---- 1 and 2: the limit holds and queries report it ----------------------------------------------
OUT=$(under "$REGION" "$WORK/probe" fill 2>&1) || true
printf '%s\n' "$OUT" | sed 's/^/  probe: /'
TOTAL=$(echo "$OUT" | value total)
ALLOCATED=$(echo "$OUT" | value allocated)
REFUSED=$(echo "$OUT" | value refused_rc)
RUNTIME=$(echo "$OUT" | value runtime_rc)
expect "$TOTAL" "$LIMIT" "cuMemGetInfo reports the limit as the total"
expect "$REFUSED" 2 "the allocation over the limit fails with CUDA_ERROR_OUT_OF_MEMORY (2)"
expect "$RUNTIME" 2 "cudaMalloc over the limit fails with cudaErrorMemoryAllocation (2)"
if [ -n "$ALLOCATED" ] && [ "$ALLOCATED" -le "$LIMIT" ] && [ "$ALLOCATED" -ge $((LIMIT / 2)) ]; then
  pass "allocated $((ALLOCATED >> 20)) MiB of the $LIMIT_MIB MiB limit (the rest: this process's CUDA context and the last chunk)"
else
  fail "allocated ${ALLOCATED:-?} bytes: want between half the limit and the limit"
fi
expect "$(echo "$OUT" | value after_free_rc)" 0 "memory freed is available again"
NVSMI=$(under "$WORK/smi.region" nvidia-smi --id="$GPU" --query-gpu=memory.total --format=csv,noheader,nounits 2>&1 | sed -n 1p | tr -d ' ')
expect "$NVSMI" "$LIMIT_MIB" "nvidia-smi (NVML) under the interposer reports the limit as memory.total (MiB)"

# ---- 3: two processes, one limit -------------------------------------------------------------------
SHARED=$WORK/shared.region
# Each process also pays for its CUDA context (hundreds of MiB on a real GPU): 40% + 70% cannot
# both fit, 40% + 10% and two contexts do.
FIRST=$((LIMIT_MIB * 4 / 10))
mkfifo "$WORK/hold"
under "$SHARED" "$WORK/probe" hold "$FIRST" <"$WORK/hold" >"$WORK/holder.out" 2>&1 &
HOLDER=$!
exec 4>"$WORK/hold" # the holder holds its memory until this closes
for _ in $(seq 1 300); do
  grep -q '^ready' "$WORK/holder.out" 2>/dev/null && break
  kill -0 "$HOLDER" 2>/dev/null || break
  sleep 0.1
done
sed 's/^/  holder: /' "$WORK/holder.out"
SECOND=$(under "$SHARED" "$WORK/probe" try $((LIMIT_MIB * 7 / 10)) 2>&1 | value alloc_rc)
THIRD=$(under "$SHARED" "$WORK/probe" try $((LIMIT_MIB / 10)) 2>&1 | value alloc_rc)
expect "$(value alloc_rc <"$WORK/holder.out")" 0 "the first process holds $FIRST MiB"
expect "$SECOND" 2 "a second process cannot take 70% of the limit meanwhile (one limit for both)"
expect "$THIRD" 0 "a second process gets what is left of the limit"
exec 4>&-
wait "$HOLDER" || true

# ---- 4: PyTorch --------------------------------------------------------------------------------------
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  PY=$(under "$WORK/torch.region" python3 - "$LIMIT" <<'PY' 2>&1 || true
import sys, torch
limit = int(sys.argv[1])
free, total = torch.cuda.mem_get_info()
print(f"torch_total={total}")
blocks = []
try:
    while True:
        blocks.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    print("torch_oom=1")
print(f"torch_allocated={sum(b.numel() for b in blocks)}")
PY
)
  echo "$PY" | grep '^torch_' | sed 's/^/  torch: /'
  expect "$(echo "$PY" | value torch_total)" "$LIMIT" "torch.cuda.mem_get_info reports the limit as the total"
  TORCH_ALLOCATED=$(echo "$PY" | value torch_allocated)
  if [ "$(echo "$PY" | value torch_oom)" = 1 ] && [ -n "$TORCH_ALLOCATED" ] && [ "$TORCH_ALLOCATED" -le "$LIMIT" ]; then
    pass "PyTorch's caching allocator stopped at the limit with OutOfMemoryError ($((TORCH_ALLOCATED >> 20)) MiB)"
  else
    fail "PyTorch did not stop at the limit"
  fi
else
  echo "SKIP: PyTorch with CUDA is not installed (python3 -c 'import torch')"
fi

if [ "$FAILED" = 0 ]; then
  echo "gpu-check: all checks passed"
else
  echo "gpu-check: some checks FAILED"
fi
exit "$FAILED"
