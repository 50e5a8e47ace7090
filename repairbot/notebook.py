"""Jupyter notebooks as programs: run, located, fixed and linted cell by cell.

A notebook (``.ipynb``) is read and validated with nbformat, then turned into one Python
program: its code cells in order, one program line per cell line, so that every program line
maps back to ``(cell, line)``. IPython syntax has no meaning for plain Python: a magic or
shell line (``%matplotlib inline``, ``!pip install ...``) becomes a ``pass`` at its own
indentation (the line count is kept), ``%time STMT``/``%timeit STMT`` become ``STMT``, ``%env``
and ``%cd`` their ``os`` calls, a ``%%time`` cell runs its body, and a cell of another
language (``%%bash``, ``%%writefile`` ...) is skipped whole; ``skipped`` lists each for the
report. ``display(...)`` is defined when a cell uses it (a prelude line mapped to no cell).

Cells are numbered as ruff numbers them: ``cell 1`` is the first code cell (markdown and raw
cells are not counted), lines within a cell from 1.

Writing back: nbformat re-serialises the whole JSON (its indentation, key order, escaping of
non-ASCII and the layout of outputs are its own, not necessarily the file's), so it cannot
keep the bytes of a notebook written by another tool or version. A fix therefore splices new
``"source"`` JSON values into the original bytes: the positions of every code cell's
``source`` value are found by a scan of the JSON text (the standard library's JSON string
scanner, so escapes are read exactly), unchanged lines keep their own JSON tokens, and every
other byte (outputs, execution counts, metadata, layout) stays as it was.
"""

from __future__ import annotations

import difflib
import io
import json
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from repairbot.output.diff import split_lines  # at "\n" only, as Python counts lines
from repairbot.types import BadInput

SUFFIX = ".ipynb"
# One physical line, so that the cells' lines keep their numbers past it.
DISPLAY_PRELUDE = "def display(*objs, **kwargs): print(*objs)  # repairbot: IPython's display outside a kernel\n"

# Cell magics whose body is Python that runs as it is (the magic only times or captures it).
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
_LINE_MAGIC = re.compile(r"(?P<indent>[ \t]*)(?P<sigil>%%|%|!!|!)(?P<name>[\w.-]*)(?P<rest>.*?)(?P<end>\r?\n)?\Z", re.DOTALL)
_ASSIGNED_MAGIC = re.compile(r"(?P<indent>[ \t]*)(?P<target>[\w.,\s\[\]()*]+?)\s*=\s*(?P<sigil>%|!)(?P<name>[\w.-]*)(?P<rest>.*?)(?P<end>\r?\n)?\Z", re.DOTALL)
_HELP = re.compile(r"[ \t]*(\?\??[\w.]+|[\w.]+\?\??)[ \t]*(\r?\n)?\Z")


# A location placed in the program version it was seen in, encoded as one "line" number
# (``PLACED + cell * _PLACED_CELL + line``) that every Locator decodes: see place_report.
PLACED = 1_000_000_000
_PLACED_CELL = 100_000


class NotebookError(BadInput):
    """A notebook repairbot cannot run, fix or lint (one line, exit 2)."""


def is_notebook(path: Path | str) -> bool:
    return str(path).endswith(SUFFIX)


@dataclass(frozen=True)
class Skipped:
    """An IPython line that has no plain-Python meaning and did not run."""

    cell: int
    line: int
    text: str
    how: str  # "skipped", or what it was mapped to

    def describe(self) -> str:
        return f"cell {self.cell}, line {self.line}: {self.text.strip()} ({self.how})"


@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based among the code cells
    source: str
    span: tuple[int, int]  # character span of the "source" JSON value in the file's text
    tokens: tuple[tuple[int, int], ...] | None  # spans of each line's JSON string (list form), else None


@dataclass(frozen=True)
class Location:
    cell: int
    line: int

    def label(self, display: str) -> str:
        return f"{display}, cell {self.cell}, line {self.line}"


