"""torchvision-pretrained: the ``pretrained=`` argument that torchvision replaced by ``weights=``."""

from __future__ import annotations

import libcst as cst

from repairbot.lint.rule import Invalid, LintRule, Scope, Severity, Valid
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
# the module of torchvision.models that defines a builder (`from torchvision.models.resnet import resnet152`)
_SUBMODULE = {
    **{name: "resnet" for name in _IMAGENET_V1 if name.startswith(("resnet", "resnext", "wide_resnet"))},
    **{name: "vgg" for name in _IMAGENET_V1 if name.startswith("vgg")},
    **{name: "densenet" for name in _IMAGENET_V1 if name.startswith("densenet")},
    **{name: "efficientnet" for name in _IMAGENET_V1 if name.startswith("efficientnet")},
    **{name: "mobilenetv2" for name in ("mobilenet_v2",)},
    **{name: "mobilenetv3" for name in ("mobilenet_v3_large", "mobilenet_v3_small")},
    **{name: "squeezenet" for name in ("squeezenet1_0", "squeezenet1_1")},
    **{name: "shufflenetv2" for name in ("shufflenet_v2_x0_5", "shufflenet_v2_x1_0")},
    **{name: "mnasnet" for name in ("mnasnet0_5", "mnasnet1_0")},
    "alexnet": "alexnet", "googlenet": "googlenet", "inception_v3": "inception",
}
# What `pretrained=True` meant for the segmentation and detection builders (their
# `handle_legacy_interface` defaults), and `pretrained_backbone=True` where not IMAGENET1K_V1.
_TASK_WEIGHTS = {
    **{name: "COCO_WITH_VOC_LABELS_V1" for name in (
        "deeplabv3_resnet50", "deeplabv3_resnet101", "deeplabv3_mobilenet_v3_large", "fcn_resnet50", "fcn_resnet101",
        "lraspp_mobilenet_v3_large")},
    **{name: "COCO_V1" for name in (
        "fasterrcnn_resnet50_fpn", "fasterrcnn_mobilenet_v3_large_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn",
        "maskrcnn_resnet50_fpn", "retinanet_resnet50_fpn", "keypointrcnn_resnet50_fpn", "ssd300_vgg16",
        "ssdlite320_mobilenet_v3_large", "fcos_resnet50_fpn")},
}
_BACKBONE_WEIGHTS = {"ssd300_vgg16": "IMAGENET1K_FEATURES"}


