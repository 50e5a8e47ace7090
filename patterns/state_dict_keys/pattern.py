"""state-dict-keys: a checkpoint whose keys are not the model's (a wrapper's prefix, renamed modules)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import Source, argument, source
from repairbot.codemod import string_literal
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Span

# The prefixes wrappers put before every key: DataParallel / DistributedDataParallel, torch.compile's
# OptimizedModule, a Lightning module holding the network as self.model; and their nestings.
_WRAPPERS = {"module.": "nn.DataParallel / DistributedDataParallel", "_orig_mod.": "torch.compile",
             "model.": "a LightningModule's self.model"}
PREFIXES = tuple(_WRAPPERS) + tuple(a + b for a in _WRAPPERS for b in _WRAPPERS if a != b)
# Keys of a whole training checkpoint saved around the state dict.
_CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model", "net", "optimizer", "optimizer_state_dict", "epoch")


def key_lists(message: str) -> tuple[list[str], list[str]]:
    """The missing and the unexpected keys a message lists (torch >= 0.4)."""
    def listed(title: str) -> list[str]:
        found = re.search(rf"{phrase(title)}\s+in\s+state_dict:\s*(?P<keys>(?:\"[^\"]*\"(?:,\s*)?)+)", message)
        return re.findall(r'"([^"]*)"', found["keys"]) if found else []

    return listed("Missing key(s)"), listed("Unexpected key(s)")


def common_prefix(missing: Sequence[str], unexpected: Sequence[str]) -> str | None:
    """The wrapper prefix that turns the unexpected keys exactly into the missing ones.

    BatchNorm's ``num_batches_tracked`` is never reported missing (torch fills it in for
    checkpoints older than 0.4.1), so the stripped keys may hold those beyond the missing ones.
    """
    if not missing or not unexpected:
        return None
    wanted = set(missing)
    for prefix in sorted(PREFIXES, key=len, reverse=True):
        if not all(k.startswith(prefix) for k in unexpected):
            continue
        stripped = {k[len(prefix):] for k in unexpected}
        if wanted <= stripped and all(k.endswith("num_batches_tracked") for k in stripped - wanted):
            return prefix
    return None


def by_module(keys: Sequence[str], limit: int = 6) -> str:
    """``fc (weight, bias); layer4.1.bn2 (weight, bias, running_mean)``: keys grouped by module."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        module, _, name = key.rpartition(".")
        groups.setdefault(module or "(top level)", []).append(name or key)
    parts = [f"{module} ({', '.join(names)})" for module, names in list(groups.items())[:limit]]
    if len(groups) > limit:
        parts.append(f"and {len(groups) - limit} more modules")
    return "; ".join(parts)


@dataclass(frozen=True)
class StripPrefix(Rewrite):
    """Wraps the state dict given to ``load_state_dict`` in a comprehension that strips the prefix."""

    expression: str  # the comprehension, as code

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        value = nodes.node(cst.BaseExpression)
        if not isinstance(nodes.parent(value), cst.Arg):
            raise EditError("the state dict is not an argument")
        return [Edit(value, cst.parse_expression(self.expression))]


