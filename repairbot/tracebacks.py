"""Read the failure out of a Python traceback, or out of a whole CI log / issue text holding one.

Logs wrap tracebacks in noise (ANSI colours, CR-overwritten progress bars, CI timestamps,
markdown quotes and fences, lost indentation, newlines flattened to spaces) and come in several
formats (plain CPython, IPython/Jupyter, the VS Code debugger, pdb). ``parse_log`` finds the
lines where a report may start by fast literal searches, cleans only the lines it reads
(``strip_noise`` does the same to every line), cuts flattened lines back into traceback lines,
and collects *reports*: a traceback (frames, exception line, message), a lone exception line, a
DataLoader worker re-raise, or a warning printed without a traceback. The last report, with the
chain of exceptions printed before it, becomes the ``Failure``.

Most of a long log is never looked at line by line, and every regex is anchored or starts at a
literal with no nested quantifier over overlapping characters, so a 10 MB log parses in a
fraction of a second and no input makes a regex backtrack catastrophically. Standard library
only.
"""

from __future__ import annotations

import keyword
import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from repairbot.types import Failure, Frame

__all__ = ["is_user_path", "parse_log", "strip_noise", "worker_exception", "worker_frames"]

# --------------------------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------------------------

# CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks), two-byte escapes.
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# The same codes as a repr() or JSON string prints them ("\x1b[1m", "\033[0m", "\u001b[31m").
_ESCAPED_ANSI = re.compile(r"\\(?:x1[bB]|033|u001[bB])\[[0-9;]*[A-Za-z]")
# Control characters of binary-ish text; tab is kept, CR is handled on its own.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TYPOGRAPHIC_QUOTES = str.maketrans(
    {"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'", "\u201a": "'"}
)
# Prefixes a transport puts on every line: GitHub Actions timestamps, torchrun's "[rank0]:"
# and "[default0]:" (its --tee prefix, role and local rank), docker compose's "service_1  | ".
# Always removed.
_TRANSPORT_PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?|\[(?:default|rank)\d+\]: ?|[\w.-]+ +\| )+"
)
_FENCE_LINE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
_QUOTE_PREFIX = re.compile(r"^(?:>(?!>) ?)+")  # markdown "> " quotes, not ">>> " prompts
_MARKDOWN_LINK = re.compile(r"^(\s*)\[([^\]\n]+)\]\((?:https?://|/|#)[^)\s]*\)")  # Colab frames
_BOLD_LEAD = re.compile(r"^\*\*(?!\*)([^*\n]+)\*\*")
_BACKTICKED_MESSAGE = re.compile(r"^(\s*[\w.]+: )`([^`]*)`\s*$")
# Fragments of the patterns below.
_HEADER_TEXT = r"raceback \(most recent call last\)"  # "Traceback", whose "T" may be lost
_DURING_HANDLING = r"During handling of the above exception"
_DIRECT_CAUSE = r"The above exception was the direct cause"
_DOTTED = r"(?:[A-Za-z_]\w*\.)*"  # the module path before a class name
_EXCEPTION_SUFFIX = r"(?:Error|Exception|Exit|Interrupt|Iteration|Fault)"
_EXCEPTION_CLASS = rf"{_DOTTED}[A-Z]\w*{_EXCEPTION_SUFFIX}"  # a name that looks like one
# What may follow a timestamp or logging prefix that is to be removed: a traceback line.
_TRACEBACK_TEXT = (
    rf'(?:T?{_HEADER_TEXT}|F?ile "|{_DURING_HANDLING}|{_DIRECT_CAUSE}|Original Traceback'
    rf"|-- Process \d|(?:\*\*\* )?{_EXCEPTION_CLASS}(?::|$))"
)
_TIMESTAMP = (
    r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?(?: - |: | \| | )"
)
_LEVEL = r"\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?(?::[\w.-]*:| - |: | )"
# Timestamps and logging prefixes ("[2023-01-01 10:00:00,123] ", "ERROR:root:", "[ERROR] "),
# removed only before a traceback line (or an indented line, after a bare timestamp): on other
# lines they are what marks a log line.
_LOG_PREFIX = re.compile(
    rf"^(?:{_TIMESTAMP}(?=\s|{_TRACEBACK_TEXT})|(?:{_TIMESTAMP})?{_LEVEL}(?={_TRACEBACK_TEXT}))"
)
# Internal stand-in for a markdown fence line: a hard end of any message (strip_noise drops it).
_FENCE = "\x00fence"

# --------------------------------------------------------------------------------------------
# Traceback lines
# --------------------------------------------------------------------------------------------

