"""Pre-quantized Hugging Face checkpoints (GPTQ, AWQ, FP8) through duet,
against a PyTorch reference that packs and unpacks each format itself.

Each case draws random 4-bit codes, zeros and f16 scales (or FP8 E4M3 codes
and their scales) for every linear layer of a small Llama / Qwen2 / Qwen3,
packs them as the format stores them (below, from the formats' definitions,
not from duet's code), writes the folder with its quantization_config,
unpacks the tensors again in PyTorch into float weights (checked against the
drawn codes), and checks, on a 64-token prompt:

- `duet convert --from hf --dtype f32` against hf_ref.forward: dequantized
  exactly (scale times a small integer, or an E4M3 value times a scale, is
  one float32 rounding in both), so the F32 bound of test_hf_models.py
  applies: 2e-5 of max |logit|, same top-1 everywhere.
- the default `duet convert`: every layer in duet's layout (Q4_0 for
  symmetric codes, Q4_1 for asymmetric, Q8_0 for act-order and FP8), byte
  for byte as packed here from the drawn codes (or rounded from the floats).
- its logits against the exact reference within the error of duet's int8
  kernels (see KERNEL_FACTOR), same top-1 up to ties within that bound;
- the folder loaded directly gives the very same logits as that file.

Layouts, w[o][i] for output o, input i, group g:
  GPTQ (AutoGPTQ): w = scale[g][o] * (q - zero[g][o]), g = g_idx[i];
       qweight [in/8, out] int32, nibble k of word [r][o] = input 8r + k;
       qzeros [groups, out/8], nibble k of word [g][c] = output 8c + k,
       holding zero - 1 (checkpoint_format "gptq"); scales [groups, out] f16.
  AWQ (GEMM): same w with g = i / group_size; qweight [in, out/8] and qzeros
       [groups, out/8], nibble k of word [.][c] = output 8c + AWQ_ORDER[k];
       zeros as they are.
  FP8: w = e4m3(weight[o][i]) * scale, weight_scale_inv [ceil(out/bo),
       ceil(in/bi)] per block (quant_method fp8), or compressed-tensors'
       weight_scale [out, 1] per channel (plus an unused input_scale).

Controls: each case also computes the reference with one plausible layout
mistake (zeros without AutoGPTQ's +1, AWQ nibbles in plain order, g_idx
ignored, FP8 block scales along rows only, one scale per tensor); that must
move the logits by more than CONTROL_FACTOR times the F32 bound, so the
exact comparison can tell a wrong unpacking from a right one.
"""

import math
import os
import sys
import tempfile

import numpy as np
import torch

import hf_ref
import quant_numpy
from gguf_reader import GgufFile
from test_hf_models import compare, duet, duet_logits, link_tokenizer

F32_TOLERANCE = 2e-5
# Repacked layers run on duet's int8 dot kernels, which round each
# activation row to int8 codes under one scale per 256 values
# (kernels/packed_gemm.h) -- an error the exact reference does not make. So
# the bound is measured per case: the reference is run again on the weights
# as duet holds them (the blocks checked byte for byte above) with every
# layer input rounded that way, and duet may differ from the exact reference
# by at most KERNEL_FACTOR times what that emulation moves it by (it models
# the kernels' rounding, not their summation order, hence the factor).
KERNEL_FACTOR = 3
ACT_GROUP = 256
CONTROL_FACTOR = 10
N_TOKENS = 64

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def config(arch, quant, **kw):
    cfg = base_config(arch, **kw)
    cfg["quantization_config"] = quant
    return cfg


def base_config(arch, **kw):
    cfg = {"architectures": [arch], "hidden_act": "silu", "hidden_size": 128,
           "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float16"}
    cfg.update(kw)
    return cfg


def gptq(group, desc_act=False, sym=True):
    return {"quant_method": "gptq", "bits": 4, "group_size": group, "desc_act": desc_act,
            "sym": sym, "checkpoint_format": "gptq"}


