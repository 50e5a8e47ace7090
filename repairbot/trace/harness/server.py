"""The warm server: torch imported once, each run a fork of it."""

import json
import os
import sys
import traceback
from typing import Any

from . import realos
from .evidence import flush_and_exit
from .frames import OWNERSHIP, loaded_module_files
from .fresh_state import become_fresh_process
from .main import run


def _warm_up() -> None:
    """Import what nearly every training script imports, once, before any fork.

    Importing runs no torch operation, so no thread pool exists yet when a run is forked
    (the first optimizer step lazily imports the compiler stack: a second or more saved per run).
    """
    for name in ("torch", "torch.nn", "torch.optim", "torch.utils.data", "torch._dynamo", "numpy", "argparse"):
        try:
            __import__(name)
        except Exception:
            pass
    try:  # the core's probes and the health checks, compiled once here rather than in every run
        from . import probes  # noqa: F401
        from .health import checks

        checks()
    except Exception:  # a broken probe fails in the run itself, as it would in a fresh process
        pass
    # which of them are the user's (none, as a rule), decided once: each run's evidence lists
    # the user's imported files, and every fork would otherwise resolve the same ~2,000 paths
    for path in loaded_module_files():
        OWNERSHIP.is_user_file(path)


def _exit_status(status: Any) -> Any:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def _forked_run(request: Any) -> None:
    """In the forked child: become the run (own session, its stdio, cwd and environment)."""
    code = 1
    try:
        os.setsid()
        stdin = realos.os_open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = realos.os_open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        os.chdir(request["cwd"])
        server_path = os.environ.get("PYTHONPATH", "")
        os.environ.clear()
        os.environ.update(request["env"])
        if os.environ.get("PYTHONPATH", "") != server_path:
            # a fresh interpreter would put the run's PYTHONPATH right after the script's folder
            known = set(server_path.split(os.pathsep))
            extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in known]
            sys.path[1:1] = [os.path.abspath(p) for p in extra]
        become_fresh_process()
        code = run(request["config"])
        try:
            import threading

            threading._shutdown()  # type: ignore[attr-defined]  # wait for the script's non-daemon threads, as at exit
        except Exception:
            pass
        import atexit

        atexit._run_exitfuncs()
    except SystemExit as exit_request:
        code = exit_request.code if isinstance(exit_request.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        flush_and_exit(code)


def serve() -> Any:
    """Serve runs over stdin/stdout, one JSON line each: {"config", "cwd", "env", "stdout",
    "stderr"} in; {"pid"} when the run starts, then {"pid", "status"} when it ends."""
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    # what the server itself might print goes nowhere; the runs get their own stdio
    null = realos.os_open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    sys.dont_write_bytecode = True
    _warm_up()
    replies.write(json.dumps({"ready": True, "python": "%d.%d.%d" % sys.version_info[:3]}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        replies.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _forked_run(request)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"pid": pid, "status": _exit_status(status)}) + "\n")
        replies.flush()
    return 0
