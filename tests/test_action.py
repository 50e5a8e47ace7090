"""The GitHub Action: ``action.yml`` and every file of ``.github/`` validated (GitHub's schemas,
zizmor in both personas, the two-stage security rules); the example workflows run as written,
``run:`` lines and all, by a small runner emulator (below) against a local bare repository
standing in for GitHub and a stand-in ``gh``; Stage A's inputs and Stage B's checks, commit,
push and pull request one by one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from repairbot.action import stage_a
from repairbot.action.stage_b import BRANCH_PREFIX, PR_BODY_LIMIT, pr_body, suggestions
from repairbot.cli import fix as fix_cli
from repairbot.cli import main
from repairbot.output.diff import parse_patch, unified_diff
from repairbot.output.report import report_schema
from repairbot.run_config import DEFAULTS, SETTINGS
from tests.support import PYTHON, ROOT, commit_all, copy_project, fixtures, git, init_repo, snapshot

ACTION = ROOT / "action.yml"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
EXAMPLES = sorted((ROOT / ".github" / "examples").glob("*.yml"))
# every file of .github/, by name (zizmor audits only .github/workflows/ when given the folder)
GITHUB_FILES = sorted(p for p in (ROOT / ".github").rglob("*") if p.is_file())
GITHUB_YAML = [p for p in GITHUB_FILES if p.suffix in (".yml", ".yaml")]
STAGE_A = ROOT / "repairbot" / "action" / "stage_a.py"
STAGE_B = ROOT / "repairbot" / "action" / "stage_b.py"
SARIF_SCHEMA = json.loads((ROOT / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json").read_text())
_SHA_PIN = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")


def tool(name: str) -> str:
    """A test tool of the `test` extra, from this interpreter's environment."""
    path = Path(PYTHON).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} is missing: install the test extra (pip install -e '.[test]')"
    return found


