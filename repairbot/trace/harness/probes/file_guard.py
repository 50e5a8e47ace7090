"""The file guard: a file that existed before the run is never altered or deleted.

Writes go to a shadow copy in the scratch folder, deletes are only recorded, while the
script's view (stat, listdir, scandir, glob, open) agrees with what it did; every file the
run creates is logged so that the parent can remove it afterwards. The replacements of
``open``, ``os.*`` and ``shutil.rmtree`` are process-wide, so the guard they consult is too.
"""

import builtins
import functools
import hashlib
import io
import os
import shutil
from typing import Any, Optional, Set

from .. import realos
from ..context import Run
from ..imports import when_imported

NAME = "file-guard"
NEEDS_TORCH = False
LATE = True  # after the overlay read the script: from then on every open is the script's


def enabled(run: Run) -> bool:
    return bool(run.config.get("guard_files", True))


def _r_lexists(path: Any) -> Any:
    try:
        realos.lstat(path)
    except (OSError, ValueError):
        return False
    return True


def _r_isfile(path: Any) -> Any:
    import stat as _stat

    try:
        return _stat.S_ISREG(realos.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _r_isdir(path: Any) -> Any:
    import stat as _stat

    try:
        return _stat.S_ISDIR(realos.stat(path).st_mode)
    except (OSError, ValueError):
        return False


class _suppress_os_error(object):
    def __enter__(self) -> Any:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> Any:
        return kind is not None and issubclass(kind, OSError)


class FileGuard:
    """Redirects writes to pre-existing files into shadow copies; logs created files.

    All state lives on disk (shadow copies, deletion markers, the creation log) so that
    forked DataLoader workers share it with the main process.
    """

    def __init__(self, scratch: Any, created_log: Any) -> None:
        self.shadow_root = os.path.join(scratch, "fs")
        self.deleted_root = os.path.join(scratch, "deleted")
        self.created_log = created_log
        self.created: Set[str] = set()
        self.shadowed: Set[str] = set()
        self.suppressed_deletes: Set[str] = set()
        self.scratch = os.path.abspath(scratch) + os.sep

    # paths ------------------------------------------------------------------------------
    def _mirror(self, root: Any, real: Any) -> Any:
        drive, rest = os.path.splitdrive(real)
        return os.path.join(root, drive.replace(":", ""), rest.lstrip("\\/"))

    def shadow(self, real: Any) -> Any:
        return self._mirror(self.shadow_root, real)

    def deleted_marker(self, real: Any) -> Any:
        # flat, hashed names: a deleted folder and the files it held must not collide
        digest = hashlib.sha1(real.encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.deleted_root, digest)

    def owns(self, real: Any) -> Any:
        return real.startswith(self.scratch)

    def is_deleted(self, real: Any) -> Any:
        return _r_lexists(self.deleted_marker(real))

    def has_shadow(self, real: Any) -> Any:
        return _r_lexists(self.shadow(real))

    def is_protected(self, real: Any) -> Any:
        """Existed before the run (and was not created by it)."""
        if self.owns(real) or real in self.created:
            return False
        return self.has_shadow(real) or self.is_deleted(real) or _r_lexists(real)

    # bookkeeping ------------------------------------------------------------------------
    def log_created(self, real: Any, kind: Any = "f") -> None:
        self.created.add(real)
        fd = realos.os_open(self.created_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, ("%s %s\n" % (kind, real)).encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)

    def _ensure_parent(self, path: Any) -> None:
        parent = os.path.dirname(path)
        if parent and not _r_isdir(parent):
            os.makedirs(parent)

    def mark_deleted(self, real: Any) -> None:
        marker = self.deleted_marker(real)
        self._ensure_parent(marker)
        with realos.open(marker, "w"):
            pass
        shadow = self.shadow(real)
        if _r_lexists(shadow):
            os.remove(shadow)
        self.suppressed_deletes.add(real)

    def unmark_deleted(self, real: Any) -> None:
        marker = self.deleted_marker(real)
        if _r_lexists(marker):
            os.remove(marker)

    # decisions --------------------------------------------------------------------------
    def path_for_read(self, real: Any) -> Any:
        if self.owns(real):
            return real
        if self.has_shadow(real):
            return self.shadow(real)
        if self.is_deleted(real):
            raise FileNotFoundError(2, "No such file or directory", real)
        return real

    def path_for_write(self, real: Any, keep_content: Any) -> Any:
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


GUARD: Optional[FileGuard] = None  # set by install()


def _real_path(file: Any) -> Any:
    return os.path.abspath(os.fspath(file))


def _is_path(file: Any) -> Any:
    return isinstance(file, (str, bytes, os.PathLike)) and not isinstance(file, bytes)


def _writes(mode: Any) -> Any:
    return any(c in mode for c in "wax+")


def guarded_open(file: Any, mode: Any = "r", *args: Any, **kwargs: Any) -> Any:
    if GUARD is not None and _is_path(file):
        real = _real_path(file)
        if _writes(mode):
            if "x" in mode and _r_lexists(real) and not GUARD.is_deleted(real) \
                    and not GUARD.has_shadow(real):
                # exclusive creation of an existing file fails as it would, untouched
                return realos.open(real, mode, *args, **kwargs)
            keep = "a" in mode or ("+" in mode and "w" not in mode)
            file = GUARD.path_for_write(real, keep_content=keep)
        else:
            file = GUARD.path_for_read(real)
    return realos.open(file, mode, *args, **kwargs)


def guarded_os_open(path: Any, flags: Any, mode: Any = 0o777, *args: Any, **kwargs: Any) -> Any:
    if GUARD is not None and _is_path(path) and not kwargs.get("dir_fd") and not args:
        real = _real_path(path)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
            if flags & os.O_EXCL and _r_lexists(real) and not GUARD.is_deleted(real):
                return realos.os_open(real, flags, mode)
            # the shadow starts as a copy; O_TRUNC then truncates the copy, as it would the file
            path = GUARD.path_for_write(real, keep_content=True)
        else:
            path = GUARD.path_for_read(real)
    return realos.os_open(path, flags, mode, *args, **kwargs)


def _wrap_remove(real_remove: Any) -> Any:
    def guarded_remove(path: Any, *args: Any, **kwargs: Any) -> Any:
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


def _wrap_rename(real_rename: Any) -> Any:
    def guarded_rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
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


def _wrap_mkdir(real_mkdir: Any) -> Any:
    def guarded_mkdir(path: Any, mode: Any = 0o777, *args: Any, **kwargs: Any) -> Any:
        if GUARD is not None and _is_path(path) and not args and not kwargs:
            real = _real_path(path)
            if not GUARD.owns(real) and GUARD.is_deleted(real) and _r_isdir(real):
                GUARD.unmark_deleted(real)  # a folder the run removed, made again (still empty)
                return None
            if not _r_lexists(real) and not GUARD.owns(real):
                GUARD.log_created(real, kind="d")
        return real_mkdir(path, mode, *args, **kwargs)

    return guarded_mkdir


def _wrap_rmdir(real_rmdir: Any) -> Any:
    def guarded_rmdir(path: Any, *args: Any, **kwargs: Any) -> Any:
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


def _wrap_rmtree(real_rmtree: Any) -> Any:
    def guarded_rmtree(path: Any, *args: Any, **kwargs: Any) -> Any:
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
                        realos.rmdir(child)
                else:
                    GUARD.mark_deleted(child)
        GUARD.mark_deleted(real)
        return None

    return guarded_rmtree


def _wrap_truncate(real_truncate: Any) -> Any:
    def guarded_truncate(path: Any, length: Any) -> Any:
        if GUARD is not None and _is_path(path):
            path = GUARD.path_for_write(_real_path(path), keep_content=True)
        return real_truncate(path, length)

    return guarded_truncate


def _guard_torch_serialization(hooks: Any) -> None:
    """torch.save opens a path in C++, past the patched ``open``: guard that path here.

    (torch.load reads through Python's ``open``, which the guard already serves.)
    """

    def guarded_save(real_save: Any, obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        if GUARD is not None and _is_path(f):
            f = GUARD.path_for_write(_real_path(f), keep_content=False)
        return real_save(obj, f, *args, **kwargs)

    hooks.torch_function("save", guarded_save)


def _guard_safetensors(module: Any) -> None:
    """safetensors.torch writes and reads a path in Rust, past the patched ``open`` (Hugging
    Face's Trainer saves its checkpoints with it): guard the paths of ``save_file`` and
    ``load_file`` here."""
    real_save, real_load = module.save_file, module.load_file

    @functools.wraps(real_save)
    def save_file(tensors: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
        if GUARD is not None and _is_path(filename):
            filename = GUARD.path_for_write(_real_path(filename), keep_content=False)
        return real_save(tensors, filename, *args, **kwargs)

    @functools.wraps(real_load)
    def load_file(filename: Any, *args: Any, **kwargs: Any) -> Any:
        if GUARD is not None and _is_path(filename):
            filename = GUARD.path_for_read(_real_path(filename))
        return real_load(filename, *args, **kwargs)

    module.save_file, module.load_file = save_file, load_file


# The script's view of the file system: what it wrote, renamed and deleted, never the disk's
# stale state (shadow copies stand in for the files, deletion markers hide them)


def _viewed(path: Any) -> Any:
    """The file that stands for ``path`` in the script's view; FileNotFoundError if it deleted it."""
    assert GUARD is not None  # called only while the guard is on
    real = _real_path(path)
    if GUARD.owns(real):
        return path
    if GUARD.has_shadow(real) and _r_isfile(GUARD.shadow(real)):
        return GUARD.shadow(real)
    if GUARD.is_deleted(real):
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    return path


def _wrap_stat(real_stat: Any) -> Any:
    def guarded_stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if GUARD is not None and _is_path(path) and not args and not kwargs.get("dir_fd"):
            path = _viewed(path)
        return real_stat(path, *args, **kwargs)

    return guarded_stat


def guarded_listdir(path: Any = ".") -> Any:
    if GUARD is None or not _is_path(path):
        return realos.listdir(path)
    real = _real_path(path)
    if GUARD.owns(real):
        return realos.listdir(path)
    if GUARD.is_deleted(real):
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    return [name for name in realos.listdir(path) if not GUARD.is_deleted(os.path.join(real, name))]


class _ShadowEntry(object):
    """A DirEntry for a file the run rewrote: its name and path, the shadow copy's metadata."""

    def __init__(self, entry: Any, shadow: Any) -> None:
        self._entry, self._shadow = entry, shadow
        self.name, self.path = entry.name, entry.path

    def stat(self, follow_symlinks: Any = True) -> Any:
        return realos.stat(self._shadow)

    def is_file(self, follow_symlinks: Any = True) -> Any:
        return True

    def is_dir(self, follow_symlinks: Any = True) -> Any:
        return False

    def is_symlink(self) -> Any:
        return False

    def inode(self) -> Any:
        return realos.stat(self._shadow).st_ino

    def __fspath__(self) -> Any:
        return self.path

    def __repr__(self) -> Any:
        return "<DirEntry %r>" % self.name


class _GuardedScandir(object):
    def __init__(self, iterator: Any, real: Any) -> None:
        self._iterator, self._real = iterator, real

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        assert GUARD is not None  # made only while the guard is on
        while True:
            entry = next(self._iterator)
            child = os.path.join(self._real, entry.name)
            if GUARD.is_deleted(child):
                continue
            if GUARD.has_shadow(child) and _r_isfile(GUARD.shadow(child)):
                return _ShadowEntry(entry, GUARD.shadow(child))
            return entry

    def close(self) -> None:
        self._iterator.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def guarded_scandir(path: Any = ".") -> Any:
    if GUARD is None or not _is_path(path):
        return realos.scandir(path)
    real = _real_path(path)
    if GUARD.owns(real):
        return realos.scandir(path)
    if GUARD.is_deleted(real):
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    return _GuardedScandir(realos.scandir(path), real)


def _guard_pathlib_accessor(replacements: Any) -> None:
    """Python < 3.11: pathlib calls os functions it bound when it was imported."""
    import pathlib

    accessor = getattr(pathlib, "_NormalAccessor", None)
    if accessor is None:
        return
    for name, (original, replacement) in replacements.items():
        if getattr(accessor, name, None) in (original, replacement):
            setattr(accessor, name, staticmethod(replacement))
    if getattr(accessor, "open", None) is realos.open:  # 3.10: io.open
        accessor.open = staticmethod(guarded_open)


def install_file_guard(scratch: Any, created_log: Any, hooks: Any = None) -> Any:
    global GUARD
    GUARD = FileGuard(scratch, created_log)
    if hooks is not None:
        _guard_torch_serialization(hooks)
    when_imported("safetensors.torch", _guard_safetensors)
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
    return GUARD


def install(run: Run) -> None:
    run.guard = install_file_guard(run.config["scratch"], run.config["created_log"], run.hooks)
