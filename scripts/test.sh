#!/usr/bin/env bash
# Builds duet (Release) and runs every test; then builds the unit and
# bad-input tests with ASan+UBSan and runs them again under the sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

# The fuzz smoke (scripts/fuzz.sh: its own clang build in build-fuzz/, then
# 20 s per target on one core) runs beside the Release tests and the
# sanitizer build below, which leave cores idle part of the time; it has its
# own process group so that a failure here stops it too.
mkdir -p build-fuzz
setsid -w scripts/fuzz.sh 20 >build-fuzz/fuzz.log 2>&1 &
fuzz_pid=$!
trap 'kill -- -"$fuzz_pid" 2>/dev/null || true' EXIT

ctest --test-dir build -j"$jobs" --output-on-failure

# -O1: the sanitized build compiles in half the time of -O3 (11 vs 21 min on
# 2 cores, tests included) and still runs the suite in about 80 s.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  -DDUET_SANITIZE=ON -DDUET_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L unit -j"$jobs" --output-on-failure

if ! wait "$fuzz_pid"; then
  tail -80 build-fuzz/fuzz.log
  echo "test.sh: the fuzz smoke failed (build-fuzz/fuzz.log)" >&2
  exit 1
fi
tail -9 build-fuzz/fuzz.log
