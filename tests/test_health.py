"""The run-time health checks: each check on its fixtures, the look-alikes that must stay
silent, and the parent side (reports, exit codes) from hand-written evidence.

The end-to-end tests run the real ``repairbot doctor`` once per ``fixtures/health_*`` folder
(its ``case.toml`` lists the findings expected in ``health``); two more runs check ``fix``'s
``--strict-health`` and ``--no-health``.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from repairbot.evidence import evidence_from_json
from repairbot.health import SECTIONS, health_checks
from repairbot.loop import collect_health
from repairbot.output.markdown import render_markdown
from repairbot.output.report import render_json, render_text
from repairbot.output.sarif import render_sarif
from repairbot.registry import all_patterns, rules_by_id
from repairbot.results import RepairReport
from repairbot.trace.runner import BOOTSTRAP, Limits
from repairbot.types import HealthFinding, RunLimits, Status, StopReason
from tests.support import (
    PYTHON,
    Fixture,
    SharedWarmRunner,
    catalogue_generator,
    commit_all,
    copy_project,
    fixtures,
    init_repo,
    run_cli,
    run_cli_in_process,
    snapshot,
)
from tests.test_reports import validate_report, validate_sarif

HEALTH_FIXTURES = [f for f in fixtures() if "health" in f.config]
# the checks, as discovered over repairbot/trace/harness/health/ (no list here)
CHECKS = tuple(check.ID for check in health_checks())
# the checks no fixture can trigger on this machine, and the child-side test that triggers each
CHILD_SIDE = {"device-idle": "test_device_idle_fires_where_cuda_is_available_and_the_model_stays_on_the_cpu"}


def prepare(fixture: Fixture, tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    copy_project(fixture.folder, repo)
    commit_all(repo)
    return repo


def test_every_check_has_a_fixture_that_triggers_it_and_look_alikes() -> None:
    triggered = {check for f in HEALTH_FIXTURES for check in f.config["health"]}
    # device-idle needs a GPU: its child-side test below fakes one
    assert triggered == set(CHECKS) - set(CHILD_SIDE)
    assert set(CHILD_SIDE) <= set(CHECKS) and all(callable(globals()[test]) for test in CHILD_SIDE.values())
    assert sum(not f.config["health"] for f in HEALTH_FIXTURES) >= 3
    noted = {check for f in HEALTH_FIXTURES for check in f.config.get("information", [])}
    assert noted <= set(CHECKS)


def test_the_checks_are_discovered_and_documented() -> None:
    """One module per check, named after its id, documented in the lint rules' sections;
    the lint rule whose fix a check offers exists."""
    assert len(CHECKS) == len(set(CHECKS)) >= 7
    for check in health_checks():
        assert check.module == f"repairbot/trace/harness/health/{check.ID.replace('-', '_')}.py", check
        assert check.TITLE and check.LEVEL in ("warning", "information"), check
        sections = check.documentation()
        assert sections[""], f"{check.ID}: no first paragraph"
        assert check.undocumented() == [], f"{check.ID}: sections missing: {check.undocumented()}"
        assert list(sections) == ["", *SECTIONS], f"{check.ID}: sections out of order: {list(sections)}"
        if check.LINT_RULE is not None:
            assert check.LINT_RULE in rules_by_id(), check
    assert {c.ID: c.LINT_RULE for c in health_checks() if c.LINT_RULE} == {"grad-accumulation": "missing-zero-grad"}


def test_a_new_check_is_one_module_and_nothing_else(tmp_path: Path) -> None:
    """A check added to a copy of the harness is discovered in its place (ORDER), with nothing
    registered anywhere."""
    import importlib.util
    import shutil
    import sys

    harness = Path(BOOTSTRAP).parent / "harness"
    copy = tmp_path / "repairbot" / "trace" / "harness"  # where it reads repairbot/torch_semantics.json
    shutil.copytree(harness, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(harness.parent.parent / "torch_semantics.json", tmp_path / "repairbot" / "torch_semantics.json")
    (copy / "health" / "lr_too_high.py").write_text(textwrap.dedent('''\
        """lr-too-high: a test check."""

        from .core import HealthCheck


        class LrTooHigh(HealthCheck):
            """A test check.

            What it finds:
                Nothing.
            """

            ID = "lr-too-high"
            TITLE = "A learning rate too high"
            ORDER = 15
    '''))
    name = "copied_harness_for_discovery"
    spec = importlib.util.spec_from_file_location(name, copy / "__init__.py", submodule_search_locations=[str(copy)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    try:
        spec.loader.exec_module(package)
        health = importlib.import_module(f"{name}.health")
        ids = [check.ID for check in health.checks()]
    finally:
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]
    assert ids == [CHECKS[0], "lr-too-high", *CHECKS[1:]]


def test_the_checks_import_without_torch() -> None:
    """The main process reads the checks' documentation: their modules must not need torch."""
    code = (
        "import sys\nsys.modules['torch'] = None\n"
        "from repairbot.health import health_checks\nprint(len(health_checks()))\n"
    )
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(CHECKS)


