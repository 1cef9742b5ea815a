#!/usr/bin/env python3
"""Writes the binary hand-made seeds under fuzz/seeds/ (GGUF, safetensors,
SentencePiece): each a complete, valid file of a few hundred bytes that
reaches every stage of its parser. Text seeds are committed as written.
Run again only to change them: python3 fuzz/make_seeds.py"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- GGUF --------------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
PACK = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
        BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, i) for i in items)
    return struct.pack(PACK[t], v)


def gguf(kv, tensors, align=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, t, v in kv:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    offset, datas = 0, []
    for name, ggml_type, ne, data in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", ggml_type, offset)
        datas.append((offset, data))
        offset += (len(data) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for off, data in datas:
        out += data + b"\0" * (-len(data) % align)
    return out


def llama_keys(n_vocab):
    return [
        ("general.architecture", STR, "llama"),
        ("general.name", STR, "seed"),
        ("general.alignment", U32, 32),
        ("llama.context_length", U32, 64),
        ("llama.embedding_length", U32, 8),
        ("llama.block_count", U32, 1),
        ("llama.feed_forward_length", U32, 16),
        ("llama.attention.head_count", U32, 2),
        ("llama.attention.head_count_kv", U32, 1),
        ("llama.rope.dimension_count", U32, 4),
        ("llama.rope.freq_base", F32, 10000.0),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("llama.vocab_size", U32, n_vocab),
    ]


def spm_gguf():
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "▁", "H", "e", "l", "o", "▁H", "ll", "▁Hello", "w",
              "r", "d", "▁w", "1", "2", "3"]
    types = [2, 3, 3, 6, 6] + [1] * (len(tokens) - 5)
    kv = llama_keys(len(tokens)) + [
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        ("tokenizer.ggml.scores", ARR, (F32, [-float(i) for i in range(len(tokens))])),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.unknown_token_id", U32, 0),
        ("tokenizer.ggml.add_bos_token", BOOL, 1),
        ("tokenizer.chat_template", STR, "{% for m in messages %}{{ m.content }}{% endfor %}"),
        ("seed.nested", ARR, (ARR, [(I8, [-1, 2]), (U64, [7])])),
        ("seed.f64", F64, 0.5),
        ("seed.i16", I16, -3),
    ]
    tensors = [("token_embd.weight", 0, [8, len(tokens)], struct.pack("<f", 0.25) * 8 * len(tokens)),
               ("blk.0.attn_q.weight", 8, [32, 1], struct.pack("<e", 0.5) + bytes(range(32)))]  # one Q8_0 block
    return gguf(kv, tensors)


def bpe_gguf():
    byte_chars = ["Ġ", "Ċ", "!", "a", "b", "c", "H", "e", "l", "o", "w", "r", "d"]
    tokens = byte_chars + ["He", "ll", "llo", "Hello", "Ġw", "or", "ld", "<|endoftext|>", "<|im_start|>"]
    types = [1] * (len(tokens) - 2) + [3, 3]
    merges = ["H e", "l l", "ll o", "He llo", "Ġ w", "o r", "l d"]
    kv = [("general.architecture", STR, "qwen2"),
          ("tokenizer.ggml.model", STR, "gpt2"),
          ("tokenizer.ggml.pre", STR, "qwen2"),
          ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
          ("tokenizer.ggml.token_type", ARR, (I32, types)),
          ("tokenizer.ggml.merges", ARR, (STR, merges)),
          ("tokenizer.ggml.bos_token_id", U32, len(tokens) - 2),
          ("tokenizer.ggml.eos_token_id", U32, len(tokens) - 2),
          ("tokenizer.ggml.add_bos_token", BOOL, 0)]
    return gguf(kv, [])


# ---- safetensors -------------------------------------------------------------
def safetensors():
    header = {"__metadata__": {"format": "pt"},
              "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
              "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
              "q": {"dtype": "I32", "shape": [1, 1], "data_offsets": [24, 28]},
              "f8": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [28, 32]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(range(32))


# ---- SentencePiece -------------------------------------------------------------
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    tag = varint(num << 3 | wire)
    if wire == 0:
        return tag + varint(payload)
    if wire == 2:
        return tag + varint(len(payload)) + payload
    return tag + payload  # fixed32


def spm_model(model_type):
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("<0x0A>", 0.0, 6), ("▁", -1.0, 1),
              ("▁H", -2.0, 1), ("ello", -3.0, 1), ("H", -4.0, 1), ("e", -5.0, 1), ("l", -6.0, 1), ("o", -7.0, 1),
              ("<user>", 0.0, 4), ("unused", 0.0, 5)]
    out = b""
    for text, score, typ in pieces:
        msg = field(1, 2, text.encode()) + field(2, 5, struct.pack("<f", score)) + field(3, 0, typ)
        out += field(1, 2, msg)
    trainer = (field(3, 0, model_type) + field(35, 0, 1) + field(40, 0, 0) + field(41, 0, 1) + field(42, 0, 2) +
               field(43, 0, (1 << 64) - 1))  # pad_id -1, sign-extended as protobuf writes it
    normalizer = field(1, 2, b"nmt_nfkc") + field(3, 0, 1) + field(4, 0, 1) + field(5, 0, 1)
    return out + field(2, 2, trainer) + field(3, 2, normalizer)


# ---- Nested JSON programs (fuzz/fuzz_nested_json.cc) --------------------------
# A byte's low 3 bits are the op (0 '[', 1 '{', 2 close, 3 scalar, 5 string,
# 6 number), its high 5 bits k a count of 1 + 64 k^2; the first byte picks
# the field. Each field gets a small value and a deep one; the bare parser
# gets values one level within and one past the bound of 128.
def nested_json_seeds():
    small = bytes([0x01, 0x05, 0x00, 0x03, 0x06, 0x02, 0x1B])
    deep = bytes([0xF8, 0xF9, 0x03])
    for place in range(11):
        yield f"place{place}_small", bytes([place]) + small
        yield f"place{place}_deep", bytes([place]) + deep
    yield "bound_128", bytes([10, 0x08]) + bytes(63) + b"\x03"
    yield "bound_129", bytes([10, 0x08]) + bytes(64) + b"\x03"


def write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


if __name__ == "__main__":
    write("fuzz_gguf", "spm_llama.gguf", spm_gguf())
    write("fuzz_gguf", "bpe_vocab.gguf", bpe_gguf())
    write("fuzz_safetensors", "four.safetensors", safetensors())
    write("fuzz_spm_model", "bpe.model", spm_model(2))
    write("fuzz_spm_model", "unigram.model", spm_model(1))
    for name, data in nested_json_seeds():
        write("fuzz_nested_json", name, data)
