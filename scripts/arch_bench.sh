#!/usr/bin/env bash
# Decode of each architecture against a Llama of the same shape and bytes,
# in one run: random-weight models of real shapes (duet synth presets;
# Phi-4-mini cut to 8 layers to stay near 1 B parameters), each beside its
# twin written with `--arch llama` (same matrices, none of the family's
# extras), all under one `duet bench`. The target (issue 15): every family's
# tok/s >= 0.90 of its twin's, i.e. q/k norms, post-norms, GeGLU, soft-caps
# or fused projections cost under 10 % at equal bytes per token.
# Usage: scripts/arch_bench.sh [TYPE]   (default q8_0)
set -euo pipefail
cd "$(dirname "$0")/.."
duet=build/duet
work=${DUET_PERF_DIR:-/tmp/duet-perf}
threads=${DUET_PERF_THREADS:-2}
type=${1:-q8_0}
mkdir -p "$work"

# name, then synth's shape arguments
presets=("qwen3|--like qwen3-0.6b" "gemma3|--like gemma3-1b" "phi4|--like phi4-mini --layers 8")
models=()
for p in "${presets[@]}"; do
  name=${p%%|*}
  for arch in own llama; do
    m=$work/arch-$name-$arch-$type.gguf
    if [ ! -f "$m" ]; then
      extra=()
      [ "$arch" = llama ] && extra=(--arch llama)
      # shellcheck disable=SC2086  # the shape arguments are words
      $duet synth ${p#*|} "${extra[@]}" --dtype f16 -o "$work/arch-tmp-f16.gguf" >/dev/null
      $duet quantize "$work/arch-tmp-f16.gguf" "$m" "$type" >/dev/null 2>&1
      rm -f "$work/arch-tmp-f16.gguf"
    fi
    models+=(-m "$m")
  done
done
$duet bench "${models[@]}" -p 0 -n 64 -r 5 -t "$threads" --json > "$work/arch.json"
/usr/bin/python3 - "$work/arch.json" <<'PY'
import json, os, sys
rows = {os.path.basename(r["model"]): r for r in json.load(open(sys.argv[1])) if r["test"].startswith("tg")}
print("| family | tok/s | Llama twin tok/s | ratio | GB/s (family, twin) |")
print("|---|---|---|---|---|")
for name, own in rows.items():
    if "-own-" not in name:
        continue
    twin = rows[name.replace("-own-", "-llama-")]
    print(f"| {name.split('-')[1]} | {own['tok_s']:.2f} ± {own['tok_s_stdev']:.2f} | "
          f"{twin['tok_s']:.2f} ± {twin['tok_s_stdev']:.2f} | {own['tok_s'] / twin['tok_s']:.2f} | "
          f"{own['achieved']:.1f}, {twin['achieved']:.1f} |")
PY
