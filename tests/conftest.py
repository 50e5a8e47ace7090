"""Shared test setup: environment for child runs, temporary git repositories, case discovery."""

from __future__ import annotations

import os

# Tiny models train several times faster with one intra-op thread on this kind of machine;
# every child run inherits this.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.pop("NO_COLOR", None)

import sys
from collections.abc import Iterator

import pytest

from tests.support import PlainForkServer, SharedWarmRunner, torch_available


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen",
        action="store_true",
        help="re-record traceback.txt and evidence.json of every pattern case (runs them for real)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch_available():
        return
    skip = pytest.mark.skip(reason="torch is not installed")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_runner() -> Iterator[SharedWarmRunner]:
    """The warm runner that the commands of ``tests.support.run_cli_in_process`` share (one per
    xdist worker): torch is imported once, not by every ``repairbot fix``."""
    from repairbot.api import run_environment  # here: the xdist controller never needs repairbot

    runner = SharedWarmRunner(python=sys.executable, env=run_environment())  # started by its first run
    try:
        yield runner
    finally:
        runner.shut()


@pytest.fixture(scope="session")
def plain_runner() -> Iterator[PlainForkServer]:
    """Plain runs (``python train.py``, no harness) forked from one server per xdist worker that
    imported torch once; started by its first run."""
    runner = PlainForkServer()
    try:
        yield runner
    finally:
        runner.shut()