def test_the_generated_health_docs_are_fresh() -> None:
    generator = catalogue_generator()
    pages = [page for page in generator.PAGES if page.units is health_checks]
    assert {page.path.name for page in pages} == {"health-checks.md", "README.md"}
    for page in pages:
        assert page.path.read_bytes().decode("utf-8") == page.text(), f"{page.path.name} is stale: run python scripts/gen_docs.py"
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    for check in CHECKS:
        assert f"[`{check}`](docs/health-checks.md#{check})" in readme


@pytest.mark.torch
@pytest.mark.parametrize("fixture", HEALTH_FIXTURES, ids=[f.name for f in HEALTH_FIXTURES])
def test_doctor_finds_exactly_the_fixtures_bugs(fixture: Fixture, tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    repo = prepare(fixture, tmp_path)
    before = snapshot(repo)
    result = run_cli_in_process(  # its runs forked from this worker's warm server
        "doctor", fixture.config.get("script", "train.py"), "--json", str(tmp_path / "r.json"),
        "--sarif", str(tmp_path / "r.sarif"), "--markdown", str(tmp_path / "r.md"), cwd=repo, runner=shared_runner,
    )
    output = result.stdout + result.stderr
    expected = fixture.config["health"]  # the warnings
    information = fixture.config.get("information", [])
    report = json.loads((tmp_path / "r.json").read_text())
    warnings = [h for h in report["health"] if h["level"] == "warning"]
    notes = [h for h in report["health"] if h["level"] == "information"]
    assert [h["id"] for h in warnings] == expected, output
    assert [h["id"] for h in notes] == information, output
    assert result.returncode == (1 if expected else 0), output  # information never fails
    assert report["status"] == "already-passing" and report["command"] == "doctor"
    validate_report(report)
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    validate_sarif(sarif)
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results if r["level"] == "warning"] == expected
    assert [r["ruleId"] for r in results if r["level"] == "note"] == information
    markdown = (tmp_path / "r.md").read_text()
    assert "### Health checks" in markdown
    for finding in report["health"]:
        assert finding["file"] == "train.py" and finding["line"] >= 1, finding
        tag = "WARNING" if finding["level"] == "warning" else "INFO"
        assert f"[{tag}] train.py:{finding['line']}" in result.stdout
        assert f"`{finding['id']}`" in markdown
    for key, value in fixture.config.get("health_evidence", {}).items():
        assert report["health"][0]["evidence"][key] == value, report["health"][0]
    assert snapshot(repo) == before  # doctor writes nothing
    if "grad-accumulation" in expected:
        (finding,) = report["health"]
        assert finding["fix"]["rule"] == "missing-zero-grad" and finding["fix"]["applicability"] == "safe"
        assert "+            optimizer.zero_grad()\n" in finding["fix"]["diff"]
        assert (repo / "train.py").read_text().count("zero_grad") == 0  # offered, never applied
    if "dead-parameters" in expected:
        modules = [m["module"] for m in warnings[0]["evidence"]["modules"]]
        assert modules == ["Net.encoder.0", "Net.encoder.2"]
    if "frozen-optimizer" in expected and fixture.name == "health_frozen_target_network":
        (finding,) = warnings
        line = (repo / "train.py").read_text().splitlines()[finding["line"] - 1]
        assert "q_target(s_prime)" in line, finding  # where the target network's output enters the loss
        assert finding["evidence"]["output_used_at"] == f"train.py:{finding['line']}"
        assert finding["evidence"]["trained_modules"] == ["Qnet"] and "target network" in finding["message"]
    if "dead-parameters" in information:
        (note,) = notes
        assert all(m.startswith("SuperNet.choice_block.") for m in note["evidence"]["selecting_modules"]), note
        assert "not sampled" in note["message"] and note["evidence"]["branches"] >= 1
        assert "[INFO] train.py:" in result.stdout and "Health findings: 0 (+1 information)" in result.stdout


