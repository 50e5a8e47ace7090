"""One run's context, handed to every probe: its config, state, loops, torch and hooks."""

from typing import Any, Callable, ContextManager, Dict, List, Optional, Tuple

from .hooks import TorchHooks
from .loops import LoopTable
from .state import RunState


class Run(object):
    """What the probes of one run share (the harness keeps no run in a module global)."""

    def __init__(self, config: Dict[str, Any]) -> None:
        self.config = config
        self.state = RunState(config)
        self.loops = LoopTable()
        self.torch: Any = None  # the user's torch, when it imports
        self.hooks: Optional[TorchHooks] = None  # hooks.TorchHooks over it
        self.budget: Any = None  # the step budget (probes/step_budget.py)
        self.guard: Any = None  # the file guard (probes/file_guard.py), when it is on
        self.around_script: List[ContextManager[Any]] = []  # context managers the script runs inside (a TorchFunctionMode)
        self.finished = False  # evidence written: nothing more to record
        self._records: List[Tuple[str, Optional[Callable[[], Any]]]] = []  # (evidence key, getter or None), in the order the probes were taken

    def torch_hooks(self) -> TorchHooks:
        """The hooks, for a probe that NEEDS_TORCH (installed only in a run where torch imports)."""
        assert self.hooks is not None, "a probe that needs torch was installed without it"
        return self.hooks

    def add_record(self, key: str, getter: Optional[Callable[[], Any]]) -> None:
        """``evidence.json[key]`` will be ``getter()`` (None when the probe did not run)."""
        self._records.append((key, getter))

    def probe_records(self) -> Dict[str, Any]:
        return dict((key, getter() if getter is not None else None) for key, getter in self._records)
