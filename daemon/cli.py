"""The ``lammer`` command line.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status). Only the module of the command being run is
imported, so ``lammer odds`` does not pay for the MQTT stack, and a fault in one
command's module cannot take the others down.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Sequence

from daemon.output import EXIT_BROKEN_PIPE, discard

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("daemon.run_cmd", "run one table: drivers, rules, journal and MQTT"),
    "check-config": ("daemon.check_config_cmd", "validate a table configuration file"),
    "broker-config": (
        "daemon.broker_config_cmd",
        "write the Mosquitto configuration (users, ACL, TLS) for the tables given",
    ),
    "journal": (
        "daemon.journal_cmd",
        "export a table's journal as JSON lines, or verify it (lammer journal verify)",
    ),
    "odds": ("daemon.odds_cmd", "exact odds and house edge of the side bets"),
    "display": ("display.terminal", "a terminal display of one or more tables, live from MQTT"),
    "web": ("display.web.cmd", "the table's screens in the browser: player, pit, stickperson"),
    "demo": ("daemon.demo", "a simulated floor: broker, simulators, daemons and a display"),
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
        "--version", action="version", version=f"%(prog)s {version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if name in wanted:
            module = importlib.import_module(module_name)
            module.add_arguments(command)
            command.set_defaults(_run=module.run)
    return parser


def version() -> str:
    """The installed lammer's version (the package's metadata, as pip installed it)."""
    try:
        return importlib.metadata.version("lammer")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lammer``: imports only the module of the command being run.

    A reader of the output that goes away (``| head``) ends the command quietly with
    status 141 (``daemon.output``), whichever command it was.
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
    return status


if __name__ == "__main__":
    sys.exit(main())
