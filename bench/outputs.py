"""Records the reports of every end-to-end fixture, to compare two trees byte for byte.

    python bench/outputs.py record OUT_DIR [--jobs 2] [-k SUBSTRING]
    python bench/outputs.py compare BEFORE_DIR AFTER_DIR

``record`` runs each fixture of ``fixtures/`` in a temporary git repository as the tests do
(``fix --dry-run`` for a crash, ``doctor`` for a health fixture) and keeps its JSON, SARIF and
Markdown reports and the text output. Only what depends on the run itself is normalised: the
durations (wall clock) and the temporary folder's path. ``compare`` lists every fixture whose
outputs differ, with the first differing lines. A refactoring that changes no behaviour shows
none.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import Fixture, fixtures, prepare_fixture  # noqa: E402  (the tests' own way)

OUTPUTS = ("report.json", "report.sarif", "report.md", "output.txt")
# wall-clock seconds differ between any two runs
_DURATION = re.compile(r'("duration_s": |\| Duration \| |\b(?:in|took) )[0-9.]+')


def _command(fixture: Fixture, out: Path) -> list[str]:
    config = fixture.config
    target = ["-m", config["module"]] if config.get("module") else [config.get("script", "train.py")]
    reports = ["--json", str(out / "report.json"), "--sarif", str(out / "report.sarif"),
               "--markdown", str(out / "report.md")]
    if "health" in config:
        command = ["doctor", *target, *reports]
    else:
        command = ["fix", *target, "--dry-run", *reports]
    if config.get("args"):
        command += ["--", *config["args"]]
    return command


def _normalise(text: str, tmp: str) -> str:
    for path in (os.path.realpath(tmp), tmp):
        # the Markdown report escapes the "_" a temporary folder's name may hold
        text = text.replace(path, "<tmp>").replace(path.replace("_", "\\_"), "<tmp>")
    return _DURATION.sub(lambda m: m.group(1) + "0", text)


def record_one(fixture: Fixture, out_dir: Path) -> str:
    out = out_dir / fixture.name
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        repo = prepare_fixture(fixture, Path(tmp) / "repo")
        work = Path(tmp) / "out"
        work.mkdir()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", **fixture.config.get("env", {})}
        result = subprocess.run(
            [sys.executable, "-m", "repairbot", *_command(fixture, work)],
            cwd=repo, capture_output=True, text=True, timeout=900, env=env, check=False,
        )
        (work / "output.txt").write_text(f"exit {result.returncode}\n{result.stdout}\n--- stderr\n{result.stderr}")
        for name in OUTPUTS:
            source = work / name
            text = source.read_text(encoding="utf-8") if source.is_file() else "<missing>\n"
            (out / name).write_text(_normalise(text, tmp), encoding="utf-8")
    return fixture.name


def record(out_dir: Path, jobs: int, only: str | None) -> None:
    chosen = [f for f in fixtures() if only is None or only in f.name]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for name in pool.map(lambda f: record_one(f, out_dir), chosen):
            print(name, flush=True)
    print(f"recorded {len(chosen)} fixtures into {out_dir}")


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    differing = 0
    for name in names:
        for output in OUTPUTS:
            a, b = before / name / output, after / name / output
            old = a.read_text(encoding="utf-8") if a.is_file() else "<not recorded>\n"
            new = b.read_text(encoding="utf-8") if b.is_file() else "<not recorded>\n"
            if old != new:
                differing += 1
                diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"before/{name}/{output}",
                                                 f"after/{name}/{output}", lineterm="", n=1))
                print("\n".join(diff[:30]))
    total = len(names) * len(OUTPUTS)
    print(f"{total - differing} of {total} outputs identical ({len(names)} fixtures)")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--jobs", type=int, default=2)
    rec.add_argument("-k", dest="only")
    cmp = sub.add_parser("compare")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record(args.out, args.jobs, args.only)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
