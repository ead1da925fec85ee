"""``lammer run --config FILE [--instance NAME]``: run one table until SIGTERM or SIGINT.

A bad configuration exits 2 before anything starts; so does ``--instance NAME`` (the
systemd unit passes ``%i``) when ``[table] id`` is not ``NAME``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from daemon.config import load_config
from daemon.errors import BrokerLoginRefused, ConfigFileError, JournalError, MetricsListenError
from daemon.logs import configure_logging
from foundation.tasks import this_task


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``lammer run``."""
    parser.add_argument("--config", "-c", type=Path, required=True, help="the table's TOML file")
    parser.add_argument(
        "--log-format",
        choices=["auto", "json", "console"],
        default=None,
        help="override [logging] format (auto: JSON unless on a terminal)",
    )
    parser.add_argument(
        "--instance",
        metavar="NAME",
        help="the systemd instance (lammer@NAME): refuse to run unless [table] id is NAME",
    )


def run(args: argparse.Namespace) -> int:
    """Load the configuration, then run the table; exit 2 on a bad configuration."""
    try:
        config = load_config(args.config)
    except ConfigFileError as exc:
        print(f"lammer: {exc}", file=sys.stderr)
        return 2
    problem = None if args.instance is None else config.instance_problem(args.instance)
    if problem is not None:
        print(f"lammer: {args.config}: {problem}", file=sys.stderr)
        return 2
    configure_logging(
        fmt=args.log_format or config.logging.format,
        level=config.logging.level,
    )
    from daemon.app import TableDaemon, install_signal_handlers

    async def main() -> None:
        install_signal_handlers(this_task())
        await TableDaemon(config).run()

    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        pass
    except KeyboardInterrupt:
        pass
    except BrokerLoginRefused as exc:
        # A wrong user name or password file: waiting mends nothing (exit 2, as a bad
        # configuration: systemd's RestartPreventExitStatus=2 does not loop on it).
        print(f"lammer: {exc}", file=sys.stderr)
        return 2
    except MetricsListenError as exc:
        # Another table on the same port, say: one line, exit 1 (systemd retries).
        print(f"lammer: {exc}", file=sys.stderr)
        return 1
    except JournalError as exc:
        # A journal that cannot be opened (a missing or read-only folder, a file that is
        # not a journal, another daemon holding it) is an operator's problem to fix: one
        # clear line, not a traceback. Exit 1, so systemd retries (Restart=on-failure).
        print(f"lammer: {exc}", file=sys.stderr)
        return 1
    return 0
