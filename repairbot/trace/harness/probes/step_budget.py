"""The step budget: a hand-written loop is left after ``max_steps`` optimizer steps.

When the budget is spent, the loops that hold the step (in its frame, and the loops of the
calling frames that hold the call) are marked; each breaks at the start of its next
iteration (see loops.py), so the iteration that took the step finishes and the script goes
on after the outermost one: evaluation, plotting, sampling, saving all run. A break is a
real ``break``: ``with`` blocks and ``finally`` clauses run, ``for ... else`` does not.

A framework's fit (Lightning's ``Trainer.fit``, Hugging Face's ``Trainer.train``) holds its loop
in library code, where no ``break`` can go: the framework's probe opens a fit here
(``enter_fit``) with the way to end it cleanly, the framework's own stop (probes/lightning_fit.py,
probes/hf_trainer.py), and the fit is counted and left as
a loop at the user's call, its kind ``fit``. The loops of the user's frames that hold that call
are counted and left with it, as the loops around a hand-written inner loop are.
"""

import builtins
import sys
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..context import Run
from ..evidence import finish
from ..frames import OWNERSHIP, short_site, user_call_site
from ..loops import is_statement_frame

NAME = "step-budget"
NEEDS_TORCH = False  # the leave hooks exist in every run: the user's files are compiled with them


