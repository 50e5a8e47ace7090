"""Where the test suite's CPU time goes: per test, the CPU seconds of the test's process and of
every process under it (live runs forked from a warm server, fresh interpreters, git, torchrun).

Wall-clock durations (pytest's ``--durations``) mix CPU work with waiting (a sleep, a timeout,
the other worker holding the core); on a 2-core machine the suite's time is bounded by its CPU
seconds, so this is the figure to cut. Load it as a pytest plugin, then summarize:

    REPAIRBOT_SUITE_CPU=/tmp/cpu.jsonl bash scripts/test.sh -q -p bench.suite_cpu
    .venv/bin/python bench/suite_cpu.py /tmp/cpu.jsonl            # per file, then the top tests
    .venv/bin/python bench/suite_cpu.py /tmp/cpu.jsonl --top 60

A test's figure is its process's CPU time, plus that of its reaped children, plus the growth
of the CPU time (own and reaped children's) of processes under it that outlive the test (the
per-worker warm server and its forked runs). Not a test: nothing here fails anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ENV = "REPAIRBOT_SUITE_CPU"


def _descendants_cpu() -> dict[int, float]:
    """CPU seconds (own and reaped children's) of each live process under this one, by pid."""
    seconds: dict[int, float] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        seconds[child.pid] = times.user + times.system + times.children_user + times.children_system
    return seconds


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    path = os.environ.get(ENV)
    if not path:
        yield
        return
    own, live = _own_cpu(), _descendants_cpu()
    start_wall = time.monotonic()
    yield
    after = _descendants_cpu()
    # a process that was alive before and after: its growth; one born during the test and still
    # alive (the warm server a first test starts): all of it; one that ended: reaped into ours (or
    # its parent's), all of its life, less what earlier tests were already charged (the warm
    # servers a session fixture stops in the last test's teardown)
    grown = sum(seconds - live.get(pid, 0.0) for pid, seconds in after.items())
    charged = sum(seconds for pid, seconds in live.items() if pid not in after)
    record = {
        "test": item.nodeid,
        "cpu": round(max(_own_cpu() - own + grown - charged, 0.0), 3),
        "wall": round(time.monotonic() - start_wall, 3),
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def summarize(path: Path, top: int) -> str:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for record in records:
        entry = by_file[record["test"].split("::")[0]]
        entry[0] += record["cpu"]
        entry[1] += record["wall"]
        entry[2] += 1
    total_cpu = sum(r["cpu"] for r in records)
    lines = [f"{len(records)} tests, {total_cpu:.0f} CPU-s in the tests (collection and worker start-up not included)", ""]
    lines.append(f"{'CPU-s':>8} {'wall-s':>8} {'tests':>6}  file")
    for name, (cpu, wall, count) in sorted(by_file.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"{cpu:8.1f} {wall:8.1f} {count:6d}  {name}")
    lines += ["", f"{'CPU-s':>8} {'wall-s':>8}  test (the {top} costliest)"]
    for record in sorted(records, key=lambda r: -r["cpu"])[:top]:
        lines.append(f"{record['cpu']:8.2f} {record['wall']:8.2f}  {record['test']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=Path, help=f"the JSON lines the plugin wrote (${ENV})")
    parser.add_argument("--top", type=int, default=40, help="how many of the costliest tests to list")
    args = parser.parse_args(argv)
    print(summarize(args.records, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
