"""The pygls server: lint on open, change (debounced) and save, publish the findings, offer
their fixes as code actions.

Linting runs in a worker thread so that the server keeps answering while it works; a result
for a version of the document the editor has already replaced is thrown away. The engine is
``repairbot.lint.engine.lint_bytes``, the one ``repairbot lint`` runs, so the findings, the
noqa comments and the fixed text are the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace.position_codec import PositionCodec

from repairbot import __version__, registry
from repairbot.lint.engine import FileResult, FixLevel, lint_bytes, package_of, uniform_line_endings
from repairbot.lint.files import config_for
from repairbot.lint.rule import LintRule
from repairbot.server.convert import FIX_ALL_KIND, diagnostic, lsp_lines, minimal_edit
from repairbot.types import Applicability, BadInput

DEFAULT_DEBOUNCE_MS = 150
_BOM = "\ufeff"


@dataclass(frozen=True)
class Settings:
    """``initializationOptions``: ``select``/``ignore`` (rule ids, as ``lint``'s options),
    ``debounceMs`` (the wait after a change), ``docsUrl`` (the rule page's address)."""

    rules: tuple[type[LintRule], ...]
    debounce_s: float = DEFAULT_DEBOUNCE_MS / 1000
    docs_url: str | None = None

    @classmethod
    def of(cls, options: Any) -> tuple[Settings, str | None]:
        """The settings and, where some are wrong, the one line that says so."""
        options = options if isinstance(options, dict) else {}
        try:
            rules = registry.select_rules(
                registry.all_rules(), _strings(options.get("select")), _strings(options.get("ignore")),
            )
            problem = None
        except BadInput as error:
            rules, problem = registry.all_rules(), f"repairbot: {error}; every rule is used"
        debounce = options.get("debounceMs", DEFAULT_DEBOUNCE_MS)
        if not isinstance(debounce, (int, float)) or debounce < 0:
            debounce, problem = DEFAULT_DEBOUNCE_MS, "repairbot: debounceMs must be a number of milliseconds"
        docs = options.get("docsUrl")
        return cls(tuple(rules), debounce / 1000, docs if isinstance(docs, str) else None), problem


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()


def lint_text(text: str, path: Path, rules: Sequence[type[LintRule]], level: FixLevel, edits: bool = False) -> FileResult:
    """The engine's result for a document's text (without a BOM) as if it were the file ``path``;
    ``edits``: each finding's fix as a text edit (it costs a print of the module per finding)."""
    return lint_bytes(text.encode("utf-8"), path, path.name, rules, level, edits, package_of(path.parent))


class RepairbotServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "repairbot", __version__,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[types.NotebookDocumentFilterWithCells(
                    cells=[types.NotebookCellLanguage(language="python")], notebook="*",
                )],
                save=True,
            ),
        )
        self.settings, _ = Settings.of(None)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repairbot-lint")
        self.pending: dict[str, asyncio.Task[None]] = {}

    @property
    def codec(self) -> PositionCodec:
        return self.workspace.position_codec

    def file_of(self, uri: str) -> Path | None:
        """The file a document (or a notebook cell) stands for, for the config and the package."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        path = to_fs_path(notebook.uri if notebook is not None else uri)
        return Path(path) if path else None

    def cell_uris(self, notebook_uri: str) -> list[str]:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return []
        return [cell.document for cell in notebook.cells if cell.kind == types.NotebookCellKind.Code]

    def diagnostics_of(self, uri: str, text: str) -> list[types.Diagnostic]:
        path = self.file_of(uri) or Path("untitled.py")
        try:
            if config_for(path.absolute().parent).excludes(path.absolute(), is_dir=False):
                return []
        except BadInput as error:  # an unreadable pyproject.toml: say so where the user looks
            return [types.Diagnostic(
                range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                message=str(error), severity=types.DiagnosticSeverity.Error, source="repairbot",
            )]
        body, bom = (text[1:], True) if text.startswith(_BOM) else (text, False)
        result = lint_text(body, path, self.settings.rules, FixLevel.NONE)
        lines = lsp_lines(body)
        found = [diagnostic(f, lines, self.codec, self.settings.docs_url) for f in result.findings]
        if bom:  # the editor kept the BOM as a character of the first line
            shift = self.codec.client_num_units(_BOM)
            for item in found:
                for position in (item.range.start, item.range.end):
                    position.character += shift if position.line == 0 else 0
        if result.error:
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"repairbot: {result.error}"))
        return found

    async def lint_now(self, uri: str) -> None:
        """Lint the document's current text in the worker and publish, unless it changed meanwhile."""
        document = self.workspace.get_text_document(uri)
        version, text = document.version, document.source
        found = await asyncio.get_running_loop().run_in_executor(self.executor, self.diagnostics_of, uri, text)
        if self.workspace.get_text_document(uri).version == version:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=version))

    def schedule(self, uri: str, delay: float) -> None:
        """Lint after ``delay`` seconds, replacing a lint already waiting for this document."""
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()

        async def later() -> None:
            try:
                if delay:
                    await asyncio.sleep(delay)
                await self.lint_now(uri)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a bug of ours must not take the server down
                self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"repairbot: {error!r}"))
            finally:
                if self.pending.get(uri) is task:
                    del self.pending[uri]

        task = asyncio.get_running_loop().create_task(later())
        self.pending[uri] = task

    def fix_edits(self, uri: str, text: str, fix_range: types.Range | None) -> list[types.CodeAction]:
        """The quick fixes of the findings in ``fix_range``, and fix-all (None: fix-all alone)."""
        path = self.file_of(uri) or Path("untitled.py")
        body, bom = (text[1:], _BOM) if text.startswith(_BOM) else (text, "")
        data = body.encode("utf-8")
        if not uniform_line_endings(data):
            return []  # `lint --fix` leaves such a file as it is
        result = lint_text(body, path, self.settings.rules, FixLevel.NONE, edits=fix_range is not None)
        lines = lsp_lines(body)
        actions: list[types.CodeAction] = []
        for finding in result.findings if fix_range is not None else ():
            if finding.edit is None or finding.fix is Applicability.NONE:
                continue
            shown = diagnostic(finding, lines, self.codec, self.settings.docs_url)
            if fix_range is None or not _touches(shown.range, fix_range):
                continue
            edit = minimal_edit(text, bom + finding.edit.apply(body), self.codec)
            if edit is None:
                continue
            safe = finding.fix is Applicability.SAFE
            title = f"Fix {finding.rule}" if safe else f"Fix {finding.rule} (unsafe fix: check that it keeps the meaning)"
            actions.append(types.CodeAction(
                title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[shown], is_preferred=safe,
                edit=types.WorkspaceEdit(changes={uri: [edit]}),
            ))
        if any(f.fix is Applicability.SAFE for f in result.findings):
            fixed = lint_text(body, path, self.settings.rules, FixLevel.SAFE)
            if fixed.new_data is not None:
                edit = minimal_edit(text, bom + fixed.new_data.decode("utf-8"), self.codec)
                if edit is not None:
                    actions.append(types.CodeAction(
                        title="Fix all safe repairbot findings in this file", kind=FIX_ALL_KIND,
                        edit=types.WorkspaceEdit(changes={uri: [edit]}),
                    ))
        return actions


