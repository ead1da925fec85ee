"""The checks ``plan_broker`` makes of the tables and options: each returns or appends its
problems as sentences naming the table or option, so every one is reported at once."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from deploy.broker_config.limits import BRIDGE_UNIT
from deploy.broker_config.model import GENERATED_BY, ListenerTls, Table
from deploy.files import foreign_files
from foundation.endpoints import Endpoint

SYSTEM_USER: Final = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
"""What ``--broker-user`` may be: a system user's name."""

DEVICE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
"""A display's or a terminal's own name (``--display``, ``--terminal``): its user is
``display-NAME`` or ``terminal-NAME``, which is also its MQTT client id."""


def device_names(
    displays: Sequence[str], terminals: Sequence[str], problems: list[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of ``--display`` and ``--terminal``, checked (problems appended)."""
    checked: list[tuple[str, ...]] = []
    for option, names in (("--display", displays), ("--terminal", terminals)):
        seen: set[str] = set()
        for name in names:
            if not DEVICE_NAME.fullmatch(name):
                problems.append(
                    f"{option} {name!r}: a name is 1 to 63 of a-z, 0-9, _ and -, "
                    "starting with a letter or digit"
                )
            elif name in seen:
                problems.append(f"{option} {name!r} is given twice")
            seen.add(name)
        checked.append(tuple(sorted(seen)))
    return checked[0], checked[1]


def table_problems(tables: Sequence[Table]) -> list[str]:
    problems: list[str] = []
    by_id: dict[str, list[Table]] = {}
    by_client: dict[str, list[Table]] = {}
    for t in tables:
        by_id.setdefault(t.table_id, []).append(t)
        by_client.setdefault(t.config.client_id, []).append(t)
        where = f"{t.table_id} ({t.config_path})"
        if ":" in t.table_id:
            problems.append(
                f"{where}: table id {t.table_id!r} cannot name a Mosquitto user "
                "(':' separates the user from its hash in passwd)"
            )
        size = len(t.user.encode())
        if size > 255:
            problems.append(
                f"{where}: user name {t.user!r} is {size} bytes in UTF-8, more than the 255 a "
                "file name (its credentials file) may have"
            )
        if t.config.mqtt.tls is not None:
            problems.append(
                f"{where}: [mqtt.tls] is set, but the daemons reach this broker on plain "
                "loopback: remove [mqtt.tls] (TLS is for the network listener)"
            )
    for table_id, same in by_id.items():
        if len(same) > 1:
            files = ", ".join(str(t.config_path) for t in same)
            problems.append(f"table id {table_id!r} is given more than once: {files}")
    for client_id, same in by_client.items():
        if len(same) > 1 and len({t.table_id for t in same}) > 1:
            ids = ", ".join(t.table_id for t in same)
            problems.append(
                f"tables {ids} use the same MQTT client id {client_id!r}: each would "
                "disconnect the other ([mqtt] client_id)"
            )
    for outer in tables:
        for inner in tables:
            if inner is not outer and inner.base.startswith(outer.base + "/"):
                problems.append(
                    f"table {outer.table_id}'s base topic {outer.base} holds table "
                    f"{inner.table_id}'s {inner.base}: {outer.table_id}'s daemon could "
                    f"write {inner.table_id}'s state ([mqtt] prefix)"
                )
    return problems


def daemons_endpoint(tables: Sequence[Table], problems: list[str]) -> Endpoint | None:
    """The listener the daemons' configurations name (one, on loopback), or None."""
    named: dict[Endpoint, list[str]] = {}
    for t in tables:
        named.setdefault(Endpoint(t.config.mqtt.host, t.config.mqtt.port), []).append(t.table_id)
    if len(named) > 1:
        listed = "; ".join(f"{e} ({', '.join(ids)})" for e, ids in named.items())
        problems.append(
            "the tables name different brokers in [mqtt] host and port: "
            f"{listed}. One broker-config serves one broker: give the tables of one "
            "controller, with the same host and port"
        )
        return None
    if not named:
        return None
    (endpoint,) = named
    if not endpoint.loopback:
        ids = ", ".join(named[endpoint])
        problems.append(
            f"[mqtt] host {endpoint.host!r} of {ids} is not a loopback address: the daemons "
            "and this broker run on one controller (127.0.0.1); the network listener is "
            "--listen"
        )
        return None
    problem = _value_problem(endpoint.host)
    if problem:
        problems.append(f"[mqtt] host: {problem}")
        return None
    return endpoint


def overlap_problems(daemons: Endpoint, network: Endpoint) -> list[str]:
    if network.port != daemons.port:
        return []
    if network.host == daemons.host:
        return [f"--listen {network} is the daemons' listener already ([mqtt] host and port)"]
    if network.wildcard or network.loopback:
        return [
            f"--listen {network} would also bind the daemons' listener {daemons}: "
            "choose another port"
        ]
    return []


def pem_problem(path: Path, marker: str) -> str | None:
    """Why ``path`` is not a readable PEM file holding ``marker``, or None."""
    problem = path_problem(path)
    if problem is not None:
        return problem
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    if marker not in text:
        return f"{path} is not a PEM file holding {marker.strip('-')}"
    return None


def check_tls(cert: Path, key: Path, ca: Path, *, problems: list[str]) -> ListenerTls:
    """The network listener's TLS files of ``--tls-cert``, ``--tls-key`` and ``--tls-ca``,
    each a PEM file of its kind, the key not readable by every user (problems appended)."""
    for option, path, marker in (
        ("--tls-cert", cert, "-----BEGIN CERTIFICATE-----"),
        ("--tls-key", key, "PRIVATE KEY-----"),
        ("--tls-ca", ca, "-----BEGIN CERTIFICATE-----"),
    ):
        problem = pem_problem(path, marker)
        if problem is None and option == "--tls-key" and path.stat().st_mode & 0o007:
            mode = path.stat().st_mode & 0o777
            problem = f"{path} is readable by every user (mode {mode:04o}): chmod o-rwx {path}"
        if problem:
            problems.append(f"{option}: {problem}")
    return ListenerTls(cert.absolute(), key.absolute(), ca.absolute())


def _value_problem(value: str) -> str | None:
    """Why ``value`` cannot be one value of a generated line, or None."""
    if not value:
        return "must not be empty"
    if value != value.strip() or any(not c.isprintable() for c in value):
        return (
            "must be one line of printable characters without leading or trailing "
            f"spaces, got {value!r}"
        )
    return None


def option_problems(out: Path, data_dir: Path, broker_user: str) -> list[str]:
    """The problems of ``--out``, ``--data-dir`` and ``--broker-user``, and of the files in
    ``--out`` that broker-config did not write."""
    problems: list[str] = []
    for what, path in (("--out", out), ("--data-dir", data_dir)):
        problem = path_problem(path)
        if problem:
            problems.append(f"{what}: {problem}")
    if out.exists() and not out.is_dir():
        problems.append(f"--out: {out} is not a directory")
    if not SYSTEM_USER.fullmatch(broker_user):
        problems.append(f"--broker-user: not a system user name: {broker_user!r}")
    return problems + foreign_file_problems(out)


def path_problem(path: Path) -> str | None:
    return _value_problem(str(path))


def foreign_file_problems(out: Path) -> list[str]:
    return foreign_files(
        [
            out / "mosquitto.conf",
            out / "acl",
            out / "bridge.conf",
            out / "bridge.acl",
            out / BRIDGE_UNIT,
        ],
        marker=GENERATED_BY,
        tool="broker-config",
    )
