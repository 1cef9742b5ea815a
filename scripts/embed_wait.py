#!/usr/bin/env python3
"""How long a short completion waits behind a large /v1/embeddings request.

Starts `duet serve` on stories260K, sends one ~1 MB embeddings request of
2048 text inputs, and while it runs a 16-token completion; prints the
completion's time beside the same completion on an idle server and the
embeddings request's own time. Measures, asserts nothing: run it with the
binary before and after a change to compare.

Usage: scripts/embed_wait.py [DUET_BINARY] [MODEL] [--threads N] [--rounds N]
                             [--serve-arg=ARG ...]
(the request holds ~410k tokens: past duet serve's default
--max-embedding-tokens, so give --serve-arg=--max-embedding-tokens=500000
to a binary that has the cap, to have it run)
"""
import argparse
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SENTENCES = [
    "Once upon a time, there was a little girl named Lily.",
    "She liked to play outside in the park with her big red ball.",
    "One day, a small dog came to the park and wanted to play too.",
    "Lily was happy and they ran together under the warm sun.",
    "Tom had a toy car that he loved more than anything else.",
    "The cat sat on the mat and looked at the bird in the tree.",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:  # a 4xx or 5xx is an answer too
        e.read()
        status = e.code
    return status, time.perf_counter() - start


def big_body(n_inputs=2048, input_bytes=500):
    inputs = []
    for i in range(n_inputs):
        text, k = "", i
        while len(text) < input_bytes:
            text += SENTENCES[k % len(SENTENCES)] + " "
            k += 1 + i % 5
        inputs.append(text[:input_bytes].rstrip())
    return json.dumps({"input": inputs}).encode()


def wait_ready(port, proc):
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit("duet serve exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("duet serve did not become ready")


def embedding_tokens(port):
    """duet_embedding_tokens_total: counted pass by pass where passes are
    interleaved with steps, and only at a request's end before that."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=600) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("duet_embedding_tokens_total "):
                return int(float(line.split()[1]))
    return -1


def one_round(port, body, completion, delay):
    result = {}

    def run_big():
        result["embed_status"], result["embed_s"] = post(port, "/v1/embeddings", body)

    base = embedding_tokens(port)
    big = threading.Thread(target=run_big)
    big.start()
    time.sleep(delay)  # the body is read and tokenized, and the job runs
    result["before"] = embedding_tokens(port) - base
    status, result["meanwhile_s"] = post(port, "/v1/completions", completion)
    assert status == 200
    result["after"] = embedding_tokens(port) - base
    big.join()
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("duet", nargs="?", default=os.path.join(HERE, "..", "build", "duet"))
    ap.add_argument("model", nargs="?",
                    default=os.path.join(HERE, "..", "..", "shared", "models", "stories260K", "stories260K.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=2.0, help="seconds between the embeddings and the completion")
    ap.add_argument("--serve-arg", action="append", default=[], help="passed on to duet serve")
    a = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen([a.duet, "serve", "-m", a.model, "--port", str(port), "-t", str(a.threads),
                             "--ctx", "512", "--probe-mib", "0"] + a.serve_arg,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        body = big_body()
        completion = json.dumps({"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}).encode()
        idle = min(post(port, "/v1/completions", completion)[1] for _ in range(5))
        print(f"{a.duet} {' '.join(a.serve_arg)}: body {len(body)} bytes, 2048 inputs")
        print(f"  completion alone: {idle * 1000:.1f} ms")
        for r in range(a.rounds):
            res = one_round(port, body, completion, a.delay)
            print(f"  round {r + 1}: completion sent {a.delay} s into the embeddings took "
                  f"{res['meanwhile_s'] * 1000:.1f} ms; embeddings {res['embed_status']} in {res['embed_s']:.2f} s; "
                  f"embedding tokens counted on /metrics before and after the completion: "
                  f"{res['before']}, {res['after']}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