def load(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # every scalar a string, as GitHub reads it


def steps_of(document: Any) -> Iterator[dict[str, Any]]:
    if "runs" in document:
        yield from document["runs"].get("steps", [])
    for job in (document.get("jobs") or {}).values():
        yield from job.get("steps", [])


# --------------------------------------------------------------------------------------------
# Static checks
# --------------------------------------------------------------------------------------------


def test_every_file_of_github_folder_is_checked() -> None:
    """Only YAML (checked below) and the examples' README live in .github/."""
    assert [p.relative_to(ROOT).as_posix() for p in GITHUB_FILES if p not in GITHUB_YAML] == [".github/examples/README.md"]
    assert set(WORKFLOWS + EXAMPLES) == set(GITHUB_YAML) and len(EXAMPLES) == 2 and WORKFLOWS


def test_action_and_workflows_match_githubs_schemas() -> None:
    for schema, files in (("vendor.github-actions", [ACTION]), ("vendor.github-workflows", GITHUB_YAML)):
        result = subprocess.run(
            [tool("check-jsonschema"), "--builtin-schema", schema, *map(str, files)],
            capture_output=True, text=True, check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def _zizmor(*extra: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [tool("zizmor"), "--offline", "--format", "json", *extra, str(ACTION), *map(str, GITHUB_YAML)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    findings: list[dict[str, Any]] = json.loads(result.stdout)
    return findings


@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_zizmor_finds_nothing_but_the_one_documented_suppression(persona: str) -> None:
    assert _zizmor(f"--persona={persona}") == []
    # Without inline suppressions, the only finding is Stage B's workflow_run trigger.
    findings = [(f["ident"], f["locations"][0]["symbolic"]["key"]["Local"]["verbatim_path"])
                for f in _zizmor(f"--persona={persona}", "--no-ignores")]
    assert findings == [("dangerous-triggers", str(ROOT / ".github" / "examples" / "repairbot-publish.yml"))]
    text = (ROOT / ".github" / "examples" / "repairbot-publish.yml").read_text()
    suppressions = re.findall(r"# zizmor: ignore\[([^\]]+)\](.*)", text)
    assert len(suppressions) == 1 and suppressions[0][0] == "dangerous-triggers" and len(suppressions[0][1].strip()) > 20


@pytest.mark.parametrize("path", [ACTION, *GITHUB_YAML], ids=lambda p: p.name)
def test_security_rules_of_every_workflow(path: Path) -> None:
    document = load(path)
    text = path.read_text()
    assert "pull_request_target" not in text and "allow-unsafe-pr-checkout" not in text
    for step in steps_of(document):
        if "uses" in step and not step["uses"].startswith("./"):
            assert _SHA_PIN.match(step["uses"]), f"{step['uses']}: pin actions to a full commit sha"
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] == "false", step
        # inputs and event fields reach scripts through env, never expanded into a command
        assert "${{" not in step.get("run", ""), step["run"]
        if "run" in step and "runs" in document:
            assert step["shell"] == "bash"
    if "jobs" in document:  # least privilege at the top; a job widens only what it needs
        assert document["permissions"] in ({}, {"contents": "read"})


def test_stage_b_acts_on_failed_same_repository_runs_only() -> None:
    publish = load(ROOT / ".github" / "examples" / "repairbot-publish.yml")
    train = load(ROOT / ".github" / "examples" / "repairbot-train.yml")
    trigger = publish["on"]["workflow_run"]
    assert trigger["types"] == ["completed"] and trigger["workflows"] == [train["name"]]
    assert publish["permissions"] == {}
    (job,) = publish["jobs"].values()
    condition = " ".join(job["if"].split())
    assert "github.event.workflow_run.conclusion == 'failure'" in condition
    assert "github.event.workflow_run.head_repository.full_name == github.repository" in condition
    assert "!startsWith(github.event.workflow_run.head_branch, 'repairbot/')" in condition
    assert job["permissions"] == {"actions": "read", "contents": "write", "pull-requests": "write"}
    # only the publishing steps see a token; the checkouts and the checks get none
    for step in job["steps"]:
        env = " ".join(step.get("env", {}).values())
        if "token" in env.lower():
            assert step["name"].startswith(("Propose the fix", "Comment the report")), step["name"]
    checkout = next(s for s in job["steps"] if s.get("with", {}).get("path") == "target")
    assert checkout["with"]["ref"] == "${{ github.event.workflow_run.head_sha }}"
    assert "GitHub App" in (ROOT / ".github" / "examples" / "repairbot-publish.yml").read_text()
    assert "do not trigger other" in " ".join((ROOT / ".github" / "examples" / "repairbot-publish.yml").read_text().split())


def test_stage_a_example_is_read_only_and_runs_after_the_failure() -> None:
    train = load(ROOT / ".github" / "examples" / "repairbot-train.yml")
    assert train["permissions"] == {"contents": "read"}
    (job,) = train["jobs"].values()
    step = next(s for s in job["steps"] if s.get("id") == "repairbot")
    assert step["if"].startswith("failure()")
    assert set(step["with"]) <= set(load(ACTION)["inputs"])
    assert "secrets." not in (ROOT / ".github" / "examples" / "repairbot-train.yml").read_text()


def test_action_inputs_and_outputs() -> None:
    action = load(ACTION)
    assert action["runs"]["using"] == "composite"
    assert {"status", "patterns", "patch-path"} <= set(action["outputs"])
    analyse = next(s for s in action["runs"]["steps"] if s.get("id") == "analyse")
    for name in ("command", *stage_a.INPUT_OPTIONS.values(), "artifact-name"):
        assert name in action["inputs"], name
        assert analyse["env"][f"INPUT_{name.upper().replace('-', '_')}"] == f"${{{{ inputs.{name} }}}}"
    assert action["inputs"]["safe-only"]["default"] == "true"  # CI applies only safe fixes unless told


def test_action_inputs_of_the_run_configuration() -> None:
    """Each setting of the run configuration (repairbot/run_config.py) is an input of action.yml
    with the same default and help, read by Stage A with that default into its option."""
    inputs = load(ACTION)["inputs"]
    for setting in SETTINGS:
        assert stage_a.INPUT_OPTIONS[setting.option] == setting.input, setting.option
        assert inputs[setting.input]["default"] == setting.input_default, setting.input
        assert inputs[setting.input]["description"] == setting.input_help, setting.input


def test_every_option_of_fix_is_an_input_or_set_by_the_action() -> None:
    """A new option of `repairbot fix` fails this test until the action passes it (an input
    in stage_a.INPUT_OPTIONS) or says why not (stage_a.NOT_INPUTS)."""
    cli_options = {name for param in fix_cli.params if isinstance(param, click.Option)
                   for name in (*param.opts, *param.secondary_opts) if name.startswith("--") or name == "-m"}
    cli_options -= {"-v", "-q"}
    known = set(stage_a.INPUT_OPTIONS) | set(stage_a.NOT_INPUTS)
    assert cli_options - known == set(), "options of repairbot fix the action neither passes nor explains"
    assert set(stage_a.INPUT_OPTIONS) <= cli_options, "the action passes options repairbot fix lacks"
    # and each input reaches its option in the command the action runs
    inputs = stage_a.Inputs(script="train.py", module=None, args=("--epochs", "1"), python="/p/python", max_attempts=4,
                            timeout=60.0, batch_size=3, max_batches=5, max_steps=7, safe_only=True,
                            patterns=("linear-in-features",), excludes=("device-mismatch",), no_health=True,
                            strict_health=False)
    command = stage_a.fix_command(inputs, Path("/out"))
    assert command[1:6] == ["-m", "repairbot", "fix", "train.py", "--dry-run"]
    for option, value in (("--python", "/p/python"), ("--max-attempts", "4"), ("--timeout", "60.0"),
                          ("--batch-size", "3"), ("--max-batches", "5"), ("--max-steps", "7")):
        assert command[command.index(option) + 1] == value
    assert {"--safe-only", "--pattern=linear-in-features", "--exclude=device-mismatch", "--no-health"} <= set(command)
    assert "--strict-health" not in command and command[-3:] == ["--", "--epochs", "1"]
    parsed = fix_cli.make_context("fix", command[4:], resilient_parsing=True).params
    assert parsed["safe_only"] and parsed["include"] == ("linear-in-features",) and parsed["no_health"]


def test_ci_runs_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test.sh" in readme
    runs = [step.get("run", "") for step in steps_of(load(WORKFLOWS[0]))]
    assert "bash scripts/test.sh" in runs


# --------------------------------------------------------------------------------------------
# Stage A for real
# --------------------------------------------------------------------------------------------


def read_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT in the heredoc form, as the runner reads it."""
    outputs: dict[str, str] = {}
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        name, delimiter = lines[i].split("<<", 1)
        end = lines.index(delimiter, i + 1)
        outputs[name] = "\n".join(lines[i + 1:end])
        i = end + 1
    return outputs


@dataclass
class StageA:
    repo: Path
    runner_temp: Path
    outputs: dict[str, str]
    summary: str
    stdout: str
    returncode: int


def run_stage_a(repo: Path, tmp: Path, command: str, **inputs: str) -> StageA:
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    (tmp / "output").write_text("")
    (tmp / "summary.md").write_text("")
    env = {
        **os.environ, "GITHUB_OUTPUT": str(tmp / "output"), "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "GITHUB_WORKSPACE": str(repo), "RUNNER_TEMP": str(runner_temp), "GITHUB_ACTIONS": "true",
        "GITHUB_TOKEN": "must-not-leak", "INPUT_COMMAND": command, "INPUT_PYTHON": PYTHON,
        **{f"INPUT_{k.upper()}": v for k, v in inputs.items()},
    }
    # as action.yml runs it: by path, under repairbot's interpreter, in the working directory
    result = subprocess.run([PYTHON, str(STAGE_A), "analyse"], cwd=repo, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    return StageA(repo, runner_temp, read_outputs(tmp / "output"), (tmp / "summary.md").read_text(),
                  result.stdout + result.stderr, result.returncode)


@pytest.mark.torch
def test_stage_a_keeps_the_runners_tokens_from_the_script(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    # the failure's message is what the script found in its environment
    (repo / "train.py").write_text(
        "import os\nfound = {k: os.environ.get(k) for k in ('GITHUB_TOKEN', 'GITHUB_OUTPUT', 'INPUT_COMMAND')}\n"
        "raise KeyError(repr(found))\n"
    )
    commit_all(repo)
    run = run_stage_a(repo, tmp_path, "train.py")
    assert run.returncode == 0 and run.outputs["status"] == "gave-up", run.stdout
    report = json.loads((run.runner_temp / "repairbot" / "report.json").read_text())
    assert "'GITHUB_TOKEN': None, 'GITHUB_OUTPUT': None, 'INPUT_COMMAND': None" in report["attempts"][0]["failure"]["message"]
    assert re.search(r"^::error file=train\.py,line=3,title=repairbot%3A no automatic fix::KeyError", run.stdout, re.MULTILINE)


@pytest.mark.parametrize(
    ("command", "script", "module", "args"),
    [
        ("train.py", "train.py", None, ()),
        ("python3 -u src/train.py --epochs 1 --name 'a b'", "src/train.py", None, ("--epochs", "1", "--name", "a b")),
        ("/usr/bin/python3.11 train.py -- --x", "train.py", None, ("--", "--x")),
        ("python -m pkg.train --epochs 1", None, "pkg.train", ("--epochs", "1")),
        ("python3 -u -m pkg.mod", None, "pkg.mod", ()),
    ],
)
def test_stage_a_reads_the_command(monkeypatch: pytest.MonkeyPatch, command: str, script: str | None,
                                   module: str | None, args: tuple[str, ...]) -> None:
    monkeypatch.setenv("INPUT_COMMAND", command)
    monkeypatch.setenv("INPUT_PYTHON", PYTHON)
    inputs = stage_a.read_inputs()
    assert (inputs.script, inputs.module, inputs.args) == (script, module, args)
    assert (inputs.max_attempts, inputs.timeout, inputs.batch_size, inputs.max_batches, inputs.max_steps) == (3, 300.0, 2, 2, 20)
    assert all(getattr(inputs, s.name) == s.default for s in SETTINGS if not s.flag)
    assert inputs.no_health is not DEFAULTS.health
    assert inputs.safe_only and not inputs.no_health and not inputs.strict_health and inputs.python == os.path.abspath(PYTHON)


def test_stage_a_runs_a_module_as_fix_dash_m(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m pkg.mod ARGS` becomes `repairbot fix -m pkg.mod ... -- ARGS` (the CLI's -m)."""
    monkeypatch.setenv("INPUT_COMMAND", "python -m pkg.train --epochs 1 -- --x")
    monkeypatch.setenv("INPUT_PYTHON", PYTHON)
    command = stage_a.fix_command(stage_a.read_inputs(), Path("/out"))
    assert command[1:7] == ["-m", "repairbot", "fix", "-m", "pkg.train", "--dry-run"]
    assert command[command.index("--"):] == ["--", "--epochs", "1", "--", "--x"]
    assert stage_a.shown_command(stage_a.read_inputs()) == "python -m pkg.train --epochs 1 -- --x"


@pytest.mark.parametrize(
    ("command", "target", "launcher", "args", "shown"),
    [
        ("torchrun --nproc_per_node 2 train.py --epochs 1", ["train.py"], "torchrun --nproc_per_node 2",
         ["--epochs", "1"], "torchrun --nproc_per_node 2 train.py --epochs 1"),
        ("python3 -m torch.distributed.run --standalone --nproc-per-node=2 src/train.py", ["src/train.py"],
         "torchrun --standalone --nproc-per-node=2", [], "torchrun --standalone --nproc-per-node=2 src/train.py"),
        ("accelerate launch --multi_gpu --num_processes 2 -m pkg.train --lr 0.1", ["-m", "pkg.train"],
         "accelerate launch --multi_gpu --num_processes 2", ["--lr", "0.1"],
         "accelerate launch --multi_gpu --num_processes 2 -m pkg.train --lr 0.1"),
    ],
)
def test_stage_a_runs_a_launched_command_with_fix_launcher(
    monkeypatch: pytest.MonkeyPatch, command: str, target: list[str], launcher: str, args: list[str], shown: str,
) -> None:
    """`torchrun OPTIONS SCRIPT ARGS` becomes `repairbot fix SCRIPT --launcher 'torchrun OPTIONS' -- ARGS`."""
    monkeypatch.setenv("INPUT_COMMAND", command)
    monkeypatch.setenv("INPUT_PYTHON", PYTHON)
    inputs = stage_a.read_inputs()
    fix_command = stage_a.fix_command(inputs, Path("/out"))
    assert fix_command[4:4 + len(target)] == target
    assert fix_command[fix_command.index("--launcher") + 1] == launcher
    assert fix_command[fix_command.index("--"):] == ["--", *args]
    parsed = fix_cli.make_context("fix", fix_command[4:], resilient_parsing=True).params
    assert parsed["launcher"] == launcher
    assert stage_a.shown_command(inputs) == shown


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"INPUT_COMMAND": ""}, "command is required"),
        ({"INPUT_COMMAND": "python -c 'print(1)'"}, "does not name a script or `-m MODULE`"),
        ({"INPUT_COMMAND": "python -m"}, "-m needs a module name"),
        ({"INPUT_COMMAND": "python -m 'a b'"}, "-m needs a module name"),
        ({"INPUT_COMMAND": "train.py 'unclosed"}, "No closing quotation"),
        ({"INPUT_COMMAND": "train.py", "INPUT_MAX_ATTEMPTS": "three"}, "max-attempts"),
        ({"INPUT_COMMAND": "train.py", "INPUT_TIMEOUT": "-5"}, "must be positive"),
        ({"INPUT_COMMAND": "train.py", "INPUT_SAFE_ONLY": "yes"}, "neither 'true' nor 'false'"),
        ({"INPUT_COMMAND": "train.py", "INPUT_PATTERN": "linear-in-features, Bad_Id"}, "'Bad_Id' is not a pattern id"),
        ({"INPUT_COMMAND": "train.py", "INPUT_NO_HEALTH": "true", "INPUT_STRICT_HEALTH": "true"}, "exclude each other"),
        ({"INPUT_COMMAND": "train.py", "INPUT_PYTHON": "no-such-python3"}, "'no-such-python3' is not an interpreter on PATH"),
        ({"INPUT_COMMAND": "torchrun --nproc_per_node 2"}, "does not name a script or `-m MODULE`"),
        ({"INPUT_COMMAND": "torchrun --nnodes 2 train.py"}, "--nnodes 2: repairbot runs every rank on this machine"),
        ({"INPUT_COMMAND": "torchrun --no-python train.sh"}, "torchrun --no-python would run something else than SCRIPT"),
    ],
)
def test_stage_a_refuses_bad_inputs(tmp_path: Path, env: dict[str, str], message: str) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("print('hi')\n")
    run = run_stage_a(repo, tmp_path, env.pop("INPUT_COMMAND"), **{k.removeprefix("INPUT_").lower(): v for k, v in env.items()})
    assert run.returncode == 2
    assert run.outputs["status"] == "error" and run.outputs["patch-path"] == ""
    assert re.search(rf"^::error title=repairbot::.*{re.escape(message)}", run.stdout, re.MULTILINE), run.stdout
    assert message in run.summary and "Traceback" not in run.stdout


