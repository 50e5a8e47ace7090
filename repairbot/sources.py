"""The user's source files for one repair: exact bytes in, exact bytes out.

Each file is read once; its LibCST module is parsed once per content and cached, so that
several attempts and candidate patterns share the work. Bytes outside an edit never change:
LibCST regenerates the file from its own tree (encoding cookie, BOM, CRLF, tabs and a missing
final newline included), and a file whose round trip is not byte-identical is refused.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import signal
import stat
import tempfile
import threading
import tokenize
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper

from repairbot.types import BadInput


class SourceError(BadInput):
    """A user file repairbot cannot read or must not edit."""


def relative_path(root: Path, file: str | Path) -> str:
    """``file`` as reports show it: relative to ``root`` in POSIX form, as given when outside."""
    try:
        return Path(file).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return str(file)


def report_path(file: str | Path) -> str:
    """A path of the user's project as every report line shows it: relative to the top of its
    git repository (the root the reports' paths are relative to), or to the working directory
    outside one; a relative path is taken as already relative to it."""
    path = Path(file)
    if not path.is_absolute():
        return path.as_posix()
    return relative_path(_project_root(path.parent), path)


@functools.lru_cache(maxsize=1024)
def _project_root(folder: Path) -> Path:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return Path.cwd()


def line_endings(data: bytes) -> set[str]:
    """The kinds of line ending a file uses: a subset of {'\\r\\n', '\\n', '\\r'}."""
    crlf = data.count(b"\r\n")
    kinds = set()
    if crlf:
        kinds.add("\r\n")
    if data.count(b"\n") > crlf:
        kinds.add("\n")
    if data.count(b"\r") > crlf:
        kinds.add("\r")
    return kinds


def check_encoding(path: Path, data: bytes) -> str:
    """The file's encoding (PEP 263 cookie, BOM, else UTF-8); SourceError unless every byte decodes.

    Checked before compiling: ``compile`` of bytes lets an undecodable byte in a comment through
    (and reports one in a string as a syntax error), while ``python SCRIPT`` refuses the file
    and LibCST could not rewrite it.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if b"coding" in b"\n".join(data.splitlines()[:2]):
            raise SourceError(f"{path}: {error.msg}; fix the coding cookie or save the file as UTF-8") from None
        encoding = "utf-8"  # no cookie, and the first lines are not UTF-8: say where below
    try:
        data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        byte = data[error.start : error.start + 1].hex()
        hint = (
            "add a coding cookie such as `# -*- coding: latin-1 -*-` as its first line, or save it as UTF-8"
            if encoding == "utf-8"
            else "fix its coding cookie or save it as UTF-8"
        )
        raise SourceError(f"{path}:{line}: byte 0x{byte} is not valid {encoding}; {hint}") from None
    return encoding


def check_syntax(path: Path, data: bytes) -> None:
    """BadInput unless ``data`` is a Python module the interpreter accepts."""
    if b"\x00" in data:
        raise SourceError(f"{path}: not a Python source file (it contains NUL bytes)")
    check_encoding(path, data)
    try:
        compile(data, str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        where = f"{path}:{error.lineno}" if error.lineno else str(path)
        raise SourceError(f"{where}: syntax error: {error.msg}") from None
    except (UnicodeDecodeError, ValueError) as error:
        raise SourceError(f"{path}: cannot decode the file ({error}); add a coding cookie or save it as UTF-8") from None


class Sources:
    """Original bytes, candidate bytes and parsed modules of the files a repair touches.

    ``programs``: files that run as another text (a notebook runs as the Python program of its
    code cells, see repairbot/notebook.py): their "bytes" here are the program's.
    """

    def __init__(self, programs: Mapping[Path, bytes] | None = None) -> None:
        self._original: dict[Path, bytes] = {p.resolve(): data for p, data in (programs or {}).items()}
        self._current: dict[Path, bytes] = {}
        self._modules: dict[tuple[Path, str], cst.Module] = {}
        self._wrappers: dict[tuple[Path, str], MetadataWrapper] = {}

    def original(self, path: Path) -> bytes:
        path = path.resolve()
        if path not in self._original:
            try:
                self._original[path] = path.read_bytes()
            except OSError as error:
                raise SourceError(f"{path}: cannot read: {error.strerror}") from None
        return self._original[path]

    def current(self, path: Path) -> bytes:
        path = path.resolve()
        if path in self._current:
            return self._current[path]
        return self.original(path)

    def module(self, path: Path, data: bytes | None = None) -> cst.Module:
        """The parsed module of ``data`` (default: the file's current bytes), cached."""
        path = path.resolve()
        data = self.current(path) if data is None else data
        key = (path, hashlib.sha1(data).hexdigest())
        if key not in self._modules:
            self._modules[key] = parse(path, data)
        return self._modules[key]

    def metadata(self, path: Path) -> MetadataWrapper:
        """A metadata wrapper over the current module (positions resolve on the same nodes)."""
        path = path.resolve()
        data = self.current(path)
        key = (path, hashlib.sha1(data).hexdigest())
        if key not in self._wrappers:
            self._wrappers[key] = MetadataWrapper(self.module(path, data), unsafe_skip_copy=True)
        return self._wrappers[key]

    def set(self, path: Path, data: bytes) -> None:
        self._current[path.resolve()] = data

    def discard(self, path: Path) -> None:
        self._current.pop(path.resolve(), None)

    def changed(self) -> dict[Path, bytes]:
        """Files whose candidate bytes differ from the originals."""
        return {p: d for p, d in self._current.items() if d != self._original.get(p)}


def parse(path: Path, data: bytes) -> cst.Module:
    """Parse a user file for editing; SourceError when its bytes could not survive a rewrite."""
    endings = line_endings(data)
    if "\r" in endings:
        raise SourceError(f"{path}: uses bare CR line endings, which cannot be rewritten exactly; convert it to LF or CRLF")
    if len(endings) > 1:
        raise SourceError(f"{path}: mixes CRLF and LF line endings; repairbot will not risk rewriting it")
    try:
        module = cst.parse_module(data)
    except cst.ParserSyntaxError as error:
        raise SourceError(f"{path}:{error.raw_line}: LibCST cannot parse this file: {error.message}") from None
    except (UnicodeDecodeError, LookupError) as error:
        raise SourceError(f"{path}: cannot decode the file ({error})") from None
    if module.bytes != data:
        raise SourceError(f"{path}: LibCST cannot reproduce this file byte for byte; it will not be edited")
    return module


def write_atomic(path: Path, data: bytes) -> None:
    """Replace a file's bytes in one step, keeping its permissions (temp file, then rename)."""
    write_all_atomic({path: data})


def write_all_atomic(files: Mapping[Path, bytes]) -> None:
    """Replace several files' bytes, all or none, keeping their permissions.

    A file or folder without write permission is refused before anything is written (root
    could write anyway, but a file made read-only is the user's "do not touch"). Every new
    content is written and synced to a temp file beside its target first; only then are they
    renamed over the targets, with SIGINT/SIGTERM held back, so an interrupt or a full disk
    never leaves half of a fix (or half of a file) behind.
    """
    targets = {path.resolve(): data for path, data in files.items()}
    for path in targets:
        _check_writable(path)
    staged: dict[Path, str] = {}
    path = next(iter(targets), Path())
    try:
        for path, data in targets.items():
            mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".repairbot", dir=path.parent)
            staged[path] = tmp
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
        with deferred_signals():
            for path, tmp in list(staged.items()):
                os.replace(tmp, path)
                del staged[path]
    except OSError as error:
        raise SourceError(f"{path}: cannot write it: {error.strerror}; nothing was written") from None
    finally:
        for tmp in staged.values():
            Path(tmp).unlink(missing_ok=True)


def _check_writable(path: Path) -> None:
    folder = path.parent
    for target, what in ((path, "file"), (folder, "folder")):
        if not target.exists():
            continue
        if not stat.S_IMODE(target.stat().st_mode) & 0o222 or not os.access(target, os.W_OK):
            raise SourceError(f"{target}: the {what} is read-only; nothing was written")


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the block has finished, then act on them.

    For steps that must not stop halfway: a group of renames, a git command (killed halfway,
    it could leave a lock file, or run on after repairbot has exited). A signal that arrives
    meanwhile is re-raised when the block ends, so the interrupt still wins (exit 130/143);
    a second one acts at once. Only the main thread can handle signals: elsewhere, no change.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    pending: list[int] = []

    def act(signum: int, frame: FrameType | None) -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)
        previous.clear()
        handler = signal.getsignal(signum)
        if callable(handler):
            handler(signum, frame)
        else:  # the default action, as it would have been taken at once
            signal.raise_signal(signum)

    def defer(signum: int, frame: FrameType | None) -> None:
        if pending:  # asked twice: stop now
            act(signum, frame)
        pending.append(signum)

    for held in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(held) not in (signal.SIG_IGN, None):  # an ignored signal stays ignored
            previous[held] = signal.signal(held, defer)
    try:
        yield
    finally:
        if pending and previous:
            act(pending[0], None)
        for number, handler in previous.items():
            signal.signal(number, handler)
