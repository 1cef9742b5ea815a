"""The official OpenAI npm client calls tools through `duet serve`.

A random-weight model (`duet synth`) under the Qwen3 chat template: with
tool_choice "required" or a named function the grammar, not the model, makes
the calls valid, so every response must parse and follow its tool's schema.
Needs node and the client installed once: cd tests/reference/openai && npm install
"""
import os
import subprocess
import tempfile
import unittest

from openai_node import run_client_script


class OpenAiTools(unittest.TestCase):
    def test_tool_calls_with_the_openai_client(self):
        duet = os.environ["DUET_BINARY"]
        with tempfile.TemporaryDirectory(prefix="duet-tools-") as tmp:
            model = os.path.join(tmp, "tiny.gguf")
            subprocess.run([duet, "synth", "--arch", "llama", "--dim", "64", "--ffn", "96", "--layers", "2",
                            "--heads", "4", "--kv-heads", "2", "--vocab-size", "400", "--ctx", "4096",
                            "--seed", "5", "-o", model], check=True, capture_output=True)
            run_client_script(self, model, "tools_test.mjs", ["--chat-template", "qwen3"])


if __name__ == "__main__":
    unittest.main()
