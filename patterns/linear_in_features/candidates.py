"""Choosing among candidate sites: the edits that give the layer the features it received
(at the Linear call, where the size is written, at the one construction that passed it),
smallest and most local first, or the refusal that names the values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Source,
    source,
    walk,
)
from repairbot.edits import Rewrite
from repairbot.evidence import Evidence, LayerSite, LinearTrace, PassedArgument
from repairbot.provenance import (
    DEFAULT,
    LITERAL,
    integer_value,
    is_literal,
    parameter_names,
    self_attribute_value,
    written_at,
)
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Span

from .rewrites import ReplaceSize, SetInFeatures


@dataclass(frozen=True)
class _Candidate:
    """One edit that makes in_features evaluate to the needed size."""

    kind: str
    file: str
    span: Span
    old: str
    code: str
    applicability: Applicability
    rewrite: Rewrite
    trail: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """No edit is proven: why, and the values the report names instead."""

    reason: str
    diagnosis: str
    final: bool = True  # False: other edits of the expression's own names may still be proven


def distinct_constructions(evidence: Evidence | None, linear: LinearTrace) -> list[tuple[PassedArgument, ...]]:
    """The distinct constructions that built the Linears of this call site, by the traced
    arguments of their constructors' call sites (one per place and value: a loop that builds
    the same layer several times from one call counts once)."""
    found: list[tuple[PassedArgument, ...]] = []
    for lt in (linear, *same_site(evidence, linear)):
        layer = evidence.layer_site(lt) if evidence else None
        chain = layer.chain if layer is not None else ()
        key = [(s.param, s.where.file, s.where.line, s.where.col, repr(s.value)) for s in chain]
        if all([(s.param, s.where.file, s.where.line, s.where.col, repr(s.value)) for s in c] != key for c in found):
            found.append(chain)
    return found


def _construction_argument(
    sources: Sources, src: Source, path: Path, node: cst.BaseExpression, linear: LinearTrace,
    layer: LayerSite | None, known: dict[str, int], needed: int, constructions: list[tuple[PassedArgument, ...]],
) -> _Candidate | Refusal | None:
    """in_features written as an expression of one ``__init__`` parameter that the run traced to
    the constructor's call site (``nn.Linear(2 * input_size, h)`` <- ``Encoder(input_size=6)``):
    the argument where it is written, solved so that the expression gives ``needed``. The
    definition is reusable and right as far as the run shows; the construction is what the
    traced input contradicts. None when the expression reads no traced parameter; a refusal
    when it does but one argument of the only construction does not prove the edit."""
    if layer is None or node not in src.positions:
        return None
    functions = src.around(src.positions[node].line, cst.FunctionDef)
    function = functions[0] if functions and isinstance(functions[0], cst.FunctionDef) else None
    if function is None:
        return None
    passed = {s.param: s for s in layer.chain if s.where.file}
    attrs = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    params = [
        n for n in walk(node)
        if isinstance(n, cst.Name) and id(n) not in attrs and n.value in passed and n.value in parameter_names(function)
    ]
    if not params:
        return None
    code = src.code(node)
    names = sorted({n.value for n in params})
    if len(names) != 1:
        return Refusal(
            f"in_features `{code}` reads the constructor's parameters {', '.join(names)}: which argument is wrong is not proven",
            f"the layer receives {needed} features: make `{code}` evaluate to {needed} where the model is built",
        )
    param = names[0]
    step = passed[param]
    module = src.module

    def value(p: int) -> int | None:
        def leaf(n: cst.BaseExpression) -> int | None:
            if isinstance(n, cst.Name) and n.value == param:
                return p
            return known.get(candidate_key(module.code_for_node(n)))
        return integer_value(node, leaf)

    where = f"{report_path(Path(step.where.file))}:{step.where.line}"
    if type(step.value) is not int or value(step.value) != linear.in_features:
        return None
    if len(constructions) > 1:
        built = "; ".join(
            f"{s.param} = {s.value!r} at {report_path(Path(s.where.file))}:{s.where.line}"
            for chain in constructions for s in chain if s.param == param
        )
        return Refusal(
            f"the layer's in_features is `{code}`, and its class is built {len(constructions)} times with "
            f"different arguments ({built}): the failing one gets {linear.in_features} for an input of {needed}; "
            "whether this construction's argument or the definition's expression is wrong, one run does not prove",
            f"the layer built with {param} = {step.value!r} at {where} receives {needed} features, and `{code}` "
            f"gives {linear.in_features}: correct the argument there, or `{code}` for every construction",
        )
    solutions = [p for p in range(1, min(4 * needed + 4, 1 << 15)) if value(p) == needed]
    if len(solutions) != 1:
        return Refusal(
            f"in_features `{code}` is {linear.in_features} with {param} = {step.value!r} passed at {where}; "
            f"no single {param} makes it {needed}",
            f"the layer receives {needed} features, and `{code}` ({param} = {step.value!r} at {where}) gives "
            f"{linear.in_features}: the definition's expression or the data is wrong",
            final=False,
        )
    name_node = params[0]
    written = written_at(sources, str(path), name_node, layer.chain)
    if written is None or written.kind == DEFAULT or integer_value(written.node) != step.value:
        return Refusal(
            f"{param} = {step.value!r} passed at {where} is not written as one number the edit could change",
            f"the layer receives {needed} features: pass {param}={solutions[0]} at {where}",
            final=False,
        )
    rewritten = _rewrite_size(written.node, solutions[0])
    if rewritten is None:
        return None
    new = cst.Module(body=[]).code_for_node(rewritten)
    return _Candidate(
        written.kind, written.file, written.span, written.code, new, Applicability.SAFE, ReplaceSize(new),
        trail=written.trail,
    )


def candidate_key(code: str) -> str:
    return "".join(code.split()).replace("'", '"')


def candidate_edits(
    module: cst.Module, call: cst.Call, node: cst.BaseExpression, linear: LinearTrace,
    layer: LayerSite | None, needed: int, path: Path, sources: Sources,
    constructions: list[tuple[PassedArgument, ...]],
) -> list[_Candidate] | str | Refusal:
    """The edits that give the layer ``needed`` features, smallest and most idiomatic first:
    the number where it is written (a literal in the call, a call-site argument, a config
    default), a name or attribute in scope with the needed traced value, a factor dropped or
    added, a product of sizes in scope, and last a literal (unsafe). A reason (str) when the
    source already gives ``needed`` (the evidence is older than the code)."""
    src = source(sources, str(path))
    span = src.positions.get(node) if src is not None else None
    if src is None or span is None:
        return []
    code = src.code(node)
    known: dict[str, int] = {}
    if layer is not None:
        known.update({candidate_key(k): v for k, v in layer.scope.items()})
        known.update({candidate_key(k): v for k, v in layer.values.items() if type(v) is int})

    def value_of(expr: cst.BaseExpression) -> int | None:
        literal = integer_value(expr)
        return literal if literal is not None else known.get(candidate_key(module.code_for_node(expr)))

    def replace_here(kind: str, new: str, applicability: Applicability = Applicability.SAFE,
                     notes: tuple[str, ...] = ()) -> _Candidate:
        return _Candidate(kind, str(path), span, code, new, applicability,
                          ReplaceSize(new), notes=notes)

    if is_literal(node):
        if integer_value(node) == needed:
            return f"in_features is already written as `{code}` = {needed}"
        rewritten = _rewrite_size(node, needed)
        if rewritten is None:
            return []
        located = src.positions[call]
        return [_Candidate("in_features literal", str(path), located, code, module.code_for_node(rewritten),
                           Applicability.SAFE, SetInFeatures(module.code_for_node(rewritten)))]
    if value_of(node) == needed:
        return f"`{code}` already evaluates to {needed} in the traced run"

    found: list[_Candidate] = []
    late: list[_Candidate] = []
    chain = layer.chain if layer is not None else ()
    # A size that a constructor's parameter gives is changed where the class is built, never
    # in its (reusable) definition, and only when the run saw that one construction.
    construction = _construction_argument(sources, src, path, node, linear, layer, known, needed, constructions)
    refusal: Refusal | None = None
    if isinstance(construction, Refusal):
        if construction.final:
            return construction
        refusal, construction = construction, None
    # the argument where the class is built resizes every layer the parameter sizes when the
    # parameter feeds others too: then it comes after the edits local to this layer, but before
    # a factor that no name gives (a whole part built with the wrong size is fixed there)
    shared_construction: list[_Candidate] = []
    if construction is not None and _reads_elsewhere(src, node):
        names = ", ".join(sorted({n.value for n in walk(node) if isinstance(n, cst.Name)}))
        shared_construction.append(replace(construction, applicability=Applicability.UNSAFE, notes=(
            f"`{names}` also sizes other layers of the class: the argument resizes them too",)))
    elif construction is not None:
        found.append(construction)
    written = written_at(sources, str(path), node, chain) if construction is None and refusal is None else None
    if written is not None and written.kind != LITERAL:
        number = integer_value(written.node)
        if number == needed:
            return f"`{code}` is written as {written.code} at {written.place}, already {needed}"
        rewritten = _rewrite_size(written.node, needed) if number == linear.in_features else None
        if rewritten is not None:
            new = cst.Module(body=[]).code_for_node(rewritten)
            # the number is shared when the name feeds other code of its function too (other
            # layers' sizes): then editing where it is written changes them as well, so it is
            # tried only after the edits local to this layer
            shared = _reads_elsewhere(src, node)
            (late if shared else found).append(_Candidate(
                written.kind, written.file, written.span, written.code, new, Applicability.SAFE,
                ReplaceSize(new), trail=written.trail,
            ))

    # a name or attribute already in scope whose traced value is the needed size
    roots = {n.value for n in walk(node) if isinstance(n, cst.Name)}
    same = [k for k, v in (layer.scope.items() if layer else ()) if v == needed and candidate_key(k) != candidate_key(code)]
    same.sort(key=lambda k: (k.split(".")[0].split("[")[0] not in roots, "." in k or "[" in k, k))
    for name in same[:3]:
        found.append(replace_here(
            "factor dropped" if candidate_key(name) in candidate_key(code) else "name in scope", name, Applicability.SAFE if len(same) == 1 else Applicability.UNSAFE,
            () if len(same) == 1 else (f"{', '.join(same)} all have the traced value {needed}; "
                                       f"`{name}` was the first that the rerun verified",),
        ))

    # a factor dropped or added
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply | cst.FloorDivide | cst.Divide):
        for operand in (node.left, node.right):
            if value_of(operand) == needed and not is_literal(operand):
                found.append(replace_here("factor dropped", module.code_for_node(operand)))
    wrapped = f"({code})" if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.Multiply) else code
    # A factor is added first when the file already writes that product (the sibling layer's
    # `4 * cfg["emb_dim"]`); a factor the code never writes comes after the sizes in scope.
    factors: list[str] = []
    if linear.in_features > 0 and needed % linear.in_features == 0 and 2 <= needed // linear.in_features <= 16:
        factors.append(f"{needed // linear.in_features} * {wrapped}")
    if needed > 0 and linear.in_features % needed == 0 and 2 <= linear.in_features // needed <= 16:
        factors.append(f"{wrapped} // {linear.in_features // needed}")
    written_code = candidate_key(module.code)
    found += [replace_here("factor added", text) for text in factors if candidate_key(text) in written_code]
    unwritten = [text for text in factors if candidate_key(text) not in written_code]

    # a product of sizes in scope, those the expression already reads first
    scope = [(k, v) for k, v in (layer.scope.items() if layer else ()) if v > 1]
    products: list[str] = []
    if linear.in_features > 0 and needed % linear.in_features == 0:
        products += [f"{k} * {wrapped}" for k, v in scope if v * linear.in_features == needed]
    for i, (a, va) in enumerate(scope):
        for b, vb in scope[i + 1:]:
            if va * vb == needed:
                products.append(f"{a} * {b}")
    products.sort(key=lambda text: not any(r in text for r in roots))
    seen: set[frozenset[str]] = set()
    distinct: list[str] = []
    classes = src.around(span.line, cst.ClassDef)
    cls = classes[0] if classes and isinstance(classes[0], cst.ClassDef) else None

    def same_value(part: str) -> str:
        # `self.block_size` set once from `config.block_size` is that size, not another one
        attr = part.removeprefix("self.")
        value = self_attribute_value(cls, attr) if cls is not None and attr != part and attr.isidentifier() else None
        if isinstance(value, cst.Name | cst.Attribute):
            return module.code_for_node(value).removeprefix("self.")
        return attr

    for text in products:
        factors_of = frozenset(same_value(part.strip()) for part in text.split(" * "))
        if factors_of not in seen:
            seen.add(factors_of)
            distinct.append(text)
    ambiguous = (f"{len(distinct)} products of sizes in scope give {needed}: {', '.join(distinct[:4])}",)
    found += [
        replace_here("product of sizes in scope", text, *((Applicability.SAFE, ()) if len(distinct) == 1
                                                          else (Applicability.UNSAFE, ambiguous)))
        for text in distinct[:3]
    ]
    guessed = [replace_here("factor added", text, Applicability.UNSAFE,
                            (f"the factor in `{text}` is written nowhere else in the file",)) for text in unwritten]

    config = _configuration_read(node)
    if config is not None and not found and not shared_construction and (not late or _config_read_elsewhere(src.module, config)):
        # A size read from a configuration object is written only in the configuration's
        # names: a number (or a factor that no name gives) would no longer follow its flags,
        # and changing the configuration's value would resize every other layer it sizes.
        origin = written_at(sources, str(path), config, chain)
        values_text = ", ".join(f"{k} = {v}" for k, v in known.items() if k in candidate_key(code))
        return Refusal(
            f"in_features is `{code}` ({values_text or linear.in_features}), read from a configuration object, and "
            f"no size of the configuration or in scope gives the traced {needed}",
            f"the layer receives {needed} features"
            + (f" ({needed // linear.in_features} x `{code}`)" if linear.in_features and needed % linear.in_features == 0 else "")
            + f": write in_features as an expression of the configuration that evaluates to {needed}"
            + (f" (`{src.code(config)}` is written at {origin.place})" if origin else ""),
        )
    found += shared_construction + (guessed if refusal is None else []) + late
    if not found and refusal is not None:
        return refusal
    if construction is None and config is None and refusal is None:
        found.append(replace_here(
            "literal", str(needed), Applicability.UNSAFE,
            (f"in_features is now the number {needed}: it no longer follows `{code}` (the configuration)",),
        ))
    unique: list[_Candidate] = []
    for candidate in found:
        if all((c.file, c.span, c.code) != (candidate.file, candidate.span, candidate.code) for c in unique):
            unique.append(candidate)
    return unique


def _configuration_read(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The first attribute of a configuration object that ``node`` reads (``config.n_embd``,
    ``args.hidden``, ``cfg["emb_dim"]``): not of ``self``, not of an imported module."""
    for n in walk(node):
        if isinstance(n, cst.Attribute | cst.Subscript):
            root: cst.BaseExpression = n
            while isinstance(root, cst.Attribute | cst.Subscript):
                root = root.value
            if isinstance(root, cst.Name) and root.value not in ("self", "math", "np", "torch", "nn"):
                return n
    return None


