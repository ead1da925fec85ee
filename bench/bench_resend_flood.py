"""A resend flood from the ``display`` credential against a playing table
(docs/developers/benchmarks.md, "Resend flood").

Everything real, as bench_flood.py: ``lammer broker-config`` writes the broker's files for
one craps table, Mosquitto runs them as they are, ``lammer-sim dice`` throws a roll every
``--interval`` seconds, ``lammer run`` plays logged in as its own user. A pit terminal
(user ``terminal``, which reads every topic of the table but its requests) watches: the
delay of each ``craps/roll`` (arrival minus the payload's ``ts``, one clock) and every copy
(a message with a ``seq`` the table had published before the flood: the flood asks only
for those). The table first plays ``--history`` seconds so the journal holds something
to ask for, then, one after the other, ``--phase`` seconds each:

* **quiet**: nothing but play (the peer of every figure below);
* **paced**: ``request/resend/display`` at 50 a second (a busy floor's screens), QoS 1;
* **5,000/s**: 5,000 a second, QoS 1 in windows of 500;
* **full speed**: QoS 0, as fast as one aiomqtt client writes them;
* **saturation**: QoS 0 from a raw socket in a process of its own, the PUBLISH packets
  written in advance and sent in blocks of 1,000 (the most one connection can make the
  broker read: a client with the display password has one connection, since the broker
  takes each user's client id once, ``use_username_as_clientid``).

Each request asks for 1,000 seqs of what the table published, alternating two parts, so
that no copy is shared within its 5 s. Printed per phase: requests published and their
rate, the rolls' delays (median, p99, max) and p99 minus quiet p99 (goal: within 250 ms),
copies received; over the three flooded phases the most copies in any 60 s (goal: at most
2,000, the ``display`` budget); the journal's growth (records by kind); the daemon's
link drops; the broker's CPU time per phase (/proc: how near its own saturation it was).

Run: ``.venv/bin/python bench/bench_resend_flood.py [--phase 20] [--history 20]``. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_flood import BASE, BIN, Rig, journal_bytes, table_messages, ts_seconds
from bench.common import machine, percentile
from contract.requests import COPY_BUDGET

PHASES = ("quiet", "paced", "5,000/s", "full speed", "saturation")


@dataclass
class Seen:
    """What the terminal saw, by phase: roll delays, copies' arrival times."""

    last: int = 0
    phase: str = "history"
    delays: dict[str, list[float]] = field(default_factory=dict)
    copies: dict[str, list[float]] = field(default_factory=dict)
    offline: int = 0


async def watch(port: int, password: str, seen: Seen, ready: asyncio.Event) -> None:
    """The pit terminal: roll delays and copies, as ``terminal``."""
    async for topic, data, retained in table_messages(
        port, "terminal", password, "terminal", ready
    ):
        if topic == "availability":
            seen.offline += data == b"offline"
            continue
        if retained or not data.startswith(b"{"):
            continue
        body = json.loads(data)
        seq = body.get("seq")
        if isinstance(seq, int) and seq <= seen.last:
            seen.copies.setdefault(seen.phase, []).append(time.monotonic())
        elif topic == "craps/roll":
            delay = time.time() - ts_seconds(body["ts"])
            seen.delays.setdefault(seen.phase, []).append(delay)


def request(i: int, last: int) -> bytes:
    """Resend request ``i``: 1,000 seqs of what the table published, two parts in turn."""
    first = 1 if i % 2 == 0 or last <= 1000 else last - 999
    body = {
        "operator": "flood",
        "request_id": i,
        "from_seq": first,
        "to_seq": min(last, first + 999),
    }
    return json.dumps(body).encode()


