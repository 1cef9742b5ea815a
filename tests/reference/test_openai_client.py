"""The official OpenAI npm client talks to `duet serve` on loopback.

Needs node and the client installed once: cd tests/reference/openai && npm install
"""
import os
import unittest

from openai_node import HERE, run_client_script


class OpenAiClient(unittest.TestCase):
    def test_openai_client_against_duet_serve(self):
        model = os.path.join(os.environ.get("DUET_SHARED_DIR", os.path.join(HERE, "../../../shared")),
                             "models/stories260K/stories260K.gguf")
        run_client_script(self, model, "client_test.mjs")


if __name__ == "__main__":
    unittest.main()
