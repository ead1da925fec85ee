"""Events as journal records: every event type round-trips, bad records are refused."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.errors import RecordError
from daemon.records import from_record, register, registered, to_record
from rules import events
from rules.events import CoverAllResult, HandDealt, HighestHand, RollDecided

# Every type the daemon journals, from the unions consumers match on.
EVENT_TYPES: list[type[Any]] = [
    *typing.get_args(events.DeviceFact),
    *typing.get_args(events.Decision),
    *typing.get_args(events.Outcome),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BadFrame:
    """A registered class of its own: a time, a nested union, a Literal."""

    device: events.Device
    reason: str
    at: datetime
    cause: events.DiceRolled | events.NoRoll | None


register(BadFrame, name="test.BadFrame")


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """A strategy derived from a field's type hint (the dataclass fields drive the test)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return st.none()
    if origin in (typing.Union, types.UnionType):
        return st.one_of([strategy_for(a) for a in args])
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy_for(args[0]), max_size=5).map(tuple)
        return st.tuples(*(strategy_for(a) for a in args))
    simple: dict[Any, st.SearchStrategy[Any]] = {
        int: st.integers(),
        bool: st.booleans(),
        str: st.text(),
        Decimal: st.decimals(allow_nan=False, allow_infinity=False),
        datetime: st.datetimes(
            timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))])
        ),
    }
    if hint in simple:
        return simple[hint]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return events_of(hint)
    raise AssertionError(f"no strategy for {hint!r}")


def events_of(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(cls)}
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def test_every_event_type_is_registered() -> None:
    known = set(registered().values())
    assert set(EVENT_TYPES) <= known
    assert {events.PayRow, events.HighestHand} <= known  # nested ones too


@pytest.mark.heavy
@pytest.mark.parametrize("cls", [*EVENT_TYPES, BadFrame], ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_through_json(cls: type[Any], data: st.DataObject) -> None:
    event = data.draw(events_of(cls))
    record = to_record(event)
    stored = json.loads(json.dumps(record, allow_nan=False))  # as the journal keeps it
    assert from_record(stored) == event


def test_record_shape_is_readable() -> None:
    # The documented format: type name + fields; tuples as arrays; Decimal as a string;
    # nested dataclasses as records; None as null.
    result = CoverAllResult(
        round_id=812,
        game="CSP",
        hands=3,
        outcome="win",
        highest=HighestHand(
            hand="Straight Flush", position="P3", cards=("Qh", "Jh", "Th", "9h", "8h")
        ),
        pays=Decimal("1.5"),
        reason=None,
    )
    assert to_record(result) == {
        "type": "CoverAllResult",
        "round_id": 812,
        "game": "CSP",
        "hands": 3,
        "outcome": "win",
        "highest": {
            "type": "HighestHand",
            "hand": "Straight Flush",
            "position": "P3",
            "cards": ["Qh", "Jh", "Th", "9h", "8h"],
        },
        "pays": "1.5",
        "reason": None,
    }
    decided = RollDecided(
        roll_id=5003,
        valid=False,
        operator="stick1",
        at=datetime(2026, 11, 29, 14, 3, 7, tzinfo=UTC),
    )
    assert to_record(decided)["at"] == "2026-11-29T14:03:07+00:00"
    frame = BadFrame(
        device="dice_reader", reason="bad CRC", at=datetime(2026, 1, 1, tzinfo=UTC), cause=None
    )
    assert to_record(frame)["type"] == "test.BadFrame"


GOOD = {"type": "HandDealt", "round_id": 812, "position": "P1", "cards": ["9c", "9d"]}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({**GOOD, "type": "HandDelt"}, "unknown record type 'HandDelt'"),
        ({k: v for k, v in GOOD.items() if k != "position"}, "HandDealt.position: missing"),
        ({**GOOD, "colour": "red"}, "HandDealt: unknown field(s) colour"),
        ({**GOOD, "position": "P9"}, "HandDealt.position: expected one of"),
        ({**GOOD, "round_id": True}, "HandDealt.round_id: expected an integer, got True"),
        ({**GOOD, "round_id": "812"}, "HandDealt.round_id: expected an integer, got '812'"),
        ({**GOOD, "cards": ["9c", 9]}, "HandDealt.cards[1]: expected a string, got 9"),
        ({**GOOD, "cards": "9c9d"}, "HandDealt.cards: expected an array"),
        (
            {"type": "DiceRolled", "roll_id": 1, "dice": [1, 2, 3]},
            "DiceRolled.dice: expected an array of 2",
        ),
        (
            {
                "type": "CrapsBetSettled",
                "roll_id": 1,
                "bet": "all_small",
                "outcome": "win",
                "pays": "34x",
            },
            "CrapsBetSettled.pays: expected",
        ),
        (
            {
                "type": "CrapsBetSettled",
                "roll_id": 1,
                "bet": "all_small",
                "outcome": "win",
                "pays": "NaN",
            },
            "CrapsBetSettled.pays: expected",
        ),
    ],
)
def test_bad_records_are_refused(record: dict[str, object], message: str) -> None:
    with pytest.raises(RecordError) as info:
        from_record(record)
    assert str(info.value).startswith(message)


