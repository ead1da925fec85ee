"""The persistent queue: a value (every version keeps what it held, equal by content), with
appends that share its storage instead of copying it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.persistent import PersistentQueue


def test_an_append_to_the_newest_version_shares_its_storage_and_older_ones_do_not_see_it() -> None:
    queue: PersistentQueue[int] = PersistentQueue()
    versions = [queue]
    for i in range(10_000):
        queue = queue.append(i)
        versions.append(queue)
    # No copy per append: every version reads the one list the first append made.
    assert len({id(v._items) for v in versions[1:]}) == 1
    assert [len(v) for v in versions[::1000]] == list(range(0, 10_001, 1000))
    assert list(versions[3]) == [0, 1, 2]
    assert versions[3].last == 2
    assert queue.first == 0
    assert queue.last == 9_999


def test_a_second_branch_from_an_older_version_copies_and_leaves_both_intact() -> None:
    base = PersistentQueue([1, 2]).append(3)
    left = base.append(4)
    right = base.append(40)  # base is no longer the newest: this one copies
    assert (list(base), list(left), list(right)) == ([1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 40])
    assert right._items is not left._items


def test_equal_contents_are_equal_queues_however_they_were_built() -> None:
    built = PersistentQueue[int]().append(0).append(1).append(2).append(3).popleft()
    assert built == PersistentQueue([1, 2, 3])
    assert hash(built) == hash(PersistentQueue([1, 2, 3]))
    assert built != PersistentQueue([1, 2])
    assert built != PersistentQueue([1, 2, 4])
    assert built != (1, 2, 3)
    assert repr(built) == "PersistentQueue([1, 2, 3])"


def test_empty_queue_and_bounds() -> None:
    empty: PersistentQueue[str] = PersistentQueue()
    assert not empty
    assert len(empty) == 0
    assert list(empty) == []
    with pytest.raises(IndexError):
        _ = empty.first
    with pytest.raises(IndexError):
        _ = empty.last
    with pytest.raises(IndexError):
        empty.popleft()
    with pytest.raises(IndexError, match=r"^cannot drop 3 items from a queue of 2$"):
        PersistentQueue("ab").drop(3)
    with pytest.raises(IndexError):
        PersistentQueue("ab").drop(-1)
    assert PersistentQueue("ab").drop(2) == empty


def test_items_taken_from_the_front_are_released_once_they_are_most_of_the_list() -> None:
    queue = PersistentQueue(range(1000))
    for _ in range(600):
        queue = queue.popleft()
    assert list(queue) == list(range(600, 1000))
    assert len(queue._items) < 1000  # the slice was copied; the 600 taken are not held


class _RacingList(list[int]):
    """A list another thread appends to first, between the queue's look at its length and
    its own append: the interleaving two threads appending to one version can produce."""

    def append(self, item: int) -> None:
        super().append(-1)  # the other thread's item lands where this one meant to
        super().append(item)


def test_an_append_that_lost_a_race_for_the_slot_copies_instead() -> None:
    base = PersistentQueue(range(3))
    base._items = _RacingList(base._items)
    mine = base.append(7)
    assert list(mine) == [0, 1, 2, 7]
    assert list(base) == [0, 1, 2]
    assert mine._items is not base._items


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 5), st.integers()),
        st.tuples(st.just("drop"), st.integers(0, 5), st.integers(0, 3)),
    ),
    max_size=60,
)


@pytest.mark.heavy
@settings(max_examples=300, deadline=None)
@given(ops=_ops)
def test_every_version_holds_what_a_tuple_would_whatever_the_history(
    ops: list[tuple[str, int, int]],
) -> None:
    # The model is a tuple per version; an operation may start from any earlier version
    # (a branch), as a replay check or an undo would.
    versions: list[tuple[PersistentQueue[int], tuple[int, ...]]] = [(PersistentQueue(), ())]
    for op, pick, value in ops:
        queue, model = versions[-1 - pick % len(versions)]
        if op == "append":
            versions.append((queue.append(value), (*model, value)))
        elif value <= len(model):
            versions.append((queue.drop(value), model[value:]))
    for queue, model in versions:
        assert tuple(queue) == model
        assert tuple(reversed(queue)) == model[::-1]
        assert len(queue) == len(model)
        assert queue == PersistentQueue(model)
        if model:
            assert (queue.first, queue.last) == (model[0], model[-1])