class StateDictKeys(Pattern):
    """Strips the wrapper prefix off a checkpoint's keys where it is loaded.

    What it fixes:
        A state dict saved from a wrapped model and loaded into the bare one: every key
        carries ``module.`` (``nn.DataParallel``, ``DistributedDataParallel``), ``_orig_mod.``
        (``torch.compile``) or ``model.`` (a Lightning module holding the network as
        ``self.model``). The state dict given to ``load_state_dict`` becomes ``{k.removeprefix(
        "module."): v for k, v in state.items()}`` (on Python < 3.9, ``k[len("module."):] if
        k.startswith("module.") else k``), in the file's own quotes. Any other difference of
        keys is diagnosed with the missing and unexpected keys grouped by module.

    Why it fails:
        ``RuntimeError: Error(s) in loading state_dict for Net: Missing key(s) in state_dict:
        "conv1.weight", ... Unexpected key(s) in state_dict: "module.conv1.weight", ...``
        (torch >= 0.4; 0.3 raised ``KeyError: 'unexpected key "module.conv1.weight" in
        state_dict'`` or ``KeyError: 'missing keys in state_dict: ...'``). A wrapper saves
        its own state dict, in which the real model is a submodule; loading matches keys by
        name and refuses when one is missing or left over.

    Example:
        ``model.load_state_dict(torch.load("best.pth"))`` on a checkpoint written by
        ``torch.save(nn.DataParallel(net).state_dict(), ...)`` becomes
        ``model.load_state_dict({k.removeprefix("module."): v for k, v in
        torch.load("best.pth").items()})``.

    Fix safety:
        Safe: the fix is made only when removing the one prefix turns the unexpected keys
        exactly into the missing ones, so every tensor lands where it was saved from, and the
        rerun verifies the load (a shape difference then shows as its own failure).

    Not handled:
        Keys that differ otherwise (renamed modules, a head added or removed, a whole training
        checkpoint given instead of its ``["state_dict"]``, a wrapped model loading a bare
        checkpoint): diagnosed with the lists, never edited; a load through a library's own
        loader; the 0.3 ``KeyError`` forms (one key only: diagnosed).
    """

    ID = "state-dict-keys"
    TITLE = "Checkpoint keys do not match the model (wrapper prefix)"
    TAGS = frozenset({"checkpoint"})
    APPLICABILITY = Applicability.SAFE
    BATCH_INVARIANT = True
    EVIDENCE = frozenset({"environment"})
    SIGNATURES = (
        signature("RuntimeError", r"Error\(s\) in loading state_dict for (?P<cls>\w+):.*"
                  + r"(?:" + phrase("Missing key(s) in state_dict") + "|" + phrase("Unexpected key(s) in state_dict") + ")"),
        signature("KeyError", r"unexpected key \\?[\"'](?P<key>[^\"'\\]+)\\?[\"'] in state_dict"),
        signature("KeyError", r"missing keys in state_dict"),
    )
    REWRITES = (StripPrefix,)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        missing, unexpected = key_lists(failure.message)
        if failure.exc_type.endswith("KeyError"):
            key = match.groupdict().get("key")
            hint = ""
            if key:
                prefix = next((p for p in sorted(PREFIXES, key=len, reverse=True) if key.startswith(p)), None)
                hint = f" ({prefix!r} is the prefix {_WRAPPERS.get(prefix, 'a wrapper')} adds)" if prefix else ""
            return self.decline(
                f"the checkpoint's keys are not the model's (torch < 0.4 names only one: {key or 'missing keys'}){hint}",
                diagnosis=self.remedy_text(None),
                at=frame,
            )
        prefix = common_prefix(missing, unexpected)
        if prefix is None:
            return self.decline(self._difference(missing, unexpected), diagnosis=self.remedy_text(missing, unexpected), at=frame)
        if frame is None:
            return self.decline("no frame of the project's own code loads the state dict")
        src = source(sources, frame.file)
        call = src.call_on_line(frame.line, "load_state_dict") if src else None
        if src is None or call is None:
            return self.decline(
                f"every key carries the prefix {prefix!r}, but the failing line does not call load_state_dict itself",
                diagnosis=_strip_advice(prefix), at=frame,
            )
        state = argument(call, 0, "state_dict")
        if state is None or state.star:
            return self.decline("the state dict is not passed to load_state_dict as a plain argument",
                                diagnosis=_strip_advice(prefix), at=frame)
        if isinstance(state.value, cst.DictComp):
            return self.decline("the load call already rewrites the checkpoint's keys with a comprehension",
                                diagnosis=_strip_advice(prefix), at=frame)
        expression = _stripped(src, state.value, prefix, _python(evidence))
        span = src.positions[state.value]
        old = src.code(state.value)
        return Site(
            pattern=self.ID,
            file=str(src.path),
            span=Span(span.line, span.col, span.end_line, span.end_col),
            rewrite=StripPrefix(expression),
            summary=f"Stripped the {prefix!r} prefix ({_WRAPPERS.get(prefix, ' + '.join(_split(prefix)))}) "
                    f"off the checkpoint's keys: load_state_dict({old}) now gets {expression}",
            applicability=self.APPLICABILITY,
            evidence={"prefix": prefix, "keys": len(missing), "missing": missing[:20], "unexpected": unexpected[:20]},
            evidence_text=(
                f"all {len(unexpected)} unexpected keys are the {len(missing)} missing ones with {prefix!r} in "
                f"front ({unexpected[0]!r} for {missing[0]!r})"
            ),
        )

    def _difference(self, missing: Sequence[str], unexpected: Sequence[str]) -> str:
        parts = []
        if missing:
            parts.append(f"missing from the checkpoint: {by_module(missing)}")
        if unexpected:
            parts.append(f"in the checkpoint but not the model: {by_module(unexpected)}")
        return "the checkpoint's keys are not the model's; " + "; ".join(parts or ["no keys listed"])

    def remedy_text(self, missing: Sequence[str] | None, unexpected: Sequence[str] = ()) -> str:
        missing = missing or []
        if set(unexpected) & set(_CHECKPOINT_KEYS) and missing:
            held = next(k for k in unexpected if k in _CHECKPOINT_KEYS[:4]) if set(unexpected) & set(_CHECKPOINT_KEYS[:4]) else None
            where = f'checkpoint["{held}"]' if held else "the state dict stored inside it"
            return (f"The file is a whole training checkpoint (keys {', '.join(unexpected[:5])}); give "
                    f"load_state_dict {where}, not the checkpoint itself.")
        wrapped = [p for p in PREFIXES if missing and all(k.startswith(p) for k in missing)]
        if wrapped and {k[len(wrapped[0]):] for k in missing} == set(unexpected):
            return (f"The model is wrapped ({_WRAPPERS.get(wrapped[0], wrapped[0])}) and the checkpoint is not: "
                    f"load into the inner model (model.{wrapped[0].rstrip('.')}.load_state_dict(...)) or load "
                    "before wrapping.")
        return self.remedy()

    @classmethod
    def remedy(cls) -> str:
        return (
            "Make the checkpoint's keys the model's: strip a wrapper's prefix (module. from "
            "DataParallel/DDP, _orig_mod. from torch.compile, model. from Lightning) with {k.removeprefix(...): "
            "v for k, v in state.items()}, give a training checkpoint's ['state_dict'], or build the model "
            "the checkpoint was saved from (renamed or missing modules); keep strict loading so that no "
            "layer is silently left untrained."
        )


