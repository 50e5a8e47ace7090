"""rnn-hidden-shape: an RNN/GRU/LSTM given an initial hidden state of the wrong shape."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    Source,
    argument,
    events,
    local_tensors,
    own_nodes,
    place,
    resolve_site,
    shape_of,
    shape_text,
    source,
)
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes
from repairbot.evidence import DescribedValue, Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame, Site

_SIZE = r"[\(\[](?P<{}>[\d,\s]*)[\)\]]"
_INIT_NAMES = re.compile(r"^(?:init_?hidden\w*|initHidden\w*|init_state\w*|begin_state)$")


def _ints(text: str | None) -> list[int]:
    return [int(v) for v in re.findall(r"\d+", text or "")]


@dataclass(frozen=True)
class BatchSizeArgument(Rewrite):
    """Replaces the first argument of the ``init_hidden(...)`` call with the batch's own size."""

    parameter: str  # the name of the argument replaced
    batch: str  # the batch size, as code

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, 0, self.parameter)
        if target is None:
            raise EditError(f"no {self.parameter} argument")
        return [Edit(target.value, cst.parse_expression(self.batch))]


class RnnHiddenShape(Pattern):
    """Gives an ``init_hidden(batch_size)`` call made per batch the batch's real size.

    What it fixes:
        An ``init_hidden(batch_size)`` (``initHidden``, ``init_state``) called for every batch
        inside the training loop with a fixed batch size, when a batch (the last partial one,
        an evaluation batch) has another size: the argument becomes the batch's own size,
        ``inputs.size(0)`` (``size(1)`` for sequence-first inputs). A batch moved or cast in the
        loop (``inputs = inputs.cuda()``) keeps its size; names rebound further down the body (a
        validation pass) do not count; a batch the body makes before the call
        (``current_seq = torch.LongTensor(current_seq)`` in a generation loop) gives the size
        when nothing rebinds it up to the RNN. The same for a state made afresh in the failing function
        itself, outside any loop (``predict(net, review)``: ``h = net.init_hidden(batch_size)``
        then ``net(feature_tensor, h)``), or made at the top of a function called per batch before
        its time-step loop (``train(inp, target)``: ``decoder.init_hidden(args.batch_size)``, then
        ``for c in range(chunk_len)``): it takes the size of a tensor that function holds, bound
        before the call and not rebound up to the RNN nor anywhere in a loop between them (a batch
        the loop binds means the state is carried). Diagnosed: a hidden state
        made once and carried across batches, ``num_layers`` or ``bidirectional`` changed
        without the hidden state, a 2-D hidden state for batched input.

    Why it fails:
        ``RuntimeError: Expected hidden[0] size (2, 1, 64), got [2, 2, 64]`` (LSTM; hidden[1]
        for the cell state), ``Expected hidden size (1, 4, 128), got [1, 8, 128]`` (RNN/GRU;
        torch < 1.5 prints ``got (1, 8, 128)``), ``For batched 3-D input, hx should also be 3-D
        but got 2-D tensor`` (torch >= 1.11; LSTM: ``hx and cx should also be 3-D``), and in 0.3
        ``Expected more hidden states in stacked_rnn``. The state must be ``(num_layers *
        num_directions, batch, hidden_size)``. The tracing run records the failing RNN (its
        sizes, the line that built it) and the input it got; the tensors of the loop's frame
        and the code tell where the state was made.

    Example:
        ``h = net.init_hidden(batch_size)`` inside ``for inputs, labels in train_loader:`` with
        a last batch of 1: "batch: 1 expected, 2 in the state made at train.py:40"; the fix is
        ``h = net.init_hidden(inputs.size(0))``.

    Fix safety:
        Safe: only the size given to the per-batch ``init_hidden`` call changes, to the size
        of the batch the loop just took, which is what the state must have; the rerun
        verifies. Made only when the state's layers and hidden size already match and the
        batch dimension of the loop's tensor is unambiguous.

    Not handled:
        States carried across batches (truncated BPTT): the diagnosis names the remedies
        (``drop_last=True``, or a new state when the batch size changes); states built with
        ``torch.zeros(...)`` in ``forward`` from a stored batch size (diagnosed).
    """

    ID = "rnn-hidden-shape"
    TITLE = "RNN hidden state has the wrong shape"
    TAGS = frozenset({"shape", "rnn"})
    APPLICABILITY = Applicability.SAFE
    EVIDENCE = frozenset({"failing_module", "locals"})
    SIGNATURES = (
        signature("RuntimeError", r"Expected hidden(?:\[(?P<which>[01])\])? size " + _SIZE.format("expected")
                  + r",\s*got " + _SIZE.format("got")),
        signature("RuntimeError", r"For (?P<batched>batched 3-D|unbatched 2-D) input, hx(?: and cx)? should also be "
                  + r"(?P<want>\d)-D but got (?P<got_dims>[\w\s,()-]+?) tensors?"),
        signature("RuntimeError", phrase("Expected more hidden states in stacked_rnn")),
    )
    REWRITES = (BatchSizeArgument,)
    # its raise line: `hx.size()` above it raises an AttributeError for a (h, c) tuple given to a GRU
    RAISING_FRAMES = (("torch/nn/modules/rnn.py", "check_hidden_size", "raise RuntimeError("),)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        groups = match.groupdict()
        module = evidence.failing_module if evidence else None
        kind = module.type if module and module.type else "RNN"
        built = resolve_site(evidence, module.site) if module else None
        layer = f"nn.{kind}({module.input_size}, {module.hidden_size})" if module else f"the {kind}"
        layer += f" built at {place(built)}" if built else ""
        if groups.get("batched"):
            batched = groups["batched"].startswith("batched")
            return self.decline(
                f"{layer} got {'batched 3-D' if batched else 'unbatched 2-D'} input but a hidden state of "
                f"{groups['got_dims'].strip()}",
                diagnosis=("Make the state (num_layers * num_directions, batch, hidden_size): "
                           + ("h.unsqueeze(0) for a one-layer state made as (batch, hidden)" if batched
                              else "drop the batch dimension of the state, or batch the input")),
                at=frame,
            )
        if not groups.get("expected"):
            return self.decline(f"{layer}: fewer hidden states than layers (torch 0.3)", diagnosis=self.remedy(), at=frame)
        expected, got = _ints(groups["expected"]), _ints(groups["got"])
        state = "hidden[1] (the cell state)" if groups.get("which") == "1" else "the hidden state"
        meaning = _meaning(expected, got)
        reason = f"{layer}: {state} must be {tuple(expected)} and is {shape_text(got)} ({meaning})"
        if len(expected) != 3 or len(got) != 3:
            return self.decline(reason, diagnosis=("Make the state 3-D, (num_layers * num_directions, batch, "
                                                   "hidden_size): h.unsqueeze(0) for a one-layer state."), at=frame)
        if expected[0] != got[0] or expected[2] != got[2]:
            return self.decline(
                reason,
                diagnosis=(f"Build the state with the RNN's own sizes: {expected[0]} = num_layers x num_directions, "
                           f"{expected[2]} = hidden_size (num_layers or bidirectional changed without the state?); "
                           "read them from the module (self.rnn.num_layers, self.rnn.hidden_size)."),
                at=frame,
            )
        found = _init_call(failure, evidence, sources, expected[1])
        if isinstance(found, str):
            making = _state_made(failure, evidence, sources, got)
            if making is not None:
                code, made_at = making
                return self.decline(
                    f"{reason}; {found}: the state is made at {place(made_at)}, {code}, for a batch of {got[1]}",
                    diagnosis=(f"Make the state at {place(made_at)} with the size of the batch it is used with "
                               f"({expected[1]} here, {got[1]} given): x.size(0) of that batch instead of a fixed "
                               "batch size, and the module's own num_layers and hidden_size."),
                    at=made_at,
                )
            return self.decline(f"{reason}; {found}", diagnosis=self.remedy(), at=frame)
        src, call, parameter, batch, loop_frame, made = found
        old = src.code(call)
        value = argument(call, 0, parameter)
        assert value is not None
        new = old.replace(src.code(value.value), batch, 1) if src.code(value.value) in old else f"... {batch} ..."
        return Site(
            pattern=self.ID,
            file=str(src.path),
            span=src.positions[call],
            rewrite=BatchSizeArgument(parameter, batch),
            summary=f"Changed {old} to {new}: the state must have the batch's own size ({expected[1]} here, {got[1]} given)",
            applicability=self.APPLICABILITY,
            evidence={"expected": expected, "got": got, "state_made_at": place(made), "batch": batch},
            evidence_text=(f"{reason}; the state is made for each batch at {place(made)} and the batch at "
                           f"{place(loop_frame)} has {expected[1]}"),
        )

    @classmethod
    def remedy(cls) -> str:
        return ("Make the hidden state (num_layers * num_directions, batch, hidden_size) for every batch: "
                "init_hidden(x.size(0)) with the batch's real size (the last batch may be smaller; "
                "drop_last=True on the DataLoader keeps every batch full when the state is carried across "
                "batches), and the module's own num_layers and hidden_size.")


