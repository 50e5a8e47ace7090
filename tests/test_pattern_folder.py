"""A pattern folder holds everything of its pattern: a new pattern with its own run-time probe
and its rewrite in a module of its own, added to a copy of the tree and nowhere else, is
discovered, its probe runs in the harness, its evidence reaches the pattern and its fix is
reported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import PYTHON, commit_all, init_repo

ROOT = Path(__file__).resolve().parent.parent

# The new pattern: ``nn.Dropout(p=50)`` (a percentage) fails at construction; the probe records
# what each Dropout was asked for and where, and the pattern rewrites the literal from that
# record alone (it declines without it).
PATTERN = '''
"""dropout-percent: a dropout probability written as a percentage."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import libcst as cst

from repairbot.analysis import calls_on_line
from repairbot.edits import Site
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure

from . import probe
from .rewrites import PercentToProbability


class DropoutPercent(Pattern):
    """Turns ``nn.Dropout(50)`` into ``nn.Dropout(0.5)``.

    What it fixes:
        A dropout probability written as a percentage.

    Why it fails:
        ``ValueError: dropout probability has to be between 0 and 1, but got 50``.

    Example:
        ``nn.Dropout(p=50)`` becomes ``nn.Dropout(p=0.5)``.

    Fix safety:
        Unsafe: the intended rate is a guess.

    Not handled:
        A probability that is not a literal at the call.
    """

    ID = "dropout-percent"
    TITLE = "Dropout probability written as a percentage"
    APPLICABILITY = Applicability.UNSAFE
    SIGNATURES = (signature(("ValueError",), r"dropout probability has to be between 0 and 1, but got"),)
    EVIDENCE = frozenset({probe.NAME})
    PROBES = frozenset({probe.NAME})
    BATCH_INVARIANT = True
    REWRITES = (PercentToProbability,)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        records: Any = evidence.probe_records.get(probe.EVIDENCE_KEY) if evidence else None
        if not records:
            return self.decline("the dropout probe recorded no Dropout construction")
        last = records[-1]
        percent, site = last["p"], last["site"]
        if not isinstance(percent, int) or not 1 < percent <= 100 or not site:
            return self.decline(f"p={percent!r} does not read as a percentage")
        wrapper = sources.metadata(Path(site["file"]))
        calls = [
            c for c in calls_on_line(wrapper, site["line"])
            if isinstance(c.node, cst.Call) and c.node.args
            and wrapper.module.code_for_node(c.node.func).endswith("Dropout")
        ]
        if len(calls) != 1:
            return self.decline("no single Dropout call at the recorded site")
        probability = percent / 100
        return Site(
            pattern=self.ID, file=site["file"], span=calls[0].span, rewrite=PercentToProbability(probability),
            summary=f"Changed the dropout probability {percent} to {probability} (the probe traced p={percent})",
            applicability=self.APPLICABILITY, evidence={"traced_p": percent},
            evidence_text=f"the probe saw nn.Dropout built with p={percent}",
        )
'''

# The pattern's rewrite in a module of its own beside pattern.py (a folder may split its
# pattern into modules; they are imported relatively, never discovered as units).
REWRITES = '''
"""dropout-percent's fix."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.edits import Edit, Rewrite, SiteNodes


@dataclass(frozen=True)
class PercentToProbability(Rewrite):
    """Divides the literal probability of the one Dropout call at the site by 100."""

    probability: float

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        value = cst.Float(str(self.probability))
        return [Edit(call, call.with_changes(args=[call.args[0].with_changes(value=value), *call.args[1:]]))]
'''

PROBE = '''
"""The "dropout-args" probe: what each ``nn.Dropout`` was asked for, and where (harness side:
Python 3.8, standard library and torch only)."""

NAME = "dropout-args"
OPT_IN = True
EVIDENCE_KEY = "dropout_args"


def install(run):
    from repairbot_harness.frames import user_call_site

    records = []

    def dropout_init(call, self, p=0.5, *args, **kwargs):
        records.append({"p": p, "site": user_call_site(skip_self=self)})
        return call(self, p, *args, **kwargs)

    run.hooks.around(run.torch.nn.Dropout, "__init__", dropout_init)
    return lambda: records
'''

BEFORE = """\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(p=50), nn.Linear(8, 1))
print(model(torch.randn(3, 4)).shape)
"""
AFTER = BEFORE.replace("p=50", "p=0.5")

# The checkout under test is installed in editable mode, and its import finder would map
# ``repairbot.patterns`` back to the original tree: the copy runs with that finder removed.
LAUNCH = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()];"
    "from repairbot.cli import main; sys.exit(main())"
)


def _copy_tree(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("repairbot", "patterns"):
        shutil.copytree(ROOT / name, target / name, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", target / "pyproject.toml")
    folder = target / "patterns" / "dropout_percent"
    (folder / "cases" / "percent_literal" / "before").mkdir(parents=True)
    (folder / "cases" / "percent_literal" / "after").mkdir(parents=True)
    (folder / "__init__.py").write_text('"""Pattern dropout-percent."""\n', encoding="utf-8")
    (folder / "pattern.py").write_text(PATTERN.lstrip(), encoding="utf-8")
    (folder / "rewrites.py").write_text(REWRITES.lstrip(), encoding="utf-8")
    (folder / "probe.py").write_text(PROBE.lstrip(), encoding="utf-8")
    case = folder / "cases" / "percent_literal"
    (case / "case.toml").write_text(
        'description = "A percentage for p."\nexpect = "fix"\nscript = "train.py"\nsite = "train.py:4"\n',
        encoding="utf-8",
    )
    (case / "before" / "train.py").write_text(BEFORE, encoding="utf-8")
    (case / "after" / "train.py").write_text(AFTER, encoding="utf-8")
    return target


def _repairbot(tree: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [PYTHON, "-c", LAUNCH, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.torch
def test_a_new_pattern_with_its_own_probe_touches_only_its_folder(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path / "tree")
    catalogue = json.loads(_repairbot(tree, "patterns", "--json", cwd=tmp_path).stdout)
    assert "dropout-percent" in {entry["id"] for entry in catalogue}

    repo = init_repo(tmp_path / "project")
    shutil.copy2(tree / "patterns" / "dropout_percent" / "cases" / "percent_literal" / "before" / "train.py", repo)
    commit_all(repo)
    report_path = tmp_path / "report.json"
    result = _repairbot(tree, "fix", "train.py", "--dry-run", "--no-health", "--json", str(report_path), cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text(encoding="utf-8"))
    (attempt,) = report["attempts"]
    assert attempt["failure"]["pattern"] == "dropout-percent"
    fix = attempt["fix"]
    # the probe ran in the harness and its record reached the pattern through the evidence
    assert fix["pattern"] == "dropout-percent" and "the probe traced p=50" in fix["summary"]
    assert attempt["outcome"] == "passed"
    assert "-model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(p=50)" in report["diff"]
    assert "+model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(p=0.5)" in report["diff"]
    assert (repo / "train.py").read_text(encoding="utf-8") == BEFORE  # dry run: nothing on disk changes

    # the rest of the tree is byte for byte the original one
    for name in ("repairbot", "patterns"):
        for path in (ROOT / name).rglob("*.py"):
            if "__pycache__" not in path.parts:
                assert (tree / path.relative_to(ROOT)).read_bytes() == path.read_bytes()
