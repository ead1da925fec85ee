"""Hypothesis strategies for every message of both devices, both directions."""

from __future__ import annotations

from typing import get_args

from hypothesis import strategies as st

from drivers import messages as m
from rules import events as ev
from rules.cards import DECK

seqs = st.integers(1, 9999)
ids = st.integers(1, 999_999)
cards = st.sampled_from([card.code for card in DECK])
positions = st.sampled_from(ev.POSITIONS)
_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
words = st.text(_printable.filter(lambda c: c not in "$*,"), min_size=1, max_size=24)
texts = st.text(_printable.filter(lambda c: c not in "$*"), max_size=60)
status_codes = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ_"), min_size=1, max_size=20)
dice = st.tuples(st.integers(1, 6), st.integers(1, 6))
check_dice = st.tuples(st.integers(0, 6), st.integers(0, 6))

hellos = st.builds(m.Hello, seq=seqs, model=words, firmware=words, serial=words)
statuses = st.builds(m.Status, seq=seqs, code=status_codes, text=texts)
shuffler_messages: st.SearchStrategy[m.Message] = st.one_of(
    hellos,
    statuses,
    st.builds(m.Mode, seq=seqs, game=st.sampled_from(get_args(ev.Game))),
    st.builds(m.Deck, seq=seqs, result=st.sampled_from(get_args(ev.DeckResult))),
    st.builds(
        m.Hand,
        seq=seqs,
        round_id=ids,
        position=positions,
        cards=st.lists(cards, min_size=1, max_size=7).map(tuple),
    ),
    st.builds(m.Round, seq=seqs, round_id=ids, hands=st.integers(0, 99)),
    st.builds(m.Settle, seq=seqs, round_id=ids),
    st.builds(
        m.CardMsg,
        seq=seqs,
        round_id=ids,
        position=positions.filter(lambda p: p != "CM"),
        card=cards,
    ),
    st.builds(m.End, seq=seqs, round_id=ids),
    st.builds(m.Void, seq=seqs, round_id=ids),
)
dice_messages: st.SearchStrategy[m.Message] = st.one_of(
    hellos,
    statuses,
    st.builds(m.Roll, seq=seqs, roll_id=ids, dice=dice),
    st.builds(m.NoRoll, seq=seqs, roll_id=ids, reason=st.sampled_from(get_args(ev.NoRollReason))),
    st.builds(
        m.Check,
        seq=seqs,
        roll_id=ids,
        dice=check_dice,
        reason=st.sampled_from(get_args(ev.CheckReason)),
    ),
)
host_messages: st.SearchStrategy[m.Message] = st.one_of(
    st.builds(m.Ack, seq=seqs),
    st.builds(m.Nak, seq=st.integers(0, 9999)),
    st.just(m.Query()),
)
messages: st.SearchStrategy[m.Message] = st.one_of(shuffler_messages, dice_messages, host_messages)
