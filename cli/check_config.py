"""``lammer check-config FILE [FILE ...]``: validate table configurations.

Each file is checked and reported on its own: a valid one as ``FILE: OK`` and a short
summary on stdout, a bad one as ``FILE: N problems`` and every problem on stderr, one per
line (``key.path: what is wrong``). Then, across the files, a table id given by more than
one of them is a problem too (two daemons would share a journal, a client id and topics),
and so is a serial device given to more than one device, in one file or in several (two
drivers would read each other's frames: one port, one device); device paths are compared
after their links are followed, so ``/dev/serial/by-id/...`` and ``/dev/ttyUSB0`` meet.
Exit 0 when every file is valid, else 2.

``--instance NAME`` (one file; systemd's ``ExecStartPre``) also requires ``[table] id`` to
be ``NAME``. ``--schema`` prints the JSON Schema of the configuration instead (for tooling
and editors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from daemon.config import DeviceSection, TableConfig, load_config
from daemon.errors import ConfigFileError

EXIT_OK = 0
EXIT_INVALID = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("files", type=Path, nargs="*", metavar="FILE", help="a table's TOML file")
    parser.add_argument(
        "--schema", action="store_true", help="print the configuration's JSON Schema and exit"
    )
    parser.add_argument(
        "--instance",
        metavar="NAME",
        help="the systemd instance (lammer@NAME): [table] id must be NAME (one FILE only)",
    )


def summary(config: TableConfig) -> list[str]:
    """The lines printed for a valid configuration."""
    lines = [f"table {config.table.id}: {config.table.game}"]
    for name in ("shuffler", "dice_reader"):
        device = getattr(config, name)
        if device is not None:
            lines.append(f"{name}: {device.port} ({_line(device)})")
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


def _line(device: DeviceSection) -> str:
    """How the device's line is set, in the summary."""
    if device.port.startswith("socket://"):
        return "raw TCP: the device server's own line settings"
    line = f"{device.baudrate} {device.bytesize}{device.parity}{device.stopbits:g}"
    if device.port.startswith("rfc2217://"):
        return f"{line}, set on the device server by RFC 2217"
    return f"{line}, RS-485" if device.rs485 else line


def run(args: argparse.Namespace) -> int:
    """Validate ``args.files``; the exit status."""
    if args.schema:
        print(json.dumps(TableConfig.model_json_schema(), indent=2))
        return EXIT_OK
    if not args.files:
        print("lammer check-config: a FILE (or --schema) is required", file=sys.stderr)
        return EXIT_INVALID
    if args.instance is not None and len(args.files) != 1:
        print("lammer check-config: --instance takes exactly one FILE", file=sys.stderr)
        return EXIT_INVALID
    valid: dict[Path, TableConfig] = {}
    for path in args.files:
        config = check(path, instance=args.instance)
        if config is not None:
            valid[path] = config
    repeated = _repeated_ids(valid) + _shared_ports(valid)
    for line in repeated:
        print(line, file=sys.stderr)
    return EXIT_OK if len(valid) == len(args.files) and not repeated else EXIT_INVALID


def check(path: Path, *, instance: str | None = None) -> TableConfig | None:
    """Check one file and report it (summary on stdout, or problems on stderr); the
    configuration if it is valid."""
    try:
        config = load_config(path)
    except ConfigFileError as exc:
        _report_problems(path, exc.problems)
        return None
    problem = None if instance is None else config.instance_problem(instance)
    if problem is not None:
        _report_problems(path, [problem])
        return None
    print(f"{path}: OK")
    for line in summary(config):
        print(f"  {line}")
    for note in config.notes():
        print(f"note: {note}")
    return config


def _report_problems(path: Path, problems: Sequence[str]) -> None:
    count = len(problems)
    print(f"{path}: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)
    for problem in problems:
        print(problem, file=sys.stderr)


def _repeated_ids(configs: dict[Path, TableConfig]) -> list[str]:
    by_id: dict[str, list[Path]] = {}
    for path, config in configs.items():
        by_id.setdefault(config.table.id, []).append(path)
    return [
        f"table id {table_id!r} is given by more than one file: {', '.join(map(str, paths))}"
        for table_id, paths in by_id.items()
        if len(paths) > 1
    ]


def _shared_ports(configs: dict[Path, TableConfig]) -> list[str]:
    by_port: dict[str, list[str]] = {}
    for path, config in configs.items():
        for name in ("shuffler", "dice_reader"):
            section = getattr(config, name)
            if section is not None:
                by_port.setdefault(_port_key(section.port), []).append(f"{path} [{name}]")
    return [
        f"serial port {port} is given to more than one device: {', '.join(users)}"
        for port, users in by_port.items()
        if len(users) > 1
    ]


def _port_key(port: str) -> str:
    """A port as the machine sees it: a device path with its links followed (udev's
    ``/dev/serial/by-id`` names are links), a URL (``socket://``, ``rfc2217://``) as written."""
    return port if "://" in port else os.path.realpath(port)
