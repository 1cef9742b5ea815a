"""`duet pull` and `-hf` against a local server that answers like the hub.

The server (Python's http.server) serves the file listing
(/api/models/OWNER/NAME/tree/main) and resolve URLs (with Range requests) for
a few repositories whose GGUF files are stories260K's bytes under quant-named
file names. It records every request, so the test can see resumes and reuse:

- a pull lands the exact bytes in $DUET_CACHE, and `duet run -hf` generates
  from it; a second pull downloads nothing; the default quant is Q4_K_M;
- a connection cut halfway is resumed with a Range request from where it
  stopped, and a .part left by an interrupted run is resumed too;
- a checksum mismatch is an error that leaves no file in the cache;
- a missing quant lists the ones the repository has;
- an unreachable endpoint is a clear error, unless the model was pulled
  before (then the cached copy is used, with a note).
"""

import hashlib
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

DUET = os.environ.get("DUET_BINARY", "duet")
SHARED = os.environ.get("DUET_SHARED_DIR", "/work/shared")
MODEL = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
with open(MODEL, "rb") as f:
    BLOB = f.read()
SHA = hashlib.sha256(BLOB).hexdigest()

REPOS = {
    "test/stories": ["stories-F32.gguf", "stories-Q8_0.gguf", "stories-Q4_K_M.gguf", "README.md"],
    "test/cut": ["cut-Q4_K_M.gguf"],
    "test/badsum": ["bad-Q4_K_M.gguf"],
    "test/nogguf": ["README.md"],
}