def test_stage_a_reports_a_refused_script(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("print('hi')\n")
    commit_all(repo)
    run = run_stage_a(repo, tmp_path, "missing.py")
    assert run.returncode == 2
    assert run.outputs["status"] == "error" and run.outputs["stop-reason"] == "bad-input"
    assert "could not run" in run.summary and "missing.py: no such file" in run.summary
    assert not (run.runner_temp / "repairbot" / "fix.patch").exists()


# --------------------------------------------------------------------------------------------
# Stage B
# --------------------------------------------------------------------------------------------

GH_STUB = """#!/usr/bin/env python3
import json, os, sys
log = os.environ["GH_LOG"]
args = sys.argv[1:]
body = next((a.split("=", 1)[1] for a in args if a.startswith("--body-file=")), None)
entry = {"args": args, "token": os.environ.get("GH_TOKEN"), "body": open(body).read() if body else None}
with open(log, "a") as f:
    f.write(json.dumps(entry) + "\\n")
if args[:2] == ["pr", "create"]:
    print("https://github.com/octo/proj/pull/7")
elif args[:2] == ["pr", "list"] and any(a.startswith("--head=") for a in args):
    print("[]")
elif args[:2] == ["pr", "list"]:
    print(json.dumps([{"number": 12, "headRefOid": os.environ["GH_SHA"]}]))
elif args[:1] == ["api"]:
    print("[]")
"""


@dataclass
class Remote:
    """A repository on "GitHub" (a bare repository), a checkout of a commit in it, an artifact."""

    bare: Path
    checkout: Path
    artifact: Path
    sha: str
    env: dict[str, str]

    def stage_b(self, command: str, *extra: str) -> subprocess.CompletedProcess[str]:
        args = [sys.executable, str(STAGE_B), command, "--artifact", str(self.artifact), "--sha", self.sha,
                "--repository", "octo/proj", "--run-id", "4242"]
        if command != "comment":
            args += ["--repo", str(self.checkout)]
        if command == "publish":
            args += ["--base", "main", "--remote", str(self.bare)]
        return subprocess.run([*args, *extra], env=self.env, capture_output=True, text=True, check=False, timeout=60)

    def gh_calls(self) -> list[dict[str, Any]]:
        log = Path(self.env["GH_LOG"])
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def make_remote(tmp: Path, files: dict[str, str], artifact_from: Path | None = None) -> Remote:
    """A project pushed to a bare repository and checked out at its head (as actions/checkout
    would, without credentials); the artifact folder starts as a copy of ``artifact_from``."""
    work = init_repo(tmp / "work")
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    sha = commit_all(work)
    bare = tmp / "remote.git"
    git(tmp, "clone", "-q", "--bare", str(work), str(bare))
    checkout = tmp / "target"
    git(tmp, "clone", "-q", str(bare), str(checkout))
    git(checkout, "checkout", "-q", "--detach", sha)
    artifact = tmp / "artifact"
    if artifact_from is not None:
        shutil.copytree(artifact_from, artifact)
    else:
        artifact.mkdir()
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(GH_STUB)
    (bin_dir / "gh").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GH_LOG": str(tmp / "gh.log"),
           "GH_SHA": sha, "GITHUB_OUTPUT": str(tmp / "output"), "RUNNER_TEMP": str(tmp),
           "REPAIRBOT_TOKEN": "t0ken", "GIT_CONFIG_NOSYSTEM": "1"}
    (tmp / "output").write_text("")
    return Remote(bare, checkout, artifact, sha, env)


PROJECT = {"train.py": "import model\n\nx = model.make(256, 10)\nprint(x)\n", "model.py": "def make(a, b):\n    return a\n",
           ".github/workflows/ci.yml": "name: ci\n", "data/keep.txt": "k\n"}


def write_artifact(folder: Path, files: dict[str, tuple[str, str]], status: str = "fixed",
                   extra: dict[str, str] | None = None) -> None:
    """An artifact as Stage A writes it, for changes {path: (old, new)}."""
    diff = "".join(unified_diff(old.encode(), new.encode(), path)[0] for path, (old, new) in files.items())
    report = {
        "schema": "repairbot.report/1", "script": "train.py", "status": status, "stop_reason": "passing",
        "attempts": [{"n": 1, "failure": {"exc_type": "RuntimeError", "message": "m", "file": "train.py", "line": 3,
                                          "pattern": "linear-in-features", "evidence": {}},
                      "fix": {"pattern": "linear-in-features", "applicability": "safe", "file": next(iter(files)),
                              "line": 3, "summary": "s", "diff": diff},
                      "outcome": "passed", "duration_s": 1.0}],
        "diff": diff, "files_modified": sorted(files), "branch": None, "commit": None,
        "run_limits": {"batch_size": 2, "max_batches": 2, "max_steps": 20, "stopped_at": None},
        "health": [], "environment": {}, "duration_s": 1.0, "notes": [], "scratch": None,
    }
    (folder / "report.json").write_text(json.dumps(report))
    (folder / "report.md").write_text("## repairbot: `train.py` fixed\n")
    (folder / "fix.patch").write_text(diff)
    for name, text in (extra or {}).items():
        (folder / name).write_text(text)


GOOD = {"train.py": (PROJECT["train.py"], PROJECT["train.py"].replace("256", "512"))}


def _commit_symlink(remote: Remote, name: str, target: str) -> None:
    (remote.checkout / name).symlink_to(target)
    git(remote.checkout, "add", name)
    git(remote.checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "link")
    remote.sha = git(remote.checkout, "rev-parse", "HEAD").strip()


REFUSALS: dict[str, tuple[Callable[[Remote], None], str]] = {
    "path outside the repository": (
        lambda r: write_artifact(r.artifact, {"../evil.py": ("a\n", "b\n")}), "leaves its folder"),
    "absolute path": (
        lambda r: write_artifact(r.artifact, {"/etc/passwd": ("a\n", "b\n")}), "not a plain relative path"),
    "workflow file": (
        lambda r: write_artifact(r.artifact, {".github/workflows/ci.yml": ("name: ci\n", "name: pwned\n")}),
        "under .github/"),
    "git internals": (lambda r: write_artifact(r.artifact, {".git/config": ("a\n", "b\n")}), "inside .git"),
    "patch that does not apply": (
        lambda r: write_artifact(r.artifact, {"train.py": ("something else\n", "other\n")}), "patch does not apply"),
    "file not tracked": (lambda r: write_artifact(r.artifact, {"new.py": ("a\n", "b\n")}), "not a tracked file"),
    "through a symlinked folder": (
        lambda r: (_commit_symlink(r, "link", "data"), write_artifact(r.artifact, {"link/keep.txt": ("k\n", "x\n")})),
        "not a tracked file"),
    "a symlink": (
        lambda r: (_commit_symlink(r, "alias.py", "/etc/hostname"), write_artifact(r.artifact, {"alias.py": ("a\n", "b\n")})),
        "not a regular file in git (mode 120000)"),
    "unknown status": (lambda r: write_artifact(r.artifact, GOOD, status="pwned"), "is not one of repairbot's"),
    "fixed without a patch": (
        lambda r: (write_artifact(r.artifact, GOOD), (r.artifact / "fix.patch").unlink()), "there is no fix.patch"),
    "unexpected file": (lambda r: write_artifact(r.artifact, GOOD, extra={"run.sh": "echo"}), "unexpected entries"),
    "patch is not the report's diff": (
        lambda r: (write_artifact(r.artifact, GOOD),
                   (r.artifact / "fix.patch").write_text(
                       (r.artifact / "fix.patch").read_text().replace("+x = model.make(512", "+x = model.make(999"))),
        "not the report's diff"),
    "symlinked report": (
        lambda r: (write_artifact(r.artifact, GOOD), (r.artifact / "report.md").unlink(),
                   (r.artifact / "report.md").symlink_to("/etc/hostname")),
        "not a regular file"),
    "rename": (
        lambda r: (write_artifact(r.artifact, GOOD), _rewrite(r, "+++ b/train.py", "+++ b/other.py")),
        "creates, deletes or renames"),
    "git extended header": (
        lambda r: (write_artifact(r.artifact, GOOD), _rewrite(r, "--- a/train.py", "diff --git a/train.py b/train.py\n--- a/train.py")),
        "expected a '--- a/PATH'"),
    # git apply skips lines between files that are not headers; the reader refuses them
    "a file hidden after other text": (
        lambda r: (write_artifact(r.artifact, GOOD),
                   _rewrite(r, " print(x)\n", " print(x)\nsee below\n--- a/.github/workflows/ci.yml\n"
                                               "+++ b/.github/workflows/ci.yml\n@@ -1 +1 @@\n-name: ci\n+name: pwned\n")),
        "expected a '--- a/PATH'"),
}


def _rewrite(remote: Remote, old: str, new: str) -> None:
    """Change the patch and the report's diff alike (the report must match the patch)."""
    report = json.loads((remote.artifact / "report.json").read_text())
    assert old in report["diff"]
    report["diff"] = report["diff"].replace(old, new, 1)
    (remote.artifact / "report.json").write_text(json.dumps(report))
    (remote.artifact / "fix.patch").write_text(report["diff"])


@pytest.mark.parametrize("case", list(REFUSALS), ids=list(REFUSALS))
def test_stage_b_refuses_unsafe_artifacts(tmp_path: Path, case: str) -> None:
    remote = make_remote(tmp_path, PROJECT)
    make, message = REFUSALS[case]
    make(remote)
    before = snapshot(remote.checkout)
    result = remote.stage_b("prepare")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^::error title=repairbot%3A refused::", result.stdout, re.MULTILINE)
    assert message in result.stdout, result.stdout
    assert snapshot(remote.checkout) == before  # nothing applied, no branch
    assert git(remote.checkout, "branch", "--list", "repairbot/*") == ""


def test_stage_b_applies_a_good_artifact_and_publishes_nothing_else(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, PROJECT)
    write_artifact(remote.artifact, GOOD)
    assert remote.stage_b("prepare").returncode == 0
    assert git(remote.checkout, "show", "--stat", "--format=", "HEAD").split()[0] == "train.py"
    # the checkout must be the failed run's commit
    other = make_remote(tmp_path / "other", PROJECT)
    write_artifact(other.artifact, GOOD)
    other.sha = "f" * 40
    result = other.stage_b("prepare")
    assert result.returncode == 1 and "not at the failed run's commit" in result.stdout


def test_stage_b_prepares_and_publishes_with_relative_paths(tmp_path: Path) -> None:
    """As the workflow calls it: `--repo target` and the artifact relative to the job's folder."""
    remote = make_remote(tmp_path, PROJECT)
    write_artifact(remote.artifact, GOOD)
    common = ["--artifact", "artifact", "--sha", remote.sha, "--repository", "octo/proj", "--repo", "target"]
    prepared = subprocess.run([sys.executable, str(STAGE_B), "prepare", *common], cwd=tmp_path, env=remote.env,
                              capture_output=True, text=True, check=False)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    branch = read_outputs(tmp_path / "output")["branch"]
    assert re.fullmatch(rf"{BRANCH_PREFIX}{remote.sha[:12]}-[0-9a-f]{{8}}", branch)
    published = subprocess.run([sys.executable, str(STAGE_B), "publish", *common, "--base", "main",
                                "--remote", str(remote.bare)], cwd=tmp_path, env=remote.env,
                               capture_output=True, text=True, check=False)
    assert published.returncode == 0, published.stdout + published.stderr
    assert git(remote.bare, "rev-parse", f"{branch}^").strip() == remote.sha
    listed, created = remote.gh_calls()
    assert listed["args"][:2] == ["pr", "list"] and f"--head={branch}" in listed["args"]
    assert created["args"][:2] == ["pr", "create"] and created["token"] == "t0ken"
    assert "## repairbot: `train.py` fixed" in created["body"] and f"<!-- repairbot: {branch} -->" in created["body"]
    # the token went to git through the environment only: nothing of it in the checkout's config
    assert "t0ken" not in (remote.checkout / ".git" / "config").read_text()


