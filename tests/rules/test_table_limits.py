"""What a device cannot do to the table by sending too much: bad frames (``LINK_ERRORS``),
fault codes without end (``DEVICE_FAULT_OTHER``), rolls behind a pending ``CHECK``
(``ROLL_BACKLOG``); the timer that clears alarms after a quiet time, replayed exactly; and
the warm-up that builds the first event's tables before the table is ready."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import craps, table
from rules.alarms import PAYOUT_ALARMS
from rules.events import (
    AlarmCleared,
    AlarmRaised,
    BadFrameSeen,
    CleanStart,
    ClockJumped,
    CoverAllResult,
    DeviceConnected,
    DeviceDisconnected,
    DeviceHello,
    DeviceStatus,
    DiceRolled,
    HandDealt,
    ModeReported,
    NoiseSeen,
    Outcome,
    RollCheck,
    RollDecided,
    RoundDealt,
    RoundSettled,
    TimePassed,
)
from rules.table import TableEvent, TableState
from tests.conftest import CLI_BOUND_S

T0 = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def apply_at(
    state: TableState, *timed: tuple[float, TableEvent]
) -> tuple[TableState, list[Outcome]]:
    out: list[Outcome] = []
    for seconds, event in timed:
        state, outcomes = table.apply(state, event, at=at(seconds))
        out.extend(outcomes)
    return state, out


def alarm(state: TableState, code: str) -> table.Alarm | None:
    return next((a for a in table.alarms(state) if a.code == code), None)


def craps_table() -> TableState:
    state = table.initial_state("CRAPS", at=T0)
    state, _ = apply_at(state, (0, DeviceConnected(device="dice_reader")))
    return state


BAD = BadFrameSeen(device="dice_reader")
NOISE = NoiseSeen(device="dice_reader")

# --- LINK_ERRORS ---------------------------------------------------------------------


def test_twenty_bad_frames_in_ten_seconds_are_no_alarm_and_the_21st_is() -> None:
    state, out = apply_at(craps_table(), *((0.4 * i, BAD) for i in range(20)))  # 7.6 s
    assert out == []
    assert alarm(state, "LINK_ERRORS") is None
    state, out = apply_at(state, (9.9, BAD))
    assert [o.code for o in out if isinstance(o, AlarmRaised)] == ["LINK_ERRORS"]
    raised = alarm(state, "LINK_ERRORS")
    assert raised is not None
    assert (raised.device, raised.since) == ("dice_reader", at(9.9))
    assert "more than 20 bad frames in 10 s" in raised.message


def test_bad_frames_spread_wider_than_ten_seconds_raise_nothing() -> None:
    # 21 bad frames, but never more than 20 within 10 s: a noisy line, not a broken one.
    state, out = apply_at(craps_table(), *((0.5 * i, BAD) for i in range(21)))  # 0..10 s
    assert alarm(state, "LINK_ERRORS") is None
    assert out == []
    state, out = apply_at(state, *((100 + 0.51 * i, BAD) for i in range(200)))
    assert alarm(state, "LINK_ERRORS") is None
    assert out == []
    assert len(state.device("dice_reader").bad_frames) <= 20  # what it keeps is bounded


def flooded() -> TableState:
    state, _ = apply_at(craps_table(), *((0.1 * i, BAD) for i in range(21)))
    assert alarm(state, "LINK_ERRORS") is not None
    return state


def test_it_clears_after_sixty_seconds_without_a_bad_frame_and_not_before() -> None:
    state, out = apply_at(flooded(), *((10 + 0.05 * i, BAD) for i in range(400)))  # to 29.95 s
    assert out == []
    # The daemon's timer ticks every second: nothing clears while a bad frame is less than
    # 60 s old; the tick after that clears it (within LINK_ERRORS_STEP more).
    for second in range(30, 90):
        state, out = apply_at(state, (second, TimePassed()))
        assert out == [], second
    state, out = apply_at(state, (90.5, TimePassed()), (91, TimePassed()))
    assert out == [AlarmCleared(code="LINK_ERRORS", device="dice_reader")]
    assert alarm(state, "LINK_ERRORS") is None


def test_a_bad_frame_before_the_quiet_time_is_over_starts_it_again() -> None:
    state, out = apply_at(flooded(), (50, BAD), (100, TimePassed()))
    assert out == []
    state, out = apply_at(state, (111.5, TimePassed()))
    assert out == [AlarmCleared(code="LINK_ERRORS", device="dice_reader")]
    # Once cleared, it takes more than 20 in 10 s again to raise it.
    state, out = apply_at(state, *((200 + i, BAD) for i in range(15)))
    assert out == []


def test_after_the_wall_clock_went_back_the_quiet_time_counts_from_then() -> None:
    # A clock stepped back two hours must not hold the alarm for two hours.
    state, out = apply_at(flooded(), (-7200, TimePassed()))
    assert out == []
    state, out = apply_at(state, (-7200 + 62, TimePassed()))
    assert out == [AlarmCleared(code="LINK_ERRORS", device="dice_reader")]


def test_what_changes_nothing_returns_the_same_state() -> None:
    # The daemon journals a bad frame's fact, or a tick, only when the state changed; a
    # fact inside the step of the time kept, or a tick with nothing to clear, is a no-op.
    state = flooded()
    for event, seconds in ((BAD, 2.05), (TimePassed(), 3.0), (TimePassed(), 61.0)):
        new, out = table.apply(state, event, at=at(seconds))
        assert new is state
        assert out == ()
    new, out = table.apply(state, BAD, at=at(3.1))
    assert new != state
    assert out == ()
    quiet = craps_table()
    assert table.apply(quiet, TimePassed(), at=at(500)) == (quiet, ())


def test_link_errors_stop_no_payout() -> None:
    # A line that needs retransmissions still delivers every good frame exactly: the
    # round dealt meanwhile pays (only the mode and the deck withhold payouts).
    state = table.initial_state("CSP", at=T0)
    state, _ = apply_at(
        state, (0, DeviceConnected(device="shuffler")), (0, ModeReported(game="CSP"))
    )
    state, _ = apply_at(state, *((1 + 0.1 * i, BadFrameSeen(device="shuffler")) for i in range(25)))
    assert alarm(state, "LINK_ERRORS") is not None
    state, out = apply_at(
        state,
        (5, HandDealt(round_id=812, position="P1", cards=("9c", "9d", "5h", "5s", "2c"))),
        (5, HandDealt(round_id=812, position="P3", cards=("Qh", "Jh", "Th", "8h", "7h"))),
        (5, HandDealt(round_id=812, position="DL", cards=("Ac", "Kd", "4s", "3h", "3c"))),
        (6, RoundDealt(round_id=812, hands=3)),
        (7, RoundSettled(round_id=812)),
    )
    [result] = [o for o in out if isinstance(o, CoverAllResult)]
    assert result.outcome == "win"
    assert {"LINK_ERRORS", "ROLL_BACKLOG", "DEVICE_FAULT_OTHER"}.isdisjoint(PAYOUT_ALARMS)


def test_noise_six_times_without_a_good_frame_between_raises_link_errors() -> None:
    # A line at the wrong baud rate: every transmission arrives as bytes outside any frame,
    # no bad frame to NAK, no good frame; the device resends (link-layer.md) for ever.
    state, out = apply_at(craps_table(), *((0.5 * i, NOISE) for i in range(5)))
    assert out == []
    assert alarm(state, "LINK_ERRORS") is None
    state, out = apply_at(state, (4.5, NOISE))
    assert [o.code for o in out if isinstance(o, AlarmRaised)] == ["LINK_ERRORS"]
    raised = alarm(state, "LINK_ERRORS")
    assert raised is not None
    assert (raised.device, raised.since) == ("dice_reader", at(4.5))
    assert raised.message == (
        "the dice reader sent 6 times in a row bytes outside any frame (noise) and no good "
        "frame between: check the baud rate and port settings of the device, of any device "
        "server and of the table's configuration, and the cable; clears after 60 s without "
        "noise or a bad frame"
    )


def test_a_good_frame_ends_a_run_of_noise_and_bad_frames_neither_end_nor_count() -> None:
    roll = DiceRolled(roll_id=1, dice=(2, 3))
    state, out = apply_at(
        craps_table(), *((0.1 * i, NOISE) for i in range(5)), (1, roll), (1.1, NOISE)
    )
    state, more = apply_at(state, *((2 + 0.1 * i, NOISE) for i in range(4)))
    assert alarm(state, "LINK_ERRORS") is None
    assert [o for o in out + more if isinstance(o, AlarmRaised)] == []
    # A bad frame (NAKed) is the rate rule's: it neither ends the run nor adds to it.
    state, out = apply_at(state, (3, BAD), (3.1, NOISE))
    assert [o.code for o in out if isinstance(o, AlarmRaised)] == ["LINK_ERRORS"]


@pytest.mark.parametrize(
    "event",
    [
        DeviceConnected(device="dice_reader"),
        DeviceDisconnected(device="dice_reader", reason="port lost"),
        DeviceHello(device="dice_reader", model="DICE-SIM", firmware="1.0.0", serial="DR0042"),
        DeviceStatus(device="dice_reader", code="READY", text=""),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_new_connection_or_any_good_frame_ends_a_run_of_noise(event: TableEvent) -> None:
    state, _ = apply_at(craps_table(), *((0.1 * i, NOISE) for i in range(5)), (1, event))
    state, out = apply_at(state, *((2 + 0.1 * i, NOISE) for i in range(5)))
    assert out == []
    assert alarm(state, "LINK_ERRORS") is None


def test_noise_keeps_link_errors_raised_and_it_clears_sixty_seconds_after_the_last() -> None:
    state = flooded()
    state, out = apply_at(state, *((10 + 2 * i, NOISE) for i in range(10)))  # to 28 s
    assert out == []
    state, out = apply_at(state, (88, TimePassed()))
    assert out == []  # 60 s after the last noise, within the step kept: not yet
    state, out = apply_at(state, (89.5, TimePassed()))
    assert out == [AlarmCleared(code="LINK_ERRORS", device="dice_reader")]
    # noise raised it, noise alone: the same rule clears it
    state, _ = apply_at(state, *((100 + i, NOISE) for i in range(6)))
    assert alarm(state, "LINK_ERRORS") is not None
    state, out = apply_at(state, (166.5, TimePassed()))
    assert out == [AlarmCleared(code="LINK_ERRORS", device="dice_reader")]


def test_noise_at_a_table_without_that_device_is_unexpected() -> None:
    _, out = apply_at(craps_table(), (1, NoiseSeen(device="shuffler")))
    assert [o.code for o in out if isinstance(o, AlarmRaised)] == ["UNEXPECTED_FRAME"]


# --- replay: what the daemon journals rebuilds the same table -------------------------

_timed_events = st.lists(
    st.tuples(
        # Mostly forward in small steps, sometimes a long pause, rarely the clock going back.
        st.one_of(
            st.floats(0, 0.6),
            st.floats(0, 0.6),
            st.floats(0, 0.6),
            st.floats(50, 70),
            st.floats(-30, 0),
        ),
        st.sampled_from(["bad", "bad", "bad", "noise", "noise", "tick", "roll", "check", "decide"]),
    ),
    max_size=120,
)


@pytest.mark.heavy
@settings(max_examples=150, deadline=None)
@given(steps=_timed_events)
def test_replaying_only_what_changed_the_table_rebuilds_it_exactly(
    steps: list[tuple[float, str]],
) -> None:
    live = craps_table()
    journal: list[tuple[datetime, TableEvent]] = []
    live_out: list[Outcome] = []
    now = at(1)
    roll_id = 0
    for step, kind in steps:
        now += timedelta(seconds=step)
        event: TableEvent
        if kind == "bad":
            event = BAD
        elif kind == "noise":
            event = NOISE
        elif kind == "tick":
            event = TimePassed()
        elif kind == "decide":
            pending = craps.waiting(live.craps)[1] if live.craps is not None else None
            if pending is None:
                continue
            event = RollDecided(roll_id=pending, valid=True, operator="Ann", at=now)
        else:
            roll_id += 1
            if kind == "roll":
                event = DiceRolled(roll_id=roll_id, dice=(2, 3))
            else:
                event = RollCheck(roll_id=roll_id, dice=(2, 3), reason="ON_CHIPS")
        new, out = table.apply(live, event, at=now)
        if isinstance(event, BadFrameSeen | NoiseSeen | TimePassed) and new == live:
            assert out == ()  # not journaled: it must have changed nothing
        else:
            journal.append((now, event))
        live, live_out = new, live_out + list(out)
    replayed = craps_table()
    replay_out: list[Outcome] = []
    for when, event in journal:
        replayed, out = table.apply(replayed, event, at=when)
        replay_out.extend(out)
    assert replayed == live
    assert replay_out == live_out


# --- device fault codes ---------------------------------------------------------------


def status(code: str, text: str = "") -> DeviceStatus:
    return DeviceStatus(device="dice_reader", code=code, text=text)


def fault_code(i: int) -> str:
    return "F" + "".join(chr(65 + int(d)) for d in f"{i:03d}")  # FAAA, FAAB, ...


def test_thirty_two_codes_are_kept_one_by_one_and_the_rest_counted_in_one_alarm() -> None:
    state, out = apply_at(craps_table(), *((i, status(fault_code(i), "x")) for i in range(50)))
    codes = [a.code for a in table.alarms(state) if a.code.startswith("DEVICE_FAULT_")]
    assert codes[:32] == [f"DEVICE_FAULT_{fault_code(i)}" for i in range(32)]
    assert codes[32:] == ["DEVICE_FAULT_OTHER"]
    other = alarm(state, "DEVICE_FAULT_OTHER")
    assert other is not None
    assert other.since == at(32)
    assert "reports 18 more fault codes than the 32 shown" in other.message
    # A code already counted, again (with another text), changes nothing at all.
    again, out = apply_at(state, (60, status(fault_code(40), "other text")))
    assert again is state
    assert out == []
    # A code kept one by one still updates its own alarm.
    _, out = apply_at(state, (61, status(fault_code(3), "new text")))
    [raised] = out
    assert isinstance(raised, AlarmRaised)
    assert raised.message.endswith("new text")
    # READY clears them all, the counted ones included.
    state, out = apply_at(state, (70, status("READY")))
    assert len([o for o in out if isinstance(o, AlarmCleared)]) == 33
    assert not [a for a in table.alarms(state) if a.code.startswith("DEVICE_FAULT")]
    assert state.device("dice_reader").other_faults == ()


def test_four_hundred_codes_keep_the_alarms_bounded_and_stop_changing() -> None:
    state = craps_table()
    changes = 0
    for i in range(400):
        new, _out = table.apply(state, status(fault_code(i), "t" * 300), at=at(i))
        changes += new != state
        state = new
    assert len(table.alarms(state)) == 32 + 1  # connected, no other alarm: 32 codes + OTHER
    other = alarm(state, "DEVICE_FAULT_OTHER")
    assert other is not None
    assert "reports at least 32 more fault codes" in other.message
    assert changes == 32 + 32  # after that, nothing more to journal or republish
    assert len(state.device("dice_reader").other_faults) == 32


def test_a_code_and_a_text_are_kept_to_a_bounded_length() -> None:
    state, _ = apply_at(craps_table(), (1, status("A" * 500, "é" * 1000)))
    [fault] = [a for a in table.alarms(state) if a.code.startswith("DEVICE_FAULT_")]
    assert fault.code == "DEVICE_FAULT_" + "A" * table.MAX_FAULT_CODE
    assert f"(code cut to {table.MAX_FAULT_CODE} characters)" in fault.message
    assert fault.message.endswith("é" * (table.MAX_FAULT_TEXT - 3) + "...")
    assert state.device("dice_reader").status == "A" * table.MAX_FAULT_CODE


def test_a_device_code_named_other_is_counted_in_the_other_alarm() -> None:
    # Its alarm would be DEVICE_FAULT_OTHER, the alarm that counts codes: it is one of them.
    state, _ = apply_at(craps_table(), (1, status("OTHER", "unknown fault")))
    other = alarm(state, "DEVICE_FAULT_OTHER")
    assert other is not None
    assert "reports 1 more fault code than" in other.message


# --- ROLL_BACKLOG -----------------------------------------------------------------------


def test_more_than_twenty_rolls_behind_a_pending_check_raise_roll_backlog_until_decided() -> None:
    state, out = apply_at(
        craps_table(),
        (1, RollCheck(roll_id=1, dice=(3, 4), reason="ON_CHIPS")),
        *((2 + i, DiceRolled(roll_id=2 + i, dice=(2, 2))) for i in range(20)),
    )
    assert alarm(state, "ROLL_BACKLOG") is None
    state, out = apply_at(state, (30, DiceRolled(roll_id=30, dice=(2, 2))))
    [raised] = [o for o in out if isinstance(o, AlarmRaised)]
    assert (raised.code, raised.device) == ("ROLL_BACKLOG", "dice_reader")
    assert "behind roll 1" in raised.message
    # The message does not count: more rolls change nothing about the alarm.
    state, out = apply_at(
        state, *((31 + i, DiceRolled(roll_id=31 + i, dice=(2, 2))) for i in range(50))
    )
    assert not [o for o in out if isinstance(o, AlarmRaised | AlarmCleared)]
    state, out = apply_at(
        state, (90, RollDecided(roll_id=1, valid=False, operator="Ann", at=at(90)))
    )
    assert AlarmCleared(code="ROLL_BACKLOG", device="dice_reader") in out
    assert alarm(state, "ROLL_BACKLOG") is None
    assert state.craps is not None
    assert not state.craps.queue


def test_the_backlog_moves_to_the_next_pending_check_and_clears_at_twenty() -> None:
    events: list[tuple[float, TableEvent]] = [
        (1, RollCheck(roll_id=1, dice=(3, 4), reason="ON_CHIPS")),
        (2, DiceRolled(roll_id=2, dice=(2, 2))),
        (3, RollCheck(roll_id=3, dice=(5, 5), reason="BOWL")),
    ]
    events += [(4 + i, DiceRolled(roll_id=4 + i, dice=(1, 2))) for i in range(21)]
    state, _ = apply_at(craps_table(), *events)
    first = alarm(state, "ROLL_BACKLOG")
    assert first is not None
    assert "behind roll 1" in first.message
    # Roll 1 decided: roll 2 counts, roll 3 is pending with 21 behind it.
    state, out = apply_at(
        state, (40, RollDecided(roll_id=1, valid=True, operator="Ann", at=at(40)))
    )
    moved = alarm(state, "ROLL_BACKLOG")
    assert moved is not None
    assert "behind roll 3" in moved.message
    assert moved.since == first.since
    assert any(isinstance(o, AlarmRaised) and o.code == "ROLL_BACKLOG" for o in out)
    # A CHECK decided invalid while 21 wait: all of them count, the backlog is gone.
    state, out = apply_at(
        state, (41, RollDecided(roll_id=3, valid=False, operator="Ann", at=at(41)))
    )
    assert alarm(state, "ROLL_BACKLOG") is None


# --- warm-up --------------------------------------------------------------------------


@pytest.mark.heavy
def test_warm_up_builds_the_seven_card_table_an_uth_table_needs_and_nothing_for_others() -> None:
    # In a fresh interpreter: this one may have built the table already in another test.
    probe = """
