"""The floor's records: what the store keeps up with, report time, and the watch's power.

    .venv/bin/python bench/bench_records.py [--messages N] [--paced-messages N] [--rate R]
        [--batch B] [--tables T] [--days D] [--rounds R] [--skip-report] [--skip-watch]

1. Store, on two private PostgreSQL clusters side by side (``deploy.postgres``): fsync off
   (as the tests run it) and fsync on (``durable``: a commit returns once its WAL is on
   disk, as a floor's server runs), both on the machine's disk. In process:
   ``records.messages.parse`` + ``Store.write`` (one transaction a message) against
   ``Store.write_batch`` (B messages a transaction), messages per second and the
   transaction's p50/p99. Then end to end through a private Mosquitto (broker-config's
   window and queue: 20 messages in flight, 10,000 queued) and the service (its own task)
   with ``--batch 1`` and ``--batch B``: flooded, and paced at the 1,000-table rate;
   publish to committed row is the time the service's writer saw the batch commit (its
   ``Records.committed``, wrapped here) minus the publisher's clock (the same machine).
2. Report: T tables x D gaming days x R rounds of Cover All (Ultimate Texas Hold'em)
   inserted in SQL, then ``records.reports.build`` for the whole month, median of 3.
3. Watch: rounds for a 2x, 5x and 10x Royal Flush rate (UTH, 6 hands) to be flagged with
   95 % power, computed from the exact binomial; beside it, false alarms measured on
   honest simulated tables.

Figures only, never assertions (docs/developers/benchmarks.md, "The floor's records").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import pwd
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiomqtt
import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, percentile
from deploy.broker import Broker, broker_config
from deploy.broker_config import MAX_INFLIGHT_MESSAGES, MAX_QUEUED_MESSAGES
from deploy.postgres import Postgres
from records import service
from records.intake import Batch, Settings
from records.integrity import ALPHA, Z_SIMULATION, Watch, binomial_upper, cover_all_family
from records.messages import Message, parse
from records.migrate import migrate
from records.observe import GamingDay
from records.parsheet import cover_all_chance, cover_all_rows
from records.provision import provision
from records.reports import build
from records.service import Records, run
from records.store import Store


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _result(table: str, seq: int, at: datetime) -> dict[str, Any]:
    return {
        "table": table, "seq": seq, "ts": _ts(at), "round_id": seq % 999_999 + 1,
        "game": "UTH", "hands": 6, "outcome": "no_qualifier", "highest": None, "pays": None,
        "reason": None,
    }  # fmt: skip


def _database(pg: Postgres, name: str) -> str:
    with psycopg.connect(pg.admin_dsn(), autocommit=True) as admin:
        provision(admin, database=name, role=name, password="bench-password-0123456789")
    dsn = pg.dsn(name, "bench-password-0123456789", name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)
    return dsn


def bench_store(
    clusters: list[tuple[str, Postgres]], messages: int, paced: int, tables: int, rate: float,
    batch: int,
) -> None:  # fmt: skip
    """Each cluster in process, then end to end through Mosquitto: flooded, then paced;
    one transaction a message beside batches of ``batch``."""
    for label, pg in clusters:
        bench_in_process(label, pg, messages, tables, batch)
    for label, pg in clusters:
        for size in (1, batch):
            asyncio.run(_end_to_end(label, pg, "flood", messages, tables, None, size))
    for label, pg in clusters:
        for size in (1, batch):
            asyncio.run(_end_to_end(label, pg, "paced", paced, tables, rate, size))


def bench_in_process(label: str, pg: Postgres, messages: int, tables: int, batch: int) -> None:
    """``Store.write`` a message at a time, then ``Store.write_batch`` by ``batch``."""
    now = datetime.now(UTC)
    bodies = [
        (f"t{i % tables}", json.dumps(_result(f"t{i % tables}", i // tables + 1, now)).encode())
        for i in range(messages)
    ]
    for size in (1, batch):
        dsn = _database(pg, f"bench_store_{size}")
        latencies: list[float] = []
        with psycopg.connect(dsn) as conn:
            store = Store(conn)
            start = time.perf_counter()
            for i in range(0, messages, size):
                t0 = time.perf_counter()
                chunk = [parse(t, "cover_all/result", body) for t, body in bodies[i : i + size]]
                if size == 1:
                    store.write(chunk[0])
                else:
                    store.write_batch(chunk)
                latencies.append(time.perf_counter() - t0)
            elapsed = time.perf_counter() - start
        print(
            f"{label}, in process, batch {size}: {messages / elapsed:,.0f} messages/s "
            f"(a transaction p50 {statistics.median(latencies) * 1e3:.2f} ms, p99 "
            f"{percentile(latencies, 0.99) * 1e3:.2f} ms)"
        )


async def _end_to_end(
    label: str, pg: Postgres, how: str, messages: int, tables: int, rate: float | None,
    batch: int,
) -> None:  # fmt: skip
    dsn = _database(pg, f"bench_{how}_{batch}")
    committed: dict[tuple[str, int], float] = {}
    batches: list[int] = []
    original = Records.committed

    def seen(records: Records, done: Batch) -> None:
        at = time.time()
        batches.append(len(done.items))
        for item in done.items:
            if isinstance(item, Message):
                committed.setdefault((item.table, item.seq), at)
        original(records, done)

    service.Records.committed = seen  # type: ignore[method-assign,assignment]
    with tempfile.TemporaryDirectory() as folder:
        # broker-config's window and queue: a flood waits on the broker, never dropped.
        broker = Broker(Path(folder), config_file=Path(folder) / "bench.conf")
        broker.conf.write_text(
            broker_config(broker.port, user=pwd.getpwuid(os.geteuid()).pw_name)
            + f"max_inflight_messages {MAX_INFLIGHT_MESSAGES}\n"
            + f"max_queued_messages {MAX_QUEUED_MESSAGES}\n"
        )
        broker.start()
        stop = asyncio.Event()
        settings = Settings(
            mqtt_host="127.0.0.1", mqtt_port=broker.port, mqtt_user=None, mqtt_password=None,
            prefixes=("lammer",), dsn=dsn, day=GamingDay(), batch=batch,
        )  # fmt: skip
        task = asyncio.create_task(run(settings, stop))
        try:
            sent: dict[tuple[str, int], float] = {}
            async with aiomqtt.Client("127.0.0.1", broker.port) as client:
                await asyncio.sleep(1.0)  # the service subscribes (a figure, not a test)
                start = time.perf_counter()
                for i in range(messages):
                    table, seq = f"t{i % tables}", i // tables + 1
                    body = json.dumps(_result(table, seq, datetime.now(UTC))).encode()
                    sent[(table, seq)] = time.time()
                    await client.publish(f"lammer/{table}/cover_all/result", body, qos=1)
                    if rate is not None:  # paced: the i-th message at i / rate seconds
                        ahead = start + (i + 1) / rate - time.perf_counter()
                        if ahead > 0:
                            await asyncio.sleep(ahead)
                publishing = time.perf_counter() - start
                while len(committed) < messages:
                    if task.done():
                        task.result()  # the service's error
                        raise RuntimeError("the service stopped")
                    await asyncio.sleep(0.05)
                drained = time.perf_counter() - start
        finally:
            stop.set()
            await task
            broker.stop()
            service.Records.committed = original  # type: ignore[method-assign]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT (table_id, seq)) FROM message")
        assert rows.fetchone() == (messages, messages)  # each once (a figure's sanity)
    delays = [committed[key] - sent[key] for key in sent]
    what = "flooded" if rate is None else f"paced at {rate:g}/s"
    sizes = [n for n in batches if n]
    print(
        f"{label}, end to end, batch {batch}, {what}: {messages:,} messages of {tables} tables "
        f"published in {publishing:.1f} s, all committed after {drained:.1f} s = "
        f"{messages / drained:,.0f} messages/s; publish to committed row p50 "
        f"{statistics.median(delays) * 1e3:.0f} ms, p99 {percentile(delays, 0.99) * 1e3:.0f} ms; "
        f"{len(sizes):,} transactions, {statistics.mean(sizes):.1f} messages each on average "
        f"(largest {max(sizes)})"
    )


def load_month(pg: Postgres, name: str, tables: int, days: int, rounds: int) -> tuple[str, float]:
    """A new store ``name`` holding ``tables`` x ``days`` gaming days (from 2026-11-01) x
    ``rounds`` Cover All results (UTH), inserted in SQL: its DSN, and the seconds it took."""
    dsn = _database(pg, name)
    first = date(2026, 11, 1)
    start = datetime.combine(first, clock(6, 0), UTC)
    total = tables * days * rounds
    step = 86_400 / rounds
    insert = """
    WITH r AS (
        SELECT 't' || (g %% %(tables)s) AS table_id, g / %(tables)s + 1 AS seq,
               %(start)s::timestamptz + ((g / %(tables)s) * %(step)s) * interval '1 second' AS ts,
               g AS n
        FROM generate_series(0, %(total)s - 1) g)
    , m AS (
        INSERT INTO message (table_id, seq, topic, ts, payload)
        SELECT table_id, seq, 'cover_all/result', ts, '{}'::jsonb FROM r RETURNING 1)
    INSERT INTO cover_all_result
        (table_id, seq, ts, round_id, game, hands, outcome, hand, position, cards, pays)
    SELECT table_id, seq, ts, seq %% 999999 + 1, 'UTH', 2 + n %% 6,
           CASE WHEN n %% 7 = 0 THEN 'win' ELSE 'no_qualifier' END,
           CASE WHEN n %% 7 = 0 THEN 'Full House' END,
           CASE WHEN n %% 7 = 0 THEN 'P1' END, NULL,
           CASE WHEN n %% 7 = 0 THEN 8 END
    FROM r
    """
    t0 = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        conn.execute(insert, {"tables": tables, "start": start, "step": step, "total": total})
        conn.commit()
        conn.execute("ANALYZE")
    return dsn, time.perf_counter() - t0


def bench_report(pg: Postgres, tables: int, days: int, rounds: int) -> None:
    """A month of a floor's Cover All results inserted in SQL, then its whole report."""
    dsn, loading = load_month(pg, "bench_report", tables, days, rounds)
    first = date(2026, 11, 1)
    total = tables * days * rounds
    times = []
    for _ in range(3):
        with psycopg.connect(dsn) as conn:
            t1 = time.perf_counter()
            report = build(
                conn, first=first, last=first + timedelta(days=days - 1), starts=clock(6, 0),
                tz=ZoneInfo("UTC"), tz_name="UTC",
            )  # fmt: skip
            times.append(time.perf_counter() - t1)
    print(
        f"report: {tables} tables x {days} gaming days x {rounds} rounds = {total:,} results "
        f"(loaded in {loading:.0f} s); the whole month's report ({len(report.days):,} "
        f"table-days) in {statistics.median(times):.2f} s (median of 3)"
    )