CASES = [
    # Symmetric (every zero 8): duet's Q4_0 holds it exactly. Llama: Q/K rows permuted too.
    dict(name="gptq-sym-g128-llama", tok="spm", kind="gptq", zeros="sym", group=128,
         config=config("LlamaForCausalLM", gptq(128), vocab_size=32000),
         control="zeros without +1"),
    dict(name="gptq-asym-g64-qwen2", tok="qwen3", kind="gptq", zeros="asym", group=64,
         config=config("Qwen2ForCausalLM", gptq(64, sym=False), vocab_size=151936,
                       tie_word_embeddings=True, use_sliding_window=False),
         control="zeros without +1"),
    dict(name="gptq-act-order-g32-llama", tok="spm", kind="gptq", zeros="asym", group=32,
         act_order=True,
         config=config("LlamaForCausalLM", gptq(32, desc_act=True, sym=False), vocab_size=32000),
         control="g_idx ignored"),
    dict(name="awq-gemm-g64-llama", tok="spm", kind="awq", zeros="asym", group=64,
         config=config("LlamaForCausalLM", {"quant_method": "awq", "bits": 4, "group_size": 64,
                                            "version": "gemm", "zero_point": True},
                       vocab_size=32000),
         control="nibbles in plain order"),
    # DeepSeek/Qwen FP8 releases' layout, with a non-square block so rows and
    # columns cannot be confused.
    dict(name="fp8-block-32x64-qwen3", tok="qwen3", kind="fp8-block", block=(32, 64),
         config=config("Qwen3ForCausalLM", {"quant_method": "fp8", "fmt": "e4m3",
                                            "activation_scheme": "dynamic",
                                            "weight_block_size": [32, 64]},
                       vocab_size=151936, head_dim=32, tie_word_embeddings=True,
                       rope_theta=1000000.0),
         control="block scales along rows only"),
    dict(name="fp8-channel-compressed-llama", tok="spm", kind="fp8-channel",
         config=config("LlamaForCausalLM", {
             "quant_method": "compressed-tensors", "format": "float-quantized",
             "config_groups": {"group_0": {
                 "targets": ["Linear"],
                 "weights": {"num_bits": 8, "type": "float", "strategy": "channel",
                             "symmetric": True},
                 "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor"}}},
             "ignore": ["lm_head"]}, vocab_size=32000),
         control="one scale per tensor"),
]


# ---- GPTQ / AWQ

def pack_words(nibbles, order=range(8)):
    """nibbles [..., n] (0..15) -> int32 words [..., n/8]; nibble k of word c
    holds element 8c + order[k]."""
    n = nibbles.reshape(*nibbles.shape[:-1], -1, 8).to(torch.int64)
    words = sum(n[..., order[k]] << (4 * k) for k in range(8))
    return torch.from_numpy(words.numpy().astype(np.uint32).view(np.int32))


def unpack_words(words, order=range(8)):
    """The inverse of pack_words: int32 [..., m] -> nibbles [..., 8m]."""
    w = torch.from_numpy(words.numpy().view(np.uint32).astype(np.int64))
    out = torch.empty(*w.shape, 8, dtype=torch.int64)
    for k in range(8):
        out[..., order[k]] = (w >> (4 * k)) & 15
    return out.reshape(*w.shape[:-1], -1)


def draw_int4(out, inp, case, g):
    """Random codes q [out, in], real zeros z [groups, out], f16 scales, g_idx [in]."""
    group = case["group"]
    groups = math.ceil(inp / group)
    q = torch.randint(0, 16, (out, inp), generator=g)
    # Asymmetric zeros near the middle, as min/max quantization of roughly
    # centred weights gives them (zeros far off centre bias every output and
    # make a random model needlessly sensitive); any value 1..15 survives
    # AutoGPTQ's zero - 1 nibble and AWQ's plain one.
    z = torch.full((groups, out), 8)
    if case["zeros"] == "asym":
        z = z + torch.randint(-3, 4, (groups, out), generator=g)
    # q - z spreads ~4.6 wide; scales keep each output O(1).
    scales = ((0.5 + torch.rand(groups, out, generator=g)) / (4.6 * math.sqrt(inp))).half()
    g_idx = torch.arange(inp) // group
    if case.get("act_order"):  # each group keeps `group` inputs, scattered over the row
        g_idx = g_idx[torch.randperm(inp, generator=g)]
    return q, z, scales, g_idx


