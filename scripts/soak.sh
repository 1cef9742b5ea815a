#!/usr/bin/env bash
# Soak: `duet serve` on stories260K under 64 clients for SECONDS (default
# 600) of mixed traffic with faults: streamed and whole requests, streams
# dropped part way, requests abandoned, prompts over the cap, malformed JSON,
# and a KV pool small enough that sequences are preempted. Then checks: no
# 5xx for a valid request, every KV block and sequence back in the pool
# (/metrics), resident memory flat after warm-up (within 5 %), and a clean
# exit on SIGTERM. Prints a summary; exits nonzero when a check fails.
#
#   scripts/soak.sh [SECONDS]       e.g. scripts/soak.sh 30 (the ctest version)
#
# Environment: DUET_BINARY (default build/duet), DUET_SHARED_DIR (../shared),
# SOAK_CLIENTS (64), SOAK_LOG (the server's log; default a temporary file),
# SOAK_RSS (a file for the RSS samples: seconds and KiB per line),
# SOAK_GLIBC_TUNABLES (the server's GLIBC_TUNABLES; empty: glibc's defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
duet=${DUET_BINARY:-build/duet}
shared=${DUET_SHARED_DIR:-../shared}
model=$shared/models/stories260K/stories260K.gguf
clients=${SOAK_CLIENTS:-64}
tmp=$(mktemp -d)
log=${SOAK_LOG:-$tmp/server.log}
max_prompt_tokens=192

# The KV pool: 64 blocks of 16 tokens. A sequence may reach 192 prompt +
# 256 generated tokens (28 blocks), so each one fits alone, but 16 running
# together do not: the scheduler must preempt and resume.
#
# glibc's per-thread caches (tcache: up to 7 freed chunks per size class
# and thread, ~240 KiB at most) fill for minutes across the server's 88 HTTP
# workers, a bounded rise the RSS check would take for a leak (or hide one
# behind): the soak runs the server without them, so that its heap is flat
# unless something leaks. docs/serving.md gives the figures with and without.
GLIBC_TUNABLES=${SOAK_GLIBC_TUNABLES-glibc.malloc.tcache_count=0} \
"$duet" serve -m "$model" --ctx 512 --port 0 --threads 2 \
  --max-seqs 16 --max-queue 64 --kv-blocks 64 \
  --max-tokens 256 --max-prompt-tokens "$max_prompt_tokens" \
  --shutdown-timeout 10 >"$log" 2>&1 &
server=$!
cleanup() {
  kill -9 "$server" 2>/dev/null || true
  [ -n "${SOAK_LOG:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT

port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.* on http:[^ ]*:\([0-9][0-9]*\) .*/\1/p' "$log" | head -1)
  [ -n "$port" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  cat "$log" >&2
  echo "soak.sh: the server did not start" >&2
  exit 1
fi
head -1 "$log"

status=0
/usr/bin/python3 scripts/soak_client.py --port "$port" --pid "$server" --seconds "$seconds" \
  --clients "$clients" --max-prompt-tokens "$max_prompt_tokens" ${SOAK_RSS:+--rss-out "$SOAK_RSS"} || status=$?

# The server must still be there, and leave cleanly when asked to.
if ! kill -TERM "$server" 2>/dev/null; then
  echo "  FAIL  the server was gone before the end" >&2
  status=1
else
  rc=0
  timeout 30 tail --pid="$server" -f /dev/null || true
  if kill -0 "$server" 2>/dev/null; then
    echo "  FAIL  the server did not exit within 30 s of SIGTERM" >&2
    kill -9 "$server"
  fi
  wait "$server" || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "  PASS  exit on SIGTERM: 0"
  else
    echo "  FAIL  exit on SIGTERM: $rc" >&2
    status=1
  fi
fi
if [ "$status" -ne 0 ]; then
  echo "--- the server's log, last lines ($log):" >&2
  grep -v '^duet: \(chat\)\?cmpl-' "$log" | tail -20 >&2 || true
fi
exit "$status"
