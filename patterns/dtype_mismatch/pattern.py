"""dtype-mismatch: a float64 tensor (numpy's default) meets a float32 model."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst
from libcst.metadata import ParentNodeProvider

from repairbot.codemod import (
    argument,
    is_torch_name,
    keyword_arg,
    method_call,
    one_line,
    positional_args,
    source_lines,
    walk,
)
from repairbot.evidence import DescribedValue, Evidence, Scope
from repairbot.facts import Source, dtype_name, events, place, place_in, reads, shape_text, source
from repairbot.pattern import Pattern, SiteTransformer, phrase, signature
from repairbot.provenance import integer_value, parameter_names
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame, Site

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
_TORCH_KEEPS_DTYPE = (
    "torch.flatten", "torch.squeeze", "torch.unsqueeze", "torch.reshape", "torch.permute",
    "torch.transpose", "torch.clone", "torch.t", "torch.narrow",
)
_STEP_BUDGET = 120


def _on_cuda(text: str) -> bool:
    return text.strip().startswith(("torch.cuda.", "CUDA"))


def _reduced(dtype: str) -> bool:
    return dtype in _REDUCED or dtype.startswith("float8")


# -- the transformer --------------------------------------------------------------------------


class CastToFloat(SiteTransformer):
    """Appends ``.float()`` to the tensor-creating call at the site, nothing else."""

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not self.at_site(original_node):
            return updated_node
        self.changes += 1
        return method_call(updated_node, "float")


# -- the pattern -------------------------------------------------------------------------------


class DtypeMismatch(Pattern):
    """Adds ``.float()`` where a float64 tensor enters the script, traced back from the failing operation.

    What it fixes:
        Data that reaches a float32 model as float64: numpy computes in float64 by default,
        and ``torch.from_numpy(array)``, ``torch.tensor(array)`` and ``torch.as_tensor(array)``
        keep the array's dtype. The float64 tensor is made in one place (a Dataset's
        ``__init__`` or ``__getitem__``, a preprocessing function, a module-level conversion)
        and fails far away, at the first layer, a ``torch.mm``, an LSTM or a loss.

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
        included) and dtype-preserving methods (``.to(device)``, ``.view``, indexing) are
        followed; for a failure in ``backward()`` the loss's own statement is read.

    Fix safety:
        Safe. The fix converts the data once, where it is made, to the dtype of the model it
        feeds (the message, or the traced input of the failing layer, shows the parameters are
        float32), so every later use of that tensor sees float32 as the model does; nothing is
        cast at the failing line, which would leave other uses failing one after another.

    Not handled:
        A model that is float64 itself (``model.double()``, ``dtype=torch.float64``
        parameters, a float64 prediction meeting a float32 target): declined, since either side
        may be the intended one. Half/BFloat16 mismatches (mixed precision by hand): declined
        with the ``torch.autocast`` remedy, never ``.float()`` blindly. Integer inputs reaching a
        float layer (features or ids meant for an ``nn.Embedding``?), tensors made float64 on
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
    Transformer = CastToFloat

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
            return _model_float64(self, frame, "the message says the layer's parameters are float64 and its input float32")
        if evidence is None or evidence.failure is None:
            return self.decline(
                "no traced run tells which tensor is float64",
                diagnosis="convert the data with .float() where it is made from numpy (torch.from_numpy(...).float())",
                at=frame,
            )
        module = evidence.failing_module
        # a layer with parameters (a loss has none) given a float32 input: its parameters are the float64 side
        if module and module.input_dtype == _FLOAT32 and module.devices and _in_torch_layer(failure):
            return _model_float64(
                self, frame, f"the failing {module.type or 'layer'} received a float32 input, so its own parameters are float64"
            )
        return _Tracer(self, failure, evidence, sources, message).locate()


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


@dataclass(frozen=True)
class _Key:
    """One step into a value: an item of an iterable, an element, a dict key, an attribute."""

    kind: str  # "item", "index", "key" or "attr"
    value: int | str = 0


_ITEM = _Key("item")
_Path = tuple[_Key, ...]


@dataclass(frozen=True)
class _File:
    src: Source
    parents: Mapping[cst.CSTNode, cst.CSTNode]

    @property
    def path(self) -> Path:
        return self.src.path

    def line(self, node: cst.CSTNode) -> int:
        return self.src.positions[node].line

    def where(self, node: cst.CSTNode) -> str:
        return f"{place_in(self.path, self.line(node))}"

    def code(self, node: cst.CSTNode, limit: int = 70) -> str:
        if isinstance(node, cst.For):  # the loop's header, not its body
            text = f"for {one_line(self.src.module, node.target)} in {one_line(self.src.module, node.iter)}"
        else:
            text = one_line(self.src.module, node)
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def step(self, node: cst.CSTNode) -> str:
        """One step of a walk for the report: ``data.py:18 `self.x = torch.from_numpy(x)```."""
        return f"{self.where(node)} `{self.code(node, 60)}`"

    def statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The statement a node is part of."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            current = self.parents.get(current)
        return current

    def enclosing(self, node: cst.CSTNode, kind: type[cst.CSTNode]) -> cst.CSTNode | None:
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, kind):
                return current
            current = self.parents.get(current)
        return None


