"""The classifier against real tracebacks users posted (tests/data/tracebacks, copied from the
project's shared corpus): every specimen must classify to its label, or to no pattern for
`other`, with the user frame its header names. Prints the confusion matrix."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from repairbot import registry
from repairbot.classify import candidates
from repairbot.tracebacks import parse_log

CORPUS = Path(__file__).parent / "data" / "tracebacks"
SPECIMENS = sorted(CORPUS.glob("*/*.txt"))
IMPLEMENTED = {p.ID for p in registry.all_patterns()}


def _header(path: Path) -> tuple[dict[str, str], str]:
    header: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").split("\n")
    for index, line in enumerate(lines):
        if not line.startswith("# "):
            return header, "\n".join(lines[index + 1 :])
        key, _, value = line[2:].partition(": ")
        header.setdefault(key, value)
    return header, ""


def classify(path: Path) -> str | None:
    _, body = _header(path)
    failure = parse_log(body)
    if failure is None:
        return None
    ranked = candidates(failure, registry.all_patterns())
    return ranked[0].pattern.ID if ranked else None


def expected_label(path: Path) -> str | None:
    label = path.parent.name
    return None if label == "other" else label


@pytest.mark.parametrize("path", SPECIMENS, ids=[f"{p.parent.name}/{p.name}" for p in SPECIMENS])
def test_specimen_classifies_to_its_label(path: Path) -> None:
    label = expected_label(path)
    if label is not None and label not in IMPLEMENTED:
        # the label's pattern does not exist yet: at least no other pattern may claim it
        assert classify(path) in (None, label)
        return
    assert classify(path) == label


def test_confusion_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the matrix (run with -s to see it) and checks it is diagonal for every implemented label."""
    pairs = Counter((expected_label(p) or "other", classify(p) or "none") for p in SPECIMENS)
    labels = sorted({label for label, _ in pairs})
    predicted = sorted({guess for _, guess in pairs})
    width = max(map(len, labels + predicted)) + 2
    with capsys.disabled():
        print("\nclassifier confusion matrix (rows: label, columns: classified as)")
        print(" " * width + "".join(f"{p[:12]:>14}" for p in predicted))
        for label in labels:
            print(f"{label:<{width}}" + "".join(f"{pairs.get((label, p), 0) or '.':>14}" for p in predicted))
    wrong = {
        pair: n for pair, n in pairs.items()
        if pair[0] != pair[1] and not (pair[0] == "other" and pair[1] == "none")
        and (pair[0] in IMPLEMENTED or pair[1] != "none")
    }
    assert not wrong, f"misclassified: {wrong}"


def _ranked(message: str) -> list[str]:
    from repairbot.types import Failure

    return [c.pattern.ID for c in candidates(Failure("RuntimeError", message), registry.all_patterns())]


@pytest.mark.parametrize(
    "message",
    [
        "Input type (torch.cuda.DoubleTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        "Input type (torch.DoubleTensor) and weight type (torch.FloatTensor) should be the same or input "
        "should be a MKLDNN tensor and weight is a dense tensor",
        "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        "Input type (CUDADoubleType) and weight type (CUDAFloatType) should be the same",
        "Expected object of scalar type Double but got scalar type Float for argument #2 'mat2'",
    ],
)
def test_a_dtype_difference_is_not_a_device_mismatch(message: str) -> None:
    assert "device-mismatch" not in _ranked(message)


@pytest.mark.parametrize(
    "message",
    [
        "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        "Input type (CPUFloatType) and weight type (CUDAFloatType) should be the same or input should be a "
        "MKLDNN tensor and weight is a dense tensor",
        "Input type (torch.DoubleTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        "Expected all tensors to be on the same device, but got index is on cuda:0, different from other "
        "tensors on cpu (when checking argument in method wrapper_CUDA__index_select)",
        "Tensor for 'out' is on CPU, Tensor for argument #1 'self' is on CPU, but expected them to be on GPU "
        "(while checking arguments for addmm)",
        "Expected object of backend CUDA but got backend CPU for argument #2 'mat2'",
        "Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0!",
    ],
)
def test_device_mismatch_message_forms(message: str) -> None:
    assert _ranked(message)[:1] == ["device-mismatch"]


