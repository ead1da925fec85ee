"""The journal: durable, ordered, never reusing a seq; the outbox of the MQTT link."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from daemon.clock import format_ts
from daemon.errors import JournalError, JournalFileError, JournalValueError
from daemon.journal import KINDS, WAL_CHECKPOINT_PAGES, WAL_LIMIT_BYTES, Journal
from daemon.outbox import Outbox, OutboxMessage
from tests.helpers.journal import refuse

T0 = datetime(2026, 11, 29, 14, 3, 7, 123456, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal.open(tmp_path / "t1.db") as j:
        yield j


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_format_ts_is_utc_milliseconds_z() -> None:
    # mqtt-api.md: UTC, ISO 8601 with milliseconds and Z, e.g. 2026-11-29T14:03:07.123Z.
    cet = timezone(timedelta(hours=1))
    assert (
        format_ts(datetime(2026, 11, 29, 15, 3, 7, 123999, tzinfo=cet))
        == "2026-11-29T14:03:07.123Z"
    )
    assert format_ts(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000Z"
    with pytest.raises(ValueError, match="no time zone"):
        format_ts(datetime(2026, 1, 2, 3, 4, 5))


def test_new_journal_is_private_wal_full(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sub" / "t1.db"
    with Journal.open(path) as journal:
        journal.append("device", {"type": "DeviceHello"}, ts=T0)
        assert mode(path) == 0o600
        assert mode(path.with_name("t1.db-wal")) == 0o600
        assert mode(path.with_name("t1.db-shm")) == 0o600
        # synchronous=FULL (2): every commit is fsynced, so an ACK survives power loss.
        assert journal._store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert mode(tmp_path / "state") == 0o700
    assert mode(tmp_path / "state" / "sub") == 0o700
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_an_existing_looser_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    Journal.open(path).close()
    path.chmod(0o644)
    with Journal.open(path):
        assert mode(path) == 0o600


def test_seq_increases_and_continues_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        assert journal.last_seq == 0
        seqs = [journal.append(kind, {"n": i}, ts=at(i)) for i, kind in enumerate(KINDS[:5])]
        assert seqs == [1, 2, 3, 4, 5]
        assert journal.last_seq == 5
    with Journal.open(path) as journal:
        assert journal.last_seq == 5
        assert journal.append("alarm", {"n": 5}, ts=at(5)) == 6
        records = list(journal.records())
    assert [r.seq for r in records] == [1, 2, 3, 4, 5, 6]
    assert [r.kind for r in records] == [*KINDS[:5], "alarm"]
    assert [r.record for r in records] == [{"n": i} for i in range(6)]
    assert records[1].ts == datetime(2026, 11, 29, 14, 3, 8, 123000, tzinfo=UTC)


def test_seq_is_never_reused_even_after_rows_are_deleted(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        for i in range(3):
            journal.append("device", {"n": i}, ts=T0)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM records WHERE seq > 1")
    conn.close()
    with Journal.open(path) as journal:
        assert journal.append("device", {"n": 9}, ts=T0) == 4


def test_records_after_and_by_kind(journal: Journal) -> None:
    with journal.batch():
        for i in range(600):  # more than one page
            journal.append("device" if i % 3 else "outcome", {"i": i}, ts=T0)
    assert [r.seq for r in journal.records(590)] == list(range(591, 601))
    outcomes = list(journal.records(kind="outcome"))
    assert [r.record["i"] for r in outcomes] == list(range(0, 600, 3))
    assert list(journal.records(600)) == []
    # Read in pages of 256: every record once, in order, also past a page's end.
    assert [r.seq for r in journal.records()] == list(range(1, 601))
    devices = [r.record["i"] for r in journal.records(kind="device")]
    assert devices == [i for i in range(600) if i % 3]


def test_first_seq_is_the_lowest_held_by_a_record_or_a_carried_message(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "a.db") as journal:
        assert journal.first_seq() is None
        journal.append("device", {"n": 1}, ts=T0)
        assert journal.first_seq() == 1
        pending = journal.append_publish("state", {"n": 2}, retained=False, ts=T0)
        journal.append("device", {"n": 3}, ts=T0)
        with Journal.open(tmp_path / "b.db") as nxt:
            nxt.start_chain(journal.last_seq, journal.last_hash)
            assert nxt.first_seq() is None  # continued, but holding nothing yet
            nxt.copy_outbox(journal)
            # The message still pending came over: the lowest seq is its, below any record.
            assert nxt.first_seq() == pending.seq == 2
            nxt.append("device", {"n": 4}, ts=T0)
            assert nxt.first_seq() == 2
            assert [r.seq for r in nxt.records()] == [4]


def test_append_publish_adds_seq_and_ts_and_queues(journal: Journal) -> None:
    journal.append("device", {"x": 1}, ts=T0)
    body: dict[str, object] = {"table": "t1", "round_id": 812, "pays": "34"}
    message = journal.append_publish("cover_all/result", body, retained=True, ts=T0)
    assert message == OutboxMessage(
        seq=2, topic="cover_all/result", payload=message.payload, retained=True
    )
    assert json.loads(message.payload) == {
        "table": "t1",
        "round_id": 812,
        "pays": "34",
        "seq": 2,
        "prev_seq": None,  # the journal's first message
        "ts": "2026-11-29T14:03:07.123Z",
    }
    assert body == {"table": "t1", "round_id": 812, "pays": "34"}  # caller's dict untouched
    assert journal.pending() == [message]
    (record,) = journal.records(kind="publish")
    assert record.record == {
        "topic": "cover_all/result",
        "retained": True,
        "payload": json.loads(message.payload),
        "published": False,
    }


def test_outbox_pending_mark_published_and_retained(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        outbox: Outbox = journal
        board1 = journal.append_publish("craps/board", {"n": 1}, retained=True, ts=T0)
        roll = journal.append_publish("craps/roll", {"n": 2}, retained=False, ts=T0)
        state = journal.append_publish("state", {"n": 3}, retained=True, ts=T0)
        board2 = journal.append_publish("craps/board", {"n": 4}, retained=True, ts=T0)
        assert outbox.pending() == [board1, roll, state, board2]
        assert outbox.pending(limit=2) == [board1, roll]
        assert outbox.retained() == []  # nothing has reached the broker yet
        for message in (board1, roll, state):
            outbox.mark_published(message.seq)
        outbox.mark_published(roll.seq)  # idempotent
        assert outbox.pending() == [board2]
        # board2 is not published yet: a reconnect republishes board1, then sends board2.
        assert outbox.retained() == [board1, state]
        outbox.mark_published(board2.seq)
        assert outbox.retained() == [state, board2]
        with pytest.raises(JournalValueError, match="seq 99"):
            outbox.mark_published(99)
    with Journal.open(path) as journal:
        assert journal.pending() == []
        assert journal.retained() == [state, board2]


def test_batch_is_one_transaction(journal: Journal) -> None:
    with journal.batch():
        first = journal.append("device", {"n": 1}, ts=T0)
        with journal.batch():
            message = journal.append_publish("state", {"n": 2}, retained=True, ts=T0)
    assert (first, message.seq) == (1, 2)

    def failing_batch() -> None:
        with journal.batch():
            journal.append("device", {"n": 3}, ts=T0)
            journal.append_publish("state", {"n": 4}, retained=True, ts=T0)
            raise RuntimeError("driver failed")

    with pytest.raises(RuntimeError):
        failing_batch()
    assert journal.last_seq == 2
    assert [r.seq for r in journal.records()] == [1, 2]
    assert journal.pending() == [message]
    assert journal.append("device", {"n": 5}, ts=T0) == 3


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda j: j.append("publish", {}, ts=T0), "use append_publish"),
        (lambda j: j.append("devices", {}, ts=T0), "bad record kind 'devices'"),
        (lambda j: j.append("device", {"seq": 1, "kind": "x"}, ts=T0), "must not hold kind, seq"),
        (
            lambda j: j.append("device", {"pays": __import__("decimal").Decimal("1.5")}, ts=T0),
            "not JSON",
        ),
        (lambda j: j.append("device", {"x": float("nan")}, ts=T0), "not JSON"),
        (lambda j: j.append("device", {}, ts=datetime(2026, 1, 1)), "no time zone"),
        (
            lambda j: j.append_publish("state", {"seq": 1}, retained=True, ts=T0),
            "must not hold seq",
        ),
        (lambda j: j.append_publish("a/+/b", {}, retained=True, ts=T0), "wildcards"),
        (lambda j: j.append_publish("/state", {}, retained=True, ts=T0), "bad topic"),
        (lambda j: j.append_publish("state", {"x": object()}, retained=True, ts=T0), "not JSON"),
    ],
)
def test_bad_calls_are_refused_and_change_nothing(
    journal: Journal, call: object, match: str
) -> None:
    journal.append("device", {"n": 0}, ts=T0)
    with pytest.raises(JournalValueError, match=match):
        call(journal)  # type: ignore[operator]
    assert journal.last_seq == 1
    assert [r.seq for r in journal.records()] == [1]
    assert journal.pending() == []
    assert journal.append("device", {"n": 1}, ts=T0) == 2


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path), pytest.raises(JournalFileError, match="in use by another process"):
        Journal.open(path)
    Journal.open(path).close()  # free again once closed


def test_readonly_reads_while_the_writer_runs_and_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as writer:
        writer.append("device", {"n": 1}, ts=T0)
        with Journal.open(path, readonly=True) as reader:
            assert [r.record for r in reader.records()] == [{"n": 1}]
            writer.append("device", {"n": 2}, ts=T0)
            assert [r.record for r in reader.records()] == [{"n": 1}, {"n": 2}]
            with pytest.raises(JournalValueError, match="read-only"):
                reader.append("device", {}, ts=T0)


def test_readonly_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with pytest.raises(JournalFileError, match="no such file"):
        Journal.open(path, readonly=True)
    assert list(tmp_path.iterdir()) == []
    with Journal.open(path) as journal:
        journal.append("device", {"n": 1}, ts=T0)
    before = sorted(tmp_path.iterdir())
    with Journal.open(path, readonly=True) as reader:
        assert reader.last_seq == 1
        assert len(list(reader.records())) == 1
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize("readonly", [False, True])
def test_not_a_journal(tmp_path: Path, readonly: bool) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all, just some words to fill a page " * 40)
    with pytest.raises(JournalFileError, match="not a lammer journal"):
        Journal.open(text, readonly=readonly)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(JournalFileError, match="not a lammer journal"):
        Journal.open(other, readonly=readonly)
    assert isinstance(JournalFileError("x"), JournalError | OSError)


WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from daemon.journal import Journal

    journal = Journal.open(sys.argv[1])
    n = 0
    while True:
        n += 1
        now = datetime.now(UTC)
        if n % 3:
            seq = journal.append("device", {"n": n, "pad": "x" * (n % 700)}, ts=now)
        else:
            seq = journal.append_publish("state", {"n": n}, retained=True, ts=now).seq
            if n % 2:
                journal.mark_published(seq)
        sys.stdout.write(f"{seq}\\n")
        sys.stdout.flush()
    """
)


