"""The evidence channel: the failure described as JSON (frames, locals, the failing module),
and evidence.json written once, when the run ends, however it ends."""

import itertools
import json
import os
import sys
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
