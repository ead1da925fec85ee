"""A subscriber's CPU per message: the web store, and the records service's feed plus the
message it stores (``records.messages.released``), each taking a stream of ``craps/roll``.

    .venv/bin/python bench/bench_consumers.py [--messages N] [--repeats R]

Process CPU time per message, the best of R runs (CPU time, so that a loaded machine
hurts it less than wall time). Figures only, never assertions (docs/developers/
architecture.md, "Consumers read the contract's types").
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from contract.feed import Feed, Message
from display.web.store import Store
from records.messages import released

TS = "2026-06-15T20:31:07.412Z"


def roll(seq: int) -> bytes:
    """A ``craps/roll`` of table ``t1`` at ``seq``, following ``seq - 1``."""
    body = {"roll_id": seq, "dice": [1, 1], "total": 2, "status": "counted", "reason": None}
    envelope = {"table": "t1", "seq": seq, "prev_seq": seq - 1 if seq > 1 else None, "ts": TS}
    return json.dumps({**body, **envelope}).encode()


def web_store(payloads: list[bytes]) -> None:
    store = Store("lammer", max_tables=10)
    for i, payload in enumerate(payloads):
        store.receive("lammer/t1/craps/roll", payload, now=i * 1e-3)


def records(payloads: list[bytes]) -> None:
    feed = Feed()
    for i, payload in enumerate(payloads):
        for event in feed.receive("lammer/t1", "craps/roll", payload, now=i * 1e-3):
            if isinstance(event, Message):
                released("t1", event)


def cpu_per_message(
    run: Callable[[list[bytes]], None], payloads: list[bytes], repeats: int
) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run(payloads)
        best = min(best, time.process_time() - start)
    return best / len(payloads) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    payloads = [roll(seq) for seq in range(1, args.messages + 1)]
    for name, run in (("web store", web_store), ("records (feed + stored message)", records)):
        micros = cpu_per_message(run, payloads, args.repeats)
        print(f"{name}: {micros:.1f} us CPU per message (best of {args.repeats}, {len(payloads)})")


if __name__ == "__main__":
    main()