@pytest.mark.heavy
def test_survives_sigkill_mid_write(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    acknowledged = 0
    for _ in range(3):  # kill, reopen, kill again: seq goes on, nothing lost
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        target = acknowledged + 150
        for line in proc.stdout:
            acknowledged = int(line)  # durable once printed: append returned
            if acknowledged >= target:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        # The writer was killed mid-write, not dead of its own error before the target.
        assert acknowledged >= target
        assert proc.returncode == -signal.SIGKILL
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        with Journal.open(path) as journal:
            seqs = [r.seq for r in journal.records()]
            # Every appended record is there, in order, with no gap and no repeat.
            assert seqs == list(range(1, len(seqs) + 1))
            assert len(seqs) >= acknowledged
            assert journal.last_seq == len(seqs)
            pending = {m.seq for m in journal.pending()}
            published = {r.seq for r in journal.records(kind="publish")} - pending
            assert {m.seq for m in journal.retained()} <= published
            acknowledged = journal.append("daemon", {"event": "restarted"}, ts=T0)
            assert acknowledged == len(seqs) + 1


# ---------------------------------------------------------------------------------------
# Failures of SQLite itself, and the writers the daemon uses around them


def test_two_failed_batches_in_a_row_store_neither(journal: Journal) -> None:
    journal.append("device", {"n": 1}, ts=T0)

    def failing_batch(n: int) -> None:
        with journal.batch():
            journal.append("device", {"n": n}, ts=T0)
            raise RuntimeError("driver failed")

    for n in (2, 3):
        with pytest.raises(RuntimeError):
            failing_batch(n)
        assert not journal.in_batch
    assert [r.record for r in journal.records()] == [{"n": 1}]
    assert journal.append("device", {"n": 4}, ts=T0) == 2


def test_a_commit_sqlite_refuses_is_an_error_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        journal.append("device", {"n": 1}, ts=T0)
        last_hash = journal.last_hash
        refuse(journal, "COMMIT")
        with pytest.raises(JournalError, match="commit failed: not authorized") as info:
            journal.append("device", {"n": 2}, ts=T0)
        assert info.value.path == path
        assert (journal.last_seq, journal.last_hash) == (1, last_hash)
        journal._store.conn.set_authorizer(None)
        assert journal.append("device", {"n": 3}, ts=T0) == 2  # the seq is given out again
    with Journal.open(path, readonly=True) as reader:
        assert [r.record for r in reader.records()] == [{"n": 1}, {"n": 3}]


def test_a_transaction_sqlite_will_not_begin_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        journal.append("device", {"n": 1}, ts=T0)
        refuse(journal, "BEGIN")
        with pytest.raises(JournalError) as info:
            journal.append("device", {"n": 2}, ts=T0)
        assert str(info.value) == f"journal {path}: cannot begin a transaction: not authorized"
        assert (info.value.path, journal.last_seq, journal.in_batch) == (path, 1, False)


def test_mark_published_inside_a_batch_commits_with_the_batch(tmp_path: Path) -> None:
    # How the MQTT link marks a chunk's PUBACKs together with what it journals meanwhile.
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        first = journal.append_publish("craps/board", {"n": 1}, retained=True, ts=T0)
        second = journal.append_publish("craps/roll", {"n": 2}, retained=False, ts=T0)
        with journal.batch():
            journal.mark_published(first.seq, second.seq)
            journal.append("device", {"n": 3}, ts=T0)
        assert journal._store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again
    with Journal.open(path, readonly=True) as reader:
        assert reader.pending() == []
        assert reader.retained() == [first]


def test_a_journal_record_exports_as_one_json_object(journal: Journal) -> None:
    journal.append("outcome", {"type": "RollRecorded", "roll_id": 5}, ts=T0)
    (record,) = journal.records()
    assert record.to_json() == {
        "seq": 1,
        "ts": "2026-11-29T14:03:07.123Z",
        "kind": "outcome",
        "type": "RollRecorded",
        "roll_id": 5,
    }


def test_reconnect_continues_the_sequence_and_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        journal.append("device", {"n": 1}, ts=T0)
        last_hash = journal.last_hash
        journal.reconnect()
        assert (journal.last_seq, journal.last_hash) == (1, last_hash)
        assert journal.append("device", {"n": 2}, ts=T0) == 2
        with journal.batch(), pytest.raises(JournalValueError) as info:
            journal.reconnect()
        assert str(info.value) == "cannot reconnect inside a batch"
        assert info.value.path == path
    with Journal.open(path, readonly=True) as reader:
        raw = list(reader.raw_records())
        assert [r.seq for r in raw] == [1, 2]
        assert raw[1].hash == reader.last_hash


def test_reconnect_to_a_journal_that_is_gone_is_a_file_error(tmp_path: Path) -> None:
    path = tmp_path / "state" / "t1.db"
    with Journal.open(path) as journal:
        journal.append("device", {"n": 1}, ts=T0)
        (tmp_path / "state").rename(tmp_path / "moved")
        with pytest.raises(JournalFileError, match=f"cannot reopen journal {path}: ") as info:
            journal.reconnect()
        assert info.value.path == path


def test_skip_to_leaves_a_gap_and_never_goes_back(journal: Journal) -> None:
    journal.append("device", {"n": 1}, ts=T0)
    journal.skip_to(10)
    assert journal.last_seq == 10
    assert journal.append("daemon", {"type": "seq_gap"}, ts=T0) == 11
    for seq in (11, 3):
        with pytest.raises(JournalValueError) as info:
            journal.skip_to(seq)
        assert str(info.value) == f"seq {seq} is not above 11"
    assert [r.seq for r in journal.records()] == [1, 11]


def test_a_message_set_aside_leaves_the_queue_and_stays_in_the_journal(journal: Journal) -> None:
    refused = journal.append_publish("craps/board", {"n": 1}, retained=True, ts=T0)
    kept = journal.append_publish("craps/roll", {"n": 2}, retained=False, ts=T0)
    journal.set_aside(refused.seq, "x" * 600)
    assert journal.pending() == [kept]
    assert journal.retained() == []  # refused: never reached the broker
    record = next(journal.records(kind="publish"))
    assert (record.record["published"], record.record["refused"]) == (False, "x" * 500)
    with pytest.raises(JournalValueError) as info:
        journal.set_aside(99, "no")
    assert str(info.value) == "seq 99 is not a message of the outbox"
    assert info.value.path == journal.path
    with pytest.raises(JournalValueError) as info:
        journal.mark_published(kept.seq, 98)
    assert str(info.value) == "seq 98 is not a message of the outbox"
    assert info.value.path == journal.path
    assert journal.pending() == [kept]  # nothing marked


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda j: j.seal({"x": object()}, ts=T0), "seal is not JSON"),
        (lambda j: j.append_segment({"x": object()}, ts=T0), "segment header is not JSON"),
    ],
)
def test_a_segment_record_that_is_not_json_is_refused(
    journal: Journal, write: object, message: str
) -> None:
    with pytest.raises(JournalValueError, match=f"^{message}: "):
        write(journal)  # type: ignore[operator]
    assert journal.last_seq == 0