def test_the_same_fix_of_the_same_commit_is_the_same_commit(tmp_path: Path) -> None:
    """A rerun (a fresh checkout of the same commit, the same artifact) makes the very commit it
    pushed before: the branch name and the commit's dates come from the commit and the patch."""
    remote = make_remote(tmp_path, PROJECT)
    write_artifact(remote.artifact, GOOD)
    assert remote.stage_b("prepare").returncode == 0
    first = git(remote.checkout, "rev-parse", "HEAD").strip()
    branch = git(remote.checkout, "symbolic-ref", "--short", "HEAD").strip()
    date = git(remote.checkout, "log", "-1", "--format=%cI", remote.sha).strip()
    assert git(remote.checkout, "log", "-1", "--format=%cI|%aI").strip() == f"{date}|{date}"
    git(remote.checkout, "checkout", "-q", "--detach", remote.sha)
    git(remote.checkout, "branch", "-q", "-D", branch)
    assert remote.stage_b("prepare").returncode == 0
    assert git(remote.checkout, "rev-parse", "HEAD").strip() == first
    # another fix of the same commit gets another branch
    other = make_remote(tmp_path / "other", PROJECT)
    write_artifact(other.artifact, {"train.py": (PROJECT["train.py"], PROJECT["train.py"].replace("256", "128"))})
    assert other.stage_b("prepare").returncode == 0
    other_branch = git(other.checkout, "symbolic-ref", "--short", "HEAD").strip()
    assert other_branch.rsplit("-", 1)[1] != branch.rsplit("-", 1)[1]


@pytest.mark.parametrize("status", ["gave-up", "already-passing"])
def test_stage_b_has_nothing_to_propose_without_a_fix(tmp_path: Path, status: str) -> None:
    remote = make_remote(tmp_path, PROJECT)
    write_artifact(remote.artifact, GOOD, status=status)
    if status == "already-passing":
        (remote.artifact / "fix.patch").unlink()
    summary = tmp_path / "summary.md"
    remote.env["GITHUB_STEP_SUMMARY"] = str(summary)
    for command in ("prepare", "comment"):
        result = remote.stage_b(command)
        assert result.returncode == 0, result.stdout + result.stderr
        assert re.search(r"^::notice title=repairbot::nothing to propose", result.stdout, re.MULTILINE)
    assert "nothing to propose" in summary.read_text() and "## repairbot: `train.py` fixed" in summary.read_text()
    assert git(remote.checkout, "branch", "--list", "repairbot/*") == "" and remote.gh_calls() == []


def test_stage_b_publish_needs_a_prepared_branch(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, PROJECT)
    write_artifact(remote.artifact, GOOD)
    result = remote.stage_b("publish")
    assert result.returncode == 1 and "not on a prepared" in result.stdout
    assert git(remote.bare, "branch", "--list", "repairbot/*") == "" and remote.gh_calls() == []


def test_stage_b_comments_on_a_forks_pull_request(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, PROJECT)
    write_artifact(remote.artifact, GOOD)
    result = remote.stage_b("comment")
    assert result.returncode == 0, result.stdout + result.stderr
    listed, comments, commented = remote.gh_calls()
    assert listed["args"][:2] == ["pr", "list"] and f"--search={remote.sha}" in listed["args"]
    assert comments["args"] == ["api", "repos/octo/proj/issues/12/comments?per_page=100"]
    assert commented["args"][:3] == ["pr", "comment", "12"] and "## repairbot: `train.py` fixed" in commented["body"]
    assert git(remote.bare, "branch", "--list", "repairbot/*") == ""


def _suggestion_comments(old: str, new: str) -> list[dict[str, Any]]:
    diff, _ = unified_diff(old.encode(), new.encode(), "m.py")
    return suggestions(parse_patch(diff), "note")


def test_suggestions_replace_the_changed_lines_of_the_head() -> None:
    lines = [f"line{i}\n" for i in range(1, 11)]
    (changed,) = _suggestion_comments("".join(lines), "".join(lines).replace("line5\n", "LINE5\n"))
    assert changed == {"path": "m.py", "side": "RIGHT", "line": 5, "body": "note\n\n```suggestion\nLINE5\n```"}
    # two lines replaced by one: a multi-line comment
    (merged,) = _suggestion_comments("".join(lines), "".join(lines).replace("line5\nline6\n", "both\n"))
    assert (merged["start_line"], merged["line"], merged["start_side"]) == (5, 6, "RIGHT")
    assert merged["body"].endswith("```suggestion\nboth\n```")
    # a pure insertion takes in the line above; a fence in the code gets a longer fence
    (inserted,) = _suggestion_comments("".join(lines), "".join(lines).replace("line3\n", "line3\n```x\n"))
    assert inserted["line"] == 3 and "start_line" not in inserted
    assert inserted["body"].endswith("````suggestion\nline3\n```x\n````")


def test_pr_body_fits_githubs_limit() -> None:
    body = pr_body("x" * 200_000, "a" * 40, "https://github.com/o/r/actions/runs/1")
    assert len(body) <= PR_BODY_LIMIT and "cut here" in body and "`aaaaaaaaaaaa`" in body


# --------------------------------------------------------------------------------------------
# A raw GitHub Actions log, for a failure Stage A did not handle
# --------------------------------------------------------------------------------------------

ACTIONS_LOG = """\
2026-05-01T10:00:00.1000000Z ##[group]Run actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1
2026-05-01T10:00:00.1100000Z with:
2026-05-01T10:00:00.1200000Z   persist-credentials: false
2026-05-01T10:00:00.1300000Z ##[endgroup]
2026-05-01T10:00:02.0000000Z ##[group]Run python train.py --epochs 1
2026-05-01T10:00:02.0100000Z \x1b[36;1mpython train.py --epochs 1\x1b[0m
2026-05-01T10:00:02.0200000Z shell: /usr/bin/bash -e {0}
2026-05-01T10:00:02.0300000Z env:
2026-05-01T10:00:02.0400000Z   pythonLocation: /opt/hostedtoolcache/Python/3.12.4/x64
2026-05-01T10:00:02.0500000Z ##[endgroup]
2026-05-01T10:00:09.0000000Z epoch 0:  50%|█████     | 1/2 [00:01<00:01,  1.00it/s]
2026-05-01T10:00:09.1000000Z Traceback (most recent call last):
2026-05-01T10:00:09.1000000Z   File "/home/runner/work/proj/proj/train.py", line 88, in <module>
2026-05-01T10:00:09.1000000Z     main()
2026-05-01T10:00:09.1000000Z   File "/home/runner/work/proj/proj/train.py", line 71, in main
2026-05-01T10:00:09.1000000Z     logits = model(images)
2026-05-01T10:00:09.1000000Z              ^^^^^^^^^^^^^
2026-05-01T10:00:09.1000000Z   File "/opt/hostedtoolcache/Python/3.12.4/x64/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1775, in _wrapped_call_impl
2026-05-01T10:00:09.1000000Z     return self._call_impl(*args, **kwargs)
2026-05-01T10:00:09.1000000Z   File "/home/runner/work/proj/proj/model.py", line 31, in forward
2026-05-01T10:00:09.1000000Z     return self.fc(x)
2026-05-01T10:00:09.1000000Z   File "/opt/hostedtoolcache/Python/3.12.4/x64/lib/python3.12/site-packages/torch/nn/modules/linear.py", line 134, in forward
2026-05-01T10:00:09.1000000Z     return F.linear(input, self.weight, self.bias)
2026-05-01T10:00:09.1000000Z RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x512 and 256x10)
2026-05-01T10:00:09.4000000Z ##[error]Process completed with exit code 1.
2026-05-01T10:00:09.5000000Z ##[group]Run your-org/repairbot@0000000000000000000000000000000000000000
2026-05-01T10:00:09.5100000Z with:
2026-05-01T10:00:09.5200000Z   command: train.py --epochs 1
2026-05-01T10:00:09.5300000Z ##[endgroup]
2026-05-01T10:00:12.0000000Z Post job cleanup.
"""


def test_classify_reads_a_github_actions_log(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(ACTIONS_LOG)
    result = CliRunner().invoke(main, ["classify", str(log), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "pattern": "linear-in-features", "exc_type": "RuntimeError",
        "message": "mat1 and mat2 shapes cannot be multiplied (2x512 and 256x10)",
        "file": "/home/runner/work/proj/proj/model.py", "line": 31, "command": "python train.py --epochs 1",
        "fixable": True,
        "remedy": "Sets an `nn.Linear`'s `in_features` to the input size the layer really receives.",
    }


# --------------------------------------------------------------------------------------------
# The example workflows, run as a runner would run them
# --------------------------------------------------------------------------------------------
#
# A small emulator of a GitHub-hosted runner: it reads a workflow (or action.yml) and runs its
# steps in order: the job's `if`, each step's `if`, `${{ }}` expressions (the contexts github,
# env, vars, secrets, inputs, steps, runner; the operators and functions the files use), `env`
# at every level, `run:` with GitHub's shells, GITHUB_OUTPUT / GITHUB_STEP_SUMMARY / GITHUB_PATH,
# RUNNER_TEMP, GITHUB_WORKSPACE, GITHUB_EVENT_PATH, continue-on-error and step outcomes. The
# `uses:` steps are the only things emulated by hand, each minimally: a
# checkout is a git clone from the local "GitHub" (a bare repository) or a copy of this
# working tree, setup-python puts the project's interpreter first on PATH, the artifact
# actions copy folders into and out of a per-run store, and `your-org/repairbot@...` runs
# this repository's action.yml as a composite action (Runner._uses).

_EXPR_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!()\[\],.*])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)