from rules import poker, table
assert not poker.standard7_built()
table.warm_up("CSP")
assert not poker.standard7_built(), "a CSP table paid for the seven-card table"
table.warm_up("UTH")
assert poker.standard7_built()
assert poker._STD7 is poker._standard7_table()  # the first evaluation only looks up
table.warm_up("UTH")
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        timeout=CLI_BOUND_S,
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_warm_up_leaves_evaluation_unchanged() -> None:
    # Built early or on first use, the seven-card values are the same table.
    from rules import poker
    from rules.cards import parse_card

    table.warm_up("UTH")
    hand = [parse_card(c).index for c in ("As", "Ks", "Qs", "Js", "Ts", "2d", "3c")]
    assert poker.evaluate(poker.STANDARD, hand) == poker.evaluate_standard5(hand[:5])


def test_warm_up_names_what_it_built_for_the_log() -> None:
    assert table.warm_up("UTH") == ("seven-card hand values",)
    assert table.warm_up("CRAPS") == ("Bonus Craps odds of every board",)
    for game in ("CSP", "FCP", "LIR", "MSP", "TCP", "BJ"):
        assert table.warm_up(game) == (), game


# --- what the operator reads, and the exact edges of LINK_ERRORS ----------------------

LINK_MESSAGE = (
    "the dice reader sent more than 20 bad frames in 10 s, each answered NAK (link-layer.md): "
    "check its cable, port settings and power; clears after 60 s without a bad frame"
)


