"""The ``lammer`` command line.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status). Only the module of the command being run is
imported, so ``lammer odds`` does not pay for the MQTT stack, and a fault in one
command's module cannot take the others down.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from cli.output import EXIT_BROKEN_PIPE, discard
from contract.vocabulary import lammer_version

EXIT_INTERRUPTED: Final = 128 + signal.SIGINT
"""The status a shell gives a command ended by Ctrl-C (130)."""


def _run_cmd() -> CommandModule:
    from cli import run

    return run


def _check_config() -> CommandModule:
    from cli import check_config

    return check_config


def _broker_config() -> CommandModule:
    from cli import broker_config

    return broker_config


def _bridge_watchdog() -> CommandModule:
    from cli import bridge_watchdog

    return bridge_watchdog


def _floor_config() -> CommandModule:
    from cli import floor_config

    return floor_config


def _journal() -> CommandModule:
    from cli import journal

    return journal


def _odds() -> CommandModule:
    from cli import odds

    return odds


def _display() -> CommandModule:
    from display import terminal

    return terminal


def _web() -> CommandModule:
    from display.web import cmd

    return cmd


def _records() -> CommandModule:
    from cli import records

    return records


def _probe() -> CommandModule:
    from cli import probe

    return probe


def _verify_install() -> CommandModule:
    from cli import verify_install

    return verify_install


def _release() -> CommandModule:
    from cli import release

    return release


def _authenticate() -> CommandModule:
    from cli import authenticate

    return authenticate


def _demo() -> CommandModule:
    from cli import demo

    return demo


class CommandModule(Protocol):
    """What a subcommand's module provides."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# name -> (loader of its module, one-line help). The loaders import plainly, inside a
# function: only the module of the command being run is imported (``lammer odds`` does not
# pay for the MQTT stack), and import-linter still sees every arrow.
COMMANDS: dict[str, tuple[Callable[[], CommandModule], str]] = {
    "run": (_run_cmd, "run one table: drivers, rules, journal and MQTT"),
    "check-config": (_check_config, "validate a table configuration file"),
    "broker-config": (
        _broker_config,
        "write the Mosquitto configuration (users, ACL, TLS) for the tables given",
    ),
    "bridge-watchdog": (
        _bridge_watchdog,
        "run the floor bridge's own Mosquitto and restart it when it stops answering",
    ),
    "floor-config": (
        _floor_config,
        "write the floor cluster's configuration (nats-server nodes, users, permissions)",
    ),
    "journal": (
        _journal,
        "export a table's journal as JSON lines, or verify it (lammer journal verify)",
    ),
    "odds": (_odds, "exact odds and house edge of the side bets"),
    "display": (_display, "a terminal display of one or more tables, live from MQTT"),
    "web": (_web, "the table's screens in the browser: player, pit, stickperson"),
    "records": (
        _records,
        "the floor's records: every table's results in PostgreSQL, reports, integrity watch",
    ),
    "probe": (
        _probe,
        "which device answers at a serial port or device server, and how clean the line is",
    ),
    "verify-install": (
        _verify_install,
        "the installed lammer's components and digests (seeded: --seed), or against a manifest",
    ),
    "release": (_release, "signed release manifests: keygen, manifest, verify"),
    "authenticate": (
        _authenticate,
        "the floor's software authenticator: asks every table with a fresh seed, on a schedule",
    ),
    "demo": (_demo, "a simulated floor: broker, simulators, daemons and a display"),
}


def build_parser(names: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the subcommands ``names`` (default: every one) fully built.

    Only the modules of ``names`` are imported; the others are listed by name and help.
    """
    wanted = COMMANDS.keys() if names is None else set(names)
    parser = argparse.ArgumentParser(
        prog="lammer", description="lammer: the table daemon between table devices and displays"
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {lammer_version()}",
        help="print the version",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (load, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if name in wanted:
            module = load()
            module.add_arguments(command)
            command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lammer``: imports only the module of the command being run.

    A reader of the output that goes away (``| head``) ends the command quietly with
    status 141 (``cli.output``), whichever command it was.
    """
    args_in = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in args_in if not a.startswith("-")), None)
    # No command named (``--version``, ``--help``, a typo): no command module is needed.
    parser = build_parser([chosen] if chosen in COMMANDS else [])
    try:
        args = parser.parse_args(args_in)
        status: int = args._run(args)
        sys.stdout.flush()  # here, not at exit: a reader gone shows up inside the try
    except BrokenPipeError:
        discard(sys.stdout)
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        # Ctrl-C in a command that does not handle it itself (``lammer odds``): a sentence
        # and the shell's status for SIGINT, never a traceback.
        print(f"lammer {chosen}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status


if __name__ == "__main__":
    sys.exit(main())
