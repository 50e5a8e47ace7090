"""Tests of repairbot.tracebacks: the labelled real-world specimens, then each format and quirk."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from repairbot.tracebacks import is_user_path, parse_log, strip_noise, worker_frames
from repairbot.types import Failure

DATA = Path(__file__).parent / "data" / "tracebacks"
SPECIMENS = sorted(DATA.glob("*/*.txt"))

# The body's final exception line, found without the parser: an optional markdown backtick or
# pdb "*** ", a dotted CamelCase name ending in Error/Exception, ": ", the message.
LAST_EXCEPTION_LINE = re.compile(
    r"^`?(?:\*\*\* )?(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (?P<msg>.*)$"
)

# Specimens whose final exception line that regex cannot read: (type, message prefix).
EXPECTED_EXCEPTION = {
    # A DataLoader worker re-raise: the worker's own error, not the wrapper's "Caught X in
    # DataLoader worker process 0." (posted here without the "FileNotFoundError: " prefix)
    "other/worker-filenotfound.txt": ("FileNotFoundError", "[Errno 2] No such file or directory: "),
    # A warning that announced the error after it: the warning is the failure (the error its cause)
    "target-shape/warning-then-broadcast-error.txt": (
        "UserWarning",
        "Using a target size (torch.Size([1, 1, 768, 1024])) that is different to the input size",
    ),
    # Wrapped by the terminal mid-sentence, with trailing padding: unwrapped
    "target-shape/warning-wrapped-padded.txt": (
        "UserWarning",
        "Using a target size (torch.Size([1, 1])) that is different to the input size (torch.Size([10, 1])). "
        "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
    ),
    # Frames only: the exception line was never printed
    "other/frames-only-backward.txt": ("", ""),
    "target-shape/warning-only-l1-user-location.txt": (
        "UserWarning",
        "Using a target size (torch.Size([64, 1, 8, 3])) that is different to the input size",
    ),
    # Frame, source line and exception flattened onto one line.
    "weights-only/tail-flattened-backticks.txt": (
        "_pickle.UnpicklingError",
        "Weights only load failed. In PyTorch 2.6, we changed the default value",
    ),
}

# Text the message must hold (continuation lines) or must not hold (log lines after it).
MESSAGE_HOLDS = {
    "other/nccl-ddp-elastic.txt": "\nncclSystemError: System call (socket, malloc, munmap, etc) failed.",
    "weights-only/ci-extract-relu.txt": "\n\tWeightsUnpickler error: Unsupported global: GLOBAL torch.nn",
    "weights-only/notebook-numpy-scalar.txt": "\n\nCheck the documentation of torch.load",
    "weights-only/pdb-listconfig.txt": "\n\nCheck the documentation of torch.load",
}
MESSAGE_LACKS = {
    "other/nccl-ddp-elastic.txt": "ERROR:torch",
    "device-mismatch/line-1.x-device-type-conv2d.txt": "Killing subprocess",
    "embedding-index/tail-one-frame-build-runner.txt": "[Finished in",
    "target-shape/full-bcelogits-channels-tqdm.txt": "Process finished",
    "view-noncontiguous/full-0.4-contiguous-backticks.txt": "`",
    "backward-twice/full-0.4-buffers-backticks.txt": "`",
}


def read_specimen(path: Path) -> tuple[dict[str, str], str]:
    """The header fields (``# key: value`` lines up to the first blank line) and the body."""
    text = path.read_text(encoding="utf-8")
    head, _, body = text.partition("\n\n")
    header: dict[str, str] = {}
    for line in head.splitlines():
        key, _, value = line.removeprefix("# ").partition(":")
        header.setdefault(key.strip(), value.strip())
    return header, body


def expected_exception(name: str, body: str) -> tuple[str, str]:
    if name in EXPECTED_EXCEPTION:
        return EXPECTED_EXCEPTION[name]
    matches = [m for m in map(LAST_EXCEPTION_LINE.match, body.splitlines()) if m is not None]
    assert matches, f"{name}: no exception line; add it to EXPECTED_EXCEPTION"
    last = matches[-1]
    return last["type"], last["msg"].rstrip("`").rstrip()


def test_specimens_are_all_there() -> None:
    assert len(SPECIMENS) == 88
    assert (DATA / "README.md").is_file()


@pytest.mark.parametrize("path", SPECIMENS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_specimen(path: Path) -> None:
    name = f"{path.parent.name}/{path.name}"
    header, body = read_specimen(path)
    failure = parse_log(body)
    assert failure is not None

    user_frame = failure.user_frame
    expected_frame = header["user-frame"]
    assert (user_frame.location if user_frame else "none") == expected_frame

    exc_type, message_start = expected_exception(name, body)
    assert failure.exc_type == exc_type
    assert failure.message.startswith(message_start), failure.message[:200]
    assert failure.message == failure.message.strip("\n")
    if name in MESSAGE_HOLDS:
        assert MESSAGE_HOLDS[name] in failure.message
    if name in MESSAGE_LACKS:
        assert MESSAGE_LACKS[name] not in failure.message
    assert failure.warning == (exc_type == "UserWarning" and not failure.causes)


# --------------------------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------------------------

GITHUB_ACTIONS_LOG = """\
2024-01-02T03:04:05.1234567Z ##[group]Run python train.py --epochs 1
2024-01-02T03:04:05.1234567Z \x1b[36;1mpython train.py --epochs 1\x1b[0m
2024-01-02T03:04:05.1234567Z ##[endgroup]
2024-01-02T03:04:06.0000000Z epoch 0: 100%|\u2588\u2588\u2588\u2588| 4/4 [00:01<00:00]
2024-01-02T03:04:06.0000000Z \x1b[31mTraceback (most recent call last):\x1b[0m
2024-01-02T03:04:06.0000000Z   File "/home/runner/work/proj/proj/train.py", line 31, in <module>
2024-01-02T03:04:06.0000000Z     main()
2024-01-02T03:04:06.0000000Z   File "/home/runner/work/proj/proj/train.py", line 24, in main
2024-01-02T03:04:06.0000000Z     out = model(x)
2024-01-02T03:04:06.0000000Z           ^^^^^^^^
2024-01-02T03:04:06.0000000Z   File "/opt/hostedtoolcache/Python/3.11.7/x64/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1511, in _wrapped_call_impl
2024-01-02T03:04:06.0000000Z     return self._call_impl(*args, **kwargs)
2024-01-02T03:04:06.0000000Z \x1b[1;31mRuntimeError\x1b[0m: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)
2024-01-02T03:04:06.1000000Z ##[error]Process completed with exit code 1.
"""


def test_ansi_codes_and_github_actions_timestamps() -> None:
    failure = parse_log(GITHUB_ACTIONS_LOG)
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert failure.message == "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"
    assert [f.line for f in failure.frames] == [31, 24, 1511]
    assert failure.frames[1].code == "out = model(x)"  # caret line skipped
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/runner/work/proj/proj/train.py:24"
    assert failure.command == "python train.py --epochs 1"


def test_strip_noise_removes_escapes_progress_bars_and_prefixes() -> None:
    text = (
        "\x1b[1mbold\x1b[0m and \\x1b[31mred\\x1b[0m\n"
        " 10%|#    | 1/10\r 50%|#####| 5/10\rdone\n"
        "[2023-01-01 10:00:00,123] Traceback (most recent call last):\n"
        "[2023-01-01 10:00:00,123] INFO starting epoch 2\n"
        "ERROR:root:Traceback (most recent call last):\n"
        '[rank1]:   File "train.py", line 3, in <module>\n'
        "web_1  | ValueError: boom\n"
    )
    assert strip_noise(text).splitlines() == [
        "bold and red",
        "done",
        "Traceback (most recent call last):",
        "[2023-01-01 10:00:00,123] INFO starting epoch 2",  # a log line keeps its timestamp
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "ValueError: boom",
    ]


def test_strip_noise_removes_markdown_artefacts() -> None:
    text = (
        "```python\n"
        "> Traceback (most recent call last):\n"
        ">   File \u201ctrain.py\u201d, line 3, in <module>\n"
        ">     x = d[\u2018key\u2019]\n"
        "> `KeyError: 'key'`\n"
        "```\n"
        "RuntimeError: `weights_only` must be `True`\n"
        "**RuntimeError**: bold\n"
    )
    assert strip_noise(text).splitlines() == [
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "    x = d['key']",
        "KeyError: 'key'",
        "RuntimeError: `weights_only` must be `True`",  # backticks quoting code stay
        "RuntimeError: bold",
    ]


def test_fence_ends_the_message() -> None:
    failure = parse_log(
        "```\nValueError: bad value\n```\nI tried setting it to 3 but it still fails.\n"
    )
    assert failure is not None
    assert failure.message == "bad value"


# --------------------------------------------------------------------------------------------
# Several reports, chains
# --------------------------------------------------------------------------------------------

TWO_TRACEBACKS = """\
Traceback (most recent call last):
  File "/srv/app/train.py", line 10, in <module>
    load()
ConnectionError: timed out
retrying in 5s (attempt 2/2)
Traceback (most recent call last):
  File "/srv/app/train.py", line 12, in <module>
    fit()
  File "/srv/app/train.py", line 7, in fit
    loss.backward()
RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""


def test_two_tracebacks_last_wins() -> None:
    failure = parse_log(TWO_TRACEBACKS)
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert failure.message.startswith("element 0 of tensors")
    assert [f.location for f in failure.frames] == ["/srv/app/train.py:12", "/srv/app/train.py:7"]
    assert failure.causes == ()  # no chain marker links the two


CHAINED = """\
Traceback (most recent call last):
  File "/srv/app/data.py", line 5, in load
    return table[key]
KeyError: 'labels'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/data.py", line 7, in load
    raise ValueError(f"no column {key}")
ValueError: no column labels

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/app/train.py", line 20, in <module>
    ds = build()
  File "/srv/app/train.py", line 14, in build
    raise RuntimeError("dataset could not be built") from error
RuntimeError: dataset could not be built
"""


def test_chained_exceptions_give_causes_nearest_first() -> None:
    failure = parse_log(CHAINED)
    assert failure is not None
    assert failure.headline == "RuntimeError: dataset could not be built"
    assert [c.exc_type for c in failure.causes] == ["ValueError", "KeyError"]
    assert failure.causes[0].message == "no column labels"
    assert failure.causes[1].message == "'labels'"
    assert failure.causes[1].frames[0].location == "/srv/app/data.py:5"
    assert all(cause.causes == () for cause in failure.causes)
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/srv/app/train.py:14"


def test_chain_is_only_the_last_one() -> None:
    failure = parse_log(
        CHAINED + "\nrestarting\n" + TWO_TRACEBACKS.split("retrying in 5s (attempt 2/2)\n")[1]
    )
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert failure.causes == ()


def test_a_warning_after_the_traceback_does_not_win() -> None:
    log = TWO_TRACEBACKS + (
        "/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker:"
        " There appear to be 1 leaked semaphore objects to clean up at shutdown\n"
        "  warnings.warn('resource_tracker: There appear to be %d '\n"
    )
    failure = parse_log(log)
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert not failure.warning


# --------------------------------------------------------------------------------------------
# DataLoader workers, mp.spawn
# --------------------------------------------------------------------------------------------

WORKER_LOG = """\
Epoch 1:   0%|          | 0/100 [00:00<?, ?it/s]
Traceback (most recent call last):
  File "/home/me/proj/train.py", line 40, in <module>
    for batch in loader:
  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 631, in __next__
    data = self._next_data()
  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1346, in _next_data
    return self._process_data(data)
  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1372, in _process_data
    data.reraise()
  File "/venv/lib/python3.11/site-packages/torch/_utils.py", line 722, in reraise
    raise exception
RuntimeError: Caught RuntimeError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop
    data = fetcher.fetch(index)
           ^^^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/fetch.py", line 51, in fetch
    data = [self.dataset[idx] for idx in possibly_batched_index]
            ~~~~~~~~~~~~^^^^^
  File "/home/me/proj/data.py", line 22, in __getitem__
    return torch.stack(self.frames[i])
RuntimeError: stack expects each tensor to be equal size, but got [3, 8] at entry 0 and [3, 9] at entry 1

wandb: Waiting for W&B process to finish... (failed 1).
"""


def test_dataloader_worker_error() -> None:
    failure = parse_log(WORKER_LOG)
    assert failure is not None
    # the worker's own error, not the loader's "Caught RuntimeError in DataLoader worker process 0."
    assert failure.exc_type == "RuntimeError"
    assert failure.message.startswith("stack expects each tensor to be equal size")
    # The wandb line after the blank line is the log's, not the message's.
    assert failure.message.endswith("at entry 0 and [3, 9] at entry 1")
    assert [f.line for f in failure.frames] == [40, 631, 1346, 1372, 722]
    assert [f.line for f in failure.worker_frames] == [308, 51, 22]
    assert (
        failure.worker_frames[1].code
        == "data = [self.dataset[idx] for idx in possibly_batched_index]"
    )
    assert failure.worker_frames == worker_frames(WORKER_LOG)
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/data.py:22"
    assert failure.user_frame.function == "__getitem__"


def test_worker_frames_without_a_worker_section() -> None:
    assert worker_frames("mat1 and mat2 shapes cannot be multiplied") == ()
    assert worker_frames("") == ()
    assert (
        worker_frames(
            "Caught KeyError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):"
        )
        == ()
    )


def test_spawned_process_traceback_is_part_of_the_message() -> None:
    log = """\
Traceback (most recent call last):
  File "/home/me/proj/ddp.py", line 50, in <module>
    mp.spawn(run, nprocs=2)
  File "/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 158, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException:{TRAILING_SPACE}

-- Process 0 terminated with the following error:
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 69, in _wrap
    fn(i, *args)
  File "/home/me/proj/ddp.py", line 31, in run
    loss = model(x.to(rank))
RuntimeError: Expected all tensors to be on the same device
""".format(TRAILING_SPACE=" ")  # Python prints "Name: " and the message's leading newlines
    failure = parse_log(log)
    assert failure is not None
    assert failure.exc_type == "torch.multiprocessing.spawn.ProcessRaisedException"
    assert "-- Process 0 terminated" in failure.message
    assert failure.message.endswith("RuntimeError: Expected all tensors to be on the same device")
    assert [f.line for f in failure.worker_frames] == [69, 31]
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/ddp.py:31"


TORCHRUN_LOG = """\
$ torchrun --nproc_per_node=2 train.py
[rank0]: Traceback (most recent call last):
[rank0]:   File "/home/me/proj/train.py", line 40, in <module>
[rank0]:     main()
[rank0]:   File "/home/me/proj/train.py", line 33, in main
[rank0]:     loss = criterion(out, y)
[rank0]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
E0501 12:00:00.123000 1234 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 1235) of binary: /home/me/.venv/bin/python
Traceback (most recent call last):
  File "/home/me/.venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/home/me/.venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 1235)
============================================================
"""


def test_launcher_error_yields_to_the_child_traceback() -> None:
    failure = parse_log(TORCHRUN_LOG)
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert failure.message.endswith("cuda:0 and cpu!")  # the glog line is not in it
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/train.py:33"
    assert failure.command == "torchrun --nproc_per_node=2 train.py"
    # Alone, the launcher's error is the failure.
    alone = parse_log(TORCHRUN_LOG.split("E0501")[1])
    assert alone is not None
    assert alone.exc_type.endswith("ChildFailedError")
    assert alone.user_frame is None  # .venv/bin/torchrun is a launcher, not user code


# --------------------------------------------------------------------------------------------
# Notebook and debugger formats
# --------------------------------------------------------------------------------------------

IPYTHON_8 = """\
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[3], line 5
      3 x = torch.randn(2, 3)
      4 model = Net()
----> 5 y = model(x)

File ~/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1511, in Module._wrapped_call_impl(self, *args, **kwargs)
   1509     return self._compiled_call_impl(*args, **kwargs)  # type: ignore[misc]
   1510 else:
-> 1511     return self._call_impl(*args, **kwargs)

File ~/proj/net.py:12, in Net.forward(self, x)
     11 def forward(self, x):
---> 12     return self.fc(x)

RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)
"""


def test_ipython_8_format() -> None:
    failure = parse_log(IPYTHON_8)
    assert failure is not None
    assert (
        failure.headline == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"
    )
    assert [f.location for f in failure.frames] == [
        "Cell In[3]:5",
        "~/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1511",
        "~/proj/net.py:12",
    ]
    assert [f.user for f in failure.frames] == [True, False, True]
    assert failure.frames[1].function == "Module._wrapped_call_impl"
    assert failure.frames[2].code == "return self.fc(x)"
    assert failure.user_frame == failure.frames[2]


def test_ipython_old_format_and_collapsed_frames() -> None:
    log = """\
