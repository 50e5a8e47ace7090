"""`repairbot lint`: the command's contract (formats, exit codes, --fix/--diff), file discovery,
the parallel engine and the pre-commit hooks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner, Result

from repairbot import api
from repairbot.cli import main
from repairbot.lint import LintOptions
from repairbot.lint.engine import FixLevel, lint_bytes, package_of
from repairbot.lint.files import compile_pattern, discover
from repairbot.lint.formats import FINDINGS_SCHEMA
from repairbot.lint.run import PARALLEL_MIN_FILES, lint_files
from repairbot.lint.selection import Layer, resolve
from repairbot.registry import all_rules
from tests.support import ROOT, run_cli, run_cli_in_process

SARIF_SCHEMA = json.loads((ROOT / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json").read_text())

TRAIN = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
for x, y in loader:
    loss = F.cross_entropy(F.softmax(model(x), dim=1), y)
    loss.backward()
    optimizer.step()
state = torch.load("best.pt")
"""

TRAIN_FIXED = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
for x, y in loader:
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
state = torch.load("best.pt", map_location=device)
"""

UNSAFE_ONLY = """\
import torch
nll = torch.log(1 + p)
"""

CLEAN = """\
import torch
model = torch.nn.Linear(2, 2)
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["lint", *args], catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


# ---------------------------------------------------------------------------------------------
# The command: formats and exit codes
# ---------------------------------------------------------------------------------------------


def test_text_format_and_exit_1(project: Path) -> None:
    result = invoke("train.py", "clean.py")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [line.split(" ", 2)[:2] for line in lines[:3]] == [
        ["train.py:6:1:", "missing-zero-grad"],
        ["train.py:7:28:", "softmax-before-cross-entropy"],
        ["train.py:10:9:", "load-without-map-location"],
    ]
    assert lines[-1] == "Found 3 findings in 1 file (3 fixable with --fix)."


def test_clean_files_exit_0(project: Path) -> None:
    result = invoke("clean.py")
    assert result.exit_code == 0
    assert result.output == "All checks passed (1 file).\n"
    assert invoke("clean.py", "-q").output == ""


