"""Hugging Face checkpoints for the reference tests: a safetensors writer (the
format is an 8-byte little-endian header length, a JSON header, raw data)
and a PyTorch forward pass written from transformers' modeling semantics for
LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM /
Gemma2ForCausalLM / Gemma3ForCausalLM / Phi3ForCausalLM, on the HF weights as
stored: rotate-half RoPE (pairs (i, i + rotary_dim/2)), GQA by repeating
each KV head for consecutive query heads, Q/K/V biases, a sliding-window
causal mask (key j visible to query i when i - window < j <= i), and the
linear / llama3 rope_scaling frequency rules. Per family:
- Qwen3: RMSNorm over each head of q and k (q_norm, k_norm) before RoPE.
- Gemma 2/3: RMSNorm as x * (1 + w); embeddings times sqrt(hidden); norms
  before and after attention and the MLP; GELU (tanh) gating; scores scaled
  by query_pre_attn_scalar^-1/2. Gemma 2: score and logit soft-caps, every
  even layer sliding. Gemma 3: q/k norms, layer l global iff (l + 1) % 6 == 0,
  local layers on rope_local_base_freq without rope_scaling.
- Phi-3: fused qkv_proj and gate_up_proj (gate first), partial rotary.
- Mixtral / Qwen3-MoE: a router (block_sparse_moe.gate / mlp.gate) whose
  softmax picks each token's top num_experts_per_tok experts, weighted by
  their probabilities (renormalised to sum 1 for Mixtral, and for Qwen3-MoE
  when norm_topk_prob); every expert a SwiGLU MLP (Mixtral's w1 gate, w3 up,
  w2 down). Qwen3-MoE: Qwen3 attention; the layers in mlp_only_layers keep a
  dense MLP. Qwen2-MoE: Qwen2 attention (biases), plus a shared expert every
  token runs, scaled by sigmoid(h · shared_expert_gate).
- DeepSeek-V2 (DeepseekV2ForCausalLM, as its own modeling code defines it):
  multi-head latent attention. q = q_proj(h) (or q_b_proj(RMSNorm(q_a_proj(h))))
  per head [q_nope | q_pe]; kv_a_proj_with_mqa(h) = [compressed_kv | k_pe];
  kv_b_proj(RMSNorm(compressed_kv)) per head [k_nope | v]; k_pe is one head
  shared by all; q_pe and k_pe are rotated after de-interleaving their dims
  (view(d/2, 2).transpose), then rotate-half; scores scaled by
  (nope + rope)^-1/2. MoE after first_k_dense_replace layers: softmax over
  the experts, greedy top-k, renormalised when norm_topk_prob, else times
  routed_scaling_factor; plus n_shared_experts experts fused as one MLP of
  n_shared * moe_intermediate_size (mlp.shared_experts), ungated.
- OLMoE (OlmoeForCausalLM): Llama's layer with RMSNorms over the whole of q
  and of k (q_norm of heads * head_dim, k_norm of kv_heads * head_dim,
  before the split into heads), rotate-half RoPE, and a mixture of experts
  in every layer (mlp.gate, mlp.experts.N.*_proj), softmax then top-k,
  renormalised only when norm_topk_prob.
- OLMo 2 (Olmo2ForCausalLM): OLMoE's q/k norms on a dense layer with no
  norm before attention or the MLP: x + post_attention_layernorm(attn(x)),
  then h + post_feedforward_layernorm(mlp(h)).
"""

import json
import math
import os

import torch

