"""The floor's records end to end: ten tables on the nats floor, ``lammer records run``
subscribed to it, through a node kill, a controller's broker restart and a records restart.

Ten controllers (``tests.integration.floor``: each its own Mosquitto written by
``broker-config --bridge``, its daemon, its simulator on a pty playing honestly; craps,
Ultimate Texas Hold'em, Three Card Poker and Bust Bonus tables mixed), a 3-node cluster
written by ``floor-config``, the private PostgreSQL of ``tests/records/conftest.py``, and
``lammer records run`` as a real subprocess logging in to node 1 as the floor's ``records``
user over TLS. During play, each step waiting for the tables to have played on (their
next messages, as each controller's own subscriber sees them, or as the journal holds them
while the controller's broker is down):

1. node 1 (records' node, and the bridges') is killed with SIGKILL, then started again;
2. one controller's Mosquitto is stopped and started again (its bridge's queue persists);
3. the records service is stopped (SIGTERM) and started again (its session waits on the
   floor).

Then the simulators stop; once the store holds what the journals hold (resends asked
and served while the tables are up), the daemons stop too, and every table's final journal
is compared with the store: every message the table published is stored, once (the
store's key), under its topic; every
result row is there once; nothing the table did not publish; no gap given up;
``lammer records reconcile`` over the ten journals says 0 missing, 0 extra, 0 in recorded
gaps; and the floor's ``display`` user reads every table's integrity topic (retained,
published by the records service), with no alarm for honest tables.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from deploy.floor_cluster import FloorCluster
from tests.integration.floor import Controller, FloorSubscriber, running_floor, until
from tests.integration.harness import DEADLINE, _json_lines, _stop, _tail
from tests.records.conftest import StoreDb

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

T = TypeVar("T")

LAMMER = str(Path(sys.executable).parent / "lammer")
CONTROLLERS = 10
GAMES = ("CRAPS", "UTH", "TCP", "CRAPS", "BJ")
RECORDS_NODE = 1
AHEAD = 2
"""How many new messages every table publishes between two steps of the scenario: play
goes on through each failure (craps rolls every second, the card tables deal every two)."""
CATCH_UP = 240.0
"""After play stops, the store must hold every table's journal within this (a bound on a
failure on a loaded 2-core machine, never what is tested)."""

RESULTS = {
    "craps/roll": "craps_roll",
    "craps/result": "craps_result",
    "cover_all/result": "cover_all_result",
    "bust_bonus/result": "bust_bonus_result",
}
"""The result topics and the store's table for each."""


@pytest.fixture
async def floor(tmp_path: Path) -> AsyncIterator[tuple[FloorCluster, list[Controller]]]:
    async with running_floor(tmp_path, GAMES, CONTROLLERS) as running:
        yield running


