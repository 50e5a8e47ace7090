"""rnn-hidden-shape: an RNN/GRU/LSTM given an initial hidden state of the wrong shape."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    Source,
    argument,
    assigned_value,
    called_name,
    calls_on_line,
    events,
    keyword_arg,
    last_binding,
    local_tensors,
    own_nodes,
    place,
    plain_value,
    positional_args,
    recorded_local,
    resolve_site,
    shape_of,
    shape_text,
    source,
    walk,
)
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import DescribedValue, Evidence, FailingModule
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import parameter_names
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

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
        made once and carried across batches; a state whose layers (x directions) or hidden size
        differ from the RNN's, in either direction: the RNN's ``num_layers`` as its construction
        writes it and the state's dimension where the state is made are both named, and no
        change is proposed, since the run does not show which one is meant; a state of the wrong
        rank, with a remedy only where the traced shapes prove it (removing the one
        ``.unsqueeze(d)`` that adds the dimension too many when the state without it has the
        RNN's shape; ``.unsqueeze(0)`` for a one-layer state made as ``(batch, hidden)``),
        otherwise both shapes and where the state is made.

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
        rnn = _rnn_build(evidence, sources)
        which = 1 if groups.get("which") == "1" else 0
        if groups.get("batched"):
            batched = groups["batched"].startswith("batched")
            dims = _ints(groups["got_dims"])
            return self._wrong_rank(
                f"{layer} got {'batched 3-D' if batched else 'unbatched 2-D'} input but a hidden state of "
                f"{groups['got_dims'].strip()}",
                (3 if batched else 2), dims[0] if dims else None, rnn, module,
                _state_written(failure, evidence, sources, which), frame,
            )
        if not groups.get("expected"):
            return self.decline(f"{layer}: fewer hidden states than layers (torch 0.3)", diagnosis=self.remedy(), at=frame)
        expected, got = _ints(groups["expected"]), _ints(groups["got"])
        state = "hidden[1] (the cell state)" if groups.get("which") == "1" else "the hidden state"
        meaning = _meaning(expected, got)
        reason = f"{layer}: {state} must be {tuple(expected)} and is {shape_text(got)} ({meaning})"
        if len(expected) != 3 or len(got) != 3:
            return self._wrong_rank(reason, len(expected), len(got), rnn, module,
                                    _state_written(failure, evidence, sources, which), frame, expected)
        if expected[0] != got[0] or expected[2] != got[2]:
            return self._sizes_disagree(reason, expected, got, rnn, _state_written(failure, evidence, sources, which),
                                        frame)
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

    def _wrong_rank(
        self, reason: str, wanted: int, given: int | None, rnn: RnnBuild | None, module: FailingModule | None,
        state: StateWritten | None, frame: Frame | None, expected: Sequence[int] | None = None,
    ) -> Decline:
        """A state of another rank than the RNN needs: the remedy only where the traced shapes
        prove it (the ``unsqueeze`` that adds the one dimension too many, the layers dimension a
        one-layer ``(batch, hidden)`` state lacks), else the two shapes and where each is written."""
        shape = tuple(expected) if expected else (rnn.state_shape(module) if rnn else None)
        needed = f"{rnn.described()} needs a {wanted}-D state" if rnn else f"the RNN needs a {wanted}-D state"
        needed += f" {shape}" if shape else ""
        if state is None:
            return self.decline(reason, diagnosis=f"{needed}; the run does not show where the state is made.", at=frame)
        made = f"the state is made at {place(state.at)}, {state.code}" + (
            f", {shape_text(state.shape)}" if state.shape else "")
        if given is not None and given == wanted + 1:
            added = _added_dimension(state)
            if added is not None:
                code, dim = added
                fits = state.shape is not None and shape is not None and (
                    tuple(state.shape[:dim] + state.shape[dim + 1:]) == tuple(shape))
                if fits:
                    return self.decline(
                        f"{reason}; {made}: its {code} adds the dimension too many",
                        diagnosis=(f"Remove the {code} at {place(state.at)}: without it the state is "
                                   f"{shape}, the shape {rnn.described() if rnn else 'the RNN'} needs."),
                        at=state.at,
                    )
                return self.decline(
                    f"{reason}; {made}",
                    diagnosis=(f"{needed}; the state made at {place(state.at)} has one dimension more, and its "
                               f"{code} adds one there. The run does not show which dimension is the extra one."),
                    at=state.at,
                )
        if (given == 2 and wanted == 3 and state.shape is not None and shape is not None and shape[0] == 1
                and tuple(state.shape) == tuple(shape[1:])):
            pair = isinstance(state.value, cst.Tuple | cst.List)
            unsqueeze = "`.unsqueeze(0)` on each of its tensors" if pair else f"{state.name}.unsqueeze(0)"
            return self.decline(
                f"{reason}; {made}",
                diagnosis=(f"Give the state made at {place(state.at)} its layers dimension: "
                           f"{unsqueeze} makes it {shape}, the shape {rnn.described() if rnn else 'the RNN'} needs."),
                at=state.at,
            )
        return self.decline(f"{reason}; {made}", diagnosis=(
            f"{needed}; the state made at {place(state.at)} is {shape_text(state.shape) if state.shape else f'{given}-D'}. "
            "The run does not show which of the two is meant."), at=state.at)

    def _sizes_disagree(
        self, reason: str, expected: Sequence[int], got: Sequence[int], rnn: RnnBuild | None,
        state: StateWritten | None, frame: Frame | None,
    ) -> Decline:
        """The RNN's layers (x directions) or hidden size against the state's: which one is
        meant the run does not show, so both are named where they are written, and nothing proposed."""
        where = rnn.described() if rnn else "the RNN"
        state_name = f"the state {state.name}" if state else "the state"
        parts = []
        if expected[0] != got[0]:
            rnn_side = rnn.layers_written() if rnn else "num_layers x num_directions"
            parts.append(f"layers x directions, {expected[0]} in {where} ({rnn_side}) and {got[0]} in {state_name}"
                         + (f" ({_dimension_written(state, 0)})" if state else ""))
        if expected[2] != got[2]:
            rnn_side = rnn.argument_written(1, "hidden_size") if rnn else "hidden_size"
            parts.append(f"hidden size, {expected[2]} in {where} ({rnn_side}) and {got[2]} in {state_name}"
                         + (f" ({_dimension_written(state, 2)})" if state else ""))
        made = f"; {state.name} is made at {place(state.at)}: {state.code}" if state else ""
        return self.decline(
            reason,
            diagnosis=("The RNN and its state disagree on " + "; on ".join(parts) + made
                       + ". The run does not show which of the two is meant, so no change is proposed."),
            at=state.at if state else (rnn.at if rnn else frame),
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


@dataclass(frozen=True)
class RnnBuild:
    """The ``nn.LSTM(...)``/``GRU``/``RNN`` call that built the failing module, as written."""

    src: Source
    call: cst.Call
    at: Frame

    def described(self) -> str:
        return f"{self.src.code(self.call.func)} built at {place(self.at)}"

    def argument_written(self, position: int, name: str) -> str:
        """``num_layers=1`` or ``hidden_size `16``` as the call writes it; its default when absent."""
        arg = argument(self.call, position, name)
        if arg is None:
            return f"{name} not given"
        return f"{name} `{self.src.code(arg.value)}`"

    def layers_written(self) -> str:
        text = self.argument_written(2, "num_layers")
        bidirectional = keyword_arg(self.call, "bidirectional")
        if bidirectional is not None:
            text += f", bidirectional `{self.src.code(bidirectional.value)}`"
        return text

    def _literal(self, position: int, name: str, default: int | bool) -> int | bool | None:
        arg = argument(self.call, position, name) if position >= 0 else keyword_arg(self.call, name)
        if arg is None:
            # a later positional argument may hold it: only keywords after the two sizes are read
            return default if len(positional_args(self.call)) <= max(position, 2) else None
        value = arg.value
        if isinstance(value, cst.Integer):
            return int(value.value)
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            return value.value == "True"
        return None

    def state_shape(self, module: FailingModule | None) -> tuple[int, ...] | None:
        """(num_layers * num_directions, batch, hidden_size) when the call's literals, the
        module's traced hidden size and its traced input prove every one of them."""
        layers = self._literal(2, "num_layers", 1)
        bidirectional = self._literal(-1, "bidirectional", False)
        batch_first = self._literal(-1, "batch_first", False)
        if module is None or module.hidden_size is None or module.input_shape is None:
            return None
        if not isinstance(layers, int) or isinstance(layers, bool) or bidirectional is None or batch_first is None:
            return None
        if len(module.input_shape) != 3:
            return None
        batch = module.input_shape[0 if batch_first else 1]
        return (layers * (2 if bidirectional else 1), batch, module.hidden_size)