def test_json_is_the_contract_shape(project: Path) -> None:
    result = invoke(".", "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert result.stderr == "Found 3 findings in 1 file (3 fixable with --fix).\n"
    jsonschema.validate(data, FINDINGS_SCHEMA)
    assert data[0] == {
        "path": "train.py", "line": 6, "column": 1, "rule": "missing-zero-grad",
        "message": data[0]["message"], "fix": "safe",
    }
    assert [f["rule"] for f in data] == ["missing-zero-grad", "softmax-before-cross-entropy", "load-without-map-location"]


def test_json_of_a_clean_run_is_an_empty_list(project: Path) -> None:
    result = run_cli_in_process("lint", "clean.py", "--format", "json", cwd=project)
    assert result.returncode == 0 and json.loads(result.stdout) == []


def test_sarif_is_valid_and_carries_the_fixes(project: Path) -> None:
    result = run_cli_in_process("lint", ".", "--format", "sarif", cwd=project)
    assert result.returncode == 1, result.stderr
    log = json.loads(result.stdout)
    jsonschema.validate(log, SARIF_SCHEMA)
    run = log["runs"][0]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert {r.ID for r in all_rules()} <= set(rules) and "parse-error" in rules
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["missing-zero-grad", "softmax-before-cross-entropy", "load-without-map-location"]
    for item in results:
        assert rules[item["ruleIndex"]] == item["ruleId"]
        assert item["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    softmax = results[1]
    replacement = softmax["fixes"][0]["artifactChanges"][0]["replacements"][0]
    # the fix alone, as the narrowest replacement: "F.softmax(model(x), dim=1)" -> "model(x)"
    line = TRAIN.splitlines()[6]
    region = replacement["deletedRegion"]
    assert region["startLine"] == region["endLine"] == 7
    replaced = line[region["startColumn"] - 1:region["endColumn"] - 1]
    assert line.replace(replaced, replacement.get("insertedContent", {}).get("text", ""), 1) == "    loss = F.cross_entropy(model(x), y)"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"


def test_github_annotations(project: Path) -> None:
    result = run_cli_in_process("lint", "train.py", "--format", "github", cwd=project)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("::warning file=train.py,line=6,col=1,endLine=9,endColumn=21,title=repairbot missing-zero-grad::missing-zero-grad: ")
    assert "%0A" not in lines[0] and "Found 3 findings" in result.stderr


def test_github_escapes_its_properties() -> None:
    from repairbot.lint.engine import Finding
    from repairbot.lint.formats import render_github
    from repairbot.lint.run import LintReport

    finding = Finding("a,b:c%.py", 1, 1, 1, 2, "forward-call", "two\nlines 100%", "none")
    report = LintReport((), (finding,), 1, 1, 1, 0, (), "", False, (), (), 0.0, 1)
    assert render_github(report) == (
        "::warning file=a%2Cb%3Ac%25.py,line=1,col=1,endLine=1,endColumn=2,title=repairbot forward-call"
        "::forward-call: two%0Alines 100%25\n"
    )


# ---------------------------------------------------------------------------------------------
# --fix, --unsafe-fixes, --diff
# ---------------------------------------------------------------------------------------------


def test_fix_applies_safe_fixes_and_is_idempotent(project: Path) -> None:
    (project / "num.py").write_text(UNSAFE_ONLY)
    result = invoke("train.py", "num.py", "--fix")
    assert (project / "train.py").read_text() == TRAIN_FIXED
    assert (project / "num.py").read_text() == UNSAFE_ONLY  # unsafe: not without --unsafe-fixes
    assert result.exit_code == 1  # the unsafe one is left
    assert result.stdout.splitlines()[0].startswith("num.py:2:7: log-one-plus ")
    assert "Fixed 3 findings in 1 file; 1 finding left." in result.output
    assert "1 more with --unsafe-fixes" in result.output
    again = invoke("train.py", "--fix")
    assert again.exit_code == 0 and (project / "train.py").read_text() == TRAIN_FIXED


def test_unsafe_fixes(project: Path) -> None:
    (project / "num.py").write_text(UNSAFE_ONLY)
    result = invoke("num.py", "--fix", "--unsafe-fixes")
    assert result.exit_code == 0
    assert (project / "num.py").read_text() == "import torch\nnll = torch.log1p(p)\n"


def test_diff_writes_nothing(project: Path) -> None:
    before = (project / "train.py").read_bytes()
    result = run_cli_in_process("lint", "train.py", "--diff", cwd=project)
    assert result.returncode == 1
    assert result.stdout.startswith("--- a/train.py\n+++ b/train.py\n")
    assert "+    optimizer.zero_grad()\n" in result.stdout and "-state = torch.load(\"best.pt\")\n" in result.stdout
    assert "Would fix 3 findings in 1 file; 0 findings would remain." in result.stderr
    assert (project / "train.py").read_bytes() == before
    assert run_cli_in_process("lint", "clean.py", "--diff", cwd=project).returncode == 0


def test_fixes_that_overlap_are_applied_over_passes(tmp_path: Path) -> None:
    # the zero_grad fix rewrites the loop body that holds the softmax fix: two passes
    source = "import torch\nimport torch.nn.functional as F\nfor x, y in data:\n    F.cross_entropy(F.softmax(m(x), 1), y).backward()\n    opt.step()\n"
    result = lint_bytes(source.encode(), tmp_path / "t.py", "t.py", all_rules(), FixLevel.SAFE)
    assert result.fixed == 2 and result.findings == ()
    assert result.new_data == (
        b"import torch\nimport torch.nn.functional as F\nfor x, y in data:\n    opt.zero_grad()\n"
        b"    F.cross_entropy(m(x), y).backward()\n    opt.step()\n"
    )


def test_fix_keeps_crlf_and_refuses_mixed_line_endings(tmp_path: Path) -> None:
    source = "import torch\r\nx = torch.ger(a, b)  # outer\r\n"
    result = lint_bytes(source.encode(), tmp_path / "t.py", "t.py", all_rules(), FixLevel.SAFE)
    assert result.new_data == b"import torch\r\nx = torch.outer(a, b)  # outer\r\n"
    mixed = "import torch\r\nx = torch.ger(a, b)\n"
    refused = lint_bytes(mixed.encode(), tmp_path / "t.py", "t.py", all_rules(), FixLevel.SAFE)
    assert refused.new_data is None and refused.notes and [f.rule for f in refused.findings] == ["deprecated-torch-api"]


def test_suppression_comments(tmp_path: Path) -> None:
    source = (
        "import torch\n"
        "a = torch.ger(x, y)  # repairbot: ignore[deprecated-torch-api]\n"
        "b = torch.ger(x, y)  # repairbot: ignore\n"
        "c = torch.ger(x, y)  # repairbot: ignore[forward-call]\n"
    )
    result = lint_bytes(source.encode(), tmp_path / "t.py", "t.py", all_rules())
    assert [(f.line, f.rule) for f in result.findings] == [(4, "deprecated-torch-api")]


# ---------------------------------------------------------------------------------------------
# Bad input, unparsable files, files that cannot hold a finding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "missing.py: no such file or directory"),
        (["train.py", "--select", "no-such-rule"], "unknown lint rule id: no-such-rule"),
        (["train.py", "--diff", "--format", "json"], "--diff prints a diff"),
        (["train.py", "--jobs", "0"], "--jobs must be at least 1"),
    ],
)
def test_bad_input_exits_2(project: Path, args: list[str], message: str) -> None:
    result = run_cli_in_process("lint", *args, cwd=project)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("repairbot: error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


def test_no_path_is_a_usage_error(project: Path) -> None:
    assert run_cli_in_process("lint", cwd=project).returncode == 2


def test_a_file_that_does_not_parse_is_reported_and_the_run_goes_on(project: Path) -> None:
    (project / "broken.py").write_text("import torch\nmodel.cuda()\ndef f(:\n    pass\n")
    result = invoke(".", "--format", "json")
    data = json.loads(result.stdout)
    parse = [f for f in data if f["rule"] == "parse-error"]
    assert parse == [{"path": "broken.py", "line": 3, "column": 7, "rule": "parse-error", "message": parse[0]["message"], "fix": "none"}]
    assert {f["path"] for f in data} == {"broken.py", "train.py"}
    assert result.exit_code == 2  # a file could not be checked


def test_files_without_torch_are_not_parsed_and_pass(tmp_path: Path) -> None:
    # pre-commit with only torch-free files staged must pass (TorchFix's hook crashed there)
    (tmp_path / "util.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    result = run_cli_in_process("lint", "util.py", "other.py", "-v", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Checked 2 files (0 parsed, 3 lines)" in result.stdout


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("b.py", "import torch\nx = torch.randn(3\n", "syntax error: '(' was never closed (line 2, column 16)"),
        ("util.py", "def f(:\n", "syntax error: invalid syntax (line 1, column 7)"),  # no torch: still parsed
        ("nul.py", "import torch\x00\n", "source code string cannot contain null bytes"),
    ],
)
def test_every_file_that_cannot_be_parsed_is_reported_and_exits_2(
    tmp_path: Path, name: str, text: str, reason: str
) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "ok.py").write_text("x = 1\n")
    result = run_cli_in_process("lint", name, "ok.py", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].startswith(f"{name}: cannot parse: ") and reason in result.stdout
    assert "All checks passed" not in result.stdout and "1 file could not be checked" in result.stdout
    quiet = run_cli_in_process("lint", name, "ok.py", "-q", "--format", "json", cwd=tmp_path)
    assert quiet.returncode == 2 and json.loads(quiet.stdout)[0]["rule"] == "parse-error"