def test_a_traceback_without_its_exception_line_classifies_by_the_frame_it_ends_in() -> None:
    from repairbot.classify import classify_log, ending_frame

    load = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/proj/eval.py", line 12, in <module>\n'
        "    state = torch.load('best.pt')\n"
        '  File "/venv/lib/python3.10/site-packages/torch/serialization.py", line 1014, in load\n'
        "    return _load(opened_zipfile, map_location, pickle_module, **pickle_load_args)\n"
        '  File "/venv/lib/python3.10/site-packages/torch/serialization.py", line 166, in validate_cuda_device\n'
        "    raise RuntimeError('Attempting to deserialize object on a CUDA '\n"
    )
    result = classify_log(load, registry.all_patterns())
    assert result.pattern == "map-location"
    assert result.failure is not None and result.failure.user_frame is not None
    assert result.failure.user_frame.location == "/home/me/proj/eval.py:12"
    assert ending_frame(result.failure) == "validate_cuda_device (/venv/lib/python3.10/site-packages/torch/serialization.py:166)"
    # a frame that raises many different failures names none
    backward = (CORPUS / "other" / "frames-only-backward.txt").read_text().partition("\n\n")[2]
    assert classify_log(backward, registry.all_patterns()).pattern is None


def test_classify_says_when_no_exception_line_was_printed() -> None:
    from click.testing import CliRunner

    from repairbot.cli import main

    body = (CORPUS / "other" / "frames-only-backward.txt").read_text().partition("\n\n")[2]
    result = CliRunner().invoke(main, ["classify"], input=body)
    assert result.exit_code == 1
    assert "error: none printed (the traceback ends in backward (/data/users/me/pytorch/torch/autograd/__init__.py:254))" in result.output
    assert "user frame: /data/users/me/sandbox/hook_error.py:29" in result.output


