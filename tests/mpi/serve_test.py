"""`duet serve` under `mpirun -np 2` answers as one process does: the same
greedy completions for concurrent requests (streamed and not) on a named
port (the one the single process had), the same
embedding (a pass without the vocabulary head), a stream the client
abandons midway, then a clean stop when rank 0 gets SIGTERM.
Of a mixture of experts, /metrics' routing statistics (rank 0's) are one
process's too.
Usage: serve_test.py DUET MODEL"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from mpi_ranks import rank0_of

DUET, MODEL = sys.argv[1], sys.argv[2]
PROMPTS = ["Once upon a time", "The cat sat", "Lily wanted to", "One day, a big dog", "Tom and Sue"]


def start(cmd: list[str]) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if m := re.search(r"on http://[^:]+:(\d+)", line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
            return proc, int(m.group(1))
    raise SystemExit(f"FAIL: server did not start: {cmd}")


def complete(port: int, prompt: str, stream: bool) -> str:
    body = json.dumps({"prompt": prompt, "max_tokens": 48, "temperature": 0, "stream": stream}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        if not stream:
            return json.load(r)["choices"][0]["text"]
        text = ""
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                text += json.loads(line[6:])["choices"][0]["text"]
        return text


def embed(port: int) -> list[float]:
    """/v1/embeddings of one text: a pass without the vocabulary head, which
    the other ranks must skip too (they would wait to send their logits)."""
    body = json.dumps({"input": "Once upon a time there was a cat"}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["data"][0]["embedding"]


def expert_loads(port: int) -> list[str]:
    """/metrics' expert-load lines (none for a dense model)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        return [line for line in r.read().decode().splitlines() if line.startswith("duet_moe_expert_load")]


def abandon_stream(port: int) -> None:
    """Reads the first streamed event of a long request, then hangs up."""
    body = json.dumps({"prompt": "Once", "max_tokens": 100, "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    r = urllib.request.urlopen(req, timeout=60)
    if not r.readline().startswith(b"data: {"):
        raise SystemExit("FAIL: the long stream did not start")
    r.close()


def answers(port: int) -> list[str]:
    out: list[str] = [""] * len(PROMPTS)

    def one(i: int) -> None:
        out[i] = complete(port, PROMPTS[i], stream=i % 2 == 0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main() -> int:
    serve = ["serve", "-m", MODEL, "--port", "0", "-t", "1", "--max-seqs", "4"]
    one, port = start([DUET, *serve])
    expected = answers(port)
    expected_loads = expert_loads(port)
    expected_embedding = embed(port)
    one.send_signal(signal.SIGTERM)
    one.wait(timeout=30)

    # Two ranks on the port one process was given, named (only rank 0 binds it).
    fixed = list(serve)
    fixed[serve.index("--port") + 1] = str(port)
    two, port = start(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", DUET, *fixed])
    try:
        got = answers(port)
        loads = expert_loads(port)
        embedding = embed(port)
        abandon_stream(port)
        after = complete(port, PROMPTS[0], stream=False)  # still answering after the hang-up
    finally:
        os.kill(rank0_of(two.pid), signal.SIGTERM)
        start_stop = time.time()
        rc = two.wait(timeout=30)
    stop_s = time.time() - start_stop
    for p, a, b in zip(PROMPTS, expected, got):
        print(f"{p!r}: one {a!r}\n{' ' * len(repr(p))}  two {b!r}")
    print(f"after an embedding and an abandoned stream: {after!r}; stopped in {stop_s:.1f} s with status {rc}")
    if got != expected or not all(expected):
        print("FAIL: two ranks answered differently")
        return 1
    print(f"{len(expected_loads)} expert-load lines on /metrics")
    if loads != expected_loads:
        print("FAIL: the routing statistics differ:")
        for a, b in zip(expected_loads, loads):
            print(f"  one {a}\n  two {b}")
        return 1
    # F32 sums in another order across the ranks: within 1e-4 of the largest.
    worst = max(abs(a - b) for a, b in zip(expected_embedding, embedding))
    print(f"embedding: {len(embedding)} values, max |diff| {worst:.2g}")
    if len(embedding) != len(expected_embedding) or worst > 1e-4 * max(map(abs, expected_embedding)):
        print("FAIL: the embeddings differ")
        return 1
    if after != expected[0]:
        print("FAIL: the answer after an abandoned stream differs")
        return 1
    if rc != 0:
        print("FAIL: the job did not stop cleanly")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
