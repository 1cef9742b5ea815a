"""duet's logits against the PyTorch reference, position by position.

For the real stories260K weights (as llama.cpp converted them, and as
`duet convert --from llama2c` converts them) and for random-weight models of
many shapes made by `duet synth`, duet evaluates one 64+ token prompt as one
batched forward (`duet logits`) and the reference recomputes it in float64
from the same dequantized weights. Every position must agree on the top-1
token and stay within the dtype's tolerance (see TOLERANCE).
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from gguf_reader import GgufFile
from llama_ref import LlamaRef

DUET = os.environ.get("DUET_BINARY", "duet")
SHARED = os.environ.get("DUET_SHARED_DIR", "/work/shared")
STORIES = os.path.join(SHARED, "models", "stories260K")
PROMPT_LEN = 72

# Max |duet - reference| allowed, relative to the largest |logit| of the
# model's reference output (so the bound means the same for a model whose
# logits spread over +-4 as for one over +-22). The reference is exact next to
# float32 and uses the very weights duet reads, so only duet's own arithmetic
# is measured: float32 accumulation gives ~1e-6 relative here (measured:
# <= 9e-7 for every model and dtype, F16/BF16 weights included, since duet's
# kernels widen weights and keep activations in float32). F32's bound is 20x
# that. F16/BF16 leave room for kernels that round activations to the weight
# type before the dot product, as llama.cpp's do (2^-11 resp. 2^-8 relative per
# activation, compounding over layers), and are still far below what a real
# mistake produces: measured on the gqa2 F16 shape, rope base 1e4 for 5e5
# gives 0.10 relative, a dropped output norm 0.08, KV heads tiled instead of
# grouped 0.38.
TOLERANCE = {"F32": 2e-5, "F16": 2e-3, "BF16": 1.5e-2}

# Random-weight shapes, each small (<= ~5M params) and together covering:
# GQA ratios 1, 2, 4, 6; head dims 32, 64, 128 (and one head_dim != dim/heads);
# tied and untied heads; rope bases 1e4 and 5e5; vocab sizes that are not
# multiples of 8; F32, F16 and BF16 weights; a vocabulary copied with --vocab.
SYNTH = [
    # name, dtype, flags
    ("mha-hd64-tied", "f32", "--dim 256 --ffn 688 --layers 3 --heads 4 --kv-heads 4 --vocab-size 997 --tied"),
    ("gqa2-hd32-rope5e5", "f16", "--dim 256 --ffn 512 --layers 4 --heads 8 --kv-heads 4 --vocab-size 515 --rope-base 500000"),
    ("gqa4-hd128", "f32", "--dim 512 --ffn 768 --layers 2 --heads 4 --kv-heads 1 --vocab-size 1003 --rope-base 500000"),
    ("gqa6-hd32-tied", "f16", "--dim 384 --ffn 1024 --layers 3 --heads 12 --kv-heads 2 --vocab-size 777 --tied"),
    ("gqa4-hd64-wide-heads", "f32", "--dim 256 --ffn 640 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --vocab-size 600"),
    ("mha-hd64-f16", "f16", "--dim 512 --ffn 1408 --layers 2 --heads 8 --kv-heads 8 --vocab-size 1024 --rope-base 500000 --rms-eps 1e-6"),
    ("gqa2-hd64-bf16", "bf16", "--dim 128 --ffn 384 --layers 2 --heads 2 --kv-heads 1 --vocab-size 300"),
    ("stories-vocab", "f32", f"--dim 128 --ffn 344 --layers 2 --heads 4 --kv-heads 2 --vocab {STORIES}/stories260K.gguf"),
]


def duet(*args):
    r = subprocess.run([DUET, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"duet {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r


def weight_dtype(ref):
    t = ref.gguf.tensors["blk.0.attn_q.weight"]
    return t.type_name


def compare(name, path, tokens, tmp):
    ref = LlamaRef(path, torch.float64)
    out = os.path.join(tmp, name + ".f32")
    duet("logits", "-m", path, "--tokens", " ".join(map(str, tokens)), "-o", out, "--threads", "2")
    got = np.fromfile(out, dtype="<f4")
    if got.size != len(tokens) * ref.vocab:
        raise RuntimeError(f"{name}: duet wrote {got.size} floats, expected "
                           f"{len(tokens)} x {ref.vocab}")
    got = torch.from_numpy(got.reshape(len(tokens), ref.vocab).astype(np.float64))
    want = ref.forward(tokens)                                     # (n, vocab)

    dtype = weight_dtype(ref)
    scale = float(want.abs().max())
    tol = TOLERANCE[dtype] * scale
    diff = float((got - want).abs().max())
    top_got, top_want = got.argmax(-1), want.argmax(-1)
    same = int((top_got == top_want).sum())
    # A position whose two best reference logits lie within the tolerance is a
    # tie at this precision: either choice is right, but it is reported.
    picked = want.gather(1, top_got[:, None])[:, 0]
    ties = int(((top_got != top_want) & (want.max(-1).values - picked <= tol)).sum())
    finite = bool(torch.isfinite(got).all())
    ok = finite and diff <= tol and same + ties == len(tokens)
    print(f"{'ok  ' if ok else 'FAIL'} {name:24s} {dtype:4s} vocab {ref.vocab:5d}  "
          f"max|diff| {diff:.3e} (tol {tol:.3e} = {TOLERANCE[dtype]:g} x {scale:.2f})  "
          f"top-1 {same}/{len(tokens)}" + (f" (+{ties} ties)" if ties else ""), flush=True)
    return ok


def main():
    torch.set_num_threads(2)
    results = []
    with tempfile.TemporaryDirectory(prefix="duet-ref-") as tmp:
        gguf = os.path.join(STORIES, "stories260K.gguf")
        converted = os.path.join(tmp, "stories260K-duet.gguf")
        duet("convert", "--from", "llama2c", "--model", os.path.join(STORIES, "stories260K.bin"),
             "--tokenizer", os.path.join(STORIES, "tok512.bin"), "-o", converted)
        # A natural prompt: "Once upon a time" and the model's own continuation.
        start = [1, 403, 407, 261, 378]
        story = start + LlamaRef(gguf).greedy(start, PROMPT_LEN - len(start))
        results.append(compare("stories260K.gguf", gguf, story, tmp))
        results.append(compare("stories260K-converted", converted, story, tmp))

        rng = np.random.default_rng(1234)
        for i, (name, dtype, flags) in enumerate(SYNTH):
            path = os.path.join(tmp, name + ".gguf")
            duet("synth", *flags.split(), "--dtype", dtype, "--seed", str(100 + i), "-o", path)
            vocab = GgufFile(path).tensors["token_embd.weight"].ne[1]
            tokens = [1] + rng.integers(3, vocab, PROMPT_LEN - 1).tolist()
            results.append(compare(name, path, tokens, tmp))

    failed = results.count(False)
    print(f"\n{len(results) - failed}/{len(results)} models agree with the reference")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