def pack_int4(prefix, q, z, scales, g_idx, kind):
    if kind == "gptq":
        return {prefix + ".qweight": pack_words(q).T.contiguous(),             # along inputs
                prefix + ".qzeros": pack_words((z - 1) & 15),
                prefix + ".scales": scales,
                prefix + ".g_idx": g_idx.to(torch.int32)}
    return {prefix + ".qweight": pack_words(q.T.contiguous(), AWQ_ORDER),  # along outputs
            prefix + ".qzeros": pack_words(z, AWQ_ORDER),
            prefix + ".scales": scales}


def unpack_int4(t, prefix, kind, group, mistake=None):
    """Float weights [out, in] from the stored tensors."""
    scales = t[prefix + ".scales"].float()
    if kind == "gptq":
        q = unpack_words(t[prefix + ".qweight"].T.contiguous())           # [out, in]
        z = unpack_words(t[prefix + ".qzeros"]) + (0 if mistake == "zeros without +1" else 1)
        g_idx = t[prefix + ".g_idx"].long()
        if mistake == "g_idx ignored":
            g_idx = torch.arange(q.shape[1]) // group
    else:
        order = range(8) if mistake == "nibbles in plain order" else AWQ_ORDER
        q = unpack_words(t[prefix + ".qweight"], order).T                 # [out, in]
        z = unpack_words(t[prefix + ".qzeros"], order)
        g_idx = torch.arange(q.shape[1]) // group
    return scales[g_idx].T * (q - z[g_idx].T).float()


# ---- FP8 E4M3 (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; S.1111.111 is NaN)