ST_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32"}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: same bits as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    """tensors: {name: torch tensor, or (safetensors dtype, uint8 tensor of
    its bytes) for a type torch lacks, e.g. F8_E4M3}; in insertion order."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        st_dtype, t = t if isinstance(t, tuple) else (ST_DTYPES[t.dtype], t)
        data = tensor_bytes(t)
        header[name] = {"dtype": st_dtype, "shape": list(t.shape),
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


GEMMA = ("Gemma2ForCausalLM", "Gemma3ForCausalLM")
QK_NORM = ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Gemma3ForCausalLM")
WIDE_QK_NORM = ("OlmoeForCausalLM", "Olmo2ForCausalLM")  # one norm over all heads of q (of k)
POST_NORMS_ONLY = ("Olmo2ForCausalLM",)


def moe_layer(cfg, l):
    """Whether layer l routes to experts: its MLP's prefix and the names of
    an expert's gate, up and down projections, or None for a dense MLP."""
    arch = arch_of(cfg)
    if arch == "MixtralForCausalLM":
        return "block_sparse_moe.", ("w1", "w3", "w2")
    if arch in ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "OlmoeForCausalLM") \
            and l not in cfg.get("mlp_only_layers", []):
        return "mlp.", ("gate_proj", "up_proj", "down_proj")
    return None


def n_experts_of(cfg):
    return cfg.get("num_local_experts", cfg.get("num_experts"))


def expert_ffn_of(cfg):
    return cfg.get("moe_intermediate_size", cfg["intermediate_size"])


def arch_of(cfg):
    return cfg["architectures"][0]


def head_dim_of(cfg):
    default = 256 if arch_of(cfg) in GEMMA else cfg["hidden_size"] // cfg["num_attention_heads"]
    return cfg.get("head_dim") or default


def deepseek_v2_weights(cfg, dtype, g):
    hidden, ffn, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, nope, rope = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
    vd, kvl, ql = cfg["v_head_dim"], cfg["kv_lora_rank"], cfg.get("q_lora_rank")

    def mat(rows, cols):
        return (torch.randn(rows, cols, generator=g) / math.sqrt(cols)).to(dtype)

    def norm(n):
        return (1.0 + 0.1 * torch.randn(n, generator=g)).to(dtype)

    w = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g).to(dtype)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm(hidden)
        if ql:
            w[p + "self_attn.q_a_proj.weight"] = mat(ql, hidden)
            w[p + "self_attn.q_a_layernorm.weight"] = norm(ql)
            w[p + "self_attn.q_b_proj.weight"] = mat(heads * (nope + rope), ql)
        else:
            w[p + "self_attn.q_proj.weight"] = mat(heads * (nope + rope), hidden)
        w[p + "self_attn.kv_a_proj_with_mqa.weight"] = mat(kvl + rope, hidden)
        w[p + "self_attn.kv_a_layernorm.weight"] = norm(kvl)
        w[p + "self_attn.kv_b_proj.weight"] = mat(heads * (nope + vd), kvl)
        w[p + "self_attn.o_proj.weight"] = mat(hidden, heads * vd)
        w[p + "post_attention_layernorm.weight"] = norm(hidden)
        if deepseek_moe_layer(cfg, l):
            e_ffn = cfg["moe_intermediate_size"]
            w[p + "mlp.gate.weight"] = mat(cfg["n_routed_experts"], hidden)
            for e in range(cfg["n_routed_experts"]):
                q = p + f"mlp.experts.{e}."
                w[q + "gate_proj.weight"] = mat(e_ffn, hidden)
                w[q + "up_proj.weight"] = mat(e_ffn, hidden)
                w[q + "down_proj.weight"] = mat(hidden, e_ffn)
            s_ffn = e_ffn * cfg.get("n_shared_experts", 0)
            if s_ffn:
                q = p + "mlp.shared_experts."
                w[q + "gate_proj.weight"] = mat(s_ffn, hidden)
                w[q + "up_proj.weight"] = mat(s_ffn, hidden)
                w[q + "down_proj.weight"] = mat(hidden, s_ffn)
            continue
        w[p + "mlp.gate_proj.weight"] = mat(ffn, hidden)
        w[p + "mlp.up_proj.weight"] = mat(ffn, hidden)
        w[p + "mlp.down_proj.weight"] = mat(hidden, ffn)
    w["model.norm.weight"] = norm(hidden)
    w["lm_head.weight"] = mat(vocab, hidden)
    return w


