"""Real journals for the tests: a craps table's core (``daemon.core.TableCore``) run in
process on a clock the test moves, through gaming days (one segment each), a restart,
snapshots, decisions, a refused request and a bad frame; and an outsider's tools
(``sqlite3`` on the file) to tamper with them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.desk import RequestDesk
from daemon.journal import canonical
from daemon.requests import Incoming
from daemon.segments import open_live, remove_segment
from rules.events import DeviceConnected, DiceRolled

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
"""The first start: gaming day 2026-11-30 (days begin at 06:00 UTC here)."""

KEY = b"0123456789abcdef-the-table-key\n"  # as read from a key file, newline included


class Clock:
    """A clock the test moves; like a real one, every reading is a little later (so a time
    read at load differs from the start's)."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def table_config(folder: Path, *, key: bytes | None = None, **journal: Any) -> TableConfig:
    """A craps table whose journal is ``folder/c1.db`` (gaming days from 06:00 UTC, a
    snapshot every 12 records), with an HMAC key file when ``key`` is given."""
    folder.mkdir(parents=True, exist_ok=True)
    section: dict[str, Any] = {
        "path": str(folder / "c1.db"),
        "time_zone": "UTC",
        "day_starts": "06:00",
        "snapshot_every": 12,
        **journal,
    }
    if key is not None:
        key_file = folder / "c1.key"
        key_file.write_bytes(key)
        key_file.chmod(0o600)
        section["hmac_key_file"] = str(key_file)
    return validate_config(
        {
            "table": {"id": "c1", "game": "CRAPS"},
            "dice_reader": {"port": str(folder / "no-device")},
            "journal": section,
        }
    )


def open_table(config: TableConfig, clock: Clock) -> TableCore:
    """The daemon's start: the live segment opened (a rotation a crash left finished), the
    table replayed from its latest snapshot, the start journaled."""
    journal = open_live(config.journal_path, key=config.journal.read_key())
    core = TableCore(config, journal, version="test", clock=clock)
    core.start()
    return core


def stop_table(core: TableCore) -> None:
    """A clean stop: the snapshot, then the journal closed."""
    core.close()
    core.journal.close()


@dataclass
class Play:
    """What a day of play wrote, as the tests look for it."""

    roll_id: int = 0
    link_seq: int = 0


def play(core: TableCore, clock: Clock, state: Play, *, rolls: int = 15) -> None:
    """The dice reader connects and rolls; the stickperson voids a roll (and is refused
    once); a bad frame; the timer ticks."""
    desk = RequestDesk(core)
    core.ingest("dice_reader", DeviceConnected(device="dice_reader"))
    for n in range(rolls):
        clock.now += timedelta(seconds=20)
        state.roll_id += 1
        state.link_seq += 1
        dice = (n % 6 + 1, (n * 5 + 2) % 6 + 1)
        raw = f"$ROLL,{state.roll_id},{dice[0]},{dice[1]}".encode()
        core.ingest(
            "dice_reader",
            DiceRolled(roll_id=state.roll_id, dice=dice),
            link_seq=state.link_seq,
            raw=raw,
        )
        if n == 4:
            desk.decide(_request("void_roll", roll_id=state.roll_id, clause=3))
            desk.decide(_request("overturn", roll_id=state.roll_id + 99))  # refused
        if n == 8:
            core.bad_frame("dice_reader", b"$ROLL,garbage", "bad checksum")
    clock.now += timedelta(seconds=1)
    core.tick()


def _request(name: str, **body: object) -> Incoming:
    payload = json.dumps({"operator": "Ann", **body, "request_id": f"r{body['roll_id']}"})
    return Incoming.receive(name, payload.encode())


def next_day(clock: Clock) -> None:
    """Move the clock just past the next 06:00 UTC (a new gaming day)."""
    day = (clock.now - timedelta(hours=6)).date() + timedelta(days=1)
    clock.now = datetime(day.year, day.month, day.day, 6, 0, 1, tzinfo=UTC)


def build(folder: Path, *, days: int = 3, key: bytes | None = None, **journal: Any) -> Path:
    """A table's journal over ``days`` gaming days (a segment each), with a restart on the
    second day; returns its live segment."""
    config = table_config(folder, key=key, **journal)
    clock = Clock()
    state = Play()
    core = open_table(config, clock)
    for day in range(days):
        if day:
            next_day(clock)
            core.tick()  # the timer sees the new gaming day: the segment rotates
        play(core, clock, state)
        if day == 1:
            stop_table(core)
            clock.now += timedelta(minutes=5)
            core = open_table(config, clock)
            play(core, clock, state, rolls=5)
    stop_table(core)
    return config.journal_path


def build_with_retention(folder: Path, *, days: int = 4) -> Path:
    """A journal whose oldest segments the retention removed, as the daemon's timer does
    (``daemon.app``: each removal journaled)."""
    config = table_config(folder, retention_days=1)
    clock = Clock()
    state = Play()
    core = open_table(config, clock)
    for day in range(days):
        if day:
            next_day(clock)
            core.tick()
            for segment in core.upkeep.take_expired():
                remove_segment(segment.path)
                core.upkeep.removed(segment, "deleted")
        play(core, clock, state, rolls=6)
    stop_table(core)
    return config.journal_path


# -- an outsider's tools ----------------------------------------------------------------


def execute(path: Path, statement: str, params: tuple[object, ...] = ()) -> None:
    """Run one SQL statement on a journal file with ``sqlite3`` and commit (the archive's
    files are 0400: an outsider who can write them makes them writable first)."""
    path.chmod(0o600)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(statement, params)
        conn.commit()


def query(path: Path, statement: str, params: tuple[object, ...] = ()) -> list[Any]:
    """Rows of a query on a journal file, read without leaving a -wal or -shm beside it
    (a plain read-only open of a WAL database creates them)."""
    immutable = "" if path.with_name(path.name + "-wal").exists() else "&immutable=1"
    uri = f"{path.resolve().as_uri()}?mode=ro{immutable}"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        return conn.execute(statement, params).fetchall()


def seqs(path: Path, kind: str) -> list[int]:
    """The seqs of the records of ``kind`` in one segment file."""
    rows = query(path, "SELECT seq FROM records WHERE kind = ? ORDER BY seq", (kind,))
    return [int(seq) for (seq,) in rows]


def rolls(path: Path) -> list[int]:
    """The seqs of the device records that hold a roll, in one segment file."""
    rows = query(path, "SELECT seq, body FROM records WHERE kind = 'device' ORDER BY seq")
    return [seq for seq, body in rows if '"DiceRolled"' in body]


def body(path: Path, seq: int) -> dict[str, Any]:
    """A record's body, parsed."""
    [(text,)] = query(path, "SELECT body FROM records WHERE seq = ?", (seq,))
    value: dict[str, Any] = json.loads(text)
    return value


def set_body(path: Path, seq: int, value: dict[str, Any]) -> None:
    """Replace a record's body, written as the journal writes bodies."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    execute(path, "UPDATE records SET body = ? WHERE seq = ?", (text, seq))


def rehash(path: Path, from_seq: int) -> None:
    """Recompute the chain with plain SHA-256 from ``from_seq`` to the end of the segment,
    as someone who can write the file but holds no key would after an edit."""
    path.chmod(0o600)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT r.seq, r.ts, r.kind, r.body, o.payload, r.hash FROM records r "
            "LEFT JOIN outbox o ON o.seq = r.seq AND r.kind = 'publish' ORDER BY r.seq"
        ).fetchall()
        _, _, first_kind, first_body, _, _ = rows[0]
        previous = (
            bytes.fromhex(json.loads(first_body)["prev_hash"])
            if first_kind == "segment"
            else bytes(32)
        )
        for seq, ts, kind, text, payload, digest in rows:
            if seq < from_seq:
                previous = bytes(digest)
                continue
            data = canonical(seq, ts, kind, text, None if payload is None else bytes(payload))
            previous = hashlib.sha256(previous + data).digest()
            conn.execute("UPDATE records SET hash = ? WHERE seq = ?", (previous, seq))
        conn.commit()