def test_a_file_that_cannot_be_read_is_reported_and_exits_2(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    locked = tmp_path / "locked.py"
    locked.write_text("import torch\n")
    locked.chmod(0)
    try:
        result = run_cli("lint", "locked.py", cwd=tmp_path)
    finally:
        locked.chmod(0o644)
    assert result.returncode == 2 and result.stdout.startswith("locked.py: cannot read: Permission denied")


def test_explicit_files_are_linted_whatever_their_name(tmp_path: Path) -> None:
    (tmp_path / "train").write_text(UNSAFE_ONLY)
    assert [d for _, d in discover([Path("train")], tmp_path)] == ["train"]


# ---------------------------------------------------------------------------------------------
# Discovery: .gitignore, default excludes, [tool.repairbot] exclude
# ---------------------------------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_discovery_honours_gitignore_and_default_excludes(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    _tree(tmp_path, {
        ".gitignore": "build/\n*.gen.py\n/top_only.py\n!keep.gen.py\n# comment\n",
        "a.py": "", "keep.gen.py": "", "drop.gen.py": "", "top_only.py": "", "sub/top_only.py": "",
        "build/x.py": "", "sub/build/y.py": "", ".venv/lib/z.py": "", "node_modules/m.py": "",
        "sub/.gitignore": "local.py\n", "sub/local.py": "", "other/local.py": "", "notes.txt": "",
        "deep/a/b/c.py": "", "data/**.py": "",
    })
    found = [display for _, display in discover([Path(".")], tmp_path)]
    assert found == ["a.py", "data/**.py", "deep/a/b/c.py", "keep.gen.py", "other/local.py", "sub/top_only.py"]


