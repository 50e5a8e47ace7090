"""One run's context, handed to every probe: its config, state, loops, torch and hooks."""

from .loops import LoopTable
from .state import RunState


class Run(object):
    """What the probes of one run share (the harness keeps no run in a module global)."""

    def __init__(self, config):
        self.config = config
        self.state = RunState(config)
        self.loops = LoopTable()
        self.torch = None  # the user's torch, when it imports
        self.hooks = None  # hooks.TorchHooks over it
        self.budget = None  # the step budget (probes/step_budget.py)
        self.guard = None  # the file guard (probes/file_guard.py), when it is on
        self.around_script = []  # context managers the script runs inside (a TorchFunctionMode)
        self.finished = False  # evidence written: nothing more to record
        self._records = []  # (evidence key, getter or None), in the order the probes were taken

    def add_record(self, key, getter):
        """``evidence.json[key]`` will be ``getter()`` (None when the probe did not run)."""
        self._records.append((key, getter))

    def probe_records(self):
        return dict((key, getter() if getter is not None else None) for key, getter in self._records)