def test_start_chain_only_on_an_empty_journal(journal: Journal) -> None:
    journal.append("device", {"n": 1}, ts=T0)
    with pytest.raises(JournalValueError, match="is not empty") as info:
        journal.start_chain(40, bytes(32))
    assert info.value.path == journal.path


def test_a_checkpoint_sqlite_refuses_is_an_error(journal: Journal) -> None:
    journal.append("device", {"n": 1}, ts=T0)
    refuse(journal, "wal_checkpoint")
    with pytest.raises(JournalError, match="cannot checkpoint: not authorized"):
        journal.checkpoint()


# ---------------------------------------------------------------------------------------
# Journals of an older schema (1: no outbox.refused; 2: no hash chain)

OLD_SCHEMA = """
CREATE TABLE records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL, kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY, topic TEXT NOT NULL, payload BLOB NOT NULL,
    retained INTEGER NOT NULL, published INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX outbox_pending ON outbox(seq) WHERE published = 0;
CREATE TABLE retained_latest (topic TEXT PRIMARY KEY, seq INTEGER NOT NULL);
"""
OLD_TS = "2026-11-29T14:03:07.123Z"
OLD_PAYLOAD = b'{"n":2,"seq":2,"ts":"2026-11-29T14:03:07.123Z"}'


