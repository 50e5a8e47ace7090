"""The "target-size-warning" probe (runs in the harness, under the user's interpreter: Python
3.8, standard library only; loaded by path, see repairbot/trace/harness/probe.py).

MSE/L1-style losses only warn on (N, 1) vs (N,) shapes: the warning is raised at the call
instead, so that the run fails where the shapes meet.
"""

from typing import Any

NAME = "target-size-warning"
OPT_IN = True
NEEDS_TORCH = False


def install(run: Any) -> None:
    import warnings

    warnings.filterwarnings("error", message=r"Using a target size", category=UserWarning)
