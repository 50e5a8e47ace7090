"""The four report formats: JSON (against its shipped JSON Schema), SARIF 2.1.0 (against the
official schema, and its fixes applied back), Markdown (rendered, safe against injection) and
the text report; the diff reader they share; the progress line on stderr.

Real reports come from ``repairbot fix --dry-run`` on every fixture, each run once.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pickle
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt
from rich.console import Console

from repairbot import api, cli
from repairbot.edits import Edit, Rewrite, Site, SiteNodes
from repairbot.output.diff import PatchError, apply_patch, parse_patch, split_lines, unified_diff
from repairbot.output.markdown import code, escape, fenced, render_markdown
from repairbot.output.report import evidence_line, render_json, render_text, report_schema
from repairbot.output.sarif import render_sarif, replacements
from repairbot.registry import all_patterns
from repairbot.results import Attempt, Fix, RepairReport
from repairbot.types import (
    Applicability,
    Decline,
    Failure,
    ForwardStep,
    Frame,
    Outcome,
    RunLimits,
    Span,
    Status,
    StopReason,
)
from tests.support import (
    ROOT,
    commit_all,
    fixtures,
    init_repo,
    run_cli,
)

SARIF_SCHEMA = json.loads((ROOT / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json").read_text())
FIXTURES = fixtures()


@dataclass(frozen=True)
class _Rendered(Rewrite):
    """The rewrite of a site that is only reported here, never applied."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        raise AssertionError("a rendered site is not applied")


