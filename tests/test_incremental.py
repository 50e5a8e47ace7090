"""The server's incremental lint (``repairbot.lint.incremental``): after any edit its result is
``lint_bytes``'s on the new text, exactly; and each rule declared ``Scope.STATEMENT`` reports
on a statement what it reports there in the whole module."""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import libcst as cst
import pytest

from repairbot.cst_walk import imports
from repairbot.frameworks import lightning_classes
from repairbot.lint.engine import PARSE_ERROR, FileResult, import_table, lint_bytes, run_rules
from repairbot.lint.incremental import IncrementalLinter
from repairbot.lint.rule import FileContext, LintRule, Report, Scope, majority_quote, quote_counts
from repairbot.registry import all_rules
from tests.test_lint_rules import ROOT, real_files


def _bench_module() -> ModuleType:
    """bench/server_latency.py (a script, not a package), for the file it generates."""
    spec = importlib.util.spec_from_file_location("server_latency", ROOT / "bench" / "server_latency.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generated_module = _bench_module().generated_module

RULES = all_rules()
STATEMENT_RULES = [rule for rule in RULES if rule.SCOPE is Scope.STATEMENT]
PATH = Path("train.py")


# code where what is found in one statement depends on another: an import renamed with its
# uses, a GPU check before a device written in full, a helper defined above its caller
ACROSS_STATEMENTS = (
    "from torch import ger\n\nz = ger(a, b)\n",
    "import torch\n\nassert torch.cuda.is_available()\nmodel = torch.nn.Linear(2, 2).cuda()\n",
    "import torch\n\nif not torch.cuda.is_available():\n    raise SystemExit\nx = torch.ones(2, device='cuda')\n",
    "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\nnet = Net()\ny = net.forward(x)\n",
)


def _sources() -> list[tuple[Path, bytes]]:
    """The tests' real files, every rule's examples (they use what each rule reads), and code
    whose findings cross statements."""
    examples = [
        (Path(f"{rule.ID}-example-{index}.py"), example.source.encode("utf-8"))
        for rule in RULES for index, example in enumerate([*rule.VALID, *rule.INVALID])
    ]
    across = [(Path(f"across-{index}.py"), text.encode("utf-8")) for index, text in enumerate(ACROSS_STATEMENTS)]
    return [*((path, path.read_bytes()) for path in real_files()), *examples, *across]


def _summary(report: Report) -> tuple[object, ...]:
    printer = cst.Module(body=[])

    def code(node: object) -> str | None:
        return printer.code_for_node(node) if isinstance(node, cst.CSTNode) else None

    return (
        report.rule, id(report.node), report.message, code(report.replacement), id(report.target),
        report.applicability, report.severity, tuple((id(node), code(new)) for node, new in report.also),
    )


def test_statement_rules_are_declared_where_they_may_be() -> None:
    assert STATEMENT_RULES, "no rule is declared Scope.STATEMENT: the server re-runs every rule on every edit"
    for rule in STATEMENT_RULES:
        assert not hasattr(rule, "leave_Module"), f"{rule.ID}: a Scope.STATEMENT rule decides nothing at the module's end"


@pytest.mark.slow  # the whole suite's: many full lints each (the quick subset keeps the targeted tests)
@pytest.mark.parametrize("rule", STATEMENT_RULES, ids=lambda rule: rule.ID)
def test_statement_rules_report_on_a_statement_what_they_report_in_the_whole_module(rule: type[LintRule]) -> None:
    """Each top-level statement linted in a module of it and the statements that hold imports
    alone (the file's import table, quote and LightningModules kept): the rule's reports there
    are those of the whole module. A rule that reads other statements (a guard before it, the
    uses of a name elsewhere) reports differently on some real file."""
    checked = 0
    for path, data in _sources():
        if not rule.applies(data, None):
            continue
        try:
            module = cst.parse_module(data)
        except Exception:
            continue
        whole: dict[cst.CSTNode, list[tuple[object, ...]]] = {}
        for report in run_rules(module, [rule], path, None):
            assert report.statements, f"{rule.ID} reported outside a statement in {path}"
            whole.setdefault(report.statements[0], []).append(_summary(report))
        table = import_table(module)
        quote = majority_quote(*quote_counts(module))
        lightning = lightning_classes(module, table)
        holders = {statement for statement in module.body if imports(statement)}
        for statement in module.body:
            alone = module.with_changes(body=[s for s in module.body if s is statement or s in holders])
            context = FileContext(path, alone, table, None, _quote=quote, _lightning=lightning)
            found = [_summary(r) for r in run_rules(alone, [rule], path, None, context, [statement])]
            assert found == whole.get(statement, []), f"{rule.ID} in {path}, line of {alone.code_for_node(statement)[:80]!r}"
        checked += 1
    assert checked, f"{rule.ID}: no real file to check it on"


# --------------------------------------------------------------------------------------------
# Random edits: the incremental result is lint_bytes's after each
# --------------------------------------------------------------------------------------------

Edit = Callable[[random.Random, list[str]], None]


def _line(rng: random.Random, lines: list[str]) -> int:
    return rng.randrange(len(lines)) if lines else 0


def _insert_copy(rng: random.Random, lines: list[str]) -> None:
    lines.insert(_line(rng, lines), rng.choice(lines) if lines else "x = 1\n")


def _delete(rng: random.Random, lines: list[str]) -> None:
    if lines:
        del lines[_line(rng, lines)]


def _replace(rng: random.Random, lines: list[str]) -> None:
    if lines:
        lines[_line(rng, lines)] = rng.choice(lines)


def _characters(rng: random.Random, lines: list[str]) -> None:
    if not lines:
        return
    index = _line(rng, lines)
    line = lines[index]
    at = rng.randrange(len(line) + 1)
    if rng.random() < 0.5 and at < len(line) and line[at] not in "\r\n":
        lines[index] = line[:at] + line[at + 1 :]
    else:
        lines[index] = line[:at] + rng.choice(["a", "1", " ", "(", ")", ":", ".", ",", '"', "'", "0.5", "torch."]) + line[at:]


def _indentation(rng: random.Random, lines: list[str]) -> None:
    if not lines:
        return
    index = _line(rng, lines)
    line = lines[index]
    if line.startswith(" ") and rng.random() < 0.5:
        lines[index] = line[rng.choice([1, 4]) :] if line.startswith("    ") else line[1:]
    else:
        lines[index] = rng.choice(["    ", " ", "\t"]) + line


def _imports(rng: random.Random, lines: list[str]) -> None:
    found = [i for i, line in enumerate(lines) if line.lstrip().startswith(("import ", "from "))]
    if found and rng.random() < 0.5:
        del lines[rng.choice(found)]
    else:
        lines.insert(_line(rng, lines), rng.choice([
            "import torch\n", "import torch as th\n", "from torch import nn\n", "import lightning as L\n",
            "from torch.nn import functional as F\n", "import numpy as np\n", "    import torch\n",
        ]))


def _noqa(rng: random.Random, lines: list[str]) -> None:
    if not lines:
        return
    index = _line(rng, lines)
    line = lines[index]
    if "# repairbot: ignore" in line:
        lines[index] = line.split("  # repairbot: ignore")[0].rstrip("\r\n") + "\n"
        return
    rule = rng.choice(RULES).ID
    comment = rng.choice(["  # repairbot: ignore", f"  # repairbot: ignore[{rule}]", "  # repairbot: ignore[other]"])
    lines[index] = line.rstrip("\r\n") + comment + ("\n" if line.endswith("\n") else "")


def _blank_lines(rng: random.Random, lines: list[str]) -> None:
    blanks = [i for i, line in enumerate(lines) if not line.strip()]
    if blanks and rng.random() < 0.5:
        del lines[rng.choice(blanks)]
    else:
        lines.insert(_line(rng, lines), rng.choice(["\n", "\n\n", "    \n", "# a comment\n", "    # indented\n", "\t\n"]))


def _decorators(rng: random.Random, lines: list[str]) -> None:
    decorated = [i for i, line in enumerate(lines) if line.lstrip().startswith("@")]
    if decorated and rng.random() < 0.4:
        del lines[rng.choice(decorated)]
        return
    defs = [i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "class "))]
    if defs:
        index = rng.choice(defs)
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
        lines.insert(index, indent + rng.choice(["@torch.no_grad()\n", "@staticmethod\n", "@property\n"]))


