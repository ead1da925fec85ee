"""``lammer-sim``: run a simulated shuffler or dice reader on a pty (and optionally TCP).

Usage::

    lammer-sim shuffler --game UTH [--rounds N] [--interval S] [--seed N] [--link PATH]
                        [--tcp PORT] [--baud RATE] [--fault crc=0.1,garbage=0.05] ...
    lammer-sim dice [--rolls N] [--noroll-rate R] [--check-rate R] ...

The first line on stdout is the pty's path (point ``lammer run`` or ``lammer probe`` at
it); after a simulated unplug each new pty's path follows on a line of its own. With
``--link PATH`` a symlink at PATH always points at the current pty, so a host can use one
stable name across unplugs. With ``--baud RATE`` the pty is a line at that rate
(``simulators.line``): a host, or a device server, that sets the pty to another rate hears
garbage, as at a real table. Logs go to stderr (JSON when stderr is not a terminal);
cards appear only at ``--log-level debug``.

It plays ``--rounds``/``--rolls`` rounds (or the ``--script``), waits until the host has
acknowledged every frame, and exits 0; with ``--linger`` it keeps the port open (and keeps
answering ``QUERY``) until SIGINT or SIGTERM. Without a count it plays until stopped.
SIGINT and SIGTERM always stop it cleanly with status 0 (the pty closed, the symlink
removed). Bad options or a bad script exit 2 with the reason.

Output whose reader goes away (``lammer-sim ... | head -1``) is dropped, never a
traceback: the device keeps serving the host on its pty (``--link`` keeps its name).
``--record FILE`` holds every card dealt: it is written only its owner may read (0600),
replacing an earlier FILE rather than writing into it, as ``lammer journal -o`` does;
a FILE that is a symlink or not a regular file is refused at start (exit 2).

``--seed`` makes a run reproducible: the deals or rolls come from ``Random(seed)``, the link
faults from a second RNG seeded from it (so faults, which depend on timing, never change
the cards). Without ``--seed`` a seed is chosen and logged at info level.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import signal
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO, cast

import structlog

from contract.vocabulary import lammer_version
from drivers.messages import DeviceMessage
from foundation.files import replaced_privately
from rules.events import GAMES
from simulators.device_link import ACK_TIMEOUT, LinkTimings
from simulators.dice import DiceGame
from simulators.faults import Faults
from simulators.scripts import (
    DeviceKind,
    FaultSpecError,
    Send,
    Step,
    format_script,
    load_script,
)
from simulators.serve import SimulatedDevice
from simulators.shuffler import ShufflerGame

SHUFFLER_HELLO = ("IDEAL-SIM", "2.1.0", "SN0001")  # shuffler-icd.md example
DICE_HELLO = ("DICE-SIM", "1.0.0", "DR0042")  # dice-reader-icd.md example
DEFAULT_ROUND_INTERVAL = 8.0  # seconds per round: a dealer's pace, for demos
DEFAULT_ROLL_INTERVAL = 4.0  # seconds per throw


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a probability between 0 and 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{value} seconds: expected a number >= 0")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number of seconds > 0")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: expected 0 or more")
    return value


def _baudrate(text: str) -> int:
    value = _count(text)
    if not 0 < value < 2**31:
        raise argparse.ArgumentTypeError(f"baud rate {value}: expected 1..{2**31 - 1}")
    return value


def _port(text: str) -> int:
    value = _count(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value}: expected 0..65535 (0: any free port)")
    return value


class _FaultAction(argparse.Action):
    """``--fault`` may be given several times; the settings add up."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        try:
            faults = Faults.parse(str(values), base=getattr(namespace, self.dest))
        except FaultSpecError as exc:
            raise argparse.ArgumentError(self, str(exc)) from exc
        setattr(namespace, self.dest, faults)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, help="seed of the deals/rolls (default: random)")
    parser.add_argument(
        "--script",
        type=Path,
        metavar="FILE",
        help="play this script instead of honest play (format: simulators/scripts.py)",
    )
    parser.add_argument(
        "--link", type=Path, metavar="PATH", help="keep a symlink at PATH to the current pty"
    )
    parser.add_argument(
        "--tcp", type=_port, metavar="PORT", help="also serve on 127.0.0.1:PORT (socket://)"
    )
    parser.add_argument(
        "--baud",
        type=_baudrate,
        metavar="RATE",
        help="the device's baud rate on the pty: a host that sets another hears garbage, as "
        "on a real line (default: the pty passes bytes at any rate)",
    )
    parser.add_argument(
        "--fault",
        action=_FaultAction,
        default=Faults(),
        metavar="SPEC",
        help="inject faults: name=rate,... (crc garble garbage split duplicate drop_ack "
        "disconnect wrong_mode bad_deck status; split_delay= unplug_pause= in seconds)",
    )
    parser.add_argument(
        "--linger",
        action="store_true",
        help="after the last round/roll keep the port open until SIGINT/SIGTERM",
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="on exit, write every acknowledged frame to FILE as a script (contains cards)",
    )
    parser.add_argument("--serial", help="serial number in HELLO")
    parser.add_argument(
        "--ack-timeout",
        type=_positive_seconds,
        default=ACK_TIMEOUT,
        metavar="SECONDS",
        help=f"retransmit after this long without an ACK (link-layer.md: {ACK_TIMEOUT})",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="debug shows every frame, cards included",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``lammer-sim`` parser with its ``shuffler`` and ``dice`` subcommands."""
    parser = argparse.ArgumentParser(
        prog="lammer-sim", description="Simulated table devices on a pty (and TCP)."
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {lammer_version()}",
        help="print the version",
    )
    sub = parser.add_subparsers(dest="device", required=True, metavar="DEVICE")

    shuffler = sub.add_parser("shuffler", help="an i-Deal-style shuffler (or BJ card-reading shoe)")
    shuffler.add_argument("--game", required=True, choices=GAMES, help="the mode")
    shuffler.add_argument("--rounds", type=_count, help="play N rounds, then stop")
    shuffler.add_argument(
        "--interval",
        type=_seconds,
        default=DEFAULT_ROUND_INTERVAL,
        metavar="SECONDS",
        help=f"about this long per round (default {DEFAULT_ROUND_INTERVAL:g}; 0: no pauses)",
    )
    shuffler.add_argument("--void-rate", type=_rate, default=0.0, help="misdeals (VOID) per round")
    shuffler.add_argument("--decks", type=int, default=6, help="BJ: decks in the shoe (1-8)")
    shuffler.add_argument(
        "--dealer-rule", choices=("S17", "H17"), default="S17", help="BJ: the dealer's rule"
    )
    shuffler.add_argument(
        "--penetration", type=_rate, default=0.75, help="BJ: where the cut card goes (0-1)"
    )
    shuffler.add_argument("--first-round", type=int, default=1, help="first round id")
    _common(shuffler)

    dice = sub.add_parser("dice", help="an electronic dice reader")
    dice.add_argument("--rolls", type=_count, help="throw N times, then stop")
    dice.add_argument(
        "--interval",
        type=_seconds,
        default=DEFAULT_ROLL_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between throws (default {DEFAULT_ROLL_INTERVAL:g})",
    )
    dice.add_argument("--noroll-rate", type=_rate, default=0.0, help="NOROLL per throw")
    dice.add_argument("--check-rate", type=_rate, default=0.0, help="CHECK per throw")
    dice.add_argument("--first-roll", type=int, default=1, help="first roll id")
    _common(dice)
    return parser


def _discard(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null: its reader went away."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


class _Unbreakable:
    """A text stream that writes nowhere once its reader has gone (``2>&1 | head``), so
    a log line can never raise ``BrokenPipeError`` in the middle of serving the host."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _discard(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _discard(self._stream)


def configure_logging(level: str) -> None:
    """structlog to stderr (stdout carries the pty paths): console on a terminal, else JSON."""
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer()
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer(default=repr)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _Unbreakable(sys.stderr))),
        cache_logger_on_first_use=True,
    )