def deepseek_moe_layer(cfg, l):
    return (cfg.get("n_routed_experts") and l >= cfg.get("first_k_dense_replace", 0)
            and l % cfg.get("moe_layer_freq", 1) == 0)


def yarn_mscale(factor, m):
    return 0.1 * m * math.log(factor) + 1.0 if factor > 1 else 1.0


def yarn_frequencies(inv, rs, dim, base):
    """YaRN's blend of inverse frequencies [dim/2]: dims turning more than
    beta_fast times over the original context keep their frequency, fewer
    than beta_slow are divided by the factor, a linear ramp between."""
    factor, orig = rs["factor"], rs["original_max_position_embeddings"]

    def dim_turning(rotations):
        return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(dim_turning(rs.get("beta_fast", 32))), 0)
    high = min(math.ceil(dim_turning(rs.get("beta_slow", 1))), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return inv / factor * ramp + inv * (1 - ramp)


def deepseek_yarn(cfg, rope, base, yarn=True):
    """DeepSeek-V2's rotary frequencies [rope/2] and its two YaRN factors (on
    cos/sin, and on the softmax scale), as transformers'
    DeepseekV2YarnRotaryEmbedding and DeepseekV2Attention compute them."""
    inv = 1.0 / base ** (torch.arange(0, rope, 2, dtype=torch.float64) / rope)
    rs = cfg.get("rope_scaling")
    if not yarn or not rs or rs.get("type", rs.get("rope_type")) != "yarn":
        return inv, 1.0, 1.0
    inv = yarn_frequencies(inv, rs, rope, base)
    factor = rs["factor"]
    m, m_all = rs.get("mscale", 1), rs.get("mscale_all_dim", 0)
    return inv, yarn_mscale(factor, m) / yarn_mscale(factor, m_all), yarn_mscale(factor, m_all) ** 2


def deepseek_v2_forward(cfg, weights, tokens, interleave=True, top_k=None, shared_expert=True,
                        routed_scale=True, yarn=True):
    """DeepSeek-V2's logits [n, vocab] in float64; `interleave` False rotates
    q_pe/k_pe by plain rotate-half (without DeepSeek's de-interleaving);
    `yarn` False ignores a YaRN rope_scaling."""
    w = {k: v.to(torch.float64) for k, v in weights.items()}
    heads, nope, rope = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
    vd, kvl = cfg["v_head_dim"], cfg["kv_lora_rank"]
    eps = cfg.get("rms_norm_eps", 1e-6)
    silu = torch.nn.functional.silu
    n = len(tokens)
    inv, rope_mscale, score_mscale = deepseek_yarn(cfg, rope, cfg.get("rope_theta", 10000.0), yarn)
    freqs = torch.outer(torch.arange(n, dtype=torch.float64), inv)
    cos = torch.cat((freqs, freqs), -1).cos()[:, None, :] * rope_mscale  # (n, 1, rope)
    sin = torch.cat((freqs, freqs), -1).sin()[:, None, :] * rope_mscale

    def rotate(x):                                                      # (n, h, rope)
        if interleave:
            x = x.reshape(*x.shape[:-1], rope // 2, 2).transpose(-1, -2).reshape(x.shape)
        return x * cos + rotate_half(x) * sin

    def mlp(h, q):
        return (silu(h @ w[q + "gate_proj.weight"].T) * (h @ w[q + "up_proj.weight"].T)) @ w[q + "down_proj.weight"].T

    causal = torch.arange(n)[None, :] <= torch.arange(n)[:, None]
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}.self_attn."
        h = rms_norm(x, w[f"model.layers.{l}.input_layernorm.weight"], eps)
        if cfg.get("q_lora_rank"):
            q = rms_norm(h @ w[p + "q_a_proj.weight"].T, w[p + "q_a_layernorm.weight"], eps) @ w[p + "q_b_proj.weight"].T
        else:
            q = h @ w[p + "q_proj.weight"].T
        q = q.reshape(n, heads, nope + rope)
        q_nope, q_pe = q[..., :nope], q[..., nope:]
        ckv = h @ w[p + "kv_a_proj_with_mqa.weight"].T
        c, k_pe = ckv[:, :kvl], ckv[:, None, kvl:]                      # k_pe (n, 1, rope)
        kv = (rms_norm(c, w[p + "kv_a_layernorm.weight"], eps) @ w[p + "kv_b_proj.weight"].T).reshape(n, heads, nope + vd)
        k_nope, v = kv[..., :nope], kv[..., nope:]
        q_pe, k_pe = rotate(q_pe), rotate(k_pe)
        qs = torch.cat((q_nope, q_pe), -1)
        ks = torch.cat((k_nope, k_pe.expand(n, heads, rope)), -1)
        scores = torch.einsum("qhd,khd->hqk", qs, ks) * (nope + rope) ** -0.5 * score_mscale
        scores = scores.masked_fill(~causal, float("-inf"))
        att = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, heads * vd)
        x = x + att @ w[p + "o_proj.weight"].T
        h = rms_norm(x, w[f"model.layers.{l}.post_attention_layernorm.weight"], eps)
        m = f"model.layers.{l}.mlp."
        if not deepseek_moe_layer(cfg, l):
            x = x + mlp(h, m)
            continue
        k = top_k or cfg["num_experts_per_tok"]
        probs = (h @ w[m + "gate.weight"].T).softmax(-1)
        top_w, top_i = probs.topk(k, -1)
        if k > 1 and cfg.get("norm_topk_prob", False):
            top_w = top_w / (top_w.sum(-1, keepdim=True) + 1e-20)
        elif routed_scale:
            top_w = top_w * cfg.get("routed_scaling_factor", 1.0)
        routing = torch.zeros_like(probs).scatter(-1, top_i, top_w)
        out = torch.zeros_like(h)
        for e in range(cfg["n_routed_experts"]):
            out = out + routing[:, e:e + 1] * mlp(h, m + f"experts.{e}.")
        if shared_expert and m + "shared_experts.gate_proj.weight" in w:
            out = out + mlp(h, m + "shared_experts.")
        x = x + out
    x = rms_norm(x, w["model.norm.weight"], eps)
    return x @ w["lm_head.weight"].T


