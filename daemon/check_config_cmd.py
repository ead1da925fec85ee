"""``lammer check-config FILE``: validate a table configuration.

Exit 0 with a short summary on stdout, or exit 2 with every problem on stderr, one per
line (``key.path: what is wrong``). ``--schema`` prints the JSON Schema of the
configuration instead (for tooling and editors).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from daemon.config import TableConfig, load_config
from daemon.errors import ConfigFileError

EXIT_OK = 0
EXIT_INVALID = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("file", type=Path, nargs="?", help="the table's TOML file")
    parser.add_argument(
        "--schema", action="store_true", help="print the configuration's JSON Schema and exit"
    )


def summary(config: TableConfig) -> list[str]:
    """The lines printed for a valid configuration."""
    lines = [f"table {config.table.id}: {config.table.game}"]
    for name in ("shuffler", "dice_reader"):
        device = getattr(config, name)
        if device is not None:
            lines.append(f"{name}: {device.port} ({device.baudrate} baud)")
    tls = " with TLS" if config.mqtt.tls is not None else ""
    lines.append(
        f"mqtt: {config.mqtt.host}:{config.mqtt.port}{tls}, base topic {config.base_topic}, "
        f"client id {config.client_id}"
    )
    lines.append(f"journal: {config.journal_path}")
    if config.table.game == "CRAPS":
        lines.append(f"bonus craps: pay table {config.bonus_craps.paytable}")
    if config.table.game == "BJ":
        soft = "hits" if config.bust_bonus.dealer_hits_soft_17 else "stands on"
        lines.append(f"bust bonus: {config.bust_bonus.decks} decks, dealer {soft} soft 17")
    return lines


def run(args: argparse.Namespace) -> int:
    """Validate ``args.file``; the exit status."""
    if args.schema:
        print(json.dumps(TableConfig.model_json_schema(), indent=2))
        return EXIT_OK
    if args.file is None:
        print("lammer check-config: a FILE (or --schema) is required", file=sys.stderr)
        return EXIT_INVALID
    try:
        config = load_config(args.file)
    except ConfigFileError as exc:
        count = len(exc.problems)
        print(f"{args.file}: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_INVALID
    print(f"{args.file}: OK")
    for line in summary(config):
        print(f"  {line}")
    for note in config.notes():
        print(f"note: {note}")
    return EXIT_OK
