"""Finding the ranks mpirun started, for the tests that signal one."""

import subprocess
import time


def rank0_of(launcher: int) -> int:
    """The pid of rank 0 among mpirun's children (read from their
    environment); waits up to 10 s for it to appear."""
    for _ in range(100):
        for child in subprocess.run(["pgrep", "-P", str(launcher)], capture_output=True, text=True).stdout.split():
            try:
                with open(f"/proc/{child}/environ", "rb") as f:
                    if b"OMPI_COMM_WORLD_RANK=0" in f.read().split(b"\0"):
                        return int(child)
            except OSError:
                pass
        time.sleep(0.1)
    raise SystemExit("FAIL: no rank 0")
