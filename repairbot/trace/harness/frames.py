"""Which code is the user's, and the user frames the probes record (file, line, columns)."""

import itertools
import linecache
import os
import site
import sys
import sysconfig
import types
from typing import Any, Dict, List, Optional, Set

# A user frame as evidence.json holds it: file, line, function, code, user (col, end_line, end_col)
FrameRecord = Dict[str, Any]

# This package's folder: every file in it is the harness's own, never the user's.
HARNESS_DIR = os.path.dirname(os.path.realpath(os.path.abspath(__file__)))


class CodeOwnership:
    """Tells the user's own files from the standard library, installed packages and us."""

    def __init__(self) -> None:
        roots = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            try:
                roots.add(os.path.realpath(sysconfig.get_paths()[key]))
            except KeyError:
                pass
        try:
            roots.update(os.path.realpath(p) for p in site.getsitepackages())
        except AttributeError:  # old virtualenv's site module
            pass
        try:
            roots.add(os.path.realpath(site.getusersitepackages()))
        except AttributeError:
            pass
        self.library_roots = tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots if r))
        # the launcher and the probe files of patterns, loaded by path: the harness's too
        self.harness_files: Set[str] = set()
        self._cache: Dict[str, bool] = {}
        self._user_files: Set[str] = set()  # the files ``_cache`` says are the user's
        self._harness_cache: Dict[str, bool] = {}

    def add_library_root(self, path: str) -> None:
        root = os.path.realpath(path).rstrip(os.sep) + os.sep
        self.library_roots = self.library_roots + (root,)
        self._forget_user_files()

    def add_harness_file(self, path: str) -> None:
        self.harness_files.add(os.path.realpath(os.path.abspath(path)))
        self._forget_user_files()
        self._harness_cache.clear()

    def _forget_user_files(self) -> None:
        # A new library root or harness file can only take files away from the user: what was
        # decided not the user's stays so (a forked run keeps the server's decisions on the
        # modules it imported, each a realpath through the file guard's stat otherwise).
        for filename in self._user_files:
            del self._cache[filename]
        self._user_files.clear()

    def is_harness_file(self, filename: str) -> bool:
        """A file of the harness itself (its frames are trimmed from tracebacks)."""
        cached = self._harness_cache.get(filename)
        if cached is None:
            path = os.path.realpath(os.path.abspath(filename)) if filename else ""
            cached = self._harness_cache[filename] = bool(path) and self._is_harness_path(path)
        return cached

    def _is_harness_path(self, real_path: str) -> bool:
        return real_path in self.harness_files or real_path.startswith(HARNESS_DIR + os.sep)

    def is_user_file(self, filename: str) -> bool:
        cached = self._cache.get(filename)
        if cached is not None:
            return cached
        result = self._decide(filename)
        self._cache[filename] = result
        if result:
            self._user_files.add(filename)
        return result

    def _decide(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            # <stdin>, <string>, <frozen ...>: not a file of the user's project
            return False
        path = os.path.realpath(os.path.abspath(filename))
        if self._is_harness_path(path) or any(os.path.dirname(path) == os.path.dirname(f) for f in self.harness_files):
            return False
        parts = path.replace("\\", "/").split("/")
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return not any(path.startswith(root) for root in self.library_roots)


# One per process: which files are the user's does not change from one probe to the next.
OWNERSHIP = CodeOwnership()


def loaded_module_files() -> List[str]:
    """The files of the modules imported so far (absolute paths only: some extension-backed
    modules carry a bare, relative ``__file__``, not a real file)."""
    files = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path and os.path.isabs(path):
            files.append(path)
    return files


def _char_col(filename: str, lineno: int, byte_col: Optional[int]) -> Optional[int]:
    """Python reports columns as UTF-8 byte offsets; LibCST counts characters."""
    if byte_col is None:
        return None
    line = linecache.getline(filename, lineno)
    if not line:
        return byte_col
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


char_col = _char_col


def positions(code: types.CodeType, lasti: Optional[int]) -> Any:
    """(line, end_line, col, end_col) of the instruction at ``lasti`` (Python >= 3.11)."""
    if lasti is None or lasti < 0 or not hasattr(code, "co_positions"):
        return None
    try:
        pos = next(itertools.islice(code.co_positions(), lasti // 2, None))
    except (StopIteration, ValueError):
        return None
    if pos is None or pos[0] is None:
        return None
    return pos


def frame_record(
    filename: str, lineno: int, function: str, code_obj: Optional[types.CodeType] = None, lasti: Optional[int] = None,
) -> FrameRecord:
    record = {
        "file": filename,
        "line": lineno,
        "function": function,
        "code": (linecache.getline(filename, lineno) or "").strip() or None,
        "user": OWNERSHIP.is_user_file(filename),
    }
    pos = positions(code_obj, lasti) if code_obj is not None else None
    if pos is not None and pos[0] == lineno and pos[2] is not None:
        record["col"] = _char_col(filename, pos[0], pos[2])
        record["end_line"] = pos[1]
        record["end_col"] = _char_col(filename, pos[1], pos[3])
    return record


def user_call_site(skip_self: object = None) -> Optional[FrameRecord]:
    """The innermost user frame outside the constructor chain of ``skip_self``.

    Called from inside a constructor: frames whose ``self`` is the object being built are
    that object's own ``__init__`` chain, not the place that constructed it.
    """
    frame: Optional[types.FrameType] = sys._getframe(1)
    while frame is not None:
        if skip_self is not None and frame.f_locals.get("self") is skip_self:
            frame = frame.f_back
            continue
        if OWNERSHIP.is_user_file(frame.f_code.co_filename):
            return frame_record(
                frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name,
                frame.f_code, frame.f_lasti,
            )
        frame = frame.f_back
    return None


def outside_harness(frame: Optional[types.FrameType]) -> Optional[types.FrameType]:
    """The first frame at or above ``frame`` that is not the harness's own (None at the top)."""
    while frame is not None and OWNERSHIP.is_harness_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def short_site(record: Optional[FrameRecord]) -> Optional[str]:
    if not record:
        return None
    return "%s:%s" % (record["file"], record["line"])


def shape(value: Any) -> Optional[List[int]]:
    try:
        return [int(d) for d in value.shape]
    except Exception:
        return None
