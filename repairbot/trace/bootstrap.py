"""repairbot's tracing harness: runs a user's script as ``__main__`` under probes.

This file runs INSIDE the child process, under the user's interpreter, started by its file
path (``python /path/to/bootstrap.py CONFIG.json``). That interpreter may not have repairbot
installed and may be older than repairbot's own Python, so this module depends on the
standard library and torch only, and keeps to Python 3.8 syntax. Its own frames never count
as user code.

What it does, driven by the JSON config the parent wrote:
- serves candidate fixes from an in-memory overlay (main script and imported user modules),
  so that nothing on disk changes while a fix is being verified;
- forces every DataLoader's batch size (and an argparse ``--batch-size`` default) down to the
  configured size, cuts every pass over a DataLoader after ``max_batches`` batches (then the
  real run's last, partial batch), and leaves a hand-written loop after ``max_steps``
  optimizer steps taken outside DataLoader passes: the script goes on after it to its end;
- guards the file system: a file that existed before the run is never altered or deleted
  (writes go to a shadow copy in the scratch folder, deletes are only recorded), while the
  script's view (stat, listdir, scandir, glob, open) agrees with what it did; every file the
  run creates is logged so that the parent can remove it afterwards;
- traces where each ``nn.Linear`` was constructed and the input shape it last saw, and where
  every sized layer (Linear, Conv, RNN, Embedding, norms) was built with the traced values of
  its size arguments and the constructor call sites they came through;
- on an uncaught exception, prints the traceback as Python would and writes structured
  evidence (exception, frames, the failing module, locals of user frames) as JSON.
"""

import ast
import base64
import builtins
import hashlib
import importlib.machinery
import importlib.util
import io
import itertools
import json
import linecache
import os
import re
import shutil
import site
import sys
import sysconfig
import time
import traceback
import types
import weakref

_THIS_FILE = os.path.abspath(__file__)
_real_open = builtins.open
_real_os_open = os.open


# --------------------------------------------------------------------------------------------
# Which code is the user's


class CodeOwnership:
    """Tells the user's own files from the standard library, installed packages and us."""

    def __init__(self):
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
        self._cache = {}

    def add_library_root(self, path):
        root = os.path.realpath(path).rstrip(os.sep) + os.sep
        self.library_roots = self.library_roots + (root,)
        self._cache.clear()

    def is_user_file(self, filename):
        cached = self._cache.get(filename)
        if cached is not None:
            return cached
        result = self._decide(filename)
        self._cache[filename] = result
        return result

    def _decide(self, filename):
        if not filename or filename.startswith("<"):
            # <stdin>, <string>, <frozen ...>: not a file of the user's project
            return False
        path = os.path.realpath(os.path.abspath(filename))
        if path == _THIS_FILE or os.path.dirname(path) == os.path.dirname(_THIS_FILE):
            return False
        parts = path.replace("\\", "/").split("/")
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return not any(path.startswith(root) for root in self.library_roots)


OWNERSHIP = CodeOwnership()


# --------------------------------------------------------------------------------------------
# Positions and call sites


def _char_col(filename, lineno, byte_col):
    """Python reports columns as UTF-8 byte offsets; LibCST counts characters."""
    if byte_col is None:
        return None
    line = linecache.getline(filename, lineno)
    if not line:
        return byte_col
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _positions(code, lasti):
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


def frame_record(filename, lineno, function, code_obj=None, lasti=None):
    record = {
        "file": filename,
        "line": lineno,
        "function": function,
        "code": (linecache.getline(filename, lineno) or "").strip() or None,
        "user": OWNERSHIP.is_user_file(filename),
    }
    pos = _positions(code_obj, lasti) if code_obj is not None else None
    if pos is not None and pos[0] == lineno and pos[2] is not None:
        record["col"] = _char_col(filename, pos[0], pos[2])
        record["end_line"] = pos[1]
        record["end_col"] = _char_col(filename, pos[1], pos[3])
    return record


def user_call_site(skip_self=None):
    """The innermost user frame outside the constructor chain of ``skip_self``.

    Called from inside a constructor: frames whose ``self`` is the object being built are
    that object's own ``__init__`` chain, not the place that constructed it.
    """
    frame = sys._getframe(1)
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


def _short_site(record):
    if not record:
        return None
    return "%s:%s" % (record["file"], record["line"])


# --------------------------------------------------------------------------------------------
# The overlay: candidate fixes served from memory


class OverlayLoader:
    """Loads a user module from overlay bytes (or its file) with its loops instrumented."""

    def __init__(self, fullname, path, source):
        self.name = fullname
        self.path = path
        self.source = source  # None: read the file when the module runs

    def create_module(self, spec):
        return None

    def _source(self):
        if self.source is None:
            with _real_open(self.path, "rb") as handle:
                self.source = handle.read()
        return self.source

    def get_code(self, fullname):
        return LOOPS.compile(self._source(), self.path)

    def exec_module(self, module):
        module.__file__ = self.path
        exec(self.get_code(self.name), module.__dict__)

    def get_source(self, fullname):
        import importlib.util

        return importlib.util.decode_source(self._source())

    def get_filename(self, fullname):
        return self.path

    def is_package(self, fullname):
        return os.path.basename(self.path) == "__init__.py"


