#!/usr/bin/env bash
# Type-checks the tracing harness at the oldest Python it runs under (3.8): the package
# repairbot/trace/harness/, its launcher and the patterns' probe.py files, with the
# [tool.mypy] config of pyproject.toml. mypy 1.15 is the last release that checks 3.8 code,
# so it lives in a venv of its own (.venv-harness-mypy, made once); the imports resolve in
# .venv (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${HARNESS_MYPY_VENV:-.venv-harness-mypy}"
MYPY_SPEC="mypy==1.15.0"
if ! "$VENV/bin/python" -c "import mypy" >/dev/null 2>&1; then
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip --disable-pip-version-check -q install "$MYPY_SPEC" 2>&1 | grep -v "is ignored: it is neither" || true
fi
exec "$VENV/bin/python" -m mypy --python-version 3.8 --python-executable .venv/bin/python \
    repairbot/trace/harness repairbot/trace/bootstrap.py patterns/*/probe.py
