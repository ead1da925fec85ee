"""An immutable first-in first-out queue whose appends do not copy it.

``PersistentQueue`` is a value: every operation returns a new queue and leaves the one it
was called on as it was, and two queues are equal when they hold equal items in the same
order, however each was built. That is what a state of the rules needs (``rules.craps``
keeps the rolls waiting behind a pending ``CHECK`` in one): a state never changes, and a
replay is checked by comparing states.

A tuple would do all that, but appending to a tuple copies it, so ``n`` appends cost
``n**2 / 2`` copies. Here every version of a queue reads a slice ``[start:stop]`` of one
list shared with the versions it was made from. Appending to the newest version (whose
slice ends where the list ends) appends to the list, in place: older versions do not see
it, their slices end before it. Appending to an older version (a second branch) copies its
slice first. So a queue used the way a state machine uses it, each version followed by one
next, costs amortised O(1) per append and per ``popleft``; ``first``, ``last`` and
``len`` are O(1). Items taken from the front are released once they are most of the list
(the slice is copied then, so that too is amortised O(1)).

Thread safety: appending checks that its item landed where it meant to (an append by
another thread to the same version in between makes it copy instead), so versions stay
what they were even if two threads append to one queue at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, Generic, TypeVar

T = TypeVar("T")

_COMPACT_AT: Final = 64
"""Copy the live slice once at least this many items taken from the front are held, and
they are at least half the list."""


class PersistentQueue(Generic[T]):
    """An immutable FIFO queue with amortised O(1) ``append`` and ``popleft`` (see the
    module docstring). Build one with ``PersistentQueue()`` or ``PersistentQueue(items)``."""

    __slots__ = ("_items", "_start", "_stop")

    _items: list[T]
    _start: int
    _stop: int

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._items = list(items)
        self._start = 0
        self._stop = len(self._items)

    @classmethod
    def _view(cls, items: list[T], start: int, stop: int) -> PersistentQueue[T]:
        queue: PersistentQueue[T] = cls.__new__(cls)
        if start >= _COMPACT_AT and 2 * start >= stop:
            items, start, stop = items[start:stop], 0, stop - start
        queue._items, queue._start, queue._stop = items, start, stop
        return queue

    def append(self, item: T) -> PersistentQueue[T]:
        """A queue with ``item`` at the back."""
        items, stop = self._items, self._stop
        if stop == len(items):
            items.append(item)
            if items[stop] is item:  # nobody appended to this version in between
                return self._view(items, self._start, stop + 1)
        fresh = items[self._start : stop]
        fresh.append(item)
        return self._view(fresh, 0, len(fresh))

    def popleft(self) -> PersistentQueue[T]:
        """The queue without its first item (``IndexError`` when empty)."""
        return self.drop(1)

    def drop(self, count: int) -> PersistentQueue[T]:
        """The queue without its first ``count`` items (``IndexError`` if it holds fewer)."""
        if not 0 <= count <= len(self):
            raise IndexError(f"cannot drop {count} items from a queue of {len(self)}")
        if count == len(self):
            return PersistentQueue()
        return self._view(self._items, self._start + count, self._stop)

    @property
    def first(self) -> T:
        """The item at the front (``IndexError`` when empty)."""
        if not self:
            raise IndexError("the queue is empty")
        return self._items[self._start]

    @property
    def last(self) -> T:
        """The item at the back (``IndexError`` when empty)."""
        if not self:
            raise IndexError("the queue is empty")
        return self._items[self._stop - 1]

    def __len__(self) -> int:
        return self._stop - self._start

    def __bool__(self) -> bool:
        return self._stop > self._start

    def __iter__(self) -> Iterator[T]:
        items = self._items
        for i in range(self._start, self._stop):
            yield items[i]

    def __reversed__(self) -> Iterator[T]:
        items = self._items
        for i in range(self._stop - 1, self._start - 1, -1):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PersistentQueue):
            return NotImplemented
        if len(self) != len(other):
            return False
        if self._items is other._items and self._start == other._start:
            return True  # the same slice of the same list
        return all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"PersistentQueue({list(self)!r})"