@pytest.mark.torch
def test_fix_reports_health_and_strict_health_sets_the_exit_code(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    fixture = next(f for f in HEALTH_FIXTURES if f.name == "health_grad_accumulation")
    repo = prepare(fixture, tmp_path)
    result = run_cli_in_process("fix", "train.py", "--dry-run", "--strict-health", "--json", str(tmp_path / "r.json"), cwd=repo, runner=shared_runner)
    report = json.loads((tmp_path / "r.json").read_text())
    assert result.returncode == 1, result.stdout + result.stderr
    assert report["status"] == "already-passing" and [h["id"] for h in report["health"]] == ["grad-accumulation"]
    validate_report(report)
    text = result.stdout
    assert text.index("[WARNING] train.py:") < text.index("Status: SUCCESS")
    assert "Health findings: 1 (--strict-health)" in text


@pytest.mark.torch
def test_no_health_turns_the_checks_off(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    fixture = next(f for f in HEALTH_FIXTURES if f.name == "health_nan_loss")
    repo = prepare(fixture, tmp_path)
    result = run_cli_in_process("fix", "train.py", "--dry-run", "--no-health", "--json", "-", cwd=repo, runner=shared_runner)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["health"] == []
    assert "[WARNING]" not in result.stderr


def test_no_health_and_strict_health_exclude_each_other(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = run_cli("fix", "train.py", "--dry-run", "--no-health", "--strict-health", cwd=tmp_path)
    assert result.returncode == 2 and "exclude each other" in result.stderr


def test_doctor_refuses_bad_input(tmp_path: Path) -> None:
    result = run_cli("doctor", "missing.py", cwd=tmp_path)
    assert result.returncode == 2 and "no such file" in result.stderr


# --------------------------------------------------------------------------------------------
# Child side: device-idle needs a GPU; the probes run here with torch.cuda faked available


DEVICE_IDLE = """
import importlib.util, json, sys
import torch
spec = importlib.util.spec_from_file_location("bootstrap", {bootstrap!r})
bootstrap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bootstrap)
bootstrap.load_harness()
from repairbot_harness import health
from repairbot_harness.context import Run
from repairbot_harness.hooks import TorchHooks
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
run = Run({{"limits": {limits!r}}})
run.torch, run.hooks = torch, TorchHooks(torch)
findings = health.install(run)
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(4, 3)).pow(2).mean().backward()
    opt.step()
print(json.dumps(findings()))
"""


@pytest.mark.torch
def test_device_idle_fires_where_cuda_is_available_and_the_model_stays_on_the_cpu(tmp_path: Path) -> None:
    script = tmp_path / "idle.py"
    script.write_text(DEVICE_IDLE.format(bootstrap=str(BOOTSTRAP), limits=Limits().to_json()))
    result = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    (finding,) = json.loads(result.stdout.splitlines()[-1])
    assert finding["id"] == "device-idle" and finding["file"] == str(script) and finding["line"] == 21  # opt.step()
    assert finding["evidence"] == {
        "cuda_devices": 1, "parameter_tensors": 2, "parameter_devices": ["cpu"], "optimizers": ["SGD"],
    }


# --------------------------------------------------------------------------------------------
# Parent side, from hand-written evidence


def _evidence(root: Path, health: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {
        "schema": "repairbot.evidence/1", "outcome": "passed", "exit_code": 0, "exception": None,
        "limits": {}, "environment": {"python": "3.11.7", "torch": "2.13.0", "cuda_available": True},
        "health": health,
    }


def _report(health: tuple[HealthFinding, ...], **changes: Any) -> RepairReport:
    base: dict[str, Any] = dict(
        script="train.py", status=Status.ALREADY_PASSING, stop_reason=StopReason.PASSING, attempts=(),
        diff="", files_modified=(), run_limits=RunLimits(), environment={"python": "3.11.7"},
        duration_s=1.0, health=health,
    )
    base.update(changes)
    return RepairReport(**base)


def test_health_findings_from_evidence_are_relative_and_offer_the_lint_fix(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent("""\
        import torch
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    """))
    raw = [
        {"id": "device-idle", "file": str(train), "line": 5, "message": "CUDA is available (1 device) but ...",
         "evidence": {"cuda_devices": 1, "parameter_tensors": 2, "parameter_devices": ["cpu"]}},
        {"id": "grad-accumulation", "file": str(train), "line": 5, "message": "optimizer.step() ran twice ...",
         "evidence": {"step": 2, "built_at": f"{train}:2"}},
        {"file": "x.py"},  # malformed: skipped
    ]
    evidence = evidence_from_json(_evidence(tmp_path, raw))
    assert evidence.health is not None and len(evidence.health) == 2
    findings = collect_health(evidence.health, tmp_path, lambda path: path.read_bytes())
    idle, accumulation = findings
    assert (idle.file, idle.line, idle.fix) == ("train.py", 5, None)
    assert accumulation.evidence["built_at"] == "train.py:2"
    assert accumulation.fix is not None and accumulation.fix["rule"] == "missing-zero-grad"
    assert "+    optimizer.zero_grad()\n" in accumulation.fix["diff"]
    assert evidence_from_json(_evidence(tmp_path, None)).health is None


@pytest.mark.parametrize(("command", "strict", "status", "health", "code"), [
    ("fix", False, Status.ALREADY_PASSING, True, 0),
    ("fix", True, Status.ALREADY_PASSING, True, 1),
    ("fix", True, Status.ALREADY_PASSING, False, 0),
    ("fix", True, Status.GAVE_UP, True, 1),
    ("doctor", False, Status.ALREADY_PASSING, False, 0),
    ("doctor", False, Status.ALREADY_PASSING, True, 1),
    ("doctor", False, Status.ERROR, False, 2),
])
def test_exit_codes(command: str, strict: bool, status: Status, health: bool, code: int) -> None:
    finding = HealthFinding(id="nan-loss", message="the loss is nan", file="train.py", line=3)
    reason = {Status.ALREADY_PASSING: StopReason.PASSING, Status.GAVE_UP: StopReason.NO_PATTERN,
              Status.ERROR: StopReason.BAD_INPUT}[status]
    report = _report((finding,) if health else (), command=command, strict_health=strict, status=status,
                     stop_reason=reason, error="bad" if status is Status.ERROR else None)
    assert report.exit_code == code


def test_every_report_shows_the_findings(tmp_path: Path) -> None:
    findings = (
        HealthFinding(
            id="device-idle", message="CUDA is available (1 device) but every parameter ... is on the CPU",
            file="train.py", line=18, evidence={"cuda_devices": 1, "parameter_devices": ["cpu"]},
        ),
        HealthFinding(
            id="grad-accumulation", message="optimizer.step() ran twice with no zero_grad() <b>in between</b>",
            file="train.py", line=5, evidence={"step": 2},
            fix={"rule": "missing-zero-grad", "applicability": "safe",
                 "diff": "--- a/train.py\n+++ b/train.py\n@@ -2,3 +2,4 @@\n for x, y in loader:\n+    optimizer.zero_grad()\n     loss = f(x)\n     loss.backward()\n"},
        ),
    )
    (tmp_path / "train.py").write_text("import torch\nfor x, y in loader:\n    loss = f(x)\n    loss.backward()\n    optimizer.step()\n")
    report = _report(findings, command="doctor")
    text = render_text(report)
    assert text.index("[WARNING] train.py:18\nHealth: device-idle\nProblem: CUDA") < text.index("Status: FAILED | Health findings: 2")
    assert "Offered fix (missing-zero-grad, safe;" in text and "  +    optimizer.zero_grad()" in text
    data = json.loads(render_json(report))
    validate_report(data)
    assert data["command"] == "doctor" and data["health"][1]["fix"]["rule"] == "missing-zero-grad"
    markdown = render_markdown(report, tmp_path)
    assert "#### ⚠️ `device-idle` at `train.py:18`" in markdown and "<b>" not in markdown
    sarif = json.loads(render_sarif(report, all_patterns(), tmp_path))
    validate_sarif(sarif)
    run = sarif["runs"][0]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert set(CHECKS) <= set(rules)
    # every check is a rule, in report order, documented from its docstring
    health_rules = [r for r in run["tool"]["driver"]["rules"] if r["properties"].get("kind") == "health-check"]
    assert [r["id"] for r in health_rules] == list(CHECKS)
    for rule, check in zip(health_rules, health_checks(), strict=True):
        assert rule["shortDescription"]["text"] == check.TITLE
        assert rule["fullDescription"]["text"] == " ".join(check.documentation()[""].split())
        assert all(f"{title}: " in rule["help"]["text"] for title in SECTIONS), rule["help"]
        assert rule["defaultConfiguration"]["level"] == "warning"
    assert [(r["ruleId"], r["level"], rules[r["ruleIndex"]]) for r in run["results"]] == [
        ("device-idle", "warning", "device-idle"), ("grad-accumulation", "warning", "grad-accumulation"),
    ]
    assert run["results"][1]["fixes"][0]["artifactChanges"][0]["replacements"] == [
        {"deletedRegion": {"startLine": 3, "startColumn": 1, "endLine": 3, "endColumn": 1},
         "insertedContent": {"text": "    optimizer.zero_grad()\n"}},
    ]
    assert run["invocations"][0]["exitCode"] == 1
    # a fix report with no findings keeps its old look
    quiet = _report(())
    assert "[WARNING]" not in render_text(quiet) and "Health checks" not in render_markdown(quiet, tmp_path)


def test_information_is_reported_as_information_and_never_fails(tmp_path: Path) -> None:
    """An information finding (what a short run could not rule out) is shown in every report as
    such ([INFO], a note, level "information") and changes no exit code, --strict-health included."""
    info = HealthFinding(
        id="dead-parameters", message="3 branch modules of SuperNet.choice_block.0 were not sampled in 2 steps",
        file="train.py", line=4, evidence={"branches": 3, "steps": 2}, level="information",
    )
    warning = HealthFinding(id="nan-loss", message="the loss is nan", file="train.py", line=3)
    (tmp_path / "train.py").write_text("import torch\nx = 1\nloss.backward()\nmodel(x)\n")
    for command, strict in (("doctor", False), ("fix", True)):
        report = _report((info,), command=command, strict_health=strict)
        assert report.exit_code == 0 and report.warnings == ()
        text = render_text(report)
        assert "[INFO] train.py:4\nHealth: dead-parameters\nProblem: 3 branch modules" in text
        assert "[WARNING]" not in text and "(--strict-health)" not in text
    doctor = _report((info,), command="doctor")
    assert "Status: SUCCESS | Health findings: 0 (+1 information)" in render_text(doctor)
    assert _report((info, warning), command="doctor").exit_code == 1
    assert _report((info, warning), command="fix", strict_health=True).exit_code == 1
    data = json.loads(render_json(doctor))
    validate_report(data)
    assert [h["level"] for h in data["health"]] == ["information"]
    markdown = render_markdown(doctor, tmp_path)
    assert "#### ℹ️ `dead-parameters` (information) at `train.py:4`" in markdown and "healthy" in markdown
    sarif = json.loads(render_sarif(doctor, all_patterns(), tmp_path))
    validate_sarif(sarif)
    assert [(r["ruleId"], r["level"]) for r in sarif["runs"][0]["results"]] == [("dead-parameters", "note")]
    assert sarif["runs"][0]["invocations"][0]["exitCode"] == 0
    # the level survives the evidence file; anything but "information" reads as a warning
    raw = [{"id": "dead-parameters", "file": "train.py", "line": 4, "message": "m", "evidence": {},
            "level": "information"},
           {"id": "nan-loss", "file": "train.py", "line": 3, "message": "m", "evidence": {}, "level": "bogus"}]
    parsed = evidence_from_json(_evidence(tmp_path, raw)).health
    assert parsed is not None and [h.level for h in parsed] == ["information", "warning"]


# Every way a script builds the optimizer of a GAN's discriminator, which is trained second (it
# holds the generator step's gradients before its own optimizer has stepped): none of them may
# read as "no optimizer holds its parameters".
_GAN = """\
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
{build}
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for step in range(4):
    real = torch.randn(8, 2)
    fake = G(torch.randn(8, 4))
    opt_g.zero_grad()
    bce(D(fake), torch.ones(8, 1)).backward()
    opt_g.step()
    opt_d.zero_grad()
    (bce(D(real), torch.ones(8, 1)) + bce(D(fake.detach()), torch.zeros(8, 1))).backward()
    opt_d.step()
print("done")
"""
_OPTIMIZER_BUILDS = {
    "param-groups": "opt_d = torch.optim.SGD([{'params': D[0].parameters()}, {'params': D[2].parameters(), 'lr': 0.1}], lr=0.01)",
    "inside-a-class": (
        "class Trainer:\n    def __init__(self, model):\n        self.optimizer = self.make(model)\n"
        "    def make(self, model):\n        return torch.optim.RMSprop(model.parameters())\n"
        "opt_d = Trainer(D).optimizer"
    ),
    "subclass": (
        "class Clipped(torch.optim.Adam):\n    def step(self, closure=None):\n        return super().step(closure)\n"
        "opt_d = Clipped(D.parameters())"
    ),
    "lookahead-wrapper": (
        "class Lookahead:\n    def __init__(self, optimizer, k=5):\n        self.optimizer, self.k = optimizer, k\n"
        "    def zero_grad(self):\n        self.optimizer.zero_grad()\n"
        "    def step(self):\n        self.optimizer.step()\n"
        "opt_d = Lookahead(torch.optim.Adam(D.parameters()))"
    ),
    "lookahead-optimizer-subclass": (
        "class Lookahead(torch.optim.Optimizer):\n    def __init__(self, base_optimizer):\n"
        "        self.base_optimizer = base_optimizer\n        self.param_groups = base_optimizer.param_groups\n"
        "        self.defaults, self.state = base_optimizer.defaults, base_optimizer.state\n"
        "    def zero_grad(self, set_to_none=True):\n        self.base_optimizer.zero_grad(set_to_none)\n"
        "    def step(self, closure=None):\n        return self.base_optimizer.step()\n"
        "opt_d = Lookahead(torch.optim.Adam(D.parameters()))"
    ),
    "zero-redundancy": (
        "import os, tempfile\nimport torch.distributed as dist\n"
        "from torch.distributed.optim import ZeroRedundancyOptimizer\n"
        "dist.init_process_group('gloo', init_method='file://' + os.path.join(tempfile.mkdtemp(), 'pg'), rank=0, world_size=1)\n"
        "opt_d = ZeroRedundancyOptimizer(D.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)"
    ),
}


@pytest.mark.torch
@pytest.mark.parametrize("build", sorted(_OPTIMIZER_BUILDS))
def test_frozen_optimizer_knows_every_optimizer_the_script_built(build: str, tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    (tmp_path / "train.py").write_text(_GAN.format(build=_OPTIMIZER_BUILDS[build]))
    result = run_cli_in_process("doctor", "train.py", "--json", "-", cwd=tmp_path, runner=shared_runner)
    report = json.loads(result.stdout)
    assert report["status"] == "already-passing", result.stderr
    assert report["health"] == [] and result.returncode == 0, report["health"]


_TWO_MODELS = """\
import copy
import torch
from torch import nn

torch.manual_seed(0)
student = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
{second}
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(5):
    x = torch.randn(8, 4)
    optimizer.zero_grad()
    loss = (student(x) - {target}).pow(2).mean()
    loss.backward()
    optimizer.step()
    {update}
print("done")
"""


@pytest.mark.torch
def test_frozen_optimizer_names_an_ema_teacher_whose_output_is_not_detached(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    (tmp_path / "train.py").write_text(_TWO_MODELS.format(
        second="teacher = copy.deepcopy(student)", target="teacher(x)",
        update=("with torch.no_grad():\n        for t, s in zip(teacher.parameters(), student.parameters()):\n"
                "            t.mul_(0.9).add_(s, alpha=0.1)"),
    ))
    report = json.loads(run_cli_in_process("doctor", "train.py", "--json", "-", cwd=tmp_path, runner=shared_runner).stdout)
    (finding,) = report["health"]
    assert finding["id"] == "frozen-optimizer" and finding["line"] == 12  # the loss line that calls teacher(x)
    assert finding["evidence"]["weights_change"] is True and finding["evidence"]["output_used_at"] == "train.py:12"
    assert "graph attached" in finding["message"] and "another Sequential" in finding["message"]


@pytest.mark.torch
def test_frozen_optimizer_is_silent_on_a_model_updated_by_hand(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    """A second model trained by a hand-written SGD step: it holds gradients no optimizer
    holds, and its weights change; not a frozen model."""
    (tmp_path / "train.py").write_text(_TWO_MODELS.format(
        second="critic = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1))", target="critic(x)",
        update=("with torch.no_grad():\n        for p in critic.parameters():\n"
                "            p -= 0.01 * p.grad\n            p.grad = None"),
    ))
    report = json.loads(run_cli_in_process("doctor", "train.py", "--json", "-", cwd=tmp_path, runner=shared_runner).stdout)
    assert report["status"] == "already-passing" and report["health"] == [], report["health"]
