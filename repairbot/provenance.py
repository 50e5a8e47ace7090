"""Where a value was written: one analysis for every pattern that follows a value to its source.

Given an expression at a place in a user file (and, when the run traced it, the chain of
constructor call sites it came through), ``written_at`` answers the one place in the source
that writes its value, as a senior engineer reads code: a literal, a name bound once, the
default of a parameter, the argument at the call site that passed the parameter, an attribute
of a config object or dataclass (``self.x = ...``, a class field ``x: int = 64``), an argparse
default (``args.hidden_dim`` <- ``add_argument("--hidden-dim", default=64)``), or an entry
of a dict literal (``cfg["emb_dim"]`` <- ``{"emb_dim": 768}``). It answers None when the
value has no single written place (bound twice, computed by a call, read from a file): a
fix must then go elsewhere or be declined. Pure: it reads only the parsed sources it is given.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst
from libcst.metadata import FunctionScope, GlobalScope, ParentNodeProvider, Scope

from repairbot.analysis import (
    Source,
    argument,
    bindings_of,
    bound_once,
    dotted_name,
    events,
    failing_expression,
    is_torch_name,
    keyword_arg,
    one_line,
    place,
    place_in,
    plain_value,
    positional_args,
    source,
    traced_line_matches,
    walk,
)
from repairbot.evidence import DescribedValue, Evidence, PassedArgument
from repairbot.evidence import Scope as TracedScope
from repairbot.frameworks import LIGHTNING_DATAMODULES, lightning_classes
from repairbot.sources import Sources, report_path
from repairbot.types import Failure, Frame, Span

LITERAL = "literal"
NAME = "name bound once"
DEFAULT = "parameter default"
CALL_ARGUMENT = "call-site argument"
ATTRIBUTE = "attribute"
ARGPARSE = "argparse default"
DICT_ENTRY = "dict entry"


@dataclass(frozen=True)
class Written:
    """The expression that writes a value, where it is, and how it was found."""

    kind: str  # one of the constants above
    file: str
    span: Span
    node: cst.BaseExpression
    code: str
    trail: tuple[str, ...] = ()  # the steps followed, "file:line code", outermost last

    @property
    def place(self) -> str:
        return f"{Path(self.file).name}:{self.span.line}"


def is_literal(node: cst.BaseExpression) -> bool:
    """A number, string, or arithmetic of numbers only (``64 * 7 * 7``, ``-1``)."""
    if isinstance(node, cst.Integer | cst.Float | cst.SimpleString | cst.ConcatenatedString):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_literal(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return is_literal(node.left) and is_literal(node.right)
    return False


def integer_value(
    node: cst.BaseExpression, leaf: Callable[[cst.BaseExpression], int | None] | None = None
) -> int | None:
    """The value of an integer expression without names (``-1``, ``16 * 5 * 5``, ``2 ** 8``);
    ``leaf`` values any other operand (a name as the run traced it)."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = integer_value(node.expression, leaf)
        return -inner if inner is not None else None
    if isinstance(node, cst.BinaryOperation):
        left, right = integer_value(node.left, leaf), integer_value(node.right, leaf)
        if left is None or right is None:
            return None
        operator = node.operator
        if isinstance(operator, cst.Multiply):
            return left * right
        if isinstance(operator, cst.Add):
            return left + right
        if isinstance(operator, cst.Subtract):
            return left - right
        if isinstance(operator, cst.FloorDivide) and right:
            return left // right
        if isinstance(operator, cst.Power) and 0 <= right <= 64:
            return int(left**right)
        return None
    return leaf(node) if leaf is not None else None


def parameter_names(function: cst.FunctionDef) -> list[str]:
    """A function's parameter names in order (positional, ``*args``, keyword-only, ``**kw``)."""
    params = function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params)]
    if isinstance(params.star_arg, cst.Param):
        names.append(params.star_arg.name.value)
    names += [p.name.value for p in params.kwonly_params]
    if params.star_kwarg is not None:
        names.append(params.star_kwarg.name.value)
    return names


def _parameter(function: cst.FunctionDef, name: str) -> cst.Param | None:
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param
    return None


def _node_at(src: Source, span: Span) -> cst.BaseExpression | None:
    """The outermost expression node with exactly this span."""
    found = [n for n, s in src.positions.items() if s == span and isinstance(n, cst.BaseExpression)]
    return found[0] if found else None


def expression_at(src: Source, line: int, col: int | None, end_line: int | None, end_col: int | None) -> cst.BaseExpression | None:
    """The expression a traced position names (a call-site argument, say)."""
    if col is None or end_line is None or end_col is None:
        return None
    return _node_at(src, Span(line, col, end_line, end_col))


def bound_at(scope: Scope, name: str, line: int, positions: Mapping[cst.CSTNode, Span]) -> bool:
    """Whether ``name`` is bound when ``line`` of ``scope`` runs: a parameter, an assignment on an
    earlier line (of this scope or one around it, a closure's), or a module global seen from a
    function (globals exist by the time a function runs)."""
    for assignment in scope[name]:
        node = getattr(assignment, "node", None)
        owner = getattr(assignment, "scope", None)
        if isinstance(owner, GlobalScope) and isinstance(scope, FunctionScope):
            return True
        if node is not None and owner is not None:
            if isinstance(node, cst.Param):
                return True
            where = positions.get(node)
            if where is not None and where.line < line:
                return True
    return False


def _function_around(src: Source, line: int) -> cst.FunctionDef | None:
    functions = src.around(line, cst.FunctionDef)
    return functions[0] if functions and isinstance(functions[0], cst.FunctionDef) else None


def _class_around(src: Source, line: int) -> cst.ClassDef | None:
    classes = src.around(line, cst.ClassDef)
    return classes[0] if classes and isinstance(classes[0], cst.ClassDef) else None


def _written(kind: str, src: Source, node: cst.BaseExpression, trail: Sequence[str]) -> Written | None:
    span = src.positions.get(node)
    if span is None:
        return None
    here = f"{src.path.name}:{span.line} {src.code(node)}"
    return Written(kind, str(src.path), span, node, src.code(node), (*trail, here))


def written_at(
    sources: Sources,
    file: str,
    node: cst.BaseExpression,
    chain: Sequence[PassedArgument] = (),
    trail: tuple[str, ...] = (),
    depth: int = 0,
) -> Written | None:
    """Where the value of ``node`` (an expression of ``file``) is written; see the module doc.

    ``chain``: the traced call-site arguments for the parameters of the enclosing
    ``__init__`` (innermost first), as the harness recorded them at a layer's construction.
    """
    src = source(sources, file)
    if src is None or depth > 6 or node not in src.positions:
        return None
    line = src.positions[node].line
    if is_literal(node):
        return _written(LITERAL, src, node, trail)
    if isinstance(node, cst.Name):
        return _name(sources, src, node, line, chain, trail, depth)
    if isinstance(node, cst.Attribute):
        return _attribute(sources, src, node, line, trail, depth)
    if isinstance(node, cst.Subscript):
        return _dict_entry(src, node, trail)
    return None