def _meaning(expected: Sequence[int], got: Sequence[int]) -> str:
    if len(expected) != 3 or len(got) != 3:
        return f"{len(got)}-D instead of 3-D (layers x directions, batch, hidden)"
    names = ("layers x directions", "batch", "hidden size")
    parts = [f"{name}: {e} expected, {g} given" for name, e, g in zip(names, expected, got, strict=True) if e != g]
    return "; ".join(parts) or "same sizes"


def _callers_of_forward(failure: Failure, sources: Sources) -> Iterator[tuple[Frame, Source]]:
    """The user frames outside ``forward``, innermost first, with their sources: where the loop
    that feeds the RNN, and its hidden state, are written."""
    for frame in reversed(failure.frames):
        if frame.user and frame.function != "forward":
            src = source(sources, frame.file)
            if src is not None:
                yield frame, src


def _init_call(
    failure: Failure, evidence: Evidence | None, sources: Sources, batch: int
) -> tuple[Source, cst.Call, str, str, Frame, Frame] | str:
    """The per-batch ``init_hidden(...)`` call of the loop that feeds the RNN, its parameter, and
    the batch-size expression of the loop's own tensor; or why there is none."""
    for frame, src in _callers_of_forward(failure, sources):
        loops = [n for n in src.around(frame.line, cst.For)]
        if not loops:
            per_call = _per_call_state(frame, src, evidence, batch)
            if per_call is not None:
                return per_call
            continue
        loop = loops[0]
        assert isinstance(loop, cst.For)
        calls = [
            node for node in src.positions
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and _INIT_NAMES.match(node.func.attr.value) and src.positions[node].line <= frame.line
        ]
        inside = [c for c in calls if _within(src, c, loop)]
        if not inside:
            # made at the top of a function called per batch, before its time-step loop
            # (train(inp, target): hidden = decoder.init_hidden(args.batch_size); for c in ...)
            per_call = _per_call_state(frame, src, evidence, batch) if _in_function(src, frame) else None
            if per_call is not None:
                return per_call
            if calls:
                made = Frame(file=str(src.path), line=src.line(calls[-1]), user=True)
                header = Frame(file=str(src.path), line=src.line(loop), user=True)
                return (f"the state is made once at {place(made)}, before the loop at {place(header)}, and carried "
                        "across batches: a batch of another size (the last one) cannot reuse it")
            return "the state is not made by an init_hidden-style call in the loop that feeds the RNN"
        call = inside[-1]
        arg = argument(call, 0, "batch_size") or argument(call, 0, "bsz")
        if arg is None:
            return "the init_hidden call takes no batch size"
        parameter = arg.keyword.value if arg.keyword is not None else "batch_size"
        # a tensor rebound in the body before the failing line may have had another shape at the call
        # (a device or dtype move keeps it; a nested loop further down, an evaluation pass, comes later)
        rebound = {
            e.name for e in events(_body(loop))
            if e.kind == "bind" and not _keeps_shape(e.statement, e.name)
            and (e.statement not in src.positions or src.positions[e.statement].line <= frame.line)
        }
        targets = [n for n in _loop_names(loop.target) if n not in rebound]
        # or a batch the body makes before the call (current_seq = torch.LongTensor(current_seq)) and
        # leaves alone up to the failing line: its traced shape is the one the call saw
        made_line = src.line(call)
        binds = [e for e in events(_body(loop)) if e.kind == "bind" and e.statement in src.positions]
        later = {e.name for e in binds if made_line <= src.positions[e.statement].line <= frame.line
                 and not _keeps_shape(e.statement, e.name)}
        targets += [e.name for e in binds if src.positions[e.statement].line < made_line
                    and e.name not in later and e.name not in targets]
        choices = _batch_sizes(targets, local_tensors(evidence, frame), batch)
        if not choices:
            return f"no tensor the loop takes has a single dimension of the batch's size {batch}"
        made = Frame(file=str(src.path), line=src.line(call), user=True)
        loop_frame = Frame(file=str(src.path), line=src.line(loop), user=True)
        return src, call, parameter, choices[0], loop_frame, made
    return "no loop of the project's own code feeds the RNN"


