"""A request flood against a playing table (docs/developers/benchmarks.md "Request
flood").

Everything real: ``lammer broker-config`` writes the broker's files for one craps table,
Mosquitto runs them as they are, ``lammer-sim dice`` throws a roll every ``--interval``
seconds on a pty, ``lammer run`` plays the table logged in as its own user, and a display
(user ``display``) subscribes to the table's topics. The run has two halves of
``--phase`` seconds each: quiet, then, from the ``terminal`` user, ``--requests`` requests
at QoS 1 spread over ``--flood`` seconds (a ``roll_decision`` of ``--size`` bytes each),
then the rest of the phase.

Printed, side by side: the delay of each ``craps/roll`` to the display (arrival time minus
the payload's ``ts``, the daemon's time of the roll; one clock, so exact to the
millisecond of ``ts``), median and p99, quiet and flooded; the daemon's broker link drops
(``mqtt connection lost`` in its log) and ``availability`` ``offline`` the display saw;
requests the display received (it should read none); the journal's growth during the
flood (the bytes of the records and messages added: what a day of floods would cost) and
what the daemon refused.

Run: ``.venv/bin/python bench/bench_flood.py [--requests 5000] [--flood 2] [--phase 12]``;
``--lammer /path/to/other/venv/bin/lammer`` runs another install (a "before" figure).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, percentile
from deploy.broker import Broker, free_port

BIN = Path(sys.executable).parent
TABLE = "c1"
BASE = f"lammer/{TABLE}"


@dataclass
class Display:
    """What the display received: roll delays by phase, offline notices, requests."""

    delays: dict[str, list[float]] = field(default_factory=lambda: {"quiet": [], "flood": []})
    phase: str = "quiet"
    offline: int = 0
    requests: int = 0
    responses: int = 0
    busy: int = 0


def ts_seconds(text: str) -> float:
    """The payload's ``ts`` (``2026-12-01T16:00:00.123Z``) as a POSIX time."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def table_messages(
    port: int, user: str, password: str, identifier: str, ready: asyncio.Event
) -> AsyncIterator[tuple[str, bytes, bool]]:
    """Every message of the table as ``user`` reads it: its topic below ``BASE``, its
    payload and whether it came retained; ``ready`` set once subscribed."""
    async with aiomqtt.Client(
        "127.0.0.1", port, username=user, password=password, identifier=identifier
    ) as client:
        await client.subscribe(f"{BASE}/#", qos=1)
        ready.set()
        async for message in client.messages:
            payload = message.payload
            data = payload if isinstance(payload, bytes) else str(payload).encode()
            yield message.topic.value[len(BASE) + 1 :], data, message.retain


async def display(port: int, password: str, seen: Display, ready: asyncio.Event) -> None:
    """A display: every message of the table, as the ``display`` user."""
    async for topic, data, _ in table_messages(port, "display", password, "bench-display", ready):
        if topic == "availability":
            seen.offline += data == b"offline"
        elif topic.startswith("request/"):
            seen.requests += 1
        elif topic == "craps/roll":
            body = json.loads(data)
            seen.delays[seen.phase].append(time.time() - ts_seconds(body["ts"]))


async def flood(port: int, password: str, count: int, seconds: float, size: int) -> float:
    """``count`` requests from ``terminal`` at QoS 1, paced over ``seconds``; returns the
    time they took to publish (each PUBACK awaited in windows of 100)."""
    padding = max(0, size - 90)
    async with aiomqtt.Client(
        "127.0.0.1", port, username="terminal", password=password, identifier="bench-terminal"
    ) as client:
        client.pending_calls_threshold = 200  # a window of 100 in flight is the plan
        started = time.monotonic()
        window: list[asyncio.Task[None]] = []
        for i in range(count):
            body = {
                "operator": "flood" + "x" * padding,
                "roll_id": 999_999,
                "decision": "valid",
                "request_id": i,
            }
            topic = f"{BASE}/request/roll_decision"
            window.append(asyncio.create_task(client.publish(topic, json.dumps(body), qos=1)))
            if len(window) >= 100:
                await asyncio.gather(*window)
                window.clear()
                due = started + seconds * (i + 1) / count
                await asyncio.sleep(max(0.0, due - time.monotonic()))
        await asyncio.gather(*window)
        return time.monotonic() - started