def _name(
    sources: Sources, src: Source, node: cst.Name, line: int, chain: Sequence[PassedArgument],
    trail: tuple[str, ...], depth: int,
) -> Written | None:
    name = node.value
    function = _function_around(src, line)
    if function is not None:
        param = _parameter(function, name)
        if param is not None:
            step = next((s for s in chain if s.param == name and s.where.file), None)
            if step is not None:
                rest = list(chain[chain.index(step) + 1:])
                caller = source(sources, step.where.file)
                argument = (
                    expression_at(caller, step.where.line, step.where.col, step.where.end_line, step.where.end_col)
                    if caller is not None else None
                )
                if caller is None or argument is None:
                    return None
                here = f"{src.path.name}:{line} {name}"
                if is_literal(argument):
                    return _written(CALL_ARGUMENT, caller, argument, (*trail, here))
                return written_at(sources, str(caller.path), argument, rest, (*trail, here), depth + 1)
            if param.default is not None and bound_once(function, name) is None:
                return _written(DEFAULT, src, param.default, trail)
            return None
        value = bound_once(function, name)
        if value is not None:
            return _follow(sources, src, value, chain, trail, depth)
        if bindings_of(function, name):
            return None  # bound more than once, or in a way no single expression writes
    value = bound_once(src.module, name)
    if value is not None:
        return _follow(sources, src, value, (), trail, depth)
    return None


def _follow(
    sources: Sources, src: Source, value: cst.BaseExpression, chain: Sequence[PassedArgument],
    trail: tuple[str, ...], depth: int,
) -> Written | None:
    """A binding's value: itself when it is the written place, else followed once more."""
    if is_literal(value):
        return _written(NAME, src, value, trail)
    if isinstance(value, cst.Name | cst.Attribute | cst.Subscript):
        here = f"{src.path.name}:{src.positions[value].line} {src.code(value)}" if value in src.positions else ""
        return written_at(sources, str(src.path), value, chain, (*trail, here) if here else trail, depth + 1)
    return None


def _attribute(
    sources: Sources, src: Source, node: cst.Attribute, line: int, trail: tuple[str, ...], depth: int
) -> Written | None:
    attr = node.attr.value
    root = node.value
    if isinstance(root, cst.Name) and root.value == "self":
        cls = _class_around(src, line)
        if cls is None:
            return None
        value = self_attribute_value(cls, attr)
        if value is not None:
            return _follow_attribute(sources, src, value, trail, depth)
        field = _class_field(cls, attr)
        return _written(ATTRIBUTE, src, field, trail) if field is not None and is_literal(field) else None
    argparse = _argparse_default(src, attr)
    if argparse is not None:
        return _written(ARGPARSE, src, argparse, trail)
    fields = [(f, s) for s in project_sources(sources, src) for cls in _classes(s) if (f := _class_field(cls, attr)) is not None]
    keywords = [
        (a.value, s) for s in project_sources(sources, src) for n in walk(s.module) if isinstance(n, cst.Call)
        for a in n.args if a.keyword is not None and a.keyword.value == attr and _builds_namespace(s, n)
    ]
    found = fields + keywords
    if len(found) == 1 and is_literal(found[0][0]):
        value, where = found[0]
        return _written(ATTRIBUTE, where, value, trail)
    return None


def self_attribute_value(cls: cst.ClassDef, attr: str) -> cst.BaseExpression | None:
    """The value of the one ``self.attr = value`` of a class, None when it is assigned otherwise."""
    values = [
        n.value for n in walk(cls)
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Attribute)
        and dotted_name(n.targets[0].target) == f"self.{attr}"
    ]
    return values[0] if len(values) == 1 else None


def _follow_attribute(
    sources: Sources, src: Source, value: cst.BaseExpression, trail: tuple[str, ...], depth: int
) -> Written | None:
    if is_literal(value):
        return _written(ATTRIBUTE, src, value, trail)
    if isinstance(value, cst.Name | cst.Attribute | cst.Subscript):
        return written_at(sources, str(src.path), value, (), trail, depth + 1)
    return None


def _class_field(cls: cst.ClassDef, attr: str) -> cst.BaseExpression | None:
    """``attr: int = 64`` or ``attr = 64`` in a class body (a dataclass field, a config class)."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                return small.value
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                    and small.targets[0].target.value == attr:
                return small.value
    return None


def _classes(src: Source) -> list[cst.ClassDef]:
    return [n for n in walk(src.module) if isinstance(n, cst.ClassDef)]


def _builds_namespace(src: Source, call: cst.Call) -> bool:
    """``SimpleNamespace(...)``, ``argparse.Namespace(...)``, ``dict(...)``, ``Config(...)`` of a
    project class: calls whose keywords become attributes (or keys) of a config object."""
    name = dotted_name(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    return last in ("SimpleNamespace", "Namespace", "EasyDict", "edict", "AttrDict") or (
        last[:1].isupper() and any(cls.name.value == last for cls in _classes(src))
    )


def project_sources(sources: Sources, src: Source) -> list[Source]:
    """The file and its sibling project files (where config classes usually live)."""
    found = [src]
    for path in sorted(src.path.parent.glob("*.py")):
        if path != src.path:
            other = source(sources, str(path))
            if other is not None:
                found.append(other)
    return found


def _argparse_default(src: Source, attr: str) -> cst.BaseExpression | None:
    """The ``default=`` of the one ``add_argument`` of the file whose destination is ``attr``."""
    found = []
    for node in walk(src.module):
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "add_argument":
            continue
        if argparse_dest(node) == attr:
            default = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "default"), None)
            found.append(default)
    return found[0] if len(found) == 1 and found[0] is not None and is_literal(found[0]) else None


def argparse_dest(call: cst.Call) -> str | None:
    """The attribute an ``add_argument`` call sets, as argparse names it: ``--device`` ->
    ``device``, ``--gpu-id`` -> ``gpu_id`` (the first long option, else the first name); ``dest=`` wins."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest" and isinstance(arg.value, cst.SimpleString):
            value = arg.value.evaluated_value
            return value if isinstance(value, str) else None
    options = [
        a.value.evaluated_value for a in call.args
        if a.keyword is None and isinstance(a.value, cst.SimpleString) and isinstance(a.value.evaluated_value, str)
    ]
    longs = [o for o in options if isinstance(o, str) and o.startswith("--")]
    chosen = longs[0] if longs else (options[0] if options else None)
    return chosen.lstrip("-").replace("-", "_") if isinstance(chosen, str) else None


