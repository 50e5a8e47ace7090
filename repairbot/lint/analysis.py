"""What several lint rules ask of a parsed file: calls and their receivers, literals, scopes,
loops, no-grad regions, and torch names written with the file's own import aliases.

Everything here reads the tree only (no LibCST metadata): the walk's ``FileContext.stack``
stands in for parents.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import libcst as cst

from repairbot.codemod import dotted_name
from repairbot.lint.rule import FileContext
from repairbot.lint.walk import descendants

# Nodes that open a new scope: what a loop or a function "contains" stops at them.
SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
LOOPS = (cst.For, cst.While)

NO_GRAD_CONTEXTS = (
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
)


_MODEL_NAME = re.compile(r"(?:model|net|network|encoder|decoder|backbone|classifier)$", re.IGNORECASE)


def model_like(name: str) -> bool:
    """Whether a name reads like a model: ``model``, ``net``, ``self.encoder``, ``student_model``."""
    last = name.rsplit(".", 1)[-1]
    return last != "self" and _MODEL_NAME.search(last) is not None


def method_name(call: cst.Call) -> str | None:
    """``step`` for ``opt.step()``; None for a call of a plain name."""
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def receiver(call: cst.Call) -> cst.BaseExpression | None:
    """``opt`` for ``opt.step()``."""
    return call.func.value if isinstance(call.func, cst.Attribute) else None


def is_method_call(node: cst.CSTNode, *names: str) -> bool:
    # `type(...) is` rather than isinstance: LibCST's node classes are ABCs, slow to isinstance
    return type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in names


def reference_head(node: cst.CSTNode) -> str | None:
    """The name a Name/Attribute chain starts from (``torch`` for ``torch.nn.Linear``), cheaply."""
    while type(node) is cst.Attribute:
        node = node.value
    return node.value if type(node) is cst.Name else None


def number(node: cst.BaseExpression) -> float | None:
    """The value of an int or float literal (``1``, ``1.0``, ``1.``), else None."""
    try:
        if isinstance(node, cst.Integer):
            return float(int(node.value.replace("_", ""), 0))
        if isinstance(node, cst.Float):
            return float(node.value.replace("_", ""))
    except ValueError:
        return None
    return None


def string_value(node: cst.CSTNode) -> str | None:
    """The text of a plain string literal (no f-string, no bytes), else None."""
    if isinstance(node, cst.SimpleString) and "f" not in node.prefix.lower() and "b" not in node.prefix.lower():
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def last_name(node: cst.BaseExpression) -> str | None:
    """``model`` for ``model``, ``encoder`` for ``self.encoder``."""
    dotted = dotted_name(node)
    return dotted.rsplit(".", 1)[-1] if dotted else None


def innermost(stack: Sequence[cst.CSTNode], kinds: tuple[type[cst.CSTNode], ...]) -> cst.CSTNode | None:
    """The nearest ancestor of the visited node (``stack[-1]``) of one of ``kinds``, not looking
    past the function, class or lambda that holds it."""
    for node in reversed(stack[:-1]):
        if isinstance(node, kinds):
            return node
        if isinstance(node, SCOPES):
            return None
    return None


def enclosing_scope(stack: Sequence[cst.CSTNode]) -> cst.CSTNode:
    """The function, class or lambda around the visited node, else the module."""
    for node in reversed(stack[:-1]):
        if isinstance(node, SCOPES):
            return node
    return stack[0]


def enclosing_function(stack: Sequence[cst.CSTNode]) -> cst.FunctionDef | None:
    for node in reversed(stack[:-1]):
        if isinstance(node, cst.FunctionDef):
            return node
    return None


def within(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A node and what it holds, without entering nested functions, classes and lambdas."""
    return descendants(node, prune=SCOPES)


def calls_within(node: cst.CSTNode) -> Iterator[cst.Call]:
    for item in within(node):
        if isinstance(item, cst.Call):
            yield item


