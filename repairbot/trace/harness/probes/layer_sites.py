"""Layer construction sites: where every sized layer (Linear, Conv, RNN, Embedding, norms)
was built, with the traced values of its size arguments and the constructor call sites
they came through."""

import ast
import builtins
import linecache
import sys
import types
from typing import Any, Dict, Optional, Set

from ..context import Run
from ..frames import OWNERSHIP, char_col, frame_record, positions

NAME = "layer-sites"

# Layer construction sites: the traced values of the size arguments ---------------------------
# One record per constructed layer of every kind, keyed by layer class and argument name:
# {"index", "type", "args": {name: value}, "exprs": {name: source text}, "site",
#  "values": [{"expr", "value"}], "scope": {expr: int}, "chain": [{"param", "expr", "value",
#  "file", "line", "col", "end_line", "end_col", "function"}]}.
LAYER_SIZE_ARGS = {
    "Linear": ("in_features", "out_features"), "Bilinear": ("in1_features", "in2_features", "out_features"),
    "Conv1d": ("in_channels", "out_channels"), "Conv2d": ("in_channels", "out_channels"),
    "Conv3d": ("in_channels", "out_channels"), "ConvTranspose1d": ("in_channels", "out_channels"),
    "ConvTranspose2d": ("in_channels", "out_channels"), "ConvTranspose3d": ("in_channels", "out_channels"),
    "LSTM": ("input_size", "hidden_size"), "GRU": ("input_size", "hidden_size"), "RNN": ("input_size", "hidden_size"),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "BatchNorm1d": ("num_features",), "BatchNorm2d": ("num_features",), "BatchNorm3d": ("num_features",),
    "LayerNorm": ("normalized_shape",),
}
_MISSING = object()
_PLAIN = (int, float, str, bool, type(None))


def _plain_value(value: Any) -> Any:
    """A JSON-able copy of a plain value (numbers, strings, short tuples of them), else _MISSING."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (tuple, list)) and len(value) <= 8 and all(isinstance(v, _PLAIN) for v in value):
        return list(value)
    return _MISSING


def _static_attr(obj: Any, name: Any) -> Any:
    """``obj.name`` without running code: an instance or module ``__dict__`` entry, or a plain
    class attribute; properties, descriptors and ``__getattr__`` are never called."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except Exception:
        namespace = None
    if isinstance(namespace, dict) and name in namespace:
        return namespace[name]
    if isinstance(obj, types.ModuleType):
        return _MISSING
    for klass in type(obj).__mro__:
        value = klass.__dict__.get(name, _MISSING)
        if value is not _MISSING:
            return value if isinstance(value, _PLAIN + (tuple,)) else _MISSING
    return _MISSING


def _static_eval(node: Any, frame: Any) -> Any:
    """The value of a name, attribute chain or constant subscript in ``frame``; no calls."""
    if isinstance(node, ast.Name):
        for namespace in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in namespace:
                return namespace[node.id]
        return _MISSING
    if isinstance(node, ast.Attribute):
        base = _static_eval(node.value, frame)
        return _MISSING if base is _MISSING else _static_attr(base, node.attr)
    if isinstance(node, ast.Subscript):
        base = _static_eval(node.value, frame)
        # 3.8 wraps it (ast.Index, gone from the 3.9+ stubs)
        index = node.slice.value if isinstance(node.slice, ast.Index) else node.slice  # type: ignore[attr-defined, unused-ignore]
        if base is _MISSING or not isinstance(index, ast.Constant) or type(base) not in (dict, list, tuple):
            return _MISSING
        try:
            return base[index.value]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    if isinstance(node, ast.Constant):
        return node.value
    return _MISSING