def _tail(x: int, n: int, p: float) -> float:
    k = np.arange(x, n + 1)
    logs = (
        math.lgamma(n + 1)
        - np.array([math.lgamma(i + 1) for i in k])
        - np.array([math.lgamma(n - i + 1) for i in k])
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )
    return float(np.exp(logs).sum())


def rounds_for_power(factor: float, step: int) -> int:
    """Rounds (a multiple of ``step``) for a ``factor``x Royal Flush rate to be flagged
    with 95 % power at UTH's 6-hand column."""
    royal = cover_all_chance("UTH", 6, "Royal Flush")
    tested = royal.estimate + Z_SIMULATION * royal.std_error
    n = step
    while True:
        x = math.ceil(n * tested + 1)
        while binomial_upper(x, n, tested) >= ALPHA:
            x += 1
        if _tail(x, n, factor * royal.estimate) >= 0.95:
            return n
        n += step


def bench_watch(tables: int, rounds: int) -> None:
    """Rounds to detect 2x, 5x, 10x royal flushes; false alarms on honest tables."""
    for factor, step in ((2.0, 20_000), (5.0, 2_000), (10.0, 500)):
        n = rounds_for_power(factor, step)
        print(
            f"watch: a {factor:g}x Royal Flush rate (UTH, 6 hands) is flagged within {n:,} "
            f"rounds with 95 % power (to the nearest {step:,})"
        )
    rows = cover_all_rows("UTH")
    rng = np.random.default_rng(20261201)
    alarms = 0
    t0 = time.perf_counter()
    for table in range(tables):
        watch = Watch([cover_all_family("UTH")])
        for day in range(rounds // 1000):
            hands = int(rng.integers(2, 8))
            probs = [cover_all_chance("UTH", hands, r).estimate for r in rows]
            counts = rng.multinomial(1000, [*probs, 1 - sum(probs)])
            when = date(2026, 1, 1) + timedelta(days=day)
            watch.observe(
                "cover_all",
                when,
                {hands: 1000},
                {r: int(c) for r, c in zip(rows, counts, strict=False) if c},
            )
            if watch.evaluate(when, f"table {table}"):
                alarms += 1
                break
    print(
        f"watch: honest tables: {alarms} false alarms in {tables} tables x {rounds:,} rounds "
        f"evaluated every 1,000 rounds ({time.perf_counter() - t0:.0f} s)"
    )


def main() -> None:
    """Run the three parts and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000, help="in process and flooded")
    parser.add_argument("--paced-messages", type=int, default=3_000)
    parser.add_argument(
        "--rate",
        type=float,
        default=100.0,
        help="paced publishes a second (1,000 tables publishing a result every 10 s)",
    )
    parser.add_argument("--batch", type=int, default=200, help="the batched runs' size")
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=200, help="rounds per table-day")
    parser.add_argument("--honest-tables", type=int, default=200)
    parser.add_argument("--honest-rounds", type=int, default=100_000)
    parser.add_argument("--skip-report", action="store_true")
    parser.add_argument("--skip-watch", action="store_true")
    args = parser.parse_args()
    print(machine())
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    clusters = [("fsync off", Postgres()), ("fsync on", Postgres(durable=True))]
    try:
        for _, pg in clusters:
            pg.start()
        bench_store(clusters, args.messages, args.paced_messages, 100, args.rate, args.batch)
        print(f"load average after the store: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if not args.skip_report:
            bench_report(clusters[0][1], args.tables, args.days, args.rounds)
    finally:
        for _, pg in clusters:
            pg.stop()
    if not args.skip_watch:
        bench_watch(args.honest_tables, args.honest_rounds)


if __name__ == "__main__":
    main()
