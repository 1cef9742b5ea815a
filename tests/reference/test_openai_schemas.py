"""Structured output validated by an independent JSON Schema validator.

A random-weight model (`duet synth`) under the ChatML template answers 23
schemas (nested objects, enums and consts, arrays with bounds, tuples,
anyOf/oneOf, $ref and recursion, patterns, formats, number bounds) through
the official OpenAI npm client; ajv (tests/reference/openai/schema_test.mjs)
validates every response, and the streamed response must give the same
object. The model knows nothing of JSON: the grammar makes it valid.
Needs node and the packages installed once: cd tests/reference/openai && npm install
"""
import os
import subprocess
import tempfile
import unittest

from openai_node import run_client_script


class OpenAiSchemas(unittest.TestCase):
    def test_every_response_validates_with_ajv(self):
        duet = os.environ["DUET_BINARY"]
        with tempfile.TemporaryDirectory(prefix="duet-schemas-") as tmp:
            model = os.path.join(tmp, "tiny.gguf")
            subprocess.run([duet, "synth", "--arch", "llama", "--dim", "64", "--ffn", "96", "--layers", "2",
                            "--heads", "4", "--kv-heads", "2", "--vocab-size", "400", "--ctx", "4096",
                            "--seed", "7", "-o", model], check=True, capture_output=True)
            run_client_script(self, model, "schema_test.mjs", ["--chat-template", "chatml"])


if __name__ == "__main__":
    unittest.main()