def _dict_entry(src: Source, node: cst.Subscript, trail: tuple[str, ...]) -> Written | None:
    """``cfg["emb_dim"]`` <- the one ``"emb_dim": 768`` entry of a dict literal of the file."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    key = node.slice[0].slice.value
    if not isinstance(key, cst.SimpleString):
        return None
    wanted = key.evaluated_value
    values = [
        element.value for n in walk(src.module) if isinstance(n, cst.Dict) for element in n.elements
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
        and element.key.evaluated_value == wanted
    ]
    values += [
        a.value for n in walk(src.module) if isinstance(n, cst.Call) and dotted_name(n.func) == "dict"
        for a in n.args if a.keyword is not None and a.keyword.value == wanted
    ]
    if len(values) == 1 and is_literal(values[0]):
        return _written(DICT_ENTRY, src, values[0], trail)
    return None


# -- following a traced value back to the call that makes it ---------------------------------
#
# ``written_at`` above reads the source alone. ``ValueWalk`` follows a value that the run traced
# at a frame of the failure (a tensor variable, an argument) back through the program, as far
# as the source and the traced frames show: assignments and loop targets (tuple unpacking
# included), the caller's argument for a parameter, a constructor's argument for ``self.x``,
# a function's one ``return``, a Dataset's ``__getitem__``, DataLoader / TensorDataset /
# random_split / Subset, ``iter``/``next``/``enumerate``/``zip``/``list``/tqdm, imported
# modules of the project. A pattern says what ends the walk at a call (``at_call``): where
# the value is made, made on purpose, or passed through unchanged (a dtype-preserving method).


@dataclass(frozen=True)
class Key:
    """One step into a value: an item of an iterable, an element, a dict key, an attribute."""

    kind: str  # "item", "index", "key" or "attr"
    value: int | str = 0


ITEM = Key("item")

KeyPath = tuple[Key, ...]

# the loader whose batches Lightning passes to each step hook, and the Trainer calls that run them
_STEP_LOADERS = {
    "training_step": "train_dataloader", "validation_step": "val_dataloader",
    "test_step": "test_dataloader", "predict_step": "predict_dataloader",
}
_TRAINER_RUNS = frozenset({"fit", "validate", "test", "predict"})
# their keyword arguments that are neither loaders nor a DataModule
_TRAINER_NOT_DATA = frozenset({"model", "datamodule", "ckpt_path", "verbose", "return_predictions", "weights_only"})

# Hugging Face's Trainer: the methods of a Trainer subclass that take the batch (``inputs``,
# after ``self`` and ``model``), the runs that feed it and the dataset each run takes (its own
# argument, else the one given to the Trainer), and the Trainer's first parameters in order
_HF_BATCH_HOOKS = frozenset({"compute_loss", "training_step", "prediction_step"})
_HF_RUNS = {"train": "train_dataset", "evaluate": "eval_dataset", "predict": "test_dataset"}
_HF_TRAINER_PARAMS = ("model", "args", "data_collator", "train_dataset", "eval_dataset")
# the Trainer's methods that evaluate (also inside train(), at its eval_strategy)
_HF_EVALUATION = frozenset({"evaluate", "_evaluate", "evaluation_loop", "prediction_loop", "prediction_step"})


# where pip (or Debian's python3-*) installs; "<site-packages>" in a recorded run (tests/record.py)
_INSTALLED = frozenset({"site-packages", "dist-packages", "<site-packages>"})


def _framework(file: str) -> str | None:
    """The training framework a traced frame's file belongs to: "lightning", "transformers" or None."""
    parts = Path(file).parts
    if not _INSTALLED & set(parts):
        return None
    if "lightning" in parts or "pytorch_lightning" in parts:
        return "lightning"
    return "transformers" if "transformers" in parts else None


def _is_call_machinery(file: str) -> bool:
    """torch's ``Module.__call__`` and accelerate's forward wrappers: frames between a
    framework's call of the model and the model's ``forward``."""
    parts = Path(file).parts
    return bool(_INSTALLED & set(parts)) and ("torch" in parts or "accelerate" in parts)


@dataclass(frozen=True)
class ProjectFile:
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
class Instance:
    """The object ``self`` stands for: its class, and the call that built it when known."""

    cls: cst.ClassDef
    file: ProjectFile
    ctor: Ref | None


@dataclass(frozen=True)
class Context:
    """Where a name is looked up: a function body (or the module) before a line."""

    file: ProjectFile
    function: cst.FunctionDef | None
    before: int
    frame: int | None = None  # index of the traced user frame this is, if it is one
    args: Mapping[str, Ref] | None = None  # parameters bound by a call the walk came through
    instance: Instance | None = None


@dataclass(frozen=True)
class Ref:
    node: cst.BaseExpression
    ctx: Context



@dataclass(frozen=True)
class Made:
    """Where a pattern's ``at_call`` ended the walk: the call that makes the value, of a kind
    the pattern names (``"creation"``, ``"explicit"``...)."""

    call: cst.Call
    file: ProjectFile
    trail: tuple[str, ...]
    kind: str


@dataclass(frozen=True)
class Lost:
    reason: str
    file: ProjectFile | None = None
    node: cst.CSTNode | None = None
    computed: bool = False  # the value is computed by the model
    # made by a call outside torch and the project (numpy...) and returned by this Dataset item
    item: tuple[ProjectFile, cst.Return] | None = None
    trail: tuple[str, ...] = ()



Result = Made | Lost


@dataclass
class TracedFrame:
    """A traced user frame: its file, the failing expression, and where names are looked up."""

    index: int
    frame: Frame
    file: ProjectFile
    expression: cst.BaseExpression
    ctx: Context
    scope: TracedScope = field(default_factory=TracedScope)

    def described(self, name: str) -> DescribedValue | None:
        return self.scope.get(name)


@dataclass(frozen=True)
class Unreadable:
    """A traced frame whose source cannot be read as the run executed it."""

    reason: str
    frame: Frame | None = None


# A pattern's say at a call: a result that ends the walk there, or None for the generic rules.
AtCall = Callable[["ValueWalk", cst.Call, "str | None", Context, KeyPath, tuple[str, ...]], "Result | None"]


