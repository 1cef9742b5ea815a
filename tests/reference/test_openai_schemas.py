"""Structured output validated by an independent JSON Schema validator.

A random-weight model (`duet synth`) under the ChatML template answers 23
schemas (nested objects, enums and consts, arrays with bounds, tuples,
anyOf/oneOf, $ref and recursion, patterns, formats, number bounds) through
the official OpenAI npm client; ajv (tests/reference/openai/schema_test.mjs)
validates every response, and the streamed response must give the same
object. The model knows nothing of JSON: the grammar makes it valid.
Needs node and the packages installed once: cd tests/reference/openai && npm install
"""
import unittest

from openai_node import run_client_on_tiny_model


class OpenAiSchemas(unittest.TestCase):
    def test_every_response_validates_with_ajv(self):
        run_client_on_tiny_model(self, "schema_test.mjs", "chatml", seed=7)


if __name__ == "__main__":
    unittest.main()