def test_link_errors_message_says_what_happened_and_what_to_check() -> None:
    _, out = apply_at(craps_table(), *((0.1 * i, BAD) for i in range(21)))
    assert out == [AlarmRaised(code="LINK_ERRORS", device="dice_reader", message=LINK_MESSAGE)]


def test_twenty_one_bad_frames_at_the_same_instant_raise_link_errors() -> None:
    _, out = apply_at(craps_table(), *((5, BAD) for _ in range(21)))
    assert out == [AlarmRaised(code="LINK_ERRORS", device="dice_reader", message=LINK_MESSAGE)]


def test_link_errors_are_raised_while_another_alarm_of_the_device_is_active() -> None:
    state, _ = apply_at(craps_table(), (0, status("CAMERA_FAULT", "lens")))
    state, out = apply_at(state, *((1 + 0.1 * i, BAD) for i in range(21)))
    assert out == [AlarmRaised(code="LINK_ERRORS", device="dice_reader", message=LINK_MESSAGE)]


def test_the_time_kept_moves_on_a_bad_frame_a_full_step_later_and_not_at_the_same_time() -> None:
    state = flooded()  # the 21st bad frame at 2.0 s
    assert state.device("dice_reader").last_bad_frame == at(2.0)
    same, out = table.apply(state, BAD, at=at(2.0))
    assert same is state
    assert out == ()
    later, _ = table.apply(state, BAD, at=at(3.0))
    assert later.device("dice_reader").last_bad_frame == at(3.0)


