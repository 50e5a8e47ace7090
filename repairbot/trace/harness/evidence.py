"""The evidence channel: the failure described as JSON (frames, locals, the failing module),
and evidence.json written once, when the run ends, however it ends."""

import itertools
import json
import os
import sys
import traceback
import types
from typing import Any, Dict

from . import realos
from .evidence_keys import SCHEMA
from .frames import OWNERSHIP, frame_record, loaded_module_files, short_site
from .frames import shape as _shape


def _describe(value: Any, torch: Any, state: Any = None) -> Any:
    """A small JSON description of a local, or None when it says nothing useful."""
    if torch is not None:
        if isinstance(value, torch.Tensor):
            try:
                return {
                    "kind": "tensor", "shape": _shape(value), "dtype": str(value.dtype).replace("torch.", ""),
                    "device": str(value.device), "requires_grad": bool(value.requires_grad),
                }
            except Exception:
                return {"kind": "tensor"}
        if isinstance(value, torch.nn.Module):
            devices = set()
            try:
                for tensor in itertools.chain(value.parameters(), value.buffers()):
                    devices.add(str(tensor.device))
                    if len(devices) > 1:
                        break
            except Exception:
                pass
            site = state.module_sites.get(value) if state is not None else None
            return {"kind": "module", "type": type(value).__name__,
                    "devices": sorted(devices), "site": short_site(site)}
        if isinstance(value, torch.device):
            return {"kind": "device", "value": str(value)}
        if type(value) in (list, tuple) and value and isinstance(value[-1], torch.Tensor):
            # a list of tensors (losses appended per step): what its elements are
            return {"kind": "tensor-list", "length": len(value), "element": _describe(value[-1], torch, state)}
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return {"kind": "number", "value": value}
    if isinstance(value, str) and len(value) <= 40 and value.split(":")[0] in ("cpu", "cuda", "mps", "xpu", "meta"):
        return {"kind": "device-string", "value": value}
    return None


def _describe_scope(namespace: Any, torch: Any, state: Any, kinds: Any = None, limit: Any = 60) -> Any:
    described = {}
    for name, value in list(namespace.items()):
        if name.startswith("__"):
            continue
        summary = _describe(value, torch, state)
        if summary is None:
            continue
        if kinds is not None and summary["kind"] not in kinds:
            continue
        described[name] = summary
        if len(described) >= limit:
            break
    return described


_MODULE_SIZES = ("num_embeddings", "embedding_dim", "padding_idx", "in_features", "out_features",
                 "in_channels", "out_channels", "num_features", "input_size", "hidden_size")


def _module_details(module: Any, value: Any, torch: Any) -> Any:
    """What a failing module was built with, and the range of an integer input it received
    (an Embedding given index 12 with num_embeddings=10, say)."""
    details: Dict[str, Any] = {}
    for name in _MODULE_SIZES:
        size = getattr(module, name, None)
        if isinstance(size, int) and not isinstance(size, bool):
            details[name] = size
    if isinstance(value, torch.Tensor):
        details["input_shape"] = _shape(value)
        details["input_dtype"] = str(value.dtype).replace("torch.", "")
        if not value.is_floating_point() and not value.is_complex() and value.numel() and value.device.type != "meta":
            try:
                details["input_min"] = int(value.min())
                details["input_max"] = int(value.max())
            except Exception:
                pass
    return details


def _is_harness_frame(tb: Any) -> Any:
    return OWNERSHIP.is_harness_file(tb.tb_frame.f_code.co_filename)


def _trim_traceback(tb: Any) -> Any:
    """The traceback without the harness's own frames (its entry point at the top, and the
    wrappers it puts between the script and torch: the DataLoader cut, the in-place recorder).

    Tracebacks then read as they would without repairbot, and no harness frame is ever taken
    for the user's code.
    """
    kept = []
    while tb is not None:
        if not _is_harness_frame(tb):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


# The harness's frames that only pass the script's own call on (the real function behind a
# patched entry point, the real loader behind a cut pass, every torch op under a function mode):
# an error raised below one of them is the script's. By (file in the harness folder, function);
# None for any file (a pattern's probe).
_PASS_THROUGH = frozenset([
    ("hooks.py", "dispatch"), ("hooks.py", "call"), ("hooks.py", "<lambda>"),
    ("probes/dataloader_limits.py", "cut"), ("health/core.py", "watch_pass"),
    (None, "__torch_function__"), (None, "__torch_dispatch__"),
])
# The file guard stands for the file system: the OS errors it raises (or lets through) are the
# ones the script would get, except its own refusals, worded "repairbot: ...".
_OS_STAND_INS = ("probes/file_guard.py", "realos.py")


