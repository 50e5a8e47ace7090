"""repairbot lint on TorchFix's own test fixtures: recall of their expected findings and of their fixes.

    .venv/bin/python bench/torchfix_fixtures.py PATH/TO/torchfix [--json OUT] [--verbose]

PATH is a checkout of github.com/pytorch-labs/torchfix (nothing of it is copied here). For every
TorchFix code that a repairbot rule covers:

- checkers (``tests/fixtures/*/checker/X.py`` with the expected ``X.txt``): an expected
  (line, code) pair is found when the covering rule reports on that line (a pair expected twice
  on one line needs two findings there); findings of a covering rule on other lines are extras;
- codemods (``X.in.py`` / ``X.out.py``): each changed line of TorchFix's expected output is one
  edit (a block whose line count changes is one edit); it is reproduced when
  ``repairbot lint --fix --unsafe-fixes`` (every rule) writes the same line(s) in its place.

Misses are listed one per line so that each can be checked against the deliberate differences
that docs/lint-rules.md lists under each rule ("Differs from TorchFix"). Not a test.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repairbot.lint.engine import FixLevel, lint_bytes  # noqa: E402
from repairbot.registry import all_rules  # noqa: E402

# TorchFix code -> the repairbot rule that covers it
COVERED = {
    "TOR001": "deprecated-torch-api",  # use of a removed function
    "TOR004": "deprecated-torch-api",  # import of a removed function
    "TOR101": "deprecated-torch-api",  # use of a deprecated function
    "TOR103": "deprecated-torch-api",  # import of a deprecated function
    "TOR002": "require-grad-typo",
    "TOR003": "checkpoint-without-use-reentrant",
    "TOR102": "weights-only-false",  # torch.load without weights_only (repairbot: what loads unsafely)
    "TOR104": "nonpublic-torch-api",  # use of a non-public function
    "TOR105": "nonpublic-torch-api",  # import of a non-public function
    "TOR106": "log-one-plus",
    "TOR107": "exp-minus-one",
    "TOR201": "torchvision-pretrained",
}
# codes with no repairbot rule: logsumexp, ToTensor, singleton imports, DataLoader workers,
# zero_grad(set_to_none=False), torch.library in PyTorch's own tests
NOT_COVERED = ("TOR108", "TOR202", "TOR203", "TOR401", "TOR402", "TOR901")
_EXPECTED = re.compile(r"^(\d+):(\d+) (TOR\d+) ")
# codemod fixtures of codes no rule covers
NOT_COVERED_CODEMODS = ("vision/codemod/singleton_import.in.py",)
# Spellings that mean the same: torchvision takes a weights enum's member name as a string
# (`weights="IMAGENET1K_V1"` is `weights=ResNet50_Weights.IMAGENET1K_V1`), and
# `torch.utils.data.default_collate` is the object `torch.utils.data.dataloader` re-exports.
_EQUIVALENT = (
    (re.compile(r"""(?:\w+\.)*\w+_Weights\.(\w+)"""), r'"\1"'),
    (re.compile(r"torch\.utils\.data\.dataloader\.default_"), "torch.utils.data.default_"),
    (re.compile(r"from torch\.utils\.data\.dataloader import"), "from torch.utils.data import"),
)
# The differences left on purpose (docs/lint-rules.md lists them under each rule)
DELIBERATE = {
    "deprecated_symbols/codemod/range-arange.in.py":
        "deprecated-torch-api: torch.range -> torch.arange is not rewritten (arange's dtype differs)",
    "misc/codemod/reentrant_checkpoint.in.py":
        "checkpoint-without-use-reentrant: writes use_reentrant=True (today's behaviour), not False",
    "nonpublic/codemod/default_collate_convert.in.py":
        "nonpublic-torch-api: adds no import; a use through `_utils`/`collate` is reported without a fix",
    "vision/codemod/pretrained.in.py":
        "torchvision-pretrained: adds no import (weights given as a string) and keeps the call's line breaks",
}


def _lint(data: bytes, name: str, fix: FixLevel):  # type: ignore[no-untyped-def]
    result = lint_bytes(data, Path(name), name, all_rules(), fix)
    if result.error:
        raise RuntimeError(f"{name}: {result.error}")
    return result


def checkers(root: Path, verbose: bool) -> dict[str, dict[str, int]]:
    """Per code: expected pairs, found pairs, extras of its rule."""
    table: dict[str, dict[str, int]] = {code: {"expected": 0, "found": 0} for code in COVERED}
    extras: Counter[str] = Counter()
    for expected_file in sorted(root.glob("tests/fixtures/*/checker/*.txt")):
        source = expected_file.with_suffix(".py")
        expected: Counter[tuple[int, str]] = Counter()
        for line in expected_file.read_text().splitlines():
            match = _EXPECTED.match(line)
            if match and match.group(3) in COVERED:
                expected[(int(match.group(1)), match.group(3))] += 1
        findings = _lint(source.read_bytes(), source.name, FixLevel.NONE).findings
        reported: Counter[tuple[int, str]] = Counter((f.line, f.rule) for f in findings)
        used: Counter[tuple[int, str]] = Counter()
        for (line, code), count in sorted(expected.items()):
            rule = COVERED[code]
            free = reported[(line, rule)] - used[(line, rule)]
            hit = min(count, max(free, 0))
            used[(line, rule)] += hit
            table[code]["expected"] += count
            table[code]["found"] += hit
            if hit < count:
                print(f"  missed  {source.relative_to(root)}:{line} {code} ({rule})")
        for (line, rule), count in sorted(reported.items()):
            if rule in COVERED.values() and count > used[(line, rule)]:
                extras[rule] += count - used[(line, rule)]
                if verbose:
                    messages = [f.message for f in findings if f.line == line and f.rule == rule]
                    print(f"  extra   {source.relative_to(root)}:{line} {rule}: {messages[0][:100]}")
    for code, rule in COVERED.items():
        table[code]["extras_of_rule"] = extras[rule]
    return table


def _edits(before: list[str], after: list[str]) -> set[tuple[int, int, tuple[str, ...]]]:
    """Line edits turning ``before`` into ``after``: (first line, end line, new lines)."""
    found = set()
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            found.update((i1 + k, i1 + k + 1, (after[j1 + k],)) for k in range(i2 - i1))
        else:
            found.add((i1, i2, tuple(after[j1:j2])))
    return found


def _normal(edits: set[tuple[int, int, tuple[str, ...]]]) -> set[tuple[int, int, tuple[str, ...]]]:
    def normal(line: str) -> str:
        for pattern, replacement in _EQUIVALENT:
            line = pattern.sub(replacement, line)
        return line
    return {(first, end, tuple(map(normal, lines))) for first, end, lines in edits}


def codemods(root: Path, verbose: bool) -> list[dict[str, object]]:
    rows = []
    for source in sorted(root.glob("tests/fixtures/*/codemod/*.in.py")):
        name = str(source.relative_to(root / "tests" / "fixtures"))
        if name in NOT_COVERED_CODEMODS:
            continue
        target = source.with_name(source.name.replace(".in.py", ".out.py"))
        data = source.read_bytes()
        result = _lint(data, source.name, FixLevel.UNSAFE)
        fixed = (result.new_data or data).decode()
        before = data.decode().splitlines()
        expected = _edits(before, target.read_text().splitlines())
        actual = _edits(before, fixed.splitlines())
        same = expected & actual
        equivalent = {e for e in expected - same if _normal({e}) & _normal(actual)}
        missed = expected - same - equivalent
        rows.append({"fixture": name, "edits": len(expected), "reproduced": len(same), "equivalent": len(equivalent),
                     "deliberate": len(missed) if name in DELIBERATE else 0,
                     "unexplained": 0 if name in DELIBERATE else len(missed),
                     "other_edits": len(_normal(actual) - _normal(expected))})
        for first, _, lines in sorted(missed):
            why = f"deliberate ({DELIBERATE[name]})" if name in DELIBERATE else "NOT REPRODUCED"
            print(f"  {why}  {name}:{first + 1}: {' / '.join(lines) or '(deleted)'}")
        if verbose:
            for first, _, lines in sorted(actual - expected):
                print(f"  repairbot wrote {name}:{first + 1}: {' / '.join(lines) or '(deleted)'}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("torchfix", type=Path, help="a checkout of pytorch-labs/torchfix")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--verbose", action="store_true", help="list the extras too")
    options = parser.parse_args()
    if not (options.torchfix / "tests" / "fixtures").is_dir():
        print(f"{options.torchfix}: not a TorchFix checkout (no tests/fixtures)", file=sys.stderr)
        return 2
    print("checker fixtures:")
    table = checkers(options.torchfix, options.verbose)
    print("\n| TorchFix code | repairbot rule | expected | found | recall | extras of the rule |")
    print("| --- | --- | --- | --- | --- | --- |")
    for code, row in table.items():
        recall = f"{100 * row['found'] / row['expected']:.0f}%" if row["expected"] else "-"
        print(f"| {code} | `{COVERED[code]}` | {row['expected']} | {row['found']} | {recall} | {row['extras_of_rule']} |")
    expected = sum(r["expected"] for r in table.values())
    found = sum(r["found"] for r in table.values())
    print(f"| all covered codes | | {expected} | {found} | {100 * found / expected:.1f}% | |")
    print("\ncodemod fixtures:")
    rows = codemods(options.torchfix, options.verbose)
    columns = ("edits", "reproduced", "equivalent", "deliberate", "unexplained", "other_edits")
    print("\n| fixture | TorchFix edits | reproduced exactly | equivalent spelling | deliberate difference "
          "| unexplained | other edits by repairbot |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['fixture']} | " + " | ".join(str(row[c]) for c in columns) + " |")
    totals = [sum(int(str(r[c])) for r in rows) for c in columns]
    print("| all | " + " | ".join(map(str, totals)) + " |")
    print(f"\nTorchFix codes no repairbot rule covers: {', '.join(NOT_COVERED)}")
    if options.json:
        options.json.write_text(json.dumps({"checkers": table, "codemods": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
