"""``repairbot server`` driven by a real LSP client (pytest-lsp) over stdio, as an editor does."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pygls")
pytest.importorskip("pytest_lsp")

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "repairbot", "server"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}

# a safe fix (require-grad-typo) after a non-ASCII string, an unsafe one (exp-minus-one), tabs
SCRIPT = (
    'import torch\n\n\ndef step(model, x):\n'
    '\t# größe\n'
    '\tfor p in model.parameters():\n'
    '\t\tname = "🙂"; p.require_grad = False\n'
    '\tvar = torch.exp(x) - 1\n'
    '\treturn var\n'
)


# every diagnostics notification, by document and version: two that come in one read (a closed
# document's, then a changed one's) would wake one waiter of ``wait_for_notification`` only
PUBLISHED: dict[LanguageClient, dict[tuple[str, int | None], Sequence[types.Diagnostic]]] = {}


def _recorded(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    PUBLISHED.setdefault(client, {})[(params.uri, params.version)] = params.diagnostics


def make_test_lsp_client() -> LanguageClient:
    """pytest-lsp's test client, recording every diagnostics notification (``PUBLISHED``)."""
    client = LanguageClient(converter_factory=default_converter)
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _recorded})
    return client


@asynccontextmanager
async def session(
    encodings: Sequence[str] | None = None, options: dict[str, Any] | None = None, notebooks: bool = False,
    env: dict[str, str] | None = None, adjust: Callable[[types.ClientCapabilities], None] | None = None,
) -> AsyncIterator[LanguageClient]:
    client = make_test_lsp_client()
    await client.start_io(*SERVER, env=env or ENV)
    capabilities = client_capabilities("visual-studio-code")
    if adjust is not None:
        adjust(capabilities)
    if encodings is not None:
        capabilities.general = types.GeneralClientCapabilities(position_encodings=list(encodings))
    if not notebooks:
        capabilities.notebook_document = None
    await client.initialize_session(types.InitializeParams(capabilities=capabilities, initialization_options=options))
    try:
        yield client
    finally:
        await client.shutdown_session()
        await client.stop()
        PUBLISHED.pop(client, None)


async def diagnostics(client: LanguageClient, uri: str, timeout: float = 20) -> Sequence[types.Diagnostic]:
    """The next diagnostics published for ``uri``."""
    client.diagnostics.pop(uri, None)
    async def wait() -> Sequence[types.Diagnostic]:
        while uri not in client.diagnostics:  # polled: see PUBLISHED
            await asyncio.sleep(0.01)
        return client.diagnostics[uri]
    return await asyncio.wait_for(wait(), timeout)


def opened(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text),
    ))
    return uri


def applied(text: str, edits: Sequence[types.TextEdit], encoding: str = "utf-16") -> str:
    """``text`` with LSP edits applied, as an editor does (last edit first)."""
    import re

    starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]

    def offset(position: types.Position) -> int:
        line = text[starts[position.line]:]
        units = 0
        for index, char in enumerate(line):
            if units >= position.character:
                return starts[position.line] + index
            units += len(char.encode(encoding.replace("utf-16", "utf-16-le").replace("utf-32", "utf-32-le"))) // (
                2 if encoding == "utf-16" else 4 if encoding == "utf-32" else 1
            )
        return starts[position.line] + len(line)

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


async def actions(client: LanguageClient, uri: str, only: list[str] | None = None, line: int = 0, end: int = 100) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=line, character=0), end=types.Position(line=end, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=only),
    ))
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


def lint_fix(path: Path) -> bytes:
    """What ``repairbot lint --fix`` writes for this file."""
    subprocess.run([sys.executable, "-m", "repairbot", "lint", "--fix", "-q", path.name], cwd=path.parent, env=ENV,
                   capture_output=True, check=False, timeout=120)
    return path.read_bytes()


@pytest.mark.asyncio
@pytest.mark.parametrize(("encoding", "start", "end"), [("utf-16", 15, 29), ("utf-8", 17, 31), ("utf-32", 14, 28)])
async def test_diagnostics_on_open_in_the_negotiated_encoding(tmp_path: Path, encoding: str, start: int, end: int) -> None:
    async with session(encodings=[encoding]) as client:
        found = await diagnostics(client, opened(client, tmp_path / "train.py", SCRIPT))
    by_rule = {d.code: d for d in found}
    assert set(by_rule) == {"require-grad-typo", "exp-minus-one"}
    typo = by_rule["require-grad-typo"]
    assert (typo.range.start.line, typo.range.start.character) == (6, start)
    assert (typo.range.end.line, typo.range.end.character) == (6, end)  # `p.require_grad` is 14 ASCII characters
    assert typo.severity == types.DiagnosticSeverity.Warning and typo.source == "repairbot"
    assert typo.code_description is not None and typo.code_description.href.endswith("lint-rules.md#require-grad-typo")
    assert Path(typo.code_description.href.split("#")[0].removeprefix("file://")).is_file()