@dataclass(frozen=True)
class _Instance:
    """The object ``self`` stands for: its class, and the call that built it when known."""

    cls: cst.ClassDef
    file: _File
    ctor: _Ref | None


@dataclass(frozen=True)
class _Ctx:
    """Where a name is looked up: a function body (or the module) before a line."""

    file: _File
    function: cst.FunctionDef | None
    before: int
    frame: int | None = None  # index of the traced user frame this is, if it is one
    args: Mapping[str, _Ref] | None = None  # parameters bound by a call the walk came through
    instance: _Instance | None = None


@dataclass(frozen=True)
class _Ref:
    node: cst.BaseExpression
    ctx: _Ctx


@dataclass(frozen=True)
class _Origin:
    call: cst.Call
    file: _File
    trail: tuple[str, ...]


@dataclass(frozen=True)
class _Explicit:
    node: cst.CSTNode
    file: _File
    trail: tuple[str, ...]


@dataclass(frozen=True)
class _Lost:
    reason: str
    file: _File | None = None
    node: cst.CSTNode | None = None
    computed: bool = False  # the value is computed by the model
    # made by a call outside torch and the project (numpy...) and returned by this Dataset item
    item: tuple[_File, cst.Return] | None = None
    trail: tuple[str, ...] = ()


_Result = _Origin | _Explicit | _Lost


@dataclass
class _View:
    """A traced user frame: its file, the failing expression, and where names are looked up."""

    index: int
    frame: Frame
    file: _File
    expression: cst.BaseExpression
    ctx: _Ctx
    scope: Scope = field(default_factory=Scope)

    def described(self, name: str) -> DescribedValue | None:
        return self.scope.get(name)