async def flood(client: aiomqtt.Client, phase: str, seconds: float, last: int) -> int:
    """Publish ``phase``'s requests for ``seconds``; how many were published."""
    topic = f"{BASE}/request/resend/display"
    start, sent = time.monotonic(), 0
    if phase == "paced":
        while time.monotonic() < start + seconds:
            await client.publish(topic, request(sent, last), qos=1)
            sent += 1
            await asyncio.sleep(max(0.0, start + sent / 50 - time.monotonic()))
    elif phase == "5,000/s":
        while time.monotonic() < start + seconds:
            window = [client.publish(topic, request(sent + k, last), qos=1) for k in range(500)]
            await asyncio.gather(*window)
            sent += 500
            await asyncio.sleep(max(0.0, start + sent / 5000 - time.monotonic()))
    elif phase == "full speed":
        while time.monotonic() < start + seconds:
            for _ in range(1000):
                await client.publish(topic, request(sent, last), qos=0)
                sent += 1
    else:
        await asyncio.sleep(seconds)
    return sent


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def raw_flood(port: int, password: str, last: int, seconds: float, sent: Any) -> None:
    """The saturation phase's publisher (in a process of its own): MQTT 3.1.1 CONNECT as
    ``display``, then QoS 0 PUBLISH packets built in advance, in blocks of 1,000, for
    ``seconds``; ``sent.value`` is how many were written."""
    topic = f"{BASE}/request/resend/display"
    variable = _string("MQTT") + bytes([4, 0xC2]) + (60).to_bytes(2, "big")
    payload = _string("display") + _string("display") + _string(password)
    connect = b"\x10" + _varint(len(variable) + len(payload)) + variable + payload
    packets = []
    for i in range(1000):
        body = _string(topic) + request(i, last)
        packets.append(b"\x30" + _varint(len(body)) + body)
    block = b"".join(packets)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(connect)
        assert sock.recv(4)[:2] == b"\x20\x02"  # CONNACK
        sock.setblocking(True)
        count, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            sock.sendall(block)
            count += 1000
        sent.value = count
        sock.sendall(b"\xe0\x00")  # DISCONNECT


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Phase:
    """One phase's own figures."""

    name: str
    sent: int = 0
    took: float = 0.0
    broker_cpu: float = 0.0
    daemon_cpu: float = 0.0
    client_cpu: float = 0.0


async def measure(rig: Rig, args: argparse.Namespace, seen: Seen) -> tuple[list[Phase], int]:
    """History, then the four phases; the journal's last seq before the flood."""
    ready = asyncio.Event()
    watcher = asyncio.create_task(watch(rig.port, rig.password("terminal"), seen, ready))
    phases: list[Phase] = []
    try:
        await asyncio.wait_for(ready.wait(), 20)
        await asyncio.sleep(args.history)
        seen.last, _, _, _ = journal_bytes(rig.journal, 0)
        assert rig.broker is not None
        assert rig.broker.process is not None
        pid = rig.broker.process.pid
        daemon = rig.procs[-1].pid
        async with aiomqtt.Client(
            "127.0.0.1",
            rig.port,
            username="display",
            password=rig.password("display"),
            identifier="display",
            max_queued_outgoing_messages=0,
        ) as client:
            client.pending_calls_threshold = 10_000
            for name in PHASES[:-1]:
                seen.phase = name
                cpu = (cpu_seconds(pid), cpu_seconds(daemon), time.process_time())
                start = time.monotonic()
                sent = await flood(client, name, args.phase, seen.last)
                phase = Phase(
                    name,
                    sent,
                    time.monotonic() - start,
                    cpu_seconds(pid) - cpu[0],
                    cpu_seconds(daemon) - cpu[1],
                    time.process_time() - cpu[2],
                )
                phases.append(phase)
        # Saturation: the raw client takes display's client id (the one above is gone).
        seen.phase = "saturation"
        cpu = (cpu_seconds(pid), cpu_seconds(daemon), time.process_time())
        written = multiprocessing.Value("q", 0)
        proc = multiprocessing.Process(
            target=raw_flood,
            args=(rig.port, rig.password("display"), seen.last, args.phase, written),
        )
        start = time.monotonic()
        proc.start()
        await asyncio.get_running_loop().run_in_executor(None, proc.join)
        took = time.monotonic() - start
        phases.append(
            Phase(
                "saturation",
                int(written.value),
                took,
                cpu_seconds(pid) - cpu[0],
                cpu_seconds(daemon) - cpu[1],
                time.process_time() - cpu[2],
            )
        )
        seen.phase = "after"
        await asyncio.sleep(3)  # the copies still in the link arrive
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    return phases, seen.last


