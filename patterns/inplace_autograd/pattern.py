"""inplace-autograd: an in-place operation on a tensor that autograd still needs.

This module holds the pattern and its choice of fix; ``culprit.py`` reads the failure and the
probe (which op changed the saved tensor), ``source.py`` finds that op in the source,
``plans.py`` chooses the fix at that op's statement (or why not), and ``rewrites.py`` holds
the fixes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import libcst as cst
from libcst.metadata import ParentNodeProvider

from repairbot.analysis import ImportTable, ancestors, grad_off_in, one_line, spans
from repairbot.edits import Rewrite, Site
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Span

from . import probe
from .culprit import (
    LEAF,
    MODIFIED,
    MODIFIED_DETAILS,
    Modified,
    changed_saved,
    inplace_ops,
    node_name,
    op_matches,
    saved_tensors_like,
    saved_where,
    storage_culprits,
    view_culprits,
)
from .plans import Planner
from .rewrites import CloneReads, MaskedFill, NoGrad, NoGradMerge, OutOfPlace
from .source import (
    is_inplace_statement,
    is_no_grad_block,
    location,
    no_grad_call,
    shape_words,
    statement_at,
)


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
        planner = Planner(self)
        plans = [planner.plan(op, modified, evidence, len(chosen), sources) for op in chosen]
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