class _Tracer:
    """One ``locate``: the float64 operand found at the failure, followed back to its creation."""

    def __init__(
        self, pattern: DtypeMismatch, failure: Failure, evidence: Evidence, sources: Sources, message: _Message
    ) -> None:
        self.pattern = pattern
        self.failure = failure
        self.evidence = evidence
        self.sources = sources
        self.message = message
        self.frames = [f for f in failure.frames if f.user]
        self.budget = _STEP_BUDGET
        self._files: dict[Path, _File | None] = {}
        self.getitem: tuple[_File, cst.Return] | None = None  # the last Dataset item the walk read
        self._views: dict[int, _View | Decline] = {}

    def decline(self, reason: str, diagnosis: str | None = None, at: Frame | None = None) -> Decline:
        return self.pattern.decline(reason, diagnosis=diagnosis, at=at)

    # entry ------------------------------------------------------------------------------
    def locate(self) -> Site | Decline:
        for index in reversed(range(len(self.frames))):
            view = self._view(index)
            if isinstance(view, Decline):
                return view
            operands = self._operands(view)
            if isinstance(operands, Decline):
                return operands
            expression, ctx, names, floats = operands
            if names:
                return self._follow([(n, _Ref(cst.Name(n), ctx)) for n in names], view)
            inline = self._inline_creations(expression, ctx)
            if inline:
                return self._follow(inline, view)
            if floats:
                listed = ", ".join(f"`{n}` float32" for n in floats)
                return _model_float64(
                    self.pattern, view.frame,
                    f"no tensor variable at {place(view.frame)} is float64 ({listed}): the float64 side is not a variable "
                    "there but the model's parameters (or a tensor attribute of it)",
                )
        frame = self.failure.user_frame
        return self.decline(
            "no frame of the project's code holds a float64 tensor variable at the failing line",
            diagnosis="convert the data with .float() where it is made from numpy (torch.from_numpy(...).float())",
            at=frame,
        )

    def _follow(self, candidates: Sequence[tuple[str, _Ref]], view: _View) -> Site | Decline:
        """The first candidate followed back to its creation, or why none could be."""
        results: list[tuple[str, _Result]] = []
        for name, ref in candidates:
            first = f"{view.file.where(ref.node) if ref.node in view.file.src.positions else place(view.frame)} `{name}`"
            self.getitem = None
            result = self._resolve(ref.node, ref.ctx, (), (first,))
            if isinstance(result, _Origin):
                return self._site(result, name, view, [n for n, _ in candidates if n != name])
            results.append((name, result))
        name, result = results[0]
        if isinstance(result, _Explicit):
            code = result.file.code(result.node)
            return self.decline(
                f"`{name}` at {place(view.frame)} is made float64 on purpose at {result.file.where(result.node)} "
                f"(`{code}`), while the model is float32",
                diagnosis="make it float32 there (.float() or dtype=torch.float32) or, if float64 is wanted, the model "
                "float64 too (model.double())",
                at=_frame_at(result.file, result.node) or view.frame,
            )
        lost = result
        assert isinstance(lost, _Lost)
        if lost.item is not None and lost.file is not None and lost.node is not None:
            file, returned = lost.item
            return self.decline(
                f"`{name}` (float64 at {place(view.frame)}) is an item of a Dataset whose __getitem__ returns "
                f"`{file.code(returned.value or returned, 50)}` ({file.where(returned)}), made by `{lost.file.code(lost.node, 50)}` "
                f"({lost.file.where(lost.node)}), not by a torch call of the project: the DataLoader's collate (or that "
                "call) makes the float64 tensor, and there is no call to append .float() to",
                diagnosis="convert the data in __getitem__: torch.from_numpy(...).float() for a numpy array (or "
                ".astype(numpy.float32)), .float() for a tensor",
                at=_frame_at(file, returned),
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
            at=_frame_at(lost.file, lost.node) or view.frame,
        )

    # the failing expression and its operands -------------------------------------------
    def _view(self, index: int) -> _View | Decline:
        if index in self._views:
            return self._views[index]
        frame = self.frames[index]
        file = self._file(frame.file)
        view: _View | Decline
        if file is None:
            view = self.decline(f"cannot read the project file {report_path(Path(frame.file))}", at=frame)
        else:
            view = self._make_view(index, frame, file)
        self._views[index] = view
        return view

    def _make_view(self, index: int, frame: Frame, file: _File) -> _View | Decline:
        lines = source_lines(file.src.module.code)
        current = lines[frame.line - 1].strip() if 0 < frame.line <= len(lines) else None
        if frame.code is not None and current != frame.code.strip():
            return self.decline(f"the source of {place(frame)} is not what the traced run executed")
        expression = _expression_at(file, frame)
        if expression is None:
            return self.decline(f"cannot find the failing expression at {place(frame)}")
        statement = file.statement(expression)
        start = file.line(statement) if statement is not None else frame.line
        function = _function_of(file, expression, frame.function)
        ctx = _Ctx(file, function, start, frame=index, args=None, instance=_instance_of(file, function))
        return _View(index, frame, file, expression, ctx, self.evidence.scope(frame))

    def _operands(
        self, view: _View
    ) -> tuple[cst.BaseExpression, _Ctx, list[str], list[str]] | Decline:
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
            bound = self._last_bind(ctx, loss)
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

    def _inline_creations(self, expression: cst.BaseExpression, ctx: _Ctx) -> list[tuple[str, _Ref]]:
        """Arguments of the failing call that make a tensor right there (``model(torch.from_numpy(x))``)."""
        if not isinstance(expression, cst.Call):
            return []
        found = []
        for arg in expression.args:
            if any(
                isinstance(node, cst.Call) and is_torch_name(ctx.file.src.imports.qualify(node.func), *_CREATIONS)
                for node in walk(arg.value)
            ):
                found.append((ctx.file.code(arg.value, 40), _Ref(arg.value, ctx)))
        return found

    # the walk ---------------------------------------------------------------------------
    def _resolve(self, node: cst.BaseExpression, ctx: _Ctx, path: _Path, trail: tuple[str, ...]) -> _Result:
        self.budget -= 1
        if self.budget < 0:
            return _Lost("the value passes through too many steps to follow", ctx.file, node, trail=trail)
        if isinstance(node, cst.Name):
            return self._name(node.value, ctx, path, trail)
        if isinstance(node, cst.Attribute):
            return self._resolve(node.value, ctx, (_Key("attr", node.attr.value), *path), trail)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, ctx, path, trail)
        if isinstance(node, cst.Tuple | cst.List):
            return self._element(node, ctx, path, trail)
        if isinstance(node, cst.Dict):
            return self._dict_value(node, ctx, path, trail)
        if isinstance(node, cst.Call):
            return self._call(node, ctx, path, trail)
        if isinstance(node, cst.UnaryOperation):
            return self._resolve(node.expression, ctx, path, trail)
        if isinstance(node, cst.BinaryOperation):
            tensors = [side for side in (node.left, node.right) if not isinstance(side, cst.Integer | cst.Float)]
            if len(tensors) == 1:
                return self._resolve(tensors[0], ctx, path, trail)
        return _Lost(f"it is computed by `{ctx.file.code(node)}`", ctx.file, node, trail=trail)

    def _subscript(self, node: cst.Subscript, ctx: _Ctx, path: _Path, trail: tuple[str, ...]) -> _Result:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            number = integer_value(index)
            if number is not None:
                return self._resolve(node.value, ctx, (_Key("index", number), *path), trail)
            if isinstance(index, cst.SimpleString):
                key = index.evaluated_value
                if isinstance(key, str):
                    return self._resolve(node.value, ctx, (_Key("key", key), *path), trail)
        # indexing a tensor by anything else (a sample index, a slice, a mask) keeps its dtype
        return self._resolve(node.value, ctx, path, trail)

    def _element(self, node: cst.Tuple | cst.List, ctx: _Ctx, path: _Path, trail: tuple[str, ...]) -> _Result:
        if not path or path[0].kind != "index" or any(isinstance(e, cst.StarredElement) for e in node.elements):
            return _Lost(f"`{ctx.file.code(node)}` is not one tensor", ctx.file, node, trail=trail)
        index = int(path[0].value)
        if not -len(node.elements) <= index < len(node.elements):
            return _Lost(f"`{ctx.file.code(node)}` has no element {index}", ctx.file, node, trail=trail)
        return self._resolve(node.elements[index].value, ctx, path[1:], trail)

    def _dict_value(self, node: cst.Dict, ctx: _Ctx, path: _Path, trail: tuple[str, ...]) -> _Result:
        if path and path[0].kind == "key":
            for element in node.elements:
                if (
                    isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                    and element.key.evaluated_value == path[0].value
                ):
                    return self._resolve(element.value, ctx, path[1:], trail)
        return _Lost(f"`{ctx.file.code(node)}` is a dict the walk cannot index", ctx.file, node, trail=trail)

    def _name(self, name: str, ctx: _Ctx, path: _Path, trail: tuple[str, ...]) -> _Result:
        file = ctx.file
        bound = self._last_bind(ctx, name)
        if bound is not None:
            statement, target_path = bound
            step = (*trail, file.step(statement))
            at = replace(ctx, before=file.line(statement))
            if isinstance(statement, cst.For):
                return self._resolve(statement.iter, at, (_ITEM, *target_path, *path), step)
            if isinstance(statement, cst.AugAssign):
                # `x += y` updates x in place: x keeps the dtype it had
                return self._name(name, at, path, step)
            if isinstance(statement, cst.Assign | cst.AnnAssign) and statement.value is not None:
                return self._resolve(statement.value, at, (*target_path, *path), step)
            return _Lost(f"`{name}` is bound by `{file.code(statement)}`", file, statement, trail=trail)
        function = ctx.function
        if function is not None and name in parameter_names(function):
            if ctx.instance is not None and _self_name(function) == name:
                if path and path[0].kind == "attr":
                    return self._attribute(ctx.instance, str(path[0].value), path[1:], trail)
                return _Lost(f"`{name}` is the object itself", file, function, trail=trail)
            argument_ref = self._argument(ctx, name)
            if isinstance(argument_ref, _Lost):
                return replace(argument_ref, trail=trail)
            caller = argument_ref.ctx.file
            step = (*trail, f"{caller.step(argument_ref.node)} passed as `{name}`")
            return self._resolve(argument_ref.node, argument_ref.ctx, path, step)
        if function is not None:
            module_ctx = _Ctx(file, None, self._module_line(file))
            if self._last_bind(module_ctx, name) is not None:
                return self._name(name, module_ctx, path, trail)
        imported = self._imported(file, name)
        if imported is not None:
            other, real = imported
            return self._name(real, _Ctx(other, None, self._module_line(other)), path, trail)
        return _Lost(f"`{name}` is not assigned in the project's code before it is used", file, function, trail=trail)

    def _attribute(self, instance: _Instance, attr: str, path: _Path, trail: tuple[str, ...]) -> _Result:
        file = instance.file
        found: list[tuple[cst.FunctionDef, cst.Assign | cst.AnnAssign, _Path]] = []
        for method in _methods(instance.cls):
            me = _self_name(method)
            if me is None:
                continue
            for node in _own_nodes(method):
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        where = _target_path(target.target, functools.partial(_is_self_attr, me=me, attr=attr))
                        if where is not None:
                            found.append((method, node, where))
                elif isinstance(node, cst.AnnAssign) and node.value is not None and _is_self_attr(node.target, me, attr):
                    found.append((method, node, ()))
        if len(found) != 1:
            what = "never assigned" if not found else f"assigned in {len(found)} places"
            return _Lost(f"`self.{attr}` of {instance.cls.name.value} is {what}", file, instance.cls, trail=trail)
        method, statement, where = found[0]
        value = statement.value
        assert value is not None
        args: Mapping[str, _Ref] = {}
        if method.name.value == "__init__" and instance.ctor is not None:
            ctor = instance.ctor.node
            assert isinstance(ctor, cst.Call)
            args = _bind(ctor, method, True, instance.ctor.ctx)
        ctx = _Ctx(file, method, file.line(statement), args=args, instance=instance)
        step = (*trail, file.step(statement))
        return self._resolve(value, ctx, (*where, *path), step)

    def _call(self, call: cst.Call, ctx: _Ctx, path: _Path, trail: tuple[str, ...]) -> _Result:
        file = ctx.file
        qualified = file.src.imports.qualify(call.func)
        code = file.code(call)
        if is_torch_name(qualified, *_CREATIONS):
            short = (qualified or "").rsplit(".", 1)[-1]
            dtype = argument(call, _DTYPE_POSITION[short], "dtype") if short in _DTYPE_POSITION else keyword_arg(call, "dtype")
            if dtype is not None:
                if _names_float64(file, dtype.value):
                    return _Explicit(call, file, trail)
                return _Lost(f"`{code}` gives a dtype of its own", file, call, trail=trail)
            if any(key.kind in ("attr", "key") for key in path):
                return _Lost(f"`{code}` is a tensor, not an object with fields", file, call, trail=trail)
            return _Origin(call, file, trail)
        if is_torch_name(qualified, *_EXPLICIT_FACTORIES):
            return _Explicit(call, file, trail)
        if is_torch_name(qualified, *_TORCH_KEEPS_DTYPE) and call.args:
            return self._resolve(call.args[0].value, ctx, path, trail)
        if qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _KEEPS_DTYPE | _CASTS | {"double"}:
            return self._method(call, call.func, ctx, path, trail)
        data = self._data_call(call, qualified, ctx, path, trail)
        if data is not None:
            return data
        defined = self._definition(ctx, call.func)
        if defined is not None:
            return self._user_call(call, ctx, defined, path, trail)
        if self._is_model(call, ctx):
            return _Lost(f"it is computed by the model, `{code}`", file, call, computed=True, trail=trail)
        return _Lost(f"it comes from `{code}`, which the walk cannot follow", file, call, item=self.getitem, trail=trail)

    def _method(self, call: cst.Call, method: cst.Attribute, ctx: _Ctx, path: _Path, trail: tuple[str, ...]) -> _Result:
        file = ctx.file
        name = method.attr.value
        if name == "double":
            return _Explicit(call, file, trail)
        if name in _CASTS:
            return _Lost(f"`{file.code(call)}` converts it already (the source changed since the run?)", file, call, trail=trail)
        if name in ("to", "type"):
            given = [arg.value for arg in call.args if arg.keyword is None or arg.keyword.value in ("dtype", "dtype_or_device")]
            if any(_names_float64(file, value) for value in given):
                return _Explicit(call, file, trail)
            if any(_names_dtype(file, value) for value in given):
                return _Lost(f"`{file.code(call)}` converts it to a dtype of its own", file, call, trail=trail)
        return self._resolve(method.value, ctx, path, trail)

    def _data_call(
        self, call: cst.Call, qualified: str | None, ctx: _Ctx, path: _Path, trail: tuple[str, ...]
    ) -> _Result | None:
        """DataLoader, datasets, splits and the builtins that pass items through."""
        file = ctx.file
        head = path[0] if path else None
        step = (*trail, file.step(call))
        if is_torch_name(qualified, "torch.utils.data.DataLoader") and head == _ITEM:
            if keyword_arg(call, "collate_fn") is not None:
                return _Lost("the DataLoader builds its batches with a collate_fn of its own", file, call, trail=trail)
            dataset = argument(call, 0, "dataset")
            if dataset is None:
                return _Lost("the DataLoader's dataset is not given", file, call, trail=trail)
            return self._resolve(dataset.value, ctx, path, step)
        if is_torch_name(qualified, "torch.utils.data.TensorDataset") and head == _ITEM and len(path) > 1:
            if path[1].kind != "index" or any(arg.star or arg.keyword for arg in call.args):
                return _Lost(f"cannot tell which tensor of `{file.code(call)}` it is", file, call, trail=trail)
            tensors = positional_args(call)
            index = int(path[1].value)
            if not -len(tensors) <= index < len(tensors):
                return _Lost(f"`{file.code(call)}` has no tensor {index}", file, call, trail=trail)
            return self._resolve(tensors[index].value, ctx, path[2:], step)
        if is_torch_name(qualified, "torch.utils.data.random_split") and head is not None and head.kind == "index":
            dataset = argument(call, 0, "dataset")
            if dataset is not None and len(path) > 1 and path[1] == _ITEM:
                return self._resolve(dataset.value, ctx, path[1:], step)
        if is_torch_name(qualified, "torch.utils.data.Subset") and head == _ITEM:
            dataset = argument(call, 0, "dataset")
            if dataset is not None:
                return self._resolve(dataset.value, ctx, path, step)
        builtin = qualified is None and isinstance(call.func, cst.Name) and call.func.value not in file.src.imports.aliases
        name = call.func.value if isinstance(call.func, cst.Name) else None
        passes_items = (builtin and name in ("iter", "list", "tuple")) or (qualified or "").split(".")[0] == "tqdm"
        if passes_items and call.args and head == _ITEM:
            return self._resolve(call.args[0].value, ctx, path, step)
        if builtin and name == "next" and call.args:
            return self._resolve(call.args[0].value, ctx, (_ITEM, *path), step)
        if builtin and name in ("enumerate", "zip") and head == _ITEM and len(path) > 1 and path[1].kind == "index":
            index = int(path[1].value)
            items = positional_args(call)
            if name == "enumerate":
                if index != 1 or not items:
                    return _Lost("it is the counter of enumerate()", file, call, trail=trail)
                return self._resolve(items[0].value, ctx, (_ITEM, *path[2:]), step)
            if not 0 <= index < len(items) or any(arg.star for arg in call.args):
                return _Lost(f"cannot tell which iterable of `{file.code(call)}` it comes from", file, call, trail=trail)
            return self._resolve(items[index].value, ctx, (_ITEM, *path[2:]), step)
        return None

    def _user_call(
        self, call: cst.Call, ctx: _Ctx, defined: tuple[_File, cst.ClassDef | cst.FunctionDef, bool],
        path: _Path, trail: tuple[str, ...],
    ) -> _Result:
        """A class of the project (its items or attributes) or a function of it (its return)."""
        file, definition, method = defined
        step = (*trail, ctx.file.step(call))
        if isinstance(definition, cst.ClassDef):
            instance = _Instance(definition, file, _Ref(call, ctx))
            head = path[0] if path else None
            if head == _ITEM:
                getitem = next((m for m in _methods(definition) if m.name.value == "__getitem__"), None)
                if getitem is None:
                    return _Lost(f"{definition.name.value} has no __getitem__ of its own", file, definition, trail=step)
                return self._returned(getitem, file, {}, instance, path[1:], step)
            if head is not None and head.kind == "attr":
                return self._attribute(instance, str(head.value), path[1:], step)
            return _Lost(f"`{ctx.file.code(call)}` makes an object, not a tensor", ctx.file, call, trail=trail)
        args = _bind(call, definition, method, ctx)
        return self._returned(definition, file, args, ctx.instance if method else None, path, step)

    def _returned(
        self, function: cst.FunctionDef, file: _File, args: Mapping[str, _Ref], instance: _Instance | None,
        path: _Path, trail: tuple[str, ...],
    ) -> _Result:
        returns = [node for node in _own_nodes(function) if isinstance(node, cst.Return) and node.value is not None]
        if len(returns) != 1:
            return _Lost(f"{function.name.value}() has {len(returns) or 'no'} return statements", file, function, trail=trail)
        value = returns[0].value
        assert value is not None
        if function.name.value == "__getitem__":
            self.getitem = (file, returns[0])
        ctx = _Ctx(file, function, file.line(returns[0]), args=args, instance=instance)
        step = (*trail, file.step(returns[0]))
        return self._resolve(value, ctx, path, step)

    # scopes -----------------------------------------------------------------------------
    def _last_bind(self, ctx: _Ctx, name: str) -> tuple[cst.CSTNode, _Path] | None:
        """The last statement before ``ctx.before`` that binds ``name``, with where in its target."""
        body: Sequence[cst.BaseStatement]
        if ctx.function is None:
            body = ctx.file.src.module.body
        elif isinstance(ctx.function.body, cst.IndentedBlock):
            body = ctx.function.body.body
        else:
            return None
        found = None
        for event in events(body):
            if event.kind == "bind" and event.name == name and ctx.file.line(event.statement) < ctx.before:
                found = event.statement
        if found is None:
            return None
        where: _Path | None = ()
        if isinstance(found, cst.Assign):
            where = next(
                (p for t in found.targets if (p := _target_path(t.target, lambda n: _is_name(n, name))) is not None), None
            )
        elif isinstance(found, cst.For):
            where = _target_path(found.target, lambda n: _is_name(n, name))
        if where is None:
            return None
        return found, where

    def _argument(self, ctx: _Ctx, name: str) -> _Ref | _Lost:
        function = ctx.function
        assert function is not None
        if ctx.args is not None:
            found = ctx.args.get(name)
            if found is not None:
                return found
            return _Lost(f"`{name}`, a parameter of {function.name.value}(), is not given by a call the walk followed", ctx.file, function)
        if ctx.frame is None or ctx.frame == 0:
            return _Lost(f"{function.name.value}() is called from outside the project's code", ctx.file, function)
        caller = self._view(ctx.frame - 1)
        if isinstance(caller, Decline):
            return _Lost(caller.reason)
        exact = caller.frame.col is not None and isinstance(caller.expression, cst.Call)
        calls = [
            node for node in walk(caller.expression)
            if isinstance(node, cst.Call) and _calls(node, function, caller.ctx.file)
            # without traced columns the caller's line may hold several calls: the module's own
            and (exact or function.name.value != "forward" or self._runs_forward(node, caller, ctx.instance))
        ]
        if exact:
            calls = calls[:1] if calls and calls[0] is caller.expression else []
        if len(calls) != 1:
            return _Lost(
                f"which call at {place(caller.frame)} runs {function.name.value}() is not certain",
                caller.file, caller.expression,
            )
        call = calls[0]
        bound = _bind(call, function, _is_method(ctx.file, function), caller.ctx)
        found = bound.get(name)
        if found is None:
            return _Lost(f"the call at {place(caller.frame)} passes `{name}` in a way the walk cannot follow", caller.file, call)
        return found

    def _module_line(self, file: _File) -> int:
        """The module's statements that ran: up to its traced line when it is a frame of the failure."""
        for frame in self.frames:
            if frame.function == "<module>" and Path(frame.file) == file.path:
                view = self._view(self.frames.index(frame))
                return view.ctx.before if isinstance(view, _View) else frame.line
        return 1 << 30

    def _definition(self, ctx: _Ctx, func: cst.BaseExpression) -> tuple[_File, cst.ClassDef | cst.FunctionDef, bool] | None:
        """The project's class or function a call calls, with whether it is a method."""
        file = ctx.file
        if (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and ctx.instance is not None
            and ctx.function is not None and _self_name(ctx.function) == func.value.value
        ):
            method = next((m for m in _methods(ctx.instance.cls) if m.name.value == func.attr.value), None)
            return (ctx.instance.file, method, True) if method is not None else None
        if isinstance(func, cst.Name):
            local = _top_level(file, func.value)
            if local is not None:
                return file, local, False
            imported = self._imported(file, func.value)
            if imported is not None:
                home, real = imported
                definition = _top_level(home, real)
                return (home, definition, False) if definition is not None else None
            return None
        qualified = file.src.imports.qualify(func)
        if qualified is None or "." not in qualified:
            return None
        module, _, name = qualified.rpartition(".")
        other = self._project_module(module)
        if other is None:
            return None
        definition = _top_level(other, name)
        return (other, definition, False) if definition is not None else None

    def _imported(self, file: _File, name: str) -> tuple[_File, str] | None:
        """``(file, name)`` of a name imported from another module of the project."""
        qualified = file.src.imports.aliases.get(name)
        if qualified is None or "." not in qualified:
            return None
        module, _, real = qualified.rpartition(".")
        other = self._project_module(module)
        return (other, real) if other is not None else None

    def _project_module(self, module: str) -> _File | None:
        tails = (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py")
        known = {Path(f) for f in (*self.evidence.imported_files, *(f.file for f in self.frames))}
        matches = [p for p in known if any(p.as_posix() == t or p.as_posix().endswith("/" + t) for t in tails)]
        if len(matches) != 1:
            return None
        return self._file(str(matches[0]))

    def _runs_forward(self, call: cst.Call, caller: _View, instance: _Instance | None) -> bool:
        """Whether a call in the caller's frame calls the module whose ``forward`` failed: a
        submodule (``self.encoder(x)``), or a module variable of that class (``model(x)``)."""
        func = call.func
        if isinstance(func, cst.Attribute):
            return self._is_model(call, caller.ctx)
        described = caller.described(func.value) if isinstance(func, cst.Name) else None
        if described is None or not described.is_module:
            return False
        return instance is None or described.type == instance.cls.name.value

    def _is_model(self, call: cst.Call, ctx: _Ctx) -> bool:
        func = call.func
        if (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and ctx.function is not None
            and _self_name(ctx.function) == func.value.value
        ):
            return True
        if isinstance(func, cst.Name) and ctx.frame is not None:
            view = self._view(ctx.frame)
            described = view.described(func.value) if isinstance(view, _View) else None
            return described is not None and described.is_module
        return False

    def _file(self, name: str) -> _File | None:
        path = Path(name)
        if path not in self._files:
            parsed = source(self.sources, name)
            self._files[path] = (
                _File(parsed, parsed.wrapper.resolve(ParentNodeProvider)) if parsed is not None else None
            )
        return self._files[path]

    # the answer -------------------------------------------------------------------------
    def _site(self, origin: _Origin, name: str, view: _View, others: Sequence[str]) -> Site:
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
        return Site(
            pattern=self.pattern.ID,
            file=str(file.path),
            span=span,
            params={"method": "float"},
            summary=f"Added .float() to {code} at {where}: the float64 tensor made there reached {operation} "
            f"({against}) as {seen}",
            applicability=self.pattern.APPLICABILITY,
            evidence={
                "message_dtypes": list(self.message.dtypes),
                "float64_operand": {"name": name, "at": place(view.frame), "shape": shape, "dtype": _FLOAT64},
                "failing_module": self.evidence.failing_module.type if self.evidence.failing_module else None,
                "origin": {"at": where, "call": code},
                "trail": trail,
            },
            evidence_text=f"traced {seen}; followed back: {' <- '.join(trail[1:])}",
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


# -- helpers ----------------------------------------------------------------------------------


def _expression_at(file: _File, frame: Frame) -> cst.BaseExpression | None:
    """The expression the frame was executing: exact with traced columns, else the line's statement's value."""
    positions = file.src.positions
    if frame.col is not None and frame.end_col is not None:
        end_line = frame.end_line or frame.line
        wanted = (frame.line, frame.col, end_line, frame.end_col)
        exact = [n for n, s in positions.items() if isinstance(n, cst.BaseExpression) and (s.line, s.col, s.end_line, s.end_col) == wanted]
        if exact:
            # nodes sharing a span (an expression and its only child): the outermost is the operation
            return max(exact, key=lambda n: sum(1 for _ in walk(n)))
        containing = [
            (s.end_line - s.line, s.end_col - s.col, n) for n, s in positions.items()
            if isinstance(n, cst.BaseExpression) and s.line == frame.line and (s.line, s.col) <= (frame.line, frame.col)
            and (s.end_line, s.end_col) >= (end_line, frame.end_col)
        ]
        if containing:
            return min(containing, key=lambda item: (item[0], item[1]))[2]
    lines = [n for n, s in positions.items() if isinstance(n, cst.SimpleStatementLine) and s.line == frame.line]
    if len(lines) != 1 or len(lines[0].body) != 1:
        return None
    small = lines[0].body[0]
    if isinstance(small, cst.Expr | cst.Assign | cst.AugAssign | cst.Return) and small.value is not None:
        return small.value
    return None


def _function_of(file: _File, node: cst.CSTNode, name: str) -> cst.FunctionDef | None:
    if name == "<module>":
        return None
    function = file.enclosing(node, cst.FunctionDef)
    if name.startswith("<"):  # a comprehension's or lambda's frame: the function around it
        return function if isinstance(function, cst.FunctionDef) else None
    while function is not None and isinstance(function, cst.FunctionDef) and function.name.value != name:
        function = file.enclosing(function, cst.FunctionDef)
    return function if isinstance(function, cst.FunctionDef) else None


def _instance_of(file: _File, function: cst.FunctionDef | None) -> _Instance | None:
    if function is None or _self_name(function) is None:
        return None
    block = file.parents.get(function)
    cls = file.parents.get(block) if block is not None else None
    return _Instance(cls, file, None) if isinstance(cls, cst.ClassDef) else None


def _is_method(file: _File, function: cst.FunctionDef) -> bool:
    block = file.parents.get(function)
    return isinstance(file.parents.get(block) if block is not None else None, cst.ClassDef) and not any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators
    )


def _self_name(function: cst.FunctionDef) -> str | None:
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params and params[0].name.value in ("self", "cls") else None


def _bind(call: cst.Call, function: cst.FunctionDef, method: bool, ctx: _Ctx) -> dict[str, _Ref]:
    """The arguments of ``call`` by the parameter names of ``function`` (``self`` skipped for a method)."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if method:
        params = params[1:]
    bound: dict[str, _Ref] = {}
    if not any(arg.star == "*" for arg in call.args):
        for name, arg in zip(params, positional_args(call), strict=False):
            bound[name] = _Ref(arg.value, ctx)
    for arg in call.args:
        if arg.keyword is not None:
            bound[arg.keyword.value] = _Ref(arg.value, ctx)
    return bound


def _calls(call: cst.Call, function: cst.FunctionDef, file: _File) -> bool:
    """Whether a call in a caller's frame is the call of ``function`` (``forward`` through ``model(x)``)."""
    name = function.name.value
    func = call.func
    if isinstance(func, cst.Name) and func.value == name:
        return True
    if isinstance(func, cst.Attribute) and func.attr.value == name:
        return True
    if name == "forward":
        qualified = file.src.imports.qualify(func)
        return qualified is None and isinstance(func, cst.Name | cst.Attribute)
    return False


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [node for node in body if isinstance(node, cst.FunctionDef)]


def _own_nodes(function: cst.FunctionDef) -> list[cst.CSTNode]:
    """The nodes of a function's body, nested functions, classes and lambdas left out."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            continue
        found.append(node)
        stack.extend(reversed(node.children))
    return found


def _top_level(file: _File, name: str) -> cst.ClassDef | cst.FunctionDef | None:
    found = None
    for statement in file.src.module.body:
        if isinstance(statement, cst.ClassDef | cst.FunctionDef) and statement.name.value == name:
            found = statement
    return found


def _target_path(target: cst.BaseExpression, wanted: Callable[[cst.BaseExpression], bool]) -> _Path | None:
    """Where in an assignment or loop target the wanted node is: ``i, (x, y)`` -> x at (1, 0)."""
    if wanted(target):
        return ()
    if isinstance(target, cst.Tuple | cst.List):
        elements = list(target.elements)
        for index, element in enumerate(elements):
            inner = _target_path(element.value, wanted)
            if inner is None:
                continue
            starred = [i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)]
            if isinstance(element, cst.StarredElement) or (starred and starred[0] < index):
                return None  # after a starred element the position is not fixed
            return (_Key("index", index), *inner)
    return None


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_self_attr(node: cst.BaseExpression, me: str, attr: str) -> bool:
    return isinstance(node, cst.Attribute) and _is_name(node.value, me) and node.attr.value == attr


def _names_dtype(file: _File, node: cst.BaseExpression) -> bool:
    qualified = file.src.imports.qualify(node)
    return qualified is not None and qualified.startswith("torch.") and dtype_name(qualified) is not None


def _names_float64(file: _File, node: cst.BaseExpression) -> bool:
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


def _frame_at(file: _File | None, node: cst.CSTNode | None) -> Frame | None:
    if file is None or node is None or node not in file.src.positions:
        return None
    return Frame(file=str(file.path), line=file.line(node), user=True)
