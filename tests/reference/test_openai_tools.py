"""The official OpenAI npm client calls tools through `duet serve`.

A random-weight model (`duet synth`) under the Qwen3 chat template: with
tool_choice "required" or a named function the grammar, not the model, makes
the calls valid, so every response must parse and follow its tool's schema.
Needs node and the client installed once: cd tests/reference/openai && npm install
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.join(HERE, "openai")


class OpenAiTools(unittest.TestCase):
    def test_tool_calls_with_the_openai_client(self):
        self.assertTrue(os.path.isdir(os.path.join(CLIENT_DIR, "node_modules", "openai")),
                        "the openai package is missing: cd tests/reference/openai && npm install")
        duet = os.environ["DUET_BINARY"]
        with tempfile.TemporaryDirectory(prefix="duet-tools-") as tmp:
            model = os.path.join(tmp, "tiny.gguf")
            subprocess.run([duet, "synth", "--arch", "llama", "--dim", "64", "--ffn", "96", "--layers", "2",
                            "--heads", "4", "--kv-heads", "2", "--vocab-size", "400", "--ctx", "4096",
                            "--seed", "5", "-o", model], check=True, capture_output=True)
            server = subprocess.Popen(
                [duet, "serve", "-m", model, "--port", "0", "--api-key", "test-key", "--threads", "2",
                 "--chat-template", "qwen3"],
                stderr=subprocess.PIPE, text=True)
            try:
                line = server.stderr.readline()
                match = re.search(r"http://([\d.]+):(\d+)", line)
                self.assertIsNotNone(match, f"duet serve did not start: {line}")
                url = f"http://{match.group(1)}:{match.group(2)}"
                result = subprocess.run(["node", "tools_test.mjs", url, "test-key"], cwd=CLIENT_DIR,
                                        capture_output=True, text=True, timeout=300)
                sys.stdout.write(result.stdout)
                sys.stderr.write(result.stderr)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("all ok", result.stdout)
            finally:
                server.stderr.close()
                server.terminate()
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()


if __name__ == "__main__":
    unittest.main()