def e4m3_table():
    v = np.zeros(256)
    for b in range(256):
        e, m = (b >> 3) & 15, b & 7
        mag = np.nan if (e == 15 and m == 7) else (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
        v[b] = -mag if b & 0x80 else mag
    return v


E4M3 = e4m3_table()


def to_e4m3(x):
    """Nearest E4M3 code of each value of x (|x| <= 448)."""
    codes = np.array([b for b in range(256) if not np.isnan(E4M3[b])])
    order = np.argsort(E4M3[codes], kind="stable")
    values, codes = E4M3[codes][order], codes[order]
    x = x.numpy().astype(np.float64)
    hi = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
    lo = hi - 1
    pick = np.where(np.abs(values[hi] - x) < np.abs(x - values[lo]), hi, lo)
    return torch.from_numpy(codes[pick].astype(np.uint8))


def expand(scale, rows, cols, out, inp):
    return scale.repeat_interleave(rows, 0)[:out].repeat_interleave(cols, 1)[:, :inp]


def draw_fp8(prefix, out, inp, case, g):
    w = torch.randn(out, inp, generator=g) / math.sqrt(inp)
    if case["kind"] == "fp8-block":
        br, bc = case["block"]
        amax = torch.zeros(math.ceil(out / br), math.ceil(inp / bc))
        for r in range(amax.shape[0]):
            for c in range(amax.shape[1]):
                amax[r, c] = w[r * br:(r + 1) * br, c * bc:(c + 1) * bc].abs().max()
        scale = amax / 448
        codes = to_e4m3(w / expand(scale, br, bc, out, inp))
        return {prefix + ".weight": ("F8_E4M3", codes), prefix + ".weight_scale_inv": scale}
    scale = (w.abs().amax(1, keepdim=True) / 448).to(torch.bfloat16)      # [out, 1]
    codes = to_e4m3(w / scale.float())
    return {prefix + ".weight": ("F8_E4M3", codes), prefix + ".weight_scale": scale,
            prefix + ".input_scale": torch.tensor([0.05])}


def unpack_fp8(t, prefix, case, mistake=None):
    codes = t[prefix + ".weight"][1]
    w = torch.from_numpy(E4M3[codes.numpy()]).float()
    out, inp = w.shape
    if case["kind"] == "fp8-block":
        scale = t[prefix + ".weight_scale_inv"].float()
        br, bc = case["block"]
        if mistake == "block scales along rows only":
            scale = scale[:, :1].expand(-1, scale.shape[1]).contiguous()
        return w * expand(scale, br, bc, out, inp)
    scale = t[prefix + ".weight_scale"].float()
    if mistake == "one scale per tensor":
        scale = scale.max().expand_as(scale)
    return w * scale


# ---- duet's layouts, packed here from the drawn codes (Q4_0/Q4_1) or
# rounded from the unpacked floats (Q8_0), to check the converted file byte
# for byte. Q4_0: f16 d, 16 bytes, byte j = element j | element j+16 << 4,
# x = (q - 8) d; Q4_1: f16 d, f16 m, same nibbles, x = q d + m; Q8_0: f16 d
# = amax/127, 32 int8 round(x / d) half away from zero.

def nibble_bytes(q):
    """q [rows, in] codes -> [rows, in/32, 16] bytes."""
    b = q.reshape(q.shape[0], -1, 32).numpy().astype(np.uint8)
    return b[..., :16] | (b[..., 16:] << 4)


def f16_bytes(x):
    return np.ascontiguousarray(x.astype(np.float16)).view(np.uint8).reshape(*x.shape, 2)


def q4_blocks(q, z, scales, group, sym):
    """Rows of Q4_0 (sym) or Q4_1 blocks from HF-ordered codes [out, in]."""
    g = np.arange(q.shape[1] // 32) * 32 // group                       # each block's group
    d = scales.numpy()[g].T                                            # [out, blocks] f16
    parts = [f16_bytes(d)]
    if not sym:
        m = (-(d.astype(np.float32) * z.numpy()[g].T.astype(np.float32))).astype(np.float16)
        parts.append(f16_bytes(m))
    parts.append(nibble_bytes(q))
    return np.concatenate(parts, axis=-1)


def q8_blocks(w):
    x = w.numpy().astype(np.float32).reshape(w.shape[0], -1, 32)
    d = (np.abs(x).max(-1, keepdims=True) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (x * inv).astype(np.float32).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    return np.concatenate([f16_bytes(d[..., 0]), q.view(np.uint8)], axis=-1)


def gguf_rows(cfg, name, n_rows):
    """HF row of each GGUF row: llama's Q/K rows go from rotate-half pairs to
    interleaved ones, head by head; everything else keeps its order."""
    if cfg["architectures"][0] != "LlamaForCausalLM" or name not in ("self_attn.q_proj", "self_attn.k_proj"):
        return np.arange(n_rows)
    hd = hf_ref.head_dim_of(cfg)
    r = np.arange(n_rows)
    return r // hd * hd + (r % hd % 2) * (hd // 2) + r % hd // 2


GGUF_NAMES = dict(zip(LINEARS, ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]))
DEQUANT = {"Q4_0": quant_numpy.q4_0, "Q4_1": quant_numpy.q4_1, "Q8_0": quant_numpy.q8_0}
TYPE_IDS = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 8}


def expected_native(case, codes, weights):
    """{gguf name: (type, bytes [rows, blocks, block bytes])} and the weights
    those blocks hold, HF-named and ordered."""
    cfg, out, held = case["config"], {}, dict(weights)
    for l in range(cfg["num_hidden_layers"]):
        for name in LINEARS:
            prefix = f"model.layers.{l}.{name}"
            w = weights[prefix + ".weight"]
            rows = gguf_rows(cfg, name, w.shape[0])
            if prefix in codes and not case.get("act_order"):
                q, z, scales = codes[prefix]
                sym = bool((z == 8).all())
                kind, blocks = ("Q4_0" if sym else "Q4_1"), q4_blocks(q[rows], z[:, rows], scales[:, rows], case["group"], sym)
            else:
                kind, blocks = "Q8_0", q8_blocks(w[rows])
            out[f"blk.{l}.{GGUF_NAMES[name]}.weight"] = (kind, blocks)
            deq = DEQUANT[kind](blocks.tobytes()).reshape(w.shape)
            back = np.empty_like(deq)
            back[rows] = deq
            held[prefix + ".weight"] = torch.from_numpy(back)
    return out, held


def check_bytes(label, gguf, expected):
    f, bad = GgufFile(gguf), []
    for name, (kind, blocks) in expected.items():
        t = f.tensors[name]
        start = f.data_start + t.offset
        got = bytes(f.buf[start:start + blocks.size])
        if t.ggml_type != TYPE_IDS[kind] or got != blocks.tobytes():
            bad.append(f"{name} ({t.type_name}, expected {kind})")
    kinds = sorted({k for k, _ in expected.values()})
    ok = not bad
    print(f"{'ok  ' if ok else 'FAIL'} {label:52s} {len(expected)} layers as {'/'.join(kinds)}, "
          f"byte for byte" + (f"; differ: {bad[:3]}" if bad else ""), flush=True)
    return ok


def round_activations(x):
    """x's last dim in groups of ACT_GROUP: int8 codes under absmax/127."""
    k = x.shape[-1]
    xp = torch.nn.functional.pad(x, (0, -k % ACT_GROUP)).reshape(*x.shape[:-1], -1, ACT_GROUP)
    d = xp.abs().amax(-1, keepdim=True) / 127
    v = torch.where(d > 0, xp / d, torch.zeros_like(xp))
    q = torch.sign(v) * torch.floor(v.abs() + 0.5)
    return (q * d).reshape(*x.shape[:-1], -1)[..., :k]


# ---- cases

def layer_shapes(cfg):
    hd = hf_ref.head_dim_of(cfg)
    h, f = cfg["hidden_size"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    return dict(zip(LINEARS, [(q, h), (kv, h), (kv, h), (h, q), (f, h), (f, h), (h, f)]))


def quantized_checkpoint(case, seed):
    """The tensors to write, and each int4 layer's drawn codes, zeros, scales, g_idx."""
    cfg = case["config"]
    tensors = hf_ref.random_weights(cfg, torch.float16, seed)
    g = torch.Generator().manual_seed(seed + 1)
    truth = {}
    for l in range(cfg["num_hidden_layers"]):
        for name, (out, inp) in layer_shapes(cfg).items():
            prefix = f"model.layers.{l}.{name}"
            del tensors[prefix + ".weight"]
            if case["kind"] in ("gptq", "awq"):
                q, z, scales, g_idx = draw_int4(out, inp, case, g)
                tensors.update(pack_int4(prefix, q, z, scales, g_idx, case["kind"]))
                truth[prefix] = (q, z, scales, g_idx)
            else:
                tensors.update(draw_fp8(prefix, out, inp, case, g))
    return tensors, truth


def float_weights(case, tensors, mistake=None):
    """The reference's weights: every layer unpacked from the stored tensors."""
    cfg = case["config"]
    w = {k: v for k, v in tensors.items() if not isinstance(v, tuple)}
    for l in range(cfg["num_hidden_layers"]):
        for name in LINEARS:
            prefix = f"model.layers.{l}.{name}"
            if case["kind"] in ("gptq", "awq"):
                w[prefix + ".weight"] = unpack_int4(tensors, prefix, case["kind"], case["group"], mistake)
            else:
                w[prefix + ".weight"] = unpack_fp8(tensors, prefix, case, mistake)
    return w


def run_case(case, tmp, rng):
    name, cfg = case["name"], case["config"]
    folder = os.path.join(tmp, name)
    os.makedirs(folder)
    tok_vocab = link_tokenizer(case["tok"], folder)
    tensors, drawn = quantized_checkpoint(case, seed=len(name))
    hf_ref.write_checkpoint(folder, cfg, tensors)
    weights = float_weights(case, tensors)
    results = []

    # The reference's own unpacking: the drawn codes come back (int4), the
    # E4M3 table holds the spec's landmarks (FP8).
    if drawn:
        unpacked = all(torch.equal(weights[p + ".weight"], s.float()[g].T * (q - z[g].T).float())
                       for p, (q, z, s, g) in drawn.items())
    else:
        unpacked = (E4M3[0x7E] == 448 and E4M3[0x38] == 1 and E4M3[0x01] == 2.0 ** -9
                    and E4M3[0xC0] == -2 and np.isnan(E4M3[0xFF]))
    print(f"{'ok  ' if unpacked else 'FAIL'} {name + ': reference unpacking':52s}", flush=True)
    results.append(unpacked)

    tokens = rng.integers(0, tok_vocab, N_TOKENS).tolist()
    want = hf_ref.forward(cfg, weights, tokens)
    scale = float(want.abs().max())

    # Exact dequantization.
    vocab = cfg["vocab_size"]
    gguf32 = os.path.join(tmp, name + "-f32.gguf")
    duet("convert", "--from", "hf", folder, "-o", gguf32, "--dtype", "f32")
    got = duet_logits(gguf32, tokens, None, os.path.join(tmp, name + ".f32.f32"), vocab)
    results.append(compare(name + " (converted --dtype f32)", got, want, F32_TOLERANCE, "F32"))

    # Repacked: the file's blocks, then the logits of the file and the folder.
    gguf = os.path.join(tmp, name + ".gguf")
    duet("convert", "--from", "hf", folder, "-o", gguf)
    codes = {p: (q, z, s) for p, (q, z, s, _) in drawn.items()}
    expected, held = expected_native(case, codes, weights)
    results.append(check_bytes(name + ": converted layers", gguf, expected))
    emulated = hf_ref.forward(cfg, held, tokens, layer_input=round_activations)
    effect = float((emulated - want).abs().max()) / scale
    tol = max(KERNEL_FACTOR * effect, F32_TOLERANCE)
    print(f"     {name + ': int8 activations + held weights':52s} move the reference by "
          f"{effect:.3e} relative; tolerance {tol:.3e}", flush=True)

    wrong = hf_ref.forward(cfg, float_weights(case, tensors, case["control"]), tokens)
    moved = float((wrong - want).abs().max()) / scale
    ok = moved > CONTROL_FACTOR * F32_TOLERANCE
    print(f"{'ok  ' if ok else 'FAIL'} {name + ': ' + case['control']:52s} moves logits by "
          f"{moved:.3e} relative (needs > {CONTROL_FACTOR * F32_TOLERANCE:.1e})", flush=True)
    results.append(ok)

    converted = duet_logits(gguf, tokens, None, os.path.join(tmp, name + ".gguf.f32"), vocab)
    results.append(compare(name + " (converted, repacked)", converted, want, tol, "Q"))
    got = duet_logits(folder, tokens, None, os.path.join(tmp, name + ".dir.f32"), vocab)
    same = torch.equal(got, converted)
    print(f"{'ok  ' if same else 'FAIL'} {name + ' (folder) = converted file':52s}", flush=True)
    results.append(same)
    return results


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(11)
    results = []
    with tempfile.TemporaryDirectory(prefix="duet-hfq-") as tmp:
        only = sys.argv[1:]
        for case in CASES:
            if not only or case["name"] in only:
                results += run_case(case, tmp, rng)
    failed = results.count(False)
    print(f"\n{len(results) - failed}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
