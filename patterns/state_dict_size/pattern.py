"""state-dict-size: a checkpoint whose tensors have other shapes than the model built to load it."""

from __future__ import annotations

import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Source,
    argument,
    call_at,
    called_name,
    calls_on_line,
    last_binding,
    place,
    place_in,
    reads,
    recorded_local,
    resolve_site,
    source,
)
from repairbot.evidence import Evidence, LinearTrace
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

_SHAPE = r"torch\.Size\(\[(?P<{}>[\d,\s]*)\]\)"
# torch >= 1.0: one line per tensor, all in one "Error(s) in loading state_dict" message.
_MISMATCH = re.compile(
    r"size mismatch for (?P<param>[\w.]+): copying a param with shape "
    + _SHAPE.format("checkpoint") + r"\s+from checkpoint, the shape in current model is\s+" + _SHAPE.format("model")
)
# torch 0.4.1 to 1.0: "copying a param of ... where the shape is ... in current model".
_MISMATCH_041 = re.compile(
    r"size mismatch for (?P<param>[\w.]+): copying a param of " + _SHAPE.format("checkpoint")
    + r"\s+from checkpoint, where the shape is\s+" + _SHAPE.format("model") + r"\s+in current model"
)
# torch 0.3/0.4.0: one tensor per message.
_MISMATCH_04 = re.compile(
    r"While copying the parameter named \"?(?P<param>[\w.]+)\"?, whose dimensions in the model are\s+"
    + _SHAPE.format("model") + r"\s+and whose dimensions in the checkpoint are\s+" + _SHAPE.format("checkpoint")
)


@dataclass(frozen=True)
class Mismatch:
    param: str
    checkpoint: tuple[int, ...]
    model: tuple[int, ...]

    @property
    def module(self) -> str:
        return self.param.rpartition(".")[0] or self.param


def mismatches(message: str) -> list[Mismatch]:
    """Every tensor the message names, in its order."""
    found = []
    for regex in (_MISMATCH, _MISMATCH_041, _MISMATCH_04):
        for match in regex.finditer(message):
            found.append(Mismatch(match["param"], _ints(match["checkpoint"]), _ints(match["model"])))
    return found


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"\d+", text))


def _shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


