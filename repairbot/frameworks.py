"""Which classes of a file a training framework drives (one home for the question, for every rule).

A LightningModule's hooks run inside Lightning's loop: Lightning switches train/eval modes,
calls ``zero_grad``/``backward``/``step`` under automatic optimization, runs ``validation_step``
under no_grad, and moves the module to its device before ``configure_optimizers``. Rules that
would report those things as missing ask here instead of guessing from names.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from repairbot.analysis import ImportTable, bindings_of, dotted_name, is_false
from repairbot.cst_walk import descendants

# the qualified names of Lightning's LightningModule, under each package that exports it
LIGHTNING_MODULES = frozenset({
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule",
    "lightning.pytorch.core.module.LightningModule",
    "pytorch_lightning.LightningModule",
    "pytorch_lightning.core.LightningModule",
    "pytorch_lightning.core.module.LightningModule",
})

# the same for LightningDataModule, the object whose setup() makes the data and whose
# *_dataloader() methods return the loaders
LIGHTNING_DATAMODULES = frozenset({
    "lightning.LightningDataModule",
    "lightning.pytorch.LightningDataModule",
    "lightning.pytorch.core.LightningDataModule",
    "lightning.pytorch.core.datamodule.LightningDataModule",
    "pytorch_lightning.LightningDataModule",
    "pytorch_lightning.core.LightningDataModule",
    "pytorch_lightning.core.datamodule.LightningDataModule",
})


# the LightningModule hooks Lightning calls once the module is on its device (after
# ``setup``/``configure_model``, where ``self.device`` is still the CPU): there ``self.device`` is
# where the module's parameters are
ON_DEVICE_HOOKS = frozenset({
    "forward", "training_step", "validation_step", "test_step", "predict_step",
    *(f"on_{stage}_{what}_{when}" for stage in ("train", "validation", "test", "predict")
      for what in ("batch", "epoch") for when in ("start", "end")),
    "on_train_start", "on_validation_start", "on_test_start", "on_predict_start",
})


def lightning_classes(
    module: cst.Module, imports: ImportTable, bases: frozenset[str] = LIGHTNING_MODULES
) -> dict[str, cst.ClassDef]:
    """The classes of ``module`` that are LightningModules (or, with ``LIGHTNING_DATAMODULES``
    as ``bases``, DataModules): a base imported from Lightning (under any alias), or a class of
    this file that is one (a subclass of a user subclass)."""
    return lightning_among(class_defs(module), imports, bases)


def class_defs(node: cst.CSTNode) -> list[cst.ClassDef]:
    """The classes defined in a tree, nested ones too, in source order."""
    return [item for item in descendants(node) if isinstance(item, cst.ClassDef)]


def lightning_among(
    classes: Sequence[cst.ClassDef], imports: ImportTable, bases: frozenset[str] = LIGHTNING_MODULES,
) -> dict[str, cst.ClassDef]:
    """``lightning_classes`` of a file whose classes (in source order) are ``classes``."""
    found: dict[str, cst.ClassDef] = {}
    changed = True
    while changed:  # a subclass may come before its base in the file
        changed = False
        for node in classes:
            if node.name.value in found:
                continue
            for base in node.bases:
                if imports.qualify(base.value) in bases or dotted_name(base.value) in found:
                    found[node.name.value] = node
                    changed = True
                    break
    return found


def automatic_optimization(node: cst.ClassDef) -> bool:
    """Whether Lightning optimizes for this class (no ``self.automatic_optimization = False``)."""
    for item in descendants(node):
        if isinstance(item, cst.Assign) and is_false(item.value) and any(
            dotted_name(target.target) == "self.automatic_optimization" for target in item.targets
        ):
            return False
    return True


def lightning_hook(
    stack: Sequence[cst.CSTNode], lightning: dict[str, cst.ClassDef], *hooks: str
) -> cst.ClassDef | None:
    """The LightningModule whose method (one of ``hooks``, any method when none is given)
    directly holds the innermost function of ``stack`` (the walk's ancestors), or None."""
    for index in range(len(stack) - 1, 0, -1):
        function = stack[index]
        if isinstance(function, cst.FunctionDef):
            owner = next((n for n in reversed(stack[:index]) if isinstance(n, cst.ClassDef | cst.FunctionDef)), None)
            if isinstance(owner, cst.ClassDef) and lightning.get(owner.name.value) is owner:
                return owner if not hooks or function.name.value in hooks else None
            return None
    return None


def module_self(method: cst.FunctionDef) -> str | None:
    """The name of the module itself in a method (its first parameter, ``self``), where it is
    the module throughout: not a static or class method, never rebound in the body."""
    if any(dotted_name(d.decorator) in ("staticmethod", "classmethod") for d in method.decorators):
        return None
    params = [*method.params.posonly_params, *method.params.params]
    if not params:
        return None
    name = params[0].name.value
    return None if bindings_of(method, name) else name