def test_link_errors_clear_exactly_sixty_one_seconds_after_the_time_kept() -> None:
    state = flooded()
    # A tick at the very time kept changes nothing (nothing to journal).
    assert table.apply(state, TimePassed(), at=at(2.0))[0] is state
    state, out = apply_at(state, (62.9, TimePassed()))
    assert out == []
    state, out = apply_at(state, (63, TimePassed()))
    assert out == [AlarmCleared(code="LINK_ERRORS", device="dice_reader")]
    assert state.device("dice_reader").last_bad_frame is None
    assert table.apply(state, TimePassed(), at=at(64)) == (state, ())


def test_bad_frames_counted_before_link_errors_do_not_count_again_after_it_clears() -> None:
    state, _ = apply_at(craps_table(), *((100 + 0.01 * i, BAD) for i in range(21)))
    assert alarm(state, "LINK_ERRORS") is not None
    # The clock goes back a minute: the quiet time counts from then, and the alarm clears
    # while the frames that raised it are less than ten seconds "ago" by the clock.
    state, out = apply_at(state, (40, TimePassed()), (101, TimePassed()))
    assert out == [AlarmCleared(code="LINK_ERRORS", device="dice_reader")]
    state, out = apply_at(state, (101, BAD))
    assert out == []
    assert alarm(state, "LINK_ERRORS") is None


