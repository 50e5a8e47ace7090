"""repairbot's benchmarks: repair latency, peak memory, lint throughput and its scaling.

Run from the repository root with the project's environment:

    .venv/bin/python bench/run.py            # everything (under 10 minutes on 2 cores)
    .venv/bin/python bench/run.py --quick    # 3 repetitions instead of 5, fewer fixtures

It prints one table per benchmark and writes them all to bench/results.json. Nothing here is
a test: no threshold fails anything; the targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import CUDA_CHECKPOINT, fixtures, load_toml  # noqa: E402

PYTHON = sys.executable
RESULTS = ROOT / "bench" / "results.json"
# One fixture per kind of repair (a Linear fixed, a crash at load time, two fixes in a row, an
# in-place op, nothing to fix), so that the whole benchmark stays under 10 minutes on 2 cores.
LATENCY_FIXTURES = (
    "cnn_flatten_size", "map_location_device_var", "two_bugs", "inplace_residual_add", "already_passing",
)
QUICK_FIXTURES = ("cnn_flatten_size", "two_bugs", "inplace_residual_add")
# Scripts with code after their loops: the repair runs the whole script (each loop left at the
# step budget, then the evaluation, sampling or second loop after it), the plain run trains to
# the end first
AFTER_LOOP_FIXTURES = (
    "hand_loop_step_budget", "after_loop_numpy_grad", "second_loop_bug", "kept_iterator_eval_view",
    "sampling_after_training",
)


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONDONTWRITEBYTECODE": "1"}


def _timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """Wall seconds, exit code and peak RSS (KiB) of the command's own process alone (sampled
    every 20 ms: the process's children, such as repairbot's warm server, are not counted)."""
    import psutil

    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env or _env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    watched = psutil.Process(process.pid)
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, watched.memory_info().rss)
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    return elapsed, process.returncode, peak // 1024


def _project(name: str, workdir: Path) -> tuple[Path, dict[str, Any]]:
    source = ROOT / "fixtures" / name
    config = load_toml(source / "case.toml")
    repo = workdir / name
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("case.toml", "__pycache__"))
    if config.get("checkpoint"):
        subprocess.run([PYTHON, "-c", CUDA_CHECKPOINT.format(script=config["checkpoint"])], cwd=repo, check=True, env=_env())
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", "fixture"],
        cwd=repo, check=True,
    )
    return repo, config


def latency(reps: int, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """`repairbot fix --dry-run` next to a plain `python train.py` of the broken script, in
    alternation (machine drift hits both alike); medians of `reps` runs each."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="repairbot-bench-") as tmp:
        for name in names:
            repo, config = _project(name, Path(tmp))
            script = config.get("script", "train.py")
            args = list(config.get("args", []))
            plain_cmd = [PYTHON, script, *args]
            fix_cmd = [PYTHON, "-m", "repairbot", "fix", script, "--dry-run", "-q", *(["--", *args] if args else [])]
            plain, repair, plain_rss, fix_rss = [], [], [], []
            for _ in range(reps):
                seconds, _, rss = _timed(plain_cmd, repo)
                plain.append(seconds)
                plain_rss.append(rss)
                seconds, _, rss = _timed(fix_cmd, repo)
                repair.append(seconds)
                fix_rss.append(rss)
            rows.append({
                "fixture": name,
                "expected": config["status"],
                "plain_s": round(statistics.median(plain), 2),
                "repair_s": round(statistics.median(repair), 2),
                "ratio": round(statistics.median(repair) / statistics.median(plain), 2),
                "plain_rss_mib": round(max(plain_rss) / 1024, 1),
                "parent_rss_mib": round(max(fix_rss) / 1024, 1),
            })
            _print_row(rows[-1])
    return rows


def _print_row(row: dict[str, Any]) -> None:
    print("  " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)


def fresh_vs_warm(reps: int) -> dict[str, Any]:
    """The same repair with fresh processes per run (REPAIRBOT_FRESH_RUNS=1) and with forks."""
    with tempfile.TemporaryDirectory(prefix="repairbot-bench-") as tmp:
        repo, _ = _project("cnn_flatten_size", Path(tmp))
        command = [PYTHON, "-m", "repairbot", "fix", "train.py", "--dry-run", "-q"]
        fresh, warm = [], []
        for _ in range(reps):
            fresh.append(_timed(command, repo, {**_env(), "REPAIRBOT_FRESH_RUNS": "1"})[0])
            warm.append(_timed(command, repo)[0])
    row = {"fixture": "cnn_flatten_size", "fresh_runs_s": round(statistics.median(fresh), 2),
           "forked_runs_s": round(statistics.median(warm), 2)}
    _print_row(row)
    return row


