"""Hypothesis strategies for every message of both devices, both directions."""

from __future__ import annotations

from hypothesis import strategies as st

from drivers import messages as m
from rules import events as ev
from rules.cards import DECK

seqs = st.integers(1, 9999)
ids = st.integers(1, ev.MAX_ID)
cards = st.sampled_from([card.code for card in DECK])
positions = st.sampled_from(ev.POSITIONS)
_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
words = st.text(_printable.filter(lambda c: c not in "$*,"), min_size=1, max_size=24)
texts = st.text(_printable.filter(lambda c: c not in "$*"), max_size=60)
status_codes = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ_"), min_size=1, max_size=20)
dice = st.tuples(st.integers(1, 6), st.integers(1, 6))
check_dice = st.tuples(st.integers(0, 6), st.integers(0, 6))


def _sent(facts: st.SearchStrategy[m.WireFact]) -> st.SearchStrategy[m.Message]:
    return st.builds(m.DeviceMessage, seq=seqs, fact=facts)


def _both(device: ev.Device) -> list[st.SearchStrategy[m.WireFact]]:
    return [
        st.builds(
            ev.DeviceHello, device=st.just(device), model=words, firmware=words, serial=words
        ),
        st.builds(ev.DeviceStatus, device=st.just(device), code=status_codes, text=texts),
    ]


shuffler_messages: st.SearchStrategy[m.Message] = _sent(
    st.one_of(
        *_both("shuffler"),
        st.builds(ev.ModeReported, game=st.sampled_from(ev.GAMES)),
        st.builds(ev.DeckChecked, result=st.sampled_from(ev.DECK_RESULTS)),
        st.builds(
            ev.HandDealt,
            round_id=ids,
            position=positions,
            cards=st.lists(cards, min_size=1, max_size=7).map(tuple),
        ),
        st.builds(ev.RoundDealt, round_id=ids, hands=st.integers(0, 99)),
        st.builds(ev.RoundSettled, round_id=ids),
        st.builds(
            ev.CardDrawn, round_id=ids, position=positions.filter(lambda p: p != "CM"), card=cards
        ),
        st.builds(ev.DealerDone, round_id=ids),
        st.builds(ev.RoundVoided, round_id=ids),
    )
)
dice_messages: st.SearchStrategy[m.Message] = _sent(
    st.one_of(
        *_both("dice_reader"),
        st.builds(ev.DiceRolled, roll_id=ids, dice=dice),
        st.builds(ev.NoRoll, roll_id=ids, reason=st.sampled_from(ev.NOROLL_REASONS)),
        st.builds(
            ev.RollCheck, roll_id=ids, dice=check_dice, reason=st.sampled_from(ev.CHECK_REASONS)
        ),
    )
)
host_messages: st.SearchStrategy[m.Message] = st.one_of(
    st.builds(m.Ack, seq=seqs),
    st.builds(m.Nak, seq=st.integers(0, 9999)),
    st.just(m.Query()),
)
device_messages: st.SearchStrategy[tuple[ev.Device, m.Message]] = st.one_of(
    st.tuples(st.just("shuffler"), shuffler_messages),
    st.tuples(st.just("dice_reader"), dice_messages),
)
"""A device and a message it sends."""
readers: st.SearchStrategy[tuple[ev.Device | None, list[m.Message]]] = st.one_of(
    st.tuples(st.just("shuffler"), st.lists(st.one_of(shuffler_messages, host_messages))),
    st.tuples(st.just("dice_reader"), st.lists(st.one_of(dice_messages, host_messages))),
    st.tuples(st.none(), st.lists(host_messages)),
)
"""A reader (the device whose messages it takes, or none) and messages it can read."""
