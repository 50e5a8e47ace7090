"""Which files ``repairbot lint PATH...`` checks.

A folder is searched for ``*.py`` files and Jupyter notebooks (``*.ipynb``), leaving out what ``.gitignore`` files ignore (those in
the folder and below it, and those of its parent folders up to the repository's top, plus
``.git/info/exclude``), the usual tool and environment folders (``.git``, ``.venv``,
``site-packages``, ``node_modules``...) below it, and what ``exclude`` lists in the
``[tool.repairbot]`` table of the nearest ``pyproject.toml``. A path named on the command line
is checked whatever its name, as ruff does: the exclusions (``exclude``, ``.gitignore``, the
default folders) decide what a folder's search finds, never what was named, unless
``force_exclude`` (``--force-exclude``, what the pre-commit hooks pass, since pre-commit names
every staged file) applies them to the named paths too.

The same table's ``select``, ``ignore`` and ``per-file-ignores`` (a table of glob to rule
selectors) choose the rules of each file (``Config.rules_for``, ``repairbot.lint.selection``);
``repairbot lint`` and ``repairbot server`` both read it here.

Patterns, in ``.gitignore`` and ``exclude`` alike, follow gitignore(5): ``*``, ``?``,
``[...]``, ``**``, a leading ``/`` or an inner ``/`` anchoring to the file's folder, a trailing
``/`` for folders only, ``!`` to re-include.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from repairbot.lint.selection import Layer, T, resolve, unknown
from repairbot.types import BadInput

if TYPE_CHECKING:
    from repairbot.lint.rule import LintRule

DEFAULT_EXCLUDES = frozenset({
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
    "__pypackages__", "__pycache__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
})


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _translate(glob: str) -> str:
    """A gitignore glob (without its anchoring slash) as a regex body over ``/``-paths."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            if glob.startswith("**", i) and (i == 0 or glob[i - 1] == "/"):
                if glob[i + 2:i + 3] == "/":
                    out.append("(?:.*/)?")  # `**/`: zero or more folders
                    i += 3
                    continue
                if i + 2 == len(glob):
                    out.append(".*")  # a trailing `/**`: everything inside
                    i += 2
                    continue
            while glob.startswith("*", i + 1):
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = glob[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif char == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def compile_pattern(line: str) -> _Pattern | None:
    """One line of a .gitignore (None for a blank line or a comment)."""
    line = line.rstrip("\n").rstrip("\r")
    if not line or line.startswith("#"):
        return None
    # trailing spaces go unless escaped
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "
    line = stripped
    negate = line.startswith("!")
    if negate or line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    body = _translate(line.lstrip("/"))
    regex = f"^{body}$" if anchored else f"^(?:.*/)?{body}$"
    return _Pattern(re.compile(regex, re.DOTALL), negate, dir_only)


@dataclass(frozen=True)
class IgnoreFile:
    """The patterns of one ignore file, relative to its folder."""

    base: Path
    patterns: tuple[_Pattern, ...]

    def decide(self, path: Path, is_dir: bool) -> bool | None:
        """True ignored, False re-included, None: no pattern speaks of it."""
        try:
            relative = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        verdict = None
        for pattern in self.patterns:
            if pattern.dir_only and not is_dir:
                continue
            if pattern.regex.match(relative):
                verdict = not pattern.negate
        return verdict


def ignore_file(base: Path, lines: Iterable[str]) -> IgnoreFile:
    return IgnoreFile(base, tuple(p for p in map(compile_pattern, lines) if p is not None))


def _read_ignore(path: Path) -> IgnoreFile | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = ignore_file(path.parent, text.splitlines())
    return found if found.patterns else None


def _ignored(chain: Sequence[IgnoreFile], path: Path, is_dir: bool) -> bool:
    verdict = None
    for ignore in chain:  # outermost first: a deeper file has the last word
        decided = ignore.decide(path, is_dir)
        if decided is not None:
            verdict = decided
    return bool(verdict)


def _repository_root(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _outer_ignores(folder: Path) -> list[IgnoreFile]:
    """The ignore files that speak of a folder's contents from above it, outermost first."""
    root = _repository_root(folder)
    if root is None:
        return []
    chain: list[IgnoreFile] = []
    info = _read_ignore(root / ".git" / "info" / "exclude")
    if info is not None:
        chain.append(IgnoreFile(root, info.patterns))
    parents = [folder, *folder.parents]
    for candidate in reversed(parents[1:parents.index(root) + 1] if root != folder else []):
        found = _read_ignore(candidate / ".gitignore")
        if found is not None:
            chain.append(found)
    return chain


@dataclass(frozen=True)
class PerFileIgnore:
    glob: str
    pattern: _Pattern
    selectors: tuple[str, ...]


@dataclass(frozen=True)
class Config:
    """``[tool.repairbot]`` of a pyproject.toml."""

    root: Path
    exclude: IgnoreFile | None
    rules: Layer = field(default_factory=Layer)  # select / ignore
    per_file_ignores: tuple[PerFileIgnore, ...] = ()
    source: str = "pyproject.toml"  # the file it was read from, for messages

    def ignored_for(self, path: Path) -> tuple[str, ...]:
        """The selectors ``per-file-ignores`` turns off for ``path``."""
        try:
            relative = path.relative_to(self.root).as_posix()
        except ValueError:
            return ()
        return tuple(s for entry in self.per_file_ignores if entry.pattern.regex.match(relative) for s in entry.selectors)

    def rules_for(self, path: Path, rules: Sequence[T], override: Layer | None = None) -> tuple[T, ...]:
        """The rules that lint ``path``: this table's choice, then ``override`` (the command
        line's or the editor's), less the file's per-file-ignores."""
        return resolve(rules, (self.rules, override or Layer()), self.ignored_for(path))

    def problems(self, rules: Sequence[type[LintRule]]) -> list[str]:
        """One line for each selector of the table that names no rule."""
        ids = [rule.ID for rule in rules]
        found = [f"{self.source}: [tool.repairbot] select/ignore: {s}" for s in unknown(self.rules, ids)]
        for entry in self.per_file_ignores:
            found += [f'{self.source}: [tool.repairbot.per-file-ignores] "{entry.glob}": {s}'
                      for s in unknown(Layer(ignore=entry.selectors), ids)]
        return [f"{line} is not a lint rule id or prefix (see docs/lint-rules.md)" for line in found]

    def excludes(self, path: Path, is_dir: bool, below: Path | None = None) -> bool:
        """Whether ``exclude`` covers the path or a folder above it (below the config's root,
        and below ``below``: a folder named on the command line is searched even if excluded)."""
        if self.exclude is None:
            return False
        try:
            relative = path.relative_to(self.root)
        except ValueError:
            return False
        current = self.root
        parts = relative.parts
        for index, part in enumerate(parts):
            current = current / part
            last = index == len(parts) - 1
            if below is not None and not (last or below in current.parents):
                continue
            if _ignored([self.exclude], current, is_dir=is_dir if last else True):
                return True
        return False


@functools.cache
def config_for(folder: Path) -> Config:
    """The configuration of the nearest pyproject.toml at or above ``folder``."""
    for candidate in (folder, *folder.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            return _read_config(pyproject)
    return Config(folder, None)


def _read_config(pyproject: Path) -> Config:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise BadInput(f"{pyproject}: cannot read it: {error}") from None
    table = data.get("tool", {}).get("repairbot", {})
    table = table if isinstance(table, dict) else {}
    exclude = _strings(table, "exclude", pyproject) or ()
    select = _strings(table, "select", pyproject)
    ignore = _strings(table, "ignore", pyproject) or ()
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise BadInput(f"{pyproject}: [tool.repairbot] per-file-ignores must be a table of glob = [rule ids]")
    entries = []
    for glob in per_file:
        pattern = compile_pattern(glob)
        listed = _strings(per_file, glob, pyproject, "[tool.repairbot.per-file-ignores] ")
        if pattern is not None and listed:
            entries.append(PerFileIgnore(glob, pattern, listed))
    return Config(
        pyproject.parent, ignore_file(pyproject.parent, exclude) if exclude else None,
        Layer(select, ignore), tuple(entries), str(pyproject),
    )


def _strings(table: dict[str, object], key: str, pyproject: Path, where: str = "[tool.repairbot] ") -> tuple[str, ...] | None:
    """A list of strings of the table (None where absent); BadInput for anything else."""
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadInput(f"{pyproject}: {where}{key} must be a list of strings")
    return tuple(value)


def display_path(path: Path, cwd: Path) -> str:
    """A path as findings show it: relative to the working directory when inside it."""
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return path.as_posix()


def _walk(folder: Path, chain: list[IgnoreFile], config: Config, named: Path) -> Iterator[Path]:
    if folder != config.root and (folder / "pyproject.toml").is_file():
        config = config_for(folder)  # a nested project has its own exclude list
    own = _read_ignore(folder / ".gitignore")
    if own is not None:
        chain = [*chain, own]
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        path = folder / entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file()
        except OSError:
            continue
        if is_dir:
            if entry.name in DEFAULT_EXCLUDES or _ignored(chain, path, True) or config.excludes(path, True, named):
                continue
            yield from _walk(path, chain, config, named)
        elif is_file and entry.name.endswith((".py", ".ipynb")):
            if _ignored(chain, path, False) or config.excludes(path, False, named):
                continue
            yield path


def _named_path_excluded(path: Path, is_dir: bool, cwd: Path) -> bool:
    """``--force-exclude``: whether a path named on the command line is one that a search of
    the folders above it would leave out: ``exclude`` covers it, or a ``.gitignore`` or a default
    folder name (``.venv``, ``build``...) covers it or a folder above it, below the repository's
    top (below the working directory outside a repository)."""
    if config_for(path.parent).excludes(path, is_dir):
        return True
    root = _repository_root(path.parent)
    top = root or cwd
    current, current_is_dir = path, is_dir
    while current != top and top in current.parents:
        if current_is_dir and current.name in DEFAULT_EXCLUDES:
            return True
        if root is not None and _ignored(_outer_ignores(current), current, current_is_dir):
            return True
        current, current_is_dir = current.parent, True
    return False


def discover(arguments: Sequence[Path], cwd: Path, force_exclude: bool = False) -> list[tuple[Path, str]]:
    """The files to lint, each with the path findings show; BadInput for a path that is not there."""
    found: dict[Path, str] = {}
    for argument in arguments:
        path = argument if argument.is_absolute() else cwd / argument
        path = Path(os.path.normpath(path))
        if not path.exists():
            raise BadInput(f"{argument}: no such file or directory")
        if force_exclude and _named_path_excluded(path, path.is_dir(), cwd):
            continue
        if path.is_dir():
            for file in _walk(path, _outer_ignores(path), config_for(path), path):
                found.setdefault(file, display_path(file, cwd))
        else:
            found.setdefault(path, display_path(path, cwd))
    return sorted(found.items(), key=lambda item: item[1])
