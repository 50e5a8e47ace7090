"""The harness type-checks at the oldest Python it runs under (scripts/typecheck_harness.sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_harness_type_checks_at_python_3_8() -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "typecheck_harness.sh")],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
