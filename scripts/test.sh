#!/usr/bin/env bash
# Builds duet (Release) and runs the tests that drive the binary (reference,
# MPI, soak, page); then the unit and bad-input tests under ASan + UBSan
# (clang, build-asan/) and the fuzz smoke (scripts/fuzz.sh) from the same
# sanitized tree. The unit tests run only there: building them at -O3 as
# well was about two fifths of the Release compile.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
phase() { echo "test.sh: $1 at ${SECONDS} s"; }
phase "Release build done"

# The sanitized tree compiles at low priority while the Release tests run:
# they wait on subprocesses and servers much of the time and leave cores
# idle. Each background job has its own process group so that a failure
# here stops it too.
pids=()
trap 'for p in "${pids[@]}"; do kill -- -"$p" 2>/dev/null || true; done' EXIT
mkdir -p build-asan
setsid -w nice -n 10 scripts/asan_build.sh >build-asan/build.log 2>&1 &
asan_build=$!
pids+=("$asan_build")

ctest --test-dir build -LE unit -j"$jobs" --output-on-failure
phase "Release tests done"

if ! wait "$asan_build"; then
  tail -60 build-asan/build.log
  echo "test.sh: the sanitized build failed (build-asan/build.log)" >&2
  exit 1
fi

phase "sanitized build done"
mkdir -p build-asan/fuzz
FUZZ_NO_BUILD=1 setsid -w scripts/fuzz.sh 15 >build-asan/fuzz/fuzz.log 2>&1 &
fuzz=$!
pids+=("$fuzz")
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L unit -j"$jobs" --output-on-failure
phase "sanitized tests done"

if ! wait "$fuzz"; then
  tail -80 build-asan/fuzz/fuzz.log
  echo "test.sh: the fuzz smoke failed (build-asan/fuzz/fuzz.log)" >&2
  exit 1
fi
tail -12 build-asan/fuzz/fuzz.log
phase "fuzz smoke done"
