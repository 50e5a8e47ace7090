"""The unit authoring API: what every unit of the catalogue declares, its docstring format and
the one discovery of the units.

A unit is one documented class in a folder of ``patterns/``: a runtime pattern
(``pattern.py``, ``repairbot.pattern.Pattern``), a lint rule (``lint.py``,
``repairbot.lint.rule.LintRule``); a health check will be the third kind. Every unit declares
``ID`` (kebab-case, stable), ``TITLE`` (one line for the catalogue), ``APPLICABILITY`` (what its
fixes are: ``Applicability.NONE`` for a unit that only reports) and a docstring that is its user
documentation: a first paragraph, then sections under their titles (a title alone on its line,
optionally followed by a colon).

A kind is declared once, by its base class (``KIND = Kind(...)``): the file of a folder that
holds its units, its docstring sections (required, then optional), whether a file holds one
unit or several. A new kind needs nothing more to be discovered (``discover(Base)``) and one
entry in ``scripts/gen_docs.py`` for its catalogue page.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import ClassVar, Protocol, TypeVar, cast

from repairbot.types import Applicability, BadInput

PACKAGE = "repairbot.patterns"


@dataclass(frozen=True)
class DocFormat:
    """The sections of a kind's docstrings, in the order the catalogue prints them."""

    required: tuple[str, ...]
    # sections a unit has only where they apply
    optional: tuple[str, ...] = ()

    @property
    def titles(self) -> tuple[str, ...]:
        return self.required + self.optional

    @functools.cached_property
    def _title_line(self) -> re.Pattern[str]:
        return re.compile(rf"^({'|'.join(map(re.escape, self.titles))}):?\s*$", re.MULTILINE)

    def parse(self, doc: str) -> dict[str, str]:
        """A docstring's sections by title, the first paragraph under ``""``; a line that is
        not one of this format's titles is text of the section it is in."""
        text = inspect.cleandoc(doc)
        marks = list(self._title_line.finditer(text))
        sections = {"": text[: marks[0].start()].strip() if marks else text.strip()}
        for mark, following in zip(marks, [*marks[1:], None], strict=True):
            end = following.start() if following else len(text)
            sections[mark.group(1)] = textwrap.dedent(text[mark.end() : end]).strip()
        return sections

    def missing(self, sections: dict[str, str]) -> list[str]:
        """The required sections that are absent or empty."""
        return [title for title in self.required if not sections.get(title)]


@dataclass(frozen=True)
class Kind:
    """A kind of unit: where its units live and how they are documented."""

    name: str  # "pattern", "lint rule": in messages
    file: str  # the file of a folder that holds the units ("pattern.py")
    doc: DocFormat
    # True: such a file holds exactly one unit (a pattern is its folder); else one or more
    one_per_file: bool
    # where a user finds the ids, for the unknown-id error ("`repairbot patterns`")
    listed_in: str


class Unit:
    """Base of every unit's base class (``Pattern``, ``LintRule``); see the module docstring."""

    KIND: ClassVar[Kind]
    ID: ClassVar[str]
    TITLE: ClassVar[str]
    APPLICABILITY: ClassVar[Applicability]

    @classmethod
    def documentation(cls) -> dict[str, str]:
        """The docstring's sections by title (the first paragraph under ``""``)."""
        return cls.KIND.doc.parse(cls.__doc__ or "")

    @classmethod
    def undocumented(cls) -> list[str]:
        """The required docstring sections this unit lacks (empty: documented)."""
        return cls.KIND.doc.missing(cls.documentation())

    @classmethod
    def folder(cls) -> Path:
        """The folder the unit lives in (its cases and sibling units beside it)."""
        return Path(inspect.getfile(cls)).parent


U = TypeVar("U", bound=Unit)


def units_package() -> ModuleType:
    """The package of the unit folders: ``repairbot.patterns`` as installed (see pyproject.toml);
    from a plain checkout that was never installed, the top-level ``patterns/`` folder loaded
    under that name by path."""
    try:
        return importlib.import_module(PACKAGE)
    except ModuleNotFoundError:
        root = Path(__file__).resolve().parent.parent / "patterns"
        spec = importlib.util.spec_from_file_location(
            PACKAGE, root / "__init__.py", submodule_search_locations=[str(root)]
        )
        if spec is None or spec.loader is None:
            raise
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
        return package


@functools.cache
def folders() -> tuple[tuple[str, tuple[Path, ...]], ...]:
    """The walk: every unit folder of the package, by name, with the paths it may be at."""
    package = units_package()
    roots = [Path(root) for root in package.__path__]
    return tuple(
        (info.name, tuple(root / info.name for root in roots))
        for info in pkgutil.iter_modules(package.__path__) if info.ispkg
    )


def discover(base: type[U]) -> tuple[type[U], ...]:
    """Every unit of ``base``'s kind: the ``base`` subclasses defined in the kind's file of
    each folder, in id order. A folder without that file has no unit of the kind."""
    if base not in _discovered:
        _discovered[base] = _discover(base)
    return cast(tuple[type[U], ...], _discovered[base])


_discovered: dict[type[Unit], tuple[type[Unit], ...]] = {}


def _discover(base: type[Unit]) -> tuple[type[Unit], ...]:
    kind = base.KIND
    module_name = kind.file.removesuffix(".py")
    found: list[type[Unit]] = []
    for name, paths in folders():
        if not any((path / kind.file).is_file() for path in paths):
            continue
        module = importlib.import_module(f"{PACKAGE}.{name}.{module_name}")
        classes = [
            obj for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, base) and obj is not base
            and obj.__module__ == module.__name__
        ]
        if kind.one_per_file and len(classes) != 1:
            raise RuntimeError(f"{module.__name__}: expected one {kind.name} class, found {len(classes)}")
        if not classes:
            raise RuntimeError(f"{module.__name__}: no {kind.name} class")
        found.extend(classes)
    ids = [unit.ID for unit in found]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise RuntimeError(f"{kind.name} ids defined twice: {', '.join(twice)}")
    return tuple(sorted(found, key=lambda unit: unit.ID))


class Identified(Protocol):
    @property
    def ID(self) -> str: ...


T = TypeVar("T", bound=Identified)


def select(units: Iterable[T], include: Iterable[str], exclude: Iterable[str], kind: Kind) -> tuple[T, ...]:
    """The units a run uses (all of ``include``, or all; none of ``exclude``); BadInput for an
    id that is not one of them."""
    units = tuple(units)
    include, exclude = set(include), set(exclude)
    unknown = sorted((include | exclude) - {unit.ID for unit in units})
    if unknown:
        raise BadInput(f"unknown {kind.name} id: {', '.join(unknown)} (see {kind.listed_in})")
    return tuple(unit for unit in units if (not include or unit.ID in include) and unit.ID not in exclude)