def random_weights(cfg, dtype, seed):
    """Random HF-named weights of the config's shapes, rounded to `dtype`.
    Scales keep activations and logits O(1) so that top-1 is meaningful."""
    g = torch.Generator().manual_seed(seed)
    arch = arch_of(cfg)
    if arch == "DeepseekV2ForCausalLM":
        return deepseek_v2_weights(cfg, dtype, g)
    hidden, ffn, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = head_dim_of(cfg)

    def mat(rows, cols):
        return (torch.randn(rows, cols, generator=g) / math.sqrt(cols)).to(dtype)

    def norm(n):  # Gemma stores w of its (1 + w)
        return ((0.0 if arch in GEMMA else 1.0) + 0.1 * torch.randn(n, generator=g)).to(dtype)

    def bias(n):
        return (0.5 * torch.randn(n, generator=g)).to(dtype)

    w = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g).to(dtype)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        if arch not in POST_NORMS_ONLY:
            w[p + "input_layernorm.weight"] = norm(hidden)
        if arch == "Phi3ForCausalLM":
            w[p + "self_attn.qkv_proj.weight"] = mat((heads + 2 * kv) * hd, hidden)
        else:
            w[p + "self_attn.q_proj.weight"] = mat(heads * hd, hidden)
            w[p + "self_attn.k_proj.weight"] = mat(kv * hd, hidden)
            w[p + "self_attn.v_proj.weight"] = mat(kv * hd, hidden)
        if arch in QK_NORM:
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        if arch in WIDE_QK_NORM:
            w[p + "self_attn.q_norm.weight"] = norm(heads * hd)
            w[p + "self_attn.k_norm.weight"] = norm(kv * hd)
        if arch in ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM"):
            w[p + "self_attn.q_proj.bias"] = bias(heads * hd)
            w[p + "self_attn.k_proj.bias"] = bias(kv * hd)
            w[p + "self_attn.v_proj.bias"] = bias(kv * hd)
        w[p + "self_attn.o_proj.weight"] = mat(hidden, heads * hd)
        w[p + "post_attention_layernorm.weight"] = norm(hidden)
        if arch in GEMMA:
            w[p + "pre_feedforward_layernorm.weight"] = norm(hidden)
        if arch in GEMMA or arch in POST_NORMS_ONLY:
            w[p + "post_feedforward_layernorm.weight"] = norm(hidden)
        moe = moe_layer(cfg, l)
        if moe:
            prefix, (gate, up, down) = moe
            e_ffn = expert_ffn_of(cfg)
            w[p + prefix + "gate.weight"] = mat(n_experts_of(cfg), hidden)
            for e in range(n_experts_of(cfg)):
                q = p + prefix + f"experts.{e}."
                w[q + gate + ".weight"] = mat(e_ffn, hidden)
                w[q + up + ".weight"] = mat(e_ffn, hidden)
                w[q + down + ".weight"] = mat(hidden, e_ffn)
            if "shared_expert_intermediate_size" in cfg:
                s_ffn = cfg["shared_expert_intermediate_size"]
                q = p + prefix + "shared_expert."
                w[q + "gate_proj.weight"] = mat(s_ffn, hidden)
                w[q + "up_proj.weight"] = mat(s_ffn, hidden)
                w[q + "down_proj.weight"] = mat(hidden, s_ffn)
                w[p + prefix + "shared_expert_gate.weight"] = mat(1, hidden)
            continue
        if arch == "Phi3ForCausalLM":
            w[p + "mlp.gate_up_proj.weight"] = mat(2 * ffn, hidden)
        else:
            w[p + "mlp.gate_proj.weight"] = mat(ffn, hidden)
            w[p + "mlp.up_proj.weight"] = mat(ffn, hidden)
        w[p + "mlp.down_proj.weight"] = mat(hidden, ffn)
    w["model.norm.weight"] = norm(hidden)
    if not cfg.get("tie_word_embeddings", arch in GEMMA):
        w["lm_head.weight"] = mat(vocab, hidden)
    return w


