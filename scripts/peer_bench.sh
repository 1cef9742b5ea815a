#!/usr/bin/env bash
# duet beside llama.cpp in one run: the same GGUF files, thread count and
# pp/tg sizes, measured back to back, printed as a table with duet/llama.cpp
# ratios (and the raw JSON), and duet's % of its measured ceiling (read
# bandwidth for tg, the int8 or fma peak for pp; `duet bench --roofline`).
# llama.cpp is either
#   PEER=node (default): the npm package node-llama-cpp (prebuilt CPU
#     libraries, installed on first use outside the repo, in $DUET_PEER_DIR);
#     its JS wrapper adds a few ms per generated token, so its tg figures
#     understate native llama.cpp (see ../shared/PEERS.md); or
#   PEER=native LLAMA_BENCH=/path/to/llama-bench: a llama-bench binary built
#     outside the repo, run with the same -p/-n/-t/-r.
# Usage: scripts/peer_bench.sh MODEL.gguf...   (env: THREADS=2 PP=512 TG=64 REPS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2} pp=${PP:-512} tg=${TG:-64} reps=${REPS:-3}
kind=${PEER:-node}
peer=${DUET_PEER_DIR:-/tmp/duet-peer}
[ $# -gt 0 ] || { echo "usage: $0 MODEL.gguf..." >&2; exit 2; }
case "$kind" in
  native)
    [ -x "${LLAMA_BENCH:-}" ] || { echo "PEER=native needs LLAMA_BENCH=path to a llama-bench binary" >&2; exit 2; } ;;
  node)
    if [ ! -d "$peer/node_modules/node-llama-cpp" ]; then
      mkdir -p "$peer"
      (cd "$peer" && npm init -y >/dev/null && npm install --no-audit --no-fund --silent node-llama-cpp@3 >/dev/null)
    fi
    cp bench/peer/llama_cpp_bench.mjs "$peer/" ;;
  *) echo "PEER must be node or native, not '$kind'" >&2; exit 2 ;;
esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# llama-bench's JSON (one record per test) as {model, pp_tok_s, tg_tok_s}.
native_summary() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))
pp = next(r for r in runs if r["n_prompt"] > 0 and r["n_gen"] == 0)
tg = next(r for r in runs if r["n_gen"] > 0 and r["n_prompt"] == 0)
print(json.dumps({"engine": "llama.cpp (native llama-bench)", "model": sys.argv[2], "build": runs[0].get("build_commit"),
                  "pp_tok_s": pp["avg_ts"], "pp_tok_s_stdev": pp["stddev_ts"],
                  "tg_tok_s": tg["avg_ts"], "tg_tok_s_stdev": tg["stddev_ts"]}))
PY
}

i=0
for m in "$@"; do
  build/duet bench -m "$m" -p "$pp" -n "$tg" -r "$reps" -t "$threads" --roofline --json > "$out/duet-$i.json"
  if [ "$kind" = native ]; then
    "$LLAMA_BENCH" -m "$m" -p "$pp" -n "$tg" -t "$threads" -r "$reps" -o json > "$out/raw-$i.json"
    native_summary "$out/raw-$i.json" "$m" > "$out/peer-$i.json"
  else
    node "$peer/llama_cpp_bench.mjs" "$m" "$threads" "$pp" "$tg" "$reps" > "$out/peer-$i.json"
  fi
  i=$((i + 1))
done
/usr/bin/python3 - "$out" "$i" <<'PY'
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
rows = []
print("| model | type | test | duet tok/s | duet % of ceiling | llama.cpp tok/s | duet / llama.cpp |")
print("|---|---|---|---|---|---|---|")
for i in range(n):
    duet = json.load(open(os.path.join(d, f"duet-{i}.json")))
    peer = json.load(open(os.path.join(d, f"peer-{i}.json")))
    for r in duet:
        kind = "pp" if r["test"].startswith("pp") else "tg"
        other = peer[f"{kind}_tok_s"]
        rows.append({"model": peer["model"], "type": r["type"], "test": r["test"], "duet_tok_s": r["tok_s"],
                     "duet_percent_of_ceiling": r.get("percent_of_ceiling"), "ceiling": r.get("ceiling"),
                     "llama_cpp_tok_s": other, "ratio": r["tok_s"] / other})
        print(f"| {os.path.basename(peer['model'])} | {r['type']} | {r['test']} | {r['tok_s']:.2f} | "
              f"{r.get('percent_of_ceiling', 0):.0f} % | {other:.2f} | {r['tok_s'] / other:.2f}x |")
print(json.dumps(rows))
PY
