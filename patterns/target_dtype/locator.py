"""The decision: from the loss call and its target, follow the labels to the one place a
conversion makes the loss's dtype (the target at the call, or the call that makes the labels),
or decline naming why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import libcst as cst
from libcst.metadata import ParentNodeProvider

from repairbot.analysis import (
    Event,
    Source,
    argument,
    assigned_value,
    dtype_name,
    events,
    has_star_args,
    is_torch_name,
    keyword_arg,
    loss_name,
    name_reads,
    one_line,
    place,
    place_in,
    shape_text,
    walk,
)
from repairbot.edits import Site
from repairbot.evidence import DescribedValue, Evidence, Scope
from repairbot.pattern import Pattern
from repairbot.provenance import (
    Context,
    KeyPath,
    Lost,
    Made,
    Result,
    ValueWalk,
    parameter_names,
    project_sources,
    written_at,
)
from repairbot.sources import Sources
from repairbot.torch_semantics import is_loss_name
from repairbot.types import Applicability, Decline, Failure, Frame

from .labels import (
    COMPARES,
    CONTINUOUS,
    FACTORIES,
    INTEGER_METHODS,
    KEEPS_DTYPE,
    MOVES,
    PROBABILITIES,
    LabelsMade,
    Onward,
    a_or_an,
    binding_before,
    blind_or_target,
    bound_names,
    calls_in,
    dataset_reads_blind,
    device_moves,
    is_converted_by,
    is_device_like,
    methods_named,
    owner_of,
    randint_high,
    returned_tuple,
    same_callee,
    self_assignment,
    shape_list,
    unpacked_names,
)
from .losses import FLOAT_TARGET_LOSSES, INDEX_LOSSES, MULTILABEL_MARGIN, LossCall, remedy_text
from .rewrites import CreationDtype, TargetMethod


class Locator:
    def __init__(
        self, pattern: Pattern, failure: Failure, evidence: Evidence | None, sources: Sources, src: Source,
        frame: Frame,
        scope: Scope, loss: LossCall, found: str, want: str, probabilities_accepted: bool,
    ) -> None:
        self.pattern = pattern
        self.failure = failure
        self.evidence = evidence
        self.sources = sources
        self.src = src
        self.frame = frame
        self.scope = scope
        self.loss = loss
        self.found = found
        self.want = want
        self.where = place(frame)
        self.probabilities_accepted = probabilities_accepted
        self._reached: set[int] = set()  # ids of the loss calls a forward check found the labels to feed
        self._walked: dict[int, LabelsMade | Decline] = {}  # the walk's creation calls, by id, and what they give

    def decline(self, reason: str, diagnosis: str | None = None) -> Decline:
        return self.pattern.decline(reason, diagnosis=diagnosis, at=self.frame)

    def locate(self) -> Site | Decline:
        loss, call, module = self.loss, self.loss.call, self.src.module
        name = loss.name
        if has_star_args(call):
            return self.decline(f"the loss call at {self.where} passes its arguments with * or **", remedy_text(self.want, None))
        target_arg = argument(call, 1, "target")
        input_arg = argument(call, 0, "input")
        if target_arg is None or input_arg is None:
            return self.decline(f"the call at {self.where} does not pass a prediction and a target", remedy_text(self.want, None))
        code = one_line(module, target_arg.value)
        kind = self._kind(name, code)
        if isinstance(kind, Decline):
            return kind
        target = self._traced(target_arg.value)
        traced_input = self._traced(input_arg.value)
        prediction = shape_list(traced_input) if traced_input is not None else self._loss_input()
        refused = self._refuse(code, target, prediction)
        if refused is not None:
            return refused
        if is_converted_by(target_arg.value, self.want):
            return self.decline(
                f"the target `{code}` at {self.where} is already converted with .{self.want}(); the source changed since the run"
            )
        at_creation = self._creation(target_arg.value)
        if isinstance(at_creation, Decline):
            return at_creation
        if at_creation is not None:
            return self._site_at_creation(at_creation, code, target, name or "the loss")
        return self._site_at_call(code, target, name or "the loss")

    # what kind of loss ----------------------------------------------------------------------
    def _kind(self, name: str | None, code: str) -> Decline | None:
        if name is None:
            return self.decline(
                f"the call at {self.where} is not recognisably a torch loss (by its name, the traced type of what it calls, "
                "or the torch frames below it)",
                remedy_text(self.want, code),
            )
        if self.want == "long":
            if name in MULTILABEL_MARGIN:
                return self.decline(
                    f"{name} at {self.where} got {self.found} targets: it takes int64 class indices padded with -1, and a "
                    "float target row is usually a multi-hot vector, which .long() would not turn into indices",
                    diagnosis="for multi-hot float targets use nn.BCEWithLogitsLoss (or nn.MultiLabelSoftMarginLoss); for "
                    "MultiLabelMarginLoss build rows of class indices padded with -1",
                )
            if name not in INDEX_LOSSES:
                return self.decline(
                    f"{name} at {self.where} is not a classification loss that takes class indices",
                    diagnosis=f"check which argument of {name} needs int64 ({self.found} was given)",
                )
        elif name not in FLOAT_TARGET_LOSSES:
            return self.decline(
                f"{name} at {self.where} is not a loss that takes float targets", remedy_text(self.want, code)
            )
        return None

    def _refuse(self, code: str, target: DescribedValue | None, prediction: Sequence[int] | None) -> Decline | None:
        if target is None:
            return None
        dtype = target.dtype
        if dtype is not None and dtype_name(self.found) not in (None, dtype):
            return self.decline(
                f"`{code}` was traced as {dtype} at {self.where}, but the loss got a {self.found} target: the call's "
                "arguments are not the loss's input and target in that order"
            )
        if target.requires_grad:
            return self.decline(
                f"the target `{code}` at {self.where} requires grad: it is computed by a model, not a tensor of labels",
                diagnosis="pass the labels as the target; to train towards another model's output use its "
                "probabilities (.softmax(dim=1).detach()) with cross_entropy, or a distillation loss such as KLDivLoss",
            )
        shape = shape_list(target)
        if self.want != "long" or shape is None:
            return None
        if prediction is not None and list(prediction) == shape and (target.dtype or "").startswith(("float", "bfloat")):
            return self.decline(
                f"the target `{code}` at {self.where} is {shape_text(shape)} {target.dtype}, the input's own shape: "
                "class probabilities (soft or one-hot labels), not class indices; .long() would turn them into wrong labels",
                diagnosis="for probabilities use F.cross_entropy(logits, probs) (it accepts them since torch 1.10) or, "
                "with log-probabilities, -(probs * log_probs).sum(dim=-1).mean(); for one-hot rows pass probs.argmax(dim=-1)",
            )
        if prediction is None and len(shape) > 1 and not self.probabilities_accepted:
            return self.decline(
                f"the target `{code}` at {self.where} is {shape_text(shape)} and the prediction's shape was not traced: "
                "class indices and class probabilities cannot be told apart",
                diagnosis=remedy_text(self.want, code) + ", if they are class indices",
            )
        return None

    # evidence ------------------------------------------------------------------------------
    def _traced(self, value: cst.BaseExpression) -> DescribedValue | None:
        if not isinstance(value, cst.Name):
            return None
        for names in (self.scope.locals, self.scope.globals):
            described = names.get(value.value)
            if described and described.is_tensor:
                return described
        return None

    def _loss_input(self) -> Sequence[int] | None:
        """The prediction's shape as the failing loss module received it (``nn.CrossEntropyLoss``)."""
        module = self.evidence.failing_module if self.evidence else None
        if module and is_loss_name(module.type or "") and module.input_shape is not None:
            return list(module.input_shape)
        return None

    # the creation site ---------------------------------------------------------------------
    def _creation(self, value: cst.BaseExpression) -> LabelsMade | Decline | None:
        """Where the labels are made, when that is the obviously right place (see the docstring);
        None for the loss call."""
        base = value.value if isinstance(value, cst.Subscript) else value
        if not isinstance(base, cst.Name):
            return None
        name = base.value
        bound = self._origin(name)
        if bound is None:
            return self._walked_creation(name)
        if isinstance(bound.statement, cst.For):
            made = self._from_dataset(name, bound.statement)
            return made if made is not None else self._walked_creation(name)
        assign = bound.statement
        assigned = assigned_value(assign, name) if isinstance(assign, cst.Assign) else None
        if assigned is None or not isinstance(assign, cst.Assign):
            return self._walked_creation(name)
        made = self._made_by(self.src, assigned, owner_of(self.src, assign))
        if not isinstance(made, LabelsMade):
            return made
        if not self._only_targets(name, assign) or not self._followed_reads_blind(made):
            return None
        return made

    def _walked_creation(self, name: str) -> LabelsMade | Decline | None:
        """Labels made outside the loss's own statements (passed in as a parameter, returned by a
        function of the project), followed back with ``ValueWalk`` through the traced call sites'
        arguments and the functions' returns to the torch call that writes their dtype. The fix
        goes there when every read of the labels from there on ends as a class target of a loss
        (the failing call among them) or dtype-blind: then one cast serves every loss call."""
        if self.evidence is None:
            return None
        walk = ValueWalk(self.failure, self.evidence, self.sources, self._at_walked_call)
        result = walk.follow_name_at(self.frame, name)
        if result is None:
            return None
        made = self._walked.get(id(result.call if isinstance(result, Made) else result.node))
        if isinstance(made, Decline) or not isinstance(result, Made) or made is None:
            return made if isinstance(made, Decline) else None
        if not self._fed_from(made) and not self._fed_by_framework(walk, made):
            return None
        return replace(made, through=result.trail)

    def _fed_by_framework(self, walk: ValueWalk, made: LabelsMade) -> bool:
        """Labels a framework hands the failing function as one key of its batch (Hugging Face's
        Trainer calls ``forward(**batch)``), made in the Dataset item that key is returned from:
        the fix goes there when the function reads them only as the failing loss's class target
        (or dtype-blind) and the Dataset reads them only to return them."""
        if walk.framework_batch is None or walk.getitem is None:
            return False
        hook_file, hook, key = walk.framework_batch
        item_file, returned = walk.getitem
        if hook_file.src.path != self.src.path or item_file.src is not made.src or not isinstance(returned.value, cst.Dict):
            return False
        element = next(
            (e.value for e in returned.value.elements
             if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key),
            None,
        )
        getitem = item_file.enclosing(returned, cst.FunctionDef)
        cls = item_file.enclosing(getitem, cst.ClassDef) if getitem is not None else None
        if element is None or not isinstance(getitem, cst.FunctionDef) or not isinstance(cls, cst.ClassDef):
            return False
        self._reached = set()
        return (
            self._reads_blind(self.src, hook, key) and id(self.loss.call) in self._reached
            and dataset_reads_blind(made.src, cls, getitem, element, made) and self._followed_reads_blind(made)
        )

    def _at_walked_call(
        self, walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        """The walk's say at a call: the creation that writes the labels' dtype ends it, a move or
        reshape (``y.to(device)``, ``.squeeze(1)``) passes through, anything else is the walk's."""
        func = call.func
        if qualified is None and isinstance(func, cst.Attribute):
            moves = func.attr.value in MOVES and keyword_arg(call, "dtype") is None and all(
                a.keyword is not None or is_device_like(a.value) for a in call.args
            )
            if moves or func.attr.value in KEEPS_DTYPE:
                return walk.resolve(func.value, ctx, path, trail)
        if path:
            return None  # an item or element of what the call gives: the walk's rules
        made = self._made_by_step(ctx.file.src, call, ctx.function or ctx.file.src.module, 0)
        if made is None:
            return None
        self._walked[id(call)] = made
        if isinstance(made, Decline):
            return Lost(made.reason, ctx.file, call, trail=trail)
        return Made(call, ctx.file, trail, "creation")

    def _fed_from(self, made: LabelsMade) -> bool:
        """Whether the labels, read forward from their creation (through the names they are bound
        to, the parameters they are passed as, the returns that hand them back), are read only as
        class targets or dtype-blind, and feed the failing loss call."""
        src = made.src
        parents = src.wrapper.resolve(ParentNodeProvider)
        self._reached = set()
        losses = self._losses_in(src, owner_of(src, made.call))
        blind = self._blind(made.call, parents, losses, self._onward(src, 0, ""), self._reached)
        return blind and id(self.loss.call) in self._reached

    def _origin(self, name: str) -> Event | None:
        """The binding that made ``name`` before the loss call, past moves to a device
        (``labels = labels.to(device)``, ``x, y = x.cuda(), y.cuda()``)."""
        bindings = [
            e for e in events(self.src.statements_of(self.loss.statement_line))
            if e.kind == "bind" and e.name == name and self.src.line(e.statement) < self.loss.statement_line
        ]
        while bindings:
            last = bindings.pop()
            if not device_moves(last, name):
                return last
        return None

    def _made_by(
        self, src: Source, node: cst.BaseExpression | None, scope: cst.CSTNode, depth: int = 0
    ) -> LabelsMade | Decline | None:
        """The torch call that gives ``node`` its dtype, followed through names bound once, indexing
        and ``self.`` attributes: ``torch.tensor(..., dtype=torch.float32)``, a ``torch.full`` of a
        whole-number fill value, ``.type(torch.float)``, ``.float()``."""
        if node is None or depth > 5:
            return None
        made = self._made_by_step(src, node, scope, depth)
        return replace(made, followed=made.followed | {id(node)}) if isinstance(made, LabelsMade) else made

    def _made_by_step(
        self, src: Source, node: cst.BaseExpression, scope: cst.CSTNode, depth: int
    ) -> LabelsMade | Decline | None:
        if isinstance(node, cst.Subscript):  # labels[idx]: indexing keeps the dtype
            return self._made_by(src, node.value, scope, depth + 1)
        if isinstance(node, cst.Name):
            value = binding_before(src, scope, node)
            if value is None:
                return None
            made = self._made_by(src, value, scope, depth + 1)
            if not isinstance(made, LabelsMade):
                return made
            return replace(made, names=(*made.names, (scope, node.value, src.line(value))))
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            assigned = self_assignment(src, node)
            if assigned is None:
                return None
            value, method = assigned
            made = self._made_by(src, value, method, depth + 1)
            return replace(made, attributes=(*made.attributes, node.attr.value)) if isinstance(made, LabelsMade) else made
        if not isinstance(node, cst.Call):
            return None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in MOVES and not keyword_arg(node, "dtype") \
                and not any(a.keyword is None and not is_device_like(a.value) for a in node.args):
            return self._made_by(src, node.func.value, scope, depth + 1)  # labels.to(device): the same dtype
        qualified = src.imports.qualify(node.func)
        where = place_in(src.path, src.line(node))
        if self.want == "float":
            return self._made_float(src, node, qualified, where)
        if is_torch_name(qualified, *CONTINUOUS):
            return self.decline(
                f"the targets are made at {where} by `{one_line(src.module, node)}`: continuous random values (a "
                "regression target), not class indices; .long() would make them mostly 0 and -1",
                diagnosis="for class labels make integer indices (torch.randint(num_classes, (n,))); for real-valued "
                "targets use a regression loss (nn.MSELoss, nn.L1Loss)",
            )
        probabilities = is_torch_name(qualified, *PROBABILITIES) or (
            qualified is None and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("sigmoid", "softmax")
        )
        if probabilities:
            return self.decline(
                f"the targets are made at {where} by `{one_line(src.module, node)}`: probabilities, not class indices; "
                ".long() would make (nearly) every one of them class 0",
                diagnosis="for one probability per sample use nn.BCEWithLogitsLoss on a single logit; for class "
                "probabilities of the input's shape pass them to F.cross_entropy as they are (torch 1.10+)",
            )
        if is_torch_name(qualified, "torch.tensor", "torch.as_tensor", "torch.full"):
            dtype = keyword_arg(node, "dtype")
            if dtype is None:
                fill = argument(node, 1, "fill_value")
                if not is_torch_name(qualified, "torch.full") or fill is None:
                    return None
                filled = self._fill_value(src, fill.value)
                if filled is None:
                    return None
                if not filled.is_integer():
                    return self.decline(
                        f"the targets are made at {where} as torch.full(..., {one_line(src.module, fill.value)}) = {filled:g}: "
                        "a probability (a smoothed label), not a class index; .long() would make every label 0",
                        diagnosis="for one 0..1 target per sample use nn.BCEWithLogitsLoss with a single logit; for class "
                        "indices fill with a whole class number and dtype=torch.long",
                    )
                if not isinstance(node.func, cst.Attribute):
                    return None  # `full` imported bare: no torch prefix to write the dtype with
                prefix = one_line(src.module, node.func.value)
                return LabelsMade(src, node, "add-dtype", f"{prefix}.long", where, f"dtype={prefix}.long added")
            return self._dtype_keyword(src, node, dtype.value, where)
        return self._retyped(src, node, where)

    def _dtype_keyword(self, src: Source, node: cst.Call, dtype: cst.BaseExpression, where: str) -> LabelsMade | Decline | None:
        """A creation's ``dtype=`` value replaced by the dtype the loss wants."""
        written = (self._written_dtype if self.want == "long" else self._float_dtype)(src, dtype, where)
        if not isinstance(written, str):
            return written
        return LabelsMade(src, node, "dtype-keyword", written, where, f"dtype={one_line(src.module, dtype)} -> {written}")

    def _retyped(self, src: Source, node: cst.Call, where: str) -> LabelsMade | Decline | None:
        """``.type(torch.float)`` -> ``.type(torch.long)``, ``.float()`` -> ``.long()`` (and the
        reverse for a float-target loss)."""
        if not isinstance(node.func, cst.Attribute):
            return None
        called = node.func.attr.value
        if called == "type" and len(node.args) == 1 and node.args[0].keyword is None:
            written = (self._written_dtype if self.want == "long" else self._float_dtype)(src, node.args[0].value, where)
            if not isinstance(written, str):
                return written
            was = one_line(src.module, node.args[0].value)
            return LabelsMade(src, node, "type-arg", written, where, f".type({was}) -> .type({written})")
        methods, method = (("float", "double", "half"), "long") if self.want == "long" else (INTEGER_METHODS, "float")
        if called in methods and not node.args:
            return LabelsMade(src, node, "method", method, where, f".{called}() -> .{method}()")
        return None

    def _made_float(self, src: Source, node: cst.Call, qualified: str | None, where: str) -> LabelsMade | Decline | None:
        """For a float-target loss (BCE): the torch call that makes the integer labels, and its
        float twin in the code's own words: ``dtype=torch.long`` -> ``dtype=torch.float``
        (``torch.int64`` -> ``torch.float32``), ``torch.full`` of a whole-number fill value (an
        int64 tensor) or ``torch.tensor`` of integers gets ``dtype=torch.float``, ``.long()``
        ``.float()``, ``.type(torch.long)`` ``.type(torch.float)``."""
        high = randint_high(node) if is_torch_name(qualified, "torch.randint") else None
        if high is not None and high > 2:
            return self.decline(
                f"the targets are made at {where} by `{one_line(src.module, node)}`: integers up to {high - 1}, not 0/1 "
                "labels; as floats they would be targets outside [0, 1], which BCE takes as probabilities",
                diagnosis=f"for one of {high} classes per sample use nn.CrossEntropyLoss with the integer labels; for "
                "0/1 targets make them with torch.randint(0, 2, ...)",
            )
        if is_torch_name(qualified, *FACTORIES):
            dtype = keyword_arg(node, "dtype")
            if dtype is not None:
                return self._dtype_keyword(src, node, dtype.value, where)
            if not is_torch_name(qualified, "torch.full", "torch.tensor", "torch.as_tensor", "torch.randint") \
                    or not isinstance(node.func, cst.Attribute):
                return None  # made float already, or `full` imported bare: no torch prefix to write the dtype with
            prefix = one_line(src.module, node.func.value)
            return LabelsMade(src, node, "add-dtype", f"{prefix}.float", where, f"dtype={prefix}.float added")
        return self._retyped(src, node, where)

    def _float_dtype(self, src: Source, dtype: cst.BaseExpression, where: str) -> str | Decline | None:
        """``torch.float`` (``torch.float32`` for a sized name) in the prefix the code writes, for
        an integer dtype written out."""
        if not isinstance(dtype, cst.Attribute):
            return None
        written = src.imports.qualify(dtype)
        name = dtype_name(written) if written is not None and written.startswith("torch.") else None
        if name is None:
            return None
        if name.startswith(("float", "bfloat")):
            return self.decline(
                f"the labels are made with dtype {one_line(src.module, dtype)} at {where}, yet were {self.found} at "
                f"{self.where}: the source changed since the run"
            )
        if not name.startswith(("int", "uint")) and name != "bool":
            return None
        sized = any(ch.isdigit() for ch in dtype.attr.value)
        return f"{one_line(src.module, dtype.value)}.{'float32' if sized else 'float'}"

    def _written_dtype(self, src: Source, dtype: cst.BaseExpression, where: str) -> str | Decline | None:
        """``torch.long`` in the prefix the code writes, for a floating dtype written out."""
        if not isinstance(dtype, cst.Attribute):
            return None
        written = src.imports.qualify(dtype)
        name = dtype_name(written) if written is not None and written.startswith("torch.") else None
        if name is None:
            return None
        if name == "int64":
            return self.decline(
                f"the labels are made with dtype {one_line(src.module, dtype)} at {where}, yet were {self.found} at "
                f"{self.where}: the source changed since the run"
            )
        if not name.startswith(("float", "bfloat")):
            return None
        return f"{one_line(src.module, dtype.value)}.long"

    def _fill_value(self, src: Source, fill: cst.BaseExpression) -> float | None:
        """A fill value's number where it is written (``real_label = 1.``), or None."""
        written = written_at(self.sources, str(src.path), fill)
        if written is None or not isinstance(written.node, cst.Float | cst.Integer):
            return None
        return float(written.node.evaluated_value)

    def _from_dataset(self, name: str, loop: cst.For) -> LabelsMade | Decline | None:
        """Labels unpacked from a loader (``for x, y in loader``): made where the project's one
        Dataset's ``__getitem__`` returns them, if every loop that unpacks them reads them only
        as class targets (or dtype-blind)."""
        elements = unpacked_names(loop.target)
        if elements is None or name not in elements:
            return None
        position, arity = elements.index(name), len(elements)
        datasets = [
            (other, cls, getitem, returned)
            for other in project_sources(self.sources, self.src)
            for cls in walk(other.module) if isinstance(cls, cst.ClassDef)
            for getitem in methods_named(cls, "__getitem__")
            if (returned := returned_tuple(getitem, arity)) is not None
        ]
        if len(datasets) != 1:
            return None  # no Dataset of the project, or several: which one the loader reads is not known
        other, cls, getitem, returned = datasets[0]
        element = returned.elements[position].value
        made = self._made_by(other, element, getitem)
        if not isinstance(made, LabelsMade):
            return made
        for loop_src in project_sources(self.sources, self.src):
            for each in walk(loop_src.module):
                if not isinstance(each, cst.For):
                    continue
                unpacked = unpacked_names(each.target)
                if unpacked is None or len(unpacked) != arity or unpacked[position] is None:
                    continue
                if not self._reads_blind(loop_src, owner_of(loop_src, each), str(unpacked[position])):
                    return None
        if not dataset_reads_blind(other, cls, getitem, element, made) or not self._followed_reads_blind(made):
            return None
        return made

    def _blind(
        self, read: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode], losses: set[int], onward: Onward | None = None,
        reached: set[int] | None = None,
    ) -> bool:
        """``blind_or_target`` for this loss: for float targets an in-place ``labels.fill_(v)``
        statement too (the DCGAN step refills one label tensor for its real and fake passes);
        not for class indices, where a fill of 0.9 into int64 labels would be lost."""
        return blind_or_target(read, parents, losses, onward, reached, fills=self.want == "float")

    def _followed_reads_blind(self, made: LabelsMade) -> bool:
        """Whether each name the labels were followed through (``labels = torch.tensor(...)``,
        ``train_labels = labels[:800]``) is read after its binding only on the way to the loss,
        as a class target, or dtype-blind: a read as numbers elsewhere keeps the fix at the loss."""
        src = made.src
        parents = src.wrapper.resolve(ParentNodeProvider)
        for scope, name, bound_line in made.names:
            losses = self._losses_in(src, scope)
            onward = self._onward(src, 0, name)
            for read in name_reads(scope, name):
                if src.line(read) <= bound_line or id(read) in made.followed:
                    continue
                if isinstance(parents.get(read), cst.AssignTarget):
                    continue
                if not self._blind(read, parents, losses, onward):
                    return False
        return True

    def _reads_blind(self, src: Source, owner: cst.CSTNode, name: str, depth: int = 0) -> bool:
        """Whether every read of ``name`` in ``owner`` is a class-index loss's target or dtype-blind."""
        parents = src.wrapper.resolve(ParentNodeProvider)
        losses = self._losses_in(src, owner)
        bound = {id(n) for each in walk(owner) for n in bound_names(each)}
        onward = self._onward(src, depth, name)
        return all(
            self._blind(read, parents, losses, onward, self._reached)
            for read in name_reads(owner, name) if id(read) not in bound
        )

    def _losses_in(self, src: Source, owner: cst.CSTNode) -> set[int]:
        """The calls in ``owner`` that take the dtype wanted: the failing loss's callee, a torch
        index loss (a float-target loss for ``.float()``)."""
        wanted = INDEX_LOSSES if self.want == "long" else FLOAT_TARGET_LOSSES
        return {
            id(c) for c in calls_in(owner)
            if (src.path == self.src.path and same_callee(src, c, self.loss.call))
            or loss_name(c, src.imports, Scope()) in wanted
        }

    def _onward(self, src: Source, depth: int, name: str) -> Onward:
        """Follows labels passed on: into a torch comparison (blind), into a parameter of one of the
        project's module-level functions (``accuracy_fn(y_true=labels, ...)``), or bound to another
        name (``test_labels = labels[800:]``), whose reads must then be blind too, or returned by
        one of those functions (to the names its callers unpack them into)."""

        def onward(node: cst.CSTNode, arg: cst.Arg | str | int) -> bool:
            if depth > 6:
                return False
            if isinstance(arg, int):
                return isinstance(node, cst.Return) and self._returned_blind(src, node, arg, depth)
            if isinstance(arg, str):  # bound to a name: the same labels moved (checked already), or another
                return arg == name or self._reads_blind(src, owner_of(src, node), arg, depth + 1)
            if not isinstance(node, cst.Call):
                return False
            if is_torch_name(src.imports.qualify(node.func), *COMPARES):
                return True
            if not isinstance(node.func, cst.Name) or arg.star:
                return False
            functions = [
                f for f in src.module.body if isinstance(f, cst.FunctionDef) and f.name.value == node.func.value
            ]
            if len(functions) != 1:
                return False
            names = parameter_names(functions[0])
            if arg.keyword is not None:
                param = arg.keyword.value
            else:
                position = [a for a in node.args if a.keyword is None].index(arg)
                param = names[position] if position < len(names) else ""
            return param in names and self._reads_blind(src, functions[0], param, depth + 1)

        return onward

    def _returned_blind(self, src: Source, returned: cst.Return, position: int, depth: int) -> bool:
        """Whether labels returned by a module-level function (its whole value, or element
        ``position`` of a returned tuple) are read only blind where every caller binds them:
        ``x, y = dummy_data(...)`` -> the reads of ``y``."""
        function = owner_of(src, returned)
        if not isinstance(function, cst.FunctionDef) or function not in src.module.body:
            return False  # a method or a nested function: who calls it is not known here
        name = function.name.value
        parents = src.wrapper.resolve(ParentNodeProvider)
        calls = [n for n in walk(src.module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == name]
        elsewhere = any(
            isinstance(n, cst.Name) and n.value == name
            for other in project_sources(self.sources, src) if other.path != src.path for n in walk(other.module)
        )
        if not calls or elsewhere:
            return False
        for call in calls:
            assign = parents.get(call)
            if not isinstance(assign, cst.Assign) or assign.value is not call or len(assign.targets) != 1:
                if position != -1 or not self._blind(
                    call, parents, self._losses_in(src, owner_of(src, call)), self._onward(src, depth + 1, ""), self._reached
                ):
                    return False
                continue
            target = assign.targets[0].target
            if position == -1:
                bound = target.value if isinstance(target, cst.Name) else None
            else:
                unpacked = unpacked_names(target)
                bound = unpacked[position] if unpacked is not None and 0 <= position < len(unpacked) else None
            if bound is None or not self._reads_blind(src, owner_of(src, assign), bound, depth + 1):
                return False
        return True

    def _only_targets(self, name: str, assign: cst.Assign) -> bool:
        """Whether every read of ``name`` in its scope is a loss target or dtype-blind."""
        parents = self.src.wrapper.resolve(ParentNodeProvider)
        owner = owner_of(self.src, assign)
        target_values = {id(self.loss.call)}
        for candidate in calls_in(owner):
            if candidate is self.loss.call or same_callee(self.src, candidate, self.loss.call):
                target_values.add(id(candidate))
        bound = {id(n) for each in walk(owner) for n in bound_names(each)}
        for read in name_reads(owner, name):
            if id(read) in bound:
                continue
            if not self._blind(read, parents, target_values, self._onward(self.src, 0, name), self._reached):
                return False
        return True

    # the answers ---------------------------------------------------------------------------
    def _site_at_call(self, code: str, target: DescribedValue | None, loss: str) -> Site:
        traced = self._traced_text(code, target)
        applicability = self._applicability()
        method = self.want
        if method == "long":
            why = f"{loss} takes class indices as int64"
        else:
            why = f"{loss} takes float targets"
        return Site(
            pattern=self.pattern.ID,
            file=str(self.src.path),
            span=self.loss.span,
            rewrite=TargetMethod(method),
            summary=f"Added .{method}() to the target `{code}` at the {loss} call at {self.where}: it was {self.found}"
            f"{traced}, and {why}",
            applicability=applicability,
            evidence=self._evidence(code, target, loss, "loss-call"),
            evidence_text=f"{loss} at {self.where} got {a_or_an(self.found)} target{traced}; converted at the loss call",
            notes=self._notes(),
        )

    def _site_at_creation(self, made: LabelsMade, code: str, target: DescribedValue | None, loss: str) -> Site:
        span = made.src.positions[made.call]
        traced = self._traced_text(code, target)
        through = f" (through self.{', self.'.join(made.attributes)})" if made.attributes else ""
        if made.through:
            fed = f"the {len(self._reached)} loss calls they feed" if len(self._reached) > 1 else "the loss call"
            through = f" (followed back: {'; '.join(made.through)}; one cast for {fed})"
        return Site(
            pattern=self.pattern.ID,
            file=str(made.src.path),
            span=span,
            rewrite=CreationDtype(made.edit, made.dtype),
            summary=f"Made the {'class labels int64' if self.want == 'long' else 'labels floating point'} where they are "
            f"created at {made.where} ({made.how}): they reached the {loss} call at {self.where} as {self.found}{traced}, "
            f"and the code reads them only as {'class ' if self.want == 'long' else ''}targets (and in comparisons and counts)",
            applicability=self._applicability(),
            evidence=self._evidence(code, target, loss, "creation"),
            evidence_text=f"{loss} at {self.where} got {a_or_an(self.found)} target{traced}; the labels are made once at "
            f"{made.where}{through}, and read only as {'class ' if self.want == 'long' else ''}targets, in comparisons and "
            "in counts",
            notes=self._notes(),
        )

    def _applicability(self) -> Applicability:
        floating = (dtype_name(self.found) or "").startswith(("float", "bfloat"))
        return Applicability.UNSAFE if self.want == "long" and floating else Applicability.SAFE

    def _notes(self) -> tuple[str, ...]:
        if self._applicability() is Applicability.UNSAFE:
            return (
                "Converting float labels to int64 truncates: they must be whole numbers (class indices 0 .. C-1); the run "
                "did not check their values.",
            )
        return ()

    def _traced_text(self, code: str, target: DescribedValue | None) -> str:
        if target is None:
            return ""
        shape = target.shape
        return f" (`{code}` traced as {shape_text(shape) if shape is not None else '?'} {target.dtype})"

    def _evidence(self, code: str, target: DescribedValue | None, loss: str, where: str) -> dict[str, Any]:
        return {
            "loss": loss,
            "call": self.where,
            "found_dtype": dtype_name(self.found) or self.found,
            "wanted": "int64" if self.want == "long" else "floating point",
            "target": {"argument": code, **(target.quoted("shape", "dtype") if target else {})},
            "fixed_at": where,
        }
