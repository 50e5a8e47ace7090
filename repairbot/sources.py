"""The user's source files for one repair: exact bytes in, exact bytes out.

Each file is read once; its LibCST module is parsed once per content and cached, so that
several attempts and candidate patterns share the work. Bytes outside an edit never change:
LibCST regenerates the file from its own tree (encoding cookie, BOM, CRLF, tabs and a missing
final newline included), and a file whose round trip is not byte-identical is refused.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from repairbot.types import BadInput


class SourceError(BadInput):
    """A user file repairbot cannot read or must not edit."""


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


def check_syntax(path: Path, data: bytes) -> None:
    """BadInput unless ``data`` is a Python module the interpreter accepts."""
    if b"\x00" in data:
        raise SourceError(f"{path}: not a Python source file (it contains NUL bytes)")
    try:
        compile(data, str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        where = f"{path}:{error.lineno}" if error.lineno else str(path)
        raise SourceError(f"{where}: syntax error: {error.msg}") from None
    except (UnicodeDecodeError, ValueError) as error:
        raise SourceError(f"{path}: cannot decode the file ({error}); add a coding cookie or save it as UTF-8") from None


class Sources:
    """Original bytes, candidate bytes and parsed modules of the files a repair touches."""

    def __init__(self) -> None:
        self._original: dict[Path, bytes] = {}
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
    path = path.resolve()
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".repairbot", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
