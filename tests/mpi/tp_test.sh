#!/usr/bin/env bash
# Tensor parallelism under `mpirun -np 2` against one process (docs/scaling.md).
# Usage: tp_test.sh DUET SOURCE_DIR SHARED_DIR CASE [ARGS...]
#   logits ARCH TYPE BTL [VOCAB [untied]]
#                          logits of a random-weight model (vocabulary 512, tied
#                          head, unless given) equal one process's
#   greedy MODEL           64 greedy tokens (window key shifts; speculative) identical
#   greedy-mixed           64 greedy tokens of a Gemma 2 whose sliding layers free their blocks identical
#   moe LIKE TYPE BTL      a mixture of experts (mixtral, qwen3moe, deepseek2): logits, then 64 greedy tokens
#   moe-qwen2              a Qwen2-MoE checkpoint folder (a gated shared expert): logits; greedy of its GGUF
#   serve-moe              duet serve of a Mixtral (tests/mpi/serve_test.py): answers and /metrics' routing
#   moe-unsplittable       Q4_K experts of 128 columns per rank: rank 0's error naming the tensor
#   perplexity             duet perplexity (several KV caches in turn) agrees
#   unsplittable           3 KV heads over 2 ranks: rank 0's error, before any work
#   rank-death RANK        kill -9 one rank mid-generation: mpirun exits nonzero within seconds
set -u
DUET=$1 SRC=$2 SHARED=$3 CASE=$4
shift 4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
TOKENS="1 5 9 200 33 47 100 7 300 12 13 14 15 16 17 18 19 20 21"

fail() { echo "FAIL: $*"; exit 1; }

# A random-weight model whose per-rank column ranges (256 of q_dim, 512 of
# the FFN) are whole activation groups, so quantized products match too.
# The vocabulary head is split by rows: of 496 rows rank 0 gets 240 and
# rank 1 256 (whole 16-row groups, the last rank the rest); of 509, rank 1
# gets 269, which the packed kernels cannot take, so that rank's part stays
# in the file's layout.
synth() {  # ARCH OUT [VOCAB [untied]]
  local preset=() tied=(--tied)
  case $1 in
    gemma2) preset=(--like gemma2-2b --ctx 4096) ;;
    gemma3) preset=(--like gemma3-1b --ctx 4096) ;;
    *) preset=(--arch "$1" --ctx 256) ;;
  esac
  [ "${4:-}" = untied ] && tied=()
  "$DUET" synth "${preset[@]}" "${tied[@]}" --dim 512 --heads 8 --kv-heads 4 --head-dim 64 --ffn 1024 --layers 2 \
    --vocab-size "${3:-512}" --seed 7 -o "$2" >/dev/null 2>&1 || fail "synth $1"
}

# A scaled-down Mixtral, Qwen3-MoE or DeepSeek-V2 with stories260K's
# tokenizer: 256 of each expert's 512 columns per rank (and of the
# attention output's), so quantized products match too.
# Experts' partial outputs are weighted before the ranks sum them, so a
# layer's output can differ from one process's in its last bit; a quantized
# model rounds its activations to int8, where such a bit can move a value a
# whole step (or flip a router's near-tie), about 0.1-0.3 % of a logit. The
# seeds are ones where nothing moves here (seed 7 of qwen3moe at Q4_0, of
# deepseek2 at Q8_0 move), and quantized logits are allowed 1 %: a missing
# or doubled partial sum moves them by tens of percent.
synth_moe() {  # LIKE OUT [EXPERT_FFN]
  local shape=() seed=8
  case $1 in
    mixtral) shape=(--like mixtral-8x7b --heads 8 --kv-heads 4 --head-dim 64 --experts 8 --experts-used 2) ;;
    qwen3moe) shape=(--like qwen3-30b-a3b --heads 8 --kv-heads 4 --head-dim 64 --experts 16 --experts-used 4) ;;
    # Latent attention: 8 heads of nope 64 + rope 32, values of 64, a
    # latent of 128, q through a bottleneck of 256; layer 0 dense; 2
    # shared experts.
    deepseek2) shape=(--like deepseek-v2-lite --heads 8 --head-dim 96 --rope-dim 32 --v-head-dim 64 --kv-lora-rank 128
                      --q-lora-rank 256 --dense-layers 1 --experts 8 --experts-used 2 --shared-experts 2) ;;
    *) fail "no MoE shape $1" ;;
  esac
  "$DUET" synth "${shape[@]}" --vocab "$SHARED/models/stories260K/stories260K.gguf" --ctx 256 --dim 512 \
    --ffn 512 --layers 2 --expert-ffn "${3:-512}" --seed "$seed" -o "$2" >/dev/null 2>&1 || fail "synth $1"
}

