"""repairbot.provenance: where a value is written, on small real-looking sources (no torch)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from repairbot.evidence import PassedArgument
from repairbot.provenance import (
    ARGPARSE,
    ATTRIBUTE,
    CALL_ARGUMENT,
    DEFAULT,
    DICT_ENTRY,
    LITERAL,
    NAME,
    Written,
    integer_value,
    written_at,
)
from repairbot.sources import Sources
from repairbot.types import Frame


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
