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
