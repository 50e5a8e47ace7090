"""The core's probes, in the order they are installed: the one registration point.

A new core probe is a module here (see probe.py for what it declares) added to one of these
two lists; a pattern's probe lives in its folder (``patterns/<name>/probe.py``) and is loaded
by path, between the two, when the pattern is selected.
"""

from .. import health
from . import (
    argparse_batch,
    dataloader_limits,
    file_guard,
    hf_trainer,
    layer_sites,
    lightning_fit,
    linears,
    module_sites,
    notebook_progress,
    progress,
    step_budget,
)

BEFORE_PATTERNS = (progress, dataloader_limits, step_budget, lightning_fit, hf_trainer, module_sites, layer_sites, linears)
AFTER_PATTERNS = (health, argparse_batch, file_guard, notebook_progress)
