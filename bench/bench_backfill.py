"""What a records backfill costs a table: a craps table plays a busy gaming day before the
records service starts, then the service fills it all from the table's journal.

Real parts: the broker ``lammer broker-config`` makes (its users and ACL: ``records`` asks
at ``request/resend/records``), the daemon and ``lammer-sim dice --rolls N`` at full pace
(``bench.bench_flood.Rig``), a private PostgreSQL (``deploy.postgres``) and the service
(its own task, default settings). Printed: messages published, the time from the
service's start to the last of them stored, the resend requests the backfill asked (the
answers the store keeps: ``decision`` rows with a ``backfill-`` request id), refusals among
them, and the journal records the table added meanwhile (its answers).

Usage: ``.venv/bin/python bench/bench_backfill.py [--rolls 4320]``. Prints figures,
asserts none (docs/floor/records.md, "The backfill").
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_flood import BIN, Rig
from bench.common import machine
from deploy.postgres import Postgres
from records.intake import Settings
from records.migrate import migrate
from records.provision import provision
from records.reconcile import journal_publications
from records.service import run


def _last_seq(journal: Path) -> int:
    conn = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT max(seq) FROM records").fetchone()[0] or 0)
    finally:
        conn.close()


async def _played(rig: Rig, lammer: str) -> list[int]:
    """The seqs the table published, once it has stopped publishing."""
    last: list[int] = []
    while True:
        await asyncio.sleep(3)
        if not rig.journal.exists():
            continue  # the daemon is starting
        _, seqs = await asyncio.to_thread(journal_publications, rig.journal, lammer)
        if seqs and seqs == last:
            return seqs
        last = seqs


async def bench(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="lammer-bench-backfill-"))
    lammer = str(BIN / "lammer")
    rig = Rig(root, lammer)
    pg = Postgres()
    try:
        started = time.monotonic()
        rig.start(args.rolls, 0.0)
        published = await _played(rig, lammer)
        played = time.monotonic() - started
        pg.start()
        name, role, password = "records_bench", "records_bench", secrets.token_urlsafe(18)
        with psycopg.connect(pg.admin_dsn(), autocommit=True) as admin:
            provision(admin, database=name, role=role, password=password)
        dsn = pg.dsn(role, password, name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrate(conn)
        settings = Settings(
            mqtt_host="127.0.0.1",
            mqtt_port=rig.port,
            mqtt_user="records",
            mqtt_password=rig.password("records"),
            prefixes=("lammer",),
            dsn=dsn,
        )
        before = _last_seq(rig.journal)
        stop = asyncio.Event()
        t0 = time.monotonic()
        service = asyncio.create_task(run(settings, stop))
        want = set(published)
        with psycopg.connect(dsn, autocommit=True) as conn:
            while True:
                stored = {r[0] for r in conn.execute("SELECT seq FROM message")}
                if want <= stored:
                    break
                if service.done():
                    service.result()
                await asyncio.sleep(0.2)
            took = time.monotonic() - t0
            answers = conn.execute(
                "SELECT status, count(*) FROM decision WHERE request_id LIKE 'backfill-%' "
                "GROUP BY status"
            ).fetchall()
        stop.set()
        await asyncio.wait_for(service, 60)
        added = _last_seq(rig.journal) - before
        print(f"machine: {machine()}")
        print(
            f"played: {args.rolls} rolls, {len(published)} messages published (seqs up to "
            f"{max(published)}), in {played:.0f} s"
        )
        print(f"backfill: all {len(want)} stored {took:.1f} s after the service started")
        print(f"resend answers to the backfill, by status: {dict(answers)}")
        print(f"journal records the table added meanwhile: {added}")
    finally:
        rig.stop()
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rolls", type=int, default=4320, help="rolls played (4,320: a busy day)")
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