class StepBudget:
    """Counts optimizer steps outside DataLoader passes; leaves the loop that holds them at
    ``max_steps``. A loop gets its own budget: the key is the outermost user loop on the stack."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.state = run.state
        self.key: Optional[Tuple[Any, int]] = None  # (frame, loop id) of the loop whose steps are being counted
        self.count = 0
        self.pending: Dict[int, Tuple[Any, Set[int]]] = {}  # id(frame) -> (frame, set of loop ids to leave)
        self.left: List[Dict[str, Any]] = []  # reported: the loops left early, where, after how many steps
        self.loose = 0  # steps with no user loop around them (a library's own loop)
        self.fits: List["Fit"] = []  # the framework fits under way, innermost last

    def chain(self, frame: Any) -> Any:
        """(frame, loops holding its current line) for each user frame, innermost first."""
        chain = []
        while frame is not None:
            code = frame.f_code
            if OWNERSHIP.is_user_file(code.co_filename) and is_statement_frame(frame):
                loops = self.run.loops.loops_at(code.co_filename, frame.f_lineno)
                if loops:
                    chain.append((frame, loops))
            frame = frame.f_back
        return chain

    def on_step(self, frame: Any) -> None:
        state = self.state
        if self.fits:
            self.on_fit_step(self.fits[-1])
            return
        if self.in_loader_pass():
            return
        state.free_steps += 1
        chain = self.chain(frame)
        if not chain:
            self.loose += 1
            if state.step_budget and self.loose >= state.max_steps:
                # no loop of the user's to leave: the run ends here, and it is not a pass
                state.stopped_at = user_call_site()
                finish(self.run, outcome="stopped", exit_code=0)
            return
        outer_frame, outer_loops = chain[-1]
        key = (outer_frame, outer_loops[0].id)
        if self.key is None or self.key[0] is not key[0] or self.key[1] != key[1]:
            self.key, self.count = key, 0
        self.count += 1
        if state.step_budget and self.count >= state.max_steps:
            self.leave(chain)

    def run_fit(self, stop: Callable[[], None], call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)``, a framework's fit called from the user's code, counted as
        one fit of the budget; ``stop()`` ends it cleanly (the framework's own stop)."""
        fit = self.enter_fit(stop)
        try:
            return call(*args, **kwargs)
        finally:
            self.exit_fit(fit)

    def enter_fit(self, stop: Callable[[], None]) -> "Fit":
        """A framework's fit starts, called from the user's code; ``stop()`` ends it cleanly."""
        caller: Any = sys._getframe(1)
        while caller is not None and not OWNERSHIP.is_user_file(caller.f_code.co_filename):
            caller = caller.f_back
        fit = Fit(stop, short_site(user_call_site()), self.chain(caller))
        self.fits.append(fit)
        return fit

    def exit_fit(self, fit: "Fit") -> None:
        """The fit returned (or raised): a stopped fit has been left."""
        self.fits.remove(fit)
        if fit.left is not None:
            fit.left["left"] = True

    def on_fit_step(self, fit: "Fit") -> None:
        """A step inside a fit: its steps are counted, with those of the user loops around it."""
        if fit.chain:  # the budget is the outermost user loop's that holds the fit call
            outer_frame, outer_loops = fit.chain[-1]
            key: Tuple[Any, int] = (outer_frame, outer_loops[0].id)
        else:
            key = (fit, -1)
        if self.key is None or self.key[0] is not key[0] or self.key[1] != key[1]:
            self.key, self.count = key, 0
        self.count += 1
        if not self.state.step_budget or self.count < self.state.max_steps or fit.left is not None:
            return
        fit.left = {"loop": fit.site, "kind": "fit", "step": short_site(user_call_site()),
                    "steps": self.count, "frame": id(fit), "left": False}
        self.left.append(fit.left)
        if fit.chain:
            self.leave(fit.chain)
        fit.stop()

    def leave(self, chain: Any) -> None:
        site = short_site(user_call_site())
        for frame, loops in chain:
            entry = self.pending.get(id(frame))
            if entry is None or entry[0] is not frame:
                entry = self.pending[id(frame)] = (frame, set())
            for loop in loops:
                if loop.id in entry[1]:
                    continue
                entry[1].add(loop.id)
                if not any(item["loop"] == loop.where() and item["frame"] == id(frame) for item in self.left):
                    self.left.append({"loop": loop.where(), "kind": loop.kind, "step": site,
                                      "steps": self.count, "frame": id(frame), "left": False})
        builtins.__repairbot_leaving__ = True  # type: ignore[attr-defined]

    def check(self, loop_id: Any) -> Any:
        """``__repairbot_leave__``: does the calling frame leave loop ``loop_id`` now?"""
        frame = sys._getframe(1)
        entry = self.pending.get(id(frame))
        if entry is None or entry[0] is not frame or loop_id not in entry[1]:
            return False
        entry[1].discard(loop_id)
        if not entry[1]:
            del self.pending[id(frame)]
        if not self.pending:
            builtins.__repairbot_leaving__ = False  # type: ignore[attr-defined]
        where = self.run.loops.records[loop_id].where()
        for item in self.left:
            if item["loop"] == where and item["frame"] == id(frame):
                item["left"] = True
        self.key, self.count = None, 0
        return True

    def in_loader_pass(self) -> Any:
        """A DataLoader pass driven by a loop (``for batch in loader``) is bounded by the cut;
        a kept iterator (``next(it)``) is not."""
        return any(cut_pass["driven"] for cut_pass in self.state.passes)

    def report(self) -> Any:
        return [{k: v for k, v in item.items() if k != "frame"} for item in self.left]


class Fit(object):
    """One framework fit under way: where the user called it, how to stop it, the user loops
    that hold the call, and its report entry once the budget has stopped it."""

    __slots__ = ("chain", "left", "site", "stop")

    def __init__(self, stop: Callable[[], None], site: Optional[str], chain: Any) -> None:
        self.stop, self.site, self.chain = stop, site, chain
        self.left: Optional[Dict[str, Any]] = None


def install(run: Run) -> None:
    budget = run.budget = StepBudget(run)
    builtins.__repairbot_leaving__ = False  # type: ignore[attr-defined]
    builtins.__repairbot_leave__ = budget.check  # type: ignore[attr-defined]
    if run.hooks is not None:
        run.hooks.step_post.add(lambda optimizer, args, kwargs: budget.on_step(sys._getframe(1)))
