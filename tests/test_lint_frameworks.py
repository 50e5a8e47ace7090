"""Every lint rule over code written for Lightning: what Lightning does itself is not reported.

The Lightning file follows the shape of Lightning-AI/pytorch-lightning's
``examples/pytorch/basics`` LightningModules (Apache-2.0), written here by hand (not copied),
with the mistakes users post added; the plain ``nn.Module`` and the local class named
``LightningModule`` in the same file are look-alikes that keep every finding.
"""

from __future__ import annotations

from pathlib import Path

from repairbot.lint.engine import FixLevel, lint_bytes
from repairbot.registry import all_rules

LIGHTNING_FILE = '''\
import torch
from torch import nn
import torch.nn.functional as F
from lightning.pytorch import LightningModule as LM


class LitClassifier(LM):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(28 * 28, 64), nn.Dropout(0.1), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x.view(x.size(0), -1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        x = x.cuda()
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)
        self.to("cuda")
        return optimizer


class LitFinetuned(LitClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        self.cuda()
        return optimizer


class LightningModule(nn.Module):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        self.to("cuda")
        return optimizer


class Plain(nn.Module):
    def build(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        self.cuda()
        return optimizer
'''


def _findings(source: str) -> list[tuple[int, str, bool]]:
    result = lint_bytes(source.encode(), Path("example.py"), "example.py", list(all_rules()), FixLevel.NONE)
    assert result.error is None, result.error
    return [(f.line, f.rule, "LightningModule" in f.message) for f in result.findings]


def test_lightning_file_has_exactly_the_framework_findings() -> None:
    # LightningModules (an aliased base, a subclass of a user subclass): no optimizer-before-
    # to-device in configure_optimizers (Lightning moves the module first), and a hard-coded
    # CUDA device advised as `self.device`, without the "cuda if available" fix.
    # The local `LightningModule` and `Plain` are plain nn.Modules: the ordinary findings.
    assert _findings(LIGHTNING_FILE) == [
        (17, "hardcoded-cuda", True),
        (22, "hardcoded-cuda", True),
        (29, "hardcoded-cuda", True),
        (35, "optimizer-before-to-device", False),
        (36, "hardcoded-cuda", False),
        (42, "optimizer-before-to-device", False),
        (43, "hardcoded-cuda", False),
    ]


def test_cuda_in_a_lightning_step_hook_is_fixed_to_the_modules_device() -> None:
    # only the training_step's `x.cuda()` becomes `x.to(self.device)`; the module's own
    # `self.cuda()`/`self.to("cuda")` in configure_optimizers stay advice; the look-alike
    # nn.Modules (the local `LightningModule`, `Plain`) get the ordinary run-time choice
    result = lint_bytes(LIGHTNING_FILE.encode(), Path("example.py"), "example.py", list(all_rules()), FixLevel.SAFE)
    assert result.new_data is not None
    before, after = LIGHTNING_FILE.splitlines(), result.new_data.decode().splitlines()
    changed = [(number, line) for number, (old, line) in enumerate(zip(before, after, strict=True), 1) if old != line]
    assert changed == [
        (17, "        x = x.to(self.device)"),
        (36, '        self.to("cuda" if torch.cuda.is_available() else "cpu")'),
        (43, '        self.to("cuda" if torch.cuda.is_available() else "cpu")'),
    ]


def test_a_file_without_lightning_is_unchanged() -> None:
    plain = LIGHTNING_FILE.replace("from lightning.pytorch import LightningModule as LM", "from mylib import LM")
    assert [(line, rule) for line, rule, lightning in _findings(plain) if not lightning] == [
        (17, "hardcoded-cuda"), (21, "optimizer-before-to-device"), (22, "hardcoded-cuda"),
        (28, "optimizer-before-to-device"), (29, "hardcoded-cuda"),
        (35, "optimizer-before-to-device"), (36, "hardcoded-cuda"),
        (42, "optimizer-before-to-device"), (43, "hardcoded-cuda"),
    ]


VALIDATION_FILE = '''\
import torch
from torch import nn
import lightning as L


class Lit(L.LightningModule):
    def validation_step(self, batch, batch_idx):
        self.net.eval()
        for chunk in batch:
            self.log("val", self.net(chunk).sum())


class Evaluator(nn.Module):
    def validation_step(self, batch, batch_idx):
        self.net.eval()
        for chunk in batch:
            self.log("val", self.net(chunk).sum())
'''


def test_validation_step_runs_without_grad_only_in_a_lightning_module() -> None:
    # Lightning's evaluation loop turns gradients off; the same method of a plain module does not
    assert _findings(VALIDATION_FILE) == [(17, "eval-without-no-grad", False)]