def _steps(args: argparse.Namespace, device: DeviceKind) -> tuple[Iterable[Step], list[Send]]:
    """The steps to play and the configuration frames (``MODE``) that follow ``HELLO``."""
    rng = random.Random(args.seed)  # noqa: S311  a simulated device, seeded to be replayed
    if device == "shuffler":
        game = ShufflerGame(
            args.game,
            rng,
            faults=args.fault,
            void_rate=args.void_rate,
            interval=args.interval,
            decks=args.decks,
            dealer_rule=args.dealer_rule,
            penetration=args.penetration,
            first_round=args.first_round,
        )
        config = [game.mode()]
        if args.script is not None:
            return load_script(args.script, device=device), config
        return game.rounds(args.rounds), config
    if args.script is not None:
        return load_script(args.script, device=device), []
    dice = DiceGame(
        rng,
        noroll_rate=args.noroll_rate,
        check_rate=args.check_rate,
        faults=args.fault,
        interval=args.interval,
        first_roll=args.first_roll,
    )
    return dice.rolls(args.rolls), []


def _check_record(path: Path | None) -> None:
    if path is None:
        return
    if not path.parent.is_dir():
        raise ValueError(f"--record {path}: no directory {path.parent}")
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(path.lstat().st_mode):
            raise ValueError(f"--record {path}: a symlink or not a regular file; refusing it")