def _call_source(frame: Any) -> Any:
    """(text, line, col) of the call expression the frame is executing, or None."""
    pos = positions(frame.f_code, frame.f_lasti)
    if pos is None or pos[2] is None or pos[1] is None or pos[3] is None:
        return None
    filename = frame.f_code.co_filename
    lines = [linecache.getline(filename, n) for n in range(pos[0], pos[1] + 1)]
    if not all(lines):
        return None
    encoded = [line.encode("utf-8") for line in lines]
    if len(encoded) == 1:
        text = encoded[0][pos[2]:pos[3]]
    else:
        text = encoded[0][pos[2]:] + b"".join(encoded[1:-1]) + encoded[-1][:pos[3]]
    return text.decode("utf-8", "replace"), pos[0], pos[2]


def _parse_call(frame: Any) -> Any:
    found = _call_source(frame)
    if found is None:
        return None
    text, line, col = found
    try:
        node = ast.parse("(" + text + ")", mode="eval").body
    except SyntaxError:
        return None
    return (node, text, line, col) if isinstance(node, ast.Call) else None


def _segment(text: Any, node: Any) -> Any:
    return ast.get_source_segment("(" + text + ")", node)


def _bind_args(call: Any, names: Any) -> Any:
    """The argument expressions of ``call`` by parameter name (``names``: in order, no self)."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return {}
    bound = dict(zip(names, call.args))  # noqa: B905 - Python 3.8 has no strict=
    for keyword in call.keywords:
        if keyword.arg is not None:
            bound[keyword.arg] = keyword.value
    return bound


def _size_values(expr: Any, frame: Any, text: Any) -> Any:
    """Every name, attribute chain and constant subscript of ``expr`` with its traced value."""
    values = []
    seen = set()
    for node in ast.walk(expr):
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            continue
        source = _segment(text, node)
        if source is None or source in seen:
            continue
        value = _plain_value(_static_eval(node, frame))
        if value is _MISSING:
            continue
        seen.add(source)
        values.append({"expr": source, "value": value})
    return values


def _int_scope(frame: Any, roots: Any) -> Any:
    """The whole-number sizes in scope where a layer is built: locals, and the plain
    attributes of the objects its size arguments read (``self``, ``cfg``, ``args``)."""
    scope: Dict[str, int] = {}
    for name, value in list(frame.f_locals.items()):
        if type(value) is int and len(scope) < 60:
            scope[name] = value
    if frame.f_globals is not frame.f_locals:  # module-level sizes (``n_hidden = 128``)
        for name, value in list(frame.f_globals.items()):
            if type(value) is int and not name.startswith("__") and name not in scope and len(scope) < 90:
                scope[name] = value
    for root in roots:
        obj = frame.f_locals.get(root, frame.f_globals.get(root, _MISSING))
        if obj is _MISSING or isinstance(obj, (types.ModuleType, type)):
            continue
        if type(obj) is dict:
            items = [('%s["%s"]' % (root, k), v) for k, v in obj.items() if isinstance(k, str)]
        else:
            try:
                namespace = object.__getattribute__(obj, "__dict__")
            except Exception:
                continue
            items = [("%s.%s" % (root, k), v) for k, v in list(namespace.items()) if isinstance(k, str)]
        for key, value in items:
            if type(value) is int and len(scope) < 120:
                scope[key] = value
    return scope


def _pass_through_chain(frame: Any, exprs: Any, text: Any) -> Any:
    """For size arguments that read ``__init__`` parameters: the argument at the constructor's
    call site (its source position and value), recursively while it is a plain pass-through."""
    chain = []
    wanted: Set[str] = set()
    for expr in exprs:
        wanted.update(n.id for n in ast.walk(expr) if isinstance(n, ast.Name))
    depth = 0
    while wanted and depth < 4 and frame is not None and frame.f_code.co_name == "__init__":
        depth += 1
        code = frame.f_code
        params = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
        names = [n for n in params if n in wanted]  # in parameter order: a set's order varies per run
        if not names:
            break
        owner = frame.f_locals.get("self")
        caller = frame.f_back
        while caller is not None and owner is not None and caller.f_locals.get("self") is owner:
            caller = caller.f_back  # super().__init__ chains of the same object
        if caller is None or not OWNERSHIP.is_user_file(caller.f_code.co_filename):
            break
        parsed = _parse_call(caller)
        if parsed is None:
            break
        call, call_text, line, col = parsed
        bound = _bind_args(call, list(code.co_varnames[1:code.co_argcount]))
        for keyword in call.keywords:
            if keyword.arg in params:
                bound[keyword.arg] = keyword.value
        wanted = set()
        for name in names:
            arg = bound.get(name)
            if arg is None:
                continue
            value = _plain_value(frame.f_locals.get(name, _MISSING))
            # ast positions count from the "(" the parse added, on the call's first line
            first = arg.lineno == 1
            chain.append({
                "param": name,
                "expr": _segment(call_text, arg),
                "value": None if value is _MISSING else value,
                "file": caller.f_code.co_filename,
                "function": caller.f_code.co_name,
                "line": line + arg.lineno - 1,
                "col": char_col(caller.f_code.co_filename, line + arg.lineno - 1,
                                 (col + arg.col_offset - 1) if first else arg.col_offset),
                "end_line": line + arg.end_lineno - 1,
                "end_col": char_col(caller.f_code.co_filename, line + arg.end_lineno - 1,
                                     (col + arg.end_col_offset - 1) if arg.end_lineno == 1 else arg.end_col_offset),
                "values": _size_values(arg, caller, call_text),
            })
            if isinstance(arg, ast.Name):
                wanted.add(arg.id)
        frame = caller
    return chain


def _constructing_frame(skip_self: Any) -> Any:
    frame: Optional[types.FrameType] = sys._getframe(2)
    while frame is not None:
        if frame.f_locals.get("self") is skip_self:
            frame = frame.f_back
            continue
        if OWNERSHIP.is_user_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def layer_site_record(state: Any, module: Any, kind: Any, size_args: Any, signature_names: Any) -> Any:
    """The construction record of one layer (see LAYER_SIZE_ARGS); never raises."""
    record = {"index": len(state.layer_sites), "type": kind, "args": {}, "exprs": {},
              "site": None, "values": [], "scope": {}, "chain": []}
    for name in size_args:
        value = _plain_value(getattr(module, name, None))
        record["args"][name] = None if value is _MISSING else value
    try:
        frame = _constructing_frame(module)
        if frame is None:
            return record
        record["site"] = frame_record(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name,
                                      frame.f_code, frame.f_lasti)
        parsed = _parse_call(frame)
        if parsed is None:
            return record
        call, text, _line, _col = parsed
        bound = _bind_args(call, signature_names)
        exprs = [bound[name] for name in size_args if name in bound]
        record["exprs"] = {name: _segment(text, bound[name]) for name in size_args if name in bound}
        for expr in exprs:
            record["values"] += [v for v in _size_values(expr, frame, text) if v not in record["values"]]
        roots = {n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)}
        roots = {r for r in roots if not isinstance(frame.f_locals.get(r, frame.f_globals.get(r)), int)}
        record["scope"] = _int_scope(frame, sorted(roots | {"self"}))
        record["chain"] = _pass_through_chain(frame, exprs, text)
    except Exception:
        pass
    return record


def install(run: Run) -> None:
    """Records every layer of the kinds in LAYER_SIZE_ARGS where it is built (one record type)."""
    import inspect

    state = run.state
    nn = run.torch.nn
    for kind, size_args in LAYER_SIZE_ARGS.items():
        klass = getattr(nn, kind, None)
        if klass is None or "__init__" not in klass.__dict__:
            continue
        real = klass.__dict__["__init__"]
        try:
            positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            names = [p.name for p in inspect.signature(real).parameters.values() if p.kind in positional][1:]
        except (TypeError, ValueError):
            names = []
        klass_init = _layer_init(state, kind, size_args, names or list(size_args))
        run.torch_hooks().layer_init(klass, klass_init)


def _layer_init(state: Any, kind: Any, size_args: Any, names: Any) -> Any:
    def init(real: Any, self: Any, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        if self not in state.layer_site_index:  # a subclass's super().__init__ records once
            record = layer_site_record(state, self, kind, size_args, names)
            state.layer_site_index[self] = record["index"]
            state.layer_sites.append(record)

    return init
