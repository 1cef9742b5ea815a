#!/usr/bin/env bash
# Decode of each architecture against Llama's, in one run: random-weight
# models of real shapes (duet synth presets; Phi-4-mini cut to 8 layers to
# stay near 1 B parameters) in one weight type, `duet bench --roofline` on
# all of them, and each one's decode as a share of the read bandwidth
# measured beside it, divided by TinyLlama-1.1B's. The target (issue 15):
# every ratio >= 0.90, i.e. the extra work of q/k norms, post-norms, GeGLU,
# soft-caps or fused projections costs under 10 % at equal bytes per token.
# Usage: scripts/arch_bench.sh [TYPE]   (default q8_0)
set -euo pipefail
cd "$(dirname "$0")/.."
duet=build/duet
work=${DUET_PERF_DIR:-/tmp/duet-perf}
threads=${DUET_PERF_THREADS:-2}
type=${1:-q8_0}
mkdir -p "$work"

vocab=$work/llama2-vocab.gguf
[ -f "$vocab" ] || $duet convert --from spm --tokenizer ../shared/tokenizers/llama2/tokenizer.model \
                        --vocab-only -o "$vocab" >/dev/null
# name, then synth's shape arguments
presets=("tinyllama|--like tinyllama-1.1b --vocab $vocab" "qwen3|--like qwen3-0.6b" "gemma3|--like gemma3-1b"
         "phi4|--like phi4-mini --layers 8")
models=()
for p in "${presets[@]}"; do
  name=${p%%|*}
  m=$work/arch-$name-$type.gguf
  if [ ! -f "$m" ]; then
    # shellcheck disable=SC2086  # the shape arguments are words
    $duet synth ${p#*|} --dtype f16 -o "$work/arch-$name-f16.gguf" >/dev/null
    $duet quantize "$work/arch-$name-f16.gguf" "$m" "$type" >/dev/null 2>&1
    rm -f "$work/arch-$name-f16.gguf"
  fi
  models+=(-m "$m")
done
$duet bench "${models[@]}" -p 0 -n 64 -r 3 -t "$threads" --roofline --json > "$work/arch.json"
/usr/bin/python3 - "$work/arch.json" <<'PY'
import json, os, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["test"].startswith("tg")]
base = next(r for r in rows if "tinyllama" in r["model"])
print("| model | tok/s | achieved | % of read bandwidth | vs TinyLlama |")
print("|---|---|---|---|---|")
for r in rows:
    ratio = r["percent_of_ceiling"] / base["percent_of_ceiling"]
    print(f"| {os.path.basename(r['model'])} | {r['tok_s']:.2f} ± {r['tok_s_stdev']:.2f} | "
          f"{r['achieved']:.1f} {r['unit']} | {r['percent_of_ceiling']:.0f} ± {r['percent_of_ceiling_stdev']:.0f}% | "
          f"{ratio:.2f} |")
PY
