"""The overlay: candidate fixes served from memory, and every user module compiled with its
loops instrumented (see loops.py)."""

import importlib.machinery
import importlib.util
import linecache
import os
import sys
from typing import Any

from . import realos
from .frames import OWNERSHIP


class OverlayLoader:
    """Loads a user module from overlay bytes (or its file) with its loops instrumented."""

    def __init__(self, fullname: Any, path: Any, source: Any, loops: Any) -> None:
        self.name = fullname
        self.loops = loops
        self.path = path
        self.source = source  # None: read the file when the module runs

    def create_module(self, spec: Any) -> None:
        return None

    def _source(self) -> Any:
        if self.source is None:
            with realos.open(self.path, "rb") as handle:
                self.source = handle.read()
        return self.source

    def get_code(self, fullname: Any) -> Any:
        return self.loops.compile(self._source(), self.path)

    def exec_module(self, module: Any) -> None:
        module.__file__ = self.path
        exec(self.get_code(self.name), module.__dict__)

    def get_source(self, fullname: Any) -> Any:
        return importlib.util.decode_source(self._source())

    def get_filename(self, fullname: Any) -> Any:
        return self.path

    def is_package(self, fullname: Any) -> Any:
        return os.path.basename(self.path) == "__init__.py"


class OverlayFinder:
    """A meta path finder that swaps the loader of the user's modules (overlaid or not)."""

    def __init__(self, overlay: Any, loops: Any) -> None:
        self.overlay = overlay
        self.loops = loops

    def find_spec(self, fullname: Any, path: Any, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin:
            return None
        origin = os.path.abspath(spec.origin)
        if origin not in self.overlay and not (origin.endswith(".py") and OWNERSHIP.is_user_file(origin)):
            return None
        spec.loader = OverlayLoader(  # type: ignore[assignment]
            fullname, origin, self.overlay.get(origin), self.loops)
        spec.cached = None
        return spec

    def invalidate_caches(self) -> None:
        pass


def decode_source(data: Any) -> Any:
    return importlib.util.decode_source(data)


def install_overlay(overlay: Any, loops: Any) -> None:
    for path, data in overlay.items():
        text = decode_source(data)
        lines = text.splitlines(True)
        # mtime None: linecache keeps the overlay's lines and never rereads the disk
        linecache.cache[path] = (len(text), None, lines, path)
    sys.meta_path.insert(0, OverlayFinder(overlay, loops))