def old_journal(path: Path, version: int) -> None:
    """A journal as lammer wrote it at schema ``version``: a device record, then a message
    (refused by the broker, at schema 2)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(OLD_SCHEMA)
    if version >= 2:
        conn.execute("ALTER TABLE outbox ADD COLUMN refused TEXT")
    conn.execute("PRAGMA application_id = 0x4C4D4A4E")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("INSERT INTO records VALUES (1, ?, 'device', '{\"n\":1}')", (OLD_TS,))
    meta = '{"topic":"craps/board","retained":true}'
    conn.execute("INSERT INTO records VALUES (2, ?, 'publish', ?)", (OLD_TS, meta))
    conn.execute(
        "INSERT INTO outbox VALUES (2, 'craps/board', ?, 1, 0)"
        if version < 2
        else ("INSERT INTO outbox VALUES (2, 'craps/board', ?, 1, 1, 'too large')"),
        (OLD_PAYLOAD,),
    )
    conn.close()


def expected_chain(key: bytes | None) -> list[bytes]:
    """The hashes the chain must give those two records, from the rule in the module
    docstring (seq, time, kind, body, and a message's payload, each line by line)."""
    hashes, previous = [], bytes(32)
    records = [
        (b"1\n" + OLD_TS.encode() + b"\ndevice\n" + b'{"n":1}\n'),
        (
            b"2\n"
            + OLD_TS.encode()
            + b'\npublish\n{"topic":"craps/board","retained":true}\n'
            + OLD_PAYLOAD
        ),
    ]
    for record in records:
        if key is None:
            previous = hashlib.sha256(previous + record).digest()
        else:
            previous = hmac.new(key, previous + record, hashlib.sha256).digest()
        hashes.append(previous)
    return hashes


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("key", [None, b"the table's key"])
def test_an_older_journal_is_brought_up_to_date_with_its_chain(
    tmp_path: Path, version: int, key: bytes | None
) -> None:
    path = tmp_path / "t1.db"
    old_journal(path, version)
    with pytest.raises(JournalFileError) as info:
        Journal.open(path, readonly=True)
    assert str(info.value) == (
        f"journal {path} has the older schema {version}: open it once with lammer run (or a"
        " writable open) to bring it up to date"
    )
    assert info.value.path == path
    with Journal.open(path, key=key) as journal:
        assert [r.hash for r in journal.raw_records()] == expected_chain(key)
        assert journal.last_hash == expected_chain(key)[-1]
        assert journal.append("device", {"n": 3}, ts=T0) == 3
        if version == 1:
            assert journal.pending() == [
                OutboxMessage(seq=2, topic="craps/board", payload=OLD_PAYLOAD, retained=True)
            ]
            journal.set_aside(2, "too large")  # the column schema 2 added is there
        assert journal.pending() == []
    with Journal.open(path, readonly=True) as reader:
        assert reader._store.conn.execute("PRAGMA user_version").fetchone()[0] == 3
        publish = next(reader.records(kind="publish"))
        assert (publish.record["published"], publish.record["refused"]) == (False, "too large")


# ---------------------------------------------------------------------------------------
# Opens that fail leave nothing open (the daemon retries; a leaked lock would keep every
# later start out)


def open_fds_on(path: Path) -> list[str]:
    """This process's file descriptors open on ``path``."""
    target = str(path.resolve())
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.path.realpath(f"/proc/self/fd/{fd}") == target:
                fds.append(fd)
    return fds


def test_a_failed_open_closes_the_file_and_releases_the_lock(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    for _ in range(2):  # the second attempt finds the lock free, not "in use"
        with pytest.raises(JournalFileError, match="not a lammer journal") as info:
            Journal.open(other)
        # Even while the error (and its traceback) is held, nothing is left open.
        assert open_fds_on(other) == []
        assert open_fds_on(tmp_path / "other.db.lock") == []
        assert info.value.path == other


def test_a_path_that_cannot_be_opened_is_a_file_error(tmp_path: Path) -> None:
    folder = tmp_path / "t1.db"
    folder.mkdir()
    with pytest.raises(JournalFileError) as info:
        Journal.open(folder)
    assert str(info.value) == f"cannot open journal {folder}: Is a directory"
    assert info.value.path == folder
    assert open_fds_on(tmp_path / "t1.db.lock") == []


def test_a_journal_that_cannot_be_in_wal_mode_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite takes the name ":memory:" for a database in memory, where WAL (and anything
    # durable) is impossible: such a journal must not run a table.
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        with pytest.raises(JournalFileError, match=r"cannot use WAL mode \(got memory\)"):
            Journal.open(":memory:")


# ---------------------------------------------------------------------------------------
# What an operator reads when a write fails, and the bytes a display receives


def deny_write(journal: Journal, action: int, table: str) -> None:
    """SQLite refuses ``action`` (INSERT, UPDATE) on ``table`` from now on."""

    def authorize(code: int, arg1: str | None, *_: object) -> int:
        return sqlite3.SQLITE_DENY if (code, arg1) == (action, table) else sqlite3.SQLITE_OK

    journal._store.conn.set_authorizer(authorize)


@pytest.mark.parametrize(
    ("action", "table", "write", "what"),
    [
        (
            sqlite3.SQLITE_INSERT,
            "records",
            lambda j, m: j.append("device", {}, ts=T0),
            "write a record",
        ),
        (
            sqlite3.SQLITE_INSERT,
            "outbox",
            lambda j, m: j.append_publish("s", {}, retained=False, ts=T0),
            "queue a message",
        ),
        (sqlite3.SQLITE_UPDATE, "outbox", lambda j, m: j.mark_published(m), "mark a message"),
        (
            sqlite3.SQLITE_INSERT,
            "retained_latest",
            lambda j, m: j.mark_published(m),
            "mark a retained message",
        ),
        (
            sqlite3.SQLITE_UPDATE,
            "outbox",
            lambda j, m: j.set_aside(m, "too big"),
            "set a message aside",
        ),
        (sqlite3.SQLITE_UPDATE, "sqlite_sequence", lambda j, m: j.skip_to(50), "skip the sequence"),
    ],
)
def test_a_write_sqlite_refuses_names_what_could_not_be_done(
    tmp_path: Path, action: int, table: str, write: object, what: str
) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        message = journal.append_publish("state", {"n": 1}, retained=True, ts=T0)
        deny_write(journal, action, table)
        with pytest.raises(JournalError) as info:
            write(journal, message.seq)  # type: ignore[operator]
        assert str(info.value) == f"journal {path}: cannot {what}: not authorized"
        assert info.value.path == path


def test_continuing_the_sequence_sqlite_refuses_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t2.db"
    with Journal.open(path) as journal:
        deny_write(journal, sqlite3.SQLITE_INSERT, "sqlite_sequence")
        with pytest.raises(JournalError) as info:
            journal.start_chain(40, bytes(32))
        assert str(info.value) == f"journal {path}: cannot continue the sequence: not authorized"


def test_a_chain_continued_or_skipped_survives_a_restart_before_the_next_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal:
        journal.start_chain(40, b"\x01" * 32)
    with Journal.open(path) as journal:
        assert journal.append("device", {"n": 41}, ts=T0) == 41
        journal.skip_to(60)
    with Journal.open(path) as journal:
        assert journal.last_seq == 60


def test_a_message_payload_is_compact_utf8_json(journal: Journal) -> None:
    # mqtt-api.md "Conventions": UTF-8 JSON; the journal stores and sends the same bytes.
    message = journal.append_publish(
        "craps/decision", {"table": "t1", "operator": "Zoë", "n": [1, 2]}, retained=False, ts=T0
    )
    assert (
        message.payload
        == (
            '{"table":"t1","operator":"Zoë","n":[1,2],"seq":1,"prev_seq":null,'
            '"ts":"2026-11-29T14:03:07.123Z"}'
        ).encode()
    )
    assert journal.pending()[0].payload == message.payload


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda j: j.append("devices", {}, ts=T0),
            "bad record kind 'devices': expected one of alarm, daemon, decision, device,"
            " outcome, snapshot",
        ),
        (
            lambda j: j.append("publish", {}, ts=T0),
            "bad record kind 'publish' (use append_publish): expected one of alarm, daemon,"
            " decision, device, outcome, snapshot",
        ),
        (lambda j: j.append("device", [1], ts=T0), "record must be a dict, got list"),
        (
            lambda j: j.append_publish("state", [1], retained=True, ts=T0),
            "body must be a dict, got list",
        ),
        (
            lambda j: j.append_publish("state", {"ts": 1}, retained=True, ts=T0),
            "body must not hold ts: the journal adds them",
        ),
        (
            lambda j: j.append_publish("state", {"ts": 1, "seq": 2}, retained=True, ts=T0),
            "body must not hold seq, ts: the journal adds them",
        ),
        (
            # prev_seq too: the journal's own would silently replace the caller's.
            lambda j: j.append_publish("state", {"prev_seq": 1}, retained=True, ts=T0),
            "body must not hold prev_seq: the journal adds them",
        ),
        (
            lambda j: j.append_publish("craps/", {}, retained=True, ts=T0),
            "bad topic 'craps/': expected levels such as 'craps/board'",
        ),
        (
            lambda j: j.append_publish("craps//board", {}, retained=True, ts=T0),
            "bad topic 'craps//board': expected levels such as 'craps/board'",
        ),
        (
            lambda j: list(j.records(kind="x")),
            "bad record kind 'x': expected one of daemon, device, decision, outcome, alarm,"
            " publish, snapshot, segment, seal",
        ),
    ],
)
def test_a_bad_call_is_refused_with_the_whole_message(
    journal: Journal, call: object, message: str
) -> None:
    with pytest.raises(JournalValueError) as info:
        call(journal)  # type: ignore[operator]
    assert str(info.value) == message
    assert journal.last_seq == 0


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda j: j.append("device", {"x": float("nan")}, ts=T0), "record"),
        (lambda j: j.append_publish("state", {"x": object()}, retained=True, ts=T0), "body"),
    ],
)
def test_json_refusals_name_what_was_not_json(journal: Journal, call: object, what: str) -> None:
    with pytest.raises(JournalValueError, match=f"^{what} is not JSON: "):
        call(journal)  # type: ignore[operator]