def most_in_a_minute(times: list[float]) -> int:
    """The most copies that arrived within any 60 s."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] < t - 60.0:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def report(args: argparse.Namespace, rig: Rig, seen: Seen, phases: list[Phase]) -> None:
    print(f"machine: {machine()}")
    print(f"lammer: {rig.lammer}; a roll every {args.interval} s; phases of {args.phase} s")
    print(f"the journal before the flood: {seen.last} seqs; each request asks for 1,000 of them")
    quiet = [d * 1000 for d in seen.delays.get("quiet", [])]
    q99 = percentile(quiet, 0.99) if quiet else float("nan")
    print(
        f"{'phase':<11} {'requests':>9} {'rate/s':>8} {'rolls':>5} {'median ms':>9} "
        f"{'p99 ms':>8} {'max ms':>8} {'p99-quiet':>9} {'copies':>6} "
        f"{'cpu: broker':>11} {'daemon':>6} {'client':>6}"
    )
    for phase in phases:
        delays = [d * 1000 for d in seen.delays.get(phase.name, [])]
        med = percentile(delays, 0.5) if delays else float("nan")
        p99 = percentile(delays, 0.99) if delays else float("nan")
        top = max(delays, default=float("nan"))
        copies = len(seen.copies.get(phase.name, []))
        rate = phase.sent / phase.took if phase.took else 0.0
        print(
            f"{phase.name:<11} {phase.sent:>9,} {rate:>8,.0f} {len(delays):>5} {med:>9.1f} "
            f"{p99:>8.1f} {top:>8.1f} {p99 - q99:>9.1f} {copies:>6,} "
            f"{phase.broker_cpu / phase.took:>11.0%} {phase.daemon_cpu / phase.took:>6.0%} "
            f"{phase.client_cpu / phase.took:>6.0%}"
        )
    flooded = [t for name, ts in seen.copies.items() if name != "quiet" for t in ts]
    print(
        f"copies in all: {len(flooded):,}; the most in any 60 s: {most_in_a_minute(flooded):,} "
        f"(the display budget: {COPY_BUDGET:,})"
    )
    _, grown, _, kinds = journal_bytes(rig.journal, seen.last)
    shown = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    print(f"journal growth during the flood: {grown / 1024:.1f} KB ({shown})")
    events = [
        json.loads(line) for line in rig.daemon_log.read_text().splitlines() if line[:1] == "{"
    ]
    lost = sum(1 for e in events if str(e.get("event", "")).startswith("mqtt connection lost"))
    served = sum(1 for e in events if e.get("event") == "resend served")
    print(f"daemon: resends served {served}; link drops {lost}; 'offline' seen {seen.offline}")
    for e in events:
        if "refused" in str(e.get("event")):
            print(f"daemon log: {e['event']}: {e.get('count', e.get('refused'))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase", type=float, default=20.0, help="seconds of each phase")
    parser.add_argument("--history", type=float, default=20.0, help="seconds of play first")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between rolls")
    parser.add_argument("--lammer", default=str(BIN / "lammer"))
    parser.add_argument("--keep", type=Path, help="copy the daemon's and broker's logs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-resend-flood-") as tmp:
        rig = Rig(Path(tmp), args.lammer)
        seen = Seen()
        total = args.history + len(PHASES) * args.phase + 30
        try:
            rig.start(int(total / args.interval) + 50, args.interval)
            phases, _ = asyncio.run(measure(rig, args, seen))
        finally:
            rig.stop()
        report(args, rig, seen, phases)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(rig.daemon_log, args.keep / "daemon.log")
            assert rig.broker is not None
            shutil.copy(rig.broker.log, args.keep / "broker.log")


if __name__ == "__main__":
    main()