def threads(reps: int) -> list[dict[str, Any]]:
    """The verification run's speed with 1 intra-op thread and with the default (one per core)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="repairbot-bench-") as tmp:
        repo, _ = _project("cnn_flatten_size", Path(tmp))
        command = [PYTHON, "-m", "repairbot", "fix", "train.py", "--dry-run", "-q"]
        for setting in ("1", None):
            env = _env()
            if setting is None:
                env.pop("OMP_NUM_THREADS", None)
            times = [_timed(command, repo, env)[0] for _ in range(reps)]
            rows.append({"OMP_NUM_THREADS": setting or f"unset ({os.cpu_count()} cores)",
                         "repair_s": round(statistics.median(times), 2)})
            _print_row(rows[-1])
    return rows


HEALTH_FIXTURES = ("cnn_flatten_size", "health_grad_accumulation")


def health_overhead(reps: int) -> list[dict[str, Any]]:
    """The health checks' cost: `repairbot fix --dry-run` as users run it (forks of the warm
    server, so the torch import does not drown the probes' cost), with and without --no-health,
    in alternation; medians of `reps` runs each (target: under 10% of the wall time)."""
    rows = []
    known = {f.name for f in fixtures()}
    env = _env()
    with tempfile.TemporaryDirectory(prefix="repairbot-bench-") as tmp:
        for name in (n for n in HEALTH_FIXTURES if n in known):
            repo, config = _project(name, Path(tmp))
            script = config.get("script", "train.py")
            command = [PYTHON, "-m", "repairbot", "fix", script, "--dry-run", "-q"]
            on, off = [], []
            for _ in range(reps):
                off.append(_timed([*command, "--no-health"], repo, env)[0])
                on.append(_timed(command, repo, env)[0])
            with_health, without = statistics.median(on), statistics.median(off)
            rows.append({
                "fixture": name,
                "no_health_s": round(without, 2),
                "health_s": round(with_health, 2),
                "overhead_pct": round(100 * (with_health - without) / without, 1),
            })
            _print_row(rows[-1])
    return rows


def lint_available() -> bool:
    return subprocess.run([PYTHON, "-m", "repairbot", "lint", "--help"], capture_output=True, check=False).returncode == 0


def _torch_root() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def _torch_files() -> list[Path]:
    return sorted(_torch_root().rglob("*.py"))


def _lines(files: list[Path]) -> int:
    return sum(len(path.read_bytes().splitlines()) for path in files)


def _lint_seconds(files: list[Path], workdir: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [PYTHON, "-m", "repairbot", "lint", *map(str, files), "--format", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=_env(),
    )
    return time.perf_counter() - started


def _wall_and_cpu(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system of the command and its children): on a
    machine shared with other work the CPU time is the steadier figure of the two."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=_env())
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _copy_corpora(workdir: Path) -> dict[str, Path]:
    """The two corpora, copied outside site-packages (on the installed package some rules
    switch off: a package's own code may use its private and deprecated API): torch/nn, and the
    training scripts of this project's end-to-end fixtures and pattern cases."""
    nn_copy = workdir / "torch_nn_copy"
    shutil.copytree(_torch_root() / "nn", nn_copy / "nn", ignore=shutil.ignore_patterns("__pycache__"))
    scripts = workdir / "training_scripts"
    for index, source in enumerate(sorted([*(ROOT / "fixtures").rglob("*.py"), *(ROOT / "patterns").glob("*/cases/**/*.py")])):
        target = scripts / f"{index:03d}_{source.parent.name}_{source.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return {"torch/nn (a copy)": nn_copy, "training scripts (fixtures and cases)": scripts}


def _parse_seconds(files: list[Path]) -> float:
    """LibCST's own parse of every file in this process: the ceiling of any LibCST linter."""
    import libcst

    data = [path.read_bytes() for path in files]
    best = float("inf")
    for _ in range(2):
        started = time.process_time()
        for item in data:
            with contextlib.suppress(Exception):
                libcst.parse_module(item)
        best = min(best, time.process_time() - started)
    return best


def lint_throughput(workdir: Path) -> list[dict[str, Any]]:
    """`repairbot lint` next to TorchFix on the same copies (wall and CPU seconds), repairbot
    in one process (`-j 1`) next to LibCST's parse rate of the same files, and repairbot alone
    on every file of the installed torch."""
    torchfix = _torchfix(workdir)
    rows: list[dict[str, Any]] = []
    for name, folder in _copy_corpora(workdir).items():
        files = sorted(folder.rglob("*.py"))
        lines = _lines(files)
        row: dict[str, Any] = {"corpus": name, "files": len(files), "lines": lines}
        repair = [PYTHON, "-m", "repairbot", "lint", str(folder), "--format", "json"]
        wall, cpu = min(_wall_and_cpu(repair, workdir) for _ in range(2))
        row.update(repairbot_s=round(wall, 2), repairbot_cpu_s=round(cpu, 2))
        wall1, cpu1 = _wall_and_cpu([*repair, "-j", "1"], workdir)
        row.update(repairbot_j1_s=round(wall1, 2), repairbot_j1_lines_per_cpu_s=round(lines / cpu1))
        parse = _parse_seconds(files)
        row.update(libcst_parse_cpu_s=round(parse, 2), libcst_parse_lines_per_s=round(lines / parse),
                   repairbot_share_of_parse_rate=round(parse / cpu1, 2))
        if torchfix is not None:
            tf_wall, tf_cpu = _wall_and_cpu([str(torchfix), str(folder)], workdir)
            row.update(torchfix_s=round(tf_wall, 2), torchfix_cpu_s=round(tf_cpu, 2),
                       speedup_wall=round(tf_wall / wall, 1), speedup_cpu=round(tf_cpu / cpu, 1))
        else:
            row["torchfix_s"] = "not installed (pip could not reach PyPI)"
        rows.append(row)
        _print_row(row)
    files = _torch_files()
    whole: dict[str, Any] = {"corpus": "every .py file of the installed torch", "files": len(files), "lines": _lines(files)}
    seconds, cpu = _wall_and_cpu([PYTHON, "-m", "repairbot", "lint", str(_torch_root()), "--format", "json"], workdir)
    whole.update(repairbot_s=round(seconds, 2), repairbot_cpu_s=round(cpu, 2),
                 repairbot_lines_per_s=round(whole["lines"] / seconds))
    rows.append(whole)
    _print_row(whole)
    return rows


def _torchfix(workdir: Path) -> Path | None:
    """TorchFix in a throwaway environment of the benchmark's own (never a project dependency)."""
    venv = ROOT / "bench" / ".venv-torchfix"
    binary = venv / "bin" / "torchfix"
    if binary.exists():
        return binary
    if subprocess.run([sys.executable, "-m", "venv", str(venv)], check=False).returncode != 0:
        return None
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "torchfix"], capture_output=True, check=False)
    return binary if installed.returncode == 0 and binary.exists() else None


