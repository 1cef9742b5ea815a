#!/usr/bin/env bash
# Regenerates the table in docs/performance.md: synthesizes TinyLlama-1.1B-
# shaped random-weight models (llama2 vocabulary) in each weight type, runs
# `duet bench --roofline` on them, and prints a Markdown table and the raw JSON.
# Usage: scripts/perf_report.sh [TYPES...]   (default: f32 f16 q8_0 q4_0 q4_k)
set -euo pipefail
cd "$(dirname "$0")/.."
duet=build/duet
work=${DUET_PERF_DIR:-/tmp/duet-perf}
threads=${DUET_PERF_THREADS:-2}
types=("$@")
[ ${#types[@]} -eq 0 ] && types=(f32 f16 q8_0 q4_0 q4_k)
mkdir -p "$work"

vocab=$work/llama2-vocab.gguf
[ -f "$vocab" ] || $duet convert --from spm --tokenizer ../shared/tokenizers/llama2/tokenizer.model \
                        --vocab-only -o "$vocab" >/dev/null
[ -f "$work/tl-f16.gguf" ] || $duet synth --like tinyllama-1.1b --vocab "$vocab" --dtype f16 -o "$work/tl-f16.gguf" >/dev/null
models=()
for t in "${types[@]}"; do
  m=$work/tl-$t.gguf
  if [ ! -f "$m" ]; then
    case $t in
      f32|bf16) $duet synth --like tinyllama-1.1b --vocab "$vocab" --dtype "$t" -o "$m" >/dev/null ;;
      *) $duet quantize "$work/tl-f16.gguf" "$m" "$t" >/dev/null 2>&1 ;;
    esac
  fi
  models+=(-m "$m")
done
$duet bench "${models[@]}" -p 512 -n 64 -r 3 -t "$threads" --roofline --json > "$work/bench.json"
/usr/bin/python3 - "$work/bench.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
# Each repetition is set against probes run just before it (see cmd_bench.cc).
print("| type | test | tok/s | achieved | ceiling (measured beside each run) | % of ceiling |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['type']} | {r['test']} | {r['tok_s']:.2f} ± {r['tok_s_stdev']:.2f} | "
          f"{r['achieved']:.1f} {r['unit']} | {r['ceiling']:.1f} {r['unit']} | "
          f"{r['percent_of_ceiling']:.0f} ± {r['percent_of_ceiling_stdev']:.0f}% |")
PY