def _strip_advice(prefix: str) -> str:
    return f"Strip the prefix where the state dict is loaded: {{k.removeprefix({prefix!r}): v for k, v in state.items()}}."


def _split(prefix: str) -> list[str]:
    return [_WRAPPERS.get(part + ".", part) for part in prefix.rstrip(".").split(".")]


def _python(evidence: Evidence | None) -> tuple[int, int]:
    version = (evidence.environment.python if evidence else None) or "3.9"
    numbers = [int(v) for v in re.findall(r"\d+", version)[:2]]
    return (numbers[0], numbers[1]) if len(numbers) == 2 else (3, 9)


def _stripped(src: Source, value: cst.BaseExpression, prefix: str, python: tuple[int, int]) -> str:
    """The comprehension, in the file's own quotes, for the target interpreter."""
    literal = string_literal(src.module, prefix)
    inner = src.module.code_for_node(value)
    if not isinstance(value, cst.Name | cst.Attribute | cst.Call | cst.Subscript) and not getattr(value, "lpar", None):
        inner = f"({inner})"
    key = f"k.removeprefix({literal})" if python >= (3, 9) else f"k[len({literal}):] if k.startswith({literal}) else k"
    if python < (3, 9):
        key = f"({key})"
    return f"{{{key}: v for k, v in {inner}.items()}}"


