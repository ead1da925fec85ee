"""``lammer broker-config``: write the Mosquitto configuration of a table controller.

``lammer broker-config --out DIR [--listen HOST:PORT] [--tls-cert F --tls-key F --tls-ca F]
[--bridge HOST:PORT[,HOST:PORT...] --bridge-ca FILE --controller NAME [--bridge-listen
HOST:PORT] [--bridge-retry MIN:MAX]] [--display NAME ...]
[--terminal NAME ...] [--data-dir DIR] [--broker-user USER] CONFIG.toml [CONFIG.toml ...]``
writes, for the tables given, ``DIR/mosquitto.conf``, ``DIR/passwd``, ``DIR/acl`` and
``DIR/credentials/<user>`` (``deploy.broker_config`` says what each holds and why); with
``--bridge``, the bridge to the floor cluster (TLS, verified with ``--bridge-ca``) in a
Mosquitto of its own, ``DIR/bridge.conf`` (with ``DIR/bridge.acl`` and the systemd unit
``DIR/lammer-bridge.service`` that runs it under ``lammer bridge-watchdog``), its password
in ``credentials/bridge-<controller>`` and ``DIR/floor-controller.json`` for ``lammer
floor-config``. Running it again keeps every
password and prints what it changed: one line per file, the diff of ``mosquitto.conf`` and
``acl`` when they changed, then for each table whether its configuration already logs in
as this broker expects, and the lines to add when it does not.

Exit 0 when written; 2 with every problem on stderr when a configuration or an option
cannot be used (nothing is written then); 1 when a file cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from daemon.config import TableConfig, load_config
from daemon.errors import ConfigFileError
from deploy.broker_config import (
    BRIDGE_LISTEN,
    BRIDGE_RESTART,
    DEFAULT_BROKER_USER,
    DEFAULT_DATA_DIR,
    DEFAULT_TLS_LISTEN,
    BrokerConfigError,
    Generated,
    Listener,
    generate,
    plan_broker,
    wiring_lines,
)

EXIT_OK = 0
EXIT_WRITE_FAILED = 1
EXIT_INVALID = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument(
        "configs",
        type=Path,
        nargs="+",
        metavar="CONFIG.toml",
        help="the configurations of the controller's tables",
    )
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="where the files are written"
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="a listener for displays and terminals on the network (TLS with --tls-*; "
        f"default with TLS: {DEFAULT_TLS_LISTEN}); the daemons' loopback listener is the "
        "[mqtt] host and port of the configurations",
    )
    tls = parser.add_argument_group("TLS for the network listener (all three together)")
    tls.add_argument("--tls-cert", type=Path, metavar="FILE", help="the broker's certificate")
    tls.add_argument("--tls-key", type=Path, metavar="FILE", help="its private key")
    tls.add_argument("--tls-ca", type=Path, metavar="FILE", help="the CA clients verify it with")
    _add_bridge_arguments(parser)
    _add_device_arguments(parser)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"Mosquitto's persistence directory (default {DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--broker-user",
        default=DEFAULT_BROKER_USER,
        metavar="USER",
        help="the user Mosquitto runs as once started as root; owns passwd and acl "
        f"(default {DEFAULT_BROKER_USER})",
    )


def _add_bridge_arguments(parser: argparse.ArgumentParser) -> None:
    """The floor bridge's arguments."""
    floor_group = parser.add_argument_group("bridge to the floor cluster")
    floor_group.add_argument(
        "--bridge",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the floor cluster's MQTT listeners, every node, in the order to try them",
    )
    floor_group.add_argument(
        "--bridge-ca",
        type=Path,
        metavar="FILE",
        help="the floor CA (lammer floor-config's ca.crt): the bridge speaks TLS and "
        "verifies every node with it (required with --bridge)",
    )
    floor_group.add_argument(
        "--controller",
        metavar="NAME",
        help="this controller's name on the floor (its floor user is bridge-NAME)",
    )
    floor_group.add_argument(
        "--bridge-listen",
        metavar="HOST:PORT",
        help=f"the bridge broker's loopback listener, where its watchdog probes it "
        f"(default {BRIDGE_LISTEN})",
    )
    floor_group.add_argument(
        "--bridge-retry",
        metavar="MIN:MAX",
        help="seconds between two attempts to reach the floor, least and most (default "
        f"{BRIDGE_RESTART[0]}:{BRIDGE_RESTART[1]})",
    )


