"""``repairbot server``'s hover on lines past repairs changed: in notebook cells, and read from git
only when the fix branches change (a real LSP client, pytest-lsp, as in tests/test_server.py)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest.importorskip("pytest_lsp")

from lsprotocol import types
from pytest_lsp import LanguageClient

from repairbot.output.git import refs_state
from tests.support import commit_all, copy_project, git, init_repo, run_cli
from tests.test_server import ENV, RECORDED_REPORT, ROOT, hover, opened, session


@dataclass(frozen=True)
class Cell:
    uri: str
    text: str
    kind: types.NotebookCellKind


def notebook_cells(path: Path, notebook: dict, prefix: str = "c") -> list[Cell]:
    """The cells of an .ipynb's JSON as an editor opens them, one text document each."""
    cells = []
    for index, cell in enumerate(notebook["cells"]):
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        kind = types.NotebookCellKind.Code if cell["cell_type"] == "code" else types.NotebookCellKind.Markup
        cells.append(Cell(f"vscode-notebook-cell:{path.as_posix()}#{prefix}{index}", source, kind))
    return cells


def open_notebook(client: LanguageClient, path: Path, cells: list[Cell]) -> None:
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=path.as_uri(), notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=cell.kind, document=cell.uri) for cell in cells],
        ),
        cell_text_documents=[
            types.TextDocumentItem(
                uri=cell.uri, language_id="python" if cell.kind == types.NotebookCellKind.Code else "markdown",
                version=1, text=cell.text,
            )
            for cell in cells
        ],
    ))