@pytest.mark.asyncio
async def test_change_and_save_relint(tmp_path: Path) -> None:
    async with session() as client:
        uri = opened(client, tmp_path / "train.py", SCRIPT)
        assert len(await diagnostics(client, uri)) == 2
        fixed = SCRIPT.replace("require_grad", "requires_grad")
        for version, text in ((2, fixed.replace("exp(x)", "exp(y)")), (3, fixed)):  # the first is debounced away
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            ))
        after = await diagnostics(client, uri)
        assert [d.code for d in after] == ["exp-minus-one"]
        assert client.diagnostics[uri] == after
        client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        assert [d.code for d in await diagnostics(client, uri)] == ["exp-minus-one"]


async def published(client: LanguageClient, uri: str, version: int, timeout: float = 30) -> Sequence[types.Diagnostic]:
    """The diagnostics published for this version of the document."""
    async def wait() -> Sequence[types.Diagnostic]:
        while (uri, version) not in PUBLISHED.get(client, {}):
            await asyncio.sleep(0.01)
        return list(PUBLISHED[client][(uri, version)])
    return await asyncio.wait_for(wait(), timeout)


def _replaced(text: str, old: str, new: str) -> tuple[types.Range, str, str]:
    """The range (UTF-16 units, ASCII here) of the first ``old`` in ``text``, ``new``, the new text."""
    start = text.index(old)
    line, column = text.count("\n", 0, start), start - (text.rfind("\n", 0, start) + 1)
    end_line = line + old.count("\n")
    end_column = (column + len(old)) if "\n" not in old else len(old) - old.rfind("\n") - 1
    where = types.Range(start=types.Position(line=line, character=column), end=types.Position(line=end_line, character=end_column))
    return where, new, text.replace(old, new, 1)


@pytest.mark.asyncio
async def test_edits_publish_what_a_fresh_open_of_the_text_publishes(tmp_path: Path) -> None:
    """Each change is linted from the last lint (the statement it touched parsed again): the
    diagnostics after every partial change are those of the same text opened afresh."""
    text = "import torch\n\n\n" + "".join(
        f"def step{n}(model, x):\n    y = torch.exp(x) - {n}\n    return y\n\n\n" for n in range(6)
    )
    changes = [
        ("- 2", "- 1"),  # a new finding in one function
        ("def step3(model, x):", "def step3(model, x:"),  # broken
        ("def step3(model, x:", "def step3(model, x):"),  # fixed again
        ("    return y\n\n\ndef step5", "    return y  # repairbot: ignore\n    z = torch.log(1 + x)\n\n\ndef step5"),
        ("import torch\n", "import torch\nimport numpy as np\n"),  # an import: every statement again
        ("- 0", "- 1  # repairbot: ignore[exp-minus-one]"),
    ]
    async with session(options={"debounceMs": 0}) as client:
        uri = opened(client, tmp_path / "train.py", text)
        await published(client, uri, 1)
        for version, (old, new) in enumerate(changes, start=2):
            where, replacement, text = _replaced(text, old, new)
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(range=where, text=replacement)],
            ))
            after = await published(client, uri, version)
            fresh = opened(client, tmp_path / f"fresh{version}.py", text)
            assert after == await published(client, fresh, 1), (version, text)
            client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=fresh)))
        assert {d.code for d in after} == {"exp-minus-one", "log-one-plus"}


