"""Greedy generation: duet's 200 tokens on stories260K must be the
reference's, id for id.

First the reference proves itself on the known golden text (karpathy's
stories260K greedy sample); then, for the llama.cpp-converted GGUF and for
`duet convert --from llama2c`'s, `duet run --temp 0 --ignore-eos --json`
must produce the same prompt ids and the same 200 generated ids.
"""

import json
import os
import subprocess
import sys
import tempfile

import torch

from llama_ref import LlamaRef

DUET = os.environ.get("DUET_BINARY", "duet")
SHARED = os.environ.get("DUET_SHARED_DIR", "/work/shared")
STORIES = os.path.join(SHARED, "models", "stories260K")
PROMPT = "Once upon a time"
PROMPT_IDS = [1, 403, 407, 261, 378]  # tok512, as run.c and llama.cpp tokenize it
GOLDEN = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
N = 200
# stories260K was trained on 512-token windows; llama.cpp's converter wrote a
# context_length of 128, too short for prompt + 200 tokens.
CTX = 512


def duet(*args):
    r = subprocess.run([DUET, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"duet {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r


def run_json(model):
    r = duet("run", "-m", model, "-p", PROMPT, "-n", str(N), "--temp", "0", "--ignore-eos",
             "--json", "--ctx", str(CTX), "--threads", "2")
    for line in reversed(r.stderr.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"duet run printed no JSON object on stderr:\n{r.stderr}")


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else -1


def main():
    torch.set_num_threads(2)
    gguf = os.path.join(STORIES, "stories260K.gguf")
    ref = LlamaRef(gguf)
    want = ref.greedy(PROMPT_IDS, N)
    text = ref.detokenize(PROMPT_IDS[1:] + want).lstrip()
    golden_ok = text.startswith(GOLDEN)
    print(f"{'ok  ' if golden_ok else 'FAIL'} reference golden text: {text[:100]!r}...", flush=True)

    results = [golden_ok]
    with tempfile.TemporaryDirectory(prefix="duet-ref-") as tmp:
        converted = os.path.join(tmp, "stories260K-duet.gguf")
        duet("convert", "--from", "llama2c", "--model", os.path.join(STORIES, "stories260K.bin"),
             "--tokenizer", os.path.join(STORIES, "tok512.bin"), "-o", converted)
        for name, path in (("stories260K.gguf", gguf), ("stories260K-converted", converted)):
            j = run_json(path)
            prompt_ids, got = j.get("prompt_ids"), j.get("generated_ids")
            ok = prompt_ids == PROMPT_IDS and got == want
            detail = f"{len(got or [])} ids, all equal"
            if prompt_ids != PROMPT_IDS:
                detail = f"prompt ids {prompt_ids}, expected {PROMPT_IDS}"
            elif got != want:
                i = first_difference(got or [], want)
                detail = (f"first difference at generated token {i}: duet "
                          f"{(got or [])[i:i + 5]} vs reference {want[i:i + 5]}")
            print(f"{'ok  ' if ok else 'FAIL'} {name:24s} greedy {N}: {detail}", flush=True)
            results.append(ok)

    failed = results.count(False)
    print(f"\n{len(results) - failed}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