def journal_bytes(path: Path, after_seq: int) -> tuple[int, int, int, dict[str, int]]:
    """(last seq, bytes of what was added after ``after_seq``, of which for requests: their
    ``decision`` records and ``response/`` messages, record counts by kind)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        last = conn.execute("SELECT max(seq) FROM records").fetchone()[0] or 0
        records = conn.execute(
            "SELECT coalesce(sum(length(body) + length(ts) + length(kind) + 40), 0) "
            "FROM records WHERE seq > ?",
            (after_seq,),
        ).fetchone()[0]
        messages = conn.execute(
            "SELECT coalesce(sum(length(payload) + length(topic) + 16), 0) FROM outbox "
            "WHERE seq > ?",
            (after_seq,),
        ).fetchone()[0]
        asked = (
            conn.execute(
                "SELECT coalesce(sum(length(body) + length(ts) + length(kind) + 40), 0) "
                "FROM records WHERE seq > ? AND kind = 'decision'",
                (after_seq,),
            ).fetchone()[0]
            + conn.execute(
                "SELECT coalesce(sum(length(o.payload) + length(o.topic) + 16 + length(r.body) + "
                "length(r.ts) + 47), 0) FROM outbox o JOIN records r ON r.seq = o.seq "
                "WHERE o.seq > ? AND o.topic LIKE 'response/%'",
                (after_seq,),
            ).fetchone()[0]
        )
        kinds = dict(
            conn.execute(
                "SELECT kind, count(*) FROM records WHERE seq > ? GROUP BY kind", (after_seq,)
            ).fetchall()
        )
    finally:
        conn.close()
    grown = int(records) + int(messages)
    return int(last), grown, int(asked), {str(k): int(v) for k, v in kinds.items()}


def summary(samples: list[float]) -> str:
    if not samples:
        return "no rolls"
    ms = [s * 1000 for s in samples]
    return (
        f"{len(ms):4d} rolls  median {percentile(ms, 0.5):7.1f} ms  p99 {percentile(ms, 0.99):8.1f}"
        f" ms  max {max(ms):8.1f} ms"
    )


@dataclass
class Rig:
    """The broker, simulator and daemon of one run, started (``start``) and stopped."""

    root: Path
    lammer: str
    port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    broker: Broker | None = None

    @property
    def journal(self) -> Path:
        return self.root / "journal" / f"{TABLE}.db"

    @property
    def daemon_log(self) -> Path:
        return self.root / "daemon.log"

    def password(self, user: str) -> str:
        return (self.root / "broker" / "credentials" / user).read_text().split("\n")[0]

    def start(self, rolls: int, interval: float) -> None:
        root, lammer = self.root, self.lammer
        link = root / "dice.link"
        config = root / f"{TABLE}.toml"
        text = (
            f'[table]\nid = "{TABLE}"\ngame = "CRAPS"\n\n[dice_reader]\nport = "{link}"\n\n'
            f'[journal]\npath = "{self.journal}"\n\n'
            '[logging]\nformat = "json"\nlevel = "info"\n\n'
            f'[mqtt]\nhost = "127.0.0.1"\nport = {self.port}\nprefix = "lammer"\n'
        )
        config.write_text(text)
        out = root / "broker"
        (root / "data").mkdir()
        me = pwd.getpwuid(os.geteuid()).pw_name
        subprocess.run(
            [lammer, "broker-config", "--out", str(out), "--data-dir", str(root / "data"),
             "--broker-user", me, str(config)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        secret = root / f"{TABLE}.mqtt-password"
        shutil.copy(out / "credentials" / f"lammer-{TABLE}", secret)
        os.chmod(secret, 0o600)
        config.write_text(text + f'username = "lammer-{TABLE}"\npassword_file = "{secret}"\n')
        (root / "run").mkdir()
        self.broker = Broker(root / "run", port=self.port, config_file=out / "mosquitto.conf")
        self.broker.start()
        sim = [str(Path(lammer).parent / "lammer-sim"), "dice", "--rolls", str(rolls),
               "--interval", str(interval), "--noroll-rate", "0", "--check-rate", "0",
               "--seed", "1", "--link", str(link), "--linger"]  # fmt: skip
        with (root / "sim.log").open("wb") as err:
            self.procs.append(subprocess.Popen(sim, stdout=subprocess.DEVNULL, stderr=err))
        deadline = time.monotonic() + 20
        while not link.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        with self.daemon_log.open("wb") as log:
            self.procs.append(
                subprocess.Popen(
                    [lammer, "run", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
                )
            )

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the daemon first
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        if self.broker is not None:
            self.broker.stop()


@dataclass
class Figures:
    """What one run measured besides the display's view."""

    took: float = 0.0
    grown: int = 0
    asked: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    files: int = 0


