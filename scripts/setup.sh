#!/usr/bin/env bash
# Creates .venv (once) with repairbot and its test tools (torch is in the test extra: repairbot
# itself never imports it).
#
# torch, where the venv lacks it, is installed first, as the machine needs it:
# - an existing torch is left alone;
# - a machine with an NVIDIA GPU (nvidia-smi works) gets the default build (CUDA) from the
#   configured index;
# - any other machine gets the CPU build from the PyTorch CPU wheel index (a plain
#   `pip install torch` on Linux pulls a multi-GB CUDA build), or, when that index cannot be
#   reached within a few seconds, from the configured index (a local mirror, a wheel folder).
#
#   bash scripts/setup.sh --print-plan   prints the torch step it would run, changes nothing
#
# Environment: PYTHON (the interpreter that makes the venv, default python3), VENV (default
# .venv), TORCH_SPEC (default torch==2.13.0), TORCH_CPU_INDEX (default the PyTorch CPU index).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
PROBE_TIMEOUT=5

# One line: "keep" (torch is there), or the pip arguments that install it.
torch_plan() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
        echo "keep"
    elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        echo "install $TORCH_SPEC"
    elif "$PYTHON" - "$TORCH_CPU_INDEX" "$PROBE_TIMEOUT" >/dev/null 2>&1 <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=float(sys.argv[2])) as answer:
    sys.exit(0 if answer.status == 200 else 1)
EOF
    then
        echo "install --index-url $TORCH_CPU_INDEX $TORCH_SPEC"
    else
        echo "install $TORCH_SPEC"
    fi
}

if [ "${1:-}" = "--print-plan" ]; then
    torch_plan
    exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@" 2>&1 | grep -v "is ignored: it is neither" || true; }
plan="$(torch_plan)"
if [ "$plan" != "keep" ]; then
    # shellcheck disable=SC2086  # the plan is pip's arguments, split on purpose
    pip $plan
fi
pip install -e ".[test]"
"$VENV/bin/python" -c "import torch, libcst, repairbot" || { echo "setup failed" >&2; exit 1; }