def test_the_backlog_message_names_the_pending_roll_and_the_rule() -> None:
    _, out = apply_at(
        craps_table(),
        (1, RollCheck(roll_id=7, dice=(3, 4), reason="ON_CHIPS")),
        *((2 + i, DiceRolled(roll_id=8 + i, dice=(2, 2))) for i in range(21)),
    )
    assert [o for o in out if isinstance(o, AlarmRaised)] == [
        AlarmRaised(
            code="ROLL_BACKLOG",
            device="dice_reader",
            message=(
                "more than 20 rolls wait behind roll 7, which waits for the stickperson's "
                "decision; none of them counts until it is decided "
                '(dice-reader-icd.md, "What the host must do")'
            ),
        )
    ]


@pytest.mark.parametrize(
    ("codes", "count"), [(33, "1 more fault code"), (34, "2 more fault codes")]
)
def test_the_other_fault_message_counts_the_codes_beyond_32(codes: int, count: str) -> None:
    state, _ = apply_at(craps_table(), *((i, status(fault_code(i), "x")) for i in range(codes)))
    other = alarm(state, "DEVICE_FAULT_OTHER")
    assert other is not None
    assert other.message == (
        f"the dice reader reports {count} than the 32 shown one by one; the journal keeps "
        "every STATUS, and READY clears them all"
    )


