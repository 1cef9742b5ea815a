#!/usr/bin/env bash
# Regenerates the figures in docs/kv_cache.md:
#  1. perplexity of stories260K with each KV type (duet perplexity, default
#     window = the model's 128-token context, stride 64) on the two stories
#     of tests/cli/story_text.h;
#  2. how many KV blocks and 2048-token sequences `duet serve --kv-mem` fits
#     in one budget per KV type, on a random-weight model with TinyLlama-1.1B's
#     KV shape (22 layers, 4 KV heads of 64), read from serve's start-up line.
# Usage: scripts/kv_report.sh [KV_MEM_MIB]   (default 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
duet=build/duet
work=${DUET_KV_DIR:-/tmp/duet-kv}
mem=${1:-1024}
mkdir -p "$work"
stories=../shared/models/stories260K/stories260K.gguf

# The story texts as the C++ tests see them (adjacent string literals joined).
/usr/bin/python3 - tests/cli/story_text.h "$work" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
for name, out in (("kEvaluationStory", "eval.txt"), ("kCalibrationStory", "calib.txt")):
    body = src[src.index(name):]
    body = body[:body.index(";")]
    text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body))
    open(f"{sys.argv[2]}/{out}", "w").write(text.encode().decode("unicode_escape"))
PY

echo "stories260K; perplexity ± standard error (tokens scored)"
echo "| KV type | bytes/token | evaluation story | calibration story |"
echo "|---|---|---|---|"
for t in f32 f16 q8 q4; do
  run=$($duet run -m "$stories" -p "Once" -n 1 --temp 0 --json -t 1 --kv-type "$t" 2>&1 >/dev/null | tail -1)
  row="| $t | $(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["kv_bytes_per_token"])' "$run") |"
  for text in eval calib; do
    ppl=$($duet perplexity -m "$stories" -f "$work/$text.txt" --json -t 1 --kv-type "$t")
    row+=$(/usr/bin/python3 -c 'import json,sys; p=json.loads(sys.argv[1])
print(" %.4f ± %.4f (%d) |" % (p["perplexity"], p["std_error"], p["tokens"]))' "$ppl")
  done
  echo "$row"
done

model=$work/tl-kv-shape.gguf
[ -f "$model" ] || $duet synth --dim 256 --ffn 256 --layers 22 --heads 4 --kv-heads 4 --head-dim 64 \
                       --vocab-size 512 --ctx 2048 --dtype f16 -o "$model" >/dev/null
echo
echo "TinyLlama-1.1B KV shape, --kv-mem $mem MiB, sequences of 2048 tokens (128 blocks)"
echo "| KV type | bytes/token | blocks | sequences | vs f16 |"
echo "|---|---|---|---|---|"
f16_blocks=0
for t in f16 f32 q8 q4; do
  log=$work/serve-$t.log
  $duet serve -m "$model" --port 0 -t 1 --kv-mem "$mem" --kv-type "$t" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "serving" "$log" && break; sleep 0.1; done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  line=$(grep "serving" "$log")
  blocks=$(sed -E 's/.* ([0-9]+) KV blocks.*/\1/' <<<"$line")
  bpt=$(sed -E 's/.* ([0-9]+) bytes\/token.*/\1/' <<<"$line")
  [ "$t" = f16 ] && f16_blocks=$blocks
  /usr/bin/python3 -c 'import sys; t,bpt,b,f=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]);
print(f"| {t} | {bpt} | {b} | {b // 128} | {b / f:.2f}x |")' "$t" "$bpt" "$blocks" "$f16_blocks"
done
