#!/usr/bin/env bash
# Sets up .venv and runs the whole test suite, in parallel on every core.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/typecheck_harness.sh  # the harness at Python 3.8 (tests/test_harness_types.py too)
export OMP_NUM_THREADS=1
exec .venv/bin/python -m pytest -n auto -p no:cacheprovider "$@"
