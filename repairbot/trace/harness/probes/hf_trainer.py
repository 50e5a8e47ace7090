"""Hugging Face's ``Trainer.train`` bounded by the step budget, through the Trainer's own stop.

The Trainer's loop is its own (``trainer.train()`` in the user's code), over the cut passes of
the DataLoaders it builds, so no ``break`` can be put there. ``Trainer.train`` is watched (as
``transformers.trainer`` is imported; a script without transformers never imports it for us):
each call opens a fit in the step budget (probes/step_budget.py), which counts its optimizer
steps with those of any other loop and, at ``max_steps``, sets ``control.should_training_stop``,
the flag the Trainer's own ``max_steps`` and its callbacks use. The Trainer then ends training
as at its last step (its end-of-training callbacks, logs and return value as usual) and the
script goes on to evaluate, predict and save. The call is reported as a left loop of kind
``fit`` at the user's ``trainer.train()`` line, as Lightning's ``fit`` is.

The next ``train()`` starts with the flag cleared by the Trainer itself (``on_train_begin``).
"""

from typing import Any

from ..context import Run
from ..imports import when_imported

NAME = "hf-trainer"
NEEDS_TORCH = True

TRAINER_MODULE = "transformers.trainer"


def install(run: Run) -> None:
    budget = run.budget
    if budget is None:
        return

    def train(call: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
        def stop() -> None:
            control = getattr(trainer, "control", None)
            if control is not None:
                control.should_training_stop = True

        return budget.run_fit(stop, call, trainer, *args, **kwargs)

    def watch(module: Any) -> None:
        trainer_class = getattr(module, "Trainer", None)
        if isinstance(trainer_class, type) and callable(getattr(trainer_class, "train", None)):
            run.torch_hooks().around(trainer_class, "train", train)

    when_imported(TRAINER_MODULE, watch)