class StateDictSize(Pattern):
    """Explains a checkpoint whose tensors do not have the shapes of the model loading them.

    What it fixes:
        Diagnoses (never edits) ``load_state_dict`` refusing a checkpoint because a layer of the
        model was built with another size than the one saved: a classifier head for 37
        classes loading a 10-class checkpoint, a vocabulary that grew, a width changed in the
        config since the checkpoint was written.

    Why it fails:
        ``RuntimeError: Error(s) in loading state_dict for Net: size mismatch for fc.weight:
        copying a param with shape torch.Size([10, 512]) from checkpoint, the shape in current
        model is torch.Size([37, 512]).`` (torch >= 1.0, one line per tensor; torch 0.4 raised
        ``While copying the parameter named fc.weight, whose dimensions in the model are
        torch.Size([37, 512]) and whose dimensions in the checkpoint are torch.Size([10,
        512])``). Loading copies tensors in place and never resizes a layer. The tracing run
        records the model's construction site and every ``nn.Linear``'s (size and site), which
        tells where the differing size was written and which argument carries it.

    Example:
        ``model = Net(num_classes=len(classes))`` with 37 classes, loading a checkpoint trained
        on 10: "The checkpoint and the model disagree on fc.weight: the checkpoint loaded at
        train.py:31 (torch.load(path)) has 10 ...; the model has 37 ..., written at model.py:12
        as out_features `num_classes`, given `len(classes)` at train.py:30 (classes bound at
        train.py:8)", and no change proposed.

    Fix safety:
        Never edited automatically, and no remedy is proposed: which side is right the run does
        not show (a fine-tuning run wants the new head, an evaluation run the checkpoint's size;
        the vocabulary, alphabet or class list the script builds may be what changed, or the
        checkpoint file), so the diagnosis names both sizes and where each is written: the
        line that loads the checkpoint, and the layer's argument with the call-site argument
        and binding it comes from. ``strict=False`` would silently leave the mismatched layers
        untrained.

    Not handled:
        The construction site of a layer other than ``nn.Linear`` (Conv, Embedding, Norm: the
        report names the module and the model's construction site); checkpoints loaded by a
        library's own loader outside the project.
    """

    ID = "state-dict-size"
    TITLE = "Checkpoint tensor shapes do not match the model"
    TAGS = frozenset({"checkpoint", "shape"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    BATCH_INVARIANT = True
    EVIDENCE = frozenset({"linears", "locals"})
    REMEDY = (
        "Find which side changed: the sizes the model is built with (the number of classes, the "
        "vocabulary or alphabet, the widths in the config) or the checkpoint file. Build the model "
        "as the checkpoint was trained when the checkpoint is the right one; to reuse it for a new "
        "task, remove the mismatched head's entries from the state dict before loading and load "
        "with strict=False, checking that the missing keys are exactly the head's; never turn "
        "strict off without looking at what it skips."
    )
    SIGNATURES = (
        signature("RuntimeError", _MISMATCH.pattern),
        signature("RuntimeError", _MISMATCH_041.pattern),
        signature("RuntimeError", _MISMATCH_04.pattern),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        frame = failure.user_frame
        found = mismatches(failure.message) or [Mismatch(match["param"], _ints(match["checkpoint"]), _ints(match["model"]))]
        modules: dict[str, list[Mismatch]] = {}
        for item in found:
            modules.setdefault(item.module, []).append(item)
        listed = "; ".join(
            f"{name}: " + ", ".join(
                f"{m.param.rpartition('.')[2] or m.param} checkpoint {_shape(m.checkpoint)} vs model {_shape(m.model)}"
                for m in items
            )
            for name, items in list(modules.items())[:6]
        )
        more = f" (and {len(modules) - 6} more modules)" if len(modules) > 6 else ""
        # The layer to trace back: a weight whose module also has a bias (an nn.Linear's pair,
        # not an embedding table of the same shape), else the first tensor named.
        paired = [m for m in found if m.param.endswith(".weight") and m.module + ".bias" in {n.param for n in found}]
        first = paired[0] if paired else found[0]
        origin, at = self._origin(first, evidence, sources, frame)
        checkpoint, model = _differing_values(first)
        loaded = _loaded_at(sources, frame)
        written = _model_written(first, evidence, sources)
        model_side = f"written at {written}" if written else (f"in the model built at {place(at)}" if at else "")
        facts = (f"the checkpoint{f' loaded at {loaded}' if loaded else ''} has {checkpoint}; "
                 f"the model has {model}" + (f", {model_side}" if model_side else ""))
        if len(modules) <= 2:
            diagnosis = f"The checkpoint and the model disagree on {first.param}: {facts}."
        else:
            diagnosis = (f"{len(modules)} modules differ, so the checkpoint was saved from a model built with other "
                         f"sizes; the first, {first.param}: {facts}.")
        diagnosis += (" Which side is right the run does not show (the model's sizes or the checkpoint file may be "
                      "the one that changed), so no change is proposed; loading with strict=False would leave "
                      "these layers untrained.")
        return self.decline(
            f"the checkpoint does not fit the model: {listed}{more}"
            + (f"; the model's size comes from {origin}" if origin else ""),
            diagnosis=diagnosis,
            at=at or frame,
        )

    def _origin(
        self, first: Mismatch, evidence: Evidence | None, sources: Sources, frame: Frame | None
    ) -> tuple[str, Frame | None]:
        """Where the model's differing size is written: the layer's call and its argument,
        then where the model was built; and the frame the remedy points at."""
        parts: list[str] = []
        at: Frame | None = None
        linear = _linear_for(first, evidence)
        if linear is not None and linear.site is not None:
            at = linear.site
            written = _size_argument(sources, linear, first)
            call = f"nn.{linear.type}({linear.in_features}, {linear.out_features}) at {place(linear.site)}"
            parts.append(f"{call}, whose {written}" if written else call)
        model_site = _model_site(first, evidence, sources, frame)
        if model_site is not None:
            built, code = model_site
            parts.append(f"the model built at {place(built)}" + (f" ({code})" if code else ""))
            at = at or built
        return "; ".join(parts), at


def _differing_values(item: Mismatch) -> tuple[str, str]:
    """The checkpoint's and the model's value of the differing dimensions, as text."""
    if len(item.checkpoint) != len(item.model):
        return _shape(item.checkpoint), _shape(item.model)
    dims = [i for i, (c, m) in enumerate(zip(item.checkpoint, item.model, strict=True)) if c != m]
    name = "dimension " + ", ".join(map(str, dims))
    return (f"{', '.join(str(item.checkpoint[i]) for i in dims)} ({name} of {_shape(item.checkpoint)})",
            f"{', '.join(str(item.model[i]) for i in dims)} ({_shape(item.model)})")


def _loaded_at(sources: Sources, frame: Frame | None) -> str | None:
    """Where the state dict given to the failing ``load_state_dict`` enters the script: the
    call's argument when it loads the file itself (``torch.load(path)``), else the last binding
    of the name it reads (``checkpoint = torch.load(path)``), as ``file:line (code)``."""
    src = source(sources, frame.file) if frame else None
    call = src.call_on_line(frame.line, "load_state_dict") if src and frame else None
    if src is None or frame is None or call is None or not call.args:
        return None
    given = call.args[0].value
    head = given
    while isinstance(head, cst.Subscript | cst.Attribute | cst.Call) and not _is_load(head):
        head = head.value if isinstance(head, cst.Subscript | cst.Attribute) else head.func
    if _is_load(head) or not isinstance(head, cst.Name):
        return f"{place(frame)} ({_short(src.code(given))})"
    event = last_binding(src, head.value, frame.line)
    if event is None or event.statement not in src.positions:
        return f"{place(frame)} ({_short(src.code(given))})"
    return f"{place_in(src.path, src.line(event.statement))} ({_short(src.code(event.statement))})"


def _is_load(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and called_name(node) in ("load", "load_state_dict_from_url", "load_file")


def _short(code: str) -> str:
    return code if len(code) <= 60 else code[:57] + "..."


def _model_written(item: Mismatch, evidence: Evidence | None, sources: Sources) -> str | None:
    """Where the model's differing size is written: the traced nn.Linear's argument, and the
    call-site argument that gave it (``len(classes)`` at train.py:7) when it is a parameter."""
    linear = _linear_for(item, evidence)
    if linear is None or linear.site is None:
        return None
    text = f"{place(linear.site)}"
    written = _size_argument(sources, linear, item)
    if written is None:
        return text
    name, _, code = written.partition(" is ")
    text += f" as {name} {code}"
    layer = evidence.layer_site(linear) if evidence else None
    # follow a parameter through the traced constructor calls (innermost first) to the outermost
    # argument that gave it: nOut <- nclass (CRNN's parameter) <- nclass at demo.py:21
    expr, step = code.strip("`"), None
    for passed in layer.chain if layer else ():
        if passed.param == expr and passed.where.file:
            expr, step = passed.expr, passed
    if step is not None:
        text += f", given `{step.expr}` at {place(step.where)}"
        text += _names_bound(sources, evidence, step.expr, step.where)
    return text


def _names_bound(sources: Sources, evidence: Evidence | None, expr: str, where: Frame) -> str:
    """`` (classes bound at train.py:6)``: where the one name a call-site argument reads is bound."""
    at = resolve_site(evidence, f"{where.file}:{where.line}")
    src = source(sources, at.file) if at else None
    try:
        names = set(reads(cst.parse_expression(expr))) - set(dir(builtins))
    except cst.ParserSyntaxError:
        return ""
    if src is None or len(names) != 1:
        return ""
    name = names.pop()
    event = last_binding(src, name, where.line)
    if event is None or event.statement not in src.positions:
        return ""
    bound = place_in(src.path, src.line(event.statement))
    if expr == name:  # the argument is the name itself: show what it is bound to
        return f" ({_short(src.code(event.statement))} at {bound})"
    return f" ({name} bound at {bound})"


def _linear_for(item: Mismatch, evidence: Evidence | None) -> LinearTrace | None:
    """The one traced nn.Linear of the project with the model's shape for this weight."""
    if evidence is None or len(item.model) not in (1, 2):
        return None
    if len(item.model) == 2:
        out_features, in_features = item.model
        found = [lt for lt in evidence.linears if (lt.out_features, lt.in_features) == (out_features, in_features)]
    else:  # a bias: its size is out_features
        found = [lt for lt in evidence.linears if lt.out_features == item.model[0]]
    found = [lt for lt in found if lt.site is not None and lt.site.user and Path(lt.site.file).is_absolute()]
    return found[0] if len(found) == 1 else None


def _size_argument(sources: Sources, linear: LinearTrace, item: Mismatch) -> str | None:
    """``out_features is `num_classes` ``: the argument of the Linear call that carries the
    differing size, as written."""
    site = linear.site
    src = source(sources, site.file) if site else None
    if src is None or site is None:
        return None
    located = call_at(src.wrapper, site.line, site.col, site.end_line, site.end_col)
    if located is None or not isinstance(located.node, cst.Call):
        return None
    call = located.node
    if len(item.model) == 2 and len(item.checkpoint) == 2 and item.model[1] != item.checkpoint[1]:
        arg, name = argument(call, 0, "in_features"), "in_features"
    else:
        arg, name = argument(call, 1, "out_features"), "out_features"
    if arg is None:
        return None
    return f"{name} is `{src.code(arg.value)}`"


def _model_site(
    item: Mismatch, evidence: Evidence | None, sources: Sources, frame: Frame | None
) -> tuple[Frame, str | None] | None:
    """Where the model that loads the checkpoint was built, from the receiver of the
    failing ``load_state_dict`` call, and that construction's code."""
    if frame is None:
        return None
    src = source(sources, frame.file)
    receiver = _receiver(src, frame.line) if src else None
    value = recorded_local(evidence, frame, receiver) if receiver else None
    if value is None and evidence is not None and receiver:
        value = evidence.scope(frame).globals.get(receiver)
    if not value or not value.is_module:
        return None
    built = resolve_site(evidence, value.site)
    if built is None:
        return None
    code = None
    built_src = source(sources, built.file)
    if built_src is not None:
        calls = calls_on_line(built_src.wrapper, built.line)
        # the call that builds the model's own class, else the outermost one on the line
        named = [c for c in calls if isinstance(c.node, cst.Call) and called_name(c.node) == value.type]
        if named or calls:
            code = built_src.code((named or calls)[0].node)
            code = code if len(code) <= 60 else code[:57] + "..."
    return built, code


def _receiver(src: Source, line: int) -> str | None:
    call = src.call_on_line(line, "load_state_dict")
    if call is None or not isinstance(call.func, cst.Attribute):
        return None
    value = call.func.value
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
        return value.value.value  # model.module.load_state_dict
    return None

