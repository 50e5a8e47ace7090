"""Records a pattern case's run: ``traceback.txt`` and ``evidence.json`` from the real tracer.

Used by ``pytest --regen`` (and runnable as ``python -m tests.record [CASE_ID...]``). Paths
are stored relative to the case's ``before/`` folder, and installed-library paths as
``<site-packages>/...``, so the records do not depend on the machine that made them.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import repairbot
from repairbot import registry
from repairbot.api import run_environment
from repairbot.trace.runner import RunRequest, SubprocessRunner, WarmRunner
from tests.support import (
    PatternCase,
    PlainForkServer,
    copy_project,
    make_cuda_checkpoint,
    make_plain_checkpoint,
    pattern_cases,
    unmet_requirement,
)

# A traceback printed at the start of a line (a DataLoader worker's "Original Traceback (most
# recent call last):" inside a message is not one); from the first, so a chain stays whole.
_TRACEBACK_START = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)
_REPAIRBOT = str(Path(repairbot.__file__).resolve().parent)


def _normalise_text(text: str, project: Path) -> str:
    text = text.replace(str(project) + "/", "").replace(str(project), ".")
    text = text.replace(_REPAIRBOT, "<repairbot>")
    for key in ("purelib", "platlib", "stdlib"):
        prefix = sysconfig.get_paths()[key]
        label = "<site-packages>" if key != "stdlib" else "<stdlib>"
        text = text.replace(prefix, label)
    return text


def _normalise(value: Any, project: Path) -> Any:
    if isinstance(value, str):
        return _normalise_text(value, project)
    if isinstance(value, list):
        return [_normalise(v, project) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v, project) for k, v in value.items()}
    return value


def recordable(case: PatternCase) -> bool:
    """Cases that need a GPU (or an optional framework) keep their records on machines without one."""
    return unmet_requirement(case.config.get("requires", ())) is None


def _request(case: PatternCase, project: Path, probes: frozenset[str]) -> RunRequest:
    return RunRequest(
        script=project / case.config.get("script", "train.py"),
        args=tuple(case.config.get("args", ())),
        cwd=project,
        timeout=120,
        probes=probes,
    )


@contextlib.contextmanager
def recording_runner() -> Iterator[WarmRunner]:
    """One runner for many recordings, as ``repairbot fix`` makes one for its runs: each run a
    fork of a server that imported torch once (a fresh process pays that import every run)."""
    with tempfile.TemporaryDirectory(prefix="repairbot-record-") as tmp:
        runner = WarmRunner(python=sys.executable, scratch_root=Path(tmp), keep_scratch=True, env=run_environment())
        runner.start()
        try:
            yield runner
        finally:
            runner.close()


def record(case: PatternCase, runner: SubprocessRunner | None = None) -> None:
    """Writes a case's ``traceback.txt`` and ``evidence.json`` (see ``recording``)."""
    recorded = recording(case, runner)
    if recorded is None:
        return
    traceback_text, evidence_text = recorded
    (case.folder / "traceback.txt").write_text(traceback_text, encoding="utf-8")
    (case.folder / "evidence.json").write_text(evidence_text, encoding="utf-8")


def recording(
    case: PatternCase, runner: SubprocessRunner | None = None, makers: PlainForkServer | None = None,
) -> tuple[str, str] | None:
    """As the repair loop sees it: the traceback of the plain run (what is classified), and the
    evidence of the rerun with the pattern's costly probes when the failure needs them (what is
    located), else of the plain run; the texts of ``traceback.txt`` and ``evidence.json``, None
    for a case this machine cannot record.

    ``runner``: one the caller shares between recordings (a ``WarmRunner``, as ``repairbot fix``
    runs scripts: forked from a server that imported torch once), made with ``keep_scratch=True``
    and a ``scratch_root`` of the caller's; by default each run is a fresh process. ``makers``:
    where the case's checkpoint maker runs (a fork of the tests' plain server; by default a fresh
    interpreter)."""
    if not recordable(case):
        return None
    patterns = registry.all_patterns()
    pattern = next(p for p in patterns if case.pattern_id == p.ID)
    cheap = frozenset().union(*(p.PROBES for p in patterns))
    with tempfile.TemporaryDirectory(prefix="repairbot-record-") as tmp:
        project = copy_project(case.before, Path(tmp) / "project").resolve()
        if case.config.get("checkpoint"):
            make_cuda_checkpoint(project, case.config["checkpoint"], makers)
        if case.config.get("plain_checkpoint"):
            make_plain_checkpoint(project, case.config["plain_checkpoint"], makers)
        if runner is None:
            runner = SubprocessRunner(scratch_root=Path(tmp) / "scratch", keep_scratch=True)
        else:  # the runs' scratch paths (which evidence may name) as a fresh runner's: here, from run-1
            runner.scratch_root, runner.runs = Path(tmp) / "scratch", 0
        assert runner.keep_scratch, "the evidence is read from the run's scratch folder"
        plain = runner.run(_request(case, project, cheap))
        match = pattern.match(plain.failure) if plain.failure else None
        costly = pattern.rerun_probes(match) if match else frozenset()
        if costly:
            runner.run(_request(case, project, cheap | costly))
        raw = json.loads((runner.scratch_root / f"run-{runner.runs}" / "evidence.json").read_text(encoding="utf-8"))
        starts = [m.start() for m in _TRACEBACK_START.finditer(plain.stderr)]
        traceback_text = plain.stderr[starts[0]:] if starts else plain.stderr
        return (
            _normalise_text(traceback_text, project),
            json.dumps(_normalise(raw, project), indent=1, sort_keys=True) + "\n",
        )


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print("usage: python -m tests.record [CASE_OR_PATTERN_ID...]\n\n" + __doc__.strip())
        return 0
    wanted = set(argv)
    with recording_runner() as runner:
        for case in pattern_cases():
            if wanted and case.id not in wanted and case.pattern_id not in wanted:
                continue
            print(f"recording {case.id}", file=sys.stderr)
            record(case, runner)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

