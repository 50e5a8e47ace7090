"""Health checks: the silent training bugs a few real steps already show (off with --no-health).

One probe ("health") for all of them: ``core`` watches what several checks observe (backward
calls, optimizer steps and resets, module forwards, DataLoader passes), and each check is one
module of this package holding one ``core.HealthCheck`` class (its id, title, level,
documentation and evidence), found by ``checks()``: a new check is a new module, nothing to
register. Every check reports only what the run showed, once, with the user's source line (the
same innermost-user-frame rule as failures) and the evidence behind it. They stay cheap: one
finiteness test per module output until the first offender, a pass over the optimizer's
parameters per step, and sample hashes of the few batches the harness lets through.

This package imports without torch: the main process reads the checks' documentation here.
"""

import importlib
import inspect
import os
from typing import TYPE_CHECKING, Callable, List, Type

from .core import Finding, HealthCheck, HealthCore

if TYPE_CHECKING:  # the main process imports this package: only what the checks need at run time
    from ..context import Run

NAME = "health"
EVIDENCE_KEY = "health"


def checks() -> List[Type[HealthCheck]]:
    """Every health check class, in report order (``ORDER``): the ``HealthCheck`` subclass of
    each module of this package but ``core``."""
    folder = os.path.dirname(os.path.abspath(__file__))
    found = []
    for filename in sorted(os.listdir(folder)):
        name, ext = os.path.splitext(filename)
        if ext != ".py" or name in ("__init__", "core") or not name.isidentifier():
            continue
        module = importlib.import_module("." + name, __name__)
        classes = [obj for obj in vars(module).values()
                   if inspect.isclass(obj) and issubclass(obj, HealthCheck) and obj is not HealthCheck
                   and obj.__module__ == module.__name__]
        if len(classes) != 1:
            raise ImportError("%s: expected one health check class, found %d" % (module.__name__, len(classes)))
        found.append(classes[0])
    ids = [check.ID for check in found]
    twice = sorted(set(i for i in ids if ids.count(i) > 1))
    if twice:
        raise ImportError("health check ids defined twice: %s" % ", ".join(twice))
    return sorted(found, key=lambda check: (check.ORDER, check.ID))


def enabled(run: "Run") -> bool:
    return bool(run.config.get("limits", {}).get("health", True))


def install(run: "Run") -> Callable[[], List[Finding]]:
    core = HealthCore(run.state, run.torch, run.torch_hooks())
    installed = [check(core) for check in checks()]
    core.install()

    def findings() -> List[Finding]:
        found: List[Finding] = []
        for check in installed:
            try:
                result = check.findings()
            except Exception:  # a check's own failure must never cost the run its evidence
                continue
            if isinstance(result, list):
                found.extend(result)
            elif result is not None:
                found.append(result)
        return found

    return findings
