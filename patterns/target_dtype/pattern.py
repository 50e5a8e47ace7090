"""target-dtype: class targets of the wrong dtype given to a loss (float labels to cross_entropy).

This module holds the pattern and its wiring; ``losses.py`` finds the loss call and its kind,
``locator.py`` decides where the conversion goes (or why not), ``labels.py`` reads how the
labels are bound and used, and ``rewrites.py`` holds the fixes.
"""

from __future__ import annotations

import re
from pathlib import Path

from repairbot.analysis import (
    dtype_name,
    source,
)
from repairbot.edits import Site
from repairbot.evidence import Evidence, Scope
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure

from .labels import FLOATING, INTEGER
from .locator import Locator
from .losses import PROBABILITY_LOSSES, LossCall, remedy_text
from .rewrites import CreationDtype, TargetMethod


class TargetDtype(Pattern):
    """Converts the loss's targets to the dtype the loss takes: ``.long()`` on class indices (``.float()`` for BCE).

    What it fixes:
        Class labels that reach ``nn.CrossEntropyLoss`` / ``F.cross_entropy`` / ``nll_loss`` (or
        ``multi_margin_loss``) as floats or int32: read from a CSV or a numpy array with the
        features (``np.loadtxt`` gives float64), made with ``dtype=torch.float32``, or int32
        from ``np.int32`` data. Also the reverse family: 0/1 labels that reach ``nn.BCELoss``,
        ``nn.BCEWithLogitsLoss`` or ``nn.HuberLoss`` as integers (``torch.long``), which these
        losses refuse; they get ``.float()``.

    Why it fails:
        Class targets are indices and must be int64: ``RuntimeError: expected target dtype to
        be Long or Byte, but got Float`` (2.x), ``expected scalar type Long but found Float``
        (``Int``, ``Double``; 1.5 to 1.13), ``Expected object of scalar type Long but got
        scalar type Float for argument #2 'target'`` (up to 1.4), and on a GPU
        ``"nll_loss_forward_reduce_cuda_kernel_2d_index" not implemented for 'Float'``. BCE
        takes float targets: ``Found dtype Long but expected Float`` (BCELoss, HuberLoss),
        ``result type Float can't be cast to the desired output type Long``
        (BCEWithLogitsLoss; recognised only with its frames, since in-place arithmetic on an
        integer tensor says the same).

    Example:
        ``loss = criterion(logits, labels)`` with ``labels`` traced as ``[2] float32`` becomes
        ``loss = criterion(logits, labels.long())``. The fix goes on the loss call, the one
        place that needs int64, so that other uses of the labels (accuracy, metrics) are left
        as they were. Only when the labels are made once, by a torch call that writes their
        dtype, and are read nowhere but as class targets (and in comparisons, ``len()``,
        ``.size()``/``.shape``) is the creation the obviously right place, once for every epoch
        that reuses the tensor: ``torch.tensor(rows, dtype=torch.float32)`` gets
        ``dtype=torch.long``, ``torch.full((b,), real_label)`` of a whole-number fill value
        (followed to where it is written, ``real_label = 1.``) gets ``dtype=torch.long`` added,
        ``.type(torch.float)`` becomes ``.type(torch.long)`` and ``.float()`` ``.long()``.
        Labels unpacked from a loader (``for x, y in loader``) are followed into the project's
        one Dataset's ``__getitem__`` (``return self.x[i], self.y[i]`` -> ``self.y = ...``) when
        every loop that unpacks them reads them only that way and the Dataset only returns them.
        Labels that reach the loss as a function's parameter or a function's return value are
        followed back (``ValueWalk``: the traced call site's argument, the one ``return``) to the
        call that makes them (``y = torch.randint(...).squeeze(1).float()`` in ``dummy_data()``
        -> ``.long()``), and cast there when, read forward from there through the names, parameters
        and returns they pass, they feed only class-index losses (the failing call among them)
        and dtype-blind reads: one cast for every loss call. Labels also read as numbers
        elsewhere (a regression loss, arithmetic) keep the fix at the loss call. The same holds
        for integer labels of a float-target loss (a GAN's real and fake labels given to
        ``nn.BCELoss`` at several calls): ``torch.ones(b, 1, dtype=torch.int64)`` gets
        ``dtype=torch.float32`` (``torch.long`` -> ``torch.float``), ``torch.full((b,),
        real_label)`` of a whole-number fill value gets ``dtype=torch.float`` added, ``.long()``
        becomes ``.float()``; an in-place ``label.fill_(fake_label)`` between the loss calls
        reads them blind there. Labels also read as integers (``torch.bincount(labels)``) keep
        ``.float()`` at the loss call.

    Fix safety:
        Safe for integer targets (int32 to int64, or 0/1 integers to float, lose nothing).
        Unsafe for float class labels: ``.long()`` truncates, which is right for labels that are
        whole numbers (``2.0``), the usual case, but the run does not check the values.

    Not handled:
        Float targets of the input's own shape (class probabilities or one-hot rows: soft labels,
        which ``cross_entropy`` accepts since 1.10, but ``nll_loss`` does not), targets that
        require grad (a model's output, not labels), ``torch.full`` labels of a fill value that is
        not a whole number (``0.9``: a smoothed BCE label, which ``.long()`` would make class 0), targets
        made by a sigmoid or softmax (probabilities) or by ``torch.randn``/``torch.rand`` (regression
        values), integer BCE targets made by ``torch.randint`` with a bound above 2 (class
        numbers, not 0/1 labels: as floats they would be targets outside [0, 1]), ``(N, C)`` float targets of
        ``MultiLabelMarginLoss`` (multi-hot rows, meant for ``BCEWithLogitsLoss``), a loss that is
        not a classification loss or cannot be told, and a loss called through another package or
        with ``*args``: declined with the remedy.
    """

    ID = "target-dtype"
    TITLE = "Loss targets of the wrong dtype (float class labels, integer BCE labels)"
    TAGS = frozenset({"dtype", "loss"})
    # the usual case, float class labels, is unsafe (see Fix safety); integer targets are safe
    APPLICABILITY = Applicability.UNSAFE
    SIGNATURES = (
        # 2.x: nll_loss / cross_entropy
        signature("RuntimeError", phrase("expected target dtype to be Long") + r"[^,]*,\s+but\s+got\s+(?P<found>\w+)"),
        # 1.5 to 1.13 (also multi_margin_loss, multilabel_margin_loss in 2.x)
        signature("RuntimeError", r"expected\s+scalar\s+type\s+(?P<expected>Long)\s+but\s+found\s+(?P<found>\w+)"),
        # CUDA: the kernel dispatched on the target's dtype
        signature(
            ("RuntimeError", "NotImplementedError"),
            r"\"(?P<kernel>nll_loss\w*_index)\"\s+not\s+implemented\s+for\s+'(?P<found>\w+)'",
        ),
        # up to 1.4, for class targets (Long expected) and BCE targets (Float expected) alike
        signature(
            "RuntimeError",
            r"Expected\s+object\s+of\s+scalar\s+type\s+(?P<expected>\w+)\s+but\s+got\s+scalar\s+type\s+(?P<found>\w+)"
            r"\s+for\s+argument\s+#\d+\s+'(?P<argument>target)'",
        ),
        # BCELoss / HuberLoss given integer targets (1.6+, then 1.5)
        signature("RuntimeError", rf"Found\s+dtype\s+(?P<found>{INTEGER})\s+but\s+expected\s+(?P<expected>{FLOATING})\b"),
        signature("RuntimeError", rf"expected\s+dtype\s+(?P<expected>{FLOATING})\s+but\s+got\s+dtype\s+(?P<found>{INTEGER})\b"),
        # BCEWithLogitsLoss given integer targets: only with its frames (see match())
        signature(
            "RuntimeError",
            rf"result\s+type\s+(?P<expected>{FLOATING})\s+can't\s+be\s+cast\s+to\s+the\s+desired\s+output\s+type\s+"
            rf"(?P<found>{INTEGER})\b(?P<cast>)",
        ),
    )
    EVIDENCE = frozenset({"locals", "failing_module"})
    # A dtype does not depend on how many samples a batch holds.
    BATCH_INVARIANT = True
    REWRITES = (TargetMethod, CreationDtype)

    def match(self, failure: Failure) -> re.Match[str] | None:
        for sig in self.SIGNATURES:
            found = sig.match(failure.exc_type, failure.message)
            if found is None:
                continue
            if found.groupdict().get("cast") is not None and not any(
                f.function == "binary_cross_entropy_with_logits" for f in failure.frames
            ):
                continue  # `x += 0.5` on an integer tensor says the same
            return found
        return None

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the loss is computed inside a library, not in the project's code")
        found = dtype_name(match["found"]) or match["found"]
        expected = dtype_name(match.groupdict().get("expected")) or "int64"
        want = "long" if expected == "int64" else "float"
        src = source(sources, frame.file)
        if src is None:
            return self.decline(f"cannot read {report_path(Path(frame.file))}", at=frame)
        scope = evidence.scope(frame) if evidence else Scope()
        loss = LossCall.find(src, frame, failure, scope)
        if isinstance(loss, str):
            return self.decline(loss, diagnosis=remedy_text(want, None), at=frame)
        # 1.10+ (the "target dtype" wording): cross_entropy takes a float target of the input's
        # shape as class probabilities, so a float target it refuses is not of the input's shape
        probabilities_accepted = "target dtype" in match.group(0) and loss.name in PROBABILITY_LOSSES
        return Locator(
            self, failure, evidence, sources, src, frame, scope, loss, found, want, probabilities_accepted
        ).locate()
