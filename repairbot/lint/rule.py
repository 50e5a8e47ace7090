"""The lint rule authoring API: one class per silent bug, its examples beside it (Fixit's shape).

A rule is a ``LintRule`` subclass in ``patterns/<folder>/lint.py`` (a folder may hold a runtime
pattern, lint rules, or both), a unit of the catalogue (``repairbot.unit``). Its docstring is its
user documentation, in fixed sections (``What it finds``, ``Why it matters``, ``Fix safety``,
``Not handled``; ``Differs from TorchFix`` where it applies). It declares:

- ``ID`` (kebab-case, stable), ``TITLE`` (one line for the catalogue), ``MESSAGE`` (the default
  message of a finding: it names the problem);
- ``SEVERITY``: how sure and how bad a finding is (``Severity``; default ``WARNING``), shown
  as the editor's diagnostic severity and SARIF's level;
- ``APPLICABILITY``: the applicability of its fixes (``SAFE`` / ``UNSAFE``), ``NONE`` (the
  default) for a rule that only reports; ``report(..., applicability=...)`` overrides it per finding;
- ``REQUIRES``: byte strings a file must contain for the rule to possibly fire (each entry, or
  any of a tuple entry), checked before the file is parsed;
- ``VALID`` / ``INVALID``: examples, run by one parametrised test (``tests/test_lint_rules.py``);
- ``SCOPE``: what its findings depend on (``Scope``; default ``MODULE``). ``STATEMENT`` lets the
  server (``repairbot.lint.incremental``) re-run the rule on the top-level statements an edit
  touched alone and keep its reports of the others: the rule has no ``leave_Module``, reports
  only inside statements, and reads nothing of the file beyond the statement being walked but
  ``context.imports``, ``path``, ``package``, ``string_literal`` and ``lightning_hook``
  (``tests/test_incremental.py`` checks every such rule on the tests' real files);
- ``visit_<Node>`` / ``leave_<Node>`` methods named as LibCST's visitors name them.

The engine parses each file once and walks it once for all the rules, calling every rule's
handlers for each node (their return values are ignored: a rule cannot prune the walk of the
others). Rules read names through ``self.context.imports`` (what a name stands for; a fix writes names
through ``analysis.torch_reference``, which sees only the imports bound where the code runs)
and ancestors through ``self.context.stack``; no LibCST metadata is computed while rules run (positions are resolved
afterwards, only for files with findings). A rule reports nodes, with an optional replacement
node: the engine applies replacements (``--fix``), never the rule.
"""

from __future__ import annotations

import enum
import inspect
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import libcst as cst

from repairbot.analysis import ImportTable, dotted_name, is_torch_name
from repairbot.cst_walk import descendants
from repairbot.edits import Replacement
from repairbot.frameworks import lightning_classes, lightning_hook
from repairbot.types import Applicability
from repairbot.unit import DocFormat, Kind, Unit


class Severity(enum.StrEnum):
    """A rule's severity: ``ERROR`` where the code certainly fails when it runs, ``WARNING`` for
    a silent bug (wrong results, memory that grows, a crash on some machines), ``INFORMATION``
    for accuracy, speed and code that will break in a later release, ``HINT`` for a
    deprecated spelling with the same meaning today."""

    ERROR = "error"
    WARNING = "warning"
    INFORMATION = "information"
    HINT = "hint"

    @property
    def sarif_level(self) -> str:
        return {"error": "error", "warning": "warning"}.get(self.value, "note")


class Scope(enum.Enum):
    """What a rule's reports in one top-level statement depend on: the whole module, or that
    statement and the file's imports alone (see the module docstring)."""

    MODULE = "module"
    STATEMENT = "statement"


@dataclass(frozen=True)
class Valid:
    """Code the rule must not report (dedented; a leading newline is dropped)."""

    code: str

    @property
    def source(self) -> str:
        return example_source(self.code)


@dataclass(frozen=True)
class Invalid:
    """Code with exactly one finding of the rule, at ``line``:``column`` (1-based).

    ``expected_fix`` is the whole text after this finding's fix alone (None: the rule reports
    it without a fix); ``fix`` is the applicability the finding must carry.
    """

    code: str
    line: int
    column: int
    expected_fix: str | None = None
    fix: Applicability = Applicability.NONE
    message: str | None = None  # a substring the finding's message must contain

    @property
    def source(self) -> str:
        return example_source(self.code)

    @property
    def fixed_source(self) -> str | None:
        return None if self.expected_fix is None else example_source(self.expected_fix)