_TB_HEADER = re.compile(rf"^\s*T?{_HEADER_TEXT}:?")
_IPYTHON_HEADER = re.compile(rf"^\s*(?P<type>[A-Za-z_][\w.]*)\s+T{_HEADER_TEXT}\s*$")
_CHAIN_MARKER = re.compile(
    rf"^\s*(?:{_DURING_HANDLING}, another exception occurred"
    rf"|{_DIRECT_CAUSE} of the following exception):?\s*$"
)
# Where an exception message embeds a child's traceback: DataLoader workers, mp.spawn.
_SPAWN_TEXT = r"-- Process \d+ terminated with the following error:"
_WORKER_MARKER = re.compile(rf"^\s*(?:Original T{_HEADER_TEXT}:?|{_SPAWN_TEXT})")
_SPAWN_MARKER = re.compile(rf"^\s*{_SPAWN_TEXT}")
_WORKER_CAUGHT = re.compile(
    r"^Caught (?P<type>[A-Za-z_][\w.]*) in DataLoader worker process \d+\.?\s*$"
)
_DEBUGPY_HEADER = re.compile(r"^Exception has occurred: (?P<type>[A-Za-z_][\w.]*)")
# '  File "x.py", line 3, in f' - indentation or the first character may be lost.
_FRAME = re.compile(
    r'^\s*F?ile "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func><[^>\n]*>|[^\s<]\S*))?\s*$'
)
# The same at the start of a flattened piece, with whatever follows it.
_FRAME_HEAD = re.compile(
    r'^F?ile "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func><[^>\n]*>|\S+))?'
)
# Points where a flattened line is cut back into traceback lines.
_FLAT_BREAK = re.compile(
    rf'(?<=\s)(?<!Original )(?=File "[^"\n]*", line \d|(?:Original )?T{_HEADER_TEXT}'
    rf"|{_DURING_HANDLING}|{_DIRECT_CAUSE})|(?<=\S)(?=T{_HEADER_TEXT}:)"
)
# An exception inside a flattened piece, after the frame's source text.
_EMBEDDED_EXCEPTION = re.compile(
    rf"(?<![\w.]){_DOTTED}[A-Z]\w*(?:{_EXCEPTION_SUFFIX}|Warning)(?=:\s|:?$)"
)
_TRAILING_CARETS = re.compile(r"(?:\s+[~^]+)+$")
_CARET_LINE = re.compile(r"^[ \t]*[~^][~^ \t]*$")
# IPython frames: old "<ipython-input-..> in f(x)" / "path.py in f(x)", IPython 8
# "File ~/x.py:12, in f(x)", "Cell In[3], line 5, in f()" and "Input In [3], in <cell line: 5>()".
_IPY_OLD_FRAME = re.compile(
    r"^(?P<file><ipython-input-[^>\s]*>|\S*ipykernel_\d+\S*|\S+\.pyw?) in (?P<func>\S.*)$"
)
_IPY_FILE_FRAME = re.compile(r'^File (?P<file>[^"\s].*?):(?P<line>\d+)(?:, in (?P<func>.*))?$')
_IPY_CELL_FRAME = re.compile(
    r"^(?:Cell In ?\[(?P<cell>\d+)\], line (?P<line>\d+)|Input In ?\[(?P<input>\d+)\])(?:, in (?P<func>.*))?$"
)
_IPY_ARROW = re.compile(r"^\s*-+>\s*(?P<no>\d+)(?:\s(?P<code>.*))?$")  # "----> 41 x = f()"
_IPY_CONTEXT = re.compile(r"^\s+\d+(?:\s.*)?$")  # "     40 y = 1"
_IPY_COLLAPSED = re.compile(r"^\d+ frames?$")  # Colab's "9 frames"
# The exception line after frames: any "Name: message" / "Name" (pdb prints "*** " first).
_EXCEPTION_LINE = re.compile(
    rf"^(?:\*\*\* )?(?P<type>{_DOTTED}[A-Za-z_]\w*)(?::[ \t]?(?P<msg>.*))?$"
)
# A lone exception line, without frames: the name must look like an exception class.
_STRICT_EXCEPTION = re.compile(
    rf"^(?:\*\*\* )?(?P<type>{_EXCEPTION_CLASS})(?::[ \t]?(?P<msg>.*))?$"
)
# "path.py:12: UserWarning: message", the warnings module's format.
_WARNING_LINE = re.compile(
    rf"^(?P<file>\S.*?):(?P<line>\d+): (?P<type>{_DOTTED}[A-Z]\w*Warning): ?(?P<msg>.*)$"
)
_LOG_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL", "NOTE"})
# Lines that are the log's, not the exception message's.
_LOG_LINE = re.compile(
    r"^(?:\[?\d{2,4}-\d\d-\d\d[T ]\d\d:\d\d"  # timestamps (first digit may be lost)
    r"|\[?\d\d:\d\d:\d\d\b"
    r"|\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?![\w.])"
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d"  # glog
    r"|##\[|::(?:error|warning|notice|group|endgroup)\b"  # GitHub Actions commands
    r"|\[Finished in |Process finished with exit code|Killing subprocess \d"
    r"|Error: Process completed with exit code|wandb: |srun: |slurmstepd: |make(?:\[\d+\])?: \*\*\*"
    r"|>>> |In \[\d+\]: "
    r"|[^|\n]{0,60}\d{1,3}%\|)"  # tqdm bars
)
# Shell prompts: "$ cmd", "user@host:~/dir$ cmd", "[user@host dir]$ cmd", "(venv) PS D:\x> cmd",
# "C:\x>cmd", and set -x's "+ cmd".
_PROMPT = (
    r"(?:\([\w.-]+\) ?)?(?:\$ "
    r"|[\w.-]+@[\w.-]+(?::[^\s$#]*)?[$#] "
    r"|\[[\w.-]+@[\w.-]+[^\]\n]*\][$#] "
    r"|PS [A-Za-z]:\\[^>\n]*> ?"
    r"|[A-Za-z]:\\[^>\n]*>"
    r"|\++ )"
)
_SHELL_PROMPT = re.compile(rf"^{_PROMPT}\S")
_PYTHON_INVOCATION = (
    r"(?:[A-Z_][A-Z0-9_]*=\S*[ \t]+)*(?:nohup[ \t]+)?(?:\S*[/\\])?"
    r"(?:python[\d.]*(?:\.exe)?|torchrun|accelerate|deepspeed|py)[ \t]+\S"
)
_PYTHON_COMMAND = re.compile(_PYTHON_INVOCATION)
_PYTHON_SCRIPT_ARG = re.compile(r"\.py\b|(?:^|\s)-m\s")
# A line showing a command: after a prompt, a GitHub Actions "Run" step, a bare python call.
_COMMAND_LINE = re.compile(
    rf"^(?:{_PROMPT}(?P<prompt>\S.*)|(?:##\[group\])?Run (?P<run>\S.*)|(?P<bare>{_PYTHON_INVOCATION}.*))$"
)
# Literal texts found on every line where a report, a flattened traceback or a command may
# start: str.find over the raw text locates them, so the parser reads only those lines.
_REPORT_KEYWORDS = (
    "raceback (most recent",
    'ile "',
    "ile \u201c",
    "File ",
    "Cell In",
    "Input In",
    "ipython-input-",
    "ipykernel_",
    ".py in ",
    ".pyw in ",
    "Caught ",
    "Error",
    "Exception",
    "Exit",
    "Interrupt",
    "Iteration",
    "Fault",
    "Warning",
)
_FLAT_KEYWORDS = ('File "', "File \u201c", "Traceback (most recent", "above exception")
# The whole log is searched for commands: single characters where they do (memchr is fast).
_COMMAND_KEYWORDS = ("$", "@", "+", ">", "Run ", "python", "torchrun", "accelerate", "deepspeed")
_MAX_MESSAGE_LINES = 500  # bounds the cost of an exception line followed by a whole log
_MAX_WRAPPED_LINES = 4  # lines a terminal may wrap one warning message onto, after its first
_TAIL_CHUNK = 1 << 18  # characters read first, from the end of a log

# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------

_STDLIB_DIR = re.compile(r"(?:^|/)lib(?:64)?/python\d(?:\.\d+)?/", re.IGNORECASE)
_PYTHON_HOME = re.compile(
    r"^(?:python\d*|anaconda\d*|miniconda\d*|miniforge\d*|mambaforge|\.?venv|env)$", re.I
)
_LIBRARY_DIRS = frozenset({"site-packages", "dist-packages"})
# Installed packages that also show up outside site-packages (frozen apps, source builds).
_LIBRARY_PACKAGES = frozenset({"torch", "torchvision", "torchaudio", "PyInstaller"})
_USER_PSEUDO_FILE = re.compile(r"^(?:<ipython-input-|<stdin>|Cell In ?\[|Input In ?\[)")


# repairbot's own tracing harness, wherever repairbot is installed (or checked out).
_HARNESS_FILE = "repairbot/trace/bootstrap.py"
_HARNESS_DIR = "repairbot/trace/harness/"


def is_user_path(path: str) -> bool:
    """Heuristic for paths as printed in logs: False for anything inside site-packages,
    dist-packages, a Python standard library folder (lib/pythonX.Y/, Lib\\ on Windows,
    /usr/lib/python3...), a torch install, '<frozen ...>', '<string>', '<__array_function__ ...>'
    and similar; .egg folders/zips; True otherwise (a project checkout, a relative path like
    'train.py', '<ipython-input-3-...>' cells, /tmp/ipykernel_*/N.py).

    A "torch install" is any path through a folder named torch/torchvision/torchaudio (a
    PyInstaller bundle or a source checkout puts them outside site-packages); PyInstaller's own
    loader counts as library too. IPython 8's "Cell In[3]" and "<stdin>" are user code.
    """
    path = path.strip()
    if not path:
        return False
    if _USER_PSEUDO_FILE.match(path):
        return True
    if path.startswith("<"):  # <frozen ...>, <string>, <decorator-gen-12>, ...
        return False
    norm = path.replace("\\", "/")
    if _STDLIB_DIR.search(norm) or norm.endswith(_HARNESS_FILE) or _HARNESS_DIR in norm:
        return False
    parts = [part for part in norm.split("/") if part]
    folders = parts[:-1]
    if folders and folders[-1] in ("bin", "Scripts") and not parts[-1].endswith(".py"):
        return False  # a console-script launcher (.venv/bin/torchrun), not the user's code
    for index, part in enumerate(folders):
        low = part.lower()
        if low in _LIBRARY_DIRS or part in _LIBRARY_PACKAGES or low.endswith((".egg", ".zip")):
            return False
        # Windows keeps the standard library in "Lib"; conda/venv homes in "<home>/lib".
        if part == "Lib" or (
            low == "lib"
            and index > 0
            and (
                _PYTHON_HOME.match(folders[index - 1])
                or (index > 1 and folders[index - 2].lower() == "envs")
            )
        ):
            return False
    return True


# --------------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------------


def strip_noise(text: str) -> str:
    """Remove what logs wrap around tracebacks: ANSI colour/escape codes, CR-overwritten
    progress bars (keep what is after the last \\r on a line), per-line timestamps and CI
    prefixes (GitHub Actions '2024-01-02T03:04:05.1234567Z ', '[2023-01-01 10:00:00,123] ',
    'INFO:root:' style prefixes before a traceback line), markdown artefacts (``` fences,
    leading '> ' quotes, backticks wrapping a whole line or the message), typographic quotes
    normalised where they replace ASCII quotes in code.

    Transport prefixes (GitHub Actions timestamps, torchrun's ``[rankN]:``, docker compose's
    ``service | ``) go from every line; timestamps and logging prefixes only from a line where
    they stand before a traceback line (elsewhere they mark a log line). Typographic quotes are
    replaced everywhere, control characters dropped, fence lines dropped.
    """
    lines = (_clean_line(line) for line in _without_escapes(text).split("\n"))
    return "\n".join(line for line in lines if line != _FENCE)


def _without_escapes(text: str) -> str:
    """Steps that must see the whole text: escape sequences, CRLF line ends."""
    if "\x1b" in text:
        text = _ANSI_ESCAPE.sub("", text)
    if "\\" in text:
        text = _ESCAPED_ANSI.sub("", text)
    return text.replace("\r\n", "\n")


