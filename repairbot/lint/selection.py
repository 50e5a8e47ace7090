"""Which rules apply to a file: ``select``/``ignore`` layers and ``per-file-ignores``, as ruff
resolves them.

A selector is a rule id (``missing-zero-grad``), a prefix of ids at a ``-`` boundary
(``missing`` selects ``missing-zero-grad`` and ``missing-train-eval-mode``), or ``ALL``. The
layers are read in order (the ``[tool.repairbot]`` table, then the command line or the editor's
settings): a layer with ``select`` starts the choice over, its ``ignore`` removes rules; within
a layer the more specific selector decides (``select = ["missing"]`` with
``ignore = ["missing-zero-grad"]`` drops that rule, the reverse keeps it), an ``ignore`` winning
a tie. ``per-file-ignores`` then removes rules from the files its globs match.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from repairbot.unit import Unit

ALL = "ALL"
T = TypeVar("T", bound=type[Unit])


@dataclass(frozen=True)
class Layer:
    """One source of a choice of rules; ``select`` None: this layer keeps the choice it gets."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    origin: str = ""  # where it was written, for the message of an unknown selector


def matches(selector: str, rule_id: str) -> bool:
    return selector == ALL or rule_id == selector or rule_id.startswith(selector + "-")


def _specificity(selector: str) -> int:
    return -1 if selector == ALL else len(selector)


def unknown(layer: Layer, ids: Iterable[str]) -> list[str]:
    """The layer's selectors that match no rule."""
    known = tuple(ids)
    return [s for s in (*(layer.select or ()), *layer.ignore) if not any(matches(s, i) for i in known)]


def _best(selectors: Sequence[str], rule_id: str) -> int | None:
    found = [_specificity(s) for s in selectors if matches(s, rule_id)]
    return max(found) if found else None


def resolve(rules: Sequence[T], layers: Iterable[Layer], ignored: Iterable[str] = ()) -> tuple[T, ...]:
    """The rules the layers choose, less those ``ignored`` selects (per-file-ignores); selectors
    that match no rule are passed over (check them with ``unknown``)."""
    chosen = {rule.ID for rule in rules}
    for layer in layers:
        for rule in rules:
            ignore = _best(layer.ignore, rule.ID)
            if layer.select is None:
                keep = rule.ID in chosen and ignore is None
            else:
                select = _best(layer.select, rule.ID)
                keep = select is not None and (ignore is None or ignore < select)
            if keep:
                chosen.add(rule.ID)
            else:
                chosen.discard(rule.ID)
    ignored = tuple(ignored)
    return tuple(rule for rule in rules if rule.ID in chosen and not any(matches(s, rule.ID) for s in ignored))