# 64 greedy tokens of MODEL, one process against two ranks (and two ranks
# with the model as its own speculative draft). A random-weight model's
# text is mostly byte tokens, so its tokens are counted, not its words.
greedy_check() {  # MODEL MIN_WORDS
  local model=$1 min_words=$2
  run=(run -m "$model" -p "Once upon a time" -n 64 --temp 0 --ignore-eos -t 1 -c 48 --kv-window 32 --kv-sinks 4)
  "$DUET" "${run[@]}" --json >"$TMP/one.txt" 2>"$TMP/one.json" || fail "one process"
  "${MPIRUN[@]}" "$DUET" "${run[@]}" >"$TMP/two.txt" 2>"$TMP/two.err" || { cat "$TMP/two.err"; fail "two ranks"; }
  echo "one: $(cat "$TMP/one.txt")"
  echo "two: $(cat "$TMP/two.txt")"
  [ "$(wc -w <"$TMP/one.txt")" -gt "$min_words" ] || fail "too little text"
  python3 - "$TMP/one.json" <<'PY' || fail "want 64 generated tokens"
import json, sys
ids = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["generated_ids"]
print(f"{len(ids)} tokens generated, {len(set(ids))} distinct")
sys.exit(0 if len(ids) == 64 else 1)
PY
  cmp "$TMP/one.txt" "$TMP/two.txt" || fail "greedy text differs"
  # Speculative decoding: the draft model runs unsharded on rank 0, the
  # target verifies several tokens per pass across the ranks.
  "${MPIRUN[@]}" "$DUET" "${run[@]}" --draft "$model" --draft-max 4 >"$TMP/spec.txt" 2>"$TMP/spec.err" \
    || { cat "$TMP/spec.err"; fail "two ranks, speculative"; }
  grep -q "drafts accepted" "$TMP/spec.err" || fail "no speculation happened"
  cmp "$TMP/one.txt" "$TMP/spec.txt" || fail "speculative greedy text differs"
}

# $TMP/f32.gguf as TYPE (quantized beside it unless f32); prints the path,
# or fails.
of_type() {
  if [ "$1" = f32 ]; then echo "$TMP/f32.gguf"; return; fi
  "$DUET" quantize "$TMP/f32.gguf" "$TMP/q.gguf" "$1" >/dev/null 2>&1 || return 1
  echo "$TMP/q.gguf"
}

# MODEL's logits under two ranks (over BTL) equal one process's within TOL.
same_logits() {
  local model=$1 btl=$2 tol=$3
  "$DUET" logits -m "$model" --tokens "$TOKENS" -o "$TMP/one.bin" -t 1 2>/dev/null || fail "one process"
  "${MPIRUN[@]}" --mca btl "$btl" "$DUET" logits -m "$model" --tokens "$TOKENS" -o "$TMP/two.bin" -t 1 \
    || fail "two ranks"
  python3 "$SRC/tests/mpi/compare_logits.py" "$TMP/one.bin" "$TMP/two.bin" "$tol" || fail "logits differ"
}

# MODEL cannot be split over two ranks: an error matching PATTERN exactly
# once (from rank 0), a failing exit within 30 s, and no logits written.
refused_by_rank0() {  # MODEL PATTERN
  timeout 30 "${MPIRUN[@]}" "$DUET" logits -m "$1" --tokens "1 2 3" -o "$TMP/out.bin" -t 1 >"$TMP/out.txt" 2>&1
  local rc=$?
  cat "$TMP/out.txt"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "exit status $rc (want an error, not success or a hang)"
  [ "$(grep -c "$2" "$TMP/out.txt")" -eq 1 ] || fail "want the split error exactly once (from rank 0)"
  [ ! -e "$TMP/out.bin" ] || fail "logits were written"
}