@dataclass(frozen=True)
class Notebook:
    path: Path
    data: bytes  # the file's bytes
    text: str
    cells: tuple[CodeCell, ...]
    program: str
    # program line (index 0 is line 1) -> location; None for a prelude line
    line_map: tuple[Location | None, ...]
    skipped: tuple[Skipped, ...] = ()
    ascii_escapes: bool = False  # the file writes non-ASCII as \\u escapes
    _starts: tuple[int, ...] = field(default=(), repr=False)  # first program line (1-based) of each cell

    @property
    def program_bytes(self) -> bytes:
        return self.program.encode("utf-8")

    def locate(self, program_line: int) -> Location | None:
        if program_line >= PLACED:  # already placed in its own version (see place_report)
            return Location(*divmod(program_line - PLACED, _PLACED_CELL))
        if 1 <= program_line <= len(self.line_map):
            return self.line_map[program_line - 1]
        return None

    def cell_start(self, cell: int) -> int | None:
        """The program line that a code cell's first line is (``locate``'s inverse); None for a
        cell the notebook does not have."""
        return self._starts[cell - 1] if 1 <= cell <= len(self._starts) else None

    def label(self, display: str, program_line: int) -> str:
        """``NB.ipynb, cell 7, line 3`` (``NB.ipynb, line N`` for a prelude line)."""
        where = self.locate(program_line)
        return where.label(display) if where else f"{display}, repairbot prelude line {program_line}"

    def notes(self) -> tuple[str, ...]:
        """What the report says about the IPython lines that did not run as written."""
        if not self.skipped:
            return ()
        listed = "; ".join(s.describe() for s in self.skipped[:12])
        more = f"; and {len(self.skipped) - 12} more" if len(self.skipped) > 12 else ""
        return (f"IPython lines of {self.path.name} not run as written: {listed}{more}.",)

    # back to the notebook ---------------------------------------------------------------
    def cell_sources(self, program: str) -> dict[int, str]:
        """The cells whose source ``program`` (an edit of ``self.program``) changes: number ->
        new source. An edit must stay inside one cell and leave its IPython lines alone."""
        old = split_lines(self.program)
        new = split_lines(program)
        changed: dict[int, list[tuple[int, int, list[str]]]] = {}
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            if i2 > i1:
                owners = {self._owner(i) for i in range(i1, i2)}
            else:  # an insertion: into the cell of the line it goes before (an import at a cell's top)
                owners = {self._owner(i1) if self._owner(i1) is not None else self._owner(i1 - 1)}
            if len(owners) != 1 or None in owners:
                raise NotebookError(f"{self.path.name}: the edit spans more than one cell; it is not written back")
            cell = owners.pop()
            assert cell is not None
            if any(self.skipped_at(cell, self._cell_line(i)) for i in range(i1, i2)):
                raise NotebookError(f"{self.path.name}: the edit touches an IPython line; it is not written back")
            changed.setdefault(cell, []).append((i1, i2, new[j1:j2]))
        result: dict[int, str] = {}
        for number, edits in changed.items():
            lines = split_lines(self.cells[number - 1].source)
            start = self._starts[number - 1] - 1  # program index of the cell's first line
            for i1, i2, replacement in sorted(edits, reverse=True):
                a, b = i1 - start, i2 - start
                replacement = list(replacement)
                # the cell's own last line may have no newline (the program adds one)
                if b == len(lines) and lines and not lines[-1].endswith("\n") and replacement:
                    replacement[-1] = replacement[-1].rstrip("\n")
                lines[a:b] = replacement
            result[number] = "".join(lines)
        return result

    def file_line(self, where: Location) -> int | None:
        """The line of the ``.ipynb`` file that holds a cell's line (its JSON string)."""
        cell = self.cells[where.cell - 1]
        if cell.tokens is None:
            return self.text[: cell.span[0]].count("\n") + 1
        if not 1 <= where.line <= len(cell.tokens):
            return None
        return self.text[: cell.tokens[where.line - 1][0]].count("\n") + 1

    def check_edit(self, program: bytes | str) -> None:
        """NotebookError, its message without the notebook's name, unless ``program`` (an edit
        of this notebook's program) can be written back: a rewrite that spans cells or touches
        an IPython line is declined before any run."""
        try:
            self.cell_sources(program.decode("utf-8") if isinstance(program, bytes) else program)
        except NotebookError as error:
            raise NotebookError(str(error).removeprefix(f"{self.path.name}: ")) from None

    def syntax_hint(self, where: Location | None) -> str:
        """Why a cell Jupyter runs may not compile here: IPython dedents a cell indented as a whole."""
        if where is None:
            return ""
        first = self.cells[where.cell - 1].source.split("\n", 1)[0]
        if first[:1] in (" ", "\t"):
            return " (the cell is indented as a whole: IPython removes that indentation, repairbot does not; dedent the cell)"
        return ""

    def skipped_at(self, cell: int, line: int) -> bool:
        return any(s.cell == cell and s.line == line for s in self.skipped)

    def _owner(self, index: int) -> int | None:
        where = self.line_map[index] if 0 <= index < len(self.line_map) else None
        return where.cell if where else None

    def _cell_line(self, index: int) -> int:
        where = self.line_map[index]
        return where.line if where else 0

    def write_back(self, program: bytes | str) -> bytes:
        """The notebook's bytes with the changed cells' sources spliced in, every other byte kept."""
        text = program.decode("utf-8") if isinstance(program, bytes) else program
        return self.splice(self.cell_sources(text))

    def splice(self, sources: Mapping[int, str]) -> bytes:
        """The notebook's bytes with these code cells' sources (number -> source) replaced."""
        out = self.text
        for number in sorted(sources, reverse=True):  # from the end: earlier spans stay valid
            cell = self.cells[number - 1]
            start, end = cell.span
            out = out[:start] + self._source_json(cell, sources[number]) + out[end:]
        data = out.encode("utf-8")
        if self.data.startswith(b"\xef\xbb\xbf") and not data.startswith(b"\xef\xbb\xbf"):
            data = b"\xef\xbb\xbf" + data
        return data

    def _source_json(self, cell: CodeCell, source: str) -> str:
        if cell.tokens is None:  # a single JSON string
            return self._dump(source)
        # the list's own strings keep their JSON tokens (an item may hold several lines: longest
        # first); the edited lines are new items, split as nbformat splits
        raw = {json.loads(self.text[a:b]): self.text[a:b] for a, b in cell.tokens}
        items = sorted(raw, key=lambda item: -len(item.splitlines(keepends=True)))
        lines = source.splitlines(keepends=True)
        tokens: list[str] = []
        i = 0
        while i < len(lines):
            for item in items:
                n = len(item.splitlines(keepends=True))
                if n and "".join(lines[i:i + n]) == item:
                    tokens.append(raw[item])
                    i += n
                    break
            else:
                tokens.append(self._dump(lines[i]))
                i += 1
        start, end = cell.span
        if cell.tokens:
            first_a = cell.tokens[0][0]
            last_b = cell.tokens[-1][1]
            opening = self.text[start:first_a]  # "[" and the whitespace before the first line
            closing = self.text[last_b:end]
            separator = self.text[cell.tokens[0][1]:cell.tokens[1][0]] if len(cell.tokens) > 1 else None
            if separator is None:
                separator = "," + opening[1:] if "\n" in opening else ", "
        else:  # an empty list: the new lines on one line
            opening, closing, separator = "[", "]", ", "
        if not tokens:
            return "[]"
        return opening + separator.join(tokens) + closing

    def _dump(self, value: str) -> str:
        return json.dumps(value, ensure_ascii=self.ascii_escapes)

    # diffs ------------------------------------------------------------------------------
    def diff(self, before: bytes | str, after: bytes | str, display: str) -> tuple[str, int]:
        """The change between two programs of this notebook as per-cell unified diffs
        (``a/NB.ipynb:cell 7``), as ruff shows notebook diffs; and the lines it changes."""
        from repairbot.output.diff import unified_diff

        old_text = before.decode("utf-8") if isinstance(before, bytes) else before
        new_text = after.decode("utf-8") if isinstance(after, bytes) else after
        base = self.cell_sources(old_text) if old_text != self.program else {}
        target = self.cell_sources(new_text)
        parts: list[str] = []
        changed = 0
        for number in sorted(set(base) | set(target)):
            old = base.get(number, self.cells[number - 1].source)
            new = target.get(number, self.cells[number - 1].source)
            if old == new:
                continue
            text, count = unified_diff(old.encode("utf-8"), new.encode("utf-8"), f"{display}:cell {number}")
            parts.append(text)
            changed += count
        return "".join(parts), changed