# --- CLOCK_JUMP -----------------------------------------------------------------------


def jumped(direction: str, size: str) -> AlarmRaised:
    return AlarmRaised(
        code="CLOCK_JUMP",
        device=None,
        message=(
            f"the controller's clock jumped {direction} by {size}: times in the record around "
            "then may be wrong; check the time server and the clock"
        ),
    )


@pytest.mark.parametrize(
    ("milliseconds", "direction", "size"),
    [
        (-7_200_000, "back", "2 h"),
        (86_400_000, "forward", "1 d"),
        (90_061_001, "forward", "1 d 1 h 1 min 1 s"),
        (-(2 * 86_400 + 3 * 60) * 1000, "back", "2 d 3 min"),
        (7_205_000, "forward", "2 h 5 s"),
        (60_000, "forward", "1 min"),
        (3_000, "forward", "3 s"),
        (-2_500, "back", "2 s"),
        (1, "forward", "0 s"),
        (-1, "back", "0 s"),
    ],
)
def test_a_clock_jump_is_alarmed_with_its_direction_and_size(
    milliseconds: int, direction: str, size: str
) -> None:
    state, out = apply_at(craps_table(), (10, ClockJumped(milliseconds=milliseconds)))
    assert out == [jumped(direction, size)]
    raised = alarm(state, "CLOCK_JUMP")
    assert raised is not None
    assert raised.since == at(10)