def _add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments naming displays and terminals of their own."""
    devices = parser.add_argument_group(
        "displays and terminals of their own (each client's id is its user name)"
    )
    devices.add_argument(
        "--display",
        action="append",
        default=[],
        metavar="NAME",
        help="a user display-NAME that reads as 'display' does, for a display connected "
        "beside others (repeat for each)",
    )
    devices.add_argument(
        "--terminal",
        action="append",
        default=[],
        metavar="NAME",
        help="a user terminal-NAME that may do what 'terminal' does, for a pit terminal "
        "connected beside others (repeat for each)",
    )


def run(args: argparse.Namespace) -> int:
    """Plan, write and report; the exit status."""
    tls_given = [args.tls_cert, args.tls_key, args.tls_ca]
    if any(tls_given) and not all(tls_given):
        _fail(["--tls-cert, --tls-key and --tls-ca go together: give all three"])
        return EXIT_INVALID
    tables: list[tuple[Path, TableConfig]] = []
    invalid = False
    for path in args.configs:
        try:
            tables.append((path, load_config(path)))
        except ConfigFileError as exc:
            invalid = True
            count = len(exc.problems)
            print(f"{path}: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)
            for problem in exc.problems:
                print(f"  {problem}", file=sys.stderr)
    if invalid:
        print("lammer broker-config: nothing written", file=sys.stderr)
        return EXIT_INVALID
    try:
        plan = plan_broker(
            tables,
            out=args.out,
            listen=args.listen,
            tls=(args.tls_cert, args.tls_key, args.tls_ca) if all(tls_given) else None,
            data_dir=args.data_dir,
            broker_user=args.broker_user,
            bridge=args.bridge,
            bridge_ca=args.bridge_ca,
            controller=args.controller,
            bridge_listen=args.bridge_listen,
            bridge_retry=args.bridge_retry,
            displays=args.display,
            terminals=args.terminal,
        )
        generated = generate(plan)
    except BrokerConfigError as exc:
        _fail(exc.problems)
        return EXIT_INVALID
    except OSError as exc:
        print(f"lammer broker-config: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    for line in report(generated):
        print(line)
    return EXIT_OK


def _fail(problems: tuple[str, ...] | list[str]) -> None:
    count = len(problems)
    print(f"lammer broker-config: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    print("lammer broker-config: nothing written", file=sys.stderr)


def report(generated: Generated) -> list[str]:
    """What was written and what the operator does next, as printed."""
    plan = generated.plan
    tables = ", ".join(f"{t.table_id} ({t.config.table.game})" for t in plan.tables)
    lines = [f"{plan.out}: {len(plan.tables)} table{'s' if len(plan.tables) != 1 else ''}: "]
    lines[0] += tables
    for change in generated.changes:
        lines.append(change.line(plan.out))
        lines += [f"    {d}" for d in change.diff]
    lines.append("listeners: " + "; ".join(_listener(listener) for listener in plan.listeners))
    lines += [f"note: {note}" for note in generated.notes]
    for w in generated.wiring:
        where = f"{w.table.table_id} ({w.table.config_path})"
        if w.wired:
            password_file = w.table.config.mqtt.password_file
            lines.append(f"{where}: logs in as {w.table.user} ({password_file})")
            continue
        lines.append(
            f"{where}: not wired to this broker ({w.reason}). Give its daemon its password "
            "and add two lines to its [mqtt] section:"
        )
        lines += [f"    {line}" for line in wiring_lines(w, plan)]
    lines.append(
        f"displays log in as display, pit terminals as terminal: passwords in "
        f"{plan.credentials_dir}/"
    )
    if plan.bridge is not None:
        nodes = ", ".join(str(n) for n in plan.bridge.nodes)
        lines.append(
            f"floor bridge: controller {plan.bridge.controller} as {plan.bridge.user} to "
            f"{nodes}; give {plan.declaration_path} to lammer floor-config (it holds the "
            "bcrypt hash of the password, never the password), then reload the floor"
        )
        lines.append(
            f"bridge broker: {plan.bridge_conf_path}, run by lammer bridge-watchdog "
            f"({plan.bridge_unit_path}: install it as its first lines say); its probe on "
            f"{plan.bridge.listen}"
        )
    return lines


def _listener(listener: Listener) -> str:
    if listener.purpose == "daemons":
        return f"{listener.endpoint} (table daemons, loopback, plain)"
    kind = "TLS" if listener.tls is not None else "PLAIN"
    return f"{listener.endpoint} (displays and terminals, {kind})"