class TorchvisionPretrained(LintRule):
    """Finds torchvision model builders called with the deprecated ``pretrained=`` argument.

    What it finds:
        A call of a ``torchvision.models`` builder (``resnet50``, ``detection.fasterrcnn_resnet50_fpn``...,
        under any import alias, ``from torchvision.models.resnet import resnet152`` included)
        with ``pretrained=`` or ``pretrained_backbone=``, or a literal ``True``/``False`` as its
        first positional argument (``resnet50(True)``, which torchvision reads as ``pretrained``).

    Why it matters:
        torchvision deprecated ``pretrained`` in 0.13 in favour of ``weights`` (several weights
        per model) and warns that it may be removed; code written against it breaks when it
        goes, and ``pretrained=True`` silently means one particular set of weights that the
        code does not name.

    Fix safety:
        ``pretrained=False`` becomes ``weights=None`` (and ``pretrained_backbone=False``
        ``weights_backbone=None``): safe, the same model. ``pretrained=True`` becomes
        ``weights="IMAGENET1K_V1"`` for the ImageNet classification builders, whose legacy
        weights those are (torchvision's own warning names them), the COCO weights for the
        segmentation (``COCO_WITH_VOC_LABELS_V1``) and detection (``COCO_V1``) builders, and
        their backbones' ImageNet weights for ``pretrained_backbone=True``: safe, the same
        weights. Other cases (video models, a variable) are reported without a fix:
        ``weights="DEFAULT"`` gives the best current weights, which are not the same.

    Not handled:
        Models built through ``torch.hub.load`` or ``timm``; video and quantized builders'
        weights (reported without a fix).

    Differs from TorchFix:
        The weights are written as their name (``weights="IMAGENET1K_V1"``), which every
        builder accepts, where TorchFix writes the enum (``models.ResNet50_Weights.IMAGENET1K_V1``)
        and adds ``from torchvision import models``, because an added import is an edit
        outside the finding. The call keeps its own line breaks (TorchFix joins a call split
        over lines). A call with both ``pretrained=`` and ``pretrained_backbone=`` gets one
        finding per argument.
    """

    ID = "torchvision-pretrained"
    SEVERITY = Severity.HINT
    TITLE = "torchvision model built with the deprecated pretrained= argument"
    SCOPE = Scope.STATEMENT  # each finding reads its own statement and the imports alone
    MESSAGE = "`pretrained=` is deprecated: pass `weights=`"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"torchvision",)  # not b"pretrained": `resnet50(True)` passes it positionally

    VALID = (
        Valid("""
            import torchvision
            model = torchvision.models.resnet50(weights="IMAGENET1K_V2")
            other = build(pretrained=True)
        """),
        Valid("""
            from torchvision.models.vgg import make_layers, cfgs
            layers = make_layers(cfgs["D"], False)
            net = torchvision.models.ResNet(block, [2, 2, 2, 2])
        """),
    )
    INVALID = (
        Invalid(
            """
            import torchvision
            model = torchvision.models.resnet50(pretrained=True)
            """,
            line=2, column=37, fix=Applicability.SAFE,
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
            line=2, column=25, fix=Applicability.SAFE,
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
            line=2, column=33, fix=Applicability.SAFE,
            expected_fix="""
            from torchvision.models.detection import fasterrcnn_resnet50_fpn
            model = fasterrcnn_resnet50_fpn(weights="COCO_V1")
            """,
        ),
        Invalid(
            """
            import torchvision
            model = torchvision.models.video.r3d_18(pretrained=True)
            """,
            line=2, column=41,
        ),
        Invalid(
            """
            import torchvision
            model = torchvision.models.resnet50(True)
            """,
            line=2, column=37, fix=Applicability.SAFE,
            expected_fix="""
            import torchvision
            model = torchvision.models.resnet50(weights="IMAGENET1K_V1")
            """,
        ),
        Invalid(
            """
            from torchvision.models.resnet import resnet152
            model = resnet152(pretrained=True)
            """,
            line=2, column=19, fix=Applicability.SAFE,
            expected_fix="""
            from torchvision.models.resnet import resnet152
            model = resnet152(weights="IMAGENET1K_V1")
            """,
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
        if not builder.islower():
            return  # a class (ResNet), a weights enum: not a builder
        for index, arg in enumerate(node.args):
            if arg.star:
                return
            if arg.keyword is None:
                # `resnet50(True)`: torchvision reads a first positional boolean as `pretrained`
                if index != 0 or not (isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False")):
                    continue
                old = "pretrained"
            elif arg.keyword.value in _ARGUMENTS:
                old = arg.keyword.value
            else:
                continue
            self._check(node, arg, old, qualified, builder)

    def _check(self, node: cst.Call, arg: cst.Arg, old: str, qualified: str, builder: str) -> None:
        new = _ARGUMENTS[old]
        value = arg.value.value if isinstance(arg.value, cst.Name) else None
        legacy: str | None = None
        if value == "True" and old == "pretrained":
            if qualified in (f"torchvision.models.{builder}", f"torchvision.models.{_SUBMODULE.get(builder)}.{builder}"):
                legacy = "IMAGENET1K_V1" if builder in _IMAGENET_V1 else None
            if legacy is None and qualified.startswith(("torchvision.models.segmentation.", "torchvision.models.detection.")):
                legacy = _TASK_WEIGHTS.get(builder)
        elif value == "True" and old == "pretrained_backbone" and builder in _TASK_WEIGHTS:
            legacy = _BACKBONE_WEIGHTS.get(builder, "IMAGENET1K_V1")
        weights = "None" if value == "False" else (self.context.string_literal(legacy) if legacy else None)
        replacement = None
        if weights is not None:
            keyword = cst.Name(new)
            equal = arg.equal if arg.keyword is not None else cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
            replacement = arg.with_changes(keyword=keyword, equal=equal, value=cst.parse_expression(weights))
        written = f"{old}={value}" if arg.keyword is not None else f"{value} (positional `{old}`)"
        hint = f"`{new}={weights}` is what `{written}` meant" if weights else f'`{new}="DEFAULT"` gives the best current weights'
        self.report(
            arg,
            f"`{old}=` is deprecated since torchvision 0.13 and may be removed: pass `{new}=` ({hint})",
            replacement=replacement,
        )
