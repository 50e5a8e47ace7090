"""Acting on a library module once it has been imported: the one import hook the probes share.

``when_imported(name, fn)`` calls ``fn(module)`` right after the module ``name`` has executed,
as the script imports it (or at once, if it already is): a probe that adapts a library
(tqdm's notebook bar, Lightning's ``Trainer.fit``) never imports it itself, so a script that
does not use the library runs exactly as before and pays nothing for it. The module is found
by the other finders, as it would be without the harness; only its loader is wrapped.
"""

import sys
from typing import Any, Callable, Dict, List, Optional

_WAITING: Dict[str, List[Callable[[Any], None]]] = {}  # module name -> what runs once it has executed


class _Loader(object):
    """The module's own loader, with the waiting calls made once the module has run."""

    def __init__(self, real: Any, name: str) -> None:
        self.real = real
        self.name = name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.real.exec_module(module)
        for fn in _WAITING.pop(self.name, ()):
            fn(module)


class _Finder(object):
    """Finds a waited-for module with the other finders and wraps its loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Optional[Any]:
        if fullname not in _WAITING:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


_FINDER = _Finder()


def when_imported(name: str, fn: Callable[[Any], None]) -> None:
    """``fn(module)`` once the module ``name`` has executed (now, if it already has)."""
    module = sys.modules.get(name)
    if module is not None:
        fn(module)
        return
    _WAITING.setdefault(name, []).append(fn)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
