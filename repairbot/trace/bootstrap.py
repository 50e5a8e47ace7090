"""repairbot's tracing harness, started by path: ``python bootstrap.py CONFIG.json | --serve``.

This file runs INSIDE the child process, under the user's interpreter, which may not have
repairbot installed and may be as old as Python 3.8: it loads the harness package beside it
(``harness/``: standard library and torch only) by path, under the private name
``repairbot_harness`` (so that a pattern's probe can ``from repairbot_harness.frames import
...``), without putting the harness on the user's ``sys.path``, and hands over to it.
"""

import importlib.util
import os
import sys
from typing import Any

PACKAGE = "repairbot_harness"


def load_harness() -> Any:
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness")
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    if spec is None or spec.loader is None:
        raise ImportError("repairbot: the harness package is missing from %s" % folder)
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return package


def main() -> Any:
    load_harness()
    from repairbot_harness.frames import OWNERSHIP

    OWNERSHIP.add_harness_file(__file__)
    if sys.argv[1:] == ["--serve"]:
        from repairbot_harness.server import serve

        return serve()
    if len(sys.argv) != 2:
        sys.stderr.write("usage: bootstrap.py CONFIG.json | --serve\n")
        return 2
    from repairbot_harness.main import run

    return run(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
