"""tqdm's notebook progress bar as the plain text bar, where the run has no Jupyter kernel and
no widgets: the harness must not change the script's outcome.

``from tqdm.notebook import tqdm`` draws an ipywidgets bar. The notebook's real run has a kernel
with ipywidgets; the harness runs its code as a script in an interpreter that may have neither,
where tqdm's ``status_printer`` raises ``ImportError: IProgress not found. Please update jupyter
and ipywidgets.`` at the first bar: a failure the real run never has. There, and only there,
``tqdm.notebook``'s bars (``tqdm``, ``tqdm_notebook``, ``trange``, ``tnrange``) are made
``tqdm.std``'s text bar as the module is imported. With ipywidgets installed the notebook bar
works outside a kernel (its repr is printed) and is left alone; ``tqdm.auto`` already falls
back to the text bar outside a kernel.
"""

import sys
from typing import Any

from ..context import Run
from ..imports import after_import

NAME = "notebook-progress"
NEEDS_TORCH = False

_MODULE = "tqdm.notebook"


def _in_kernel() -> bool:
    """A Jupyter kernel runs this interpreter (tqdm.autonotebook's own test)."""
    return "ipykernel.zmqshell" in sys.modules or "IPython.utils._process_emscripten" in sys.modules


def _text_bars(module: Any) -> None:
    """``module`` (tqdm.notebook, executed) with its bars made the text bar, when it cannot
    draw its own here."""
    if _in_kernel() or getattr(module, "IProgress", True) is not None:
        return
    std = getattr(module, "std_tqdm", None)
    if std is None:
        return

    class tqdm_text(std):  # type: ignore[misc, valid-type]
        """tqdm.notebook's bar, drawn as text: its one own argument (``display``) dropped."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("display", None)
            super(tqdm_text, self).__init__(*args, **kwargs)

    tqdm_text.__name__ = tqdm_text.__qualname__ = "tqdm_notebook"
    tqdm_text.__module__ = _MODULE

    def trange(*args: Any, **kwargs: Any) -> Any:
        """``tqdm.notebook.trange``: the text bar over ``range(*args)``."""
        return tqdm_text(range(*args), **kwargs)

    module.tqdm = module.tqdm_notebook = tqdm_text
    module.trange = module.tnrange = trange


def install(run: Run) -> None:
    after_import(_MODULE, _text_bars)