RuntimeError                              Traceback (most recent call last)
<ipython-input-4-0a1b2c3d4e5f> in <module>()
      1 net = Net()
----> 2 out = net(batch)

9 frames
[/usr/local/lib/python3.7/dist-packages/torch/nn/functional.py](https://localhost:8080/#) in linear(input, weight, bias)
   1751         return handle_torch_function(linear, (input, weight), input, weight, bias=bias)
-> 1753     return torch._C._nn.linear(input, weight, bias)

RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x100 and 10x5)
"""
    failure = parse_log(log)
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert [f.location for f in failure.frames] == [
        "<ipython-input-4-0a1b2c3d4e5f>:2",
        "/usr/local/lib/python3.7/dist-packages/torch/nn/functional.py:1753",
    ]
    assert failure.frames[0].function == "<module>"
    assert failure.user_frame == failure.frames[0]


def test_ipython_header_without_exception_line_keeps_the_type() -> None:
    failure = parse_log(
        "KeyboardInterrupt                         Traceback (most recent call last)\n"
    )
    assert failure is not None
    assert failure.exc_type == "KeyboardInterrupt"


def test_debugpy_format_lists_frames_innermost_first() -> None:
    log = """\
Exception has occurred: RuntimeError       (note: full exception trace is shown but execution is paused at: <module>)
mat1 and mat2 shapes cannot be multiplied (1x2 and 6x64)
  File "/home/me/proj/model/mapping.py", line 41, in forward
    scale = torch.mm(task_pair, self.scale.t())
  File "/home/me/proj/model/mapping.py", line 95, in forward
    enc = self.block(x)
  File "/home/me/proj/train.py", line 214, in <module>
    loss = mapper(x)
