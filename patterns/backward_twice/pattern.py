"""backward-twice: a backward pass through a graph that an earlier backward pass already freed."""

from __future__ import annotations

import re

import libcst as cst

from repairbot.analysis import (
    Carried,
    Description,
    Source,
    frame_at,
    last_binding,
    local_tensors,
    loop_carried,
    place,
    place_in,
    reads,
    recorded_local,
    source,
    tensor_text,
    tracks_grad,
)
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame


class BackwardTwice(Pattern):
    """Explains a second backward pass through a freed graph and where to cut it.

    What it fixes:
        Diagnoses (never edits) ``backward()`` reaching a part of the autograd graph that an
        earlier ``backward()`` already freed: state carried from one training step to the next
        (an RNN's hidden state, a running total of loss tensors), or two losses sharing part of
        one graph with a backward pass each.

    Why it fails:
        ``RuntimeError: Trying to backward through the graph a second time (or directly access
        saved tensors after they have already been freed). Saved intermediate values of the
        graph are freed when you call .backward() or autograd.grad(). ...`` (1.x: ``... but the
        saved intermediate results have already been freed``, 0.4: ``... but the buffers have
        already been freed``). A backward pass frees the tensors it saved; a tensor that
        survives into the next step still points into that freed graph. The traced locals of
        the failing frame and the loop around it show which tensor requiring grad is read at
        the top of an iteration before it is reassigned: that is the carried state.

    Example:
        ``output, hidden = model(x, hidden)`` in the batch loop, then ``loss.backward()``:
        the second batch's backward goes through ``hidden`` into the first batch's graph. The
        diagnosis points at the line that reads ``hidden`` and says to write
        ``hidden = hidden.detach()`` there first (``tuple(h.detach() for h in hidden)`` for an
        LSTM).

    Fix safety:
        Never edited automatically. Where the graph should be cut is a modelling decision:
        detaching the hidden state truncates backpropagation through time, ``retain_graph=True``
        keeps every graph alive (memory grows each step), merging two losses changes what each
        optimizer sees. The report names the tensor and the line; the user decides.

    Not handled:
        State carried on an object attribute (``self.hidden``) or through a function's return
        value is not traced to its origin: the diagnosis then names the failing backward() and
        the tensors requiring grad in its frame. Custom autograd Functions that reuse saved
        tensors are out of scope.
    """

    ID = "backward-twice"
    TITLE = "backward() through a graph an earlier backward() freed"
    TAGS = frozenset({"autograd"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    BATCH_INVARIANT = True
    EVIDENCE = frozenset({"locals"})
    REMEDY = (
        "Cut the graph where state crosses from one step to the next: detach carried state once "
        "per batch (an RNN's `hidden = hidden.detach()`), accumulate `loss.item()` instead of "
        "loss tensors, and run the forward pass again for every backward(); pass "
        "retain_graph=True only when two backward passes over one graph are intended (it keeps "
        "the graph in memory)."
    )
    SIGNATURES = (
        # 1.9+: "(or directly access saved tensors after they have already been freed)";
        # 1.x: "but the saved intermediate results have already been freed"; 0.4: "but the
        # buffers have already been freed"; 0.2 had no "a" before "second".
        signature("RuntimeError", r"Trying to backward through the graph (?:a )?second time"),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline(
                "a backward pass inside a library went through a graph that was already freed; "
                "no frame of the project's code shows where",
                diagnosis=self.REMEDY,
            )
        src = source(sources, frame.file)
        if src is not None:
            carried = self._carried_state(src, frame, evidence)
            if carried is not None:
                return carried
            earlier = self._earlier_backward(src, frame, evidence)
            if earlier is not None:
                return earlier
        tensors = [
            f"`{name}` ({tensor_text(value)})"
            for name, value in local_tensors(evidence, frame).items() if value.requires_grad
        ]
        found = f"; tensors requiring grad in that frame: {', '.join(tensors)}" if tensors else ""
        return self.decline(
            f"the backward() at {place(frame)} went through part of a graph that an earlier "
            f"backward() had freed{found}",
            diagnosis=self.REMEDY,
            at=frame,
        )

    def _carried_state(self, src: Source, frame: Frame, evidence: Evidence | None) -> Decline | None:
        """A tensor requiring grad that one iteration of a loop around the failing line leaves to the next."""
        functions = src.around(frame.line, cst.FunctionDef)
        function_span = src.positions[functions[0]] if functions else None
        for loop in src.around(frame.line, cst.For, cst.While):
            if not isinstance(loop, cst.For | cst.While):
                continue
            if function_span is not None and not function_span.contains_line(src.line(loop)):
                break  # a loop around the function's definition is not this frame's loop
            tensors: list[tuple[Carried, str]] = []
            threaded: list[tuple[Carried, str]] = []
            for item in loop_carried(src, loop):
                value = recorded_local(evidence, frame, item.name)
                if value is not None and tracks_grad(value):
                    tensors.append((item, tensor_text(value)))
                elif (value is None or _graph_tensors(value)) and item.first_read == item.bound_at and not self._accumulates(item):
                    # passed into a call that returns its next value (`out, state = lstm(x, state)`):
                    # state, a tuple of tensors with a graph, or a value the trace could not describe
                    threaded.append((item, _threaded_text(value)))
            found = tensors or threaded
            if not found:
                continue
            found.sort(key=lambda pair: pair[0].first_read)
            first, _ = found[0]
            names = ", ".join(f"`{item.name}` ({text})" for item, text in found)
            loop_at = f"{place_in(src.path, src.line(loop))}"
            read_at = f"{place_in(src.path, first.first_read)}"
            bound_at = f"{place_in(src.path, first.bound_at)}"
            if self._accumulates(first):
                reason = (
                    f"{names} is updated from its own previous value in the loop at {loop_at} "
                    f"({bound_at}), so every step's graph stays attached to it; the backward() at "
                    f"{place(frame)} reaches back into the graphs that earlier steps' backward() freed"
                )
                remedy = (
                    f"Call backward() on each step's own loss and keep `{first.name}` out of the graph: "
                    f"update it from `loss.detach()` (or `loss.item()`) at {bound_at}. "
                    "retain_graph=True would keep every step's graph in memory."
                )
                at = frame_at(str(src.path), first.bound_at)
            else:
                how = (
                    f"read at {read_at} before it is reassigned at {bound_at}" if tensors
                    else f"passed into the call at {read_at} that returns its next value"
                )
                reason = (
                    f"{names} is carried from one iteration of the loop at {loop_at} into the "
                    f"next ({how}): the backward() at "
                    f"{place(frame)} goes through it into the previous iteration's graph, which that "
                    "iteration's backward() freed"
                )
                single = f"`{first.name} = {first.name}.detach()`"
                pair = f"`{first.name} = tuple(s.detach() for s in {first.name})`"
                detach = single if tensors else f"{pair} for a tuple such as an LSTM's (h, c), {single} for one tensor"
                remedy = (
                    f"Detach the carried state where each iteration starts using it, just before "
                    f"{read_at}: {detach}. Gradients then stop at the batch boundary (truncated "
                    "backpropagation through time). retain_graph=True is only for two backward "
                    "passes over one graph on purpose, and keeps every graph in memory."
                )
                at = frame_at(str(src.path), first.first_read)
            return self.decline(reason, diagnosis=remedy, at=at)
        return None

    @staticmethod
    def _accumulates(item: Carried) -> bool:
        """Whether the loop binds the name by arithmetic on itself (``total += loss``,
        ``ema = 0.9 * ema + 0.1 * loss``), rather than threading it through a call."""
        statement = item.binding.statement
        if isinstance(statement, cst.AugAssign):
            return True
        value = item.binding.value
        return isinstance(value, cst.BinaryOperation) and item.name in reads(value)

    def _earlier_backward(self, src: Source, frame: Frame, evidence: Evidence | None) -> Decline | None:
        """Another backward() earlier in the same function, through the same graph."""
        functions = src.around(frame.line, cst.FunctionDef)
        scope = src.positions[functions[0]] if functions else None
        earlier = sorted(
            ((span.line, node) for node, span in src.positions.items()
             if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
             and node.func.attr.value == "backward" and span.line < frame.line
             and (scope is None or scope.contains_line(span.line))),
            key=lambda pair: pair[0],
        )
        if not earlier:
            return None
        line, call = earlier[-1]
        first_at = f"{place_in(src.path, line)}"
        shared = self._shared_tensors(src, frame, call, evidence)
        losses = [src.backward_target(call), src.backward_target(src.call_on_line(frame.line, "backward"))]
        sum_of = " + ".join(name for name in losses if name) if all(losses) else "loss_a + loss_b"
        share = f"both are computed from {shared}" if shared else "the losses share part of the graph"
        # an optimizer step between the two backward() calls (a GAN's discriminator update) makes
        # their sum a different training step: adding the losses is then no remedy
        stepped = sorted(span.line for node, span in src.positions.items()
                         if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                         and node.func.attr.value == "step" and line < span.line < frame.line
                         and (scope is None or scope.contains_line(span.line)))
        if stepped:
            remedy = (
                f"The optimizer step at {place_in(src.path, stepped[0])} runs between the two backward() calls, "
                "so the losses are not one sum. If the first loss must not train the shared part (a GAN's "
                "discriminator step), compute it from a detached copy (`D(fake.detach())`); pass "
                f"retain_graph=True to the backward() at {first_at} only when both passes over that graph "
                "are intended."
            )
        else:
            remedy = (
                f"Add the losses and call backward() once: `({sum_of}).backward()`; or pass "
                f"retain_graph=True to the backward() at {first_at} when both passes are intended; if "
                "the first loss must not train the shared part (a GAN's discriminator step), compute it "
                "from a detached copy (`D(fake.detach())`)."
            )
        return self.decline(
            f"`{src.code(call)}` at {first_at} already ran backward through part of this graph and freed "
            f"it; the backward() at {place(frame)} needs that part again ({share})",
            diagnosis=remedy,
            at=frame_at(str(src.path), line),
        )

    def _shared_tensors(self, src: Source, frame: Frame, first: cst.Call, evidence: Evidence | None) -> str:
        """The recorded tensors requiring grad that both losses are computed from, as text."""
        second = src.call_on_line(frame.line, "backward")
        names = [src.backward_target(first), src.backward_target(second)]
        if not all(names):
            return ""
        inputs: list[set[str]] = []
        for name in names:
            binding = last_binding(src, str(name), frame.line)
            if binding is None or binding.value is None:
                return ""
            inputs.append(set(reads(binding.value)))
        shared = []
        for name in sorted(inputs[0] & inputs[1]):
            value = recorded_local(evidence, frame, name)
            if value is not None and tracks_grad(value):
                shared.append(f"`{name}` ({tensor_text(value)})")
        return ", ".join(shared)


def _graph_tensors(value: Description) -> bool:
    """A traced tuple or list of tensors (an LSTM's ``(h, c)``) that autograd is following."""
    return value.kind == "tensor-list" and tracks_grad(value.element)


def _threaded_text(value: Description | None) -> str:
    if value is None or value.element is None:
        return "a tuple or another value the trace does not describe"
    return f"{value.length} tensors, each {tensor_text(value.element)}"
