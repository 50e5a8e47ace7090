"""One ``locate``: the float64 operand found at the failure, followed back with the shared
``ValueWalk`` to where it is made, and the site that converts it there (or, for a float64
model, the diagnosis or the float64 input); declines say why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import libcst as cst

from repairbot.analysis import (
    bound_names,
    is_torch_name,
    place,
    place_in,
    reads,
    resolve_site,
    shape_text,
    walk,
)
from repairbot.edits import Site
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern
from repairbot.provenance import (
    Context,
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
from repairbot.types import Decline, Failure, Frame

from .creations import (
    CREATION,
    CREATIONS,
    at_call,
    at_float32_call,
    casts_to_float64,
    distinct_places,
    float32_keyword,
)
from .message import FLOAT32, FLOAT64, Message, in_torch_layer
from .rewrites import CastToFloat

_STEP_BUDGET = 120


def model_float64(pattern: Pattern, frame: Frame, because: str) -> Decline:
    return pattern.decline(
        f"{because}: the model itself is float64 (model.double() or dtype=torch.float64 parameters), which may be on purpose",
        diagnosis="either keep the model float64 and convert its inputs with .double(), or convert the model with "
        "model.float() (and remove the .double() / dtype=torch.float64 that made it float64)",
        at=frame,
    )


class Tracer:
    """One ``locate``: the float64 operand found at the failure, followed back to its creation."""

    def __init__(
        self, pattern: Pattern, failure: Failure, evidence: Evidence, sources: Sources, message: Message
    ) -> None:
        self.pattern = pattern
        self.failure = failure
        self.evidence = evidence
        self.message = message
        self.walk = ValueWalk(failure, evidence, sources, at_call, _STEP_BUDGET)

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
                return model_float64(self.pattern, self.failure.user_frame or Frame("", 0), because)
            view = innermost
        cast = self._model_cast(view)
        operands = self._operands(view)
        if cast is None or isinstance(operands, Decline) or not operands[3]:
            return model_float64(self.pattern, view.frame, because)
        _, ctx, _, floats = operands
        cast_file, cast_call = cast
        on_purpose = f"the model is cast to float64 on purpose at {cast_file.where(cast_call)} (`{cast_file.code(cast_call)}`)"
        data64 = self._traced(FLOAT64)
        if not data64:
            listed = ", ".join(f"`{n}`" for n in self._traced(FLOAT32))
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
        result = self.walk.follow(ref.node, ref.ctx, (first,), at_float32_call)
        others = ", ".join(f"`{n}`" for n in data64)
        if isinstance(result, Made) and result.kind == CREATION:
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
            if (id(node) in inside or (isinstance(receiver, cst.Name) and receiver.value in names)) and casts_to_float64(file, node):
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
        trail = distinct_places(made.trail)
        return self._cast_site(
            made, "double",
            summary=f"Added .double() to {code} at {where}: the float32 tensor made there reached the model as `{name}` "
            f"at {place(view.frame)}, and {on_purpose}, like the rest of the traced data ({others} float64)",
            evidence={
                "message_dtypes": list(self.message.dtypes),
                "float32_operand": {"name": name, "at": place(view.frame), "dtype": FLOAT32},
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
            if isinstance(result, Made) and result.kind == CREATION:
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
            return model_float64(
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
            if described.dtype == FLOAT64:
                names.append(name)
            elif described.dtype == FLOAT32:
                floats.append(name)
        return expression, ctx, names, floats

    def _inline_creations(self, expression: cst.BaseExpression, ctx: Context) -> list[tuple[str, Ref]]:
        """Arguments of the failing call that make a tensor right there (``model(torch.from_numpy(x))``)."""
        if not isinstance(expression, cst.Call):
            return []
        found = []
        for arg in expression.args:
            if any(
                isinstance(node, cst.Call) and is_torch_name(ctx.file.src.imports.qualify(node.func), *CREATIONS)
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
        trail = distinct_places(origin.trail)
        dtype = float32_keyword(file, call)
        added = f"dtype={dtype}" if dtype is not None else ".float()"
        return self._cast_site(
            origin, "float",
            summary=f"Added {added} to {code} at {where}: the float64 tensor made there reached {operation} "
            f"({against}) as {seen}",
            evidence={
                "message_dtypes": list(self.message.dtypes),
                "float64_operand": {"name": name, "at": place(view.frame), "shape": shape, "dtype": FLOAT64},
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
        if module and module.type and in_torch_layer(self.failure):
            return f"nn.{module.type}"
        frame = self.failure.user_frame
        if frame is not None and frame.code and ".backward(" in frame.code:
            return "the loss's backward()"
        return f"`{frame.code}`" if frame is not None and frame.code else "the failing operation"
