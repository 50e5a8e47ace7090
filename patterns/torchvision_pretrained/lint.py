"""torchvision-pretrained: the ``pretrained=`` argument that torchvision replaced by ``weights=``."""

from __future__ import annotations

import libcst as cst

from repairbot.lint.rule import Invalid, LintRule, Valid
from repairbot.types import Applicability

# Classification builders whose `pretrained=True` meant the IMAGENET1K_V1 weights (torchvision's
# deprecation warning: "The current behavior is equivalent to passing `weights=..._Weights.IMAGENET1K_V1`").
_IMAGENET_V1 = frozenset({
    "alexnet", "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small",
    "mnasnet0_5", "mnasnet1_0", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "squeezenet1_0", "squeezenet1_1",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
    "wide_resnet50_2", "wide_resnet101_2", "densenet121", "densenet161", "densenet169", "densenet201",
    "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
    *(f"efficientnet_b{i}" for i in range(8)),
})
_ARGUMENTS = {"pretrained": "weights", "pretrained_backbone": "weights_backbone"}


class TorchvisionPretrained(LintRule):
    """Finds torchvision model builders called with the deprecated ``pretrained=`` argument.

    What it finds:
        A call of a ``torchvision.models`` builder (``resnet50``, ``detection.fasterrcnn_resnet50_fpn``...,
        under any import alias) with ``pretrained=`` or ``pretrained_backbone=``.

    Why it matters:
        torchvision deprecated ``pretrained`` in 0.13 in favour of ``weights`` (several weights
        per model) and warns that it may be removed; code written against it breaks when it
        goes, and ``pretrained=True`` silently means one particular set of weights that the
        code does not name.

    Fix safety:
        ``pretrained=False`` becomes ``weights=None`` (and ``pretrained_backbone=False``
        ``weights_backbone=None``): safe, the same model. ``pretrained=True`` becomes
        ``weights="IMAGENET1K_V1"`` for the ImageNet classification builders, whose legacy
        weights those are (torchvision's own warning names them): safe, the same weights. Other
        cases (detection and video models, a variable) are reported without a fix:
        ``weights="DEFAULT"`` gives the best current weights, which are not the same.

    Not handled:
        Models built through ``torch.hub.load`` or ``timm``; ``pretrained`` passed positionally.
    """

    ID = "torchvision-pretrained"
    TITLE = "torchvision model built with the deprecated pretrained= argument"
    MESSAGE = "`pretrained=` is deprecated: pass `weights=`"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"pretrained", b"torchvision")

    VALID = (
        Valid("""
            import torchvision
            model = torchvision.models.resnet50(weights="IMAGENET1K_V2")
            other = build(pretrained=True)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torchvision
            model = torchvision.models.resnet50(pretrained=True)
            """,
            line=2, column=37, fix="safe",
            expected_fix="""
            import torchvision
            model = torchvision.models.resnet50(weights="IMAGENET1K_V1")
            """,
        ),
        Invalid(
            """
            from torchvision import models
            backbone = models.vgg16(pretrained=False, progress=False)
            """,
            line=2, column=25, fix="safe",
            expected_fix="""
            from torchvision import models
            backbone = models.vgg16(weights=None, progress=False)
            """,
        ),
        Invalid(
            """
            from torchvision.models.detection import fasterrcnn_resnet50_fpn
            model = fasterrcnn_resnet50_fpn(pretrained=True)
            """,
            line=2, column=33,
        ),
        Invalid(
            """
            import torchvision.models as tvm
            net = tvm.resnet18(pretrained=args.pretrained)
            """,
            line=2, column=20,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualify(node.func) or ""
        if not qualified.startswith("torchvision.models."):
            return
        builder = qualified.rsplit(".", 1)[-1]
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in _ARGUMENTS:
                continue
            old, new = arg.keyword.value, _ARGUMENTS[arg.keyword.value]
            value = arg.value.value if isinstance(arg.value, cst.Name) else None
            weights: str | None = None
            if value == "False":
                weights = "None"
            elif value == "True" and old == "pretrained" and qualified == f"torchvision.models.{builder}" and builder in _IMAGENET_V1:
                weights = self.context.string_literal("IMAGENET1K_V1")
            replacement = arg.with_changes(keyword=cst.Name(new), value=cst.parse_expression(weights)) if weights else None
            hint = f"`{new}={weights}` is what `{old}={value}` meant" if weights else f'`{new}="DEFAULT"` gives the best current weights'
            self.report(
                arg,
                f"`{old}=` is deprecated since torchvision 0.13 and may be removed: pass `{new}=` ({hint})",
                replacement=replacement,
            )
