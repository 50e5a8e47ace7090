"""repairbot's tracing harness: runs a user's script as ``__main__`` under probes.

It runs INSIDE the child process, under the user's interpreter, started by path through
``repairbot/trace/bootstrap.py`` and loaded under the private name ``repairbot_harness``: it
depends on the standard library and torch only, keeps to Python 3.8 and imports its own
modules relatively. Its own frames never count as user code.

The core: ``main`` (the script run as ``__main__``), ``overlay`` (candidate fixes served from
memory), ``loops`` (loops compiled so that they can be left), ``state`` and ``context`` (one
run's shared state), ``hooks`` (each torch entry point patched once), ``probe`` (what a probe
declares, and where the probes come from), ``evidence`` (evidence.json), ``frames`` (which
code is the user's), ``realos`` (the file system before the guard), ``server`` (the fork
server) and ``fresh_state`` (what each fork of it redoes to behave as a fresh process). The probes: ``probes/`` (one module each, listed in probes/__init__.py), ``health/``,
and the ``probe.py`` of each selected pattern, loaded by path.
"""