def rotary_dim_of(cfg):
    return int(head_dim_of(cfg) * cfg.get("partial_rotary_factor", 1.0))


def rope_inv_freq(cfg, scaling=True, local=False, n=0):
    """transformers' inverse frequencies [rotary_dim/2], scaled as rope_scaling
    says; `local`: Gemma 3's sliding layers (their own base, no scaling); `n`:
    the sequence length, which picks LongRoPE's short or long factors."""
    rd = rotary_dim_of(cfg)
    base = cfg.get("rope_local_base_freq", 10000.0) if local else cfg.get("rope_theta", 10000.0)
    inv = 1.0 / base ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd)
    rs = cfg.get("rope_scaling") if scaling and not local else None
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return inv / rs["factor"]
    if kind == "yarn":
        return yarn_frequencies(inv, rs, rd, base)
    if kind == "longrope":
        orig = cfg["original_max_position_embeddings"]
        factors = rs["long_factor"] if n > orig else rs["short_factor"]
        return inv / torch.tensor(factors, dtype=torch.float64)
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
    arch = arch_of(cfg)
    if arch in GEMMA:
        return cfg.get("sliding_window", 4096)
    if arch == "MistralForCausalLM":
        return cfg.get("sliding_window", 4096)
    if arch == "Qwen2ForCausalLM" and cfg.get("use_sliding_window"):
        return cfg.get("sliding_window")
    return None


