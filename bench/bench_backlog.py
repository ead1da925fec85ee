"""Rolls behind a pending CHECK (docs/developers/benchmarks.md "Roll backlog"): what 10^5
rolls waiting behind one pending roll cost the rules, in time and memory.

The table machine itself (``rules.table.apply``, what the daemon calls for every frame):
a ``CHECK`` that waits for the stickperson, then ``--rolls`` ``ROLL``s behind it
(dice-reader-icd.md: "a later ROLL waits behind it, in order"), then the decision that
counts them all. The
facts are made before the clock starts. Printed: the time of each ``--chunk`` of rolls
(rolls per second: flat when a roll costs the same however many wait, falling when each
copies the queue), the whole run, the decision; then the process's resident memory before
and after (``VmRSS``) and, in a second run under ``tracemalloc``, what the state holds once
they wait and the peak while they arrived.

Run: ``.venv/bin/python bench/bench_backlog.py [--rolls N] [--chunk N]``. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine
from rules import table
from rules.events import DeviceConnected, DiceRolled, RollCheck, RollDecided

T0 = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)


def rss_kb() -> int:
    """``VmRSS`` of this process, in kB (``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pending_table() -> table.TableState:
    """A craps table whose roll 1 is a CHECK waiting for the stickperson."""
    state = table.initial_state("CRAPS", at=T0)
    state, _ = table.apply(state, DeviceConnected(device="dice_reader"), at=T0)
    check = RollCheck(roll_id=1, dice=(3, 4), reason="ON_CHIPS")
    state, _ = table.apply(state, check, at=T0)
    return state


def rolls(count: int) -> list[DiceRolled]:
    """``count`` ROLL facts (roll ids 2, 3, ...), made before the clock starts."""
    return [DiceRolled(roll_id=2 + i, dice=(1 + i % 6, 1 + i // 6 % 6)) for i in range(count)]


def timed_run(count: int, chunk: int) -> None:
    facts = rolls(count)
    state = pending_table()
    gc.collect()
    before = rss_kb()
    chunks: list[float] = []
    start = time.perf_counter()
    for first in range(0, count, chunk):
        t = time.perf_counter()
        for fact in facts[first : first + chunk]:
            state, _ = table.apply(state, fact, at=T0)
        chunks.append(time.perf_counter() - t)
    total = time.perf_counter() - start
    after = rss_kb()
    decision = RollDecided(roll_id=1, valid=False, operator="bench", at=T0 + timedelta(hours=1))
    t = time.perf_counter()
    drained, outcomes = table.apply(state, decision, at=T0 + timedelta(hours=1))
    decided = time.perf_counter() - t
    print(f"{count:,} rolls behind a pending CHECK, table.apply, chunks of {chunk:,}:")
    for i, seconds in enumerate(chunks):
        print(f"  rolls {i * chunk + 1:>7,} to {min(count, (i + 1) * chunk):>7,}: "
              f"{seconds:7.3f} s  {chunk / seconds:>9,.0f} rolls/s")  # fmt: skip
    print(f"  all of them: {total:.2f} s ({count / total:,.0f} rolls/s)")
    print(f"  the decision that counts them all: {decided:.2f} s, {len(outcomes):,} outcomes")
    print(f"  VmRSS {before / 1024:.1f} MB before, {after / 1024:.1f} MB with them waiting "
          f"(+{(after - before) / 1024:.1f} MB)")  # fmt: skip
    codes = [a.code for a in table.alarms(state)]
    print(f"  alarms while they wait: {codes}; after the decision: "
          f"{[a.code for a in table.alarms(drained)]}")  # fmt: skip


def traced_run(count: int) -> None:
    facts = rolls(count)
    state = pending_table()
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    for fact in facts:
        state, _ = table.apply(state, fact, at=T0)
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"  tracemalloc: the state holds {(held - base) / 1e6:.1f} MB with them waiting "
          f"({(held - base) / count:.0f} bytes a roll; the facts, made before, not counted); "
          f"peak {(peak - base) / 1e6:.1f} MB")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rolls", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--no-trace", action="store_true", help="skip the tracemalloc run")
    args = parser.parse_args(argv)
    print(machine())
    timed_run(args.rolls, args.chunk)
    if not args.no_trace:
        traced_run(args.rolls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
