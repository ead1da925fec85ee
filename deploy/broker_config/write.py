"""``generate``: the plan's files written into ``--out`` (credentials first, then passwd, acl,
mosquitto.conf and the bridge broker's files), what it changed, and how each table is wired."""

from __future__ import annotations

import json
import os
import pwd
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deploy import floor
from deploy.broker_config.acl import render_acl
from deploy.broker_config.bridge import render_bridge_acl, render_bridge_conf, render_bridge_unit
from deploy.broker_config.check import check_rendered
from deploy.broker_config.limits import BRIDGE_BROKER_USER
from deploy.broker_config.model import Bridge, BrokerConfigError, BrokerPlan, Table
from deploy.broker_config.passwords import read_passwd, render_passwd
from deploy.broker_config.render import render_conf
from deploy.files import Change, Owner, make_dir, write_file
from deploy.generators import kept_password, stray_credentials


@dataclass(frozen=True, slots=True)
class Wiring:
    """Whether a table's configuration logs its daemon in as this broker expects."""

    table: Table
    wired: bool
    reason: str  # why not (empty when wired)
    password_copy: Path  # where the hint puts the daemon's copy of its password


@dataclass(slots=True)
class Generated:
    """What ``generate`` wrote (``changes``, in order) and how each table is wired."""

    plan: BrokerPlan
    changes: list[Change] = field(default_factory=list)
    wiring: list[Wiring] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _broker_owner(plan: BrokerPlan) -> Owner | None:
    """The broker user's ids when we may chown (running as root), else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(plan.broker_user)
    except KeyError:
        raise BrokerConfigError(
            [
                f"--broker-user: no user {plan.broker_user!r} on this machine (Debian's "
                "mosquitto package creates 'mosquitto'): Mosquitto drops to it to read passwd"
            ]
        ) from None
    return Owner(entry.pw_uid, entry.pw_gid)


def generate(plan: BrokerPlan) -> Generated:
    """Write the plan's files (the package docstring), keeping every password that exists.

    Credentials first, then passwd, acl and mosquitto.conf, each replaced atomically, so a
    run cut short leaves every file whole and the next run completes it. Raises
    ``BrokerConfigError`` for a credentials file that cannot be used, ``OSError`` when a
    file cannot be written.
    """
    result = Generated(plan)
    owner = _broker_owner(plan)
    make_dir(plan.out, 0o755, result.changes, fix_mode=False)
    make_dir(plan.credentials_dir, 0o700, result.changes, fix_mode=True)

    passwords, bridge_password = _passwords(plan, result)

    try:
        existing = read_passwd(plan.passwd_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        existing = {}
    conf, acl = render_conf(plan, bridge_password), render_acl(plan)
    passwd = render_passwd(plan.users, passwords, existing)
    local_password = passwords.get(BRIDGE_BROKER_USER)
    bridge_conf = render_bridge_conf(plan, bridge_password, local_password)
    check_rendered(plan, conf, acl, passwd, bridge_password, bridge_conf, local_password)

    conf_owner = None if owner is None else Owner(0, owner.gid)
    detail = _passwd_detail(existing, passwd)
    result.changes.append(write_file(plan.passwd_path, passwd, 0o600, owner, detail=detail))
    result.changes.append(write_file(plan.acl_path, acl, 0o600, owner, show_diff=True))
    result.changes.append(write_file(plan.conf_path, conf, 0o640, conf_owner, show_diff=True))
    _write_bridge_broker(plan, bridge_conf, owner, result)
    if plan.bridge is not None and bridge_password is not None:
        declaration = _declaration(plan, plan.bridge, bridge_password)
        result.changes.append(
            write_file(plan.declaration_path, declaration.to_json(), 0o600, None, show_diff=True)
        )
    elif plan.declaration_path.exists():
        result.changes.append(
            Change(
                plan.declaration_path,
                "left",
                "no --bridge: this controller is not bridged to the floor any more; delete the "
                "file (and its controller from floor-config)",
            )
        )

    _note_setup(plan, owner, result)
    result.wiring = [_wiring(t, passwords[t.user]) for t in plan.tables]
    return result


def _passwords(plan: BrokerPlan, result: Generated) -> tuple[dict[str, str], str | None]:
    """Every user's password, and the floor bridge's (None without one), each kept from its
    credentials file or made there; a credentials file of no user is reported, not deleted."""
    passwords = {u.name: _password_for(plan, u.name, result) for u in plan.users}
    known = {u.name for u in plan.users}
    bridge_password: str | None = None
    if plan.bridge is not None:
        bridge_password = _password_for(plan, plan.bridge.user, result)
        known.add(plan.bridge.user)
    stray_credentials(
        plan.credentials_dir,
        known,
        result.changes,
        "no table given has this user: it is in neither passwd nor acl any more; delete the file",
    )
    return passwords, bridge_password


def _note_setup(plan: BrokerPlan, owner: Owner | None, result: Generated) -> None:
    """What the operator must still do or know before the broker starts."""
    if not plan.data_dir.is_dir():
        result.notes.append(
            f"{plan.data_dir} (--data-dir) does not exist: create it, owned by "
            f"{plan.broker_user!r}, before the broker starts (it keeps its state there)"
        )
    if owner is None and plan.broker_user != _me():
        result.notes.append(
            f"passwd and acl are readable by {_me()} only: Mosquitto started as root reads "
            f"them as {plan.broker_user!r}; run broker-config as root, or chown them"
        )
    for listener in plan.listeners:
        if listener.purpose == "network" and listener.tls is None:
            result.notes.append(
                f"the network listener {listener.endpoint} is plain: passwords and decisions "
                "cross the network in clear (give --tls-cert, --tls-key and --tls-ca)"
            )


def _write_bridge_broker(
    plan: BrokerPlan, bridge_conf: str, owner: Owner | None, result: Generated
) -> None:
    """bridge.conf, bridge.acl and the unit with a bridge; without one, each left there is
    reported for deletion."""
    if plan.bridge is not None:
        conf_owner = None if owner is None else Owner(0, owner.gid)
        result.changes.append(
            write_file(plan.bridge_conf_path, bridge_conf, 0o640, conf_owner, show_diff=True)
        )
        result.changes.append(
            write_file(plan.bridge_acl_path, render_bridge_acl(plan), 0o600, owner)
        )
        result.changes.append(
            write_file(plan.bridge_unit_path, render_bridge_unit(plan), 0o644, None)
        )
        if not plan.bridge.data_dir.is_dir():
            result.notes.append(
                f"{plan.bridge.data_dir} does not exist: create it, owned by "
                f"{plan.broker_user!r}, before the bridge broker starts (its queue for the floor)"
            )
    else:
        for path in (plan.bridge_conf_path, plan.bridge_acl_path, plan.bridge_unit_path):
            if path.exists():
                result.changes.append(
                    Change(path, "left", "no --bridge: the bridge broker is not needed; delete it")
                )


def _declaration(plan: BrokerPlan, bridge: Bridge, password: str) -> floor.Declaration:
    """What floor-config is told of this controller; the bcrypt hash of the existing
    declaration is kept while it verifies (so the file does not churn with new salts)."""
    hashed: str | None = None
    try:
        old = floor.parse_declaration(plan.declaration_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, floor.FloorError):
        old = None
    if old is not None and floor.verify_password(password, old.password_bcrypt):
        hashed = old.password_bcrypt
    tables = tuple(
        floor.DeclaredTable(t.table_id, t.base, t.config.table.game) for t in plan.tables
    )
    return floor.Declaration(bridge.controller, hashed or floor.hash_password(password), tables)


def _me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _passwd_detail(existing: Mapping[str, str], new_text: str) -> str:
    new = read_passwd(new_text)
    added = sorted(set(new) - set(existing))
    removed = sorted(set(existing) - set(new))
    rehashed = sorted(u for u in set(new) & set(existing) if new[u] != existing[u])
    parts = []
    if added:
        parts.append("added " + ", ".join(added))
    if removed:
        parts.append("removed " + ", ".join(removed))
    if rehashed:
        parts.append("new hash for " + ", ".join(rehashed) + " (it did not match credentials/)")
    return "; ".join(parts)


def _password_for(plan: BrokerPlan, user: str, result: Generated) -> str:
    """The user's password: kept from its credentials file, or made and written there."""
    return kept_password(plan.credential_path(user), result.changes, BrokerConfigError)


