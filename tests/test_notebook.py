"""Notebooks (repairbot/notebook.py): the program of the code cells and its line map, IPython
lines, writing a fixed cell back with every other byte kept, bad notebooks, report locations,
and ``repairbot lint`` on notebooks. No torch needed (the end-to-end runs are in
tests/test_notebook_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import nbformat
import pytest

from repairbot import notebook as nbmod
from repairbot.lint.formats import FINDINGS_SCHEMA
from tests.support import commit_all, init_repo, run_cli, run_cli_in_process, snapshot


def make_notebook(path: Path, cells: list[tuple[str, str]], indent: int = 1, kernel: str = "python",
                  **metadata: Any) -> Path:
    """A notebook with (cell_type, source) cells, outputs and execution counts on the code cells."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": kernel}
    nb.metadata.update(metadata)
    for n, (kind, source) in enumerate(cells, start=1):
        if kind == "code":
            cell = nbformat.v4.new_code_cell(source, execution_count=n)
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"out {n} é\n")]
        else:
            cell = nbformat.v4.new_markdown_cell(source)
        nb.cells.append(cell)
    if indent == 1:
        nbformat.write(nb, str(path))
    else:  # another tool's layout (Colab writes indent 2, keys unsorted)
        path.write_text(json.dumps(nb, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


CELLS = [
    ("markdown", "# Training é"),
    ("code", "%matplotlib inline\n!pip install -q torch\nimport torch\nimport torch.nn as nn"),
    ("code", "%%time\nx = torch.randn(4, 8)\nmodel = nn.Linear(10, 2)\nfor i in range(2):\n    !echo step\n    y = model(x)"),
    ("markdown", "notes"),
    ("code", "text = '''\n!not a shell line\n%not a magic\n'''\nprint(text)\ndisplay(y)"),
]


def test_program_keeps_one_line_per_cell_line_and_maps_each_back(tmp_path: Path) -> None:
    nb = nbmod.load(make_notebook(tmp_path / "nb.ipynb", CELLS))
    program = nb.program.splitlines()
    assert program[0] == nbmod.DISPLAY_PRELUDE.rstrip("\n")  # display() is used: defined on a line of its own
    assert nb.locate(1) is None
    # every cell line has its program line; code cells are numbered without the markdown ones
    for cell in nb.cells:
        for number, text in enumerate(cell.source.splitlines(), start=1):
            index = next(i for i, where in enumerate(nb.line_map) if where == nbmod.Location(cell.number, number))
            if not nb.skipped_at(cell.number, number):
                assert program[index] == text
    assert [c.number for c in nb.cells] == [1, 2, 3]
    assert nb.label("nb.ipynb", 8) == "nb.ipynb, cell 2, line 3"
    compile(nb.program, "nb.ipynb", "exec")


def test_ipython_lines_become_plain_python_and_are_listed(tmp_path: Path) -> None:
    nb = nbmod.load(make_notebook(tmp_path / "nb.ipynb", CELLS))
    skipped = {(s.cell, s.line): s.how for s in nb.skipped}
    assert set(skipped) == {(1, 1), (1, 2), (2, 1), (2, 5)}  # not the lines inside the string of cell 3
    assert "%matplotlib: skipped" in skipped[(1, 1)] and "shell command" in skipped[(1, 2)]
    assert "without %%time" in skipped[(2, 1)]
    lines = nb.program.splitlines()
    assert "    pass" in lines  # the indented !echo keeps its block valid
    assert "!not a shell line" in lines and "%not a magic" in lines
    (note,) = nb.notes()
    assert "cell 1, line 1: %matplotlib inline" in note and "cell 2, line 5: !echo step" in note


@pytest.mark.parametrize(("line", "expected"), [
    ("%time y = f(x)\n", "y = f(x)\n"),
    ("%timeit -n 10 -r 2 f(x)\n", "f(x)\n"),
    ("  %env CUDA_VISIBLE_DEVICES=0\n", "  __import__('os').environ['CUDA_VISIBLE_DEVICES'] = '0'\n"),
    ("%cd data\n", "__import__('os').chdir('data')\n"),
    ("files = !ls *.csv\n", "files = []\n"),
    ("model?\n", "pass\n"),
    ("%load_ext autoreload\n", "pass\n"),
    ("!!nvidia-smi\n", "pass\n"),
])
def test_line_magics_have_their_plain_python_meaning(line: str, expected: str) -> None:
    converted = nbmod._convert_line(line)
    assert converted is not None and converted[0] == expected


@pytest.mark.parametrize("line", ["x = a % b\n", "if x != y:\n", "print('%d' % 3)\n", "# %matplotlib\n", "y = x ==!z\n"])
def test_python_lines_are_left_alone(line: str) -> None:
    assert nbmod._convert_line(line) is None


def test_a_cell_of_another_language_is_skipped_whole(tmp_path: Path) -> None:
    nb = nbmod.load(make_notebook(tmp_path / "nb.ipynb", [
        ("code", "%%bash\nfor f in *.csv; do\n  echo $f\ndone"), ("code", "import os"),
    ]))
    assert nb.program.splitlines()[:4] == ["pass", "", "", ""]
    assert [(s.cell, s.line) for s in nb.skipped] == [(1, 1)] and "%%bash cell" in nb.skipped[0].how
    compile(nb.program, "nb.ipynb", "exec")


def _splice_check(path: Path, old: str, new: str) -> tuple[bytes, bytes]:
    nb = nbmod.load(path)
    assert nb.program.count(old) == 1
    fixed = nb.write_back(nb.program.replace(old, new))
    return nb.data, fixed


@pytest.mark.parametrize("indent", [1, 2])
def test_write_back_changes_only_the_edited_line_of_the_cell(tmp_path: Path, indent: int) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", CELLS, indent=indent, colab={"provenance": []})
    before, after = _splice_check(path, "nn.Linear(10, 2)", "nn.Linear(8, 2)")
    # every other byte is the same: the file is the original with that one JSON string replaced
    # (indent 1: nbformat's list of lines; indent 2: the source as one JSON string)
    assert before.count(b"model = nn.Linear(10, 2)") == 1
    assert after == before.replace(b"model = nn.Linear(10, 2)", b"model = nn.Linear(8, 2)")
    reread = nbformat.reads(after.decode(), as_version=4)
    assert reread.cells[2].source.splitlines()[2] == "model = nn.Linear(8, 2)"
    assert reread.cells[2].outputs[0]["text"] == "out 3 é\n" and reread.cells[2].execution_count == 3


def test_write_back_of_a_cell_s_last_line_keeps_it_without_a_newline(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", CELLS)
    before, after = _splice_check(path, "    y = model(x)", "    y = model(x.float())")
    assert after == before.replace(b'"    y = model(x)"', b'"    y = model(x.float())"')


def test_write_back_of_an_edit_that_adds_lines(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", CELLS)
    before, after = _splice_check(path, "model = nn.Linear(10, 2)\n", "model = nn.Linear(10, 2)\nmodel.train()\n")
    text, layout = after.decode(), before.decode()
    assert text == layout.replace('"model = nn.Linear(10, 2)\\n",\n', '"model = nn.Linear(10, 2)\\n",\n    "model.train()\\n",\n')


def test_write_back_of_a_source_written_as_one_string(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", CELLS)
    data = json.loads(path.read_text())
    data["cells"][2]["source"] = "".join(data["cells"][2]["source"])
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    before, after = _splice_check(path, "nn.Linear(10, 2)", "nn.Linear(8, 2)")
    assert after == before.replace(b"nn.Linear(10, 2)", b"nn.Linear(8, 2)")


def test_write_back_keeps_unicode_escapes_when_the_file_uses_them(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", [("code", "label = 'é'\nx = 1\n")], indent=1)
    path.write_text(json.dumps(json.loads(path.read_text()), indent=1, ensure_ascii=True) + "\n")
    before, after = _splice_check(path, "label = 'é'", "label = 'è'")
    assert after == before.replace(b"'\\u00e9'", b"'\\u00e8'")


def test_edits_across_cells_or_on_ipython_lines_are_refused(tmp_path: Path) -> None:
    plain = nbmod.load(make_notebook(tmp_path / "plain.ipynb", [("code", "a = 1\nb = 2"), ("code", "c = 3")]))
    with pytest.raises(nbmod.NotebookError, match="more than one cell"):
        plain.write_back(plain.program.replace("b = 2\nc = 3\n", "b = 20\nc = 30\n"))
    nb = nbmod.load(make_notebook(tmp_path / "nb.ipynb", CELLS))
    with pytest.raises(nbmod.NotebookError, match="IPython line"):
        nb.write_back(nb.program.replace("    pass\n", "    print('step')\n"))


def test_diff_is_shown_per_cell(tmp_path: Path) -> None:
    nb = nbmod.load(make_notebook(tmp_path / "nb.ipynb", CELLS))
    diff, changed = nb.diff(nb.program, nb.program.replace("nn.Linear(10, 2)", "nn.Linear(8, 2)"), "nb.ipynb")
    assert diff.startswith("--- a/nb.ipynb:cell 2\n+++ b/nb.ipynb:cell 2\n@@ -1,6 +1,6 @@\n %%time\n")
    assert "-model = nn.Linear(10, 2)\n+model = nn.Linear(8, 2)\n" in diff and changed == 1


@pytest.mark.parametrize(("content", "message"), [
    (b"{not json", "not a notebook: invalid JSON"),
    (b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}', "nbformat 3 is not supported"),
    (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}', "not a valid nbformat 4 notebook"),
    (b"[1, 2]", "the JSON has no cells"),
])
def test_bad_notebooks_are_refused_in_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.ipynb"
    path.write_bytes(content)
    with pytest.raises(nbmod.NotebookError, match=message):
        nbmod.load(path)


def test_no_code_cells_and_other_kernels_are_refused(tmp_path: Path) -> None:
    with pytest.raises(nbmod.NotebookError, match="no code cells"):
        nbmod.load(make_notebook(tmp_path / "a.ipynb", [("markdown", "# only text")]))
    with pytest.raises(nbmod.NotebookError, match="kernel is r, not Python"):
        nbmod.load(make_notebook(tmp_path / "b.ipynb", [("code", "x <- 1")], kernel="R"))


def test_a_syntax_error_names_its_cell(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", [("code", "import torch"), ("code", "x = 1\ny = (")])
    with pytest.raises(nbmod.NotebookError, match=r"nb.ipynb, cell 2, line 2: syntax error"):
        nbmod.for_script(path.resolve(), "nb.ipynb")


@pytest.mark.parametrize(("content", "message"), [
    ("{bad", "not a notebook: invalid JSON"),
    ('{"nbformat": 5, "nbformat_minor": 0, "cells": [], "metadata": {}}', "nbformat 5 is not supported"),
    (None, "no code cells"),
    ("R", "kernel is r, not Python"),
])
@pytest.mark.parametrize("command", ["fix", "doctor"])
def test_cli_refuses_a_bad_notebook_with_exit_2_and_changes_nothing(
    tmp_path: Path, content: str | None, message: str, command: str
) -> None:
    repo = init_repo(tmp_path / "repo")
    path = repo / "nb.ipynb"
    if content is None:
        make_notebook(path, [("markdown", "# notes")])
    elif content == "R":
        make_notebook(path, [("code", "x <- c(1, 2)")], kernel="R")
    else:
        path.write_text(content)
    commit_all(repo)
    before = snapshot(repo)
    result = run_cli(command, "nb.ipynb", cwd=repo, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("repairbot: error: nb.ipynb: ") and message in line, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo) == before


def test_locator_maps_text_json_and_sarif(tmp_path: Path) -> None:
    nb = nbmod.load(make_notebook(tmp_path / "nb.ipynb", CELLS))
    locator = nbmod.Locator({"nb.ipynb": nb})
    assert locator.text("[FIXED] nb.ipynb:8\nat /abs/nb.ipynb:8, other.py:8") == (
        "[FIXED] nb.ipynb, cell 2, line 3\nat /abs/nb.ipynb, cell 2, line 3, other.py:8")
    assert locator.text('File "/x/nb.ipynb", line 8, in <module>') == 'File "/x/nb.ipynb", cell 2, line 3, in <module>'
    mapped = locator.json({"file": "nb.ipynb", "line": 8, "evidence": {"site": "nb.ipynb:9"}})
    assert mapped == {"file": "nb.ipynb", "cell": 2, "line": 3, "evidence": {"site": "nb.ipynb, cell 2, line 4"}}
    assert locator.json(mapped) == mapped  # mapping twice changes nothing
    sarif = locator.json({"physicalLocation": {"artifactLocation": {"uri": "nb.ipynb"}, "region": {"startLine": 8}}})
    assert sarif["physicalLocation"]["region"] == {"startLine": 3} and sarif["properties"] == {"cell": 2}


# lint ---------------------------------------------------------------------------------------
LINT_CELLS = [
    ("code", "%matplotlib inline\nimport torch\nimport torch.nn.functional as F"),
    ("markdown", "## Train"),
    ("code", "model = torch.nn.Linear(4, 3)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)"),
    ("code", "for epoch in range(3):\n    out = F.softmax(model(x), dim=1)\n    loss = F.cross_entropy(out, y)\n    loss.backward()\n    opt.step()"),
]


def lint_repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    make_notebook(repo / "train.ipynb", LINT_CELLS)
    (repo / ".ipynb_checkpoints").mkdir()  # Jupyter's autosaves: excluded like .venv
    make_notebook(repo / ".ipynb_checkpoints" / "train-checkpoint.ipynb", LINT_CELLS)
    (repo / "scratch").mkdir()
    make_notebook(repo / "scratch" / "old.ipynb", LINT_CELLS)
    (repo / ".gitignore").write_text("scratch/\n")
    make_notebook(repo / "analysis.ipynb", [("code", "x <- read.csv('a.csv')")], kernel="R")
    return repo


def test_lint_finds_notebooks_in_folders_and_names_the_cell(tmp_path: Path) -> None:
    repo = lint_repo(tmp_path)
    result = run_cli_in_process("lint", ".", cwd=repo)
    assert result.returncode == 1, result.stderr
    # neither the autosave in .ipynb_checkpoints nor the git-ignored scratch/ notebook is linted
    findings = [line for line in result.stdout.splitlines() if not line.startswith(("repairbot:", "Found "))]
    assert [line.split(" ")[:2] for line in findings] == [
        ["train.ipynb:cell", "3:1:1:"], ["train.ipynb:cell", "3:2:11:"],
    ]
    assert findings[0].startswith("train.ipynb:cell 3:1:1: missing-zero-grad ")
    assert findings[1].startswith("train.ipynb:cell 3:2:11: softmax-before-cross-entropy ")
    assert "repairbot: note: analysis.ipynb: skipped: the notebook's kernel is r, not Python" in result.stdout


def test_lint_formats_locate_the_cell(tmp_path: Path) -> None:
    repo = lint_repo(tmp_path)
    findings = json.loads(run_cli_in_process("lint", "train.ipynb", "--format", "json", cwd=repo).stdout)
    jsonschema.validate(findings, FINDINGS_SCHEMA)
    assert [(f["path"], f["cell"], f["line"], f["column"], f["rule"]) for f in findings] == [
        ("train.ipynb", 3, 1, 1, "missing-zero-grad"), ("train.ipynb", 3, 2, 11, "softmax-before-cross-entropy"),
    ]
    github = run_cli_in_process("lint", "train.ipynb", "--format", "github", cwd=repo).stdout.splitlines()
    raw = (repo / "train.ipynb").read_text().splitlines()
    for line in github:
        number = int(line.split("line=")[1].split(",")[0])
        assert '"for epoch in range(3):' in raw[number - 1] or "F.softmax" in raw[number - 1]
        assert "cell 3, line" in line
    sarif = json.loads(run_cli_in_process("lint", "train.ipynb", "--format", "sarif", cwd=repo).stdout)
    results = sarif["runs"][0]["results"]
    assert [r["locations"][0]["properties"]["cell"] for r in results] == [3, 3]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results] == [1, 2]


def test_lint_diff_and_fix_work_on_cells(tmp_path: Path) -> None:
    repo = lint_repo(tmp_path)
    path = repo / "train.ipynb"
    before = path.read_bytes()
    diff = run_cli_in_process("lint", "train.ipynb", "--diff", cwd=repo)
    assert diff.stdout.startswith("--- a/train.ipynb:cell 3\n+++ b/train.ipynb:cell 3\n")
    assert "+    opt.zero_grad()\n" in diff.stdout and "+    out = model(x)\n" in diff.stdout
    assert path.read_bytes() == before
    fixed = run_cli_in_process("lint", "train.ipynb", "--fix", cwd=repo)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    after = path.read_bytes().decode()
    assert after == before.decode().replace(
        '    "    out = F.softmax(model(x), dim=1)\\n",\n',
        '    "    opt.zero_grad()\\n",\n    "    out = model(x)\\n",\n',
    )
    nbformat.validate(nbformat.reads(after, as_version=4))


def test_lint_of_an_unreadable_notebook_is_a_parse_error(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{oops")
    result = run_cli_in_process("lint", "broken.ipynb", "--format", "json", cwd=tmp_path)
    (finding,) = json.loads(result.stdout)
    assert finding["rule"] == "parse-error" and "invalid JSON" in finding["message"]


def test_an_insertion_goes_into_the_cell_it_precedes(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", [("code", "import torch\nx = 1"), ("code", "display(x)")])
    nb = nbmod.load(path)
    assert nb.locate(1) is None  # the display prelude
    program = nb.program.replace("import torch\n", "import os\nimport torch\n")
    assert nb.cell_sources(program) == {1: "import os\nimport torch\nx = 1"}
    nb.check_edit(program)


def test_an_edit_that_cannot_be_written_back_is_refused(tmp_path: Path) -> None:
    # the loop declines it as a failed rewrite (TransformError) before any run
    nb = nbmod.load(make_notebook(tmp_path / "nb.ipynb", CELLS))
    with pytest.raises(nbmod.NotebookError, match="IPython line"):
        nb.check_edit(nb.program.replace("    pass\n", "    print('step')\n"))


def test_a_cell_indented_as_a_whole_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", [("code", " import torch\n device = 'cpu'")])
    with pytest.raises(nbmod.NotebookError, match=r"cell 1, line 1: syntax error: unexpected indent .*IPython removes that indentation"):
        nbmod.for_script(path.resolve(), "nb.ipynb")


def test_lines_are_counted_as_python_counts_them_and_list_items_may_hold_several(tmp_path: Path) -> None:
    path = make_notebook(tmp_path / "nb.ipynb", [("code", "x = 1")])
    data = json.loads(path.read_text())
    # a hand-written list: one item with two lines, and a form feed (not a line break for Python)
    data["cells"][0]["source"] = ["import torch\nm = torch.nn.Linear(10, 2)\n", "\x0c\n", "y = m(torch.rand(1, 8))"]
    path.write_text(json.dumps(data, indent=1) + "\n")
    nb = nbmod.load(path)
    assert nb.program.count("\n") == 4 and nb.locate(4) == nbmod.Location(1, 4)
    before, after = _splice_check(path, "Linear(10, 2)", "Linear(8, 2)")
    # the edited item is written anew (one item per line); every byte around it is kept
    old_item = json.dumps("import torch\nm = torch.nn.Linear(10, 2)\n").encode()
    head, tail = before.split(old_item)
    assert after.startswith(head) and after.endswith(tail)
    middle = after[len(head):len(after) - len(tail)]
    assert middle == b'"import torch\\n",\n    "m = torch.nn.Linear(8, 2)\\n"'


def test_a_fix_that_adds_a_line_does_not_shift_the_next_attempt_s_locations(tmp_path: Path) -> None:
    from repairbot.edits import Site
    from repairbot.output.report import render_text, report_to_json
    from repairbot.results import Attempt, Fix, RepairReport
    from repairbot.types import (
        Applicability,
        Failure,
        Frame,
        Outcome,
        RunLimits,
        Span,
        Status,
        StopReason,
    )

    path = make_notebook(tmp_path / "nb.ipynb", [
        ("code", "import torch\nstate = torch.load('a.pt')"), ("code", "x = 1\ny = model(x)"),
    ])
    nb = nbmod.load(path.resolve())
    first = nb.program
    fixed = first.replace("state = torch.load('a.pt')\n", "with ctx():\n    state = torch.load('a.pt')\n")
    diff, _ = nb.diff(first, fixed, "nb.ipynb")

    def attempt(n: int, line: int, fix: Fix | None) -> Attempt:
        frame = Frame(file=str(path.resolve()), line=line, user=True, code="...")
        return Attempt(
            n=n, failure=Failure("RuntimeError", "boom", frames=(frame,)), failure_file="nb.ipynb",
            failure_line=line, pattern=None, evidence={"site": f"nb.ipynb:{line}"}, fix=fix,
            outcome=Outcome.PASSED if fix else Outcome.NOT_RUN, applied=fix is not None,
        )

    site = Site("weights-only", str(path), Span(2, 0, 2, 10), {}, "wrapped nb.ipynb:2", Applicability.SAFE)
    # attempt 1 fails at cell 1, line 2 (program line 2); attempt 2, after the fix added a line,
    # at cell 2, line 2: program line 5 of the fixed program (line 4 of the first one)
    attempts = (attempt(1, 2, Fix(site, "nb.ipynb", diff, 2)), attempt(2, 5, None))
    report = RepairReport(
        script="nb.ipynb", status=Status.GAVE_UP, stop_reason=StopReason.NO_PATTERN, attempts=attempts, diff=diff,
        files_modified=(), run_limits=RunLimits(stopped_at="nb.ipynb:5"), environment={}, duration_s=0.0,
        locations=nbmod.Locator({"nb.ipynb": nb}),
    )
    placed = nbmod.place_report(report, nb)
    text = render_text(placed)
    assert "[FIXED] nb.ipynb, cell 1, line 2" in text and "at nb.ipynb, cell 1, line 2" in text
    assert "at nb.ipynb, cell 2, line 2" in text, text
    data = report_to_json(placed)
    second = data["attempts"][1]["failure"]
    assert (second["cell"], second["line"]) == (2, 2)
    assert data["attempts"][1]["failure"]["evidence"] == {"site": "nb.ipynb, cell 2, line 2"}
    assert data["run_limits"]["stopped_at"] == "nb.ipynb, cell 2, line 2"
    # without the placing, the first program's map would read line 5 as past the end
    assert nbmod.place_report(replace_attempts(report, attempts[:1]), nb).attempts[0].failure_line >= nbmod.PLACED


def replace_attempts(report: Any, attempts: tuple[Any, ...]) -> Any:
    from dataclasses import replace

    return replace(report, attempts=attempts)