def _harness_name(filename: Any) -> Any:
    """``filename`` relative to the harness folder (None for a pattern's probe.py)."""
    path = os.path.realpath(os.path.abspath(filename))
    prefix = os.path.dirname(os.path.realpath(os.path.abspath(__file__))) + os.sep
    return path[len(prefix):].replace(os.sep, "/") if path.startswith(prefix) else None


def _passes_through(entry: Any, inner: Any, exc: Any) -> Any:
    """Was the harness frame of traceback ``entry`` only passing the script's call on?"""
    code = entry.tb_frame.f_code
    name = _harness_name(code.co_filename)
    if (name, code.co_name) in _PASS_THROUGH or (None, code.co_name) in _PASS_THROUGH:
        return True
    if name in _OS_STAND_INS and isinstance(exc, OSError):
        return not _safe_str(exc).startswith("repairbot:")
    # an around subscriber calling the rest of the chain (``call(...)``: a lambda of hooks.py)
    if inner is not None:
        inner_code = inner.tb_frame.f_code
        return (_harness_name(inner_code.co_filename), inner_code.co_name) == ("hooks.py", "<lambda>")
    return False


def harness_fault(exc: Any) -> Any:
    """The harness's own frame that raised ``exc`` (a frame record), None when it is the script's.

    Below the script's deepest frame (the user's code, then what it called) come torch, the
    standard library and the harness: the failure is the harness's when one of those harness
    frames was doing its own work (a probe's bookkeeping, a cut pass's sampler, a hook), not
    passing the script's call on to the real function; the innermost such frame is named.
    """
    entries = []
    tb = exc.__traceback__
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    deepest_user = -1
    for index, entry in enumerate(entries):
        if OWNERSHIP.is_user_file(entry.tb_frame.f_code.co_filename):
            deepest_user = index
    below = entries[deepest_user + 1:]
    for index in range(len(below) - 1, -1, -1):
        entry = below[index]
        if not _is_harness_frame(entry):
            continue
        inner = below[index + 1] if index + 1 < len(below) else None
        if not _passes_through(entry, inner, exc):
            code = entry.tb_frame.f_code
            return frame_record(code.co_filename, entry.tb_lineno, code.co_name)
    return None


def trim_chain(exc: Any, seen: Any = None) -> None:
    """Trim every exception of a chain, as the printed traceback shows them all."""
    seen = seen if seen is not None else set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = _trim_traceback(exc.__traceback__)
        trim_chain(exc.__cause__, seen)
        exc = exc.__context__


def _exception_type_name(exc: Any) -> Any:
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    return "%s.%s" % (module, cls.__qualname__)


def describe_failure(exc: Any, torch: Any, state: Any) -> Any:
    """The record of the exception that ended the run; printed (its harness frames trimmed)
    first, with the harness's own frame that raised it, where there is one."""
    raised_by_harness = harness_fault(exc)  # before the trim: it reads the harness's frames
    print_exception(exc)
    described = describe_exception(exc, torch, state)
    if raised_by_harness is not None:  # only then: the record of the script's own failures is unchanged
        described["harness_frame"] = raised_by_harness
    return described


def print_exception(exc: Any) -> None:
    """Print an uncaught exception as the interpreter would, through the script's own hook.

    The interpreter's default hook reads source lines from disk; the traceback module reads
    them through linecache, which holds the overlay: the lines that really ran.
    """
    trim_chain(exc)
    tb = exc.__traceback__
    hook = sys.excepthook
    if hook is sys.__excepthook__:
        hook = traceback.print_exception
    try:
        hook(type(exc), exc, tb)
    except Exception:
        traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def describe_exception(exc: Any, torch: Any, state: Any, with_locals: Any = True, depth: Any = 0) -> Any:
    tb = _trim_traceback(exc.__traceback__)
    frames = []
    failing_module = None
    failing_linear = None
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        record = frame_record(code.co_filename, tb.tb_lineno, code.co_name, code, tb.tb_lasti)
        if with_locals and record["user"]:
            record["locals"] = _describe_scope(frame.f_locals, torch, state)
            # globals: the devices and modules a function can see (tensors would be too many)
            record["globals"] = _describe_scope(frame.f_globals, torch, state, kinds=("device", "device-string", "module"))
        if torch is not None and code.co_name == "forward":
            module = frame.f_locals.get("self")
            if isinstance(module, torch.nn.Module):
                failing_module = _describe(module, torch, state)
                failing_module.update(_module_details(module, frame.f_locals.get("input"), torch))
                index = state.linear_index.get(module) if state is not None else None
                if index is not None:
                    failing_linear = index
                    shape = _shape(frame.f_locals.get("input"))
                    if shape is not None:
                        state.linears[index]["input_shape"] = shape
        frames.append(record)
        tb = tb.tb_next
    described = {
        "type": _exception_type_name(exc),
        "message": _safe_str(exc),
        "frames": frames,
        "failing_module": failing_module,
        "failing_linear": failing_linear,
        "causes": [],
    }
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None and depth < 5:
        inner = describe_exception(cause, torch, state, with_locals=False, depth=depth + 1)
        described["causes"] = [dict(inner, causes=[])] + inner["causes"]
    return described