def test_gitignore_of_a_parent_folder_applies_below(tmp_path: Path) -> None:
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("secret.py\n")
    _tree(tmp_path, {".gitignore": "generated/\n", "pkg/generated/g.py": "", "pkg/m.py": "", "pkg/secret.py": ""})
    found = [display for _, display in discover([Path("pkg")], tmp_path)]
    assert found == ["pkg/m.py"]


def test_pyproject_exclude_applies_to_folders_and_named_files(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "pyproject.toml": '[tool.repairbot]\nexclude = ["fixtures", "patterns/*/cases", "legacy_*.py"]\n',
        "fixtures/a/train.py": "", "patterns/p/cases/c/train.py": "", "patterns/p/lint.py": "",
        "legacy_train.py": "", "train.py": "",
    })
    assert [d for _, d in discover([Path(".")], tmp_path)] == ["patterns/p/lint.py", "train.py"]
    # named files are linted, as ruff does; a hook passes --force-exclude: the list applies then
    named = [Path("fixtures/a/train.py"), Path("legacy_train.py"), Path("train.py")]
    assert [d for _, d in discover(named, tmp_path)] == ["fixtures/a/train.py", "legacy_train.py", "train.py"]
    assert [d for _, d in discover(named, tmp_path, force_exclude=True)] == ["train.py"]
    assert [d for _, d in discover([Path("fixtures")], tmp_path)] == ["fixtures/a/train.py"]
    assert discover([Path("fixtures")], tmp_path, force_exclude=True) == []


def test_named_gitignored_files_are_linted_unless_force_exclude(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    _tree(tmp_path, {
        ".gitignore": "build/\nscratch_*.py\n", "build/gen.py": "", "scratch_1.py": "", "train.py": "",
        ".venv/lib/site.py": "", "sub/.gitignore": "local.py\n", "sub/local.py": "",
    })
    named = [Path("build/gen.py"), Path("scratch_1.py"), Path("train.py"), Path(".venv/lib/site.py"), Path("sub/local.py")]
    assert [d for _, d in discover(named, tmp_path)] == [".venv/lib/site.py", "build/gen.py", "scratch_1.py", "sub/local.py", "train.py"]
    assert [d for _, d in discover(named, tmp_path, force_exclude=True)] == ["train.py"]
    # the same through the command line, as the pre-commit hook runs it
    (tmp_path / "scratch_1.py").write_text(UNSAFE_ONLY)
    assert run_cli_in_process("lint", "scratch_1.py", cwd=tmp_path).returncode == 1
    forced = run_cli_in_process("lint", "--force-exclude", "scratch_1.py", cwd=tmp_path)
    assert forced.returncode == 0 and "All checks passed (0 files)" in forced.stdout


def test_a_bad_exclude_list_is_bad_input(tmp_path: Path) -> None:
    _tree(tmp_path, {"pyproject.toml": "[tool.repairbot]\nexclude = \"fixtures\"\n", "train.py": ""})
    result = run_cli_in_process("lint", ".", cwd=tmp_path)
    assert result.returncode == 2 and "exclude must be a list of strings" in result.stderr


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "matches"),
    [
        ("*.py", "a/b.py", False, True),
        ("/b.py", "a/b.py", False, False),
        ("a/*.py", "a/b.py", False, True),
        ("a/*.py", "x/a/b.py", False, False),
        ("**/b.py", "x/y/b.py", False, True),
        ("a/**/b.py", "a/b.py", False, True),
        ("a/**/b.py", "a/x/y/b.py", False, True),
        ("a/**", "a/x/y.py", False, True),
        ("build/", "build", False, False),
        ("build/", "build", True, True),
        ("b?.py", "bx.py", False, True),
        ("b[0-9].py", "b7.py", False, True),
        ("b[!0-9].py", "b7.py", False, False),
        ("\\#x.py", "#x.py", False, True),
    ],
)
def test_gitignore_patterns(pattern: str, path: str, is_dir: bool, matches: bool) -> None:
    compiled = compile_pattern(pattern)
    assert compiled is not None
    found = (not compiled.dir_only or is_dir) and compiled.regex.match(path) is not None
    assert found is matches


