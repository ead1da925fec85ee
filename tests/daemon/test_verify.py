"""``lammer journal verify``: real journals written by the table's core over several gaming
days, tampered with as an outsider would (``sqlite3`` on the file), each change caught and
named by segment and seq; the intact journal passes, also while the daemon writes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon.journal import canonical
from daemon.segments import ARCHIVE, archived, segment_paths
from daemon.verify import ADDED_SNAPSHOT_KEYS, Report, verify_journal
from tests.daemon.journals import (
    KEY,
    Clock,
    Play,
    body,
    build,
    build_with_retention,
    execute,
    next_day,
    open_table,
    play,
    query,
    rehash,
    rolls,
    seqs,
    set_body,
    stop_table,
    table_config,
)

LAMMER = Path(sys.executable).with_name("lammer")
HASH = "hash does not match: the record was changed, or one before it"

Copy = Callable[[str], Path]


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Journals built once: three gaming days in plain SHA-256, two with an HMAC key, and
    one whose oldest segments the retention removed."""
    root = tmp_path_factory.mktemp("journals")
    return {
        "plain": build(root / "plain"),
        "hmac": build(root / "hmac", days=2, key=KEY),
        "retention": build_with_retention(root / "retention"),
    }


@pytest.fixture
def journal(templates: dict[str, Path], tmp_path: Path) -> Copy:
    """A fresh copy of a template journal (its live segment's path) for one test to spoil."""

    def copy(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(templates[name].parent, folder)
        return folder / templates[name].name

    return copy


def _segments(live: Path) -> list[Path]:
    return [s.path for s in archived(live)]


def _problem(report: Report) -> tuple[str, int | None, str]:
    assert report.problem is not None, "\n".join(report.summary())
    return report.problem.segment.name, report.problem.seq, report.problem.what


# -- intact --------------------------------------------------------------------------------


@pytest.mark.heavy
def test_an_intact_journal_passes_every_check(journal: Copy) -> None:
    live = journal("plain")
    report = verify_journal(live)
    assert report.intact, report.problem
    assert len(report.segments) == 3  # three gaming days: two sealed in the archive
    assert report.chain == "sha256"
    assert report.anchor is None  # from genesis
    all_seqs = [s for p in report.segments for (s,) in query(p, "SELECT seq FROM records")]
    assert (report.records, report.first_seq, report.last_seq) == (len(all_seqs), 1, all_seqs[-1])
    snapshots = sum(len(seqs(p, "snapshot")) for p in report.segments)
    assert report.snapshots == snapshots >= 6  # each rotation, every 12 records, each stop
    assert report.carried > 0  # the rotations carried unpublished messages over


def test_an_intact_journal_with_a_key_passes_with_that_key(journal: Copy) -> None:
    report = verify_journal(journal("hmac"), key=KEY)
    assert report.intact, report.problem
    assert report.chain == "hmac-sha256"


def test_a_journal_the_retention_cut_is_anchored_at_its_first_segment(journal: Copy) -> None:
    # The oldest segments were removed past the retention (and journaled so): the first
    # remaining header is where the check begins, said so, and not a problem.
    live = journal("retention")
    report = verify_journal(live)
    assert report.intact, report.problem
    anchor = report.anchor
    assert anchor is not None
    first = ([*_segments(live), live])[0]
    assert anchor.segment == first
    assert anchor.seq == seqs(first, "segment")[0] == report.first_seq
    assert anchor.seq > 1
    assert anchor.snapshot == anchor.seq + 1  # the rotation's snapshot: the replay's start
    assert anchor.previous == body(first, anchor.seq)["prev_segment"]
    assert anchor.removed_at is not None
    assert body(live, anchor.removed_at)["segment_removed"]["file"] == anchor.previous
    assert report.snapshots >= 2
    assert any("removed by the retention" in line for line in report.summary())


# -- tampering: one byte, a deletion, an insertion, a reordering ----------------------------


def test_one_byte_of_a_body_changed(journal: Copy) -> None:
    live = journal("plain")
    seq = rolls(live)[2]
    [(text,)] = query(live, "SELECT body FROM records WHERE seq = ?", (seq,))
    changed = text.replace('"dice":[', '"dice":[ ', 1)  # one byte more, same meaning
    assert changed != text
    execute(live, "UPDATE records SET body = ? WHERE seq = ?", (changed, seq))
    assert _problem(verify_journal(live)) == (live.name, seq, HASH)


def test_one_digit_of_a_time_changed_in_a_sealed_segment(journal: Copy) -> None:
    live = journal("plain")
    oldest = _segments(live)[0]
    seq = rolls(oldest)[5]
    [(ts,)] = query(oldest, "SELECT ts FROM records WHERE seq = ?", (seq,))
    later = ts[:-2] + ("1" if ts[-2] != "1" else "2") + ts[-1]  # a millisecond digit
    execute(oldest, "UPDATE records SET ts = ? WHERE seq = ?", (later, seq))
    assert _problem(verify_journal(live)) == (oldest.name, seq, HASH)


def test_one_byte_of_a_published_payload_changed(journal: Copy) -> None:
    live = journal("plain")
    middle = _segments(live)[1]
    seq = seqs(middle, "publish")[3]
    [(payload,)] = query(middle, "SELECT payload FROM outbox WHERE seq = ?", (seq,))
    flipped = bytes(payload).replace(b'"table":"c1"', b'"table":"c2"')
    assert flipped != payload
    execute(middle, "UPDATE outbox SET payload = ? WHERE seq = ?", (flipped, seq))
    assert _problem(verify_journal(live)) == (middle.name, seq, HASH)


def test_a_deleted_record(journal: Copy) -> None:
    live = journal("plain")
    seq = rolls(live)[1]
    execute(live, "DELETE FROM records WHERE seq = ?", (seq,))
    assert _problem(verify_journal(live)) == (
        live.name,
        seq + 1,
        f"seq {seq + 1} follows {seq - 1}: a record was deleted",
    )


def test_a_record_inserted_at_the_end(journal: Copy) -> None:
    # A copy of a roll, hash and all, appended as if it had been rolled again.
    live = journal("plain")
    seq = rolls(live)[0]
    [(ts, kind, text, digest)] = query(
        live, "SELECT ts, kind, body, hash FROM records WHERE seq = ?", (seq,)
    )
    execute(
        live,
        "INSERT INTO records (ts, kind, body, hash) VALUES (?, ?, ?, ?)",
        (ts, kind, text, digest),
    )
    [(new,)] = query(live, "SELECT max(seq) FROM records")
    assert _problem(verify_journal(live)) == (live.name, new, HASH)


def test_a_record_inserted_in_the_middle(journal: Copy) -> None:
    # Room made by renumbering everything after it (records and outbox alike).
    live = journal("plain")
    at = rolls(live)[3]
    for table in ("records", "outbox"):
        execute(live, f"UPDATE {table} SET seq = -(seq + 1) WHERE seq >= ?", (at,))  # noqa: S608  the table names are the literal tuple above
        execute(live, f"UPDATE {table} SET seq = -seq WHERE seq < 0")  # noqa: S608  the table names are the literal tuple above
    # A roll of double six, with the time and hash of the record it pushed along.
    [(ts, digest)] = query(live, "SELECT ts, hash FROM records WHERE seq = ?", (at + 1,))
    fake = body(live, at + 1)
    fake["event"]["dice"] = [6, 6]
    text = json.dumps(fake, separators=(",", ":"))
    execute(
        live,
        "INSERT INTO records (seq, ts, kind, body, hash) VALUES (?, ?, 'device', ?, ?)",
        (at, ts, text, digest),
    )
    assert _problem(verify_journal(live)) == (live.name, at, HASH)


def test_two_records_swapped(journal: Copy) -> None:
    live = journal("plain")
    first, second = rolls(live)[1:3]
    a, b = body(live, first), body(live, second)
    set_body(live, first, b)
    set_body(live, second, a)
    assert _problem(verify_journal(live)) == (live.name, first, HASH)


def test_records_cut_from_the_end_of_the_live_segment(journal: Copy) -> None:
    # Nothing follows the tail to break the chain; SQLite's sequence still remembers it.
    live = journal("plain")
    [(last,)] = query(live, "SELECT max(seq) FROM records")
    execute(live, "DELETE FROM records WHERE seq > ?", (last - 3,))
    assert _problem(verify_journal(live)) == (
        live.name,
        last - 3,
        f"the segment gave out seq numbers up to {last} but ends at {last - 3}: "
        f"records after seq {last - 3} were deleted",
    )


def test_a_tail_cut_with_its_sequence_rewritten_is_beyond_the_chain(journal: Copy) -> None:
    # The documented limit (docs/auditors/journal.md): the end of the live segment has no
    # successor; someone who can write the file and also rewrites sqlite_sequence cuts it
    # unseen, key or no key. What the displays received (seq on MQTT) still shows it.
    live = journal("plain")
    [(last,)] = query(live, "SELECT max(seq) FROM records")
    for table in ("records", "outbox", "retained_latest"):
        execute(live, f"DELETE FROM {table} WHERE seq > ?", (last - 3,))  # noqa: S608  the table names are the literal tuple above
    execute(live, "UPDATE sqlite_sequence SET seq = ? WHERE name = 'records'", (last - 3,))
    report = verify_journal(live)
    assert report.intact
    assert report.last_seq == last - 3


# -- tampering: segments ----------------------------------------------------------------------


def test_a_segment_deleted_from_the_middle_of_the_archive(journal: Copy) -> None:
    live = journal("plain")
    oldest, middle = _segments(live)
    middle.unlink()
    [(last,)] = query(oldest, "SELECT max(seq) FROM records")
    [(first,)] = query(live, "SELECT min(seq) FROM records")
    assert _problem(verify_journal(live)) == (
        live.name,
        first,
        f"seq {first} follows {last}, the last of segment {oldest.name}: records or a whole "
        f"segment are missing (its header names {middle.name} as the segment before it)",
    )


def test_the_oldest_segment_deleted_without_the_retention(journal: Copy) -> None:
    # It looks like the retention's work, but no record says the retention removed it.
    live = journal("plain")
    oldest, middle = _segments(live)
    oldest.unlink()
    assert _problem(verify_journal(live)) == (
        middle.name,
        seqs(middle, "segment")[0],
        f"the segment before it, {oldest.name}, is missing and no record of the journal "
        "says the retention removed it: it was deleted (or not copied here with the others)",
    )


def test_a_sealed_segment_that_lost_its_seal(journal: Copy) -> None:
    live = journal("plain")
    oldest = _segments(live)[0]
    [seal] = seqs(oldest, "seal")
    execute(oldest, "DELETE FROM records WHERE seq = ?", (seal,))
    execute(oldest, "UPDATE sqlite_sequence SET seq = ? WHERE name = 'records'", (seal - 1,))
    assert _problem(verify_journal(live)) == (
        oldest.name,
        seal - 1,
        "a segment in the archive must end with a seal: records after this one were "
        "deleted, or the segment was never closed",
    )


def test_a_record_written_after_the_seal(journal: Copy) -> None:
    live = journal("plain")
    oldest = _segments(live)[0]
    [seal] = seqs(oldest, "seal")
    roll = rolls(oldest)[-1]
    [(ts, text)] = query(oldest, "SELECT ts, body FROM records WHERE seq = ?", (roll,))
    execute(
        oldest,
        "INSERT INTO records (seq, ts, kind, body, hash) VALUES (?, ?, 'device', ?, ?)",
        (seal + 1, ts, text, bytes(32)),
    )
    assert _problem(verify_journal(live)) == (
        oldest.name,
        seal + 1,
        "a record after the seal: a closed segment was written again",
    )


def test_a_seal_rebuilt_with_another_last_hash(journal: Copy) -> None:
    live = journal("plain")
    oldest = _segments(live)[0]
    [seal] = seqs(oldest, "seal")
    value = body(oldest, seal)
    value["last_hash"] = hashlib.sha256(b"another").hexdigest()
    set_body(oldest, seal, value)
    rehash(oldest, seal)
    assert _problem(verify_journal(live)) == (
        oldest.name,
        seal,
        f"the seal's last_hash is not the hash of the record before it (seq {seal - 1})",
    )


def test_a_sealed_segment_replaced_by_a_rebuilt_one(journal: Copy) -> None:
    # A roll changed in a sealed segment and its chain rebuilt to the seal: the next
    # segment's header still names the true last hash.
    live = journal("plain")
    oldest, middle = _segments(live)
    seq = rolls(oldest)[-1]
    value = body(oldest, seq)
    value["raw"] = value["raw"] + " "
    set_body(oldest, seq, value)
    [seal] = seqs(oldest, "seal")
    rehash(oldest, seq)
    value = body(oldest, seal)
    [(previous,)] = query(oldest, "SELECT hash FROM records WHERE seq = ?", (seal - 1,))
    value["last_hash"] = bytes(previous).hex()
    set_body(oldest, seal, value)
    rehash(oldest, seal)
    header = seqs(middle, "segment")[0]
    problem = _problem(verify_journal(live))
    if problem[0] == oldest.name:
        # A snapshot after the roll (the clean stop of the restart that day) says so first.
        assert problem[2].startswith("the snapshot is not the table a replay")
        assert (problem[1] or 0) > seq
    else:
        assert problem == (
            middle.name,
            header,
            f"the header's prev_hash is not the hash of the last record of {oldest.name}: "
            "the segments do not follow each other",
        )


# -- tampering: the chain rebuilt, snapshots, keys ---------------------------------------------


def _refused_request(live: Path) -> int:
    rows = query(live, "SELECT seq, body FROM records WHERE kind = 'decision' ORDER BY seq")
    return next(int(seq) for seq, text in rows if '"rejected"' in text)


def _rebuild_after_an_edit(live: Path) -> int:
    """Change who made a refused request (nothing of the table's state) and rebuild the
    chain from there with plain SHA-256."""
    seq = _refused_request(live)
    value = body(live, seq)
    value["rejected"]["operator"] = "Bob"
    set_body(live, seq, value)
    rehash(live, seq)
    return seq


def test_a_rebuilt_chain_passes_without_a_key(journal: Copy) -> None:
    # The documented reason for [journal] hmac_key_file: plain SHA-256 needs no secret.
    live = journal("plain")
    _rebuild_after_an_edit(live)
    assert verify_journal(live).intact


def test_a_rebuilt_chain_fails_with_a_key(journal: Copy) -> None:
    live = journal("hmac")
    seq = _rebuild_after_an_edit(live)
    assert _problem(verify_journal(live, key=KEY)) == (live.name, seq, HASH)


def test_a_rebuilt_chain_that_changes_the_table_is_caught_by_the_next_snapshot(
    journal: Copy,
) -> None:
    # Even without a key: a roll edited (and the chain rebuilt) makes the table a replay
    # gives differ from the snapshot that follows.
    live = journal("plain")
    seq = rolls(live)[0]
    value = body(live, seq)
    value["event"]["dice"] = [6, 6] if value["event"]["dice"] != [6, 6] else [5, 5]
    set_body(live, seq, value)
    rehash(live, seq)
    snapshot = next(s for s in seqs(live, "snapshot") if s > seq)
    segment, at, what = _problem(verify_journal(live))
    assert (segment, at) == (live.name, snapshot)
    assert what.startswith("the snapshot is not the table a replay of the records before it")


def test_a_snapshot_edited(journal: Copy) -> None:
    live = journal("plain")
    middle = _segments(live)[1]
    snapshot = seqs(middle, "snapshot")[1]
    value = body(middle, snapshot)
    value["state"]["craps"]["paytable"] = 2 if value["state"]["craps"]["paytable"] != 2 else 1
    set_body(middle, snapshot, value)
    assert _problem(verify_journal(live)) == (middle.name, snapshot, HASH)
    rehash(middle, snapshot)  # and with its chain rebuilt (no key): the replay disagrees
    segment, at, what = _problem(verify_journal(live))
    assert (segment, at) == (middle.name, snapshot)
    assert "first difference at state.craps.paytable" in what


def test_a_keyed_journal_checked_without_its_key_says_a_key_may_be_needed(
    journal: Copy,
) -> None:
    live = journal("hmac")
    segment, seq, what = _problem(verify_journal(live))
    assert (segment, seq) == (_segments(live)[0].name, 1)
    assert what.startswith(HASH)
    assert "a key may be needed" in what


def test_a_keyed_journal_checked_with_another_key(journal: Copy) -> None:
    live = journal("hmac")
    _, seq, what = _problem(verify_journal(live, key=b"another key of sixteen bytes"))
    assert seq == 1
    assert "not the one the journal was written with" in what


def test_a_plain_journal_checked_with_a_key(journal: Copy) -> None:
    _, seq, what = _problem(verify_journal(journal("plain"), key=KEY))
    assert seq == 1
    assert what.startswith("the chain is plain SHA-256, not HMAC")


# -- tampering: the live outbox ---------------------------------------------------------------


def test_a_carried_over_message_altered_in_the_live_outbox(journal: Copy) -> None:
    # A rotation copies the messages not yet published into the next segment, outside the
    # chain of that segment: the copy must still be its record's payload.
    live = journal("plain")
    [(first,)] = query(live, "SELECT min(seq) FROM records")
    [(seq, payload)] = query(
        live,
        "SELECT seq, payload FROM outbox WHERE seq < ? AND published = 0 ORDER BY seq LIMIT 1",
        (first,),
    )
    altered = bytes(payload).replace(b'"table":"c1"', b'"table":"cX"')
    execute(live, "UPDATE outbox SET payload = ? WHERE seq = ?", (altered, seq))
    origin = next(p for p in _segments(live) if seq in seqs(p, "publish"))
    assert _problem(verify_journal(live)) == (
        live.name,
        seq,
        f"the outbox's message carried over from {origin.name} differs from it: it would be "
        "published altered",
    )


def test_a_message_slipped_into_the_live_outbox(journal: Copy) -> None:
    live = journal("plain")
    seq = rolls(live)[0]  # a device record's seq: no message of the journal has it
    execute(
        live,
        "INSERT INTO outbox (seq, topic, payload, retained) VALUES (?, 'craps/roll', ?, 0)",
        (seq, b'{"table":"c1","roll_id":1,"status":"counted"}'),
    )
    assert _problem(verify_journal(live)) == (
        live.name,
        seq,
        "the outbox holds a message for this seq but the journal no publish record of it: "
        "the record was deleted or the message inserted (it would be published)",
    )


# -- the command ---------------------------------------------------------------------------------


def lammer(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAMMER), *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.heavy
def test_the_command_exits_0_when_intact_and_says_what_it_checked(journal: Copy) -> None:
    live = journal("hmac")
    before = sorted(p.relative_to(live.parent) for p in live.parent.rglob("*"))
    result = lammer("journal", "verify", live, "--key-file", live.parent / "c1.key")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "lammer journal verify: intact"
    assert "  segments:  2 (1 in the archive and the live one)" in lines
    assert "  chain:     hmac-sha256, from genesis" in lines
    assert any(line.startswith("  snapshots: ") for line in lines)
    assert sorted(p.relative_to(live.parent) for p in live.parent.rglob("*")) == before


@pytest.mark.heavy
def test_the_command_takes_path_and_key_from_the_configuration(journal: Copy) -> None:
    live = journal("hmac")
    config = live.parent / "c1.toml"
    config.write_text(
        '[table]\nid = "c1"\ngame = "CRAPS"\n[dice_reader]\nport = "/dev/null"\n'
        '[journal]\npath = "c1.db"\nhmac_key_file = "c1.key"\n'
    )
    result = lammer("journal", "verify", "--config", config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hmac-sha256" in result.stdout


@pytest.mark.heavy
def test_the_command_exits_1_and_names_the_first_problem(journal: Copy) -> None:
    live = journal("plain")
    seq = rolls(live)[1]
    execute(live, "DELETE FROM records WHERE seq = ?", (seq,))
    result = lammer("journal", "verify", live)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == (
        f"lammer journal verify: segment {live}, seq {seq + 1}: "
        f"seq {seq + 1} follows {seq - 1}: a record was deleted"
    )
    # Without the key, a keyed journal fails at its first record, saying a key may be needed.
    keyed = journal("hmac")
    result = lammer("journal", "verify", keyed)
    assert result.returncode == 1
    assert ", seq 1: " in result.stdout.splitlines()[0]
    assert "a key may be needed" in result.stdout


@pytest.mark.heavy
def test_the_command_exits_2_when_it_cannot_check(tmp_path: Path, journal: Copy) -> None:
    missing = tmp_path / "none.db"
    result = lammer("journal", "verify", missing)
    assert (result.returncode, result.stdout) == (2, "")
    assert "no such file" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created
    text = tmp_path / "t1.toml"
    text.write_text('[table]\nid = "t1"\n' * 200)
    result = lammer("journal", "verify", text)
    assert result.returncode == 2
    assert "is not a lammer journal" in result.stderr
    live = journal("hmac")
    result = lammer("journal", "verify", live, "--key-file", tmp_path / "no-key")
    assert result.returncode == 2
    assert "cannot read the key file" in result.stderr
    result = lammer("journal", "verify", live, "--kind", "device")
    assert result.returncode == 2
    assert "--kind: for the export, not for verify" in result.stderr
    result = lammer("journal", "verify")
    assert result.returncode == 2
    assert "a FILE (the journal's live segment) or --config is required" in result.stderr


class Allowance:
    """Batches of rolls the writer may play: granted before each verify, so the journal
    grows by a bound per verify whatever the machine's load (a writer left free grows it
    2.5 times per verify here, and a starved verify then reads ever more)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.left = 0
        self.closed = False

    def grant(self, batches: int) -> None:
        with self.cond:
            self.left += batches
            self.cond.notify_all()

    def take(self) -> bool:
        """Wait for a batch to play; False once closed."""
        with self.cond:
            self.cond.wait_for(lambda: self.left > 0 or self.closed)
            if self.closed:
                return False
            self.left -= 1
            self.cond.notify_all()
            return True

    def spent(self, within: float) -> bool:
        """Wait until every batch granted is played (False after ``within`` s)."""
        with self.cond:
            return self.cond.wait_for(lambda: self.left == 0 or self.closed, within)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


WHILE_VERIFYING = 100
"""Batches of 3 rolls the writer plays while each verify runs."""


@pytest.mark.heavy
def test_verify_passes_while_the_daemon_writes(tmp_path: Path) -> None:
    # The table's core keeps journaling (one transaction per frame, a snapshot every 12
    # records) in a thread while `lammer journal verify` reads the same files: read-only,
    # it sees a consistent prefix of the journal each time and creates nothing.
    config = table_config(tmp_path / "live")
    started = threading.Event()
    allowance = Allowance()
    failure: list[BaseException] = []

    def write() -> None:  # SQLite wants a connection used by the thread that opened it
        clock, state = Clock(), Play()
        try:
            core = open_table(config, clock)
            try:
                play(core, clock, state, rolls=5)
                started.set()
                while allowance.take():
                    play(core, clock, state, rolls=3)
            finally:
                stop_table(core)
        except BaseException as exc:  # reported by the test
            failure.append(exc)
        finally:
            started.set()
            allowance.close()  # a writer that failed grants no wait

    writer = threading.Thread(target=write, name="journal-writer")
    writer.start()
    results: list[subprocess.CompletedProcess[str]] = []
    try:
        started.wait(timeout=60)
        folder = config.journal_path.parent
        before = {p.name for p in folder.iterdir()}
        for _ in range(3):
            # Granted as the verify starts: the writer plays while it reads. The next
            # verify starts once they are played, so the last reads more than the first.
            allowance.grant(WHILE_VERIFYING)
            results.append(lammer("journal", "verify", config.journal_path))
            assert allowance.spent(within=120), "the writer did not play what it was given"
        after = {p.name for p in folder.iterdir()}
    finally:
        allowance.close()
        writer.join(timeout=60)
    assert not writer.is_alive()
    assert not failure, failure
    for result in results:
        assert result.returncode == 0, result.stdout + result.stderr
    # Nothing of the reader's (no -journal, -wal or -shm of its own). The writer may rotate
    # meanwhile, its clock crossing a gaming day: its archive folder and a rotation's
    # .next segment (with its -wal and -shm) are its own.
    made = after - before
    assert {name for name in made if name != ARCHIVE and ".next" not in name} == set()
    counts = [int(r.stdout.split("records:")[1].split()[0]) for r in results]
    assert counts == sorted(counts)
    assert counts[-1] > counts[0] > 0  # it wrote while they read
    assert verify_journal(config.journal_path).intact


def test_a_fresh_table_restarted_under_another_game_and_pay_table_verifies(tmp_path: Path) -> None:
    # A start under changed settings journals them; the replay applies them from that
    # start on, and the table the core then snapshots is the same (alarms' times included).
    folder = tmp_path / "t"
    config = table_config(folder)
    clock = Clock()
    core = open_table(config, clock)  # a new journal: no device ever connects
    clock.now += timedelta(minutes=1)
    stop_table(core)
    raw = config.model_dump(mode="json")
    raw["bonus_craps"] = {"paytable": 2}
    changed = type(config).model_validate(raw)
    core = open_table(changed, clock)
    play(core, clock, Play(), rolls=3)
    stop_table(core)
    raw["table"]["game"] = "UTH"
    raw["shuffler"] = {"port": str(folder / "no-shuffler")}
    del raw["dice_reader"]
    other_game = type(config).model_validate(raw)
    core = open_table(other_game, clock)
    stop_table(core)
    report = verify_journal(config.journal_path)
    assert report.intact, report.problem
    assert report.snapshots >= 3


def test_hashes_are_what_the_documented_recipe_gives(journal: Copy) -> None:
    # docs/auditors/journal.md: hash = SHA-256(previous hash + canonical bytes), the first on
    # 32 zero bytes; an auditor can recompute the first records without lammer.
    live = journal("plain")
    oldest = _segments(live)[0]
    rows = query(
        oldest,
        "SELECT r.seq, r.ts, r.kind, r.body, o.payload, r.hash FROM records r LEFT JOIN "
        "outbox o ON o.seq = r.seq AND r.kind = 'publish' ORDER BY r.seq LIMIT 5",
    )
    previous = bytes(32)
    for seq, ts, kind, text, payload, digest in rows:
        data = f"{seq}\n{ts}\n{kind}\n".encode() + text.encode() + b"\n" + (payload or b"")
        assert data == canonical(seq, ts, kind, text, payload)
        previous = hashlib.sha256(previous + data).digest()
        assert previous == bytes(digest)


def test_a_rotation_while_a_reader_holds_a_snapshot_keeps_the_sealed_day(tmp_path: Path) -> None:
    # An auditor's sqlite3 session with a read transaction open across 06:00: the
    # rotation's checkpoint cannot empty the WAL, so the sealed segment's last records are
    # still in it. They must reach the archive with the segment (and not be read as the
    # next live segment's): the whole journal verifies.
    config = table_config(tmp_path / "t")
    clock, state = Clock(), Play()
    core = open_table(config, clock)
    play(core, clock, state, rolls=5)
    uri = f"{config.journal_path.resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, isolation_level=None)) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM records").fetchone()
        play(core, clock, state, rolls=3)  # committed after the reader's snapshot
        next_day(clock)
        core.tick()  # the rotation
    play(core, clock, state, rolls=3)
    stop_table(core)
    [sealed] = _segments(config.journal_path)
    assert seqs(sealed, "seal")  # the sealed day is whole, seal included
    report = verify_journal(config.journal_path)
    assert report.intact, report.problem
    assert len(report.segments) == 2


def test_the_archive_alone_verifies_where_it_was_copied(journal: Copy, tmp_path: Path) -> None:
    # The segments an archive_command copied off the box, in an archive/ folder of their
    # own: checked from genesis to the last seal without a live segment.
    live = journal("plain")
    store = tmp_path / "store"
    shutil.copytree(live.parent / "archive", store / "archive")
    report = verify_journal(store / live.name)
    assert report.intact, report.problem
    assert report.segments == _segments(store / live.name)
    assert len(report.segments) == 2
    assert report.anchor is None
    # Without the first of them, the second is an anchor nothing explains.
    report.segments[0].unlink()
    segment, _, what = _problem(verify_journal(store / live.name))
    assert segment == report.segments[1].name
    assert "is missing and no record of the journal says the retention removed it" in what


def test_a_rotation_between_listing_and_reading_is_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 06:00 the live segment may move into the archive after verify listed the files and
    # before it read them: it then sees a journal that begins at the new header. It checks
    # again instead of calling the journal broken.
    config = table_config(tmp_path / "t")
    clock, state = Clock(), Play()
    core = open_table(config, clock)
    play(core, clock, state, rolls=5)
    listings: list[list[Path]] = []

    def listing_then_rotation(live: Path) -> list[Path]:
        paths = segment_paths(live)
        listings.append(paths)
        if len(listings) == 2:  # the walk's own listing (the first is the one before it)
            next_day(clock)
            core.tick()
        return paths

    monkeypatch.setattr("daemon.verify.segment_paths", listing_then_rotation)
    try:
        report = verify_journal(config.journal_path)
    finally:
        stop_table(core)
    assert report.intact, report.problem
    assert len(report.segments) == 2  # read again, after the rotation
    assert listings[1] == [config.journal_path]  # the stale listing the first walk had


@pytest.mark.parametrize(
    ("archived", "with_live", "expected"),
    [
        (0, True, "  segments:  1 (the live one)"),
        (1, True, "  segments:  2 (1 in the archive and the live one)"),
        (3, False, "  segments:  3 (3 in the archive, no live segment)"),
    ],
)
def test_the_summary_counts_segments_in_plain_words(
    tmp_path: Path, archived: int, with_live: bool, expected: str
) -> None:
    # Issue 20: "segments: 1 (0 in the archive and the live one)".
    live = tmp_path / "t1.db"
    segments = [tmp_path / "archive" / f"t1-{i}.db" for i in range(archived)]
    report = Report(live=live, hmac=False, segments=[*segments, *([live] if with_live else [])])
    assert expected in report.summary()


def _older(value: Any) -> Any:
    """``value`` without the keys added since an older lammer (``ADDED_SNAPSHOT_KEYS``)."""
    if isinstance(value, dict):
        return {k: _older(v) for k, v in value.items() if k not in ADDED_SNAPSHOT_KEYS}
    if isinstance(value, list):
        return [_older(v) for v in value]
    return value


def _written_by_an_older_lammer(live: Path) -> list[int]:
    """Make the one-segment journal ``live`` what an older lammer wrote: its snapshots
    without the keys added since, the chain rebuilt. The snapshots' seqs."""
    snapshots = seqs(live, "snapshot")
    for seq in snapshots:
        set_body(live, seq, _older(body(live, seq)))
    rehash(live, snapshots[0])
    return snapshots


def test_a_journal_of_an_older_lammer_verifies_and_an_upgrade_goes_on_from_it(
    tmp_path: Path,
) -> None:
    # A table upgraded in the middle of a craps series (the play has no seven): the new
    # daemon restores from a snapshot without series or since, so what it publishes and
    # snapshots afterwards differs from a full replay by the new code. Neither is a finding.
    live = build(tmp_path / "t", days=1)
    older = _written_by_an_older_lammer(live)
    report = verify_journal(live)
    assert report.intact, report.problem
    assert report.older_snapshots == report.snapshots == len(older)

    config = table_config(tmp_path / "t")
    clock, state = Clock(), Play()
    clock.now = datetime.fromisoformat(query(live, "SELECT max(ts) FROM records")[0][0])
    clock.now += timedelta(minutes=5)
    core = open_table(config, clock)  # the upgrade: restored from the older snapshot
    play(core, clock, state, rolls=30)
    stop_table(core)

    report = verify_journal(live)
    assert report.intact, report.problem
    assert report.older_snapshots == len(older)
    assert report.snapshots > len(older)  # the upgraded daemon's, compared in full


def test_an_older_snapshot_is_still_compared_on_everything_it_has(tmp_path: Path) -> None:
    live = build(tmp_path / "t", days=1)
    snapshot = _written_by_an_older_lammer(live)[1]
    value = body(live, snapshot)
    value["state"]["craps"]["paytable"] = 2 if value["state"]["craps"]["paytable"] != 2 else 1
    set_body(live, snapshot, value)
    rehash(live, snapshot)
    segment, at, what = _problem(verify_journal(live))
    assert (segment, at) == (live.name, snapshot)
    assert "first difference at state.craps.paytable" in what


def test_a_key_of_today_missing_from_a_snapshot_is_a_finding(tmp_path: Path) -> None:
    # Only the keys a later lammer added may be missing: a snapshot without any other key
    # (a hand edit that removes what it should hold) is a finding.
    live = build(tmp_path / "t", days=1)
    snapshot = seqs(live, "snapshot")[1]
    value = body(live, snapshot)
    del value["state"]["craps"]["paytable"]
    set_body(live, snapshot, value)
    rehash(live, snapshot)
    segment, at, what = _problem(verify_journal(live))
    assert (segment, at) == (live.name, snapshot)
    assert "state.craps.paytable" in what
