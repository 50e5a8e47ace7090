"""repairbot: repairs crashing PyTorch training scripts with one minimal, verified LibCST fix."""

from __future__ import annotations

__version__ = "0.1.0"
