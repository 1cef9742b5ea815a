#!/usr/bin/env bash
# Whether two duet binaries compute the same logits, bit for bit: for a
# refactor that must not change a result. Each model is scored by both
# (`duet logits`, one prompt in one batch and the file's own threads) and the
# outputs compared by SHA-256; the models are stories260K, every file of
# ../shared/models/quant-ref (each quant type and llama.cpp mix), and a
# small random model of every `duet synth` preset, drawn by the OLD binary
# (and drawn again by the new one, whose file must hold the same tensors:
# its logits must hash the same too).
#
#   scripts/same_logits.sh OLD_DUET NEW_DUET [SHARED_DIR]
#
# Prints one line per model and exits nonzero if any differs.
set -euo pipefail
old=$1
new=$2
shared=${3:-$(dirname "$0")/../../shared}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tokens="1 103 107 61 200 42 7 99 128 255 17 3 64 200 31 5"
failed=0

# model label: the hashes of both binaries' logits for one file.
compare() {
  local model=$1 label=$2 a b
  "$old" logits -t 1 -m "$model" --tokens "$tokens" -o "$work/a.f32" >/dev/null 2>&1 || { echo "$label: old binary failed"; failed=1; return; }
  "$new" logits -t 1 -m "$model" --tokens "$tokens" -o "$work/b.f32" >/dev/null 2>&1 || { echo "$label: new binary failed"; failed=1; return; }
  a=$(sha256sum <"$work/a.f32" | cut -c1-16)
  b=$(sha256sum <"$work/b.f32" | cut -c1-16)
  if [ "$a" = "$b" ]; then echo "same  $a  $label"; else echo "DIFF  $a $b  $label"; failed=1; fi
}

compare "$shared/models/stories260K/stories260K.gguf" stories260K
for f in "$shared"/models/quant-ref/*.gguf; do compare "$f" "quant-ref/$(basename "$f")"; done

# Presets cut to a few small layers; each family's own options where it has them.
small="--dim 128 --ffn 256 --heads 4 --vocab-size 512 --seed 7"
declare -A extra=(
  [tinyllama-1.1b]="--layers 3 --kv-heads 2" [stories15m]="--layers 3" [qwen3-0.6b]="--layers 3 --kv-heads 2 --head-dim 32"
  [gemma3-1b]="--layers 7 --kv-heads 2 --head-dim 32 --window 8" [gemma2-2b]="--layers 3 --kv-heads 2 --head-dim 32 --window 8"
  [phi4-mini]="--layers 3 --kv-heads 2 --head-dim 32 --rope-dim 24" [mixtral-8x7b]="--layers 3 --kv-heads 2 --experts 4 --experts-used 2"
  [qwen3-30b-a3b]="--layers 3 --kv-heads 2 --head-dim 32 --experts 8 --experts-used 2 --expert-ffn 64"
  [olmoe-1b-7b]="--layers 3 --experts 8 --experts-used 2 --expert-ffn 64" [olmo2-1b]="--layers 3"
  [deepseek-v2-lite]="--layers 3 --head-dim 48 --rope-dim 16 --experts 8 --experts-used 2 --expert-ffn 64 --kv-lora-rank 32 --v-head-dim 32 --dense-layers 1"
)
for preset in "${!extra[@]}"; do
  for b in old new; do
    # shellcheck disable=SC2086
    if ! "${!b}" synth --like "$preset" $small ${extra[$preset]} -o "$work/$b-$preset.gguf" >"$work/synth.log" 2>&1; then
      echo "synth $preset: the $b binary failed: $(tail -1 "$work/synth.log")"
      failed=1
      continue 2
    fi
  done
  compare "$work/old-$preset.gguf" "synth $preset"
  "$new" logits -t 1 -m "$work/new-$preset.gguf" --tokens "$tokens" -o "$work/c.f32" >/dev/null 2>&1
  "$new" logits -t 1 -m "$work/old-$preset.gguf" --tokens "$tokens" -o "$work/d.f32" >/dev/null 2>&1
  if cmp -s "$work/c.f32" "$work/d.f32"; then echo "same  (new synth's file)  synth $preset"
  else echo "DIFF  (new synth's file)  synth $preset"; failed=1; fi
done
exit "$failed"