class RecordsService:
    """``lammer records run`` on the floor as an operator runs it: the floor's ``records``
    password from floor-config's credentials, the floor CA, the store's password in a
    pgpass file (never on the command line)."""

    def __init__(self, workdir: Path, cluster: FloorCluster, store: StoreDb) -> None:
        self.workdir = workdir
        workdir.mkdir()
        pg = store.pg
        pgpass = workdir / "pgpass"
        pgpass.touch(mode=0o600)
        pgpass.write_text(f"{pg.host}:{pg.port}:{store.database}:{store.role}:{store.password}\n")
        self.env = {**os.environ, "PGPASSFILE": str(pgpass)}
        host, port = cluster.mqtt_endpoints[RECORDS_NODE - 1]
        self.argv = [
            LAMMER,
            "records",
            "run",
            "--db",
            f"host={pg.host} port={pg.port} dbname={store.database} user={store.role}",
            "--mqtt",
            f"{host}:{port}",
            "--mqtt-ca-file",
            str(cluster.ca_path),
            "--mqtt-user",
            "records",
            "--mqtt-password-file",
            str(cluster.plan.credentials_dir / "records"),
            "--prefix",
            "lammer",
        ]
        self.runs: list[tuple[subprocess.Popen[bytes], Path]] = []

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        """The current run's process."""
        return self.runs[-1][0] if self.runs else None

    def log_events(self) -> list[dict[str, Any]]:
        """Every run's JSON log lines, in order."""
        return [e for _, log in self.runs for e in _json_lines(log)]

    def tails(self) -> str:
        """The last lines of every run's log, for a failure message."""
        return "\n".join(_tail(log, 25) for _, log in self.runs)

    def _spawn(self) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.workdir / f"records-{len(self.runs) + 1}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(  # a real service process, as systemd runs it
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
            )
        self.runs.append((proc, log))
        return proc, log

    async def start(self) -> None:
        """A new run; returns once it is subscribed to the floor."""
        proc, log = self._spawn()
        n = len(self.runs)

        def subscribed() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"lammer records exited ({proc.returncode})\n{self.tails()}")
            return any(e.get("event") == "subscribed" for e in _json_lines(log))

        await until(subscribed, f"lammer records run #{n} subscribed", DEADLINE)

    async def stop(self) -> int:
        """SIGTERM (systemd's stop) and its exit status."""
        proc = self.proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        await until(lambda: proc.poll() is not None, "lammer records to stop", DEADLINE)
        assert proc.returncode is not None
        return proc.returncode

    def close(self) -> None:
        """Stop any run still going (by its own pid)."""
        for proc, _ in self.runs:
            _stop(proc)


def published(c: Controller) -> dict[int, str]:
    """seq -> topic of every JSON message the table published (as ``lammer journal``
    exports them): not ``availability`` (no seq), not what is still in the outbox or was
    refused (never sent)."""
    out: dict[int, str] = {}
    for r in c.table.journal("--kind", "publish"):
        topic = str(r["topic"])
        if topic == "availability" or r.get("refused") or not r.get("published", True):
            continue
        out[int(r["seq"])] = topic
    return out


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the store holds, read in one transaction."""

    messages: dict[str, dict[int, str]]
    """table -> seq -> topic of every message."""
    results: dict[str, set[tuple[str, int]]]
    """result topic -> the (table, seq) of its rows in the topic's own table."""
    gaps: list[tuple[Any, ...]]


def snapshot(dsn: str) -> Snapshot:
    """The store as one transaction sees it (the service writes meanwhile)."""
    messages: dict[str, dict[int, str]] = {}
    results: dict[str, set[tuple[str, int]]] = {}
    with psycopg.connect(dsn) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.transaction():
            for table, seq, topic in conn.execute("SELECT table_id, seq, topic FROM message"):
                messages.setdefault(table, {})[seq] = topic
            for topic, rows in RESULTS.items():
                query = f"SELECT table_id, seq FROM {rows}"  # noqa: S608  a name from RESULTS
                results[topic] = {(t, s) for t, s in conn.execute(query)}
            gaps = conn.execute("SELECT table_id, from_seq, to_seq, reason FROM gap").fetchall()
    return Snapshot(messages, results, gaps)


async def in_threads(
    pool: ThreadPoolExecutor, f: Callable[[Controller], T], cs: Sequence[Controller]
) -> list[T]:
    """``f`` for each controller, off the event loop (``lammer journal`` is a subprocess:
    ten in a row blocked the loop for seconds on a loaded machine), all at once."""
    loop = asyncio.get_running_loop()
    return list(await asyncio.gather(*(loop.run_in_executor(pool, f, c) for c in cs)))


async def play_on(controllers: Sequence[Controller], what: str) -> None:
    """Wait until every table has published ``AHEAD`` more messages, as its controller's
    own subscriber receives them."""
    marks = {c.name: len(c.table.recorder.seqs()) for c in controllers}
    await until(
        lambda: all(len(c.table.recorder.seqs()) >= marks[c.name] + AHEAD for c in controllers),
        f"every table to play on ({what})",
        DEADLINE,
    )


