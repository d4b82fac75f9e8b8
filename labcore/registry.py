"""Name -> item registries. Adding a discipline, model or protocol is adding one entry."""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from labcore.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """An ordered mapping from names to items whose lookup errors list the valid names."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        """Remove an entry (tests register temporary entries and take them back out)."""
        self._items.pop(name, None)

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(self._items) or "(none registered)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid names: {valid}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> list[str]:
        return list(self._items)

    def items(self):
        return self._items.items()
