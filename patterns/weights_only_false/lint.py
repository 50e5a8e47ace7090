"""weights-only-false: ``torch.load(..., weights_only=False)``, which unpickles arbitrary code."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import is_false, keyword_arg
from repairbot.lint.rule import Invalid, LintRule, Scope, Severity, Valid


class WeightsOnlyFalse(LintRule):
    """Finds ``torch.load(..., weights_only=False)``.

    What it finds:
        A ``torch.load`` call (under any alias) that passes ``weights_only=False``, or a
        ``pickle_module=`` without ``weights_only`` (``torch.load(path, pickle_module=pickle)``:
        torch.load then defaults to ``weights_only=False``).

    Why it matters:
        With ``weights_only=False`` the file is unpickled: it can hold any object, and loading
        it runs whatever code it names. Since PyTorch 2.6 ``torch.load`` loads only tensors,
        containers and allow-listed classes by default; turning that off for a checkpoint from
        elsewhere (a download, a shared drive) hands it the machine. TorchFix asked for
        ``weights_only=True`` on every call; that is now the default, so only the opt-out is
        reported.

    Fix safety:
        Reported without a fix. The remedy, the one ``repairbot fix`` applies for the
        ``weights-only`` failure, is to keep the default and allow-list the classes the
        checkpoint needs: ``with torch.serialization.safe_globals([MyConfig]): torch.load(path)``.
        Which classes those are is only known by loading the file.

    Not handled:
        ``pickle.load`` and other loaders; ``weights_only`` passed as a variable.

    Differs from TorchFix:
        ``torch.load(path)`` without ``weights_only`` (TorchFix's TOR102) is not reported,
        because since PyTorch 2.6 that call loads weights only: asking for
        ``weights_only=True`` there is noise. What does load arbitrary objects is reported
        instead: ``weights_only=False`` (which TorchFix accepts) and a ``pickle_module=``
        without ``weights_only`` (torch.load then defaults to ``weights_only=False``).
    """

    ID = "weights-only-false"
    SEVERITY = Severity.WARNING
    TITLE = "torch.load with weights_only=False (arbitrary code on load)"
    SCOPE = Scope.STATEMENT  # each finding reads its own statement and the imports alone
    MESSAGE = "weights_only=False unpickles arbitrary objects: loading runs code from the file"
    REQUIRES = ((b"weights_only", b"pickle_module"),)

    VALID = (
        Valid("""
            import torch
            state = torch.load("model.pt", weights_only=True)
            with torch.serialization.safe_globals([Config]):
                full = torch.load("full.pt")
            plain = torch.load("model.pt", pickle_module=None)
            chosen = torch.load("model.pt", pickle_module=pickle, weights_only=True)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            checkpoint = torch.load(path, map_location="cpu", weights_only=False)
            """,
            line=2, column=51, message="safe_globals",
        ),
        Invalid(
            """
            import pickle
            import torch
            state = torch.load(path, pickle_module=pickle)
            """,
            line=3, column=26, message="defaults to False",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.context.is_torch(node.func, "torch.load"):
            return
        given = keyword_arg(node, "weights_only")
        if given is None:
            # torch.load defaults to weights_only=False when a pickle_module is passed
            module = keyword_arg(node, "pickle_module")
            if module is not None and not (isinstance(module.value, cst.Name) and module.value.value == "None"):
                self.report(
                    module,
                    f"`pickle_module={self.context.code(module.value)}` without `weights_only` makes torch.load "
                    "unpickle whatever the file holds (weights_only defaults to False with a pickle_module): "
                    "loading it can run arbitrary code; drop `pickle_module` and allow-list the classes the "
                    "checkpoint needs with `torch.serialization.safe_globals([...])`",
                )
            return
        if not is_false(given.value):
            return
        self.report(
            given,
            "`weights_only=False` unpickles whatever the file holds: loading it can run arbitrary code; keep "
            "the default and allow-list the classes the checkpoint needs with "
            "`torch.serialization.safe_globals([...])`",
        )
