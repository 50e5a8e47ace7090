"""Unit tests of the decisions the new shape and checkpoint patterns make from a failure's text
(no torch): what counts as a wrapper prefix, the Python-version form of the key rewrite, the
sizes broadcasting compares, and the reshapes that are certain."""

from __future__ import annotations

from pathlib import Path

import pytest

from patterns.broadcast_size.pattern import broadcast_dim
from patterns.conv_input_rank.pattern import restoring_reshape
from patterns.state_dict_keys.pattern import _stripped, by_module, common_prefix, key_lists
from patterns.state_dict_size.pattern import mismatches
from repairbot.analysis import source
from repairbot.sources import Sources


def test_key_lists_read_both_lists() -> None:
    message = ('Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.weight", '
               '"fc.bias". \n\tUnexpected key(s) in state_dict: "module.fc.weight", "module.fc.bias". ')
    assert key_lists(message) == (["fc.weight", "fc.bias"], ["module.fc.weight", "module.fc.bias"])


@pytest.mark.parametrize(
    ("missing", "unexpected", "prefix"),
    [
        (["a.weight", "b.bias"], ["module.a.weight", "module.b.bias"], "module."),
        (["a.weight"], ["_orig_mod.a.weight"], "_orig_mod."),
        (["a.weight"], ["_orig_mod.module.a.weight"], "_orig_mod.module."),
        # BatchNorm's num_batches_tracked is never reported missing
        (["bn.weight"], ["module.bn.weight", "module.bn.num_batches_tracked"], "module."),
        # one key left over after stripping: not a pure prefix difference
        (["a.weight"], ["module.a.weight", "module.head.weight"], None),
        # the prefix on the model's side (a wrapped model, a bare checkpoint): nothing to strip
        (["module.a.weight"], ["a.weight"], None),
        # renamed modules
        (["map.0.weight"], ["world.0.weight"], None),
        # a prefix that is not a wrapper's
        (["a.weight"], ["encoder.a.weight"], None),
    ],
)
def test_common_prefix(missing: list[str], unexpected: list[str], prefix: str | None) -> None:
    assert common_prefix(missing, unexpected) == prefix


def test_keys_are_grouped_by_module() -> None:
    assert by_module(["fc.weight", "fc.bias", "layer1.0.bn.running_mean"]) == "fc (weight, bias); layer1.0.bn (running_mean)"


def _load_arg(tmp_path: Path, code: str):  # type: ignore[no-untyped-def]
    import libcst as cst

    path = tmp_path / "train.py"
    path.write_text(code, encoding="utf-8")
    src = source(Sources(), str(path))
    assert src is not None
    call = src.call_on_line(2, "load_state_dict")
    assert call is not None and isinstance(call.args[0].value, cst.BaseExpression)
    return src, call.args[0].value


def test_the_rewrite_follows_the_interpreter_and_the_quotes(tmp_path: Path) -> None:
    src, value = _load_arg(tmp_path, "import torch\nmodel.load_state_dict(torch.load('m.pt'))\n")
    assert _stripped(src, value, "module.", (3, 11)) == "{k.removeprefix('module.'): v for k, v in torch.load('m.pt').items()}"
    assert _stripped(src, value, "module.", (3, 8)) == (
        "{(k[len('module.'):] if k.startswith('module.') else k): v for k, v in torch.load('m.pt').items()}"
    )
    compile(_stripped(src, value, "module.", (3, 8)), "x", "eval")


def test_state_dict_size_reads_every_form() -> None:
    found = mismatches(
        "size mismatch for fc.weight: copying a param with shape torch.Size([10, 512]) from checkpoint, the "
        "shape in current model is torch.Size([37, 512]).\n\tWhile copying the parameter named \"emb.weight\", "
        "whose dimensions in the model are torch.Size([58, 256]) and whose dimensions in the checkpoint are "
        "torch.Size([107, 256])."
    )
    assert [(m.param, m.checkpoint, m.model) for m in found] == [
        ("fc.weight", (10, 512), (37, 512)), ("emb.weight", (107, 256), (58, 256)),
    ]


@pytest.mark.parametrize(
    ("a", "b", "dim", "sizes"),
    [([2, 10], [2, 4], 1, (10, 4)), ([2, 3], [2], 1, (3, 2)), ([4, 1, 8], [8, 8], 1, (1, 8)), ([3], [3], 1, None)],
)
def test_broadcast_dim_aligns_from_the_right(a: list[int], b: list[int], dim: int, sizes: tuple[int, int] | None) -> None:
    assert broadcast_dim(a, b, dim) == sizes


@pytest.mark.parametrize(
    ("shape", "channels", "spatial", "reshape"),
    [
        ([100, 784], 1, 2, ".view(-1, 1, 28, 28)"),
        ([100, 3072], 3, 2, ".view(-1, 3, 32, 32)"),
        ([28, 28], 1, 2, ".view(1, 1, 28, 28)"),
        ([100, 28, 28], 1, 2, ".unsqueeze(1)"),
        ([2, 16, 3, 32, 32], 3, 2, ".flatten(0, 1)"),
        ([1, 1, 32, 324], 1, 1, None),  # the frames could be channels or length: no guess
        ([2, 3, 32, 32], 3, 2, None),  # nothing to restore
        ([100, 785], 3, 2, None),
    ],
)
def test_restoring_reshape_only_when_certain(shape: list[int], channels: int, spatial: int, reshape: str | None) -> None:
    assert restoring_reshape(shape, channels, spatial) == reshape