def layer_slides(cfg, l):
    arch = arch_of(cfg)
    if arch == "Gemma2ForCausalLM":
        return l % 2 == 0
    if arch == "Gemma3ForCausalLM":
        return (l + 1) % cfg.get("sliding_window_pattern", 6) != 0
    return True


def rope_attention_factor(cfg):
    """What cos and sin are multiplied by: LongRoPE's attention factor, or
    YaRN's 1 + 0.1 ln factor (transformers' default)."""
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("type", rs.get("rope_type"))
    if kind == "yarn":
        return 0.1 * math.log(rs["factor"]) + 1.0
    if kind != "longrope":
        return 1.0
    if "attention_factor" in rs:
        return rs["attention_factor"]
    orig = cfg["original_max_position_embeddings"]
    s = cfg["max_position_embeddings"] / orig
    return math.sqrt(1 + math.log(s) / math.log(orig)) if s > 1 else 1.0


def rope_tables(cfg, n, scaling, local):
    pos = torch.arange(n, dtype=torch.float64)
    freqs = torch.outer(pos, rope_inv_freq(cfg, scaling, local, n))    # (n, rd/2)
    m = rope_attention_factor(cfg) if scaling else 1.0
    cos = torch.cat((freqs, freqs), -1).cos()[:, None, :] * m          # (n, 1, rd)
    sin = torch.cat((freqs, freqs), -1).sin()[:, None, :] * m
    return cos, sin


def apply_rope(x, cos, sin):
    rd = cos.shape[-1]
    rot, rest = x[..., :rd], x[..., rd:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, rest), -1)


def softcap(x, cap):
    return torch.tanh(x / cap) * cap if cap else x


def moe_mlp(cfg, w, p, h, li, moe, top_k=None, topk_norm=True, shared_expert=True, shared_gate=True):
    """The mixture of experts over h (n, hidden): each expert run on every
    token, its output weighted by the token's routing weight (0 unless
    chosen), which is the definition the grouped kernels must equal.
    shared_gate=False adds Qwen2-MoE's shared expert without its sigmoid gate."""
    prefix, (gate, up, down) = moe
    k = top_k or cfg.get("num_experts_per_tok", 2)
    renorm = arch_of(cfg) == "MixtralForCausalLM" or cfg.get("norm_topk_prob", False)
    probs = (li(h) @ w[p + prefix + "gate.weight"].T).softmax(-1)      # (n, E)
    top_w, top_i = probs.topk(k, -1)
    if renorm and topk_norm:
        top_w = top_w / top_w.sum(-1, keepdim=True)
    routing = torch.zeros_like(probs).scatter(-1, top_i, top_w)
    out = torch.zeros_like(h)
    for e in range(n_experts_of(cfg)):
        q = p + prefix + f"experts.{e}."
        g, u = li(h) @ w[q + gate + ".weight"].T, li(h) @ w[q + up + ".weight"].T
        out = out + routing[:, e:e + 1] * (li(torch.nn.functional.silu(g) * u) @ w[q + down + ".weight"].T)
    q = p + prefix + "shared_expert."
    if shared_expert and q + "gate_proj.weight" in w:
        g, u = li(h) @ w[q + "gate_proj.weight"].T, li(h) @ w[q + "up_proj.weight"].T
        shared = li(torch.nn.functional.silu(g) * u) @ w[q + "down_proj.weight"].T
        scale = torch.sigmoid(li(h) @ w[p + prefix + "shared_expert_gate.weight"].T) if shared_gate else 1.0
        out = out + scale * shared
    return out


