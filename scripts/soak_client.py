#!/usr/bin/python3
"""The soak's load and its checks (scripts/soak.sh starts the server).

CLIENTS threads send a random mix of requests to a running `duet serve` for
SECONDS: streamed and whole completions and chats read to the end, streams
dropped part way (FIN or RST), requests abandoned before their answer or
half sent, prompts over the server's cap (400) and malformed bodies (400).
Meanwhile the server's resident memory (VmRSS) is sampled and /metrics
scraped. Afterwards it checks that no valid request got a 5xx (or an error
inside a 200), that every refused one got its 400, that the KV pool and the
engine are empty again, that sequences were preempted (the KV budget is
small enough to matter) and that the RSS after warm-up stayed within 5 %.
Prints a summary; exits 1 when a check fails. Standard library only.
"""
import argparse
import collections
import json
import random
import socket
import struct
import sys
import threading
import time

WORDS = ("the cat dog sun little girl boy tree happy big red ball park mom friend day saw ran jumped "
         "played found said wanted went home bird fish water sky toy box car smile help").split()
# Shared beginnings, so prompts also hit the prefix cache.
PREFIXES = ["Once upon a time,", "One day, a little girl named Lily", "Tom and his dog went to the park.",
            "The sun was shining and"]


class Conn:
    """One HTTP/1.1 connection over a raw socket: full control over what is
    sent, and over how the connection ends (FIN or RST)."""

    def __init__(self, port, timeout):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.reusable = False  # the last response ended cleanly and the server keeps the connection
        self.idle_since = time.monotonic()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise ConnectionError("closed by the server")
        self.buf += d

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read_head(self):
        status = int(self._line().split(b" ", 2)[1])
        headers = {}
        while True:
            line = self._line()
            if not line:
                break
            k, v = line.split(b":", 1)
            headers[k.strip().lower().decode()] = v.strip().decode()
        return status, headers

    def body_pieces(self, headers):
        """Yields the body as it arrives (de-chunked); marks the connection
        reusable once it has ended cleanly."""
        self.reusable = False
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    self._line()
                    break
                while len(self.buf) < size + 2:
                    self._fill()
                piece, self.buf = self.buf[:size], self.buf[size + 2:]
                yield piece
        elif "content-length" in headers:
            n = int(headers["content-length"])
            while len(self.buf) < n:
                self._fill()
            piece, self.buf = self.buf[:n], self.buf[n:]
            yield piece
        else:  # until the close
            while True:
                try:
                    self._fill()
                except ConnectionError:
                    break
                piece, self.buf = self.buf, b""
                yield piece
            return
        self.reusable = headers.get("connection", "").lower() != "close"
        self.idle_since = time.monotonic()

    def close(self, reset=False):
        try:
            if reset:  # RST instead of FIN
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
        except OSError:
            pass


def request_bytes(path, body, keep_alive=True):
    if isinstance(body, str):
        body = body.encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n" + ("" if keep_alive else "Connection: close\r\n") + "\r\n")
    return head.encode() + body


def get_bytes(path):
    return f"GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n".encode()


def first_token(sse):
    """Whether a stream so far holds generated text or its end (a chat's
    first event, the role, comes before any token)."""
    for event in sse.split(b"\n\n")[:-1]:
        if not event.startswith(b"data: {"):
            continue
        choice = (json.loads(event[6:]).get("choices") or [{}])[0]
        if choice.get("text") or (choice.get("delta") or {}).get("content") or choice.get("finish_reason"):
            return True
    return False


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def valid_body(rng, stream):
    """A valid completion or chat request, and its path."""
    chat = rng.random() < 0.4
    text = rng.choice(PREFIXES) + " " + words(rng, rng.randint(0, 25))
    body = {"max_tokens": rng.choice([1, 4, 16, 32, 64, 128, 200, 256]), "stream": stream,
            "temperature": rng.choice([0, 0.7, 1.0])}
    if rng.random() < 0.5:
        body["ignore_eos"] = True  # runs to max_tokens: long sequences that hold KV blocks
    if rng.random() < 0.2:
        body["seed"] = rng.randint(0, 1 << 30)
    if stream and rng.random() < 0.3:
        body["stream_options"] = {"include_usage": True}
    if rng.random() < 0.1:
        body["logprobs"] = True if chat else 2
        if chat:
            body["top_logprobs"] = 2
    if rng.random() < 0.1:
        body["stop"] = [rng.choice(WORDS)]
    if chat:
        body["messages"] = [{"role": "user", "content": text}]
        return "/v1/chat/completions", body
    body["prompt"] = text
    return "/v1/completions", body


