"""Hugging Face checkpoints through duet, per architecture, against a PyTorch
reference written from transformers' modeling semantics (hf_ref.py).

Each case writes a random-weight checkpoint (safetensors by hand, config.json,
a real tokenizer linked from DUET_SHARED_DIR), then runs `duet logits -m DIR`
(the folder loaded directly) and `duet convert --from hf DIR` + `duet logits`
on the GGUF. Every position must agree on the top-1 token and stay within the
storage dtype's tolerance. Cases cover: Llama with GQA and linear RoPE
scaling (and a text prompt tokenized by sentencepiece); Mistral with a
sliding window of 8 over 40 positions, in two shards; Qwen2 with Q/K/V
biases and tied embeddings; Llama 3 rope_scaling at positions beyond
original_max_position_embeddings; head_dim != hidden/heads; Qwen3, Gemma 2/3,
Phi-3, OLMo 2; the mixtures of experts Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE and DeepSeek-V2
with its multi-head latent attention (the folder serves one
tensor per expert, the converted GGUF stacks them). For the features
that change the math, the reference with the feature switched off must be
far outside the tolerance, so the comparison can tell.

Also: the converted GGUF's head_dim case is read by the GGUF-layout reference
(llama_ref.py) and must match the HF reference (so the Q/K permutation is
the conventional one), and the vocabularies converted from tokenizer.json
must equal the ones llama.cpp's converter wrote for the same families.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch

import hf_ref
from gguf_reader import GgufFile
from llama_ref import LlamaRef

DUET = os.environ.get("DUET_BINARY", "duet")
SHARED = os.environ.get("DUET_SHARED_DIR", "/work/shared")
TOK = os.path.join(SHARED, "tokenizers")
VOCABS = os.path.join(TOK, "llama.cpp-vocab")

# Max |duet - reference| relative to the largest |logit| (as test_logits.py
# argues): float32 accumulation alone gives ~1e-6; F16/BF16 leave room for
# kernels that round activations to the weight type. The reference uses the
# very weights duet reads (rounded to the storage dtype first).
TOLERANCE = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
# A switched-off feature must move the logits by this many tolerances.
CONTROL_FACTOR = 10


def base_config(arch, **kw):
    cfg = {"architectures": [arch], "hidden_act": "silu", "hidden_size": 64,
           "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32"}
    cfg.update(kw)
    return cfg


CASES = [
    dict(name="llama-gqa-linear-rope", tok="spm", dtype=torch.float32, prompt=True,
         config=base_config("LlamaForCausalLM", vocab_size=32000,
                            rope_scaling={"type": "linear", "factor": 2.0}),
         control={"scaling": False}),
    dict(name="mistral-window8-sharded", tok="spm", dtype=torch.bfloat16, shards=2, n=40,
         also_f32=True,
         config=base_config("MistralForCausalLM", vocab_size=32000, num_key_value_heads=1,
                            sliding_window=8),
         control={"window": False}),
    dict(name="qwen2-bias-tied", tok="qwen3", dtype=torch.float16,
         config=base_config("Qwen2ForCausalLM", vocab_size=151936, hidden_size=32,
                            intermediate_size=96, tie_word_embeddings=True,
                            use_sliding_window=False, rope_theta=1000000.0),
         control={"biases": False}),
    # head_dim 16: wavelengths 6.3, 19.9, 62.8, ... against original context 32
    # with low/high factors 1/4 hit all three llama3 regions (kept, blended,
    # divided by the factor); 64 positions run past the original context.
    dict(name="llama3-rope-scaling", tok="llama3", dtype=torch.float32, n=64,
         config=base_config("LlamaForCausalLM", vocab_size=128256, hidden_size=32,
                            intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
                            rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 32}),
         control={"scaling": False}),
    dict(name="llama-head-dim-48-tied", tok="spm", dtype=torch.float16, gguf_ref=True,
         config=base_config("LlamaForCausalLM", vocab_size=32000, head_dim=48,
                            tie_word_embeddings=True)),
    # Qwen3-0.6B scaled down: head_dim 32 while hidden/heads is 16, tied.
    dict(name="qwen3-qk-norm-tied", tok="qwen3", dtype=torch.float32, n=64,
         config=base_config("Qwen3ForCausalLM", vocab_size=151936, head_dim=32,
                            tie_word_embeddings=True, rope_theta=1000000.0),
         control={"qk_norm": False}),
    # Gemma 2 scaled down: head_dim 32, query_pre_attn_scalar 24 (neither
    # hidden/heads nor head_dim), soft-caps low enough to bite on random
    # weights, a window of 8 over 64 positions on the even layers.
    dict(name="gemma2-softcap-window", tok="spm", dtype=torch.bfloat16, n=64, also_f32=True,
         config=base_config("Gemma2ForCausalLM", vocab_size=32000, num_hidden_layers=3,
                            head_dim=32, query_pre_attn_scalar=24, sliding_window=8,
                            attn_logit_softcapping=4.0, final_logit_softcapping=5.0,
                            hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
                            rms_norm_eps=1e-6, tie_word_embeddings=True),
         control={"softcaps": False, "window": False}),
    # Gemma 3 scaled down: 7 layers (layer 5 global, the rest sliding), q/k
    # norms, local RoPE base 10000 against global 1e6 with linear factor 8.
    dict(name="gemma3-local-global", tok="spm", dtype=torch.float32, n=64,
         config=base_config("Gemma3ForCausalLM", vocab_size=32000, num_hidden_layers=7,
                            head_dim=16, query_pre_attn_scalar=16, sliding_window=8,
                            rope_theta=1000000.0, rope_local_base_freq=10000.0,
                            rope_scaling={"rope_type": "linear", "factor": 8.0},
                            hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
                            rms_norm_eps=1e-6, tie_word_embeddings=True),
         control={"local_rope": False, "window": False, "qk_norm": False}),
    # Mixtral scaled down: 8 experts, top-2, in BF16; routing must matter
    # (all experts at once moves the logits far).
    dict(name="mixtral-8-experts-top2", tok="spm", dtype=torch.bfloat16, n=40, also_f32=True,
         config=base_config("MixtralForCausalLM", vocab_size=32000, num_local_experts=8,
                            num_experts_per_tok=2, sliding_window=None, rope_theta=1000000.0),
         control={"top_k": 8}),
    # Qwen3-30B-A3B scaled down: 16 experts of 48, top-4, renormalised,
    # layer 1 dense (mlp_only_layers), Qwen3 attention.
    dict(name="qwen3moe-16-experts-top4", tok="qwen3", dtype=torch.float32, n=48,
         config=base_config("Qwen3MoeForCausalLM", vocab_size=151936, head_dim=32, num_hidden_layers=3,
                            num_experts=16, num_experts_per_tok=4, moe_intermediate_size=48,
                            norm_topk_prob=True, mlp_only_layers=[1], rope_theta=1000000.0),
         control={"topk_norm": False, "qk_norm": False}),
    # OLMoE-1B-7B scaled down: 16 experts of intermediate_size 48, top-4 not
    # renormalised, q and k each normed over all their heads; the norms and
    # the routing must matter.
    dict(name="olmoe-16-experts-top4", tok="qwen3", dtype=torch.float32, n=48,
         config=base_config("OlmoeForCausalLM", vocab_size=151936, num_key_value_heads=4, intermediate_size=48,
                            num_experts=16, num_experts_per_tok=4, norm_topk_prob=False, clip_qkv=None),
         control={"qk_norm": False, "top_k": 16}),
    # OLMo 2 scaled down: norms only after attention and the MLP, q and k
    # normed over all their heads (which must matter), rope_theta 500000.
    dict(name="olmo2-post-norms", tok="qwen3", dtype=torch.bfloat16, n=48, also_f32=True,
         config=base_config("Olmo2ForCausalLM", vocab_size=151936, num_key_value_heads=4, rope_theta=500000.0,
                            rms_norm_eps=1e-6),
         control={"qk_norm": False}),
    # Qwen1.5-MoE-A2.7B scaled down: Qwen2 attention with biases, 8 experts
    # of 32, top-2 without renormalising, a shared expert of 96 scaled by
    # sigmoid(h · shared_expert_gate) (the gate must matter too).
    dict(name="qwen2moe-shared-expert", tok="qwen3", dtype=torch.float16, n=40,
         config=base_config("Qwen2MoeForCausalLM", vocab_size=151936, num_experts=8, num_experts_per_tok=2,
                            moe_intermediate_size=32, shared_expert_intermediate_size=96,
                            norm_topk_prob=False, use_sliding_window=False, rope_theta=1000000.0),
         control={"shared_expert": False, "shared_gate": False, "biases": False}),
    # DeepSeek-V2-Lite scaled down: latent attention (latent 32, heads of nope
    # 16 + rope 8 for q and k, values 16; q projected directly), 8 experts of
    # 32 top-2 unnormalised times routed_scaling_factor, 2 shared experts,
    # layer 0 dense. The interleaved RoPE dims and routing must matter.
    dict(name="deepseek2-mla-8-experts-top2", tok="spm", dtype=torch.float32, n=48,
         config=base_config("DeepseekV2ForCausalLM", vocab_size=32000, num_hidden_layers=3, num_key_value_heads=4,
                            intermediate_size=96, q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16,
                            qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2,
                            n_shared_experts=2, moe_intermediate_size=32, first_k_dense_replace=1,
                            moe_layer_freq=1, norm_topk_prob=False, routed_scaling_factor=1.5,
                            topk_method="greedy", scoring_func="softmax", n_group=1, topk_group=1,
                            rms_norm_eps=1e-6, rope_scaling=None),
         control={"interleave": False, "top_k": 8, "routed_scale": False}),
    # DeepSeek-V2-Lite's YaRN (factor 40 over an original context of 4096,
    # mscale = mscale_all_dim = 0.707) scaled down: factor 8 over 16
    # positions, a wider rope so the ramp spans dims, 48 positions.
    # Qwen2.5's YaRN (factor 4 over 32k in the released configs) scaled
    # down: factor 4 over 16 positions; cos and sin times 1 + 0.1 ln 4.
    dict(name="qwen2-yarn", tok="qwen3", dtype=torch.float32, n=48,
         config=base_config("Qwen2ForCausalLM", vocab_size=151936, rope_theta=1000.0,
                            rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
         control={"scaling": False}),
    dict(name="deepseek2-yarn", tok="spm", dtype=torch.float32, n=48,
         config=base_config("DeepseekV2ForCausalLM", vocab_size=32000, num_hidden_layers=2, num_key_value_heads=4,
                            intermediate_size=96, q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16,
                            qk_rope_head_dim=16, v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2,
                            n_shared_experts=2, moe_intermediate_size=32, first_k_dense_replace=1,
                            norm_topk_prob=False, routed_scaling_factor=1.0, rms_norm_eps=1e-6, rope_theta=100.0,
                            rope_scaling={"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16,
                                          "beta_fast": 32, "beta_slow": 1, "mscale": 0.707,
                                          "mscale_all_dim": 0.707}),
         control={"yarn": False}),
    # DeepSeek-V2 (full) style: q through its low-rank bottleneck, one
    # shared expert, experts renormalised (no scaling then), in BF16.
    dict(name="deepseek2-q-lora-bf16", tok="spm", dtype=torch.bfloat16, n=40, also_f32=True,
         config=base_config("DeepseekV2ForCausalLM", vocab_size=32000, num_hidden_layers=2, num_key_value_heads=4,
                            intermediate_size=96, q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16,
                            qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2,
                            n_shared_experts=1, moe_intermediate_size=32, first_k_dense_replace=1,
                            norm_topk_prob=True, routed_scaling_factor=4.0, rms_norm_eps=1e-6),
         control={"interleave": False}),
    # Phi-4-mini scaled down: fused projections, 3/4 of each head rotated.
    dict(name="phi3-fused-partial-rotary", tok="spm", dtype=torch.float16, n=64,
         config=base_config("Phi3ForCausalLM", vocab_size=32064, partial_rotary_factor=0.75)),
    # Phi-3.5-mini-128k scaled down: LongRoPE past an original context of 32
    # (64 positions: the long factors; duet picks them for its context of
    # 256), its attention factor on the rotated dims of a partial rotary.
    dict(name="phi3-longrope", tok="spm", dtype=torch.float32, n=64,
         config=base_config("Phi3ForCausalLM", vocab_size=32064, partial_rotary_factor=0.75,
                            original_max_position_embeddings=32,
                            rope_scaling={"type": "longrope",
                                          "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                                          "long_factor": [1.0, 1.5, 3.0, 6.0, 12.0, 24.0]}),
         control={"scaling": False}),
]


def duet(*args):
    r = subprocess.run([DUET, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"duet {' '.join(args)} failed ({r.returncode}):\n{r.stderr}{r.stdout}")
    return r


def link_tokenizer(kind, folder):
    """Links the real tokenizer files; returns how many ids it names."""
    if kind == "spm":
        os.symlink(os.path.join(TOK, "llama2", "tokenizer.model"),
                   os.path.join(folder, "tokenizer.model"))
        return 32000
    for f in ("tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join(TOK, kind, f), os.path.join(folder, f))
    with open(os.path.join(TOK, kind, "tokenizer.json")) as f:
        tok = json.load(f)
    return 1 + max(list(tok["model"]["vocab"].values()) + [a["id"] for a in tok["added_tokens"]])


def duet_logits(model, tokens, prompt, out, vocab):
    source = ["-p", prompt] if prompt else ["--tokens", " ".join(map(str, tokens))]
    duet("logits", "-m", model, *source, "-o", out, "--threads", "2")
    got = np.fromfile(out, dtype="<f4")
    if got.size != len(tokens) * vocab:
        raise RuntimeError(f"{model}: duet wrote {got.size} floats, expected {len(tokens)} x {vocab}")
    return torch.from_numpy(got.reshape(len(tokens), vocab).astype(np.float64))


def compare(label, got, want, rel_tol, dtype_name):
    scale = float(want.abs().max())
    tol = rel_tol * scale
    diff = float((got - want).abs().max())
    top_got, top_want = got.argmax(-1), want.argmax(-1)
    same = int((top_got == top_want).sum())
    # Two reference logits within the tolerance are a tie at this precision.
    picked = want.gather(1, top_got[:, None])[:, 0]
    ties = int(((top_got != top_want) & (want.max(-1).values - picked <= tol)).sum())
    ok = bool(torch.isfinite(got).all()) and diff <= tol and same + ties == len(want)
    print(f"{'ok  ' if ok else 'FAIL'} {label:44s} {dtype_name:4s} max|diff| {diff:.3e} "
          f"(tol {tol:.3e})  top-1 {same}/{len(want)}" + (f" (+{ties} ties)" if ties else ""),
          flush=True)
    return ok


def run_case(case, tmp, rng):
    name, cfg, dtype = case["name"], case["config"], case["dtype"]
    folder = os.path.join(tmp, name)
    os.makedirs(folder)
    tok_vocab = link_tokenizer(case["tok"], folder)
    weights = hf_ref.random_weights(cfg, dtype, seed=len(name))
    hf_ref.write_checkpoint(folder, cfg, weights, case.get("shards", 1))

    n = case.get("n", 24)
    prompt = None
    if case.get("prompt"):
        prompt = "The quick brown fox jumps over the lazy dog; 1234 rivers, naïve café."
        sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
        tokens = [sp.bos_id()] + sp.encode(prompt)
    else:
        tokens = rng.integers(0, tok_vocab, n).tolist()
    want = hf_ref.forward(cfg, weights, tokens)
    rel_tol = TOLERANCE[dtype]
    results = []

    for feature, value in case.get("control", {}).items():
        off = hf_ref.forward(cfg, weights, tokens, **{feature: value})
        moved = float((off - want).abs().max()) / float(want.abs().max())
        ok = moved > CONTROL_FACTOR * rel_tol
        print(f"{'ok  ' if ok else 'FAIL'} {name + ': without ' + feature:44s} moves logits by "
              f"{moved:.3e} relative (needs > {CONTROL_FACTOR * rel_tol:.1e})", flush=True)
        results.append(ok)

    vocab = cfg["vocab_size"]
    got = duet_logits(folder, tokens, prompt, os.path.join(tmp, name + ".dir.f32"), vocab)
    results.append(compare(name + " (folder)", got, want, rel_tol, NAMES[dtype]))

    gguf = os.path.join(tmp, name + ".gguf")
    duet("convert", "--from", "hf", folder, "-o", gguf)
    got = duet_logits(gguf, tokens, prompt, os.path.join(tmp, name + ".gguf.f32"), vocab)
    results.append(compare(name + " (converted)", got, want, rel_tol, NAMES[dtype]))

    if case.get("also_f32"):  # widening is exact, so the F32 bound applies
        gguf32 = os.path.join(tmp, name + "-f32.gguf")
        duet("convert", "--from", "hf", folder, "-o", gguf32, "--dtype", "f32")
        got = duet_logits(gguf32, tokens, prompt, os.path.join(tmp, name + ".f32.f32"), vocab)
        results.append(compare(name + " (converted --dtype f32)", got,
                               want, TOLERANCE[torch.float32], "F32"))

    if case.get("gguf_ref"):  # an independent GGUF-layout reader of the converted file
        ref = LlamaRef(gguf, torch.float64).forward(tokens)
        results.append(compare(name + " (llama_ref.py on the GGUF)", ref, want, 1e-9, "F64"))
    return results


def check_vocab(label, folder, reference, n_base):
    """The converted tokenizer.json against llama.cpp's own conversion."""
    gguf = os.path.join(folder, "..", label + "-vocab-check.gguf")
    duet("convert", "--from", "hf", folder, "-o", gguf)
    mine, theirs = GgufFile(gguf), GgufFile(os.path.join(VOCABS, reference))
    problems = []
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.merges"):
        if mine.get(key) != theirs.get(key):
            problems.append(key)
    tokens, their_tokens = mine.get("tokenizer.ggml.tokens"), theirs.get("tokenizer.ggml.tokens")
    if tokens[:n_base] != their_tokens[:n_base]:
        problems.append("tokens")
    types, their_types = mine.get("tokenizer.ggml.token_type"), theirs.get("tokenizer.ggml.token_type")
    if list(types[:n_base]) != list(their_types[:n_base]):
        problems.append("token_type")
    ok = not problems
    print(f"{'ok  ' if ok else 'FAIL'} {label + ' vocab vs ' + reference:44s} "
          f"{len(tokens)} tokens, pre {mine.get('tokenizer.ggml.pre')!r}"
          + (f"  differs in {problems}" if problems else ""), flush=True)
    return ok


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(7)
    results = []
    with tempfile.TemporaryDirectory(prefix="duet-hf-") as tmp:
        for case in CASES:
            results += run_case(case, tmp, rng)
        results.append(check_vocab("qwen2", os.path.join(tmp, "qwen2-bias-tied"),
                                   "ggml-vocab-qwen2.gguf", 151643))
        results.append(check_vocab("llama3", os.path.join(tmp, "llama3-rope-scaling"),
                                   "ggml-vocab-llama-bpe.gguf", 128000))
    failed = results.count(False)
    print(f"\n{len(results) - failed}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