def test_any_letters_make_a_topic(journal: Journal) -> None:
    message = journal.append_publish("display/X1", {}, retained=False, ts=T0)
    assert message.topic == "display/X1"


def test_a_keyed_journal_chains_every_record_with_its_hmac(tmp_path: Path) -> None:
    key = b"the table's key"
    path = tmp_path / "t1.db"
    with Journal.open(path, key=key) as journal:
        journal.append("device", {"n": 1}, ts=T0)
    with Journal.open(path, readonly=True, key=key) as reader:
        assert reader.key == key
        (raw,) = reader.raw_records()
    record = b"1\n2026-11-29T14:03:07.123Z\ndevice\n" + b'{"n":1}\n'
    assert raw.hash == hmac.new(key, bytes(32) + record, hashlib.sha256).digest()


def test_raw_records_and_pending_read_in_pages(journal: Journal) -> None:
    with journal.batch():
        for i in range(600):
            journal.append_publish("state", {"i": i}, retained=False, ts=T0)
    assert [r.seq for r in journal.raw_records()] == list(range(1, 601))
    assert [r.seq for r in journal.raw_records(590)] == list(range(591, 601))
    assert [m.seq for m in journal.pending()] == list(range(1, 101))  # 100 by default


def test_after_replace_file_the_journal_goes_on_in_the_new_file(tmp_path: Path) -> None:
    # The same object goes on in the file put in its place (a rotation): the next seq,
    # the chain and the message before the next one (prev_seq) are the new file's.
    live, other = tmp_path / "t1.db", tmp_path / "other.db"
    with Journal.open(other) as journal:
        for n in range(3):
            journal.append_publish("state", {"n": n}, retained=False, ts=T0)
        journal.append("device", {"n": 3}, ts=T0)
        other_hash = journal.last_hash
    with Journal.open(live) as journal:
        journal.append_publish("state", {"n": 0}, retained=False, ts=T0)
        with journal.batch(), pytest.raises(JournalValueError) as info:
            journal.replace_file(lambda: os.replace(other, live))
        assert str(info.value) == "cannot replace the file inside a batch"
        assert (info.value.path, other.exists()) == (live, True)  # nothing was replaced
        journal.replace_file(lambda: os.replace(other, live))
        assert (journal.last_seq, journal.last_hash) == (4, other_hash)
        message = journal.append_publish("state", {"n": 4}, retained=False, ts=T0)
        assert (message.seq, json.loads(message.payload)["prev_seq"]) == (5, 3)
        assert [m.seq for m in journal.pending()] == [1, 2, 3, 5]


