"""The ``lammer`` command line.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status). Only the module of the command being run is
imported, so ``lammer odds`` does not pay for the MQTT stack, and a fault in one
command's module cannot take the others down.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("daemon.run_cmd", "run one table: drivers, rules, journal and MQTT"),
    "check-config": ("daemon.check_config_cmd", "validate a table configuration file"),
    "broker-config": (
        "daemon.broker_config_cmd",
        "write the Mosquitto configuration (users, ACL, TLS) for the tables given",
    ),
    "floor-config": (
        "daemon.floor_config_cmd",
        "write the floor cluster's configuration (nats-server nodes, users, permissions)",
    ),
    "journal": ("daemon.journal_cmd", "export a table's journal as JSON lines"),
    "odds": ("daemon.odds_cmd", "exact odds and house edge of the side bets"),
    "display": ("simulators.display", "a terminal display of one or more tables, live from MQTT"),
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
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if name in wanted:
            module = importlib.import_module(module_name)
            module.add_arguments(command)
            command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lammer``: imports only the module of the command being run."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in args_in if not a.startswith("-")), None)
    parser = build_parser([chosen] if chosen in COMMANDS else None)
    args = parser.parse_args(args_in)
    status: int = args._run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