@pytest.mark.asyncio
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
async def test_fixes_equal_lint_fix_byte_for_byte(tmp_path: Path, newline: str) -> None:
    text = SCRIPT.replace("\n", newline)
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))  # a BOM, which the editor does not show
    expected = lint_fix(tmp_path / "train.py")
    assert expected != b"\xef\xbb\xbf" + text.encode("utf-8"), "lint --fix fixes the file"
    async with session() as client:
        uri = opened(client, path, text)
        await diagnostics(client, uri)
        everything = await actions(client, uri)
        fix_all = [a for a in everything if a.kind == "source.fixAll.repairbot"]
        assert len(fix_all) == 1 and fix_all[0].edit is not None and fix_all[0].edit.changes is not None
        result = applied(text, fix_all[0].edit.changes[uri])
        assert b"\xef\xbb\xbf" + result.encode("utf-8") == expected
        quick = {a.title: a for a in everything if a.kind == types.CodeActionKind.QuickFix}
        assert quick["Fix require-grad-typo"].is_preferred is True
        unsafe = [a for a in quick.values() if "exp-minus-one" in a.title]
        assert len(unsafe) == 1 and "unsafe" in unsafe[0].title and not unsafe[0].is_preferred
        assert unsafe[0].edit is not None and unsafe[0].edit.changes is not None
        assert "torch.expm1(x)" in applied(text, unsafe[0].edit.changes[uri])
        assert [a.kind for a in await actions(client, uri, only=["source.fixAll"])] == ["source.fixAll.repairbot"]
        # a range on the first line holds no finding: no quick fix, fix-all still offered
        assert [a.kind for a in await actions(client, uri, line=0, end=0)] == ["source.fixAll.repairbot"]


@pytest.mark.asyncio
async def test_mixed_line_endings_get_no_fix_as_lint_fix_writes_none(tmp_path: Path) -> None:
    text = SCRIPT.replace("\n", "\r\n", 2)
    async with session() as client:
        uri = opened(client, tmp_path / "train.py", text)
        assert len(await diagnostics(client, uri)) == 2
        assert list(await actions(client, uri)) == []


@pytest.mark.asyncio
async def test_config_exclude_settings_and_noqa(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.repairbot]\nexclude = ["legacy/"]\n')
    (tmp_path / "legacy").mkdir()
    quiet = SCRIPT.replace("p.require_grad = False", "p.require_grad = False  # repairbot: ignore[require-grad-typo]")
    async with session(options={"ignore": ["exp-minus-one"]}) as client:
        assert list(await diagnostics(client, opened(client, tmp_path / "legacy" / "old.py", SCRIPT))) == []
        assert [d.code for d in await diagnostics(client, opened(client, tmp_path / "train.py", SCRIPT))] == ["require-grad-typo"]
        assert list(await diagnostics(client, opened(client, tmp_path / "quiet.py", quiet))) == []
    async with session(options={"select": ["exp-minus-one"]}) as client:
        assert [d.code for d in await diagnostics(client, opened(client, tmp_path / "train.py", SCRIPT))] == ["exp-minus-one"]


@pytest.mark.asyncio
async def test_unparsable_file_gives_one_diagnostic_and_bad_requests_are_survived(tmp_path: Path) -> None:
    async with session() as client:
        found = await diagnostics(client, opened(client, tmp_path / "broken.py", "import torch\ndef f(:\n    torch.exp(x) - 1\n"))
        assert len(found) == 1 and found[0].code == "parse-error" and found[0].severity == types.DiagnosticSeverity.Error
        assert found[0].range.start.line == 1
        # written raw: the client's own types would refuse to send them
        for body in (
            json.dumps({"jsonrpc": "2.0", "id": 990, "method": "textDocument/codeAction", "params": {"textDocument": 3}}),
            json.dumps({"jsonrpc": "2.0", "id": 991, "method": "repairbot/nonsense", "params": {}}),
            '{"jsonrpc": "2.0", "id": 992, "method": ',
        ):
            data = body.encode()
            sent = client.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)  # type: ignore[union-attr]
            if sent is not None:
                await sent
        uri = opened(client, tmp_path / "train.py", SCRIPT)
        assert len(await diagnostics(client, uri)) == 2  # still serving


@pytest.mark.asyncio
async def test_notebook_cells_get_their_own_diagnostics(tmp_path: Path) -> None:
    notebook = (tmp_path / "train.ipynb").as_uri()
    cells = [
        ("vscode-notebook-cell:" + notebook.removeprefix("file:") + "#c0", "import torch\n", types.NotebookCellKind.Code),
        ("vscode-notebook-cell:" + notebook.removeprefix("file:") + "#c1", "# größe `torch.exp(x) - 1`\n", types.NotebookCellKind.Markup),
        ("vscode-notebook-cell:" + notebook.removeprefix("file:") + "#c2", "import torch\ny = 'ü' + str(torch.exp(x) - 1)\n", types.NotebookCellKind.Code),
    ]
    async with session(notebooks=True) as client:
        client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook, notebook_type="jupyter-notebook", version=1,
                cells=[types.NotebookCell(kind=kind, document=uri) for uri, _, kind in cells],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=uri, language_id="python" if kind == types.NotebookCellKind.Code else "markdown", version=1, text=text)
                for uri, text, kind in cells
            ],
        ))
        found = await diagnostics(client, cells[2][0])
        assert [d.code for d in found] == ["exp-minus-one"]
        assert (found[0].range.start.line, found[0].range.start.character) == (1, 14)
        await asyncio.sleep(0.5)
        assert list(client.diagnostics.get(cells[0][0], ())) == [] and cells[1][0] not in client.diagnostics