def malformed_body(rng):
    """A body every server must refuse with 400."""
    good = json.dumps({"prompt": "Once upon a time", "max_tokens": 8})
    choices = [
        good[: rng.randint(1, len(good) - 1)],                     # cut short
        "not json at all",
        "",
        "[1, 2, 3]",
        '{"prompt": "Once", "max_tokens": "eight"}',
        '{"prompt": 12.5}',
        '{"prompt": "Once", "temperature": 9}',
        '{"prompt": "Once", "max_tokens": 8,}',
        "[" * 5000 + "]" * 5000,                                   # too deep
        '{"prompt": "\xff\xfe"}'.encode("latin-1"),                 # not UTF-8
        '{"messages": "hello"}',
        '{"prompt": "Once", "n": 1000}',                            # above --max-n
        '{"prompt": "Once", "no_such_field": 1}',
        "{\"prompt\": \"Once\"" + " " * 1000,
    ]
    return rng.choice(choices)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()          # (kind, status) -> n
        self.latency = collections.defaultdict(list)  # kind -> seconds, complete valid answers
        self.ttft = []                                # streamed: first content
        self.failures = collections.Counter()         # what went wrong -> n
        self.examples = {}                            # what went wrong -> one detail

    def add(self, kind, status, latency=None, ttft=None):
        with self.lock:
            self.counts[(kind, status)] += 1
            if latency is not None:
                self.latency[kind].append(latency)
            if ttft is not None:
                self.ttft.append(ttft)

    def fail(self, what, detail):
        with self.lock:
            self.failures[what] += 1
            self.examples.setdefault(what, detail[:400])


KINDS = [  # name, weight
    ("stream", 30), ("plain", 22), ("disconnect", 14), ("cancel", 10), ("abort_send", 3),
    ("long_prompt", 8), ("malformed", 9), ("probe", 4)]


