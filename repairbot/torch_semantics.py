"""The torch-semantics table: facts about torch's own names that several places ask (which
calls are losses, which context managers turn autograd off or on), kept once.

The data lives in ``torch_semantics.json`` beside this module so that the harness, which runs
under the user's interpreter without repairbot, reads the same table by path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).with_name("torch_semantics.json")
_TABLE: dict[str, Any] = json.loads(TABLE_PATH.read_text(encoding="utf-8"))

# torch.nn.functional losses (and the internal names their frames show: nll_loss2d, nll_loss_nd).
LOSS_FUNCTIONS: frozenset[str] = frozenset(_TABLE["loss_functions"])
# torch.nn loss modules.
LOSS_CLASSES: frozenset[str] = frozenset(_TABLE["loss_classes"])
# Functional losses that broadcast input against target without a word (the harness warns).
SILENT_BROADCAST_LOSSES: tuple[str, ...] = tuple(_TABLE["silent_broadcast_losses"])

# Context managers and decorators that switch autograd off (``inference_mode(False)`` does not).
GRAD_OFF_CONTEXTS: tuple[str, ...] = tuple(_TABLE["grad_off_contexts"])
# ``torch.no_grad`` alone, under its names: what a fix writes and merges into.
NO_GRAD: tuple[str, ...] = tuple(name for name in GRAD_OFF_CONTEXTS if name.endswith(".no_grad"))
# Context managers that switch it back on inside an off region.
GRAD_ON_CONTEXTS: tuple[str, ...] = tuple(_TABLE["grad_on_contexts"])
# ``set_grad_enabled(mode)``: off or on by its argument.
GRAD_MODE_SETTERS: tuple[str, ...] = tuple(_TABLE["grad_mode_setters"])

# The functions that load a checkpoint, each with the position it takes ``map_location`` at.
MAP_LOCATION_POSITION: dict[str, int] = {
    name: position for name, position in _TABLE["checkpoint_loaders"].items() if not name.startswith("//")
}
CHECKPOINT_LOADERS: tuple[str, ...] = tuple(MAP_LOCATION_POSITION)


def is_loss_name(name: str) -> bool:
    """Whether a callee's or a module class's last name is a loss: one of torch's, or a name
    that says so (``FocalLoss``, ``dice_loss``: the user's own losses)."""
    return name in LOSS_FUNCTIONS or name in LOSS_CLASSES or name.lower().endswith("loss")


def is_inplace_method(name: str) -> bool:
    """``zero_``, ``add_``, ``copy_``: torch's in-place methods end with one underscore (a
    private ``_foo_`` or a dunder is not one). The harness's in-place probe reads names the same
    way (it cannot import this module)."""
    return name.endswith("_") and not name.startswith("_")