requests_seen = []
cut_once = set()
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        requests_seen.append((self.path, self.headers.get("Range")))
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["api", "models"] and parts[4:6] == ["tree", "main"]:
            return self.listing("/".join(parts[2:4]))
        if len(parts) >= 5 and parts[2:4] == ["resolve", "main"]:
            return self.resolve("/".join(parts[:2]), "/".join(parts[4:]))
        self.send_error(404)

    def listing(self, repo):
        if repo not in REPOS:
            return self.send_error(404)
        entries = []
        for name in REPOS[repo]:
            if name.endswith(".gguf"):
                sha = "0" * 64 if repo == "test/badsum" else SHA
                entries.append({"type": "file", "path": name, "size": len(BLOB), "oid": "ab" * 20,
                                "lfs": {"oid": sha, "size": len(BLOB), "pointerSize": 134}})
            else:
                entries.append({"type": "file", "path": name, "size": 10, "oid": "cd" * 20})
        entries.append({"type": "directory", "path": "sub", "size": 0, "oid": "ef" * 20})
        body = json.dumps(entries).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def resolve(self, repo, name):
        if repo not in REPOS or name not in REPOS[repo]:
            return self.send_error(404)
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
        body = BLOB[start:]
        self.send_response(206 if rng else 200)
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{len(BLOB) - 1}/{len(BLOB)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if repo == "test/cut" and name not in cut_once:
            # Half the file, then the connection drops.
            cut_once.add(name)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


def duet(env, *args):
    return subprocess.run([DUET, *args], capture_output=True, text=True, env=env, timeout=120)


def cache_files(cache):
    out = []
    for root, _, files in os.walk(cache):
        out += [os.path.join(root, f) for f in files]
    return out


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, HF_ENDPOINT=endpoint, DUET_CACHE=cache)

        # A pull lands the exact bytes; -hf runs from the cache.
        r = duet(env, "pull", "test/stories:F32")
        check(r.returncode == 0, f"pull test/stories:F32: {r.stderr}")
        path = r.stdout.strip()
        check(path.startswith(cache) and path.endswith("stories-F32.gguf"), f"pulled path {path!r}")
        check(os.path.isfile(path) and open(path, "rb").read() == BLOB, "pulled bytes equal the served file")
        r = duet(env, "run", "-hf", "test/stories:F32", "-p", "Once upon a time", "-n", "8", "--temp", "0")
        check(r.returncode == 0 and "Once upon a time" in r.stdout, f"run -hf generates: {r.stdout!r} {r.stderr}")

        # The second pull reuses the file: no resolve request.
        before = len([p for p, _ in requests_seen if "/resolve/" in p])
        r = duet(env, "pull", "test/stories:f32")
        after = len([p for p, _ in requests_seen if "/resolve/" in p])
        check(r.returncode == 0 and r.stdout.strip() == path, f"second pull returns the cached path: {r.stdout!r}")
        check(after == before, f"second pull downloads nothing ({after - before} resolve requests)")

        # The default quant is Q4_K_M.
        r = duet(env, "pull", "test/stories")
        check(r.returncode == 0 and r.stdout.strip().endswith("stories-Q4_K_M.gguf"), f"default quant: {r.stdout!r}")

        # A cut connection is resumed from where it stopped.
        requests_seen.clear()
        r = duet(env, "pull", "test/cut")
        check(r.returncode == 0, f"pull after a cut: {r.stderr}")
        got = r.stdout.strip()
        check(os.path.isfile(got) and open(got, "rb").read() == BLOB, "resumed file equals the served file")
        ranges = [rng for p, rng in requests_seen if "/resolve/" in p]
        check(len(ranges) == 2 and ranges[0] is None and ranges[1] is not None and
              int(ranges[1].split("=")[1].split("-")[0]) > 0,
              f"one plain GET, then one Range GET from the cut: {ranges}")

        # A .part left by an interrupted run is resumed.
        dest = os.path.join(cache, "models--test--stories", "stories-Q8_0.gguf")
        with open(dest + ".part", "wb") as f:
            f.write(BLOB[:1000])
        requests_seen.clear()
        r = duet(env, "pull", "test/stories:Q8_0")
        ranges = [rng for p, rng in requests_seen if "/resolve/" in p]
        check(r.returncode == 0 and open(dest, "rb").read() == BLOB, f"resume from .part: {r.stderr}")
        check(ranges == ["bytes=1000-"], f"resume asks for the rest only: {ranges}")
        check(not os.path.exists(dest + ".part"), "the .part is gone after the rename")

        # A checksum mismatch leaves nothing in the cache.
        r = duet(env, "pull", "test/badsum")
        check(r.returncode != 0 and "checksum mismatch" in r.stderr, f"bad checksum is an error: {r.stderr}")
        check(not [f for f in cache_files(cache) if "badsum" in f], f"no file left: {cache_files(cache)}")

        # A missing quant lists what there is.
        r = duet(env, "pull", "test/stories:Q2_K")
        check(r.returncode != 0 and "F32" in r.stderr and "Q8_0" in r.stderr and "Q4_K_M" in r.stderr,
              f"missing quant lists the others: {r.stderr}")
        r = duet(env, "pull", "test/nogguf")
        check(r.returncode != 0 and "no GGUF" in r.stderr, f"a repository without GGUF files: {r.stderr}")
        r = duet(env, "pull", "test/absent")
        check(r.returncode != 0 and "no repository" in r.stderr, f"an unknown repository: {r.stderr}")
        r = duet(env, "pull", "not a name")
        check(r.returncode != 0 and "OWNER/NAME" in r.stderr, f"a malformed name: {r.stderr}")

        # Unreachable: an error, or the copy pulled before.
        server.shutdown()
        server.server_close()
        off = dict(env, HF_ENDPOINT=endpoint)  # nothing listens there now
        r = duet(off, "pull", "test/stories:F32")
        check(r.returncode == 0 and r.stdout.strip() == path and "cannot reach" in r.stderr,
              f"offline, the cached copy with a note: {r.stdout!r} {r.stderr!r}")
        r = duet(off, "pull", "test/other:F32")
        check(r.returncode != 0 and "cannot reach" in r.stderr, f"offline without a copy: {r.stderr}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("pull: all checks passed")


if __name__ == "__main__":
    main()