def _batch_sizes(names: Sequence[str], tensors: Mapping[str, DescribedValue], batch: int) -> list[str]:
    """``name.size(d)`` for each of ``names`` whose traced tensor has the batch's size in exactly
    one of its first two dimensions (batch-first or sequence-first)."""
    choices = []
    for name in names:
        shape = shape_of(tensors[name]) if name in tensors else None
        if not shape or len(shape) < 2:
            continue
        dims = [d for d in (0, 1) if shape[d] == batch]
        if len(dims) == 1:
            choices.append(f"{name}.size({dims[0]})")
    return choices


def _per_call_state(
    frame: Frame, src: Source, evidence: Evidence | None, batch: int
) -> tuple[Source, cst.Call, str, str, Frame, Frame] | None:
    """A state made by an ``init_hidden(...)`` call in the failing function itself, outside any loop
    (``predict(net, review)``: ``h = net.init_hidden(batch_size)`` then ``net(features, h)``): it is
    made afresh for each call, so it takes the size of a tensor that function already holds, one
    bound before the call and not rebound up to the failing line (a device or dtype move aside)."""
    functions = src.around(frame.line, cst.FunctionDef)
    owner: cst.CSTNode = functions[0] if functions else src.module
    calls = [
        node for node in own_nodes(owner)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        and _INIT_NAMES.match(node.func.attr.value) and node in src.positions and src.line(node) <= frame.line
    ]
    if not calls:
        return None
    call = max(calls, key=src.line)
    arg = argument(call, 0, "batch_size") or argument(call, 0, "bsz")
    if arg is None:
        return None
    parameter = arg.keyword.value if arg.keyword is not None else "batch_size"
    made_line = src.line(call)
    scope = src.statements_of(frame.line)
    bound_before = {e.name for e in events(scope) if e.kind == "bind" and e.statement in src.positions
                    and src.positions[e.statement].line < made_line}
    if isinstance(owner, cst.FunctionDef):
        bound_before |= {param.name.value for param in owner.params.params}
    # a loop around the failing line but not around the call runs its whole body between the call and
    # a later pass of that line: a binding anywhere in it counts (a batch bound in the loop is carried over)
    loops = [src.positions[n] for n in src.around(frame.line, cst.For, cst.While)
             if not src.positions[n].contains_line(made_line)]

    def between(line: int) -> bool:
        return made_line <= line <= frame.line or any(span.line <= line <= span.end_line for span in loops)

    rebound = {e.name for e in events(scope) if e.kind == "bind" and e.statement in src.positions
               and between(src.positions[e.statement].line) and not _keeps_shape(e.statement, e.name)}
    tensors = local_tensors(evidence, frame)
    choices = _batch_sizes([n for n in tensors if n in bound_before and n not in rebound], tensors, batch)
    if not choices:
        return None
    made = Frame(file=str(src.path), line=made_line, user=True)
    return src, call, parameter, choices[0], Frame(file=str(src.path), line=frame.line, user=True), made


