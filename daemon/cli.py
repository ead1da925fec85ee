"""The ``lammer`` command line.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status). Modules are imported only when their command
runs, so ``lammer odds`` does not pay for the MQTT stack.
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
    "journal": ("daemon.journal_cmd", "export a table's journal as JSON lines"),
    "odds": ("daemon.odds_cmd", "exact odds and house edge of the side bets"),
    "display": ("simulators.display", "a terminal table display subscribed to one table"),
    "demo": ("daemon.demo", "a simulated floor: broker, simulators, daemons and a display"),
}


def build_parser() -> argparse.ArgumentParser:
    """The parser with every subcommand whose module can be imported."""
    parser = argparse.ArgumentParser(prog="lammer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # command not built yet
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lammer``."""
    args = build_parser().parse_args(argv)
    status: int = args._run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