def validate_report(report: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(report_schema()).validate(report)


def validate_sarif(log: dict[str, Any]) -> None:
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(log)


def html(markdown: str) -> str:
    """The Markdown as a CommonMark renderer with GFM tables and raw HTML turns it into HTML."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def apply_replacements(text: str, items: list[dict[str, Any]]) -> str:
    """SARIF replacements applied to a text, independently of repairbot's code: (line, column),
    1-based, columns in code points; every region refers to the text before any replacement."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1 if line <= len(starts) else len(text)

    spans = []
    for item in items:
        region = item["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        spans.append((start, end, item.get("insertedContent", {}).get("text", "")))
    for start, end, inserted in sorted(spans, reverse=True):
        assert 0 <= start <= end <= len(text)
        text = text[:start] + inserted + text[end:]
    return text


# --------------------------------------------------------------------------------------------
# Real reports: tests/test_e2e_fixtures.py writes all four for every fixture and checks them
# with these
# --------------------------------------------------------------------------------------------


def check_sarif(log: dict[str, Any], report: dict[str, Any], repo: Path) -> None:
    (run,) = log["runs"]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert set(rules) >= {p.ID for p in all_patterns()} | {"unclassified"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    # failures are errors; the health checks' findings follow them as warnings
    results = [r for r in run["results"] if r["level"] == "error"]
    warnings = [r for r in run["results"] if r["level"] == "warning"]
    assert len(results) == len(report["attempts"]) + ("remaining" in report)
    health = report.get("health", [])
    assert [w["ruleId"] for w in warnings] == [h["id"] for h in health if h.get("level") != "information"]
    notes = [r["ruleId"] for r in run["results"] if r["level"] == "note"]
    assert notes == [h["id"] for h in health if h.get("level") == "information"]
    for result, attempt in zip(results, report["attempts"], strict=False):
        expected_rule = (attempt.get("fix") or {}).get("pattern") or attempt["failure"]["pattern"] or "unclassified"
        assert result["ruleId"] == expected_rule and rules[result["ruleIndex"]] == expected_rule
        assert result["level"] == "error"
        assert attempt["failure"]["exc_type"] in result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        if "fix" in attempt:
            assert (location["artifactLocation"]["uri"], location["region"]["startLine"]) == (
                attempt["fix"]["file"], attempt["fix"]["line"])
        if attempt["failure"]["file"]:
            related = result["relatedLocations"][0]["physicalLocation"]
            assert (related["artifactLocation"]["uri"], related["region"]["startLine"]) == (
                attempt["failure"]["file"], attempt["failure"]["line"])
        assert ("fixes" in result) == ("fix" in attempt and result["properties"]["applied"])

    # The fixes, applied in order as SARIF replacements to the files on disk (the originals),
    # give exactly the files the report's diff describes.
    files: dict[str, str] = {}
    for result in results:
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                uri = change["artifactLocation"]["uri"]
                text = files.get(uri, (repo / uri).read_text())
                files[uri] = apply_replacements(text, change["replacements"])
    expected = {
        patch.path: "".join(apply_patch(split_lines((repo / patch.path).read_text()), patch))
        for patch in parse_patch(report["diff"])
    }
    assert files == expected


def check_markdown(markdown: str, report: dict[str, Any], repo: Path) -> None:
    assert markdown.startswith("## ") and f"`{report['script']}`" in markdown.splitlines()[0]
    assert f"**{report['status']}** (`{report['stop_reason']}`" in markdown
    rendered = html(markdown)
    # the files as each attempt's run saw them: the originals (--dry-run changed nothing on
    # disk) with the earlier fixes applied
    versions = {p.relative_to(repo).as_posix(): split_lines(p.read_text()) for p in repo.glob("**/*.py")}
    for attempt in report["attempts"]:
        failure = attempt["failure"]
        first = failure["message"].strip().splitlines()[0] if failure["message"].strip() else ""
        assert f"{failure['exc_type']}: {first}" in markdown  # fenced, as is
        if failure["file"]:
            source = versions[failure["file"]][failure["line"] - 1].rstrip("\r\n")
            # the failing line, marked, in a python block
            assert re.search(rf"^> +{failure['line']} \| {re.escape(source)}$", markdown, re.MULTILINE), markdown
        if "fix" in attempt:
            assert f"`{attempt['fix']['file']}:{attempt['fix']['line']}`" in markdown
            assert f"applicability: **{attempt['fix']['applicability']}**" in markdown
            (patch,) = parse_patch(attempt["fix"]["diff"])
            if attempt["outcome"] != "failed-same":
                with contextlib.suppress(PatchError):  # a fix that made things worse was discarded
                    versions[patch.path] = apply_patch(versions[patch.path], patch)
        if failure["evidence"].get("forward_pass"):
            assert "<th>layer</th>" in rendered and "<th>traced input</th>" in rendered
    if report["diff"]:
        assert f"```diff\n{report['diff']}```" in markdown
    if report["environment"]:
        assert f"| Python | `{report['environment']['python']}` |" in markdown
    assert "<script" not in rendered


# --------------------------------------------------------------------------------------------
# Bad input: every report is still written
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "no such file"),
        (["train.py", "--dry-run", "--no-branch"], "exclude each other"),
    ],
)
def test_bad_input_writes_every_report(tmp_path: Path, args: list[str], message: str) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("print('hi')\n")
    commit_all(repo)
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli(
        "fix", *args, "--json", str(out / "r.json"), "--markdown", str(out / "r.md"), "--sarif", str(out / "r.sarif"),
        cwd=repo,
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    report = json.loads((out / "r.json").read_text())
    validate_report(report)
    assert (report["status"], report["stop_reason"]) == ("error", "bad-input") and message in report["error"]
    log = json.loads((out / "r.sarif").read_text())
    validate_sarif(log)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    assert message in invocation["toolExecutionNotifications"][0]["message"]["text"]
    assert log["runs"][0]["results"] == []
    markdown = (out / "r.md").read_text()
    assert "could not run" in markdown.splitlines()[0] and message in markdown


def test_only_one_report_goes_to_stdout(tmp_path: Path) -> None:
    result = run_cli("fix", "train.py", "--json", "-", "--sarif", "-", cwd=tmp_path)
    assert result.returncode == 2 and "only one of" in result.stderr


# --------------------------------------------------------------------------------------------
# The JSON Schema is not vacuous
# --------------------------------------------------------------------------------------------


def _minimal_report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema": "repairbot.report/1", "script": "train.py", "status": "already-passing",
        "stop_reason": "passing", "attempts": [], "diff": "", "files_modified": [], "branch": None,
        "commit": None, "run_limits": {"batch_size": 2, "max_batches": 2, "max_steps": 20, "stopped_at": None},
        "health": [], "environment": {"python": "3.11.7", "torch": "2.13.0", "cuda_available": False},
        "duration_s": 1.0, "notes": [], "scratch": None,
    }
    report.update(changes)
    return report