def test_without_pygls_the_server_exits_2_naming_the_extra() -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pygls', 'lsprotocol'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from repairbot.cli import main\n"
        "main(['server'])\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], env=ENV, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["repairbot: error: repairbot server needs pygls and lsprotocol: pip install 'repairbot[server]'"]


def test_server_is_listed_in_help() -> None:
    done = subprocess.run([sys.executable, "-m", "repairbot", "--help"], env=ENV, capture_output=True, text=True, timeout=60)
    assert any(line.split()[:1] == ["server"] for line in done.stdout.splitlines())


@pytest.mark.asyncio
async def test_severity_comes_from_the_rule(tmp_path: Path) -> None:
    async with session() as client:
        found = await diagnostics(client, opened(client, tmp_path / "train.py", SCRIPT))
    # require-grad-typo: a silent bug (Warning); exp-minus-one: accuracy (Information)
    assert {d.code: d.severity for d in found} == {
        "require-grad-typo": types.DiagnosticSeverity.Warning, "exp-minus-one": types.DiagnosticSeverity.Information,
    }


@pytest.mark.asyncio
async def test_pyproject_select_ignore_per_file_ignores_and_settings_override(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.repairbot]\nselect = ["require", "exp"]\nignore = ["exp-minus-one"]\n'
        '[tool.repairbot.per-file-ignores]\n"scripts/*.py" = ["require-grad-typo"]\n'
    )
    (tmp_path / "scripts").mkdir()
    async with session() as client:
        assert [d.code for d in await diagnostics(client, opened(client, tmp_path / "train.py", SCRIPT))] == ["require-grad-typo"]
        assert list(await diagnostics(client, opened(client, tmp_path / "scripts" / "run.py", SCRIPT))) == []
    # initializationOptions override the table as lint's --select does; per-file-ignores still apply
    async with session(options={"select": ["exp-minus-one", "require-grad-typo"]}) as client:
        assert sorted(d.code for d in await diagnostics(client, opened(client, tmp_path / "train.py", SCRIPT))) == [
            "exp-minus-one", "require-grad-typo",
        ]
        assert [d.code for d in await diagnostics(client, opened(client, tmp_path / "scripts" / "run.py", SCRIPT))] == ["exp-minus-one"]


@pytest.mark.asyncio
async def test_pyproject_is_read_again_on_save(tmp_path: Path) -> None:
    async with session() as client:
        uri = opened(client, tmp_path / "train.py", SCRIPT)
        assert len(await diagnostics(client, uri)) == 2
        (tmp_path / "pyproject.toml").write_text('[tool.repairbot]\nignore = ["exp-minus-one"]\n')
        client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        assert [d.code for d in await diagnostics(client, uri)] == ["require-grad-typo"]


@pytest.mark.asyncio
async def test_an_unknown_rule_in_pyproject_is_a_logged_warning(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.repairbot]\nignore = ["exp-minus-one", "no-such-rule"]\n')
    async with session() as client:
        found = await diagnostics(client, opened(client, tmp_path / "train.py", SCRIPT))
        assert [d.code for d in found] == ["require-grad-typo"]  # the known part of the table holds
        warnings = [m.message for m in client.log_messages if m.type == types.MessageType.Warning]
    assert len(warnings) == 1 and "no-such-rule is not a lint rule id or prefix" in warnings[0]


def notebook_cells(notebook: str, *sources: str) -> list[tuple[str, str]]:
    return [(f"vscode-notebook-cell:{notebook.removeprefix('file:')}#c{i}", text) for i, text in enumerate(sources)]


