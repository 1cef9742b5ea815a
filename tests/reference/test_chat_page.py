"""The chat page at / of `duet serve`, in a real headless Chromium driven by
puppeteer-core (tests/reference/web/chat_page_test.mjs says what it checks).

Needs Debian's chromium and the package installed once (scripts/setup.sh does
both): apt-get install chromium; cd tests/reference/web && npm install
"""
import os
import shutil
import unittest

from openai_node import HERE, run_client_script

WEB_DIR = os.path.join(HERE, "web")


class ChatPage(unittest.TestCase):
    def test_chat_page_in_headless_chromium(self):
        self.assertTrue(shutil.which("chromium") or os.path.exists("/usr/bin/chromium"),
                        "chromium is missing: apt-get install chromium (scripts/setup.sh installs it)")
        model = os.path.join(os.environ.get("DUET_SHARED_DIR", os.path.join(HERE, "../../../shared")),
                             "models/stories260K/stories260K.gguf")
        # A context long enough that the answer Stop interrupts is still
        # running; one thread, since two spinning on a busy machine (CI runs
        # tests side by side) make each token wait for a time slice.
        run_client_script(self, model, "chat_page_test.mjs",
                          serve_args=("--ctx", "16384", "--max-seqs", "4", "--probe-mib", "64"),
                          client_dir=WEB_DIR, package="puppeteer-core", threads=1)


if __name__ == "__main__":
    unittest.main()