def _wiring(table: Table, password: str) -> Wiring:
    copy = table.config_path.absolute().parent / f"{table.table_id}.mqtt-password"
    mqtt = table.config.mqtt
    if mqtt.username != table.user:
        got = "not set" if mqtt.username is None else f"{mqtt.username!r}"
        return Wiring(table, False, f"[mqtt] username is {got}", copy)
    try:
        current = mqtt.read_password()
    except (OSError, UnicodeDecodeError) as exc:
        return Wiring(table, False, f"[mqtt] password_file cannot be read ({exc})", copy)
    if current is None:
        return Wiring(table, False, "[mqtt] password_file is not set", copy)
    if current != password:
        return Wiring(
            table, False, f"{mqtt.password_file} does not hold credentials/{table.user}", copy
        )
    return Wiring(table, True, "", copy)


def wiring_lines(wiring: Wiring, plan: BrokerPlan) -> list[str]:
    """How to wire a table that is not: copy its password for the daemon's user and add two
    lines to its ``[mqtt]`` (TOML strings, shell-quoted paths)."""
    t = wiring.table
    source = plan.credential_path(t.user)
    relative = wiring.password_copy.name
    return [
        f"install -m 0600 -o lammer -g lammer {shlex.quote(str(source))} "
        f"{shlex.quote(str(wiring.password_copy))}",
        f"username = {json.dumps(t.user, ensure_ascii=False)}",
        f"password_file = {json.dumps(relative, ensure_ascii=False)}",
    ]