def test_the_schema_is_valid_and_shipped() -> None:
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": "repairbot.report/1"}
    validate_report(_minimal_report())


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "fixed"},  # fixed needs attempts, a diff and files
        {"status": "gave-up", "stop_reason": "passing"},
        {"status": "error", "stop_reason": "bad-input"},  # no error message
        {"stop_reason": "finished"},
        {"commit": "abc"},
        {"extra": 1},
        {"run_limits": {"batch_size": 0, "max_batches": 2, "max_steps": 20, "stopped_at": None}},
        {"attempts": [{"n": 1, "failure": {}, "outcome": "passed", "duration_s": 0}]},
        {"branch": "repairbot/fix-x"},  # a branch only when fixed
    ],
)
def test_the_schema_rejects_what_repairbot_never_writes(changes: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate_report(_minimal_report(**changes))


# --------------------------------------------------------------------------------------------
# Reports built by hand: injection, evidence rendering, discarded and diagnosed attempts
# --------------------------------------------------------------------------------------------

HOSTILE = "```\n</details><script>alert(1)</script>\n# Owned\n[click](https://example.invalid) | `x` $x^2$"


def _report(tmp_path: Path) -> RepairReport:
    (tmp_path / "model.py").write_text("import torch\n\nx = 1\nfc = make(256, 10)\ny = fc(x)\nz = 3\n")
    before = (tmp_path / "model.py").read_bytes()
    after = before.replace(b"make(256, 10)", b"make(512, 10)")
    diff, changed = unified_diff(before, after, "model.py")
    frame = Frame(file=str(tmp_path / "model.py"), line=5, function="<module>", code="y = fc(x)", user=True,
                  col=4, end_line=5, end_col=9)
    failure = Failure("RuntimeError", HOSTILE, frames=(frame,))
    site = Site(
        pattern="linear-in-features", file=str(tmp_path / "model.py"), span=Span(4, 5, 4, 18),
        rewrite=_Rendered(),
        summary="Changed make(256, 10) to make(512, 10) <b>bold</b>", applicability=Applicability.SAFE,
        evidence={"x": 1}, evidence_text="traced `x` | 2x512 *star*", notes=("a note with <i>",),
    )
    evidence = {
        "forward_pass": [ForwardStep("Linear(256, 10)", "model.py:4", "2x512")],
        "input": {"kind": "tensor", "shape": [2, 512], "dtype": "torch.float32", "device": "cpu", "requires_grad": True},
        "model": {"kind": "module", "type": "Net", "devices": ["cpu", "cuda:0"], "site": "model.py:4"},
        "traced_input_shape": [2, 512],
        "names": [HOSTILE],
        "flag": True,
    }
    first = Attempt(1, failure, "model.py", 5, "linear-in-features", evidence,
                    Fix(site, "model.py", diff, changed), Outcome.PASSED, applied=True, duration_s=1.0)
    diagnosed = Attempt(
        2, Failure("KeyError", "'cat'", frames=(frame,)), "model.py", 5, "collate-size", {}, None, Outcome.NOT_RUN,
        declines=(
            Decline("collate-size", "the batch <has> sizes", diagnosis="pad the `samples`", file="model.py", line=3),
            Decline("other", "not mine | really"),
        ),
    )
    return RepairReport(
        script="model.py", status=Status.FIXED, stop_reason=StopReason.PASSING, attempts=(first, diagnosed),
        diff=diff, files_modified=("model.py",), run_limits=RunLimits(
            stopped_at="model.py:5", left_loops=({"loop": "model.py:7", "kind": "for", "step": "model.py:9", "steps": 20},),
        ),
        environment={"python": "3.11.7", "torch": "2.13.0", "cuda_available": False, "device_count": 0},
        duration_s=2.5, branch="repairbot/fix-model-12345678", commit="a" * 40, notes=(HOSTILE,),
    )


def test_markdown_cannot_be_injected(tmp_path: Path) -> None:
    markdown = render_markdown(_report(tmp_path), tmp_path)
    rendered = html(markdown)
    assert "<script" not in rendered and "<b>" not in rendered and "<i>" not in rendered
    assert "<h1" not in rendered  # "# Owned" never becomes a heading
    assert 'href="https://example.invalid"' not in rendered  # nor a link
    assert rendered.count("<details>") == rendered.count("</details>") == 1
    # the message survives whole, inside a fenced block
    assert "&lt;/details&gt;&lt;script&gt;alert(1)&lt;/script&gt;\n# Owned" in rendered


def test_markdown_renders_evidence_context_and_diagnosis(tmp_path: Path) -> None:
    markdown = render_markdown(_report(tmp_path), tmp_path)
    rendered = html(markdown)
    # the failing line with two lines around it, the traced expression underlined
    assert "> 5 | y = fc(x)\n    |     ^^^^^\n  6 | z = 3" in markdown
    assert "  3 | x = 1\n  4 | fc = make(256, 10)\n> 5 |" in markdown
    assert "<td><code>Linear(256, 10)</code></td>\n<td><code>model.py:4</code></td>\n<td><code>2x512</code></td>" in rendered
    assert "input: <code>tensor 2x512 float32 on cpu requires grad</code>" in rendered
    assert "model: <code>Net on cpu, cuda:0 (built at model.py:4)</code>" in rendered
    assert "traced input shape: <code>2x512</code>" in rendered and "flag: yes" in rendered
    assert "<strong>Diagnosis</strong> (<code>collate-size</code> at <code>model.py:3</code>)" in rendered
    assert "<strong>Remedy:</strong> pad the <code>samples</code>" in rendered  # a code span, not escaped backticks
    assert "<code>other</code> declined: not mine | really" in rendered
    assert "<td>Branch</td>" in rendered and "<code>repairbot/fix-model-12345678</code>" in rendered
    assert "<td>device count</td>\n<td><code>0</code></td>" in rendered
    assert "ended by the step budget at <code>model.py:5</code>, in a loop outside your code (not a pass)" in rendered
    assert "loops left by the step budget (the script went on after them): <code>model.py:7</code> (for, after 20 steps)" in rendered


def test_a_forward_step_is_its_text_in_json_and_text_and_a_table_row_in_markdown(tmp_path: Path) -> None:
    report = _report(tmp_path)
    step = report.attempts[0].evidence["forward_pass"][0]
    assert step == "Linear(256, 10) at model.py:4 <- 2x512"  # the JSON report's string, as before
    assert json.loads(render_json(report))["attempts"][0]["failure"]["evidence"]["forward_pass"] == [step]
    assert "forward_pass=[Linear(256, 10) at model.py:4 <- 2x512]" in evidence_line(report.attempts[0].evidence)
    assert copy.deepcopy(step).site == pickle.loads(pickle.dumps(step)).site == "model.py:4"
    # the table comes from the step's parts; a string that only looks like one is never parsed
    look_alike = replace(report.attempts[0], evidence={"forward_pass": [str(step)]})
    rendered = html(render_markdown(replace(report, attempts=(look_alike,)), tmp_path))
    assert "<th>layer</th>" not in rendered and "<code>Linear(256, 10) at model.py:4 &lt;- 2x512</code>" in rendered
    # a place with spaces (a notebook's "NB.ipynb, cell 3, line 1", a folder name) is a table cell too
    spaced = ForwardStep("Linear(256, 10)", "my model/model.py:4", "2x512")
    with_spaces = replace(report.attempts[0], evidence={"forward_pass": [spaced]})
    rendered = html(render_markdown(replace(report, attempts=(with_spaces,)), tmp_path))
    assert "<td><code>my model/model.py:4</code></td>" in rendered


def test_markdown_shows_the_line_the_run_saw_when_the_fix_is_in_the_working_tree(tmp_path: Path) -> None:
    report = _report(tmp_path)
    original = (tmp_path / "model.py").read_text()
    # --no-branch: the fix is on disk; the context still shows the line as it failed
    (tmp_path / "model.py").write_text(original.replace("make(256, 10)", "make(512, 10)"))
    markdown = render_markdown(report, tmp_path)
    assert "  4 | fc = make(256, 10)\n> 5 | y = fc(x)" in markdown
    # without the file, only the traced line
    assert "    5 | y = fc(x)" in render_markdown(report, None)


def test_markdown_stays_under_the_step_summary_limit(tmp_path: Path) -> None:
    report = _report(tmp_path)
    lines = "".join(f"-old line {i}\n+new line {i}\n" for i in range(60_000))
    big = replace(report, diff=f"--- a/model.py\n+++ b/model.py\n@@ -1,60000 +1,60000 @@\n{lines}")
    markdown = render_markdown(big, tmp_path)
    assert len(markdown.encode()) <= 900_000
    assert "The diff is cut here" in markdown and markdown.count("```diff") == 1


def test_markdown_escaping_helpers() -> None:
    assert html(code("a `b` c")).strip() == "<p><code>a `b` c</code></p>"
    assert html(code("`x`")).strip() == "<p><code>`x`</code></p>"
    assert html(escape("*a* _b_ <i>c</i> [d](e) ~~f~~ &amp;")).strip() == (
        "<p>*a* _b_ &lt;i&gt;c&lt;/i&gt; [d](e) ~~f~~ &amp;amp;</p>")
    block = fenced("````\ninside\n")
    assert block.startswith("`````text\n") and html(block).count("<pre>") == 1


def test_sarif_of_a_hand_built_report(tmp_path: Path) -> None:
    report = _report(tmp_path)
    log = json.loads(render_sarif(report, all_patterns(), tmp_path))
    validate_sarif(log)
    first, second = log["runs"][0]["results"]
    assert first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 4, "startColumn": 6, "endLine": 4, "endColumn": 19}
    assert first["relatedLocations"][0]["physicalLocation"]["region"] == {
        "startLine": 5, "startColumn": 5, "endLine": 5, "endColumn": 10}
    (change,) = first["fixes"][0]["artifactChanges"]
    assert change["replacements"] == [{
        "deletedRegion": {"startLine": 4, "startColumn": 11, "endLine": 4, "endColumn": 14},
        "insertedContent": {"text": "512"},
    }]
    # a diagnosis points where the remedy applies; an unknown pattern id is unclassified
    assert second["locations"][0]["physicalLocation"]["region"] == {"startLine": 3}
    assert "Remedy: pad the `samples`" in second["message"]["text"]
    assert "fixes" not in second
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    linear = next(r for r in rules if r["id"] == "linear-in-features")
    assert linear["properties"]["applicability"] == "safe" and linear["name"] == "LinearInFeatures"
    assert linear["fullDescription"]["text"].startswith("A fully connected layer")


