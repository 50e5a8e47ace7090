"""Hugging Face's ``Trainer`` under the step budget: its training ends through its own stop.

The Trainer's loop is its own (``trainer.train()`` in the user's code), over the cut passes of
the DataLoaders it builds, so the step budget cannot leave a loop of the user's there. Each
``train()`` gets a callback for that call: after ``max_steps`` optimizer steps it sets
``control.should_training_stop``, the flag the Trainer's own ``max_steps`` uses, so the Trainer
ends training as it would at its last step (its end-of-training callbacks, logs and the
return value as usual) and the script goes on to evaluate, predict and save. The callback is
added as the call starts and removed as it returns; nothing else of the Trainer is changed.
"""

import functools
import sys
from typing import Any

from ..context import Run
from ..frames import short_site, user_call_site
from ..imports import after_import

NAME = "hf-trainer"
NEEDS_TORCH = False  # transformers imports torch itself; nothing happens unless it is imported

_MODULE = "transformers.trainer"


def _bound_train(run: Run, module: Any) -> None:
    """``module.Trainer.train`` made to run with the step budget's callback."""
    trainer_class = getattr(module, "Trainer", None)
    callbacks = sys.modules.get("transformers.trainer_callback")
    base = getattr(callbacks, "TrainerCallback", None)
    if trainer_class is None or base is None or getattr(trainer_class.train, "__repairbot_bounded__", False):
        return
    state = run.state

    class StepBudgetCallback(base):  # type: ignore[misc, valid-type]
        """Ends one ``train()`` call through the Trainer's own stop after ``max_steps`` steps."""

        def __init__(self, call_site: Any) -> None:
            self.call_site = call_site
            self.steps = 0

        def on_step_end(self, args: Any, trainer_state: Any, control: Any, **kwargs: Any) -> Any:
            self.steps += 1
            if state.step_budget and self.steps == state.max_steps and not control.should_training_stop:
                control.should_training_stop = True
                if run.budget is not None:
                    run.budget.ended_run(self.call_site, self.steps)
            return control

    real_train = trainer_class.train

    @functools.wraps(real_train)
    def train(self: Any, *args: Any, **kwargs: Any) -> Any:
        callback = StepBudgetCallback(short_site(user_call_site()))
        self.add_callback(callback)
        try:
            return real_train(self, *args, **kwargs)
        finally:
            self.remove_callback(callback)

    train.__repairbot_bounded__ = True  # type: ignore[attr-defined]
    trainer_class.train = train


def install(run: Run) -> None:
    after_import(_MODULE, functools.partial(_bound_train, run))
