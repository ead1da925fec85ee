"""A table's facts in a few words, for the tests of the rules' table and of snapshots."""

from __future__ import annotations

from hypothesis import strategies as st

from rules.cards import DECK
from rules.events import (
    DECK_RESULTS,
    DeviceFact,
    DeviceHello,
)
from tests import strategies as s

CARD_CODES = [c.code for c in DECK]


SOME_POSITIONS = st.sampled_from(["P1", "P2", "P3", "P8", "DL", "CM"])


ROUND_IDS = st.integers(1, 3)


# Every device fact the event model has, HELLO apart (it may restart the round counter, which
# assert_results_stand rules out), drawn as the declarations allow (tests/strategies.py: a new
# fact or message is in without an edit here). Narrowed so that facts meet: few round and roll
# ids, a READY among the status codes, a deck check that often passes, and hands of no card
# (beyond the wire, as a journal could hold).
TABLE_FACTS: st.SearchStrategy[DeviceFact] = s.device_facts(
    exclude=[DeviceHello],
    round_id=ROUND_IDS,
    roll_id=st.integers(1, 5),
    position=SOME_POSITIONS,
    cards=st.lists(st.sampled_from(CARD_CODES), min_size=0, max_size=7).map(tuple),
    hands=st.integers(0, 9),
    code=st.sampled_from(["READY", "JAM", "CAMERA_FAULT"]),
    text=st.just(""),
    result=st.one_of(st.just("OK"), st.sampled_from(DECK_RESULTS)),
)
