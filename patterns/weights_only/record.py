"""The unsafe-globals probe's record: the globals a failed ``torch.load`` refused, which of them
only rebuild plain data, the public torch name of each, and the remedy in words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repairbot.evidence import Evidence

from . import probe
from .probe import NUMPY_DTYPE_CLASS, PLAIN_DATA

# How the evidence rerun's probe is asked for, and where its record is read.
PROBE = probe.NAME


def is_plain_data(name: str) -> bool:
    """A global that only rebuilds plain data (no code runs but its own constructor): the
    argparse options a training script saves with its weights, NumPy scalars and arrays,
    collections and builtins. The list is the probe's, so that the fix allowlists exactly what
    the rerun proved enough."""
    return name in PLAIN_DATA or bool(NUMPY_DTYPE_CLASS.match(name))


@dataclass(frozen=True)
class PickledGlobal:
    name: str  # as the checkpoint names it
    resolved: str | None  # the object's own module.qualname in the run, when the probe resolved it
    build: bool = False  # asked for while loading (a NumPy dtype class), not listed by the scan


def probe_record(evidence: Evidence | None) -> Mapping[str, Any] | None:
    """The last record of the unsafe-globals probe: one per failed ``torch.load``."""
    records = evidence.probe_records.get(probe.EVIDENCE_KEY) if evidence is not None else None
    if not records:
        return None
    last = records[-1]
    return last if isinstance(last, Mapping) else None


def refused_globals(record: Mapping[str, Any]) -> list[PickledGlobal]:
    found: list[PickledGlobal] = []
    for build, key in ((False, "globals"), (True, "build_types")):
        for entry in record.get(key) or ():
            if isinstance(entry, str):
                found.append(PickledGlobal(entry, None, build))
            elif isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                resolved = entry.get("resolved")
                found.append(PickledGlobal(entry["name"], resolved if isinstance(resolved, str) else None, build))
    unique: dict[str, PickledGlobal] = {}
    for entry in found:
        unique.setdefault(entry.name, entry)
    return list(unique.values())


def remedy(names: Sequence[str]) -> str:
    listed = ", ".join(names) if names else "the globals the message names"
    return (
        f"if you trust the file, allowlist {listed} around the load: `with torch.serialization.safe_globals([...]):` "
        "(or torch.serialization.add_safe_globals once); otherwise resave the checkpoint with plain types "
        "(vars(args) instead of an argparse.Namespace, float() instead of NumPy scalars"
        + ("; model.state_dict() instead of the whole model" if any(TORCH_MODULE_CLASS.match(n) for n in names) else "")
        + "). weights_only=False also loads it, but runs any code the file holds"
    )


# A class of torch's own nn modules, as a pickled model names it.
TORCH_MODULE_CLASS = re.compile(r"torch\.nn\.modules\.\w+\.(?P<cls>[A-Z]\w*)\Z")


# Classes of torch.nn.modules that torch.nn does not re-export (MultiheadAttention's out_proj).
_NOT_IN_TORCH_NN = frozenset({"NonDynamicallyQuantizableLinear"})


def public_torch_name(target: str) -> str:
    """``torch.nn.Linear`` for ``torch.nn.modules.linear.Linear``: the name the code uses."""
    found = TORCH_MODULE_CLASS.match(target)
    if found is None or found["cls"] in _NOT_IN_TORCH_NN:
        return target
    return f"torch.nn.{found['cls']}"
