"""The torch entry points the probes watch, each patched in one place.

A probe never patches torch itself: it subscribes here. A function or method entry point
(``DataLoader.__iter__``, ``torch.load``, ``Optimizer.zero_grad``, a layer's ``__init__`` ...)
is replaced once, by a dispatcher, at its first subscription; each subscriber is an *around*
``fn(call, *args, **kwargs)`` that may change the arguments, must ``call`` the rest of the
chain, and may change what it returns. The latest subscriber is the outermost, as if each
had wrapped the function in turn. Torch's global hooks (module forward pre/post hooks,
optimizer step pre/post hooks) are registered once each and call their subscribers in order.
"""


from typing import Any, Callable, Dict, List, Sequence, Tuple


class _EntryPoint(object):
    """One patched function and the arounds subscribed to it."""

    def __init__(self, owner: Any, name: str, metadata: bool, aliases: Sequence[Tuple[Any, str]]) -> None:
        self.real = getattr(owner, name)
        self.arounds: List[Callable[..., Any]] = []
        entry = self

        def dispatch(*args: Any, **kwargs: Any) -> Any:
            return entry.call(len(entry.arounds) - 1, args, kwargs)

        if metadata:  # what torch's own introspection (and the user's) reads off the function
            dispatch.__name__ = getattr(self.real, "__name__", name)
            dispatch.__doc__ = getattr(self.real, "__doc__", None)
            dispatch.__wrapped__ = self.real  # type: ignore[attr-defined]
        setattr(owner, name, dispatch)
        for alias_owner, alias_name in aliases:
            setattr(alias_owner, alias_name, dispatch)

    def call(self, index: int, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        if index < 0:
            return self.real(*args, **kwargs)
        return self.arounds[index](lambda *a, **k: self.call(index - 1, a, k), *args, **kwargs)


class _GlobalHook(object):
    """One callback registered with torch, calling its subscribers in order."""

    def __init__(self, register: Callable[[Callable[..., None]], Any]) -> None:
        self.subscribers: List[Callable[..., Any]] = []
        self.register = register
        self.registered = False

    def add(self, fn: Callable[..., Any]) -> None:
        self.subscribers.append(fn)
        if not self.registered:
            self.registered = True
            self.register(self.dispatch)

    def dispatch(self, *args: Any) -> None:
        for fn in self.subscribers:
            fn(*args)
        return None


def _register_forward_hook(torch: Any) -> Callable[[Callable[..., None]], None]:
    def register(hook: Any) -> None:
        module = torch.nn.modules.module
        try:
            module.register_module_forward_hook(hook, always_call=True)
        except TypeError:  # older torch: no always_call
            module.register_module_forward_hook(hook)

    return register


def _register_optimizer_hook(kind: str) -> Callable[[Callable[..., None]], None]:
    def register(hook: Any) -> None:
        try:
            from torch.optim import optimizer
        except ImportError:
            return
        register_hook = getattr(optimizer, "register_optimizer_step_%s_hook" % kind, None)
        if register_hook is not None:  # torch < 2.0: no global optimizer hooks
            register_hook(hook)

    return register


class TorchHooks(object):
    """The entry points of one process's torch; probes subscribe, nothing else patches torch."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._entries: Dict[Tuple[int, str], _EntryPoint] = {}  # (id(owner), name) -> _EntryPoint
        self.forward_pre = _GlobalHook(lambda hook: torch.nn.modules.module.register_module_forward_pre_hook(hook))
        self.forward = _GlobalHook(_register_forward_hook(torch))
        self.step_pre = _GlobalHook(_register_optimizer_hook("pre"))
        self.step_post = _GlobalHook(_register_optimizer_hook("post"))

    def around(
        self, owner: Any, name: str, fn: Callable[..., Any], metadata: bool = True,
        aliases: Sequence[Tuple[Any, str]] = (),
    ) -> None:
        """Subscribe ``fn(call, *args, **kwargs)`` to ``owner.name`` (patched at the first one).

        ``metadata``: the patched function carries the real one's name, doc and ``__wrapped__``;
        ``aliases``: (owner, name) pairs that are the same function under another name.
        """
        key = (id(owner), name)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _EntryPoint(owner, name, metadata, aliases)
        entry.arounds.append(fn)

    def real(self, owner: Any, name: str) -> Any:
        """The function as it was before the harness patched it."""
        entry = self._entries.get((id(owner), name))
        return entry.real if entry is not None else getattr(owner, name)

    # the entry points more than one probe watches ------------------------------------------
    def dataloader(self, name: str, fn: Callable[..., Any], metadata: bool = True) -> None:
        """``DataLoader.__init__`` / ``__iter__`` / ``__len__``. With the real one's metadata:
        Lightning reads ``inspect.signature(DataLoader.__init__)`` to record the arguments of a
        loader a hook makes (``__dataset``), and rebuilds the loader from them (predict)."""
        from torch.utils.data import DataLoader

        self.around(DataLoader, name, fn, metadata=metadata)

    def layer_init(self, klass: type, fn: Callable[..., Any]) -> None:
        """A layer class's own ``__init__`` (``nn.Module.__init__`` for every module)."""
        self.around(klass, "__init__", fn, metadata=klass is not self.torch.nn.Module)

    def torch_function(self, name: str, fn: Callable[..., Any]) -> None:
        """``torch.load`` / ``torch.save`` (also reachable as ``torch.serialization.*``)."""
        self.around(self.torch, name, fn, aliases=((self.torch.serialization, name),))