def _clean_line(line: str) -> str:
    """One line without noise; a markdown fence line becomes ``_FENCE``. Cheap tests guard each
    step, as most lines of a log need none."""
    if "\r" in line:  # a terminal shows what was written after the last carriage return
        line = next((part for part in reversed(line.split("\r")) if part.strip()), "")
    if not line:
        return line
    if not line.isprintable():
        line = _CONTROL_CHARS.sub("", line)
    if not line.isascii():
        line = line.translate(_TYPOGRAPHIC_QUOTES)
    first = line[:1]
    if first.isdigit() or first == "[" or " | " in line:
        line = _TRANSPORT_PREFIX.sub("", line, count=1)
        first = line[:1]
    if first == ">":
        line = _QUOTE_PREFIX.sub("", line, count=1)
    if "```" in line or "~~~" in line:
        if _FENCE_LINE.match(line):
            return _FENCE
        line = line.replace("```", "")  # a fence glued to a line of text
    if "](" in line:
        line = _MARKDOWN_LINK.sub(r"\1\2", line, count=1)
    if line.startswith("**"):
        line = _BOLD_LEAD.sub(r"\1", line, count=1)
    if "`" in line:
        line = _strip_backticks(line)
    first = line[:1]
    if first.isdigit() or first in "[DIWECF":
        line = _LOG_PREFIX.sub("", line, count=1)
    return line


def _strip_backticks(line: str) -> str:
    """Drop markdown backticks that wrap the whole line, open or close a wrapped block, or wrap
    the message of an exception line; keep backticks that quote code inside a message."""
    stripped = line.strip()
    count = line.count("`")
    if count == 2 and len(stripped) > 1 and stripped[0] == "`" and stripped[-1] == "`":
        start = line.index("`")
        end = line.rindex("`")
        return line[:start] + line[start + 1 : end] + line[end + 1 :]
    if count % 2 == 1:
        if stripped.startswith("`"):
            start = line.index("`")
            return line[:start] + line[start + 1 :]
        if stripped.endswith("`"):
            end = line.rindex("`")
            return line[:end] + line[end + 1 :]
    return _BACKTICKED_MESSAGE.sub(r"\1\2", line)


class _Lines(Sequence[str]):
    """The lines of a log, each cleaned the first time it is read (most never are)."""

    def __init__(self, raw: list[str], clean: bool = False) -> None:
        self.raw = raw  # as split, kept to find a line's place in the text
        self._lines = list(raw)
        self._done = bytearray(b"\x01" * len(raw) if clean else len(raw))
        self._origin: list[int] | None = None  # index in ``raw`` of each line, after a splice

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]  # no slices needed
        if not self._done[index]:
            self._lines[index] = _clean_line(self._lines[index])
            self._done[index] = 1
        return self._lines[index]

    def raw_index(self, index: int) -> int:
        return index if self._origin is None else self._origin[index]

    def splice(self, replaced: dict[int, list[str]]) -> _Lines:
        """These lines with each line ``k`` of ``replaced`` (ascending) replaced by clean lines."""
        spliced = _Lines([])
        spliced.raw, spliced._origin = self.raw, []
        previous = 0
        for index, parts in [*replaced.items(), (len(self._lines), [])]:
            spliced._lines += self._lines[previous:index] + parts
            spliced._done += self._done[previous:index] + b"\x01" * len(parts)
            spliced._origin += [*range(previous, index), *([index] * len(parts))]
            previous = index + 1
        return spliced


def _keyword_lines(text: str, keywords: Iterable[str]) -> list[int]:
    """Ascending indices of the lines of ``text`` holding any of ``keywords``."""
    offsets: list[int] = []
    for word in keywords:
        found = text.find(word)
        while found != -1:
            offsets.append(found)
            end = text.find("\n", found)  # one hit per line is enough
            found = text.find(word, end) if end != -1 else -1
    offsets.sort()
    numbers: list[int] = []
    line = last = 0
    for offset in offsets:
        line += text.count("\n", last, offset)
        last = offset
        if not numbers or numbers[-1] != line:
            numbers.append(line)
    return numbers


def _unflatten(lines: _Lines, hits: list[int]) -> dict[int, list[str]]:
    """For each line in ``hits`` whose newlines were lost (frames, source and exception on one
    line, a header glued to a progress bar), the lines it is cut back into."""
    replaced: dict[int, list[str]] = {}
    for index in hits:
        line = lines[index]
        if _FRAME.match(line):
            continue
        pieces = _FLAT_BREAK.split(line)
        if len(pieces) == 1 and not _FRAME_HEAD.match(line.lstrip()):
            continue  # an ordinary line that merely mentions a file
        replaced[index] = [
            part for piece in pieces if piece.strip() for part in _split_frame_piece(piece.strip())
        ]
    return replaced


def _split_frame_piece(piece: str) -> list[str]:
    """A flattened frame with its source text and maybe the exception: one line each."""
    match = _FRAME_HEAD.match(piece)
    if match is None:
        return [piece]
    rest = piece[match.end() :].strip()
    if not rest:
        return [piece]
    lines = [match.group(0)]
    found = _EMBEDDED_EXCEPTION.search(rest)
    code, exception = (rest[: found.start()], rest[found.start() :]) if found else (rest, "")
    code = _TRAILING_CARETS.sub("", code).strip()
    if code:
        lines.append("    " + code)
    if exception:
        lines.append(exception)
    return lines


def _remap(hits: list[int], replaced: dict[int, list[str]]) -> list[int]:
    """Line indices ``hits`` after the splice of ``replaced``; a replaced line gives all its parts."""
    keys = list(replaced)
    shifts = [0]  # shifts[j]: how far a line after the first j replaced lines moved
    for key in keys:
        shifts.append(shifts[-1] + len(replaced[key]) - 1)
    out: list[int] = []
    for hit in hits:
        j = bisect_left(keys, hit)
        new = hit + shifts[j]
        if j < len(keys) and keys[j] == hit:
            out.extend(range(new, new + len(replaced[hit])))
        else:
            out.append(new)
    return out


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


@dataclass
class _Report:
    """One exception (or warning) as printed, before it becomes a ``Failure``."""

    exc_type: str
    message: str
    frames: tuple[Frame, ...]
    start: int  # index of its first line
    end: int = 0  # index of the line after it
    warning: bool = False

    def failure(self, causes: tuple[Failure, ...] = (), command: str | None = None) -> Failure:
        # A DataLoader worker's error re-raised by the loader: the worker's own exception is the
        # failure (its type and message), not the wrapper's "Caught X in DataLoader worker".
        exc_type, message = worker_exception(self.message) or (self.exc_type, self.message)
        return Failure(
            exc_type=exc_type,
            message=message,
            frames=self.frames,
            worker_frames=worker_frames(self.message),
            warning=self.warning,
            command=command,
            causes=causes,
        )


