"""``repairbot server`` driven by a real LSP client (pytest-lsp) over stdio, as an editor does."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pygls")
pytest.importorskip("pytest_lsp")

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

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


@asynccontextmanager
async def session(
    encodings: Sequence[str] | None = None, options: dict[str, Any] | None = None, notebooks: bool = False,
) -> AsyncIterator[LanguageClient]:
    client = make_test_lsp_client()
    await client.start_io(*SERVER, env=ENV)
    capabilities = client_capabilities("visual-studio-code")
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


async def diagnostics(client: LanguageClient, uri: str, timeout: float = 20) -> Sequence[types.Diagnostic]:
    """The next diagnostics published for ``uri``."""
    client.diagnostics.pop(uri, None)
    async def wait() -> Sequence[types.Diagnostic]:
        while uri not in client.diagnostics:
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
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