class OverlayFinder:
    """A meta path finder that swaps the loader of the user's modules (overlaid or not)."""

    def __init__(self, overlay):
        self.overlay = overlay

    def find_spec(self, fullname, path, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin:
            return None
        origin = os.path.abspath(spec.origin)
        if origin not in self.overlay and not (origin.endswith(".py") and OWNERSHIP.is_user_file(origin)):
            return None
        spec.loader = OverlayLoader(fullname, origin, self.overlay.get(origin))
        spec.cached = None
        return spec

    def invalidate_caches(self):
        pass


def _decode_source(data):
    import importlib.util

    return importlib.util.decode_source(data)


def install_overlay(overlay):
    for path, data in overlay.items():
        text = _decode_source(data)
        lines = text.splitlines(True)
        # mtime None: linecache keeps the overlay's lines and never rereads the disk
        linecache.cache[path] = (len(text), None, lines, path)
    sys.meta_path.insert(0, OverlayFinder(overlay))


# --------------------------------------------------------------------------------------------
# The file guard: pre-existing files are never altered or deleted


_real_stat = os.stat
_real_lstat = os.lstat
_real_listdir = os.listdir
_real_scandir = os.scandir
_real_rmdir = os.rmdir


def _r_lexists(path):
    try:
        _real_lstat(path)
    except (OSError, ValueError):
        return False
    return True


def _r_isfile(path):
    import stat as _stat

    try:
        return _stat.S_ISREG(_real_stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _r_isdir(path):
    import stat as _stat

    try:
        return _stat.S_ISDIR(_real_stat(path).st_mode)
    except (OSError, ValueError):
        return False


class _suppress_os_error(object):
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, OSError)


class FileGuard:
    """Redirects writes to pre-existing files into shadow copies; logs created files.

    All state lives on disk (shadow copies, deletion markers, the creation log) so that
    forked DataLoader workers share it with the main process.
    """

    def __init__(self, scratch, created_log):
        self.shadow_root = os.path.join(scratch, "fs")
        self.deleted_root = os.path.join(scratch, "deleted")
        self.created_log = created_log
        self.created = set()
        self.shadowed = set()
        self.suppressed_deletes = set()
        self.scratch = os.path.abspath(scratch) + os.sep

    # paths ------------------------------------------------------------------------------
    def _mirror(self, root, real):
        drive, rest = os.path.splitdrive(real)
        return os.path.join(root, drive.replace(":", ""), rest.lstrip("\\/"))

    def shadow(self, real):
        return self._mirror(self.shadow_root, real)

    def deleted_marker(self, real):
        # flat, hashed names: a deleted folder and the files it held must not collide
        digest = hashlib.sha1(real.encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.deleted_root, digest)

    def owns(self, real):
        return real.startswith(self.scratch)

    def is_deleted(self, real):
        return _r_lexists(self.deleted_marker(real))

    def has_shadow(self, real):
        return _r_lexists(self.shadow(real))

    def is_protected(self, real):
        """Existed before the run (and was not created by it)."""
        if self.owns(real) or real in self.created:
            return False
        return self.has_shadow(real) or self.is_deleted(real) or _r_lexists(real)

    # bookkeeping ------------------------------------------------------------------------
    def log_created(self, real, kind="f"):
        self.created.add(real)
        fd = _real_os_open(self.created_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, ("%s %s\n" % (kind, real)).encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)

    def _ensure_parent(self, path):
        parent = os.path.dirname(path)
        if parent and not _r_isdir(parent):
            os.makedirs(parent)

    def mark_deleted(self, real):
        marker = self.deleted_marker(real)
        self._ensure_parent(marker)
        with _real_open(marker, "w"):
            pass
        shadow = self.shadow(real)
        if _r_lexists(shadow):
            os.remove(shadow)
        self.suppressed_deletes.add(real)

    def unmark_deleted(self, real):
        marker = self.deleted_marker(real)
        if _r_lexists(marker):
            os.remove(marker)

    # decisions --------------------------------------------------------------------------
    def path_for_read(self, real):
        if self.owns(real):
            return real
        if self.has_shadow(real):
            return self.shadow(real)
        if self.is_deleted(real):
            raise FileNotFoundError(2, "No such file or directory", real)
        return real

    def path_for_write(self, real, keep_content):
        """Where a write to ``real`` goes; ``keep_content`` for append and update modes."""
        if self.owns(real):
            return real
        if self.is_protected(real):
            shadow = self.shadow(real)
            if not _r_lexists(shadow):
                self._ensure_parent(shadow)
                if keep_content and not self.is_deleted(real) and _r_isfile(real):
                    shutil.copyfile(real, shadow)
                self.shadowed.add(real)
            self.unmark_deleted(real)
            return shadow
        if not _r_lexists(real):
            self.log_created(real)
        return real


GUARD = None  # set in main()


def _real_path(file):
    return os.path.abspath(os.fspath(file))


def _is_path(file):
    return isinstance(file, (str, bytes, os.PathLike)) and not isinstance(file, bytes)


def _writes(mode):
    return any(c in mode for c in "wax+")


def guarded_open(file, mode="r", *args, **kwargs):
    if GUARD is not None and _is_path(file):
        real = _real_path(file)
        if _writes(mode):
            if "x" in mode and _r_lexists(real) and not GUARD.is_deleted(real) \
                    and not GUARD.has_shadow(real):
                # exclusive creation of an existing file fails as it would, untouched
                return _real_open(real, mode, *args, **kwargs)
            keep = "a" in mode or ("+" in mode and "w" not in mode)
            file = GUARD.path_for_write(real, keep_content=keep)
        else:
            file = GUARD.path_for_read(real)
    return _real_open(file, mode, *args, **kwargs)


def guarded_os_open(path, flags, mode=0o777, *args, **kwargs):
    if GUARD is not None and _is_path(path) and not kwargs.get("dir_fd") and not args:
        real = _real_path(path)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
            if flags & os.O_EXCL and _r_lexists(real) and not GUARD.is_deleted(real):
                return _real_os_open(real, flags, mode)
            # the shadow starts as a copy; O_TRUNC then truncates the copy, as it would the file
            path = GUARD.path_for_write(real, keep_content=True)
        else:
            path = GUARD.path_for_read(real)
    return _real_os_open(path, flags, mode, *args, **kwargs)


def _wrap_remove(real_remove):
    def guarded_remove(path, *args, **kwargs):
        if GUARD is None or not _is_path(path) or args or kwargs:
            return real_remove(path, *args, **kwargs)
        real = _real_path(path)
        if GUARD.owns(real) or real in GUARD.created:
            GUARD.created.discard(real)
            return real_remove(real)
        if GUARD.is_protected(real):
            if GUARD.is_deleted(real):
                raise FileNotFoundError(2, "No such file or directory", real)
            GUARD.mark_deleted(real)
            return None
        return real_remove(real)

    return guarded_remove


def _wrap_rename(real_rename):
    def guarded_rename(src, dst, *args, **kwargs):
        if GUARD is None or not (_is_path(src) and _is_path(dst)) or args or kwargs:
            return real_rename(src, dst, *args, **kwargs)
        real_src, real_dst = _real_path(src), _real_path(dst)
        source = GUARD.path_for_read(real_src)
        if GUARD.is_protected(real_src) or GUARD.is_protected(real_dst):
            if _r_isdir(source):
                raise PermissionError(1, "repairbot: a run may not move a folder that existed before it", real_src)
            target = GUARD.path_for_write(real_dst, keep_content=False)
            shutil.copyfile(source, target)
            if GUARD.is_protected(real_src):
                GUARD.mark_deleted(real_src)
            else:
                GUARD.created.discard(real_src)
                os.remove(source)
            return None
        # both are the run's own files: a real move
        if not _r_lexists(real_dst):
            GUARD.log_created(real_dst)
        GUARD.created.discard(real_src)
        return real_rename(real_src, real_dst)

    return guarded_rename


def _wrap_mkdir(real_mkdir):
    def guarded_mkdir(path, mode=0o777, *args, **kwargs):
        if GUARD is not None and _is_path(path) and not args and not kwargs:
            real = _real_path(path)
            if not GUARD.owns(real) and GUARD.is_deleted(real) and _r_isdir(real):
                GUARD.unmark_deleted(real)  # a folder the run removed, made again (still empty)
                return None
            if not _r_lexists(real) and not GUARD.owns(real):
                GUARD.log_created(real, kind="d")
        return real_mkdir(path, mode, *args, **kwargs)

    return guarded_mkdir


def _wrap_rmdir(real_rmdir):
    def guarded_rmdir(path, *args, **kwargs):
        if GUARD is None or not _is_path(path) or args or kwargs:
            return real_rmdir(path, *args, **kwargs)
        real = _real_path(path)
        if GUARD.owns(real) or real in GUARD.created:
            GUARD.created.discard(real)
            return real_rmdir(real)
        if GUARD.is_protected(real):
            if GUARD.is_deleted(real):
                raise FileNotFoundError(2, "No such file or directory", real)
            if not _r_isdir(real):
                raise NotADirectoryError(20, "Not a directory", real)
            if os.listdir(real):  # what the script still sees in it
                raise OSError(39, "Directory not empty", real)
            GUARD.mark_deleted(real)
            return None
        return real_rmdir(real)

    return guarded_rmdir


def _wrap_rmtree(real_rmtree):
    def guarded_rmtree(path, *args, **kwargs):
        if GUARD is None or not _is_path(path):
            return real_rmtree(path, *args, **kwargs)
        real = _real_path(path)
        if GUARD.owns(real) or real in GUARD.created:
            GUARD.created.discard(real)
            return real_rmtree(real, *args, **kwargs)
        if not GUARD.is_protected(real) or (not GUARD.is_deleted(real) and not _r_isdir(real)):
            return real_rmtree(real, *args, **kwargs)
        if GUARD.is_deleted(real):
            if (args[:1] and args[0]) or kwargs.get("ignore_errors"):
                return None
            raise FileNotFoundError(2, "No such file or directory", real)
        # a folder that existed: remove what the run created in it, record the rest as deleted
        for dirpath, dirnames, filenames in os.walk(real, topdown=False):
            for name in filenames:
                child = os.path.join(dirpath, name)
                if child in GUARD.created:
                    GUARD.created.discard(child)
                    os.remove(child)
                else:
                    GUARD.mark_deleted(child)
            for name in dirnames:
                child = os.path.join(dirpath, name)
                if child in GUARD.created:
                    GUARD.created.discard(child)
                    with _suppress_os_error():
                        _real_rmdir(child)
                else:
                    GUARD.mark_deleted(child)
        GUARD.mark_deleted(real)
        return None

    return guarded_rmtree


def _wrap_truncate(real_truncate):
    def guarded_truncate(path, length):
        if GUARD is not None and _is_path(path):
            path = GUARD.path_for_write(_real_path(path), keep_content=True)
        return real_truncate(path, length)

    return guarded_truncate


def _guard_torch_serialization(torch):
    """torch.save opens a path in C++, past the patched ``open``: guard that path here.

    (torch.load reads through Python's ``open``, which the guard already serves.)
    """
    real_save = torch.save

    def guarded_save(obj, f, *args, **kwargs):
        if GUARD is not None and _is_path(f):
            f = GUARD.path_for_write(_real_path(f), keep_content=False)
        return real_save(obj, f, *args, **kwargs)

    guarded_save.__doc__, guarded_save.__wrapped__ = real_save.__doc__, real_save
    torch.save = torch.serialization.save = guarded_save


# The script's view of the file system: what it wrote, renamed and deleted, never the disk's
# stale state (shadow copies stand in for the files, deletion markers hide them)


def _viewed(path):
    """The file that stands for ``path`` in the script's view; FileNotFoundError if it deleted it."""
    real = _real_path(path)
    if GUARD.owns(real):
        return path
    if GUARD.has_shadow(real) and _r_isfile(GUARD.shadow(real)):
        return GUARD.shadow(real)
    if GUARD.is_deleted(real):
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    return path


def _wrap_stat(real_stat):
    def guarded_stat(path, *args, **kwargs):
        if GUARD is not None and _is_path(path) and not args and not kwargs.get("dir_fd"):
            path = _viewed(path)
        return real_stat(path, *args, **kwargs)

    return guarded_stat


def guarded_listdir(path="."):
    if GUARD is None or not _is_path(path):
        return _real_listdir(path)
    real = _real_path(path)
    if GUARD.owns(real):
        return _real_listdir(path)
    if GUARD.is_deleted(real):
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    return [name for name in _real_listdir(path) if not GUARD.is_deleted(os.path.join(real, name))]


class _ShadowEntry(object):
    """A DirEntry for a file the run rewrote: its name and path, the shadow copy's metadata."""

    def __init__(self, entry, shadow):
        self._entry, self._shadow = entry, shadow
        self.name, self.path = entry.name, entry.path

    def stat(self, follow_symlinks=True):
        return _real_stat(self._shadow)

    def is_file(self, follow_symlinks=True):
        return True

    def is_dir(self, follow_symlinks=True):
        return False

    def is_symlink(self):
        return False

    def inode(self):
        return _real_stat(self._shadow).st_ino

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return "<DirEntry %r>" % self.name


class _GuardedScandir(object):
    def __init__(self, iterator, real):
        self._iterator, self._real = iterator, real

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            entry = next(self._iterator)
            child = os.path.join(self._real, entry.name)
            if GUARD.is_deleted(child):
                continue
            if GUARD.has_shadow(child) and _r_isfile(GUARD.shadow(child)):
                return _ShadowEntry(entry, GUARD.shadow(child))
            return entry

    def close(self):
        self._iterator.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def guarded_scandir(path="."):
    if GUARD is None or not _is_path(path):
        return _real_scandir(path)
    real = _real_path(path)
    if GUARD.owns(real):
        return _real_scandir(path)
    if GUARD.is_deleted(real):
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    return _GuardedScandir(_real_scandir(path), real)


def _guard_pathlib_accessor(replacements):
    """Python < 3.11: pathlib calls os functions it bound when it was imported."""
    import pathlib

    accessor = getattr(pathlib, "_NormalAccessor", None)
    if accessor is None:
        return
    for name, (original, replacement) in replacements.items():
        if getattr(accessor, name, None) in (original, replacement):
            setattr(accessor, name, staticmethod(replacement))
    if getattr(accessor, "open", None) is _real_open:  # 3.10: io.open
        accessor.open = staticmethod(guarded_open)


def install_file_guard(scratch, created_log, torch=None):
    global GUARD
    GUARD = FileGuard(scratch, created_log)
    if torch is not None:
        _guard_torch_serialization(torch)
    import pathlib  # noqa: F401  (imported before os is patched: its accessor binds the originals)

    originals = {"open": os.open, "stat": os.stat, "lstat": os.lstat, "listdir": os.listdir,
                 "scandir": os.scandir, "unlink": os.unlink, "rmdir": os.rmdir, "rename": os.rename,
                 "replace": os.replace, "mkdir": os.mkdir}
    builtins.open = guarded_open
    io.open = guarded_open
    os.open = guarded_os_open
    os.remove = _wrap_remove(os.remove)
    os.unlink = _wrap_remove(os.unlink)
    os.rename = _wrap_rename(os.rename)
    os.replace = _wrap_rename(os.replace)
    os.mkdir = _wrap_mkdir(os.mkdir)
    os.rmdir = _wrap_rmdir(os.rmdir)
    os.truncate = _wrap_truncate(os.truncate)
    os.stat = _wrap_stat(os.stat)
    os.lstat = _wrap_stat(os.lstat)
    os.listdir = guarded_listdir
    os.scandir = guarded_scandir
    shutil.rmtree = _wrap_rmtree(shutil.rmtree)
    _guard_pathlib_accessor({name: (original, getattr(os, name)) for name, original in originals.items()})


# --------------------------------------------------------------------------------------------
# Run state shared by the probes


class RunState:
    def __init__(self, config):
        limits = config.get("limits", {})
        self.force_batch = bool(limits.get("force_batch_size", True))
        self.cut_batches = bool(limits.get("cut_batches", True))
        self.step_budget = bool(limits.get("step_budget", True))
        self.batch_size = int(limits.get("batch_size", 2))
        self.max_batches = int(limits.get("max_batches", 2))
        self.max_steps = int(limits.get("max_steps", 20))
        self.forced = []  # what the limits changed, with where
        self.active_loaders = 0
        self.passes = []  # the DataLoader passes under way: {"driven": pulled by a loop header}
        self.steps = 0
        self.free_steps = 0  # steps taken while no DataLoader was being iterated
        self.batches = 0
        self.forwards = 0
        self.loaders_cut = 0
        self.last_batches = []  # DataLoaders whose passes end with the real run's last batch
        self.linears = []  # records, in construction order
        self.layer_sites = []  # construction records of every sized layer (install_layer_site_probe)
        self.layer_site_index = weakref.WeakKeyDictionary()
        self.linear_index = weakref.WeakKeyDictionary()
        self.module_sites = weakref.WeakKeyDictionary()
        self.stopped_at = None
        self.torch = None
        self.progress_path = config.get("progress_path")
        self._last_beat = 0.0
        self.probes = frozenset(config.get("probes", ()))
        self.inplace_ops = None
        self.unsafe_globals = None

    def progress(self):
        return [self.steps, self.batches, self.forwards]

    def heartbeat(self):
        """Leave the progress on disk now and then: a run killed at the timeout says how far it got."""
        now = time.monotonic()
        if not self.progress_path or now - self._last_beat < 1.0:
            return
        self._last_beat = now
        tmp = self.progress_path + ".tmp"
        try:
            with _real_open(tmp, "w") as handle:
                json.dump({"progress": self.progress()}, handle)
            _real_replace(tmp, self.progress_path)
        except OSError:
            pass


STATE = None


# --------------------------------------------------------------------------------------------
# The step budget: a hand-written loop is left after max_steps optimizer steps
#
# The user's files are compiled from an AST in which every ``for``/``while`` body starts with
# ``if __repairbot_leaving__ and __repairbot_leave__(ID): break`` (same line numbers, nothing
# on disk changes; one builtins lookup per iteration while no leave is pending). When the
# budget is spent, the loops that hold the step (in its frame, and the loops of the calling
# frames that hold the call) are marked; each breaks at the start of its next iteration, so
# the iteration that took the step finishes and the script goes on after the outermost one:
# evaluation, plotting, sampling, saving all run. A break is a real ``break``: ``with`` blocks
# and ``finally`` clauses run, ``for ... else`` does not.


class LoopRecord:
    __slots__ = ("body_line", "end_line", "file", "id", "kind", "line", "scope")

    def __init__(self, id, file, line, end_line, body_line, kind, scope):
        self.id, self.file, self.line, self.end_line = id, file, line, end_line
        self.body_line, self.kind, self.scope = body_line, kind, scope

    def contains(self, line):
        return self.line <= line <= self.end_line

    def where(self):
        return "%s:%d" % (self.file, self.line)


class LoopTable:
    """Every loop of the user's files that the harness compiled, and their scopes."""

    def __init__(self):
        self.records = []  # by loop id
        self.by_file = {}  # file -> [LoopRecord] of its latest compilation
        self.scopes = {}  # file -> [(start, end, scope id)]

    def compile(self, source, filename):
        """The code object of ``source`` with its loops instrumented (plain if it does not parse)."""
        try:
            tree = ast.parse(source, filename)
        except (SyntaxError, ValueError):
            tree = None
        if tree is None:  # raised again outside the handler: the traceback Python would print
            return compile(source, filename, "exec", dont_inherit=True)
        self.by_file[filename], self.scopes[filename] = [], []
        _LoopInstrumenter(self, filename).visit(tree)
        ast.fix_missing_locations(tree)
        return compile(tree, filename, "exec", dont_inherit=True)

    def scope_of(self, file, line):
        best = None
        for start, end, scope in self.scopes.get(file, ()):
            if start <= line <= end and (best is None or start >= best[0]):
                best = (start, scope)
        return best[1] if best else 0

    def loops_at(self, file, line):
        """The loops of the frame's own scope that hold ``line``, outermost first."""
        loops = self.by_file.get(file)
        if not loops:
            return []
        scope = self.scope_of(file, line)
        return [loop for loop in loops if loop.scope == scope and loop.contains(line)]

    def header_at(self, file, line):
        """The loop whose header (``for ... in ...:``, ``while ...:``) is ``line``, if any."""
        for loop in self.by_file.get(file, ()):
            if loop.line <= line < max(loop.body_line, loop.line + 1):
                return loop
        return None


class _LoopInstrumenter(ast.NodeTransformer):
    def __init__(self, table, filename):
        self.table, self.filename = table, filename
        self.scope = 0

    def _scoped(self, node):
        outer = self.scope
        scopes = self.table.scopes[self.filename]
        self.scope = len(scopes) + 1
        scopes.append((node.lineno, getattr(node, "end_lineno", None) or node.lineno, self.scope))
        self.generic_visit(node)
        self.scope = outer
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _scoped

    def _loop(self, node):
        record = LoopRecord(
            len(self.table.records), self.filename, node.lineno,
            getattr(node, "end_lineno", None) or node.body[-1].lineno, node.body[0].lineno,
            "for" if isinstance(node, ast.For) else "while", self.scope,
        )
        self.table.records.append(record)
        self.table.by_file[self.filename].append(record)
        self.generic_visit(node)
        first = node.body[0]
        check = ast.If(
            test=ast.BoolOp(op=ast.And(), values=[
                ast.Name(id="__repairbot_leaving__", ctx=ast.Load()),
                ast.Call(func=ast.Name(id="__repairbot_leave__", ctx=ast.Load()),
                         args=[ast.Constant(value=record.id)], keywords=[]),
            ]),
            body=[ast.Break()], orelse=[],
        )
        for sub in ast.walk(check):
            ast.copy_location(sub, first)
        node.body.insert(0, check)
        return node

    visit_For = visit_While = _loop


LOOPS = LoopTable()


def _is_statement_frame(frame):
    name = frame.f_code.co_name
    return not (name.startswith("<") and name != "<module>")  # comprehensions, lambdas


class StepBudget:
    """Counts optimizer steps outside DataLoader passes; leaves the loop that holds them at
    ``max_steps``. A loop gets its own budget: the key is the outermost user loop on the stack."""

    def __init__(self, state):
        self.state = state
        self.key = None  # (frame, loop id) of the loop whose steps are being counted
        self.count = 0
        self.pending = {}  # id(frame) -> (frame, set of loop ids to leave)
        self.left = []  # reported: the loops left early, where, after how many steps
        self.loose = 0  # steps with no user loop around them (a library's own loop)

    def chain(self, frame):
        """(frame, loops holding its current line) for each user frame, innermost first."""
        chain = []
        while frame is not None:
            code = frame.f_code
            if OWNERSHIP.is_user_file(code.co_filename) and _is_statement_frame(frame):
                loops = LOOPS.loops_at(code.co_filename, frame.f_lineno)
                if loops:
                    chain.append((frame, loops))
            frame = frame.f_back
        return chain

    def on_step(self, frame):
        state = self.state
        if self.in_loader_pass():
            return
        state.free_steps += 1
        chain = self.chain(frame)
        if not chain:
            self.loose += 1
            if state.step_budget and self.loose >= state.max_steps:
                # no loop of the user's to leave: the run ends here, and it is not a pass
                state.stopped_at = user_call_site()
                finish(outcome="stopped", exit_code=0)
            return
        outer_frame, outer_loops = chain[-1]
        key = (outer_frame, outer_loops[0].id)
        if self.key is None or self.key[0] is not key[0] or self.key[1] != key[1]:
            self.key, self.count = key, 0
        self.count += 1
        if state.step_budget and self.count >= state.max_steps:
            self.leave(chain)

    def leave(self, chain):
        import builtins as _builtins

        site = _short_site(user_call_site())
        for frame, loops in chain:
            entry = self.pending.get(id(frame))
            if entry is None or entry[0] is not frame:
                entry = self.pending[id(frame)] = (frame, set())
            for loop in loops:
                if loop.id in entry[1]:
                    continue
                entry[1].add(loop.id)
                if not any(item["loop"] == loop.where() and item["frame"] == id(frame) for item in self.left):
                    self.left.append({"loop": loop.where(), "kind": loop.kind, "step": site,
                                      "steps": self.count, "frame": id(frame), "left": False})
        _builtins.__repairbot_leaving__ = True

    def check(self, loop_id):
        """``__repairbot_leave__``: does the calling frame leave loop ``loop_id`` now?"""
        import builtins as _builtins

        frame = sys._getframe(1)
        entry = self.pending.get(id(frame))
        if entry is None or entry[0] is not frame or loop_id not in entry[1]:
            return False
        entry[1].discard(loop_id)
        if not entry[1]:
            del self.pending[id(frame)]
        if not self.pending:
            _builtins.__repairbot_leaving__ = False
        where = LOOPS.records[loop_id].where()
        for item in self.left:
            if item["loop"] == where and item["frame"] == id(frame):
                item["left"] = True
        self.key, self.count = None, 0
        return True

    def in_loader_pass(self):
        """A DataLoader pass driven by a loop (``for batch in loader``) is bounded by the cut;
        a kept iterator (``next(it)``) is not."""
        return any(cut_pass["driven"] for cut_pass in self.state.passes)

    def report(self):
        return [{k: v for k, v in item.items() if k != "frame"} for item in self.left]


BUDGET = None


def install_step_budget(state):
    global BUDGET
    import builtins as _builtins

    BUDGET = StepBudget(state)
    _builtins.__repairbot_leaving__ = False
    _builtins.__repairbot_leave__ = BUDGET.check
    return BUDGET


def _pass_is_driven(frame):
    """Was this batch pulled by a loop's header (or by library code iterating for the user)?"""
    while frame is not None and os.path.abspath(frame.f_code.co_filename) == _THIS_FILE:
        frame = frame.f_back
    if frame is None:
        return True
    if not OWNERSHIP.is_user_file(frame.f_code.co_filename):
        return True  # tqdm, enumerate in a library, a trainer's own loop: bounded by the pass
    return LOOPS.header_at(frame.f_code.co_filename, frame.f_lineno) is not None


# --------------------------------------------------------------------------------------------
# Probes on torch


def _shape(value):
    try:
        return [int(d) for d in value.shape]
    except Exception:
        return None


def install_argparse_probe(state):
    import argparse

    real_add_argument = argparse._ActionsContainer.add_argument
    names = ("--batch-size", "--batch_size")

    def add_argument(self, *args, **kwargs):
        if state.force_batch and any(a in names for a in args):
            default = kwargs.get("default")
            if isinstance(default, int) and not isinstance(default, bool) and default > state.batch_size:
                kwargs["default"] = state.batch_size
                state.forced.append({
                    "what": "argparse %s default %d -> %d" % (args[0], default, state.batch_size),
                    "site": _short_site(user_call_site()),
                })
        return real_add_argument(self, *args, **kwargs)

    argparse._ActionsContainer.add_argument = add_argument


# Layer construction sites: the traced values of the size arguments ---------------------------
# One record per constructed layer of every kind, keyed by layer class and argument name:
# {"index", "type", "args": {name: value}, "exprs": {name: source text}, "site",
#  "values": [{"expr", "value"}], "scope": {expr: int}, "chain": [{"param", "expr", "value",
#  "file", "line", "col", "end_line", "end_col", "function"}]}.
LAYER_SIZE_ARGS = {
    "Linear": ("in_features", "out_features"), "Bilinear": ("in1_features", "in2_features", "out_features"),
    "Conv1d": ("in_channels", "out_channels"), "Conv2d": ("in_channels", "out_channels"),
    "Conv3d": ("in_channels", "out_channels"), "ConvTranspose1d": ("in_channels", "out_channels"),
    "ConvTranspose2d": ("in_channels", "out_channels"), "ConvTranspose3d": ("in_channels", "out_channels"),
    "LSTM": ("input_size", "hidden_size"), "GRU": ("input_size", "hidden_size"), "RNN": ("input_size", "hidden_size"),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "BatchNorm1d": ("num_features",), "BatchNorm2d": ("num_features",), "BatchNorm3d": ("num_features",),
    "LayerNorm": ("normalized_shape",),
}
_MISSING = object()
_PLAIN = (int, float, str, bool, type(None))


def _plain_value(value):
    """A JSON-able copy of a plain value (numbers, strings, short tuples of them), else _MISSING."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (tuple, list)) and len(value) <= 8 and all(isinstance(v, _PLAIN) for v in value):
        return list(value)
    return _MISSING


def _static_attr(obj, name):
    """``obj.name`` without running code: an instance or module ``__dict__`` entry, or a plain
    class attribute; properties, descriptors and ``__getattr__`` are never called."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except Exception:
        namespace = None
    if isinstance(namespace, dict) and name in namespace:
        return namespace[name]
    if isinstance(obj, types.ModuleType):
        return _MISSING
    for klass in type(obj).__mro__:
        value = klass.__dict__.get(name, _MISSING)
        if value is not _MISSING:
            return value if isinstance(value, _PLAIN + (tuple,)) else _MISSING
    return _MISSING


def _static_eval(node, frame):
    """The value of a name, attribute chain or constant subscript in ``frame``; no calls."""
    import ast

    if isinstance(node, ast.Name):
        for namespace in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in namespace:
                return namespace[node.id]
        return _MISSING
    if isinstance(node, ast.Attribute):
        base = _static_eval(node.value, frame)
        return _MISSING if base is _MISSING else _static_attr(base, node.attr)
    if isinstance(node, ast.Subscript):
        base = _static_eval(node.value, frame)
        index = node.slice.value if isinstance(node.slice, ast.Index) else node.slice  # 3.8 wraps it
        if base is _MISSING or not isinstance(index, ast.Constant) or type(base) not in (dict, list, tuple):
            return _MISSING
        try:
            return base[index.value]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    if isinstance(node, ast.Constant):
        return node.value
    return _MISSING


def _call_source(frame):
    """(text, line, col) of the call expression the frame is executing, or None."""
    pos = _positions(frame.f_code, frame.f_lasti)
    if pos is None or pos[2] is None or pos[1] is None or pos[3] is None:
        return None
    filename = frame.f_code.co_filename
    lines = [linecache.getline(filename, n) for n in range(pos[0], pos[1] + 1)]
    if not all(lines):
        return None
    encoded = [line.encode("utf-8") for line in lines]
    if len(encoded) == 1:
        text = encoded[0][pos[2]:pos[3]]
    else:
        text = encoded[0][pos[2]:] + b"".join(encoded[1:-1]) + encoded[-1][:pos[3]]
    return text.decode("utf-8", "replace"), pos[0], pos[2]


def _parse_call(frame):
    import ast

    found = _call_source(frame)
    if found is None:
        return None
    text, line, col = found
    try:
        node = ast.parse("(" + text + ")", mode="eval").body
    except SyntaxError:
        return None
    return (node, text, line, col) if isinstance(node, ast.Call) else None


def _segment(text, node):
    import ast

    return ast.get_source_segment("(" + text + ")", node)


def _bind_args(call, names):
    """The argument expressions of ``call`` by parameter name (``names``: in order, no self)."""
    import ast

    if any(isinstance(a, ast.Starred) for a in call.args):
        return {}
    bound = dict(zip(names, call.args))  # noqa: B905 - Python 3.8 has no strict=
    for keyword in call.keywords:
        if keyword.arg is not None:
            bound[keyword.arg] = keyword.value
    return bound


def _size_values(expr, frame, text):
    """Every name, attribute chain and constant subscript of ``expr`` with its traced value."""
    import ast

    values = []
    seen = set()
    for node in ast.walk(expr):
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            continue
        source = _segment(text, node)
        if source is None or source in seen:
            continue
        value = _plain_value(_static_eval(node, frame))
        if value is _MISSING:
            continue
        seen.add(source)
        values.append({"expr": source, "value": value})
    return values


def _int_scope(frame, roots):
    """The whole-number sizes in scope where a layer is built: locals, and the plain
    attributes of the objects its size arguments read (``self``, ``cfg``, ``args``)."""
    scope = {}
    for name, value in list(frame.f_locals.items()):
        if type(value) is int and len(scope) < 60:
            scope[name] = value
    if frame.f_globals is not frame.f_locals:  # module-level sizes (``n_hidden = 128``)
        for name, value in list(frame.f_globals.items()):
            if type(value) is int and not name.startswith("__") and name not in scope and len(scope) < 90:
                scope[name] = value
    for root in roots:
        obj = frame.f_locals.get(root, frame.f_globals.get(root, _MISSING))
        if obj is _MISSING or isinstance(obj, (types.ModuleType, type)):
            continue
        if type(obj) is dict:
            items = [('%s["%s"]' % (root, k), v) for k, v in obj.items() if isinstance(k, str)]
        else:
            try:
                namespace = object.__getattribute__(obj, "__dict__")
            except Exception:
                continue
            items = [("%s.%s" % (root, k), v) for k, v in list(namespace.items()) if isinstance(k, str)]
        for key, value in items:
            if type(value) is int and len(scope) < 120:
                scope[key] = value
    return scope


def _pass_through_chain(frame, exprs, text):
    """For size arguments that read ``__init__`` parameters: the argument at the constructor's
    call site (its source position and value), recursively while it is a plain pass-through."""
    import ast

    chain = []
    wanted = set()
    for expr in exprs:
        wanted.update(n.id for n in ast.walk(expr) if isinstance(n, ast.Name))
    depth = 0
    while wanted and depth < 4 and frame is not None and frame.f_code.co_name == "__init__":
        depth += 1
        code = frame.f_code
        params = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
        names = [n for n in wanted if n in params]
        if not names:
            break
        owner = frame.f_locals.get("self")
        caller = frame.f_back
        while caller is not None and owner is not None and caller.f_locals.get("self") is owner:
            caller = caller.f_back  # super().__init__ chains of the same object
        if caller is None or not OWNERSHIP.is_user_file(caller.f_code.co_filename):
            break
        parsed = _parse_call(caller)
        if parsed is None:
            break
        call, call_text, line, col = parsed
        bound = _bind_args(call, list(code.co_varnames[1:code.co_argcount]))
        for keyword in call.keywords:
            if keyword.arg in params:
                bound[keyword.arg] = keyword.value
        wanted = set()
        for name in names:
            arg = bound.get(name)
            if arg is None:
                continue
            value = _plain_value(frame.f_locals.get(name, _MISSING))
            # ast positions count from the "(" the parse added, on the call's first line
            first = arg.lineno == 1
            chain.append({
                "param": name,
                "expr": _segment(call_text, arg),
                "value": None if value is _MISSING else value,
                "file": caller.f_code.co_filename,
                "function": caller.f_code.co_name,
                "line": line + arg.lineno - 1,
                "col": _char_col(caller.f_code.co_filename, line + arg.lineno - 1,
                                 (col + arg.col_offset - 1) if first else arg.col_offset),
                "end_line": line + arg.end_lineno - 1,
                "end_col": _char_col(caller.f_code.co_filename, line + arg.end_lineno - 1,
                                     (col + arg.end_col_offset - 1) if arg.end_lineno == 1 else arg.end_col_offset),
                "values": _size_values(arg, caller, call_text),
            })
            if isinstance(arg, ast.Name):
                wanted.add(arg.id)
        frame = caller
    return chain


def _constructing_frame(skip_self):
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_locals.get("self") is skip_self:
            frame = frame.f_back
            continue
        if OWNERSHIP.is_user_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def layer_site_record(state, module, kind, size_args, signature_names):
    """The construction record of one layer (see LAYER_SIZE_ARGS); never raises."""
    import ast

    record = {"index": len(state.layer_sites), "type": kind, "args": {}, "exprs": {},
              "site": None, "values": [], "scope": {}, "chain": []}
    for name in size_args:
        value = _plain_value(getattr(module, name, None))
        record["args"][name] = None if value is _MISSING else value
    try:
        frame = _constructing_frame(module)
        if frame is None:
            return record
        record["site"] = frame_record(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name,
                                      frame.f_code, frame.f_lasti)
        parsed = _parse_call(frame)
        if parsed is None:
            return record
        call, text, _line, _col = parsed
        bound = _bind_args(call, signature_names)
        exprs = [bound[name] for name in size_args if name in bound]
        record["exprs"] = {name: _segment(text, bound[name]) for name in size_args if name in bound}
        for expr in exprs:
            record["values"] += [v for v in _size_values(expr, frame, text) if v not in record["values"]]
        roots = {n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)}
        roots = {r for r in roots if not isinstance(frame.f_locals.get(r, frame.f_globals.get(r)), int)}
        record["scope"] = _int_scope(frame, sorted(roots | {"self"}))
        record["chain"] = _pass_through_chain(frame, exprs, text)
    except Exception:
        pass
    return record


