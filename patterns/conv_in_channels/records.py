"""What the run recorded about the failing conv: its construction record and call, how many
times it was built, the batches it completed before, the data tensor of the user's frames,
and a traced ``load_state_dict`` that filled its weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import libcst as cst

from repairbot.analysis import (
    ImportTable,
    Source,
    argument,
    called_name,
    calls_on_line,
    is_torch_name,
    local_tensors,
    place,
    resolve_site,
    shape_of,
)
from repairbot.evidence import Evidence, LayerSite
from repairbot.sources import Sources
from repairbot.types import Failure, Frame

from . import probe
from .direction import pretrained_in_source


def conv_call(src: Source, line: int, in_channels: int, kind: str) -> cst.Call | None:
    """The one nn.ConvNd call on the construction line with the recorded in_channels."""
    imports = ImportTable(src.module)
    found = []
    for located in calls_on_line(src.wrapper, line):
        call = located.node
        if not isinstance(call, cst.Call) or not is_torch_name(imports.qualify(call.func), f"torch.nn.{kind}"):
            continue
        arg = argument(call, 0, "in_channels")
        if arg is not None and isinstance(arg.value, cst.Integer) and int(arg.value.value) != in_channels:
            continue
        found.append(call)
    return found[0] if len(found) == 1 else None


def _history(evidence: Evidence | None) -> Mapping[str, Any] | None:
    """The conv-history probe's record (None: the probe did not run)."""
    if evidence is None or probe.NAME not in evidence.probes:
        return None
    record = evidence.probe_records.get(probe.EVIDENCE_KEY)
    return record if isinstance(record, Mapping) else None


def channels_before(evidence: Evidence | None, site: Frame, kind: str, in_channels: int) -> str | None:
    """The batches of its own ``in_channels`` that the failing conv completed before ("3
    batches of 3 channels"), None when it failed on its first (or the probe did not run)."""
    history = _history(evidence)
    convs = history.get("forwards") if history is not None else None
    for conv in convs if isinstance(convs, list) else ():
        if not isinstance(conv, Mapping) or conv.get("type") != kind or conv.get("in_channels") != in_channels:
            continue
        where = resolve_site(evidence, conv.get("site"))
        count = conv.get("forwards")
        channels = conv.get("channels")
        if where is not None and _same_line(where, site) and isinstance(count, int) and count > 0 \
                and isinstance(channels, list) and in_channels in channels:
            return f"{count} batch{'es' if count > 1 else ''} of {in_channels} channels"
    return None


def data_tensor_frame(evidence: Evidence | None, failure: Failure, shape: Sequence[int]) -> tuple[str, Frame] | None:
    """The tensor of the user's frames outside a ``forward`` that has the conv's input shape:
    the batch as the data gave it."""
    if evidence is None or failure is None:
        return None
    for frame in reversed(failure.frames):
        if not frame.user or frame.function == "forward":
            continue
        for name, value in local_tensors(evidence, frame).items():
            if shape_of(value) == list(shape):
                return name, frame
    return None


def layer_record(evidence: Evidence | None, site: Frame, kind: str, in_channels: int | None) -> LayerSite | None:
    """The run's construction record of the failing conv (its size expressions' traced values
    and constructor chain): the one built at its site with its sizes."""
    if evidence is None:
        return None
    found = [
        layer for layer in evidence.layer_sites
        if layer.type == kind and layer.site is not None and _same_line(layer.site, site)
        and layer.args.get("in_channels") == in_channels
    ]
    # built more than once through different calls: no one chain
    return found[0] if found and all(layer.chain == found[0].chain for layer in found) else None


def _same_line(a: Frame, b: Frame) -> bool:
    return a.line == b.line and (a.file == b.file or Path(a.file).resolve() == Path(b.file).resolve())


def loaded_weights(
    evidence: Evidence | None, failure: Failure, site: Frame, in_channels: int, sources: Sources
) -> str | None:
    """The traced ``load_state_dict`` that filled the failing conv's weight (the probe), if one
    did: a load the run never executed, or one that left the conv out, does not count.

    A load into another instance of the failing model's class (a teacher of the same class) is
    told apart by where the loaded model was built; a load into a submodule counts.
    Without the probe's record (evidence from elsewhere) the source is read instead.
    """
    history = _history(evidence)
    records = history.get("loads") if history is not None else None
    if evidence is None or not isinstance(records, list):
        return pretrained_in_source(sources, failure, site)
    failing_models = [
        (model.type, model_site) for frame in failure.frames if frame.user and frame.function == "forward"
        if (model := evidence.scope(frame).locals.get("self")) is not None and model.is_module
        if (model_site := resolve_site(evidence, model.site)) is not None
    ]
    for record in records:
        if not isinstance(record, Mapping) or not isinstance(record.get("convs"), list):
            continue
        model_site = resolve_site(evidence, record.get("model_site"))
        same_class = [where for kind, where in failing_models if kind == record.get("model")]
        if model_site is not None and same_class and not any(_same_line(model_site, m) for m in same_class):
            continue  # weights loaded into another instance of the failing model's class (a teacher)
        for conv in record["convs"]:
            conv_site = resolve_site(evidence, conv.get("site")) if isinstance(conv, Mapping) else None
            if conv_site is None or not _same_line(conv_site, site) or conv.get("in_channels") != in_channels:
                continue
            loaded_at = resolve_site(evidence, record.get("site"))
            where = f" at {place(loaded_at)}" if loaded_at else ""
            return f"{record.get('model')}.load_state_dict{where} filled {conv.get('name') or 'its'} weight (traced)"
    return None


def statement_text_node(owner: Source, node: cst.CSTNode) -> cst.CSTNode:
    """The one-line statement around a node (what a decline quotes)."""
    found = [
        n for n, span in owner.positions.items()
        if isinstance(n, cst.SimpleStatementLine) and span.contains_line(owner.line(node))
    ]
    if not found:
        return node
    line = min(found, key=lambda n: owner.positions[n].end_line - owner.positions[n].line)
    assert isinstance(line, cst.SimpleStatementLine)
    return line.body[0] if len(line.body) == 1 else line  # without the comments above it


def constructions(evidence: Evidence | None, site: Frame, kind: str, in_channels: int | None) -> int:
    """How many times the run built the conv at ``site`` with its sizes."""
    if evidence is None:
        return 0
    return sum(
        1 for layer in evidence.layer_sites
        if layer.type == kind and layer.site is not None and _same_line(layer.site, site)
        and layer.args.get("in_channels") == in_channels
    )


def instance_sites(evidence: Evidence | None, failure: Failure, class_name: str) -> list[Frame]:
    """The construction sites of the traced modules of ``class_name`` in the failure's frames
    (the model whose forward ran, and the variables holding one)."""
    found: list[Frame] = []
    if evidence is None:
        return found
    for frame in failure.frames:
        if not frame.user:
            continue
        for value in evidence.scope(frame).locals.values():
            if value is None or not value.is_module or value.type != class_name:
                continue
            where = resolve_site(evidence, value.site)
            if where is not None and not any(_same_line(where, seen) for seen in found):
                found.append(where)
    return found


def construction_call(src: Source, line: int, class_name: str) -> cst.Call | None:
    """The one call on ``line`` that calls the class (``SmallCNN()``, ``models.SmallCNN()``, an alias of it)."""
    calls = [
        located.node for located in calls_on_line(src.wrapper, line)
        if isinstance(located.node, cst.Call) and (
            called_name(located.node) == class_name
            or (src.imports.qualify(located.node.func) or "").rpartition(".")[2] == class_name
        )
    ]
    return calls[0] if len(calls) == 1 else None