def lint_scaling(workdir: Path, whole: dict[str, Any]) -> list[dict[str, Any]]:  # whole: the torch row
    """Lint time over the first quarter, half and all of the corpus (the whole: the throughput
    step's own measurement, not run twice)."""
    files = _torch_files()
    rows = []
    for fraction in (0.25, 0.5):
        chosen = files[: max(1, int(len(files) * fraction))]
        seconds = _lint_seconds(chosen, workdir)
        rows.append({"fraction": fraction, "files": len(chosen), "lines": _lines(chosen), "seconds": round(seconds, 2),
                     "lines_per_s": round(_lines(chosen) / seconds)})
        _print_row(rows[-1])
    rows.append({"fraction": 1.0, "files": whole["files"], "lines": whole["lines"],
                 "seconds": whole["repairbot_s"], "lines_per_s": whole["repairbot_lines_per_s"]})
    _print_row(rows[-1])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions, fewer fixtures")
    parser.add_argument("--only", choices=("latency", "memory", "threads", "lint", "health", "after-loop"), action="append")
    options = parser.parse_args()
    reps = 3 if options.quick else 5
    names = QUICK_FIXTURES if options.quick else LATENCY_FIXTURES
    known = {f.name for f in fixtures()}
    names = tuple(n for n in names if n in known)
    wanted = set(options.only or ("latency", "memory", "threads", "lint", "health", "after-loop"))
    results: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    steps: list[tuple[str, Callable[[], Any]]] = []
    if "latency" in wanted or "memory" in wanted:
        steps.append(("latency and peak memory (target: median ratio <= 1.3, parent < 150 MiB)", lambda: latency(reps, names)))
    if "threads" in wanted:
        # medians of 3: these compare two settings of one fixture, not a spread of fixtures
        steps.append(("fresh processes vs forks of the warm server", lambda: fresh_vs_warm(3)))
        steps.append(("threads", lambda: threads(3)))
    if "after-loop" in wanted:
        after = tuple(n for n in AFTER_LOOP_FIXTURES if n in known)
        steps.append(("code after the loop: the whole script runs", lambda: latency(3, after)))
    if "health" in wanted:
        steps.append(("health checks overhead (target: < 10% wall time)", lambda: health_overhead(3)))
    with tempfile.TemporaryDirectory(prefix="repairbot-bench-") as tmp:
        if "lint" in wanted and lint_available():
            throughput: list[dict[str, Any]] = []
            steps.append(("lint throughput (target: >= 10x TorchFix on both corpora)",
                          lambda: throughput.extend(lint_throughput(Path(tmp))) or throughput))
            if not options.quick:
                steps.append(("lint scaling (linear in the corpus)", lambda: lint_scaling(Path(tmp), throughput[-1])))
        for title, step in steps:
            print(f"\n== {title}", flush=True)
            started = time.perf_counter()
            results[title.split(" (")[0]] = step()
            print(f"   ({time.perf_counter() - started:.0f} s)", flush=True)
    if "latency and peak memory" in results:
        ratios = [row["ratio"] for row in results["latency and peak memory"]]
        results["median_ratio"] = statistics.median(ratios)
        print(f"\nmedian repair/plain ratio: {results['median_ratio']}")
    if "code after the loop: the whole script runs" in results:
        ratios = [row["ratio"] for row in results["code after the loop: the whole script runs"]]
        results["after_loop_median_ratio"] = statistics.median(ratios)
        print(f"median repair/plain ratio, code after the loop: {results['after_loop_median_ratio']}")
    if options.only and RESULTS.exists():
        # a partial run keeps the other sections' last figures
        results = {**json.loads(RESULTS.read_text()), **results}
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