case $CASE in
  logits)
    arch=$1 type=$2 btl=$3
    synth "$arch" "$TMP/f32.gguf" "${4:-512}" "${5:-}"
    model=$(of_type "$type") || fail "quantize $type"
    same_logits "$model" "$btl" 1e-5
    ;;
  greedy)
    model=$1
    [ -f "$model" ] || model="$SHARED/models/$1/$1.gguf"
    greedy_check "$model" 30
    ;;
  greedy-mixed)
    # One sliding layer over 16 tokens beside a global one: blocks of a
    # group of layers, freed behind the window, named alike on both ranks.
    "$DUET" synth --like gemma2-2b --window 16 --dim 512 --heads 8 --kv-heads 4 --head-dim 64 --ffn 1024 --layers 2 \
      --vocab "$SHARED/models/stories260K/stories260K.gguf" --ctx 256 --seed 7 -o "$TMP/g.gguf" >/dev/null 2>&1 \
      || fail "synth"
    run=(run -m "$TMP/g.gguf" -p "Once upon a time" -n 64 --temp 0 --ignore-eos -t 1)
    "$DUET" "${run[@]}" >"$TMP/one.txt" 2>"$TMP/one.err" || fail "one process"
    grep -q "freed behind the sliding window" "$TMP/one.err" || { cat "$TMP/one.err"; fail "one block table"; }
    "${MPIRUN[@]}" "$DUET" "${run[@]}" >"$TMP/two.txt" 2>"$TMP/two.err" || { cat "$TMP/two.err"; fail "two ranks"; }
    cmp "$TMP/one.txt" "$TMP/two.txt" || fail "greedy text differs"
    ;;
  moe)
    like=$1 type=$2 btl=$3
    synth_moe "$like" "$TMP/f32.gguf"
    model=$(of_type "$type") || fail "quantize $type"
    tol=1e-2
    [ "$type" = f32 ] && tol=1e-5
    same_logits "$model" "$btl" "$tol"
    greedy_check "$model" 0
    ;;
  moe-qwen2)
    # Python with torch (tests/CMakeLists.txt: DUET_PYTHON).
    PYTHONDONTWRITEBYTECODE=1 "${DUET_PYTHON:-/usr/bin/python3}" "$SRC/tests/mpi/qwen2moe_folder.py" "$SRC" "$SHARED" "$TMP/qwen2moe" || fail "write the checkpoint"
    "$DUET" logits -m "$TMP/qwen2moe" --tokens "$TOKENS" -o "$TMP/one.bin" -t 1 2>/dev/null || fail "one process"
    "${MPIRUN[@]}" "$DUET" logits -m "$TMP/qwen2moe" --tokens "$TOKENS" -o "$TMP/two.bin" -t 1 || fail "two ranks"
    python3 "$SRC/tests/mpi/compare_logits.py" "$TMP/one.bin" "$TMP/two.bin" 1e-5 || fail "logits differ"
    "$DUET" convert --from hf "$TMP/qwen2moe" -o "$TMP/qwen2moe.gguf" >/dev/null 2>&1 || fail "convert"
    greedy_check "$TMP/qwen2moe.gguf" 0
    ;;
  serve-moe)
    synth_moe mixtral "$TMP/mixtral.gguf"
    python3 "$SRC/tests/mpi/serve_test.py" "$DUET" "$TMP/mixtral.gguf" || fail "serve"
    ;;
  moe-unsplittable)
    synth_moe mixtral "$TMP/f32.gguf" 256
    "$DUET" quantize "$TMP/f32.gguf" "$TMP/q.gguf" q4_k >/dev/null 2>&1 || fail "quantize q4_k"
    refused_by_rank0 "$TMP/q.gguf" 'duet: error: .*blk.0.ffn_down_exps.weight: its 128 columns per rank .* not whole'
    ;;
  perplexity)
    # Windows of their own KV caches, scored by forward passes called directly.
    model="$SHARED/models/stories260K/stories260K.gguf"
    "$DUET" run -m "$model" -p "Once upon a time" -n 150 --temp 0 -t 1 >"$TMP/story.txt" 2>/dev/null || fail "story"
    ppl=(perplexity -m "$model" -f "$TMP/story.txt" -c 64 -t 1 --json)
    "$DUET" "${ppl[@]}" >"$TMP/one.json" 2>/dev/null || fail "one process"
    "${MPIRUN[@]}" "$DUET" "${ppl[@]}" >"$TMP/two.json" 2>/dev/null || fail "two ranks"
    python3 - "$TMP/one.json" "$TMP/two.json" <<'PY' || fail "perplexity differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print(f"perplexity: one {a['perplexity']}, two {b['perplexity']}, windows {a['windows']}")
sys.exit(0 if a["windows"] > 1 and abs(a["perplexity"] - b["perplexity"]) < 1e-4 * a["perplexity"] else 1)
PY
    ;;
  unsplittable)
    "$DUET" synth --arch llama --dim 240 --heads 6 --kv-heads 3 --head-dim 40 --ffn 512 --layers 1 \
      --vocab-size 512 --ctx 64 -o "$TMP/odd.gguf" >/dev/null 2>&1 || fail "synth"
    refused_by_rank0 "$TMP/odd.gguf" 'duet: error: cannot split 3 KV heads over 2 ranks'
    ;;
  rank-death)
    victim=$1
    model="$SHARED/models/stories260K/stories260K.gguf"
    # A window lets generation run on past the context until killed.
    "${MPIRUN[@]}" "$DUET" run -m "$model" -p "Once upon a time" -n 100000000 --ignore-eos -t 1 -c 64 \
      --kv-window 32 >/dev/null 2>"$TMP/err.txt" &
    launcher=$!
    pid=""
    for _ in $(seq 100); do
      for child in $(pgrep -P "$launcher"); do
        tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim" && pid=$child
      done
      [ -n "$pid" ] && break
      sleep 0.1
    done
    [ -n "$pid" ] || { kill "$launcher"; fail "rank $victim never started"; }
    sleep 2  # well into generation
    kill -0 "$launcher" 2>/dev/null || { cat "$TMP/err.txt"; fail "the job ended before the kill"; }
    start=$(date +%s%N)
    kill -9 "$pid"
    for _ in $(seq 150); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$launcher" 2>/dev/null; then
      kill -9 "$launcher"
      fail "the other rank still runs 15 s after rank $victim died"
    fi
    wait "$launcher"
    rc=$?
    elapsed_ms=$((($(date +%s%N) - start) / 1000000))
    echo "rank $victim killed: mpirun exited $rc after $elapsed_ms ms"
    [ $rc -ne 0 ] || fail "exit status 0 after a rank died"
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo PASS