# --------------------------------------------------------------------------------------------
# The diff as data
# --------------------------------------------------------------------------------------------

def _texts(seed: int) -> tuple[str, str, int]:
    """Two texts with one line ending each (repairbot refuses files that mix them), either may
    lack its final one, and a context size; the new text is the old one edited at random."""
    rng = random.Random(seed)
    ending = rng.choice(["\n", "\r\n"])

    def line() -> str:
        return "".join(rng.choice("ab \t()=x\u00e9`") for _ in range(rng.randint(0, 5)))

    old = [line() for _ in range(rng.randint(0, 8))]
    new = list(old)
    for _ in range(rng.randint(0, 4)):
        at = rng.randint(0, len(new))
        operation = rng.choice(["insert", "delete", "replace", "edit"])
        if operation == "insert" or not new:
            new.insert(at, line())
        elif operation == "delete":
            del new[min(at, len(new) - 1)]
        elif operation == "replace":
            new[min(at, len(new) - 1)] = line()
        else:
            index = min(at, len(new) - 1)
            cut = rng.randint(0, len(new[index]))
            new[index] = new[index][:cut] + line() + new[index][cut + rng.randint(0, 2):]
    before = ending.join(old) + (ending if old and rng.random() < 0.8 else "")
    after = ending.join(new) + (ending if new and rng.random() < 0.8 else "")
    return before, after, rng.randint(0, 3)