"""
    failure = parse_log(log)
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert failure.message == "mat1 and mat2 shapes cannot be multiplied (1x2 and 6x64)"
    assert [f.line for f in failure.frames] == [214, 95, 41]  # outermost first
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/model/mapping.py:41"


def test_debugpy_format_with_a_worker_error() -> None:
    log = """\
Exception has occurred: RuntimeError
Caught RuntimeError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop
    data = fetcher.fetch(index)
  File "/home/me/proj/data.py", line 22, in __getitem__
    return torch.stack(self.frames[i])
RuntimeError: stack expects each tensor to be equal size
  File "/venv/lib/python3.11/site-packages/torch/_utils.py", line 722, in reraise
    raise exception
  File "/home/me/proj/train.py", line 40, in <module>
    for batch in loader:
"""
    failure = parse_log(log)
    assert failure is not None
    assert (failure.exc_type, failure.message) == ("RuntimeError", "stack expects each tensor to be equal size")
    assert [f.line for f in failure.frames] == [40, 722]
    assert [f.line for f in failure.worker_frames] == [308, 22]
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/data.py:22"


def test_pdb_prefix() -> None:
    failure = parse_log(
        "(Pdb) torch.load(path)\n*** _pickle.UnpicklingError: Weights only load failed.\n"
    )
    assert failure is not None
    assert failure.exc_type == "_pickle.UnpicklingError"
    assert failure.message == "Weights only load failed."


# --------------------------------------------------------------------------------------------
# Warnings, lone lines, frames alone
# --------------------------------------------------------------------------------------------


def test_warning_line_without_traceback() -> None:
    log = (
        "/home/me/proj/train.py:88: UserWarning: Using a target size (torch.Size([8])) that is"
        " different to the input size (torch.Size([8, 1])).\n"
        "  loss = F.mse_loss(pred, y)\n"
        "epoch 1 done\n"
    )
    failure = parse_log(log)
    assert failure is not None
    assert failure.warning
    assert failure.exc_type == "UserWarning"
    assert failure.message.startswith("Using a target size (torch.Size([8]))")
    assert len(failure.frames) == 1
    assert failure.frames[0].code == "loss = F.mse_loss(pred, y)"
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/train.py:88"


def test_frames_without_exception_line() -> None:
    log = 'Traceback (most recent call last):\n  File "fit.py", line 9, in <module>\n    loss.backward()\n'
    failure = parse_log(log)
    assert failure is not None
    assert failure.exc_type == ""
    assert failure.user_frame is not None
    assert failure.user_frame.location == "fit.py:9"


def test_syntax_error_frame_without_function() -> None:
    log = '  File "/home/me/proj/train.py", line 12\n    x = = 1\n        ^\nSyntaxError: invalid syntax\n'
    failure = parse_log(log)
    assert failure is not None
    assert failure.exc_type == "SyntaxError"
    assert failure.frames[0].function == ""
    assert failure.frames[0].code == "x = = 1"


@pytest.mark.parametrize(
    "log",
    [
        "",
        "\n\n\n",
        "epoch 1 loss 0.52\nepoch 2 loss 0.41\nsaved checkpoint to out/model.pt\n",
        "Error: something went wrong\n",  # a CLI's "Error:", not an exception class
        "ERROR: Could not find a version that satisfies the requirement torch==9.9\n",
        "The model uses a Linear in forward\nsee ResNet in <module> docs\n",
    ],
)
def test_no_failure(log: str) -> None:
    assert parse_log(log) is None


# --------------------------------------------------------------------------------------------
# Message boundaries
# --------------------------------------------------------------------------------------------


def test_message_keeps_continuation_lines_and_stops_at_log_lines() -> None:
    log = (
        'Traceback (most recent call last):\n  File "t.py", line 1, in <module>\n    f()\n'
        "ValueError: first line\nsecond line\n\tindented third\n\nafter a blank, prose continues\n"
        "\n2024-05-01 12:00:00 INFO shutting down\n"
    )
    failure = parse_log(log)
    assert failure is not None
    assert failure.message == (
        "first line\nsecond line\n\tindented third\n\nafter a blank, prose continues"
    )


@pytest.mark.parametrize(
    "after",
    [
        "\n$ echo done",
        "\nuser@host:~/proj$ ls",
        "\n(venv) PS C:\\proj> dir",
        "\n+ exit 1",
        "\nProcess finished with exit code 1",
        "\nINFO:root:cleanup",
        "\n\nTypeError: a second, unrelated error",
        "\n  0%|          | 0/10 [00:00<?, ?it/s]",
        "\n```",
    ],
)
def test_message_stops_before_unrelated_lines(after: str) -> None:
    failure = parse_log(f"RuntimeError: CUDA error: device-side assert triggered{after}\n")
    assert failure is not None
    assert failure.message == "CUDA error: device-side assert triggered" or (
        failure.exc_type == "TypeError"  # the second error is a report of its own, and the last
    )


# --------------------------------------------------------------------------------------------
# Damaged layouts
# --------------------------------------------------------------------------------------------


def test_flattened_traceback_on_one_line() -> None:
    log = (
        'Traceback (most recent call last): File "/home/me/proj/train.py", line 30, in <module> main()'
        ' File "/home/me/proj/train.py", line 22, in main loss = crit(out, y)'
        ' File "/venv/lib/python3.10/site-packages/torch/nn/functional.py", line 3029, in cross_entropy'
        " return torch._C._nn.cross_entropy_loss(input, target) RuntimeError: expected scalar type Long"
        " but found Float"
    )
    failure = parse_log(log)
    assert failure is not None
    assert failure.headline == "RuntimeError: expected scalar type Long but found Float"
    assert [f.line for f in failure.frames] == [30, 22, 3029]
    assert failure.frames[1].code == "loss = crit(out, y)"
    assert failure.frames[2].code == "return torch._C._nn.cross_entropy_loss(input, target)"
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/train.py:22"


def test_progress_bar_glued_to_the_header() -> None:
    log = (
        " 30%|###       | 3/10 [00:01<00:03]Traceback (most recent call last):\n"
        'File "train.py", line 5, in <module>\n'
        "loss.backward()\n"
        "RuntimeError: boom\n"
    )
    failure = parse_log(log)
    assert failure is not None
    assert failure.exc_type == "RuntimeError"
    assert failure.frames[0].code == "loss.backward()"  # the source line lost its indentation


def test_windows_paths() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "C:\\Users\\me\\proj\\train.py", line 8, in <module>\n'
        "    y = net(x)\n"
        '  File "C:\\Python311\\Lib\\site-packages\\torch\\nn\\modules\\module.py", line 1501, in _call_impl\n'
        "    return forward_call(*args, **kwargs)\n"
        "RuntimeError: boom\n"
    )
    failure = parse_log(log)
    assert failure is not None
    assert [f.user for f in failure.frames] == [True, False]


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------

TAIL = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\nValueError: x\n'


@pytest.mark.parametrize(
    ("prelude", "command"),
    [
        ("$ python train.py --epochs 1\n", "python train.py --epochs 1"),
        ("+ cd /work\n+ python train.py\n", "python train.py"),
        ("##[group]Run python train.py\n##[endgroup]\n", "python train.py"),
        ("Run python train.py --lr 0.1\n", "python train.py --lr 0.1"),
        (
            "python -m torch.distributed.run --nproc_per_node 2 train.py\n",
            "python -m torch.distributed.run --nproc_per_node 2 train.py",
        ),
        (
            "CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 train.py\n",
            "CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 train.py",
        ),
        ("me@box:~/proj$ python3 train.py\nloading data\n$ ls\n", "python3 train.py"),
        ("$ ./run.sh\n", "./run.sh"),
        ("loading data\n", None),
    ],
)
def test_command(prelude: str, command: str | None) -> None:
    failure = parse_log(prelude + TAIL)
    assert failure is not None
    assert failure.command == command


def test_command_after_the_failure_is_not_its_command() -> None:
    failure = parse_log(TAIL + "$ python other.py\n")
    assert failure is not None
    assert failure.command is None


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "user"),
    [
        ("train.py", True),
        ("./train_change.py", True),
        ("/home/me/proj/model.py", True),
        ("/home/me/proj/lib/utils.py", True),  # a project's own lib/ folder
        ("/home/me/proj/bin/train.py", True),
        ("/home/me/.venv/bin/torchrun", False),
        ("C:\\Code\\kbqa\\span_tagger.py", True),
        ("D:/projects/seg-net/train_seg.py", True),
        ("<ipython-input-3-0a1b2c3d4e5f>", True),
        ("/tmp/ipykernel_52731/1840267395.py", True),
        ("Cell In[3]", True),
        ("/usr/local/lib/python3.7/dist-packages/torch/tensor.py", False),
        ("/home/me/.venv/lib/python3.11/site-packages/accelerate/data_loader.py", False),
        ("C:\\Users\\me\\anaconda3\\lib\\site-packages\\torch\\nn\\functional.py", False),
        ("/usr/lib/python3.7/xml/etree/ElementTree.py", False),
        ("/usr/lib64/python3.6/json/decoder.py", False),
        ("C:\\Python36\\Lib\\json\\decoder.py", False),
        ("C:\\Users\\me\\anaconda3\\lib\\json\\decoder.py", False),
        ("/home/me/src/pytorch/torch/nn/modules/module.py", False),
        ("torch\\__init__.py", False),
        ("PyInstaller\\loader\\pyimod03_importers.py", False),
        ("C:\\env\\lib\\site-packages\\pkg-0.2.0-py3.6.egg\\pkg\\trainers.py", False),
        ("/opt/lib/pkg-1.0-py3.8.egg/pkg/mod.py", False),
        ("<frozen importlib._bootstrap>", False),
        ("<string>", False),
        ("<__array_function__ internals>", False),
        ("", False),
    ],
)
def test_is_user_path(path: str, user: bool) -> None:
    assert is_user_path(path) is user


# --------------------------------------------------------------------------------------------
# Robustness
# --------------------------------------------------------------------------------------------


def _parses(text: str) -> Failure | None:
    failure = parse_log(text)
    assert failure is None or isinstance(failure, Failure)
    return failure


@pytest.mark.parametrize("seed", range(20))
def test_random_garbage_never_raises(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = 'abcXYZ019 \t\n\r:.,"()<>[]`*>-^~$#|\\/\x1b\x00\u201c\u2019' + "File " + "Error: "
    pieces = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200))),
        'File "x.py", line ',
        "Traceback (most recent call last):",
        "RuntimeError: ",
        "Original Traceback (most recent call last):",
        "During handling of the above exception, another exception occurred:",
        "----> 3 ",
        "x.py in f()",
        "Exception has occurred: ",
    ]
    text = "".join(rng.choice(pieces) + rng.choice(["", "\n", " "]) for _ in range(300))
    _parses(text)
    _parses(text.replace("\n", " "))


def test_binary_text_never_raises() -> None:
    rng = random.Random(7)
    blob = bytes(rng.randrange(256) for _ in range(100_000)).decode("latin-1")
    _parses(blob)
    _parses(blob + "\n" + TAIL)


def test_one_megabyte_single_line() -> None:
    line = ('File "a.py", line 1, in f x = 1 ' * 40_000)[:1_000_000]
    _parses(line)
    _parses("x" * 1_000_000)
    _parses(" " * 1_000_000 + "y")
    _parses("a." * 500_000)
    _parses("RuntimeError: " + "z" * 1_000_000)


def test_large_log() -> None:
    # About 10 MB of training output with the traceback at the end (no timing assertion here).
    noise = "".join(
        f"2024-05-01 12:00:{i % 60:02d} INFO step {i} loss 0.{i % 97:02d}\n" for i in range(2000)
    )
    log = noise * 120 + WORKER_LOG
    assert len(log) > 10_000_000
    failure = parse_log(log)
    assert failure is not None
    assert failure.user_frame is not None
    assert failure.user_frame.location == "/home/me/proj/data.py:22"


def test_chain_longer_than_the_tail_read_first() -> None:
    # The parser reads the end of a log first; a chain reaching further up must still be whole.
    long_message = "\n".join(
        f"row {i}: " + "x" * 1000 + " ValueError: not this one" for i in range(400)
    )
    log = (
        "noise line\n" * 50_000
        + 'Traceback (most recent call last):\n  File "/srv/app/data.py", line 5, in load\n'
        + "    return parse(blob)\nValueError: bad blob\n"
        + long_message
        + "\n\nThe above exception was the direct cause of the following exception:\n\n"
        + 'Traceback (most recent call last):\n  File "/srv/app/train.py", line 9, in <module>\n'
        + "    load()\nRuntimeError: loading failed\n"
    )
    failure = parse_log(log)
    assert failure is not None
    assert failure.headline == "RuntimeError: loading failed"
    assert [c.headline for c in failure.causes] == ["ValueError: bad blob"]
    assert failure.causes[0].message.startswith("bad blob\nrow 0: ")


# --------------------------------------------------------------------------------------------
# Real forms: wrapped warnings, a warning and the error it announced, worker errors, frames only
# --------------------------------------------------------------------------------------------


def test_a_warning_wrapped_mid_word_is_joined_without_a_space() -> None:
    # as posted in https://github.com/Lornatang/RFB_ESRGAN-PyTorch/issues/2: cut inside "2040"
    log = (
        "/venv/lib/python3.8/site-packages/torch/nn/modules/loss.py:96: UserWarning: Using a target size (torch.Size([1, 3, 1356, 204\n"
        "0])) that is different to the input size (torch.Size([1, 3, 1224, 2040])). This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.\n"
        "  return F.l1_loss(input, target, reduction=self.reduction)\n"
    )
    failure = parse_log(log)
    assert failure is not None and failure.warning
    assert failure.message.startswith("Using a target size (torch.Size([1, 3, 1356, 2040])) that is different to the input")
    assert failure.frames[0].code == "return F.l1_loss(input, target, reduction=self.reduction)"


def test_lines_after_a_warning_are_not_its_message_without_a_source_line_after_them() -> None:
    log = (
        "x.py:3: UserWarning: something odd\n"
        "epoch 1 done\n"
        "saving the model\n"
    )
    failure = parse_log(log)
    assert failure is not None and failure.message == "something odd"


def test_a_warning_is_the_failure_only_of_the_error_it_announces() -> None:
    warning = (
        "/venv/lib/python3.11/site-packages/torch/nn/modules/loss.py:608: UserWarning: Using a target size "
        "(torch.Size([8, 1])) that is different to the input size (torch.Size([8, 3])). This will likely lead to "
        "incorrect results due to broadcasting. Please ensure they have the same size.\n"
        "  return F.mse_loss(input, target, reduction=self.reduction)\n"
    )
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/proj/train.py", line 30, in <module>\n'
        "    loss = crit(out, y)\n"
    )
    announced = parse_log(warning + traceback + "RuntimeError: The size of tensor a (3) must match the size of tensor b (8) at non-singleton dimension 1\n")
    assert announced is not None and announced.exc_type == "UserWarning" and not announced.warning
    assert announced.message.startswith("Using a target size (torch.Size([8, 1]))")
    assert announced.user_frame is not None and announced.user_frame.location == "/home/me/proj/train.py:30"
    assert announced.causes[0].message.startswith("The size of tensor a (3) must match")
    other = parse_log(warning + traceback + "RuntimeError: shape '[-1, 64]' is invalid for input of size 100\n")
    assert other is not None and (other.exc_type, other.causes) == ("RuntimeError", ())


def test_worker_exception_is_the_original_error() -> None:
    from repairbot.tracebacks import worker_exception

    message = (
        "Caught ValueError in DataLoader worker process 1.\nOriginal Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 351, in _worker_loop\n'
        "    data = fetcher.fetch(index)\n"
        '  File "/home/me/data.py", line 9, in __getitem__\n'
        "    raise ValueError(f'bad sample {i}')\n"
        "ValueError: bad sample 3\nwith a second line"
    )
    assert worker_exception(message) == ("ValueError", "bad sample 3\nwith a second line")
    assert worker_exception("mat1 and mat2 shapes cannot be multiplied") is None
    assert worker_exception("Caught ValueError in DataLoader worker process 1.\nOriginal Traceback (most recent call last):\n") is None
