#!/usr/bin/env bash
# Speculative decoding against plain decoding, in the same run: each
# configuration generates the same greedy text; the report is decode tokens/s
# relative to the plain runs around it, with acceptance and tokens per
# target pass. Configurations:
#   plain | --draft DRAFT | --lookup N
# Usage: scripts/spec_bench.sh -m TARGET [-d DRAFT] [-l N] [-p PROMPT_FILE|-P TEXT] [-n TOKENS] [-t THREADS] [-k DRAFT_MAX] [-c CTX]
set -euo pipefail
cd "$(dirname "$0")/.."
duet=build/duet
target="" draft="" lookup=0 prompt_args=(-p "Once upon a time") n=64 threads=2 kmax=5 ctx=0
while getopts "m:d:l:p:P:n:t:k:c:" opt; do
  case $opt in
    m) target=$OPTARG ;;
    d) draft=$OPTARG ;;
    l) lookup=$OPTARG ;;
    p) prompt_args=(-f "$OPTARG") ;;
    P) prompt_args=(-p "$OPTARG") ;;
    n) n=$OPTARG ;;
    t) threads=$OPTARG ;;
    k) kmax=$OPTARG ;;
    c) ctx=$OPTARG ;;
    *) exit 2 ;;
  esac
done
[ -n "$target" ] || { echo "usage: $0 -m TARGET [-d DRAFT] [-l N] ..." >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # name, extra args...
  local name=$1; shift
  $duet run -m "$target" "${prompt_args[@]}" -n "$n" --temp 0 --ignore-eos -t "$threads" --ctx "$ctx" --json "$@" \
    2>"$out/$name.json" >/dev/null
}
configs=(plain1)
run plain1
if [ -n "$draft" ]; then run draft --draft "$draft" --draft-max "$kmax"; configs+=(draft); fi
if [ "$lookup" -gt 0 ]; then run lookup --lookup "$lookup" --draft-max "$kmax"; configs+=(lookup); fi
run plain2
configs+=(plain2)

/usr/bin/python3 - "$out" "${configs[@]}" <<'PY'
import json, sys, os
d, names = sys.argv[1], sys.argv[2:]
runs = {n: json.load(open(os.path.join(d, n + ".json"))) for n in names}
plain = (runs["plain1"]["decode_tok_s"] + runs["plain2"]["decode_tok_s"]) / 2
ref = runs["plain1"]["generated_ids"]
report = []
print("| config | decode tok/s | vs plain | acceptance | tokens/target pass | same text |")
print("|---|---|---|---|---|---|")
for n in names:
    r = runs[n]; s = r["speculative"]
    row = {"config": n, "decode_tok_s": r["decode_tok_s"], "speedup": r["decode_tok_s"] / plain,
           "acceptance_rate": s["acceptance_rate"], "tokens_per_pass": s["tokens_per_pass"],
           "same_text": r["generated_ids"] == ref}
    report.append(row)
    print(f"| {n} | {row['decode_tok_s']:.2f} | {row['speedup']:.2f}x | {100*row['acceptance_rate']:.0f}% | "
          f"{row['tokens_per_pass']:.2f} | {'yes' if row['same_text'] else 'NO'} |")
print(json.dumps(report))
PY
