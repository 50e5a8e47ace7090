#!/usr/bin/env bash
# Stage A's first step: repairbot's own environment, apart from the project's Python.
#
# The project's interpreter (the `python` input) may be any Python 3.8+ with torch and gets
# nothing installed. repairbot itself needs 3.11+: the `repairbot-python` input, else the first
# 3.11+ of python3, python3.13, python3.12, python3.11 and /usr/bin/python3 (every GitHub-hosted
# Ubuntu image has one). With `install: false` that interpreter must have repairbot already.
set -euo pipefail

supported() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

candidates=()
if [ -n "${REPAIRBOT_TOOL_PYTHON:-}" ]; then
    candidates=("$REPAIRBOT_TOOL_PYTHON")
else
    candidates=(python3 python3.13 python3.12 python3.11 /usr/bin/python3)
fi
tool=""
for candidate in "${candidates[@]}"; do
    if command -v "$candidate" >/dev/null 2>&1 && supported "$candidate"; then
        tool="$(command -v "$candidate")"
        break
    fi
done
if [ -z "$tool" ]; then
    echo "::error title=repairbot::no Python 3.11+ for repairbot itself (tried ${candidates[*]}): set the input repairbot-python"
    exit 2
fi

if [ "${REPAIRBOT_INSTALL:-true}" = "false" ]; then
    if ! "$tool" -c 'import repairbot' 2>/dev/null; then
        echo "::error title=repairbot::install is false but $tool has no repairbot: install it there, or drop install: false"
        exit 2
    fi
    echo "repairbot is used from $tool (install: false)"
    delimiter="ghadelimiter_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    printf 'python<<%s\n%s\n%s\n' "$delimiter" "$tool" "$delimiter" >> "$GITHUB_OUTPUT"
    exit 0
fi
exec "$tool" "$(dirname "$0")/stage_a.py" install
