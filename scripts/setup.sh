#!/usr/bin/env bash
# Creates .venv (once) with repairbot and its test tools. torch is pinned to the 2.13.0 CPU
# build where it is missing: a plain `pip install torch` would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@" 2>&1 | grep -v "is ignored: it is neither" || true; }
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    pip install "torch==2.13.0"
fi
pip install -e ".[test]"
.venv/bin/python -c "import torch, libcst, repairbot" || { echo "setup failed" >&2; exit 1; }
