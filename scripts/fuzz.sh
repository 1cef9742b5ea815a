#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) in build-asan/ and
# runs each for SECONDS on a corpus seeded from fuzz/seeds/, cut-down files of
# ../shared/ and every committed regression input. Exits nonzero on any
# crash, leak, out-of-memory or hang, after copying the input that caused it
# into fuzz/regressions/<target>/ to be fixed and committed. docs/fuzzing.md.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 20)] [TARGET...]   (default: all)
#
# Environment: FUZZ_RUNS=N runs N inputs per target instead of a time limit;
# FUZZ_CORPUS=DIR keeps the corpora in DIR/<target> (default: a temporary
# directory, removed); FUZZ_JOBS=N builds with N jobs (default: nproc);
# FUZZ_NO_BUILD=1 skips the build;
# DUET_SHARED_DIR (default ../shared).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
all_targets=(fuzz_gguf fuzz_safetensors fuzz_hf_config fuzz_hf_tokenizer fuzz_spm_model fuzz_jinja fuzz_openai_request
             fuzz_grammar fuzz_chat_output fuzz_http_request fuzz_server_bodies fuzz_nested_json)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
shared=${DUET_SHARED_DIR:-../shared}
build=build-asan

# FUZZ_NO_BUILD=1: the targets are already built (scripts/test.sh builds the
# whole sanitized tree first).
[ -n "${FUZZ_NO_BUILD:-}" ] || BUILD_JOBS=${FUZZ_JOBS:-} scripts/asan_build.sh "${targets[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpora=${FUZZ_CORPUS:-$work/corpus}
python3 fuzz/shared_seeds.py "$shared" "$work/shared"

# Input size caps: small inputs run fast and still reach every branch.
declare -A max_len=([fuzz_gguf]=16384 [fuzz_hf_tokenizer]=16384 [fuzz_safetensors]=4096
                    [fuzz_hf_config]=4096 [fuzz_spm_model]=8192 [fuzz_jinja]=8192 [fuzz_openai_request]=4096
                    [fuzz_grammar]=4096 [fuzz_chat_output]=4096 [fuzz_http_request]=4096 [fuzz_server_bodies]=4096
                    [fuzz_nested_json]=256)
declare -A dict=([fuzz_gguf]=gguf [fuzz_hf_tokenizer]=json [fuzz_safetensors]=json [fuzz_hf_config]=json
                 [fuzz_spm_model]="" [fuzz_jinja]=jinja [fuzz_openai_request]=json [fuzz_grammar]=json
                 [fuzz_chat_output]=chat_output [fuzz_http_request]=http [fuzz_server_bodies]=json
                 [fuzz_nested_json]="")
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

failed=()
summary=()
for t in "${targets[@]}"; do
  bin=$build/fuzz/$t
  # Every committed regression input must still pass.
  if compgen -G "fuzz/regressions/$t/*" >/dev/null; then
    if ! "$bin" -rss_limit_mb=2048 -timeout=10 fuzz/regressions/"$t"/* >"$work/$t.replay.log" 2>&1; then
      tail -40 "$work/$t.replay.log" >&2
      echo "fuzz.sh: $t: a committed regression input fails again" >&2
      failed+=("$t (regression)")
      continue
    fi
  fi
  corpus=$corpora/$t
  mkdir -p "$corpus" "$work/artifacts/$t"
  for src in fuzz/seeds/$t "$work/shared/$t" fuzz/regressions/$t; do
    [ -d "$src" ] && cp -n "$src"/* "$corpus"/ 2>/dev/null || true
  done
  limit=(-max_total_time="$seconds")
  what="$seconds s"
  if [ -n "${FUZZ_RUNS:-}" ]; then
    limit=(-runs="$FUZZ_RUNS")
    what="$FUZZ_RUNS runs"
  fi
  flags=(-rss_limit_mb=2048 -timeout=10 -max_len="${max_len[$t]}" -print_final_stats=1
         -artifact_prefix="$work/artifacts/$t/")
  [ -n "${dict[$t]}" ] && flags+=(-dict=fuzz/dicts/${dict[$t]}.dict)
  echo "== $t: $what"
  start=$(date +%s)
  if "$bin" "${flags[@]}" "${limit[@]}" "$corpus" >"$work/$t.log" 2>&1; then rc=0; else rc=$?; fi
  secs=$(( $(date +%s) - start ))
  stats=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t.log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$work/$t.log")
  summary+=("$(printf '%-20s %9s execs in %4ss (%6s/s, peak %4s MB)  %s' "$t" "${execs:-?}" "$secs" "${rate:-?}" \
    "${rss:-?}" "$(grep -oE 'cov: [0-9]+ ft: [0-9]+' <<<"$stats" || true)")")
  if [ "$rc" -ne 0 ]; then
    tail -60 "$work/$t.log" >&2
    mkdir -p "fuzz/regressions/$t"
    for a in "$work/artifacts/$t"/*; do
      [ -e "$a" ] || continue
      cp "$a" "fuzz/regressions/$t/"
      echo "fuzz.sh: $t: input saved as fuzz/regressions/$t/$(basename "$a"): fix the parser, commit it" >&2
    done
    failed+=("$t")
  fi
done

printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: all ${#targets[@]} targets ran clean"
