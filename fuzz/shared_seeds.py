#!/usr/bin/env python3
"""Seeds from the shared models and tokenizers, made small: the fuzzers run
fastest on inputs of a few KB, so each real file is cut down to a valid file
of the same shape rather than copied.

  python3 fuzz/shared_seeds.py SHARED_DIR OUT_DIR

writes OUT_DIR/<target>/<name> for fuzz_gguf (every GGUF's metadata with
arrays cut to their first items, no tensors), fuzz_hf_tokenizer (each
tokenizer.json's first few hundred tokens and merges, its tokenizer_config
after a NUL), fuzz_spm_model (the first pieces of each tokenizer.model) and
fuzz_jinja (every chat template found). Missing inputs are skipped."""
import glob
import json
import os
import struct
import sys

N_ITEMS = 64      # array items kept per GGUF key
N_TOKENS = 300    # vocabulary entries kept per tokenizer


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- GGUF: metadata only, arrays cut ------------------------------------------
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, n):
        s = self.b[self.p:self.p + n]
        if len(s) != n:
            raise ValueError("truncated")
        self.p += n
        return s

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def raw_value(self, t, keep):
        """The value's bytes, arrays cut to `keep` items."""
        if t in SIZES:
            return self.take(SIZES[t])
        if t == 8:
            n = self.u64()
            return struct.pack("<Q", n) + self.take(n)
        if t == 9:
            et, n = self.u32(), self.u64()
            items = [self.raw_value(et, keep) for _ in range(n)]
            return struct.pack("<IQ", et, min(n, keep)) + b"".join(items[:keep])
        raise ValueError("type %d" % t)


def gguf_metadata_seed(data):
    r = Reader(data)
    if r.take(4) != b"GGUF":
        return None, None
    version, _n_tensors, n_kv = r.u32(), r.u64(), r.u64()
    out = b"GGUF" + struct.pack("<IQQ", version, 0, n_kv)
    template = None
    for _ in range(n_kv):
        klen = r.u64()
        key = r.take(klen)
        t = r.u32()
        value = r.raw_value(t, N_ITEMS)
        if key == b"tokenizer.chat_template":
            template = value[8:]
        out += struct.pack("<Q", klen) + key + struct.pack("<I", t) + value
    return out, template


def gguf_seeds(shared, out):
    for path in sorted(glob.glob(os.path.join(shared, "**", "*.gguf"), recursive=True)):
        with open(path, "rb") as f:
            data = f.read(64 << 20)
        try:
            seed, template = gguf_metadata_seed(data)
        except ValueError:
            continue
        if seed is None:
            continue
        name = os.path.basename(path)
        put(out, "fuzz_gguf", name, seed)
        if template:
            put(out, "fuzz_jinja", name + ".jinja", template)


# ---- tokenizer.json: the first tokens and the merges among them ------------------
def hf_tokenizer_seeds(shared, out):
    for path in sorted(glob.glob(os.path.join(shared, "tokenizers", "*", "tokenizer.json"))):
        family = os.path.basename(os.path.dirname(path))
        with open(path, encoding="utf-8") as f:
            tok = json.load(f)
        model = tok.get("model", {})
        vocab = {t: i for t, i in model.get("vocab", {}).items() if i < N_TOKENS}
        merges = []
        for m in model.get("merges", []):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in vocab and b in vocab and a + b in vocab:
                merges.append(m)
        model["vocab"], model["merges"] = vocab, merges
        added = tok.get("added_tokens", [])[:8]
        for i, a in enumerate(added):
            a["id"] = N_TOKENS + i  # keep the ids dense: no placeholder holes
        tok["added_tokens"] = added
        body = json.dumps(tok, ensure_ascii=False)
        put(out, "fuzz_hf_tokenizer", family + ".json", body)
        cfg_path = os.path.join(os.path.dirname(path), "tokenizer_config.json")
        if os.path.exists(cfg_path):
            with open(cfg_path, encoding="utf-8") as f:
                cfg = json.load(f)
            template = cfg.pop("chat_template", None)
            cfg.pop("added_tokens_decoder", None)
            put(out, "fuzz_hf_tokenizer", family + "_with_config.json", body + "\0" + json.dumps(cfg))
            if isinstance(template, str):
                put(out, "fuzz_jinja", family + ".jinja", template)


# ---- tokenizer.model: the first pieces -------------------------------------------
def varint(b, p):
    v = s = 0
    while True:
        c = b[p]
        p += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return v, p


def spm_seeds(shared, out):
    for path in sorted(glob.glob(os.path.join(shared, "**", "tokenizer.model"), recursive=True)):
        with open(path, "rb") as f:
            b = f.read()
        p, kept, pieces = 0, b"", 0
        while p < len(b):
            start = p
            tag, p = varint(b, p)
            wire = tag & 7
            if wire == 0:
                _, p = varint(b, p)
            elif wire == 1:
                p += 8
            elif wire == 5:
                p += 4
            elif wire == 2:
                n, p = varint(b, p)
                p += n
            else:
                break
            if tag >> 3 == 1:
                pieces += 1
                if pieces > N_TOKENS:
                    continue
            kept += b[start:p]
        family = os.path.basename(os.path.dirname(path))
        put(out, "fuzz_spm_model", family + ".model", kept)


if __name__ == "__main__":
    shared, out = sys.argv[1], sys.argv[2]
    for make in (gguf_seeds, hf_tokenizer_seeds, spm_seeds):
        try:
            make(shared, out)
        except (OSError, ValueError, KeyError, IndexError) as e:
            print("shared_seeds.py: %s: %s" % (make.__name__, e), file=sys.stderr)
