"""The GitHub Action: ``action.yml`` and every workflow validated (GitHub's schemas, zizmor, the
two-stage security rules), Stage A run for real on a fixture with the runner's files pointing
at temporary files, and Stage B's checks, commit, push (to a local bare repository standing in
for GitHub) and pull request (a stub ``gh``) on its artifact.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from repairbot.action import stage_a
from repairbot.action.stage_b import BRANCH_PREFIX, PR_BODY_LIMIT, pr_body
from repairbot.cli import main
from repairbot.output.diff import unified_diff
from repairbot.output.report import report_schema
from tests.support import PYTHON, ROOT, commit_all, copy_project, fixtures, git, init_repo, snapshot

ACTION = ROOT / "action.yml"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
EXAMPLES = sorted((ROOT / ".github" / "examples").glob("*.yml"))
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


def test_action_and_workflows_match_githubs_schemas() -> None:
    for schema, files in (("vendor.github-actions", [ACTION]), ("vendor.github-workflows", WORKFLOWS + EXAMPLES)):
        result = subprocess.run(
            [tool("check-jsonschema"), "--builtin-schema", schema, *map(str, files)],
            capture_output=True, text=True, check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    assert len(EXAMPLES) == 2 and WORKFLOWS


def _zizmor(*extra: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [tool("zizmor"), "--offline", "--format", "json", *extra, str(ACTION), *map(str, WORKFLOWS + EXAMPLES)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    findings: list[dict[str, Any]] = json.loads(result.stdout)
    return findings


def test_zizmor_finds_nothing_but_the_one_documented_suppression() -> None:
    assert _zizmor() == []
    # Without inline suppressions, the only finding is Stage B's workflow_run trigger.
    findings = [(f["ident"], f["locations"][0]["symbolic"]["key"]["Local"]["verbatim_path"]) for f in _zizmor("--no-ignores")]
    assert findings == [("dangerous-triggers", str(ROOT / ".github" / "examples" / "repairbot-publish.yml"))]
    text = (ROOT / ".github" / "examples" / "repairbot-publish.yml").read_text()
    suppressions = re.findall(r"# zizmor: ignore\[([^\]]+)\](.*)", text)
    assert len(suppressions) == 1 and suppressions[0][0] == "dangerous-triggers" and len(suppressions[0][1].strip()) > 20


@pytest.mark.parametrize("path", [ACTION, *WORKFLOWS, *EXAMPLES], ids=lambda p: p.name)
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
            assert step["name"].startswith(("Push the branch", "Comment the report")), step["name"]
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
    assert {"command", "python", "max-attempts", "timeout", "batch-size"} <= set(action["inputs"])
    assert {"status", "patterns", "patch-path"} <= set(action["outputs"])
    analyse = next(s for s in action["runs"]["steps"] if s.get("id") == "analyse")
    for name in ("command", "max-attempts", "timeout", "batch-size"):
        assert analyse["env"][f"INPUT_{name.upper().replace('-', '_')}"] == f"${{{{ inputs.{name} }}}}"


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
        "GITHUB_TOKEN": "must-not-leak", "INPUT_COMMAND": command,
        **{f"INPUT_{k.upper()}": v for k, v in inputs.items()},
    }
    # as action.yml runs it: by path, under the job's interpreter, in the working directory
    result = subprocess.run([PYTHON, str(STAGE_A), "analyse"], cwd=repo, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    return StageA(repo, runner_temp, read_outputs(tmp / "output"), (tmp / "summary.md").read_text(),
                  result.stdout + result.stderr, result.returncode)


@pytest.fixture(scope="module")
def stage_a_run(tmp_path_factory: pytest.TempPathFactory) -> StageA:
    """Stage A on the cnn_flatten_size fixture, once for the module."""
    tmp = tmp_path_factory.mktemp("stage-a")
    fixture = next(f for f in fixtures() if f.name == "cnn_flatten_size")
    repo = init_repo(tmp / "repo")
    copy_project(fixture.folder, repo)
    commit_all(repo)
    before = snapshot(repo)
    run = run_stage_a(repo, tmp, "python train.py", **{"max_attempts": "2", "timeout": "300", "batch_size": "2"})
    assert snapshot(repo) == before, "Stage A changed the checkout"
    return run


@pytest.mark.torch
def test_stage_a_writes_the_artifact_summary_and_outputs(stage_a_run: StageA) -> None:
    run = stage_a_run
    assert run.returncode == 0, run.stdout
    out = run.runner_temp / "repairbot"
    assert sorted(p.name for p in out.iterdir()) == ["fix.patch", "report.json", "report.md", "report.sarif"]
    assert run.outputs == {
        "status": "fixed", "stop-reason": "passing", "patterns": "linear-in-features",
        "patch-path": str(out / "fix.patch"), "report-dir": str(out),
    }
    report = json.loads((out / "report.json").read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(json.loads((out / "report.sarif").read_text()))
    assert (out / "fix.patch").read_text() == report["diff"] and "+        self.fc1 = nn.Linear(64 * 8 * 8, 128)" in report["diff"]
    # the summary is the Markdown report, and where the patch is
    assert run.summary.startswith((out / "report.md").read_text()) and "git apply fix.patch" in run.summary
    # the log: the run's output grouped and unable to issue workflow commands, then annotations
    token = re.search(r"^::stop-commands::([0-9a-f]{32})$", run.stdout, re.MULTILINE)
    assert token and f"::{token[1]}::" in run.stdout and "::group::repairbot fix train.py" in run.stdout
    assert re.search(r"^::notice file=train\.py,line=39,title=repairbot%3A linear-in-features::Changed nn\.Linear",
                     run.stdout, re.MULTILINE)
    # the patch applies to the checkout
    git(run.repo, "apply", "--check", str(out / "fix.patch"))


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
    ("command", "script", "args"),
    [
        ("train.py", "train.py", ()),
        ("python3 -u src/train.py --epochs 1 --name 'a b'", "src/train.py", ("--epochs", "1", "--name", "a b")),
        ("/usr/bin/python3.11 train.py -- --x", "train.py", ("--", "--x")),
    ],
)
def test_stage_a_reads_the_command(monkeypatch: pytest.MonkeyPatch, command: str, script: str, args: tuple[str, ...]) -> None:
    monkeypatch.setenv("INPUT_COMMAND", command)
    inputs = stage_a.read_inputs()
    assert (inputs.script, inputs.args) == (script, args)
    assert (inputs.max_attempts, inputs.timeout, inputs.batch_size) == (3, 300.0, 2)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"INPUT_COMMAND": ""}, "command is required"),
        ({"INPUT_COMMAND": "python -m pkg.train"}, "does not name a script"),
        ({"INPUT_COMMAND": "train.py 'unclosed"}, "No closing quotation"),
        ({"INPUT_COMMAND": "train.py", "INPUT_MAX_ATTEMPTS": "three"}, "max-attempts"),
        ({"INPUT_COMMAND": "train.py", "INPUT_TIMEOUT": "-5"}, "must be positive"),
    ],
)
def test_stage_a_refuses_bad_inputs(tmp_path: Path, env: dict[str, str], message: str) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("print('hi')\n")
    run = run_stage_a(repo, tmp_path, env.pop("INPUT_COMMAND"), **{k.removeprefix("INPUT_").lower(): v for k, v in env.items()})
    assert run.returncode == 2
    assert run.outputs["status"] == "error" and run.outputs["patch-path"] == ""
    assert re.search(rf"^::error title=repairbot::.*{re.escape(message)}", run.stdout, re.MULTILINE), run.stdout


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
elif args[:2] == ["pr", "list"]:
    print(json.dumps([{"number": 12, "headRefOid": os.environ["GH_SHA"]}]))
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


@pytest.mark.torch
def test_stage_b_proposes_stage_as_fix(stage_a_run: StageA, tmp_path: Path) -> None:
    """The two stages end to end: Stage A's real artifact, pushed as a branch and a pull request."""
    files = {p.relative_to(stage_a_run.repo).as_posix(): p.read_text()
             for p in stage_a_run.repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    remote = make_remote(tmp_path, files, stage_a_run.runner_temp / "repairbot")
    prepared = remote.stage_b("prepare")
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    branch = f"{BRANCH_PREFIX}{remote.sha[:12]}"
    outputs = read_outputs(tmp_path / "output")
    assert outputs == {"branch": branch, "title": "repairbot: fix linear-in-features in train.py"}
    message = git(remote.checkout, "log", "-1", "--format=%B")
    assert "Repairbot-Pattern: linear-in-features" in message and "actions/runs/4242" in message
    assert git(remote.checkout, "log", "-1", "--format=%an <%ae>").startswith("github-actions[bot]")

    published = remote.stage_b("publish")
    assert published.returncode == 0, published.stdout + published.stderr
    pushed = git(remote.bare, "rev-parse", branch).strip()
    assert git(remote.bare, "rev-parse", f"{branch}^").strip() == remote.sha
    diff = git(remote.bare, "diff", remote.sha, pushed)
    patch = (remote.artifact / "fix.patch").read_text()
    assert "-        self.fc1 = nn.Linear(64 * 7 * 7, 128)\n+        self.fc1 = nn.Linear(64 * 8 * 8, 128)" in diff
    assert git(remote.bare, "diff", "--name-only", remote.sha, pushed).split() == ["train.py"] and patch
    (call,) = remote.gh_calls()
    assert call["args"][:2] == ["pr", "create"] and call["token"] == "t0ken"
    assert {"--repo=octo/proj", "--base=main", f"--head={branch}",
            "--title=repairbot: fix linear-in-features in train.py"} <= set(call["args"])
    assert (remote.artifact / "report.md").read_text() in call["body"] and "actions/runs/4242" in call["body"]
    assert read_outputs(tmp_path / "output")["pull-request"] == "https://github.com/octo/proj/pull/7"
    # the token went to git through the environment only: nothing of it in the checkout's config
    assert "t0ken" not in (remote.checkout / ".git" / "config").read_text()

    # again: the branch exists, nothing more is pushed or opened
    again = remote.stage_b("publish")
    assert again.returncode == 0 and "exists already" in again.stdout
    assert len(remote.gh_calls()) == 1


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
    "status not fixed": (lambda r: write_artifact(r.artifact, GOOD, status="gave-up"), "not 'fixed'"),
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
    listed, commented = remote.gh_calls()
    assert listed["args"][:2] == ["pr", "list"] and f"--search={remote.sha}" in listed["args"]
    assert commented["args"][:3] == ["pr", "comment", "12"] and "## repairbot: `train.py` fixed" in commented["body"]
    assert git(remote.bare, "branch", "--list", "repairbot/*") == ""


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
