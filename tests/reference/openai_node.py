"""Runs a Node script (the official OpenAI client's in tests/reference/openai/,
the browser test's in tests/reference/web/) against a `duet serve` started
here on a free loopback port."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.join(HERE, "openai")


def run_client_script(test, model, script, serve_args=(), client_dir=CLIENT_DIR, package="openai", threads=2):
    """Starts `duet serve -m model` (API key test-key), runs `node script URL
    test-key` in client_dir and asserts that it exits 0 and prints "all ok"."""
    test.assertTrue(os.path.isdir(os.path.join(client_dir, "node_modules", package)),
                    f"the {package} package is missing: cd {os.path.relpath(client_dir)} && npm install")
    server = subprocess.Popen(
        [os.environ["DUET_BINARY"], "serve", "-m", model, "--port", "0", "--api-key", "test-key",
         "--threads", str(threads), *serve_args],
        stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        match = re.search(r"http://([\d.]+):(\d+)", line)
        test.assertIsNotNone(match, f"duet serve did not start: {line}")
        url = f"http://{match.group(1)}:{match.group(2)}"
        result = subprocess.run(["node", script, url, "test-key"], cwd=client_dir,
                                capture_output=True, text=True, timeout=300)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        test.assertEqual(result.returncode, 0, result.stderr)
        test.assertIn("all ok", result.stdout)
    finally:
        server.stderr.close()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run_client_on_tiny_model(test, script, chat_template, seed):
    """run_client_script on a random-weight model (`duet synth`, 2 layers of
    64, 400 tokens) under chat_template: the grammar, not the model, makes
    its structured replies valid."""
    with tempfile.TemporaryDirectory(prefix="duet-node-") as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        subprocess.run([os.environ["DUET_BINARY"], "synth", "--arch", "llama", "--dim", "64", "--ffn", "96",
                        "--layers", "2", "--heads", "4", "--kv-heads", "2", "--vocab-size", "400", "--ctx", "4096",
                        "--seed", str(seed), "-o", model], check=True, capture_output=True)
        run_client_script(test, model, script, ["--chat-template", chat_template])