def test_package_of(tmp_path: Path) -> None:
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/m.py": "", "script.py": ""})
    assert package_of(tmp_path / "pkg" / "sub") == "pkg"
    assert package_of(tmp_path) is None


# ---------------------------------------------------------------------------------------------
# The parallel engine
# ---------------------------------------------------------------------------------------------


def test_parallel_and_serial_runs_agree(tmp_path: Path) -> None:
    sources = [TRAIN, UNSAFE_ONLY, CLEAN, "import torch\ndef f(:\n", "x = 1\n"]
    for index in range(PARALLEL_MIN_FILES * 2):
        (tmp_path / f"m{index:02d}.py").write_text(sources[index % len(sources)] * (1 + index % 3))
    items = discover([tmp_path], tmp_path)
    serial = lint_files(items, all_rules(), FixLevel.SAFE, False, jobs=1)
    parallel = lint_files(items, all_rules(), FixLevel.SAFE, False, jobs=2)
    assert parallel == serial
    assert [r.path for r in parallel] == [d for _, d in items]


def test_api_lint_reports_counts(project: Path) -> None:
    report = api.lint(LintOptions(paths=(Path("."),), cwd=project, jobs=1))
    assert report.files == 2 and report.parsed == 1 and report.exit_code == 1  # clean.py: no rule could fire
    assert report.fixable == 3 and report.unsafe_fixable == 0
    assert {r.ID for r in report.rules} == {r.ID for r in all_rules()}
    selected = api.lint(LintOptions(paths=(Path("."),), cwd=project, select=("forward-call",)))
    assert selected.findings == () and selected.exit_code == 0


# ---------------------------------------------------------------------------------------------
# The pre-commit hooks
# ---------------------------------------------------------------------------------------------


def test_pre_commit_hooks_definition() -> None:
    hooks: list[dict[str, Any]] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["repairbot-lint", "repairbot-lint-fix"]
    for hook in hooks:
        assert {"id", "name", "entry", "language"} <= set(hook)
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"] and hook["require_serial"] is True
        assert hook["entry"].split()[:2] == ["repairbot", "lint"]


def test_the_hook_command_runs_on_the_files_it_is_given(project: Path) -> None:
    (project / "num.py").write_text(UNSAFE_ONLY)
    hook = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())[1]
    result = run_cli(*hook["entry"].split()[1:], "train.py", "num.py", "clean.py", cwd=project,
                     env={"NO_COLOR": "1", "PATH": os.environ.get("PATH", "")})
    assert result.returncode == 1  # the unsafe finding is left for the author
    assert (project / "train.py").read_text() == TRAIN_FIXED
    assert result.stdout.startswith("num.py:2:7: log-one-plus ")


# ---------------------------------------------------------------------------------------------
# [tool.repairbot] select / ignore / per-file-ignores (the server reads the same: test_server.py)
# ---------------------------------------------------------------------------------------------

