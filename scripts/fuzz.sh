#!/usr/bin/env bash
# Runs every libFuzzer target in test/fuzz for SECONDS each (default 60).
#   - installs clang and the libFuzzer runtime (Debian 12: clang, libclang-rt-14-dev) when missing
#   - configures build-fuzz/ with clang, ASan+UBSan and coverage instrumentation on every library,
#     and builds only the fuzz targets (and the libraries they need)
#   - runs each target on a fresh copy of test/fuzz/corpus/<target>/ (the repo's corpus is not
#     modified) with -max_total_time=SECONDS and -timeout=TIMEOUT per input (a hang is a finding),
#     one target per core at a time
# Prints one line per target (executions, result) and exits non-zero on any crash, hang, leak or
# sanitizer report; the reproducer and the log stay in build-fuzz/findings/<target>/.
# Usage: bash scripts/fuzz.sh [SECONDS]     (env: FUZZ_BUILD_DIR, FUZZ_TIMEOUT, FUZZ_TARGETS="a b")
set -uo pipefail

SECONDS_EACH=${1:-60}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
TIMEOUT=${FUZZ_TIMEOUT:-10}
JOBS=$(nproc 2>/dev/null || echo 2)

# ---- clang and libFuzzer
links_fuzzer() {
  local dir
  dir=$(mktemp -d) || return 1
  printf '%s\n' 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    >"$dir/t.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$dir/t.cpp" -o "$dir/t" >/dev/null 2>&1
  local rc=$?
  rm -rf "$dir"
  return $rc
}
if ! command -v clang++ >/dev/null 2>&1 || ! links_fuzzer; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "fuzz: clang with libFuzzer is missing; run as root or: sudo apt-get install -y clang libclang-rt-14-dev" >&2
    exit 1
  fi
  echo "fuzz: installing clang and the libFuzzer runtime"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null || exit 1
  if ! links_fuzzer; then
    echo "fuzz: clang++ -fsanitize=fuzzer still does not link" >&2
    exit 1
  fi
fi

# ---- build
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
T0=$(date +%s)
echo "==== fuzz: configure and build in $BUILD/ ($JOBS jobs)"
if ! CC=clang CXX=clang++ cmake -S . -B "$BUILD" "${LAUNCHER[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
       -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" \
       -DTESSERA_SANITIZE=ON -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=OFF >/dev/null ||
   ! cmake --build "$BUILD" -j "$JOBS" --target tessera_fuzz; then
  echo "fuzz: BUILD FAILED after $(($(date +%s) - T0)) s"
  exit 1
fi
T1=$(date +%s)
echo "fuzz: built in $((T1 - T0)) s"

# ---- run
mapfile -t ALL < <(find "$BUILD/test/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x -printf '%f\n' | sed 's/^fuzz_//' | sort)
TARGETS=(${FUZZ_TARGETS:-${ALL[@]}})
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  echo "fuzz: no targets were built" >&2
  exit 1
fi
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# fuzz_one TARGET: one target on a fresh copy of its corpus; its summary line goes to
# $BUILD/findings/TARGET/result (the log stays beside it when it failed).
fuzz_one() {
  local t=$1 work="$BUILD/fuzz-run/$1" findings="$BUILD/findings/$1" start end rc runs artifact
  rm -rf "$work" "$findings"
  mkdir -p "$work/corpus" "$findings"
  if [[ -d test/fuzz/corpus/$t ]]; then cp -r "test/fuzz/corpus/$t/." "$work/corpus/"; fi
  start=$(date +%s)
  "$BUILD/test/fuzz/fuzz_$t" "$work/corpus" -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" \
    -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 -artifact_prefix="$findings/" </dev/null \
    >"$findings/log" 2>&1
  rc=$?
  end=$(date +%s)
  runs=$(grep -aE '^stat::number_of_executed_units:' "$findings/log" | awk '{print $2}')
  if [[ $rc -eq 0 ]]; then
    echo "fuzz_$t: ok: ${runs:-?} executions in $((end - start)) s" >"$findings/result"
    rm -f "$findings/log"
  else
    artifact=$(ls "$findings" | grep -E "^(crash|timeout|leak|oom|slow-unit)-" | sed -n 1p)
    echo "fuzz_$t: FAILED (exit $rc) after ${runs:-?} executions: $findings/${artifact:-log}" >"$findings/result"
  fi
}
# One target per core at a time (each is one process and still runs SECONDS_EACH of its own).
running=0
for t in "${TARGETS[@]}"; do
  echo "==== fuzz_$t: ${SECONDS_EACH} s"
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= JOBS)); then
    wait -n
    running=$((running - 1))
  fi
done
wait
STATUS=0
LINES=()
for t in "${TARGETS[@]}"; do
  findings="$BUILD/findings/$t"
  line=$(cat "$findings/result" 2>/dev/null || echo "fuzz_$t: FAILED (no result): $findings")
  LINES+=("$line")
  if [[ $line != "fuzz_$t: ok:"* ]]; then
    STATUS=1
    grep -aE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error|SUMMARY' "$findings/log" 2>/dev/null | head -5
  fi
done
T2=$(date +%s)
echo
echo "==== fuzz summary (build $((T1 - T0)) s, run $((T2 - T1)) s)"
for l in "${LINES[@]}"; do echo "$l"; done
exit $STATUS