def test_pending_count_is_the_depth_of_the_outbox(journal: Journal) -> None:
    assert journal.pending_count() == 0
    sent = journal.append_publish("state", {"n": 1}, retained=True, ts=T0)
    refused = journal.append_publish("craps/roll", {"n": 2}, retained=False, ts=T0)
    journal.append_publish("craps/roll", {"n": 3}, retained=False, ts=T0)
    journal.append("device", {"n": 4}, ts=T0)  # a record, not a message
    assert journal.pending_count() == 3
    journal.mark_published(sent.seq)
    journal.set_aside(refused.seq, "too large")
    assert journal.pending_count() == 1

    def no_outbox(action: int, table: str | None, *_: object) -> int:
        denied = action == sqlite3.SQLITE_READ and table == "outbox"
        return sqlite3.SQLITE_DENY if denied else sqlite3.SQLITE_OK

    journal._store.conn.set_authorizer(no_outbox)  # SQLite's own refusal, as of a bad disk
    with pytest.raises(JournalError, match=r"^journal .+: cannot count the outbox: .*prohibited"):
        journal.pending_count()
    with pytest.raises(JournalError) as raised:
        journal.pending_count()
    assert raised.value.path == journal.path  # which journal, for the alarm and the log
    assert str(journal.path) in str(raised.value)


