#!/usr/bin/env bash
# Every test, twice, then the fuzzers: installs what is missing, then
#   1. build/       Release, everything (tessera, unit tests, scenarios, tessera-bench); ctest
#   2. build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (-O1 -g1 for the code under test, test bodies -O0; assertions on), no bench; ctest
#   3. build-fuzz/  clang + libFuzzer: every target in test/fuzz for FUZZ_SECONDS (default 60) each
#                   (scripts/fuzz.sh; any crash, hang or sanitizer report fails)
# Each ctest runs one test per core (on 2 cores the sanitizer build's took 354 s, 660 s one by one).
# Prints one summary line per build and a closing "total: N passed, M failed" line; exits non-zero if
# any build or test fails. The shared acceptance scenarios run when ../shared/scenarios exists.
# Usage (from anywhere, as root on a fresh Debian 12 machine): bash scripts/test.sh
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

bash scripts/install-deps.sh || exit 1

JOBS=$(nproc 2>/dev/null || echo 2)
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# LeakSanitizer works here; a UBSan finding stops the test with a stack trace.
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# No test may wait on a terminal.
exec </dev/null

SUMMARY=()
TOTAL_PASSED=0
TOTAL_FAILED=0
STATUS=0

# run_build NAME DIR CMAKE_ARGS...: configure, build, ctest; records one summary line.
run_build() {
  local name=$1 dir=$2
  shift 2
  local log="$dir/ctest.log" start end build_s test_s
  echo
  echo "==== $name: configure and build in $dir/ ($JOBS jobs)"
  start=$(date +%s)
  mkdir -p "$dir"
  if ! cmake -S . -B "$dir" "${LAUNCHER[@]}" "$@" || ! cmake --build "$dir" -j "$JOBS"; then
    end=$(date +%s)
    SUMMARY+=("$name: BUILD FAILED after $((end - start)) s")
    TOTAL_FAILED=$((TOTAL_FAILED + 1))
    STATUS=1
    return
  fi
  end=$(date +%s)
  build_s=$((end - start))

  echo
  echo "==== $name: ctest"
  start=$(date +%s)
  (cd "$dir" && ctest -j "$JOBS" --output-on-failure --timeout 900) 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  end=$(date +%s)
  test_s=$((end - start))

  # ctest's closing count: "100% tests passed, 0 tests failed out of 57"
  local line failed total
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [[ -n "$line" ]]; then
    failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  else
    failed=1 total=1  # ctest died or found no tests: count it as a failure
  fi
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
  if [[ $total -eq 0 ]]; then failed=1; fi
  TOTAL_PASSED=$((TOTAL_PASSED + total - failed))
  TOTAL_FAILED=$((TOTAL_FAILED + failed))
  if [[ $rc -ne 0 || $failed -ne 0 ]]; then STATUS=1; fi
  local verdict=ok
  [[ $rc -ne 0 || $failed -ne 0 ]] && verdict=FAILED
  SUMMARY+=("$name: $verdict: $((total - failed))/$total tests passed (build ${build_s} s, tests ${test_s} s)")
}

# run_examples DIR: the README's demo and the other examples are scenarios too; they must keep holding.
run_examples() {
  local dir=$1 log="$1/examples.log"
  [[ -x "$dir/src/app/tessera" ]] || return
  echo
  echo "==== examples: tessera check config/examples"
  "$dir/src/app/tessera" check config/examples 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]} line passed failed
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
  passed=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"${line:-0 passed}")
  failed=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"${line:-x 1 failed}")
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
  TOTAL_PASSED=$((TOTAL_PASSED + passed))
  TOTAL_FAILED=$((TOTAL_FAILED + failed))
  local verdict=ok
  if [[ $rc -ne 0 || $failed -ne 0 ]]; then verdict=FAILED STATUS=1; fi
  SUMMARY+=("examples: $verdict: $passed passed, $failed failed (config/examples)")
}

# run_fuzz SECONDS: scripts/fuzz.sh; one summary line with the targets that ran and the time taken.
run_fuzz() {
  local seconds=$1 log=build-fuzz/fuzz.log start end
  echo
  echo "==== fuzz: scripts/fuzz.sh $seconds"
  mkdir -p build-fuzz
  start=$(date +%s)
  bash scripts/fuzz.sh "$seconds" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  end=$(date +%s)
  local ok failed
  ok=$(grep -cE '^fuzz_[a-z_]+: ok:' "$log")
  failed=$(grep -cE '^fuzz_[a-z_]+: FAILED' "$log")
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi  # the build (or clang) failed
  TOTAL_PASSED=$((TOTAL_PASSED + ok))
  TOTAL_FAILED=$((TOTAL_FAILED + failed))
  local verdict=ok
  if [[ $rc -ne 0 || $failed -ne 0 ]]; then verdict=FAILED STATUS=1; fi
  SUMMARY+=("fuzz: $verdict: $ok/$((ok + failed)) targets clean, ${seconds} s each ($((end - start)) s with the build)")
}

T0=$(date +%s)
run_build "release" build -DCMAKE_BUILD_TYPE=Release \
  -DTESSERA_SANITIZE=OFF -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=ON
run_examples build
run_build "asan+ubsan" build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DTESSERA_SANITIZE=ON -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=OFF
run_fuzz "${FUZZ_SECONDS:-60}"
T1=$(date +%s)

echo
echo "==== summary ($((T1 - T0)) s)"
for s in "${SUMMARY[@]}"; do echo "$s"; done
echo "total: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
exit $STATUS