def test_clock_jump_clears_an_hour_after_the_jump_and_not_before() -> None:
    state, _ = apply_at(craps_table(), (10, ClockJumped(milliseconds=-7_200_000)))
    same, nothing = table.apply(state, TimePassed(), at=at(10))
    assert same is state  # nothing to journal
    assert nothing == ()
    state, out = apply_at(state, (1800, TimePassed()), (3609.5, TimePassed()))
    assert out == []
    state, out = apply_at(state, (3610, TimePassed()))
    assert out == [AlarmCleared(code="CLOCK_JUMP", device=None)]
    assert alarm(state, "CLOCK_JUMP") is None
    # Cleared: later ticks change nothing (the same state: nothing to journal).
    later, nothing = table.apply(state, TimePassed(), at=at(7300))
    assert later is state
    assert nothing == ()


def test_when_the_clock_goes_back_again_the_hour_counts_from_then() -> None:
    state, _ = apply_at(craps_table(), (100, ClockJumped(milliseconds=5_000)))
    state, out = apply_at(state, (40, TimePassed()), (3639, TimePassed()))
    assert out == []
    state, out = apply_at(state, (3640, TimePassed()))
    assert out == [AlarmCleared(code="CLOCK_JUMP", device=None)]


def test_a_clean_start_clears_clock_jump_for_good() -> None:
    state, _ = apply_at(craps_table(), (10, ClockJumped(milliseconds=5_000)))
    state, out = apply_at(state, (20, CleanStart()))
    assert out == [AlarmCleared(code="CLOCK_JUMP", device=None)]
    # Nothing is left for the timer to do, an hour later or any time.
    assert table.apply(state, TimePassed(), at=at(5000)) == (state, ())
    assert table.apply(state, TimePassed(), at=at(0)) == (state, ())


def test_clock_jump_and_link_errors_clearing_at_the_same_tick_are_both_published() -> None:
    state, _ = apply_at(craps_table(), (0, ClockJumped(milliseconds=5_000)))
    state, _ = apply_at(state, *((3600 + 0.1 * i, BAD) for i in range(21)))
    state, out = apply_at(state, (3663, TimePassed()))
    assert out == [
        AlarmCleared(code="CLOCK_JUMP", device=None),
        AlarmCleared(code="LINK_ERRORS", device="dice_reader"),
    ]
