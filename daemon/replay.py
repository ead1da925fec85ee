"""The table rebuilt from its journal: the one replay the daemon, its snapshots and
``lammer journal verify`` share.

``Replay`` applies journal records in ``seq`` order through the same rules, with the
recorded times, so the table (open round, craps series, pending roll, alarms) is exactly
what it was. It keeps what a start needs besides the rules' state: each device's last
journaled frame (the driver must not process a repeat of it twice, link-layer.md) and the
body last published on each retained topic (an unchanged state is not published again).

**Snapshots.** ``snapshot()`` is all of that as one JSON object (written by ``Memory``,
the value the daemon holds it in), ``Replay.restore`` its inverse: restoring the latest
snapshot and replaying what follows gives exactly what a replay from the first record
gives (``lammer journal verify`` checks every snapshot so).

**Settings.** The table's game and pay-table settings (``Settings``) are journaled at every
start (a ``daemon`` record ``{"start": {...}}``). A replay applies each start's settings
from there on (``reconfigure``): a changed pay table applies from the start that brought
it, and a changed game starts a fresh table. The daemon then applies its own
configuration the same way, and journals it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from daemon.errors import RecordError
from daemon.journal import JournalRecord
from daemon.records import from_record, register, to_record
from rules import craps, table
from rules.errors import RulesError
from rules.events import Device

register(table.TableState)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What of a table's configuration the rules depend on."""

    game: str
    craps_paytable: int
    decks: int
    dealer_hits_soft_17: bool

    def to_json(self) -> dict[str, object]:
        """As journaled."""
        return {
            "game": self.game,
            "craps_paytable": self.craps_paytable,
            "decks": self.decks,
            "dealer_hits_soft_17": self.dealer_hits_soft_17,
        }

    @classmethod
    def from_json(cls, data: object) -> Settings:
        """From a journaled ``to_json`` (``RecordError`` if it is not one)."""
        if not isinstance(data, dict):
            raise RecordError(f"settings must be an object, got {data!r}")
        try:
            return cls(
                game=str(data["game"]),
                craps_paytable=int(data["craps_paytable"]),
                decks=int(data["decks"]),
                dealer_hits_soft_17=bool(data["dealer_hits_soft_17"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"bad settings {data!r}: {exc}") from exc

    def initial_state(self, at: datetime) -> table.TableState:
        """A table of these settings that has just started."""
        return table.initial_state(
            self.game,
            at=at,
            craps_paytable=self.craps_paytable,
            decks=self.decks,
            dealer_hits_soft_17=self.dealer_hits_soft_17,
        )


def reconfigure(state: table.TableState, settings: Settings, at: datetime) -> table.TableState:
    """The table under ``settings``: the same table with its pay-table settings changed,
    or a fresh one for another game."""
    if state.game != settings.game:
        return settings.initial_state(at)
    if state.craps is not None and state.craps.paytable != settings.craps_paytable:
        fresh = craps.initial_state(settings.craps_paytable)  # ConfigError for an unknown one
        state = replace(state, craps=replace(state.craps, paytable=fresh.paytable))
    if state.bust is not None and (
        state.bust.decks != settings.decks
        or state.bust.hits_soft_17 != settings.dealer_hits_soft_17
    ):
        state = replace(
            state,
            bust=replace(
                state.bust, decks=settings.decks, hits_soft_17=settings.dealer_hits_soft_17
            ),
        )
    return state


def start_record(version: str, settings: Settings) -> dict[str, object]:
    """The ``daemon`` record journaled at every start."""
    return {"start": {"version": version, "settings": settings.to_json()}}


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory:
    """The table as the daemon holds it between events, as one value: what a snapshot
    keeps (the settings the state is under, the state, each device's last journaled frame,
    the body last published on each retained topic) and the table its state topics were
    last built from (``daemon.publications.state_publications``). A transaction the journal
    refuses puts back the value it began with (``daemon.core``)."""

    settings: Settings
    state: table.TableState
    last_frames: Mapping[Device, tuple[int, bytes]]
    published: Mapping[str, dict[str, Any]]
    built_from: table.TableState | None = None

    def snapshot(self) -> dict[str, object]:
        """Everything a start needs, as one JSON object (a ``snapshot`` record)."""
        return {
            "settings": self.settings.to_json(),
            "state": to_record(self.state),
            "last_frames": {
                device: [seq, raw.decode("ascii", "replace")]
                for device, (seq, raw) in sorted(self.last_frames.items())
            },
            "published": {topic: self.published[topic] for topic in sorted(self.published)},
        }


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("seq", "prev_seq", "ts")}


class Replay:
    """A table being rebuilt from journal records (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.state: table.TableState | None = None
        self.last_frames: dict[Device, tuple[int, bytes]] = {}
        self.published: dict[str, dict[str, Any]] = {}
        self.events = 0
        self.errors: list[tuple[int, str]] = []

    def apply(self, record: JournalRecord) -> None:
        """Apply one journal record (those that change nothing are skipped)."""
        data = record.record
        if self.state is None:
            self.state = self.settings.initial_state(record.ts)
        if record.kind == "publish":
            body = data.get("payload")
            if data.get("retained") and isinstance(body, dict):
                self.published[str(data["topic"])] = _strip(body)
            return
        start = data.get("start")
        if record.kind == "daemon" and isinstance(start, dict):
            settings = Settings.from_json(start.get("settings"))
            self.settings = settings
            self.state = reconfigure(self.state, settings, record.ts)
            return
        if record.kind not in ("device", "decision", "daemon"):
            return
        device = data.get("device")
        link_seq, raw = data.get("link_seq"), data.get("raw")
        if isinstance(link_seq, int) and isinstance(raw, str) and isinstance(device, str):
            self.last_frames[device] = (link_seq, raw.encode("ascii", "replace"))  # type: ignore[index]
        if "event" not in data:
            return  # a bad frame, a refused request, a probe reply: kept, changes nothing
        fact = data["event"]
        if not isinstance(fact, dict):
            raise RecordError(f"record {record.seq}: an event is a JSON object")
        event: table.TableEvent = from_record(fact)
        try:
            self.state, _ = table.apply(self.state, event, at=record.ts)
            self.events += 1
        except RulesError as exc:  # pragma: no cover - a decision is journaled only when legal
            self.errors.append((record.seq, str(exc)))

    def finish(self, settings: Settings, at: datetime) -> table.TableState:
        """The table under the daemon's own ``settings`` (see ``reconfigure``)."""
        state = self.state if self.state is not None else settings.initial_state(at)
        self.state = reconfigure(state, settings, at)
        self.settings = settings
        return self.state

    def memory(self) -> Memory:
        """The table rebuilt so far, as one value (its dictionaries copied)."""
        if self.state is None:
            raise RuntimeError("nothing replayed yet: memory() follows a record or finish()")
        return Memory(
            settings=self.settings,
            state=self.state,
            last_frames=dict(self.last_frames),
            published=dict(self.published),
        )

    def snapshot(self) -> dict[str, object]:
        """Everything a start needs, as one JSON object (a ``snapshot`` record)."""
        return self.memory().snapshot()

    @classmethod
    def restore(cls, body: dict[str, object]) -> Replay:
        """The replay a ``snapshot()`` was taken of (``RecordError`` for a body that is not
        one)."""
        replay = cls(Settings.from_json(body.get("settings")))
        state = from_record(body["state"])  # type: ignore[arg-type]
        if not isinstance(state, table.TableState):
            raise RecordError(f"a snapshot's state is a TableState, got {type(state).__name__}")
        replay.state = state
        frames = body.get("last_frames")
        published = body.get("published")
        if not isinstance(frames, dict) or not isinstance(published, dict):
            raise RecordError("a snapshot holds last_frames and published objects")
        for device, (seq, raw) in frames.items():
            replay.last_frames[device] = (int(seq), str(raw).encode("ascii", "replace"))
        replay.published = {str(k): dict(v) for k, v in published.items()}
        return replay
