#!/usr/bin/env python3
"""What a hostile request costs `duet serve` before it is refused or
admitted: each shape, about 1 MiB (the default body limit), is sent alone to
an idle server and the server's CPU time for it is read from /proc (user +
system, all threads), beside the wall time, its status and the server's
resident memory after it. Then a short completion shows the server still
answers. Last, --concurrent clients send the /tokenize-with-pieces shape at
once: the server's peak resident memory while they run and what stays 2 s
after. A benchmark that prints numbers (and --json), not a test.

  scripts/hostile_bench.py [--binary build/duet] [--model ../shared/...gguf] [--concurrent 48] [--json]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

MIB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def deep(levels, opener="[", closer="]"):
    return opener * levels + closer * levels


def deep_objects(levels):
    return '{"a":' * levels + "1" + "}" * levels


def nested_properties(levels):
    s = '{"type": "string"}'
    for _ in range(levels):
        s = '{"type": "object", "properties": {"a": ' + s + "}}"
    return s


def chat(content, **extra):
    body = {"max_tokens": 1, "messages": [{"role": "user", "content": content}]}
    body.update(extra)
    return body


def shapes():
    """(name, path, body text) for each shape, each near but under 1 MiB."""
    words = "lorem ipsum dolor sit amet " * (MIB // 27 - 200)
    enum = {"type": "string", "enum": ["value-%05d" % i for i in range(10000)]}
    alternation = "root ::= " + " | ".join('"lit%04d"' % i for i in range(5000))
    one_of = 'root ::= ("' + '" | "'.join("a%03d" % i for i in range(1000)) + '")+'
    out = [
        ("deep arrays in a message", "/v1/chat/completions",
         '{"messages": [{"role": "user", "content": %s}]}' % deep(MIB // 2 - 100)),
        ("deep objects in a schema", "/v1/chat/completions",
         json.dumps(chat("hi", response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}))
         .replace('"schema": {}', '"schema": ' + deep_objects(MIB // 6 - 100))),
        ("properties nested 8k deep", "/v1/chat/completions",
         json.dumps(chat("hi")).replace('"max_tokens"', '"response_format": {"type": "json_object", "schema": %s}, '
                                        '"max_tokens"' % nested_properties(8000))),
        ("deep tool-call arguments", "/v1/chat/completions", json.dumps({
            "max_tokens": 1, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                      "function": {"name": "f", "arguments": deep(MIB // 2 - 200)}}]},
                {"role": "tool", "tool_call_id": "c", "content": "ok"}]})),
        ("1 MiB prompt of words", "/v1/completions", json.dumps({"prompt": words, "max_tokens": 1})),
        ("1 MiB prompt, one word", "/v1/completions", json.dumps({"prompt": "a" * (MIB - 100), "max_tokens": 1})),
        ("1 MiB chat message", "/v1/chat/completions", json.dumps(chat(words))),
        ("20k short messages", "/v1/chat/completions", json.dumps(
            {"max_tokens": 1, "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": "hello there"}
                                            for i in range(20000)]})),
        ("1,000 tools", "/v1/chat/completions", json.dumps(chat("hi", tools=[
            {"type": "function", "function": {"name": "tool%d" % i, "description": "does thing %d" % i,
                                              "parameters": {"type": "object", "properties": {
                                                  "a": {"type": "string"}, "b": {"type": "integer"}}}}}
            for i in range(1000)]))),
        ("enum of 10,000 strings", "/v1/chat/completions", json.dumps(chat(
            "hi", response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": enum}}))),
        ("GBNF of 5,000 literals", "/v1/completions", json.dumps({"prompt": "a", "max_tokens": 1,
                                                                 "grammar": alternation})),
        ("(1,000 literals)+", "/v1/completions", json.dumps({"prompt": "a", "max_tokens": 1, "grammar": one_of})),
        ("logit_bias of 60k ids", "/v1/completions", json.dumps(
            {"prompt": "a", "max_tokens": 1, "logit_bias": {str(i): 1 for i in range(60000)}})),
        ("4 stop strings of 250 KB", "/v1/completions", json.dumps(
            {"prompt": "a", "max_tokens": 1, "stop": ["x" * 250000] * 4})),
        ("/tokenize with pieces", "/tokenize", json.dumps({"content": words, "with_pieces": True})),
        ("/detokenize 200k ids", "/detokenize", json.dumps({"tokens": [300 + i % 100 for i in range(200000)]})),
    ]
    for name, _, body in out:
        assert len(body) <= MIB, (name, len(body))
    return out


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def post(port, path, body, timeout=120):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def concurrent_memory(port, pid, n, body):
    """Peak and after-the-fact RSS (MiB) while n clients send `body` to /tokenize."""
    before = rss_mib(pid)
    statuses, peak, done = [], [before], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib(pid))
            time.sleep(0.005)

    def client():
        statuses.append(post(port, "/tokenize", body)[0])

    sampler = threading.Thread(target=sample)
    sampler.start()
    clients = [threading.Thread(target=client) for _ in range(n)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    done.set()
    sampler.join()
    time.sleep(2)
    return {"clients": n, "statuses": sorted(set(statuses)), "rss_mib_before": round(before, 1),
            "rss_mib_peak": round(peak[0], 1), "rss_mib_after": round(rss_mib(pid), 1)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc):
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit("duet serve exited: %s" % proc.stderr.read().decode(errors="replace")[-2000:])
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=1) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.1)
    sys.exit("duet serve did not become ready")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "duet"))
    ap.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "stories260K", "stories260K.gguf"))
    ap.add_argument("--concurrent", type=int, default=48, help="clients of the memory phase (0: skip it)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen([args.binary, "serve", "-m", args.model, "--port", str(port), "-t", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(port, proc)
        rows = []
        for name, path, body in shapes():
            before, t0 = cpu_seconds(proc.pid), time.monotonic()
            status, reply = post(port, path, body)
            wall, cpu = time.monotonic() - t0, cpu_seconds(proc.pid) - before
            probe_status, _ = post(port, "/v1/completions", '{"prompt": "Once", "max_tokens": 4}')
            message = ""
            if status != 200:
                try:
                    message = json.loads(reply)["error"]["message"][:70]
                except (ValueError, KeyError, TypeError):
                    message = reply[:70].decode(errors="replace")
            rows.append({"shape": name, "bytes": len(body), "status": status, "cpu_s": round(cpu, 3),
                         "wall_s": round(wall, 3), "reply_bytes": len(reply), "rss_mib_after": round(rss_mib(proc.pid), 1),
                         "next_request": probe_status, "message": message})
        tokenize = next(body for name, path, body in shapes() if path == "/tokenize")
        memory = concurrent_memory(port, proc.pid, args.concurrent, tokenize) if args.concurrent > 0 else None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if args.json:
        print(json.dumps({"binary": args.binary, "model": args.model, "shapes": rows, "concurrent": memory}, indent=1))
        return
    print("%-28s %8s %6s %7s %7s %9s %8s %5s  %s" % ("shape", "bytes", "status", "cpu s", "wall s", "reply B",
                                                   "RSS MiB", "next", "message"))
    for r in rows:
        print("%-28s %8d %6d %7.3f %7.3f %9d %8.1f %5d  %s" % (r["shape"], r["bytes"], r["status"], r["cpu_s"],
                                                             r["wall_s"], r["reply_bytes"], r["rss_mib_after"],
                                                             r["next_request"], r["message"]))
    print("most CPU for one request: %.3f s" % max(r["cpu_s"] for r in rows))
    if memory:
        print("%d clients at once on /tokenize with pieces (statuses %s): RSS %.1f MiB before, %.1f peak, %.1f 2 s after"
              % (memory["clients"], memory["statuses"], memory["rss_mib_before"], memory["rss_mib_peak"],
                 memory["rss_mib_after"]))


if __name__ == "__main__":
    main()
