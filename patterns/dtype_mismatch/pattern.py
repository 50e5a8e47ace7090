"""dtype-mismatch: a float64 tensor (numpy's default) meets a float32 model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst

from repairbot.analysis import (
    argument,
    bound_names,
    dtype_name,
    is_torch_name,
    keyword_arg,
    place,
    place_in,
    reads,
    resolve_site,
    shape_text,
    walk,
)
from repairbot.codemod import append_keyword, method_call
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import (
    Context,
    KeyPath,
    Lost,
    Made,
    ProjectFile,
    Ref,
    Result,
    TracedFrame,
    Unreadable,
    ValueWalk,
    frame_of,
    own_nodes,
)
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

_FLOAT64 = "float64"
_FLOAT32 = "float32"
_REDUCED = ("float16", "bfloat16")

# How messages spell a scalar type: Double, double, torch.float64, torch.cuda.DoubleTensor,
# CUDADoubleType, c10::Half, long int...
_TYPE = r"[A-Za-z][\w.:]*"
_C_TYPE = r"(?:unsigned |signed )?[\w:]+(?: int)?"
_FLOATING = r"(?:Double|Float|Half|BFloat16|ComplexFloat|ComplexDouble)"

# Calls that make a tensor from existing data and keep its dtype (a numpy array's float64).
_CREATIONS = ("torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray")
# Their dtype parameter, where it may be given by position.
_DTYPE_POSITION = {"as_tensor": 1}
_FLOAT64_NAMES = ("torch.float64", "torch.double")
_EXPLICIT_FACTORIES = ("torch.DoubleTensor", "torch.cuda.DoubleTensor")
# Tensor methods that return a tensor of the same dtype (``to``/``type`` only without a dtype).
_KEEPS_DTYPE = frozenset({
    "to", "type", "cuda", "cpu", "view", "view_as", "reshape", "reshape_as", "unsqueeze", "squeeze",
    "permute", "transpose", "t", "contiguous", "clone", "detach", "flatten", "requires_grad_",
    "pin_memory", "expand", "expand_as", "repeat", "narrow", "share_memory_",
})
_CASTS = frozenset({"float", "half", "bfloat16", "int", "long", "short", "byte", "bool", "char"})
# torch functions of one tensor that keep its dtype.
# Factories that make a tensor of torch's default dtype (float32) when no dtype is given.
_DEFAULT_DTYPE_FACTORIES = (
    "torch.rand", "torch.randn", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.linspace",
    "torch.logspace", "torch.normal", "torch.eye",
)
_TORCH_KEEPS_DTYPE = (
    "torch.flatten", "torch.squeeze", "torch.unsqueeze", "torch.reshape", "torch.permute",
    "torch.transpose", "torch.clone", "torch.t", "torch.narrow",
)
_STEP_BUDGET = 120
# What the walk ends at: where a float64 tensor is made from data, or made float64 on purpose.
_CREATION = "creation"
_EXPLICIT = "explicit"


def _on_cuda(text: str) -> bool:
    return text.strip().startswith(("torch.cuda.", "CUDA"))


def _reduced(dtype: str) -> bool:
    return dtype in _REDUCED or dtype.startswith("float8")


# -- the transformer --------------------------------------------------------------------------


@dataclass(frozen=True)
class CastToFloat(Rewrite):
    """Appends ``.float()`` (``method``: ``.double()`` for a model cast to float64 on purpose)
    to the tensor-creating call at the site, nothing else; with ``dtype`` (``torch.float32``),
    adds ``dtype=torch.float32`` to the call's arguments instead."""

    method: str = "float"
    dtype: str | None = None

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        if self.dtype is not None:
            if keyword_arg(call, "dtype") is not None:
                raise EditError("the call has a dtype= already")
            return [Edit(call, append_keyword(call, "dtype", cst.parse_expression(self.dtype)))]
        return [Edit(call, method_call(call, self.method))]


# -- the pattern -------------------------------------------------------------------------------


