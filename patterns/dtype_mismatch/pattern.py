"""dtype-mismatch: a float64 tensor (numpy's default) meets a float32 model.

This module holds the pattern and its wiring; ``message.py`` reads the dtypes the message
names, ``tracer.py`` follows the float64 operand back with the shared ``ValueWalk``
(repairbot/provenance.py) and chooses the site, ``creations.py`` says where a tensor gets its
dtype (the walk's stopping points), and ``rewrites.py`` holds the fix.
"""

from __future__ import annotations

import re

from repairbot.edits import Site
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure

from .message import (
    C_TYPE,
    FLOAT32,
    FLOAT64,
    FLOATING,
    TYPE,
    Message,
    claims,
    in_torch_layer,
    is_reduced,
)
from .rewrites import CastToFloat
from .tracer import Tracer, model_float64


class DtypeMismatch(Pattern):
    """Adds ``.float()`` where a float64 tensor enters the script, traced back from the failing operation.

    What it fixes:
        Data that reaches a float32 model as float64: numpy computes in float64 by default,
        and ``torch.from_numpy(array)``, ``torch.tensor(array)`` and ``torch.as_tensor(array)``
        keep the array's dtype. The float64 tensor is made in one place (a Dataset's
        ``__init__`` or ``__getitem__``, a preprocessing function, a module-level conversion)
        and fails far away, at the first layer, a ``torch.mm``, an LSTM or a loss.

        A model cast to float64 on purpose (``model = Net().double()``) fed a float32 input
        made by torch's default dtype (``torch.linspace``, ``torch.randn``...) while the rest
        of the traced data is float64 too (targets from numpy): the input is the odd one out,
        and ``.double()`` is added where it is made, in the vocabulary of the model's cast.

    Why it fails:
        Every operand of a matrix product or convolution must have the parameters' dtype:
        ``RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float``
        (``nn.Linear``; 2.0/2.1 without the dtypes), ``expected m1 and m2 to have the same
        dtype, but got: double != float`` (``torch.mm``, ``@``, a Linear without bias),
        ``Input type (double) and bias type (float) should be the same`` (convolutions; older:
        ``Input type (torch.DoubleTensor) and weight type (torch.FloatTensor)``, recognised
        only when the scalar types differ and the ``cuda.`` prefixes agree), ``ValueError: RNN
        input dtype (torch.float64) does not match weight dtype (torch.float32)``, ``mixed
        dtype (CPU): all inputs must share same datatype`` (normalisation layers), ``addmv
        input tensors must have the same dtype`` (``X @ w`` with a vector ``w``; also ``dot``,
        ``baddbmm``, ``nn.Bilinear``, ``PReLU`` in their words), ``expected scalar type Float
        but found Double`` (1.5 to 1.13; up to 1.4 ``Expected object of scalar type Double but
        got scalar type Float for argument #2 'mat2'``, 0.2 ``expected Double tensor (got Float
        tensor)``), and from a loss over mixed dtypes ``Found dtype Double but expected Float``
        (BCELoss in its forward, HuberLoss in ``backward()``; 1.5: ``expected dtype Float but
        got dtype Double``). ``expected scalar type Long but found ...`` and integer ``Found
        dtype Long`` are the target-dtype pattern's.

    Example:
        The run records, at each frame of the failure, the dtype of every tensor variable. From
        the float64 variable at the failing line (``x`` in ``forward``) the source is followed
        back: to the caller's argument, the loop ``for x, y in loader``, the loader's
        ``DataLoader(train_set)``, ``random_split(...)``, the Dataset's ``__getitem__``
        returning ``self.features[idx]``, and ``self.features = torch.from_numpy(features)`` in
        ``__init__``, which becomes ``torch.from_numpy(features).float()``. ``TensorDataset``,
        ``Subset``, ``enumerate``, ``zip``, ``next(iter(...))``, ``batch[0]``/``batch["x"]``,
        tuple unpacking, calls of the project's own functions and classes (another module
        included, a closure called under another name, ``step_fn = make_train_step_fn(...)``,
        when the traceback shows the call ran it) and dtype-preserving methods
        (``.to(device)``, ``.view``, indexing) are followed; for a failure in ``backward()``
        the loss's own statement is read. The conversion is written in the code's own form:
        ``torch.tensor(X)`` becomes ``torch.tensor(X, dtype=torch.float32)`` when the call
        takes keywords already (``requires_grad=True``, where ``.float()`` would give a
        non-leaf copy whose ``.grad`` stays None) or the file writes its other conversions that
        way (the float32 dtype spelled as the file spells it); otherwise, and always for
        ``torch.from_numpy``, ``.float()`` is appended.

    Fix safety:
        Safe. The fix converts the data once, where it is made, to the dtype of the model it
        feeds (the message, or the traced input of the failing layer, shows the parameters are
        float32), so every later use of that tensor sees float32 as the model does; nothing is
        cast at the failing line, which would leave other uses failing one after another. For
        a model cast to float64 on purpose, the one float32 input is made float64 the same way.

    Not handled:
        A model that is float64 itself without a cast of the project's (``dtype=torch.float64``
        parameters, a float64 prediction meeting a float32 target), or cast on purpose while
        every traced tensor is float32 (the model is the odd one out), or fed an input made
        float32 on purpose (``.float()``): declined, since either side may be the intended one.
        Half/BFloat16 mismatches (mixed precision by hand): declined with the ``torch.autocast``
        remedy, never ``.float()`` blindly. Integer inputs reaching a float layer (features or
        ids meant for an ``nn.Embedding``?), tensors made float64 on
        purpose (``.double()``, ``dtype=torch.float64``), numpy arrays a DataLoader's collate
        turns into tensors, values built by arithmetic of several tensors or passed through
        ``*args``, a custom ``collate_fn``, a ``__getitem__`` with several ``return``
        statements: declined, with where to add ``.float()``.
    """

    ID = "dtype-mismatch"
    TITLE = "A float64 tensor (from numpy) meets a float32 model"
    TAGS = frozenset({"dtype", "data"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        # nn.Linear / addmm since 2.0 (the dtypes since about 2.2); F.linear's `self and mat2`
        signature(
            "RuntimeError",
            r"\b(?P<arg_a>\w+) and (?P<arg_b>\w+) " + phrase("must have the same dtype")
            + rf"(?:,\s+but\s+got\s+(?P<first>{TYPE})\s+and\s+(?P<second>{TYPE}))?",
        ),
        # torch.mm, @, a Linear without bias (2.x)
        signature(
            "RuntimeError",
            phrase("expected m1 and m2 to have the same dtype, but got:")
            + rf"\s*(?P<first>{C_TYPE})\s*!=\s*(?P<second>{C_TYPE})",
        ),
        # 1.5 to 1.13 (and convolutions without bias, bmm in 2.x); Long expected is target-dtype's
        signature(
            "RuntimeError",
            r"expected\s+scalar\s+type\s+(?P<first>(?!Long\b)\w+)\s+but\s+found\s+(?P<second>\w+)",
        ),
        # up to 1.4; the 'target' argument is target-dtype's
        signature(
            "RuntimeError",
            r"Expected\s+object\s+of\s+scalar\s+type\s+(?P<first>(?!Long\b)\w+)\s+but\s+got\s+scalar\s+type\s+"
            r"(?P<second>\w+)\s+for\s+argument\s+#\d+\s+'(?P<argument>(?!target')\w+)'",
        ),
        # 0.2
        signature("RuntimeError", r"expected (?P<first>\w+) tensor \(got (?P<second>\w+) tensor\)"),
        # convolutions, 2.x (lower-case C++ names) and older (tensor type names); the cuda prefix
        # must agree (a differing one is device-mismatch's): see match()
        signature(
            "RuntimeError",
            r"Input\s+type\s+\((?P<input>[^()]+)\)\s+and\s+(?:weight|bias)\s+type\s+\((?P<weight>[^()]+)\)\s+"
            + phrase("should be the same"),
        ),
        # nn.RNN / LSTM / GRU
        signature(
            "ValueError",
            rf"RNN\s+input\s+dtype\s+\((?P<input>{TYPE})\)\s+does\s+not\s+match\s+weight\s+dtype\s+\((?P<weight>{TYPE})\)",
        ),
        # backward of a loss over mixed floating dtypes (1.6+, then 1.5); integer found is
        # target-dtype's (BCE given integer targets)
        signature("RuntimeError", rf"Found\s+dtype\s+(?P<second>{FLOATING})\s+but\s+expected\s+(?P<first>{FLOATING})\b"),
        signature("RuntimeError", rf"expected\s+dtype\s+(?P<first>{FLOATING})\s+but\s+got\s+dtype\s+(?P<second>{FLOATING})\b"),
        # normalisation layers (LayerNorm, BatchNorm, GroupNorm) on the CPU: mixed inputs, or a
        # float input against parameters of another dtype
        signature("RuntimeError", phrase("mixed dtype") + r"\s*\((?:CPU|CUDA)\):\s*" + phrase("all inputs must share same datatype")),
        signature(
            "RuntimeError",
            phrase("mixed dtype") + r"\s*\((?:CPU|CUDA)\):\s*" + phrase("expect parameter to have scalar type of")
            + r"\s+(?P<given>\w+)",
        ),
        # matrix-vector products (`X @ w` with a 1-d w), dot, baddbmm, Bilinear, PReLU
        signature("RuntimeError", phrase("input tensors must have the same dtype, but got") + r"\s+(?P<listed>[\w:, ]+)"),
        signature("RuntimeError", phrase("expected both vectors to have same dtype, but found") + r"\s+(?P<listed>\w+ and \w+)"),
        signature("RuntimeError", phrase("Input dtypes must be the same, got:") + r"\s+(?P<listed>[\w:, ]+)"),
        signature("RuntimeError", phrase("All tensors must have the same dtype, got") + r"\s+(?P<listed>[\w:, ]+)"),
        signature("RuntimeError", phrase("Type promoting not supported. Got") + r"\s+(?P<listed>\w+ and \w+)"),
    )
    EVIDENCE = frozenset({"locals", "failing_module"})
    # A dtype does not depend on how many samples a batch holds.
    BATCH_INVARIANT = True
    REWRITES = (CastToFloat,)

    def match(self, failure: Failure) -> re.Match[str] | None:
        for sig in self.SIGNATURES:
            found = sig.match(failure.exc_type, failure.message)
            if found is not None and claims(found):
                return found
        return None

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the operation that mixes dtypes runs inside a library, with no frame in the project's code")
        message = Message.of(match)
        reduced = list(dict.fromkeys(d for d in message.dtypes if is_reduced(d)))
        if reduced:
            return self.decline(
                f"the mismatch involves {reduced[0]} ({' and '.join(message.dtypes)}): half precision cast by hand, "
                "where .float() would undo the mixed precision the script asked for",
                diagnosis="do not cast inputs or the model with .half()/.bfloat16() by hand: run the forward pass and the "
                "loss under torch.autocast(device_type=..., dtype=torch.float16) (it casts each operation), or convert "
                "the model and every input it gets together",
                at=frame,
            )
        others = [d for d in message.dtypes if d not in (FLOAT64, FLOAT32)]
        if others:
            integer = next((d for d in others if d.startswith(("int", "uint")) or d == "bool"), None)
            if integer is not None:
                return self.decline(
                    f"an integer tensor ({integer}) meets a floating-point one ({' and '.join(message.dtypes)}): "
                    "no float64 data to convert",
                    diagnosis="if the integers are features, convert them with .float() where they are made; if they are "
                    "token or category ids, the model needs an nn.Embedding before its first layer",
                    at=frame,
                )
            return self.decline(f"the message names {' and '.join(message.dtypes)}, not float64 against float32", at=frame)
        if message.parameters == FLOAT64 or message.input == FLOAT32:
            because = "the message says the layer's parameters are float64 and its input float32"
            if evidence is None or evidence.failure is None:
                return model_float64(self, frame, because)
            return Tracer(self, failure, evidence, sources, message).model_side(because)
        if evidence is None or evidence.failure is None:
            return self.decline(
                "no traced run tells which tensor is float64",
                diagnosis="convert the data with .float() where it is made from numpy (torch.from_numpy(...).float())",
                at=frame,
            )
        module = evidence.failing_module
        # a layer with parameters (a loss has none) given a float32 input: its parameters are the float64 side
        tracer = Tracer(self, failure, evidence, sources, message)
        if module and module.input_dtype == FLOAT32 and module.devices and in_torch_layer(failure):
            return tracer.model_side(
                f"the failing {module.type or 'layer'} received a float32 input, so its own parameters are float64"
            )
        return tracer.locate()
