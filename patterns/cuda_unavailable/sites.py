"""The hard-coded CUDA sites of a project file (literals, ``.cuda()`` calls, device switches) and
how a failing frame reaches them: the candidates the pattern chooses among.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider, ScopeProvider

from repairbot.analysis import (
    DEVICE_NAMES,
    ImportTable,
    bindings_of,
    bound_once,
    failing_expression,
    is_torch_name,
    keyword_arg,
    one_line,
    place_in,
    spans,
    walk,
)
from repairbot.codemod import quote_of
from repairbot.evidence import Evidence
from repairbot.provenance import argparse_dest, bound_at, parameter_names
from repairbot.sources import SourceError, Sources, report_path
from repairbot.types import Frame, Span

from .rewrites import NEW_DEVICE_NAME, DeviceEdit, to_device
from .source import (
    bound_in,
    contains,
    cuda_comparison,
    cuda_literal,
    is_docstring,
    is_import,
    literal_text,
    module_level_alias,
    names_read,
    target_name,
)

# torch.cuda functions that need a GPU (the fix does not guard them; the report says where).
_NEEDS_GPU = (
    "synchronize", "set_device", "current_device", "get_device_name", "get_device_properties",
    "get_device_capability", "mem_get_info", "get_rng_state", "set_rng_state", "ipc_collect",
    "reset_peak_memory_stats", "Stream", "Event",
)


@dataclass(frozen=True)
class Hardcoded:
    """One place a CUDA device is written into the file."""

    kind: str  # "cuda-method", "device-argument" (needs a device), "device-value" (made agnostic in place)
    node: cst.BaseExpression  # the Call of .cuda(), else the literal
    span: Span
    code: str  # the code around it, for the report
    indexed: bool = False  # "cuda:1", .cuda(1): a device index to keep
    binds: tuple[str, ...] = ()  # what it defines: "name:device", "attr:device", "key:device"


@dataclass(frozen=True)
class Link:
    site: Hardcoded
    how: str  # for the report: "the failing call", "`device` read at train.py:30"


@dataclass(frozen=True)
class _Edit:
    kind: str
    span: Span
    node: type[cst.BaseExpression]  # the rewrite's check
    before: str
    after: str
    code: str  # the replacement (an expression), or the device for "to-device"

    def param(self) -> DeviceEdit:
        return DeviceEdit(self.kind, self.node, self.code)


@dataclass
class _Plan:
    edits: list[_Edit] = field(default_factory=list)
    device_name: str | None = None
    device_line: str | None = None
    anchor: Span | None = None
    anchor_line: int | None = None


def _span_tuple(span: Span) -> tuple[int, int, int, int]:
    return (span.line, span.col, span.end_line, span.end_col)


def _device_like(name: str) -> bool:
    """A name that holds a device when it holds "cuda": ``device``, ``DEVICE``, ``train_device``,
    ``dev``; not ``device_type`` (autocast's "cuda" means the kind of device, and "cpu" there
    would switch autocast on for the CPU)."""
    lower = name.lower()
    return ("device" in lower or lower in ("dev", "gpu") or lower.endswith("_dev")) and "type" not in lower


def _device_index_name(name: str) -> bool:
    """A name that holds one device when it holds an integer: ``device = 0``, ``gpu_id = 1``
    (not ``num_devices = 2`` or ``device_ids = [0, 1]``)."""
    lower = name.lower()
    return lower in ("device", "dev", "gpu", "gpu_id", "device_id", "cuda_device") or lower.endswith("_device")


def _device_variable(name: str) -> bool:
    """A variable ``.to(...)`` can be given: ``device``, ``DEVICE``, ``train_device``."""
    lower = name.lower()
    return lower in ("device", "dev", "torch_device") or lower.endswith("_device")


class File:
    """One parsed project file: its hard-coded sites, and how a frame reaches them."""

    def __init__(self, path: Path, wrapper: MetadataWrapper) -> None:
        self.path = path
        self.wrapper = wrapper
        self.module = wrapper.module
        self.positions = spans(wrapper)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.scopes = wrapper.resolve(ScopeProvider)
        self.imports = ImportTable(self.module)
        self.torch = module_level_alias(self.module, "torch")
        self.quote = quote_of(self.module)
        self.sites = list(self._find())

    @classmethod
    def read(cls, sources: Sources, path: Path) -> File | None:
        if not path.is_absolute() or not path.is_file():
            return None
        try:
            return cls(path, sources.metadata(path))
        except (SourceError, OSError, cst.ParserSyntaxError):
            return None

    # finding the sites ------------------------------------------------------------------
    def _find(self) -> Iterator[Hardcoded]:
        seen: set[int] = set()
        for node in walk(self.module):
            for site in self._sites_at(node):
                if id(site.node) not in seen:
                    seen.add(id(site.node))
                    yield site

    def _site(self, kind: str, node: cst.BaseExpression, context: cst.CSTNode, indexed: bool = False,
              binds: tuple[str, ...] = ()) -> Hardcoded:
        code = one_line(self.module, context).rstrip(",")
        if len(code) > 60:
            # a long call: its argument (``default="cuda"``) says enough
            parent = self.parents.get(node)
            code = one_line(self.module, parent if isinstance(parent, cst.Arg) else node).rstrip(",")
        return Hardcoded(
            kind=kind, node=node, span=self.positions[node], code=code,
            indexed=indexed, binds=binds or self._bound_by(node),
        )

    def _sites_at(self, node: cst.CSTNode) -> Iterator[Hardcoded]:
        if isinstance(node, cst.Call):
            yield from self._call_sites(node)
        elif isinstance(node, cst.Assign | cst.AnnAssign) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            names = [n for n in map(target_name, targets) if n]
            index_names = [n for n in names if _device_index_name(n) and self._used_as_device(n)]
            is_cuda, indexed = cuda_literal(node.value, allow_index=bool(index_names))
            if is_cuda and any(map(_device_like, names)):
                yield self._site("device-value", node.value, node, indexed)
        elif isinstance(node, cst.Param) and node.default is not None:
            name = node.name.value
            is_cuda, indexed = cuda_literal(node.default, allow_index=_device_index_name(name) and self._used_as_device(name))
            if is_cuda and _device_like(node.name.value):
                yield self._site("device-value", node.default, node, indexed, binds=(f"name:{node.name.value}",))
        elif isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString):
            key = node.key.evaluated_value
            is_cuda, indexed = cuda_literal(node.value)
            if is_cuda and isinstance(key, str) and _device_like(key):
                yield self._site("device-value", node.value, node, indexed, binds=(f"key:{key}",))

    def _call_sites(self, call: cst.Call) -> Iterator[Hardcoded]:
        func = call.func
        qualified = self.imports.qualify(func)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method == "cuda" and isinstance(func, cst.Attribute) and self.imports.qualify(func.value) is None:
            device = next((a for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
            yield self._site("cuda-method", call, call, indexed=device is not None)
            return
        if is_torch_name(qualified, "torch.device"):
            first = next((a for a in call.args if a.keyword is None or a.keyword.value == "type"), None)
            if first is not None:
                is_cuda, indexed = cuda_literal(first.value, allow_index=True)
                if is_cuda:
                    yield self._site("device-value", first.value, call, indexed)
            return
        if is_torch_name(qualified, "torch.set_default_device") and call.args:
            is_cuda, indexed = cuda_literal(call.args[0].value)
            if is_cuda:
                yield self._site("device-value", call.args[0].value, call, indexed)
            return
        torch_callee = qualified is not None and qualified.split(".")[0] == "torch"
        for position, arg in enumerate(call.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            if method == "to" and (keyword == "device" or (keyword is None and position == 0)):
                is_cuda, indexed = cuda_literal(arg.value, allow_index=True)
                if is_cuda:
                    yield self._site("device-argument", arg.value, call, indexed)
            elif keyword == "map_location" or (keyword == "device" and torch_callee):
                is_cuda, indexed = cuda_literal(arg.value, allow_index=torch_callee)
                if is_cuda:
                    yield self._site("device-argument", arg.value, call, indexed)
            elif keyword == "default" and method == "add_argument":
                is_cuda, indexed = cuda_literal(arg.value)
                dest = argparse_dest(call)
                if is_cuda and dest is not None and _device_like(dest):
                    yield self._site("device-value", arg.value, call, indexed, binds=(f"attr:{dest}",))
            elif keyword is not None and _device_like(keyword) and not torch_callee:
                # Trainer(device="cuda"), dict(device="cuda"), SimpleNamespace(device="cuda")
                is_cuda, indexed = cuda_literal(arg.value)
                if is_cuda:
                    yield self._site("device-value", arg.value, call, indexed, binds=(f"attr:{keyword}", f"key:{keyword}"))

    def _used_as_device(self, name: str) -> bool:
        """Whether every read of ``name`` in the file hands it over as a device (``.to(name)``,
        ``device=name``, ``torch.device(name)``, an argument of a project function): then an
        integer there is a device index, and "cpu" can take its place. Used as an index
        (``torch.device("cuda", gpu)``, ``f"cuda:{gpu}"``), it cannot."""
        for node in walk(self.module):
            if not isinstance(node, cst.Name) or node.value != name:
                continue
            parent = self.parents.get(node)
            if isinstance(parent, cst.AssignTarget | cst.Param) or (
                isinstance(parent, cst.AnnAssign) and parent.target is node
            ):
                continue
            if not isinstance(parent, cst.Arg) or parent.value is not node:
                return False
            call = self.parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            keyword = parent.keyword.value if parent.keyword is not None else None
            position = [a for a in call.args if a.keyword is None].index(parent) if keyword is None else -1
            qualified = self.imports.qualify(call.func)
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
            if keyword in ("device", "map_location") or (method in ("to", "cuda") and position == 0):
                continue
            if is_torch_name(qualified, "torch.device") and position == 0:
                continue
            if qualified is None and method is None:
                continue  # handed to a function of the project
            return False
        return True

    def _bound_by(self, node: cst.CSTNode) -> tuple[str, ...]:
        """What the statement around ``node`` assigns: ``device = torch.device("cuda")`` binds
        ``device``; ``self.device = "cuda"`` binds the attribute ``device``."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, cst.BaseSmallStatement | cst.BaseCompoundStatement):
            current = self.parents.get(current)
        if isinstance(current, cst.Assign):
            targets = [t.target for t in current.targets]
        elif isinstance(current, cst.AnnAssign):
            targets = [current.target]
        else:
            return ()
        in_class = isinstance(self._owner(current, cst.ClassDef), cst.ClassDef)
        bound: list[str] = []
        for target in targets:
            if isinstance(target, cst.Name):
                bound.append(f"name:{target.value}")
                if in_class:  # a class attribute (a config class): read as cfg.device
                    bound.append(f"attr:{target.value}")
            elif isinstance(target, cst.Attribute):
                bound.append(f"attr:{target.attr.value}")
        return tuple(bound)

    # linking a frame to a site -----------------------------------------------------------
    def link(self, frame: Frame, evidence: Evidence | None) -> Link | None:
        """The hard-coded site this frame's expression reaches: inside it, or the definition of
        a device it reads; or a CUDA literal it passes straight to the call it makes."""
        expression = failing_expression(self.positions, frame)
        if expression is None:
            return None
        where = self.positions[expression]
        inside = [s for s in self.sites if contains(where, s.span)]
        if inside:
            return Link(min(inside, key=lambda s: (s.span.line, s.span.col)), "the failing call")
        owner = self._owner(expression)
        reads = self._reads_through(expression, owner)
        candidates: list[tuple[int, int, Hardcoded, str]] = []
        for site in self.sites:
            for bound in site.binds:
                if bound not in reads:
                    continue
                kind, _, name = bound.partition(":")
                site_owner = self._owner(site.node)
                if kind == "name" and site_owner is not owner and not isinstance(site_owner, cst.Module):
                    continue  # a local of another function
                rank = 0 if site_owner is owner else 1
                shown = {"name": f"`{name}`", "attr": f"`.{name}`", "key": f"`[{self.quote}{name}{self.quote}]`"}[kind]
                candidates.append((reads[bound], rank, site, f"{shown} read at {place_in(self.path, frame.line)}"))
        if candidates:
            # what the expression reads itself first, then what those values read
            _, _, site, how = min(candidates, key=lambda c: (c[0], c[1], c[2].span.line))
            return Link(site, how)
        if isinstance(expression, cst.Call):
            for arg in expression.args:
                is_cuda, indexed = cuda_literal(arg.value)
                if is_cuda:
                    site = self._site("device-value", arg.value, expression, indexed)
                    self.sites.append(site)
                    return Link(site, "passed to the failing call")
        return None

    def _reads_through(self, expression: cst.CSTNode, owner: cst.CSTNode, depth: int = 3) -> dict[str, int]:
        """What the expression reads (depth 0), and what the values of the names it reads read in
        turn (``device = torch.device(config["device"])`` then ``x.to(device)`` reads ``device``,
        then ``config["device"]``), in its function and at module level."""
        found = dict.fromkeys(names_read(expression), 0)
        frontier = {r.partition(":")[2] for r in found if r.startswith("name:")}
        seen: set[str] = set()
        for level in range(1, depth + 1):
            values = [value for name in frontier - seen for value in self._assigned_values(name, owner)]
            seen |= frontier
            more: set[str] = set()
            for value in values:
                more |= names_read(value)
            for read in more:
                found.setdefault(read, level)
            frontier = {r.partition(":")[2] for r in more if r.startswith("name:")}
        return found

    def _assigned_values(self, name: str, owner: cst.CSTNode) -> Iterator[cst.BaseExpression]:
        for node in walk(self.module):
            if isinstance(node, cst.Assign):
                targets = [t.target for t in node.targets]
            elif isinstance(node, cst.AnnAssign):
                targets = [node.target]
            else:
                continue
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                where = self._owner(node)
                if (where is owner or isinstance(where, cst.Module)) and node.value is not None:
                    yield node.value

    def _owner(self, node: cst.CSTNode, *also: type[cst.CSTNode]) -> cst.CSTNode:
        """The function the node runs in (or the first of ``also`` around it), else the module."""
        kinds: tuple[type[cst.CSTNode], ...] = (cst.FunctionDef, cst.Module, *also)
        current = self.parents.get(node)
        while current is not None and not isinstance(current, kinds):
            current = self.parents.get(current)
        return current if current is not None else self.module

    # a switch around the sites -------------------------------------------------------------
    def guard(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The switch the nearest ``if`` (or conditional expression) around ``node`` runs it
        under, when that test is a plain name or attribute (``use_cuda``, ``args.cuda``) or
        compares a device with a CUDA literal (``args.device == "cuda"``), and ``node`` is in
        its body, not its ``else``."""
        child, current = node, self.parents.get(node)
        while current is not None and not isinstance(current, cst.FunctionDef | cst.ClassDef | cst.Module):
            if isinstance(current, cst.If | cst.IfExp) and child is not current.test:
                if child is not current.body:
                    return None  # in the else branch
                test = current.test
                return test if isinstance(test, cst.Name | cst.Attribute) or cuda_comparison(test) else None
            child, current = current, self.parents.get(current)
        return None

    def compared_device(self, test: cst.Comparison) -> Hardcoded | None:
        """The one hard-coded device definition a ``X == "cuda"`` test reads (``args.device``
        -> the argparse default ``"cuda"``), when there is exactly one."""
        reads = self._reads_through(test, self._owner(test))
        found = [
            site for site in self.sites
            if site.kind == "device-value" and not site.indexed and any(b in reads for b in site.binds)
        ]
        return found[0] if len(found) == 1 else None

    def switch_written(self, test: cst.Name | cst.Attribute) -> tuple[cst.BaseExpression, str] | str | None:
        """Where the switch's value is written, and how the report names it: the one assignment
        of the name (in the test's function, else at module level), the one ``x.attr = ...`` of
        the file, else the ``default=`` of the argparse option that sets the attribute; a text
        when the option is a flag that only the command line turns on."""
        if isinstance(test, cst.Name):
            owner = self._owner(test)
            if isinstance(owner, cst.FunctionDef) and test.value in parameter_names(owner):
                return None  # the caller's value
            for scope in dict.fromkeys((owner, self.module)):
                if bindings_of(scope, test.value):
                    value = bound_once(scope, test.value)
                    return (value, f"`{test.value}`, where it is written") if value is not None else None
            return None
        attr = test.attr.value
        assigned = [
            node.value for node in walk(self.module) if isinstance(node, cst.Assign)
            and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == attr for t in node.targets)
        ]
        if assigned:
            return (assigned[0], f"`.{attr}`, where it is written") if len(assigned) == 1 else None
        options = [
            node for node in walk(self.module)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "add_argument" and argparse_dest(node) == attr
        ]
        if len(options) != 1:
            return None
        default = keyword_arg(options[0], "default")
        action = keyword_arg(options[0], "action")
        if default is not None and m.matches(default.value, m.Name("True")):
            return default.value, f"the default of the `{attr}` option"
        store_true = action is not None and m.matches(action.value, m.SimpleString(value=m.MatchIfTrue(
            lambda text: text.strip("'\"") == "store_true")))
        if store_true and (default is None or m.matches(default.value, m.Name("False"))):
            flag = one_line(self.module, options[0].args[0].value)
            return f"a flag that is off unless the command line passes it ({flag} at {place_in(self.path, self.positions[options[0]].line)})"
        return None

    # planning the edit ---------------------------------------------------------------------
    def plan(self, linked: Link, traced: str | None = None) -> _Plan | str:
        """The edits: every site of the file, the linked one first; ``.cuda()`` gets the
        script's device variable (one is introduced when none is visible), ``.to("cuda")`` too
        when one is visible, and every other site is made agnostic where it is written. With
        ``traced`` (the value the failing frame saw of the variable the linked site defines,
        the very literal written there), another definition of that variable inside an ``if``
        around which the linked one is not (``if ddp: device = f"cuda:{rank}"``) is a branch the
        run did not take: it stays as it is."""
        if self.torch is None:
            return f"{report_path(self.path)} has no module-level `import torch` to write a device-agnostic expression with"
        sites = sorted(self.sites, key=lambda s: (s.span.line, s.span.col))
        # a site under a switch that asks for CUDA already (if use_cuda: with use_cuda =
        # torch.cuda.is_available()) runs only where there is a GPU: it stays as it is
        ordered = [
            linked.site,
            *[s for s in sites if s is not linked.site and not self._guarded_by_availability(s)
              and not (traced is not None and self._other_branch(s, linked.site))],
        ]
        plan = _Plan()
        names: dict[int, str | None] = {id(s): self._visible_device(s) for s in ordered if not s.indexed}
        missing = [s for s in ordered if s.kind == "cuda-method" and not s.indexed and names[id(s)] is None]
        if missing:
            # sites that would use the new variable too when it is in scope: .to("cuda")
            users = [s for s in ordered if not s.indexed and s.kind == "device-argument" and names[id(s)] is None]
            introduced = self._introduce(missing, users)
            if isinstance(introduced, str):
                return introduced
            plan.device_line, plan.anchor, owner = introduced
            plan.anchor_line = plan.anchor.line
            for site in ordered:
                if not site.indexed and names[id(site)] is None and self._sees_new_device(site, owner, plan.anchor):
                    names[id(site)] = NEW_DEVICE_NAME
        for site in ordered:
            device = names.get(id(site)) if site.kind in ("cuda-method", "device-argument") else None
            plan.device_name = plan.device_name or device
            plan.edits.append(self._edit(site, device))
        return plan

    def _other_branch(self, site: Hardcoded, linked: Hardcoded) -> bool:
        """Whether ``site`` defines the same variable as ``linked`` inside an ``if`` that does
        not hold ``linked``."""
        names = [b for b in linked.binds if b.startswith("name:")]
        if site.kind != "device-value" or not names or not set(names) & set(site.binds):
            return False
        current = self.parents.get(site.node)
        while current is not None and not isinstance(current, cst.FunctionDef | cst.ClassDef | cst.Module):
            if isinstance(current, cst.If) and not contains(self.positions[current], linked.span):
                return True
            current = self.parents.get(current)
        return False

    def _guarded_by_availability(self, site: Hardcoded) -> bool:
        test = self.guard(site.node)
        written = self.switch_written(test) if isinstance(test, cst.Name | cst.Attribute) else None
        return isinstance(written, tuple) and "is_available" in self.module.code_for_node(written[0])

    def _sees_new_device(self, site: Hardcoded, owner: cst.CSTNode, anchor: Span) -> bool:
        """Whether an introduced device line (at the top of ``owner``) is in scope at the site."""
        if site.span.line < anchor.line:
            return False
        if isinstance(owner, cst.Module):
            scope = self.scopes.get(site.node)
            return scope is not None and not bound_in(scope, NEW_DEVICE_NAME)
        current: cst.CSTNode | None = site.node
        while current is not None and current is not owner:
            current = self.parents.get(current)
        return current is owner

    def _agnostic(self, code: str) -> str:
        return f"{code} if {self.torch}.cuda.is_available() else {self.quote}cpu{self.quote}"

    def _edit(self, site: Hardcoded, device: str | None) -> _Edit:
        node_type = type(site.node)
        before = one_line(self.module, site.node)
        if site.kind == "cuda-method":
            call = cst.ensure_type(site.node, cst.Call)
            if device is None:
                index = next(a for a in call.args if a.keyword is None or a.keyword.value == "device")
                device = self._agnostic(one_line(self.module, index.value))
            after = one_line(self.module, to_device(call, device))
            return _Edit("to-device", site.span, node_type, before, after, device)
        code = device if device is not None and site.kind == "device-argument" else self._agnostic(before)
        shown_before = site.code
        shown_after = shown_before.replace(before, code, 1) if before in shown_before else code
        return _Edit("replace", site.span, node_type, shown_before, shown_after, code)

    def _visible_device(self, site: Hardcoded) -> str | None:
        """A device variable the site can use: bound before it in its function, a parameter,
        or a module global."""
        scope = self.scopes.get(site.node)
        if scope is None:
            return None
        line = site.span.line
        found: list[str] = []
        for name in self._device_names():
            if bound_at(scope, name, line, self.positions):
                found.append(name)
        found.sort(key=lambda n: (DEVICE_NAMES.index(n) if n in DEVICE_NAMES else len(DEVICE_NAMES), n))
        return found[0] if found else None

    def _device_names(self) -> list[str]:
        """Names the file binds to a device: ``device = torch.device(...)``, ``device = "cuda"
        if ... else "cpu"``, a ``device`` parameter."""
        names: set[str] = set()
        for node in walk(self.module):
            if isinstance(node, cst.Param) and _device_variable(node.name.value):
                names.add(node.name.value)
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Name) and _device_variable(target.target.value):
                        names.add(target.target.value)
            elif isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name) and _device_variable(node.target.value):
                names.add(node.target.value)
        return sorted(names)

    def _introduce(
        self, missing: Sequence[Hardcoded], users: Sequence[Hardcoded]
    ) -> tuple[str, Span, cst.CSTNode] | str:
        """The device line, the statement it goes before, and the block that holds it: first in
        the one top-level function whose sites need it (and all that could use it), else after
        the module's imports."""
        owners = {id(self._owner(s.node)): self._owner(s.node) for s in [*missing, *users]}
        function = next(iter(owners.values())) if len(owners) == 1 else None
        if (
            isinstance(function, cst.FunctionDef) and self.parents.get(function) is self.module
            and isinstance(function.body, cst.IndentedBlock)
        ):
            statements = list(function.body.body)
            start = 1 if len(statements) > 1 and is_docstring(statements[0]) else 0
            anchor: cst.CSTNode = statements[start]
            owner: cst.CSTNode = function
        else:
            # a method, a nested function or several functions: the module level serves them all
            for site in missing:
                scope = self.scopes.get(site.node)
                if scope is not None and bound_in(scope, NEW_DEVICE_NAME):
                    return (
                        f"the name `{NEW_DEVICE_NAME}` is bound in the code around {place_in(self.path, site.span.line)}, "
                        "yet not before the device is needed there: no device variable can be added for it"
                    )
            candidates = [s for s in self.module.body if not is_docstring(s) and not is_import(s)]
            if not candidates:
                return f"{report_path(self.path)} has no statement after its imports to put a device line before"
            anchor, owner = candidates[0], self.module
            first_use = min(s.span.line for s in missing)
            if self.positions[anchor].line > first_use:
                return f"{report_path(self.path)} uses CUDA at line {first_use}, before its imports end"
        q = self.quote
        line = f"{NEW_DEVICE_NAME} = {self.torch}.device({q}cuda{q} if {self.torch}.cuda.is_available() else {q}cpu{q})"
        return line, self.positions[anchor], owner

    # what the fix leaves ---------------------------------------------------------------------
    def gpu_calls(self) -> Iterator[str]:
        """torch.cuda calls that need a GPU whatever the device, for the report."""
        for node in walk(self.module):
            if isinstance(node, cst.Call):
                qualified = self.imports.qualify(node.func)
                if qualified and qualified.startswith("torch.cuda.") and qualified.rsplit(".", 1)[-1] in _NEEDS_GPU:
                    yield (
                        f"`{one_line(self.module, node)}` at {place_in(self.path, self.positions[node].line)} needs a GPU "
                        "whatever the device: guard it with `if torch.cuda.is_available():`."
                    )


def one_line_at(view: File | None, frame: Frame) -> str:
    """The failing expression for a decline, else the frame's code."""
    if view is not None:
        expression = failing_expression(view.positions, frame)
        if expression is not None:
            return f"`{one_line(view.module, expression)}`"
    return f"`{frame.code.strip()}`" if frame.code else "the call"


def other_files(evidence: Evidence | None, fixed: Path, sources: Sources) -> list[str]:
    """``models.py:12``: hard-coded sites in the project's other imported files."""
    found: list[str] = []
    for name in evidence.imported_files if evidence else ():
        path = Path(name)
        if path.resolve() == fixed.resolve() or "site-packages" in path.parts:
            continue
        view = File.read(sources, path)
        if view is not None and view.sites:
            found.extend(f"{place_in(path, site.span.line)}" for site in view.sites[:3])
    return found


def traced_value(evidence: Evidence | None, frame: Frame, site: Hardcoded) -> str | None:
    """The device string the failing frame saw in the variable ``site`` defines, when it is the
    very literal written there (the run took that definition)."""
    if evidence is None or not isinstance(site.node, cst.SimpleString):
        return None
    for bound in site.binds:
        kind, _, name = bound.partition(":")
        described = evidence.scope(frame).get(name) if kind == "name" else None
        if described is not None and described.is_device and described.value == site.node.evaluated_value:
            return str(described.value)
    return None


def not_written_there(evidence: Evidence | None, frame: Frame, site: Hardcoded) -> str | None:
    """The traced device string of the variable ``site`` defines, when the literal written there
    cannot give it (``f"cuda:{rank}"`` never gives ``"cuda"``)."""
    if evidence is None or not isinstance(site.node, cst.SimpleString | cst.FormattedString):
        return None
    text = literal_text(site.node)
    for bound in site.binds:
        kind, _, name = bound.partition(":")
        described = evidence.scope(frame).get(name) if kind == "name" else None
        if described is None or not described.is_device or not isinstance(described.value, str) or text is None:
            continue
        pattern = re.escape(text).replace(re.escape("{}"), r"\d+")
        if not re.fullmatch(pattern, described.value):
            return described.value
    return None


def gated(view: File, target: cst.BaseExpression) -> str:
    """The switch's code gated on CUDA's availability: ``True`` -> ``torch.cuda.is_available()``,
    ``not args.no_cuda`` -> ``not args.no_cuda and torch.cuda.is_available()``."""
    code = view.module.code_for_node(target)
    available = f"{view.torch}.cuda.is_available()"
    if isinstance(target, cst.Name) and target.value == "True":
        return available
    if isinstance(target, cst.BooleanOperation | cst.IfExp | cst.Lambda | cst.NamedExpr):
        return f"({code}) and {available}"
    return f"{code} and {available}"