def test_published_and_snapshot_records_read_back(journal: Journal) -> None:
    message = journal.append_publish("state", {"n": 1}, retained=True, ts=T0)
    journal.mark_published(message.seq)
    journal.append("snapshot", {"state": 1}, ts=T0)
    journal.append("snapshot", {"state": 2}, ts=T0)
    (publish,) = journal.records(kind="publish")
    assert publish.record["published"] is True
    snapshot = journal.latest_snapshot()
    assert snapshot is not None
    assert (snapshot.seq, snapshot.kind, snapshot.record) == (3, "snapshot", {"state": 2})


# ---------------------------------------------------------------------------------------
# Read-only opens: what they refuse, and that they never change the file


def test_readonly_refusals_name_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "folder.db"
    folder.mkdir()
    empty = tmp_path / "empty.db"
    empty.touch()
    text = tmp_path / "notes.db"
    text.write_text("not a database at all, just some words to fill a page " * 40)
    newer = tmp_path / "newer.db"
    Journal.open(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 4")
    conn.close()
    for path, message in [
        (tmp_path / "none.db", f"cannot read journal {tmp_path / 'none.db'}: no such file"),
        (folder, f"cannot read journal {folder}: not a regular file"),
        (empty, f"{empty} is not a lammer journal"),
        (text, f"{text} is not a lammer journal: file is not a database"),
        (newer, f"journal {newer} has schema 4, newer than this lammer's 3"),
    ]:
        with pytest.raises(JournalFileError) as info:
            Journal.open(path, readonly=True)
        assert (str(info.value), info.value.path) == (message, path)
    with (
        Journal.open(newer.with_name("ok.db")) as journal,
        Journal.open(journal.path, readonly=True) as reader,
        pytest.raises(JournalValueError) as refused,
    ):
        reader.append("device", {}, ts=T0)
    assert refused.value.path == journal.path


def test_readonly_reading_leaves_a_crashed_writer_s_files_as_they_are(tmp_path: Path) -> None:
    # A writer killed mid-run leaves its -wal: a reader must read through it, not fold it
    # into the file (that is the next writer's job), and must not add files of its own.
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    live.mkdir()
    crashed.mkdir()
    with Journal.open(live / "t1.db") as writer:
        writer.append("device", {"n": 1}, ts=T0)
        for name in ("t1.db", "t1.db-wal"):
            (crashed / name).write_bytes((live / name).read_bytes())
    before = {p.name: p.read_bytes() for p in crashed.iterdir()}
    with Journal.open(crashed / "t1.db", readonly=True) as reader:
        assert [r.record for r in reader.records()] == [{"n": 1}]
    assert {p.name: p.read_bytes() for p in crashed.iterdir() if p.suffix != ".db-shm"} == before
    # Without a -wal the file is complete: reading it creates nothing beside it.
    clean = tmp_path / "clean.db"
    Journal.open(clean).close()
    with Journal.open(clean, readonly=True) as reader:
        assert list(reader.records()) == []
        assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
            "clean.db",
            "clean.db.lock",
        ]


