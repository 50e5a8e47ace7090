"""Weak containers keyed by identity: the harness never hashes or compares the script's objects.

``weakref.WeakKeyDictionary`` and ``WeakSet`` call the key's ``__hash__`` and, on a hash
collision, its ``__eq__``. The script's classes may define either: torchmetrics' ``Metric``
hashes its metric states, which do not exist yet while ``nn.Module.__init__`` runs (so a
module site recorded from there broke Lightning's ``self.log()``), and a tensor's ``==`` is
elementwise. These containers key by ``id()`` and hold a weak reference whose callback
forgets the entry when the object dies, so the script sees nothing of them. Iteration is in
insertion order, over a snapshot (a callback may run during it).
"""

import weakref
from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, Tuple, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityWeakKeyDict(Generic[K, V]):
    """A mapping from live objects (by identity) to values; an entry goes with its key."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: Dict[int, Tuple["weakref.ref[Any]", V]] = {}

    def _entry(self, key: Any) -> Optional[Tuple["weakref.ref[Any]", V]]:
        entry = self._entries.get(id(key))
        if entry is None or entry[0]() is not key:
            return None
        return entry

    def _forget(self, key_id: int) -> Callable[["weakref.ref[Any]"], None]:
        entries = self._entries

        def forget(ref: "weakref.ref[Any]") -> None:
            entry = entries.get(key_id)
            if entry is not None and entry[0] is ref:  # not a newer object that reused the id
                del entries[key_id]

        return forget

    def __setitem__(self, key: K, value: V) -> None:
        entry = self._entry(key)
        ref = entry[0] if entry is not None else weakref.ref(key, self._forget(id(key)))
        self._entries[id(key)] = (ref, value)

    def __getitem__(self, key: K) -> V:
        entry = self._entry(key)
        if entry is None:
            raise KeyError(id(key))
        return entry[1]

    def get(self, key: K, default: Any = None) -> Any:
        entry = self._entry(key)
        return default if entry is None else entry[1]

    def __contains__(self, key: Any) -> bool:
        return self._entry(key) is not None

    def __len__(self) -> int:
        return len(self._entries)

    def _live(self) -> List[Tuple[K, V]]:
        pairs = []
        for ref, value in list(self._entries.values()):
            key = ref()
            if key is not None:
                pairs.append((key, value))
        return pairs

    def keys(self) -> List[K]:
        return [key for key, _ in self._live()]

    def values(self) -> List[V]:
        return [value for _, value in self._live()]

    def items(self) -> List[Tuple[K, V]]:
        return self._live()

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())


class IdentityWeakSet(object):
    """A set of live objects, by identity; a member goes when it dies."""

    __slots__ = ("_members",)

    def __init__(self) -> None:
        self._members: "IdentityWeakKeyDict[Any, None]" = IdentityWeakKeyDict()

    def add(self, member: Any) -> None:
        if member not in self._members:
            self._members[member] = None

    def __contains__(self, member: Any) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._members.keys())