class Client(threading.Thread):
    def __init__(self, n, args, stats, stop_at):
        super().__init__(daemon=True)
        self.rng = random.Random(args.seed * 1000 + n)
        self.args, self.stats, self.stop_at = args, stats, stop_at
        self.conn = None

    def run(self):
        names = [k for k, _ in KINDS]
        weights = [w for _, w in KINDS]
        while time.monotonic() < self.stop_at:
            kind = self.rng.choices(names, weights)[0]
            try:
                getattr(self, kind)()
            except Exception as e:  # a bug here must not look like a server fault
                self.stats.fail("client error", f"{kind}: {e!r}")
                self.drop()

    # --- connections -------------------------------------------------------

    def drop(self, reset=False):
        if self.conn:
            self.conn.close(reset)
        self.conn = None

    def exchange(self, data):
        """Sends one request on the kept connection (or a new one) and reads
        the response head. A kept connection the server has just closed is
        retried once on a new one, as every HTTP client does."""
        for attempt in (0, 1):
            fresh = self.conn is None or not self.conn.reusable or time.monotonic() - self.conn.idle_since > 2
            if fresh:
                self.drop()
                self.conn = Conn(self.args.port, self.args.timeout)
            try:
                self.conn.send(data)
                return self.conn.read_head()
            except (ConnectionError, OSError):
                self.drop()
                if fresh or attempt:
                    raise
        raise AssertionError("unreachable")

    def finish(self, conn):
        if not conn.reusable:
            self.drop()

    # --- request kinds -----------------------------------------------------

    def valid(self, kind, status, detail):
        """Any answer but 200 to a valid request is a finding; 429 (queue
        full) is the server protecting itself, counted but not a failure."""
        if status >= 500:
            self.stats.fail(f"{kind}: {status} for a valid request", detail)
        elif status not in (200, 429):
            self.stats.fail(f"{kind}: unexpected {status}", detail)

    def stream(self):
        path, body = valid_body(self.rng, True)
        t0 = time.monotonic()
        try:
            status, headers = self.exchange(request_bytes(path, json.dumps(body)))
        except (ConnectionError, OSError) as e:
            self.stats.add("stream", "no answer")
            return self.stats.fail("stream: connection failed", repr(e))
        ttft = None
        text = b""
        try:
            for piece in self.conn.body_pieces(headers):
                text += piece
                if ttft is None and status == 200 and first_token(text):
                    ttft = time.monotonic() - t0
        except (ConnectionError, OSError) as e:
            self.stats.add("stream", "cut off")
            self.drop()
            return self.stats.fail("stream: cut off", repr(e))
        self.finish(self.conn)
        latency = time.monotonic() - t0
        self.valid("stream", status, text.decode(errors="replace"))
        if status != 200:
            return self.stats.add("stream", status)
        events = [ln[6:] for ln in text.decode().split("\n") if ln.startswith("data: ")]
        if not events or events[-1] != "[DONE]":
            self.stats.fail("stream: no [DONE]", text.decode(errors="replace")[-300:])
        elif any('"error"' in e[:10] for e in events):
            self.stats.fail("stream: error event in a 200", text.decode(errors="replace")[-400:])
            return self.stats.add("stream", status)
        elif not any('"finish_reason":"' in e for e in events):
            self.stats.fail("stream: no finish_reason", text.decode(errors="replace")[-300:])
        self.stats.add("stream", status, latency, ttft)

    def plain(self):
        path, body = valid_body(self.rng, False)
        t0 = time.monotonic()
        try:
            status, headers = self.exchange(request_bytes(path, json.dumps(body)))
            data = b"".join(self.conn.body_pieces(headers))
        except (ConnectionError, OSError) as e:
            self.drop()
            self.stats.add("plain", "no answer")
            return self.stats.fail("plain: connection failed", repr(e))
        self.finish(self.conn)
        latency = time.monotonic() - t0
        self.valid("plain", status, data.decode(errors="replace"))
        if status == 200:
            try:
                reply = json.loads(data)
            except ValueError:
                reply = {}
            # A long answer's status goes out before its body: a failure
            # then is an error object inside the 200.
            if "error" in reply or not reply.get("choices"):
                self.stats.fail("plain: error or no JSON inside a 200", data.decode(errors="replace")[:400])
            else:
                return self.stats.add("plain", status, latency)
        self.stats.add("plain", status)

    def disconnect(self):
        """A stream the client leaves after a few events, by FIN or RST."""
        path, body = valid_body(self.rng, True)
        body["max_tokens"] = 256
        body["ignore_eos"] = True
        self.drop()  # a new connection, so the one dropped is this request's
        try:
            status, headers = self.exchange(request_bytes(path, json.dumps(body)))
        except (ConnectionError, OSError) as e:
            self.stats.add("disconnect", "no answer")
            return self.stats.fail("disconnect: connection failed", repr(e))
        self.valid("disconnect", status, "")
        n = self.rng.randint(1, 40)
        try:
            for i, _ in enumerate(self.conn.body_pieces(headers)):
                if i >= n:
                    break
        except (ConnectionError, OSError):
            pass
        self.stats.add("disconnect", status)
        self.drop(reset=self.rng.random() < 0.5)

    def cancel(self):
        """A request abandoned before (or while) its answer comes: closed
        after a random wait, with or without the response head read."""
        path, body = valid_body(self.rng, self.rng.random() < 0.5)
        body["max_tokens"] = 256
        self.drop()
        self.conn = Conn(self.args.port, self.args.timeout)
        self.conn.send(request_bytes(path, json.dumps(body)))
        wait = self.rng.uniform(0, 2.0)
        self.conn.sock.settimeout(wait)
        status = "closed early"
        try:
            time.sleep(self.rng.uniform(0, wait))
            if self.rng.random() < 0.5:
                status, _ = self.conn.read_head()
                self.valid("cancel", status, "")
        except (ConnectionError, OSError):
            pass
        self.stats.add("cancel", status)
        self.drop(reset=self.rng.random() < 0.5)

    def abort_send(self):
        """A request whose body stops part way, then the connection closes."""
        path, body = valid_body(self.rng, self.rng.random() < 0.5)
        data = request_bytes(path, json.dumps(body))
        self.drop()
        self.conn = Conn(self.args.port, self.args.timeout)
        self.conn.send(data[: self.rng.randint(1, len(data) - 1)])
        time.sleep(self.rng.uniform(0, 0.3))
        self.stats.add("abort_send", "closed early")
        self.drop(reset=self.rng.random() < 0.5)

    def refused(self, kind, data, codes):
        try:
            status, headers = self.exchange(data)
            reply = b"".join(self.conn.body_pieces(headers))
        except (ConnectionError, OSError) as e:
            self.drop()
            self.stats.add(kind, "no answer")
            return self.stats.fail(f"{kind}: connection failed", repr(e))
        self.finish(self.conn)
        self.stats.add(kind, status)
        if status != 400:
            return self.stats.fail(f"{kind}: {status}, not 400", reply.decode(errors="replace")[:300])
        try:
            code = json.loads(reply)["error"].get("code")
        except (ValueError, KeyError, AttributeError):
            return self.stats.fail(f"{kind}: 400 without an OpenAI error", reply.decode(errors="replace")[:300])
        if codes and code not in codes:
            self.stats.fail(f"{kind}: code {code}", reply.decode(errors="replace")[:300])

    def long_prompt(self):
        path, body = valid_body(self.rng, self.rng.random() < 0.5)
        # Past --max-prompt-tokens; some past the whole context too.
        text = words(self.rng, self.rng.choice([self.args.max_prompt_tokens + 10, 600, 2000]))
        if "messages" in body:
            body["messages"][0]["content"] = text
        else:
            body["prompt"] = text
        self.refused("long_prompt", request_bytes(path, json.dumps(body)),
                     {"prompt_too_long", "context_length_exceeded"})

    def malformed(self):
        path = self.rng.choice(["/v1/completions", "/v1/chat/completions"])
        self.refused("malformed", request_bytes(path, malformed_body(self.rng)), None)

    def probe(self):
        path = self.rng.choice(["/health", "/v1/models", "/metrics"])
        try:
            status, headers = self.exchange(get_bytes(path))
            b"".join(self.conn.body_pieces(headers))
        except (ConnectionError, OSError) as e:
            self.drop()
            self.stats.add("probe", "no answer")
            return self.stats.fail("probe: connection failed", repr(e))
        self.finish(self.conn)
        self.valid("probe", status, path)
        self.stats.add("probe", status)