@pytest.mark.asyncio
async def test_notebook_magics_are_translated_as_lint_does(tmp_path: Path) -> None:
    path = tmp_path / "explore.ipynb"
    cells = notebook_cells(
        path.as_uri(),
        "%matplotlib inline\n!pip install torchvision\nimport torch\n",
        "x = torch.randn(3)\n%time y = torch.exp(x) - 1\n",
        "z = torch.exp(x) - 1\n",  # torch is imported in the first cell only
    )
    async with session(notebooks=True) as client:
        client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=path.as_uri(), notebook_type="jupyter-notebook", version=1,
                cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=uri) for uri, _ in cells],
            ),
            cell_text_documents=[types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text) for uri, text in cells],
        ))
        last = await diagnostics(client, cells[2][0])
        assert [(d.code, d.range.start.line, d.range.start.character) for d in last] == [("exp-minus-one", 0, 4)]
        fixes = await actions(client, cells[2][0], line=0, end=1)
        assert [a.title for a in fixes] == ["Fix exp-minus-one (unsafe fix: check that it keeps the meaning)"]
        assert fixes[0].edit is not None and fixes[0].edit.changes is not None
        assert applied(cells[2][1], fixes[0].edit.changes[cells[2][0]]) == "z = torch.expm1(x)\n"
        # `%time STMT` is linted as STMT (as lint does), but its fix would edit a line the cell
        # does not hold as the program has it: reported, no quick fix
        await asyncio.sleep(0.5)
        timed = client.diagnostics[cells[1][0]]
        assert [(d.code, d.range.start.line) for d in timed] == [("exp-minus-one", 1)]
        assert await actions(client, cells[1][0], line=1, end=2) == []
        assert list(client.diagnostics[cells[0][0]]) == []  # no parse error for the magics
    # the same notebook on disk gives `repairbot lint` the same findings
    import nbformat

    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(text) for _, text in cells])
    book.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nbformat.write(book, str(path))
    done = subprocess.run([sys.executable, "-m", "repairbot", "lint", "--format", "json", path.name], cwd=tmp_path,
                          env=ENV, capture_output=True, text=True, timeout=120, check=False)
    assert [(f["cell"], f["line"], f["rule"]) for f in json.loads(done.stdout)] == [(2, 2, "exp-minus-one"), (3, 1, "exp-minus-one")]


RECORDED_REPORT = ROOT / "tests" / "data" / "server" / "cnn_flatten_size.report.json"


async def hover(client: LanguageClient, uri: str, line: int) -> types.Hover | None:
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=4),
    ))