CHOICE = """\
[tool.repairbot]
select = ["missing", "softmax-before-cross-entropy", "load"]
ignore = ["load-without-map-location"]

[tool.repairbot.per-file-ignores]
"scripts/*.py" = ["softmax"]
"""


def _found(result: Result) -> set[tuple[str, str]]:
    return {(f["path"], f["rule"]) for f in json.loads(result.stdout)}


def test_config_select_ignore_and_per_file_ignores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path, {"pyproject.toml": CHOICE, "train.py": TRAIN, "scripts/run.py": TRAIN})
    monkeypatch.chdir(tmp_path)
    everything = _found(invoke("train.py", "--format", "json", "--select", "ALL"))
    assert {rule for _, rule in everything} >= {"missing-zero-grad", "softmax-before-cross-entropy", "load-without-map-location"}
    # the table's choice: a prefix selects, the more specific ignore wins, the glob drops softmax in scripts/
    assert _found(invoke(".", "--format", "json")) == {
        ("scripts/run.py", "missing-zero-grad"), ("train.py", "missing-zero-grad"), ("train.py", "softmax-before-cross-entropy"),
    }
    # the command line's --select starts the choice over; per-file-ignores still apply
    assert _found(invoke(".", "--format", "json", "--select", "load-without-map-location", "--select", "softmax")) == {
        ("scripts/run.py", "load-without-map-location"), ("train.py", "load-without-map-location"),
        ("train.py", "softmax-before-cross-entropy"),
    }
    # --ignore alone narrows the table's choice
    assert _found(invoke(".", "--format", "json", "--ignore", "missing")) == {("train.py", "softmax-before-cross-entropy")}
    # --fix applies only the chosen rules' fixes
    assert invoke("train.py", "--fix", "--ignore", "softmax-before-cross-entropy").exit_code == 0
    fixed = (tmp_path / "train.py").read_text()
    assert "optimizer.zero_grad()" in fixed and "F.softmax" in fixed and 'torch.load("best.pt")' in fixed


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('[tool.repairbot]\nselect = ["no-such-rule"]\n', "select/ignore: no-such-rule"),
        ('[tool.repairbot]\nignore = ["missing-zer"]\n', "select/ignore: missing-zer"),  # a prefix only at a "-"
        ('[tool.repairbot.per-file-ignores]\n"*.py" = ["nope"]\n', '"*.py": nope'),
    ],
)
def test_an_unknown_rule_in_the_config_is_one_line_and_exit_2(tmp_path: Path, table: str, named: str) -> None:
    _tree(tmp_path, {"pyproject.toml": table, "train.py": TRAIN})
    result = run_cli("lint", "train.py", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"repairbot: error: {tmp_path / 'pyproject.toml'}: [tool.repairbot"
        f"{'.per-file-ignores]' if 'per-file' in table else ']'} {named} is not a lint rule id or prefix (see docs/lint-rules.md)"
    ]


def test_a_bad_per_file_ignores_table_is_bad_input(tmp_path: Path) -> None:
    _tree(tmp_path, {"pyproject.toml": '[tool.repairbot]\nper-file-ignores = ["x"]\n', "train.py": TRAIN})
    result = run_cli("lint", "train.py", cwd=tmp_path)
    assert result.returncode == 2 and "per-file-ignores must be a table" in result.stderr


@pytest.mark.parametrize(
    ("layers", "chosen"),
    [
        ([Layer(select=("missing",), ignore=("missing-zero-grad",))], {"missing-train-eval-mode"}),
        ([Layer(select=("missing-zero-grad",), ignore=("missing",))], {"missing-zero-grad"}),
        ([Layer(select=("missing",), ignore=("missing",))], set()),  # a tie: ignore wins
        ([Layer(select=("missing",)), Layer(ignore=("missing-train-eval-mode",))], {"missing-zero-grad"}),
        ([Layer(select=("missing",)), Layer(select=("forward-call",))], {"forward-call"}),
    ],
)
def test_rule_selection_layers_and_specificity(layers: list[Layer], chosen: set[str]) -> None:
    assert {rule.ID for rule in resolve(all_rules(), layers)} == chosen
