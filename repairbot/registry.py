"""Discovers the pattern catalogue: every folder of ``patterns/`` with a ``pattern.py``.

The catalogue ships as ``repairbot.patterns`` (see pyproject.toml); from a plain checkout that
was never installed, the top-level ``patterns/`` folder is loaded under that name by path.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from repairbot.pattern import Pattern
from repairbot.types import BadInput


def _patterns_package() -> ModuleType:
    try:
        return importlib.import_module("repairbot.patterns")
    except ModuleNotFoundError:
        root = Path(__file__).resolve().parent.parent / "patterns"
        spec = importlib.util.spec_from_file_location(
            "repairbot.patterns", root / "__init__.py", submodule_search_locations=[str(root)]
        )
        if spec is None or spec.loader is None:
            raise
        package = importlib.util.module_from_spec(spec)
        sys.modules["repairbot.patterns"] = package
        spec.loader.exec_module(package)
        return package


def pattern_folder(pattern: Pattern | type[Pattern]) -> Path:
    """The folder a pattern lives in (its cases are beside it)."""
    return Path(inspect.getfile(type(pattern) if isinstance(pattern, Pattern) else pattern)).parent


def probe_file(pattern: Pattern | type[Pattern]) -> Path | None:
    """The pattern's own run-time probe (``probe.py`` beside ``pattern.py``), if it has one."""
    path = pattern_folder(pattern) / "probe.py"
    return path if path.is_file() else None


@functools.cache
def probe_files() -> tuple[Path, ...]:
    """The probe files of the whole catalogue, in pattern id order."""
    return tuple(path for path in map(probe_file, all_patterns()) if path is not None)


@functools.cache
def all_patterns() -> tuple[Pattern, ...]:
    """One instance of every pattern, in id order."""
    package = _patterns_package()
    found: list[Pattern] = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg or not any(
            (Path(folder) / info.name / "pattern.py").is_file() for folder in package.__path__
        ):
            continue  # a folder without pattern.py is not (yet) a pattern
        module = importlib.import_module(f"{package.__name__}.{info.name}.pattern")
        classes = [
            obj for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, Pattern) and obj is not Pattern
            and obj.__module__ == module.__name__
        ]
        if len(classes) != 1:
            raise RuntimeError(f"{module.__name__}: expected one Pattern class, found {len(classes)}")
        found.append(classes[0]())
    return tuple(sorted(found, key=lambda p: p.ID))


def select(
    patterns: Iterable[Pattern],
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> tuple[Pattern, ...]:
    """The patterns a run may use; BadInput for an unknown id."""
    patterns = tuple(patterns)
    known = {p.ID for p in patterns}
    include, exclude = set(include), set(exclude)
    unknown = sorted((include | exclude) - known)
    if unknown:
        raise BadInput(f"unknown pattern id: {', '.join(unknown)} (see `repairbot patterns`)")
    chosen = [
        p for p in patterns
        if (not include or p.ID in include) and p.ID not in exclude
    ]
    return tuple(chosen)
