"""duet's SentencePiece BPE tokenizer against Debian's python3-sentencepiece.

For each vocabulary (Llama 2: tokenizer.model vs the same vocab as GGUF;
stories260K: its GGUF vs a SentencePiece model built here from the GGUF's
pieces), every test string must give the same ids with and without BOS, duet
must decode those ids to the text SentencePiece decodes them to, and so must
round-trip wherever SentencePiece does. Byte strings that are not valid UTF-8
go through `duet tokenize -f FILE` one by one. Exits non-zero on any mismatch.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

import sentencepiece as spm

SHARED = os.environ.get("DUET_SHARED_DIR", os.path.join(os.path.dirname(__file__), "../../../shared"))
DUET = os.environ["DUET_BINARY"]
HERE = os.path.dirname(os.path.abspath(__file__))


# --- GGUF metadata (just enough to read the vocabulary) -----------------------

def read_gguf_metadata(path):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        (v,) = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n]
        pos += n
        return s.decode("utf-8", "surrogateescape")

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            elem, n = take("I"), take("Q")
            return [value(elem) for _ in range(n)]
        return take(scalar[t])

    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    take("I")  # version
    take("Q")  # tensor count
    n_kv = take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("I"))
    return kv


# --- A SentencePiece ModelProto from GGUF pieces, in protobuf wire format ----
# (written by hand so the test needs no protobuf package). The trainer and
# normalizer specs are taken from the Llama 2 model: BPE, byte fallback,
# identity normalization, dummy prefix, no whitespace folding, as llama2.c
# trains its small vocabularies.

def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(buf, pos):
    shift = v = 0
    while True:
        c = buf[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, pos


def top_level_fields(buf):
    """(field number, raw bytes of the whole field) for each field of a message."""
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = read_varint(buf, pos)
        wire = tag & 7
        if wire == 0:
            _, pos = read_varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            pos += n
        else:
            raise ValueError(f"unexpected wire type {wire}")
        yield tag >> 3, buf[start:pos]


def sentencepiece_message(piece, score, kind):
    text = piece.encode("utf-8", "surrogateescape")
    body = (b"\x0a" + varint(len(text)) + text          # 1: piece
            + b"\x15" + struct.pack("<f", score)        # 2: score
            + b"\x18" + varint(kind))                    # 3: type (same numbering as GGUF)
    return b"\x0a" + varint(len(body)) + body           # ModelProto.pieces = 1


def model_proto_from_gguf(gguf_path, template_model):
    kv = read_gguf_metadata(gguf_path)
    pieces = zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"], kv["tokenizer.ggml.token_type"])
    specs = b"".join(raw for num, raw in top_level_fields(open(template_model, "rb").read()) if num != 1)
    return b"".join(sentencepiece_message(*p) for p in pieces) + specs


# --- Test strings ------------------------------------------------------------

def test_strings():
    with open(os.path.join(HERE, "data", "spm_strings.json"), encoding="utf-8") as f:
        strings = json.load(f)
    # Random mixtures of the things tokenizers get wrong: scripts, emoji,
    # whitespace runs, punctuation, digits, accents, special-token look-alikes.
    fragments = ["Hello", "world", " the", "ing", "你好", "世界", "日本語", "カタカナ", "Привет", "é", "e\u0301",
                 "🦙", "😀", "👍🏽", "<s>", "</s>", "<0x0A>", "\u2581", "123", "3.14", "(", ")", "{", "}", "=>",
                 "def", "return", "'s", "n't", "ß", "Ω", "\ufffd", "\u00a0", "한국어", "ภาษา", "عربى", "½"]
    spacing = [" ", "  ", "   ", "\n", "\n\n", "\t", " \n ", "", "", ""]
    rng = random.Random(1234)
    while len(strings) < 360:
        parts = []
        for _ in range(rng.randint(1, 12)):
            parts.append(rng.choice(fragments))
            parts.append(rng.choice(spacing))
        s = "".join(parts)
        if rng.random() < 0.3:
            s = rng.choice(spacing) + s
        if s not in strings:
            strings.append(s)
    return strings


INVALID_UTF8 = [b"a\xffb", b"\xe4\xb8", b"\xe4\xb8a", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80", b"\x80",
                b"\xbf\xbf", b"hello \xfe world", b"\xf0\x9f\xa6", b"\xf0\x9f\xa6 x", b"\xe6\x97\xa5\xe6\x9c",
                b"ok\xc3", b"\xc3\x28", b" \xff ", b"\xf5\x80\x80\x80", b"\xe0\x80\xaf"]


# --- Comparison --------------------------------------------------------------

def run_duet(args, stdin=None):
    r = subprocess.run([DUET, "tokenize"] + args, input=stdin, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"duet tokenize {' '.join(args)} failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return r.stdout


def pieces(sp, ids):
    return [sp.id_to_piece(i) if 0 <= i < sp.get_piece_size() else f"#{i}" for i in ids]


def describe(sp, text, want, got):
    first = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    return (f"  text     {text!r}\n"
            f"  expected {want}\n           {pieces(sp, want)}\n"
            f"  duet     {got}\n           {pieces(sp, got)}\n"
            f"  first difference at index {first}")


def check_vocab(name, sp, gguf, strings):
    failures = []
    bos = sp.bos_id()
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for s in strings:
            f.write(json.dumps(s) + "\n")
        lines_path = f.name
    try:
        plain = run_duet(["-m", gguf, "--jsonl", "--no-bos", "-f", lines_path]).decode().splitlines()
        with_bos = run_duet(["-m", gguf, "--jsonl", "-f", lines_path]).decode().splitlines()
    finally:
        os.unlink(lines_path)
    if len(plain) != len(strings) or len(with_bos) != len(strings):
        sys.exit(f"[{name}] duet printed {len(plain)}/{len(with_bos)} lines for {len(strings)} strings")

    round_trips = 0
    for s, p_line, b_line in zip(strings, plain, with_bos):
        got, got_bos = json.loads(p_line), json.loads(b_line)
        want = sp.encode(s)
        if got["ids"] != want:
            failures.append(f"[{name}] ids differ (no BOS)\n" + describe(sp, s, want, got["ids"]))
            continue
        if got_bos["ids"] != [bos] + want:
            failures.append(f"[{name}] ids differ (with BOS)\n" + describe(sp, s, [bos] + want, got_bos["ids"]))
        sp_text = sp.decode(want)
        if got["text"] != sp_text or got_bos["text"] != sp_text:
            failures.append(f"[{name}] decode differs for {s!r}: sentencepiece {sp_text!r}, "
                            f"duet {got['text']!r} / with BOS {got_bos['text']!r}")
        if sp_text == s:
            round_trips += 1
            if got["text"] != s:
                failures.append(f"[{name}] no round trip for {s!r}: {got['text']!r}")

    with tempfile.TemporaryDirectory() as d:
        for raw in INVALID_UTF8:
            path = os.path.join(d, "text")
            with open(path, "wb") as f:
                f.write(raw)
            got = [int(x) for x in run_duet(["-m", gguf, "--no-bos", "-f", path]).split()]
            want = sp.encode(raw)
            if got != want:
                failures.append(f"[{name}] ids differ for invalid UTF-8\n" + describe(sp, raw, want, got))

    print(f"[{name}] {len(strings)} strings, {round_trips} round trips, "
          f"{len(INVALID_UTF8)} invalid-UTF-8 inputs: {len(failures)} mismatches")
    return failures


def main():
    strings = test_strings()
    llama_model = os.path.join(SHARED, "tokenizers/llama2/tokenizer.model")
    llama_gguf = os.path.join(SHARED, "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf")
    stories_gguf = os.path.join(SHARED, "models/stories260K/stories260K.gguf")

    failures = check_vocab("llama2", spm.SentencePieceProcessor(model_file=llama_model), llama_gguf, strings)
    stories = spm.SentencePieceProcessor(model_proto=model_proto_from_gguf(stories_gguf, llama_model))
    if stories.get_piece_size() != 512:
        sys.exit(f"stories260K: expected 512 pieces, built a model with {stories.get_piece_size()}")
    failures += check_vocab("stories260K", stories, stories_gguf, strings)

    for f in failures[:40]:
        print(f)
    if failures:
        print(f"FAILED: {len(failures)} mismatches")
        return 1
    print("all match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