class ValueWalk:
    """Follows values traced at the user frames of a failure back to the call that makes them."""

    def __init__(self, failure: Failure, evidence: Evidence, sources: Sources, at_call: AtCall, budget: int = 120) -> None:
        self.failure = failure
        self.evidence = evidence
        self.sources = sources
        self.at_call = at_call
        self.frames = [f for f in failure.frames if f.user]
        self.budget = budget
        self._files: dict[Path, ProjectFile | None] = {}
        self.getitem: tuple[ProjectFile, cst.Return] | None = None  # the last Dataset item the walk read
        # the function a framework handed the batch to, and the key of the items it was followed by
        self.framework_batch: tuple[ProjectFile, cst.FunctionDef, str] | None = None
        self._views: dict[int, TracedFrame | Unreadable] = {}

    def follow(
        self, node: cst.BaseExpression, ctx: Context, trail: tuple[str, ...], at_call: AtCall | None = None
    ) -> Result:
        """One value, followed from its expression at a traced frame (under another policy
        than the walk's own when ``at_call`` is given: a pattern asking a second question)."""
        self.getitem = self.framework_batch = None
        own = self.at_call
        self.at_call = at_call or own
        try:
            return self.resolve(node, ctx, (), trail)
        finally:
            self.at_call = own

    def follow_name_at(self, frame: Frame, name: str) -> Result | None:
        """What ``name`` holds at a traced user frame of the failure, followed back; None when
        the frame is not one of the failure's or its source is not what the run executed."""
        index = next((i for i, f in enumerate(self.frames) if f == frame), None)
        view = self.view(index) if index is not None else None
        if not isinstance(view, TracedFrame):
            return None
        return self.follow(cst.Name(name), view.ctx, ())

    def view(self, index: int) -> TracedFrame | Unreadable:
        if index in self._views:
            return self._views[index]
        frame = self.frames[index]
        file = self.file(frame.file)
        view: TracedFrame | Unreadable
        if file is None:
            view = Unreadable(f"cannot read the project file {report_path(Path(frame.file))}", frame)
        else:
            view = self._make_view(index, frame, file)
        self._views[index] = view
        return view

    def _make_view(self, index: int, frame: Frame, file: ProjectFile) -> TracedFrame | Unreadable:
        if not traced_line_matches(file.src.module.code, frame):
            return Unreadable(f"the source of {place(frame)} is not what the traced run executed")
        expression = _failing_value(file, frame)
        if expression is None:
            return Unreadable(f"cannot find the failing expression at {place(frame)}")
        statement = file.statement(expression)
        start = file.line(statement) if statement is not None else frame.line
        function = _function_of(file, expression, frame.function)
        ctx = Context(file, function, start, frame=index, args=None, instance=_instance_of(file, function))
        return TracedFrame(index, frame, file, expression, ctx, self.evidence.scope(frame))

    def resolve(self, node: cst.BaseExpression, ctx: Context, path: KeyPath, trail: tuple[str, ...]) -> Result:
        self.budget -= 1
        if self.budget < 0:
            return Lost("the value passes through too many steps to follow", ctx.file, node, trail=trail)
        if isinstance(node, cst.Name):
            return self._name(node.value, ctx, path, trail)
        if isinstance(node, cst.Attribute):
            return self.resolve(node.value, ctx, (Key("attr", node.attr.value), *path), trail)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, ctx, path, trail)
        if isinstance(node, cst.Tuple | cst.List):
            return self._element(node, ctx, path, trail)
        if isinstance(node, cst.Dict):
            return self._dict_value(node, ctx, path, trail)
        if isinstance(node, cst.Call):
            return self._call(node, ctx, path, trail)
        if isinstance(node, cst.UnaryOperation):
            return self.resolve(node.expression, ctx, path, trail)
        if isinstance(node, cst.BinaryOperation):
            tensors = [side for side in (node.left, node.right) if not isinstance(side, cst.Integer | cst.Float)]
            if len(tensors) == 1:
                return self.resolve(tensors[0], ctx, path, trail)
        return Lost(f"it is computed by `{ctx.file.code(node)}`", ctx.file, node, trail=trail)

    def _subscript(self, node: cst.Subscript, ctx: Context, path: KeyPath, trail: tuple[str, ...]) -> Result:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            number = integer_value(index)
            if number is not None:
                return self.resolve(node.value, ctx, (Key("index", number), *path), trail)
            if isinstance(index, cst.SimpleString):
                key = index.evaluated_value
                if isinstance(key, str):
                    return self.resolve(node.value, ctx, (Key("key", key), *path), trail)
        # indexing a tensor by anything else (a sample index, a slice, a mask) keeps its dtype
        return self.resolve(node.value, ctx, path, trail)

    def _element(self, node: cst.Tuple | cst.List, ctx: Context, path: KeyPath, trail: tuple[str, ...]) -> Result:
        if not path or path[0].kind != "index" or any(isinstance(e, cst.StarredElement) for e in node.elements):
            return Lost(f"`{ctx.file.code(node)}` is not one tensor", ctx.file, node, trail=trail)
        index = int(path[0].value)
        if not -len(node.elements) <= index < len(node.elements):
            return Lost(f"`{ctx.file.code(node)}` has no element {index}", ctx.file, node, trail=trail)
        return self.resolve(node.elements[index].value, ctx, path[1:], trail)

    def _dict_value(self, node: cst.Dict, ctx: Context, path: KeyPath, trail: tuple[str, ...]) -> Result:
        if path and path[0].kind == "key":
            for element in node.elements:
                if (
                    isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                    and element.key.evaluated_value == path[0].value
                ):
                    return self.resolve(element.value, ctx, path[1:], trail)
        return Lost(f"`{ctx.file.code(node)}` is a dict the walk cannot index", ctx.file, node, trail=trail)

    def _name(self, name: str, ctx: Context, path: KeyPath, trail: tuple[str, ...]) -> Result:
        file = ctx.file
        bound = self.last_bind(ctx, name)
        if bound is not None:
            statement, target_path = bound
            step = (*trail, file.step(statement))
            at = replace(ctx, before=file.line(statement))
            if isinstance(statement, cst.For):
                return self.resolve(statement.iter, at, (ITEM, *target_path, *path), step)
            if isinstance(statement, cst.AugAssign):
                # `x += y` updates x in place: x keeps the dtype it had
                return self._name(name, at, path, step)
            if isinstance(statement, cst.Assign | cst.AnnAssign) and statement.value is not None:
                return self.resolve(statement.value, at, (*target_path, *path), step)
            return Lost(f"`{name}` is bound by `{file.code(statement)}`", file, statement, trail=trail)
        function = ctx.function
        if function is not None and name in parameter_names(function):
            if ctx.instance is not None and _self_name(function) == name:
                if path and path[0].kind == "attr":
                    return self._attribute(ctx.instance, str(path[0].value), path[1:], trail)
                return Lost(f"`{name}` is the object itself", file, function, trail=trail)
            batch = self._framework_batch(ctx, name, path, trail)
            if batch is not None:
                return batch
            argument_ref = self._argument(ctx, name)
            if isinstance(argument_ref, Lost):
                return replace(argument_ref, trail=trail)
            caller = argument_ref.ctx.file
            step = (*trail, f"{caller.step(argument_ref.node)} passed as `{name}`")
            return self.resolve(argument_ref.node, argument_ref.ctx, path, step)
        if function is not None:
            module_ctx = Context(file, None, self._module_line(file))
            if self.last_bind(module_ctx, name) is not None:
                return self._name(name, module_ctx, path, trail)
        imported = self._imported(file, name)
        if imported is not None:
            other, real = imported
            return self._name(real, Context(other, None, self._module_line(other)), path, trail)
        return Lost(f"`{name}` is not assigned in the project's code before it is used", file, function, trail=trail)

    def _attribute(self, instance: Instance, attr: str, path: KeyPath, trail: tuple[str, ...]) -> Result:
        file = instance.file
        found: list[tuple[cst.FunctionDef, cst.Assign | cst.AnnAssign, KeyPath]] = []
        for method in _methods(instance.cls):
            me = _self_name(method)
            if me is None:
                continue
            for node in own_nodes(method):
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        where = _target_path(target.target, functools.partial(_is_self_attr, me=me, attr=attr))
                        if where is not None:
                            found.append((method, node, where))
                elif isinstance(node, cst.AnnAssign) and node.value is not None and _is_self_attr(node.target, me, attr):
                    found.append((method, node, ()))
        if len(found) != 1:
            what = "never assigned" if not found else f"assigned in {len(found)} places"
            return Lost(f"`self.{attr}` of {instance.cls.name.value} is {what}", file, instance.cls, trail=trail)
        method, statement, where = found[0]
        value = statement.value
        assert value is not None
        args: Mapping[str, Ref] = {}
        if method.name.value == "__init__" and instance.ctor is not None:
            ctor = instance.ctor.node
            assert isinstance(ctor, cst.Call)
            args = _bind(ctor, method, True, instance.ctor.ctx)
        ctx = Context(file, method, file.line(statement), args=args, instance=instance)
        step = (*trail, file.step(statement))
        return self.resolve(value, ctx, (*where, *path), step)

    def _call(self, call: cst.Call, ctx: Context, path: KeyPath, trail: tuple[str, ...]) -> Result:
        file = ctx.file
        qualified = file.src.imports.qualify(call.func)
        decided = self.at_call(self, call, qualified, ctx, path, trail)
        if decided is not None:
            return decided
        data = self._data_call(call, qualified, ctx, path, trail)
        if data is not None:
            return data
        defined = self._definition(ctx, call.func)
        if defined is not None:
            return self._user_call(call, ctx, defined, path, trail)
        code = file.code(call)
        if self._is_model(call, ctx):
            return Lost(f"it is computed by the model, `{code}`", file, call, computed=True, trail=trail)
        return Lost(f"it comes from `{code}`, which the walk cannot follow", file, call, item=self.getitem, trail=trail)

    def _data_call(
        self, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        """DataLoader, datasets, splits and the builtins that pass items through."""
        file = ctx.file
        head = path[0] if path else None
        step = (*trail, file.step(call))
        if is_torch_name(qualified, "torch.utils.data.DataLoader") and head == ITEM:
            if keyword_arg(call, "collate_fn") is not None:
                return Lost("the DataLoader builds its batches with a collate_fn of its own", file, call, trail=trail)
            dataset = argument(call, 0, "dataset")
            if dataset is None:
                return Lost("the DataLoader's dataset is not given", file, call, trail=trail)
            return self.resolve(dataset.value, ctx, path, step)
        if is_torch_name(qualified, "torch.utils.data.TensorDataset") and head == ITEM and len(path) > 1:
            if path[1].kind != "index" or any(arg.star or arg.keyword for arg in call.args):
                return Lost(f"cannot tell which tensor of `{file.code(call)}` it is", file, call, trail=trail)
            tensors = positional_args(call)
            index = int(path[1].value)
            if not -len(tensors) <= index < len(tensors):
                return Lost(f"`{file.code(call)}` has no tensor {index}", file, call, trail=trail)
            return self.resolve(tensors[index].value, ctx, path[2:], step)
        if is_torch_name(qualified, "torch.utils.data.random_split") and head is not None and head.kind == "index":
            dataset = argument(call, 0, "dataset")
            if dataset is not None and len(path) > 1 and path[1] == ITEM:
                return self.resolve(dataset.value, ctx, path[1:], step)
        if is_torch_name(qualified, "torch.utils.data.Subset") and head == ITEM:
            dataset = argument(call, 0, "dataset")
            if dataset is not None:
                return self.resolve(dataset.value, ctx, path, step)
        builtin = qualified is None and isinstance(call.func, cst.Name) and call.func.value not in file.src.imports.aliases
        name = call.func.value if isinstance(call.func, cst.Name) else None
        passes_items = (builtin and name in ("iter", "list", "tuple")) or (qualified or "").split(".")[0] == "tqdm"
        if passes_items and call.args and head == ITEM:
            return self.resolve(call.args[0].value, ctx, path, step)
        if builtin and name == "dict" and head is not None and head.kind == "key" and not any(a.keyword is None for a in call.args):
            given = keyword_arg(call, str(head.value))  # dict(input_ids=..., labels=labels): a collator's batch
            if given is None:
                return Lost(f"`{file.code(call)}` has no key {head.value!r}", file, call, trail=trail)
            return self.resolve(given.value, ctx, path[1:], step)
        if builtin and name == "next" and call.args:
            return self.resolve(call.args[0].value, ctx, (ITEM, *path), step)
        if builtin and name in ("enumerate", "zip") and head == ITEM and len(path) > 1 and path[1].kind == "index":
            index = int(path[1].value)
            items = positional_args(call)
            if name == "enumerate":
                if index != 1 or not items:
                    return Lost("it is the counter of enumerate()", file, call, trail=trail)
                return self.resolve(items[0].value, ctx, (ITEM, *path[2:]), step)
            if not 0 <= index < len(items) or any(arg.star for arg in call.args):
                return Lost(f"cannot tell which iterable of `{file.code(call)}` it comes from", file, call, trail=trail)
            return self.resolve(items[index].value, ctx, (ITEM, *path[2:]), step)
        return None

    def _user_call(
        self, call: cst.Call, ctx: Context, defined: tuple[ProjectFile, cst.ClassDef | cst.FunctionDef, bool],
        path: KeyPath, trail: tuple[str, ...],
    ) -> Result:
        """A class of the project (its items or attributes) or a function of it (its return)."""
        file, definition, method = defined
        step = (*trail, ctx.file.step(call))
        if isinstance(definition, cst.ClassDef):
            instance = Instance(definition, file, Ref(call, ctx))
            head = path[0] if path else None
            if head == ITEM:
                getitem = next((m for m in _methods(definition) if m.name.value == "__getitem__"), None)
                if getitem is None:
                    return Lost(f"{definition.name.value} has no __getitem__ of its own", file, definition, trail=step)
                return self._returned(getitem, file, {}, instance, path[1:], step)
            if head is not None and head.kind == "attr":
                return self._attribute(instance, str(head.value), path[1:], step)
            return Lost(f"`{ctx.file.code(call)}` makes an object, not a tensor", ctx.file, call, trail=trail)
        args = _bind(call, definition, method, ctx)
        return self._returned(definition, file, args, ctx.instance if method else None, path, step)

    def _returned(
        self, function: cst.FunctionDef, file: ProjectFile, args: Mapping[str, Ref], instance: Instance | None,
        path: KeyPath, trail: tuple[str, ...],
    ) -> Result:
        returns = [node for node in own_nodes(function) if isinstance(node, cst.Return) and node.value is not None]
        if len(returns) != 1:
            return Lost(f"{function.name.value}() has {len(returns) or 'no'} return statements", file, function, trail=trail)
        value = returns[0].value
        assert value is not None
        if function.name.value == "__getitem__":
            self.getitem = (file, returns[0])
        ctx = Context(file, function, file.line(returns[0]), args=args, instance=instance)
        step = (*trail, file.step(returns[0]))
        return self.resolve(value, ctx, path, step)


    # scopes -----------------------------------------------------------------------------
    def last_bind(self, ctx: Context, name: str) -> tuple[cst.CSTNode, KeyPath] | None:
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
        where: KeyPath | None = ()
        if isinstance(found, cst.Assign):
            where = next(
                (p for t in found.targets if (p := _target_path(t.target, lambda n: _is_name(n, name))) is not None), None
            )
        elif isinstance(found, cst.For):
            where = _target_path(found.target, lambda n: _is_name(n, name))
        if where is None:
            return None
        return found, where

    def _argument(self, ctx: Context, name: str) -> Ref | Lost:
        function = ctx.function
        assert function is not None
        if ctx.args is not None:
            found = ctx.args.get(name)
            if found is not None:
                return found
            return Lost(f"`{name}`, a parameter of {function.name.value}(), is not given by a call the walk followed", ctx.file, function)
        if ctx.frame is None or ctx.frame == 0:
            return Lost(f"{function.name.value}() is called from outside the project's code", ctx.file, function)
        caller = self.view(ctx.frame - 1)
        if isinstance(caller, Unreadable):
            return Lost(caller.reason)
        exact = caller.frame.col is not None and isinstance(caller.expression, cst.Call)
        calls = [
            node for node in walk(caller.expression)
            if isinstance(node, cst.Call) and _calls(node, function, caller.ctx.file)
            # without traced columns the caller's line may hold several calls: the module's own
            and (exact or function.name.value != "forward" or self._runs_forward(node, caller, ctx.instance))
        ]
        if exact:
            calls = calls[:1] if calls and calls[0] is caller.expression else []
            if not calls and isinstance(caller.expression, cst.Call) and self._adjacent(ctx.frame - 1):
                # the traced call ran the next frame straight away (no library frame between): a
                # closure or a function held under another name (step_fn = make_step_fn(...))
                calls = [caller.expression]
        if len(calls) != 1:
            return Lost(
                f"which call at {place(caller.frame)} runs {function.name.value}() is not certain",
                caller.file, caller.expression,
            )
        call = calls[0]
        bound = _bind(call, function, _is_method(ctx.file, function), caller.ctx)
        found = bound.get(name)
        if found is None:
            return Lost(f"the call at {place(caller.frame)} passes `{name}` in a way the walk cannot follow", caller.file, call)
        return found

    def _framework_batch(self, ctx: Context, name: str, path: KeyPath, trail: tuple[str, ...]) -> Result | None:
        """The batch a framework hands the user's code, followed to where its items are made:
        Lightning's ``*_step`` hooks (see _lightning_batch) and the model's ``forward`` or a
        Trainer subclass's ``compute_loss`` under Hugging Face's Trainer (see _hf_batch).

        Only where the run proves it: the traced frame that called the hook is the framework's
        (past torch's module call), and the user frame before it is the traced run call
        (``trainer.fit(...)``, ``trainer.train()``...)."""
        function = ctx.function
        if function is None or ctx.instance is None or ctx.frame is None or ctx.frame == 0:
            return None
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if name not in params[1:]:
            return None
        frames = list(self.failure.frames)
        hook = self.frames[ctx.frame]
        position = next((i for i, f in enumerate(frames) if f is hook), None)
        if position is None:
            return None
        position -= 1
        while position >= 0 and _is_call_machinery(frames[position].file):
            position -= 1
        framework = _framework(frames[position].file) if position >= 0 else None
        if framework is None:
            return None
        caller = self.view(ctx.frame - 1)
        if isinstance(caller, Unreadable) or not isinstance(caller.expression, cst.Call):
            return None
        run = caller.expression
        if not isinstance(run.func, cst.Attribute):
            return None
        if framework == "lightning" and params[1:2] == [name] and run.func.attr.value in _TRAINER_RUNS:
            return self._lightning_batch(ctx, caller, run, path, trail)
        if framework == "transformers" and run.func.attr.value in _HF_RUNS:
            # the evaluation train() runs (eval_strategy) takes its batches from the eval dataset
            start = next((i for i, f in enumerate(frames) if f is caller.frame), position)
            evaluating = any(f.function in _HF_EVALUATION for f in frames[start:position + 1] if _framework(f.file) == "transformers")
            if function.name.value == "forward":
                self.framework_batch = (ctx.file, function, name)
                return self._hf_batch(function, caller, run, evaluating, (Key("key", name), *path), trail)
            if function.name.value in _HF_BATCH_HOOKS and params[2:3] == [name]:
                return self._hf_batch(function, caller, run, evaluating, path, trail)
        return None

    def _lightning_batch(
        self, ctx: Context, caller: TracedFrame, run: cst.Call, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        """The batch Lightning hands a LightningModule's ``*_step`` hook: an item of the loader
        that the DataModule given to ``trainer.fit(...)`` (or else the module itself) returns."""
        function, owner = ctx.function, ctx.instance
        assert function is not None and owner is not None
        loader = _STEP_LOADERS.get(function.name.value)
        if loader is None:
            return None
        # what the call is given besides the model: the DataModule (``datamodule=``, or the
        # argument after the model, which may be loaders instead), or loaders, which replace
        # the module's own; whose batch such loaders give is not followed here
        positional = [a for a in run.args if a.keyword is None][1:]
        keywords = [a for a in run.args if a.keyword is not None and a.keyword.value not in _TRAINER_NOT_DATA]
        datamodule = [a for a in run.args if a.keyword is not None and a.keyword.value == "datamodule"]
        given = positional + datamodule
        if keywords or len(given) > 1:
            return Lost(f"the loaders passed to `{caller.file.code(run.func)}(...)` are not followed", caller.file, run, trail=trail)
        if given:
            made = self._datamodule(caller, given[0].value, given[0].keyword is not None, run, trail)
            if isinstance(made, Lost):
                return made
            owner, trail = made
        method = next((m for m in _methods(owner.cls) if m.name.value == loader), None)
        if method is None:
            return Lost(f"{owner.cls.name.value} has no {loader}() of its own", owner.file, owner.cls, trail=trail)
        step = (*trail, f"Lightning passes {function.name.value}() a batch of {owner.cls.name.value}.{loader}()")
        return self._returned(method, owner.file, {}, owner, (ITEM, *path), step)

    def _datamodule(
        self, caller: TracedFrame, given: cst.BaseExpression, by_keyword: bool, run: cst.Call, trail: tuple[str, ...]
    ) -> tuple[Instance, tuple[str, ...]] | Lost:
        """The DataModule a Trainer call is given (``datamodule=`` when ``by_keyword``, else the
        argument after the model): made at the call, or bound once by name before it. Given
        positionally, it must be a LightningDataModule of the project: that place also takes
        loaders, which are not followed."""
        code = caller.file.code(given)
        ctx = caller.ctx
        if isinstance(given, cst.Name):
            scopes = [s for s in (ctx.function, caller.file.src.module) if s is not None]
            found = next((b for b in (bindings_of(scope, given.value) for scope in scopes) if b), [])
            if len(found) != 1:
                what = "never bound" if not found else f"bound in {len(found)} places"
                return Lost(f"`{code}`, given to `{caller.file.code(run.func)}(...)`, is {what}; which object it is is not certain",
                            caller.file, run, trail=trail)
            statement, value = found[0].statement, plain_value(found[0])
            if value is None or caller.file.line(statement) >= ctx.before:
                return Lost(f"`{code}`, given to `{caller.file.code(run.func)}(...)`, is bound by `{caller.file.code(statement)}`",
                            caller.file, statement, trail=trail)
            trail = (*trail, caller.file.step(statement))
            ctx = replace(ctx, before=caller.file.line(statement))
            given = value
        if not isinstance(given, cst.Call):
            if not by_keyword:
                return Lost(f"the loaders passed to `{caller.file.code(run.func)}(...)` are not followed", caller.file, run, trail=trail)
            return Lost(f"`{code}`, the DataModule, is not made at the call or bound once by name", caller.file, run, trail=trail)
        defined = self._definition(ctx, given.func)
        if defined is None or not isinstance(defined[1], cst.ClassDef):
            if not by_keyword:
                return Lost(f"the loaders passed to `{caller.file.code(run.func)}(...)` are not followed", caller.file, run, trail=trail)
            return Lost(f"the DataModule `{code}` is not a class of the project", caller.file, run, trail=trail)
        home, cls = defined[0], defined[1]
        if not by_keyword and lightning_classes(home.src.module, home.src.imports, LIGHTNING_DATAMODULES).get(cls.name.value) is not cls:
            return Lost(f"`{code}`, given to `{caller.file.code(run.func)}(...)`, is not a LightningDataModule of the project "
                        "(loaders there are not followed)", caller.file, run, trail=trail)
        return Instance(cls, home, Ref(given, ctx)), trail

    def _hf_batch(
        self, function: cst.FunctionDef, caller: TracedFrame, run: cst.Call, evaluating: bool, path: KeyPath,
        trail: tuple[str, ...],
    ) -> Result:
        """The batch Hugging Face's Trainer hands the model's ``forward`` (as keywords) or a
        Trainer subclass's ``compute_loss``: the items of the dataset the run takes (the eval
        dataset where ``train()`` is ``evaluating`` at its eval_strategy), collated by
        the ``data_collator`` given to the Trainer (followed into a collator of the project) or
        else by transformers' default collator, which stacks each key of the items as it is."""
        file, method = caller.file, run.func
        assert isinstance(method, cst.Attribute)
        wanted = "eval_dataset" if method.attr.value == "train" and evaluating else _HF_RUNS[method.attr.value]
        trainer = self._hf_trainer(caller, method.value)
        if isinstance(trainer, Lost):
            return replace(trainer, trail=trail)
        made, made_ctx = trainer
        dataset: Ref | None = None
        if method.attr.value != "train":
            given = argument(run, 0, wanted)
            dataset = Ref(given.value, caller.ctx) if given is not None else None
        if dataset is None:
            given = argument(made, _HF_TRAINER_PARAMS.index(wanted), wanted) if wanted in _HF_TRAINER_PARAMS else None
            if given is None:
                return Lost(f"no {wanted} is given to `{file.code(run.func)}(...)` or the Trainer", file, run, trail=trail)
            dataset = Ref(given.value, made_ctx)
        phase = f"Trainer.{method.attr.value}()" + (" evaluating" if evaluating and method.attr.value == "train" else "")
        step = (*trail, f"{phase} passes {function.name.value}() a batch of `{dataset.ctx.file.code(dataset.node)}`")
        collator = argument(made, _HF_TRAINER_PARAMS.index("data_collator"), "data_collator")
        if collator is None:
            if argument(made, 5, "processing_class") is not None or keyword_arg(made, "tokenizer") is not None:
                return Lost("the Trainer pads its batches with the processing class's collator", made_ctx.file, made, trail=trail)
            return self.resolve(dataset.node, dataset.ctx, (ITEM, *path), step)
        return self._collated(Ref(collator.value, made_ctx), path, step)

    def _hf_trainer(self, caller: TracedFrame, trainer: cst.BaseExpression) -> tuple[cst.Call, Context] | Lost:
        """The ``Trainer(...)`` call that made the trainer a run is called on, in the caller's scope."""
        file = caller.file
        bound = self.last_bind(caller.ctx, trainer.value) if isinstance(trainer, cst.Name) else None
        if bound is None or not isinstance(bound[0], cst.Assign) or bound[1] != () or not isinstance(bound[0].value, cst.Call):
            return Lost(f"`{file.code(trainer)}`, the Trainer, is not made by a call in the same function", file, trainer)
        return bound[0].value, replace(caller.ctx, before=file.line(bound[0]))

    def _collated(self, collator: Ref, path: KeyPath, trail: tuple[str, ...]) -> Result:
        """A batch returned by a data collator of the project: an instance of a class with a
        ``__call__`` (made at the Trainer call or bound before it), or a function."""
        node, ctx = collator.node, collator.ctx
        if isinstance(node, cst.Name):
            bound = self.last_bind(ctx, node.value)
            if bound is not None and isinstance(bound[0], cst.Assign) and bound[1] == () and isinstance(bound[0].value, cst.Call):
                ctx = replace(ctx, before=ctx.file.line(bound[0]))
                node = bound[0].value
        what = node.func if isinstance(node, cst.Call) else node
        defined = self._definition(ctx, what)
        if defined is None:
            return Lost(f"the batches are made by the collator `{ctx.file.code(collator.node)}`, which the walk does not follow", ctx.file, collator.node, trail=trail)
        home, definition, _ = defined
        step = (*trail, f"collated by {ctx.file.step(node)}")
        if isinstance(definition, cst.ClassDef) and isinstance(node, cst.Call):
            call = next((m for m in _methods(definition) if m.name.value == "__call__"), None)
            if call is None:
                return Lost(f"{definition.name.value} has no __call__ of its own", home, definition, trail=trail)
            return self._returned(call, home, {}, Instance(definition, home, Ref(node, ctx)), path, step)
        if isinstance(definition, cst.FunctionDef) and not isinstance(node, cst.Call):
            return self._returned(definition, home, {}, None, path, step)
        return Lost(f"the collator `{ctx.file.code(collator.node)}` is not a collator the walk can follow", ctx.file, collator.node, trail=trail)

    def _adjacent(self, index: int) -> bool:
        """Whether user frame ``index`` and the next one follow each other in the traceback."""
        frames = list(self.failure.frames)
        if index + 1 >= len(self.frames):
            return False
        caller, callee = self.frames[index], self.frames[index + 1]
        positions = [i for i, f in enumerate(frames) if f is caller or f is callee]
        return len(positions) == 2 and positions[1] == positions[0] + 1

    def _module_line(self, file: ProjectFile) -> int:
        """The module's statements that ran: up to its traced line when it is a frame of the failure."""
        for frame in self.frames:
            if frame.function == "<module>" and Path(frame.file) == file.path:
                view = self.view(self.frames.index(frame))
                return view.ctx.before if isinstance(view, TracedFrame) else frame.line
        return 1 << 30

    def _definition(self, ctx: Context, func: cst.BaseExpression) -> tuple[ProjectFile, cst.ClassDef | cst.FunctionDef, bool] | None:
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

    def _imported(self, file: ProjectFile, name: str) -> tuple[ProjectFile, str] | None:
        """``(file, name)`` of a name imported from another module of the project."""
        qualified = file.src.imports.aliases.get(name)
        if qualified is None or "." not in qualified:
            return None
        module, _, real = qualified.rpartition(".")
        other = self._project_module(module)
        return (other, real) if other is not None else None

    def _project_module(self, module: str) -> ProjectFile | None:
        tails = (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py")
        known = {Path(f) for f in (*self.evidence.imported_files, *(f.file for f in self.frames))}
        matches = [p for p in known if any(p.as_posix() == t or p.as_posix().endswith("/" + t) for t in tails)]
        if len(matches) != 1:
            return None
        return self.file(str(matches[0]))

    def _runs_forward(self, call: cst.Call, caller: TracedFrame, instance: Instance | None) -> bool:
        """Whether a call in the caller's frame calls the module whose ``forward`` failed: a
        submodule (``self.encoder(x)``), or a module variable of that class (``model(x)``)."""
        func = call.func
        if isinstance(func, cst.Attribute):
            return self._is_model(call, caller.ctx)
        described = caller.described(func.value) if isinstance(func, cst.Name) else None
        if described is None or not described.is_module:
            return False
        return instance is None or described.type == instance.cls.name.value

    def _is_model(self, call: cst.Call, ctx: Context) -> bool:
        func = call.func
        if (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and ctx.function is not None
            and _self_name(ctx.function) == func.value.value
        ):
            return True
        if isinstance(func, cst.Name) and ctx.frame is not None:
            view = self.view(ctx.frame)
            described = view.described(func.value) if isinstance(view, TracedFrame) else None
            return described is not None and described.is_module
        return False

    def file(self, name: str) -> ProjectFile | None:
        path = Path(name)
        if path not in self._files:
            parsed = source(self.sources, name)
            self._files[path] = (
                ProjectFile(parsed, parsed.wrapper.resolve(ParentNodeProvider)) if parsed is not None else None
            )
        return self._files[path]



def _function_of(file: ProjectFile, node: cst.CSTNode, name: str) -> cst.FunctionDef | None:
    if name == "<module>":
        return None
    function = file.enclosing(node, cst.FunctionDef)
    if name.startswith("<"):  # a comprehension's or lambda's frame: the function around it
        return function if isinstance(function, cst.FunctionDef) else None
    while function is not None and isinstance(function, cst.FunctionDef) and function.name.value != name:
        function = file.enclosing(function, cst.FunctionDef)
    return function if isinstance(function, cst.FunctionDef) else None


def _instance_of(file: ProjectFile, function: cst.FunctionDef | None) -> Instance | None:
    if function is None or _self_name(function) is None:
        return None
    block = file.parents.get(function)
    cls = file.parents.get(block) if block is not None else None
    return Instance(cls, file, None) if isinstance(cls, cst.ClassDef) else None


def _is_method(file: ProjectFile, function: cst.FunctionDef) -> bool:
    block = file.parents.get(function)
    return isinstance(file.parents.get(block) if block is not None else None, cst.ClassDef) and not any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators
    )


def _self_name(function: cst.FunctionDef) -> str | None:
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params and params[0].name.value in ("self", "cls") else None


def _bind(call: cst.Call, function: cst.FunctionDef, method: bool, ctx: Context) -> dict[str, Ref]:
    """The arguments of ``call`` by the parameter names of ``function`` (``self`` skipped for a method)."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if method:
        params = params[1:]
    bound: dict[str, Ref] = {}
    if not any(arg.star == "*" for arg in call.args):
        for name, arg in zip(params, positional_args(call), strict=False):
            bound[name] = Ref(arg.value, ctx)
    for arg in call.args:
        if arg.keyword is not None:
            bound[arg.keyword.value] = Ref(arg.value, ctx)
    return bound


def _calls(call: cst.Call, function: cst.FunctionDef, file: ProjectFile) -> bool:
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


def own_nodes(scope: cst.FunctionDef | cst.Module) -> list[cst.CSTNode]:
    """The nodes of a function's body (or a module's), in source order, nested functions,
    classes and lambdas left out."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [scope.body] if isinstance(scope, cst.FunctionDef) else list(reversed(scope.body))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            continue
        found.append(node)
        stack.extend(reversed(node.children))
    return found


def _top_level(file: ProjectFile, name: str) -> cst.ClassDef | cst.FunctionDef | None:
    found = None
    for statement in file.src.module.body:
        if isinstance(statement, cst.ClassDef | cst.FunctionDef) and statement.name.value == name:
            found = statement
    return found


def _target_path(target: cst.BaseExpression, wanted: Callable[[cst.BaseExpression], bool]) -> KeyPath | None:
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
            return (Key("index", index), *inner)
    return None


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_self_attr(node: cst.BaseExpression, me: str, attr: str) -> bool:
    return isinstance(node, cst.Attribute) and _is_name(node.value, me) and node.attr.value == attr



def frame_of(file: ProjectFile | None, node: cst.CSTNode | None) -> Frame | None:
    """A frame-like place for a node (where a decline points the user)."""
    if file is None or node is None or node not in file.src.positions:
        return None
    return Frame(file=str(file.path), line=file.line(node), user=True)


def _failing_value(file: ProjectFile, frame: Frame) -> cst.BaseExpression | None:
    """The expression a frame was executing; for a whole statement (no traced columns), its value."""
    node = failing_expression(file.src.positions, frame)
    if isinstance(node, cst.SimpleStatementLine):
        if len(node.body) != 1:
            return None
        small = node.body[0]
        if isinstance(small, cst.Expr | cst.Assign | cst.AugAssign | cst.Return) and small.value is not None:
            return small.value
        return None
    return node if isinstance(node, cst.BaseExpression) else None
