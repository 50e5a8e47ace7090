"""A plain fork server for the tests: torch and numpy imported once, each run a fork that becomes
``python SCRIPT ARGS``, ``python -m MODULE ARGS`` or ``python -c CODE ARGS``, with no harness.

The tests run many fixed scripts plainly (does the fix branch really run?) and many checkpoint
makers; a fresh interpreter pays ~1.3 CPU-s of ``import torch`` each time. Started by
``tests.support.PlainForkServer`` as ``python tests/plain_fork_server.py``; one JSON line per run
on stdin, ``{"argv", "cwd", "env", "stdout", "stderr"}``, answered by ``{"pid"}`` (the run's, in a
session of its own) and then ``{"status"}`` (the exit code, or minus the signal that ended it),
or by ``{"shadowed": NAME}`` where the run's own folders hold a module of a name the server
imported (a fork would use the server's): the client then runs it fresh. tests/test_plain_fork.py
checks that a probe script run here and in a fresh interpreter gives the same argv, path, cwd,
globals, environment, output and exit code. Runs under the scripts' interpreter and imports no
repairbot package (only the standard-library-only harness file fresh_state.py, by path).
"""

import contextlib
import json
import os
import signal
import sys
import traceback
import types

SERVER_FILE = os.path.abspath(__file__)


def _load_fresh_state():
    """The warm harness server's own reset of a fork (seeds, torch threads), loaded by path:
    importing the repairbot package would put it in every run's sys.modules."""
    from importlib.util import module_from_spec, spec_from_file_location

    path = os.path.join(os.path.dirname(SERVER_FILE), "..", "repairbot", "trace", "harness", "fresh_state.py")
    spec = spec_from_file_location("_plain_fork_fresh_state", os.path.normpath(path))
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fresh_state = _load_fresh_state()


def _warm_up():
    for name in ("numpy", "torch", "torch.nn", "torch.optim", "torch.utils.data"):
        with contextlib.suppress(Exception):  # a script that needs it fails in its run, as fresh
            __import__(name)


def _base_path():
    """sys.path as a fresh interpreter builds it, less its first entry and PYTHONPATH's."""
    own = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return [p for p in sys.path[1:] if p not in own]


def _python_path(env, cwd):
    """PYTHONPATH's entries as site makes them: absolute (an empty one is the working directory)."""
    entries = []
    for entry in env.get("PYTHONPATH", "").split(os.pathsep) if env.get("PYTHONPATH") else []:
        path = os.path.normpath(os.path.join(cwd, entry))
        if path not in entries:
            entries.append(path)
    return entries


def _first_paths(argv, cwd, env):
    """The sys.path entries that a fresh ``python *argv`` puts before the interpreter's own."""
    if argv[0] == "-m":
        first = cwd
    elif argv[0] == "-c":
        first = cwd  # "": the working directory
    else:
        first = os.path.dirname(os.path.realpath(os.path.join(cwd, argv[0])))
    return [first, *_python_path(env, cwd)]


def _shadowed(preloaded, argv, cwd, env):
    """A module the server imported that the run's own folders would give another file for
    (a project's ``numpy.py``): a fork would use the server's; None when there is none."""
    from importlib.machinery import PathFinder

    paths = _first_paths(argv, cwd, env)
    for name in sorted(preloaded):
        if PathFinder.find_spec(name, paths) is not None:
            return name
    return None


def _fresh_main():
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=__builtins__, __annotations__={})
    sys.modules["__main__"] = main
    return main


def _run(argv, base_path):
    """Become ``python *argv``: sys.argv, sys.path, __main__ as the interpreter sets them, then run."""
    import runpy

    env_path = _python_path(os.environ, os.getcwd())
    if argv[0] == "-m":
        sys.argv = ["-m", *argv[2:]]  # runpy puts the module's file in argv[0], as `python -m` does
        sys.path[:] = [os.getcwd(), *env_path, *base_path]
        _fresh_main()
        runpy._run_module_as_main(argv[1], alter_argv=True)  # type: ignore[attr-defined]
    elif argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path[:] = ["", *env_path, *base_path]
        from importlib.machinery import BuiltinImporter

        main = _fresh_main()
        main.__dict__["__loader__"] = BuiltinImporter
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
    else:
        from importlib.machinery import SourceFileLoader

        script = os.path.abspath(argv[0])
        sys.argv = list(argv)
        sys.path[:] = [os.path.dirname(os.path.realpath(script)), *env_path, *base_path]
        main = _fresh_main()
        main.__dict__.update(__file__=script, __cached__=None, __loader__=SourceFileLoader("__main__", script))
        with open(script, "rb") as source:
            code = compile(source.read(), script, "exec", dont_inherit=True)
        exec(code, main.__dict__)


def _report_uncaught(error):
    """Print an uncaught exception as the interpreter does, without this file's frames."""
    tb = error.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == SERVER_FILE:
        tb = tb.tb_next
    error.__traceback__ = tb  # what the hook prints
    try:
        sys.excepthook(type(error), error, tb)
    except Exception:
        traceback.print_exception(type(error), error, tb)


def _exit_code(request):
    """The exit code of ``request``'s SystemExit, as the interpreter turns it into one."""
    if request.code is None:
        return 0
    if isinstance(request.code, int):
        return request.code & 0xFF
    with contextlib.suppress(Exception):
        print(request.code, file=sys.stderr)
    return 1


def _forked_run(request, base_path):
    code = 1
    interrupted = False
    try:
        os.setsid()
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.close(stdin)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        fresh_state.become_fresh_process()
        try:
            _run(request["argv"], base_path)
            code = 0
        except SystemExit as exit_request:
            code = _exit_code(exit_request)
        except KeyboardInterrupt as error:
            _report_uncaught(error)
            interrupted = True
        except BaseException as error:
            _report_uncaught(error)
            code = 1
        # then what the interpreter does at exit: wait for non-daemon threads, run atexit
        import threading

        threading._shutdown()  # type: ignore[attr-defined]
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = code or 120  # the interpreter's code for stdout that cannot be flushed
        if interrupted:  # an uncaught KeyboardInterrupt ends a fresh interpreter by SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


def _exit_status(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def serve():
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    _warm_up()
    base_path = _base_path()
    stdlib = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    preloaded = {name.partition(".")[0] for name in sys.modules} - stdlib - {"__main__"}
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        shadowed = _shadowed(preloaded, request["argv"], request["cwd"], request["env"])
        if shadowed:
            replies.write(json.dumps({"shadowed": shadowed}) + "\n")
            replies.flush()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _forked_run(request, base_path)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"status": _exit_status(status)}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()