@pytest.mark.asyncio
async def test_hover_on_a_line_a_past_fix_changed_from_its_json_report(tmp_path: Path) -> None:
    report = json.loads(RECORDED_REPORT.read_text())
    (tmp_path / "train.py").write_bytes((ROOT / "fixtures" / "cnn_flatten_size" / "train.py").read_bytes())
    (tmp_path / "fix.diff").write_text(report["diff"])
    subprocess.run(["git", "apply", "fix.diff"], cwd=tmp_path, check=True, capture_output=True)
    fixed = (tmp_path / "train.py").read_text()
    fix = report["attempts"][0]["fix"]
    (tmp_path / ".repairbot").mkdir()
    (tmp_path / ".repairbot" / "last.json").write_text(RECORDED_REPORT.read_text())
    # the file has changed since the repair: two lines added above the fixed line
    text = "# notes\n# more notes\n" + fixed
    line = fix["line"] - 1 + 2
    async with session() as client:
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=(tmp_path / "train.py").as_uri(), language_id="python", version=1, text=text,
        )))
        uri = (tmp_path / "train.py").as_uri()
        shown = await hover(client, uri, line)
        assert shown is not None and isinstance(shown.contents, types.MarkupContent)
        assert shown.range is not None and shown.range.start.line == line
        value = shown.contents.value
        failure = report["attempts"][0]["failure"]
        assert failure["message"] in value and fix["summary"] in value
        assert "traced_input_shape=[2, 4096]" in value  # the evidence, as the report traced it
        assert "last.json" in value
        assert await hover(client, uri, line - 1) is None
        # the fixed line edited since: no longer the fix's line
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text.replace("64 * 8 * 8", "4096"))],
        ))
        assert await hover(client, uri, line) is None
    # a report the settings do not name is not read
    async with session(options={"reports": ["elsewhere/*.json"]}) as client:
        uri = opened(client, tmp_path / "train.py", text)
        assert await hover(client, uri, line) is None


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.asyncio
async def test_hover_from_the_fix_branch_of_a_real_repair(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_bytes((ROOT / "fixtures" / "cnn_flatten_size" / "train.py").read_bytes())
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for command in (["init", "-q"], ["add", "train.py"], ["commit", "-qm", "start"]):
        subprocess.run([*git, *command], cwd=tmp_path, check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "repairbot", "fix", "train.py"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    branch = subprocess.run(["git", "branch", "--list", "repairbot/fix-*", "--format=%(refname:short)"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["git", "checkout", "-q", branch], cwd=tmp_path, check=True, capture_output=True)
    text = (tmp_path / "train.py").read_text()
    diff = subprocess.run(["git", "diff", "-U0", "HEAD~1", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(added) == 1
    line = text.splitlines().index(added[0])
    async with session() as client:
        uri = opened(client, tmp_path / "train.py", text)
        shown = await hover(client, uri, line)
    assert shown is not None and isinstance(shown.contents, types.MarkupContent)
    value = shown.contents.value
    assert f"branch {branch}" in value
    assert "mat1 and mat2 shapes cannot be multiplied" in value and "(traced)" in value and "Changed nn.Linear" in value


class RawClient:
    """JSON-RPC written by hand over the server's stdio: an editor's client library will not send
    a malformed request, and a client that goes away does not shut the server down first."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, cwd: Path) -> RawClient:
        process = await asyncio.create_subprocess_exec(
            *SERVER, cwd=cwd, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        return cls(process)

    async def send(self, body: bytes | dict[str, Any]) -> None:
        data = body if isinstance(body, bytes) else json.dumps({"jsonrpc": "2.0", **body}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        await self.process.stdin.drain()

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        headers = await self.process.stdout.readuntil(b"\r\n\r\n")
        length = int(next(line for line in headers.decode().split("\r\n") if line.lower().startswith("content-length")).split(":")[1])
        message: dict[str, Any] = json.loads(await self.process.stdout.readexactly(length))
        return message

    async def answer(self, request_id: int | None) -> dict[str, Any]:
        """The next response to ``request_id`` (notifications and log messages passed over)."""
        async def wait() -> dict[str, Any]:
            while True:
                message = await self.receive()
                if "method" not in message and message.get("id") == request_id:
                    return message
        return await asyncio.wait_for(wait(), 60)

    async def initialize(self, root: Path) -> None:
        await self.send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}})
        assert "result" in await self.answer(1)
        await self.send({"method": "initialized", "params": {}})


@pytest.mark.asyncio
async def test_a_malformed_request_gets_an_error_response_and_the_server_goes_on(tmp_path: Path) -> None:
    client = await RawClient.start(tmp_path)
    await client.initialize(tmp_path)
    # params that are not a HoverParams
    await client.send({"id": 2, "method": "textDocument/hover", "params": {"textDocument": 3}})
    assert (await client.answer(2))["error"]["code"] == -32602  # Invalid Params
    # a method no one serves
    await client.send({"id": 3, "method": "repairbot/nonsense", "params": {}})
    assert (await client.answer(3))["error"]["code"] == -32601
    # a request for a document never opened
    await client.send({"id": 4, "method": "textDocument/codeAction", "params": {
        "textDocument": {"uri": (tmp_path / "never.py").as_uri()},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": []},
    }})
    assert set(await client.answer(4)) & {"result", "error"}
    # still serving: diagnostics for a document opened now, then a clean shutdown
    uri = (tmp_path / "train.py").as_uri()
    await client.send({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": SCRIPT,
    }}})
    async def published() -> dict[str, Any]:
        while True:
            message = await client.receive()
            if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                return message
    assert len((await asyncio.wait_for(published(), 60))["params"]["diagnostics"]) == 2
    await client.send({"id": 5, "method": "shutdown"})
    assert (await client.answer(5))["result"] is None
    await client.send({"method": "exit"})
    assert await asyncio.wait_for(client.process.wait(), 60) == 0


@pytest.mark.asyncio
async def test_the_client_going_away_ends_the_server_without_a_traceback(tmp_path: Path) -> None:
    client = await RawClient.start(tmp_path)
    await client.initialize(tmp_path)
    uri = (tmp_path / "train.py").as_uri()
    await client.send({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": SCRIPT,
    }}})
    assert client.process.stdin is not None
    client.process.stdin.close()  # the editor is gone, without shutdown or exit
    assert client.process.stderr is not None
    returncode = await asyncio.wait_for(client.process.wait(), 60)
    errors = (await client.process.stderr.read()).decode()
    assert returncode == 0 and "Traceback" not in errors, errors
