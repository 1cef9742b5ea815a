#!/usr/bin/env bash
# Builds duet (Release) and runs every test; then runs the unit and
# bad-input tests again under ASan + UBSan (clang, build-asan/) and the fuzz
# smoke (scripts/fuzz.sh, 20 s per target) from the same sanitized tree.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

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

ctest --test-dir build -j"$jobs" --output-on-failure

if ! wait "$asan_build"; then
  tail -60 build-asan/build.log
  echo "test.sh: the sanitized build failed (build-asan/build.log)" >&2
  exit 1
fi

mkdir -p build-asan/fuzz
FUZZ_NO_BUILD=1 setsid -w scripts/fuzz.sh 20 >build-asan/fuzz/fuzz.log 2>&1 &
fuzz=$!
pids+=("$fuzz")
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L unit -j"$jobs" --output-on-failure

if ! wait "$fuzz"; then
  tail -80 build-asan/fuzz/fuzz.log
  echo "test.sh: the fuzz smoke failed (build-asan/fuzz/fuzz.log)" >&2
  exit 1
fi
tail -9 build-asan/fuzz/fuzz.log
