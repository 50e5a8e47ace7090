#!/usr/bin/env bash
# Sets up .venv and runs the whole test suite, in parallel on every core.
#
#   bash scripts/test.sh [PYTEST ARGS...]          every test (the harness typecheck at Python 3.8
#       is one of them: tests/test_harness_types.py)
#   bash scripts/test.sh --quick [PYTEST ARGS...]  the inner loop: every test not marked torch or
#       slow (unit tests of each layer, the pattern cases replayed, lint rules) plus the one live
#       end-to-end `repairbot fix` marked quick; the exhaustive cross-products (tests/test_bytes.py,
#       tests/test_fuzz.py), the lint rules' three passes over real files (~67 CPU-s) and the harness
#       typecheck are left to the whole suite.
# Setup (scripts/setup.sh) runs first when .venv is missing (a clean clone, as in CI) or
# pyproject.toml is newer than the last setup; otherwise the venv is current and it is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
# worksteal: a worker that runs out of tests takes the unstarted half of another's queue, so the
# cores finish together however unevenly the seconds-long live tests fall in collection order
XDIST=(-n auto --dist worksteal)
export OMP_NUM_THREADS=1
STAMP=.venv/.setup-done  # written after a setup that succeeded

if [ ! -x .venv/bin/python ] || [ ! -e "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    bash scripts/setup.sh
    touch "$STAMP"
fi

if [ "${1:-}" = "--quick" ]; then
    shift
    exec .venv/bin/python -m pytest "${XDIST[@]}" -p no:cacheprovider -m "quick or (not torch and not slow)" \
        --ignore=tests/test_bytes.py --ignore=tests/test_fuzz.py \
        --deselect=tests/test_harness_types.py::test_the_harness_type_checks_at_python_3_8 \
        --deselect=tests/test_lint_rules.py::test_unsafe_fixes_of_real_files_compile_and_bind_every_name \
        --deselect=tests/test_lint_rules.py::test_prefilters_skip_no_real_file_a_rule_reports_on \
        --deselect=tests/test_lint_rules.py::test_positions_of_the_statements_with_findings_equal_the_whole_modules \
        "$@"
fi

exec .venv/bin/python -m pytest "${XDIST[@]}" -p no:cacheprovider "$@"
