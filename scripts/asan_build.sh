#!/usr/bin/env bash
# Configures and builds build-asan/: everything compiled by clang with
# AddressSanitizer + UndefinedBehaviorSanitizer, plus the libFuzzer targets
# of fuzz/ in the same tree, so the sanitized tests (scripts/test.sh) and
# the fuzzers (scripts/fuzz.sh) share one build of the parsers.
#
#   scripts/asan_build.sh [TARGET...]   (default: all)
#
# -O1: the sanitized build compiles in half the time of -O3 and still runs
# the suite in about 80 s; clang compiles it about twice as fast as g++.
# -unroll-count=1 leaves every loop rolled, the kernels' `#pragma GCC unroll`
# included: fully unrolled register loops, each access instrumented, made
# packed_gemm_avx512.cc alone cost 477 s of CPU here (40 s rolled), and
# unrolling changes no result the sanitizers check. (The flag reaches the
# link lines too, where clang would warn that it is unused.)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null 2>&1; then
  echo "asan_build.sh: clang++ not found (scripts/setup.sh installs Debian's clang)" >&2
  exit 1
fi
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -mllvm -unroll-count=1" \
  -DCMAKE_EXE_LINKER_FLAGS=-Wno-unused-command-line-argument \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DDUET_FUZZ=ON -DDUET_BENCH=OFF "${launcher[@]}" >/dev/null
targets=()
[ $# -gt 0 ] && targets=(--target "$@")
cmake --build build-asan -j"${BUILD_JOBS:-$(nproc)}" "${targets[@]}"
