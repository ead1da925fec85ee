"""``lammer journal verify`` on the journal of the real daemon (``lammer run``), with an HMAC
key: intact while it runs and after a clean stop and a restart (real clock, snapshots from
the start, the stop and every few records), and refused without the key."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import MakeTable
from tests.integration.harness import LAMMER, Table

pytestmark = pytest.mark.integration

SCRIPT = "".join(f"ROLL,{200 + n},{n % 6 + 1},{(n * 5 + 2) % 6 + 1}\n" for n in range(12))


async def verify(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``lammer journal verify ARGS`` in a subprocess, off the event loop."""
    argv = [LAMMER, "journal", "verify", *map(str, args)]
    return await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=120, check=False
    )


def _with_key(table: Table) -> None:
    """The table's [journal] with an HMAC key file and a snapshot every 5 records."""
    key = table.workdir / "journal.key"
    key.write_bytes(b"a key of the table, thirty-two b\n")
    key.chmod(0o600)
    text = table.config_path.read_text()
    journal = f'[journal]\npath = "{table.journal_path}"\n'
    assert journal in text
    table.config_path.write_text(
        text.replace(journal, journal + f'hmac_key_file = "{key}"\nsnapshot_every = 5\n')
    )


def _online(table: Table) -> bool:
    availability = table.recorder.on("availability")
    return bool(availability) and availability[-1].body == "online"


def _figure(result: subprocess.CompletedProcess[str], name: str) -> int:
    line = next(x for x in result.stdout.splitlines() if x.strip().startswith(f"{name}:"))
    return int(line.split(":")[1].split()[0])


async def test_the_daemons_journal_verifies_with_its_key(make_table: MakeTable) -> None:
    table = make_table("CRAPS")
    _with_key(table)
    # First a start with the dice reader unplugged, stopped at once: the stop's snapshot
    # holds the start's DISCONNECTED alarm, which a replay must give with the same time.
    await table.recorder.start()
    table.start_daemon()
    await table.wait_for(lambda: _online(table), what="online without a device")
    assert await table.stop_daemon(signal.SIGTERM) == 0
    first = await verify("--config", table.config_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert _figure(first, "snapshots") == 1

    await table.start_sim(SCRIPT, wait=False)
    table.start_daemon()
    await table.wait_sim_done()
    await table.wait_for(lambda: len(table.recorder.bodies("craps/roll")) == 12, what="rolls")
    answer = await table.request("void_roll", {"operator": "Ann", "roll_id": 211, "clause": 3})
    assert answer["status"] == "ok"
    await table.wait_published()

    folder = table.journal_path.parent
    before = sorted(p.name for p in folder.iterdir())
    running = await verify("--config", table.config_path)  # the daemon runs, WAL open
    assert running.returncode == 0, running.stdout + running.stderr
    assert running.stdout.startswith("lammer journal verify: intact\n")
    assert "chain:     hmac-sha256, from genesis" in running.stdout
    assert sorted(p.name for p in folder.iterdir()) == before  # the reader made nothing

    assert await table.stop_daemon(signal.SIGTERM) == 0  # a clean stop: a snapshot
    table.start_daemon()
    await table.wait_for(lambda: _online(table), what="online again")
    assert await table.stop_daemon(signal.SIGTERM) == 0

    stopped = await verify("--config", table.config_path)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert _figure(stopped, "snapshots") >= 4  # every 5 records, and at each stop
    assert _figure(stopped, "records") > _figure(running, "records")

    # Without the key the chain cannot be checked: the first record says a key may be
    # needed; with the key given by hand it is intact again.
    keyless = await verify(table.journal_path)
    assert keyless.returncode == 1
    assert keyless.stdout.startswith(f"lammer journal verify: segment {table.journal_path}, seq 1:")
    assert "a key may be needed" in keyless.stdout
    by_hand = await verify(table.journal_path, "--key-file", table.workdir / "journal.key")
    assert by_hand.returncode == 0, by_hand.stdout
