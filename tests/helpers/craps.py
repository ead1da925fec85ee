"""A craps table's journal replayed in a test: every event in order, and the latest roll."""

from __future__ import annotations

from collections.abc import Iterable

from rules.craps import CrapsState, apply
from rules.events import Decision, DiceFact, Outcome


def apply_all(
    state: CrapsState, events: Iterable[DiceFact | Decision]
) -> tuple[CrapsState, tuple[Outcome, ...]]:
    """Apply events in order (as a journal replay does); the outcomes of all, in order."""
    outcomes: list[Outcome] = []
    for event in events:
        state, out = apply(state, event)
        outcomes.extend(out)
    return state, tuple(outcomes)


def latest_roll_id(state: CrapsState) -> int | None:
    """The id of the latest roll event, or ``None`` before the first."""
    return None if state.latest is None else state.latest.roll_id