def _touches(a: types.Range, b: types.Range) -> bool:
    start = (a.start.line, a.start.character)
    end = (a.end.line, a.end.character)
    return start <= (b.end.line, b.end.character) and (b.start.line, b.start.character) <= end


def build_server() -> RepairbotServer:
    server = RepairbotServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: RepairbotServer, params: types.InitializeParams) -> None:
        ls.settings, problem = Settings.of(params.initialization_options)
        if problem:
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, problem))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: RepairbotServer, params: types.DidOpenTextDocumentParams) -> None:
        if ls.workspace.get_notebook_document(cell_uri=params.text_document.uri) is None:
            ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: RepairbotServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.settings.debounce_s)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: RepairbotServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: RepairbotServer, params: types.DidCloseTextDocumentParams) -> None:
        waiting = ls.pending.pop(params.text_document.uri, None)
        if waiting is not None:
            waiting.cancel()
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: RepairbotServer, params: types.DidOpenNotebookDocumentParams) -> None:
        for uri in ls.cell_uris(params.notebook_document.uri):
            ls.schedule(uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: RepairbotServer, params: types.DidChangeNotebookDocumentParams) -> None:
        changed: set[str] = set()
        cells = params.change.cells
        if cells is not None:
            changed.update(item.document.uri for item in cells.text_content or ())
            if cells.structure is not None:
                changed.update(item.uri for item in cells.structure.did_open or ())
        for uri in ls.cell_uris(params.notebook_document.uri):
            if uri in changed:
                ls.schedule(uri, ls.settings.debounce_s)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: RepairbotServer, params: types.DidSaveNotebookDocumentParams) -> None:
        for uri in ls.cell_uris(params.notebook_document.uri):
            ls.schedule(uri, 0)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    async def code_action(ls: RepairbotServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        only = params.context.only
        wants_fixes = only is None or any(types.CodeActionKind.QuickFix.value.startswith(kind) for kind in only)
        wants_all = only is None or any(FIX_ALL_KIND.startswith(kind) for kind in only)
        if not (wants_fixes or wants_all):
            return []
        text = ls.workspace.get_text_document(params.text_document.uri).source
        actions = await asyncio.get_running_loop().run_in_executor(
            ls.executor, ls.fix_edits, params.text_document.uri, text, params.range if wants_fixes else None,
        )
        return [action for action in actions if wants_all or action.kind != FIX_ALL_KIND]

    return server