class Expression:
    """A GitHub Actions expression, evaluated over ``contexts`` (recursive descent)."""

    def __init__(self, text: str, contexts: dict[str, Any], status: dict[str, bool]) -> None:
        self.tokens: list[tuple[str, str]] = []
        position, text = 0, text.strip()
        while position < len(text):
            match = _EXPR_TOKEN.match(text, position)
            assert match and match.end() > position, f"cannot read the expression {text!r} at {position}"
            kind = match.lastgroup or ""
            self.tokens.append((kind, match[kind]))
            position = match.end()
        self.i, self.contexts, self.status = 0, contexts, status

    def value(self) -> Any:
        result = self._or()
        assert self.i == len(self.tokens), f"unread tokens {self.tokens[self.i:]}"
        return result

    def _peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.i]
        assert expected is None or token[1] == expected, f"expected {expected!r}, got {token}"
        self.i += 1
        return token

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._compare()
        while self._peek() == "&&":
            self._take()
            right = self._compare()
            left = right if truthy(left) else left
        return left

    def _compare(self) -> Any:
        left = self._unary()
        if self._peek() in ("==", "!="):
            op = self._take()[1]
            equal = loose_equal(left, self._unary())
            return equal if op == "==" else not equal
        return left

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if text == "(":
            value = self._or()
            self._take(")")
            return value
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        assert kind == "name", f"unexpected {text!r}"
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._peek() == "(":
            self._take()
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take()
            self._take(")")
            return self._call(text, args)
        found: Any = self.contexts.get(text)
        while self._peek() in (".", "["):
            if self._take()[1] == ".":
                key: Any = self._take()[1]
            else:
                key = self._or()
                self._take("]")
            if isinstance(found, list):
                found = found[int(key)] if isinstance(key, (int, float)) and int(key) < len(found) else None
            else:
                found = found.get(key) if isinstance(found, dict) else None
        return found

    def _call(self, name: str, args: list[Any]) -> Any:
        if name in ("success", "failure", "always", "cancelled"):
            return {"success": not self.status["failed"], "failure": self.status["failed"], "always": True,
                    "cancelled": False}[name]
        if name == "startsWith":
            return str(args[0] or "").lower().startswith(str(args[1] or "").lower())
        if name == "contains":
            return str(args[1] or "").lower() in str(args[0] or "").lower()
        raise AssertionError(f"the emulator lacks the function {name}()")


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, 0.0, "")


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value.strip() or 0)
    except (ValueError, AttributeError):
        return float("nan")


def loose_equal(left: Any, right: Any) -> bool:
    """GitHub's ==: strings case-insensitively, other types coerced to numbers."""
    if isinstance(left, str) and isinstance(right, str):
        return left.lower() == right.lower()
    if type(left) is type(right):
        return bool(left == right)
    return _number(left) == _number(right)


def render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(value)
    return value if isinstance(value, str) else json.dumps(value)


def substitute(text: str, contexts: dict[str, Any], status: dict[str, bool]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: render(Expression(m[1], contexts, status).value()), text)


def condition(text: str | None, contexts: dict[str, Any], status: dict[str, bool]) -> bool:
    """A step's or job's `if`: an expression with or without `${{ }}`; success() unless it
    calls a status function itself."""
    text = (text or "success()").strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    if not re.search(r"\b(?:success|failure|always|cancelled)\(", text):
        text = f"success() && ({text})"
    return truthy(Expression(text, contexts, status).value())


@dataclass
class StepResult:
    outcome: str
    outputs: dict[str, str]


@dataclass
class JobResult:
    """What a job left: its conclusion, each step's outcome and outputs, the log and summary."""

    failed: bool
    steps: dict[str, StepResult]
    ran: list[str]
    log: str
    summary: str


@dataclass
class FakeGitHub:
    """The GitHub side: the bare repository of ``octo/proj`` under ``server`` (so that
    $GITHUB_SERVER_URL/$GITHUB_REPOSITORY.git is where Stage B pushes), the stand-in ``gh``
    (bin/gh, recording each call in gh.log, its pull requests in gh-state.json), and the
    artifacts that runs uploaded."""

    root: Path
    project_bin: Path  # the project's interpreter (setup-python's PATH entry)
    runner_temp: Path  # the Stage A jobs' RUNNER_TEMP: repairbot's own venv is made once
    artifacts: Path  # <run id>/<artifact name>/, what upload-artifact stored

    @property
    def bare(self) -> Path:
        return self.root / "server" / "octo" / "proj.git"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def gh_calls(self) -> list[dict[str, Any]]:
        log = self.root / "gh.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads((self.root / "gh-state.json").read_text())
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        (self.root / "gh-state.json").write_text(json.dumps(state))

    def branches(self) -> list[str]:
        return git(self.bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split()


FAKE_GH = r'''#!/usr/bin/env python3
"""A stand-in for the GitHub CLI: the calls Stage B makes, on the bare repository in GH_REMOTE,
recorded one JSON line each (arguments, token, the body file's text) in GH_LOG."""
import json, os, re, subprocess, sys

args = sys.argv[1:]
state_path = os.environ["GH_STATE"]
state = json.load(open(state_path))
body_file = next((a.split("=", 1)[1] for a in args if a.startswith(("--body-file=", "--input="))), None)
with open(os.environ["GH_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "token": os.environ.get("GH_TOKEN"),
                          "body": open(body_file).read() if body_file else None}) + "\n")
if not os.environ.get("GH_TOKEN"):
    sys.exit("gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable.")
options = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
bare = os.environ["GH_REMOTE"]
server = "https://github.com/octo/proj"


def save():
    json.dump(state, open(state_path, "w"))


def fail_once(what):
    if what in state.get("fail", []):
        state["fail"].remove(what)
        save()
        sys.exit(state["fail_message"][what])


def git(*a):
    return subprocess.run(["git", "-C", bare, *a], capture_output=True, text=True, check=True).stdout


def pr_files(pull):
    files = []
    for name in git("diff", "--name-only", pull["base_sha"], pull["head_sha"]).split():
        diff = git("diff", "--unified=3", pull["base_sha"], pull["head_sha"], "--", name)
        files.append({"filename": name, "patch": diff[diff.index("@@"):]})
    return files


def commentable(pull, path, start, end):
    for item in pr_files(pull):
        if item["filename"] != path:
            continue
        for m in re.finditer(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", item["patch"], re.M):
            first, count = int(m[1]), int(m[2] or 1)
            if first <= start and end < first + count:
                return True
    return False


pulls = state["pulls"]
if args[:2] == ["pr", "list"] and "head" in options:
    found = [p for p in pulls.values() if p["head"] == options["head"]]
    print(json.dumps([{"number": p["number"], "url": p["url"], "state": p["state"]} for p in found]))
elif args[:2] == ["pr", "list"]:
    print(json.dumps([{"number": p["number"], "headRefOid": p["head_sha"]} for p in pulls.values()
                      if p["state"] == "OPEN" and p["head_sha"] == options["search"]]))
elif args[:2] == ["pr", "create"]:
    fail_once("pr create")
    if not git("ls-remote", "--heads", ".", "refs/heads/" + options["head"]).strip():
        sys.exit("pull request create failed: GraphQL: Head sha can't be blank, No commits between")
    number = max([int(n) for n in pulls] + [6]) + 1
    url = f"{server}/pull/{number}"
    pulls[str(number)] = {"number": number, "url": url, "state": "OPEN", "head": options["head"],
                          "base": options["base"], "title": options["title"], "body": open(body_file).read(),
                          "head_sha": git("rev-parse", options["head"]).strip(), "reviews": [], "comments": []}
    save()
    print(url)
elif args[:2] == ["pr", "comment"]:
    pulls[args[2]]["comments"].append({"body": open(body_file).read(),
                                       "html_url": f"{server}/pull/{args[2]}#issuecomment-1"})
    save()
    print(f"{server}/pull/{args[2]}#issuecomment-1")
elif args[0] == "api":
    path = next(a for a in args[1:] if not a.startswith("-")).split("?")[0]
    parts = path.split("/")
    pull = pulls[parts[4]]
    if parts[3] == "issues" and parts[5:] == ["comments"]:
        print(json.dumps(pull["comments"]))
    elif parts[5:] == []:
        print(json.dumps({"number": pull["number"], "html_url": pull["url"], "head": {"sha": pull["head_sha"]}}))
    elif parts[5:] == ["files"]:
        print(json.dumps(pr_files(pull)))
    elif parts[5:] == ["reviews"] and options.get("method") == "POST":
        review = json.load(open(body_file))
        for c in review["comments"]:  # what GitHub answers 422 to
            if c["side"] != "RIGHT" or not commentable(pull, c["path"], c.get("start_line", c["line"]), c["line"]):
                sys.exit(f"gh: Unprocessable Entity (HTTP 422): line {c['line']} of {c['path']} is not in the diff")
        posted = {"body": review["body"], "html_url": f"{pull['url']}#pullrequestreview-{len(pull['reviews']) + 1}"}
        pull["reviews"].append(posted)
        save()
        print(json.dumps(posted))
    elif parts[5:] == ["reviews"]:
        print(json.dumps(pull["reviews"]))
    else:
        sys.exit(f"gh stand-in: no such API {path}")
else:
    sys.exit(f"gh stand-in: unknown command {args}")
'''


def _copy_tree(source: Path, target: Path) -> None:
    """The working tree as git sees it (tracked and untracked, nothing ignored): what a checkout
    of this repairbot commit holds."""
    names = git(source, "ls-files", "-z", "-co", "--exclude-standard").split("\0")
    for name in filter(None, names):
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)


