"""Loop instrumentation: the user's files compiled so that any loop can be left from outside.

The user's files are compiled from an AST in which every ``for``/``while`` body starts with
``if __repairbot_leaving__ and __repairbot_leave__(ID): break`` (same line numbers, nothing
on disk changes; one builtins lookup per iteration while no leave is pending). The step
budget (probes/step_budget.py) decides which loops leave.
"""

import ast
from typing import Any, Dict, List, Tuple


class LoopRecord:
    __slots__ = ("body_line", "end_line", "file", "id", "kind", "line", "scope")

    def __init__(self, id: Any, file: Any, line: Any, end_line: Any, body_line: Any, kind: Any, scope: Any) -> None:
        self.id, self.file, self.line, self.end_line = id, file, line, end_line
        self.body_line, self.kind, self.scope = body_line, kind, scope

    def contains(self, line: Any) -> Any:
        return self.line <= line <= self.end_line

    def where(self) -> Any:
        return "%s:%d" % (self.file, self.line)


class LoopTable:
    """Every loop of the user's files that the harness compiled, and their scopes."""

    def __init__(self) -> None:
        self.records: List[LoopRecord] = []  # by loop id
        self.by_file: Dict[str, List[LoopRecord]] = {}  # file -> [LoopRecord] of its latest compilation
        self.scopes: Dict[str, List[Tuple[int, int, int]]] = {}  # file -> [(start, end, scope id)]

    def compile(self, source: Any, filename: Any) -> Any:
        """The code object of ``source`` with its loops instrumented (plain if it does not parse)."""
        try:
            tree = ast.parse(source, filename)
        except (SyntaxError, ValueError):
            tree = None
        if tree is None:  # raised again outside the handler: the traceback Python would print
            return compile(source, filename, "exec", dont_inherit=True)
        self.by_file[filename], self.scopes[filename] = [], []
        _LoopInstrumenter(self, filename).visit(tree)
        ast.fix_missing_locations(tree)
        return compile(tree, filename, "exec", dont_inherit=True)

    def scope_of(self, file: Any, line: Any) -> Any:
        best = None
        for start, end, scope in self.scopes.get(file, ()):
            if start <= line <= end and (best is None or start >= best[0]):
                best = (start, scope)
        return best[1] if best else 0

    def loops_at(self, file: Any, line: Any) -> Any:
        """The loops of the frame's own scope that hold ``line``, outermost first."""
        loops = self.by_file.get(file)
        if not loops:
            return []
        scope = self.scope_of(file, line)
        return [loop for loop in loops if loop.scope == scope and loop.contains(line)]

    def header_at(self, file: Any, line: Any) -> Any:
        """The loop whose header (``for ... in ...:``, ``while ...:``) is ``line``, if any."""
        for loop in self.by_file.get(file, ()):
            if loop.line <= line < max(loop.body_line, loop.line + 1):
                return loop
        return None


class _LoopInstrumenter(ast.NodeTransformer):
    def __init__(self, table: Any, filename: Any) -> None:
        self.table, self.filename = table, filename
        self.scope = 0

    def _scoped(self, node: Any) -> Any:
        outer = self.scope
        scopes = self.table.scopes[self.filename]
        self.scope = len(scopes) + 1
        scopes.append((node.lineno, getattr(node, "end_lineno", None) or node.lineno, self.scope))
        self.generic_visit(node)
        self.scope = outer
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _scoped

    def _loop(self, node: Any) -> Any:
        record = LoopRecord(
            len(self.table.records), self.filename, node.lineno,
            getattr(node, "end_lineno", None) or node.body[-1].lineno, node.body[0].lineno,
            "for" if isinstance(node, ast.For) else "while", self.scope,
        )
        self.table.records.append(record)
        self.table.by_file[self.filename].append(record)
        self.generic_visit(node)
        first = node.body[0]
        check = ast.If(
            test=ast.BoolOp(op=ast.And(), values=[
                ast.Name(id="__repairbot_leaving__", ctx=ast.Load()),
                ast.Call(func=ast.Name(id="__repairbot_leave__", ctx=ast.Load()),
                         args=[ast.Constant(value=record.id)], keywords=[]),
            ]),
            body=[ast.Break()], orelse=[],
        )
        for sub in ast.walk(check):
            ast.copy_location(sub, first)
        node.body.insert(0, check)
        return node

    visit_For = visit_While = _loop



def is_statement_frame(frame: Any) -> Any:
    name = frame.f_code.co_name
    return not (name.startswith("<") and name != "<module>")  # comprehensions, lambdas
