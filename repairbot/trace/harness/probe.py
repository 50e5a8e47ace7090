"""What a probe is, and the one place the harness takes its probes from.

A probe is a module (the core's under probes/ and health/, a pattern's ``probe.py`` loaded by
path) that declares, as module attributes:

- ``NAME``: how the parent asks for it (``probes`` in the config) and how it is reported;
- ``OPT_IN`` (default False): on only when the parent asks for it by name; otherwise on in
  every run, unless it defines ``enabled(run) -> bool`` and that says no;
- ``EVIDENCE_KEY`` (default None): the key of evidence.json its records go under (None there
  when the probe did not run); ``install`` then returns the function that gives them;
- ``NEEDS_TORCH`` (default True): skipped in a run where torch does not import;
- ``LATE`` (default False): installed just before the script runs, after the overlay;
- ``install(run)``: subscribes to the torch entry points (``run.hooks``), reads and writes
  ``run.state``; may add a context manager the script runs inside to ``run.around_script``.
"""

import importlib.util
import os
import re
import types
from typing import Any, Callable, Iterable, List, Optional

from .context import Run
from .evidence_keys import CORE_KEYS
from .frames import OWNERSHIP


class Probe(object):
    """A probe module's declaration, read once."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.name = module.NAME
        self.opt_in = bool(getattr(module, "OPT_IN", False))
        self.evidence_key = getattr(module, "EVIDENCE_KEY", None)
        self.needs_torch = bool(getattr(module, "NEEDS_TORCH", True))
        self.late = bool(getattr(module, "LATE", False))
        self._enabled = getattr(module, "enabled", None)

    def wanted(self, run: Run) -> bool:
        if self.opt_in:
            return self.name in run.state.probes
        return self._enabled is None or bool(self._enabled(run))

    def install(self, run: Run) -> Optional[Callable[[], Any]]:
        getter: Optional[Callable[[], Any]] = self.module.install(run)
        return getter


def load_probe_file(path: str) -> types.ModuleType:
    """A pattern's ``probe.py``, loaded by path (its frames count as the harness's own)."""
    path = os.path.abspath(path)
    folder = os.path.basename(os.path.dirname(path))
    name = "repairbot_harness_probe_" + re.sub(r"\W", "_", folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load the probe file %s" % path)
    module = importlib.util.module_from_spec(spec)
    OWNERSHIP.add_harness_file(path)
    spec.loader.exec_module(module)
    if getattr(module, "EVIDENCE_KEY", None) in CORE_KEYS:
        raise ImportError("the probe file %s claims %r, a key of the harness's core" % (path, module.EVIDENCE_KEY))
    return module


def run_probes(probe_files: Iterable[str]) -> List[Probe]:
    """Every probe of a run, in the order they are installed (and their evidence written):
    the core's, with the probes of the selected patterns at their place."""
    from .probes import AFTER_PATTERNS, BEFORE_PATTERNS

    modules = list(BEFORE_PATTERNS) + [load_probe_file(path) for path in probe_files] + list(AFTER_PATTERNS)
    return [Probe(module) for module in modules]


def install_probes(run: Run, probes: Iterable[Probe], late: bool) -> None:
    """Install the probes of one stage (``late``: just before the script runs)."""
    for probe in probes:
        if probe.late != late:
            continue
        getter = None
        if probe.wanted(run) and (run.torch is not None or not probe.needs_torch):
            getter = probe.install(run)
        # A pattern's probe that did not run writes nothing: adding a pattern with a probe changes
        # no other pattern's evidence.json (the core's keys are always there, None when off).
        if probe.evidence_key is not None and (getter is not None or probe.evidence_key in CORE_KEYS):
            run.add_record(probe.evidence_key, getter)
