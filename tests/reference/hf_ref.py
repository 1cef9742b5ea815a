"""Hugging Face checkpoints for the reference tests: a safetensors writer (the
format is an 8-byte little-endian header length, a JSON header, raw data)
and a PyTorch forward pass written from transformers' modeling semantics for
LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM, on the HF weights
as stored: rotate-half RoPE (pairs (i, i + head_dim/2)), GQA by repeating
each KV head for consecutive query heads, Q/K/V biases, a sliding-window
causal mask (key j visible to query i when i - window < j <= i), and the
linear / llama3 rope_scaling frequency rules.
"""

import json
import math
import os

import torch

ST_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: same bits as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    """tensors: {name: torch tensor}; written in insertion order."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t)
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # keeps the data region 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_checkpoint(folder, config, tensors, shards=1):
    """config.json plus model.safetensors, or `shards` files and the index."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    names = list(tensors)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        return
    weight_map = {}
    per = math.ceil(len(names) / shards)
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(folder, file), part)
        weight_map.update({n: file for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)


def random_weights(cfg, dtype, seed):
    """Random HF-named weights of the config's shapes, rounded to `dtype`.
    Scales keep activations and logits O(1) so that top-1 is meaningful."""
    g = torch.Generator().manual_seed(seed)
    hidden, ffn, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or hidden // heads

    def mat(rows, cols):
        return (torch.randn(rows, cols, generator=g) / math.sqrt(cols)).to(dtype)

    def norm(n):
        return (1.0 + 0.1 * torch.randn(n, generator=g)).to(dtype)

    def bias(n):
        return (0.5 * torch.randn(n, generator=g)).to(dtype)

    w = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g).to(dtype)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm(hidden)
        w[p + "self_attn.q_proj.weight"] = mat(heads * hd, hidden)
        w[p + "self_attn.k_proj.weight"] = mat(kv * hd, hidden)
        w[p + "self_attn.v_proj.weight"] = mat(kv * hd, hidden)
        if cfg["architectures"][0] == "Qwen2ForCausalLM":
            w[p + "self_attn.q_proj.bias"] = bias(heads * hd)
            w[p + "self_attn.k_proj.bias"] = bias(kv * hd)
            w[p + "self_attn.v_proj.bias"] = bias(kv * hd)
        w[p + "self_attn.o_proj.weight"] = mat(hidden, heads * hd)
        w[p + "post_attention_layernorm.weight"] = norm(hidden)
        w[p + "mlp.gate_proj.weight"] = mat(ffn, hidden)
        w[p + "mlp.up_proj.weight"] = mat(ffn, hidden)
        w[p + "mlp.down_proj.weight"] = mat(hidden, ffn)
    w["model.norm.weight"] = norm(hidden)
    if not cfg.get("tie_word_embeddings", False):
        w["lm_head.weight"] = mat(vocab, hidden)
    return w


def rope_inv_freq(cfg, scaling=True):
    """transformers' inverse frequencies [head_dim/2], scaled as rope_scaling says."""
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or hidden // heads
    base = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    rs = cfg.get("rope_scaling") if scaling else None
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return inv / rs["factor"]
    assert kind == "llama3", kind
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def sliding_window_of(cfg):
    arch = cfg["architectures"][0]
    if arch == "MistralForCausalLM":
        return cfg.get("sliding_window", 4096)
    if arch == "Qwen2ForCausalLM" and cfg.get("use_sliding_window"):
        return cfg.get("sliding_window")
    return None


def forward(cfg, weights, tokens, scaling=True, window=True, biases=True):
    """Logits [n, vocab] in float64 for tokens at positions 0..n-1. The keyword
    switches turn a feature off, so a test can show it matters."""
    w = {k: v.to(torch.float64) for k, v in weights.items()}
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or hidden // heads
    eps = cfg.get("rms_norm_eps", 1e-6)
    n = len(tokens)
    pos = torch.arange(n, dtype=torch.float64)
    freqs = torch.outer(pos, rope_inv_freq(cfg, scaling))               # (n, hd/2)
    cos = torch.cat((freqs, freqs), -1).cos()[:, None, :]              # (n, 1, hd)
    sin = torch.cat((freqs, freqs), -1).sin()[:, None, :]
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    visible = j <= i
    win = sliding_window_of(cfg) if window else None
    if win:
        visible &= j > i - win

    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]           # (n, hidden)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(name):
            y = h @ w[p + f"self_attn.{name}.weight"].T
            b = p + f"self_attn.{name}.bias"
            return y + w[b] if biases and b in w else y

        q = proj("q_proj").view(n, heads, hd)
        k = proj("k_proj").view(n, kv, hd)
        v = proj("v_proj").view(n, kv, hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(heads // kv, dim=1)                     # (n, heads, hd)
        v = v.repeat_interleave(heads // kv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        scores = scores.masked_fill(~visible, float("-inf"))
        att = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, heads * hd)
        x = x + att @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T
