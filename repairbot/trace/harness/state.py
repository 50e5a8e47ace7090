"""The state of one run that the probes share: the limits, the counters, the traces."""

import json
import time
from typing import Any, Dict, List, Optional

from . import realos
from .identity import IdentityWeakKeyDict


class RunState:
    """Counters and traces of one run; the probes read and write them (never a global)."""

    def __init__(self, config: Dict[str, Any]) -> None:
        # the runner always sends every limit (their defaults are declared there, once)
        limits = config["limits"]
        self.force_batch = bool(limits["force_batch_size"])
        self.cut_batches = bool(limits["cut_batches"])
        self.step_budget = bool(limits["step_budget"])
        self.batch_size = int(limits["batch_size"])
        self.max_batches = int(limits["max_batches"])
        self.max_steps = int(limits["max_steps"])
        self.forced: List[Dict[str, Any]] = []  # what the limits changed, with where
        self.active_loaders = 0
        self.passes: List[Dict[str, bool]] = []  # the DataLoader passes under way: {"driven": pulled by a loop header}
        self.steps = 0
        self.free_steps = 0  # steps taken while no DataLoader was being iterated
        self.batches = 0
        self.forwards = 0
        self.loaders_cut = 0
        self.last_batches: List[Dict[str, Any]] = []  # DataLoaders whose passes end with the real run's last batch (len(sampler) % batch size)
        self.linears: List[Dict[str, Any]] = []  # records, in construction order
        self.layer_sites: List[Dict[str, Any]] = []  # construction records of every sized layer (install_layer_site_probe)
        self.layer_site_index: 'IdentityWeakKeyDict[Any, int]' = IdentityWeakKeyDict()
        self.linear_index: 'IdentityWeakKeyDict[Any, int]' = IdentityWeakKeyDict()
        self.module_sites: 'IdentityWeakKeyDict[Any, Optional[Dict[str, Any]]]' = IdentityWeakKeyDict()
        self.stopped_at: Optional[Dict[str, Any]] = None
        self.failed_at: Optional[float] = None  # wall-clock time the script's failure reached the harness
        self.torch = None
        self.progress_path = config.get("progress_path")
        self._last_beat = 0.0
        self.probes = frozenset(config.get("probes", ()))  # the opt-in probes asked for, by name

    def progress(self) -> List[int]:
        return [self.steps, self.batches, self.forwards]

    def heartbeat(self) -> None:
        """Leave the progress on disk now and then: a run killed at the timeout says how far it got."""
        now = time.monotonic()
        if not self.progress_path or now - self._last_beat < 1.0:
            return
        self._last_beat = now
        tmp = self.progress_path + ".tmp"
        try:
            with realos.open(tmp, "w") as handle:
                json.dump({"progress": self.progress()}, handle)
            realos.replace(tmp, self.progress_path)
        except OSError:
            pass