def test_a_nested_record_of_the_wrong_type_is_refused() -> None:
    record = to_record(
        CoverAllResult(
            round_id=1,
            game="UTH",
            hands=2,
            outcome="no_qualifier",
            highest=None,
            pays=None,
            reason=None,
        )
    )
    record["highest"] = to_record(HandDealt(round_id=1, position="P1", cards=()))
    with pytest.raises(RecordError, match=r"CoverAllResult\.highest"):
        from_record(record)


def test_unstorable_values_are_refused() -> None:
    with pytest.raises(RecordError, match="not a registered record type"):
        to_record(object())

    @dataclass(frozen=True)
    class Measured:  # no event has a float: refused, not guessed
        elapsed: float

    register(Measured, name="test.Measured")
    with pytest.raises(RecordError, match=r"Measured\.elapsed: cannot store a float"):
        to_record(Measured(elapsed=0.5))
    bad = events.CrapsBetSettled(roll_id=1, bet="all_tall", outcome="win", pays=Decimal("NaN"))
    with pytest.raises(RecordError, match=r"CrapsBetSettled\.pays: not a finite decimal"):
        to_record(bad)


def test_register_refuses_what_records_cannot_hold() -> None:
    @dataclass(frozen=True)
    class Typed:
        type: str

    with pytest.raises(RecordError, match="field named 'type'"):
        register(Typed)

    @dataclass(frozen=True)
    class HandDealt:  # same name as an event, another class
        x: int

    with pytest.raises(RecordError, match=r"already rules\.events\.HandDealt"):
        register(HandDealt)
    with pytest.raises(RecordError, match="not a dataclass"):
        register(int)
    assert register(events.HandDealt) is events.HandDealt  # registering again is harmless


def test_a_craps_state_with_rolls_waiting_reads_back_equal() -> None:
    # The rolls behind a pending CHECK are kept in a PersistentQueue (rules.craps): a record
    # of the state (a snapshot) holds them as an array, in order, and reads back equal.
    from rules import craps
    from rules.events import DiceRolled, RollCheck

    register(craps.CrapsState)
    state = craps.initial_state(1)
    state, _ = craps.apply(state, RollCheck(roll_id=1, dice=(3, 4), reason="ON_CHIPS"))
    for roll_id in range(2, 30):
        state, _ = craps.apply(state, DiceRolled(roll_id=roll_id, dice=(2, 2)))
    record = json.loads(json.dumps(to_record(state)))
    assert [a["fact"]["roll_id"] for a in record["queue"]] == list(range(1, 30))
    again = from_record(record)
    assert again == state
    assert isinstance(again.queue, type(state.queue))
    with pytest.raises(RecordError, match="expected an array"):
        from_record({**record, "queue": {"not": "a list"}})


def test_an_alarm_recorded_before_acknowledgements_existed_reads_back() -> None:
    # A snapshot written by an older lammer has Alarm without acknowledged_by/_at: those
    # fields have defaults, so the record reads back unacknowledged; a field without a
    # default is still required (HandDealt.position above).
    from rules.table import Alarm

    register(Alarm)  # as daemon.replay does with the whole TableState
    since = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    record = to_record(Alarm(code="DECK_FAULT", device="shuffler", message="m", since=since))
    assert isinstance(record, dict)
    old = {k: v for k, v in record.items() if not k.startswith("acknowledged")}
    assert from_record(old) == Alarm(code="DECK_FAULT", device="shuffler", message="m", since=since)