def _rnn_build(evidence: Evidence | None, sources: Sources) -> RnnBuild | None:
    module = evidence.failing_module if evidence else None
    built = resolve_site(evidence, module.site) if module else None
    src = source(sources, built.file) if built else None
    if src is None or built is None or module is None:
        return None
    calls = [c.node for c in calls_on_line(src.wrapper, built.line)
             if isinstance(c.node, cst.Call) and called_name(c.node) == module.type]
    return RnnBuild(src, calls[0], built) if len(calls) == 1 else None


@dataclass(frozen=True)
class StateWritten:
    """Where the state given to the RNN is written: the binding of the name the RNN call gets."""

    name: str
    at: Frame
    code: str  # the binding statement, on one line
    value: cst.BaseExpression | None  # what it binds the name to, when one expression does
    src: Source
    shape: list[int] | None  # the traced shape of the name, when the run recorded it


def _state_written(failure: Failure, evidence: Evidence | None, sources: Sources, which: int) -> StateWritten | None:
    """The last binding, before the failing line, of the state the RNN call is given (its
    ``hx`` argument, the element ``which`` of an LSTM's ``(h, c)``), followed through the
    parameters of the user's functions to the caller that passed it."""
    frames = [f for f in reversed(failure.frames) if f.user]
    wanted: str | None = None
    for index, frame in enumerate(frames):
        src = source(sources, frame.file)
        if src is None:
            return None
        if wanted is None:
            wanted = _state_argument(src, frame.line, which)
            if wanted is None:
                return None
        event = last_binding(src, wanted, frame.line)
        if event is not None and event.statement in src.positions:
            traced = recorded_local(evidence, frame, wanted)
            if traced is not None and traced.kind != "tensor" and traced.element is not None:
                traced = traced.element  # an LSTM's (h, c) tuple: the run records one element's shape
            shape = shape_of(traced) if traced is not None and traced.kind == "tensor" else None
            value = plain_value(event) or assigned_value(event.statement, wanted)
            at = Frame(file=str(src.path), line=src.line(event.statement), user=True)
            return StateWritten(wanted, at, src.code(event.statement), value, src, shape)
        functions = [n for n in src.around(frame.line, cst.FunctionDef) if isinstance(n, cst.FunctionDef)]
        caller = frames[index + 1] if index + 1 < len(frames) else None
        if not functions or caller is None:
            return None
        params = parameter_names(functions[0])
        caller_src = source(sources, caller.file)
        if wanted not in params or caller_src is None:
            return None
        position = params.index(wanted) - (1 if params[0] == "self" else 0)
        passed = [argument(c.node, position, wanted) for c in calls_on_line(caller_src.wrapper, caller.line)
                  if isinstance(c.node, cst.Call)]
        names = {a.value.value for a in passed if a is not None and isinstance(a.value, cst.Name)}
        if len(names) != 1:
            return None
        wanted = names.pop()
    return None


