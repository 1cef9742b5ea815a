#!/usr/bin/env bash
# Installs what duet's build and tests need (Debian packages) and builds it in
# Release into build/. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ ninja-build libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libasio-dev libssl-dev pkg-config
          python3-torch python3-numpy python3-sentencepiece python3-jinja2
          openmpi-bin libopenmpi-dev  # tensor parallelism (docs/scaling.md)
          clang libclang-rt-dev  # clang: the sanitized build and libFuzzer (scripts/asan_build.sh)
          chromium)  # the chat page's browser test (tests/reference/test_chat_page.py)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Independent references for the tests, run with node: byte-level BPE
# tokenizers, the official OpenAI client and puppeteer-core, which drives
# Debian's chromium through the chat page (versions pinned in package.json).
if ! command -v npm >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive ${sudo_cmd:-} apt-get install -y -qq nodejs npm >/dev/null
fi
for dir in tests/reference tests/reference/openai tests/reference/web; do
  # Again when package.json has changed since (a dependency added or moved).
  if [ -f "$dir/package.json" ] && { [ ! -d "$dir/node_modules" ] ||
      [ "$dir/package.json" -nt "$dir/node_modules/.package-lock.json" ]; }; then
    npm install --prefix "$dir" --no-audit --no-fund --silent >/dev/null
  fi
done

# The gtest executables are left out unless DUET_UNIT_TESTS=ON: generation
# does not need them, and scripts/test.sh runs them in the sanitized tree.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDUET_UNIT_TESTS="${DUET_UNIT_TESTS:-OFF}" >/dev/null
cmake --build build -j"$(nproc)"
