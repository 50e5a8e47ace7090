"""What a fork of a warm server must redo to behave as a fresh interpreter started with the run's
environment: torch's thread count from OMP_NUM_THREADS, and random seeds of its own.

Standard library only, no relative import: tests/plain_fork_server.py (the tests' harness-free
fork server) loads this file by path as well.
"""

import os
import sys


def become_fresh_process() -> None:
    """In a forked run, after its environment is set and before its script runs."""
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit() and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))
    # a fresh interpreter seeds these from the OS; forks would all share the server's state
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