def _frame(file: str, line: int, function: str, code: str | None) -> Frame:
    return Frame(
        file=file, line=line, function=function, code=code or None, user=is_user_path(file)
    )


def _function_name(raw: str | None) -> str:
    """'f(x, y)' -> 'f'; '<cell line: 5>()' -> '<cell line: 5>' (IPython prints arguments)."""
    return (raw or "").split("(", 1)[0].strip()


def _exception_line(text: str) -> tuple[str, str] | None:
    """Type and first message line of an exception line that follows frames, else None."""
    match = _EXCEPTION_LINE.match(text.strip())
    if match is None:
        return None
    exc_type = match["type"]
    if keyword.iskeyword(exc_type) or exc_type in _LOG_LEVELS:
        return None
    # A bare lower-case word is a source line that lost its indentation, not an exception.
    if not (
        exc_type.rsplit(".", 1)[-1][:1].isupper() or (match["msg"] is not None and "." in exc_type)
    ):
        return None
    return exc_type, match["msg"] or ""


def _is_launcher_failure(report: _Report) -> bool:
    """Whether the report is a launcher saying that its child failed: torchrun's
    ChildFailedError, or a CalledProcessError raised outside user code (torch.distributed.launch,
    accelerate launch). The child's own traceback, printed before it, is the failure."""
    if report.exc_type.endswith("ChildFailedError"):
        return True
    return report.exc_type.endswith("CalledProcessError") and not any(f.user for f in report.frames)


