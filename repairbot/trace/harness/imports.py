"""Runs a probe's adjustment of a library module once the module has executed: at once when it
is already imported, else when the script first imports it (a finder ahead of the others wraps
the module's own loader). The module is found and loaded as it would be without the harness."""

import sys
from typing import Any, Callable, Dict, Optional

_AFTER: Dict[str, Callable[[Any], None]] = {}  # module name -> what to do once it has executed
_FINDER: Optional["_Finder"] = None


class _Loader(object):
    """The module's own loader, with the probe's adjustment run once the module has executed."""

    def __init__(self, real: Any, then: Callable[[Any], None]) -> None:
        self.real = real
        self.then = then

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.real.exec_module(module)
        self.then(module)


class _Finder(object):
    """Finds the watched modules with the other finders and wraps their loaders."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Optional[Any]:
        then = _AFTER.get(fullname)
        if then is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, then)
                return spec
        return None


def after_import(name: str, then: Callable[[Any], None]) -> None:
    """``then(module)`` once module ``name`` has executed (now, if it already has)."""
    global _FINDER
    if name in sys.modules:
        then(sys.modules[name])
        return
    _AFTER[name] = then
    if _FINDER is None:
        _FINDER = _Finder()
        sys.meta_path.insert(0, _FINDER)
