"""How safe a change of the layer is: weights loaded from elsewhere, a project that makes or
expects one-channel images, a weight set by hand, a parameter's default that sizes other
layers; and the remedy in words when no edit is proven.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Source,
    called_name,
    dotted_name,
    place,
    source,
)
from repairbot.provenance import Written, integer_value
from repairbot.sources import Sources
from repairbot.types import Applicability, Failure, Frame

# Calls that bring weights from elsewhere: changing a layer's size would break them.
_PRETRAINED_CALLS = ("load_state_dict", "load_from_checkpoint", "from_pretrained")


def remedy_text(expected: int, got: int) -> str:
    return (f"The convolution takes {expected} input channels and received {got}: set its in_channels to "
            f"{got} where it is built, or convert the input to {expected} channels.")


def convert_text(in_channels: int, channels: int) -> str:
    return f"The layer's weights fix its {in_channels} input channels, so convert the data instead: {conversion_text(in_channels, channels)}."


def conversion_text(in_channels: int, channels: int) -> str:
    """How to give a layer of ``in_channels`` the data it receives with ``channels``."""
    if in_channels == 3 and channels == 1:
        how = ("repeat the grayscale channel: x.repeat(1, 3, 1, 1), or transforms.Grayscale(num_output_channels=3) "
               "in the dataset, or images opened with .convert('RGB')")
    elif in_channels == 1 and channels == 3:
        how = "convert the images to grayscale (transforms.Grayscale() or .convert('L'))"
    elif in_channels == 3 and channels == 4:
        how = "drop the alpha channel (.convert('RGB') when opening the images, or x[:, :3])"
    else:
        how = f"give it {in_channels}-channel inputs"
    return how


def pretrained_in_source(sources: Sources, failure: Failure, site: Frame) -> str | None:
    """A call in the project's failing files that loads weights into a model, if any (read
    from the source: for evidence without the conv-history probe's record)."""
    files = {f.file for f in failure.frames if f.user} | {site.file}
    for file in sorted(files):
        src = source(sources, file)
        if src is None:
            continue
        for node, span in src.positions.items():
            if not isinstance(node, cst.Call):
                continue
            if called_name(node) in _PRETRAINED_CALLS or any(
                a.keyword is not None and a.keyword.value in ("pretrained", "weights") and not (
                    isinstance(a.value, cst.Name) and a.value.value in ("False", "None")
                ) for a in node.args
            ):
                return f"{src.code(node)[:60]} at {place(Frame(file=str(src.path), line=span.line))}"
    return None


@dataclass(frozen=True)
class Direction:
    """What the traced facts make of a fix that changes the layer: how safe it is, and why."""

    applicability: Applicability
    notes: tuple[str, ...] = ()
    evidence: str = ""  # appended to the fix's evidence text


# Calls that make images one-channel (``num_output_channels=3`` keeps three).
_GRAYSCALE_CALLS = ("Grayscale", "rgb_to_grayscale", "to_grayscale")


def one_channel_data(sources: Sources, files: Sequence[str]) -> str | None:
    """Where the project's files make or expect one-channel images, if anywhere: a grayscale
    conversion (``transforms.Grayscale()``, ``.convert("L")``, ``cv2.COLOR_BGR2GRAY``,
    ``cv2.IMREAD_GRAYSCALE``) or a normalisation of one mean (``Normalize((0.5,), (0.5,))``)."""
    for file in files:
        src = source(sources, file)
        if src is None:
            continue
        for node, span in sorted(src.positions.items(), key=lambda item: (item[1].line, item[1].col)):
            if not isinstance(node, cst.Call):
                continue
            name = called_name(node)
            first = node.args[0].value if node.args else None
            keeps_three = any(
                a.keyword is not None and a.keyword.value == "num_output_channels" and integer_value(a.value) == 3
                for a in node.args
            ) or (len(node.args) == 1 and node.args[0].keyword is None and first is not None and integer_value(first) == 3)
            texts = [dotted_name(a.value) or "" for a in node.args]
            if (
                (name in _GRAYSCALE_CALLS and not keeps_three)
                or (name == "convert" and isinstance(first, cst.SimpleString) and first.evaluated_value == "L")
                or (name == "cvtColor" and any(t.endswith("2GRAY") for t in texts))
                or (name == "imread" and any(t.endswith("IMREAD_GRAYSCALE") for t in texts))
                or (name == "Normalize" and isinstance(first, cst.Tuple | cst.List) and len(first.elements) == 1)
            ):
                return f"{src.code(node)[:60]} at {place(Frame(file=str(src.path), line=span.line))}"
    return None


def weight_set_by_hand(src: Source, call: cst.Call) -> str | None:
    """Where the conv built by ``call`` (``self.edge = nn.Conv2d(...)``) gets a weight written by
    hand (``self.edge.weight = nn.Parameter(kernel)``, ``.weight.data = ...``,
    ``.weight.data.copy_(kernel)``), if anywhere in its file."""
    owner = next(
        (n for n in src.positions if isinstance(n, cst.Assign) and n.value is call and len(n.targets) == 1), None
    )
    target = dotted_name(owner.targets[0].target) if isinstance(owner, cst.Assign) else None
    if target is None:
        return None
    weight = f"{target}.weight"
    for node, span in src.positions.items():
        written = False
        if isinstance(node, cst.Assign):
            written = any((dotted_name(t.target) or "") in (weight, f"{weight}.data") for t in node.targets)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "copy_":
            written = (dotted_name(node.func.value) or "") in (weight, f"{weight}.data")
        if written:
            return f"{src.code(node)[:60]} at {place(Frame(file=str(src.path), line=span.line))}"
    return None


def defaulted_parameter(
    sources: Sources, written: Written
) -> tuple[Source, cst.ClassDef, cst.FunctionDef, str] | None:
    """The class, its ``__init__`` and the keyword parameter whose default ``written`` is."""
    owner = source(sources, written.file)
    if owner is None:
        return None
    for function in owner.around(written.span.line, cst.FunctionDef):
        assert isinstance(function, cst.FunctionDef)
        params = function.params
        param = next((p for p in (*params.params, *params.kwonly_params) if p.default is written.node), None)
        if param is None:
            continue
        classes = owner.around(owner.line(function), cst.ClassDef)
        cls = classes[0] if classes else None
        if function.name.value != "__init__" or not isinstance(cls, cst.ClassDef) or not isinstance(cls.body, cst.IndentedBlock) \
                or function not in cls.body.body:
            return None
        return owner, cls, function, param.name.value
    return None


def reads_at(owner: Source, read: cst.Name, where: Frame) -> bool:
    """Whether a read of the parameter is (inside) the traced call-site argument ``where``."""
    span = owner.positions.get(read)
    return span is not None and where.line <= span.line <= (where.end_line or where.line) and (
        owner.path == Path(where.file) or owner.path.resolve() == Path(where.file).resolve()
    )
