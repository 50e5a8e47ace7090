"""target-dtype: class targets of the wrong dtype given to a loss (float labels to cross_entropy)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import ParentNodeProvider

from repairbot.analysis import (
    Event,
    Source,
    argument,
    assigned_value,
    bound_once,
    dtype_name,
    events,
    has_star_args,
    is_torch_name,
    keyword_arg,
    last_binding,
    loss_call_at,
    loss_name,
    name_reads,
    one_line,
    own_nodes,
    place,
    place_in,
    shape_text,
    source,
    walk,
)
from repairbot.codemod import append_keyword, method_call, replace_arg_value
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import DescribedValue, Evidence, Scope
from repairbot.pattern import Pattern, phrase, signature
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
from repairbot.sources import Sources, report_path
from repairbot.torch_semantics import is_loss_name
from repairbot.types import Applicability, Decline, Failure, Frame, Span

# Answers whether labels passed on stay dtype-blind: an argument of a call (the call, the Arg), a
# value bound to a name (the statement, the name), or a returned value (the Return, its position
# in the returned tuple, -1 for the whole value).
Onward = Callable[[cst.CSTNode, cst.Arg | str | int], bool]

_INTEGER = r"(?:Long|Int|Short|Byte|Char|Bool)"
_FLOATING = r"(?:Float|Double|Half|BFloat16)"

# Losses that take class indices (int64), by the names their calls and torch frames use.
_INDEX_LOSSES = frozenset({
    "cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss", "nll_loss2d", "NLLLoss2d",
    "nll_loss_nd", "multi_margin_loss", "MultiMarginLoss",
})
# Take class probabilities of the input's shape as well (torch 1.10+).
_PROBABILITY_LOSSES = frozenset({"cross_entropy", "CrossEntropyLoss"})
# Takes class indices too, but as (N, C) rows padded with -1: a float (N, C) target there is
# almost always a multi-hot vector meant for another loss.
_MULTILABEL_MARGIN = frozenset({"multilabel_margin_loss", "MultiLabelMarginLoss"})
# Losses that take float targets (probabilities, values) and refuse integer ones.
_FLOAT_TARGET_LOSSES = frozenset({
    "binary_cross_entropy", "BCELoss", "binary_cross_entropy_with_logits", "BCEWithLogitsLoss",
    "huber_loss", "HuberLoss", "kl_div", "KLDivLoss",
})
# torch factories that write a dtype= (the float-target creation fix).
_FACTORIES = (
    "torch.tensor", "torch.as_tensor", "torch.full", "torch.ones", "torch.zeros", "torch.empty",
    "torch.ones_like", "torch.zeros_like", "torch.full_like", "torch.randint", "torch.arange",
)
# Conversions to an integer dtype, renamed .float() for a float-target loss.
_INTEGER_METHODS = frozenset({"long", "int", "short", "byte", "bool"})
# Reads of a labels tensor that work the same whatever its dtype (for the creation-site fix).
_COUNTS = frozenset({"size", "numel", "dim", "shape", "device", "ndim", "dtype"})  # no tensor comes out
_MOVES = frozenset({"to", "cuda", "cpu"})  # the same labels on another device
# Methods that give the labels back in another shape with their dtype (followed to where they are made).
_KEEPS_DTYPE = frozenset({"squeeze", "unsqueeze", "view", "reshape", "flatten", "clone", "detach", "contiguous"})
# torch functions whose result does not depend on the labels' dtype (an accuracy's comparison).
# torch factories of continuous random values: targets made by them are regression values, not classes.
_CONTINUOUS = ("torch.randn", "torch.rand", "torch.normal", "torch.randn_like", "torch.rand_like")
# Probabilities (of a sigmoid or softmax): soft or BCE targets, which .long() would make class 0.
_PROBABILITIES = ("torch.sigmoid", "torch.softmax", "torch.nn.functional.softmax", "torch.nn.functional.sigmoid")
_COMPARES = ("torch.eq", "torch.ne", "torch.equal", "torch.lt", "torch.le", "torch.gt", "torch.ge")


@dataclass(frozen=True)
class TargetMethod(Rewrite):
    """``.long()`` (or ``.float()``) on the target argument of the loss call at the site."""

    method: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, 1, "target")
        if target is None:
            raise EditError("no target argument")
        return [Edit(call, replace_arg_value(call, target, method_call(target.value, self.method)))]


@dataclass(frozen=True)
class CreationDtype(Rewrite):
    """At a creation call: the ``dtype=`` keyword's value replaced (``dtype-keyword``) or added
    (``add-dtype``), the ``.type(...)`` argument replaced (``type-arg``), or the conversion
    method renamed (``method``)."""

    action: str  # dtype-keyword, add-dtype, type-arg, method
    dtype: str  # the dtype's code (torch.long), or the method (long)

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        if self.action == "method":
            if not isinstance(call.func, cst.Attribute) or call.args:
                raise EditError("not a conversion method call")
            return [Edit(call, call.with_changes(func=call.func.with_changes(attr=cst.Name(self.dtype))))]
        dtype = cst.parse_expression(self.dtype)
        if self.action == "add-dtype":
            if keyword_arg(call, "dtype") is not None:
                raise EditError("the call has a dtype= already")
            return [Edit(call, append_keyword(call, "dtype", dtype))]
        written = keyword_arg(call, "dtype") if self.action == "dtype-keyword" else argument(call, 0, "dtype")
        if written is None:
            raise EditError("no dtype argument")
        return [Edit(call, replace_arg_value(call, written, dtype))]


class TargetDtype(Pattern):
    """Converts the loss's targets to the dtype the loss takes: ``.long()`` on class indices (``.float()`` for BCE).

    What it fixes:
        Class labels that reach ``nn.CrossEntropyLoss`` / ``F.cross_entropy`` / ``nll_loss`` (or
        ``multi_margin_loss``) as floats or int32: read from a CSV or a numpy array with the
        features (``np.loadtxt`` gives float64), made with ``dtype=torch.float32``, or int32
        from ``np.int32`` data. Also the reverse family: 0/1 labels that reach ``nn.BCELoss``,
        ``nn.BCEWithLogitsLoss`` or ``nn.HuberLoss`` as integers (``torch.long``), which these
        losses refuse; they get ``.float()``.

    Why it fails:
        Class targets are indices and must be int64: ``RuntimeError: expected target dtype to
        be Long or Byte, but got Float`` (2.x), ``expected scalar type Long but found Float``
        (``Int``, ``Double``; 1.5 to 1.13), ``Expected object of scalar type Long but got
        scalar type Float for argument #2 'target'`` (up to 1.4), and on a GPU
        ``"nll_loss_forward_reduce_cuda_kernel_2d_index" not implemented for 'Float'``. BCE
        takes float targets: ``Found dtype Long but expected Float`` (BCELoss, HuberLoss),
        ``result type Float can't be cast to the desired output type Long``
        (BCEWithLogitsLoss; recognised only with its frames, since in-place arithmetic on an
        integer tensor says the same).

    Example:
        ``loss = criterion(logits, labels)`` with ``labels`` traced as ``[2] float32`` becomes
        ``loss = criterion(logits, labels.long())``. The fix goes on the loss call, the one
        place that needs int64, so that other uses of the labels (accuracy, metrics) are left
        as they were. Only when the labels are made once, by a torch call that writes their
        dtype, and are read nowhere but as class targets (and in comparisons, ``len()``,
        ``.size()``/``.shape``) is the creation the obviously right place, once for every epoch
        that reuses the tensor: ``torch.tensor(rows, dtype=torch.float32)`` gets
        ``dtype=torch.long``, ``torch.full((b,), real_label)`` of a whole-number fill value
        (followed to where it is written, ``real_label = 1.``) gets ``dtype=torch.long`` added,
        ``.type(torch.float)`` becomes ``.type(torch.long)`` and ``.float()`` ``.long()``.
        Labels unpacked from a loader (``for x, y in loader``) are followed into the project's
        one Dataset's ``__getitem__`` (``return self.x[i], self.y[i]`` -> ``self.y = ...``) when
        every loop that unpacks them reads them only that way and the Dataset only returns them.
        Labels that reach the loss as a function's parameter or a function's return value are
        followed back (``ValueWalk``: the traced call site's argument, the one ``return``) to the
        call that makes them (``y = torch.randint(...).squeeze(1).float()`` in ``dummy_data()``
        -> ``.long()``), and cast there when, read forward from there through the names, parameters
        and returns they pass, they feed only class-index losses (the failing call among them)
        and dtype-blind reads: one cast for every loss call. Labels also read as numbers
        elsewhere (a regression loss, arithmetic) keep the fix at the loss call. The same holds
        for integer labels of a float-target loss (a GAN's real and fake labels given to
        ``nn.BCELoss`` at several calls): ``torch.ones(b, 1, dtype=torch.int64)`` gets
        ``dtype=torch.float32`` (``torch.long`` -> ``torch.float``), ``torch.full((b,),
        real_label)`` of a whole-number fill value gets ``dtype=torch.float`` added, ``.long()``
        becomes ``.float()``; an in-place ``label.fill_(fake_label)`` between the loss calls
        reads them blind there. Labels also read as integers (``torch.bincount(labels)``) keep
        ``.float()`` at the loss call.

    Fix safety:
        Safe for integer targets (int32 to int64, or 0/1 integers to float, lose nothing).
        Unsafe for float class labels: ``.long()`` truncates, which is right for labels that are
        whole numbers (``2.0``), the usual case, but the run does not check the values.

    Not handled:
        Float targets of the input's own shape (class probabilities or one-hot rows: soft labels,
        which ``cross_entropy`` accepts since 1.10, but ``nll_loss`` does not), targets that
        require grad (a model's output, not labels), ``torch.full`` labels of a fill value that is
        not a whole number (``0.9``: a smoothed BCE label, which ``.long()`` would make class 0), targets
        made by a sigmoid or softmax (probabilities) or by ``torch.randn``/``torch.rand`` (regression
        values), integer BCE targets made by ``torch.randint`` with a bound above 2 (class
        numbers, not 0/1 labels: as floats they would be targets outside [0, 1]), ``(N, C)`` float targets of
        ``MultiLabelMarginLoss`` (multi-hot rows, meant for ``BCEWithLogitsLoss``), a loss that is
        not a classification loss or cannot be told, and a loss called through another package or
        with ``*args``: declined with the remedy.
    """

    ID = "target-dtype"
    TITLE = "Loss targets of the wrong dtype (float class labels, integer BCE labels)"
    TAGS = frozenset({"dtype", "loss"})
    # the usual case, float class labels, is unsafe (see Fix safety); integer targets are safe
    APPLICABILITY = Applicability.UNSAFE
    SIGNATURES = (
        # 2.x: nll_loss / cross_entropy
        signature("RuntimeError", phrase("expected target dtype to be Long") + r"[^,]*,\s+but\s+got\s+(?P<found>\w+)"),
        # 1.5 to 1.13 (also multi_margin_loss, multilabel_margin_loss in 2.x)
        signature("RuntimeError", r"expected\s+scalar\s+type\s+(?P<expected>Long)\s+but\s+found\s+(?P<found>\w+)"),
        # CUDA: the kernel dispatched on the target's dtype
        signature(
            ("RuntimeError", "NotImplementedError"),
            r"\"(?P<kernel>nll_loss\w*_index)\"\s+not\s+implemented\s+for\s+'(?P<found>\w+)'",
        ),
        # up to 1.4, for class targets (Long expected) and BCE targets (Float expected) alike
        signature(
            "RuntimeError",
            r"Expected\s+object\s+of\s+scalar\s+type\s+(?P<expected>\w+)\s+but\s+got\s+scalar\s+type\s+(?P<found>\w+)"
            r"\s+for\s+argument\s+#\d+\s+'(?P<argument>target)'",
        ),
        # BCELoss / HuberLoss given integer targets (1.6+, then 1.5)
        signature("RuntimeError", rf"Found\s+dtype\s+(?P<found>{_INTEGER})\s+but\s+expected\s+(?P<expected>{_FLOATING})\b"),
        signature("RuntimeError", rf"expected\s+dtype\s+(?P<expected>{_FLOATING})\s+but\s+got\s+dtype\s+(?P<found>{_INTEGER})\b"),
        # BCEWithLogitsLoss given integer targets: only with its frames (see match())
        signature(
            "RuntimeError",
            rf"result\s+type\s+(?P<expected>{_FLOATING})\s+can't\s+be\s+cast\s+to\s+the\s+desired\s+output\s+type\s+"
            rf"(?P<found>{_INTEGER})\b(?P<cast>)",
        ),
    )
    EVIDENCE = frozenset({"locals", "failing_module"})
    # A dtype does not depend on how many samples a batch holds.
    BATCH_INVARIANT = True
    REWRITES = (TargetMethod, CreationDtype)

    def match(self, failure: Failure) -> re.Match[str] | None:
        for sig in self.SIGNATURES:
            found = sig.match(failure.exc_type, failure.message)
            if found is None:
                continue
            if found.groupdict().get("cast") is not None and not any(
                f.function == "binary_cross_entropy_with_logits" for f in failure.frames
            ):
                continue  # `x += 0.5` on an integer tensor says the same
            return found
        return None

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the loss is computed inside a library, not in the project's code")
        found = dtype_name(match["found"]) or match["found"]
        expected = dtype_name(match.groupdict().get("expected")) or "int64"
        want = "long" if expected == "int64" else "float"
        src = source(sources, frame.file)
        if src is None:
            return self.decline(f"cannot read {report_path(Path(frame.file))}", at=frame)
        scope = evidence.scope(frame) if evidence else Scope()
        loss = _LossCall.find(src, frame, failure, scope)
        if isinstance(loss, str):
            return self.decline(loss, diagnosis=_remedy(want, None), at=frame)
        # 1.10+ (the "target dtype" wording): cross_entropy takes a float target of the input's
        # shape as class probabilities, so a float target it refuses is not of the input's shape
        probabilities_accepted = "target dtype" in match.group(0) and loss.name in _PROBABILITY_LOSSES
        return _Locator(
            self, failure, evidence, sources, src, frame, scope, loss, found, want, probabilities_accepted
        ).locate()


def _remedy(want: str, code: str | None) -> str:
    what = f"`{code}`" if code else "the targets"
    if want == "long":
        return f"pass the class indices as int64: {what}.long() at the loss call (or dtype=torch.long where they are made)"
    return f"pass the targets as floats: {what}.float() at the loss call"


# -- the loss call -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _LossCall:
    """The loss call the failure ran, what kind of loss it is, and where its target is."""

    call: cst.Call
    span: Span
    name: str | None  # cross_entropy, CrossEntropyLoss, BCELoss...; None when it cannot be told
    statement_line: int  # the line of the statement that makes the call

    @classmethod
    def find(cls, src: Source, frame: Frame, failure: Failure, scope: Scope) -> _LossCall | str:
        where = place(frame)
        call = _call_at_frame(src, frame, scope)
        if call is None:
            return f"no single call is traced at {where}"
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
            # raised in backward(): the loss is the statement that made the tensor backward() is called on
            target = call.func.value
            bound = last_binding(src, target.value, frame.line) if isinstance(target, cst.Name) else None
            value = bound.value if bound is not None else None
            if not isinstance(value, cst.Call):
                return f"the loss that {where} calls backward() on is not made by a loss call before it"
            call = value
        span = src.positions[call]
        name = loss_name(call, src.imports, scope) or _torch_loss_frame(failure, frame)
        return cls(call, span, name, span.line)


def _call_at_frame(src: Source, frame: Frame, scope: Scope) -> cst.Call | None:
    located = loss_call_at(src.wrapper, src.imports, scope, frame)
    return located.node if located is not None and isinstance(located.node, cst.Call) else None


def _torch_loss_frame(failure: Failure, frame: Frame) -> str | None:
    """The torch loss function the user's call went into, from the frames below it."""
    frames = list(failure.frames)
    if frame not in frames:
        return None
    for deeper in frames[frames.index(frame) + 1 :]:
        if deeper.user:
            return None
        if is_loss_name(deeper.function):
            return deeper.function
    return None


# -- the decision -------------------------------------------------------------------------------


class _Locator:
    def __init__(
        self, pattern: TargetDtype, failure: Failure, evidence: Evidence | None, sources: Sources, src: Source,
        frame: Frame,
        scope: Scope, loss: _LossCall, found: str, want: str, probabilities_accepted: bool,
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
        self._walked: dict[int, _Made | Decline] = {}  # the walk's creation calls, by id, and what they give

    def decline(self, reason: str, diagnosis: str | None = None) -> Decline:
        return self.pattern.decline(reason, diagnosis=diagnosis, at=self.frame)

    def locate(self) -> Site | Decline:
        loss, call, module = self.loss, self.loss.call, self.src.module
        name = loss.name
        if has_star_args(call):
            return self.decline(f"the loss call at {self.where} passes its arguments with * or **", _remedy(self.want, None))
        target_arg = argument(call, 1, "target")
        input_arg = argument(call, 0, "input")
        if target_arg is None or input_arg is None:
            return self.decline(f"the call at {self.where} does not pass a prediction and a target", _remedy(self.want, None))
        code = one_line(module, target_arg.value)
        kind = self._kind(name, code)
        if isinstance(kind, Decline):
            return kind
        target = self._traced(target_arg.value)
        traced_input = self._traced(input_arg.value)
        prediction = _shape(traced_input) if traced_input is not None else self._loss_input()
        refused = self._refuse(code, target, prediction)
        if refused is not None:
            return refused
        if _converted(target_arg.value, self.want):
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
                _remedy(self.want, code),
            )
        if self.want == "long":
            if name in _MULTILABEL_MARGIN:
                return self.decline(
                    f"{name} at {self.where} got {self.found} targets: it takes int64 class indices padded with -1, and a "
                    "float target row is usually a multi-hot vector, which .long() would not turn into indices",
                    diagnosis="for multi-hot float targets use nn.BCEWithLogitsLoss (or nn.MultiLabelSoftMarginLoss); for "
                    "MultiLabelMarginLoss build rows of class indices padded with -1",
                )
            if name not in _INDEX_LOSSES:
                return self.decline(
                    f"{name} at {self.where} is not a classification loss that takes class indices",
                    diagnosis=f"check which argument of {name} needs int64 ({self.found} was given)",
                )
        elif name not in _FLOAT_TARGET_LOSSES:
            return self.decline(
                f"{name} at {self.where} is not a loss that takes float targets", _remedy(self.want, code)
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
        shape = _shape(target)
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
                diagnosis=_remedy(self.want, code) + ", if they are class indices",
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
    def _creation(self, value: cst.BaseExpression) -> _Made | Decline | None:
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
        made = self._made_by(self.src, assigned, _owner(self.src, assign))
        if not isinstance(made, _Made):
            return made
        if not self._only_targets(name, assign) or not self._followed_reads_blind(made):
            return None
        return made

    def _walked_creation(self, name: str) -> _Made | Decline | None:
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
        if not self._fed_from(made):
            return None
        return replace(made, through=result.trail)

    def _at_walked_call(
        self, walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        """The walk's say at a call: the creation that writes the labels' dtype ends it, a move or
        reshape (``y.to(device)``, ``.squeeze(1)``) passes through, anything else is the walk's."""
        func = call.func
        if qualified is None and isinstance(func, cst.Attribute):
            moves = func.attr.value in _MOVES and keyword_arg(call, "dtype") is None and all(
                a.keyword is not None or _is_device_like(a.value) for a in call.args
            )
            if moves or func.attr.value in _KEEPS_DTYPE:
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

    def _fed_from(self, made: _Made) -> bool:
        """Whether the labels, read forward from their creation (through the names they are bound
        to, the parameters they are passed as, the returns that hand them back), are read only as
        class targets or dtype-blind, and feed the failing loss call."""
        src = made.src
        parents = src.wrapper.resolve(ParentNodeProvider)
        self._reached = set()
        losses = self._losses_in(src, _owner(src, made.call))
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
            if not _moves(last, name):
                return last
        return None

    def _made_by(
        self, src: Source, node: cst.BaseExpression | None, scope: cst.CSTNode, depth: int = 0
    ) -> _Made | Decline | None:
        """The torch call that gives ``node`` its dtype, followed through names bound once, indexing
        and ``self.`` attributes: ``torch.tensor(..., dtype=torch.float32)``, a ``torch.full`` of a
        whole-number fill value, ``.type(torch.float)``, ``.float()``."""
        if node is None or depth > 5:
            return None
        made = self._made_by_step(src, node, scope, depth)
        return replace(made, followed=made.followed | {id(node)}) if isinstance(made, _Made) else made

    def _made_by_step(
        self, src: Source, node: cst.BaseExpression, scope: cst.CSTNode, depth: int
    ) -> _Made | Decline | None:
        if isinstance(node, cst.Subscript):  # labels[idx]: indexing keeps the dtype
            return self._made_by(src, node.value, scope, depth + 1)
        if isinstance(node, cst.Name):
            value = _binding_before(src, scope, node)
            if value is None:
                return None
            made = self._made_by(src, value, scope, depth + 1)
            if not isinstance(made, _Made):
                return made
            return replace(made, names=(*made.names, (scope, node.value, src.line(value))))
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            assigned = _self_assignment(src, node)
            if assigned is None:
                return None
            value, method = assigned
            made = self._made_by(src, value, method, depth + 1)
            return replace(made, attributes=(*made.attributes, node.attr.value)) if isinstance(made, _Made) else made
        if not isinstance(node, cst.Call):
            return None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _MOVES and not keyword_arg(node, "dtype") \
                and not any(a.keyword is None and not _is_device_like(a.value) for a in node.args):
            return self._made_by(src, node.func.value, scope, depth + 1)  # labels.to(device): the same dtype
        qualified = src.imports.qualify(node.func)
        where = place_in(src.path, src.line(node))
        if self.want == "float":
            return self._made_float(src, node, qualified, where)
        if is_torch_name(qualified, *_CONTINUOUS):
            return self.decline(
                f"the targets are made at {where} by `{one_line(src.module, node)}`: continuous random values (a "
                "regression target), not class indices; .long() would make them mostly 0 and -1",
                diagnosis="for class labels make integer indices (torch.randint(num_classes, (n,))); for real-valued "
                "targets use a regression loss (nn.MSELoss, nn.L1Loss)",
            )
        probabilities = is_torch_name(qualified, *_PROBABILITIES) or (
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
                return _Made(src, node, "add-dtype", f"{prefix}.long", where, f"dtype={prefix}.long added")
            return self._dtype_keyword(src, node, dtype.value, where)
        return self._retyped(src, node, where)

    def _dtype_keyword(self, src: Source, node: cst.Call, dtype: cst.BaseExpression, where: str) -> _Made | Decline | None:
        """A creation's ``dtype=`` value replaced by the dtype the loss wants."""
        written = (self._written_dtype if self.want == "long" else self._float_dtype)(src, dtype, where)
        if not isinstance(written, str):
            return written
        return _Made(src, node, "dtype-keyword", written, where, f"dtype={one_line(src.module, dtype)} -> {written}")

    def _retyped(self, src: Source, node: cst.Call, where: str) -> _Made | Decline | None:
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
            return _Made(src, node, "type-arg", written, where, f".type({was}) -> .type({written})")
        methods, method = (("float", "double", "half"), "long") if self.want == "long" else (_INTEGER_METHODS, "float")
        if called in methods and not node.args:
            return _Made(src, node, "method", method, where, f".{called}() -> .{method}()")
        return None

    def _made_float(self, src: Source, node: cst.Call, qualified: str | None, where: str) -> _Made | Decline | None:
        """For a float-target loss (BCE): the torch call that makes the integer labels, and its
        float twin in the code's own words: ``dtype=torch.long`` -> ``dtype=torch.float``
        (``torch.int64`` -> ``torch.float32``), ``torch.full`` of a whole-number fill value (an
        int64 tensor) or ``torch.tensor`` of integers gets ``dtype=torch.float``, ``.long()``
        ``.float()``, ``.type(torch.long)`` ``.type(torch.float)``."""
        high = _randint_high(node) if is_torch_name(qualified, "torch.randint") else None
        if high is not None and high > 2:
            return self.decline(
                f"the targets are made at {where} by `{one_line(src.module, node)}`: integers up to {high - 1}, not 0/1 "
                "labels; as floats they would be targets outside [0, 1], which BCE takes as probabilities",
                diagnosis=f"for one of {high} classes per sample use nn.CrossEntropyLoss with the integer labels; for "
                "0/1 targets make them with torch.randint(0, 2, ...)",
            )
        if is_torch_name(qualified, *_FACTORIES):
            dtype = keyword_arg(node, "dtype")
            if dtype is not None:
                return self._dtype_keyword(src, node, dtype.value, where)
            if not is_torch_name(qualified, "torch.full", "torch.tensor", "torch.as_tensor", "torch.randint") \
                    or not isinstance(node.func, cst.Attribute):
                return None  # made float already, or `full` imported bare: no torch prefix to write the dtype with
            prefix = one_line(src.module, node.func.value)
            return _Made(src, node, "add-dtype", f"{prefix}.float", where, f"dtype={prefix}.float added")
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

    def _from_dataset(self, name: str, loop: cst.For) -> _Made | Decline | None:
        """Labels unpacked from a loader (``for x, y in loader``): made where the project's one
        Dataset's ``__getitem__`` returns them, if every loop that unpacks them reads them only
        as class targets (or dtype-blind)."""
        elements = _unpacked(loop.target)
        if elements is None or name not in elements:
            return None
        position, arity = elements.index(name), len(elements)
        datasets = [
            (other, cls, getitem, returned)
            for other in project_sources(self.sources, self.src)
            for cls in walk(other.module) if isinstance(cls, cst.ClassDef)
            for getitem in _methods(cls, "__getitem__")
            if (returned := _returned_tuple(getitem, arity)) is not None
        ]
        if len(datasets) != 1:
            return None  # no Dataset of the project, or several: which one the loader reads is not known
        other, cls, getitem, returned = datasets[0]
        element = returned.elements[position].value
        made = self._made_by(other, element, getitem)
        if not isinstance(made, _Made):
            return made
        for loop_src in project_sources(self.sources, self.src):
            for each in walk(loop_src.module):
                if not isinstance(each, cst.For):
                    continue
                unpacked = _unpacked(each.target)
                if unpacked is None or len(unpacked) != arity or unpacked[position] is None:
                    continue
                if not self._reads_blind(loop_src, _owner(loop_src, each), str(unpacked[position])):
                    return None
        if not _dataset_reads_blind(other, cls, getitem, element, made) or not self._followed_reads_blind(made):
            return None
        return made

    def _blind(
        self, read: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode], losses: set[int], onward: Onward | None = None,
        reached: set[int] | None = None,
    ) -> bool:
        """``_blind_or_target`` for this loss: for float targets an in-place ``labels.fill_(v)``
        statement too (the DCGAN step refills one label tensor for its real and fake passes);
        not for class indices, where a fill of 0.9 into int64 labels would be lost."""
        return _blind_or_target(read, parents, losses, onward, reached, fills=self.want == "float")

    def _followed_reads_blind(self, made: _Made) -> bool:
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
        bound = {id(n) for each in walk(owner) for n in _bound_names(each)}
        onward = self._onward(src, depth, name)
        return all(
            self._blind(read, parents, losses, onward, self._reached)
            for read in name_reads(owner, name) if id(read) not in bound
        )

    def _losses_in(self, src: Source, owner: cst.CSTNode) -> set[int]:
        """The calls in ``owner`` that take the dtype wanted: the failing loss's callee, a torch
        index loss (a float-target loss for ``.float()``)."""
        wanted = _INDEX_LOSSES if self.want == "long" else _FLOAT_TARGET_LOSSES
        return {
            id(c) for c in _calls_in(owner)
            if (src.path == self.src.path and _same_callee(src, c, self.loss.call))
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
                return arg == name or self._reads_blind(src, _owner(src, node), arg, depth + 1)
            if not isinstance(node, cst.Call):
                return False
            if is_torch_name(src.imports.qualify(node.func), *_COMPARES):
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
        function = _owner(src, returned)
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
                    call, parents, self._losses_in(src, _owner(src, call)), self._onward(src, depth + 1, ""), self._reached
                ):
                    return False
                continue
            target = assign.targets[0].target
            if position == -1:
                bound = target.value if isinstance(target, cst.Name) else None
            else:
                unpacked = _unpacked(target)
                bound = unpacked[position] if unpacked is not None and 0 <= position < len(unpacked) else None
            if bound is None or not self._reads_blind(src, _owner(src, assign), bound, depth + 1):
                return False
        return True

    def _only_targets(self, name: str, assign: cst.Assign) -> bool:
        """Whether every read of ``name`` in its scope is a loss target or dtype-blind."""
        parents = self.src.wrapper.resolve(ParentNodeProvider)
        owner = _owner(self.src, assign)
        target_values = {id(self.loss.call)}
        for candidate in _calls_in(owner):
            if candidate is self.loss.call or _same_callee(self.src, candidate, self.loss.call):
                target_values.add(id(candidate))
        bound = {id(n) for each in walk(owner) for n in _bound_names(each)}
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
            evidence_text=f"{loss} at {self.where} got {_an(self.found)} target{traced}; converted at the loss call",
            notes=self._notes(),
        )

    def _site_at_creation(self, made: _Made, code: str, target: DescribedValue | None, loss: str) -> Site:
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
            evidence_text=f"{loss} at {self.where} got {_an(self.found)} target{traced}; the labels are made once at "
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


def _blind_or_target(
    read: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode], losses: set[int], onward: Onward | None = None,
    reached: set[int] | None = None, fills: bool = False,
) -> bool:
    """Whether a read of the labels ends as a loss's target argument, or in something whose
    result does not depend on their dtype (a comparison, ``len()``, ``.size()``, ``.shape``);
    ``onward`` answers for an argument of another call, a value bound to another name and a
    returned value. The loss calls whose target it is are added to ``reached``."""
    child: cst.CSTNode = read
    parent = parents.get(read)
    while parent is not None:
        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            if id(call) in losses and argument(call, 1, "target") is parent:
                if reached is not None:
                    reached.add(id(call))
                return True
            if isinstance(call.func, cst.Name) and call.func.value == "len":
                return True
            return onward is not None and onward(call, parent)
        if isinstance(parent, cst.Assign) and parent.value is child:
            bound = parent.targets[0].target if len(parent.targets) == 1 else None
            return isinstance(bound, cst.Name) and onward is not None and onward(parent, bound.value)
        if isinstance(parent, cst.Return) and parent.value is child:
            return onward is not None and onward(parent, -1)
        if isinstance(parent, cst.Element):  # x_test, y_test = x[800:], y[800:]
            values = parents.get(parent)
            assign = parents.get(values) if values is not None else None
            if isinstance(assign, cst.Return) and isinstance(values, cst.Tuple) and assign.value is values:
                return onward is not None and onward(assign, list(values.elements).index(parent))
            if not isinstance(assign, cst.Assign):
                return False
            name = _unpacked_name(assign, values, parent)
            return name is not None and onward is not None and onward(assign, name)
        if isinstance(parent, cst.Comparison | cst.ComparisonTarget):
            return True
        if isinstance(parent, cst.Attribute):
            if fills and parent.value is child and parent.attr.value == "fill_":
                call = parents.get(parent)
                return isinstance(call, cst.Call) and call.func is parent and isinstance(parents.get(call), cst.Expr)
            if parent.value is not child or parent.attr.value not in _COUNTS | _MOVES:
                return False
            if parent.attr.value in _COUNTS:
                return True
        elif isinstance(parent, cst.Subscript):
            if parent.value is not child:
                return False  # the labels index something: their dtype matters there
        elif not (isinstance(parent, cst.Call) and parent.func is child):
            return False
        child, parent = parent, parents.get(parent)
    return False


@dataclass(frozen=True)
class _Made:
    """The call that gives the labels their dtype, and the edit that makes it int64 there."""

    src: Source
    call: cst.Call
    edit: str  # dtype-keyword, add-dtype, type-arg, method (the transformer's actions)
    dtype: str  # the dtype code written (torch.long), or the method (long)
    where: str  # repository-relative file:line
    how: str  # the edit, for the report
    attributes: tuple[str, ...] = ()  # self.<attribute>s followed, innermost first
    names: tuple[tuple[cst.CSTNode, str, int], ...] = ()  # (scope, name, line bound) of names followed
    followed: frozenset[int] = frozenset()  # ids of the expressions followed to the call
    through: tuple[str, ...] = ()  # the steps of a walk through calls and returns, for the report


def _owner(src: Source, node: cst.CSTNode) -> cst.CSTNode:
    """The function around a node, or its module."""
    parents = src.wrapper.resolve(ParentNodeProvider)
    current: cst.CSTNode | None = node
    while current is not None:
        if isinstance(current, cst.FunctionDef):
            return current
        current = parents.get(current)
    return src.module


def _binding_before(src: Source, scope: cst.CSTNode, node: cst.Name) -> cst.BaseExpression | None:
    """The value the last plain binding of a read name before its line (in its scope) gives it:
    ``name = value``, or its element of ``a, name = x, value``."""
    line = src.line(node)
    found: tuple[int, cst.BaseExpression] | None = None
    for each in own_nodes(scope):
        if not isinstance(each, cst.Assign) or each not in src.positions or src.line(each) >= line:
            continue
        value = assigned_value(each, node.value)
        if value is not None and (found is None or src.line(each) > found[0]):
            found = (src.line(each), value)
    if found is None or _rebound_otherwise(scope, node.value):
        return None
    return found[1]


def _unpacked_name(assign: cst.Assign, values: cst.CSTNode | None, element: cst.CSTNode) -> str | None:
    """The name ``a, name = x, value`` binds to the element ``value``."""
    if len(assign.targets) != 1 or assign.value is not values or not isinstance(values, cst.Tuple | cst.List):
        return None
    target = assign.targets[0].target
    if not isinstance(target, cst.Tuple | cst.List) or len(target.elements) != len(values.elements):
        return None
    bound = target.elements[list(values.elements).index(element)].value  # type: ignore[arg-type]
    return bound.value if isinstance(bound, cst.Name) else None


def _rebound_otherwise(scope: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is also bound by something other than a plain assignment (a loop, ``+=``)."""
    visitor = _OtherBindings(name)
    scope.visit(visitor)
    return visitor.found


class _OtherBindings(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.found = False

    def visit_For(self, node: cst.For) -> None:
        if any(isinstance(n, cst.Name) and n.value == self.name for n in walk(node.target)):
            self.found = True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == self.name:
            self.found = True

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Tuple | cst.List) and any(
                isinstance(n, cst.Name) and n.value == self.name for n in walk(target.target)
            ) and assigned_value(node, self.name) is None:
                self.found = True  # unpacked from a call: no single expression writes it

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None and any(isinstance(n, cst.Name) and n.value == self.name for n in walk(node.asname)):
            self.found = True


def _moves(binding: Event, name: str) -> bool:
    """``y = y.to(device)`` / ``x, y = x.cuda(), y.cuda()``: the same labels on another device."""
    statement = binding.statement
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return False
    target, value = statement.targets[0].target, statement.value
    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements, strict=True)]
    else:
        pairs = [(target, value)]
    for bound, made in pairs:
        if isinstance(bound, cst.Name) and bound.value == name:
            return (
                isinstance(made, cst.Call) and isinstance(made.func, cst.Attribute) and made.func.attr.value in _MOVES
                and isinstance(made.func.value, cst.Name) and made.func.value.value == name
            )
    return False


def _is_device_like(value: cst.BaseExpression) -> bool:
    """A device argument of ``.to(...)`` (a name, ``"cuda"``, ``torch.device(...)``), not a dtype."""
    if isinstance(value, cst.Attribute):
        return value.attr.value not in ("float", "float32", "float64", "double", "half", "long", "int64", "int")
    return isinstance(value, cst.Name | cst.SimpleString | cst.Call | cst.Subscript)


def _unpacked(target: cst.BaseExpression) -> list[str | None] | None:
    """The names a loop's tuple target unpacks, by position (None: not a plain name)."""
    if not isinstance(target, cst.Tuple | cst.List):
        return None
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    return [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]


def _methods(cls: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name]


def _returned_tuple(function: cst.FunctionDef, arity: int) -> cst.Tuple | None:
    """The one ``return a, b`` of a function, when every return returns that many values."""
    returns = [n for n in walk(function) if isinstance(n, cst.Return)]
    if len(returns) != 1:
        return None
    value = returns[0].value
    return value if isinstance(value, cst.Tuple) and len(value.elements) == arity else None


def _self_assignment(src: Source, node: cst.Attribute) -> tuple[cst.BaseExpression, cst.FunctionDef] | None:
    """The one ``self.<attr> = value`` of the class around ``node``, and the method that writes it."""
    classes = src.around(src.line(node), cst.ClassDef)
    if not classes or not isinstance(classes[0], cst.ClassDef):
        return None
    found = [
        (statement.value, method)
        for method in walk(classes[0]) if isinstance(method, cst.FunctionDef)
        for statement in walk(method)
        if isinstance(statement, cst.Assign | cst.AugAssign | cst.AnnAssign)
        for target in (statement.targets if isinstance(statement, cst.Assign) else [statement])
        if isinstance(target.target, cst.Attribute) and target.target.attr.value == node.attr.value
        and isinstance(target.target.value, cst.Name) and target.target.value.value == "self"
    ]
    if len(found) != 1 or not isinstance(found[0][0], cst.BaseExpression) or isinstance(found[0][1], cst.Lambda):
        return None
    value, method = found[0]
    return (value, method) if isinstance(value, cst.BaseExpression) else None


def _bound_names(node: cst.CSTNode) -> list[cst.Name]:
    """The names a statement binds (a loop's target, an assignment's targets, a parameter)."""
    if isinstance(node, cst.For):
        return [n for n in walk(node.target) if isinstance(n, cst.Name)]
    if isinstance(node, cst.Assign):
        return [n for t in node.targets for n in walk(t.target) if isinstance(n, cst.Name)]
    if isinstance(node, cst.Param):
        return [node.name]
    return []


def _dataset_reads_blind(
    src: Source, cls: cst.ClassDef, getitem: cst.FunctionDef, element: cst.BaseExpression, made: _Made
) -> bool:
    """Whether the Dataset reads the labels it returns only to return them (or dtype-blind)."""
    parents = src.wrapper.resolve(ParentNodeProvider)
    returned = {id(n) for n in walk(element)}
    if isinstance(element, cst.Name):
        value = bound_once(getitem, element.value)
        if value is not None:
            returned |= {id(n) for n in walk(value)}
        if len(name_reads(getitem, element.value)) > 2:  # bound and returned, nothing else
            return False
    for attribute in made.attributes:
        for node in walk(cls):
            if not (
                isinstance(node, cst.Attribute) and node.attr.value == attribute and isinstance(node.value, cst.Name)
                and node.value.value == "self"
            ):
                continue
            if id(node) in returned or isinstance(parents.get(node), cst.AssignTarget):
                continue
            if not _blind_or_target(node, parents, set()):
                return False
    return True


def _randint_high(call: cst.Call) -> int | None:
    """The ``high`` of ``torch.randint(high, size)`` / ``torch.randint(low, high, size)`` when it is
    written as a whole number."""
    high = keyword_arg(call, "high")
    positional = [a for a in call.args if a.keyword is None]
    value = high.value if high is not None else (
        positional[1].value if len(positional) >= 3 else positional[0].value if len(positional) == 2 else None
    )
    return int(value.evaluated_value) if isinstance(value, cst.Integer) else None


def _an(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _shape(described: DescribedValue) -> list[int] | None:
    return list(described.shape) if described.shape is not None else None


def _converted(value: cst.BaseExpression, method: str) -> bool:
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == method
        and not value.args
    )


def _calls_in(owner: cst.CSTNode) -> list[cst.Call]:
    return [node for node in own_nodes(owner) if isinstance(node, cst.Call)]


def _same_callee(src: Source, a: cst.Call, b: cst.Call) -> bool:
    return src.module.code_for_node(a.func) == src.module.code_for_node(b.func)
