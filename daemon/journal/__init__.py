"""The table's journal: every device event, decision, outcome, alarm and published
message, in order, each with the daemon's ``seq``; the outbox the MQTT link drains; the
snapshots a start begins from; a hash chain that shows nobody edited it.

SQLite in WAL mode with ``synchronous=FULL``: every commit is fsynced to the WAL before
``append`` returns, so a record that was appended survives a crash of the process
(SIGKILL) *and* a power loss. The daemon acknowledges a device frame only after its
record is appended, so an ACK means the event is durable; a crash before that makes the
device send the frame again (link-layer.md).

``seq`` is strictly increasing and never reused, also across restarts, across segments
(``daemon.segments``: one SQLite file per gaming day) and even if rows were ever deleted
(``AUTOINCREMENT`` keeps the high-water mark in ``sqlite_sequence``).

**Hash chain.** Every record carries ``hash`` = SHA-256 (or HMAC-SHA-256 with the table's
key, ``[journal] hmac_key_file``) over the previous record's hash and the record's own
canonical bytes (``canonical``: seq, time, kind, body and, for a message, its payload).
The first record of a segment (kind ``segment``) chains on the last record of the
segment before it, whose hash it also names; the very first chains on 32 zero bytes.
Editing a byte, deleting, inserting or reordering records breaks the chain at the first
record concerned (``daemon.verify``). What may change after the fact, whether a message
reached the broker, is outside the chain.

**Snapshots.** A record of kind ``snapshot`` holds the whole table state (written by
``daemon.upkeep`` in the transaction of the frame that produced it); ``latest_snapshot()``
finds the newest at once (an index on kind), so a start replays only what follows it.

The file is created mode 0600 (SQLite gives its ``-wal`` and ``-shm`` the same mode) and
its directory, when missing, 0700: the journal holds every card before it is face up
(shuffler-icd.md, "Card data is secret until it is face up"). One process writes a
table's journal at a time (an ``flock`` on ``<path>.lock``, which outlives segment
rotations); readers such as ``lammer journal`` may read it while the daemon runs.

The API is synchronous: the daemon calls it from the event loop and each call is one
short transaction. ``batch()`` groups several appends into one transaction (one fsync),
which is how a device frame and everything it causes become durable together.

Marking a message published is committed without its own fsync: after a power loss a
message may go out twice, and its unchanged ``seq`` lets displays ignore the repeat
(mqtt-api.md, "Conventions"). Nothing is ever lost that way, and the event loop does not
wait for the disk after every publish.

**Parts.** ``Journal`` (``daemon.journal.facade``) is what every caller uses; each of its
calls is composed of parts of one job each: the SQLite file (``store``: created, locked,
set up or migrated; its statements and transactions), the chain's end kept in memory
(``tip``: the last ``seq`` and hash, which each appended record extends), the chain's
hashing (``chain``), the outbox (``messages``: queued, marked, set aside, retained,
carried over at a rotation, read back for a resend), the records read back (``reader``)
and what a record is (``record``: its kinds, the forms it is read in, its JSON).
"""

from daemon.journal.chain import GENESIS, canonical, chain
from daemon.journal.facade import Journal
from daemon.journal.record import (
    KINDS,
    WRITABLE_KINDS,
    JournalRecord,
    Kind,
    RawRecord,
    dumps,
)
from daemon.journal.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    WAL_CHECKPOINT_PAGES,
    WAL_LIMIT_BYTES,
    lock,
)

__all__ = [
    "APPLICATION_ID",
    "GENESIS",
    "KINDS",
    "SCHEMA_VERSION",
    "WAL_CHECKPOINT_PAGES",
    "WAL_LIMIT_BYTES",
    "WRITABLE_KINDS",
    "Journal",
    "JournalRecord",
    "Kind",
    "RawRecord",
    "canonical",
    "chain",
    "dumps",
    "lock",
]
