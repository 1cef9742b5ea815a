#!/usr/bin/env bash
# duet beside llama.cpp in one run: the same GGUF files, thread count and
# pp/tg sizes, measured back to back, printed as a table with duet/llama.cpp
# ratios (and the raw JSON). llama.cpp comes from the npm package
# node-llama-cpp (prebuilt CPU libraries, installed on first use outside the
# repo, in $DUET_PEER_DIR); its JS wrapper adds a few ms per generated token,
# so its tg figures understate native llama.cpp (see ../shared/PEERS.md).
# Usage: scripts/peer_bench.sh MODEL.gguf...   (env: THREADS=2 PP=512 TG=64 REPS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2} pp=${PP:-512} tg=${TG:-64} reps=${REPS:-3}
peer=${DUET_PEER_DIR:-/tmp/duet-peer}
[ $# -gt 0 ] || { echo "usage: $0 MODEL.gguf..." >&2; exit 2; }
if [ ! -d "$peer/node_modules/node-llama-cpp" ]; then
  mkdir -p "$peer"
  (cd "$peer" && npm init -y >/dev/null && npm install --no-audit --no-fund --silent node-llama-cpp@3 >/dev/null)
fi
cp bench/peer/llama_cpp_bench.mjs "$peer/"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
for m in "$@"; do
  build/duet bench -m "$m" -p "$pp" -n "$tg" -r "$reps" -t "$threads" --json > "$out/duet-$i.json"
  node "$peer/llama_cpp_bench.mjs" "$m" "$threads" "$pp" "$tg" "$reps" > "$out/peer-$i.json"
  i=$((i + 1))
done
/usr/bin/python3 - "$out" "$i" <<'PY'
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
rows = []
print("| model | type | test | duet tok/s | llama.cpp tok/s | duet / llama.cpp |")
print("|---|---|---|---|---|---|")
for i in range(n):
    duet = json.load(open(os.path.join(d, f"duet-{i}.json")))
    peer = json.load(open(os.path.join(d, f"peer-{i}.json")))
    for r in duet:
        kind = "pp" if r["test"].startswith("pp") else "tg"
        other = peer[f"{kind}_tok_s"]
        rows.append({"model": peer["model"], "type": r["type"], "test": r["test"], "duet_tok_s": r["tok_s"],
                     "llama_cpp_tok_s": other, "ratio": r["tok_s"] / other})
        print(f"| {os.path.basename(peer['model'])} | {r['type']} | {r['test']} | {r['tok_s']:.2f} | "
              f"{other:.2f} | {r['tok_s'] / other:.2f}x |")
print(json.dumps(rows))
PY