def example_source(code: str) -> str:
    """An example's code as a file holds it: dedented, without the first empty line."""
    text = textwrap.dedent(code)
    return text[1:] if text.startswith("\n") else text


@dataclass
class Report:
    """What a rule reported: a node, a message, an optional fix (applied by the engine)."""

    rule: str
    node: cst.CSTNode
    message: str
    replacement: Replacement | None = None
    # the node the replacement stands for (default: ``node``); a fix may rewrite a wider node
    # (the loop body that receives a statement) than the one the finding points at
    target: cst.CSTNode | None = None
    applicability: Applicability = Applicability.NONE
    # more (node, replacement) pairs that belong to the same fix and are applied with it or not
    # at all (an import renamed with every use of the name it binds)
    also: tuple[tuple[cst.CSTNode, Replacement], ...] = ()
    # the statements the walk was in when the rule reported, from the top level down through
    # classes and functions (empty: unknown, e.g. a report from leave_Module): positions are
    # then computed for the innermost one alone
    statements: tuple[cst.CSTNode, ...] = ()
    severity: Severity = Severity.WARNING
    # the statement paths of the report's node and of the nodes its fix swaps, where the walk
    # met them (set by the engine)
    held: tuple[tuple[cst.CSTNode, ...], ...] = ()

    def replacements(self) -> dict[cst.CSTNode, Replacement]:
        """Every node this finding's fix swaps, with its replacement."""
        if self.replacement is None:
            return {}
        return {self.target or self.node: self.replacement, **dict(self.also)}

    @property
    def fix(self) -> Applicability:
        return Applicability.NONE if self.replacement is None else self.applicability


@dataclass
class FileContext:
    """What every rule may read about the file being linted."""

    path: Path
    module: cst.Module
    imports: ImportTable
    package: str | None  # the top-level package the file belongs to (None for a script)
    # The nodes from the module down to the one being visited (it included), during the walk.
    stack: list[cst.CSTNode] = field(default_factory=list)
    _quote: str | None = None
    _lightning: dict[str, cst.ClassDef] | None = None

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The full dotted name an expression refers to through the file's imports."""
        return self.imports.qualify(node)

    def is_torch(self, node: cst.BaseExpression, *names: str) -> bool:
        """Whether ``node`` names one of ``names`` (``torch.nn.Linear``...) under any import alias."""
        return is_torch_name(self.qualify(node), *names)

    def parent(self) -> cst.CSTNode | None:
        """The parent of the node being visited."""
        return self.stack[-2] if len(self.stack) >= 2 else None

    def ancestors(self) -> tuple[cst.CSTNode, ...]:
        """The ancestors of the node being visited, innermost first (a snapshot)."""
        return tuple(reversed(self.stack[:-1]))

    def lightning_classes(self) -> dict[str, cst.ClassDef]:
        """The file's LightningModule classes by name (``repairbot.frameworks``, computed once)."""
        if self._lightning is None:
            self._lightning = lightning_classes(self.module, self.imports)
        return self._lightning

    def lightning_hook(self, *hooks: str) -> cst.ClassDef | None:
        """The LightningModule whose method (one of ``hooks``; any when none) the walk is in."""
        classes = self.lightning_classes()
        return lightning_hook(self.stack, classes, *hooks) if classes else None

    def code(self, node: cst.CSTNode) -> str:
        """A node's code on one line (for messages)."""
        return " ".join(self.module.code_for_node(node).split())

    def dotted(self, node: cst.BaseExpression) -> str | None:
        return dotted_name(node)

    def string_literal(self, text: str) -> str:
        """``text`` quoted as the file mostly quotes its strings (``codemod.string_literal``,
        counted with the fast walk and once per file: LibCST's matchers take seconds on a big file)."""
        if self._quote is None:
            self._quote = majority_quote(*quote_counts(self.module))
        return f"{self._quote}{text}{self._quote}"


def quote_counts(node: cst.CSTNode) -> tuple[int, int]:
    """How many single- and double-quoted simple strings a tree holds."""
    single = double = 0
    for item in descendants(node):
        if type(item) is cst.SimpleString:
            quote = item.quote
            single += quote == "'"
            double += quote == '"'
    return single, double


