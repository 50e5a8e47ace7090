"""inplace-autograd: an in-place operation on a tensor that autograd still needs.

This module holds the pattern and its choice of fix; ``culprit.py`` reads the failure and the
probe (which op changed the saved tensor), ``source.py`` finds that op in the source, and
``rewrites.py`` holds the fixes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    ancestors,
    argument,
    call_at,
    dotted_name,
    grad_off_in,
    is_torch_name,
    keyword_arg,
    one_line,
    positional_args,
    spans,
)
from repairbot.codemod import remove_arg
from repairbot.edits import Rewrite, Site
from repairbot.evidence import Evidence, frame_from_json
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame, Span

from . import probe
from .culprit import (
    LEAF,
    MODIFIED,
    MODIFIED_DETAILS,
    Modified,
    changed_saved,
    inplace_ops,
    is_view_node,
    node_name,
    op_matches,
    saved_tensors_like,
    saved_where,
    storage_culprits,
    view_culprits,
)
from .rewrites import (
    CloneReads,
    MaskedFill,
    NoGrad,
    NoGradMerge,
    OutOfPlace,
    augmented_to_assign,
    buffer_reads,
    masked_fill_assign,
    out_of_place_call,
    receiver_of,
)
from .source import (
    FUNCTIONAL_INPLACE,
    MODULE_INPLACE,
    NO_TWIN,
    binding_keeps_meaning,
    inplace_node,
    is_inplace_statement,
    is_no_grad_block,
    is_true,
    location,
    no_grad_call,
    saving_assignment,
    shape_words,
    short,
    sole_name_since_bound,
    statement_at,
)


@dataclass(frozen=True)
class _Plan:
    """What one recorded op asks for: a fix (site) or a refusal, keyed by its statement."""

    key: tuple[str, int, int, int, int]
    where: Frame
    site: Site | None = None
    decline: Decline | None = None


class InplaceAutograd(Pattern):
    """Makes the in-place operation that broke backward() out-of-place, where it happened.

    What it fixes:
        An in-place operation (``x += y``, ``x.add_(y)``, ``torch.relu_(x)``, ``F.relu(x,
        inplace=True)``, an ``nn.ReLU(inplace=True)`` layer) on a tensor that an earlier
        operation saved for its backward pass; a masked write into such a tensor (``x =
        F.relu(x)`` then ``x[mask] = 0``); a recurrence written into one buffer (``buf[t] =
        buf[t - 1] * w``, or ``h = torch.tanh(... outputs[:, t - 1] @ W)`` then ``outputs[:, t]
        = h``) whose saved read a later step overwrites; and a leaf
        tensor that requires grad (a hand-made weight) updated in place outside
        ``torch.no_grad()``.

    Why it fails:
        Autograd saves some tensors to compute gradients later (sigmoid and ReLU save their
        output) and checks their version counter in ``backward()``: ``RuntimeError: one of the
        variables needed for gradient computation has been modified by an inplace operation:
        [torch.FloatTensor [8, 32]], which is output 0 of SigmoidBackward0, is at version 1;
        expected version 0 instead.`` The traceback points at ``loss.backward()``, far from the
        culprit. A tracing rerun records every in-place op on a tensor autograd tracks, with
        its shape, the op that produced the tensor and where it ran (for a module with an
        ``inplace`` switch, where the module was built); the op on a tensor of the message's
        shape and producer is the one to change. The saved tensor itself is read from the
        graph when backward() fails (without its version check): an op on its storage (the
        tensor, a view of it, its base: they share one version counter) links it exactly, so a
        view printed as ``output 0 of AsStrided`` (``h += self.ffn(h)`` on a 3-D ``h``, whose
        Linear saved the reshaped view) is found, and the rerun runs in anomaly mode (without
        its NaN check) so that the forward line that saved the tensor is named when no traced
        op is linked. Without those records, the op on a view of as many elements, made when
        the shared version counter stood at the saved version, is the one. For ``a leaf Variable that requires grad is
        being used in an in-place operation`` the failing line is the update itself: autograd
        cannot record an in-place change of a leaf it must differentiate with respect to.

    Example:
        ``h = torch.sigmoid(z)`` then ``h += 1``: ``h = h + 1``. ``h.add_(b)`` alone on its line:
        ``h = h.add(b)``. ``torch.sigmoid_(h)``: ``h = torch.sigmoid(h)``. ``F.relu(h,
        inplace=True)``: ``F.relu(h)``. ``nn.Sequential(..., nn.Sigmoid(), nn.ReLU(inplace=True))``:
        ``nn.ReLU()`` at the construction, in whatever file builds it. ``h[:, t] =
        torch.tanh(h[:, t - 1] @ W)``: ``h[:, t - 1].clone() @ W`` (never a detach, which would
        drop the gradient through time), and the same read in the statement before the write
        (``h = torch.tanh(outputs[:, t - 1] @ W)`` then ``outputs[:, t] = h``): cloned there.
        ``x = F.relu(x)`` then ``x[mask] = 0`` with a boolean mask of x's shape: ``x =
        x.masked_fill(mask, 0)``. A manual SGD update ``w
        -= lr * w.grad`` of a leaf: wrapped in ``with torch.no_grad():`` (moved into the
        ``no_grad`` block just above it when there is one).

    Fix safety:
        Safe for the out-of-place rewrites and the removal of ``inplace=True``: the same values,
        in a new tensor instead of the saved one (a little more memory). Code that relied on
        another name seeing the change through the shared tensor would no longer see it; the
        rerun verifies that the script runs. The ``clone()`` of a recurrence's read is safe: the
        same values and the same gradient (clone is differentiable), in a copy that later writes
        into the buffer leave alone. The ``masked_fill`` is safe: the trace shows a boolean mask
        of the tensor's own shape and one value (the same elements, the same values), the tensor
        is the saved one itself (not a view of another), and its name was bound to it by a call
        or an operator earlier in the same block, read in between only as an operand of
        comparisons and arithmetic (no other name can see the change). The ``no_grad`` wrap is safe when the update is
        alone in its block; unsafe when the block holds more statements (another update in it
        may need the same treatment, and the next attempt will say so).

    Not handled:
        Another in-place assignment to a subscript: a slice or several indices that is not such
        a recurrence, a mask of another shape (``x[rows] = 0`` with a mask of the rows), several
        values (``x[mask] = noise[mask]``), a tensor another name may hold (``first = x[:, :3]``
        before the write, an argument of the function): the report suggests a ``clone()``
        first; a recurrence that reads the buffer through another name (``prev = buf[t - 1]``:
        diagnosed at the statement that saved it); in-place ops whose result is
        used inside a larger expression or bound to another name; methods without an
        out-of-place twin (``copy_``, ``zero_``, ``fill_``, ``normal_``...); a tensor without
        autograd history changed in place by an op the trace does not see (an input or a
        buffer changed with no operand that requires grad: the report names the forward line
        that saved it); several statements that each change the saved tensor's storage;
        modules built inside a
        library (``torchvision`` models: the report says to switch their ``inplace`` off); a
        leaf update on the same line as its loop header, or in a file that imports no torch
        name; messages of PyTorch before 1.1, which do not name the tensor.
    """

    ID = "inplace-autograd"
    TITLE = "An in-place operation modified a tensor that autograd needs"
    TAGS = frozenset({"autograd"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        signature("RuntimeError", MODIFIED_DETAILS),
        signature("RuntimeError", MODIFIED),
        signature("RuntimeError", LEAF),
    )
    RERUN_PROBES = frozenset({probe.NAME})
    # Wrapping a statement in `with torch.no_grad():` turns one line into two; removing an
    # `inplace=True` on its own line joins two.
    MAX_CHANGED_LINES = 2
    # Whether an op changes a saved tensor depends on the graph's structure, never on how many
    # rows the batch has: the forced batch of 2 fails exactly as the script's own batch does.
    BATCH_INVARIANT = True
    REWRITES = (OutOfPlace, NoGrad, NoGradMerge, CloneReads, MaskedFill)

    def rerun_probes(self, match: re.Match[str]) -> frozenset[str]:
        # the leaf error fails at the in-place statement itself: there is nothing to trace
        return frozenset() if match.groupdict().get("leaf") else self.RERUN_PROBES

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        if match.groupdict().get("leaf"):
            return self._locate_leaf(failure, match, evidence, sources)
        modified = Modified.from_match(match)
        if modified is None:
            return self.decline(
                "the message does not say which tensor was modified (PyTorch before 1.1)",
                diagnosis="rerun with a recent PyTorch, or with torch.autograd.set_detect_anomaly(True) "
                "to see the operation whose saved tensor was changed",
            )
        traced = evidence is not None and probe.NAME in evidence.probes
        ops = inplace_ops(evidence) if evidence is not None else ()
        saved = saved_tensors_like(changed_saved(evidence), modified) if evidence is not None else []
        saver, saver_frame = saved_where(saved)
        # The tensor autograd saved, read from the graph, and the ops on its storage: exact.
        matching = storage_culprits(ops, saved, modified)
        link = "storage" if matching else ""
        if not matching and modified.producer is None:
            saved_by = f"; {saver} saved it" if saver_frame is not None else ""
            return self.decline(
                f"the modified {modified.shape_text} tensor has no autograd history (an input, a buffer or "
                "a weight changed in place, under no_grad or without requires_grad), and no traced "
                f"in-place operation shares its storage{saved_by}",
                diagnosis=f"find where a {modified.shape_text} input, buffer or weight is changed in place "
                + (f"after {location(saver_frame)} and before " if saver_frame is not None else "between the forward pass and ")
                + "backward(), and change a copy instead (x = x * 2, or x.clone())",
                at=saver_frame,
            )
        if not traced or evidence is None:
            return self.decline("no in-place operations were traced for this failure (the tracing rerun did not run)")
        if not matching:
            matching = [op for op in ops if op_matches(op, modified)]
            link = "message" if matching else ""
        if not matching:
            matching = view_culprits(ops, modified)
            link = "view" if matching else ""
        if not matching:
            if saver_frame is not None:
                return self.decline(
                    f"none of the {len(ops)} traced in-place operations since the last backward() changed "
                    f"{modified.what}; the tensor was saved by {saver}",
                    diagnosis=f"the tensor saved at {location(saver_frame)} is changed in place after that "
                    "line and before backward() by code the trace does not see: change a copy, or make that "
                    "change out-of-place",
                    at=saver_frame,
                )
            return self.decline(
                f"none of the {len(ops)} traced in-place operations since the last "
                f"backward() changed {modified.what}",
                diagnosis="look for an in-place change of that tensor between the forward pass and backward() "
                "(the tracing rerun could not read the forward call that saved it)",
            )
        # The op that raised the version from the saved one broke the check; later ops on the
        # same tensor (or ops seen only through a view) are the fallback.
        first = [op for op in matching if op.get("version") == modified.expected]
        chosen = first or matching
        plans = [self._plan(op, modified, evidence, len(chosen), sources) for op in chosen]
        keys = {plan.key for plan in plans}
        if len(keys) > 1:
            places = sorted({f"{location(p.where)} ({p.where.code or '?'})" for p in plans})
            return self.decline(
                f"{len(keys)} different statements changed in place a tensor like {modified.what}: "
                + "; ".join(places),
                diagnosis="make each of these in-place operations out-of-place (x = x + 1 for x += 1, "
                "x.relu() for x.relu_(), no inplace=True)",
            )
        declined = next((plan.decline for plan in plans if plan.decline is not None), None)
        if declined is not None:
            return declined
        sites = {(p.site.file, p.site.span, p.site.rewrite) for p in plans if p.site}
        if len(sites) != 1 or plans[0].site is None:
            return self.decline(f"several in-place operations in the statement at {location(plans[0].where)} changed {modified.what}")
        if link == "storage" and not isinstance(plans[0].site.rewrite, CloneReads):
            op = chosen[0]
            shared = (
                "the saved tensor itself" if tuple(op.get("shape") or ()) == modified.shape and op.get("producer")
                and node_name(str(op.get("producer"))) == node_name(modified.producer or "") else
                f"a {shape_words(op.get('shape'))} tensor that shares its storage and version counter with it"
            )
            return replace(plans[0].site, evidence_text=(
                f"{plans[0].site.evidence_text}; the tensor backward() checked was saved by {saver}, and the "
                f"{op.get('op')} changed {shared}"
            ), evidence={**plans[0].site.evidence, "link": "storage", "saved_by": saver})
        if link == "view":
            op = chosen[0]
            return replace(plans[0].site, evidence_text=(
                f"{plans[0].site.evidence_text}; the {op.get('op')} changed a {shape_words(op.get('shape'))} view "
                f"({node_name(str(op.get('producer')))}), which shares its version counter with the saved "
                f"{modified.shape_text} view: it was the only in-place operation on a view of as many elements "
                f"at version {modified.expected}"
            ))
        return plans[0].site

    # the modified-tensor error -------------------------------------------------------------
    def _plan(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, sources: Sources
    ) -> _Plan:
        built = self._plan_module(op, modified, evidence, count, sources)
        if built is not None:
            return built
        raw_site = op.get("site")
        if not isinstance(raw_site, Mapping):
            frame = Frame(file="?", line=0)
            return _Plan(("?", 0, 0, 0, 0), frame, decline=self.decline(
                f"the in-place operation ({op.get('op')}) on {modified.what} ran outside the project's code"
            ))
        frame = frame_from_json(raw_site)
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        statement = statement_at(wrapper, frame.line)
        stmt_span = statement[1] if statement else Span(frame.line, 0, frame.line, 0)
        key = (str(path), stmt_span.line, stmt_span.col, stmt_span.end_line, stmt_span.end_col)
        found = self._site_at(op, frame, modified, evidence, count, wrapper)
        if isinstance(found, Decline):
            return _Plan(key, frame, decline=found)
        return _Plan(key, frame, site=found)

    def _plan_module(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, sources: Sources
    ) -> _Plan | None:
        """The construction call of the torch.nn module whose forward made the op, if it is one."""
        module_type, raw = op.get("module"), op.get("module_site")
        if not module_type or not isinstance(raw, Mapping) or module_type not in MODULE_INPLACE:
            return None
        frame = frame_from_json(raw)
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        located = call_at(wrapper, frame.line, frame.col, frame.end_line, frame.end_col)
        if located is None or not isinstance(located.node, cst.Call):
            return None
        call = located.node
        module = wrapper.module
        if not is_torch_name(ImportTable(module).qualify(call.func), f"torch.nn.{module_type}"):
            return None  # a module of the user's own with an `inplace` switch: the op is in its forward
        span = located.span
        key = (str(path), span.line, span.col, span.end_line, span.end_col)
        built = one_line(module, call)
        target = argument(call, MODULE_INPLACE[module_type], "inplace")
        if target is None or (target.keyword is None and target is not positional_args(call)[-1]):
            return _Plan(key, frame, decline=self.decline(
                f"the {module_type} built at {location(frame)} ({built}) is switched to in-place elsewhere",
                diagnosis=f"set inplace=False on the {module_type} built at {location(frame)}", at=frame,
            ))
        if not is_true(target.value):
            return _Plan(key, frame, decline=self.decline(
                f"the {module_type} built at {location(frame)} takes inplace={module.code_for_node(target.value)}, "
                "which may be shared with other layers",
                diagnosis=f"build this {module_type} with inplace=False", at=frame,
            ))
        after = one_line(module, remove_arg(call, target))
        shown = "inplace=True" if target.keyword is not None else "the inplace argument (a positional True)"
        return _Plan(key, frame, site=Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=OutOfPlace("drop-inplace", None if target.keyword else MODULE_INPLACE[module_type]),
            summary=(
                f"Removed {shown} from {built} at {location(frame)}: the {module_type} modified in place "
                f"{modified.what} that backward() needed"
            ),
            applicability=Applicability.SAFE,
            evidence=self._evidence(op, modified, evidence, count, after=after),
            evidence_text=self._evidence_text(op, modified, evidence, count, where=f"the {module_type} built at {location(frame)}"),
        ))

    def _site_at(
        self,
        op: Mapping[str, Any],
        frame: Frame,
        modified: Modified,
        evidence: Evidence,
        count: int,
        wrapper: MetadataWrapper,
    ) -> Site | Decline:
        """The fix of the in-place statement or call the op's user frame was running."""
        module = wrapper.module
        imports = ImportTable(module)
        node = inplace_node(wrapper, frame, imports)
        if isinstance(node, cst.Subscript) or (isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Subscript)):
            subscript = cst.ensure_type(node.target if isinstance(node, cst.AugAssign) else node, cst.Subscript)
            base = module.code_for_node(subscript.value)
            if isinstance(node, cst.Subscript):
                recurrence = self._clone_saved_read(op, frame, modified, evidence, count, wrapper, subscript, base)
                if recurrence is not None:
                    return recurrence
                masked = self._masked_write(op, frame, modified, evidence, count, wrapper, subscript)
                if masked is not None:
                    return masked
            return self.decline(
                f"`{frame.code or '?'}` at {location(frame)} assigns into {modified.what} in place; an "
                "indexed assignment has no one-token out-of-place form",
                diagnosis=f"assign into a copy ({base} = {base}.clone() first), or build a new tensor "
                f"({base} = {base}.masked_fill(mask, value) or torch.where(mask, value, {base}))",
                at=frame,
            )
        if node is None:
            built = f" (the {op['module']} built at {short(op.get('module_site'))})" if op.get("module") else ""
            return self.decline(
                f"the in-place {op.get('op')}{built} that changed {modified.what} runs inside "
                f"`{frame.code or '?'}` at {location(frame)}, not in a statement of the project's own",
                diagnosis=(
                    "switch the in-place modules off: for m in model.modules(): if hasattr(m, 'inplace'): "
                    "m.inplace = False" if op.get("module") else "make that in-place operation out-of-place"
                ),
                at=frame,
            )
        span = spans(wrapper)[node]
        if isinstance(node, cst.AugAssign):
            new = module.code_for_node(augmented_to_assign(node))
            return self._site(op, modified, evidence, count, frame, span, OutOfPlace("augmented"), module.code_for_node(node), new)
        call = cst.ensure_type(node, cst.Call)
        params = self._call_params(op, call, imports, module, frame)
        if isinstance(params, Decline):
            return params
        receiver = receiver_of(call, params.kind)
        old, new_call = one_line(module, call), out_of_place_call(call, params)
        new = one_line(module, new_call)
        if receiver is None:
            return self.decline(f"cannot tell which tensor `{old}` at {location(frame)} changes")
        parent = wrapper.resolve(ParentNodeProvider)[call]
        receiver_code = module.code_for_node(receiver)
        if isinstance(parent, cst.Expr):
            # The result was dropped: the statement relies on the change, so the name is rebound.
            if dotted_name(receiver) is None:
                return self.decline(
                    f"`{old}` at {location(frame)} changes {receiver_code} in place, and there is no "
                    "name to bind the new tensor to",
                    diagnosis=f"bind the out-of-place result: ... = {new}", at=frame,
                )
            rebound = f"{receiver_code} = {new}"
            return self._site(op, modified, evidence, count, frame, spans(wrapper)[parent], replace(params, rebind=True), old, rebound)
        if not binding_keeps_meaning(parent, receiver, module):
            return self.decline(
                f"the result of `{old}` at {location(frame)} is used while {receiver_code} itself is "
                f"changed; the out-of-place call would leave {receiver_code} as it was",
                diagnosis=f"write {receiver_code} = {new} and use {receiver_code}", at=frame,
            )
        return self._site(op, modified, evidence, count, frame, span, params, old, new)

    def _clone_saved_read(
        self,
        op: Mapping[str, Any],
        frame: Frame,
        modified: Modified,
        evidence: Evidence,
        count: int,
        wrapper: MetadataWrapper,
        subscript: cst.Subscript,
        base: str,
    ) -> Site | Decline | None:
        """A recurrence written into one buffer, ``buf[t] = buf[t - 1] * w``: the product saved
        its operand, a view of ``buf``, and the next step's assignment into ``buf`` overwrote
        it. Fixed by cloning the reads of ``buf`` on the right-hand side, when the trace shows
        the saved tensor is ``buf``'s own storage and the forward call that saved it ran in this
        very statement; a read of the buffer through another name is diagnosed. None where
        this is not such a recurrence (an indexed write that reads nothing of its buffer)."""
        parents = wrapper.resolve(ParentNodeProvider)
        target = parents.get(subscript)
        assign = parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or dotted_name(subscript.value) is None:
            return None
        saved = [
            s for s in saved_tensors_like(changed_saved(evidence), modified)
            if s.get("storage") is not None and s.get("storage") == op.get("storage")
        ]
        saver, saver_frame = saved_where(saved)
        if saver_frame is None or Path(saver_frame.file).resolve() != Path(frame.file).resolve():
            return None
        statement = statement_at(wrapper, frame.line)
        if statement is None:
            return None
        module = wrapper.module
        reader, read_at = assign, frame
        if not statement[1].contains_line(saver_frame.line):
            # saved by an earlier statement of the step: `h = torch.tanh(... buf[t - 1] @ w)`,
            # then `buf[t] = h`; the saved tensor is a view of the buffer (a slice it read), not
            # the tensor written (`x = F.relu(x)` then `x[mask] = 0`)
            earlier = saving_assignment(wrapper, saver_frame, assign) if is_view_node(modified.producer) else None
            if earlier is None:
                return None
            reader, read_at = earlier, saver_frame
        reads = [read for read in buffer_reads(reader.value, base, module) if read is not reader.value]
        if not reads:
            here = "this statement" if reader is assign else f"`{one_line(module, reader)}` at {location(read_at)}"
            return self.decline(
                f"`{one_line(module, assign)}` at {location(frame)} writes into {base}, and the tensor {saver} "
                f"saved from {here} is {base}'s storage, read through another name",
                diagnosis=f"clone the slice of {base} where it is read (... = {base}[...].clone()) so that later "
                f"writes into {base} leave the saved value alone; never detach it (that drops its gradient)",
                at=read_at,
            )
        span = spans(wrapper)[reader]
        old = one_line(module, reader)
        new = one_line(module, CloneReads(base).cloned(reader, module))
        cloned = ", ".join(sorted({module.code_for_node(r) for r in reads}))
        return Site(
            pattern=self.ID,
            file=frame.file,
            span=span,
            rewrite=CloneReads(base),
            summary=(
                f"Cloned {cloned} in {old} at {location(read_at)}: {saver.split(' (')[0]} saved it for backward(), "
                f"and a later assignment into {base} overwrote it"
            ),
            applicability=Applicability.SAFE,
            evidence={
                **self._evidence(op, modified, evidence, count, after=new),
                "link": "storage", "saved_by": saver, "cloned": cloned,
            },
            evidence_text=(
                self._evidence_text(op, modified, evidence, count, where=f"`{one_line(module, assign)}` at {location(frame)}")
                + f"; the tensor backward() checked was saved by {saver}, from {base}'s own storage: the "
                f"assignment of a later step overwrote the {cloned} "
                + ("this one read" if reader is assign else f"read at {location(read_at)}")
            ),
        )

    def _masked_write(
        self,
        op: Mapping[str, Any],
        frame: Frame,
        modified: Modified,
        evidence: Evidence,
        count: int,
        wrapper: MetadataWrapper,
        subscript: cst.Subscript,
    ) -> Site | Decline | None:
        """``x = F.relu(...)`` then ``x[mask] = 0``: relu saved its output, the masked write
        changed it. Fixed as ``x = x.masked_fill(mask, 0)`` when the trace shows a boolean
        mask of the tensor's shape and one value, the tensor written is the saved one itself
        (not a view of another), and ``x`` was bound to it in the same block with nothing
        between that could keep another name on it. None where the statement is not such a
        write (a slice, several indices, an attribute's or a subscript's subscript)."""
        parents = wrapper.resolve(ParentNodeProvider)
        target = parents.get(subscript)
        assign = parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if (
            not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(subscript.value, cst.Name)
            or len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index)
            or subscript.slice[0].slice.star is not None
        ):
            return None
        module = wrapper.module
        name = subscript.value.value
        old = one_line(module, assign)
        new = one_line(module, masked_fill_assign(assign))
        index, value = op.get("index"), op.get("value")
        shape = op.get("shape")
        copy = f"assign into a copy ({name} = {name}.clone() first)"
        if not isinstance(index, Mapping) or index.get("dtype") != "bool" or index.get("shape") != shape:
            what = (
                f"a {index.get('dtype')} {shape_words(index.get('shape'))} index" if isinstance(index, Mapping) and "dtype" in index
                else f"a {index.get('type')} index" if isinstance(index, Mapping) else "an index the trace did not record"
            )
            return self.decline(
                f"`{old}` at {location(frame)} writes into {modified.what} in place through {what}, not a boolean "
                f"mask of its shape {shape_words(shape)}: masked_fill would not select the same elements",
                diagnosis=f"{copy}, or build the new tensor out of place", at=frame,
            )
        if not isinstance(value, Mapping) or not (
            value.get("type") in ("int", "float", "bool") or ("dtype" in value and value.get("shape") == [])
        ):
            return self.decline(
                f"`{old}` at {location(frame)} writes a tensor of several values into the masked elements of "
                f"{modified.what}: masked_fill takes one value",
                diagnosis=f"{copy}, or torch.where({module.code_for_node(cst.ensure_type(subscript.slice[0].slice, cst.Index).value)}, "
                f"<values of {shape_words(shape)}>, {name})",
                at=frame,
            )
        producer = op.get("producer")
        if (
            tuple(shape or ()) != modified.shape or not producer or is_view_node(producer)
            or node_name(str(producer)) != node_name(modified.producer or "")
        ):
            return self.decline(
                f"`{old}` at {location(frame)} writes into a {shape_words(shape)} {node_name(str(producer))} output that "
                f"shares its storage with {modified.what}: rebinding {name} would leave the saved tensor's base as it was",
                diagnosis=f"{copy}", at=frame,
            )
        if not sole_name_since_bound(wrapper, assign, name):
            return self.decline(
                f"`{old}` at {location(frame)} changes the tensor {name} names in place, and another name may "
                f"hold it ({name} is not bound in this block just before, or is used in between)",
                diagnosis=f"write {new} if nothing else must see the change; otherwise {copy}", at=frame,
            )
        return Site(
            pattern=self.ID,
            file=frame.file,
            span=spans(wrapper)[assign],
            rewrite=MaskedFill(),
            summary=f"Replaced {old} with {new} at {location(frame)}: it modified in place {modified.what} that backward() needed",
            applicability=Applicability.SAFE,
            evidence={**self._evidence(op, modified, evidence, count, after=new), "index": dict(index), "value": dict(value)},
            evidence_text=(
                self._evidence_text(op, modified, evidence, count, where=f"`{old}` at {location(frame)}")
                + f"; its index is a boolean mask of the tensor's shape {shape_words(shape)} and its value one "
                + ("number" if "type" in value else "0-dimensional tensor")
                + f", and {name} was bound to that tensor in this block with no other use in between"
            ),
        )

    def _call_params(
        self, op: Mapping[str, Any], call: cst.Call, imports: ImportTable, module: cst.Module, frame: Frame
    ) -> OutOfPlace | Decline:
        """How to make an in-place call out-of-place: drop ``inplace=True``, or the method's ``_``."""
        qualified = imports.qualify(call.func) or ""
        name = qualified.rsplit(".", 1)[-1]
        if keyword_arg(call, "inplace") is not None or (
            name in FUNCTIONAL_INPLACE and is_torch_name(qualified, f"torch.nn.functional.{name}")
        ):
            position = FUNCTIONAL_INPLACE.get(name)
            target = argument(call, position, "inplace") if position is not None else keyword_arg(call, "inplace")
            if target is not None and not is_true(target.value):
                switch = module.code_for_node(target.value)
                built = f" (the {op['module']} built at {short(op.get('module_site'))})" if op.get("module_site") else ""
                return self.decline(
                    f"`{one_line(module, call)}` at {location(frame)} takes its in-place switch from `{switch}`, "
                    f"which was true here{built}",
                    diagnosis=f"make `{switch}` false where it is set{built}", at=frame,
                )
            if (
                target is None or not is_torch_name(qualified, f"torch.nn.functional.{name}")
                or (target.keyword is None and target is not positional_args(call)[-1])
            ):
                return self.decline(
                    f"`{one_line(module, call)}` at {location(frame)} is not a torch.nn.functional call "
                    "with inplace=True",
                    diagnosis="call it with inplace=False", at=frame,
                )
            return OutOfPlace("drop-inplace", None if target.keyword else position)
        func = cst.ensure_type(call.func, cst.Attribute)  # inplace_node only gives `x.op_(...)` otherwise
        kind = "function" if qualified.startswith("torch.") else "method"
        if func.attr.value in NO_TWIN or qualified.startswith("torch.nn.init."):
            receiver = receiver_of(call, kind)
            copy = f"{one_line(module, receiver)}.clone()" if receiver is not None else "a clone()"
            return self.decline(
                f"`{one_line(module, call)}` at {location(frame)} has no out-of-place twin",
                diagnosis=f"apply it to a copy ({copy}) or build the new tensor out-of-place", at=frame,
            )
        return OutOfPlace(kind)

    def _site(
        self,
        op: Mapping[str, Any],
        modified: Modified,
        evidence: Evidence,
        count: int,
        frame: Frame,
        span: Span,
        params: OutOfPlace,
        old: str,
        new: str,
    ) -> Site:
        if params.kind == "drop-inplace" and not params.rebind:
            summary = f"Removed inplace=True from {old} at {location(frame)}"
        else:
            summary = f"Replaced {old} with {new} at {location(frame)}"
        return Site(
            pattern=self.ID,
            file=frame.file,
            span=span,
            rewrite=params,
            summary=f"{summary}: it modified in place {modified.what} that backward() needed",
            applicability=Applicability.SAFE,
            evidence=self._evidence(op, modified, evidence, count, after=new),
            evidence_text=self._evidence_text(op, modified, evidence, count, where=f"`{old}` at {location(frame)}"),
        )

    def _evidence(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, after: str
    ) -> dict[str, Any]:
        return {
            "modified": modified.to_json(),
            "op": {
                "op": op.get("op"), "shape": op.get("shape"), "dtype": op.get("dtype"),
                "producer": op.get("producer"), "version": op.get("version"),
                "site": short(op.get("site")), "module": op.get("module"),
                "module_site": short(op.get("module_site")),
            },
            "matching_ops": count,
            "traced_ops": len(inplace_ops(evidence)),
            "rewritten_to": after,
        }

    def _evidence_text(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, where: str
    ) -> str:
        times = "" if count == 1 else f" ({count} times)"
        traced = len(inplace_ops(evidence))
        return (
            f"backward() found {modified.what} at version {modified.version} instead of {modified.expected}; "
            f"of the {traced} in-place operation{'' if traced == 1 else 's'} traced since the last backward(), "
            f"the {op.get('op')} on that tensor ({op.get('producer') or 'no history'}, version {op.get('version')}) "
            f"was {where}{times}"
        )

    # the leaf error ------------------------------------------------------------------------
    def _locate_leaf(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the in-place update of the leaf tensor happens inside a library")
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        module = wrapper.module
        found = statement_at(wrapper, frame.line)
        update = "torch.no_grad()"
        if found is None:
            return self.decline(
                f"the in-place update at {location(frame)} is not a statement on its own line",
                diagnosis=f"put the update on its own line, inside `with {update}:`", at=frame,
            )
        statement, span = found
        code = one_line(module, statement)
        imports = ImportTable(module)
        if not all(is_inplace_statement(small, imports) for small in statement.body):
            return self.decline(
                f"`{code}` at {location(frame)} does not itself change a tensor in place: a function it "
                "calls does",
                diagnosis=f"run that update inside `with {update}:`, or give the function a tensor that "
                "does not require grad",
                at=frame,
            )
        no_grad = no_grad_call(imports)
        if no_grad is None:
            return self.decline(
                f"{report_path(path)} imports no torch name to write torch.no_grad() with",
                diagnosis=f"wrap `{code}` in `with torch.no_grad():` (and import torch in {report_path(path)})",
                at=frame,
            )
        parents = wrapper.resolve(ParentNodeProvider)
        if grad_off_in(ancestors(parents, statement), imports.qualify) is not None:
            return self.decline(
                f"`{code}` at {location(frame)} already runs under no_grad, yet autograd saw the in-place update",
                diagnosis="look for a torch.enable_grad() or set_grad_enabled(True) around this update",
                at=frame,
            )
        parent = parents[statement]
        body: Sequence[cst.BaseStatement] = parent.body if isinstance(parent, cst.IndentedBlock | cst.Module) else ()
        index = next((i for i, node in enumerate(body) if node is statement), None)
        if index is None:
            return self.decline(f"cannot find the block that holds `{code}` at {location(frame)}")
        previous = body[index - 1] if index > 0 else None
        merge = previous is not None and is_no_grad_block(previous, imports) and not statement.leading_lines
        others = len(body) - 1 - (1 if merge else 0)
        applicability = Applicability.SAFE if others == 0 else Applicability.UNSAFE
        recorded = next(
            (
                op for op in (inplace_ops(evidence) if evidence else ())
                if op.get("leaf") and isinstance(op.get("site"), Mapping)
                and Path(op["site"]["file"]) == path and op["site"].get("line") == frame.line
            ),
            None,
        )
        tensor = (
            f"a leaf tensor {shape_words(recorded.get('shape'))} that requires grad ({recorded.get('op')})"
            if recorded else "a leaf tensor that requires grad"
        )
        view = "a view of " if match.groupdict().get("view") else ""
        rest = "" if others == 0 else f"; the {others} other statement(s) of its block stay outside the block"
        if merge and previous is not None:
            block_code = one_line(module, cst.ensure_type(previous, cst.With).items[0].item)
            summary = (
                f"Moved {code} at {location(frame)} into the `with {block_code}:` block above it: it "
                f"changes {view}{tensor} in place, which autograd allows only under no_grad"
            )
            extra: tuple[Span, ...] = (spans(wrapper)[previous],)
            rewrite: Rewrite = NoGradMerge()
        else:
            summary = (
                f"Wrapped {code} at {location(frame)} in `with {no_grad}:`: it changes {view}{tensor} in "
                "place, which autograd allows only under no_grad"
            )
            extra = ()
            rewrite = NoGrad(no_grad)
        return Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=rewrite,
            summary=summary,
            applicability=applicability,
            evidence={
                "statement": code,
                "view_of_leaf": bool(view),
                "op": {k: recorded.get(k) for k in ("op", "shape", "dtype", "leaf", "version")} if recorded else None,
                "block_statements": len(body),
                "merged_into_no_grad_block": merge,
            },
            evidence_text=(
                f"the failing statement `{code}` at {location(frame)} changes {view}{tensor} in place"
                + (" (traced)" if recorded else "") + rest
            ),
            notes=() if others == 0 else (
                "Only the failing update was put under no_grad; other updates in the same block may need it too.",
            ),
            extra_spans=extra,
        )
