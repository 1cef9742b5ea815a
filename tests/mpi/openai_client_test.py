"""The official OpenAI client (Node, tests/reference/openai/concurrency_test.mjs:
concurrent requests, streaming, a cancelled stream) gets the same answers
from `duet serve` under `mpirun -np 2` as from one process.
Usage: openai_client_test.py DUET MODEL"""
import json
import os
import re
import signal
import subprocess
import sys
import threading

from mpi_ranks import rank0_of

DUET, MODEL = sys.argv[1], sys.argv[2]
CLIENT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../reference/openai")
SERVE = ["serve", "-m", MODEL, "--port", "0", "-t", "1", "--max-seqs", "4", "--ctx", "2048", "--api-key", "test-key",
         "--probe-mib", "0"]


def start(cmd: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if m := re.search(r"on (http://[^:]+:\d+)", line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
            return proc, m.group(1)
    raise SystemExit(f"FAIL: server did not start: {cmd}")


def client(url: str) -> dict:
    r = subprocess.run(["node", "concurrency_test.mjs", url, "test-key"], cwd=CLIENT_DIR, capture_output=True,
                       text=True, timeout=120)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0 or "all ok" not in r.stdout:
        raise SystemExit(f"FAIL: the client failed against {url}")
    return json.loads(next(line for line in r.stdout.splitlines() if line.startswith("{")))


def main() -> int:
    if not os.path.isdir(os.path.join(CLIENT_DIR, "node_modules", "openai")):
        print("FAIL: the openai package is missing: cd tests/reference/openai && npm install")
        return 1
    one, url = start([DUET, *SERVE])
    try:
        expected = client(url)
    finally:
        one.send_signal(signal.SIGTERM)
        one.wait(timeout=30)
    two, url = start(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", DUET, *SERVE])
    try:
        got = client(url)
    finally:
        os.kill(rank0_of(two.pid), signal.SIGTERM)
        rc = two.wait(timeout=30)
    if got != expected:
        print(f"FAIL: two ranks answered differently:\none {expected}\ntwo {got}")
        return 1
    if rc != 0:
        print(f"FAIL: the job did not stop cleanly ({rc})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