class _Parser:
    """Reads reports out of lines; each method takes a line index and says where it stopped."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.n = len(lines)

    def reports(self, candidates: Iterable[int]) -> list[_Report]:
        """The reports starting at ``candidates`` lines (ascending; others cannot start one)."""
        found: list[_Report] = []
        i = 0  # lines before i belong to reports already read
        for k in candidates:
            if k < i:
                continue
            report, end = self._report_at(k)
            if report is not None:
                report.end = i = max(end, k + 1)
                found.append(report)
        return found

    def chain(self, found: list[_Report], complete: bool, floor: int = 1) -> list[_Report] | None:
        """The failure's chain: the last report that is not a warning (the last warning when
        there is none; the report before a launcher's "a child failed" error when there is one)
        and the reports chain markers link it to, first printed first. None when
        the lines may start inside a report, or a chain marker, and the chain cannot be told
        (``complete`` says they do not; lines before ``floor`` come from the first, maybe
        partial, line of the text).
        """
        errors = [k for k, report in enumerate(found) if not report.warning]
        # A launcher's own error (torchrun's ChildFailedError...) yields to the child's.
        while len(errors) > 1 and _is_launcher_failure(found[errors[-1]]):
            errors.pop()
        if not complete and (not errors or _is_launcher_failure(found[errors[-1]])):
            return None
        first = last = errors[-1] if errors else len(found) - 1
        while first >= 0:
            marker = self._skip_blank(found[first].start - 1, step=-1)
            if marker < 0 and not complete:
                return None  # only blank lines above it here: a marker may be further up
            if marker < 0 or not _CHAIN_MARKER.match(self.lines[marker]):
                break
            if first == 0:
                if complete:
                    break
                return None
            previous = found[first - 1]
            if not (previous.end <= marker and self._skip_blank(previous.end) >= marker):
                break
            first -= 1
        if not complete and not (found and found[first].start >= self._safe_start(found, floor)):
            return None
        return found[first : last + 1] if found else []

    def _safe_start(self, found: list[_Report], floor: int) -> int:
        """The first report start that no report before it can reach into: a traceback header
        (not the one a "-- Process N terminated" line puts inside a message)."""
        for report in found:
            k = report.start
            stripped = self.lines[k].strip()
            if (
                k >= floor
                and (_TB_HEADER.match(stripped) or _IPYTHON_HEADER.match(stripped))
                and not _SPAWN_MARKER.match(self.lines[k - 1])
            ):
                return k
        return self.n

    def _skip_blank(self, i: int, step: int = 1) -> int:
        """The first line from ``i`` on (backwards for ``step=-1``) that is not blank."""
        while 0 <= i < self.n and not self.lines[i].strip():
            i += step
        return i

    def _report_at(self, i: int) -> tuple[_Report | None, int]:
        line = self.lines[i]
        stripped = line.strip()
        if "raceback (most recent call last)" in stripped:
            ipython = _IPYTHON_HEADER.match(stripped)
            if ipython is not None:
                return self._traceback(i + 1, i, default_type=ipython["type"])
            if _TB_HEADER.match(stripped):
                return self._traceback(i + 1, i)
        if 'ile "' in line and _FRAME.match(line):
            return self._traceback(i, i)  # a tail without its header
        if self._ipython_frame_at(i):
            return self._traceback(i, i)
        if stripped.startswith("Exception has occurred"):
            return self._debugpy(i)
        caught = _WORKER_CAUGHT.match(stripped) if stripped.startswith("Caught ") else None
        if caught is not None:
            message, end = self._message(i + 1, stripped)
            return _Report(caught["type"], message, (), i), end
        exception = _STRICT_EXCEPTION.match(stripped)
        if exception is not None:
            message, end = self._message(i + 1, exception["msg"] or "")
            return _Report(exception["type"], message, (), i), end
        warning = _WARNING_LINE.match(stripped) if "Warning" in stripped else None
        if warning is not None:
            message, end = self._unwrapped(warning["msg"], line, i + 1)
            code = None
            if end < self.n and self.lines[end][:1].isspace() and not _FRAME.match(self.lines[end]):
                end, code = end + 1, self.lines[end].strip()
            frame = _frame(warning["file"], int(warning["line"]), "", code)
            return _Report(warning["type"], message, (frame,), i, warning=True), end
        return None, i

    def _unwrapped(self, message: str, raw: str, i: int) -> tuple[str, int]:
        """A warning's message with the lines a terminal wrapped it onto joined back, and the
        line after it. The warnings module prints the message on one line, then the source
        line indented: unindented lines before that source line (at most a few) are the
        message's, wrapped at the terminal's width. A line that ends in padding was cut at a
        space; one that does not, mid-word."""
        end = i
        while end < min(self.n, i + _MAX_WRAPPED_LINES):
            line = self.lines[end]
            stripped = line.strip()
            if not stripped or line[:1].isspace() or self._starts_report(stripped):
                break
            end += 1
        if end == i or end >= self.n or not self.lines[end][:1].isspace() or not self.lines[end].strip():
            return message.rstrip(), i  # no wrapped lines, or not followed by the source line
        parts = [message]
        for k in range(i - 1, end - 1):
            previous = self.lines[k] if k >= i else raw
            parts.append(" " if previous != previous.rstrip() else "")
            parts[-2] = parts[-2].rstrip()
            parts.append(self.lines[k + 1].strip())
        return "".join(parts).rstrip(), end

    @staticmethod
    def _starts_report(stripped: str) -> bool:
        """Whether a line starts something other than a wrapped message: a traceback, an
        exception or warning line, a log line or prompt."""
        return bool(
            _TB_HEADER.match(stripped)
            or _STRICT_EXCEPTION.match(stripped)
            or ("Warning" in stripped and _WARNING_LINE.match(stripped))
            or _LOG_LINE.match(stripped)
            or _SHELL_PROMPT.match(stripped)
            or _FRAME.match(stripped)
        )

    def _traceback(self, i: int, start: int, default_type: str = "") -> tuple[_Report | None, int]:
        """Frames from line ``i`` on, then the exception line and its message."""
        frames, i = self._frames(i)
        j = self._skip_blank(i)
        if j < self.n:
            stripped = self.lines[j].strip()
            found = _exception_line(stripped)
            if found is not None and not _LOG_LINE.match(stripped):
                message, end = self._message(j + 1, found[1])
                return _Report(found[0], message, frames, start), end
            caught = _WORKER_CAUGHT.match(stripped)
            if caught is not None:
                message, end = self._message(j + 1, stripped)
                return _Report(caught["type"], message, frames, start), end
        if frames or default_type:  # frames alone still locate the failure
            return _Report(default_type, "", frames, start), i
        return None, i

    def _debugpy(self, i: int) -> tuple[_Report | None, int]:
        """VS Code: "Exception has occurred: X", the message, then frames innermost first."""
        header = _DEBUGPY_HEADER.match(self.lines[i].strip())
        if header is None:
            return None, i
        message, j = self._message(i + 1, None)
        frames, end = self._frames(self._skip_blank(j))
        return _Report(header["type"], message, tuple(reversed(frames)), i), end

    def _frames(self, i: int) -> tuple[tuple[Frame, ...], int]:
        """Consecutive frames (plain or IPython format) from line ``i``."""
        frames: list[Frame] = []
        while i < self.n:
            line = self.lines[i]
            match = _FRAME.match(line) if 'ile "' in line else None
            if match is not None:
                code, i = self._source_after(i + 1)
                frames.append(_frame(match["file"], int(match["line"]), match["func"] or "", code))
                continue
            if self._ipython_frame_at(i):
                frame, i = self._ipython_frame(i)
                if frame is not None:
                    frames.append(frame)
                continue
            stripped = line.strip()
            if _IPY_COLLAPSED.match(stripped):
                i += 1
                continue
            if not stripped:  # blank lines may separate frames (IPython, trimmed pastes)
                j = self._skip_blank(i)
                if j < self.n and (
                    _FRAME.match(self.lines[j])
                    or self._ipython_frame_at(j)
                    or _IPY_COLLAPSED.match(self.lines[j].strip())
                ):
                    i = j
                    continue
            break
        return tuple(frames), i

    def _source_after(self, i: int) -> tuple[str | None, int]:
        """The source line printed under a plain frame (if any), skipping caret lines."""
        code = None
        if i < self.n and self._is_source(self.lines[i]):
            code = self.lines[i].strip()
            i += 1
        # Caret lines, and the extra lines 3.13 prints for a multi-line expression.
        while i < self.n:
            line = self.lines[i]
            if _CARET_LINE.match(line) or (
                code is not None and line[:1].isspace() and line.strip() and not _FRAME.match(line)
            ):
                i += 1
                continue
            break
        return code, i

    def _is_source(self, line: str) -> bool:
        stripped = line.strip()
        if not stripped or line == _FENCE or _CARET_LINE.match(line) or _FRAME.match(line):
            return False
        if (
            _TB_HEADER.match(stripped)
            or _CHAIN_MARKER.match(stripped)
            or _WORKER_MARKER.match(stripped)
        ):
            return False
        if line[:1].isspace():
            return True
        # A source line that lost its indentation, unless it is the exception or a log line.
        return not (
            _exception_line(stripped) or _LOG_LINE.match(stripped) or _WORKER_CAUGHT.match(stripped)
        )

    def _ipython_frame_at(self, i: int) -> bool:
        """Whether line ``i`` starts an IPython frame (its header followed by source lines)."""
        stripped = self.lines[i].strip()
        if not (" in " in stripped or stripped.startswith(("File ", "Cell In", "Input In"))):
            return False
        if not (
            _IPY_CELL_FRAME.match(stripped)
            or (not stripped.startswith('File "') and _IPY_FILE_FRAME.match(stripped))
            or _IPY_OLD_FRAME.match(stripped)
        ):
            return False
        following = self.lines[i + 1] if i + 1 < self.n else ""
        return bool(_IPY_ARROW.match(following) or _IPY_CONTEXT.match(following))

    def _ipython_frame(self, i: int) -> tuple[Frame | None, int]:
        stripped = self.lines[i].strip()
        file, line, function = "", 0, ""
        if (cell := _IPY_CELL_FRAME.match(stripped)) is not None:
            file = f"Cell In[{cell['cell']}]" if cell["cell"] else f"Input In [{cell['input']}]"
            line, function = int(cell["line"] or 0), _function_name(cell["func"])
        elif (located := _IPY_FILE_FRAME.match(stripped)) is not None:
            file, line, function = (
                located["file"],
                int(located["line"]),
                _function_name(located["func"]),
            )
        elif (old := _IPY_OLD_FRAME.match(stripped)) is not None:
            file, function = old["file"], _function_name(old["func"])
        i += 1
        code = None
        while i < self.n:  # context lines, with "---->" on the executing one
            arrow = _IPY_ARROW.match(self.lines[i])
            if arrow is not None:
                line = line or int(arrow["no"])
                code = (arrow["code"] or "").strip() or None
            elif not (_IPY_CONTEXT.match(self.lines[i]) or _CARET_LINE.match(self.lines[i])):
                break
            i += 1
        # Without a line number (a collapsed frame) the frame cannot locate anything.
        return (_frame(file, line, function, code) if line else None), i

    def _message(self, i: int, first: str | None) -> tuple[str, int]:
        """The message whose first line is ``first`` and whose continuation starts at line ``i``,
        and the line after it.

        The message runs until a line that starts something else: a fence, a chain marker, a new
        traceback, a frame (but for the frames of an embedded child traceback), a log line or
        shell prompt,
        a warning line, and after a blank line also a new exception line. Other lines, blank
        lines between them included, continue it (Python prints multi-line messages as they
        are). An embedded "Original Traceback" / "-- Process N terminated" section, frames and
        all, is part of the message, as it is of ``str(exc)``.
        """
        parts: list[str] = [] if first is None else [first]
        child = 0  # an embedded child traceback: 0 none (yet), 1 in its frames, 2 past them
        limit = min(self.n, i + _MAX_MESSAGE_LINES)
        while i < limit:
            line = self.lines[i]
            if line == _FENCE:
                break
            after_blank = not line.strip()
            j = self._skip_blank(i) if after_blank else i
            if j >= self.n or self.lines[j] == _FENCE:
                break
            line = self.lines[j]
            expect_header = child == 1 and _SPAWN_MARKER.match(parts[-1]) is not None
            if self._ends_message(line, child == 1, expect_header, after_blank):
                break
            if _WORKER_MARKER.match(line):
                child = 1
            elif (
                child == 1
                and not line[:1].isspace()
                and not (_FRAME.match(line) or _TB_HEADER.match(line))
            ):
                child = 2  # the child's exception line: frames after it are the parent's again
            parts.extend("" for _ in range(i, j))
            parts.append(line)
            i = j + 1
        return "\n".join(parts).rstrip(), i

    @staticmethod
    def _ends_message(line: str, in_child: bool, expect_header: bool, after_blank: bool) -> bool:
        stripped = line.strip()
        if _LOG_LINE.match(stripped) or _SHELL_PROMPT.match(stripped):
            return True
        if "above exception" in stripped and _CHAIN_MARKER.match(stripped):
            return True
        if "raceback (most recent call last)" in stripped:
            if _IPYTHON_HEADER.match(stripped):
                return True
            if _TB_HEADER.match(stripped) and not expect_header:
                return True
        if stripped.startswith("Exception has occurred"):
            return True
        if not in_child and 'ile "' in line and _FRAME.match(line):
            return True
        if "Warning" in stripped and _WARNING_LINE.match(stripped):
            return True
        return (
            after_blank
            and not line[:1].isspace()
            and bool(_STRICT_EXCEPTION.match(stripped) or _WORKER_CAUGHT.match(stripped))
        )


def _command(text: str, end: int) -> str | None:
    """The last command ``text[:end]`` shows; the last python invocation if there is one.
    Searched backwards a window at a time: the command is usually not far up."""
    other = None
    window = 1 << 16
    while end > 0:
        begin = text.rfind("\n", 0, end - window) + 1 if end > window else 0
        starts: set[int] = set()
        for word in _COMMAND_KEYWORDS:
            found = text.find(word, begin, end)
            while found != -1:
                starts.add(text.rfind("\n", 0, found) + 1)
                stop = text.find("\n", found, end)
                found = text.find(word, stop, end) if stop != -1 else -1
        for start in sorted(starts, reverse=True):
            stop = text.find("\n", start, end)
            match = _COMMAND_LINE.match(
                _clean_line(text[start : stop if stop != -1 else end]).strip()
            )
            if match is None:
                continue
            command = (match["prompt"] or match["run"] or match["bare"]).strip()
            if match["bare"] is not None and not _PYTHON_SCRIPT_ARG.search(command):
                continue  # "python 3.8 is required": prose, not a command
            if _PYTHON_COMMAND.match(command):
                return command
            other = other or command
        end, window = begin, window * 4
    return other


def _read(text: str, complete: bool) -> tuple[_Lines, list[_Report] | None]:
    """The lines of ``text`` and the failure's chain in them (see ``_Parser.chain``)."""
    lines = _Lines(text.split("\n"))
    candidates = _keyword_lines(text, _REPORT_KEYWORDS)
    replaced = _unflatten(lines, _keyword_lines(text, _FLAT_KEYWORDS))
    if replaced:
        lines = lines.splice(replaced)
        candidates = _remap(candidates, replaced)
    parser = _Parser(lines)
    floor = len(replaced[0]) if 0 in replaced else 1  # the lines the first raw line gave
    return lines, parser.chain(parser.reports(candidates), complete, floor)