def test_the_lock_file_is_private_and_the_busy_error_names_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path):
        assert mode(tmp_path / "t1.db.lock") == 0o600
        with pytest.raises(JournalFileError) as info:
            Journal.open(path)
        assert info.value.path == path


def test_looser_wal_files_are_made_private(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    Journal.open(path).close()
    path.chmod(0o757)
    holder = sqlite3.connect(path)  # another connection keeps the -wal and -shm there
    try:
        holder.execute("SELECT count(*) FROM records").fetchone()
        for name in ("t1.db-wal", "t1.db-shm"):
            (tmp_path / name).chmod(0o644)
        with Journal.open(path):
            modes = [mode(tmp_path / n) for n in ("t1.db", "t1.db-wal", "t1.db-shm")]
    finally:
        holder.close()
    assert [m & 0o077 for m in modes] == [0, 0, 0]  # nothing for group or others
    assert modes[0] == 0o700  # the owner keeps what it had


def test_a_damaged_file_is_a_file_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "t1.db"
    with Journal.open(path) as journal, journal.batch():
        for i in range(300):
            journal.append("device", {"i": i, "pad": "x" * 200}, ts=T0)
    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page : 10 * page] = b"\xa5" * (7 * page)  # pages of records overwritten
    path.write_bytes(bytes(data))
    with Journal.open(path, readonly=True) as reader, pytest.raises(JournalFileError) as info:
        list(reader.records())
    assert str(info.value).startswith(f"journal {path}: ")
    assert info.value.path == path


def test_a_journal_under_a_file_is_a_file_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where the folder should be")
    path = tmp_path / "state" / "t1.db"
    with pytest.raises(JournalFileError) as info:
        Journal.open(path)
    assert (str(info.value), info.value.path) == (
        f"cannot open journal {path}: Not a directory",
        path,
    )


def test_prev_seq_names_the_message_before_across_records_and_a_rotation(tmp_path: Path) -> None:
    # contract.feed tells a lost message from a seq that was a record by prev_seq.
    path = tmp_path / "a.db"
    with Journal.open(path) as journal:
        first = journal.append_publish("craps/roll", {"table": "t1"}, retained=False, ts=T0)
        journal.append("device", {"x": 1}, ts=T0)
        journal.append("device", {"x": 2}, ts=T0)
        second = journal.append_publish("state", {"table": "t1"}, retained=True, ts=T0)
        third = journal.append_publish("craps/roll", {"table": "t1"}, retained=False, ts=T0)
        journal.mark_published(first.seq, second.seq, third.seq)

        def refused() -> None:
            with journal.batch():
                journal.append_publish("craps/roll", {"table": "t1"}, retained=False, ts=T0)
                raise JournalError("refused", path=path)  # rolled back: names nothing after

        with pytest.raises(JournalError):
            refused()
        nxt = Journal.open(tmp_path / "b.db")
        nxt.start_chain(journal.last_seq, journal.last_hash)
        nxt.copy_outbox(journal)
    assert json.loads(first.payload)["prev_seq"] is None
    assert json.loads(second.payload)["prev_seq"] == first.seq
    assert json.loads(third.payload)["prev_seq"] == second.seq
    # third was neither pending nor retained: carried over all the same, as the last
    # message, so the next segment's first message names it.
    fourth = nxt.append_publish("craps/roll", {"table": "t1"}, retained=False, ts=T0)
    assert json.loads(fourth.payload)["prev_seq"] == third.seq
    assert [m.seq for m in nxt.published_between(1, 100)] == [second.seq, third.seq]
    nxt.close()


@pytest.mark.heavy
def test_the_wal_stays_bounded_while_the_journal_grows(tmp_path: Path) -> None:
    # Issue 20: SQLite's default checkpoint (1000 pages) let the WAL alone reach 4 MB and
    # fill a 3 MB disk. 6 MB of records (and marks) later, the WAL never held more than the
    # checkpoint's pages and a transaction, and is cut back to its limit after each.
    path = tmp_path / "t1.db"
    wal = path.with_name("t1.db-wal")
    largest = 0
    with Journal.open(path) as journal:
        assert (
            journal._store.conn.execute("PRAGMA journal_size_limit").fetchone()[0]
            == WAL_LIMIT_BYTES
        )
        assert (
            journal._store.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
            == WAL_CHECKPOINT_PAGES
        )
        for i in range(1500):
            message = journal.append_publish(
                "state", {"pad": "x" * 4000, "i": i}, retained=True, ts=T0
            )
            journal.mark_published(message.seq)
            largest = max(largest, wal.stat().st_size)
        assert path.stat().st_size > 6_000_000  # the records went into the database
    page = 4096
    assert largest <= WAL_CHECKPOINT_PAGES * page + 64 * 1024
