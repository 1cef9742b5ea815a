"""The official OpenAI npm client calls tools through `duet serve`.

A random-weight model (`duet synth`) under the Qwen3 chat template: with
tool_choice "required" or a named function the grammar, not the model, makes
the calls valid, so every response must parse and follow its tool's schema.
Needs node and the client installed once: cd tests/reference/openai && npm install
"""
import unittest

from openai_node import run_client_on_tiny_model


class OpenAiTools(unittest.TestCase):
    def test_tool_calls_with_the_openai_client(self):
        run_client_on_tiny_model(self, "tools_test.mjs", "qwen3", seed=5)


if __name__ == "__main__":
    unittest.main()