def _line_ending(rng: random.Random, lines: list[str]) -> None:
    if not lines:
        return
    index = _line(rng, lines)
    line = lines[index]
    if line.endswith("\r\n"):
        lines[index] = line[:-2] + "\n"
    elif line.endswith("\n"):
        lines[index] = line[:-1] + rng.choice(["\r\n", "\r"])


def _end_of_file(rng: random.Random, lines: list[str]) -> None:
    if lines and lines[-1].endswith("\n") and rng.random() < 0.5:
        lines[-1] = lines[-1].rstrip("\r\n")
    else:
        lines.append(rng.choice(["\n", "x = torch.exp(y) - 1\n", "# the end\n", "def tail():\n    return 1\n"]))


EDITS: list[Edit] = [
    _insert_copy, _delete, _replace, _characters, _characters, _indentation, _imports, _noqa, _blank_lines,
    _decorators, _line_ending, _end_of_file,
]


def _fuzz_files() -> list[Path]:
    """Six real training scripts of the fixtures and the cases, of a few hundred lines (every
    edit lints them twice, with each fix printed as a text edit)."""
    own = sorted(
        (path for path in real_files() if "site-packages" not in str(path) and 3000 < path.stat().st_size < 9000),
        key=lambda path: path.stat().st_size,
    )
    return own[:: max(1, len(own) // 6)][:6]


def _check(linter: IncrementalLinter, data: bytes) -> FileResult:
    got = linter.lint(data, edits=True)
    expected = lint_bytes(data, PATH, PATH.name, RULES, edits=True)
    assert got == expected
    return got


def _edited(text: str, rounds: int, seed: int) -> tuple[int, int]:
    """``rounds`` random edits of ``text`` (a syntax error is left for a few edits, then
    undone), the incremental result checked after each; how many edits kept statements."""
    rng = random.Random(seed)
    linter = IncrementalLinter(PATH, PATH.name, RULES, None)
    _check(linter, text.encode("utf-8"))
    lines = text.splitlines(keepends=True)
    kept = checked = 0
    good = list(lines)
    for _ in range(rounds):
        before = linter.last.module.body if linter.last is not None else ()
        rng.choice(EDITS)(rng, lines)
        data = "".join(lines).encode("utf-8")
        result = _check(linter, data)
        checked += 1
        broken = any(finding.rule == PARSE_ERROR for finding in result.findings)
        if broken:
            if rng.random() < 0.5:
                lines = list(good)  # the broken edit undone
                _check(linter, "".join(lines).encode("utf-8"))
            continue
        good = list(lines)
        last = linter.last  # not this text's where no rule could fire (nothing was parsed)
        if last is not None and last.text == data.decode() and any(a is b for a in before for b in last.module.body):
            kept += 1
            assert last.module.deep_equals(cst.parse_module(data)), "a spliced module is not the parsed one"
    return kept, checked


@pytest.mark.slow  # the whole suite's: many full lints each (the quick subset keeps the targeted tests)
@pytest.mark.parametrize("index", range(6))
def test_random_edits_of_real_files_lint_as_the_whole_file_does(index: int) -> None:
    path = _fuzz_files()[index]
    kept, checked = _edited(path.read_text(encoding="utf-8"), 30, seed=index)
    assert kept, f"no edit of {path} ({checked}) was linted incrementally"


@pytest.mark.slow  # the whole suite's: many full lints each (the quick subset keeps the targeted tests)
@pytest.mark.parametrize("seed", range(2))
def test_random_edits_of_the_benchmark_file_lint_as_the_whole_file_does(seed: int) -> None:
    kept, checked = _edited(generated_module(150), 25, seed=100 + seed)
    assert kept, f"none of {checked} edits was linted incrementally"


def test_an_edit_inside_a_function_reparses_and_relints_that_statement_alone() -> None:
    text = generated_module(300)
    linter = IncrementalLinter(PATH, PATH.name, RULES, None)
    linter.lint(text.encode("utf-8"))
    assert linter.last is not None
    before = list(linter.last.module.body)
    edited = text.replace("kernel_size=3", "kernel_size=5", 1)
    assert linter.lint(edited.encode("utf-8")) == lint_bytes(edited.encode("utf-8"), PATH, PATH.name, RULES)
    after = list(linter.last.module.body)
    assert len(after) == len(before)
    changed = [index for index, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b]
    assert len(changed) == 1 and "kernel_size=5" in linter.last.module.code_for_node(after[changed[0]])


@pytest.mark.parametrize(("text", "edited"), [
    # the first indented block sets the file's indentation: re-indented, every block is read again
    ("import torch\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n",
     "import torch\n\n\ndef f():\n  return 1\n\n\ndef g():\n    return 2\n"),
    # an indented comment after a block belongs to the block once the statement above is one
    ("import torch\n\nx = 1\n    # note\ny = torch.exp(x) - 1\n",
     "import torch\n\nif x:\n    x = 1\n    # note\ny = torch.exp(x) - 1\n"),
    # an encoding line and the module header are never spliced
    ("import torch\n# -*- coding: utf-8 -*-\nx = torch.exp(y) - 1\n", "import torch\n# -*- coding: latin-1 -*-\nx = torch.exp(y) - 1\n"),
    # a broken statement, then fixed
    ("import torch\n\n\ndef f(x):\n    return torch.exp(x) - 1\n", "import torch\n\n\ndef f(x:\n    return torch.exp(x) - 1\n"),
    # an import moved below the code that used it
    ("import torch\n\nx = torch.exp(y) - 1\n", "x = torch.exp(y) - 1\nimport torch\n\n"),
])
def test_edits_where_splicing_is_doubtful_lint_as_the_whole_file_does(text: str, edited: str) -> None:
    linter = IncrementalLinter(PATH, PATH.name, RULES, None)
    _check(linter, text.encode("utf-8"))
    _check(linter, edited.encode("utf-8"))
    _check(linter, text.encode("utf-8"))
