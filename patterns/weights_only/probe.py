"""The "unsafe-globals" probe (runs in the harness, under the user's interpreter: Python 3.8,
standard library and torch only; loaded by path, see repairbot/trace/harness/probe.py; the
pattern imports PLAIN_DATA and NUMPY_DTYPE_CLASS from here, so nothing here imports torch).

On a torch.load that weights_only=True refuses, it lists what the checkpoint needs. Used in
a rerun that only gathers evidence for ``Weights only load failed``: the message names one
global, the fix needs them all.
"""

import os
import re
import sys
from typing import Any, Dict, List

NAME = "unsafe-globals"
OPT_IN = True
EVIDENCE_KEY = "unsafe_globals"  # [{path, globals: [{name, resolved}], build_types, loads, error}]

# The globals the probe may allowlist to check that a refused checkpoint then loads: types
# that rebuild plain data and run no code of the file's choosing (pattern.py reads these two
# names from here: one list for the probe and the fix).
PLAIN_DATA = frozenset((
    "argparse.Namespace",
    "collections.OrderedDict", "collections.defaultdict", "collections.Counter", "collections.deque",
    "builtins.set", "builtins.frozenset", "builtins.list", "builtins.dict", "builtins.tuple",
    "builtins.int", "builtins.float", "builtins.complex", "builtins.bool", "builtins.str",
    "builtins.bytes", "builtins.bytearray", "builtins.slice", "builtins.range",
    "numpy.dtype", "numpy.ndarray",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
))
NUMPY_DTYPE_CLASS = re.compile(r"numpy\.dtypes\.\w+DType\Z")
_REFUSED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")
_REFUSED_BUILD = re.compile(r"but got <class '([\w.]+)'>")


def _plain_data(name: Any) -> Any:
    return name in PLAIN_DATA or bool(NUMPY_DTYPE_CLASS.match(name))


def _resolve_global(name: Any) -> Any:
    """The object a checkpoint's GLOBAL names, from modules already imported (nothing new runs)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj = module
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _global_path(obj: Any) -> Any:
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return "%s.%s" % (module, qualname) if module and qualname else None


def _checkpoint_path(f: Any) -> Any:
    if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__"):
        return os.path.abspath(os.fsdecode(f))
    name = getattr(f, "name", None)
    return os.path.abspath(name) if isinstance(name, str) and os.path.isfile(name) else None


def _unsafe_globals_record(torch: Any, real_load: Any, f: Any) -> Any:
    """What a refused checkpoint needs: every unsafe global (a static scan, nothing runs), and,
    when they are all plain data, whether it loads with them allowlisted (adding the NumPy
    dtype classes the unpickler then asks for)."""
    record: Dict[str, Any] = {"path": None, "globals": [], "build_types": [], "loads": None, "error": None}
    path = _checkpoint_path(f)
    if path is None:
        record["error"] = "torch.load was given a %s, not a file path" % type(f).__name__
        return record
    record["path"] = path
    try:
        names = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception as error:
        record["error"] = "%s: %s" % (type(error).__name__, error)
        return record
    allowed = []
    for name in names:
        obj = _resolve_global(name)
        record["globals"].append({"name": name, "resolved": _global_path(obj) if obj is not None else None})
        allowed.append((obj, name) if obj is not None else None)
    if not names or not all(_plain_data(name) for name in names) or None in allowed:
        return record
    for _ in range(8):
        try:
            with torch.serialization.safe_globals(allowed):
                real_load(path, map_location="cpu", weights_only=True)
            record["loads"] = True
            return record
        except Exception as error:
            text = str(error)
            found = _REFUSED_BUILD.search(text) or _REFUSED_GLOBAL.search(text)
            name = found.group(1) if found else None
            obj = _resolve_global(name) if name and _plain_data(name) else None
            if obj is None or any(entry is not None and entry[1] == name for entry in allowed):
                record["loads"] = False
                return record
            allowed.append((obj, name))
            if found is not None and found.re is _REFUSED_BUILD:
                record["build_types"].append({"name": name, "resolved": _global_path(obj)})
            else:
                record["globals"].append({"name": name, "resolved": _global_path(obj)})
    record["loads"] = False
    return record



def install(run: Any) -> Any:
    torch = run.torch
    records: List[Dict[str, Any]] = []

    def load(real_load: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return real_load(f, *args, **kwargs)
        except Exception as error:
            if "Weights only load failed" in str(error) and len(records) < 5:
                try:
                    records.append(_unsafe_globals_record(torch, real_load, f))
                except Exception:
                    pass
            raise

    run.hooks.torch_function("load", load)
    return lambda: records
