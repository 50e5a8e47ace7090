"""The health checks on real code: `repairbot doctor` on public training scripts, every finding
judged against the verdict written in bench/health_real.toml.

The scripts are read from fetched checkouts (bare git mirrors, ``--mirror``, one folder
``owner+name/repo`` per repository; nothing fetched is committed). Each entry of the manifest
names the repository, the file (a script, a notebook's code cells or a Markdown article's
code block), the files it imports, and the minimal adaptations that let it run here: exact
text edits (listed, each must match once) and the stand-ins on PYTHONPATH
(bench/health_real/shims: synthetic torchvision datasets instead of downloads, numpy 2 for
gym 0.26). Run from the repository root with the project's environment:

    .venv/bin/python bench/health_real.py                   # every script
    .venv/bin/python bench/health_real.py --only gan dqn    # some of them
    .venv/bin/python bench/health_real.py --code /tmp/old   # a baseline: an older checkout's repairbot

It prints one row per script (its findings with their verdicts) and the precision, and writes
bench/health_real/results.json. A finding with no verdict in the manifest is printed as
UNJUDGED and counted as false: the precision never flatters.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "bench" / "health_real.toml"
SHIMS = ROOT / "bench" / "health_real" / "shims"
RESULTS = ROOT / "bench" / "health_real" / "results.json"
REPAIRBOT = Path(sys.executable).parent / "repairbot"


def git_show(mirror: Path, commit: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(mirror), "show", f"{commit}:{path}"], check=True, capture_output=True,
    ).stdout


def notebook_source(data: bytes) -> str:
    """The code cells of a notebook as one script (IPython magics and shell lines dropped)."""
    cells = json.loads(data)["cells"]
    parts = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", []))
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def markdown_source(data: bytes, block: int | None) -> str:
    """One ```python block of a Markdown article (the longest when ``block`` is not given)."""
    text = data.decode("utf-8")
    blocks, current = [], None
    for line in text.splitlines():
        if current is None and line.strip().startswith("```") and "python" in line:
            current = []
        elif current is not None and line.strip().startswith("```"):
            blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    if block is not None:
        return blocks[block]
    return max(blocks, key=len)


def materialize(entry: dict[str, Any], mirror_root: Path, folder: Path) -> tuple[Path, str]:
    """Writes the entry's files under ``folder`` at their repository paths; returns the
    script and the commit read."""
    mirror = mirror_root / entry["repo"].replace("/", "+") / "repo"
    commit = entry.get("commit") or subprocess.run(
        ["git", "--git-dir", str(mirror), "rev-parse", "HEAD"], check=True, capture_output=True, text=True,
    ).stdout.strip()
    for extra in entry.get("with", []):
        target = folder / extra
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git_show(mirror, commit, extra))
    path = entry["path"]
    data = git_show(mirror, commit, path)
    if path.endswith(".ipynb"):
        source = notebook_source(data)
        path = path[: -len(".ipynb")].replace(" ", "_").replace(".", "_") + ".py"
    elif path.endswith(".md"):
        source = markdown_source(data, entry.get("block"))
        path = path[: -len(".md")] + ".py"
    else:
        source = data.decode("utf-8")
    for old, new in entry.get("edits", []):
        if source.count(old) != 1:
            raise SystemExit(f"{entry['name']}: the edit {old!r} matches {source.count(old)} times")
        source = source.replace(old, new)
    script = folder / path
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(source, encoding="utf-8")
    return script, commit


def run_doctor(script: Path, entry: dict[str, Any], code: Path | None = None) -> dict[str, Any]:
    """``repairbot doctor`` on the script; ``code``: another checkout's repairbot (a baseline)."""
    path = os.pathsep.join([*([str(code)] if code else []), str(SHIMS)])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
           "MPLBACKEND": "Agg"}
    report = script.parent / ".report.json"
    launcher = [sys.executable, "-m", "repairbot"] if code else [str(REPAIRBOT)]
    command = [*launcher, "doctor", script.name, "--json", str(report), "--timeout", "240", "-q"]
    if entry.get("args"):
        command += ["--", *entry["args"]]
    started = time.monotonic()
    result = subprocess.run(command, cwd=script.parent, env=env, capture_output=True, text=True, timeout=600)
    data = json.loads(report.read_text()) if report.exists() else {}
    return {"exit_code": result.returncode, "status": data.get("status"), "health": data.get("health", []),
            "seconds": round(time.monotonic() - started, 1), "output": (result.stdout + result.stderr)[-2000:]}


