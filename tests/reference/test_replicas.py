"""Two `duet serve` replicas behind a client-side balancer (docs/scaling.md,
replicas behind a router): both become ready on /health, a round-robin
client spreads concurrent requests over them and every answer is the
greedy text, a least-KV-usage pick sends work away from a busy replica, and
`duet_kv_usage_ratio` rises while a request holds blocks and is 0 after.
"""
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DUET = os.environ.get("DUET_BINARY", os.path.join(HERE, "../../build/duet"))
SHARED = os.environ.get("DUET_SHARED_DIR", os.path.join(HERE, "../../../shared"))
MODEL = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
PROMPTS = ["Once upon a time", "The cat sat", "Lily wanted to"]


def free_ports(n: int) -> list[int]:
    """n distinct free ports: the sockets stay bound until all are chosen,
    or the kernel could hand the same port out twice (then the second
    replica cannot listen and the test fails at once)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics(port: int) -> dict[str, float]:
    """One scrape of /metrics: the unlabelled samples and labelled ones by their full name."""
    out = {}
    for line in get(port, "/metrics")[1].splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def metric(port: int, name: str) -> float:
    return metrics(port)[name]


def post(port: int, prompt: str, max_tokens: int, stream: bool = False):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        body["ignore_eos"] = True
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=60)


def complete(port: int, prompt: str) -> str:
    with post(port, prompt, 40) as r:
        return json.load(r)["choices"][0]["text"]


def wait_ready(port: int, proc: subprocess.Popen, log, seconds: float = 30) -> list[int]:
    """Polls /health until 200; returns the statuses seen before (a refused
    connection is 0, another failure -1)."""
    seen = []
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"replica on :{port} exited with {proc.returncode}: {log.read()[-2000:]}")
        try:
            status, _ = get(port, "/health")
        except ConnectionRefusedError:
            status = 0
        except OSError:  # reset or cut short, but not refused
            status = -1
        if status == 200:
            return seen
        seen.append(status)
        time.sleep(0.02)
    raise AssertionError(f"replica on :{port} not ready in {seconds} s")


class RoundRobin:
    def __init__(self, ports: list[int]):
        self.ports, self.next, self.lock = ports, 0, threading.Lock()

    def pick(self) -> int:
        with self.lock:
            port = self.ports[self.next % len(self.ports)]
            self.next += 1
            return port


def least_kv_usage(ports: list[int]) -> int:
    """The replica with the smallest KV usage, then the fewest requests
    running and waiting, then the first listed."""
    def load(p: int) -> tuple[float, float]:
        m = metrics(p)
        return m["duet_kv_usage_ratio"], m["duet_requests_running"] + m["duet_requests_waiting"]
    return min(ports, key=load)


class Replicas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ports = free_ports(2)
        cls.logs = [tempfile.TemporaryFile(mode="w+") for _ in cls.ports]
        cls.procs = [subprocess.Popen([DUET, "serve", "-m", MODEL, "--port", str(p), "-t", "1", "--ctx", "2048",
                                       "--max-seqs", "4", "--probe-mib", "0"],
                                      stdout=subprocess.DEVNULL, stderr=log)
                     for p, log in zip(cls.ports, cls.logs)]
        cls.before_ready = [wait_ready(p, proc, log) for p, proc, log in zip(cls.ports, cls.procs, cls.logs)]

    @classmethod
    def tearDownClass(cls):
        for proc in cls.procs:
            proc.terminate()
        for proc in cls.procs:
            proc.wait(timeout=30)

    def served(self) -> list[float]:
        return [sum(m[f'duet_requests_finished_total{{reason="{r}"}}'] for r in ("stop", "length"))
                for m in map(metrics, self.ports)]

    def served_since(self, before: list[float]) -> list[float]:
        """Requests finished since `before` (a request is counted before its
        answer's last byte is sent)."""
        return [a - b for a, b in zip(self.served(), before)]

    def test_a_round_robin_spreads_requests_and_every_answer_is_greedy(self):
        before = self.served()
        expected = {p: complete(self.ports[0], p) for p in PROMPTS}
        rr = RoundRobin(self.ports)
        jobs = [(PROMPTS[i % len(PROMPTS)], rr.pick()) for i in range(6)]  # each prompt reaches both replicas
        got: list[str] = [""] * len(jobs)

        def one(i: int) -> None:
            got[i] = complete(jobs[i][1], jobs[i][0])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (prompt, port), text in zip(jobs, got):
            self.assertTrue(text, f"empty answer from :{port}")
            self.assertEqual(text, expected[prompt], f"{prompt!r} on :{port}")
        self.assertEqual(self.served_since(before), [3 + 3, 3])
        print(f"round robin: 6 requests, 3 per replica, all greedy; /health before ready: {self.before_ready}")

    def test_the_port_is_never_refused_once_it_answered(self):
        # The loading stand-in hands its listening socket to the server: after
        # the first 503 a poll gets 503 or 200, never a refused connection.
        for seen in self.before_ready:
            answered = seen[seen.index(503):] if 503 in seen else []
            self.assertNotIn(0, answered, f"/health before ready: {seen}")

    def test_the_usage_gauge_rises_under_load_and_steers_the_least_loaded_pick(self):
        busy, idle = self.ports
        self.assertEqual(least_kv_usage(self.ports), busy)  # both idle: the first listed
        streams = [post(busy, p, 2000, stream=True) for p in PROMPTS[:2]]
        try:
            for s in streams:
                self.assertTrue(s.readline().startswith(b"data: {"))
            # Both streams hold their blocks until they finish or hang up.
            m = metrics(busy)
            usage, used, total = m["duet_kv_usage_ratio"], m["duet_kv_blocks_used"], m["duet_kv_blocks_total"]
            self.assertGreater(usage, 0)
            self.assertAlmostEqual(usage, used / total)
            self.assertEqual(metric(idle, "duet_kv_usage_ratio"), 0)
            self.assertEqual(least_kv_usage(self.ports), idle)
            before = self.served()
            self.assertEqual(complete(least_kv_usage(self.ports), PROMPTS[2]), complete(idle, PROMPTS[2]))
            self.assertEqual(self.served_since(before), [0, 2])
        finally:
            for s in streams:
                s.close()
        end = time.time() + 20
        while time.time() < end and any(metric(p, "duet_kv_usage_ratio") for p in self.ports):
            time.sleep(0.05)
        self.assertEqual([metric(p, "duet_kv_usage_ratio") for p in self.ports], [0, 0])
        self.assertEqual([metric(p, "duet_requests_running") for p in self.ports], [0, 0])
        print(f"usage gauge: {usage:.3f} ({used:.0f} of {total:.0f} blocks) with two streams, 0 after")


if __name__ == "__main__":
    unittest.main()
