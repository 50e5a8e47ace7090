"""target-shape: a loss given a prediction and a target that differ by a unit dimension.

This module holds the pattern and its choice of fix; ``loss_call.py`` reads the loss call and
its arguments' traced shapes, ``shapes.py`` compares the two shapes, ``built_target.py``
follows the target to where it is built, and ``rewrites.py`` holds the fixes.
"""

from __future__ import annotations

import re
from pathlib import Path

from repairbot.analysis import (
    ImportTable,
    argument,
    has_star_args,
    loss_name,
    one_line,
    place_in,
    source,
)
from repairbot.edits import Site
from repairbot.evidence import Evidence, Scope
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure

from . import probe
from .built_target import Batched, Built, built_target, dataset_item, tensor_dataset_target
from .loss_call import POSITIONS, called_directly, loss_call, squeezes, traced_shape
from .rewrites import ItemAsList, ReshapeBuiltTarget, SqueezeLossArgument
from .shapes import (
    USING,
    Mismatch,
    broadcast_shape,
    compare,
    fmt,
    mismatch_effect,
    parse_shape,
    refusing_loss,
    role_of,
    size,
)


class TargetShape(Pattern):
    """Adds ``.squeeze(1)`` to the loss argument that has an extra dimension of size 1.

    What it fixes:
        A regression or binary-classification loss given a prediction of shape ``(N, 1)``
        (a model ending in ``nn.Linear(..., 1)``) and a target of shape ``(N,)`` (one label
        per sample), or the same the other way round; also ``(N, 1, H, W)`` against
        ``(N, H, W)`` (a one-channel mask model against plain masks).

    Why it fails:
        ``BCEWithLogitsLoss`` refuses: ``ValueError: Target size (torch.Size([N])) must be the
        same as input size (torch.Size([N, 1]))``; ``BCELoss`` too: ``ValueError: Using a
        target size (...) that is different to the input size (...) is deprecated``. The
        MSE, L1, SmoothL1 and Huber losses only warn (``UserWarning: Using a target size ...
        This will likely lead to incorrect results due to broadcasting``) and go on:
        ``(N, 1) - (N,)`` broadcasts to ``(N, N)``, every prediction is compared with every
        target and the model learns the mean. The tracing run turns that warning into a
        failure at the user's loss call (the ``target-size-warning`` probe), so the silent
        version is caught as well.

    Example:
        ``loss = criterion(out, y)`` with ``out`` traced as ``(2, 1)`` and ``y`` as ``(2,)``
        becomes ``loss = criterion(out.squeeze(1), y)``. An argument that is not a name, call,
        attribute or subscript is parenthesised first: ``((a + b) / 2).squeeze(1)``.
        When the target tensor is built from the data (``torch.tensor``, ``torch.Tensor``,
        ``torch.from_numpy``...) in one place of the loss's function (or module),
        followed back through moves (``y = y.to(device)``), row slices (``y[:n]``) and tuple
        assignments, and what it builds is read only on the way to loss calls of the same
        loss (and ``len()``), the dimension is fixed there instead, once for every loss call
        it feeds: ``y_tensor = torch.Tensor(y)`` -> ``torch.Tensor(y).unsqueeze(1)``,
        ``y_test = torch.from_numpy(y_test).float()`` -> ``torch.from_numpy(y_test).float().unsqueeze(1)``
        (the array it replaces is no read of the tensor); the fix at the loss call stays the
        alternative tried when that rerun fails. A target batched by a ``TensorDataset``
        (``DataLoader(TensorDataset(X_train, y_train))``), followed back from the loop through
        the DataLoader and the dataset to the one place that builds it, gets the same fix there
        when it is read only by that dataset, the dataset only by DataLoaders, and every loop
        over them reads the item only as that loss's target. A target made per
        sample in the project's Dataset (``__getitem__`` returning ``torch.tensor(self.y[i])``,
        batched to ``(N,)`` against ``(N, 1)``), followed back from the loop through the
        DataLoader, becomes ``torch.tensor([self.y[i]])`` there (or the other way round), when
        every loop over such items reads it only as that loss's target. A target also read
        otherwise (a metric, a plot, arithmetic) keeps the fix at the loss call, so nothing else
        broadcasts differently.

    Fix safety:
        Safe. The two shapes come from the error message and agree with the traced locals;
        the fix removes exactly the dimension of size 1 that the other side lacks, so the
        loss sees the element-wise pairs it was meant to. ``.squeeze(1)``, never a bare
        ``.squeeze()``, which would also drop the batch dimension of a last batch of one.

    Not handled:
        Shapes that differ by more than a unit dimension: ``(N, C)`` against ``(N,)`` with
        C > 1 (a class-count problem: CrossEntropyLoss, or a one-output last layer), channel
        or class counts that disagree (``(N, 3, H, W)`` against ``(N, 1, H, W)``), a 0-d side
        (``()`` against ``(1,)``, left by a bare ``.squeeze()`` on a batch of one), different
        batch sizes. These are declined with the remedy. Also a loss called through another
        package whose argument order is unknown, or with ``*args``.
    """

    ID = "target-shape"
    TITLE = "Loss prediction and target differ by a dimension of size 1"
    TAGS = frozenset({"shape", "loss"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        # BCEWithLogitsLoss / F.binary_cross_entropy_with_logits
        signature(
            ("ValueError",),
            phrase("Target size") + r"\s*" + size("target_size") + r"\s*"
            + phrase("must be the same as input size") + r"\s*" + size("input_size"),
        ),
        # BCELoss / F.binary_cross_entropy (a UserWarning before torch 1.0, an error since)
        signature(("ValueError", "UserWarning"), USING + r"\s*" + phrase("is deprecated")),
        # MSE/L1/SmoothL1/Huber: the broadcasting warning (raised by the probe); a ValueError
        # of this text cut before "is deprecated" is BCELoss's
        signature(("UserWarning", "ValueError"), USING),
    )
    EVIDENCE = frozenset({"locals"})
    PROBES = frozenset({probe.NAME})
    # The fix needs both sides to share their first (batch) size N and to differ only by a
    # dimension of size 1 elsewhere: that unit dimension is a feature or channel axis of the
    # model's output or of the labels, not a batch axis. The harness only ever lowers N to 2
    # (never to 1, the one size that could be mistaken for a unit dimension), and a batch size
    # hard-coded in the script would show up as two different first sizes, which locate
    # declines. So the forced batch size can neither create this failure nor hide it.
    BATCH_INVARIANT = True
    REWRITES = (SqueezeLossArgument, ReshapeBuiltTarget, ItemAsList)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        input_shape, target_shape = parse_shape(match["input_size"]), parse_shape(match["target_size"])
        frame = failure.user_frame
        if frame is None:
            return self.decline("the loss is computed inside a library, not in the project's code")
        refused = refusing_loss(failure)
        plan = compare(input_shape, target_shape, classification=refused is not None)
        if isinstance(plan, Mismatch):
            return self.decline(plan.reason, diagnosis=plan.diagnosis, at=frame)

        path = Path(frame.file)
        wrapper = sources.metadata(path)
        module = wrapper.module
        imports = ImportTable(module)
        scope = evidence.scope(frame) if evidence else Scope()
        found = loss_call(wrapper, imports, scope, frame)
        if isinstance(found, str):
            return self.decline(found, at=frame)
        call, span = found
        where = f"{place_in(path, frame.line)}"
        if has_star_args(call):
            return self.decline(
                f"the loss call at {where} passes its arguments with * or **, so the argument to squeeze is not written out",
                diagnosis=f"squeeze dimension {plan.dim} of the {plan.role_word} before the call",
                at=frame,
            )
        input_arg, target_arg = (argument(call, POSITIONS[role], role) for role in ("input", "target"))
        if input_arg is None or target_arg is None:
            return self.decline(f"the call at {where} does not pass a prediction and a target")

        expected = {"input": input_shape, "target": target_shape}
        traced: dict[str, list[int]] = {}
        for role, arg in (("input", input_arg), ("target", target_arg)):
            shape = traced_shape(scope, arg.value)
            if shape is None:
                continue
            name = module.code_for_node(arg.value)
            if shape != expected[role]:
                return self.decline(
                    f"`{name}`, passed as the {role_of(role)} at {where}, was traced as {fmt(shape)}, "
                    f"but the loss saw a {role_of(role)} of {fmt(expected[role])}: the call's arguments "
                    "are not the loss's input and target in that order"
                )
            traced[name] = list(shape)

        loss = loss_name(call, imports, scope)
        if not traced and loss is None and not called_directly(failure, frame):
            return self.decline(
                f"`{module.code_for_node(call.func)}` at {where} reaches the loss through another package, "
                "whose argument order is unknown",
                diagnosis=f"squeeze dimension {plan.dim} of the {plan.role_word} before it reaches the loss",
                at=frame,
            )

        chosen = input_arg if plan.role == "input" else target_arg
        src = source(sources, str(path))
        built = built_target(src, call, target_arg.value, plan) if src is not None else None
        item = (
            dataset_item(failure, evidence, sources, frame, call, target_arg.value, plan)
            if built is None and evidence is not None else None
        )
        batched = (
            tensor_dataset_target(failure, evidence, sources, frame, call, target_arg.value, plan)
            if built is None and item is None and evidence is not None else None
        )
        if "already" in (built, item, batched):
            return self.decline(
                f"where the target of the loss call at {where} is made, it has that dimension already; the source "
                "changed since the traced run"
            )
        code = one_line(module, chosen.value)
        if squeezes(chosen.value, plan.dim):
            # A multi-line call keeps its traced columns when an argument grows: this is a
            # source already fixed since the run, not a second unit dimension to remove.
            return self.decline(
                f"the {plan.role_word} `{code}` at {where} is already squeezed at dimension {plan.dim}; "
                "the source changed since the traced run"
            )
        shown = f"`{code}`" if len(code) <= 40 else f"the {plan.role_word}"
        loss_label = loss or refused or "the loss"
        prediction, target = fmt(input_shape), fmt(target_shape)
        broadcast = None if refused is not None else broadcast_shape(input_shape, target_shape)
        effect, effect_long = mismatch_effect(loss_label, refused is not None, broadcast)
        traced_text = (
            "; traced: " + ", ".join(f"{name} {fmt(tuple(shape))}" for name, shape in traced.items())
            if traced else ""
        )
        at_call = Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=SqueezeLossArgument(POSITIONS[plan.role], plan.role, plan.dim),
            summary=(
                f"Added .squeeze({plan.dim}) to {shown} at the loss call: the prediction was {prediction} "
                f"and the target {target}, {effect}"
            ),
            applicability=self.APPLICABILITY,
            evidence={
                "loss": loss_label,
                "call": where,
                "input_shape": list(input_shape),
                "target_shape": list(target_shape),
                "squeezed": {"argument": code, "role": plan.role, "dim": plan.dim},
                "traced_arguments": traced,
                "broadcast_shape": list(broadcast) if broadcast is not None else None,
            },
            evidence_text=(
                f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                f"(from the message{traced_text}); {effect_long}"
            ),
        )
        if isinstance(item, tuple):
            made, made_file, wrap = item
            made_at = made_file.where(made)
            before = made_file.code(made)
            return Site(
                pattern=self.ID,
                file=str(made_file.path),
                span=made_file.src.positions[made],
                rewrite=ItemAsList(wrap),
                summary=(
                    f"{'Wrapped the sample' if wrap else 'Unwrapped the one-element list of the sample'}'s target "
                    f"{'in a one-element list ' if wrap else ''}in the Dataset item at {made_at} "
                    f"(`{before}`): the prediction was {prediction} and the batched target {target} at {where}, {effect}"
                ),
                applicability=self.APPLICABILITY,
                evidence={**at_call.evidence, "built_at": made_at, "built": before, "fixed_at": "dataset-item"},
                evidence_text=(
                    f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                    f"(from the message{traced_text}); {effect_long}; each sample's target is made at {made_at} and every "
                    "loop over the loader reads it only as this loss's target"
                ),
                alternatives=(at_call,),
            )
        if isinstance(batched, Batched):
            method = "unsqueeze" if plan.role == "input" else "squeeze"
            built_code = batched.file.code(batched.built)
            built_at = batched.file.where(batched.built)
            dataset_at = batched.file.where(batched.dataset)
            return Site(
                pattern=self.ID,
                file=str(batched.file.path),
                span=batched.file.src.positions[batched.built],
                rewrite=ReshapeBuiltTarget(method, plan.dim),
                summary=(
                    f"Added .{method}({plan.dim}) where the target is built at {built_at} (`{built_code}`), before the "
                    f"TensorDataset at {dataset_at} batches it: the prediction was {prediction} and the batched target "
                    f"{target} at {where}, {effect}"
                ),
                applicability=self.APPLICABILITY,
                evidence={**at_call.evidence, "built_at": built_at, "built": built_code, "fixed_at": "target-creation",
                          "dataset_at": dataset_at},
                evidence_text=(
                    f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                    f"(from the message{traced_text}); {effect_long}; the batched target is tensor {batched.index} of "
                    f"the TensorDataset at {dataset_at}, built once at {built_at} and read only by it, and every loop "
                    "over its loaders reads it only as this loss's target"
                ),
                alternatives=(at_call,),
            )
        if not isinstance(built, Built) or src is None:
            return at_call
        method = "unsqueeze" if plan.role == "input" else "squeeze"
        built_code = one_line(module, built.node)
        built_at = place_in(path, src.line(built.node))
        feeds = f"the {built.losses} loss calls it feeds" if built.losses > 1 else "the loss call"
        return Site(
            pattern=self.ID,
            file=str(path),
            span=src.positions[built.node],
            rewrite=ReshapeBuiltTarget(method, plan.dim),
            summary=(
                f"Added .{method}({plan.dim}) where the target is built at {built_at} (`{built_code}`): the prediction "
                f"was {prediction} and the target {target} at {where}, {effect}"
            ),
            applicability=self.APPLICABILITY,
            evidence={**at_call.evidence, "built_at": built_at, "built": built_code, "fixed_at": "target-creation"},
            evidence_text=(
                f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                f"(from the message{traced_text}); {effect_long}; the target is built once at {built_at} and read only "
                f"as the target of {feeds}: one .{method}({plan.dim}) there"
            ),
            alternatives=(at_call,),
        )
