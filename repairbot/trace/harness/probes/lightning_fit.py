"""Lightning's ``Trainer.fit`` bounded by the step budget, through Lightning's own clean stop.

A Lightning script's loop is the Trainer's: ``max_epochs=50`` runs 50 cut passes, beyond the
step budget, and no ``break`` can be put in library code. ``Trainer.fit`` is watched (as
Lightning's trainer module is imported; a script without Lightning never imports it for us):
each call opens a fit in the step budget (probes/step_budget.py), which counts its optimizer
steps and, at ``max_steps``, sets ``trainer.should_stop``, the flag Lightning's own
``EarlyStopping`` sets. Lightning then ends the fit as it ends an early-stopped one: the
batch under way finishes, validation runs, then ``on_train_end``, the checkpoint callbacks and
teardown; the script goes on after ``fit`` (test, ``save_checkpoint``, predict). The fit is
reported as a left loop at the user's ``trainer.fit(...)`` line.

``fit`` itself resets ``should_stop`` at its start; once a stopped fit returns, the flag is put
back to False, what a fit that ran out its epochs leaves, so code after ``fit`` reads what it
would have read.
"""

from typing import Any

from ..context import Run
from ..imports import when_imported

NAME = "lightning-fit"
NEEDS_TORCH = True

# where the Trainer class is defined, in the unified package and in the standalone one
TRAINER_MODULES = ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer")


def install(run: Run) -> None:
    budget = run.budget
    if budget is None:
        return

    def fit(call: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
        stopped = []

        def stop() -> None:
            if not trainer.should_stop:  # already stopping (EarlyStopping): Lightning's own stop
                stopped.append(True)
                trainer.should_stop = True

        try:
            return budget.run_fit(stop, call, trainer, *args, **kwargs)
        finally:
            if stopped and trainer.should_stop:
                trainer.should_stop = False

    def watch(module: Any) -> None:
        trainer_class = getattr(module, "Trainer", None)
        if isinstance(trainer_class, type) and callable(getattr(trainer_class, "fit", None)):
            run.torch_hooks().around(trainer_class, "fit", fit)

    for name in TRAINER_MODULES:
        when_imported(name, watch)