@pytest.mark.parametrize("block", range(10))
def test_patches_and_replacements_reproduce_the_new_text(block: int) -> None:
    """Property over 3,000 random edits: a diff read back applies forward and in reverse, and
    its SARIF replacements turn the old text into the new one."""
    for seed in range(block * 300, (block + 1) * 300):
        before, after, context = _texts(seed)
        diff, _ = unified_diff(before.encode(), after.encode(), "f.py", context=context)
        if not diff:
            assert before == after, seed
            continue
        (patch,) = parse_patch(diff)
        assert "".join(apply_patch(split_lines(before), patch)) == after, seed
        assert "".join(apply_patch(split_lines(after), patch, reverse=True)) == before, seed
        assert apply_replacements(before, replacements(diff)["f.py"]) == after, seed


@pytest.mark.parametrize(
    ("diff", "error"),
    [
        ("diff --git a/x b/x\n", "expected a '--- a/PATH'"),
        ("--- a/x\n+++ b/x\n", "without hunks"),
        ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", "cut short"),
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n", "expected a '--- a/PATH'"),
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n?b\n", "not a hunk line"),
        ("--- x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "does not start with 'a/'"),
    ],
)
def test_malformed_patches_are_refused(diff: str, error: str) -> None:
    with pytest.raises(PatchError, match=re.escape(error)):
        parse_patch(diff)


def test_a_patch_that_does_not_fit_is_refused() -> None:
    (patch,) = parse_patch("--- a/x\n+++ b/x\n@@ -2 +2 @@\n-b\n+c\n")
    assert apply_patch(["a\n", "b\n"], patch) == ["a\n", "c\n"]
    with pytest.raises(PatchError, match="does not match"):
        apply_patch(["a\n", "x\n"], patch)


def test_text_report_keeps_its_block_shape(tmp_path: Path) -> None:
    text = render_text(_report(tmp_path))
    assert text.splitlines()[:5] == [
        "[FIXED] model.py:4",
        f"Error: RuntimeError: {HOSTILE.splitlines()[0]} at model.py:5",
        "Fix: Changed make(256, 10) to make(512, 10) <b>bold</b>",
        "Applicability: safe",
        "Evidence: traced `x` | 2x512 *star*",
    ]
    assert text.splitlines()[-1] == "Status: SUCCESS | Errors Fixed: 1 | Files Modified: model.py"


# --------------------------------------------------------------------------------------------
# Progress on stderr
# --------------------------------------------------------------------------------------------


def test_progress_on_a_terminal_is_a_status_line_with_elapsed_time() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, force_interactive=True, width=100, no_color=True)
    progress = cli.Progress(console, live=True)
    progress("run 1: the script as it is")
    progress("run 2: verifying the linear-in-features fix")
    progress.close()
    output = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    assert re.search(r"repairbot: run 1: the script as it is \(\d+\.\d s\)", output)
    assert re.search(r"repairbot: run 2: verifying the linear-in-features fix \(\d+\.\d s\)", output)