def majority_quote(single: int, double: int) -> str:
    """The quote a file mostly uses (double where they tie)."""
    return "'" if single > double else '"'


class LintRule(Unit):
    """Base class of every lint rule; see the module docstring."""

    KIND: ClassVar[Kind] = Kind(
        name="lint rule",
        file="lint.py",
        doc=DocFormat(
            required=("What it finds", "Why it matters", "Fix safety", "Not handled"),
            # where a rule re-implements a TorchFix check: each deliberate difference from
            # TorchFix's own test fixtures ("differs from TorchFix: ... because ...")
            optional=("Differs from TorchFix",),
        ),
        one_per_file=False,
        listed_in="docs/lint-rules.md",
    )
    MESSAGE: ClassVar[str]
    APPLICABILITY: ClassVar[Applicability] = Applicability.NONE
    SEVERITY: ClassVar[Severity] = Severity.WARNING
    REQUIRES: ClassVar[tuple[bytes | tuple[bytes, ...], ...]] = ()
    SCOPE: ClassVar[Scope] = Scope.MODULE
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.reports: list[Report] = []

    @classmethod
    def applies(cls, data: bytes, package: str | None) -> bool:
        """Whether a file with these bytes could hold a finding (checked before parsing)."""
        return all(
            any(word in data for word in entry) if isinstance(entry, tuple) else entry in data
            for entry in cls.REQUIRES
        )

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        replacement: Replacement | None = None,
        target: cst.CSTNode | None = None,
        applicability: Applicability | None = None,
        also: tuple[tuple[cst.CSTNode, Replacement], ...] = (),
    ) -> None:
        """A finding at ``node``; with ``replacement``, a fix that swaps ``target`` (default
        ``node``) for it, and the nodes of ``also`` for theirs, labelled ``applicability``
        (default: the rule's)."""
        label = self.APPLICABILITY if applicability is None else applicability
        if replacement is not None and label not in (Applicability.SAFE, Applicability.UNSAFE):
            raise TypeError(f"{self.ID}: a fix needs an applicability, safe or unsafe")
        stack = self.context.stack
        self.reports.append(
            Report(self.ID, node, message or self.MESSAGE, replacement, target,
                   label if replacement is not None else Applicability.NONE,
                   also if replacement is not None else (), statement_path(stack), self.SEVERITY)
        )

    @classmethod
    def fix_kinds(cls) -> str:
        """What its findings may carry, for the catalogue: safe, unsafe, safe/unsafe, none."""
        kinds = {case.fix for case in cls.INVALID}
        ordered = [kind for kind in (Applicability.SAFE, Applicability.UNSAFE) if kind in kinds]
        if not ordered:
            return Applicability.NONE.value
        return "/".join(ordered) + (f" (some findings: {Applicability.NONE})" if Applicability.NONE in kinds else "")


def statement_path(stack: Sequence[cst.CSTNode]) -> tuple[cst.CSTNode, ...]:
    """The statements on the way to the visited node: the top-level one, then, inside its
    indented body (a class, a function, a loop, an ``if``, ``with`` or ``try``: not an
    ``else``), the statement of that body that holds it, and so on."""
    path: list[cst.CSTNode] = []
    index = 1
    while index < len(stack):
        statement = stack[index]
        path.append(statement)
        block = getattr(statement, "body", None)
        if not (isinstance(statement, cst.BaseCompoundStatement) and isinstance(block, cst.IndentedBlock)
                and index + 2 < len(stack) and stack[index + 1] is block):
            break
        index += 2
    return tuple(path)


_HANDLER = re.compile(r"^(visit|leave)_([A-Z]\w*)$")


def handlers(rule: type[LintRule]) -> list[tuple[str, type[cst.CSTNode], str]]:
    """The rule's ``visit_X``/``leave_X`` methods as (kind, node class, method name)."""
    found = []
    for name, _ in inspect.getmembers(rule, inspect.isfunction):
        match = _HANDLER.match(name)
        if match is None:
            continue
        node_class = getattr(cst, match.group(2), None)
        if not (inspect.isclass(node_class) and issubclass(node_class, cst.CSTNode)):
            raise TypeError(f"{rule.__name__}.{name}: libcst has no node class {match.group(2)}")
        found.append((match.group(1), node_class, name))
    return found
