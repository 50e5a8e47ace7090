"""map-location: a checkpoint saved on a GPU, loaded where that GPU does not exist."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.metadata import ParentNodeProvider

from repairbot.analysis import (
    DEVICE_NAMES,
    ImportTable,
    call_at,
    calls_on_line,
    is_torch_name,
    keyword_arg,
    place,
)
from repairbot.codemod import append_keyword, string_literal
from repairbot.edits import Edit, Rewrite, Site, SiteNodes
from repairbot.evidence import DescribedValue, Environment, Evidence, Scope
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.torch_semantics import CHECKPOINT_LOADERS
from repairbot.types import Applicability, Decline, Failure, Frame

# The frame of torch that rebuilds a storage pickled with plain pickle (tensor.__reduce__).
_PICKLED_STORAGE = ("torch/storage.py", "_load_from_bytes")


@dataclass(frozen=True)
class AddMapLocation(Rewrite):
    """Adds ``map_location=...`` to the one loader call at the site."""

    map_location: str  # the value, as code

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        return [Edit(call, append_keyword(call, "map_location", cst.parse_expression(self.map_location)))]


class MapLocation(Pattern):
    """Adds ``map_location=`` to the ``torch.load`` that brings CUDA tensors to a machine without them.

    What it fixes:
        Loading a checkpoint that was saved from a GPU on a machine without one (a laptop, a
        CPU-only CI runner), or with fewer GPUs than the one it was saved from.

    Why it fails:
        A checkpoint remembers the device of every tensor. ``torch.load`` puts them back there
        unless told otherwise: ``RuntimeError: Attempting to deserialize object on a CUDA device
        but torch.cuda.is_available() is False. If you are running on a CPU-only machine, please
        use torch.load with map_location=torch.device('cpu') to map your storages to the CPU.``
        (or ``... on CUDA device 2 but torch.cuda.device_count() is 1``).

    Example:
        ``state = torch.load("best.pt")`` becomes ``state = torch.load("best.pt",
        map_location=device)`` when the script has a device variable in scope at that line
        (seen in the traced frame), else ``map_location="cpu"``.

    Fix safety:
        Safe. ``map_location`` only decides where the loaded tensors live; the script moves
        them to its device as before. ``weights_only`` is never touched.

    Not handled:
        A ``torch.load`` inside a library (the call is not in the project's code); a call that
        already passes ``map_location`` (a hard-coded ``cuda`` device is the setting to change)
        or forwards ``**kwargs``; a load in the branch of the script's own switch (``if
        args.cpu:``) whose other branch already passes ``map_location`` (the run took the GPU
        path); CUDA tensors in a plain ``pickle`` file (``pickle.load`` has no
        ``map_location``): declined with the remedy.
    """

    ID = "map-location"
    TITLE = "torch.load of a CUDA checkpoint on a machine without that GPU"
    TAGS = frozenset({"device", "checkpoint"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        signature(("RuntimeError",), r"Attempting to deserialize object on a CUDA\s+device"),
        signature(
            ("RuntimeError",),
            r"Attempting to deserialize object on CUDA device (?P<index>\d+) but "
            r"torch\.cuda\.device_count\(\) is (?P<count>\d+)",
        ),
    )
    EVIDENCE = frozenset({"locals"})
    BATCH_INVARIANT = True
    REWRITES = (AddMapLocation,)
    # validate_cuda_device raised the errors itself in older torch; _validate_device does in torch 2
    RAISING_FRAMES = (("torch/serialization.py", "validate_cuda_device"), ("torch/serialization.py", "_validate_device"))

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the checkpoint is loaded inside a library, not in the project's code")
        if any(not f.user and f.file.endswith(_PICKLED_STORAGE[0]) and f.function == _PICKLED_STORAGE[1] for f in failure.frames):
            return self.decline(
                f"the tensors at {place(frame)} come out of a plain pickle (pickle.dump of CUDA tensors), not a "
                "torch.save checkpoint: pickle.load has no map_location",
                diagnosis=(
                    "move the tensors to the CPU (or .item()/.tolist()) before pickling them on the GPU machine, or "
                    "save them with torch.save; to read this file here, unpickle it with a pickle.Unpickler whose "
                    "find_class maps torch.storage._load_from_bytes to lambda b: torch.load(io.BytesIO(b), "
                    "map_location='cpu'), for a file you trust"
                ),
                at=frame,
            )
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        module = wrapper.module
        imports = ImportTable(module)
        call = _loader_call(wrapper, imports, frame)
        if call is None:
            return self.decline(
                f"no torch.load call at {path.name}:{frame.line}: the checkpoint is loaded by a "
                "function of another package",
                diagnosis="pass map_location='cpu' (or your device) to the function that loads the checkpoint",
            )
        node, span = call
        if keyword_arg(node, "map_location") is not None:
            return self.decline(
                "the call already passes map_location, and it points at a device this machine lacks",
                diagnosis="choose the device at run time: torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
                at=frame,
            )
        if any(arg.star == "**" for arg in node.args):
            return self.decline("the call forwards **kwargs, which may already carry map_location")
        switch = _cpu_branch_elsewhere(wrapper, imports, node)
        if switch is not None:
            return self.decline(
                f"the load at {place(frame)} is the branch of `{switch}` that the run took; the other branch "
                "already loads with map_location: the script's own switch chose the GPU path",
                diagnosis=f"run with the setting that makes `{switch}` take the CPU branch on a machine without CUDA",
                at=frame,
            )

        scope = evidence.scope(frame) if evidence else Scope()
        environment = evidence.environment if evidence else Environment()
        device_name = _device_variable(scope, environment.cuda_available)
        value = device_name or string_literal(module, "cpu")
        loader = module.code_for_node(node.func)
        saved_on = f"CUDA device {match['index']}" if "index" in match.groupdict() and match["index"] else "CUDA"
        cuda = "available" if environment.cuda_available else "not available"
        if device_name:
            runtime = scope.get(device_name)
            shown = runtime.value if runtime is not None and runtime.value is not None else "?"
            chosen = f"the script's device variable `{device_name}` (= {shown} at that line)"
        else:
            chosen = "no device variable in scope at that line, so the CPU"
        return Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=AddMapLocation(value),
            summary=f"Added map_location={value} to {loader}(...) so that tensors saved on {saved_on} load here",
            applicability=self.APPLICABILITY,
            evidence={
                "checkpoint_device": saved_on,
                "cuda_available": environment.cuda_available,
                "device_variable": (
                    {"name": device_name, **_recorded(scope.get(device_name))} if device_name else None
                ),
            },
            evidence_text=f"the checkpoint holds tensors saved on {saved_on}; CUDA is {cuda} here; map_location uses {chosen}",
        )


def _loader_call(wrapper: Any, imports: ImportTable, frame: Frame) -> tuple[cst.Call, Any] | None:
    """The loader call the frame was executing: exact with traced columns, else the only one on the line."""
    if frame.col is not None:
        located = call_at(wrapper, frame.line, frame.col, frame.end_line, frame.end_col)
        if located is not None and isinstance(located.node, cst.Call):
            if is_torch_name(imports.qualify(located.node.func), *CHECKPOINT_LOADERS):
                return located.node, located.span
            return None
    loaders = [
        c for c in calls_on_line(wrapper, frame.line)
        if isinstance(c.node, cst.Call) and is_torch_name(imports.qualify(c.node.func), *CHECKPOINT_LOADERS)
    ]
    if len(loaders) == 1 and isinstance(loaders[0].node, cst.Call):
        return loaders[0].node, loaders[0].span
    return None


def _cpu_branch_elsewhere(wrapper: Any, imports: ImportTable, call: cst.Call) -> str | None:
    """The condition of an ``if``/``x if c else y`` around ``call`` whose other branch, which the
    run did not take, calls a loader with ``map_location`` (the script's own CPU path)."""
    parents = wrapper.resolve(ParentNodeProvider)
    child: cst.CSTNode = call
    node = parents.get(call)
    while node is not None and not isinstance(node, cst.FunctionDef | cst.Module):
        others: list[cst.CSTNode] = []
        if isinstance(node, cst.IfExp) and child is not node.test:
            others = [node.orelse if child is node.body else node.body]
        elif isinstance(node, cst.If) and child is not node.test:
            others = [b for b in (node.body, node.orelse) if b is not None and b is not child]
        for other in others:
            for found in m.findall(other, m.Call()):
                if (
                    isinstance(found, cst.Call) and is_torch_name(imports.qualify(found.func), *CHECKPOINT_LOADERS)
                    and keyword_arg(found, "map_location") is not None
                ):
                    test = node.test
                    return " ".join(wrapper.module.code_for_node(test).split())
        child, node = node, parents.get(node)
    return None


def _recorded(value: DescribedValue | None) -> dict[str, Any]:
    return value.to_json() if value is not None else {}


def _device_variable(scope: Scope, cuda_available: bool) -> str | None:
    """A device variable the traced frame could see, usable on this machine.

    A variable holding ``cuda`` on a machine without CUDA is the problem, not the fix.
    """
    usable: list[str] = []
    for names in (scope.locals, scope.globals):
        for name, value in names.items():
            if not value.is_device:
                continue
            device = str(value.value if value.value is not None else "")
            if device.startswith("meta") or (device.startswith("cuda") and not cuda_available):
                continue
            if value.kind == "device-string" and "dev" not in name.lower():
                continue  # a string "cpu" in a variable not named like a device is a coincidence
            usable.append(name)
    preferred = [n for n in DEVICE_NAMES if n in usable]
    chosen = preferred or usable
    return chosen[0] if chosen else None
