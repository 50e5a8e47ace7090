"""An argparse ``--batch-size`` default forced down to the run's batch size (as DataLoaders')."""

from typing import Any

from ..context import Run
from ..frames import short_site, user_call_site

NAME = "argparse-batch-size"
NEEDS_TORCH = False


def install(run: Run) -> None:
    import argparse

    state = run.state
    real_add_argument = argparse._ActionsContainer.add_argument
    names = ("--batch-size", "--batch_size")

    def add_argument(self: Any, *args: Any, **kwargs: Any) -> Any:
        if state.force_batch and any(a in names for a in args):
            default = kwargs.get("default")
            if isinstance(default, int) and not isinstance(default, bool) and default > state.batch_size:
                kwargs["default"] = state.batch_size
                state.forced.append({
                    "what": "argparse %s default %d -> %d" % (args[0], default, state.batch_size),
                    "site": short_site(user_call_site()),
                })
        return real_add_argument(self, *args, **kwargs)

    argparse._ActionsContainer.add_argument = add_argument  # type: ignore[method-assign]
