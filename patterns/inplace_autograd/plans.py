"""Choosing the fix for one recorded in-place op: the statement that ran it and the one edit
that makes it out of place there (a module's ``inplace=True`` dropped, the out-of-place call,
a clone of the saved read, ``masked_fill``), or the reason there is none (a ``Plan`` either way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    argument,
    call_at,
    dotted_name,
    is_torch_name,
    keyword_arg,
    one_line,
    positional_args,
    spans,
)
from repairbot.codemod import remove_arg
from repairbot.edits import Site
from repairbot.evidence import Evidence, frame_from_json
from repairbot.pattern import Pattern
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Frame, Span

from .culprit import (
    Modified,
    changed_saved,
    inplace_ops,
    is_view_node,
    node_name,
    saved_tensors_like,
    saved_where,
)
from .rewrites import (
    CloneReads,
    MaskedFill,
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
    is_true,
    location,
    saving_assignment,
    shape_words,
    short,
    sole_name_since_bound,
    statement_at,
)


@dataclass(frozen=True)
class Plan:
    """What one recorded op asks for: a fix (site) or a refusal, keyed by its statement."""

    key: tuple[str, int, int, int, int]
    where: Frame
    site: Site | None = None
    decline: Decline | None = None


class Planner:
    """The plans of one ``locate``: each op's fix or refusal, in the pattern's name."""

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern

    def plan(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, sources: Sources
    ) -> Plan:
        built = self._plan_module(op, modified, evidence, count, sources)
        if built is not None:
            return built
        raw_site = op.get("site")
        if not isinstance(raw_site, Mapping):
            frame = Frame(file="?", line=0)
            return Plan(("?", 0, 0, 0, 0), frame, decline=self.pattern.decline(
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
            return Plan(key, frame, decline=found)
        return Plan(key, frame, site=found)

    def _plan_module(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, sources: Sources
    ) -> Plan | None:
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
            return Plan(key, frame, decline=self.pattern.decline(
                f"the {module_type} built at {location(frame)} ({built}) is switched to in-place elsewhere",
                diagnosis=f"set inplace=False on the {module_type} built at {location(frame)}", at=frame,
            ))
        if not is_true(target.value):
            return Plan(key, frame, decline=self.pattern.decline(
                f"the {module_type} built at {location(frame)} takes inplace={module.code_for_node(target.value)}, "
                "which may be shared with other layers",
                diagnosis=f"build this {module_type} with inplace=False", at=frame,
            ))
        after = one_line(module, remove_arg(call, target))
        shown = "inplace=True" if target.keyword is not None else "the inplace argument (a positional True)"
        return Plan(key, frame, site=Site(
            pattern=self.pattern.ID,
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
            return self.pattern.decline(
                f"`{frame.code or '?'}` at {location(frame)} assigns into {modified.what} in place; an "
                "indexed assignment has no one-token out-of-place form",
                diagnosis=f"assign into a copy ({base} = {base}.clone() first), or build a new tensor "
                f"({base} = {base}.masked_fill(mask, value) or torch.where(mask, value, {base}))",
                at=frame,
            )
        if node is None:
            built = f" (the {op['module']} built at {short(op.get('module_site'))})" if op.get("module") else ""
            return self.pattern.decline(
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
            return self.pattern.decline(f"cannot tell which tensor `{old}` at {location(frame)} changes")
        parent = wrapper.resolve(ParentNodeProvider)[call]
        receiver_code = module.code_for_node(receiver)
        if isinstance(parent, cst.Expr):
            # The result was dropped: the statement relies on the change, so the name is rebound.
            if dotted_name(receiver) is None:
                return self.pattern.decline(
                    f"`{old}` at {location(frame)} changes {receiver_code} in place, and there is no "
                    "name to bind the new tensor to",
                    diagnosis=f"bind the out-of-place result: ... = {new}", at=frame,
                )
            rebound = f"{receiver_code} = {new}"
            return self._site(op, modified, evidence, count, frame, spans(wrapper)[parent], replace(params, rebind=True), old, rebound)
        if not binding_keeps_meaning(parent, receiver, module):
            return self.pattern.decline(
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
            return self.pattern.decline(
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
            pattern=self.pattern.ID,
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
            return self.pattern.decline(
                f"`{old}` at {location(frame)} writes into {modified.what} in place through {what}, not a boolean "
                f"mask of its shape {shape_words(shape)}: masked_fill would not select the same elements",
                diagnosis=f"{copy}, or build the new tensor out of place", at=frame,
            )
        if not isinstance(value, Mapping) or not (
            value.get("type") in ("int", "float", "bool") or ("dtype" in value and value.get("shape") == [])
        ):
            return self.pattern.decline(
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
            return self.pattern.decline(
                f"`{old}` at {location(frame)} writes into a {shape_words(shape)} {node_name(str(producer))} output that "
                f"shares its storage with {modified.what}: rebinding {name} would leave the saved tensor's base as it was",
                diagnosis=f"{copy}", at=frame,
            )
        if not sole_name_since_bound(wrapper, assign, name):
            return self.pattern.decline(
                f"`{old}` at {location(frame)} changes the tensor {name} names in place, and another name may "
                f"hold it ({name} is not bound in this block just before, or is used in between)",
                diagnosis=f"write {new} if nothing else must see the change; otherwise {copy}", at=frame,
            )
        return Site(
            pattern=self.pattern.ID,
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
                return self.pattern.decline(
                    f"`{one_line(module, call)}` at {location(frame)} takes its in-place switch from `{switch}`, "
                    f"which was true here{built}",
                    diagnosis=f"make `{switch}` false where it is set{built}", at=frame,
                )
            if (
                target is None or not is_torch_name(qualified, f"torch.nn.functional.{name}")
                or (target.keyword is None and target is not positional_args(call)[-1])
            ):
                return self.pattern.decline(
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
            return self.pattern.decline(
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
            pattern=self.pattern.ID,
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
