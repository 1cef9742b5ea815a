"""/v1/embeddings against an independent computation.

`duet serve` on stories260K (real weights) embeds strings and token-id
inputs, one at a time and batched; the PyTorch reference (llama_ref.py)
recomputes the final hidden states in float64 from the same weights and
pools them the same way (mean, cls, last; then L2-normalised). Every vector
must match within TOLERANCE, through the plain HTTP API and through the
official OpenAI Python-shaped request (base64 encoding included).
"""
import base64
import json
import os
import re
import struct
import subprocess
import unittest
import urllib.request

import torch

from llama_ref import LlamaRef

DUET = os.environ.get("DUET_BINARY", "duet")
SHARED = os.environ.get("DUET_SHARED_DIR", "/work/shared")
MODEL = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
# Max |duet - reference| of a unit vector's component: duet computes in
# float32 (f16 KV cache) against float64 here.
TOLERANCE = 2e-3

TEXTS = ["Once upon a time", "The cat sat on the mat and looked at the big red ball.", "Lily"]


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([DUET, "serve", "-m", MODEL, "--port", "0", "--threads", "2",
                                      "--max-batch-tokens", "16", *args], stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        match = re.search(r"http://([\d.]+):(\d+)", line)
        if not match:
            self.close()
            raise RuntimeError(f"duet serve did not start: {line}")
        self.url = f"http://{match.group(1)}:{match.group(2)}"

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def close(self):
        self.proc.stderr.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pooled(ref, ids, pooling):
    h = ref.hidden(ids)
    v = {"mean": h.mean(0), "cls": h[0], "last": h[-1]}[pooling]
    return v / v.norm()


class Embeddings(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ref = LlamaRef(MODEL)

    def tokens(self, server, text):
        status, body = server.post("/tokenize", {"content": text, "add_special": True})
        self.assertEqual(status, 200, body)
        return body["tokens"]

    def check(self, server, pooling):
        ids = [self.tokens(server, t) for t in TEXTS]
        status, body = server.post("/v1/embeddings", {"input": TEXTS, "model": "stories"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["prompt_tokens"], sum(len(i) for i in ids))
        self.assertEqual([d["index"] for d in body["data"]], list(range(len(TEXTS))))
        for d, i in zip(body["data"], ids):
            got = torch.tensor(d["embedding"], dtype=torch.float64)
            want = pooled(self.ref, i, pooling)
            self.assertEqual(got.shape, want.shape)
            err = (got - want).abs().max().item()
            self.assertLess(err, TOLERANCE, f"{pooling}: max error {err}")
        return ids, body

    def test_mean_pooling_batched_ids_and_base64(self):
        server = Server()
        try:
            ids, batched = self.check(server, "mean")
            # Ids give the same vectors as the text, alone as in a batch.
            status, one = server.post("/v1/embeddings", {"input": ids[1]})
            self.assertEqual(status, 200, one)
            a = torch.tensor(one["data"][0]["embedding"])
            b = torch.tensor(batched["data"][1]["embedding"])
            self.assertLess((a - b).abs().max().item(), 1e-5)
            # base64: the same floats, little-endian float32.
            status, plain = server.post("/v1/embeddings", {"input": [ids[0]], "encoding_format": "float"})
            self.assertEqual(status, 200, plain)
            status, enc = server.post("/v1/embeddings", {"input": [ids[0]], "encoding_format": "base64"})
            self.assertEqual(status, 200, enc)
            raw = base64.b64decode(enc["data"][0]["embedding"])
            self.assertEqual(list(struct.unpack(f"<{len(raw) // 4}f", raw)), plain["data"][0]["embedding"])
        finally:
            server.close()

    def test_cls_and_last_pooling(self):
        for pooling in ("cls", "last"):
            server = Server("--pooling", pooling)
            try:
                self.check(server, pooling)
            finally:
                server.close()


if __name__ == "__main__":
    unittest.main()
