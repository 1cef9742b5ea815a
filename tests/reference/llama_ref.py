"""Plain PyTorch llama forward over a GGUF's tensors: the numerical reference
duet is compared with. Written for clarity, not speed; float64 by default so
that its own rounding is negligible next to duet's float32.

Weights are used exactly as stored in the GGUF (dequantized), so Q and K are
in GGUF's rotary layout: within each head, RoPE rotates the pairs
(2i, 2i+1) by pos * base^(-2i / rope_dim).
"""

import torch

from gguf_reader import GgufFile


class LlamaRef:
    def __init__(self, path, dtype=torch.float64):
        g = GgufFile(path)
        self.gguf = g
        arch = g.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"{path}: architecture {arch!r}, expected 'llama'")

        def hp(key, default=None):
            v = g.get(f"llama.{key}", default)
            if v is None:
                raise ValueError(f"{path}: missing llama.{key}")
            return v

        self.dim = int(hp("embedding_length"))
        self.n_layers = int(hp("block_count"))
        self.n_heads = int(hp("attention.head_count"))
        self.n_kv_heads = int(hp("attention.head_count_kv", self.n_heads))
        self.head_dim = int(hp("attention.key_length", self.dim // self.n_heads))
        self.rope_dim = int(hp("rope.dimension_count", self.head_dim))
        self.rope_base = float(hp("rope.freq_base", 10000.0))
        self.eps = float(hp("attention.layer_norm_rms_epsilon"))
        self.dtype = dtype

        def w(name):
            return torch.from_numpy(g.array(name).copy()).to(dtype)

        self.tok_embd = w("token_embd.weight")                        # (vocab, dim)
        self.vocab = self.tok_embd.shape[0]
        self.layers = []
        for l in range(self.n_layers):
            p = f"blk.{l}."
            self.layers.append({k: w(p + k + ".weight") for k in (
                "attn_norm",    # (dim)
                "attn_q",       # (n_heads*head_dim, dim)
                "attn_k",       # (n_kv_heads*head_dim, dim)
                "attn_v",       # (n_kv_heads*head_dim, dim)
                "attn_output",  # (dim, n_heads*head_dim)
                "ffn_norm",     # (dim)
                "ffn_gate",     # (ffn, dim)
                "ffn_up",       # (ffn, dim)
                "ffn_down",     # (dim, ffn)
            )})
        self.out_norm = w("output_norm.weight")                       # (dim)
        self.output = (w("output.weight") if "output.weight" in g.tensors
                       else self.tok_embd)                            # (vocab, dim)

    def rmsnorm(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    def rope(self, x, positions):
        # x: (n, heads, head_dim); rotates the first rope_dim dims in pairs.
        half = self.rope_dim // 2
        i = torch.arange(half, dtype=self.dtype)
        inv_freq = self.rope_base ** (-2.0 * i / self.rope_dim)                 # (half)
        ang = positions.to(self.dtype)[:, None] * inv_freq[None, :]            # (n, half)
        cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]       # (n, 1, half)
        r = x[..., :self.rope_dim].reshape(*x.shape[:-1], half, 2)
        x0, x1 = r[..., 0], r[..., 1]
        rot = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
        return torch.cat((rot.reshape(*x.shape[:-1], self.rope_dim), x[..., self.rope_dim:]), -1)

    def attention(self, x, L, positions, cache):
        # cache: this layer's (k, v) of earlier positions, extended in place.
        n = x.shape[0]
        q = (x @ L["attn_q"].T).view(n, self.n_heads, self.head_dim)
        k = (x @ L["attn_k"].T).view(n, self.n_kv_heads, self.head_dim)
        v = (x @ L["attn_v"].T).view(n, self.n_kv_heads, self.head_dim)
        q, k = self.rope(q, positions), self.rope(k, positions)
        if cache:
            k, v = torch.cat((cache[0], k)), torch.cat((cache[1], v))
        cache[:] = [k, v]
        group = self.n_heads // self.n_kv_heads          # query heads per KV head
        k = k.repeat_interleave(group, dim=1)            # (n_past + n, n_heads, head_dim)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / self.head_dim ** 0.5
        visible = positions[:, None] >= torch.arange(k.shape[0])[None, :]     # causal
        scores = scores.masked_fill(~visible, float("-inf"))
        out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v)
        return out.reshape(n, self.n_heads * self.head_dim) @ L["attn_output"].T

    def ffn(self, x, L):
        return (torch.nn.functional.silu(x @ L["ffn_gate"].T) * (x @ L["ffn_up"].T)) @ L["ffn_down"].T

    @torch.no_grad()
    def forward(self, tokens, cache=None):
        """Logits (n_tokens, vocab) of `tokens`, which continue the sequence
        held in `cache` (a list from new_cache(); None: a fresh sequence)."""
        return self.hidden(tokens, cache) @ self.output.T

    @torch.no_grad()
    def hidden(self, tokens, cache=None):
        """The final hidden states (n_tokens, dim), after the output norm:
        what forward() multiplies by the vocabulary head."""
        cache = cache if cache is not None else self.new_cache()
        n_past = cache[0][0].shape[0] if cache[0] else 0
        ids = torch.tensor(tokens, dtype=torch.long)
        positions = torch.arange(n_past, n_past + len(tokens))
        x = self.tok_embd[ids]                                                 # (n, dim)
        for L, c in zip(self.layers, cache):
            x = x + self.attention(self.rmsnorm(x, L["attn_norm"]), L, positions, c)
            x = x + self.ffn(self.rmsnorm(x, L["ffn_norm"]), L)
        return self.rmsnorm(x, self.out_norm)

    def new_cache(self):
        return [[] for _ in self.layers]

    def greedy(self, prompt, n_new):
        """Greedy continuation of `prompt`: n_new ids (no stop at EOS)."""
        cache = self.new_cache()
        logits = self.forward(prompt, cache)
        out = []
        for _ in range(n_new):
            out.append(int(logits[-1].argmax()))
            logits = self.forward(out[-1:], cache)
        return out

    def detokenize(self, ids):
        """Text of SentencePiece-style ids, using the GGUF's token strings."""
        tokens = self.gguf.get("tokenizer.ggml.tokens")
        out = bytearray()
        for i in ids:
            t = tokens[i]
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                out.append(int(t[3:5], 16))
            else:
                out += t.replace("\u2581", " ").encode("utf-8", errors="surrogateescape")
        return out.decode("utf-8", errors="replace")