def parse_log(text: str) -> Failure | None:
    """The failure a log reports: the LAST exception report in the text (a log may hold several
    tracebacks, e.g. retries; the last one is the one that ended the job).
    None when the text holds no exception line and no traceback frames.

    Reports are tracebacks (plain, IPython/Jupyter, VS Code debugger), lone exception lines
    ("RuntimeError: ...", pdb's "*** X: ..."), DataLoader re-raise lines and warnings printed
    without a traceback ("path.py:12: UserWarning: ..."). A warning is the failure only when the
    text holds no exception: warnings printed at exit must not hide the error. Frames without an
    exception line give ``exc_type=""``. IPython frames whose line number is not shown
    (collapsed) are left out. The message's boundaries are described in ``_Parser._message``.

    ``causes``: when chain markers ("During handling of the above exception, another exception
    occurred:" / "The above exception was the direct cause of the following exception:") link
    the last report to reports printed before it (only blank lines between), those earlier
    exceptions, nearest first: ``causes[0]`` is the one printed just above the final exception
    (its ``__cause__`` or ``__context__``), ``causes[-1]`` the first printed (the root cause).
    This is the order ``repairbot.trace.bootstrap`` records at run time and ``classify`` ranks
    by. Causes carry no causes of their own.

    ``command``: the last command line shown before the failure's chain (shell prompt ``$ ``,
    ``user@host:dir$ ``, PowerShell/cmd prompts, ``+ `` from ``set -x``, a GitHub Actions
    ``Run ...`` step, or a bare ``python``/``torchrun``/``accelerate`` invocation of a script),
    preferring a python invocation over later other commands.
    """
    text = _without_escapes(text)
    # The failure is at the end: read the last _TAIL_CHUNK first, more only when that is not enough.
    size = _TAIL_CHUNK
    while True:
        cut = max(len(text) - size, 0)
        # At a line start; mid-line only in a line longer than the chunk (a flattened log).
        begin = (text.find("\n", cut) + 1 or cut) if cut else 0
        lines, chain = _read(text[begin:], complete=begin == 0)
        if chain is not None:
            break
        size *= 4
    if not chain:
        return None
    raw = lines.raw_index(chain[0].start)
    start = begin + sum(map(len, lines.raw[:raw])) + raw  # the chain's offset in the text
    causes = tuple(report.failure() for report in reversed(chain[:-1]))
    failure = chain[-1].failure(causes=causes, command=_command(text, start))
    return _with_causing_warning(failure, lines, chain[0].start)


