"""The first Cover All round after a start (docs/developers/benchmarks.md "First round after
a start"): how long the daemon takes to ACK each frame of the first Ultimate Texas Hold'em
round, and of the second, beside link-layer.md's 250 ms.

Everything real: a private Mosquitto, the daemon as a subprocess (``lammer run`` for an
UTH table on a pty, a fresh journal each start), and this benchmark as the shuffler on the
pty's master side (``bench_daemon.DiceReader``'s stop-and-wait, answering ``QUERY`` with
``HELLO`` and ``MODE,UTH``). Each run starts the daemon afresh, waits for its ``QUERY``,
answers it, waits ``--pause`` seconds (1: a first round comes a while after a start, and
the daemon's MQTT link has connected by then), then deals two rounds of seven hands (six
players, the dealer, the community cards: ``HAND`` per position, ``ROUND``, ``SETTLE``)
and times each frame from its last byte written to its ``ACK`` read back. ``SETTLE`` is
where the round's hands are valued (the seven-card table is used for the first time there
unless it was built at start).

Run: ``.venv/bin/python bench/bench_first_round.py [--runs N]``. To measure another
checkout's daemon, put it first on ``PYTHONPATH`` (the daemon subprocess inherits it).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import tty
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_daemon import DiceReader, start_broker, start_daemon, stop
from bench.common import machine
from drivers.messages import DeviceMessage, Message
from rules.cards import DECK
from rules.events import HandDealt, ModeReported, Position, RoundDealt, RoundSettled

PLAYERS: Final[tuple[Position, ...]] = ("P1", "P2", "P3", "P4", "P5", "P6")
LIMIT_MS: Final = 250.0  # link-layer.md: the host ACKs a good frame within 250 ms


class Shuffler(DiceReader):
    """The same device half of link-layer.md, answering ``QUERY`` as a shuffler does
    (shuffler-icd.md: ``HELLO``, then its ``MODE``)."""

    def __init__(self, master: int) -> None:
        super().__init__(master)
        self.configured = asyncio.Event()
        """Set once ``HELLO`` and ``MODE`` are acknowledged."""

    async def hello(self) -> tuple[float, float]:
        """``HELLO`` (sequence 1), then ``MODE,UTH``."""
        answered = await super().hello()
        await self.send(lambda seq: DeviceMessage(seq=seq, fact=ModeReported(game="UTH")))
        self.configured.set()
        return answered


@contextlib.contextmanager
def pty_shuffler() -> Iterator[tuple[Shuffler, str]]:
    """A pty: the shuffler on its master side, the slave's path for the daemon (kept open
    here too, so the master never reads EIO while the daemon opens its side)."""
    master, slave = os.openpty()
    tty.setraw(slave)
    device = Shuffler(master)
    try:
        yield device, os.ttyname(slave)
    finally:
        device.close()
        os.close(master)
        os.close(slave)


def uth_round(round_id: int) -> list[HandDealt | RoundDealt | RoundSettled]:
    """One honest UTH round: six players and the dealer (seven hands), the community."""
    cards = iter(card.code for card in random.Random(round_id).sample(DECK, 19))
    frames: list[HandDealt | RoundDealt | RoundSettled] = []
    for position in (*PLAYERS, "DL"):
        frames.append(
            HandDealt(round_id=round_id, position=position, cards=(next(cards), next(cards)))
        )
    community = tuple(next(cards) for _ in range(5))
    frames.append(HandDealt(round_id=round_id, position="CM", cards=community))
    frames += [RoundDealt(round_id=round_id, hands=7), RoundSettled(round_id=round_id)]
    return frames


def framed(fact: HandDealt | RoundDealt | RoundSettled) -> Callable[[int], Message]:
    """The frame of ``fact`` for a link sequence number."""
    return lambda seq: DeviceMessage(seq=seq, fact=fact)


def write_config(workdir: Path, *, device: str, broker_port: int) -> Path:
    """An UTH table on ``device`` with a fresh journal."""
    path = workdir / "uth.toml"
    path.write_text(
        f'[table]\nid = "first1"\ngame = "UTH"\n\n[shuffler]\nport = "{device}"\n\n'
        f'[mqtt]\nhost = "127.0.0.1"\nport = {broker_port}\nprefix = "lammer-bench"\n\n'
        f'[journal]\npath = "{workdir / "first1.db"}"\n\n'
        '[logging]\nformat = "json"\nlevel = "info"\n',
        encoding="utf-8",
    )
    return path


async def one_start(
    workdir: Path, broker_port: int, pause: float
) -> tuple[list[float], list[float]]:
    """Start the daemon afresh, deal two rounds: each frame's ACK time (ms), per round."""
    with pty_shuffler() as (device, path):
        config = write_config(workdir, device=path, broker_port=broker_port)
        daemon = start_daemon(config, workdir / "daemon.log", None)
        try:
            async with asyncio.timeout(30):
                await device.configured.wait()
            await asyncio.sleep(pause)  # a dealer's first round comes a while after a start
            rounds: list[list[float]] = []
            for round_id in (101, 102):
                times = []
                for fact in uth_round(round_id):
                    written, acked = await device.send(framed(fact))
                    times.append((acked - written) * 1000)
                rounds.append(times)
            return rounds[0], rounds[1]
        finally:
            stop(daemon)


async def main_async(runs: int, pause: float) -> None:
    with tempfile.TemporaryDirectory(prefix="lammer-first-") as tmp:
        broker, port = start_broker(Path(tmp))
        try:
            first: list[list[float]] = []
            second: list[list[float]] = []
            for n in range(runs):
                workdir = Path(tmp) / f"run{n}"
                workdir.mkdir()
                a, b = await one_start(workdir, port, pause)
                first.append(a)
                second.append(b)
                await asyncio.sleep(0.2)
        finally:
            broker.stop()
    print(machine())
    code = os.environ.get("PYTHONPATH")
    print(f"daemon code: {'PYTHONPATH=' + code if code else 'this checkout'}; {runs} starts")
    print(f"first round {pause} s after the device's HELLO and MODE were acknowledged")
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    names = [type(f).__name__ for f in uth_round(1)]
    print(f"ACK ms{'1st round':>29}{'2nd round':>22}")
    print(f"{'frame':<14}{'median':>20}{'max':>12}{'median':>12}{'max':>10}")
    for i, name in enumerate(names):
        label = f"{name} {i + 1}" if name == "HandDealt" else name
        one = [r[i] for r in first]
        two = [r[i] for r in second]
        print(
            f"{label:<14}{statistics.median(one):>20.1f}{max(one):>12.1f}"
            f"{statistics.median(two):>12.1f}{max(two):>10.1f}"
        )
    worst = [max(r) for r in first]
    over = sum(w > LIMIT_MS for w in worst)
    print(
        f"slowest frame of the first round: median {statistics.median(worst):.1f} ms, "
        f"max {max(worst):.1f} ms; over {LIMIT_MS:.0f} ms in {over} of {runs} starts"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--pause",
        type=float,
        default=1.0,
        help="seconds between the device's MODE and the first round (default 1)",
    )
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.runs, args.pause))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
