"""repairbot/analysis.py: the facts patterns and lint rules share, each pinned where the copies
it replaced disagreed (autograd-off regions, the failing expression, losses, bindings)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    ancestors,
    bound_once,
    enclosing,
    failing_expression,
    grad_off_around,
    grad_off_in,
    loss_call_at,
    loss_name,
    own_nodes,
    source,
    spans,
    statement_of,
    traced_line_matches,
    under_no_grad,
    visible_imports,
)
from repairbot.evidence import Scope
from repairbot.lint.rule import FileContext
from repairbot.sources import Sources
from repairbot.torch_semantics import TABLE_PATH, is_inplace_method, is_loss_name
from repairbot.types import Frame


def _parsed(code: str) -> tuple[cst.Module, dict[cst.CSTNode, cst.CSTNode], dict]:
    wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(code)))
    return wrapper.module, dict(wrapper.resolve(ParentNodeProvider)), spans(wrapper)


def _marked(module: cst.Module, positions: dict) -> cst.CSTNode:
    """The ``marker()`` call of a snippet: the node asked about."""
    return next(
        node for node in positions
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "marker"
    )


# --------------------------------------------------------------------------------------------
# Autograd-off regions: one meaning for the lint rules (walk stack), the patterns (parents) and
# the diagnoses (line positions)

GRAD_CASES = [
    ("with torch.no_grad():\n    marker()\n", True),
    ("with torch.no_grad:\n    marker()\n", True),
    ("with torch.inference_mode():\n    marker()\n", True),
    ("with torch.inference_mode(True):\n    marker()\n", True),
    ("with torch.inference_mode(False):\n    marker()\n", False),
    ("with torch.inference_mode(mode=False):\n    marker()\n", False),
    ("with torch.set_grad_enabled(False):\n    marker()\n", True),
    ("with torch.set_grad_enabled(True):\n    marker()\n", False),
    ("with torch.set_grad_enabled(training):\n    marker()\n", False),
    ("with th.autograd.no_grad():\n    marker()\n", True),
    ("with no_grad():\n    marker()\n", True),
    ("with torch.no_grad():\n    with torch.enable_grad():\n        marker()\n", False),
    ("with torch.no_grad():\n    with torch.set_grad_enabled(True):\n        marker()\n", False),
    ("with torch.no_grad(), torch.enable_grad():\n    marker()\n", False),
    ("with torch.enable_grad():\n    with torch.no_grad():\n        marker()\n", True),
    ("@torch.no_grad()\ndef f():\n    marker()\n", True),
    ("@torch.no_grad\ndef f():\n    marker()\n", True),
    ("@torch.inference_mode()\ndef f():\n    marker()\n", True),
    ("@torch.inference_mode(False)\ndef f():\n    marker()\n", False),
    ("@torch.enable_grad()\n@torch.no_grad()\ndef f():\n    marker()\n", True),
    ("with torch.no_grad():\n    def f():\n        marker()\n", False),  # the body runs when called
    ("with torch.no_grad():\n    class C:\n        x = marker()\n", False),
    ("with open('f') as handle:\n    marker()\n", False),
    ("marker()\n", False),
]
IMPORTS = "import torch\nimport torch as th\nfrom torch import no_grad\n"


@pytest.mark.parametrize(("body", "off"), GRAD_CASES)
def test_autograd_off_has_one_meaning_in_every_form(body: str, off: bool, tmp_path: Path) -> None:
    code = IMPORTS + body
    module, parents, positions = _parsed(code)
    node = _marked(module, positions)
    imports = ImportTable(module)
    # the patterns' form: parents
    assert (grad_off_in(ancestors(parents, node), imports.qualify) is not None) is off
    # the lint rules' form: the walk stack
    stack = [*reversed(list(ancestors(parents, node))), node]
    context = FileContext(path=tmp_path / "x.py", module=module, imports=imports, package=None, stack=stack)
    assert under_no_grad(context, stack) is off
    # the diagnoses' form: a line of a parsed file
    path = tmp_path / "train.py"
    path.write_text(code)
    src = source(Sources(), str(path))
    assert src is not None
    assert (grad_off_around(src, positions[node].line) is not None) is off


# --------------------------------------------------------------------------------------------
# The failing expression, the enclosing node, the stale-source guard


def _frame(line: int, col: int | None = None, end_col: int | None = None, code: str | None = None) -> Frame:
    return Frame(file="train.py", line=line, function="f", code=code, user=True, col=col, end_line=line, end_col=end_col)


def test_failing_expression_exact_span_is_the_outermost_node() -> None:
    module, _, positions = _parsed("y = (a + b) * c\n")
    # `a + b` inside the parentheses: the traced span of the addition
    found = failing_expression(positions, _frame(1, 5, 10))
    whole = failing_expression(positions, _frame(1, 4, 15))
    assert isinstance(whole, cst.BinaryOperation) and module.code_for_node(whole) == "(a + b) * c"
    assert found is whole.left


def test_failing_expression_smallest_containing_then_line_fallback() -> None:
    _, _, positions = _parsed("loss = model(\n    x,\n    y)\n")
    found = failing_expression(positions, Frame("t.py", 1, "f", None, True, 7, 3, 6))
    assert isinstance(found, cst.Call)  # the call spans lines 1-3
    # a traced span from line 2 to 3 lies inside the call that starts on line 1: the smallest
    # containing expression counts whatever line it starts on (dtype-mismatch's copy looked only
    # at expressions starting on the frame's line, device-mismatch's at all)
    found = failing_expression(positions, Frame("t.py", 2, "f", None, True, 4, 3, 5))
    assert isinstance(found, cst.Call)
    # no columns: the one simple statement line around the line (the caller reads it whole),
    # also from a continuation line of that statement
    assert isinstance(failing_expression(positions, _frame(1)), cst.SimpleStatementLine)
    assert isinstance(failing_expression(positions, _frame(2)), cst.SimpleStatementLine)
    _, _, header = _parsed("for x in f():\n    pass\n")
    assert failing_expression(header, _frame(1)) is None  # a compound statement's header


def test_failing_expression_method_call_over_lines() -> None:
    module, _, positions = _parsed("model = Model(\n    3,\n).to(device)\n")
    # Python places `Model(...).to(device)` from `.to` on line 3 to the call's end
    found = failing_expression(positions, Frame("t.py", 3, "f", None, True, 1, 3, 12))
    assert isinstance(found, cst.Call) and module.code_for_node(found).endswith(".to(device)")


def test_enclosing_and_statement_of() -> None:
    _, parents, positions = _parsed(
        "def outer():\n    class C:\n        x = marker()\n    def inner():\n        return marker()\n"
    )
    calls = [n for n in positions if isinstance(n, cst.Call)]
    in_class, in_inner = sorted(calls, key=lambda n: positions[n].line)
    function = enclosing(parents, in_class, cst.FunctionDef)
    assert isinstance(function, cst.FunctionDef) and function.name.value == "outer"
    assert enclosing(parents, in_class, cst.FunctionDef, stop=(cst.ClassDef,)) is None
    inner = enclosing(parents, in_inner, cst.FunctionDef, stop=(cst.ClassDef,))
    assert isinstance(inner, cst.FunctionDef) and inner.name.value == "inner"
    statement = statement_of(parents, in_class)
    assert isinstance(statement, cst.SimpleStatementLine) and statement_of(parents, statement) is statement


def test_traced_line_matches() -> None:
    code = "x = 1\r\n    y = f(x)  \nz = 3\n"
    assert traced_line_matches(code, _frame(2, code="y = f(x)"))
    assert traced_line_matches(code, _frame(2, code="  y = f(x)\n"))
    assert not traced_line_matches(code, _frame(3, code="y = f(x)"))  # the line moved
    assert not traced_line_matches(code, _frame(9, code="y = f(x)"))  # the file got shorter
    assert traced_line_matches(code, _frame(9))  # nothing recorded to compare with


# --------------------------------------------------------------------------------------------
# The loss call and the torch-semantics table


@pytest.mark.parametrize(
    ("name", "loss"),
    [
        ("cross_entropy", True), ("binary_cross_entropy_with_logits", True), ("CrossEntropyLoss", True),
        ("kl_div", True), ("nll_loss2d", True), ("nll_loss_nd", True), ("NLLLoss2d", True),
        ("FocalLoss", True), ("dice_loss", True),
        ("softmax", False), ("log_softmax", False), ("Linear", False), ("losses", False),
    ],
)
def test_is_loss_name(name: str, loss: bool) -> None:
    # target-dtype counted kl_div and nll_loss2d as losses and target-shape did not: both do now
    assert is_loss_name(name) is loss


def test_loss_name_by_torch_name_or_traced_module() -> None:
    module, _, positions = _parsed(
        "import torch.nn.functional as F\nfrom torch import nn\n"
        "a = F.kl_div(x, y)\nb = nn.BCELoss()(p, t)\nc = criterion(p, t)\nd = F.softmax(x)\ne = helper(p, t)\n"
    )
    imports = ImportTable(module)
    calls = {positions[n].line: n for n in positions if isinstance(n, cst.Call) and positions[n].col == 4}
    scope = Scope.from_json({"locals": {"criterion": {"kind": "module", "type": "CrossEntropyLoss"}}})
    assert [loss_name(calls[line], imports, scope) for line in (3, 4, 5, 6, 7)] == [
        "kl_div", "BCELoss", "CrossEntropyLoss", None, None,
    ]


def test_the_harness_reads_the_table_with_the_standard_library_alone() -> None:
    # what the harness runs (stdlib json by path): the same names repairbot reads
    read = subprocess.run(
        [sys.executable, "-I", "-c", "import json, sys; print(json.load(open(sys.argv[1]))['silent_broadcast_losses'])",
         str(TABLE_PATH)],
        capture_output=True, text=True, check=True,
    )
    table = json.loads(TABLE_PATH.read_text())
    assert read.stdout.strip() == str(table["silent_broadcast_losses"])
    assert set(table["silent_broadcast_losses"]) <= set(table["loss_functions"])


# --------------------------------------------------------------------------------------------
# Bindings


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ("x = f()\n", "f()"),
        ("x: int = 3\n", "3"),
        ("if c:\n    x = f()\n", "f()"),
        ("x = f()\nx = g()\n", None),  # twice: not one value
        ("x, y = f()\n", None),  # unpacking
        ("x = 1\nx += 1\n", None),
        ("for x in f():\n    pass\n", None),
        ("with f() as x:\n    pass\n", None),
        ("while c:\n    pass\nelse:\n    x = f()\n", "f()"),
        ("def g():\n    x = f()\n", None),  # a nested function's binding is not the module's
        ("self.x = f()\n", None),
    ],
)
def test_bound_once(body: str, value: str | None) -> None:
    module = cst.parse_module(body)
    found = bound_once(module, "x")
    assert (module.code_for_node(found) if found is not None else None) == value


def test_loss_call_at_a_line_or_a_traced_position() -> None:
    wrapper = MetadataWrapper(cst.parse_module(
        "import torch.nn.functional as F\nloss = F.cross_entropy(model(x), y) + helper(a, b)\n"
    ))
    imports = ImportTable(wrapper.module)
    # from a log (no columns): the one loss call among the line's calls
    found = loss_call_at(wrapper, imports, Scope(), Frame("t.py", 2, "f"))
    assert found is not None and wrapper.module.code_for_node(found.node).startswith("F.cross_entropy(")
    # a filter that leaves the only call taking two names
    def two_names(call: cst.Call) -> bool:
        return len(call.args) == 2 and all(isinstance(arg.value, cst.Name) for arg in call.args)

    found = loss_call_at(wrapper, imports, Scope(), Frame("t.py", 2, "f"), accepts=two_names)
    assert found is not None and wrapper.module.code_for_node(found.node) == "helper(a, b)"
    # with columns the position decides, loss or not; a moved call is not found
    found = loss_call_at(wrapper, imports, Scope(), Frame("t.py", 2, "f", None, True, 38, 2, 50))
    assert found is not None and wrapper.module.code_for_node(found.node) == "helper(a, b)"
    assert loss_call_at(wrapper, imports, Scope(), Frame("t.py", 2, "f", None, True, 39, 2, 50)) is None
    # two calls, no loss among them: cannot tell
    two = MetadataWrapper(cst.parse_module("z = f(a) + g(b)\n"))
    assert loss_call_at(two, ImportTable(two.module), Scope(), Frame("t.py", 1, "f")) is None


def test_import_bindings_one_reading_for_the_flat_table_and_the_scoped_view() -> None:
    code = "import torch.nn\nimport numpy as np\nfrom torch import nn as tnn, optim\nfrom . import local\nfrom os import *\n"
    module = cst.parse_module(code + "marker()\n")
    table = ImportTable(module)
    assert table.aliases == {"torch": "torch", "np": "numpy", "tnn": "torch.nn", "optim": "torch.optim"}
    call = module.body[-1]
    assert visible_imports([module, call]) == table.aliases
    assert table.qualify(cst.parse_expression("tnn.Linear")) == "torch.nn.Linear"


@pytest.mark.parametrize(("name", "inplace"), [("add_", True), ("zero_", True), ("add", False), ("__iadd__", False), ("_foo_", False)])
def test_is_inplace_method(name: str, inplace: bool) -> None:
    assert is_inplace_method(name) is inplace


def test_own_nodes_leave_nested_scopes_out() -> None:
    module = cst.parse_module(textwrap.dedent("""\
        def outer():
            a = 1
            def inner():
                b = 2
            class Box:
                c = 3
            key = lambda d: d
            e = f(4)
    """))
    outer = module.body[0]
    assigned = [
        target.target.value
        for node in own_nodes(outer)
        if isinstance(node, cst.Assign)
        for target in node.targets
        if isinstance(target.target, cst.Name)
    ]
    assert assigned == ["a", "key", "e"]
    assert not any(isinstance(node, cst.Lambda | cst.FunctionDef) and node is not outer for node in own_nodes(outer))
