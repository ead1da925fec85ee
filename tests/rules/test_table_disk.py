"""The journal's alarms: ``JOURNAL_FAULT`` (the journal refuses to write) and ``DISK_LOW``
(less free space than the hours configured of the journal's growth need), as host facts the
daemon measures and the rules decide on (rules/table.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import table
from rules.events import (
    AlarmCleared,
    AlarmRaised,
    BrokerLoginChecked,
    DeviceConnected,
    DiskSpaceChecked,
    JournalRefused,
    JournalWritable,
    TimePassed,
)
from rules.table import TableState

T0 = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)
MB = 1_000_000


def craps_table() -> TableState:
    state = table.initial_state("CRAPS", at=T0)
    state, _ = table.apply(state, DeviceConnected(device="dice_reader"), at=T0)
    return state


def alarm(state: TableState, code: str) -> table.Alarm | None:
    return next((a for a in table.alarms(state) if a.code == code), None)


def disk(free: int, needed: int, hours: int = 24) -> DiskSpaceChecked:
    return DiskSpaceChecked(free_bytes=free, needed_bytes=needed, hours=hours)


def test_journal_fault_is_raised_with_the_error_and_cleared_when_it_writes() -> None:
    state, out = table.apply(craps_table(), JournalRefused(error="database or disk is full"), at=T0)
    raised = alarm(state, "JOURNAL_FAULT")
    assert raised is not None
    assert raised.message == (
        "the journal cannot write (database or disk is full): the table is closed and holds "
        "every event until it can; free space on the journal's disk"
    )
    assert out == (AlarmRaised(code="JOURNAL_FAULT", device=None, message=raised.message),)
    again, nothing = table.apply(state, JournalRefused(error="database or disk is full"), at=T0)
    assert (again, nothing) == (state, ())  # the same fault: nothing to journal
    state, out = table.apply(state, JournalWritable(), at=T0 + timedelta(minutes=3))
    assert out == (AlarmCleared(code="JOURNAL_FAULT", device=None),)
    assert table.apply(state, JournalWritable(), at=T0) == (state, ())


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        ("", "no reason given"),
        ("x" * 5000, "x" * 160),
        ("line\nbreak\x00and\ttabs", "line break\x00and tabs"),
    ],
)
def test_the_journal_error_is_bounded_in_the_message(error: str, shown: str) -> None:
    state, _ = table.apply(craps_table(), JournalRefused(error=error), at=T0)
    raised = alarm(state, "JOURNAL_FAULT")
    assert raised is not None
    assert f"cannot write ({shown})" in raised.message


def test_disk_low_under_the_need_and_cleared_ten_percent_above_it() -> None:
    state = craps_table()
    state, out = table.apply(state, disk(100 * MB, 100 * MB), at=T0)
    assert out == ()  # exactly what is needed: not low
    state, out = table.apply(state, disk(100 * MB - 1, 100 * MB), at=T0)
    raised = alarm(state, "DISK_LOW")
    assert raised is not None
    assert raised.message == (
        "the journal's disk has 99 MB free, less than 24 hours of this table's journal need "
        "(100 MB): free space, or move the journal to a larger disk"
    )
    assert [type(o) for o in out] == [AlarmRaised]
    # A little space returns: still low until 10 % above the need.
    state, out = table.apply(state, disk(109 * MB, 100 * MB), at=T0)
    assert alarm(state, "DISK_LOW") is not None
    assert "109 MB free" in alarm(state, "DISK_LOW").message  # type: ignore[union-attr]
    state, out = table.apply(state, disk(110 * MB, 100 * MB), at=T0)
    assert out == (AlarmCleared(code="DISK_LOW", device=None),)
    # The timer does not clear or raise it: only a measure does.
    assert table.apply(state, TimePassed(), at=T0 + timedelta(days=1)) == (state, ())


def test_the_message_changes_only_by_whole_megabytes() -> None:
    state, _ = table.apply(craps_table(), disk(5 * MB, 50 * MB, hours=1), at=T0)
    assert "less than 1 hour of" in alarm(state, "DISK_LOW").message  # type: ignore[union-attr]
    same, out = table.apply(state, disk(5 * MB + 999_999, 50 * MB - 500_000, hours=1), at=T0)
    assert (same, out) == (state, ())  # 5 MB free, 50 MB needed (rounded up) as before


@pytest.mark.parametrize(
    ("free", "needed", "low"),
    [(-5, 10, True), (0, 0, False), (-1, -1, False), (10, -3, False), (0, 1, True)],
)
def test_hostile_sizes_are_taken_as_zero_or_more(free: int, needed: int, low: bool) -> None:
    state, _ = table.apply(craps_table(), disk(free, needed), at=T0)
    assert (alarm(state, "DISK_LOW") is not None) == low


@given(st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 10**12)), max_size=30))
def test_disk_low_is_up_exactly_when_the_rule_says(checks: list[tuple[int, int]]) -> None:
    # Independently: low after a check when free < needed, or when it was low and
    # free < 1.1 * needed.
    state = craps_table()
    low = False
    for free, needed in checks:
        state, _ = table.apply(state, disk(free, needed), at=T0)
        low = free * 10 < needed * 11 if low else free < needed
        assert (alarm(state, "DISK_LOW") is not None) == low


def test_a_refused_login_after_the_start_is_an_alarm_until_the_broker_takes_it_again() -> None:
    # Issue 20: a wrong MQTT password read "broker unreachable; retrying" forever.
    refused = BrokerLoginChecked(refused=True, user="lammer-t1")
    state, out = table.apply(craps_table(), refused, at=T0)
    raised = alarm(state, "MQTT_LOGIN_REFUSED")
    assert raised is not None
    assert raised.message == (
        "the MQTT broker refuses the table's login as 'lammer-t1': no display sees the table "
        "(every event waits in the journal); check username and password_file"
    )
    assert out == (AlarmRaised(code="MQTT_LOGIN_REFUSED", device=None, message=raised.message),)
    assert table.apply(state, refused, at=T0)[1] == ()  # said once
    cleared, out = table.apply(state, BrokerLoginChecked(refused=False, user="lammer-t1"), at=T0)
    assert alarm(cleared, "MQTT_LOGIN_REFUSED") is None
    assert out == (AlarmCleared(code="MQTT_LOGIN_REFUSED", device=None),)