def _safe_str(exc: Any) -> Any:
    try:
        return str(exc)
    except Exception as error:  # a broken __str__ must not hide the failure
        return "<unprintable %s: %s>" % (type(exc).__name__, error)


def _imported_user_files(script: Any) -> Any:
    files = {script}
    for path in loaded_module_files():
        if OWNERSHIP.is_user_file(path):
            files.add(os.path.abspath(path))
    return sorted(files)


def _environment(torch: Any) -> Any:
    env: Dict[str, Any] = {"python": "%d.%d.%d" % sys.version_info[:3], "torch": None, "cuda_available": False}
    if torch is not None:
        env["torch"] = torch.__version__.split("+")[0]
        env["torch_threads"] = torch.get_num_threads()
        try:
            env["cuda_available"] = bool(torch.cuda.is_available())
            if env["cuda_available"]:
                count = torch.cuda.device_count()
                env["cuda_device_count"] = count
                env["devices"] = [torch.cuda.get_device_name(i) for i in range(count)]
        except Exception:
            pass
    return env


def write_evidence(run: Any, outcome: Any, exit_code: Any, exception: Any = None) -> None:
    state, budget, guard = run.state, run.budget, run.guard
    evidence = {
        "schema": SCHEMA,
        "outcome": outcome,
        "exit_code": exit_code,
        "exception": exception,
        "stopped_at": state.stopped_at,
        "limits": {
            "batch_size": state.batch_size, "max_batches": state.max_batches,
            "max_steps": state.max_steps, "forced": state.forced, "steps": state.steps,
            "free_steps": state.free_steps, "batches": state.batches,
            "loaders_cut": state.loaders_cut, "last_batches": state.last_batches,
            "left_loops": budget.report() if budget is not None else [],
        },
        "progress": state.progress(),
        "linears": state.linears,
        "layer_sites": state.layer_sites,
        "probes": sorted(state.probes),
    }
    if run.config.get("rank"):
        # under a launcher (torchrun, accelerate launch): which rank this is, and when it failed;
        # absent elsewhere, so a single process's evidence is what it always was
        evidence["rank"] = dict(run.config["rank"], failed_at=state.failed_at)
    evidence.update(run.probe_records())
    evidence.update({
        "imported_files": _imported_user_files(run.config["script"]),
        "environment": _environment(run.torch),
        "files": {
            "shadowed": sorted(guard.shadowed) if guard else [],
            "suppressed_deletes": sorted(guard.suppressed_deletes) if guard else [],
        },
    })
    path = run.config["evidence_path"]
    tmp = path + ".tmp"
    with realos.open(tmp, "w", encoding="utf-8") as handle:
        json.dump(evidence, handle, default=str)
    realos.replace(tmp, path)


def finish(run: Any, outcome: Any, exit_code: Any, exception: Any = None) -> None:
    """Write the evidence and leave at once: nothing in the script can swallow this.

    Used where the harness ends a run that is still going (the step budget): a script's own
    ``except BaseException`` or ``finally`` must not turn the stop into something else.
    """
    if run.finished:
        os._exit(exit_code)
    run.finished = True
    try:
        write_evidence(run, outcome, exit_code, exception)
    finally:
        flush_and_exit(exit_code)


def flush_and_exit(code: Any) -> None:
    """Flush what the script printed, then leave at once (no atexit, no finalizers of its own)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def conclude(run: Any, outcome: Any, exit_code: Any, exception: Any = None) -> Any:
    """Write the evidence of a run that ended by itself; the interpreter then exits normally."""
    if not run.finished:
        run.finished = True
        write_evidence(run, outcome, exit_code, exception)
    return exit_code