def _check_link(path: Path | None) -> None:
    if path is None:
        return
    if os.path.lexists(path) and not path.is_symlink():
        raise ValueError(f"--link {path}: exists and is not a symlink; refusing to replace it")
    if not path.parent.is_dir():
        raise ValueError(f"--link {path}: no directory {path.parent}")


def _print_path(path: str) -> None:
    try:
        print(path, flush=True)
    except BrokenPipeError:
        _discard(sys.stdout)  # nobody reads the paths any more; the host has --link


def _record(path: Path, sent: Sequence[DeviceMessage]) -> None:
    """Write the record as a script, 0600 (it holds cards), in place of any earlier file:
    written under a temporary name in the same folder, then renamed over ``path``."""
    _check_record(path)
    text = format_script(Send((m.kind, *m.fields())) for m in sent)
    with replaced_privately(path) as out:
        out.write(text)


async def serve(args: argparse.Namespace) -> int:
    """Run the simulator the parsed ``args`` describe; returns the exit status."""
    device: DeviceKind = "shuffler" if args.device == "shuffler" else "dice_reader"
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**32)
    log = structlog.get_logger("lammer.sim").bind(device=device, game=getattr(args, "game", None))
    steps, config = _steps(args, device)
    model, firmware, serial = SHUFFLER_HELLO if device == "shuffler" else DICE_HELLO
    hello = Send.of("HELLO", model, firmware, args.serial or serial)
    hello.message(1, device)  # a bad --serial fails here, before the pty exists
    log.info("starting", seed=args.seed, faults=str(args.fault), script=str(args.script or ""))
    sim = SimulatedDevice(
        device=device,
        hello=hello,
        config=config,
        faults=args.fault,
        rng=random.Random(f"{args.seed}:link"),  # noqa: S311  simulated link faults, seeded to be replayed
        timings=LinkTimings(ack_timeout=args.ack_timeout),
        link=args.link,
        tcp_port=args.tcp,
        baudrate=args.baud,
        on_plug=_print_path,
        game=getattr(args, "game", None),
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with sim:
            if sim.tcp is not None:
                log.info("serving tcp", url=f"socket://127.0.0.1:{sim.tcp.port}")

            async def play() -> None:
                frames = await sim.play(steps)
                await sim.finish()
                log.info("all frames acknowledged", frames=frames)
                if args.linger:
                    await stop.wait()

            player = asyncio.create_task(play())
            stopper = asyncio.create_task(stop.wait())
            try:
                await asyncio.wait({player, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (player, stopper):
                    task.cancel()
                results = await asyncio.gather(player, stopper, return_exceptions=True)
            for result in results:
                if isinstance(result, Exception):
                    raise result
            if stop.is_set():
                log.info("stopped by signal")
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        if args.record is not None:
            _record(args.record, sim.sent)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lammer-sim``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        _check_link(args.link)
        _check_record(args.record)
        return asyncio.run(serve(args))
    except BrokenPipeError:
        _discard(sys.stdout)
        return 128 + signal.SIGPIPE  # as `lammer` does (cli/output.py)
    except (ValueError, OSError) as exc:  # ScriptError and FaultSpecError are ValueErrors
        print(f"lammer-sim: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
