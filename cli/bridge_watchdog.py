"""``lammer bridge-watchdog``: run the floor bridge's own Mosquitto and restart it when it
stops answering (``deploy.bridge_watchdog``; the unit ``lammer-bridge.service`` that
``lammer broker-config --bridge`` writes runs it).

``lammer bridge-watchdog --conf DIR/bridge.conf [--interval S] [--deadline S] [--failures N]
[--grace S]``. Runs until SIGTERM or SIGINT, then stops the broker (SIGTERM, SIGKILL after
``--grace``) and exits 0. Exit 2 when the configuration cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from daemon.logs import configure_logging
from daemon.notify import Notifier
from deploy.bridge_watchdog import DEADLINE, FAILURES, GRACE, INTERVAL, Settings, Watchdog


def _seconds(text: str) -> float:
    value = float(text)
    if not 0.05 <= value <= 600:
        raise argparse.ArgumentTypeError(f"0.05 to 600 seconds, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options."""
    parser.add_argument(
        "--conf", type=Path, required=True, metavar="FILE", help="the bridge broker's bridge.conf"
    )
    parser.add_argument(
        "--interval", type=_seconds, default=INTERVAL, metavar="S", help="seconds between probes"
    )
    parser.add_argument(
        "--deadline",
        type=_seconds,
        default=DEADLINE,
        metavar="S",
        help="seconds a probe's round trip may take",
    )
    parser.add_argument(
        "--failures",
        type=int,
        choices=range(1, 11),
        default=FAILURES,
        metavar="N",
        help="probes in a row without an answer before the broker is restarted",
    )
    parser.add_argument(
        "--grace",
        type=_seconds,
        default=GRACE,
        metavar="S",
        help="seconds after SIGTERM before SIGKILL",
    )
    parser.add_argument(
        "--log-format", choices=("auto", "json", "console"), default="auto", help="log format"
    )


def run(args: argparse.Namespace) -> int:
    """Watch until SIGTERM or SIGINT; the exit status."""
    configure_logging(fmt=args.log_format, level="info")
    settings = Settings(
        conf=args.conf,
        interval=args.interval,
        deadline=args.deadline,
        failures=args.failures,
        grace=args.grace,
    )
    try:
        watchdog = Watchdog(settings, Notifier.from_env())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"lammer bridge-watchdog: {args.conf}: {exc}", file=sys.stderr)
        return 2

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, watchdog.stop)
        await watchdog.run()

    asyncio.run(main())
    return 0
