"""The pygls server: lint on open, change (debounced) and save, publish the findings, offer
their fixes as code actions.

Linting runs in a worker thread so that the server keeps answering while it works; a result
for a version of the document the editor has already replaced is thrown away. The engine is
``repairbot.lint.engine.lint_bytes``, the one ``repairbot lint`` runs, so the findings, the
noqa comments and the fixed text are the same; a document's diagnostics after a change come
from its ``repairbot.lint.incremental.IncrementalLinter``, which redoes only what the change
can alter and gives ``lint_bytes``'s result exactly.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace.position_codec import PositionCodec

from repairbot import __version__, registry
from repairbot.lint.engine import (
    FileResult,
    Finding,
    FixLevel,
    lint_bytes,
    package_of,
    place_findings,
    uniform_line_endings,
)
from repairbot.lint.files import config_for
from repairbot.lint.incremental import IncrementalLinter
from repairbot.lint.rule import LintRule
from repairbot.lint.selection import Layer, unknown
from repairbot.notebook import Location, Notebook, from_cells
from repairbot.output.diff import decode
from repairbot.server.convert import FIX_ALL_KIND, diagnostic, lsp_lines, minimal_edit
from repairbot.server.dry_run import (
    ACTION_KIND,
    COMMAND,
    DEFAULT_TIMEOUT_S,
    DryRunner,
    runs_as_script,
)
from repairbot.server.history import (
    DEFAULT_REPORTS,
    FixHistory,
    PastFix,
    cell_lines_of,
    concerns,
    line_of,
)
from repairbot.types import Applicability, BadInput

T = TypeVar("T")
DEFAULT_DEBOUNCE_MS = 150
REVIEW = "repairbot.fixDryRun"  # the change annotation of a dry run's edit
_BOM = "\ufeff"


@dataclass(frozen=True)
class Settings:
    """``initializationOptions``: ``select``/``ignore`` (rule ids or prefixes, as ``lint``'s
    options: they override the ``[tool.repairbot]`` table's choice as the command line does),
    ``debounceMs`` (the wait after a change), ``docsUrl`` (the rule page's address),
    ``reports`` (globs, under the workspace's and the repository's top folders, of the JSON
    reports of past ``repairbot fix --json`` runs that hovers read), ``fixBranches``
    (whether hovers read the commits of the ``repairbot/fix-*`` branches too; default true),
    ``dryRunPython`` (the interpreter ``repairbot.fixDryRun`` runs the script with; default
    the server's) and ``dryRunTimeoutS`` (its time limit; default 600 s)."""

    rules: Layer = field(default_factory=Layer)
    debounce_s: float = DEFAULT_DEBOUNCE_MS / 1000
    docs_url: str | None = None
    reports: tuple[str, ...] = DEFAULT_REPORTS
    fix_branches: bool = True
    dry_run_python: str | None = None
    dry_run_timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def of(cls, options: Any) -> tuple[Settings, str | None]:
        """The settings and, where some are wrong, the one line that says so."""
        options = options if isinstance(options, dict) else {}
        select = options.get("select")
        layer = Layer(_strings(select) or None, _strings(options.get("ignore")))
        wrong = unknown(layer, (rule.ID for rule in registry.all_rules()))
        problem = f"repairbot: unknown lint rule id: {', '.join(wrong)} (see docs/lint-rules.md); ignored" if wrong else None
        debounce = options.get("debounceMs", DEFAULT_DEBOUNCE_MS)
        if not isinstance(debounce, (int, float)) or debounce < 0:
            debounce, problem = DEFAULT_DEBOUNCE_MS, "repairbot: debounceMs must be a number of milliseconds"
        docs = options.get("docsUrl")
        reports = _strings(options.get("reports")) if "reports" in options else DEFAULT_REPORTS
        branches = options.get("fixBranches", True)
        python = options.get("dryRunPython")
        timeout = options.get("dryRunTimeoutS", DEFAULT_TIMEOUT_S)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            timeout, problem = DEFAULT_TIMEOUT_S, "repairbot: dryRunTimeoutS must be a number of seconds"
        return cls(
            layer, debounce / 1000, docs if isinstance(docs, str) else None, reports,
            branches if isinstance(branches, bool) else True,
            dry_run_python=python if isinstance(python, str) else None, dry_run_timeout_s=float(timeout),
        ), problem


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()


def lint_text(text: str, path: Path, rules: Sequence[type[LintRule]], level: FixLevel, edits: bool = False) -> FileResult:
    """The engine's result for a document's text (without a BOM) as if it were the file ``path``;
    ``edits``: each finding's fix as a text edit (it costs a print of the module per finding)."""
    return lint_bytes(text.encode("utf-8"), path, path.name, rules, level, edits, package_of(path.parent))


class _Protocol(LanguageServerProtocol):
    """pygls meets a request whose params do not deserialize with a log line and a message to
    the user, but no response: the client would wait for one forever. This answers it with the
    JSON-RPC error (Invalid Params) as well."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and "method" in data:
                self._send_response(data["id"], error=error.to_response_error())
            raise


class RepairbotServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "repairbot", __version__, protocol_cls=_Protocol,
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
        self.warned: set[str] = set()
        # each open document's last lint, which its next one builds on (the worker's; a close drops it)
        self.linters: dict[str, IncrementalLinter] = {}
        # log messages of the worker thread, sent from the event loop (the writer is not thread-safe)
        self.logs: list[types.LogMessageParams] = []
        self.history = FixHistory()  # the hovers' past fixes, read again only when they change
        self.dry_runner = DryRunner()
        atexit.register(self.dry_runner.stop)  # a client gone during a dry run leaves none of it running

    def rules_for(self, path: Path) -> tuple[type[LintRule], ...]:
        """The rules of a file: its ``[tool.repairbot]`` table, the settings, its per-file-ignores
        (a selector of the table that names no rule is logged, once, and passed over)."""
        every = registry.all_rules()
        config = config_for(path.absolute().parent)
        for problem in config.problems(every):
            if problem not in self.warned:
                self.warned.add(problem)
                self.logs.append(types.LogMessageParams(types.MessageType.Warning, f"repairbot: {problem}"))
        return config.rules_for(path.absolute(), every, self.settings.rules)

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

    def excluded(self, path: Path) -> list[types.Diagnostic] | None:
        """``[]`` for a file that ``exclude`` leaves out, one diagnostic for a pyproject.toml that
        cannot be read, None for a file to lint."""
        try:
            return [] if config_for(path.absolute().parent).excludes(path.absolute(), is_dir=False) else None
        except BadInput as error:  # an unreadable pyproject.toml: say so where the user looks
            return [types.Diagnostic(
                range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                message=str(error), severity=types.DiagnosticSeverity.Error, source="repairbot",
            )]

    def diagnostics_of(self, uri: str, text: str) -> list[types.Diagnostic]:
        path = self.file_of(uri) or Path("untitled.py")
        skip = self.excluded(path)
        if skip is not None:
            return skip
        body, bom = (text[1:], True) if text.startswith(_BOM) else (text, False)
        result = self.linter_for(uri, path).lint(body.encode("utf-8"))
        lines = lsp_lines(body)
        found = [diagnostic(f, lines, self.codec, self.settings.docs_url) for f in result.findings]
        if bom:  # the editor kept the BOM as a character of the first line
            shift = self.codec.client_num_units(_BOM)
            for item in found:
                for position in (item.range.start, item.range.end):
                    position.character += shift if position.line == 0 else 0
        self.log_error(result)
        return found

    def linter_for(self, uri: str, path: Path) -> IncrementalLinter:
        """The document's incremental linter (as ``lint_text`` lints it); a new one where its
        path or its rules changed (a pyproject.toml read again, new settings)."""
        rules, package = self.rules_for(path), package_of(path.parent)
        linter = self.linters.get(uri)
        if linter is None or (linter.path, linter.rules, linter.package) != (path, rules, package):
            linter = self.linters[uri] = IncrementalLinter(path, path.name, rules, package)
        return linter

    def log_error(self, result: FileResult) -> None:
        if result.error:
            self.logs.append(types.LogMessageParams(types.MessageType.Error, f"repairbot: {result.error}"))

    def lint_cells(self, notebook_uri: str, cells: Sequence[tuple[str, str]], edits: bool) -> tuple[Notebook, dict[str, list[Finding]]]:
        """The findings of a notebook document's code cells (uri, text), linted as ``repairbot lint``
        lints the ``.ipynb``: one program of every cell, IPython lines translated, the findings
        placed back in their cells."""
        path = Path(to_fs_path(notebook_uri) or "untitled.ipynb")
        program = from_cells(path, [text for _, text in cells])
        result = lint_bytes(program.program_bytes, path, path.name, self.rules_for(path), FixLevel.NONE, edits,
                            package_of(path.absolute().parent))
        self.log_error(result)
        found: dict[str, list[Finding]] = {uri: [] for uri, _ in cells}
        for finding in place_findings(program, result.findings):
            if finding.cell is not None:
                found[cells[finding.cell - 1][0]].append(finding)
        return program, found

    def notebook_diagnostics(self, notebook_uri: str, cells: Sequence[tuple[str, str]]) -> dict[str, list[types.Diagnostic]]:
        path = Path(to_fs_path(notebook_uri) or "untitled.ipynb")
        skip = self.excluded(path)
        if skip is not None:
            return {uri: skip for uri, _ in cells}
        _, found = self.lint_cells(notebook_uri, cells, edits=False)
        texts = dict(cells)
        return {
            uri: [diagnostic(f, lsp_lines(texts[uri]), self.codec, self.settings.docs_url) for f in findings]
            for uri, findings in found.items()
        }

    def code_cells(self, notebook_uri: str) -> list[tuple[str, str]]:
        """The notebook's code cells as (uri, current text)."""
        return [(uri, self.workspace.get_text_document(uri).source) for uri in self.cell_uris(notebook_uri)]

    async def lint_now(self, uri: str) -> None:
        """Lint the document's (or the notebook's) current text in the worker and publish, unless
        it changed meanwhile."""
        notebook = self.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is not None:
            notebook_version, cells = notebook.version, self.code_cells(uri)
            published = await self.in_worker(self.notebook_diagnostics, uri, cells)
            current = self.workspace.get_notebook_document(notebook_uri=uri)
            if current is not None and current.version == notebook_version:
                for cell, found in published.items():
                    self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell, diagnostics=found))
            return
        document = self.workspace.get_text_document(uri)
        version, text = document.version, document.source
        found = await self.in_worker(self.diagnostics_of, uri, text)
        if self.workspace.get_text_document(uri).version == version:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=version))

    async def in_worker(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the lint thread; then the log messages it left are sent."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)
        finally:
            while self.logs:
                self.window_log_message(self.logs.pop(0))

    def forget(self, uri: str, shown: Sequence[str]) -> None:
        """A document closed: no lint of it waits any longer, and ``shown`` (its documents, or a
        notebook's cells) lose their diagnostics."""
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        self.linters.pop(uri, None)
        for document in shown:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=document, diagnostics=[]))

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

    def quick_fix(
        self, uri: str, finding: Finding, text: str, fixed: str, lines: Sequence[str], fix_range: types.Range,
    ) -> types.CodeAction | None:
        """The code action of one finding's fix (``fixed``: the document's text after it), if
        the finding is in ``fix_range``."""
        shown = diagnostic(finding, lines, self.codec, self.settings.docs_url)
        if not _touches(shown.range, fix_range):
            return None
        edit = minimal_edit(text, fixed, self.codec)
        if edit is None:
            return None
        safe = finding.fix is Applicability.SAFE
        title = f"Fix {finding.rule}" if safe else f"Fix {finding.rule} (unsafe fix: check that it keeps the meaning)"
        return types.CodeAction(
            title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[shown], is_preferred=safe,
            edit=types.WorkspaceEdit(changes={uri: [edit]}),
        )

    def fix_edits(self, uri: str, text: str, fix_range: types.Range | None) -> list[types.CodeAction]:
        """The quick fixes of the findings in ``fix_range``, and fix-all (None: fix-all alone)."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return self.cell_fixes(notebook.uri, uri, fix_range) if fix_range is not None else []
        path = self.file_of(uri) or Path("untitled.py")
        body, bom = (text[1:], _BOM) if text.startswith(_BOM) else (text, "")
        data = body.encode("utf-8")
        if not uniform_line_endings(data):
            return []  # `lint --fix` leaves such a file as it is
        result = lint_text(body, path, self.rules_for(path), FixLevel.NONE, edits=fix_range is not None)
        lines = lsp_lines(body)
        actions: list[types.CodeAction] = []
        for finding in result.findings if fix_range is not None else ():
            if finding.edit is not None and finding.fix is not Applicability.NONE and fix_range is not None:
                action = self.quick_fix(uri, finding, text, bom + finding.edit.apply(body), lines, fix_range)
                actions.extend([action] if action is not None else [])
        if any(f.fix is Applicability.SAFE for f in result.findings):
            fixed = lint_text(body, path, self.rules_for(path), FixLevel.SAFE)
            if fixed.new_data is not None:
                edit = minimal_edit(text, bom + fixed.new_data.decode("utf-8"), self.codec)
                if edit is not None:
                    actions.append(types.CodeAction(
                        title="Fix all safe repairbot findings in this file", kind=FIX_ALL_KIND,
                        edit=types.WorkspaceEdit(changes={uri: [edit]}),
                    ))
        return actions

    def cell_fixes(self, notebook_uri: str, uri: str, fix_range: types.Range) -> list[types.CodeAction]:
        """The quick fixes in one code cell, from the notebook's program as ``lint`` fixes it; none
        that touches an IPython line (the program holds its translation there, not the cell's
        text). No fix-all: a fix may move lines between cells of the program."""
        cells = self.code_cells(notebook_uri)
        if not uniform_line_endings("".join(text for _, text in cells).encode("utf-8")):
            return []
        program, found = self.lint_cells(notebook_uri, cells, edits=True)
        text = dict(cells)[uri]
        actions: list[types.CodeAction] = []
        for finding in found.get(uri, ()):
            edit = finding.edit
            if edit is None or finding.fix is Applicability.NONE or finding.cell is None:
                continue
            if any(program.skipped_at(finding.cell, line) for line in range(edit.line, edit.end_line + 1)):
                continue
            action = self.quick_fix(uri, finding, text, edit.apply(text), lsp_lines(text), fix_range)
            actions.extend([action] if action is not None else [])
        return actions


    def past_fixes(self, path: Path) -> list[PastFix]:
        """The verified fixes of past repairs of this file (see ``FixHistory.fixes``)."""
        workspace = Path(self.workspace.root_path) if self.workspace.root_path else None
        every = self.history.fixes(path.absolute().parent, workspace, self.settings.reports, self.settings.fix_branches)
        return [fix for fix in every if concerns(fix, path)]

    def hover_at(self, uri: str, text: str, line: int) -> types.Hover | None:
        """What past repairs say of a line they changed (None: no repair changed it)."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        path = self.file_of(uri)
        if path is None:
            return None
        if notebook is not None:
            cells = self.code_cells(notebook.uri)
            uris = [cell for cell, _ in cells]
            if uri not in uris:
                return None
            program = from_cells(path, [source for _, source in cells])
            here = Location(uris.index(uri) + 1, line + 1)
            shown = [fix.markdown() for fix in self.past_fixes(path) if here in cell_lines_of(fix, program)]
        else:
            shown = [fix.markdown() for fix in self.past_fixes(path) if line in line_of(fix, lsp_lines(text))]
        if not shown:
            return None
        lines = lsp_lines(text)
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(shown)),
            range=types.Range(
                start=types.Position(line=line, character=0),
                end=types.Position(line=line, character=self.codec.client_num_units(lines[line])),
            ),
        )

    async def review_dry_run(self, arguments: Sequence[Any]) -> dict[str, Any]:
        """``repairbot.fixDryRun``: ``repairbot fix --dry-run`` on the saved ``.py`` file that the
        first argument names (its URI, or ``{"uri": URI}``); its result is shown
        (``window/showMessage``) and its fix, if any, sent as a ``workspace/applyEdit`` for
        review. The run is in a thread of its own: the server goes on answering meanwhile."""
        first = arguments[0] if arguments else None
        uri = first.get("uri") if isinstance(first, dict) else first
        path = self.file_of(uri) if isinstance(uri, str) and uri.startswith("file:") else None
        if path is None or path.suffix != ".py" or not path.is_file():
            return self.tell(types.MessageType.Error, f"{COMMAND} takes the URI of a saved .py file")
        assert isinstance(uri, str)
        unsaved = self.unsaved([uri])
        if unsaved:
            return self.tell(types.MessageType.Error, f"{unsaved}: save it first (the dry run runs the file on disk)")
        result = await in_thread(self.dry_runner.run, path.absolute(), self.settings.dry_run_python,
                                 self.settings.dry_run_timeout_s)
        answer: dict[str, Any] = {"status": result.status, "stop_reason": result.stop_reason, "applied": False}
        uris = {file: uri if file == path.absolute() else file.as_uri() for file in result.fixed}
        unsaved = self.unsaved(list(uris.values()))
        if unsaved:  # edited meanwhile: the fix is of the file on disk
            return self.tell(types.MessageType.Warning, f"{result.message} But {unsaved} has changed since: run it again",
                             answer)
        kind = types.MessageType.Info if result.fixed else types.MessageType.Warning
        self.tell(types.MessageType.Error if result.status == "error" else kind, result.message)
        if result.fixed:
            edit = self.review_edit(result.fixed, uris, result.message)
            response = await self.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=edit, label="repairbot fix --dry-run"),
            )
            answer["applied"] = response.applied
        return answer

    def tell(self, kind: types.MessageType, message: str, answer: dict[str, Any] | None = None) -> dict[str, Any]:
        self.window_show_message(types.ShowMessageParams(kind, message))
        return answer or {"status": "error", "stop_reason": None, "applied": False}

    def unsaved(self, uris: Sequence[str]) -> str | None:
        """The name of the first of these documents that is open with a text the file on disk
        does not have (None: every one is as saved)."""
        for uri in uris:
            document = self.workspace.text_documents.get(uri)
            path = self.file_of(uri)
            if document is None or path is None:
                continue
            try:
                saved = decode(path.read_bytes())
            except (OSError, SyntaxError, UnicodeDecodeError):
                return path.name
            if document.source.removeprefix(_BOM) != saved:
                return path.name
        return None

    def review_edit(self, fixed: Mapping[Path, str], uris: Mapping[Path, str], message: str) -> types.WorkspaceEdit:
        """Each file's fixed text as the one edit of its document (open, or as on disk); where the
        client supports change annotations, each edit needs the user's confirmation (VS Code
        shows it in its refactor preview) and an open document's edit holds for its version."""
        edits: dict[str, types.TextEdit] = {}
        for file, after in fixed.items():
            document = self.workspace.text_documents.get(uris[file])
            text = document.source if document is not None else decode(file.read_bytes())
            edit = minimal_edit(text, (_BOM if text.startswith(_BOM) else "") + after, self.codec)
            if edit is not None:
                edits[uris[file]] = edit
        workspace = self.client_capabilities.workspace
        support = workspace.workspace_edit if workspace is not None else None
        if support is None or not support.document_changes or support.change_annotation_support is None:
            return types.WorkspaceEdit(changes={uri: [edit] for uri, edit in edits.items()})
        versions = {uri: document.version for uri, document in self.workspace.text_documents.items()}
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=versions.get(uri)),
                    edits=[types.AnnotatedTextEdit(range=edit.range, new_text=edit.new_text, annotation_id=REVIEW)],
                )
                for uri, edit in edits.items()
            ],
            change_annotations={REVIEW: types.ChangeAnnotation(
                label="repairbot fix --dry-run", needs_confirmation=True, description=message,
            )},
        )