def judge(entry: dict[str, Any], health: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each finding beside the manifest's verdict for it (matched by id and level, in order)."""
    verdicts = [dict(v) for v in entry.get("findings", [])]
    judged = []
    for finding in health:
        level = finding.get("level", "warning")
        match = next((v for v in verdicts if v["id"] == finding["id"] and v.get("level", "warning") == level), None)
        if match is not None:
            verdicts.remove(match)
        judged.append({"id": finding["id"], "level": level, "line": finding.get("line"),
                       "message": finding["message"], "verdict": match["verdict"] if match else "UNJUDGED",
                       "why": match.get("why", "") if match else ""})
    for missing in verdicts:  # a verdict written for a finding the run no longer makes
        judged.append({"id": missing["id"], "level": missing.get("level", "warning"), "line": None,
                       "message": "(expected, not reported)", "verdict": "MISSING", "why": missing.get("why", "")})
    return judged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"), help="folder of the fetched mirrors")
    parser.add_argument("--only", nargs="*", help="names of the manifest entries to run")
    parser.add_argument("--keep", action="store_true", help="keep the materialized scripts (printed)")
    parser.add_argument("--code", type=Path, help="run another checkout's repairbot package (a baseline: "
                        "results are printed, not written)")
    options = parser.parse_args()
    entries = tomllib.loads(MANIFEST.read_text())["script"]
    if options.only:
        entries = [e for e in entries if e["name"] in options.only]
    work = Path(tempfile.mkdtemp(prefix="health-real-"))
    rows = []
    try:
        for entry in entries:
            folder = work / entry["name"]
            folder.mkdir()
            script, commit = materialize(entry, options.mirror, folder)
            outcome = run_doctor(script, entry, options.code)
            judged = judge(entry, outcome["health"])
            rows.append({"name": entry["name"], "repo": entry["repo"], "path": entry["path"], "commit": commit,
                         "covers": entry.get("covers", ""), "adapted": entry.get("adapted", []),
                         "status": outcome["status"], "exit_code": outcome["exit_code"],
                         "seconds": outcome["seconds"], "findings": judged,
                         **({"output": outcome["output"]} if outcome["status"] != "already-passing" else {})})
            shown = "; ".join(f"{j['id']}{'' if j['level'] == 'warning' else ' (info)'}: {j['verdict']}"
                              for j in judged) or "none"
            print(f"{entry['name']:<24} {outcome['status'] or 'no report':<16} {outcome['seconds']:>6}s  {shown}",
                  flush=True)
            for item in judged:
                if item["verdict"] == "UNJUDGED":
                    print(f"    UNJUDGED {item['id']} line {item['line']}: {item['message']}", flush=True)
            if outcome["status"] != "already-passing":
                print("    " + outcome["output"][-600:].replace("\n", "\n    "), flush=True)
    finally:
        if options.keep:
            print(f"scripts kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    reported = [j for row in rows for j in row["findings"] if j["verdict"] != "MISSING"]
    true = sum(j["verdict"] == "true" for j in reported)
    warnings = [j for j in reported if j["level"] == "warning"]
    summary = {
        "scripts": len(rows), "ran": sum(r["status"] == "already-passing" for r in rows),
        "findings": len(reported), "true": true,
        "precision": round(true / len(reported), 3) if reported else None,
        "warnings": len(warnings), "true_warnings": sum(j["verdict"] == "true" for j in warnings),
        "missing": sum(j["verdict"] == "MISSING" for row in rows for j in row["findings"]),
    }
    print(json.dumps(summary))
    if not options.only and not options.code:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({"summary": summary, "scripts": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
