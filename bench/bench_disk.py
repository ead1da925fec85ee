"""How much disk a table's journal takes (docs/developers/benchmarks.md "Journal size",
docs/operators/journal-and-disk.md).

Real parts: a private Mosquitto, ``lammer-sim`` playing ``--rolls`` craps rolls (and
``--rounds`` rounds of each card game) without pauses on a pty, ``lammer run`` journaling
them. Once the simulator's frames are all acknowledged, the daemon stops (a snapshot, the
WAL checkpointed into the file), and the journal's files are measured: bytes per roll or
round, and what a gaming day takes at a busy pace (a roll every 20 s at craps, a round a
minute at a card game; ``--day-rolls``, ``--day-rounds``). Also the largest WAL seen while
it ran (sampled every 50 ms), against its bound (``daemon.journal.WAL_LIMIT_BYTES``).

Run: ``.venv/bin/python bench/bench_disk.py [--rolls 2000] [--rounds 300]``. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine
from daemon.journal import WAL_LIMIT_BYTES
from deploy.broker import Broker

BIN = Path(sys.executable).parent


def play(root: Path, broker: Broker, game: str, count: int) -> tuple[int, int, int]:
    """One table of ``game`` playing ``count`` rolls or rounds; (journal bytes, records,
    largest WAL seen)."""
    device = "dice_reader" if game == "CRAPS" else "shuffler"
    work = root / game.lower()
    work.mkdir()
    link = work / "device.link"
    journal = work / "journal" / "t.db"
    config = work / "t.toml"
    config.write_text(
        f'[table]\nid = "disk-{game.lower()}"\ngame = "{game}"\n\n[{device}]\nport = "{link}"\n\n'
        f'[mqtt]\nhost = "{broker.host}"\nport = {broker.port}\n\n'
        f'[journal]\npath = "{journal}"\n\n[logging]\nformat = "json"\nlevel = "warning"\n'
    )
    if game == "CRAPS":
        sim = [str(BIN / "lammer-sim"), "dice", "--rolls", str(count), "--interval", "0"]
    else:
        sim = [str(BIN / "lammer-sim"), "shuffler", "--game", game, "--rounds", str(count)]
        sim += ["--interval", "0"]
    sim += ["--seed", "3", "--link", str(link)]
    err = work / "sim.log"
    with err.open("wb") as sim_err, (work / "daemon.log").open("wb") as daemon_log:
        simulator = subprocess.Popen(sim, stdout=subprocess.DEVNULL, stderr=sim_err)
        deadline = time.monotonic() + 20
        while not link.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        daemon = subprocess.Popen(
            [str(BIN / "lammer"), "run", "--config", str(config)],
            stdout=daemon_log,
            stderr=subprocess.STDOUT,
        )
        wal = journal.with_name("t.db-wal")
        largest = 0
        while simulator.poll() is None:
            if wal.exists():
                largest = max(largest, wal.stat().st_size)
            time.sleep(0.05)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    size = sum(p.stat().st_size for p in journal.parent.glob("t.db*"))
    out = subprocess.run(
        [str(BIN / "lammer"), "journal", str(journal), "--snapshots"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    records = len(out.stdout.splitlines())
    json.loads(out.stdout.splitlines()[0])  # an export that reads
    return size, records, largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rolls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--games", default="CRAPS,UTH,BJ")
    parser.add_argument("--day-rolls", type=int, default=24 * 180, help="a busy craps day")
    parser.add_argument("--day-rounds", type=int, default=24 * 60, help="a busy card day")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-disk-") as tmp:
        root = Path(tmp)
        (root / "broker").mkdir()
        broker = Broker(root / "broker")
        broker.start()
        try:
            for game in args.games.split(","):
                count = args.rolls if game == "CRAPS" else args.rounds
                unit, per_day = ("roll", args.day_rolls) if game == "CRAPS" else (
                    "round", args.day_rounds)  # fmt: skip
                size, records, largest = play(root, broker, game, count)
                each = size / count
                print(
                    f"{game:5s}: {count} {unit}s, {records} records, journal {size / 1e6:.2f} MB: "
                    f"{each:,.0f} bytes a {unit}; a day of {per_day} {unit}s: "
                    f"{each * per_day / 1e6:.1f} MB; largest WAL {largest / 1024:.0f} KiB "
                    f"(bound {WAL_LIMIT_BYTES // 1024} KiB after a checkpoint)"
                )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
