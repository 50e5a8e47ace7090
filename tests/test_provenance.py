"""repairbot.provenance: where a value is written, on small real-looking sources (no torch)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from repairbot.evidence import Evidence, PassedArgument
from repairbot.provenance import (
    ARGPARSE,
    ATTRIBUTE,
    CALL_ARGUMENT,
    DEFAULT,
    DICT_ENTRY,
    LITERAL,
    NAME,
    Context,
    KeyPath,
    Lost,
    Made,
    Result,
    TracedFrame,
    Unreadable,
    ValueWalk,
    Written,
    argparse_dest,
    bound_at,
    integer_value,
    own_nodes,
    written_at,
)
from repairbot.sources import Sources
from repairbot.types import Failure, Frame


def _expression(sources: Sources, path: Path, line: int, code: str) -> cst.BaseExpression:
    """The first expression on ``line`` whose code is ``code``."""
    from repairbot.analysis import source

    src = source(sources, str(path))
    assert src is not None
    found = [n for n, s in src.positions.items() if isinstance(n, cst.BaseExpression) and s.line == line and src.code(n) == code]
    assert found, f"no `{code}` on line {line}"
    return found[0]


def where(tmp_path: Path, text: str, line: int, code: str, chain: tuple[PassedArgument, ...] = ()) -> Written | None:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(text).lstrip())
    sources = Sources()
    return written_at(sources, str(path), _expression(sources, path, line, code), chain)


def test_a_literal_is_its_own_place(tmp_path: Path) -> None:
    found = where(tmp_path, "import torch.nn as nn\nfc = nn.Linear(64 * 7 * 7, 10)\n", 2, "64 * 7 * 7")
    assert found is not None and (found.kind, found.code, found.span.line) == (LITERAL, "64 * 7 * 7", 2)


def test_a_name_bound_once_and_not_twice(tmp_path: Path) -> None:
    once = where(tmp_path, "n_hidden = 128\nsize = n_hidden\n", 2, "n_hidden")
    assert once is not None and (once.kind, once.code, once.span.line) == (NAME, "128", 1)
    twice = where(tmp_path, "n = 1\nn = 2\nsize = n\n", 3, "n")
    assert twice is None


def test_a_parameter_default_and_a_call_site_argument(tmp_path: Path) -> None:
    text = """
        class Head:
            def __init__(self, in_dim, d=64):
                self.a = d
                self.b = in_dim

        head = Head(in_dim=7)
    """
    default = where(tmp_path, text, 3, "d")
    assert default is not None and (default.kind, default.code) == (DEFAULT, "64")
    step = PassedArgument(param="in_dim", expr="7", value=7,
                          where=Frame(file=str(tmp_path / "model.py"), line=6, function="<module>", col=19, end_line=6, end_col=20))
    called = where(tmp_path, text, 4, "in_dim", (step,))
    assert called is not None and (called.kind, called.code, called.span.line) == (CALL_ARGUMENT, "7", 6)
    assert called.place == "model.py:6"
    assert where(tmp_path, text, 4, "in_dim") is None  # without the traced chain, no guess


def test_config_attributes_argparse_defaults_and_dict_entries(tmp_path: Path) -> None:
    text = """
        import argparse
        from dataclasses import dataclass

        @dataclass
        class Config:
            hidden_dim: int = 96

        GPT = {"emb_dim": 768, "vocab_size": 50257}
        parser = argparse.ArgumentParser()
        parser.add_argument("--n-embd", type=int, default=32)
        args = parser.parse_args()

        def build(cfg, args):
            return cfg.hidden_dim, GPT["emb_dim"], args.n_embd
    """
    field = where(tmp_path, text, 14, "cfg.hidden_dim")
    assert field is not None and (field.kind, field.code, field.span.line) == (ATTRIBUTE, "96", 6)
    entry = where(tmp_path, text, 14, 'GPT["emb_dim"]')
    assert entry is not None and (entry.kind, entry.code) == (DICT_ENTRY, "768")
    flag = where(tmp_path, text, 14, "args.n_embd")
    assert flag is not None and (flag.kind, flag.code) == (ARGPARSE, "32")


def test_self_attribute_followed_to_its_one_assignment(tmp_path: Path) -> None:
    text = """
        class M:
            def __init__(self):
                self.width = 48

            def size(self):
                return self.width
    """
    found = where(tmp_path, text, 6, "self.width")
    assert found is not None and (found.kind, found.code, found.span.line) == (ATTRIBUTE, "48", 3)


def test_computed_values_have_no_single_place(tmp_path: Path) -> None:
    assert where(tmp_path, "import os\nn = int(os.environ['N'])\nsize = n\n", 3, "n") is None
    assert integer_value(cst.parse_expression("16 * 5 * 5")) == 400
    assert integer_value(cst.parse_expression("2 ** 8 - 1")) == 255
    assert integer_value(cst.parse_expression("n * 2")) is None


def test_argparse_destination_is_argparse_own(tmp_path: Path) -> None:
    def dest(code: str) -> str | None:
        return argparse_dest(cst.ensure_type(cst.parse_expression(code), cst.Call))

    assert dest('p.add_argument("-g", "--gpu-id", type=int)') == "gpu_id"
    assert dest('p.add_argument("--lr", "--learning-rate")') == "lr"  # the first long option
    assert dest('p.add_argument("-lr")') == "lr"
    assert dest('p.add_argument("--device", dest="dev")') == "dev"
    text = """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--lr", "--learning-rate", type=float, default=0.1)
        args = parser.parse_args()
        step = args.lr
        other = args.learning_rate
    """
    assert (found := where(tmp_path, text, 5, "args.lr")) is not None and found.code == "0.1"
    assert where(tmp_path, text, 6, "args.learning_rate") is None  # argparse sets args.lr only


# -- the traced walk ----------------------------------------------------------------------------

_CREATION = "creation"


def _ends_at_from_numpy(
    walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result | None:
    """A test policy: the value is made by ``torch.from_numpy``; ``.to(...)`` keeps it."""
    if qualified == "torch.from_numpy":
        return Made(call, ctx.file, trail, _CREATION)
    if qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value == "to":
        return walk.resolve(call.func.value, ctx, path, trail)
    return None


def _project(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    paths = {}
    for name, text in files.items():
        paths[name] = tmp_path / name
        paths[name].write_text(textwrap.dedent(text).lstrip())
    return paths


def _walk(frames: tuple[Frame, ...], imported: tuple[str, ...] = ()) -> ValueWalk:
    failure = Failure("RuntimeError", "mat1 and mat2 must have the same dtype", frames)
    evidence = Evidence(outcome="failed", exit_code=1, failure=failure, imported_files=imported)
    return ValueWalk(failure, evidence, Sources(), _ends_at_from_numpy)


def _follow_name(walk: ValueWalk, index: int, name: str) -> Result:
    view = walk.view(index)
    assert isinstance(view, TracedFrame), view
    return walk.follow(cst.Name(name), view.ctx, (name,))


def test_walk_follows_a_batch_back_through_the_loader_to_the_dataset(tmp_path: Path) -> None:
    paths = _project(tmp_path, {
        "data.py": """
            import torch
            from torch.utils.data import Dataset

            class Windows(Dataset):
                def __init__(self, features, labels):
                    self.x = torch.from_numpy(features)
                    self.y = labels

                def __getitem__(self, i):
                    return self.x[i], self.y[i]
        """,
        "train.py": """
            import numpy as np
            from torch.utils.data import DataLoader
            from data import Windows

            loader = DataLoader(Windows(np.zeros((8, 3)), np.zeros(8)), batch_size=2)
            for step, (xb, yb) in enumerate(loader):
                out = model(xb.to("cpu"))
        """,
    })
    frame = Frame(str(paths["train.py"]), 7, "<module>", code='out = model(xb.to("cpu"))', user=True)
    walk = _walk((frame,), imported=(str(paths["data.py"]),))
    found = _follow_name(walk, 0, "xb")
    assert isinstance(found, Made), found
    assert (found.kind, found.file.code(found.call), found.file.line(found.call)) == (_CREATION, "torch.from_numpy(features)", 6)
    assert found.file.path == paths["data.py"]
    # the steps a reader takes: the loop, the loader, the Dataset's item, its attribute
    steps = [Path(step.split(" ", 1)[0]).name for step in found.trail[1:]]
    places = [s for i, s in enumerate(steps) if i == 0 or steps[i - 1] != s]
    assert places == ["train.py:6", "train.py:5", "data.py:10", "data.py:6"], found.trail
    assert "enumerate(loader)" in found.trail[2] and "return self.x[i], self.y[i]" in found.trail[-2]
    labels = _follow_name(walk, 0, "yb")
    # through the constructor's argument to a numpy call, returned by the Dataset's item
    assert isinstance(labels, Lost) and "`np.zeros(8)`" in labels.reason
    assert labels.trail[-1].endswith("`np.zeros(8)` passed as `labels`")
    assert labels.item is not None and labels.item[0].line(labels.item[1]) == 10


def test_walk_follows_a_parameter_to_the_traced_caller_and_a_return(tmp_path: Path) -> None:
    paths = _project(tmp_path, {
        "train.py": """
            import torch

            def load(array):
                t = torch.from_numpy(array)
                return t

            def step(model, batch):
                return model(batch)

            x = load(data)
            step(net, x)
        """,
    })
    caller = Frame(str(paths["train.py"]), 11, "<module>", code="step(net, x)", user=True, col=0, end_line=11, end_col=12)
    inner = Frame(str(paths["train.py"]), 8, "step", code="return model(batch)", user=True)
    walk = _walk((caller, inner))
    found = _follow_name(walk, 1, "batch")
    assert isinstance(found, Made) and found.file.code(found.call) == "torch.from_numpy(array)"
    assert any("passed as `batch`" in step for step in found.trail)
    # a value the walk cannot follow is Lost, with where it stopped
    lost = _follow_name(walk, 1, "model")
    assert isinstance(lost, Lost) and "`net` is not assigned" in lost.reason
    assert lost.trail[-1].endswith("`net` passed as `model`")


def test_walk_reports_an_unreadable_frame(tmp_path: Path) -> None:
    paths = _project(tmp_path, {"train.py": "x = f(1)\n"})
    stale = Frame(str(paths["train.py"]), 1, "<module>", code="x = g(1)", user=True)
    view = _walk((stale,)).view(0)
    assert isinstance(view, Unreadable) and "not what the traced run executed" in view.reason


def test_own_nodes_leave_nested_scopes_out() -> None:
    module = cst.parse_module("a = 1\ndef f():\n    b = 2\nclass C:\n    c = 3\nd = lambda: 4\n")
    names = [n.value for n in own_nodes(module) if isinstance(n, cst.Name)]
    assert names == ["a", "d"]


# -- the failing expression of a frame ------------------------------------------------------------


def _failing(text: str, **columns: int) -> str | None:
    from repairbot.analysis import failing_expression
    from repairbot.pattern import span_of

    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = {node: span_of(r) for node, r in wrapper.resolve(PositionProvider).items()}
    line = columns.pop("line", 1)
    node = failing_expression(positions, Frame("train.py", line, **columns))  # type: ignore[arg-type]
    return None if node is None else wrapper.module.code_for_node(node).strip()


def test_failing_expression_from_traced_columns() -> None:
    text = "loss = criterion(model(x), y)\n"
    assert _failing(text, col=17, end_line=1, end_col=25) == "model(x)"  # exact
    assert _failing(text, col=7, end_line=1, end_col=29) == "criterion(model(x), y)"  # outermost of one span
    assert _failing(text, col=18, end_line=1, end_col=24) == "model(x)"  # smallest containing
    assert _failing(text) == "loss = criterion(model(x), y)"  # no columns: the statement
    split = "net = Net(\n    3,\n).to(device)\n"
    # Python places a method call over several lines at its attribute
    assert _failing(split, line=3, col=1, end_line=3, end_col=12) == "Net(\n    3,\n).to(device)"
    assert _failing("a = 1; b = 2\n") == "a = 1; b = 2"
    assert _failing("if x:\n    pass\n") is None


def test_bound_at_sees_parameters_earlier_lines_closures_and_globals() -> None:
    from libcst.metadata import ScopeProvider

    from repairbot.pattern import span_of

    text = "device = 'cpu'\ndef outer(n):\n    late = 1\n    def inner():\n        return n, late, device, later\n    later = 2\n    return inner\n"
    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = {node: span_of(r) for node, r in wrapper.resolve(PositionProvider).items()}
    scopes = wrapper.resolve(ScopeProvider)
    ret = next(n for n in positions if isinstance(n, cst.Return) and positions[n].line == 5)
    scope = scopes[ret]
    assert scope is not None
    assert bound_at(scope, "n", 5, positions)  # a parameter of the function around
    assert bound_at(scope, "late", 5, positions)  # an earlier line of the function around (a closure)
    assert bound_at(scope, "device", 5, positions)  # a module global, seen from a function
    assert not bound_at(scope, "later", 5, positions)  # bound only after the line
    assert not bound_at(scope, "missing", 5, positions)