class Runner:
    """One job of a workflow, run on this machine (the emulator described above)."""

    def __init__(self, github: FakeGitHub, work: Path, event_name: str, event: dict[str, Any], sha: str,
                 ref: str, run_id: int, variables: dict[str, str] | None = None,
                 secrets: dict[str, str] | None = None, path: Sequence[Path] = (),
                 runner_temp: Path | None = None) -> None:
        self.github, self.work, self.run_id = github, work, run_id
        self.workspace = work / "workspace"
        self.workspace.mkdir(parents=True)
        # a job's own RUNNER_TEMP, as on a runner; the Stage A jobs share one (given here) so that
        # repairbot's environment is made once for the module
        self.runner_temp = runner_temp or work / "runner-temp"
        self.runner_temp.mkdir(exist_ok=True)
        (work / "event.json").write_text(json.dumps(event))
        self.path = [str(p) for p in path] + os.environ["PATH"].split(os.pathsep)
        self.log: list[str] = []
        self.summary: list[str] = []
        self.github_context = {
            "event_name": event_name, "event": event, "sha": sha, "ref": ref, "repository": "octo/proj",
            "token": "ghs_defaulttoken", "server_url": f"file://{github.root / 'server'}", "run_id": str(run_id),
            "workspace": str(self.workspace),
        }
        self.base_env = {
            "HOME": os.environ.get("HOME", str(work)), "LANG": "C.UTF-8", "CI": "true", "GITHUB_ACTIONS": "true",
            "RUNNER_TEMP": str(self.runner_temp), "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_REPOSITORY": "octo/proj", "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(work / "event.json"), "GITHUB_SHA": sha, "GITHUB_REF": ref,
            "GITHUB_SERVER_URL": f"file://{github.root / 'server'}", "GITHUB_RUN_ID": str(run_id),
            "GH_LOG": str(github.root / "gh.log"), "GH_STATE": str(github.root / "gh-state.json"),
            "GH_REMOTE": str(github.bare), "GIT_CONFIG_NOSYSTEM": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "OMP_NUM_THREADS": "1",
        }
        self.vars, self.secrets = variables or {}, secrets or {}
        self._count = 0

    def contexts(self, env: dict[str, str], steps: dict[str, StepResult], inputs: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "github": self.github_context, "env": env, "vars": self.vars, "secrets": self.secrets,
            "runner": {"temp": str(self.runner_temp), "os": "Linux"}, "inputs": inputs or {},
            "steps": {k: {"outcome": v.outcome, "conclusion": v.outcome, "outputs": v.outputs} for k, v in steps.items()},
        }

    def run_job(self, workflow: Path, job_name: str | None = None) -> JobResult:
        document = load(workflow)
        jobs = document["jobs"]
        job = jobs[job_name or next(iter(jobs))]
        status = {"failed": False}
        env = self._env_block(document.get("env"), {}, {})
        env = self._env_block(job.get("env"), env, {})
        if not condition(job.get("if"), self.contexts(env, {}), status):
            return JobResult(False, {}, [], "(job skipped)", "")
        steps, ran = self.run_steps(job["steps"], env, status, inputs=None, action_path=None)
        return JobResult(status["failed"], steps, ran, "\n".join(self.log), "".join(self.summary))

    def _env_block(self, block: dict[str, str] | None, env: dict[str, str], steps: dict[str, StepResult],
                   inputs: dict[str, str] | None = None, status: dict[str, bool] | None = None) -> dict[str, str]:
        merged = dict(env)
        for name, value in (block or {}).items():
            merged[name] = substitute(value, self.contexts(merged, steps, inputs), status or {"failed": False})
        return merged

    def run_steps(self, steps_yaml: list[dict[str, Any]], env: dict[str, str], status: dict[str, bool],
                  inputs: dict[str, str] | None, action_path: Path | None) -> tuple[dict[str, StepResult], list[str]]:
        steps: dict[str, StepResult] = {}
        ran: list[str] = []
        for index, step in enumerate(steps_yaml):
            name = step.get("name") or step.get("uses") or step.get("run", "")[:40]
            contexts = self.contexts(env, steps, inputs)
            if not condition(step.get("if"), contexts, status):
                self.log.append(f"(skipped) {name}")
                continue
            ran.append(name)
            step_env = self._env_block(step.get("env"), env, steps, inputs, status)
            contexts = self.contexts(step_env, steps, inputs)
            with_ = {k: substitute(v, contexts, status) for k, v in (step.get("with") or {}).items()}
            if "run" in step:
                outcome, outputs = self._run(step, step_env, contexts, status, action_path)
            else:
                outcome, outputs = self._uses(step["uses"], with_, step_env, status)
            if outcome == "failure" and step.get("continue-on-error") != "true":
                status["failed"] = True
            steps[step.get("id") or f"__{index}"] = StepResult(outcome, outputs)
        return steps, ran

    def _files(self) -> tuple[Path, Path, Path]:
        self._count += 1
        files = tuple(self.work / f"{kind}-{self._count}" for kind in ("output", "summary", "path"))
        for file in files:
            file.write_text("")
        return files  # type: ignore[return-value]

    def _run(self, step: dict[str, Any], env: dict[str, str], contexts: dict[str, Any], status: dict[str, bool],
             action_path: Path | None) -> tuple[str, dict[str, str]]:
        script = substitute(step["run"], contexts, status)  # the files never put ${{ }} here (test above)
        output, summary, path_file = self._files()
        shell = step.get("shell")
        command = ["bash", "--noprofile", "--norc", "-eo", "pipefail"] if shell == "bash" else ["bash", "-e"]
        script_file = self.work / f"step-{self._count}.sh"
        script_file.write_text(script)
        cwd = self.workspace / substitute(step.get("working-directory", "."), contexts, status)
        full_env = {**self.base_env, **env, "PATH": os.pathsep.join(self.path), "GITHUB_OUTPUT": str(output),
                    "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_PATH": str(path_file),
                    **({"GITHUB_ACTION_PATH": str(action_path)} if action_path else {})}
        result = subprocess.run([*command, str(script_file)], cwd=cwd, env=full_env, capture_output=True,
                                text=True, timeout=900, check=False)
        self.log.append(f"$ {script.strip()}\n{result.stdout}{result.stderr}(exit {result.returncode})")
        self.summary.append(summary.read_text())
        self.path[:0] = [line for line in path_file.read_text().splitlines() if line][::-1]
        return ("success" if result.returncode == 0 else "failure"), read_outputs(output)

    def _uses(self, uses: str, with_: dict[str, str], env: dict[str, str], status: dict[str, bool]) -> tuple[str, dict[str, str]]:
        """The `uses:` steps, emulated minimally: actions/checkout = a git clone of the bare
        repository at `ref`, detached and without credentials (or, for `your-org/repairbot`, a
        copy of this working tree); actions/setup-python = the project's interpreter first on
        PATH; upload-artifact / download-artifact = a folder copy into / out of
        artifacts/<run id>/<name> (a missing one fails the step); `your-org/repairbot@...` =
        this repository's action.yml run as a composite action (its inputs' defaults, its own
        `steps` and status, GITHUB_ACTION_PATH, its outputs' expressions). Anything else fails."""
        action = uses.split("@", 1)[0]
        self.log.append(f"(uses) {uses} with {with_}")
        if action == "actions/checkout":
            target = self.workspace / with_.get("path", ".")
            if with_.get("repository", "octo/proj") == "your-org/repairbot":
                target.mkdir(parents=True)
                _copy_tree(ROOT, target)
            else:
                git(self.workspace, "clone", "-q", str(self.github.bare), str(target))
                git(target, "checkout", "-q", "--detach", with_.get("ref") or str(self.github_context["sha"]))
            return "success", {}
        if action == "actions/setup-python":
            self.path.insert(0, str(self.github.project_bin))
            return "success", {}
        store = self.github.artifacts
        if action == "actions/upload-artifact":
            source = Path(with_["path"])
            if with_.get("if-no-files-found") == "error" and not any(source.iterdir()):
                return "failure", {}
            shutil.copytree(source, store / str(self.run_id) / with_["name"])
            return "success", {}
        if action == "actions/download-artifact":
            source = store / with_["run-id"] / with_["name"]
            if not source.is_dir():
                self.log.append(f"Unable to download artifact(s): Artifact not found for name: {with_['name']}")
                return "failure", {}
            shutil.copytree(source, with_["path"])
            return "success", {}
        if action == "your-org/repairbot":  # this repository's action.yml, as the runner runs a composite action
            # beside RUNNER_TEMP, as a runner keeps _actions beside _temp: jobs that share one share
            # the action's folder too, so repairbot's venv (stamped with that folder) is made once
            action_path = self.runner_temp.parent / "actions" / "your-org" / "repairbot"
            if not action_path.is_dir():
                action_path.mkdir(parents=True)
                _copy_tree(ROOT, action_path)
            definition = load(action_path / "action.yml")
            inputs = {name: spec.get("default", "") for name, spec in definition["inputs"].items()}
            unknown = set(with_) - set(inputs)
            assert not unknown, f"{uses}: unknown inputs {unknown}"
            inputs.update(with_)
            # status functions inside a composite action see its own steps only
            inner_status = {"failed": False}
            steps, _ = self.run_steps(definition["runs"]["steps"], {}, inner_status, inputs, action_path)
            contexts = self.contexts({}, steps, inputs)
            outputs = {name: substitute(spec["value"], contexts, inner_status) for name, spec in definition["outputs"].items()}
            return ("failure" if any(r.outcome == "failure" for r in steps.values()) else "success"), outputs
        raise AssertionError(f"the emulator has no stand-in for {uses}: add one")


TRAIN_WORKFLOW = ROOT / ".github" / "examples" / "repairbot-train.yml"
PUBLISH_WORKFLOW = ROOT / ".github" / "examples" / "repairbot-publish.yml"
RUN_IDS = {"main": 101, "feature": 102, "broken": 103}
BROKEN_TRAIN = "import os\nfound = {k: os.environ.get(k) for k in ('GITHUB_TOKEN', 'GITHUB_OUTPUT')}\nraise KeyError(repr(found))\n"


def _link_torch(target: Path) -> None:
    """torch and what it needs, and pip, linked from this environment: the project's interpreter
    gets torch and nothing of repairbot's own dependencies (pip linked, not bootstrapped into the
    venv by ensurepip: ~4 CPU-s)."""
    from importlib import metadata

    seen: set[str] = set()
    todo = ["torch", "pip"]
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        todo += [re.split(r"[\s<>=!~\[;(]", req, maxsplit=1)[0] for req in dist.requires or [] if "extra ==" not in req]
        for top in {file.parts[0] for file in dist.files or []} - {"..", "__pycache__"}:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (target / top).exists():
                (target / top).symlink_to(source)