class DtypeMismatch(Pattern):
    """Adds ``.float()`` where a float64 tensor enters the script, traced back from the failing operation.

    What it fixes:
        Data that reaches a float32 model as float64: numpy computes in float64 by default,
        and ``torch.from_numpy(array)``, ``torch.tensor(array)`` and ``torch.as_tensor(array)``
        keep the array's dtype. The float64 tensor is made in one place (a Dataset's
        ``__init__`` or ``__getitem__``, a preprocessing function, a module-level conversion)
        and fails far away, at the first layer, a ``torch.mm``, an LSTM or a loss.

        A model cast to float64 on purpose (``model = Net().double()``) fed a float32 input
        made by torch's default dtype (``torch.linspace``, ``torch.randn``...) while the rest
        of the traced data is float64 too (targets from numpy): the input is the odd one out,
        and ``.double()`` is added where it is made, in the vocabulary of the model's cast.

    Why it fails:
        Every operand of a matrix product or convolution must have the parameters' dtype:
        ``RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float``
        (``nn.Linear``; 2.0/2.1 without the dtypes), ``expected m1 and m2 to have the same
        dtype, but got: double != float`` (``torch.mm``, ``@``, a Linear without bias),
        ``Input type (double) and bias type (float) should be the same`` (convolutions; older:
        ``Input type (torch.DoubleTensor) and weight type (torch.FloatTensor)``, recognised
        only when the scalar types differ and the ``cuda.`` prefixes agree), ``ValueError: RNN
        input dtype (torch.float64) does not match weight dtype (torch.float32)``, ``mixed
        dtype (CPU): all inputs must share same datatype`` (normalisation layers), ``addmv
        input tensors must have the same dtype`` (``X @ w`` with a vector ``w``; also ``dot``,
        ``baddbmm``, ``nn.Bilinear``, ``PReLU`` in their words), ``expected scalar type Float
        but found Double`` (1.5 to 1.13; up to 1.4 ``Expected object of scalar type Double but
        got scalar type Float for argument #2 'mat2'``, 0.2 ``expected Double tensor (got Float
        tensor)``), and from a loss over mixed dtypes ``Found dtype Double but expected Float``
        (BCELoss in its forward, HuberLoss in ``backward()``; 1.5: ``expected dtype Float but
        got dtype Double``). ``expected scalar type Long but found ...`` and integer ``Found
        dtype Long`` are the target-dtype pattern's.

    Example:
        The run records, at each frame of the failure, the dtype of every tensor variable. From
        the float64 variable at the failing line (``x`` in ``forward``) the source is followed
        back: to the caller's argument, the loop ``for x, y in loader``, the loader's
        ``DataLoader(train_set)``, ``random_split(...)``, the Dataset's ``__getitem__``
        returning ``self.features[idx]``, and ``self.features = torch.from_numpy(features)`` in
        ``__init__``, which becomes ``torch.from_numpy(features).float()``. ``TensorDataset``,
        ``Subset``, ``enumerate``, ``zip``, ``next(iter(...))``, ``batch[0]``/``batch["x"]``,
        tuple unpacking, calls of the project's own functions and classes (another module
        included, a closure called under another name, ``step_fn = make_train_step_fn(...)``,
        when the traceback shows the call ran it) and dtype-preserving methods
        (``.to(device)``, ``.view``, indexing) are followed; for a failure in ``backward()``
        the loss's own statement is read. The conversion is written in the code's own form:
        ``torch.tensor(X)`` becomes ``torch.tensor(X, dtype=torch.float32)`` when the call
        takes keywords already (``requires_grad=True``, where ``.float()`` would give a
        non-leaf copy whose ``.grad`` stays None) or the file writes its other conversions that
        way (the float32 dtype spelled as the file spells it); otherwise, and always for
        ``torch.from_numpy``, ``.float()`` is appended.

    Fix safety:
        Safe. The fix converts the data once, where it is made, to the dtype of the model it
        feeds (the message, or the traced input of the failing layer, shows the parameters are
        float32), so every later use of that tensor sees float32 as the model does; nothing is
        cast at the failing line, which would leave other uses failing one after another. For
        a model cast to float64 on purpose, the one float32 input is made float64 the same way.

    Not handled:
        A model that is float64 itself without a cast of the project's (``dtype=torch.float64``
        parameters, a float64 prediction meeting a float32 target), or cast on purpose while
        every traced tensor is float32 (the model is the odd one out), or fed an input made
        float32 on purpose (``.float()``): declined, since either side may be the intended one.
        Half/BFloat16 mismatches (mixed precision by hand): declined with the ``torch.autocast``
        remedy, never ``.float()`` blindly. Integer inputs reaching a float layer (features or
        ids meant for an ``nn.Embedding``?), tensors made float64 on
        purpose (``.double()``, ``dtype=torch.float64``), numpy arrays a DataLoader's collate
        turns into tensors, values built by arithmetic of several tensors or passed through
        ``*args``, a custom ``collate_fn``, a ``__getitem__`` with several ``return``
        statements: declined, with where to add ``.float()``.
    """

    ID = "dtype-mismatch"
    TITLE = "A float64 tensor (from numpy) meets a float32 model"
    TAGS = frozenset({"dtype", "data"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        # nn.Linear / addmm since 2.0 (the dtypes since about 2.2); F.linear's `self and mat2`
        signature(
            "RuntimeError",
            r"\b(?P<arg_a>\w+) and (?P<arg_b>\w+) " + phrase("must have the same dtype")
            + rf"(?:,\s+but\s+got\s+(?P<first>{_TYPE})\s+and\s+(?P<second>{_TYPE}))?",
        ),
        # torch.mm, @, a Linear without bias (2.x)
        signature(
            "RuntimeError",
            phrase("expected m1 and m2 to have the same dtype, but got:")
            + rf"\s*(?P<first>{_C_TYPE})\s*!=\s*(?P<second>{_C_TYPE})",
        ),
        # 1.5 to 1.13 (and convolutions without bias, bmm in 2.x); Long expected is target-dtype's
        signature(
            "RuntimeError",
            r"expected\s+scalar\s+type\s+(?P<first>(?!Long\b)\w+)\s+but\s+found\s+(?P<second>\w+)",
        ),
        # up to 1.4; the 'target' argument is target-dtype's
        signature(
            "RuntimeError",
            r"Expected\s+object\s+of\s+scalar\s+type\s+(?P<first>(?!Long\b)\w+)\s+but\s+got\s+scalar\s+type\s+"
            r"(?P<second>\w+)\s+for\s+argument\s+#\d+\s+'(?P<argument>(?!target')\w+)'",
        ),
        # 0.2
        signature("RuntimeError", r"expected (?P<first>\w+) tensor \(got (?P<second>\w+) tensor\)"),
        # convolutions, 2.x (lower-case C++ names) and older (tensor type names); the cuda prefix
        # must agree (a differing one is device-mismatch's): see match()
        signature(
            "RuntimeError",
            r"Input\s+type\s+\((?P<input>[^()]+)\)\s+and\s+(?:weight|bias)\s+type\s+\((?P<weight>[^()]+)\)\s+"
            + phrase("should be the same"),
        ),
        # nn.RNN / LSTM / GRU
        signature(
            "ValueError",
            rf"RNN\s+input\s+dtype\s+\((?P<input>{_TYPE})\)\s+does\s+not\s+match\s+weight\s+dtype\s+\((?P<weight>{_TYPE})\)",
        ),
        # backward of a loss over mixed floating dtypes (1.6+, then 1.5); integer found is
        # target-dtype's (BCE given integer targets)
        signature("RuntimeError", rf"Found\s+dtype\s+(?P<second>{_FLOATING})\s+but\s+expected\s+(?P<first>{_FLOATING})\b"),
        signature("RuntimeError", rf"expected\s+dtype\s+(?P<first>{_FLOATING})\s+but\s+got\s+dtype\s+(?P<second>{_FLOATING})\b"),
        # normalisation layers (LayerNorm, BatchNorm, GroupNorm) on the CPU: mixed inputs, or a
        # float input against parameters of another dtype
        signature("RuntimeError", phrase("mixed dtype") + r"\s*\((?:CPU|CUDA)\):\s*" + phrase("all inputs must share same datatype")),
        signature(
            "RuntimeError",
            phrase("mixed dtype") + r"\s*\((?:CPU|CUDA)\):\s*" + phrase("expect parameter to have scalar type of")
            + r"\s+(?P<given>\w+)",
        ),
        # matrix-vector products (`X @ w` with a 1-d w), dot, baddbmm, Bilinear, PReLU
        signature("RuntimeError", phrase("input tensors must have the same dtype, but got") + r"\s+(?P<listed>[\w:, ]+)"),
        signature("RuntimeError", phrase("expected both vectors to have same dtype, but found") + r"\s+(?P<listed>\w+ and \w+)"),
        signature("RuntimeError", phrase("Input dtypes must be the same, got:") + r"\s+(?P<listed>[\w:, ]+)"),
        signature("RuntimeError", phrase("All tensors must have the same dtype, got") + r"\s+(?P<listed>[\w:, ]+)"),
        signature("RuntimeError", phrase("Type promoting not supported. Got") + r"\s+(?P<listed>\w+ and \w+)"),
    )
    EVIDENCE = frozenset({"locals", "failing_module"})
    # A dtype does not depend on how many samples a batch holds.
    BATCH_INVARIANT = True
    REWRITES = (CastToFloat,)

    def match(self, failure: Failure) -> re.Match[str] | None:
        for sig in self.SIGNATURES:
            found = sig.match(failure.exc_type, failure.message)
            if found is not None and _claims(found):
                return found
        return None

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the operation that mixes dtypes runs inside a library, with no frame in the project's code")
        message = _Message.of(match)
        reduced = list(dict.fromkeys(d for d in message.dtypes if _reduced(d)))
        if reduced:
            return self.decline(
                f"the mismatch involves {reduced[0]} ({' and '.join(message.dtypes)}): half precision cast by hand, "
                "where .float() would undo the mixed precision the script asked for",
                diagnosis="do not cast inputs or the model with .half()/.bfloat16() by hand: run the forward pass and the "
                "loss under torch.autocast(device_type=..., dtype=torch.float16) (it casts each operation), or convert "
                "the model and every input it gets together",
                at=frame,
            )
        others = [d for d in message.dtypes if d not in (_FLOAT64, _FLOAT32)]
        if others:
            integer = next((d for d in others if d.startswith(("int", "uint")) or d == "bool"), None)
            if integer is not None:
                return self.decline(
                    f"an integer tensor ({integer}) meets a floating-point one ({' and '.join(message.dtypes)}): "
                    "no float64 data to convert",
                    diagnosis="if the integers are features, convert them with .float() where they are made; if they are "
                    "token or category ids, the model needs an nn.Embedding before its first layer",
                    at=frame,
                )
            return self.decline(f"the message names {' and '.join(message.dtypes)}, not float64 against float32", at=frame)
        if message.parameters == _FLOAT64 or message.input == _FLOAT32:
            because = "the message says the layer's parameters are float64 and its input float32"
            if evidence is None or evidence.failure is None:
                return _model_float64(self, frame, because)
            return _Tracer(self, failure, evidence, sources, message).model_side(because)
        if evidence is None or evidence.failure is None:
            return self.decline(
                "no traced run tells which tensor is float64",
                diagnosis="convert the data with .float() where it is made from numpy (torch.from_numpy(...).float())",
                at=frame,
            )
        module = evidence.failing_module
        # a layer with parameters (a loss has none) given a float32 input: its parameters are the float64 side
        tracer = _Tracer(self, failure, evidence, sources, message)
        if module and module.input_dtype == _FLOAT32 and module.devices and _in_torch_layer(failure):
            return tracer.model_side(
                f"the failing {module.type or 'layer'} received a float32 input, so its own parameters are float64"
            )
        return tracer.locate()


def _model_float64(pattern: Pattern, frame: Frame, because: str) -> Decline:
    return pattern.decline(
        f"{because}: the model itself is float64 (model.double() or dtype=torch.float64 parameters), which may be on purpose",
        diagnosis="either keep the model float64 and convert its inputs with .double(), or convert the model with "
        "model.float() (and remove the .double() / dtype=torch.float64 that made it float64)",
        at=frame,
    )


def _claims(found: re.Match[str]) -> bool:
    """Not a device mismatch in the same words, and two different dtypes where the message names them."""
    groups = found.groupdict()
    if groups.get("input") and groups.get("weight") and _on_cuda(groups["input"]) != _on_cuda(groups["weight"]):
        return False  # Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)
    message = _Message.of(found)
    return not message.complete or len(set(message.dtypes)) > 1


def _in_torch_layer(failure: Failure) -> bool:
    """Whether the innermost ``forward`` of the failure is a torch layer's (not the project's)."""
    for frame in reversed(failure.frames):
        if frame.function == "forward":
            return not frame.user
    return False


@dataclass(frozen=True)
class _Message:
    """The dtypes a message names, and which side each is on when the message says so."""

    dtypes: tuple[str, ...]
    input: str | None = None
    parameters: str | None = None
    complete: bool = True  # False when the message names fewer than the two dtypes

    @classmethod
    def of(cls, match: re.Match[str]) -> _Message:
        groups = match.groupdict()
        if groups.get("input") and groups.get("weight"):
            given, weight = dtype_name(groups["input"]), dtype_name(groups["weight"])
            return cls(tuple(d for d in (given, weight) if d), given, weight, None not in (given, weight))
        if groups.get("given"):
            # "expect parameter to have scalar type of Float": the input is Float, the parameters are not
            given = dtype_name(groups["given"])
            return cls((given,) if given else (), given, None, False)
        if groups.get("listed"):
            named = [dtype_name(word) for word in re.findall(r"[A-Za-z][\w:]*", groups["listed"])]
            found = tuple(dict.fromkeys(d for d in named if d))
            return cls(found, complete=len(found) > 1)
        pair = (dtype_name(groups.get("first")), dtype_name(groups.get("second")))
        return cls(tuple(d for d in pair if d), complete=None not in pair)


# -- following a float64 tensor back to where it is made --------------------------------------


class _Tracer:
    """One ``locate``: the float64 operand found at the failure, followed back to its creation."""

    def __init__(
        self, pattern: DtypeMismatch, failure: Failure, evidence: Evidence, sources: Sources, message: _Message
    ) -> None:
        self.pattern = pattern
        self.failure = failure
        self.evidence = evidence
        self.message = message
        self.walk = ValueWalk(failure, evidence, sources, _at_call, _STEP_BUDGET)

    def decline(self, reason: str, diagnosis: str | None = None, at: Frame | None = None) -> Decline:
        return self.pattern.decline(reason, diagnosis=diagnosis, at=at)

    # entry ------------------------------------------------------------------------------
    def locate(self) -> Site | Decline:
        for index in reversed(range(len(self.walk.frames))):
            view = self.walk.view(index)
            if isinstance(view, Unreadable):
                return self.decline(view.reason, at=view.frame)
            operands = self._operands(view)
            if isinstance(operands, Decline):
                return operands
            expression, ctx, names, floats = operands
            if names:
                return self._follow([(n, Ref(cst.Name(n), ctx)) for n in names], view)
            inline = self._inline_creations(expression, ctx)
            if inline:
                return self._follow(inline, view)
            if floats:
                listed = ", ".join(f"`{n}` float32" for n in floats)
                return self.model_side(
                    f"no tensor variable at {place(view.frame)} is float64 ({listed}): the float64 side is not a variable "
                    "there but the model's parameters (or a tensor attribute of it)",
                    view,
                )
        frame = self.failure.user_frame
        return self.decline(
            "no frame of the project's code holds a float64 tensor variable at the failing line",
            diagnosis="convert the data with .float() where it is made from numpy (torch.from_numpy(...).float())",
            at=frame,
        )

    # a float64 model ---------------------------------------------------------------------
    def model_side(self, because: str, view: TracedFrame | None = None) -> Site | Decline:
        """The model's parameters are float64 and its input float32. Where the project casts the
        model on purpose (``.double()``), the traced values tell which side is the odd one out:
        other float64 data (targets, features) makes the float32 input the odd one, which is
        made float64 where it is created; float32 data everywhere makes the model the odd one,
        which is diagnosed. Without a deliberate cast, either side may be meant: diagnosed."""
        if view is None:
            innermost = self.walk.view(len(self.walk.frames) - 1) if self.walk.frames else None
            if not isinstance(innermost, TracedFrame):
                return _model_float64(self.pattern, self.failure.user_frame or Frame("", 0), because)
            view = innermost
        cast = self._model_cast(view)
        operands = self._operands(view)
        if cast is None or isinstance(operands, Decline) or not operands[3]:
            return _model_float64(self.pattern, view.frame, because)
        _, ctx, _, floats = operands
        cast_file, cast_call = cast
        on_purpose = f"the model is cast to float64 on purpose at {cast_file.where(cast_call)} (`{cast_file.code(cast_call)}`)"
        data64 = self._traced(_FLOAT64)
        if not data64:
            listed = ", ".join(f"`{n}`" for n in self._traced(_FLOAT32))
            return self.decline(
                f"{because}: {on_purpose}, while every tensor the run traced ({listed}) is float32: the model is the odd "
                "one out",
                diagnosis=f"if the model must compute in float64, make its data float64 where it is made (.double() or "
                f"dtype=torch.float64); otherwise remove `{cast_file.code(cast_call)}` so the model stays float32",
                at=frame_of(cast_file, cast_call) or view.frame,
            )
        name = floats[0]
        ref = Ref(cst.Name(name), ctx)
        first = f"{view.file.where(ref.node) if ref.node in view.file.src.positions else place(view.frame)} `{name}`"
        result = self.walk.follow(ref.node, ref.ctx, (first,), _at_float32_call)
        others = ", ".join(f"`{n}`" for n in data64)
        if isinstance(result, Made) and result.kind == _CREATION:
            return self._double_site(result, name, view, on_purpose, others)
        if isinstance(result, Made):
            return self.decline(
                f"`{name}` at {place(view.frame)} is made float32 on purpose at {result.file.where(result.call)} "
                f"(`{result.file.code(result.call)}`) and {on_purpose}: the two choices disagree",
                diagnosis="choose one dtype: make the data float64 where it is made, or remove the model's float64 cast",
                at=frame_of(result.file, result.call) or view.frame,
            )
        where = f" ({result.file.where(result.node)})" if result.file is not None and result.node is not None else ""
        return self.decline(
            f"`{name}` is the one float32 tensor at {place(view.frame)} ({on_purpose}, and {others} float64 too), but "
            f"where it is made cannot be followed: {result.reason}{where}",
            diagnosis=f"make `{name}` float64 where it is made (.double() or dtype=torch.float64)",
            at=frame_of(result.file, result.node) or view.frame,
        )

    def _model_cast(self, view: TracedFrame) -> tuple[ProjectFile, cst.Call] | None:
        """The project's own float64 cast of the failing model: a ``.double()`` (or ``.to`` /
        ``.type`` with a float64 dtype) in the statement that builds it, or on the name that
        statement binds, later in the same scope."""
        described = [view.described(n) for n in dict.fromkeys(reads(view.expression))]
        sites = {d.site for d in described if d and d.is_module and d.site}
        module = self.evidence.failing_module
        if not sites and module is not None and module.site:
            sites = {module.site}
        where = resolve_site(self.evidence, sites.pop()) if len(sites) == 1 else None
        file = self.walk.file(where.file) if where is not None else None
        if where is None or file is None:
            return None
        statements = [
            n for n, s in file.src.positions.items()
            if isinstance(n, cst.SimpleStatementLine) and s.line <= where.line <= s.end_line
        ]
        if len(statements) != 1:
            return None
        statement = statements[0]
        scope = file.enclosing(statement, cst.FunctionDef)
        names = {n for small in statement.body if isinstance(small, cst.Assign) for t in small.targets for n in bound_names(t.target)}
        inside = {id(n) for n in walk(statement)}
        for node in own_nodes(scope if isinstance(scope, cst.FunctionDef) else file.src.module):
            if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or file.line(node) < where.line:
                continue
            receiver = node.func.value
            if (id(node) in inside or (isinstance(receiver, cst.Name) and receiver.value in names)) and _casts_to_float64(file, node):
                return file, node
        return None

    def _traced(self, dtype: str) -> list[str]:
        """The tensor variables of that dtype the run recorded in the project's frames."""
        found: dict[str, None] = {}
        for index in range(len(self.walk.frames)):
            view = self.walk.view(index)
            if not isinstance(view, TracedFrame):
                continue
            for names in (view.scope.locals, view.scope.globals):
                for name, described in names.items():
                    if described.is_tensor and described.dtype == dtype:
                        found.setdefault(name)
        return list(found)

    def _double_site(self, made: Made, name: str, view: TracedFrame, on_purpose: str, others: str) -> Site:
        code, where = made.file.code(made.call), place_in(made.file.path, made.file.line(made.call))
        trail = _distinct_places(made.trail)
        return self._cast_site(
            made, "double",
            summary=f"Added .double() to {code} at {where}: the float32 tensor made there reached the model as `{name}` "
            f"at {place(view.frame)}, and {on_purpose}, like the rest of the traced data ({others} float64)",
            evidence={
                "message_dtypes": list(self.message.dtypes),
                "float32_operand": {"name": name, "at": place(view.frame), "dtype": _FLOAT32},
                "float64_data": others,
                "origin": {"at": where, "call": code},
                "trail": trail,
            },
            evidence_text=f"traced `{name}` float32 at {place(view.frame)} against float64 data ({others}); "
            f"followed back: {' <- '.join(trail[1:])}",
        )

    def _follow(self, candidates: Sequence[tuple[str, Ref]], view: TracedFrame) -> Site | Decline:
        """The first candidate followed back to its creation, or why none could be."""
        results: list[tuple[str, Result]] = []
        for name, ref in candidates:
            first = f"{view.file.where(ref.node) if ref.node in view.file.src.positions else place(view.frame)} `{name}`"
            result = self.walk.follow(ref.node, ref.ctx, (first,))
            if isinstance(result, Made) and result.kind == _CREATION:
                return self._site(result, name, view, [n for n, _ in candidates if n != name])
            results.append((name, result))
        name, result = results[0]
        if isinstance(result, Made):
            code = result.file.code(result.call)
            return self.decline(
                f"`{name}` at {place(view.frame)} is made float64 on purpose at {result.file.where(result.call)} "
                f"(`{code}`), while the model is float32",
                diagnosis="make it float32 there (.float() or dtype=torch.float32) or, if float64 is wanted, the model "
                "float64 too (model.double())",
                at=frame_of(result.file, result.call) or view.frame,
            )
        lost = result
        if lost.item is not None and lost.file is not None and lost.node is not None:
            file, returned = lost.item
            return self.decline(
                f"`{name}` (float64 at {place(view.frame)}) is an item of a Dataset whose __getitem__ returns "
                f"`{file.code(returned.value or returned, 50)}` ({file.where(returned)}), made by `{lost.file.code(lost.node, 50)}` "
                f"({lost.file.where(lost.node)}), not by a torch call of the project: the DataLoader's collate (or that "
                "call) makes the float64 tensor, and there is no call to append .float() to",
                diagnosis="convert the data in __getitem__: torch.from_numpy(...).float() for a numpy array (or "
                ".astype(numpy.float32)), .float() for a tensor",
                at=frame_of(file, returned),
            )
        if lost.computed:
            return _model_float64(
                self.pattern, view.frame, f"`{name}` at {place(view.frame)} is float64 because {lost.reason}"
            )
        where = f" ({lost.file.where(lost.node)})" if lost.file is not None and lost.node is not None else ""
        return self.decline(
            f"`{name}` is float64 at {place(view.frame)}, but where it is made cannot be followed: {lost.reason}{where}",
            diagnosis=f"convert `{name}` with .float() where it is made (torch.from_numpy(...).float(), or "
            ".astype(numpy.float32) on the array)",
            at=frame_of(lost.file, lost.node) or view.frame,
        )

    # the failing expression and its operands -------------------------------------------
    def _operands(
        self, view: TracedFrame
    ) -> tuple[cst.BaseExpression, Context, list[str], list[str]] | Decline:
        """The expression whose operands to check (a loss's own statement for ``loss.backward()``),
        the names in it traced as float64 tensors, and those traced as float32."""
        expression, ctx = view.expression, view.ctx
        backward = isinstance(expression, cst.Call) and (
            (isinstance(expression.func, cst.Attribute) and expression.func.attr.value == "backward")
            or view.file.src.is_call_of(expression, "torch.autograd.backward")
        )
        loss = view.file.src.backward_target(expression) if backward and isinstance(expression, cst.Call) else None
        if backward and loss is None and isinstance(expression, cst.Call) and isinstance(expression.func, cst.Attribute):
            # `scaler.scale(loss).backward()`, `(loss / steps).backward()`: the one tensor it reads
            tensors = [n for n in dict.fromkeys(reads(expression.func.value)) if (d := view.described(n)) is not None and d.is_tensor]
            if len(tensors) != 1:
                return self.decline(
                    f"which loss {place(view.frame)} calls backward() on is not certain",
                    diagnosis="convert the float64 tensor of the loss computation with .float() where it is made",
                    at=view.frame,
                )
            loss = tensors[0]
        if loss is not None:
            bound = self.walk.last_bind(ctx, loss)
            if bound is None or not isinstance(bound[0], cst.Assign | cst.AugAssign | cst.AnnAssign) or bound[0].value is None:
                return self.decline(
                    f"`{loss}` of {place(view.frame)} is not assigned by a plain statement before it",
                    diagnosis="convert the float64 tensor of the loss computation with .float() where it is made",
                    at=view.frame,
                )
            statement, _ = bound
            assert isinstance(statement, cst.Assign | cst.AugAssign | cst.AnnAssign) and statement.value is not None
            expression = statement.value
            ctx = replace(ctx, before=ctx.file.line(statement))
        names: list[str] = []
        floats: list[str] = []
        for name in dict.fromkeys(reads(expression)):
            described = view.described(name)
            if described is None or not described.is_tensor:
                continue
            if described.dtype == _FLOAT64:
                names.append(name)
            elif described.dtype == _FLOAT32:
                floats.append(name)
        return expression, ctx, names, floats

    def _inline_creations(self, expression: cst.BaseExpression, ctx: Context) -> list[tuple[str, Ref]]:
        """Arguments of the failing call that make a tensor right there (``model(torch.from_numpy(x))``)."""
        if not isinstance(expression, cst.Call):
            return []
        found = []
        for arg in expression.args:
            if any(
                isinstance(node, cst.Call) and is_torch_name(ctx.file.src.imports.qualify(node.func), *_CREATIONS)
                for node in walk(arg.value)
            ):
                found.append((ctx.file.code(arg.value, 40), Ref(arg.value, ctx)))
        return found

    # the answer -------------------------------------------------------------------------
    def _site(self, origin: Made, name: str, view: TracedFrame, others: Sequence[str]) -> Site:
        file = origin.file
        call = origin.call
        span = file.src.positions[call]
        code = file.code(call)
        where = f"{place_in(file.path, span.line)}"
        described = view.described(name)
        shape = list(described.shape) if described and described.shape is not None else None
        shape_words = f"{shape_text(shape)} " if shape is not None else ""
        operation = self._operation()
        seen = f"`{name}` ({shape_words}float64) at {place(view.frame)}"
        has_parameters = bool(self.evidence.failing_module and self.evidence.failing_module.devices)
        against = "float32 parameters" if operation.startswith("nn.") and has_parameters else "float32 operands"
        notes: tuple[str, ...] = ()
        if others:
            notes = (f"Other float64 operands at {place(view.frame)} ({', '.join(others)}) are left to the next run.",)
        trail = _distinct_places(origin.trail)
        dtype = _float32_keyword(file, call)
        added = f"dtype={dtype}" if dtype is not None else ".float()"
        return self._cast_site(
            origin, "float",
            summary=f"Added {added} to {code} at {where}: the float64 tensor made there reached {operation} "
            f"({against}) as {seen}",
            evidence={
                "message_dtypes": list(self.message.dtypes),
                "float64_operand": {"name": name, "at": place(view.frame), "shape": shape, "dtype": _FLOAT64},
                "failing_module": self.evidence.failing_module.type if self.evidence.failing_module else None,
                "origin": {"at": where, "call": code},
                "trail": trail,
            },
            evidence_text=f"traced {seen}; followed back: {' <- '.join(trail[1:])}",
            notes=notes,
            dtype=dtype,
        )

    def _cast_site(
        self, made: Made, method: str, summary: str, evidence: dict[str, Any], evidence_text: str,
        notes: tuple[str, ...] = (), dtype: str | None = None,
    ) -> Site:
        """The site that appends ``.<method>()`` to the call that made the tensor (or, with
        ``dtype``, gives the call that ``dtype=``)."""
        return Site(
            pattern=self.pattern.ID,
            file=str(made.file.path),
            span=made.file.src.positions[made.call],
            rewrite=CastToFloat(method, dtype),
            summary=summary,
            applicability=self.pattern.APPLICABILITY,
            evidence=evidence,
            evidence_text=evidence_text,
            notes=notes,
        )

    def _operation(self) -> str:
        module = self.evidence.failing_module
        if module and module.type and _in_torch_layer(self.failure):
            return f"nn.{module.type}"
        frame = self.failure.user_frame
        if frame is not None and frame.code and ".backward(" in frame.code:
            return "the loss's backward()"
        return f"`{frame.code}`" if frame is not None and frame.code else "the failing operation"




def _float32_keyword(file: ProjectFile, call: cst.Call) -> str | None:
    """``dtype=`` in the code's own words for a ``torch.tensor``/``torch.as_tensor`` call that
    already takes keywords (``requires_grad=True``, after which ``.float()`` would give a
    non-leaf copy) or in a file that writes ``torch.tensor(..., dtype=torch.float32)``: the
    float32 dtype as the file spells it (``torch.float``), else ``<torch>.float32``. None for
    ``.float()`` (``torch.from_numpy`` takes no dtype)."""
    imports = file.src.imports
    if not is_torch_name(imports.qualify(call.func), "torch.tensor", "torch.as_tensor", "torch.asarray") \
            or not isinstance(call.func, cst.Attribute):
        return None
    written = [
        keyword.value for node in walk(file.src.module) if isinstance(node, cst.Call)
        and is_torch_name(imports.qualify(node.func), *_CREATIONS)
        and (keyword := keyword_arg(node, "dtype")) is not None
        and dtype_name(imports.qualify(keyword.value)) == _FLOAT32
    ]
    if not written and not any(arg.keyword is not None for arg in call.args):
        return None
    if written:
        return file.code(written[0])
    return f"{file.code(call.func.value)}.{_FLOAT32}"


def _at_call(
    walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result | None:
    """Where a float64 tensor is made (a creation from numpy data), made float64 on purpose, or
    passed through with its dtype kept; None for the walk's own rules."""
    file = ctx.file
    code = file.code(call)
    if is_torch_name(qualified, *_CREATIONS):
        short = (qualified or "").rsplit(".", 1)[-1]
        dtype = argument(call, _DTYPE_POSITION[short], "dtype") if short in _DTYPE_POSITION else keyword_arg(call, "dtype")
        if dtype is not None:
            if _names_float64(file, dtype.value):
                return Made(call, file, trail, _EXPLICIT)
            return Lost(f"`{code}` gives a dtype of its own", file, call, trail=trail)
        if any(key.kind in ("attr", "key") for key in path):
            return Lost(f"`{code}` is a tensor, not an object with fields", file, call, trail=trail)
        return Made(call, file, trail, _CREATION)
    if is_torch_name(qualified, *_EXPLICIT_FACTORIES):
        return Made(call, file, trail, _EXPLICIT)
    if is_torch_name(qualified, *_TORCH_KEEPS_DTYPE) and call.args:
        return walk.resolve(call.args[0].value, ctx, path, trail)
    if qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _KEEPS_DTYPE | _CASTS | {"double"}:
        return _method(walk, call, call.func, ctx, path, trail)
    return None


def _method(
    walk: ValueWalk, call: cst.Call, method: cst.Attribute, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result:
    file = ctx.file
    name = method.attr.value
    if name == "double":
        return Made(call, file, trail, _EXPLICIT)
    if name in _CASTS:
        return Lost(f"`{file.code(call)}` converts it already (the source changed since the run?)", file, call, trail=trail)
    if name in ("to", "type"):
        given = [arg.value for arg in call.args if arg.keyword is None or arg.keyword.value in ("dtype", "dtype_or_device")]
        if any(_names_float64(file, value) for value in given):
            return Made(call, file, trail, _EXPLICIT)
        if any(_names_dtype(file, value) for value in given):
            return Lost(f"`{file.code(call)}` converts it to a dtype of its own", file, call, trail=trail)
    return walk.resolve(method.value, ctx, path, trail)


def _at_float32_call(
    walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result | None:
    """Where a float32 tensor is made by torch's default dtype (a factory without ``dtype=``, a
    tensor of Python numbers), made float32 on purpose, or passed through with its dtype kept."""
    file = ctx.file
    if is_torch_name(qualified, *_DEFAULT_DTYPE_FACTORIES, "torch.tensor"):
        if keyword_arg(call, "dtype") is not None:
            return Made(call, file, trail, _EXPLICIT)
        if is_torch_name(qualified, "torch.tensor") and not (
            call.args and isinstance(call.args[0].value, cst.List | cst.Tuple | cst.Float | cst.Integer)
        ):
            return Lost(f"`{file.code(call)}` keeps the dtype of data made float32 before it", file, call, trail=trail)
        return Made(call, file, trail, _CREATION)
    if is_torch_name(qualified, *_CREATIONS):
        return Lost(f"`{file.code(call)}` keeps the dtype of data made float32 before it", file, call, trail=trail)
    if is_torch_name(qualified, "torch.FloatTensor", "torch.cuda.FloatTensor"):
        return Made(call, file, trail, _EXPLICIT)
    if is_torch_name(qualified, *_TORCH_KEEPS_DTYPE) and call.args:
        return walk.resolve(call.args[0].value, ctx, path, trail)
    if qualified is None and isinstance(call.func, cst.Attribute):
        name = call.func.attr.value
        if name == "float" or (name in ("to", "type") and any(
            is_torch_name(file.src.imports.qualify(a.value), "torch.float32", "torch.float") for a in call.args
        )):
            return Made(call, file, trail, _EXPLICIT)
        if name in _KEEPS_DTYPE:
            return walk.resolve(call.func.value, ctx, path, trail)
        if name in _CASTS | {"double"}:
            return Lost(f"`{file.code(call)}` converts it to another dtype", file, call, trail=trail)
    return None


def _casts_to_float64(file: ProjectFile, call: cst.Call) -> bool:
    """``.double()``, ``.to(torch.float64)``, ``.type(torch.DoubleTensor)`` (a dtype keyword too)."""
    if not isinstance(call.func, cst.Attribute):
        return False
    if call.func.attr.value == "double":
        return not call.args
    return call.func.attr.value in ("to", "type") and any(_names_float64(file, arg.value) for arg in call.args)


# -- helpers ----------------------------------------------------------------------------------


def _names_dtype(file: ProjectFile, node: cst.BaseExpression) -> bool:
    qualified = file.src.imports.qualify(node)
    return qualified is not None and qualified.startswith("torch.") and dtype_name(qualified) is not None


def _names_float64(file: ProjectFile, node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value in ("torch.DoubleTensor", "torch.cuda.DoubleTensor")
    return is_torch_name(file.src.imports.qualify(node), *_FLOAT64_NAMES)


def _distinct_places(trail: Sequence[str]) -> list[str]:
    """The walk's steps, one per place (a statement and the call in it are one step for people)."""
    kept: list[str] = []
    for step in trail:
        if kept and step.split(" ", 1)[0] == kept[-1].split(" ", 1)[0]:
            continue
        kept.append(step)
    return kept