def _state_made(
    failure: Failure, evidence: Evidence | None, sources: Sources, got: Sequence[int]
) -> tuple[str, Frame] | None:
    """Where the state given to the RNN was made: the last assignment, before the failing line of a
    user frame outside ``forward``, of the one local the run recorded with the state's shape."""
    for frame, src in _callers_of_forward(failure, sources):
        names = [name for name, value in local_tensors(evidence, frame).items() if shape_of(value) == list(got)]
        if len(names) != 1:
            continue
        assigns = [
            node for node, span in src.positions.items()
            if isinstance(node, cst.Assign) and span.line <= frame.line
            and any(isinstance(t.target, cst.Name) and t.target.value == names[0] for t in node.targets)
        ]
        if assigns:
            last = max(assigns, key=lambda node: src.positions[node].line)
            return src.code(last), Frame(file=str(src.path), line=src.line(last), user=True)
    return None


# Tensor methods that return a tensor of the same shape: moving a batch (``inputs.cuda()``,
# ``x.to(device)``) or casting it (``labels.float()``) leaves its batch dimension where it was.
_SAME_SHAPE = frozenset({"cuda", "cpu", "to", "float", "long", "double", "half", "int", "bool", "contiguous",
                         "detach", "type", "clone", "requires_grad_"})


def _keeps_shape(statement: cst.CSTNode, name: str) -> bool:
    """Whether ``statement`` rebinds ``name`` only to a same-shape copy of itself
    (``inputs = inputs.cuda()``, ``inputs, labels = inputs.to(device), labels.to(device)``)."""
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return False
    target, value = statement.targets[0].target, statement.value
    pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = [(target, value)]
    if isinstance(target, cst.Tuple | cst.List) and isinstance(value, cst.Tuple | cst.List):
        if len(target.elements) != len(value.elements):
            return False
        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements, strict=True)]
    for bound, made in pairs:
        if isinstance(bound, cst.Name) and bound.value == name:
            return (isinstance(made, cst.Call) and isinstance(made.func, cst.Attribute)
                    and made.func.attr.value in _SAME_SHAPE
                    and isinstance(made.func.value, cst.Name) and made.func.value.value == name)
    return False


def _in_function(src: Source, frame: Frame) -> bool:
    return any(isinstance(node, cst.FunctionDef) for node in src.around(frame.line, cst.FunctionDef))


def _within(src: Source, node: cst.CSTNode, loop: cst.For) -> bool:
    inner, outer = src.positions[node], src.positions[loop.body]
    return outer.line <= inner.line and inner.end_line <= outer.end_line


def _loop_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, cst.Tuple | cst.List):
        names: list[str] = []
        for element in target.elements:
            names += _loop_names(element.value)
        return names
    return []


def _body(loop: cst.For) -> Sequence[cst.BaseStatement]:
    return loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
