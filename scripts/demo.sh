#!/usr/bin/env bash
# The quickstart demo: repair a bundled broken training script in a throwaway git repository,
# showing the diff, the evidence, the report and the fix branch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
demo="$(mktemp -d "${TMPDIR:-/tmp}/repairbot-demo-XXXXXX")"
cp fixtures/cnn_flatten_size/*.py "$demo"/
cd "$demo"
git init -q -b main
git add -A
git -c user.name=demo -c user.email=demo@example.com commit -q -m "a training script that crashes"
echo "== the script, as committed, crashes:"
"$ROOT/.venv/bin/python" train.py --epochs 1 2>&1 | tail -n 5 || true
echo
echo "== repairbot fix train.py --json report.json"
status=0
"$ROOT/.venv/bin/repairbot" fix train.py --json "$demo/report.json" || status=$?
echo
echo "== the fix branch:"
git --no-pager log --all --oneline --decorate
echo
echo "== the JSON report's evidence for attempt 1:"
"$ROOT/.venv/bin/python" -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps(r['attempts'][0]['failure']['evidence'], indent=2))" "$demo/report.json"
echo
echo "(demo repository: $demo)"
exit $status
