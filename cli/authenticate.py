"""``lammer authenticate``: the floor's software authenticator (``records.authenticate``).

Connects as the ``records`` user (broker-config's and floor-config's), verifies the
approved manifests against the approved public keys (a bad signature or an unknown key:
a sentence and status 2), then asks every table on a schedule with a fresh seed and
publishes ``lammer-floor/software/<table>``. ``--rounds N`` stops after N rounds (a lab's
check, a test): status 0 when every table was approved, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from contract.manifest import ManifestError, load_manifest, public_keys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``lammer authenticate``."""
    parser.add_argument(
        "--mqtt", default="127.0.0.1:1883", metavar="HOST:PORT", help="the broker or floor node"
    )
    parser.add_argument("--mqtt-user", default="records", help="the MQTT user (default records)")
    parser.add_argument(
        "--mqtt-password-file", type=Path, metavar="FILE", help="its password, one line"
    )
    parser.add_argument("--mqtt-ca-file", type=Path, metavar="CA", help="MQTT over TLS")
    parser.add_argument("--prefix", action="append", metavar="PREFIX", help="default lammer")
    parser.add_argument(
        "--manifest",
        type=Path,
        action="append",
        required=True,
        metavar="FILE",
        help="an approved release manifest (repeatable)",
    )
    parser.add_argument(
        "--key",
        type=Path,
        action="append",
        required=True,
        metavar="PUB",
        help="an approved public key (PEM) (repeatable)",
    )
    parser.add_argument("--interval", type=float, default=600.0, help="seconds between rounds")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to answer")
    parser.add_argument(
        "--discover",
        type=float,
        default=2.0,
        help="seconds to learn the tables from their retained info before the first round",
    )
    parser.add_argument("--rounds", type=int, default=None, help="stop after N rounds")


def run(args: argparse.Namespace) -> int:
    """Verify the manifests, then authenticate until stopped (or ``--rounds``)."""
    from records.authenticate import Settings
    from records.authenticate import run as serve

    try:
        host, _, port = args.mqtt.rpartition(":")
        keys = public_keys(args.key)
        manifests = tuple(load_manifest(p, keys) for p in args.manifest)
        password = None
        if args.mqtt_password_file is not None:
            password = args.mqtt_password_file.read_text().split("\n")[0]
        settings = Settings(
            host=host or "127.0.0.1",
            port=int(port),
            user=args.mqtt_user or None,
            password=password,
            prefixes=tuple(args.prefix or ["lammer"]),
            manifests=manifests,
            interval=args.interval,
            timeout=args.timeout,
            discover=args.discover,
            ca_file=args.mqtt_ca_file,
        )
    except (ManifestError, OSError, ValueError) as exc:
        print(f"lammer authenticate: {exc}", file=sys.stderr)
        return 2
    for m in manifests:
        print(f"approved: {m.name} (lammer {m.version}, digest {m.digest}, key {m.key})")
    sys.stdout.flush()
    try:
        auth = asyncio.run(serve(settings, rounds=args.rounds))
    except KeyboardInterrupt:
        return 0
    statuses = dict(auth.last_status)
    print(json.dumps({"statuses": statuses, "replays_refused": auth.replays_refused}))
    return 0 if statuses and all(s == "approved" for s in statuses.values()) else 1