def added_lines(diff: str) -> list[str]:
    return [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def hover_text(shown: types.Hover | None) -> str:
    assert shown is not None and isinstance(shown.contents, types.MarkupContent)
    return shown.contents.value


RECORDED_NOTEBOOK_REPORT = ROOT / "tests" / "data" / "server" / "notebook_logreg_dtype_mismatch.report.json"


@pytest.mark.asyncio
async def test_hover_in_a_notebook_cell_from_its_json_report(tmp_path: Path) -> None:
    report = json.loads(RECORDED_NOTEBOOK_REPORT.read_text())
    fix, failure = report["attempts"][0]["fix"], report["attempts"][0]["failure"]
    name = report["script"]
    shutil.copy(ROOT / "fixtures" / "notebook_logreg_dtype_mismatch" / name, tmp_path / name)
    shutil.copy(RECORDED_NOTEBOOK_REPORT, tmp_path / "repairbot-report.json")
    cells = notebook_cells(tmp_path / name, json.loads((tmp_path / name).read_text()))
    code = [cell for cell in cells if cell.kind == types.NotebookCellKind.Code]
    # the fix's per-cell diff (`a/NB.ipynb:cell 7`) applied by git to a file holding that cell
    scratch = tmp_path / "cell"
    scratch.mkdir()
    (scratch / f"{name}:cell {fix['cell']}").write_text(code[fix["cell"] - 1].text)
    (scratch / "fix.diff").write_text(fix["diff"])
    git(scratch, "apply", "fix.diff")
    target = Cell(code[fix["cell"] - 1].uri, (scratch / f"{name}:cell {fix['cell']}").read_text(), types.NotebookCellKind.Code)
    fixed = [target if cell.uri == target.uri else cell for cell in cells]
    line = fix["line"] - 1
    async with session(notebooks=True) as client:
        open_notebook(client, tmp_path / name, fixed)
        value = hover_text(await hover(client, target.uri, line))
        assert "repairbot-report.json" in value and failure["message"] in value and fix["summary"] in value
        assert await hover(client, target.uri, line + 1) is None
        assert await hover(client, code[0].uri, 0) is None
    async with session(notebooks=True) as client:  # the notebook as it was before the fix: no line holds its text
        open_notebook(client, tmp_path / name, cells)
        assert await hover(client, code[fix["cell"] - 1].uri, line) is None
    # a .py file of the same name is not the notebook
    async with session() as client:
        uri = opened(client, tmp_path / Path(name).with_suffix(".py"), target.text)
        assert await hover(client, uri, line) is None


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.asyncio
async def test_hover_in_a_notebook_cell_that_a_real_repair_changed(tmp_path: Path) -> None:
    name = "logistic-regression.ipynb"
    repo = init_repo(tmp_path / "repo")
    copy_project(ROOT / "fixtures" / "notebook_logreg_dtype_mismatch", repo)
    commit_all(repo)
    done = run_cli("fix", name, "--json", "repairbot-report.json", cwd=repo, env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((repo / "repairbot-report.json").read_text())
    fix, failure = report["attempts"][0]["fix"], report["attempts"][0]["failure"]
    path = repo / name
    # the notebook as the fix branch has it (the editor shows it once the branch is checked out)
    cells = notebook_cells(path, json.loads(git(repo, "show", f"{report['branch']}:{name}")))
    code = [cell for cell in cells if cell.kind == types.NotebookCellKind.Code]
    target, line = code[fix["cell"] - 1], fix["line"] - 1
    assert target.text.splitlines()[line] == added_lines(fix["diff"])[0]  # the report's cell and line: the fixed one
    for options, origin in (({"fixBranches": False}, "repairbot-report.json"), ({"reports": []}, f"branch {report['branch']}")):
        async with session(notebooks=True, options=options) as client:
            open_notebook(client, path, cells)
            value = hover_text(await hover(client, target.uri, line))
            assert origin in value and failure["message"] in value and fix["summary"] in value
            assert f"a/{name}:cell {fix['cell']}" in value  # the cell's diff, as `repairbot fix` shows it
            assert f"cell {failure['cell']}, line {failure['line']}" in value
            assert await hover(client, target.uri, line - 1) is None
            other = next(cell for cell in code if cell is not target and len(cell.text.splitlines()) > line)
            assert await hover(client, other.uri, line) is None
    # a code cell added at the top and two lines above the fixed one: the hover follows its line
    moved = Cell(target.uri, "# tried float64 first\n# then float32\n" + target.text, target.kind)
    reordered = [Cell(f"vscode-notebook-cell:{path.as_posix()}#new", "import os\n", types.NotebookCellKind.Code),
                 *(moved if cell is target else cell for cell in cells)]
    async with session(notebooks=True) as client:
        open_notebook(client, path, reordered)
        assert fix["summary"] in hover_text(await hover(client, target.uri, line + 2))
        assert await hover(client, target.uri, line) is None


def counting_git(folder: Path) -> tuple[dict[str, str], Path]:
    """The server's environment with a `git` that logs each of its runs, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    (folder / "bin").mkdir()
    log = folder / "git-runs.log"
    wrapper = folder / "bin" / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    env = {**ENV, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}", "GIT_PYTHON_GIT_EXECUTABLE": str(wrapper)}
    return env, log


def git_runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def cnn_repo(tmp_path: Path) -> tuple[Path, str, int]:
    """A repository with fixtures/cnn_flatten_size/train.py committed; the file's text with the
    recorded report's fix applied, and the 0-based line the fix wrote."""
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_bytes((ROOT / "fixtures" / "cnn_flatten_size" / "train.py").read_bytes())
    commit_all(repo)
    report = json.loads(RECORDED_REPORT.read_text())
    scratch = tmp_path / "fixed"
    scratch.mkdir()
    shutil.copy(repo / "train.py", scratch / "train.py")
    (scratch / "fix.diff").write_text(report["diff"])
    git(scratch, "apply", "fix.diff")
    return repo, (scratch / "train.py").read_text(), report["attempts"][0]["fix"]["line"] - 1


@dataclass(frozen=True)
class Watched:
    client: LanguageClient
    repo: Path
    uri: str
    text: str  # the document's: train.py as the recorded fix left it
    line: int  # the line that fix wrote
    log: Path  # the server's git runs


@asynccontextmanager
async def watched_cnn(tmp_path: Path) -> AsyncIterator[Watched]:
    """A server whose git runs are logged, with the fixed train.py open (no hover on it yet: no
    fix is known)."""
    repo, text, line = cnn_repo(tmp_path)
    env, log = counting_git(tmp_path)
    async with session(env=env) as client:
        uri = opened(client, repo / "train.py", text)
        assert await hover(client, uri, line) is None
        yield Watched(client, repo, uri, text, line, log)


@pytest.mark.asyncio
async def test_hovers_run_git_again_only_when_a_fix_branch_changes(tmp_path: Path) -> None:
    async with watched_cnn(tmp_path) as watched:
        client, repo, uri, line, log = watched.client, watched.repo, watched.uri, watched.line, watched.log
        first = git_runs(log)
        assert any(run.startswith("for-each-ref") for run in first), first  # the fix branches were listed
        assert await hover(client, uri, line) is None
        assert git_runs(log) == first  # nothing changed: no git run at all
        # a report appears: shown at once, and still no git run (no ref changed)
        (repo / ".repairbot").mkdir()
        shutil.copy(RECORDED_REPORT, repo / ".repairbot" / "last.json")
        assert "last.json" in hover_text(await hover(client, uri, line))
        assert git_runs(log) == first
        # a new branch under repairbot/: the branches are listed again, once
        git(repo, "branch", "repairbot/fix-other")
        assert "last.json" in hover_text(await hover(client, uri, line))
        second = git_runs(log)
        assert len(second) > len(first) and any(run.startswith("for-each-ref") for run in second[len(first):])
        assert "last.json" in hover_text(await hover(client, uri, line))
        assert git_runs(log) == second
        # the report removed: its fix is gone at the next hover
        (repo / ".repairbot" / "last.json").unlink()
        shown = await hover(client, uri, line)
        assert shown is None, hover_text(shown)
        # git's own housekeeping moves the refs into packed-refs: read again, same answer
        git(repo, "pack-refs", "--all")
        assert await hover(client, uri, line) is None
        assert len(git_runs(log)) > len(second)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_new_fix_shows_in_the_next_hover(tmp_path: Path) -> None:
    async with watched_cnn(tmp_path) as watched:
        client, repo, uri, text, line, log = watched.client, watched.repo, watched.uri, watched.text, watched.line, watched.log
        done = run_cli("fix", "train.py", cwd=repo, env={"OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stdout + done.stderr
        branch = git(repo, "branch", "--list", "repairbot/fix-*", "--format=%(refname:short)").strip()
        assert git(repo, "show", f"{branch}:train.py") == text  # the fix that the document shows
        value = hover_text(await hover(client, uri, line))
        assert f"branch {branch}" in value and f"+{text.splitlines()[line]}" in value
        runs = git_runs(log)
        assert hover_text(await hover(client, uri, line)) == value
        assert git_runs(log) == runs


def test_refs_state_changes_with_the_fix_branches_only_in_worktrees_too(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("x = 1\n")
    commit_all(repo)
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked), "-b", "other")
    before, linked_before = refs_state(repo / "sub"), refs_state(linked)
    assert before is not None and linked_before is not None
    assert before[0] == repo and linked_before[0] == linked
    git(repo, "branch", "feature")  # not a fix branch
    assert refs_state(repo) == before
    git(linked, "branch", "repairbot/fix-train-1")  # made in the linked worktree, seen from both
    after, linked_after = refs_state(repo), refs_state(linked)
    assert after is not None and linked_after is not None
    assert after[1] != before[1] and linked_after[1] != linked_before[1]
    (repo / "train.py").write_text("x = 2\n")
    commit_all(repo, "second")
    git(repo, "branch", "-f", "repairbot/fix-train-1", "HEAD")  # moved
    assert refs_state(repo) != after
    assert refs_state(tmp_path / "outside") is None
