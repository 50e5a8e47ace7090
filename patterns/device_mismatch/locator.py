"""One ``locate``: reads the evidence, chooses the one place where the value that stayed on the
CPU is made and moves it there (``_Device`` names the target device), or declines saying why.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from repairbot.analysis import (
    DEVICE_NAMES,
    ImportTable,
    bound_names,
    dotted_name,
    enclosing,
    failing_expression,
    is_torch_name,
    keyword_arg,
    one_line,
    place_in,
    traced_line_matches,
)
from repairbot.codemod import quote_of
from repairbot.edits import Site
from repairbot.evidence import DescribedValue, Evidence, Scope
from repairbot.pattern import Pattern, span_of
from repairbot.provenance import bound_at
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame, Span

from .message import same_device
from .operands import (
    FACTORIES,
    Attribution,
    Operand,
    Operands,
    View,
    parameter_names_of,
    tensor_attributes,
)
from .rewrites import MOVE_METHODS, NEW_DEVICE_NAME, MoveToDevice
from .statements import (
    assignments,
    child_in,
    is_docstring,
    is_import,
    move_statement,
    param_order,
    parse_move,
    tuple_elements,
)


class Locator:
    """One ``locate``: the evidence read, the site chosen or the refusal reasoned."""

    def __init__(
        self, pattern: Pattern, failure: Failure, match: re.Match[str], evidence: Evidence,
        sources: Sources, target: str,
    ) -> None:
        self.pattern = pattern
        self.failure = failure
        self.match = match
        self.evidence = evidence
        self.sources = sources
        self.target = target
        self.behind = "cpu"

    # entry ------------------------------------------------------------------------------
    def locate(self) -> Site | Decline:
        found = self._attribute()
        if isinstance(found, Decline):
            return found
        kinds = {o.kind for o in found.stayed}
        if len(kinds) > 1:
            names = ", ".join(o.name for o in found.stayed)
            return self.decline(f"both a module and tensors are left on {self.behind} at {found.view.location} ({names}): more than one thing to move")
        if kinds == {"module"}:
            if len(found.stayed) > 1:
                names = ", ".join(o.name for o in found.stayed)
                return self.decline(f"several modules are on {self.behind} at {found.view.location} ({names})")
            return self._fix_module(found)
        return self._fix_tensors(found)

    def decline(self, reason: str, diagnosis: str | None = None, at: Frame | None = None) -> Decline:
        return self.pattern.decline(reason, diagnosis=diagnosis, at=at)

    # evidence ---------------------------------------------------------------------------
    def _view(self, frame: Frame) -> View | Decline:
        path = Path(frame.file)
        try:
            text = self.sources.current(path).decode("utf-8", "replace")
        except OSError:
            return self.decline(f"cannot read {report_path(path)}")
        if not traced_line_matches(text, frame):
            # the traced lines are not the lines of this source: a fix moved them
            return self.decline(f"the source of {place_in(path, frame.line)} is not what the traced run executed")
        wrapper = self.sources.metadata(path)
        positions = {node: span_of(r) for node, r in wrapper.resolve(PositionProvider).items()}
        parents = wrapper.resolve(ParentNodeProvider)
        expression = failing_expression(positions, frame)
        if expression is None:
            return self.decline(f"cannot find the failing expression at {place_in(path, frame.line)}")
        statement = expression
        while not isinstance(statement, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            parent = parents.get(statement)
            if parent is None:
                return self.decline(f"cannot find the statement at {place_in(path, frame.line)}")
            statement = parent
        function = enclosing(parents, statement, cst.FunctionDef, stop=(cst.ClassDef,))
        view = View(
            frame=frame, path=path, wrapper=wrapper, positions=positions, parents=parents,
            expression=expression, statement=statement,
            function=function if isinstance(function, cst.FunctionDef) else None,
            scope=self.evidence.scope(frame),
        )
        self._resolve_operands(view)
        return view

    def _resolve_operands(self, view: View) -> None:
        visitor = Operands()
        view.expression.visit(visitor)
        params = parameter_names_of(view.function)
        for name in visitor.names:
            info = view.described(name)
            if info is None or not (info.is_tensor or info.is_module):
                continue
            devices = (info.device,) if info.is_tensor else info.devices
            if not all(isinstance(d, str) for d in devices) or not devices:
                continue  # a module without parameters is on no device
            view.operands.append(Operand(name, info.kind, tuple(map(str, devices)), info, name in params))
        described = {o.name for o in view.operands}
        callees = {id(c.func) for c in visitor.calls}
        imports = ImportTable(view.wrapper.module)
        for attribute in visitor.attributes:
            base = attribute.value
            if id(attribute) in callees or not isinstance(base, cst.Name) or base.value not in described:
                continue
            info = view.described(base.value)
            if info is not None and info.is_module:  # self.scale: an attribute the run did not describe
                view.unrecorded.append(view.code(attribute))
        for call in visitor.calls:
            if call is view.expression:
                continue
            head = call.func.value if isinstance(call.func, cst.Attribute) else call.func
            root = (dotted_name(head) or "").split(".")[0]
            if root in described or (root not in imports.aliases and hasattr(builtins, root)):
                continue  # a method of a traced tensor, a traced module's layer, len(...)
            if any(view.code(call) in outer for outer in view.unrecorded):
                continue
            qualified = imports.qualify(call.func)
            if qualified and qualified.split(".")[0] == "torch" and not is_torch_name(qualified, *FACTORIES):
                continue  # torch's own functions keep their inputs' device
            view.unrecorded.append(view.code(call))

    def _attribute(self) -> Attribution | Decline:
        """The innermost frame where operands on the wrong device are the frame's own.

        Operands that are parameters of the frame's function (``x`` in ``forward(self, x)``)
        came from the caller: the search moves out to the calling frame.
        """
        frames = [f for f in self.failure.frames if f.user]
        ahead: list[Operand] = []
        for frame in reversed(frames):
            view = self._view(frame)
            if isinstance(view, Decline):
                return view
            mixed = [o for o in view.operands if o.kind == "module" and len(o.devices) > 1]
            if mixed:
                module = mixed[0]
                return self.decline(
                    f"`{module.name}` has parameters on {' and '.join(module.devices)} at {view.location}: "
                    "part of the model was built or replaced after it was moved",
                    diagnosis="move the model to the device after every submodule is built (and re-move it after replacing a layer)",
                    at=frame,
                )
            stayed = [o for o in view.operands if o.on(self.behind)]
            # what is already on the target: at the attributed frame, else the innermost that shows it
            ahead = [o for o in view.operands if o.on(self.target)] or ahead
            if not stayed:
                return self._unresolvable(view)
            if all(o.parameter for o in stayed):
                continue
            if any(o.parameter for o in stayed):
                return self.decline(
                    f"at {view.location} some operands on {self.behind} come from the caller and some from "
                    f"{view.frame.function}() itself ({', '.join(o.name for o in stayed)})"
                )
            precise = next((d for o in ahead for d in o.devices if same_device(d, self.target)), None)
            if precise and ":" not in self.target:
                self.target = precise  # "torch.cuda.FloatTensor" says cuda; the trace says cuda:0
            return Attribution(view, stayed, ahead)
        return self.decline(
            f"the operands on {self.behind} reach the project's code from outside it (no calling frame of the "
            "project says where they were made)",
            at=frames[0] if frames else None,
        )

    def _unresolvable(self, view: View) -> Decline:
        code = view.code(view.expression)
        short = code if len(code) <= 60 else code[:57] + "..."
        if view.unrecorded:
            what = ", ".join(f"`{u}`" for u in view.unrecorded)
            reason = (
                f"no variable of `{short}` at {view.location} is on {self.behind}: the tensor on {self.behind} "
                f"is {what}, which the run does not trace to a line that could move it"
            )
        else:
            reason = f"no variable of `{short}` at {view.location} was traced on {self.behind}; what stayed behind cannot be attributed"
        attributes = tensor_attributes(view, [u for u in view.unrecorded if re.fullmatch(r"self\.\w+", u)])
        if attributes:
            attr = attributes[0].split(".", 1)[1]
            diagnosis = (
                f"`{attributes[0]}` is a plain tensor attribute, and Module.to() moves only parameters and buffers: "
                f"register it with self.register_buffer(\"{attr}\", ...) where it is assigned"
            )
        else:
            diagnosis = f"create that tensor on the device of the others (device=..., or .to(...) on its result) at {view.location}"
        return self.decline(reason, diagnosis=diagnosis, at=view.frame)

    # fixes ------------------------------------------------------------------------------
    def _fix_tensors(self, found: Attribution) -> Site | Decline:
        view = found.view
        names = [o.name for o in found.stayed]
        loop = self._loop_binding(view, names)
        if loop is not None:
            return self._move_in_loop(found, loop)
        binding = self._binding(view, names)
        if isinstance(binding, Decline):
            return binding
        assign, statement = binding
        factory = self._factory_call(view, assign)
        if factory is not None:
            return self._add_device_keyword(found, factory)
        return self._move_after(found, statement)

    def _loop_binding(self, view: View, names: Sequence[str]) -> cst.For | None:
        """The innermost loop around the failing line whose target binds one of ``names``."""
        node: cst.CSTNode | None = view.statement
        while node is not None and not isinstance(node, cst.FunctionDef | cst.ClassDef):
            if isinstance(node, cst.For) and set(names) & set(bound_names(node.target)):
                return node
            node = view.parents.get(node)
        return None

    def _movable(self, view: View, candidates: Sequence[str]) -> list[str]:
        """Of the names a loop or a statement binds, the tensors the run saw on the wrong device."""
        movable = []
        for name in candidates:
            info = view.described(name)
            if info is not None and info.is_tensor and same_device(str(info.device), self.behind):
                movable.append(name)
        return movable

    def _move_in_loop(self, found: Attribution, loop: cst.For) -> Site | Decline:
        view = found.view
        if not isinstance(loop.body, cst.IndentedBlock):
            return self.decline(f"the loop at {place_in(view.path, view.positions[loop].line)} is written on one line")
        movable = self._movable(view, bound_names(loop.target))
        left = [o.name for o in found.stayed if o.name not in movable]
        if left:
            return self.decline(f"{_and(left)} on {self.behind} at {view.location} does not come from the loop that binds the batch")
        existing = self._existing_move(view, loop.body, after=None)
        if existing is not None:
            return self._extend_move(found, existing, movable)
        device = self._device_for(view, loop)
        if isinstance(device, Decline):
            return device
        statement = move_statement(movable, device.code)
        line = view.positions[loop].line
        return self._site(
            found, view.path, view.positions[loop], "insert-in-loop", device,
            statement=statement,
            summary=f"Moved {_and(movable)} to {device.code} in the loop at {place_in(view.path, line)}",
        )

    def _existing_move(
        self, view: View, block: cst.IndentedBlock, after: cst.CSTNode | None
    ) -> tuple[cst.Assign, list[str], cst.Call] | None:
        """A statement of the block, before the failing line (and after ``after``), that moves
        part of the batch: ``x = x.to(device)`` or ``x, y = x.to(device), y.to(device)``."""
        started = after is None
        failing = child_in(view.parents, view.statement, block)
        for statement in block.body:
            if statement is failing:
                return None
            if statement is after:
                started = True
                continue
            if not started or not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                move = parse_move(small)
                if move is not None:
                    return move
        return None

    def _extend_move(
        self, found: Attribution, existing: tuple[cst.Assign, list[str], cst.Call], movable: list[str]
    ) -> Site | Decline:
        view = found.view
        assign, moved, call = existing
        missing = [n for n in movable if n not in moved]
        span = view.positions[assign]
        if not missing:
            return self.decline(
                f"{_and([o.name for o in found.stayed])} is already moved at {place_in(view.path, span.line)}, "
                f"yet was on {self.behind} at {view.location}"
            )
        base = cst.ensure_type(cst.ensure_type(call.func, cst.Attribute).value, cst.Name).value
        template = view.code(call)[len(base):]  # `.to(device, non_blocking=True)`
        values = [view.code(v.value) for v in tuple_elements(assign.value)]
        statement = f"{', '.join([*moved, *missing])} = {', '.join([*values, *(n + template for n in missing)])}"
        method = cst.ensure_type(call.func, cst.Attribute)
        device = _Device(
            code=view.code(call.args[0].value) if call.args else method.attr.value + "()",
            name=None, info=None, introduced=None,
        )
        return self._site(
            found, view.path, span, "extend-move", device,
            statement=statement,
            summary=f"Added {_and(missing)} to the move at {place_in(view.path, span.line)}",
        )

    def _binding(self, view: View, names: Sequence[str]) -> tuple[cst.Assign, cst.SimpleStatementLine] | Decline:
        """The one assignment, before the failing line in the same function, that binds ``names``."""
        owner: cst.FunctionDef | cst.Module = view.function if view.function is not None else view.wrapper.module
        failing_line = view.positions[view.statement].line
        found: dict[str, list[tuple[cst.Assign, cst.SimpleStatementLine]]] = {n: [] for n in names}
        for statement, small in assignments(owner):
            # the failing statement's own assignment comes after its right-hand side ran
            if statement is view.statement or view.positions[statement].line >= failing_line:
                continue
            bound = {n for target in small.targets for n in bound_names(target.target)}
            for name in names:
                if name in bound:
                    found[name].append((small, statement))
        for name, bindings in found.items():
            if not bindings:
                return self.decline(
                    f"`{name}` on {self.behind} at {view.location} is not assigned by a plain assignment before that line",
                    diagnosis=f"move `{name}` to the device where it is made (.to(device))",
                    at=view.frame,
                )
            if len(bindings) > 1:
                lines = ", ".join(str(view.positions[s].line) for _, s in bindings)
                return self.decline(
                    f"`{name}` is assigned in several places before {view.location} (lines {lines}); which one left it on "
                    f"{self.behind} is not certain",
                    diagnosis=f"move `{name}` to the device where it is made (.to(device))",
                    at=view.frame,
                )
        statements = {id(b[0][1]) for b in found.values()}
        if len(statements) > 1:
            return self.decline(f"{_and(list(names))} on {self.behind} at {view.location} are made in different statements")
        return next(iter(found.values()))[0]

    def _factory_call(self, view: View, assign: cst.Assign) -> cst.Call | None:
        value = assign.value
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name) or not isinstance(value, cst.Call):
            return None
        if not is_torch_name(ImportTable(view.wrapper.module).qualify(value.func), *FACTORIES):
            return None
        return value

    def _add_device_keyword(self, found: Attribution, call: cst.Call) -> Site | Decline:
        view = found.view
        if keyword_arg(call, "device") is not None or any(a.star for a in call.args):
            return self.decline(
                f"`{view.code(call)}` already says which device (or forwards **kwargs), yet made a tensor on {self.behind}"
            )
        name = bound_names(cst.ensure_type(view.parents[call], cst.Assign).targets[0].target)[0]
        device = self._input_device(view) or self._device_for(view, call)
        if isinstance(device, Decline):
            return device
        span = view.positions[call]
        return self._site(
            found, view.path, span, "device-keyword", device,
            summary=f"Created {name} on {device.phrase}: added device={device.code} to {one_line(view.wrapper.module, call)} "
            f"at {place_in(view.path, span.line)}",
        )

    def _input_device(self, view: View) -> _Device | None:
        """``x.device`` for a tensor parameter of the function that is already on the target."""
        for name in sorted(parameter_names_of(view.function), key=lambda n: param_order(view.function, n)):
            info = view.described(name)
            if info is not None and info.is_tensor and same_device(str(info.device), self.target):
                return _Device(code=f"{name}.device", name=name, info=info, introduced=None)
        return None

    def _move_after(self, found: Attribution, statement: cst.SimpleStatementLine) -> Site | Decline:
        view = found.view
        bound = [n for small in statement.body if isinstance(small, cst.Assign) for t in small.targets for n in bound_names(t.target)]
        movable = self._movable(view, bound)
        block = view.parents.get(statement)
        if isinstance(block, cst.IndentedBlock):
            existing = self._existing_move(view, block, after=statement)
            if existing is not None:
                return self._extend_move(found, existing, movable)
        device = self._device_for(view, statement)
        if isinstance(device, Decline):
            return device
        span = view.positions[statement]
        where = f"after {place_in(view.path, span.line)}"
        return self._site(
            found, view.path, span, "insert-after", device,
            statement=move_statement(movable, device.code),
            summary=f"Moved {_and(movable)} to {device.code} right {where}, where {'they are' if len(movable) > 1 else 'it is'} assigned",
        )

    def _fix_module(self, found: Attribution) -> Site | Decline:
        """The model moved where the failing frame binds it (``model = build()``), else where it was built."""
        view = found.view
        module = found.stayed[0]
        binding = self._binding(view, [module.name])
        if not isinstance(binding, Decline):
            assign, statement = binding
            return self._move_module(found, view, assign, statement, module.name)
        built = self._construction(view, module)
        if isinstance(built, Decline):
            return built
        return self._move_module(found, *built, module.name)

    def _construction(self, view: View, module: Operand) -> tuple[View, cst.Assign, cst.SimpleStatementLine] | Decline:
        """The assignment at the module's traced construction site, in its file's own view."""
        where = re.fullmatch(r"(.+):(\d+)", module.info.site or "")
        path = self._project_file(where.group(1)) if where else None
        if where is None or path is None:
            return self.decline(
                f"`{module.name}` on {self.behind} was built outside the project's code",
                diagnosis=f"call `{module.name}.to(device)` after it is built", at=view.frame,
            )
        line = int(where.group(2))
        wrapper = self.sources.metadata(path)
        positions = {node: span_of(r) for node, r in wrapper.resolve(PositionProvider).items()}
        statement = next(
            (n for n, s in positions.items() if isinstance(n, cst.SimpleStatementLine) and s.line <= line <= s.end_line),
            None,
        )
        assign = statement.body[0] if statement is not None and len(statement.body) == 1 else None
        if statement is None or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return self.decline(
                f"`{module.name}` is built at {place_in(path, line)} in a statement that is not a plain assignment",
                diagnosis=f"call `.to(device)` on the model built at {place_in(path, line)}", at=view.frame,
            )
        parents = wrapper.resolve(ParentNodeProvider)
        function = enclosing(parents, statement, cst.FunctionDef, stop=(cst.ClassDef,))
        build = View(
            frame=Frame(str(path), line), path=path, wrapper=wrapper, positions=positions, parents=parents,
            expression=assign.value, statement=statement,
            function=function if isinstance(function, cst.FunctionDef) else None,
            scope=self._scope_at(path, wrapper, statement),
        )
        return build, assign, statement

    def _move_module(
        self, found: Attribution, where: View, assign: cst.Assign, statement: cst.SimpleStatementLine, name: str
    ) -> Site | Decline:
        line = where.positions[statement].line
        location = f"{place_in(where.path, line)}"
        value = assign.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in (*MOVE_METHODS, "cpu"):
            return self.decline(
                f"the model is built with `.{value.func.attr.value}(...)` at {location}, yet its parameters were on "
                f"{self.behind} at {found.view.location}: something moves it back or replaces its layers",
                at=found.view.frame,
            )
        device = self._device_for(where, statement)
        if isinstance(device, Decline):
            return device
        target = assign.targets[0].target
        if isinstance(value, cst.Call) and len(assign.targets) == 1 and isinstance(target, cst.Name | cst.Attribute):
            return self._site(
                found, where.path, where.positions[value], "chain-to", device,
                summary=f"Moved the model to {device.code} where it is made at {location}: "
                f"{one_line(where.wrapper.module, value)} -> {one_line(where.wrapper.module, value)}.to({device.code})",
            )
        # `model, criterion = Net(), nn.CrossEntropyLoss()`: a line of its own after the statement
        bound = [n for t in assign.targets for n in bound_names(t.target)]
        if name not in bound and len(bound) != 1:
            return self.decline(
                f"the statement at {location} binds several names; which one is the model is not certain",
                diagnosis=f"call `.to(device)` on the model built at {location}", at=found.view.frame,
            )
        model = name if name in bound else bound[0]
        return self._site(
            found, where.path, where.positions[statement], "insert-after", device,
            statement=f"{model}.to({device.code})",
            summary=f"Moved the model to {device.code} right after it is made at {location}",
        )

    # devices ----------------------------------------------------------------------------
    def _scope_at(self, path: Path, wrapper: MetadataWrapper, node: cst.CSTNode) -> Scope:
        """The traced scope of the frame running the function around ``node`` (else the module's globals)."""
        parents = wrapper.resolve(ParentNodeProvider)
        positions = wrapper.resolve(PositionProvider)
        function = enclosing(parents, node, cst.FunctionDef, stop=(cst.ClassDef,))
        globals_only: Scope | None = None
        for frame in self.failure.frames:
            if not frame.user or Path(frame.file).resolve() != path.resolve():
                continue
            scope = self.evidence.scope(frame)
            if function is None and frame.function == "<module>":
                return scope
            if function is not None:
                where = positions[function]
                if isinstance(function, cst.FunctionDef) and function.name.value == frame.function and (
                    where.start.line <= frame.line <= where.end.line
                ):
                    return scope
            globals_only = globals_only or Scope(globals=scope.globals)
        return globals_only or Scope()

    def _device_for(self, view: View, anchor: cst.CSTNode) -> _Device | Decline:
        """The script's device variable visible at ``anchor``, or a device line to introduce."""
        scopes = view.wrapper.resolve(ScopeProvider)
        here = scopes.get(anchor)
        anchor_line = view.positions[anchor].line
        usable: list[tuple[str, DescribedValue]] = []
        other: list[tuple[str, DescribedValue]] = []
        for names in (view.scope.locals, view.scope.globals):
            for name, info in names.items():
                if not info.is_device or any(name == n for n, _ in usable + other):
                    continue
                if info.kind == "device-string" and "dev" not in name.lower():
                    continue  # a "cpu" string in a variable not named like a device is a coincidence
                if here is None or not bound_at(here, name, anchor_line, view.positions):
                    continue
                (usable if same_device(str(info.value), self.target) else other).append((name, info))
        if usable:
            usable.sort(key=lambda item: (DEVICE_NAMES.index(item[0]) if item[0] in DEVICE_NAMES else len(DEVICE_NAMES), item[0]))
            name, info = usable[0]
            return _Device(code=name, name=name, info=info, introduced=None)
        if other:
            name, info = other[0]
            return self.decline(
                f"the script's device variable `{name}` is {info.value}, yet the rest of the computation is on "
                f"{self.target}: something was moved there by hand",
                diagnosis=f"use `{name}` wherever a tensor or the model is moved", at=view.frame,
            )
        return self._introduce_device(view, anchor, here)

    def _introduce_device(self, view: View, anchor: cst.CSTNode, here: Any) -> _Device | Decline:
        torch_name = next((local for local, full in ImportTable(view.wrapper.module).aliases.items() if full == "torch"), None)
        if torch_name is None:
            return self.decline(
                "the script has no device variable, and no `import torch` to write one with",
                diagnosis='add device = torch.device("cuda" if torch.cuda.is_available() else "cpu") and move the data with it',
                at=view.frame,
            )
        if here is not None and here[NEW_DEVICE_NAME]:
            return self.decline(
                f"the script has no usable device variable at {place_in(view.path, view.positions[anchor].line)}, and the name "
                f"`{NEW_DEVICE_NAME}` is already taken there",
                at=view.frame,
            )
        function = enclosing(view.parents, anchor, cst.FunctionDef, stop=(cst.ClassDef,))
        body = function.body.body if isinstance(function, cst.FunctionDef) and isinstance(function.body, cst.IndentedBlock) else None
        if body is not None:
            statements = list(body)
            start = 1 if statements and is_docstring(statements[0]) and len(statements) > 1 else 0
            before = statements[start]
        else:
            statements = list(view.wrapper.module.body)
            before = next((s for s in statements if not is_docstring(s) and not is_import(s)), statements[-1])
        quote = quote_of(view.wrapper.module)
        line = (
            f"{NEW_DEVICE_NAME} = {torch_name}.device({quote}cuda{quote} if {torch_name}.cuda.is_available() "
            f"else {quote}cpu{quote})"
        )
        span = view.positions[before]
        return _Device(code=NEW_DEVICE_NAME, name=NEW_DEVICE_NAME, info=None, introduced=(line, span))

    def _project_file(self, file: str) -> Path | None:
        """A file named by a traced construction site (relative in recorded cases), if it is the project's."""
        if Path(file).is_absolute():
            path = Path(file)
        else:
            known = [Path(f) for f in self.evidence.imported_files] + [Path(f.file) for f in self.failure.frames if f.user]
            matches = {p for p in known if p.as_posix().endswith("/" + file) or p.as_posix() == file}
            if len(matches) != 1:
                return None
            path = matches.pop()
        if "site-packages" in path.parts or "dist-packages" in path.parts or not path.is_file():
            return None
        return path

    # the answer -------------------------------------------------------------------------
    def _site(
        self, found: Attribution, path: Path, span: Span, action: str, device: _Device,
        summary: str, statement: str = "",
    ) -> Site:
        view = found.view
        stayed = found.stayed[0]
        ahead = found.ahead[0] if found.ahead else None
        because = (
            f"{'the model' if ahead and ahead.kind == 'module' else f'`{ahead.name}`' if ahead else 'the rest'} is on "
            f"{self.target}, {stayed.name} was on {stayed.device} at {view.location}"
        )
        if stayed.kind == "module":
            because = f"its parameters were on {stayed.device}, " + (
                f"`{ahead.name}` on {ahead.device} at {view.location}" if ahead else f"the data on {self.target} at {view.location}"
            )
        extra: tuple[Span, ...] = ()
        rewrite = MoveToDevice(action, device.code, statement)
        notes: tuple[str, ...] = ()
        applicability = Applicability.SAFE
        if device.introduced is not None:
            line, anchor = device.introduced
            extra = (anchor,)
            rewrite = replace(rewrite, device_line=line)
            applicability = Applicability.UNSAFE
            summary += f"; added `{line}` at {place_in(path, anchor.line)}"
            notes = ("The script had no device variable: the one added picks the GPU whenever there is one.",)
        groups = self.match.groupdict()
        evidence = {
            "devices": {"target": self.target, "stayed_behind": self.behind},
            "message_argument": groups.get("argument"),
            "kernel": groups.get("kernel"),
            "at": view.location,
            "stayed_behind": [{"name": o.name, "kind": o.kind, "devices": list(o.devices), **o.info.quoted(*_BRIEF)} for o in found.stayed],
            "on_target": [{"name": o.name, "kind": o.kind, "devices": list(o.devices), **o.info.quoted(*_BRIEF)} for o in found.ahead],
            "device_variable": (
                {"name": device.name, **device.info.to_json()} if device.info is not None and device.introduced is None
                else {"name": device.name, "introduced": True} if device.introduced is not None else None
            ),
        }
        traced = "; ".join(f"{o.describe()} on {o.device}" for o in [*found.stayed, *found.ahead])
        if device.introduced is not None:
            chosen = f"no device variable in scope, so `{NEW_DEVICE_NAME}` is introduced"
        elif device.info is not None and device.info.is_tensor:
            chosen = f"`{device.code}`, the device of a tensor already on {self.target}"
        elif device.info is not None:
            chosen = f"the script's device variable `{device.name}` (= {device.info.value})"
        else:
            chosen = f"the existing move's `{device.code}`"
        return Site(
            pattern=self.pattern.ID,
            file=str(path),
            span=span,
            rewrite=rewrite,
            summary=f"{summary} ({because})",
            applicability=applicability,
            evidence=evidence,
            evidence_text=f"traced at {view.location}: {traced}; moved with {chosen}",
            notes=notes,
            extra_spans=extra,
        )


@dataclass(frozen=True)
class _Device:
    """How the fix names the target device."""

    code: str  # `device`, `x.device`
    name: str | None
    info: DescribedValue | None  # the traced value behind it
    introduced: tuple[str, Span] | None  # (the device line, the statement it goes before)

    @property
    def phrase(self) -> str:
        """``x's device`` for a tensor's device, else the variable."""
        if self.code.endswith(".device") and self.name:
            return f"{self.name}'s device"
        return self.code


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


_BRIEF = ("type", "shape", "dtype", "site")  # what a report quotes of a traced operand
