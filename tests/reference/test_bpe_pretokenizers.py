"""duet's byte-level BPE pre-tokenizers against llama.cpp's way of running
their regexes, rebuilt here with Python's re and an independent BPE.

llama.cpp applies a list of regexes one after another; each cuts every word
of the previous one into its matches and the unmatched stretches between
them. A regex naming a Unicode category is run on a "collapsed" text: ASCII
stays itself, non-ASCII whitespace becomes \\v and any other non-ASCII code
point a placeholder for its category (\\p{L} becomes [A-Za-z<L>], and so on);
a regex that lists code points instead sees them as they are, with non-ASCII
whitespace again turned into \\v. Both run with ASCII-only \\s, as C++'s
std::regex does. That is what this file does, with the regexes as llama.cpp
writes them, so it shares nothing with duet's hand-written matchers but the
Unicode data (Python's unicodedata here, the White_Space list written out).

Every byte-level vocabulary in ../shared/tokenizers/llama.cpp-vocab encodes
random texts built from fragments chosen for the regexes' edge cases
(contractions, digits, every whitespace kind, combining marks, CJK, Greek,
full-width forms, the user-defined tokens of the vocabulary); duet's ids
(`duet tokenize --jsonl --no-bos`) must equal the reference's. User-defined
tokens are cut out first, longest first, as llama.cpp does. Exits non-zero
on any mismatch.
"""
import glob
import json
import os
import random
import re
import subprocess
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_reader  # noqa: E402

SHARED = os.environ.get("DUET_SHARED_DIR", os.path.join(os.path.dirname(__file__), "../../../shared"))
DUET = os.environ["DUET_BINARY"]

WHITE_SPACE = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000} | set(
    range(0x2000, 0x200B))

# Placeholders of the collapsed text: private-use code points, one per category.
PLACEHOLDER = {"N": "\ue001", "L": "\ue002", "P": "\ue003", "M": "\ue004", "S": "\ue005"}
OTHER = "\ue000"
# What each \p{X} becomes: its ASCII members and its placeholder.
CATEGORY_CLASS = {
    "N": "0-9" + PLACEHOLDER["N"],
    "L": "A-Za-z" + PLACEHOLDER["L"],
    "P": "!-#%-*,-/:;?@\\[-\\]_{}" + PLACEHOLDER["P"],
    "M": PLACEHOLDER["M"],
    "S": "$+<->^`|~" + PLACEHOLDER["S"],
}


def collapse(text):
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        elif ord(ch) in WHITE_SPACE:
            out.append("\v")
        else:
            out.append(PLACEHOLDER.get(unicodedata.category(ch)[0], OTHER))
    return "".join(out)


def wide(text):
    return "".join("\v" if ord(ch) >= 128 and ord(ch) in WHITE_SPACE else ch for ch in text)


def collapse_regex(regex):
    """\\p{X} inside a class becomes the class's members, outside a class
    of its own; $ is \\Z (Python's $ also matches before a final newline)."""
    out, inside, i = [], False, 0
    while i < len(regex):
        if regex.startswith("\\p{", i):
            members = CATEGORY_CLASS[regex[i + 3]]
            out.append(members if inside else "[" + members + "]")
            i += 5
            continue
        c = regex[i]
        if c == "\\":
            out.append(regex[i:i + 2])
            i += 2
            continue
        if c == "[":
            inside = True
        elif c == "]":
            inside = False
        out.append("\\Z" if c == "$" and not inside else c)
        i += 1
    return "".join(out)


GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
LLAMA3 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
QWEN35 = (CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
# DeepSeek LLM's cased-letter class as its tokenizer.json lists it.
DEEPSEEK_CASED = (
    "A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481"
    "\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf"
    "\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d"
    "\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115"
    "\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e"
    "\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f"
    "\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a"
    "\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
    "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943")

RULES = {
    "gpt-2": [GPT2], "mpt": [GPT2],
    "llama-bpe": [LLAMA3], "qwen2": [QWEN2], "qwen35": [QWEN35],
    "starcoder": [r"\p{N}", GPT2], "refact": [r"\p{N}", GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"],
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK, r"\p{N}"],
    "deepseek-llm": ["[\r\n]", r"\s?[" + DEEPSEEK_CASED + "]+", "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
                     r"\s+$", CJK, r"\p{N}+"],
}


def split(text, regexes):
    words = [text] if text else []
    for regex in regexes:
        uses_categories = "\\p{" in regex
        pattern = re.compile(collapse_regex(regex) if uses_categories else regex.replace("$", "\\Z"), re.ASCII)
        out = []
        for w in words:
            seen = collapse(w) if uses_categories else wide(w)
            at = 0
            for m in pattern.finditer(seen):
                if m.start() > at:
                    out.append(w[at:m.start()])
                out.append(w[m.start():m.end()])
                at = m.end()
            if at < len(w):
                out.append(w[at:])
        words = out
    return words


def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTES = byte_alphabet()


class Vocab:
    def __init__(self, path):
        md = gguf_reader.GgufFile(path).metadata
        self.pre = md["tokenizer.ggml.pre"]
        self.tokens = list(md["tokenizer.ggml.tokens"])
        types = list(md["tokenizer.ggml.token_type"])
        self.ids = {}
        for i, t in enumerate(self.tokens):
            self.ids.setdefault(t, i)
        self.ranks = {}
        for r, m in enumerate(md["tokenizer.ggml.merges"]):
            self.ranks.setdefault(tuple(m.split(" ", 1)), r)
        # Llama 3's vocabularies take a word that is a token whole.
        self.ignore_merges = self.pre == "llama-bpe"
        # User-defined tokens, in the order llama.cpp tries them.
        self.user_defined = sorted(((t, i) for i, t in enumerate(self.tokens) if types[i] == 4 and t),
                                   key=lambda p: (-len(p[0]), p[1]))
        self.normal = [types[i] == 1 for i in range(len(types))]

    def bpe(self, word):
        spelled = "".join(BYTES[b] for b in word.encode("utf-8"))
        if self.ignore_merges and spelled in self.ids and self.normal[self.ids[spelled]]:
            return [self.ids[spelled]]
        syms = list(spelled)
        while len(syms) > 1:
            best = None
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        out = []
        for s in syms:
            out += [self.ids[s]] if s in self.ids else [self.ids[c] for c in s if c in self.ids]
        return out

    def partition(self, text):
        """(text, id) pieces: user-defined tokens (id) and plain text (None)."""
        taken = [None] * len(text)
        for t, i in self.user_defined:
            at = text.find(t)
            while at >= 0:
                if all(x is None for x in taken[at:at + len(t)]):
                    taken[at:at + len(t)] = [(at, i)] * len(t)
                    at = text.find(t, at + len(t))
                else:
                    at = text.find(t, at + 1)
        pieces, k = [], 0
        while k < len(text):
            if taken[k] is not None:
                start, i = taken[k]
                pieces.append((None, i))
                k = start + len(self.tokens[i])
            else:
                j = k
                while j < len(text) and taken[j] is None:
                    j += 1
                pieces.append((text[k:j], None))
                k = j
        return pieces

    def encode(self, text):
        ids = []
        for plain, token in self.partition(text):
            if plain is None:
                ids.append(token)
            else:
                for w in split(plain, RULES[self.pre]):
                    ids += self.bpe(w)
        return ids


FRAGMENTS = [
    "Hello", " world", "I'm", " you'RE", "'ll", "''", "don't", "x", "ABC", "é", "e\u0301", " \u0301a", "a\u0300\u0301",
    "0", "7", "42", "1234", "12345678", " 99", "3.14", "1,000", "\u0663\u0664", "\u00bd", "\uff11\uff12",
    " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u3000", "\u2003", "\u0085", "\x0b", "\x1c",
    "!", "?!", "...", "$", "+=", "<=>", "^", "~", "|", "`", "@", "#", "%", "&&", "(", ")", "[", "]", "{", "}",
    "_", "-", "\u2026", "\u00bf", "\u2018x\u2019", "\u201c", "\u3002", "\uff01", "\uff1f", "\uff21\uff42",
    "\u65e5\u672c\u8a9e", "\u4e2d\u6587", "\ud55c\uad6d\uc5b4", "\u3042\u30a2", "\u10d0\u10d1",
    "\u1f7d\u1fbe\u1fd3", "\u0391\u03b2\u03b3", "\u2126K", "\u00b5", "\u0416\u0436", "\u05d0\u05d1",
    "\u0e2a\u0e27\u0e31\u0e2a", "\u0915\u093f", "\U0001f999", "\U0001f600\u200d", "\ufeff", "\u200b",
    "\U00010400", "\U0001e900", "<s>", "<|endoftext|>",
]


def texts(rng, vocab, n):
    extra = [t for t, _ in vocab.user_defined[:40]] + [t for t, _ in vocab.user_defined[-40:]]
    pool = FRAGMENTS + extra
    out = list(FRAGMENTS)  # each fragment alone first
    for _ in range(n):
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 12))))
    return out


def duet_ids(path, strings):
    p = subprocess.run([DUET, "tokenize", "-m", path, "--no-bos", "--jsonl"], capture_output=True,
                       input="\n".join(json.dumps(s) for s in strings) + "\n", text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return [json.loads(line)["ids"] for line in p.stdout.split("\n") if line]


def main():
    rng = random.Random(15)
    files = sorted(glob.glob(os.path.join(SHARED, "tokenizers", "llama.cpp-vocab", "ggml-vocab-*.gguf")))
    failures = checked = vocabs = 0
    for path in files:
        md = gguf_reader.GgufFile(path).metadata
        if md["tokenizer.ggml.model"] != "gpt2":
            continue  # SentencePiece: test_spm_tokenizer.py
        vocab = Vocab(path)
        if vocab.pre not in RULES:
            print("FAIL %s: no reference rule for pre-tokenizer %r" % (os.path.basename(path), vocab.pre))
            failures += 1
            continue
        vocabs += 1
        strings = texts(rng, vocab, 300)
        got = duet_ids(path, strings)
        bad = 0
        for s, g in zip(strings, got):
            want = vocab.encode(s)
            checked += 1
            if g != want:
                bad += 1
                if bad <= 3:
                    print("MISMATCH %s %r\n  reference %s\n  duet      %s" % (vocab.pre, s, want, g))
        failures += bad
        print("%-16s %d/%d" % (vocab.pre, len(strings) - bad, len(strings)), flush=True)
    print("%d texts over %d vocabularies, %d mismatches" % (checked, vocabs, failures))
    sys.exit(1 if failures or vocabs < 10 else 0)


if __name__ == "__main__":
    main()