def _state_argument(src: Source, line: int, which: int) -> str | None:
    """The name of the state a call on ``line`` gives the RNN: ``h`` of ``self.gru(x, h)``,
    ``h0`` (``which`` 0) or ``c0`` of ``self.lstm(x, (h0, c0))``."""
    for located in calls_on_line(src.wrapper, line):
        call = located.node
        if not isinstance(call, cst.Call):
            continue
        arg = argument(call, 1, "hx")
        if arg is None:
            continue
        value = arg.value
        if isinstance(value, cst.Tuple | cst.List) and len(value.elements) == 2:
            value = value.elements[which].value
        return value.value if isinstance(value, cst.Name) else None
    return None


def _added_dimension(state: StateWritten) -> tuple[str, int] | None:
    """The one ``.unsqueeze(d)`` (d a literal) in the expression the state is bound to, as code."""
    if state.value is None:
        return None
    found = [n for n in walk(state.value) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
             and n.func.attr.value == "unsqueeze" and len(n.args) == 1 and isinstance(n.args[0].value, cst.Integer)]
    if len(found) != 1:
        return None
    call = found[0]
    assert isinstance(call.func, cst.Attribute)
    dim = int(cst.ensure_type(call.args[0].value, cst.Integer).value)
    return f".unsqueeze({dim})", dim


def _dimension_written(state: StateWritten, dim: int) -> str:
    """Where the state's dimension ``dim`` is written: the size argument of the
    ``torch.zeros(...)``-style call that makes it, else the binding."""
    value = state.value
    if (isinstance(value, cst.Call) and called_name(value) in _MAKERS
            and len(positional_args(value)) == 3 and not any(a.star for a in value.args)):
        return f"`{state.src.code(positional_args(value)[dim].value)}` at {place(state.at)}"
    return f"made at {place(state.at)}"


# the calls that make a state from its sizes, torch.zeros(layers, batch, hidden)
_MAKERS = frozenset({"zeros", "ones", "randn", "rand", "empty", "full", "new_zeros", "zeros_like"})