# reading ------------------------------------------------------------------------------------
def from_cells(path: Path, sources: list[str]) -> Notebook:
    """The program of a notebook given as its code cells' text (an editor's notebook document,
    which has no file bytes to write back into)."""
    cells = tuple(CodeCell(number, source, (0, 0), None) for number, source in enumerate(sources, 1))
    return build(path, b"", "", cells)


def load(path: Path, display: str | None = None) -> Notebook:
    """Read and check a notebook; NotebookError (one line) for one repairbot cannot run."""
    name = display or path.name
    try:
        data = path.read_bytes()
    except OSError as error:
        raise NotebookError(f"{name}: cannot read: {error.strerror}") from None
    return parse(path, data, name)


def parse(path: Path, data: bytes, display: str | None = None) -> Notebook:
    import nbformat
    from nbformat import ValidationError

    name = display or path.name
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotebookError(f"{name}: not a notebook: byte {error.start} is not UTF-8") from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise NotebookError(f"{name}: not a notebook: invalid JSON ({error})") from None
    if not isinstance(document, dict) or ("cells" not in document and "worksheets" not in document):
        raise NotebookError(f"{name}: not a notebook: the JSON has no cells")
    major = document.get("nbformat")
    if major != 4:
        raise NotebookError(
            f"{name}: nbformat {major!r} is not supported (only nbformat 4; "
            "`jupyter nbconvert --to notebook --nbformat 4` converts it)"
        )
    try:
        notebook = nbformat.reads(text, as_version=nbformat.NO_CONVERT)  # type: ignore[no-untyped-call]
        nbformat.validate(notebook)
    except ValidationError as error:
        raise NotebookError(f"{name}: not a valid nbformat 4 notebook: {error.message}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise NotebookError(f"{name}: not a valid notebook: {error}") from None
    language = _language(notebook.get("metadata", {}))
    if language is not None and language != "python":
        raise NotebookError(f"{name}: the notebook's kernel is {language}, not Python")
    code = [cell for cell in notebook.cells if cell.get("cell_type") == "code"]
    if not code:
        raise NotebookError(f"{name}: the notebook has no code cells")
    try:
        spans = _source_spans(text)
    except (ValueError, IndexError, AssertionError) as error:  # JSON that json.loads read but the scan cannot place
        raise NotebookError(f"{name}: cannot locate the cells' sources in the file ({error})") from None
    code_positions = [i for i, cell in enumerate(notebook.cells) if cell.get("cell_type") == "code"]
    cells = []
    for number, position in enumerate(code_positions, start=1):
        span, tokens = spans[position]
        cells.append(CodeCell(number, notebook.cells[position].source, span, tokens))
    escapes = bool(re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", text))
    return build(path, data, text, tuple(cells), escapes)


def _language(metadata: Mapping[str, Any]) -> str | None:
    """The kernel's language, lower case; None when the notebook does not say."""
    kernel = metadata.get("kernelspec") or {}
    info = metadata.get("language_info") or {}
    language = kernel.get("language") or info.get("name")
    if not language:
        name = str(kernel.get("name", ""))
        if not name or name.startswith(("python", "conda", "py")):
            return None
        return name.lower()
    return str(language).lower()


# The JSON text scan: where each cell's "source" value is --------------------------------------
_WS = re.compile(r"[ \t\n\r]*")
# (json.loads also reads NaN and Infinity, which some writers of outputs use)
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")


def _source_spans(text: str) -> dict[int, tuple[tuple[int, int], tuple[tuple[int, int], ...] | None]]:
    """Cell position -> (span of its "source" value, spans of the list's strings or None)."""
    found: dict[int, tuple[tuple[int, int], tuple[tuple[int, int], ...] | None]] = {}

    def skip(i: int) -> int:
        match = _WS.match(text, i)
        return match.end() if match else i

    def value(i: int, path: tuple[Any, ...]) -> int:
        i = skip(i)
        char = text[i]
        if char == "{":
            i = skip(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                i = skip(i)
                key, i = scanstring(text, i + 1)
                i = skip(i)
                assert text[i] == ":"
                start = skip(i + 1)
                i = value(start, (*path, key))
                if len(path) == 2 and path[0] == "cells" and key == "source":
                    found[path[1]] = ((start, i), _string_spans(start, i))
                i = skip(i)
                if text[i] == "}":
                    return i + 1
                i += 1  # ","
        if char == "[":
            i = skip(i + 1)
            if text[i] == "]":
                return i + 1
            index = 0
            while True:
                i = value(i, (*path, index))
                index += 1
                i = skip(i)
                if text[i] == "]":
                    return i + 1
                i += 1
        if char == '"':
            return int(scanstring(text, i + 1)[1])
        match = _SCALAR.match(text, i)
        if match is None:
            raise ValueError(f"unexpected JSON at character {i}")
        return match.end()

    def _string_spans(start: int, end: int) -> tuple[tuple[int, int], ...] | None:
        if text[start] != "[":
            return None
        spans = []
        i = skip(start + 1)
        while text[i] != "]":
            _, stop = scanstring(text, i + 1)
            spans.append((i, int(stop)))
            i = skip(stop)
            if text[i] == ",":
                i = skip(i + 1)
        return tuple(spans)

    value(0, ())
    return found


# The program ---------------------------------------------------------------------------------
def build(path: Path, data: bytes, text: str, cells: tuple[CodeCell, ...], escapes: bool = False) -> Notebook:
    program: list[str] = []
    line_map: list[Location | None] = []
    skipped: list[Skipped] = []
    starts: list[int] = []
    uses_display = any(re.search(r"\bdisplay\s*\(", cell.source) for cell in cells)
    has_future = any(re.search(r"^\s*from\s+__future__\s+import", cell.source, re.MULTILINE) for cell in cells)
    if uses_display and not has_future:
        program.append(DISPLAY_PRELUDE)
        line_map.append(None)
    for cell in cells:
        lines = split_lines(cell.source)
        starts.append(len(program) + 1)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        converted, notes = _convert_cell(lines)
        for line_number, how in notes:
            skipped.append(Skipped(cell.number, line_number, lines[line_number - 1], how))
        program.extend(converted)
        line_map.extend(Location(cell.number, n) for n in range(1, len(converted) + 1))
    return Notebook(
        path=path, data=data, text=text, cells=cells, program="".join(program), line_map=tuple(line_map),
        skipped=tuple(skipped), ascii_escapes=escapes, _starts=tuple(starts),
    )


def _convert_cell(lines: list[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """A cell's lines as plain Python (same count) and the IPython lines: (line, how)."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    notes: list[tuple[int, str]] = []
    body = list(lines)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name = lines[first].strip()[2:].split(" ")[0]
        if name not in _PYTHON_CELL_MAGICS:
            return ["\n" if i != first else "pass\n" for i in range(len(lines))], [
                (first + 1, f"a %%{name} cell: skipped whole")
            ]
        body[first] = "pass\n"
        notes.append((first + 1, f"the body runs as Python, once, without %%{name}"))
    lines = body
    candidates = {
        i: how for i, line in enumerate(lines) if (how := _convert_line(line)) is not None and not (notes and i == first)
    }
    out = list(lines)
    for _ in range(3):  # a "line" inside a multi-line string or brackets is not a magic
        for i, (replacement, _) in candidates.items():
            out[i] = replacement
        inside = _continued_lines("".join(out))
        dropped = [i for i in candidates if i + 1 in inside]
        if not dropped:
            break
        for i in dropped:
            out[i] = lines[i]
            del candidates[i]
    return out, sorted(notes + [(i + 1, how) for i, (_, how) in candidates.items()])


def _continued_lines(source: str) -> set[int]:
    """Lines (1-based) that continue a statement begun above them (in a string or brackets)."""
    inside: set[int] = set()
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(depth - 1, 0)
            if token.start[0] != token.end[0]:
                inside.update(range(token.start[0] + 1, token.end[0] + 1))
            if depth and token.type == tokenize.NL:
                inside.add(token.start[0] + 1)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return inside


def _convert_line(line: str) -> tuple[str, str] | None:
    """(replacement, how) for an IPython line, None for a plain Python one."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    end = "\n" if line.endswith("\n") else ""
    match = _LINE_MAGIC.match(line)
    if match and match["sigil"] in ("%", "!", "!!") and (match["sigil"] != "%" or match["name"]):
        indent, sigil, name, rest = match["indent"], match["sigil"], match["name"], match["rest"].strip()
        if sigil == "%" and name in ("time", "timeit") and rest:
            statement = re.sub(r"^(?:-[a-zA-Z]\s*\S*\s+)*", "", rest) if name == "timeit" else rest
            return f"{indent}{statement}{end}", f"ran as {statement!r}, once"
        if sigil == "%" and name == "env" and rest:
            key, _, val = rest.replace("=", " ", 1).partition(" ")
            if val.strip():
                return (
                    f"{indent}__import__('os').environ[{key!r}] = {val.strip()!r}{end}",
                    "set in os.environ",
                )
        if sigil == "%" and name == "cd" and rest:
            return f"{indent}__import__('os').chdir({rest!r}){end}", "ran as os.chdir"
        what = "a shell command" if sigil.startswith("!") else f"%{name}"
        return f"{indent}pass{end}", f"{what}: skipped"
    assigned = _ASSIGNED_MAGIC.match(line)
    if assigned and "==" not in line.split("=")[0] + "=" and not line.split("=", 1)[1].lstrip().startswith("="):
        indent, target = assigned["indent"], assigned["target"].strip()
        if assigned["sigil"] == "%" and assigned["name"] in ("time", "timeit") and assigned["rest"].strip():
            return f"{indent}{target} = {assigned['rest'].strip()}{end}", "ran once, without the timing"
        if assigned["sigil"] == "!" or assigned["name"] in ("sx", "system"):
            return f"{indent}{target} = []{end}", "a shell command's output: set to []"
    if _HELP.match(line):
        return f"{line[: len(line) - len(line.lstrip())]}pass{end}", "a help query: skipped"
    return None


# Report locations ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Locator:
    """Turns program lines of the notebooks a report speaks of into cells and their lines."""

    notebooks: Mapping[str, Notebook]  # by the path reports show (relative to the root)

    def __bool__(self) -> bool:
        return bool(self.notebooks)

    def _find(self, path: str) -> tuple[str, Notebook] | None:
        for display, notebook in self.notebooks.items():
            # as the report names it, absolute, or by its name alone (patterns' summaries)
            if path in (display, str(notebook.path), notebook.path.name) or path.endswith("/" + display):
                return display, notebook
        return None

    def text(self, rendered: str) -> str:
        """A rendered text/Markdown report with ``NB.ipynb:57`` read as ``NB.ipynb, cell 7,
        line 3`` (tracebacks' ``File "NB.ipynb", line 57`` too)."""
        if not self.notebooks:
            return rendered
        names = "|".join(re.escape(Path(d).name) for d in self.notebooks)

        def colon(match: re.Match[str]) -> str:
            found = self._find(match["path"])
            if found is None:
                return match[0]
            return found[1].label(match["path"], int(match["line"]))

        def traceback(match: re.Match[str]) -> str:
            found = self._find(match["path"])
            where = found[1].locate(int(match["line"])) if found else None
            if where is None:
                return match[0]
            return f'File "{match["path"]}", cell {where.cell}, line {where.line}'

        def gutter(match: re.Match[str]) -> str:
            # a Markdown report's source excerpt: its line numbers become the cell's
            found = self._find(match["path"])
            where = found[1].locate(int(match["line"])) if found else None
            if where is None:
                return match[0]
            shift = int(match["line"]) - where.line

            def number(line: re.Match[str]) -> str:
                return f"{line[1]}{int(line[2]) - shift:>{len(line[2])}}{line[3]}"

            return match["head"] + re.sub(r"(?m)^(\W*?)(\d+)( \| )", number, match["block"])

        rendered = re.sub(
            rf"(?P<head>`(?P<path>[^`]*(?:{names})):(?P<line>\d+)`:\n\n```python\n)(?P<block>.*?```)",
            gutter, rendered, flags=re.DOTALL,
        )
        rendered = re.sub(rf'File "(?P<path>[^"]*(?:{names}))", line (?P<line>\d+)', traceback, rendered)
        return re.sub(rf"(?P<path>[^\s\"'`(\[]*(?:{names})):(?P<line>\d+)(?!\d|:\d)", colon, rendered)

    def json(self, value: Any) -> Any:
        """A JSON report (or SARIF log) with notebook lines as cell lines: ``"cell": 7`` is set
        beside ``"line": 3``; ``file:line`` strings become ``NB.ipynb, cell 7, line 3``."""
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            path = value.get("file") or value.get("path")
            found = self._find(path) if isinstance(path, str) and "cell" not in value else None
            for key, item in value.items():
                if found and key in ("line", "end_line") and isinstance(item, int):
                    where = found[1].locate(item)
                    if where is not None:
                        if key == "line":
                            out["cell"] = where.cell
                        out[key] = where.line
                        continue
                out[key] = self.json(item)
            return self._sarif_location(out)
        if isinstance(value, list):
            return [self.json(item) for item in value]
        if isinstance(value, str):
            return self.text(value) if ".ipynb" in value else value
        return value

    def _sarif_location(self, value: dict[str, Any]) -> dict[str, Any]:
        artifact = value.get("artifactLocation")
        if isinstance(artifact, dict) and isinstance(artifact.get("uri"), str):
            # a fix's change, from a per-cell diff (``NB.ipynb:cell 7``): lines are the cell's
            match = re.fullmatch(r"(?P<uri>.+\.ipynb):cell (?P<cell>\d+)", artifact["uri"])
            if match:
                properties = dict(value.get("properties", {}), cell=int(match["cell"]))
                return {**value, "artifactLocation": {**artifact, "uri": match["uri"]}, "properties": properties}
        physical = value.get("physicalLocation")
        if isinstance(value.get("properties"), dict) and "cell" in value["properties"]:
            return value
        if not isinstance(physical, dict):
            return value
        uri = physical.get("artifactLocation", {}).get("uri")
        region = physical.get("region")
        found = self._find(uri) if isinstance(uri, str) else None
        if not found or not isinstance(region, dict) or "startLine" not in region:
            return value
        where = found[1].locate(region["startLine"])
        if where is None:
            return value
        region = dict(region, startLine=where.line)
        end = found[1].locate(region.get("endLine", 0))
        if end is not None:
            region["endLine"] = end.line
        properties = dict(value.get("properties", {}), cell=where.cell)
        return {**value, "physicalLocation": {**physical, "region": region}, "properties": properties}


# The hooks of fix and doctor -----------------------------------------------------------------
def for_script(script: Path, given: Path | str | None = None) -> Notebook | None:
    """The notebook ``fix``/``doctor`` runs (None for a plain script), checked: its program
    must compile, or NotebookError names the cell and line."""
    if not is_notebook(script):
        return None
    name = str(given) if given is not None else script.name
    notebook = load(script, name)
    try:
        compile(notebook.program, str(script), "exec", dont_inherit=True)
    except SyntaxError as error:
        where = notebook.label(name, error.lineno) if error.lineno else name
        hint = notebook.syntax_hint(notebook.locate(error.lineno or 0))
        raise NotebookError(f"{where}: syntax error: {error.msg}{hint}") from None
    except ValueError as error:  # NUL characters
        raise NotebookError(f"{name}: cannot compile its cells: {error}") from None
    return notebook


def file_bytes(verified: Mapping[Path, bytes], notebook: Notebook | None) -> dict[Path, bytes]:
    """The verified files' bytes as they go to disk: a notebook's program spliced back into its JSON."""
    return {
        path: notebook.write_back(data) if notebook is not None and path == notebook.path else data
        for path, data in verified.items()
    }


def locator(notebook: Notebook | None, root: Path) -> Locator | None:
    """The report's Locations for a run of ``notebook`` (None for a plain script)."""
    if notebook is None:
        return None
    from repairbot.sources import relative_path

    return Locator({relative_path(root, notebook.path): notebook})


def file_diff(path: Path, before: bytes, after: bytes, display: str) -> str:
    """The change between two versions of a notebook's file as per-cell diffs (``--diff``)."""
    old = parse(path, before, display)
    new = parse(path, after, display)
    from repairbot.output.diff import unified_diff

    if len(old.cells) != len(new.cells):  # cells added or removed: the file's own diff
        return unified_diff(before, after, display)[0]
    parts = []
    for a, b in zip(old.cells, new.cells, strict=True):
        if a.source != b.source:
            parts.append(unified_diff(a.source.encode(), b.source.encode(), f"{display}:cell {a.number}")[0])
    return "".join(parts)


def cell_health(findings: tuple[Any, ...], notebook: Notebook | None) -> tuple[Any, ...]:
    """Health findings with the offered fix's diff (made on the program) shown per cell."""
    if notebook is None:
        return findings
    from dataclasses import replace

    from repairbot.output.diff import PatchError, apply_patch, parse_patch, split_lines

    out = []
    for finding in findings:
        fix = finding.fix
        if fix and fix.get("diff") and finding.file and Path(finding.file).name == notebook.path.name:
            try:
                (patch,) = parse_patch(str(fix["diff"]))
                fixed = "".join(apply_patch(split_lines(notebook.program), patch))
                diff = notebook.diff(notebook.program, fixed, finding.file)[0]
            except (PatchError, ValueError, NotebookError):
                diff = None
            if diff:
                finding = replace(finding, fix={**fix, "diff": diff})
        out.append(finding)
    return tuple(out)


# Reports of repairs whose fixes changed a cell's line count -----------------------------------
def place_report(report: Any, notebook: Notebook | None) -> Any:
    """The report with every notebook location placed in the program version it was seen in.

    Each attempt's lines are lines of the program its run executed: after a kept fix that adds
    or removes lines, the later programs no longer share the first one's numbering, so one line
    map cannot read them all. Each attempt's lines (and the last run's: health, the remaining
    failure, where the step budget stopped it) are encoded as placed locations and its texts
    written with their cells, by the version of its own run. A no-op when no kept fix changed
    a line count (the common case: the first map reads every version).
    """
    from dataclasses import replace

    if notebook is None:
        return report
    versions = [notebook]
    for attempt in report.attempts:
        current = versions[-1]
        if attempt.fix is not None and attempt.applied:
            current = _after_fix(current, attempt.fix.diff)
        versions.append(current)
    if all(len(v.line_map) == len(notebook.line_map) and v._starts == notebook._starts for v in versions):
        return report
    attempts = tuple(
        _place_attempt(attempt, versions[index]) for index, attempt in enumerate(report.attempts)
    )
    final = versions[-1]
    placer = _Placer(final)
    limits = report.run_limits
    return replace(
        report,
        attempts=attempts,
        remaining=placer.failure(report.remaining) if report.remaining is not None else None,
        health=tuple(placer.health(h) for h in report.health),
        run_limits=replace(limits, stopped_at=placer.text(limits.stopped_at)) if limits.stopped_at else limits,
    )


def _after_fix(version: Notebook, diff: str) -> Notebook:
    """The notebook after one of its per-cell diffs (``a/NB.ipynb:cell 3``)."""
    from repairbot.output.diff import apply_patch, parse_patch

    sources: dict[int, str] = {}
    for patch in parse_patch(diff):
        number = int(patch.path.rsplit(":cell ", 1)[1])
        lines = split_lines(sources.get(number, version.cells[number - 1].source))
        sources[number] = "".join(apply_patch(lines, patch))
    return parse(version.path, version.splice(sources), version.path.name)


class _Placer:
    """Places one program version's lines and texts."""

    def __init__(self, version: Notebook) -> None:
        self.version = version
        self.locator = Locator({version.path.name: version})

    def line(self, line: int | None) -> int | None:
        where = self.version.locate(line) if line else None
        return PLACED + where.cell * _PLACED_CELL + where.line if where else line

    def text(self, value: Any) -> Any:
        return self.locator.json(value)

    def frame(self, frame: Any) -> Any:
        from dataclasses import replace

        if Path(frame.file).name != self.version.path.name:
            return frame
        return replace(frame, line=self.line(frame.line), end_line=self.line(frame.end_line))

    def failure(self, failure: Any) -> Any:
        from dataclasses import replace

        return replace(
            failure, frames=tuple(map(self.frame, failure.frames)),
            worker_frames=tuple(map(self.frame, failure.worker_frames)),
        )

    def span(self, span: Any) -> Any:
        from dataclasses import replace

        return replace(span, line=self.line(span.line), end_line=self.line(span.end_line))

    def health(self, finding: Any) -> Any:
        from dataclasses import replace

        if not finding.file or Path(finding.file).name != self.version.path.name:
            return finding
        return replace(
            finding, line=self.line(finding.line), message=self.text(finding.message),
            evidence=self.text(dict(finding.evidence)),
        )


def _place_attempt(attempt: Any, version: Notebook) -> Any:
    from dataclasses import replace

    placer = _Placer(version)
    fix = attempt.fix
    if fix is not None:
        site = fix.site
        fix = replace(fix, site=replace(
            site, span=placer.span(site.span), extra_spans=tuple(map(placer.span, site.extra_spans)),
            summary=placer.text(site.summary), evidence=placer.text(dict(site.evidence)),
            evidence_text=placer.text(site.evidence_text), notes=tuple(map(placer.text, site.notes)),
        ))
    return replace(
        attempt,
        failure=placer.failure(attempt.failure),
        failure_line=placer.line(attempt.failure_line)
        if attempt.failure_file and Path(attempt.failure_file).name == version.path.name else attempt.failure_line,
        evidence=placer.text(dict(attempt.evidence)),
        fix=fix,
        declines=tuple(
            replace(d, line=placer.line(d.line), reason=placer.text(d.reason), diagnosis=placer.text(d.diagnosis))
            if d.file and Path(d.file).name == version.path.name else d
            for d in attempt.declines
        ),
    )