def install_layer_site_probe(state, torch):
    """Records every layer of the kinds in LAYER_SIZE_ARGS where it is built (one record type)."""
    import inspect

    nn = torch.nn
    for kind, size_args in LAYER_SIZE_ARGS.items():
        klass = getattr(nn, kind, None)
        if klass is None or "__init__" not in klass.__dict__:
            continue
        real = klass.__dict__["__init__"]
        try:
            positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            names = [p.name for p in inspect.signature(real).parameters.values() if p.kind in positional][1:]
        except (TypeError, ValueError):
            names = []
        klass.__init__ = _layer_init(state, real, kind, size_args, names or list(size_args))


def _layer_init(state, real, kind, size_args, names):
    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)
        if self not in state.layer_site_index:  # a subclass's super().__init__ records once
            record = layer_site_record(state, self, kind, size_args, names)
            state.layer_site_index[self] = record["index"]
            state.layer_sites.append(record)

    init.__wrapped__ = real
    return init


class _CutBatches(object):
    """A cut pass's batches: the first ``max_batches`` at the loader's batch size, then the real
    run's last, partial batch (``last`` samples), taken from the end of the pass's order."""

    def __init__(self, sampler, batch_size, max_batches, last):
        self.sampler, self.batch_size = sampler, batch_size
        self.max_batches, self.last = max_batches, last

    def __iter__(self):
        order = list(self.sampler)
        split = max(0, len(order) - self.last)
        for start in range(0, min(split, self.max_batches * self.batch_size), self.batch_size):
            yield order[start:min(start + self.batch_size, split)]
        if split < len(order):
            yield order[split:]

    def __len__(self):
        size = len(self.sampler)
        split = max(0, size - self.last)
        return min(-(-split // self.batch_size), self.max_batches) + (1 if split < size else 0)


def install_torch_probes(state, torch):
    import inspect

    from torch.utils.data import DataLoader, IterableDataset

    state.torch = torch

    # DataLoader: batch size forced down, every pass cut after max_batches ----------------
    real_init = DataLoader.__init__
    init_signature = inspect.signature(real_init)

    def dataloader_init(self, *args, **kwargs):
        try:
            bound = init_signature.bind(self, *args, **kwargs)
        except TypeError:
            bound = None
        own_batch = bound.arguments.get("batch_size", 1) if bound is not None else None
        if state.force_batch and bound is not None:
            batch_size = own_batch
            if (bound.arguments.get("batch_sampler") is None and isinstance(batch_size, int)
                    and not isinstance(batch_size, bool) and batch_size > state.batch_size):
                bound.arguments["batch_size"] = state.batch_size
                state.forced.append({
                    "what": "DataLoader batch_size %d -> %d" % (batch_size, state.batch_size),
                    "site": _short_site(user_call_site()),
                })
                args, kwargs = bound.args[1:], bound.kwargs
        real_init(self, *args, **kwargs)
        if state.cut_batches and bound is not None and bound.arguments.get("batch_sampler") is None:
            _plan_last_batch(self, own_batch, bool(bound.arguments.get("drop_last", False)))

    def _plan_last_batch(loader, own_batch, drop_last):
        """The real run's last batch (len(dataset) % its batch size) ends every cut pass."""
        if drop_last or not isinstance(own_batch, int) or isinstance(own_batch, bool) or own_batch < 1:
            return
        if not getattr(loader, "_auto_collation", False) or isinstance(loader.dataset, IterableDataset):
            return
        try:
            size = len(loader.dataset)
        except Exception:
            return
        last = size % own_batch
        if not last:
            return
        sampler = _CutBatches(loader.sampler, loader.batch_size, state.max_batches, last)
        object.__setattr__(loader, "batch_sampler", sampler)  # DataLoader refuses a plain setattr
        state.last_batches.append({"size": last, "dataset": size, "batch_size": own_batch,
                                   "site": _short_site(user_call_site())})

    DataLoader.__init__ = dataloader_init

    real_iter = DataLoader.__iter__
    real_len = DataLoader.__len__

    def cut(iterator, limit):
        state.active_loaders += 1
        current = {"driven": False}
        state.passes.append(current)
        try:
            taken = 0
            while limit is None or taken < limit:
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                taken += 1
                state.batches += 1
                state.heartbeat()
                current["driven"] = _pass_is_driven(sys._getframe(1))
                yield batch
            state.loaders_cut += 1
        finally:
            state.active_loaders -= 1
            state.passes.remove(current)

    def dataloader_iter(self):
        if isinstance(self.batch_sampler, _CutBatches):
            return cut(real_iter(self), None)  # its batch sampler ends the pass
        return cut(real_iter(self), state.max_batches if state.cut_batches else None)

    def dataloader_len(self):
        length = real_len(self)
        if state.cut_batches and not isinstance(self.batch_sampler, _CutBatches):
            return min(length, state.max_batches)
        return length

    DataLoader.__iter__ = dataloader_iter
    DataLoader.__len__ = dataloader_len

    # Optimizer steps: the budget for hand-written loops ------------------------------------
    budget = BUDGET or install_step_budget(state)

    def step_post_hook(optimizer, args, kwargs):
        state.steps += 1
        state.heartbeat()
        budget.on_step(sys._getframe(1))

    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        register_optimizer_step_post_hook(step_post_hook)
    except ImportError:  # torch < 2.0: no global optimizer hooks
        pass

    # Module construction sites and Linear input shapes ---------------------------------
    nn = torch.nn
    real_module_init = nn.Module.__init__

    def module_init(self, *args, **kwargs):
        real_module_init(self, *args, **kwargs)
        try:
            state.module_sites[self] = user_call_site(skip_self=self)
        except TypeError:
            pass

    nn.Module.__init__ = module_init

    install_layer_site_probe(state, torch)
    real_linear_init = nn.Linear.__init__

    def linear_init(self, *args, **kwargs):
        real_linear_init(self, *args, **kwargs)
        record = {
            "index": len(state.linears),
            "type": type(self).__name__,
            "in_features": int(getattr(self, "in_features", 0) or 0),
            "out_features": int(getattr(self, "out_features", 0) or 0),
            "site": user_call_site(skip_self=self),
            "input_shape": None,
            "calls": 0,
            "layer_site": state.layer_site_index.get(self),
        }
        state.linear_index[self] = record["index"]
        state.linears.append(record)

    nn.Linear.__init__ = linear_init

    def forward_pre_hook(module, args):
        state.forwards += 1
        state.heartbeat()
        index = state.linear_index.get(module)
        if index is not None and args:
            record = state.linears[index]
            record["input_shape"] = _shape(args[0])
            record["calls"] += 1
        return None

    nn.modules.module.register_module_forward_pre_hook(forward_pre_hook)


# --------------------------------------------------------------------------------------------
# Opt-in probes (the parent asks for them by name)


def install_target_size_probe():
    """MSE/L1-style losses only warn on (N, 1) vs (N,) shapes: raise the warning at the call instead."""
    import warnings

    warnings.filterwarnings("error", message=r"Using a target size", category=UserWarning)


# The globals the "unsafe-globals" probe may allowlist to check that a refused checkpoint then
# loads: types that rebuild plain data and run no code of the file's choosing
# (patterns/weights_only reads these two names from here: one list for the probe and the fix).
PLAIN_DATA = frozenset((
    "argparse.Namespace",
    "collections.OrderedDict", "collections.defaultdict", "collections.Counter", "collections.deque",
    "builtins.set", "builtins.frozenset", "builtins.list", "builtins.dict", "builtins.tuple",
    "builtins.int", "builtins.float", "builtins.complex", "builtins.bool", "builtins.str",
    "builtins.bytes", "builtins.bytearray", "builtins.slice", "builtins.range",
    "numpy.dtype", "numpy.ndarray",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
))
NUMPY_DTYPE_CLASS = re.compile(r"numpy\.dtypes\.\w+DType\Z")
_REFUSED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")
_REFUSED_BUILD = re.compile(r"but got <class '([\w.]+)'>")


def _plain_data(name):
    return name in PLAIN_DATA or bool(NUMPY_DTYPE_CLASS.match(name))


def _resolve_global(name):
    """The object a checkpoint's GLOBAL names, from modules already imported (nothing new runs)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj = module
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _global_path(obj):
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return "%s.%s" % (module, qualname) if module and qualname else None


def _checkpoint_path(f):
    if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__"):
        return os.path.abspath(os.fsdecode(f))
    name = getattr(f, "name", None)
    return os.path.abspath(name) if isinstance(name, str) and os.path.isfile(name) else None


def _unsafe_globals_record(torch, real_load, f):
    """What a refused checkpoint needs: every unsafe global (a static scan, nothing runs), and,
    when they are all plain data, whether it loads with them allowlisted (adding the NumPy
    dtype classes the unpickler then asks for)."""
    record = {"path": None, "globals": [], "build_types": [], "loads": None, "error": None}
    path = _checkpoint_path(f)
    if path is None:
        record["error"] = "torch.load was given a %s, not a file path" % type(f).__name__
        return record
    record["path"] = path
    try:
        names = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception as error:
        record["error"] = "%s: %s" % (type(error).__name__, error)
        return record
    allowed = []
    for name in names:
        obj = _resolve_global(name)
        record["globals"].append({"name": name, "resolved": _global_path(obj) if obj is not None else None})
        allowed.append((obj, name) if obj is not None else None)
    if not names or not all(_plain_data(name) for name in names) or None in allowed:
        return record
    for _ in range(8):
        try:
            with torch.serialization.safe_globals(allowed):
                real_load(path, map_location="cpu", weights_only=True)
            record["loads"] = True
            return record
        except Exception as error:
            text = str(error)
            found = _REFUSED_BUILD.search(text) or _REFUSED_GLOBAL.search(text)
            name = found.group(1) if found else None
            obj = _resolve_global(name) if name and _plain_data(name) else None
            if obj is None or any(entry[1] == name for entry in allowed):
                record["loads"] = False
                return record
            allowed.append((obj, name))
            if found.re is _REFUSED_BUILD:
                record["build_types"].append({"name": name, "resolved": _global_path(obj)})
            else:
                record["globals"].append({"name": name, "resolved": _global_path(obj)})
    record["loads"] = False
    return record


def install_unsafe_globals_probe(state, torch):
    """On a torch.load that weights_only=True refuses, list what the checkpoint needs.

    Used in a rerun that only gathers evidence for ``Weights only load failed``: the message
    names one global, the fix needs them all.
    """
    real_load = torch.load
    state.unsafe_globals = []

    def load(f, *args, **kwargs):
        try:
            return real_load(f, *args, **kwargs)
        except Exception as error:
            if "Weights only load failed" in str(error) and len(state.unsafe_globals) < 5:
                try:
                    state.unsafe_globals.append(_unsafe_globals_record(torch, real_load, f))
                except Exception:
                    pass
            raise

    load.__doc__, load.__wrapped__ = real_load.__doc__, real_load
    torch.load = torch.serialization.load = load


_INPLACE_DUNDERS = frozenset((
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__",
))


def _module_in_forward():
    """The innermost module whose forward is running and that has an ``inplace`` switch."""
    torch = STATE.torch if STATE else None
    frame = sys._getframe(2)
    while frame is not None and torch is not None:
        if frame.f_code.co_name == "forward":
            module = frame.f_locals.get("self")
            if isinstance(module, torch.nn.Module) and hasattr(module, "inplace"):
                return module
        frame = frame.f_back
    return None


def install_inplace_probe(state, torch):
    """Record in-place operations on tensors that autograd tracks: op, shape, producer, where.

    Used in a rerun that only gathers evidence for ``modified by an inplace operation``: the
    failing frame is ``backward()``, while the culprit is an in-place op earlier in the step.
    Events are kept since the last ``backward()`` that succeeded.
    """
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None
    state.inplace_ops = []

    class InplaceRecorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name == "backward":
                result = func(*args, **kwargs)
                del state.inplace_ops[:]
                return result
            inplace = (name.endswith("_") and not name.startswith("_")) or name in _INPLACE_DUNDERS \
                or kwargs.get("inplace") is True
            if inplace and args and isinstance(args[0], torch.Tensor) and torch.is_grad_enabled():
                tensor = args[0]
                if tensor.requires_grad:
                    self._record(name, tensor)
            return func(*args, **kwargs)

        def _record(self, name, tensor):
            module = _module_in_forward()
            grad_fn = tensor.grad_fn
            state.inplace_ops.append({
                "op": name,
                "shape": _shape(tensor),
                "dtype": str(tensor.dtype).replace("torch.", ""),
                "producer": type(grad_fn).__name__ if grad_fn is not None else None,
                "leaf": bool(tensor.is_leaf),
                "version": int(tensor._version),
                "site": user_call_site(),
                "module": type(module).__name__ if module is not None else None,
                "module_site": STATE.module_sites.get(module) if module is not None else None,
            })
            if len(state.inplace_ops) > 500:
                del state.inplace_ops[:100]

    return InplaceRecorder()


# --------------------------------------------------------------------------------------------
# Health checks: the silent training bugs a few real steps already show (off with --no-health)
#
# Every check reports only what the run showed, once, with the user's source line (the same
# innermost-user-frame rule as failures) and the evidence behind it. They stay cheap: one
# finiteness test per module output until the first offender, a pass over the optimizer's
# parameters per step, and sample hashes of the few batches the harness lets through.

# Functional losses that broadcast input against target without a word. mse/l1/smooth_l1/huber
# warn ("Using a target size ...": the target-shape pattern fixes that), the BCE ones raise.
_SILENT_LOSSES = (
    "kl_div", "soft_margin_loss", "poisson_nll_loss", "hinge_embedding_loss", "multilabel_soft_margin_loss",
)
_HEALTH_MAX_SAMPLES = 4096  # sample hashes kept per pass over a DataLoader


def _numel(shape):
    count = 1
    for size in shape:
        count *= size
    return count


def _health_site(record):
    return (record or {}).get("file"), (record or {}).get("line")


class HealthProbes:
    """Watches the run for silent bugs; ``findings()`` says what it saw."""

    def __init__(self, state, torch):
        self.state = state
        self.torch = torch
        self.backwards = 0
        self.resets = 0  # zero_grad() calls of any optimizer or module
        self.depth = 0  # modules whose forward is running
        self.roots = weakref.WeakSet()  # modules called while no other module ran
        self.called = weakref.WeakSet()
        self.called_with_grad = weakref.WeakSet()  # modules whose forward ran with grad mode on
        self.custom_losses = 0  # user-defined loss modules whose forward is running
        self._custom_loss_classes = {}
        self.nan = None
        self.nonfinite_output = None
        # what each optimizer's steps showed, as plain data: the script's objects are gone by
        # the time the findings are written (main() has returned)
        self.optimizers = weakref.WeakKeyDictionary()  # optimizer -> its record
        self.records = []
        # every optimizer the script built (any Optimizer subclass, wherever it was built),
        # stepped yet or not: a GAN's discriminator optimizer steps after the generator's
        self.created = weakref.WeakSet()
        self.accumulation = None
        self.frozen_candidates = weakref.WeakKeyDictionary()  # module -> what its steps showed
        self.frozen_records = []
        self.output_sites = weakref.WeakKeyDictionary()  # root module -> where its output was used
        self.serials = weakref.WeakKeyDictionary()  # root module -> a number that is never reused
        self.serial_count = 0
        self.active_passes = []  # per DataLoader pass running: serials of the root modules it called
        self.pass_clock = 0  # DataLoader passes started so far
        self.resets_at = []  # pass_clock whenever a layer's reset_parameters() ran (k-fold: weights reset)
        self.broadcasts = []
        self.loaders = weakref.WeakKeyDictionary()  # DataLoader -> (serial, construction site)
        self.loader_samples = weakref.WeakKeyDictionary()  # DataLoader -> (base dataset, its indices)
        self.passes = []  # finished passes over DataLoaders

    # installation ---------------------------------------------------------------------------
    def install(self):
        torch = self.torch
        nn = torch.nn
        self._wrap_backward()
        self._wrap_optimizer_init()
        for owner in (torch.optim.Optimizer, nn.Module):
            self._wrap_zero_grad(owner)
        try:
            from torch.optim.optimizer import register_optimizer_step_pre_hook

            register_optimizer_step_pre_hook(self.step_pre_hook)
        except ImportError:  # torch < 2.0: no global optimizer hooks
            pass
        nn.modules.module.register_module_forward_pre_hook(self.forward_pre_hook)
        try:
            nn.modules.module.register_module_forward_hook(self.forward_hook, always_call=True)
        except TypeError:  # older torch: no always_call
            nn.modules.module.register_module_forward_hook(self.forward_hook)
        self._loss_base = getattr(nn.modules.loss, "_Loss", None)
        for name in _SILENT_LOSSES:
            self._wrap_loss(name)
        self._wrap_dataloader()
        self._wrap_reset_parameters()

    def _wrap_reset_parameters(self):
        nn = self.torch.nn
        probes = self
        for name in ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                     "ConvTranspose3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm",
                     "Embedding", "RNN", "LSTM", "GRU"):
            cls = getattr(nn, name, None)
            real = getattr(cls, "reset_parameters", None) if cls is not None else None
            if real is None or "reset_parameters" not in cls.__dict__:
                continue

            def reset_parameters(self, *args, _real=real, **kwargs):
                # the call of the layer's own __init__ builds it; any other call re-initialises
                if sys._getframe(1).f_code.co_name != "__init__" and (
                        not probes.resets_at or probes.resets_at[-1] != probes.pass_clock):
                    probes.resets_at.append(probes.pass_clock)
                return _real(self, *args, **kwargs)

            reset_parameters.__doc__, reset_parameters.__wrapped__ = real.__doc__, real
            cls.reset_parameters = reset_parameters

    def _wrap_backward(self):
        autograd = self.torch.autograd
        real_backward = autograd.backward
        probes = self

        def backward(tensors, *args, **kwargs):
            probes.backwards += 1
            if probes.nan is None and isinstance(tensors, probes.torch.Tensor):
                probes.check_loss(tensors)
            return real_backward(tensors, *args, **kwargs)

        backward.__doc__, backward.__wrapped__ = real_backward.__doc__, real_backward
        autograd.backward = backward

    def _wrap_optimizer_init(self):
        optimizer_class = self.torch.optim.Optimizer
        real_init = optimizer_class.__init__
        probes = self

        def optimizer_init(self, *args, **kwargs):
            real_init(self, *args, **kwargs)
            try:
                probes.created.add(self)
            except TypeError:
                pass

        optimizer_init.__doc__, optimizer_init.__wrapped__ = real_init.__doc__, real_init
        optimizer_class.__init__ = optimizer_init

    def _wrap_zero_grad(self, owner):
        real = owner.zero_grad
        probes = self

        def zero_grad(self, *args, **kwargs):
            probes.resets += 1
            return real(self, *args, **kwargs)

        zero_grad.__doc__, zero_grad.__wrapped__ = real.__doc__, real
        owner.zero_grad = zero_grad

    def _wrap_loss(self, name):
        functional = self.torch.nn.functional
        real = getattr(functional, name, None)
        if real is None:
            return
        probes = self

        def loss(input, target, *args, **kwargs):
            if not probes.custom_losses:
                probes.check_broadcast(name, input, target)
            return real(input, target, *args, **kwargs)

        loss.__name__, loss.__doc__, loss.__wrapped__ = name, real.__doc__, real
        setattr(functional, name, loss)

    def _wrap_dataloader(self):
        from torch.utils.data import DataLoader

        real_init = DataLoader.__init__
        real_iter = DataLoader.__iter__
        probes = self

        def dataloader_init(self, *args, **kwargs):
            real_init(self, *args, **kwargs)
            try:
                probes.loaders[self] = (len(probes.loaders) + len(probes.passes), user_call_site())
            except TypeError:
                pass

        def dataloader_iter(self):
            return probes.watch_pass(self, real_iter(self))

        DataLoader.__init__ = dataloader_init
        DataLoader.__iter__ = dataloader_iter

    # hooks ---------------------------------------------------------------------------------
    def _is_custom_loss(self, module):
        """A loss the user wrote: a ``_Loss`` subclass, or a module whose class is named so."""
        cls = type(module)
        known = self._custom_loss_classes.get(cls)
        if known is None:
            known = not (cls.__module__ or "").startswith("torch.") and (
                (self._loss_base is not None and issubclass(cls, self._loss_base))
                or "loss" in cls.__name__.lower()
            )
            self._custom_loss_classes[cls] = known
        return known

    def forward_pre_hook(self, module, args):
        if self.depth == 0:
            self.roots.add(module)
            if self.active_passes:
                serial = self.serials.get(module)
                if serial is None:
                    self.serial_count += 1
                    serial = self.serials[module] = self.serial_count
                for called in self.active_passes:
                    called.add(serial)
        self.depth += 1
        self.called.add(module)
        if self.torch.is_grad_enabled():
            self.called_with_grad.add(module)
        if self._is_custom_loss(module):
            self.custom_losses += 1
        return None

    def forward_hook(self, module, args, output):
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and module not in self.output_sites:
            tensor = output[0] if isinstance(output, (tuple, list)) and output else output
            if isinstance(tensor, self.torch.Tensor) and tensor.requires_grad:
                self.output_sites[module] = user_call_site()
        if self._is_custom_loss(module):
            self.custom_losses = max(0, self.custom_losses - 1)
            if len(args) >= 2:
                self.check_broadcast(type(module).__name__, args[0], args[1])
        if self.nonfinite_output is None and self.nan is None:
            tensor = output[0] if isinstance(output, (tuple, list)) and output else output
            if isinstance(tensor, self.torch.Tensor) and tensor.is_floating_point() and tensor.numel() \
                    and not bool(self.torch.isfinite(tensor.detach()).all()):
                self.nonfinite_output = {"module": module, "step": self.state.steps, "shape": _shape(tensor)}
        return None

    def step_pre_hook(self, optimizer, args, kwargs):
        record = self.optimizers.get(optimizer)
        if record is None:
            record = {"type": type(optimizer).__name__, "steps": 0, "live_steps": 0, "site": None,
                      "last": None, "params": {}, "devices": set()}
            self.optimizers[optimizer] = record
            self.records.append(record)
        record["steps"] += 1
        params = [p for group in optimizer.param_groups for p in group["params"]]
        holding = [p for p in params if p.grad is not None]
        if self.state.steps < 10 and len(self.frozen_records) < 8:
            self._check_frozen()
        if not holding:
            return None
        record["live_steps"] += 1
        if record["site"] is None:
            record["site"] = user_call_site()
        self._note_parameters(record, params)
        if self.accumulation is None:
            self._check_accumulation(optimizer, record, holding)
        return None

    # checks --------------------------------------------------------------------------------
    def check_loss(self, loss):
        torch = self.torch
        try:
            if not loss.is_floating_point() or bool(torch.isfinite(loss.detach()).all()):
                return
        except Exception:
            return
        value = float(loss.detach().reshape(-1)[0]) if loss.numel() else None
        evidence = {"step": self.state.steps + 1, "backward_calls": self.backwards,
                    "value": str(value), "shape": _shape(loss), "dtype": str(loss.dtype).replace("torch.", "")}
        culprit = None
        names = self._parameter_names()
        for root in self._root_modules():
            for name, p in root.named_parameters():
                if p.is_floating_point() and not bool(torch.isfinite(p.detach()).all()):
                    evidence["first_nonfinite_parameter"] = "%s.%s" % (type(root).__name__, name)
                    culprit = culprit or "parameter %s.%s" % (type(root).__name__, name)
                    break
            if "first_nonfinite_parameter" in evidence:
                break
        seen = self.nonfinite_output
        if seen is not None and seen["module"] is not None:
            module = seen["module"]
            described = self._module_name(module, names) or type(module).__name__
            evidence["first_nonfinite_output"] = {
                "module": described, "type": type(module).__name__, "step": seen["step"] + 1,
                "shape": seen["shape"], "built_at": _short_site(self.state.module_sites.get(module)),
            }
            culprit = culprit or "the output of %s (%s)" % (described, type(module).__name__)
        site = user_call_site()
        message = "the loss passed to backward() is %s at optimizer step %d" % (value, self.state.steps + 1)
        if culprit:
            message += "; the first non-finite value seen: %s" % culprit
        else:
            message += " while every module output and parameter was finite: the loss computation made it"
        self.nan = self._finding("nan-loss", site, message, evidence)

    def _note_parameters(self, record, params):
        """Which parameters have had a gradient at a step; those that never had one are
        described (module, where it was built) while the objects are alive."""
        seen = record["params"]
        unnamed = []
        for p in params:
            info = seen.get(id(p))
            if info is None:
                info = seen[id(p)] = {"grad": False, "requires_grad": True, "name": None}
                record["devices"].add(p.device.type)
            info["requires_grad"] = bool(p.requires_grad)
            if p.grad is not None:
                info["grad"] = True
            elif info["requires_grad"]:
                unnamed.append((p, info))
        if not unnamed:
            return
        names = self._parameter_names()
        for p, info in unnamed:
            if id(p) not in names:
                continue
            root, name = names[id(p)]
            owner = name.rpartition(".")[0]
            try:
                module = root.get_submodule(owner) if owner else root
            except Exception:
                module = None
            info["name"] = name
            info["module"] = "%s.%s" % (type(root).__name__, owner) if owner else type(root).__name__
            info["type"] = type(module).__name__ if module is not None else None
            info["site"] = self.state.module_sites.get(module) if module is not None else None
            info["called"] = module in self.called if module is not None else None
            # a forward run only under no_grad (an evaluation pass) could not have routed a gradient
            info["called_with_grad"] = module in self.called_with_grad if module is not None else None
            info["branch_of"] = (
                self._selecting_container(root, owner) if info["called_with_grad"] is False else None
            )

    def _selecting_container(self, root, owner):
        """The ModuleList/ModuleDict among the ancestors of the never-called module ``owner``
        of which another child ran while the child holding ``owner`` never did: the forward
        selects among those children (a supernet's choice block, an MoE expert, a branch
        indexed by a value), and a short run routes to only some. None otherwise."""
        nn = self.torch.nn
        parts = owner.split(".") if owner else []
        for depth in range(len(parts) - 1, -1, -1):
            prefix = ".".join(parts[:depth])
            try:
                container = root.get_submodule(prefix) if prefix else root
            except Exception:
                continue
            if not isinstance(container, (nn.ModuleList, nn.ModuleDict)):
                continue
            branch = container._modules.get(parts[depth])
            if branch is None:
                continue
            if any(m in self.called_with_grad for m in branch.modules()):
                return None  # its own branch ran: the module was skipped inside it
            if any(m in self.called_with_grad for key, child in container._modules.items()
                   if key != parts[depth] and child is not None for m in child.modules()):
                return "%s.%s" % (type(root).__name__, prefix) if prefix else type(root).__name__
        return None

    def _check_accumulation(self, optimizer, record, holding):
        torch = self.torch
        grads = [p.grad for p in holding]
        if any(g.is_sparse for g in grads):
            return
        try:
            norms = torch._foreach_norm(grads) if hasattr(torch, "_foreach_norm") else [g.norm() for g in grads]
            norm = float(torch.stack([n.float() for n in norms]).norm())
        except Exception:
            return
        snapshot = {"resets": self.resets, "backwards": self.backwards, "norm": norm,
                    "grads": dict((id(p), (p.grad, p.grad._version)) for p in holding)}
        last, record["last"] = record["last"], snapshot
        if last is None or snapshot["resets"] != last["resets"]:
            return
        ran = snapshot["backwards"] - last["backwards"]
        if ran < 1 or set(snapshot["grads"]) != set(last["grads"]):
            return
        for key, (grad, version) in snapshot["grads"].items():
            old_grad, old_version = last["grads"][key]
            # the same tensors, changed only by the backward passes adding to them (a reset
            # in place, clipping or p.grad = None would show as more changes or new tensors)
            if grad is not old_grad or not 1 <= version - old_version <= ran:
                return
        if not norm > last["norm"] * (1.0 + 1e-6):
            return
        message = (
            "optimizer.step() ran twice with no zero_grad() in between: the gradients of %d "
            "parameter tensors kept accumulating (gradient norm %.4g -> %.4g over %d backward "
            "call%s)" % (len(holding), last["norm"], norm, ran, "" if ran == 1 else "s")
        )
        evidence = {"optimizer": type(optimizer).__name__, "step": record["steps"],
                    "grad_norm_before": float("%.4g" % last["norm"]), "grad_norm_after": float("%.4g" % norm),
                    "backward_calls_between": ran, "parameters": len(holding)}
        self.accumulation = self._finding("grad-accumulation", user_call_site(), message, evidence)

    def _optimizer_parameters(self):
        """ids of the parameters held by every optimizer the script built, stepped or not: their
        param groups, and the inner optimizer of a wrapper that keeps one (Lookahead,
        ZeroRedundancyOptimizer, SAM-style ``base_optimizer``)."""
        held = set()
        seen = set()
        stack = list(self.created) + list(self.optimizers.keys())
        while stack:
            optimizer = stack.pop()
            if id(optimizer) in seen:
                continue
            seen.add(id(optimizer))
            try:
                for group in optimizer.param_groups:
                    held.update(id(p) for p in group["params"])
            except Exception:
                pass
            for name in ("optimizer", "base_optimizer", "optim", "inner_optimizer", "_optimizer"):
                try:
                    inner = getattr(optimizer, name, None)
                except Exception:
                    inner = None
                if inner is not None and hasattr(inner, "param_groups"):
                    stack.append(inner)
        return held

    def _fingerprint(self, params):
        try:
            return tuple(float(p.detach().double().sum()) for p in params[:3])
        except Exception:
            return None

    def _check_frozen(self):
        """Root modules that hold gradients while no optimizer the script built holds any of
        their parameters; whether their weights change between steps all the same (updated
        by hand, or by an EMA) is followed over the next steps."""
        held = self._optimizer_parameters()
        if not held:
            return  # no optimizer (or only empty ones): nothing to compare with
        roots = self._root_modules()
        root_params = dict((id(r), [p for p in r.parameters()]) for r in roots)
        trained_roots = [r for r in roots if any(id(p) in held for p in root_params[id(r)])]
        for root in roots:
            params = root_params[id(root)]
            if not params or any(id(p) in held for p in params):
                continue
            trained = [p for p in params if p.requires_grad and p.grad is not None]
            if not trained:
                continue
            fingerprint = self._fingerprint(trained)
            record = self.frozen_candidates.get(root)
            if record is not None:
                if fingerprint != record["fingerprint"]:
                    record["changed"] = True
                continue
            everywhere = set(id(p) for ps in root_params.values() for p in ps)
            shapes = [tuple(p.shape) for p in params]
            # a copy of a trained model (the same parameter shapes): a target network, an EMA teacher
            twins = [type(r).__name__ for r in trained_roots if [tuple(p.shape) for p in root_params[id(r)]] == shapes]
            record = {
                "module": type(root).__name__, "site": self.state.module_sites.get(root),
                "output_site": self.output_sites.get(root), "trained": len(trained), "params": len(params),
                # optimizer parameters that belong to no module the run called: the optimizer
                # was built for another instance of the model
                "orphans": len(held - everywhere), "trained_modules": [type(r).__name__ for r in trained_roots],
                "twins": twins, "fingerprint": fingerprint, "changed": False,
                "optimizers": sorted(type(o).__name__ for o in list(self.created)),
                "optimizer_parameters": len(held),
            }
            self.frozen_candidates[root] = record
            self.frozen_records.append(record)

    def _frozen(self):
        for record in self.frozen_records:
            if record["changed"] and not record["twins"]:
                continue  # its weights change without an optimizer: updated by hand
            evidence = {"module": record["module"], "built_at": _short_site(record["site"]),
                        "parameters_with_grad": record["trained"], "parameters": record["params"],
                        "optimizers": record["optimizers"], "optimizer_parameters": record["optimizer_parameters"]}
            if record["trained_modules"] and not record["orphans"]:
                # the optimizers train other models of the run; this one is only on the way of
                # their loss: its output should have been detached (a target network, a teacher)
                used = record["output_site"]
                evidence.update({"output_used_at": _short_site(used), "trained_modules": record["trained_modules"],
                                 "weights_change": record["changed"]})
                others = sorted(set(record["trained_modules"]))
                trained = ", ".join(("another " + name) if name == record["module"] else name for name in others)
                message = (
                    "%s gets gradients for %d parameter tensors only through its output, computed %s "
                    "and entering the loss with its graph attached, while no optimizer holds its "
                    "parameters (the optimizers train %s): a target network or teacher is run under "
                    "torch.no_grad() or its output .detach()ed" % (
                        record["module"], record["trained"], "here" if used else "outside the user's code",
                        trained)
                )
                return self._finding("frozen-optimizer", used or record["site"], message, evidence)
            message = (
                "%s gets gradients for %d parameter tensors, but no optimizer holds any of its "
                "parameters: optimizer.step() never updates it (was the optimizer built for another "
                "instance of the model?)" % (record["module"], record["trained"])
            )
            evidence["parameters_in_no_called_module"] = record["orphans"]
            return self._finding("frozen-optimizer", record["site"], message, evidence)
        return None

    def check_broadcast(self, name, input, target):
        torch = self.torch
        if len(self.broadcasts) >= 3 or not isinstance(input, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        a, b = tuple(input.shape), tuple(target.shape)
        if a == b:
            return
        try:
            shape = tuple(torch.broadcast_shapes(a, b))
        except Exception:
            return
        if _numel(shape) <= max(_numel(a), _numel(b)):
            return
        if any(item["evidence"]["input_shape"] == list(a) and item["evidence"]["target_shape"] == list(b)
               for item in self.broadcasts):
            return
        message = (
            "%s compares input %s with target %s: they broadcast to %s, so every prediction is "
            "compared with every target (no error, no warning)"
            % (name, _shape_text(a), _shape_text(b), _shape_text(shape))
        )
        evidence = {"loss": name, "input_shape": list(a), "target_shape": list(b),
                    "broadcast_shape": list(shape), "step": self.state.steps + 1}
        self.broadcasts.append(self._finding("broadcast-loss", user_call_site(), message, evidence))

    # data leakage ----------------------------------------------------------------------------
    def watch_pass(self, loader, iterator):
        steps, backwards = self.state.steps, self.backwards
        hashes = {}
        batches = 0
        called = set()
        self.active_passes.append(called)
        self.pass_clock += 1
        started = self.pass_clock
        try:
            for batch in iterator:
                batches += 1
                if len(hashes) < _HEALTH_MAX_SAMPLES:
                    try:
                        self._hash_samples(batch, hashes)
                    except Exception:
                        pass
                yield batch
        finally:
            if called in self.active_passes:
                self.active_passes.remove(called)
            if batches:
                serial, site = self.loaders.get(loader, (None, None))
                # once per loader: a pass per epoch must not copy the index set of a big dataset
                known = self.loader_samples.get(loader)
                if known is None:
                    try:
                        known = self._loader_samples(loader)
                    except Exception:
                        known = (None, _UNKNOWN)
                    try:
                        self.loader_samples[loader] = known
                    except TypeError:
                        pass
                base, indices = known
                self.passes.append({
                    "loader": serial if serial is not None else -len(self.passes) - 1, "site": site,
                    "base": base, "indices": indices, "models": called, "started": started,
                    "train": self.state.steps > steps or self.backwards > backwards,
                    "hashes": hashes, "batches": batches,
                })

    def _hash_samples(self, batch, hashes):
        torch = self.torch
        leaves = []

        def collect(value):
            if isinstance(value, torch.Tensor):
                leaves.append(value)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    collect(item)
            elif isinstance(value, dict):
                for key in sorted(value, key=str):
                    collect(value[key])

        collect(batch)
        if not leaves or leaves[0].dim() == 0:
            return
        rows = leaves[0].shape[0]
        digests = [hashlib.sha1() for _ in range(rows)]
        for tensor in leaves:
            if tensor.dim() == 0 or tensor.shape[0] != rows:
                continue
            flat = tensor.detach().cpu().contiguous()
            try:
                data = flat.numpy().tobytes()
            except Exception:
                data = repr(flat.tolist()).encode()
            size = len(data) // rows if rows else 0
            for i in range(rows):
                digests[i].update(data[i * size:(i + 1) * size])
        for digest in digests:
            key = digest.hexdigest()
            hashes[key] = hashes.get(key, 0) + 1

    def _resolve_dataset(self, dataset):
        """(base dataset, indices into it or None for all of it), through nested Subsets
        (``random_split`` makes Subsets too)."""
        from torch.utils.data import Subset

        indices = None
        while isinstance(dataset, Subset):
            own = [int(i) for i in dataset.indices]
            indices = own if indices is None else [own[i] for i in indices]
            dataset = dataset.dataset
        return dataset, indices

    def _sampler_indices(self, sampler, depth=0):
        """The indices ``sampler`` can yield: a set, None for any index of the dataset, or
        _UNKNOWN (a custom sampler that does not say: the sample hashes decide then)."""
        from torch.utils.data import sampler as samplers

        if sampler is None or isinstance(sampler, (samplers.SequentialSampler, samplers.RandomSampler)):
            return None
        if depth > 4:
            return _UNKNOWN
        if isinstance(sampler, samplers.WeightedRandomSampler):
            return set(i for i, w in enumerate(sampler.weights.tolist()) if w > 0)
        if isinstance(sampler, samplers.BatchSampler):
            return self._sampler_indices(sampler.sampler, depth + 1)
        listed = _index_list(sampler)  # an index list given as the sampler, or batches of them
        if listed is not None:
            return listed
        # SubsetRandomSampler, and the custom samplers that keep their indices (SubsetSampler)
        for name in ("indices", "idx", "index", "ids"):
            listed = _index_list(getattr(sampler, name, None))
            if listed is not None:
                return listed
        inner = getattr(sampler, "sampler", None)
        if isinstance(inner, samplers.Sampler):
            return self._sampler_indices(inner, depth + 1)
        return _UNKNOWN

    def _loader_samples(self, loader):
        """(base dataset, the set of its indices the loader can yield, None for all of it, or
        _UNKNOWN): the loader's Subsets and its sampler composed."""
        from torch.utils.data import sampler as samplers

        base, subset = self._resolve_dataset(getattr(loader, "dataset", None))
        batch_sampler = getattr(loader, "batch_sampler", None)
        if batch_sampler is not None and not isinstance(batch_sampler, samplers.BatchSampler):
            chosen = self._sampler_indices(batch_sampler)  # a custom batch sampler
        else:
            chosen = self._sampler_indices(getattr(loader, "sampler", None))
        if chosen is _UNKNOWN:
            return base, _UNKNOWN
        if subset is None:
            return base, chosen
        if chosen is None:
            return base, set(subset)
        return base, set(subset[i] for i in chosen if -len(subset) <= i < len(subset))

    def _leakage(self):
        train = [p for p in self.passes if p["train"]]
        evals = [p for p in self.passes if not p["train"]]
        if not train or not evals:
            return None
        train_loaders = set(p["loader"] for p in train)
        candidates = []
        seen_loaders = set()
        for p in evals:
            loader = p["loader"]
            if loader in train_loaders or loader in seen_loaders:
                continue  # a training loader evaluated again (training accuracy): not a leak
            # only the passes that trained, before it, a model this pass evaluates, with no
            # weights reset between (k-fold: each fold's model against its own training folds;
            # a pass computing statistics evaluates no model)
            related = [t for t in train if t["models"] & p["models"] and t["started"] < p["started"]
                       and not any(t["started"] <= r < p["started"] for r in self.resets_at)]
            if not related:
                continue
            seen_loaders.add(loader)
            train_hashes = set()
            for t in related:
                train_hashes.update(h for h, n in t["hashes"].items() if n == 1)
            found = self._overlap(p, related, train_hashes)
            if found is not None:
                candidates.append((p, found))
        if not candidates:
            return None
        # evaluating on the very training dataset beside a separate validation set is most
        # likely a training-accuracy measurement: only a split that overlaps is reported then
        clean = len(seen_loaders) > len(candidates)
        for evaluation, (how, overlap, total, training) in candidates:
            if how == "the same dataset object" and clean:
                continue
            site, train_site = evaluation["site"], training["site"]
            message = (
                "the evaluation DataLoader shares %d samples with the training one (%s): the "
                "evaluation measures data the model trains on" % (overlap, how)
            )
            evidence = {"overlap": overlap, "how": how, "evaluation_samples": total,
                        "evaluation_loader": _short_site(site), "training_loader": _short_site(train_site)}
            return self._finding("data-leakage", site, message, evidence)
        return None

    def _overlap(self, evaluation, train, train_hashes):
        """(how, overlap count, evaluation samples, training loader) or None: the index sets
        where both loaders' samplers say which samples they yield, the hashes of the samples
        this run saw otherwise."""
        eval_base, eval_indices = evaluation["base"], evaluation["indices"]
        structural = False
        for p in train:
            base, indices = p["base"], p["indices"]
            if base is None or base is not eval_base or indices is _UNKNOWN or eval_indices is _UNKNOWN:
                continue
            structural = True
            try:
                size = len(base)
            except Exception:
                size = None
            if indices is None and eval_indices is None:
                if size:
                    return "the same dataset object", size, size, p
                continue
            if indices is None or eval_indices is None:
                shared = len(eval_indices if indices is None else indices)
                total = len(eval_indices) if eval_indices is not None else size
                how = "one loader yields all of the dataset the other samples from"
            else:
                shared = len(indices & eval_indices)
                total = len(eval_indices)
                how = "subsets or samplers of one dataset with overlapping indices"
            if shared:
                return how, shared, total, p
        if structural:
            return None  # split from one dataset, disjoint: its indices say so exactly
        eval_hashes = set(h for h, n in evaluation["hashes"].items() if n == 1)
        shared = len(eval_hashes & train_hashes)
        if not shared:
            return None
        return "identical samples seen in both phases of this run", shared, len(eval_hashes), train[0]

    # findings ----------------------------------------------------------------------------------
    def _root_modules(self):
        """The outermost modules called, without those inside another one."""
        roots = list(self.roots)
        inner = set()
        for root in roots:
            for child in root.modules():
                if child is not root:
                    inner.add(id(child))
        return [r for r in roots if id(r) not in inner]

    def _parameter_names(self):
        names = {}
        for root in self._root_modules():
            for name, p in root.named_parameters():
                names.setdefault(id(p), (root, name))
        return names

    def _module_name(self, module, names):
        for root in self._root_modules():
            if root is module:
                return type(root).__name__
            for name, child in root.named_modules():
                if child is module:
                    return "%s.%s" % (type(root).__name__, name)
        return None

    def _dead_parameters(self):
        dead = {}  # module -> its parameters that never had a gradient, in order
        steps = 0
        optimizers = []
        # a parameter two optimizers hold (InfoGAN's info optimizer and the discriminator's) is
        # alive when it had a gradient at the steps of either
        alive = set(key for record in self.records for key, info in record["params"].items() if info["grad"])
        for record in self.records:
            if not record["live_steps"]:
                continue
            steps = max(steps, record["live_steps"])
            for key, info in record["params"].items():
                if info["grad"] or key in alive or not info["requires_grad"] or not info["name"]:
                    continue
                entry = dead.setdefault(info["module"], {
                    "module": info["module"], "type": info["type"], "parameters": [],
                    "built_at": _short_site(info["site"]), "forward_called": info["called"], "site": info["site"],
                    "forward_called_with_grad": info.get("called_with_grad"), "branch_of": info.get("branch_of"),
                })
                if info["name"] not in entry["parameters"]:
                    entry["parameters"].append(info["name"])
                if record["type"] not in optimizers:
                    optimizers.append(record["type"])
        if not dead:
            return None
        findings = []
        unsampled = [d for d in dead.values() if d["branch_of"]]
        described = [d for d in dead.values() if not d["branch_of"]]
        fallback = next((r["site"] for r in self.records if r["site"]), None)
        plural = "" if steps == 1 else "s"
        if described:
            site = next((d["site"] for d in described if d["site"]), None)
            count = sum(len(d["parameters"]) for d in described)
            listed = ", ".join(
                "%s (%s%s)" % (d["module"], d["type"], "" if d["forward_called_with_grad"] else
                               ", called only under no_grad" if d["forward_called"] else ", never called")
                for d in described[:5]
            )
            message = (
                "%d parameter tensor%s that require grad and are in the optimizer got no gradient in "
                "%d optimizer step%s: %s" % (count, "" if count == 1 else "s", steps, plural, listed)
            )
            modules = [dict((k, v) for k, v in d.items() if k not in ("site", "branch_of")) for d in described]
            evidence = {"modules": modules, "steps": steps, "optimizers": optimizers}
            findings.append(self._finding("dead-parameters", site or fallback, message, evidence))
        if unsampled:
            site = next((d["site"] for d in unsampled if d["site"]), None)
            count = sum(len(d["parameters"]) for d in unsampled)
            containers = []
            for d in unsampled:
                if d["branch_of"] not in containers:
                    containers.append(d["branch_of"])
            shown = ", ".join(containers[:3]) + (" and %d more" % (len(containers) - 3) if len(containers) > 3 else "")
            message = (
                "%d branch module%s (%d parameter tensor%s) %s not sampled in %d optimizer step%s: the "
                "forward picks among the children of %s, and a short run routes to only some (by design "
                "in a supernet or a mixture of experts)" % (
                    len(unsampled), "" if len(unsampled) == 1 else "s", count, "" if count == 1 else "s",
                    "was" if len(unsampled) == 1 else "were", steps, plural, shown)
            )
            modules = [{"module": d["module"], "type": d["type"], "parameters": len(d["parameters"]),
                        "branch_of": d["branch_of"], "built_at": d["built_at"]} for d in unsampled[:20]]
            evidence = {"branches": len(unsampled), "parameters": count, "selecting_modules": containers,
                        "modules": modules, "steps": steps}
            findings.append(self._finding("dead-parameters", site or fallback, message, evidence,
                                          level="information"))
        return findings

    def _device_idle(self):
        torch = self.torch
        try:
            if not torch.cuda.is_available():
                return None
            count = torch.cuda.device_count()
        except Exception:
            return None
        live = [r for r in self.records if r["live_steps"]]
        devices = set()
        params = 0
        for record in live:
            devices.update(record["devices"])
            params += len(record["params"])
        if not params or devices != set(["cpu"]):
            return None
        message = (
            "CUDA is available (%d device%s) but every parameter the optimizer steps is on the CPU: "
            "the model trains on the CPU" % (count, "" if count == 1 else "s")
        )
        evidence = {"cuda_devices": count, "parameter_tensors": params, "parameter_devices": sorted(devices),
                    "optimizers": [r["type"] for r in live]}
        return self._finding("device-idle", live[0]["site"], message, evidence)

    def _finding(self, check, site, message, evidence, level="warning"):
        file, line = _health_site(site)
        return {"id": check, "file": file, "line": line, "message": message, "evidence": evidence,
                "level": level}

    def findings(self):
        found = []
        for check in (lambda: self.nan, lambda: self.accumulation, self._dead_parameters,
                      self._frozen, lambda: self.broadcasts, self._device_idle, self._leakage):
            try:
                result = check()
            except Exception:  # a check's own failure must never cost the run its evidence
                continue
            if isinstance(result, list):
                found.extend(result)
            elif result is not None:
                found.append(result)
        return found


_UNKNOWN = "unknown"  # a sampler whose indices cannot be known without running it


def _index_list(value):
    """A set of ints from an index list (list, tuple, range, numpy array, tensor, or a list of
    batches of them); None when ``value`` is not one."""
    if value is None or isinstance(value, (str, bytes, dict)):
        return None
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__.split(".")[0] in ("numpy", "torch"):
        try:
            value = tolist()
        except Exception:
            return None
    if not isinstance(value, (list, tuple, range)):
        return None
    found = set()
    try:
        for item in value:
            if isinstance(item, (list, tuple)):
                found.update(int(i) for i in item)
            else:
                found.add(int(item))
    except (TypeError, ValueError):
        return None
    return found


def _shape_text(shape):
    return "(%s)" % ", ".join(str(s) for s in shape) if len(shape) != 1 else "(%d,)" % shape[0]


HEALTH = None


def install_health_probes(state, torch):
    global HEALTH
    HEALTH = HealthProbes(state, torch)
    HEALTH.install()


# --------------------------------------------------------------------------------------------
# Evidence


def _describe(value, torch):
    """A small JSON description of a local, or None when it says nothing useful."""
    if torch is not None:
        if isinstance(value, torch.Tensor):
            try:
                return {
                    "kind": "tensor", "shape": _shape(value), "dtype": str(value.dtype).replace("torch.", ""),
                    "device": str(value.device), "requires_grad": bool(value.requires_grad),
                }
            except Exception:
                return {"kind": "tensor"}
        if isinstance(value, torch.nn.Module):
            devices = set()
            try:
                for tensor in itertools.chain(value.parameters(), value.buffers()):
                    devices.add(str(tensor.device))
                    if len(devices) > 1:
                        break
            except Exception:
                pass
            site = STATE.module_sites.get(value) if STATE is not None else None
            return {"kind": "module", "type": type(value).__name__,
                    "devices": sorted(devices), "site": _short_site(site)}
        if isinstance(value, torch.device):
            return {"kind": "device", "value": str(value)}
        if type(value) in (list, tuple) and value and isinstance(value[-1], torch.Tensor):
            # a list of tensors (losses appended per step): what its elements are
            return {"kind": "tensor-list", "length": len(value), "element": _describe(value[-1], torch)}
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return {"kind": "number", "value": value}
    if isinstance(value, str) and len(value) <= 40 and value.split(":")[0] in ("cpu", "cuda", "mps", "xpu", "meta"):
        return {"kind": "device-string", "value": value}
    return None


def _describe_scope(namespace, torch, kinds=None, limit=60):
    described = {}
    for name, value in list(namespace.items()):
        if name.startswith("__"):
            continue
        summary = _describe(value, torch)
        if summary is None:
            continue
        if kinds is not None and summary["kind"] not in kinds:
            continue
        described[name] = summary
        if len(described) >= limit:
            break
    return described


_MODULE_SIZES = ("num_embeddings", "embedding_dim", "padding_idx", "in_features", "out_features",
                 "in_channels", "out_channels", "num_features", "input_size", "hidden_size")


def _module_details(module, value, torch):
    """What a failing module was built with, and the range of an integer input it received
    (an Embedding given index 12 with num_embeddings=10, say)."""
    details = {}
    for name in _MODULE_SIZES:
        size = getattr(module, name, None)
        if isinstance(size, int) and not isinstance(size, bool):
            details[name] = size
    if isinstance(value, torch.Tensor):
        details["input_shape"] = _shape(value)
        details["input_dtype"] = str(value.dtype).replace("torch.", "")
        if not value.is_floating_point() and not value.is_complex() and value.numel() and value.device.type != "meta":
            try:
                details["input_min"] = int(value.min())
                details["input_max"] = int(value.max())
            except Exception:
                pass
    return details


def _is_harness_frame(tb):
    return os.path.abspath(tb.tb_frame.f_code.co_filename) == _THIS_FILE


def _trim_traceback(tb):
    """The traceback without the harness's own frames (its entry point at the top, and the
    wrappers it puts between the script and torch: the DataLoader cut, the in-place recorder).

    Tracebacks then read as they would without repairbot, and no harness frame is ever taken
    for the user's code.
    """
    kept = []
    while tb is not None:
        if not _is_harness_frame(tb):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def _trim_chain(exc, seen=None):
    """Trim every exception of a chain, as the printed traceback shows them all."""
    seen = seen if seen is not None else set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = _trim_traceback(exc.__traceback__)
        _trim_chain(exc.__cause__, seen)
        exc = exc.__context__


def _exception_type_name(exc):
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    return "%s.%s" % (module, cls.__qualname__)


def describe_exception(exc, torch, with_locals=True, depth=0):
    tb = _trim_traceback(exc.__traceback__)
    frames = []
    failing_module = None
    failing_linear = None
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        record = frame_record(code.co_filename, tb.tb_lineno, code.co_name, code, tb.tb_lasti)
        if with_locals and record["user"]:
            record["locals"] = _describe_scope(frame.f_locals, torch)
            # globals: the devices and modules a function can see (tensors would be too many)
            record["globals"] = _describe_scope(frame.f_globals, torch, kinds=("device", "device-string", "module"))
        if torch is not None and code.co_name == "forward":
            module = frame.f_locals.get("self")
            if isinstance(module, torch.nn.Module):
                failing_module = _describe(module, torch)
                failing_module.update(_module_details(module, frame.f_locals.get("input"), torch))
                index = STATE.linear_index.get(module) if STATE is not None else None
                if index is not None:
                    failing_linear = index
                    shape = _shape(frame.f_locals.get("input"))
                    if shape is not None:
                        STATE.linears[index]["input_shape"] = shape
        frames.append(record)
        tb = tb.tb_next
    described = {
        "type": _exception_type_name(exc),
        "message": _safe_str(exc),
        "frames": frames,
        "failing_module": failing_module,
        "failing_linear": failing_linear,
        "causes": [],
    }
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None and depth < 5:
        inner = describe_exception(cause, torch, with_locals=False, depth=depth + 1)
        described["causes"] = [dict(inner, causes=[])] + inner["causes"]
    return described


def _safe_str(exc):
    try:
        return str(exc)
    except Exception as error:  # a broken __str__ must not hide the failure
        return "<unprintable %s: %s>" % (type(exc).__name__, error)


def _imported_user_files(script):
    files = {script}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        # some extension-backed modules carry a bare, relative __file__: not a real file
        if path and os.path.isabs(path) and OWNERSHIP.is_user_file(path):
            files.add(os.path.abspath(path))
    return sorted(files)


def _environment(torch):
    env = {"python": "%d.%d.%d" % sys.version_info[:3], "torch": None, "cuda_available": False}
    if torch is not None:
        env["torch"] = torch.__version__.split("+")[0]
        env["torch_threads"] = torch.get_num_threads()
        try:
            env["cuda_available"] = bool(torch.cuda.is_available())
            if env["cuda_available"]:
                count = torch.cuda.device_count()
                env["cuda_device_count"] = count
                env["devices"] = [torch.cuda.get_device_name(i) for i in range(count)]
        except Exception:
            pass
    return env


CONFIG = None
_FINISHED = False


def write_evidence(outcome, exit_code, exception=None):
    torch = STATE.torch if STATE is not None else None
    evidence = {
        "schema": "repairbot.evidence/1",
        "outcome": outcome,
        "exit_code": exit_code,
        "exception": exception,
        "stopped_at": STATE.stopped_at if STATE else None,
        "limits": {
            "batch_size": STATE.batch_size, "max_batches": STATE.max_batches,
            "max_steps": STATE.max_steps, "forced": STATE.forced, "steps": STATE.steps,
            "free_steps": STATE.free_steps, "batches": STATE.batches,
            "loaders_cut": STATE.loaders_cut, "last_batches": STATE.last_batches,
            "left_loops": BUDGET.report() if BUDGET is not None else [],
        } if STATE else None,
        "progress": STATE.progress() if STATE else None,
        "linears": STATE.linears if STATE else [],
        "layer_sites": STATE.layer_sites if STATE else [],
        "probes": sorted(STATE.probes) if STATE else [],
        "inplace_ops": STATE.inplace_ops if STATE else None,
        "unsafe_globals": STATE.unsafe_globals if STATE else None,
        "health": HEALTH.findings() if HEALTH is not None else None,
        "imported_files": _imported_user_files(CONFIG["script"]),
        "environment": _environment(torch),
        "files": {
            "shadowed": sorted(GUARD.shadowed) if GUARD else [],
            "suppressed_deletes": sorted(GUARD.suppressed_deletes) if GUARD else [],
        },
    }
    path = CONFIG["evidence_path"]
    tmp = path + ".tmp"
    with _real_open(tmp, "w", encoding="utf-8") as handle:
        json.dump(evidence, handle, default=str)
    _real_replace(tmp, path)


def finish(outcome, exit_code, exception=None):
    """Write the evidence and leave at once: nothing in the script can swallow this.

    Used where the harness ends a run that is still going (the step budget): a script's own
    ``except BaseException`` or ``finally`` must not turn the stop into something else.
    """
    global _FINISHED
    if _FINISHED:
        os._exit(exit_code)
    _FINISHED = True
    try:
        write_evidence(outcome, exit_code, exception)
    finally:
        _flush_and_exit(exit_code)


def _flush_and_exit(code):
    """Flush what the script printed, then leave at once (no atexit, no finalizers of its own)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def conclude(outcome, exit_code, exception=None):
    """Write the evidence of a run that ended by itself; the interpreter then exits normally."""
    global _FINISHED
    if not _FINISHED:
        _FINISHED = True
        write_evidence(outcome, exit_code, exception)
    return exit_code


# --------------------------------------------------------------------------------------------
# Main


def _load_config(path):
    with _real_open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    config["overlay"] = {
        os.path.abspath(p): base64.b64decode(data) for p, data in config.get("overlay", {}).items()
    }
    return config


def _print_exception(exc):
    """Print an uncaught exception as the interpreter would, through the script's own hook.

    The interpreter's default hook reads source lines from disk; the traceback module reads
    them through linecache, which holds the overlay: the lines that really ran.
    """
    _trim_chain(exc)
    tb = exc.__traceback__
    hook = sys.excepthook
    if hook is sys.__excepthook__:
        hook = traceback.print_exception
    try:
        hook(type(exc), exc, tb)
    except Exception:
        traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def _module_code(name, main_module):
    """`python -m NAME`: find the module (importing its parent packages, as Python does), make
    ``__main__`` look as runpy makes it, and return its code (loops instrumented by the finder)."""
    import runpy

    name, spec, code = runpy._get_module_details(name)  # ImportError: reported as the run's failure
    sys.argv[0] = spec.origin or sys.argv[0]
    main_module.__file__ = spec.origin
    main_module.__spec__ = spec
    main_module.__loader__ = spec.loader
    main_module.__package__ = spec.parent
    return code


def run(config_path):
    """One run of the script described by a config file; returns the exit code."""
    global CONFIG, STATE
    CONFIG = _load_config(config_path)
    script = os.path.abspath(CONFIG["script"])
    CONFIG["script"] = script
    STATE = RunState(CONFIG)
    try:
        import torch
    except ImportError:
        torch = None
    recorder = None
    if torch is not None:
        OWNERSHIP.add_library_root(os.path.dirname(torch.__file__))
        install_torch_probes(STATE, torch)
        if "inplace-ops" in STATE.probes:
            recorder = install_inplace_probe(STATE, torch)
        if "unsafe-globals" in STATE.probes:
            install_unsafe_globals_probe(STATE, torch)
        if CONFIG.get("limits", {}).get("health", True):
            install_health_probes(STATE, torch)
    if BUDGET is None:
        install_step_budget(STATE)
    install_argparse_probe(STATE)
    if "target-size-warning" in STATE.probes:
        install_target_size_probe()

    source = CONFIG["overlay"].get(script)
    if source is None:
        with _real_open(script, "rb") as handle:
            source = handle.read()
    install_overlay(CONFIG["overlay"])
    if script not in CONFIG["overlay"]:
        text = _decode_source(source)
        linecache.cache[script] = (len(text), None, text.splitlines(True), script)

    # The script runs as `python SCRIPT ARGS` (or `python -m MODULE ARGS`) would run it.
    module_name = CONFIG.get("module")
    sys.argv = [CONFIG.get("argv0") or script] + list(CONFIG.get("args", []))
    sys.path[0] = os.getcwd() if module_name else os.path.dirname(script)
    main_module = types.ModuleType("__main__")
    main_module.__file__ = script
    main_module.__builtins__ = builtins
    main_module.__cached__ = None
    sys.modules["__bootstrap__"] = sys.modules.get("__main__")
    sys.modules["__main__"] = main_module

    if CONFIG.get("guard_files", True):
        install_file_guard(CONFIG["scratch"], CONFIG["created_log"], torch)
    try:
        if module_name:
            code = _module_code(module_name, main_module)
        else:
            code = LOOPS.compile(source, script)
        if recorder is not None:
            with recorder:
                exec(code, main_module.__dict__)
        else:
            exec(code, main_module.__dict__)
    except SystemExit as exit_request:
        status = exit_request.code
        if status is None or status == 0:
            return conclude("passed", 0)
        if isinstance(status, int):
            return conclude("failed", status & 0xFF or 1)
        sys.stderr.write("%s\n" % (status,))
        return conclude("failed", 1)
    except BaseException as exc:  # everything the script raises is evidence
        _print_exception(exc)
        return conclude("failed", 1, describe_exception(exc, torch))
    return conclude("passed", 0)


# --------------------------------------------------------------------------------------------
# The warm server: torch imported once, each run a fork of it


def _warm_up():
    """Import what nearly every training script imports, once, before any fork.

    Importing runs no torch operation, so no thread pool exists yet when a run is forked
    (the first optimizer step lazily imports the compiler stack: a second or more saved per run).
    """
    for name in ("torch", "torch.nn", "torch.optim", "torch.utils.data", "torch._dynamo", "numpy", "argparse"):
        try:
            __import__(name)
        except Exception:
            pass


def _exit_status(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def _forked_run(request):
    """In the forked child: become the run (own session, its stdio, cwd and environment)."""
    code = 1
    try:
        os.setsid()
        stdin = _real_os_open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = _real_os_open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        os.chdir(request["cwd"])
        server_path = os.environ.get("PYTHONPATH", "")
        os.environ.clear()
        os.environ.update(request["env"])
        if os.environ.get("PYTHONPATH", "") != server_path:
            # a fresh interpreter would put the run's PYTHONPATH right after the script's folder
            known = set(server_path.split(os.pathsep))
            extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in known]
            sys.path[1:1] = [os.path.abspath(p) for p in extra]
        threads = os.environ.get("OMP_NUM_THREADS")
        if threads and threads.isdigit() and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))
        # a fresh interpreter seeds these from the OS; forks would all share the server's state
        import random

        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        code = run(request["config"])
        try:
            import threading

            threading._shutdown()  # wait for the script's non-daemon threads, as at exit
        except Exception:
            pass
        import atexit

        atexit._run_exitfuncs()
    except SystemExit as exit_request:
        code = exit_request.code if isinstance(exit_request.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        _flush_and_exit(code)


def serve():
    """Serve runs over stdin/stdout, one JSON line each: {"config", "cwd", "env", "stdout",
    "stderr"} in; {"pid"} when the run starts, then {"pid", "status"} when it ends."""
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    # what the server itself might print goes nowhere; the runs get their own stdio
    null = _real_os_open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    sys.dont_write_bytecode = True
    _warm_up()
    replies.write(json.dumps({"ready": True, "python": "%d.%d.%d" % sys.version_info[:3]}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        replies.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _forked_run(request)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"pid": pid, "status": _exit_status(status)}) + "\n")
        replies.flush()
    return 0


def main():
    if sys.argv[1:] == ["--serve"]:
        return serve()
    if len(sys.argv) != 2:
        sys.stderr.write("usage: bootstrap.py CONFIG.json | --serve\n")
        return 2
    return run(sys.argv[1])


_real_replace = os.replace

if __name__ == "__main__":
    sys.exit(main())