def _config_read_elsewhere(module: cst.Module, read: cst.BaseExpression) -> bool:
    """Whether the file reads the same configuration entry (``config.n_embd``) at another place."""
    key = candidate_key(module.code_for_node(read))
    return sum(
        isinstance(n, cst.Attribute | cst.Subscript) and candidate_key(module.code_for_node(n)) == key for n in walk(module)
    ) > 1


def _reads_elsewhere(src: Source, node: cst.BaseExpression) -> bool:
    """Whether the names of ``node`` are read elsewhere in its function (or module) too."""
    names = {n.value for n in walk(node) if isinstance(n, cst.Name)}
    line = src.positions[node].line
    functions = src.around(line, cst.FunctionDef)
    scope: cst.CSTNode = functions[0] if functions else src.module
    own = {id(n) for n in walk(node)}
    return any(
        isinstance(n, cst.Name) and n.value in names and id(n) not in own and not _is_binding(scope, n)
        for n in walk(scope)
    )


def _is_binding(scope: cst.CSTNode, name: cst.Name) -> bool:
    """A parameter's own name, or an assignment target (not a read)."""
    for n in walk(scope):
        if isinstance(n, cst.Param) and n.name is name:
            return True
        if isinstance(n, cst.AssignTarget) and n.target is name:
            return True
        if isinstance(n, cst.Attribute) and n.attr is name:
            return True
        if isinstance(n, cst.Arg) and n.keyword is name:
            return True
    return False


