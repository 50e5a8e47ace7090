"""device-mismatch: a tensor or module left on another device than the rest of the computation.

This module holds the pattern and its wiring; ``message.py`` reads the devices the message
names, ``operands.py`` resolves the failing code against the traced locals, ``locator.py``
chooses where the move goes (or why not), ``statements.py`` has the source helpers it uses,
and ``rewrites.py`` holds the fix.
"""

from __future__ import annotations

import re

from repairbot.edits import Site
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure

from .locator import Locator
from .message import DEVICE, SAME_DEVICE, message_devices
from .rewrites import MoveToDevice


class DeviceMismatch(Pattern):
    """Moves the tensor or module that stayed on the CPU to the device of the rest, once, where it is made.

    What it fixes:
        A script that runs on a GPU but leaves one operand behind on the CPU: the batch of a
        DataLoader loop never moved (``for x, y in loader:`` without ``x.to(device)``), the
        labels forgotten while the inputs are moved, the model built but never moved, or a
        tensor created inside ``forward`` (``torch.zeros(x.size(0), 16)``) without a device.

    Why it fails:
        Every operand of one operation must be on the same device: ``RuntimeError: Expected
        all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
        (when checking argument for argument mat1 in method wrapper_CUDA_addmm)``; newer
        releases say ``but got mat1 is on cpu, different from other tensors on cuda:0``, older
        ones ``Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU``,
        ``Expected object of device type cuda but got device type cpu`` or ``Expected object
        of backend CUDA but got backend CPU``; convolutions say ``Input type
        (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same``.
        The message names the two devices (and at most an argument of a kernel); the traced
        locals at the failing line say which variable is on which device, and the source says
        where that variable was made: the loop that unpacks the batch, the line that builds
        the model, the call that creates the tensor.

    Example:
        ``for x, y in loader:`` feeding a model moved with ``.to(device)`` gets
        ``x, y = x.to(device), y.to(device)`` as the first line of the loop body (the labels
        too: the loss would fail next); ``model = Net()`` becomes ``model = Net().to(device)``;
        ``torch.zeros(x.size(0), 16)`` in ``forward`` gets ``device=x.device``. The script's
        own device variable is used; when it has none, ``device = torch.device("cuda" if
        torch.cuda.is_available() else "cpu")`` is added at the top of the function (or after
        the imports).

    Fix safety:
        Safe when the script's own device variable (or the device of a tensor already on the
        right device) does the move: it only puts data where the script already meant it to
        be. Unsafe when a device variable is introduced: the new line picks the GPU whenever
        one is available, which the script's author may not have intended everywhere.

    Not handled:
        A tensor made inside an expression (a helper's return value) or held in a plain
        attribute (``self.scale = torch.ones(...)``: the remedy is ``register_buffer``); a
        model split across several GPUs on purpose (``cuda:1 and cuda:0``); a model with
        parameters on both devices; a value assigned in several places or reaching the
        failing line from outside the project's code; Apple MPS and other accelerators' own
        message forms.
    """

    ID = "device-mismatch"
    TITLE = "Tensors or modules on different devices in one operation"
    TAGS = frozenset({"device"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        # 1.8 and later; the suffix naming the argument from about 1.10
        signature(
            "RuntimeError",
            SAME_DEVICE + rf"found at least two devices, (?P<device_a>{DEVICE}) and (?P<device_b>{DEVICE})!"
            r"(?: \(when checking argument for argument (?P<argument>\w+) in method (?P<kernel>\w+)\))?",
        ),
        # newest form: the odd argument and the device of the others
        signature(
            "RuntimeError",
            SAME_DEVICE + rf"got (?P<argument>\w+) is on (?P<device_a>{DEVICE}), different from other tensors "
            rf"on (?P<device_b>{DEVICE})(?: \(when checking argument in method (?P<kernel>\w+)\))?",
        ),
        # convolutions: only where the cuda prefix differs (scalar types differing is dtype-mismatch)
        signature(
            "RuntimeError",
            r"Input type \((?P<input_type>torch\.cuda\.[A-Za-z]+Tensor|CUDA[A-Za-z]+Type)\) and weight type "
            r"\((?P<weight_type>torch\.[A-Za-z]+Tensor|CPU[A-Za-z]+Type)\) should be the same",
        ),
        signature(
            "RuntimeError",
            r"Input type \((?P<input_type>torch\.[A-Za-z]+Tensor|CPU[A-Za-z]+Type)\) and weight type "
            r"\((?P<weight_type>torch\.cuda\.[A-Za-z]+Tensor|CUDA[A-Za-z]+Type)\) should be the same",
        ),
        # 1.5 to 1.7 (the RNN variant names 'out' first and says "them")
        signature(
            "RuntimeError",
            r"Tensor for (?:argument #\d+ )?'(?P<argument>\w+)' is on (?P<device_a>CPU|GPU(?: \d+)?), .*?"
            r"but expected (?:it|them) to be on (?P<device_b>CPU|GPU(?: \d+)?)",
        ),
        # 1.0 to 1.4
        signature(
            "RuntimeError",
            r"Expected object of device type (?P<device_b>cuda|cpu) but got device type (?P<device_a>cuda|cpu) "
            r"for argument #\d+ '(?P<argument>\w+)'",
        ),
        # up to 1.1
        signature(
            "RuntimeError",
            r"Expected object of backend (?P<device_b>CUDA|CPU) but got backend (?P<device_a>CUDA|CPU) "
            r"for argument #\d+ '(?P<argument>\w+)'",
        ),
    )
    EVIDENCE = frozenset({"locals"})
    MAX_CHANGED_LINES = 2
    BATCH_INVARIANT = True
    REWRITES = (MoveToDevice,)

    def match(self, failure: Failure) -> re.Match[str] | None:
        found = super().match(failure)
        if found is None:
            return None
        devices = message_devices(found)
        # "Expected object of backend CPU but got backend CPU" is no device mismatch
        return found if devices is None or devices[0] != devices[1] else None

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the operation that mixes devices runs inside a library, with no frame in the project's code")
        if evidence is None or evidence.failure is None:
            return self.decline("no traced run tells which variable is on which device")
        devices = message_devices(match)
        if devices is None:
            return self.decline("the message does not name the two devices")
        if devices[0] != "cpu" and devices[1] != "cpu":
            return self.decline(
                f"both devices are accelerators ({devices[0]} and {devices[1]}): the model is placed across "
                "devices on purpose, and which one each tensor belongs on is the script's design",
                diagnosis=f"move the tensor explicitly where it passes from one device to the other (e.g. `.to(\"{devices[0]}\")`)",
                at=frame,
            )
        target = devices[0] if devices[1] == "cpu" else devices[1]
        return Locator(self, failure, match, evidence, sources, target).locate()