def pip_list(python: Path) -> str:
    return subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                          check=True).stdout


@dataclass
class StageARuns:
    github: FakeGitHub
    shas: dict[str, str]
    jobs: dict[str, JobResult]
    project_python: Path
    pip_before: str


@pytest.fixture(scope="module")
def stage_a_runs(tmp_path_factory: pytest.TempPathFactory) -> StageARuns:
    """The train-smoke example, run for real three times on "GitHub" (a bare repository): a push
    to main (the cnn_flatten_size fixture: a Linear sized for 28x28 images), a pull request from
    the branch `feature` (one more change near that line) and a push to `broken` (a crash no
    pattern fixes). The project's interpreter is a venv with torch (and pip) only."""
    root = tmp_path_factory.mktemp("github")
    project = root / "project-venv"
    venv.create(project, with_pip=False)  # pip comes linked with torch
    torch_site = root / "torch-site"
    torch_site.mkdir()
    _link_torch(torch_site)
    (next((project / "lib").glob("python*/site-packages")) / "torch-only.pth").write_text(f"{torch_site}\n")
    github = FakeGitHub(root, project / "bin", root / "runner-temp", root / "artifacts")
    github.runner_temp.mkdir()
    github.bin.mkdir()
    (github.bin / "gh").write_text(FAKE_GH)
    (github.bin / "gh").chmod(0o755)
    github.set_state({"pulls": {}})

    work = init_repo(root / "work")
    copy_project(next(f for f in fixtures() if f.name == "cnn_flatten_size").folder, work)
    (work / "requirements.txt").write_text("torch\n")
    shas = {"main": commit_all(work)}
    git(work, "switch", "-q", "-c", "feature")
    (work / "train.py").write_text((work / "train.py").read_text().replace("nn.Dropout(0.25)", "nn.Dropout(0.3)"))
    shas["feature"] = commit_all(work, "more dropout")
    git(work, "switch", "-q", "-c", "broken", "main")
    (work / "train.py").write_text(BROKEN_TRAIN)
    shas["broken"] = commit_all(work, "broken")
    github.bare.parent.mkdir(parents=True)
    git(root, "clone", "-q", "--bare", str(work), str(github.bare))

    python = project / "bin" / "python"
    # the project's own install step (in the job too) first: what repairbot must leave as it is
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(work / "requirements.txt")], check=True,
                   capture_output=True)
    before = pip_list(python)
    jobs = {}
    for branch, sha in shas.items():
        pull = branch == "feature"
        event = ({"action": "synchronize", "number": 8, "pull_request": {"number": 8, "head": {"sha": sha}}}
                 if pull else {"ref": f"refs/heads/{branch}", "after": sha})
        runner = Runner(github, root / f"stage-a-{branch}", "pull_request" if pull else "push", event, sha,
                        "refs/pull/8/merge" if pull else f"refs/heads/{branch}", RUN_IDS[branch],
                        path=[github.bin], runner_temp=github.runner_temp)
        jobs[branch] = runner.run_job(TRAIN_WORKFLOW)
    return StageARuns(github, shas, jobs, python, before)


def workflow_run_event(runs: StageARuns, branch: str, fork: bool = False) -> dict[str, Any]:
    """The `workflow_run` event of the failed train-smoke run on ``branch``, as GitHub sends it
    (``pull_requests`` lists same-repository pull requests only)."""
    sha = runs.shas[branch]
    repo = {"id": 1, "full_name": "octo/proj"}
    head_repo = {"id": 2, "full_name": "forker/proj"} if fork else repo
    pulls = [{"number": 8, "head": {"ref": branch, "sha": sha, "repo": repo}, "base": {"ref": "main", "sha": runs.shas["main"], "repo": repo}}]
    return {"action": "completed", "repository": repo, "workflow_run": {
        "id": RUN_IDS[branch], "name": "train-smoke", "conclusion": "failure", "head_sha": sha,
        "head_branch": branch, "event": "pull_request" if branch == "feature" else "push",
        "head_repository": head_repo, "repository": repo, "pull_requests": pulls if branch == "feature" and not fork else [],
    }}


def run_publish(runs: StageARuns, tmp: Path, branch: str, *, fork: bool = False, variables: dict[str, str] | None = None,
                gh: bool = True, token: str = "ghs_defaulttoken", run_id: int | None = None) -> JobResult:
    """The publishing example on the failed run of ``branch``, in a fresh job folder (the
    `uses:` steps emulated as Runner._uses says)."""
    work = tmp / f"stage-b-{len(list(tmp.glob('stage-b-*')))}"
    event = workflow_run_event(runs, branch, fork)
    if run_id is not None:
        event["workflow_run"]["id"] = run_id
    runner = Runner(runs.github, work, "workflow_run", event, runs.shas["main"],
                    "refs/heads/main", 900, variables=variables, path=[runs.github.bin] if gh else [])
    runner.github_context["token"] = token
    return runner.run_job(PUBLISH_WORKFLOW)


@pytest.fixture()
def runs(stage_a_runs: StageARuns, tmp_path: Path) -> StageARuns:
    """The Stage A runs, with a fresh "GitHub" for this test: a copy of the bare repository, a
    new gh log and state (the uploaded artifacts and repairbot's environment are shared)."""
    old = stage_a_runs.github
    github = FakeGitHub(tmp_path / "github", old.project_bin, old.runner_temp, old.artifacts)
    shutil.copytree(old.bare, github.bare)
    shutil.copytree(old.bin, github.bin)
    github.set_state({"pulls": {}, "fail": [], "fail_message": {}})
    return StageARuns(github, stage_a_runs.shas, stage_a_runs.jobs, stage_a_runs.project_python, stage_a_runs.pip_before)


def _errors(job: JobResult) -> list[str]:
    return re.findall(r"^::error.*$", job.log, re.MULTILINE)