def same_site(evidence: Evidence | None, linear: LinearTrace) -> list[LinearTrace]:
    if evidence is None or linear.site is None:
        return []
    key = (linear.site.file, linear.site.line, linear.site.col)
    return [
        lt for lt in evidence.linears
        if lt is not linear and lt.site is not None and (lt.site.file, lt.site.line, lt.site.col) == key
    ]


def _factors(node: cst.BaseExpression) -> list[cst.Integer] | None:
    """The integer leaves of a product like ``64 * 7 * 7``; None if it is anything else."""
    if isinstance(node, cst.Integer):
        return [node]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        left, right = _factors(node.left), _factors(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _rewrite_size(node: cst.BaseExpression, needed: int) -> cst.BaseExpression | None:
    """The expression rewritten to evaluate to ``needed``, in its own shape where possible.

    A product of numbers keeps its factors: a repeated pair (a spatial size, as in ``7 * 7``)
    changes first, since a miscounted feature map is the usual mistake, then a single factor;
    failing both, and for a plain number, the number itself.
    """
    factors = _factors(node)
    if factors is None:
        return None
    if len(factors) == 1:
        return factors[0].with_changes(value=str(needed))
    values = [int(f.evaluated_value) for f in factors]
    replacements: dict[int, int] = {}
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            if values[i] != values[j]:
                continue
            rest = math.prod(v for k, v in enumerate(values) if k not in (i, j))
            side = math.isqrt(needed // rest) if rest and needed % rest == 0 else 0
            if side > 0 and side * side * rest == needed:
                replacements = {i: side, j: side}
                break
        if replacements:
            break
    if not replacements:
        for i, value in enumerate(values):
            rest = math.prod(values) // value if value else 0
            if rest and needed % rest == 0:
                replacements = {i: needed // rest}
                break
    if not replacements:
        return cst.Integer(str(needed))
    swap = {id(factors[i]): str(v) for i, v in replacements.items()}

    class SwapFactors(cst.CSTTransformer):
        def leave_Integer(self, original_node: cst.Integer, updated_node: cst.Integer) -> cst.Integer:
            return updated_node.with_changes(value=swap[id(original_node)]) if id(original_node) in swap else updated_node

    return node.visit(SwapFactors())  # type: ignore[return-value]