def forward(cfg, weights, tokens, scaling=True, window=True, biases=True, qk_norm=True,
            softcaps=True, local_rope=True, layer_input=None, top_k=None, topk_norm=True, shared_expert=True,
            shared_gate=True, **kw):
    """Logits [n, vocab] in float64 for tokens at positions 0..n-1. The keyword
    switches turn a feature off, so a test can show it matters; layer_input,
    if given, is applied to the input of every layer's matmul (to model an
    engine's rounding of activations)."""
    if arch_of(cfg) == "DeepseekV2ForCausalLM":
        return deepseek_v2_forward(cfg, weights, tokens, top_k=top_k, shared_expert=shared_expert, **kw)
    li = layer_input or (lambda t: t)
    w = {k: v.to(torch.float64) for k, v in weights.items()}
    arch = arch_of(cfg)
    gemma = arch in GEMMA
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = head_dim_of(cfg)
    eps = cfg.get("rms_norm_eps", 1e-6)
    n = len(tokens)
    ropes = {local: rope_tables(cfg, n, scaling, local and local_rope and arch == "Gemma3ForCausalLM")
             for local in (False, True)}
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    causal = j <= i
    win = sliding_window_of(cfg) if window else None
    windowed = causal & (j > i - win) if win else causal
    scale = cfg.get("query_pre_attn_scalar", 256) ** -0.5 if gemma else 1 / math.sqrt(hd)
    attn_cap = cfg.get("attn_logit_softcapping", 50.0 if arch == "Gemma2ForCausalLM" else None)
    final_cap = cfg.get("final_logit_softcapping", 30.0 if arch == "Gemma2ForCausalLM" else None)
    if not softcaps:
        attn_cap = final_cap = None

    def norm(x, name):
        if name not in w:
            return x
        return rms_norm(x, 1.0 + w[name] if gemma else w[name], eps)

    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]           # (n, hidden)
    if gemma:
        x = x * math.sqrt(hidden)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = norm(x, p + "input_layernorm.weight")

        def proj(name):
            y = li(h) @ w[p + f"self_attn.{name}.weight"].T
            b = p + f"self_attn.{name}.bias"
            return y + w[b] if biases and b in w else y

        if arch == "Phi3ForCausalLM":
            q, k, v = proj("qkv_proj").split([heads * hd, kv * hd, kv * hd], -1)
        else:
            q, k, v = proj("q_proj"), proj("k_proj"), proj("v_proj")
        if qk_norm and arch in WIDE_QK_NORM:
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        q, k, v = q.reshape(n, heads, hd), k.reshape(n, kv, hd), v.reshape(n, kv, hd)
        if qk_norm and arch not in WIDE_QK_NORM:
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        slides = layer_slides(cfg, l)
        cos, sin = ropes[slides]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k = k.repeat_interleave(heads // kv, dim=1)                     # (n, heads, hd)
        v = v.repeat_interleave(heads // kv, dim=1)
        scores = softcap(torch.einsum("qhd,khd->hqk", q, k) * scale, attn_cap)
        scores = scores.masked_fill(~(windowed if slides else causal), float("-inf"))
        att = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, heads * hd)
        o = li(att) @ w[p + "self_attn.o_proj.weight"].T
        if gemma or arch in POST_NORMS_ONLY:  # OLMo 2 has no pre_feedforward_layernorm: norm() passes h through
            x = x + norm(o, p + "post_attention_layernorm.weight")
            h = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + o
            h = norm(x, p + "post_attention_layernorm.weight")
        moe = moe_layer(cfg, l)
        if moe:
            x = x + moe_mlp(cfg, w, p, h, li, moe, top_k, topk_norm, shared_expert, shared_gate)
            continue
        if arch == "Phi3ForCausalLM":
            gate, up = (li(h) @ w[p + "mlp.gate_up_proj.weight"].T).chunk(2, -1)
        else:
            gate, up = li(h) @ w[p + "mlp.gate_proj.weight"].T, li(h) @ w[p + "mlp.up_proj.weight"].T
        act = torch.nn.functional.gelu(gate, approximate="tanh") if gemma else torch.nn.functional.silu(gate)
        m = li(act * up) @ w[p + "mlp.down_proj.weight"].T
        x = x + norm(m, p + "post_feedforward_layernorm.weight")  # absent but for Gemma and OLMo 2
    x = norm(x, "model.norm.weight")
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return softcap(x @ head.T, final_cap)