# Warnings that announce the error that follows them: (the error's message, the warning's).
# An MSE/L1 loss warns "Using a target size ..." and, where the two shapes do not broadcast
# at all, then fails broadcasting them: the error names no loss, the warning names the cause.
_CAUSING_WARNINGS = (
    (
        re.compile(r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\)"),
        re.compile(r"Using a target size \("),
    ),
)
_WARNING_LOOKBACK = 30  # lines above an error searched for the warning that announced it


def _with_causing_warning(failure: Failure, lines: Sequence[str], start: int) -> Failure:
    """The failure as one of the warning printed just before it, where that warning is the
    known announcement of this error: the warning's type and message with the error's frames
    (so the user's line is the call that warned), the error kept as the first cause."""
    if failure.warning:
        return failure
    for error, announcement in _CAUSING_WARNINGS:
        if error.search(failure.message) is None:
            continue
        parser = _Parser(lines)
        for k in range(start - 1, max(-1, start - 1 - _WARNING_LOOKBACK), -1):
            line = lines[k]
            found = announcement.search(line)
            if found is None:
                continue
            report, _ = parser._report_at(k) if "Warning" in line else (None, k)
            if report is not None and report.warning:
                exc_type, message = report.exc_type, report.message
            else:  # the message alone, as a post quotes it
                exc_type, message = "UserWarning", line[found.start():].strip()
            return Failure(
                exc_type=exc_type, message=message, frames=failure.frames,
                worker_frames=failure.worker_frames, command=failure.command,
                causes=(replace(failure, causes=()), *failure.causes),
            )
    return failure


def worker_exception(message: str) -> tuple[str, str] | None:
    """The type and message of the exception a DataLoader worker raised, from the "Original
    Traceback (most recent call last):" section torch embeds in the re-raised exception's
    message (the last section, the innermost); None when there is none, or it shows no
    exception line."""
    if "Original Traceback" not in message:
        return None
    lines = message.split("\n")
    marker = next(
        (k for k in range(len(lines) - 1, -1, -1) if lines[k].lstrip().startswith("Original T")),
        None,
    )
    if marker is None or not _WORKER_MARKER.match(lines[marker]):
        return None
    parser = _Parser(_Lines(lines, clean=True))
    _, end = parser._frames(parser._skip_blank(marker + 1))
    if end >= len(lines):
        return None
    found = _exception_line(lines[end].strip())
    if found is None:
        return None
    text, _ = parser._message(end + 1, found[1])
    return found[0], text


def worker_frames(message: str) -> tuple[Frame, ...]:
    """Frames of a DataLoader worker's "Original Traceback (most recent call last):" section
    embedded in an exception message (torch re-raises worker errors with the worker's traceback
    text inside the message). Empty tuple when the message has none.

    ``torch.multiprocessing.spawn``'s "-- Process N terminated with the following error:"
    section is read the same way. With several sections (a worker error inside a spawned
    process) the last, innermost one counts.
    """
    if "Original Traceback" not in message and "-- Process " not in message:
        return ()
    lines = message.split("\n")
    marker = next(
        (k for k in range(len(lines) - 1, -1, -1) if _WORKER_MARKER.match(lines[k])), None
    )
    if marker is None:
        return ()
    parser = _Parser(_Lines(lines, clean=True))
    start = parser._skip_blank(marker + 1)
    if start < len(lines) and _TB_HEADER.match(lines[start]):
        start += 1
    return parser._frames(start)[0]
