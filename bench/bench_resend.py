"""``request/resend`` (mqtt-api.md 1.3): how long a table takes to serve 1,000 messages
again, and what a resend costs the table's own results.

Real parts: a private Mosquitto, a real journal (SQLite, one segment) holding messages
among records (two records a message, as a table's journal looks), the daemon's
``MqttLink`` draining that journal, and an MQTT 5 subscriber. Printed, median of runs:

* the lookup: ``published_between`` over a 1,000-seq range and over a range holding 1,000
  messages (what a resend reads from the journal);
* the serve: from ``MqttLink.resend(1,000 copies)`` to the last copy at the subscriber;
* a result published while a 1,000-copy resend goes out: from its append to the journal to
  its arrival, beside the same result published quiet.

Usage: ``.venv/bin/python bench/bench_resend.py [--runs 5]``. Prints figures, asserts none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import aiomqtt
from paho.mqtt.subscribeoptions import SubscribeOptions

from bench.common import machine
from daemon.journal import Journal
from daemon.mqtt import MqttLink
from daemon.requests import Incoming
from daemon.segments import published_between
from deploy.broker import Broker

BASE = "lammer/bench"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def fill(journal: Journal, messages: int) -> None:
    """``messages`` messages, two records before each (as a table's journal has)."""
    with journal.batch():
        for i in range(messages):
            journal.append("device", {"i": i}, ts=T0)
            journal.append("decision", {"i": i}, ts=T0)
            journal.append_publish(
                "craps/roll",
                {"table": "bench", "roll_id": i, "dice": [3, 4]},
                retained=False,
                ts=T0,
            )


class Subscriber:
    """Arrival times by seq (copies and results apart)."""

    def __init__(self) -> None:
        self.copies: dict[int, float] = {}
        self.live: dict[int, float] = {}
        self.ready = asyncio.Event()


@contextlib.asynccontextmanager
async def subscribed(broker: Broker) -> AsyncIterator[Subscriber]:
    sub = Subscriber()

    async def run() -> None:
        async with aiomqtt.Client(
            broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5
        ) as client:
            await client.subscribe(f"{BASE}/#", options=SubscribeOptions(qos=1))
            sub.ready.set()
            async for message in client.messages:
                payload = message.payload
                if not isinstance(payload, bytes) or not payload.startswith(b"{"):
                    continue
                seq = int(payload.split(b'"seq":', 1)[1].split(b",", 1)[0])
                props = message.properties
                marked = bool(getattr(props, "UserProperty", None)) if props else False
                (sub.copies if marked else sub.live)[seq] = time.perf_counter()

    task = asyncio.create_task(run())
    await sub.ready.wait()
    try:
        yield sub
    finally:
        task.cancel()
        await asyncio.wait({task})


async def _ignore(incoming: Incoming) -> None:
    return None


async def wait_until(check: Callable[[], bool], limit: float = 30.0) -> None:
    deadline = time.perf_counter() + limit
    while not check():
        if time.perf_counter() > deadline:
            raise SystemExit("bench: gave up waiting (broker or link stuck)")
        await asyncio.sleep(0.0005)


async def measure(workdir: Path, runs: int) -> None:
    broker = Broker(workdir / "broker")
    (workdir / "broker").mkdir()
    broker.start()
    journal = Journal.open(workdir / "t.db")
    try:
        fill(journal, 3000)
        link = MqttLink(
            host=broker.host,
            port=broker.port,
            client_id="lammer-bench",
            base_topic=BASE,
            outbox=journal,
            on_request=_ignore,
        )
        lookups_seq, lookups_msg, serves, busy, quiet = [], [], [], [], []
        async with subscribed(broker) as sub:
            task = asyncio.create_task(link.run())
            await wait_until(lambda: not journal.pending(1))
            for _ in range(runs):
                start = time.perf_counter()
                found = published_between(journal, 1000, 1999, key=None)
                lookups_seq.append(time.perf_counter() - start)
                start = time.perf_counter()
                found = published_between(journal, 3000, 5999, key=None)
                lookups_msg.append(time.perf_counter() - start)
                copies = found.messages
                assert len(copies) == 1000
                sub.copies.clear()
                # Quiet: one result, nothing else going out.
                start = time.perf_counter()
                result = journal.append_publish("craps/result", {"table": "bench"},
                                                retained=False, ts=T0)  # fmt: skip
                link.notify()
                await wait_until(functools.partial(sub.live.__contains__, result.seq))
                quiet.append(sub.live[result.seq] - start)
                # Busy: the same, just after 1,000 copies were handed to the link.
                start = time.perf_counter()
                link.resend(copies)
                result = journal.append_publish("craps/result", {"table": "bench"},
                                                retained=False, ts=T0)  # fmt: skip
                link.notify()
                await wait_until(functools.partial(sub.live.__contains__, result.seq))
                busy.append(sub.live[result.seq] - start)
                await wait_until(lambda: len(sub.copies) == 1000)
                serves.append(max(sub.copies.values()) - start)
            await link.close()
            await asyncio.wait({task})
    finally:
        journal.close()
        broker.stop()
    print(f"machine: {machine()}")
    print(f"runs: {runs}; journal: 3,000 messages among 6,000 records (one segment)")
    rows = [
        ("lookup, 1,000-seq range (~333 messages)", lookups_seq),
        ("lookup, a range holding 1,000 messages", lookups_msg),
        ("serve 1,000 copies (to the last one)", serves),
        ("a result, quiet", quiet),
        ("a result behind a 1,000-copy resend", busy),
    ]
    for name, samples in rows:
        median, worst = statistics.median(samples) * 1000, max(samples) * 1000
        print(f"{name:42} median {median:8.2f} ms, max {worst:8.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="how many times to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-resend-") as folder:
        asyncio.run(measure(Path(folder), args.runs))


if __name__ == "__main__":
    main()