# Every message form of the shape/checkpoint patterns, older torch wordings included (each from
# a public report; see the patterns' docstrings for the versions).
NEW_PATTERN_FORMS = [
    ("state-dict-keys", "RuntimeError", 'Error(s) in loading state_dict for DTNet:\n\tMissing key(s) in state_dict: '
     '"projection.0.weight", "head.0.weight". \n\tUnexpected key(s) in state_dict: "module.projection.0.weight", '
     '"module.head.0.weight". '),
    ("state-dict-keys", "RuntimeError", 'Error(s) in loading state_dict for DataParallel:\n\tMissing key(s) in '
     'state_dict: "module.usm.norm_act.weight", "module.usm.norm_act.bias". '),
    ("state-dict-keys", "RuntimeError", 'Error(s) in loading state_dict for VideoTokenizer:\n\tUnexpected key(s) in '
     'state_dict: "_orig_mod.encoder.patch_embed.proj.weight", "_orig_mod.encoder.patch_embed.proj.bias". '),
    ("state-dict-keys", "KeyError", "'unexpected key \"module.layer_module.0.weight\" in state_dict'"),
    ("state-dict-keys", "KeyError", "'missing keys in state_dict: \"{'conv1.weight', 'conv1.bias'}\"'"),
    ("state-dict-size", "RuntimeError", "Error(s) in loading state_dict for ResNet:\n\tsize mismatch for fc.weight: "
     "copying a param with shape torch.Size([1000, 2048]) from checkpoint, the shape in current model is "
     "torch.Size([3, 2048]).\n\tsize mismatch for fc.bias: copying a param with shape torch.Size([1000]) from "
     "checkpoint, the shape in current model is torch.Size([3])."),
    ("state-dict-size", "RuntimeError", "Error(s) in loading state_dict for RegNet:\n\tsize mismatch for "
     "stem.conv.weight: copying a param of torch.Size([64, 3, 7, 7]) from checkpoint, where the shape is "
     "torch.Size([16, 3, 3, 3]) in current model."),
    ("state-dict-size", "RuntimeError", 'Error(s) in loading state_dict for ResNetCifar:\n\tWhile copying the '
     'parameter named "layer1.0.conv1.weight", whose dimensions in the model are torch.Size([16, 16, 3, 3]) and '
     'whose dimensions in the checkpoint are torch.Size([11, 16, 3, 3]).'),
    ("state-dict-size", "RuntimeError", "While copying the parameter named decoder.embedding.weight, whose "
     "dimensions in the model are torch.Size([58, 256]) and whose dimensions in the checkpoint are "
     "torch.Size([107, 256])."),
    ("conv-in-channels", "RuntimeError", "Given groups=1, weight of size [64, 3, 3, 3], expected input[1, 1, 256, "
     "256] to have 3 channels, but got 1 channels instead"),
    ("conv-in-channels", "RuntimeError", "Given groups=1, weight of size 64 3 3 3, expected input[1, 1, 256, 256] "
     "to have 3 channels, but got 1 channels instead"),
    ("conv-in-channels", "RuntimeError", "Given groups=1, weight[64, 3, 3, 3], so expected input[1, 1, 256, 256] "
     "to have 3 channels, but got 1 channels instead"),
    ("conv-in-channels", "RuntimeError", "Given transposed=1, weight of size [32, 16, 2, 2], expected input[1, 64, "
     "8, 8] to have 32 channels, but got 64 channels instead"),
    ("conv-in-channels", "RuntimeError", "Need input of dimension 4 and input.size[1] == 3 but got input to have 4 "
     "dimensions and input.size[1] == 1 at /pytorch/torch/lib/THNN/generic/SpatialConvolutionMM.c:47"),
    ("conv-input-rank", "RuntimeError", "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of "
     "size: [100, 784]"),
    ("conv-input-rank", "RuntimeError", "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of "
     "size: [1, 1, 32, 324]"),
    ("conv-input-rank", "RuntimeError", "Expected 4-dimensional input for 4-dimensional weight [16, 1, 7, 7], but "
     "got 3-dimensional input of size [100, 28, 28] instead"),
    ("conv-input-rank", "RuntimeError", "Expected 4-dimensional input for 4-dimensional weight 16 3 3 3 "
     "140728118629264, but got 5-dimensional input of size [5, 3, 1, 224, 224] instead"),
    ("conv-input-rank", "RuntimeError", "Expected 5-dimensional input for 5-dimensional weight [64, 3, 3, 7, 7], "
     "but got 4-dimensional input of size [3, 16, 112, 112] instead"),
    ("conv-input-rank", "RuntimeError", "invalid argument 2: 3D or 4D input tensor expected but got: [32 x 784] at "
     "/tmp/luarocks_nn-scm-1-8028/nn/lib/THNN/generic/SpatialConvolutionMM.c:33"),
    ("batchnorm-single-sample", "ValueError", "Expected more than 1 value per channel when training, got input size "
     "torch.Size([1, 256, 1, 1])"),
    ("batchnorm-single-sample", "ValueError", "Expected more than 1 value per channel when training, got input size "
     "[1, 128, 1, 1]"),
    ("rnn-hidden-shape", "RuntimeError", "Expected hidden[0] size (2, 64, 256), got [2, 32, 256]"),
    ("rnn-hidden-shape", "RuntimeError", "Expected hidden[0] size (1, 128, 302), got (1, 40, 302)"),
    ("rnn-hidden-shape", "RuntimeError", "Expected hidden[1] size (1, 8, 64), got [1, 4, 64]"),
    ("rnn-hidden-shape", "RuntimeError", "Expected hidden size (1, 4, 128), got [1, 8, 128]"),
    ("rnn-hidden-shape", "RuntimeError", "Expected hidden[0] size (1, 64, 256), got (64, 256)"),
    ("rnn-hidden-shape", "RuntimeError", "For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
    ("rnn-hidden-shape", "RuntimeError", "For batched 3-D input, hx and cx should also be 3-D but got (2-D, 2-D) "
     "tensors"),
    ("rnn-hidden-shape", "RuntimeError", "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"),
    ("rnn-hidden-shape", "RuntimeError", "Expected more hidden states in stacked_rnn"),
    ("broadcast-size", "RuntimeError", "The size of tensor a (1600) must match the size of tensor b (8000) at "
     "non-singleton dimension 0"),
    ("broadcast-size", "RuntimeError", "The size of tensor a (28) must match the size of tensor b (4) at\n"
     "non-singleton dimension 3"),
]


@pytest.mark.parametrize(("pattern", "exc_type", "message"), NEW_PATTERN_FORMS,
                         ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(NEW_PATTERN_FORMS)])