def scrape(port, timeout=10):
    c = Conn(port, timeout)
    try:
        c.send(get_bytes("/metrics"))
        status, headers = c.read_head()
        text = b"".join(c.body_pieces(headers)).decode()
    finally:
        c.close()
    m = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            m[name] = float(value)
    return m


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def percentiles(xs):
    if not xs:
        return "-"
    xs = sorted(xs)
    def p(q):
        return xs[min(len(xs) - 1, int(q * len(xs)))]
    return f"p50 {p(.5) * 1e3:7.0f}  p90 {p(.9) * 1e3:7.0f}  p99 {p(.99) * 1e3:7.0f}  max {xs[-1] * 1e3:7.0f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="the server's process, for its VmRSS")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--max-prompt-tokens", type=int, required=True, help="the server's --max-prompt-tokens")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds before the RSS baseline (default: a third of the run, at most 60)")
    ap.add_argument("--rss-tolerance", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=300, help="client socket timeout, seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-out", help="write the RSS samples here (seconds, KiB per line)")
    args = ap.parse_args()
    warmup = args.warmup if args.warmup is not None else min(60.0, args.seconds / 3)

    stats = Stats()
    start = time.monotonic()
    stop_at = start + args.seconds
    rss = []      # (seconds since start, KiB)
    peaks = collections.Counter()  # the largest gauges scraped during the run
    done = threading.Event()

    def sampler():
        next_scrape = 0
        while not done.is_set():
            t = time.monotonic() - start
            rss.append((t, vm_rss_kib(args.pid)))
            if t >= next_scrape:
                next_scrape = t + 2
                try:
                    m = scrape(args.port)
                    for k in ("duet_requests_in_flight", "duet_requests_waiting", "duet_requests_running",
                              "duet_kv_blocks_used"):
                        peaks[k] = max(peaks[k], m.get(k, 0))
                except (ConnectionError, OSError) as e:
                    stats.fail("metrics scrape failed during the run", repr(e))
            done.wait(0.5)

    threading.Thread(target=sampler, daemon=True).start()
    clients = [Client(i, args, stats, stop_at) for i in range(args.clients)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(max(1.0, stop_at + args.timeout - time.monotonic()))
    stuck = sum(c.is_alive() for c in clients)
    if stuck:
        stats.fail("client threads still waiting on the server at the end", f"{stuck} threads")
    for c in clients:
        c.drop()
    load_end = time.monotonic() - start
    done.set()

    # The engine and the pool must come back to empty once the last request
    # (including those of dropped connections) has ended.
    deadline = time.monotonic() + 30
    while True:
        m = scrape(args.port)
        idle = all(m.get(k, -1) == 0 for k in ("duet_requests_in_flight", "duet_requests_waiting",
                                                "duet_requests_running", "duet_kv_blocks_used"))
        if idle or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    settle = time.monotonic() - start - load_end

    # --- summary ---------------------------------------------------------------
    print(f"\n== soak: {args.clients} clients for {args.seconds:.0f} s (load ended at {load_end:.1f} s; "
          f"idle {settle:.1f} s later)")
    kinds = [k for k, _ in KINDS]
    statuses = sorted({s for (_, s) in stats.counts}, key=str)
    print("\nrequests by kind and status:")
    print(f"  {'kind':<12}" + "".join(f"{str(s):>14}" for s in statuses) + f"{'total':>10}")
    total = 0
    for k in kinds:
        row = [stats.counts.get((k, s), 0) for s in statuses]
        total += sum(row)
        print(f"  {k:<12}" + "".join(f"{n:>14}" for n in row) + f"{sum(row):>10}")
    print(f"  {'all':<12}" + "".join(f"{sum(stats.counts.get((k, s), 0) for k in kinds):>14}" for s in statuses)
          + f"{total:>10}   ({total / max(load_end, 1e-9):.1f}/s)")

    print("\nlatency of complete answers to valid requests:")
    print(f"  stream total  {percentiles(stats.latency['stream'])}")
    print(f"  stream TTFT   {percentiles(stats.ttft)}")
    print(f"  plain total   {percentiles(stats.latency['plain'])}")

    fin = {r: int(m.get(f'duet_requests_finished_total{{reason="{r}"}}', 0))
           for r in ("stop", "length", "context_full", "cancelled", "error")}
    print("\nengine (/metrics after the run):")
    print("  finished     " + "  ".join(f"{r} {n}" for r, n in fin.items()))
    print(f"  preemptions  {int(m.get('duet_preemptions_total', 0))}")
    print(f"  tokens       {int(m.get('duet_prompt_tokens_total', 0))} prompt, "
          f"{int(m.get('duet_generation_tokens_total', 0))} generated; prefix cache hit rate "
          f"{m.get('duet_prefix_cache_hit_rate', 0):.2f}")
    print(f"  peaks        in flight {int(peaks['duet_requests_in_flight'])}, running "
          f"{int(peaks['duet_requests_running'])}, waiting {int(peaks['duet_requests_waiting'])}, KV blocks used "
          f"{int(peaks['duet_kv_blocks_used'])} of {int(m.get('duet_kv_blocks_total', 0))}")
    print("  now          in flight {:.0f}, waiting {:.0f}, running {:.0f}; KV blocks used {:.0f}, cached {:.0f}, "
          "free {:.0f} of {:.0f}".format(*(m.get(k, -1) for k in (
              "duet_requests_in_flight", "duet_requests_waiting", "duet_requests_running", "duet_kv_blocks_used",
              "duet_kv_blocks_cached", "duet_kv_blocks_free", "duet_kv_blocks_total"))))

    def window(a, b):
        xs = [kib for t, kib in rss if a <= t < b]
        return sum(xs) / len(xs) if xs else 0.0
    if args.rss_out:
        with open(args.rss_out, "w") as f:
            f.writelines(f"{t:.1f} {kib}\n" for t, kib in rss)
    after = [kib for t, kib in rss if warmup <= t <= load_end]
    rss_start = window(warmup, warmup + 5)
    rss_end = window(load_end - 5, load_end + 0.01)
    rss_peak = max(after) if after else 0
    growth = rss_end / rss_start - 1 if rss_start else float("inf")
    first = rss[0][1] if rss else 0
    print(f"\nresident memory (VmRSS, {len(rss)} samples): {first / 1024:.1f} MiB at start; after the "
          f"{warmup:.0f} s warm-up {rss_start / 1024:.1f} MiB, at the end {rss_end / 1024:.1f} MiB "
          f"({growth * 100:+.1f} %), peak {rss_peak / 1024:.1f} MiB")

    # --- checks ----------------------------------------------------------------
    checks = []
    served = len(stats.latency["stream"]) + len(stats.latency["plain"])
    checks.append(("valid requests answered", served > 0, f"{served} complete answers"))
    bad = {k: v for k, v in stats.failures.items()}
    checks.append(("no 5xx, error or broken answer for a valid request; every bad one refused with 400",
                   not bad, "; ".join(f"{k} x{v}: {stats.examples[k]}" for k, v in bad.items()) or "none"))
    pool_back = (m.get("duet_requests_in_flight") == 0 and m.get("duet_requests_waiting") == 0
                 and m.get("duet_requests_running") == 0 and m.get("duet_kv_blocks_used") == 0
                 and m.get("duet_kv_blocks_cached", 0) + m.get("duet_kv_blocks_free", 0) == m.get("duet_kv_blocks_total"))
    checks.append(("every block and sequence back in the pool", pool_back,
                   f"in flight {m.get('duet_requests_in_flight')}, running {m.get('duet_requests_running')}, "
                   f"waiting {m.get('duet_requests_waiting')}, blocks used {m.get('duet_kv_blocks_used')}"))
    checks.append(("no request ended by an engine error", fin["error"] == 0, f"{fin['error']} errors"))
    checks.append(("the KV budget forced preemption", m.get("duet_preemptions_total", 0) > 0,
                   f"{int(m.get('duet_preemptions_total', 0))} preemptions"))
    checks.append((f"RSS flat after warm-up (within {args.rss_tolerance * 100:.0f} %)",
                   bool(after) and rss_end <= rss_start * (1 + args.rss_tolerance),
                   f"{rss_start / 1024:.1f} -> {rss_end / 1024:.1f} MiB ({growth * 100:+.1f} %)"))
    print("\nchecks:")
    ok = True
    for name, passed, detail in checks:
        ok &= passed
        print(f"  {'PASS' if passed else 'FAIL'}  {name}: {detail}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
