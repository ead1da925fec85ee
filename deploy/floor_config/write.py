"""``generate``: the plan's files written into ``--out`` (credentials, the CA and the nodes'
certificates, then each node's nats.conf), what it changed, and notes for the operator."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from deploy import floor, floor_tls
from deploy.files import Change, make_dir, write_file
from deploy.floor_config.check import check_rendered
from deploy.floor_config.model import ROUTE, FloorConfigError, FloorPlan
from deploy.floor_config.render import existing_hashes, node_config, render_node
from deploy.floor_config.users import floor_users
from deploy.generators import DISPLAY, RECORDS, TERMINAL, kept_password, stray_credentials

URL_SAFE: Final = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(slots=True)
class Generated:
    """What ``generate`` wrote (``changes``, in order) and notes for the operator."""

    plan: FloorPlan
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def generate(plan: FloorPlan) -> Generated:
    """Write the plan's files, keeping every password (and its hash) that exists.

    Raises ``FloorConfigError`` for a credentials file that cannot be used, ``OSError``
    when a file cannot be written."""
    result = Generated(plan)
    make_dir(plan.out, 0o755, result.changes, fix_mode=False)
    make_dir(plan.credentials_dir, 0o700, result.changes, fix_mode=True)
    passwords = _passwords(plan, result)

    try:
        ca = floor_tls.floor_ca(
            plan.out, plan.cluster, result.changes, ca_cert=plan.ca_cert, ca_key=plan.ca_key
        )
        floor_tls.node_certificates(ca, [plan.node_tls(n) for n in plan.nodes], result.changes)
    except floor_tls.FloorTlsError as exc:
        raise FloorConfigError(exc.problems) from exc

    old = existing_hashes(plan)
    hashes = {
        user: old[user] if floor.verify_password(pw, old.get(user, "")) else floor.hash_password(pw)
        for user, pw in passwords.items()
    }
    users = floor_users(plan, hashes)
    rendered: dict[Path, tuple[str, Any]] = {}
    for node in plan.nodes:
        config = node_config(plan, node, users, (passwords[ROUTE], hashes[ROUTE]))
        rendered[plan.conf_path(node)] = (render_node(plan, node, config, users), config)
    check_rendered(rendered, (plan.install_dir, plan.out))

    for node in plan.nodes:
        make_dir(plan.out / node.name, 0o700, result.changes, fix_mode=True)
        text, _ = rendered[plan.conf_path(node)]
        result.changes.append(write_file(plan.conf_path(node), text, 0o600, None, show_diff=True))
    for path in sorted(plan.out.glob("floor-*/nats.conf")):
        if path not in rendered:
            result.changes.append(Change(path, "left", "no such node any more: delete it"))

    _note_setup(plan, result)
    return result


def _passwords(plan: FloorPlan, result: Generated) -> dict[str, str]:
    """The password of each floor user and of the route, kept from its credentials file or
    made there; a credentials file of no user is reported, not deleted."""
    passwords = {
        user: kept_password(plan.credentials_dir / user, result.changes, FloorConfigError)
        for user in (DISPLAY, TERMINAL, RECORDS, ROUTE)
    }
    if not URL_SAFE.fullmatch(passwords[ROUTE]):
        raise FloorConfigError(
            [
                f"{plan.credentials_dir / ROUTE}: the route password goes into the nodes' "
                "route URLs: letters, digits, '-' and '_' only; delete the file to have a "
                "new one made"
            ]
        )
    stray_credentials(
        plan.credentials_dir, passwords, result.changes, "not a floor user: delete the file"
    )
    return passwords


def _note_setup(plan: FloorPlan, result: Generated) -> None:
    """What the operator should know of the cluster's size and its controllers."""
    if len(plan.nodes) < 3:
        result.notes.append(
            f"{len(plan.nodes)} node{'s' if len(plan.nodes) != 1 else ''}: the floor stops "
            "when one node dies (JetStream needs a majority of 3 replicas); use 3 or 5"
        )
    elif len(plan.nodes) % 2 == 0:
        result.notes.append(
            f"{len(plan.nodes)} nodes: an even number survives no more failures than one "
            "node fewer; use 3 or 5"
        )
    if not plan.controllers:
        result.notes.append(
            "no controller declared: give each controller's floor-controller.json "
            "(lammer broker-config --bridge) and run again"
        )
