"""The step budget: a hand-written loop is left after ``max_steps`` optimizer steps.

When the budget is spent, the loops that hold the step (in its frame, and the loops of the
calling frames that hold the call) are marked; each breaks at the start of its next
iteration (see loops.py), so the iteration that took the step finishes and the script goes
on after the outermost one: evaluation, plotting, sampling, saving all run. A break is a
real ``break``: ``with`` blocks and ``finally`` clauses run, ``for ... else`` does not.

A framework's own training loop is ended through the framework's stop instead and reported
here as a left run of kind "trainer" (Hugging Face's Trainer: probes/hf_trainer.py).
"""

import builtins
import sys
from typing import Any, Dict, List, Optional, Set, Tuple

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

    def ended_run(self, call_site: Any, steps: int) -> None:
        """A framework's training run (called at ``call_site``) ended by its own stop after
        ``steps`` steps of the budget: reported as a left loop of kind "trainer"."""
        self.left.append({"loop": call_site, "kind": "trainer", "step": call_site, "steps": steps,
                          "frame": None, "left": True})

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


def install(run: Run) -> None:
    budget = run.budget = StepBudget(run)
    builtins.__repairbot_leaving__ = False  # type: ignore[attr-defined]
    builtins.__repairbot_leave__ = budget.check  # type: ignore[attr-defined]
    if run.hooks is not None:
        run.hooks.step_post.add(lambda optimizer, args, kwargs: budget.on_step(sys._getframe(1)))