@pytest.mark.torch
def test_stage_a_example_uploads_the_fix_and_leaves_the_project_python_alone(stage_a_runs: StageARuns) -> None:
    """The train-smoke example as written: the training step fails, the repairbot step runs
    repairbot from its own venv under RUNNER_TEMP with --python pointing at the project's
    interpreter, which has exactly the packages it had before."""
    runs = stage_a_runs
    job = runs.jobs["main"]
    assert job.failed and job.steps["train"].outcome == "failure", job.log
    assert job.steps["repairbot"].outcome == "success", job.log
    outputs = job.steps["repairbot"].outputs
    artifact = runs.github.artifacts / "101" / "repairbot"
    assert outputs["status"] == "fixed" and outputs["patterns"] == "linear-in-features", job.log
    assert sorted(p.name for p in artifact.iterdir()) == ["fix.patch", "report.json", "report.md", "report.sarif"]
    report = json.loads((artifact / "report.json").read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(json.loads((artifact / "report.sarif").read_text()))
    assert "+        self.fc1 = nn.Linear(64 * 8 * 8, 128)" in (artifact / "fix.patch").read_text()
    assert report["environment"]["python"].startswith("3.")
    # the job summary is the report, with where the patch is
    assert (artifact / "report.md").read_text() in job.summary and "`repairbot` artifact" in job.summary
    assert re.search(r"^::notice file=train\.py,line=39,title=repairbot%3A linear-in-features::", job.log, re.MULTILINE)
    # repairbot ran from its own environment; the project's has no repairbot and is unchanged
    tool = runs.github.runner_temp / "repairbot-venv" / "bin" / "python"
    assert f"repairbot's own environment: {tool.parent.parent}" in job.log
    assert pip_list(runs.project_python) == runs.pip_before
    probe = subprocess.run([str(runs.project_python), "-c", "import repairbot"], capture_output=True, check=False,
                           cwd=runs.github.root)
    assert probe.returncode != 0 and b"No module named 'repairbot'" in probe.stderr
    assert subprocess.run([str(tool), "-c", "import repairbot, libcst"], check=False, cwd=runs.github.root).returncode == 0
    assert "torch" not in pip_list(tool)


@pytest.mark.torch
def test_examples_propose_the_fix_as_one_pull_request(runs: StageARuns, tmp_path: Path) -> None:
    """Stage A's artifact -> the publishing example -> a pushed branch and one `gh pr create`
    whose body is the Markdown report; a rerun finds both and opens nothing new."""
    job = run_publish(runs, tmp_path, "main")
    assert not job.failed, job.log
    sha = runs.shas["main"]
    (branch,) = [b for b in runs.github.branches() if b.startswith(BRANCH_PREFIX)]
    assert branch.startswith(f"{BRANCH_PREFIX}{sha[:12]}-")
    assert git(runs.github.bare, "rev-parse", f"{branch}^").strip() == sha
    diff = git(runs.github.bare, "diff", sha, branch)
    assert "-        self.fc1 = nn.Linear(64 * 7 * 7, 128)\n+        self.fc1 = nn.Linear(64 * 8 * 8, 128)" in diff
    creates = [c for c in runs.github.gh_calls() if c["args"][:2] == ["pr", "create"]]
    assert len(creates) == 1 and creates[0]["token"] == "ghs_defaulttoken"
    assert {"--repo=octo/proj", "--base=main", f"--head={branch}"} <= set(creates[0]["args"])
    report_md = (runs.github.artifacts / "101" / "repairbot" / "report.md").read_text()
    assert report_md in creates[0]["body"] and "actions/runs/101" in creates[0]["body"]
    assert "pull request opened" in job.summary and "https://github.com/octo/proj/pull/7" in job.summary
    assert job.steps["prepare"].outputs["branch"] == branch

    again = run_publish(runs, tmp_path, "main")
    assert not again.failed, again.log
    assert runs.github.branches().count(branch) == 1 and len([b for b in runs.github.branches() if b.startswith("repairbot/")]) == 1
    assert len([c for c in runs.github.gh_calls() if c["args"][:2] == ["pr", "create"]]) == 1
    assert "was pushed before (the same commit)" in again.log and "https://github.com/octo/proj/pull/7 exists already" in again.log
    assert "proposed before" in again.summary


@pytest.mark.torch
def test_a_rerun_after_a_failed_gh_call_opens_the_pull_request(runs: StageARuns, tmp_path: Path) -> None:
    state = runs.github.state()
    state["fail"] = ["pr create"]
    state["fail_message"] = {"pr create": "pull request create failed: GraphQL: GitHub Actions is not permitted "
                                          "to create or approve pull requests (createPullRequest)"}
    runs.github.set_state(state)
    first = run_publish(runs, tmp_path, "main")
    assert first.failed, "a pull request that was not opened must not end green"
    (error,) = _errors(first)
    assert "not permitted to create" in error and "Allow GitHub Actions to create and approve pull requests" in error
    assert "Traceback" not in first.log
    second = run_publish(runs, tmp_path, "main")
    assert not second.failed, second.log
    assert "was pushed before" in second.log and "pull request opened" in second.summary
    assert len(runs.github.state()["pulls"]) == 1


@pytest.mark.torch
@pytest.mark.parametrize("missing", ["gh", "token"])
def test_a_missing_gh_or_token_is_one_error_line(runs: StageARuns, tmp_path: Path, missing: str) -> None:
    if missing == "gh":
        assert shutil.which("gh", path=os.environ["PATH"]) is None, "a real gh on PATH: this test needs it absent"
    job = run_publish(runs, tmp_path, "main", gh=missing != "gh", token="" if missing == "token" else "ghs_defaulttoken")
    assert job.failed
    (error,) = _errors(job)
    assert ("`gh` is not on PATH" if missing == "gh" else "no token") in error
    assert "Traceback" not in job.log
    assert [b for b in runs.github.branches() if b.startswith("repairbot/")] == [], "nothing is pushed half"


@pytest.mark.torch
def test_nothing_to_fix_ends_green_with_the_reason(runs: StageARuns, tmp_path: Path) -> None:
    stage_a = runs.jobs["broken"]
    assert stage_a.steps["repairbot"].outcome == "success" and stage_a.steps["repairbot"].outputs["status"] == "gave-up"
    assert sorted(p.name for p in (runs.github.artifacts / "103" / "repairbot").iterdir()) == [
        "report.json", "report.md", "report.sarif"]
    # the script's runs did not see the runner's files
    report = json.loads((runs.github.artifacts / "103" / "repairbot" / "report.json").read_text())
    assert "'GITHUB_OUTPUT': None" in report["attempts"][0]["failure"]["message"]
    job = run_publish(runs, tmp_path, "broken")
    assert not job.failed, job.log
    assert "nothing to propose: the repair ended gave-up (" in job.summary and "KeyError" in job.summary
    assert runs.github.gh_calls() == [] and [b for b in runs.github.branches() if b.startswith("repairbot/")] == []


@pytest.mark.torch
def test_a_forks_run_gets_the_report_as_one_comment(runs: StageARuns, tmp_path: Path) -> None:
    skipped = run_publish(runs, tmp_path, "main", fork=True)
    assert skipped.ran == [] and runs.github.gh_calls() == []  # forks only where the repository allows them
    state = runs.github.state()
    state["pulls"]["12"] = {"number": 12, "url": "https://github.com/octo/proj/pull/12", "state": "OPEN",
                            "head": "forker:main", "head_sha": runs.shas["main"], "reviews": [], "comments": []}
    runs.github.set_state(state)
    for _ in range(2):
        job = run_publish(runs, tmp_path, "main", fork=True, variables={"REPAIRBOT_ALLOW_FORKS": "true"})
        assert not job.failed, job.log
        assert not (tmp_path / f"stage-b-{len(list(tmp_path.glob('stage-b-*'))) - 1}" / "workspace" / "target").exists()
    (comment,) = runs.github.state()["pulls"]["12"]["comments"]
    assert (runs.github.artifacts / "101" / "repairbot" / "report.md").read_text() in comment["body"]
    assert "has this report already" in job.log
    assert [b for b in runs.github.branches() if b.startswith("repairbot/")] == []
    assert not [c for c in runs.github.gh_calls() if c["args"][:2] == ["pr", "create"]]


@pytest.mark.torch
def test_suggest_mode_reviews_the_pull_request(runs: StageARuns, tmp_path: Path) -> None:
    """mode suggest on a same-repository pull request's failed run: one review whose comment is
    a suggestion block on the changed line; no branch, no second pull request; a rerun finds it."""
    state = runs.github.state()
    state["pulls"]["8"] = {"number": 8, "url": "https://github.com/octo/proj/pull/8", "state": "OPEN", "head": "feature",
                           "base": "main", "head_sha": runs.shas["feature"], "base_sha": runs.shas["main"],
                           "reviews": [], "comments": []}
    runs.github.set_state(state)
    stage_a = runs.jobs["feature"]
    assert stage_a.steps["repairbot"].outputs["status"] == "fixed", stage_a.log
    for _ in range(2):
        job = run_publish(runs, tmp_path, "feature", variables={"REPAIRBOT_MODE": "suggest"})
        assert not job.failed, job.log
    posts = [c for c in runs.github.gh_calls() if c["args"][:2] == ["api", "--method=POST"]]
    assert len(posts) == 1 and posts[0]["args"][2] == "repos/octo/proj/pulls/8/reviews"
    review = json.loads(posts[0]["body"])
    assert review["commit_id"] == runs.shas["feature"] and review["event"] == "COMMENT"
    assert (runs.github.artifacts / "102" / "repairbot" / "report.md").read_text() in review["body"]
    (comment,) = review["comments"]
    assert comment == {"path": "train.py", "side": "RIGHT", "line": 39, "body": comment["body"]}
    assert comment["body"].endswith("```suggestion\n        self.fc1 = nn.Linear(64 * 8 * 8, 128)\n```")
    assert "suggests this fix already" in job.log
    assert [b for b in runs.github.branches() if b.startswith("repairbot/")] == []
    assert not [c for c in runs.github.gh_calls() if c["args"][:2] == ["pr", "create"]]


@pytest.mark.torch
def test_suggest_mode_on_a_push_opens_a_pull_request(runs: StageARuns, tmp_path: Path) -> None:
    job = run_publish(runs, tmp_path, "main", variables={"REPAIRBOT_MODE": "suggest"})
    assert not job.failed, job.log
    assert "not a same-repository pull request's" in job.log
    assert len([c for c in runs.github.gh_calls() if c["args"][:2] == ["pr", "create"]]) == 1


@pytest.mark.torch
@pytest.mark.parametrize("case", ["line outside the diff", "pull request moved on"])
def test_suggest_mode_where_a_review_cannot_suggest(runs: StageARuns, tmp_path: Path, case: str) -> None:
    """A changed line outside the pull request's diff: a pull request instead; a pull request
    whose head moved on since the failed run: nothing posted (that newer run's repair applies)."""
    outside = case == "line outside the diff"
    state = runs.github.state()
    state["pulls"]["8"] = {"number": 8, "url": "https://github.com/octo/proj/pull/8", "state": "OPEN", "head": "feature",
                           "base": "main", "head_sha": runs.shas["feature"] if outside else runs.shas["broken"],
                           "base_sha": runs.shas["feature"], "reviews": [], "comments": []}
    runs.github.set_state(state)
    job = run_publish(runs, tmp_path, "feature", variables={"REPAIRBOT_MODE": "suggest"})
    assert not job.failed, job.log
    assert not [c for c in runs.github.gh_calls() if c["args"][:2] == ["api", "--method=POST"]]
    creates = [c for c in runs.github.gh_calls() if c["args"][:2] == ["pr", "create"]]
    if outside:
        assert "train.py:39 is outside the diff of pull request #8" in job.log and len(creates) == 1
        assert "--base=feature" in creates[0]["args"]
    else:
        assert creates == [] and "no review posted" in job.summary


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"REPAIRBOT_INSTALL": "false", "REPAIRBOT_TOOL_PYTHON": PYTHON}, "python"),
        ({"REPAIRBOT_INSTALL": "false", "REPAIRBOT_TOOL_PYTHON": sys._base_executable}, "has no repairbot"),
        ({"REPAIRBOT_TOOL_PYTHON": "/no/such/python3"}, "no Python 3.11+ for repairbot itself"),
    ],
)
def test_stage_a_setup_picks_repairbots_own_interpreter(tmp_path: Path, env: dict[str, str], expected: str) -> None:
    """action.yml's first step: `install: false` uses an interpreter that has repairbot; no
    3.11+ is one error line."""
    output = tmp_path / "output"
    output.write_text("")
    result = subprocess.run(["bash", str(ROOT / "repairbot" / "action" / "setup.sh")], cwd=tmp_path,
                            env={**os.environ, "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp_path), **env},
                            capture_output=True, text=True, check=False)
    if expected == "python":
        assert result.returncode == 0, result.stdout + result.stderr
        assert read_outputs(output) == {"python": shutil.which(PYTHON)}
    else:
        assert result.returncode == 2 and re.fullmatch(rf"::error title=repairbot::.*{re.escape(expected)}.*\n",
                                                       result.stdout), result.stdout + result.stderr
        assert output.read_text() == ""


@pytest.mark.torch
def test_a_failed_run_without_the_artifact_ends_green_with_the_reason(runs: StageARuns, tmp_path: Path) -> None:
    job = run_publish(runs, tmp_path, "main", run_id=555)  # a failure before Stage A, or another artifact name
    assert not job.failed, job.log
    assert job.steps["download"].outcome == "failure"
    assert "## repairbot: nothing to propose" in job.summary and "has no repairbot artifact" in job.summary
    assert runs.github.gh_calls() == [] and [b for b in runs.github.branches() if b.startswith("repairbot/")] == []


def test_workflow_command_escapes() -> None:
    """The one escaping of workflow commands (repairbot/action/github.py; the lint's github
    format uses it too): %, CR, LF in data; also : and , in a property."""
    import io

    from repairbot.action.github import annotation, escape_data, escape_property

    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext%3A a%2Cb"
    out = io.StringIO()
    annotation("error", "line 1\nline 2: 5%", file="a,b:c.py", line=3, title="t:1", stream=out)
    assert out.getvalue() == "::error file=a%2Cb%3Ac.py,line=3,title=t%3A1::line 1%0Aline 2: 5%25\n"