async def measure(rig: Rig, args: argparse.Namespace, seen: Display) -> Figures:
    """The quiet phase, then the flood and the rest of its phase, watched by a display."""
    figures = Figures()
    ready = asyncio.Event()
    watcher = asyncio.create_task(display(rig.port, rig.password("display"), seen, ready))
    try:
        await asyncio.wait_for(ready.wait(), 20)
        await asyncio.sleep(args.phase)
        before_seq, _, _, _ = journal_bytes(rig.journal, 0)
        files_before = sum(p.stat().st_size for p in rig.journal.parent.glob(f"{TABLE}.db*"))
        seen.phase = "flood"
        figures.took = await flood(
            rig.port, rig.password("terminal"), args.requests, args.flood, args.size
        )
        await asyncio.sleep(max(0.0, args.phase - figures.took))
        _, figures.grown, figures.asked, figures.kinds = journal_bytes(rig.journal, before_seq)
        files_after = sum(p.stat().st_size for p in rig.journal.parent.glob(f"{TABLE}.db*"))
        figures.files = files_after - files_before
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    return figures


def report(args: argparse.Namespace, rig: Rig, seen: Display, figures: Figures) -> None:
    events = [
        json.loads(line) for line in rig.daemon_log.read_text().splitlines() if line[:1] == "{"
    ]
    lost = sum(1 for e in events if str(e.get("event", "")).startswith("mqtt connection lost"))
    refused = [e for e in events if "more arrive than the table serves" in str(e.get("event"))]
    print(f"machine: {machine()}")
    print(f"lammer: {rig.lammer}")
    print(
        f"flood: {args.requests} requests of {args.size} bytes from 'terminal' at QoS 1, "
        f"published in {figures.took:.2f} s; a roll every {args.interval} s; "
        f"phases of {args.phase} s"
    )
    print(f"results to the display, quiet:   {summary(seen.delays['quiet'])}")
    print(f"results to the display, flooded: {summary(seen.delays['flood'])}")
    quiet, flooded = seen.delays["quiet"], seen.delays["flood"]
    if quiet and flooded:
        gap = (percentile(flooded, 0.99) - percentile(quiet, 0.99)) * 1000
        print(f"p99 flooded minus p99 quiet: {gap:.1f} ms")
    print(f"daemon's broker link drops: {lost}; 'offline' seen by the display: {seen.offline}")
    print(f"requests the display received: {seen.requests}")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(figures.kinds.items()))
    print(
        f"journal growth during the flood phase: {figures.grown / 1024:.1f} KB of records and "
        f"messages ({kinds}), of which the requests {figures.asked / 1024:.1f} KB (decision "
        f"records and response messages); files {figures.files / 1024:+.1f} KB"
    )
    for e in refused:
        print(f"daemon log: {e['event']}: refused {e.get('refused', e.get('count'))}")
    assert rig.broker is not None
    lines = rig.broker.log.read_text(errors="replace").splitlines()
    dropped = [line for line in lines if "dropped" in line]
    print(f"broker log: {len(dropped)} lines about dropped messages {dropped[:2]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--flood", type=float, default=2.0, help="seconds to spread them over")
    parser.add_argument("--size", type=int, default=200, help="bytes of each request")
    parser.add_argument("--phase", type=float, default=12.0, help="seconds of each half")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between rolls")
    parser.add_argument("--lammer", default=str(BIN / "lammer"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp:
        rig = Rig(Path(tmp), args.lammer)
        seen = Display()
        try:
            rig.start(int(2 * args.phase / args.interval) + 50, args.interval)
            figures = asyncio.run(measure(rig, args, seen))
        finally:
            rig.stop()
        report(args, rig, seen, figures)


if __name__ == "__main__":
    main()