def test_progress_elsewhere_is_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = io.StringIO()
    progress = cli.Progress(Console(file=stream, force_terminal=False, no_color=True), live=False)
    progress("run 1: the script as it is")
    progress.close()
    assert stream.getvalue() == "repairbot: run 1: the script as it is\n"


def _fake_repair(options: api.FixOptions, progress: Any = None, **_: Any) -> RepairReport:
    if progress is not None:
        progress("run 1: the script as it is")
    return RepairReport(
        script="train.py", status=Status.ALREADY_PASSING, stop_reason=StopReason.PASSING, attempts=(), diff="",
        files_modified=(), run_limits=RunLimits(), environment={}, duration_s=0.1,
    )


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        ([], {}, "repairbot: run 1: the script as it is\n"),
        (["-q"], {}, ""),
        (["-q", "-v"], {}, "repairbot: run 1: the script as it is\n"),
        (["--color"], {}, "\x1b["),
        (["--color"], {"NO_COLOR": "1"}, "\x1b["),  # the flag wins over the variable
        ([], {"NO_COLOR": "1"}, "repairbot: run 1: the script as it is\n"),
    ],
)
def test_progress_honours_quiet_verbose_and_color(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], env: dict[str, str], expected: str
) -> None:
    monkeypatch.setattr(api, "repair", _fake_repair)
    result = CliRunner(env=env).invoke(cli.main, ["fix", "train.py", "--dry-run", *flags])
    assert result.exit_code == 0, result.output
    stderr = result.stderr
    if expected.startswith("\x1b"):
        assert "\x1b[" in stderr and "run 1: the script as it is" in stderr
    elif expected:
        assert stderr.startswith(expected) and "\x1b[" not in stderr
    else:
        assert "repairbot: run" not in stderr
