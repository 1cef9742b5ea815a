"""The official OpenAI npm client talks to `duet serve` on loopback.

Needs node and the client installed once: cd tests/reference/openai && npm install
"""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.join(HERE, "openai")


class OpenAiClient(unittest.TestCase):
    def test_openai_client_against_duet_serve(self):
        self.assertTrue(os.path.isdir(os.path.join(CLIENT_DIR, "node_modules", "openai")),
                        "the openai package is missing: cd tests/reference/openai && npm install")
        model = os.path.join(os.environ.get("DUET_SHARED_DIR", os.path.join(HERE, "../../../shared")),
                             "models/stories260K/stories260K.gguf")
        server = subprocess.Popen(
            [os.environ["DUET_BINARY"], "serve", "-m", model, "--port", "0", "--api-key", "test-key",
             "--threads", "2"],
            stderr=subprocess.PIPE, text=True)
        try:
            line = server.stderr.readline()
            match = re.search(r"http://([\d.]+):(\d+)", line)
            self.assertIsNotNone(match, f"duet serve did not start: {line}")
            url = f"http://{match.group(1)}:{match.group(2)}"
            result = subprocess.run(["node", "client_test.mjs", url, "test-key"], cwd=CLIENT_DIR,
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
