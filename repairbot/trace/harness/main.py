"""Runs the user's script as ``__main__`` (or ``-m MODULE``) under the probes, as
``python SCRIPT ARGS`` would run it, and says how it ended."""

import base64
import builtins
import contextlib
import json
import linecache
import os
import sys
import time
import types
from typing import Any

from . import realos
from .context import Run
from .evidence import conclude, describe_failure
from .frames import OWNERSHIP
from .hooks import TorchHooks
from .overlay import decode_source, install_overlay
from .probe import Probe, install_probes, run_probes


def _load_config(path: Any) -> Any:
    with realos.open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    config["overlay"] = {
        os.path.abspath(p): base64.b64decode(data) for p, data in config.get("overlay", {}).items()
    }
    return config


def _rank_paths(config: Any) -> None:
    """Under a launcher every rank runs the harness with the same config: each keeps its own
    records (evidence, created files, progress, shadowed files) in ``scratch/rank-R/``."""
    rank = int(os.environ.get("RANK", "0"))
    folder = os.path.join(config["scratch"], "rank-%d" % rank)
    os.makedirs(folder, exist_ok=True)  # before the file guard; again when the launcher restarts a rank
    config.update(
        scratch=folder,
        evidence_path=os.path.join(folder, "evidence.json"),
        created_log=os.path.join(folder, "created.log"),
        progress_path=os.path.join(folder, "progress.json"),
        rank={"rank": rank, "world_size": int(os.environ.get("WORLD_SIZE", "1"))},
    )


def _module_code(name: Any, main_module: Any) -> Any:
    """`python -m NAME`: find the module (importing its parent packages, as Python does), make
    ``__main__`` look as runpy makes it, and return its code (loops instrumented by the finder)."""
    import runpy

    name, spec, code = runpy._get_module_details(name)  # type: ignore[attr-defined]  # ImportError: reported as the run's failure
    sys.argv[0] = spec.origin or sys.argv[0]
    main_module.__file__ = spec.origin
    main_module.__spec__ = spec
    main_module.__loader__ = spec.loader
    main_module.__package__ = spec.parent
    return code


class PlainCode(object):
    """The loop table of a plain run: the user's code compiled as written."""

    def compile(self, source: Any, filename: Any) -> Any:
        return compile(source, filename, "exec", dont_inherit=True)


def run(config_path: Any) -> Any:
    """One run of the script described by a config file; returns the exit code."""
    config = _load_config(config_path)
    if config.get("ranked"):
        _rank_paths(config)
    script = os.path.abspath(config["script"])
    config["script"] = script
    run = Run(config)
    plain = bool(config.get("plain"))
    if plain:
        # the script as it is: no limit, no probe, its loops as written; only the file guard,
        # since no run may alter a file that existed before it
        from .probes import file_guard

        probes = [Probe(file_guard)]
        run.loops = PlainCode()  # type: ignore[assignment]
    else:
        probes = run_probes(config.get("probe_files", ()))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        OWNERSHIP.add_library_root(os.path.dirname(torch.__file__))
        run.torch = torch
        run.hooks = TorchHooks(torch)
    install_probes(run, probes, late=False)

    source = config["overlay"].get(script)
    if source is None:
        with realos.open(script, "rb") as handle:
            source = handle.read()
    install_overlay(config["overlay"], run.loops)
    if script not in config["overlay"]:
        text = decode_source(source)
        linecache.cache[script] = (len(text), None, text.splitlines(True), script)

    # The script runs as `python SCRIPT ARGS` (or `python -m MODULE ARGS`) would run it.
    module_name = config.get("module")
    sys.argv = [config.get("argv0") or script] + list(config.get("args", []))
    sys.path[0] = os.getcwd() if module_name else os.path.dirname(script)
    main_module = types.ModuleType("__main__")
    main_module.__file__ = script
    main_module.__builtins__ = builtins  # type: ignore[attr-defined]
    main_module.__cached__ = None  # type: ignore[attr-defined]
    sys.modules["__bootstrap__"] = sys.modules.get("__main__")  # type: ignore[assignment]
    sys.modules["__main__"] = main_module

    install_probes(run, probes, late=True)
    try:
        if module_name:
            code = _module_code(module_name, main_module)
        else:
            code = run.loops.compile(source, script)
        with contextlib.ExitStack() as stack:
            for context in run.around_script:
                stack.enter_context(context)
            exec(code, main_module.__dict__)
    except SystemExit as exit_request:
        status = exit_request.code
        if status is None or status == 0:
            return conclude(run, "passed", 0)
        run.state.failed_at = time.time()
        if isinstance(status, int):
            return conclude(run, "failed", status & 0xFF or 1)
        sys.stderr.write("%s\n" % (status,))
        return conclude(run, "failed", 1)
    except BaseException as exc:  # everything the script raises is evidence
        run.state.failed_at = time.time()
        return conclude(run, "failed", 1, describe_failure(exc, torch, run.state))
    return conclude(run, "passed", 0)