def test_shape_and_checkpoint_message_forms(pattern: str, exc_type: str, message: str) -> None:
    from repairbot.types import Failure

    ranked = [c.pattern.ID for c in candidates(Failure(exc_type, message), registry.all_patterns())]
    assert ranked[:1] == [pattern]


# Real specimens cut after their frames, as CI logs cut them (their message lines removed; the
# folder is what the frames alone prove, `none` where they are shared by several patterns).
CUT = Path(__file__).parent / "data" / "cut_tracebacks"
CUT_SPECIMENS = sorted(CUT.glob("*/*.txt"))


@pytest.mark.parametrize("path", CUT_SPECIMENS, ids=[f"{p.parent.name}/{p.name}" for p in CUT_SPECIMENS])
def test_a_log_cut_after_its_frames_names_the_pattern_its_frames_prove(path: Path) -> None:
    from repairbot.classify import classify_log, ending_frame

    header, body = _header(path)
    result = classify_log(body, registry.all_patterns())
    assert result.failure is not None and not result.failure.exc_type and ending_frame(result.failure)
    assert result.pattern == (None if path.parent.name == "none" else path.parent.name)
    frame = result.failure.user_frame
    assert (frame.location if frame else "none") == header["user-frame"]


def test_the_cut_specimens_cover_both_answers() -> None:
    assert {p.parent.name for p in CUT_SPECIMENS} >= {"none", "map-location", "rnn-hidden-shape", "batchnorm-single-sample"}


# torch 2.13's forms of the raising frames (its line numbers).
_TORCH2_ENDINGS = {
    "batchnorm-single-sample": (
        '  File "/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 2889, in batch_norm\n'
        "    _verify_batch_size(input.size())\n"
        '  File "/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 2854, in _verify_batch_size\n'
        "    raise ValueError(\n"
    ),
    "map-location": (
        '  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 667, in _deserialize\n'
        "    device = _validate_device(location, backend_name)\n"
        '  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 634, in _validate_device\n'
        "    raise RuntimeError(\n"
    ),
}


@pytest.mark.parametrize("pattern", sorted(_TORCH2_ENDINGS))
def test_torch2_raising_frames_classify_without_the_message(pattern: str) -> None:
    from repairbot.classify import classify_log

    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/ci/work/train.py", line 40, in <module>\n'
        "    main()\n" + _TORCH2_ENDINGS[pattern]
    )
    assert classify_log(log, registry.all_patterns()).pattern == pattern


def test_a_shared_function_proves_a_pattern_only_by_its_raise_line() -> None:
    """check_hidden_size raises only rnn-hidden-shape's error, but `hx.size()` above its raise
    fails for an LSTM's (h, c) given to a GRU: that frame names no pattern."""
    from repairbot.classify import classify_log

    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/ci/work/train.py", line 40, in <module>\n'
        "    out, h = gru(x, (h0, c0))\n"
        '  File "/venv/lib/python3.8/site-packages/torch/nn/modules/rnn.py", line 230, in check_hidden_size\n'
        "    if hx.size() != expected_hidden_size:\n"
    )
    assert classify_log(log, registry.all_patterns()).pattern is None
    raised = log.replace("    if hx.size() != expected_hidden_size:\n", "    raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))\n")
    assert classify_log(raised, registry.all_patterns()).pattern == "rnn-hidden-shape"


def test_classify_json_of_a_cut_log_follows_the_contract() -> None:
    import json

    from click.testing import CliRunner

    from repairbot.cli import main

    _, body = _header(CUT / "rnn-hidden-shape" / "cut-rnn-hidden-shape-full-hidden0-1.0.txt")
    result = CliRunner().invoke(main, ["classify", "--json"], input=body)
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert {"pattern", "exc_type", "message", "file", "line", "command"} <= set(data)
    assert data["pattern"] == "rnn-hidden-shape"
    assert (data["file"], data["line"]) == ("E:\\NLU\\joint-nlu\\model.py", 120)
    _, shared = _header(CUT / "none" / "cut-linear-in-features-tail-windows-1.9.txt")
    result = CliRunner().invoke(main, ["classify", "--json"], input=shared)
    assert result.exit_code == 1 and json.loads(result.output)["pattern"] is None
