"""The plain fork server (tests.support.PlainForkServer) runs a script as a fresh interpreter does.

The live tests run fixed scripts and checkpoint makers as forks of a server that imported torch
once; each check here runs the same probe fresh (``python ...``) and forked and wants the same
exit code, stdout and stderr: argv, sys.path, cwd, __main__'s globals, the environment, atexit
handlers and threads that outlive the script, and how an uncaught exception or sys.exit ends it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import PYTHON, PlainForkServer

pytestmark = pytest.mark.torch

PROBE = '''\
import atexit, json, os, sys, threading
import numpy

def _late():
    print("atexit ran", flush=True)

atexit.register(_late)
main = sys.modules["__main__"]
print(json.dumps({
    "argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "name": __name__,
    "file": globals().get("__file__"), "package": __package__, "spec": getattr(__spec__, "name", None),
    "loader": type(globals().get("__loader__")).__name__, "main_is_this": main.__dict__ is globals(),
    "env": sorted(os.environ.items()), "names": sorted(k for k in globals() if k.startswith("__")),
    "numpy_file": numpy.__file__, "stdout_tty": sys.stdout.isatty(), "torch_threads": os.environ.get("OMP_NUM_THREADS"),
}))
sys.stderr.write("to stderr\\n")
threading.Thread(target=lambda: print("thread ran")).start()
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if mode == "raise":
    def inner():
        raise ValueError("the probe fails")
    inner()
if mode == "exit3":
    sys.exit(3)
if mode == "exit-message":
    sys.exit("a message")
'''

RANDOM = "import random, numpy; print(random.random(), numpy.random.rand())"


@pytest.fixture
def server(plain_runner: PlainForkServer) -> PlainForkServer:
    return plain_runner


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "probe.py").write_text(PROBE)
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "probe.py").write_text(PROBE)
    return tmp_path


def both(server: PlainForkServer, argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[tuple[int, str, str], ...]:
    fresh = subprocess.run([PYTHON, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    forked = server.run(*argv, cwd=cwd, env=env, timeout=120)
    return (fresh.returncode, fresh.stdout, fresh.stderr), (forked.returncode, forked.stdout, forked.stderr)


@pytest.mark.parametrize("mode", ["ok", "raise", "exit3", "exit-message"])
def test_a_script_runs_forked_as_it_runs_fresh(server: PlainForkServer, project: Path, mode: str) -> None:
    env = {**os.environ, "PROBE_VARIABLE": "1"}
    fresh, forked = both(server, ["scripts/probe.py", mode, "--flag"], project, env)
    assert forked == fresh
    code, stdout, stderr = fresh
    assert code == {"ok": 0, "raise": 1, "exit3": 3, "exit-message": 1}[mode]
    facts = json.loads(stdout.splitlines()[0])
    assert facts["argv"] == ["scripts/probe.py", mode, "--flag"] and facts["path"][0] == str(project / "scripts")
    assert "atexit ran" in stdout and "thread ran" in stdout
    if mode == "raise":
        assert 'raise ValueError("the probe fails")' in stderr and stderr.rstrip().endswith("ValueError: the probe fails")
    if mode == "exit-message":
        assert stderr.rstrip().endswith("a message")


@pytest.mark.parametrize("mode", ["ok", "raise"])
def test_a_module_runs_forked_as_it_runs_fresh(server: PlainForkServer, project: Path, mode: str) -> None:
    env = {**os.environ, "PYTHONPATH": "src"}
    fresh, forked = both(server, ["-m", "pkg.probe", mode], project, env)
    assert forked == fresh
    facts = json.loads(fresh[1].splitlines()[0])
    assert facts["argv"] == [str(project / "src" / "pkg" / "probe.py"), mode] and facts["spec"] == "pkg.probe"
    assert facts["path"][:2] == [str(project), str(project / "src")]
    assert fresh[0] == (1 if mode == "raise" else 0)


def test_code_runs_forked_as_it_runs_fresh(server: PlainForkServer, project: Path) -> None:
    fresh, forked = both(server, ["-c", PROBE, "exit3"], project, dict(os.environ))
    assert forked == fresh and fresh[0] == 3
    assert json.loads(fresh[1].splitlines()[0])["argv"] == ["-c", "exit3"]


def test_each_forked_run_draws_its_own_random_numbers(server: PlainForkServer, tmp_path: Path) -> None:
    first, second = (server.run("-c", RANDOM, cwd=tmp_path) for _ in range(2))
    assert first.returncode == second.returncode == 0 and first.stdout.strip()
    assert first.stdout.split()[0] != second.stdout.split()[0] and first.stdout.split()[1] != second.stdout.split()[1]


def test_a_run_past_its_timeout_is_killed_and_the_server_serves_on(server: PlainForkServer, tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        server.run("-c", "import time; time.sleep(60)", cwd=tmp_path, timeout=1)
    assert server.run("-c", "print('next')", cwd=tmp_path).stdout == "next\n"


def test_a_project_module_named_like_one_the_server_imported_is_the_projects(
    server: PlainForkServer, project: Path,
) -> None:
    (project / "scripts" / "numpy.py").write_text("print('the project numpy')\n")
    fresh, forked = both(server, ["scripts/probe.py"], project, dict(os.environ))
    assert forked == fresh
    assert fresh[1].startswith("the project numpy\n")
    assert json.loads(fresh[1].splitlines()[1])["numpy_file"] == str(project / "scripts" / "numpy.py")