def is_no_grad_context(context: FileContext, expression: cst.BaseExpression) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)`` (any alias)."""
    if not isinstance(expression, cst.Call):
        return context.is_torch(expression, *NO_GRAD_CONTEXTS)  # `with torch.no_grad:` (no call) works too
    if context.is_torch(expression.func, *NO_GRAD_CONTEXTS):
        return not (expression.args and is_false(expression.args[0].value))  # inference_mode(False)
    if context.is_torch(expression.func, "torch.set_grad_enabled", "torch.autograd.set_grad_enabled"):
        return bool(expression.args) and is_false(expression.args[0].value)
    return False


def decorated_no_grad(context: FileContext, function: cst.FunctionDef) -> bool:
    return any(is_no_grad_context(context, decorator.decorator) for decorator in function.decorators)


def under_no_grad(context: FileContext, stack: Sequence[cst.CSTNode]) -> bool:
    """Whether the visited node runs with gradients off: in a no-grad ``with`` block, or in a
    function decorated with one (the nearest function decides: its body runs when called)."""
    for node in reversed(stack[:-1]):
        if isinstance(node, cst.With) and any(is_no_grad_context(context, item.item) for item in node.items):
            return True
        if isinstance(node, cst.FunctionDef):
            return decorated_no_grad(context, node)
        if isinstance(node, cst.ClassDef | cst.Lambda):
            return False
    return False


def _bindings(statement: cst.CSTNode) -> Iterator[tuple[str, str]]:
    """(local name, full name) of each import in a statement, nested blocks included (``try:`` /
    ``if``), nested functions and classes not: what running the statement binds in its scope."""
    if isinstance(statement, SCOPES):
        return
    for node in descendants(statement, prune=SCOPES):
        if type(node) is cst.Import:
            for alias in node.names:
                full = dotted_name(alias.name) or ""
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    yield alias.asname.name.value, full
                else:
                    yield full.split(".")[0], full.split(".")[0]  # `import torch.nn` binds `torch`
        elif type(node) is cst.ImportFrom and node.module is not None and not node.relative:
            if isinstance(node.names, cst.ImportStar):
                continue
            base = dotted_name(node.module) or ""
            for alias in node.names:
                name = dotted_name(alias.name) or ""
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                yield local, f"{base}.{name}"


def visible_imports(stack: Sequence[cst.CSTNode]) -> dict[str, str]:
    """The import aliases bound where the visited node (``stack[-1]``) runs: imports of the
    enclosing bodies that come before it in source order (a function's body sees the imports of
    the module before the ``def``, not those of a class around it, nor imports of other
    functions, nor later ones). Innermost bindings win."""
    found: dict[str, str] = {}
    in_function = False
    layers: list[list[tuple[str, str]]] = []
    for index in range(len(stack) - 2, -1, -1):
        holder = stack[index]
        if isinstance(holder, cst.FunctionDef | cst.Lambda):
            in_function = True
            continue
        body = getattr(holder, "body", None)
        if not isinstance(body, tuple | list):
            continue
        owner = stack[index - 1] if index > 0 else None
        if in_function and isinstance(owner, cst.ClassDef):
            continue  # a class body's names are not visible inside its methods
        child = stack[index + 1]
        if child in body:
            layer = [binding for statement in body[:body.index(child)] for binding in _bindings(statement)]
            layers.append(layer)
    for layer in reversed(layers):  # outermost first, so that inner bindings override
        found.update(layer)
    return found


def torch_reference(context: FileContext, qualified: str, written: cst.BaseExpression | None = None) -> cst.BaseExpression | None:
    """``qualified`` (``torch.linalg.cholesky``) written with the aliases bound where the
    visited node runs (``torch.linalg.cholesky``, ``th.linalg.cholesky``, ``F.interpolate``...):
    through the alias that ``written`` (the expression being replaced) starts with when it
    reaches ``qualified``, else the longest imported module that holds it; None when no import
    visible there does (a fix must never write a name that is not bound where it runs)."""
    aliases = visible_imports(context.stack)
    head = reference_head(written) if written is not None else None
    if head is not None and head in aliases and qualified.startswith(aliases[head] + "."):
        return cst.parse_expression(head + qualified[len(aliases[head]):])
    best: tuple[int, str] | None = None
    for local, full in aliases.items():
        if (qualified == full or qualified.startswith(full + ".")) and (best is None or len(full) > best[0]):
            best = (len(full), local + qualified[len(full):])
    return cst.parse_expression(best[1]) if best else None


def whole_reference(context: FileContext) -> bool:
    """Whether the visited Name/Attribute is a whole reference to something: not the head or the
    ``.attr`` of a longer attribute chain (the chain's outermost Attribute speaks for it), and not
    a name being imported, defined or used as a keyword."""
    node = context.stack[-1]
    parent = context.parent()
    if isinstance(parent, cst.Attribute | cst.ImportAlias | cst.AsName | cst.ImportFrom | cst.Import | cst.Param):
        return False
    if isinstance(parent, cst.Arg) and parent.keyword is node:
        return False
    return not (isinstance(parent, cst.FunctionDef | cst.ClassDef) and parent.name is node)


def statements_before(stack: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """For each body on the way from the module down to the visited node, the statements that
    come before the one holding it (innermost body first)."""
    for index in range(len(stack) - 2, -1, -1):
        holder = stack[index]
        body = getattr(holder, "body", None)
        if not isinstance(body, tuple | list) or index + 1 >= len(stack):
            continue
        child = stack[index + 1]
        if child in body:
            yield from reversed(body[:body.index(child)])


def code_mentions(context: FileContext, node: cst.CSTNode, words: tuple[str, ...]) -> bool:
    text = context.module.code_for_node(node).lower()
    return any(word in text for word in words)


def assigned_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets an assignment statement binds (``a = b = f()`` gives a and b)."""
    if isinstance(node, cst.Assign):
        return [target.target for target in node.targets]
    if isinstance(node, cst.AnnAssign | cst.AugAssign):
        return [node.target]
    return []