async def in_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a daemon thread of its own: a dry run takes minutes (the lint
    worker stays free), and a server whose client has gone must not wait for it to end."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result = function(*args)
        except BaseException as error:  # handed to the awaiting coroutine
            loop.call_soon_threadsafe(settle, None, error)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name="repairbot-dry-run", daemon=True).start()
    return await future


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
            config_for.cache_clear()  # pyproject.toml is read again on open and save
            ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: RepairbotServer, params: types.HoverParams) -> types.Hover | None:
        text = ls.workspace.get_text_document(params.text_document.uri).source
        return await ls.in_worker(ls.hover_at, params.text_document.uri, text, params.position.line)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: RepairbotServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.settings.debounce_s)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: RepairbotServer, params: types.DidSaveTextDocumentParams) -> None:
        config_for.cache_clear()
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: RepairbotServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri, [params.text_document.uri])

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: RepairbotServer, params: types.DidOpenNotebookDocumentParams) -> None:
        config_for.cache_clear()
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: RepairbotServer, params: types.DidChangeNotebookDocumentParams) -> None:
        # a cell's imports and loops reach the cells after it: the notebook is linted as one program
        ls.schedule(params.notebook_document.uri, ls.settings.debounce_s)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: RepairbotServer, params: types.DidSaveNotebookDocumentParams) -> None:
        config_for.cache_clear()
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: RepairbotServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.forget(params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents])

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND, ACTION_KIND]),
    )
    async def code_action(ls: RepairbotServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        only = params.context.only
        wants_fixes = only is None or any(types.CodeActionKind.QuickFix.value.startswith(kind) for kind in only)
        wants_all = only is None or any(FIX_ALL_KIND.startswith(kind) for kind in only)
        wants_review = only is None or any(ACTION_KIND.startswith(kind) for kind in only)
        if not (wants_fixes or wants_all or wants_review):
            return []
        uri = params.text_document.uri
        text = ls.workspace.get_text_document(uri).source
        actions: list[types.CodeAction] = []
        if wants_fixes or wants_all:
            found = await ls.in_worker(ls.fix_edits, uri, text, params.range if wants_fixes else None)
            actions = [action for action in found if wants_all or action.kind != FIX_ALL_KIND]
        path = ls.file_of(uri)
        is_script = ls.workspace.get_notebook_document(cell_uri=uri) is None and path is not None and path.suffix == ".py"
        if wants_review and is_script and await ls.in_worker(runs_as_script, text):
            title = "Run repairbot fix --dry-run on this script (its fix as an edit to review)"
            actions.append(types.CodeAction(
                title=title, kind=ACTION_KIND, command=types.Command(title=title, command=COMMAND, arguments=[uri]),
            ))
        return actions

    @server.command(COMMAND)
    async def fix_dry_run(ls: RepairbotServer, *arguments: Any) -> dict[str, Any]:
        return await ls.review_dry_run(arguments)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: RepairbotServer, params: None) -> None:
        ls.dry_runner.stop()

    return server