def bridges_on(cluster: FloorCluster, node: int) -> int:
    """How many controller bridges ``/connz`` lists on ``node`` (0 for a dead node)."""
    try:
        return sum(cid.startswith("lammer-bridge-") for cid in cluster.mqtt_clients(node))
    except OSError:
        return 0


async def test_ten_tables_through_a_node_kill_a_broker_restart_and_a_records_restart(  # noqa: C901  one end-to-end scenario, step by step
    floor: tuple[FloorCluster, list[Controller]], store_db: StoreDb, tmp_path: Path
) -> None:
    cluster, controllers = floor
    records = RecordsService(tmp_path / "records", cluster, store_db)
    steps: list[tuple[str, float]] = []
    walls: list[float] = []  # each step's wall clock, to place the daemons' log lines
    began = time.monotonic()

    def step(what: str) -> None:
        steps.append((what, round(time.monotonic() - began, 1)))
        walls.append(time.time())

    pool = ThreadPoolExecutor(CONTROLLERS)
    try:
        # The service first: it sees every table from its first message.
        await records.start()
        for i, c in enumerate(controllers):
            await c.start(interval=1.0 if c.game == "CRAPS" else 2.0, seed=300 + i)
        await until(
            lambda: sum(bridges_on(cluster, n) for n in (1, 2, 3)) == CONTROLLERS,
            "every bridge connected to the floor",
            DEADLINE,
        )
        await play_on(controllers, "before the kill")
        step("playing")

        # 1. The node the records service and the bridges are on dies without a word.
        on_victim = bridges_on(cluster, RECORDS_NODE)
        cluster.kill_node(RECORDS_NODE)
        step(f"node {RECORDS_NODE} killed ({on_victim} bridges on it)")
        others = [n for n in (1, 2, 3) if n != RECORDS_NODE]
        await until(
            lambda: sum(bridges_on(cluster, n) for n in others) == CONTROLLERS,
            "every bridge on another node",
            DEADLINE,
        )
        await play_on(controllers, "node down")
        await asyncio.to_thread(cluster.start_node, RECORDS_NODE)
        step(f"node {RECORDS_NODE} back")
        # The service lost its node too, and logs in to it again (its session kept).
        await until(
            lambda: sum(e.get("event") == "subscribed" for e in records.log_events()) >= 2,
            "lammer records subscribed again after the kill",
            DEADLINE,
        )
        step("records subscribed again")
        await play_on(controllers, "node back")

        # 2. A controller's Mosquitto restarts while its table plays (it queues in its
        # journal's outbox; the bridge's queue persists in the broker's data folder).
        hit = controllers[0]
        hit.broker.stop()
        step(f"{hit.name}'s Mosquitto stopped")
        before = len(await asyncio.to_thread(hit.table.journal, "--kind", "publish"))

        async def journal_grew() -> None:
            deadline = time.monotonic() + DEADLINE
            while len(await asyncio.to_thread(hit.table.journal, "--kind", "publish")) < (
                before + AHEAD
            ):
                assert time.monotonic() < deadline, f"{hit.name}'s table did not play on"
                await asyncio.sleep(0.5)

        await journal_grew()
        hit.broker.start()
        step(f"{hit.name}'s Mosquitto started")
        await play_on(controllers, "broker back")

        # 3. The records service restarts while every table plays.
        status = await records.stop()
        assert status == 0, records.tails()
        step("records stopped")
        await play_on(controllers, "records down")
        await records.start()
        step("records started")
        await play_on(controllers, "records back")
        for c in controllers:
            await c.stop_play()
        step("play stopped")

        # The store holds what the journals hold, no more, no less. A table still publishes
        # after its simulator stopped (the device's loss), so each look reads the store,
        # then the journals (a message stored was journaled before it was published).
        async def caught_up(what: str) -> tuple[Snapshot, dict[str, dict[int, str]]]:
            deadline = time.monotonic() + CATCH_UP
            while True:
                have = await asyncio.to_thread(snapshot, store_db.dsn)
                journals = await in_threads(pool, published, controllers)
                want = {c.table.table_id: j for c, j in zip(controllers, journals, strict=True)}
                if have.messages == want:
                    step(what)
                    return have, want
                if time.monotonic() > deadline:
                    differ = {
                        t: (
                            f"missing {sorted(set(j) - set(have.messages.get(t, {})))[:30]}, "
                            f"extra {sorted(set(have.messages.get(t, {})) - set(j))[:30]}"
                        )
                        for t, j in want.items()
                        if have.messages.get(t) != j
                    }
                    raise AssertionError(
                        f"the store is not the journals {CATCH_UP} s after {what}: {differ}; "
                        f"tables {sorted(have.messages.keys() - want.keys())} never played; "
                        f"steps {steps}\n{records.tails()}"
                    )
                await asyncio.sleep(1.0)

        await caught_up("all stored (tables up)")
        # Each controller's own display (its recorder, MQTT 5) saw only what the contract
        # allows, copies sent again included.
        for c in controllers:
            c.table.recorder.raise_violations()
        # The tables close (what they publish as they stop must come too); then their
        # journals are final, for reconcile to read.
        for c in controllers:
            assert await c.table.stop_daemon() == 0
        have, want = await caught_up("all stored (tables closed)")
        total = sum(len(j) for j in want.values())
        assert total >= CONTROLLERS * 6 * AHEAD, f"too little play to show anything: {total}"
        # Every result is in its own table once (the store's key is (table, seq)), and no
        # seq was given up.
        for topic, got in have.results.items():
            expected = {(t, s) for t, j in want.items() for s, tp in j.items() if tp == topic}
            assert got == expected, f"{topic}: {sorted(got ^ expected)[:20]}"
        assert have.gaps == [], f"gaps recorded: {have.gaps}"
        results = {topic: len(rows) for topic, rows in have.results.items()}
        assert results["craps/roll"] > 0
        assert results["cover_all/result"] > 0
        assert results["bust_bonus/result"] > 0

        # lammer records reconcile, the operator's check, over the ten journals.
        argv = [LAMMER, "records", "reconcile", "--db", store_db.dsn]
        for c in controllers:
            argv += ["--journal", str(c.table.journal_path)]
        done = await asyncio.to_thread(
            subprocess.run, argv, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == CONTROLLERS, done.stdout
        for line in lines:
            assert line.endswith(", 0 missing, 0 extra, 0 in recorded gaps"), line

        # The floor's display user (the pit) reads every table's integrity topic: retained,
        # no alarm for honest tables.
        ids = {c.table.table_id for c in controllers}
        pit = FloorSubscriber(cluster, ["lammer-floor/integrity/+"], user="display", clean=True)
        await pit.start()
        try:

            def integrity() -> dict[str, Any] | None:
                got = {m.topic.rsplit("/", 1)[-1]: m.body for m in pit.messages if m.retained}
                return got if got.keys() == ids else None

            bodies = await until(integrity, "every table's integrity topic on the floor", 60)
        finally:
            await pit.close()
        assert {t: b["alarms"] for t, b in bodies.items()} == {t: [] for t in ids}

        status = await records.stop()
        assert status == 0, records.tails()
        warnings = [e["event"] for e in records.log_events() if e.get("level") == "warning"]
        # Which step each resend the service asked for came after (what lost messages).
        served: dict[str, list[str]] = {}
        for c in controllers:
            for e in c.table.log_events():
                if e.get("event") == "resend served" and e.get("operator") == "records":
                    at = datetime.fromisoformat(str(e["timestamp"])).timestamp()
                    after = sum(w <= at for w in walls)
                    what = steps[after - 1][0] if after else "start"
                    served.setdefault(what, []).append(f"{c.name} {e['from_seq']}-{e['to_seq']}")
        print(
            f"\n{total} messages from {CONTROLLERS} tables, results {results}; steps {steps}; "
            f"records' warnings {warnings[:20]}; resends served to records, by the step they "
            f"followed: {served}"
        )
    finally:
        records.close()
        pool.shutdown(wait=True)
