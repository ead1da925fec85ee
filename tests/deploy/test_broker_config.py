"""``lammer broker-config``: the files it writes, their modes, passwords kept across runs,
hashes as Debian's ``mosquitto_passwd`` 2.0 writes them, and hostile inputs.

What a real Mosquitto does with the files (who may connect, read, publish) is tested in
``tests/integration/test_broker_access.py``.
"""

from __future__ import annotations

import base64
import contextlib
import os
import pwd
import shutil
import stat
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main
from daemon.config import MqttSection, TableConfig, TableSection, validate_config
from daemon.errors import ConfigFileError
from daemon.journal import Journal
from daemon.publications import state_publications
from deploy import broker_config as bc
from deploy.files import new_password
from rules.table import Alarm, DeviceState, TableState
from tests.conftest import CLI_BOUND_S

MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
NOW = datetime(2026, 11, 29, 14, 3, 7, 123000, tzinfo=UTC)


def table_toml(
    table_id: str, *, port: int = 1883, host: str = "127.0.0.1", extra_mqtt: str = ""
) -> str:
    """A minimal CRAPS table configuration (the port is never opened here)."""
    return (
        f'[table]\nid = "{table_id}"\ngame = "CRAPS"\n[dice_reader]\nport = "/dev/null"\n'
        f'[mqtt]\nhost = "{host}"\nport = {port}\n{extra_mqtt}'
    )


def write_table(tmp_path: Path, table_id: str, **kwargs: Any) -> Path:
    path = tmp_path / f"{table_id}.toml"
    path.write_text(table_toml(table_id, **kwargs))
    return path


def run_cli(
    capsys: pytest.CaptureFixture[str], out: Path, *configs: Path, extra: tuple[str, ...] = ()
) -> tuple[int, list[str], str]:
    """``lammer broker-config`` in process: (status, stdout lines, stderr)."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    status = main(
        [
            "broker-config",
            "--out",
            str(out),
            "--data-dir",
            str(out.parent / "data"),
            "--broker-user",
            me,
            *extra,
            *map(str, configs),
        ]
    )
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``out``: its bytes and mode."""
    return {
        str(p.relative_to(out)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mode & 0o777)
        for p in sorted(out.rglob("*"))
    }


def status_of(lines: list[str], name: str) -> str:
    """The status word of ``name`` in the report (``created``, ``kept``...)."""
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[1] == name:
            return words[0]
    raise AssertionError(f"{name} not in the report:\n" + "\n".join(lines))


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def config_of(table_id: str, **mqtt: Any) -> TableConfig:
    return validate_config(
        {
            "table": {"id": table_id, "game": "CRAPS"},
            "dice_reader": {"port": "x"},
            "mqtt": mqtt,
        }
    )


# ---------------------------------------------------------------------------------------
# Password hashes: exactly mosquitto_passwd 2.0's


def _mosquitto_passwd_line(tmp_path: Path, user: str, password: str) -> str:
    path = tmp_path / "by-mosquitto-passwd"
    done = subprocess.run(
        [MOSQUITTO_PASSWD, "-c", "-b", str(path), user, password],
        capture_output=True,
        timeout=CLI_BOUND_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (line,) = path.read_text().splitlines()
    return line


def test_hash_is_byte_for_byte_what_mosquitto_passwd_writes(tmp_path: Path) -> None:
    password = "correct horse battery staple ü"
    line = _mosquitto_passwd_line(tmp_path, "display", password)
    user, hashed = line.split(":", 1)
    assert user == "display"
    # Same salt, same password: the same line, so Mosquitto reads ours as its own.
    salt = base64.b64decode(hashed.split("$")[3])
    assert bc.hash_password(password, salt=salt) == hashed
    assert bc.verify_password(password, hashed)
    assert not bc.verify_password(password + "x", hashed)
    ours = bc.hash_password(password)
    assert ours != hashed  # a fresh salt every time
    assert ours.startswith("$7$101$")
    assert bc.verify_password(password, ours)


@pytest.mark.parametrize(
    "encoded",
    [
        "",
        "$6$c2FsdA==$aGFzaA==",
        "$7$101$bad$base64",
        "$7$0$AAAAAAAAAAAAAAAA$" + "A" * 88,
        "$7$101$AAAA$" + "A" * 88,  # a salt of 3 bytes
        "plain",
    ],
)
def test_anything_but_a_good_pbkdf2_hash_does_not_verify(encoded: str) -> None:
    assert not bc.verify_password("x", encoded)


# ---------------------------------------------------------------------------------------
# Files, modes, and a second run


def test_files_and_modes_whatever_the_umask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configs = [write_table(tmp_path, "t1"), write_table(tmp_path, "t2")]
    out = tmp_path / "broker"
    with umask(0o000):
        status, lines, err = run_cli(capsys, out, *configs)
    assert status == 0, err
    files = snapshot(out)
    users = ["display", "lammer-t1", "lammer-t2", "records", "terminal"]
    assert sorted(files) == sorted(
        ["acl", "credentials", "mosquitto.conf", "passwd", *(f"credentials/{u}" for u in users)]
    )
    assert files["mosquitto.conf"][1] == 0o640
    assert files["passwd"][1] == 0o600
    assert files["acl"][1] == 0o600
    assert files["credentials"][1] == 0o700
    for user in users:
        secret, mode = files[f"credentials/{user}"]
        assert mode == 0o600
        password = secret.decode().rstrip("\n")
        assert len(password) == 32
        assert secret.endswith(b"\n")
        assert status_of(lines, f"credentials/{user}") == "created"
    passwd = bc.read_passwd(files["passwd"][0].decode())
    assert sorted(passwd) == users
    for user in users:
        assert bc.verify_password(
            files[f"credentials/{user}"][0].decode().rstrip("\n"), passwd[user]
        )
    # Every password differs (secrets, not a pattern).
    assert len({files[f"credentials/{u}"][0] for u in users}) == len(users)


def test_a_second_run_changes_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configs = [write_table(tmp_path, "t1"), write_table(tmp_path, "t2")]
    out = tmp_path / "broker"
    assert run_cli(capsys, out, *configs)[0] == 0
    before = snapshot(out)
    status, lines, _ = run_cli(capsys, out, *reversed(configs))  # order does not matter
    assert status == 0
    assert snapshot(out) == before
    for name in ("passwd", "acl", "mosquitto.conf"):
        assert status_of(lines, name) == "unchanged"
    for user in ("display", "terminal", "records", "lammer-t1", "lammer-t2"):
        assert status_of(lines, f"credentials/{user}") == "kept"


def test_a_table_added_keeps_every_password_and_shows_the_acl_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t1, t2 = write_table(tmp_path, "t1"), write_table(tmp_path, "t2")
    out = tmp_path / "broker"
    assert run_cli(capsys, out, t1)[0] == 0
    before = snapshot(out)
    status, lines, _ = run_cli(capsys, out, t1, t2)
    assert status == 0
    after = snapshot(out)
    for user in ("display", "terminal", "lammer-t1"):
        assert after[f"credentials/{user}"] == before[f"credentials/{user}"]
    old_lines = set(before["passwd"][0].decode().splitlines())
    new_lines = set(after["passwd"][0].decode().splitlines())
    assert old_lines < new_lines  # the old hashes kept byte for byte, one line added
    assert [line.split(":")[0] for line in new_lines - old_lines] == ["lammer-t2"]
    assert status_of(lines, "credentials/lammer-t2") == "created"
    assert any(
        line.startswith("  updated   passwd") and "added lammer-t2" in line for line in lines
    )
    assert status_of(lines, "acl") == "updated"
    assert "    +topic write lammer/t2/request/+" in lines
    assert "    +user lammer-t2" in lines

    # Taken off again: its user goes from passwd and acl, its credentials file is left,
    # and the report says so.
    status, lines, _ = run_cli(capsys, out, t1)
    assert status == 0
    assert "lammer-t2" not in bc.read_passwd((out / "passwd").read_text())
    assert "lammer-t2" not in (out / "acl").read_text()
    assert status_of(lines, "credentials/lammer-t2") == "left"
    assert any("removed lammer-t2" in line for line in lines)


def test_a_line_written_by_mosquitto_passwd_is_kept_and_a_stale_one_rehashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t1 = write_table(tmp_path, "t1")
    out = tmp_path / "broker"
    assert run_cli(capsys, out, t1)[0] == 0
    password = "a-password-chosen-by-the-operator"
    (out / "credentials" / "display").write_text(password + "\n")
    theirs = _mosquitto_passwd_line(tmp_path, "display", password)
    passwd = out / "passwd"
    lines = passwd.read_text().splitlines()
    lines = [theirs if line.startswith("display:") else line for line in lines]
    passwd.write_text("\n".join(lines) + "\n")
    status, report, _ = run_cli(capsys, out, t1)
    assert status == 0
    assert theirs in passwd.read_text().splitlines()  # it verifies: kept byte for byte
    assert status_of(report, "passwd") == "unchanged"

    # The credentials file is the truth: a passwd line that no longer matches is rehashed.
    (out / "credentials" / "terminal").write_text("another-password-for-terminals\n")
    status, report, _ = run_cli(capsys, out, t1)
    assert status == 0
    hashed = bc.read_passwd(passwd.read_text())["terminal"]
    assert bc.verify_password("another-password-for-terminals", hashed)
    assert any("new hash for terminal" in line for line in report)


def test_loosened_modes_are_fixed_and_a_bad_password_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t1 = write_table(tmp_path, "t1")
    out = tmp_path / "broker"
    assert run_cli(capsys, out, t1)[0] == 0
    (out / "credentials").chmod(0o755)
    (out / "credentials" / "display").chmod(0o644)
    (out / "passwd").chmod(0o644)
    status, lines, _ = run_cli(capsys, out, t1)
    assert status == 0
    assert stat.S_IMODE((out / "credentials").stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "credentials" / "display").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "passwd").stat().st_mode) == 0o600
    assert status_of(lines, "credentials/display") == "fixed"
    assert status_of(lines, "passwd") == "fixed"

    before = snapshot(out)
    (out / "credentials" / "terminal").write_text("short\n")
    status, _, err = run_cli(capsys, out, t1)
    assert status == 2
    assert f"{out / 'credentials' / 'terminal'}: the password is shorter than 16" in err
    assert "nothing written" in err
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k != "credentials/terminal"} == {
        k: v for k, v in before.items() if k != "credentials/terminal"
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give files to another user")
def test_as_root_passwd_and_acl_belong_to_the_broker_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        broker = pwd.getpwnam("mosquitto")
    except KeyError:
        pytest.skip("no mosquitto user (Debian's package creates it)")
    out = tmp_path / "broker"
    status = main(
        ["broker-config", "--out", str(out), "--data-dir", str(tmp_path / "data"),
         str(write_table(tmp_path, "t1"))]
    )  # fmt: skip
    capsys.readouterr()
    assert status == 0
    for name in ("passwd", "acl"):
        st_ = (out / name).stat()
        assert (st_.st_uid, st_.st_gid) == (broker.pw_uid, broker.pw_gid)
    conf = (out / "mosquitto.conf").stat()
    assert (conf.st_uid, conf.st_gid) == (0, broker.pw_gid)
    assert "user mosquitto" in (out / "mosquitto.conf").read_text().splitlines()
    assert (out / "credentials").stat().st_uid == 0


def test_a_mosquitto_conf_not_written_by_broker_config_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "etc-mosquitto"
    out.mkdir()
    (out / "mosquitto.conf").write_text("pid_file /run/mosquitto/mosquitto.pid\n")
    status, _, err = run_cli(capsys, out, write_table(tmp_path, "t1"))
    assert status == 2
    assert f"--out: {out / 'mosquitto.conf'} was not written by broker-config" in err
    assert sorted(p.name for p in out.iterdir()) == ["mosquitto.conf"]


def test_wiring_lines_and_a_wired_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t1 = write_table(tmp_path, "t1")
    out = tmp_path / "broker"
    status, lines, _ = run_cli(capsys, out, t1)
    assert status == 0
    copy = tmp_path / "t1.mqtt-password"
    assert f"t1 ({t1}): not wired to this broker ([mqtt] username is not set). " in lines[-5]
    assert lines[-4:-1] == [
        f"    install -m 0600 -o lammer -g lammer {out}/credentials/lammer-t1 {copy}",
        '    username = "lammer-t1"',
        '    password_file = "t1.mqtt-password"',
    ]
    # Wired as told: the configuration now logs in, and the report says so.
    shutil.copy(out / "credentials" / "lammer-t1", copy)
    copy.chmod(0o600)
    t1.write_text(
        table_toml("t1", extra_mqtt='username = "lammer-t1"\npassword_file = "t1.mqtt-password"\n')
    )
    status, lines, _ = run_cli(capsys, out, t1)
    assert status == 0
    assert f"t1 ({t1}): logs in as lammer-t1 ({copy})" in lines
    # A stale copy is noticed.
    copy.write_text("an-old-password-from-before\n")
    status, lines, _ = run_cli(capsys, out, t1)
    assert any(f"({copy} does not hold credentials/lammer-t1)" in line for line in lines)


def _reads(base: str) -> list[bc.Grant]:
    groups = ("bust_bonus", "cover_all", "craps", "response")
    return [bc.Grant("read", f"{base}/+"), *(bc.Grant("read", f"{base}/{g}/#") for g in groups)]


def test_generated_files_read_back_as_the_plan(tmp_path: Path) -> None:
    plan = bc.plan_broker(
        [
            (tmp_path / "a.toml", config_of("t1")),
            (tmp_path / "b.toml", config_of("t2", prefix="x/y")),
        ],
        out=tmp_path / "out",
        listen="0.0.0.0:8883",
    )
    acl = bc.read_acl(bc.render_acl(plan))
    assert acl == {
        # Each daemon also reads the floor bridge's status (floor_resend), never writes it.
        "lammer-t1": [
            bc.Grant("readwrite", "lammer/t1/#"),
            bc.Grant("read", "lammer-floor/bridge/+"),
        ],
        "lammer-t2": [bc.Grant("readwrite", "x/y/t2/#"), bc.Grant("read", "lammer-floor/bridge/+")],
        # Displays and terminals read every topic the daemon publishes, never the requests
        # (written out here, not derived: a new group must be granted on purpose); a
        # display may ask for a resend at its own name and publish nothing else
        # (mqtt-api.md 1.4: no longer the bare request/resend, the terminal's); it reads
        # the integrity alarms lammer records publishes (the pit draws them).
        "display": [
            *_reads("lammer/t1"),
            bc.Grant("write", "lammer/t1/request/resend/display"),
            *_reads("x/y/t2"),
            bc.Grant("write", "x/y/t2/request/resend/display"),
            bc.Grant("read", "lammer-floor/integrity/+"),
            bc.Grant("read", "lammer-floor/software/+"),
        ],
        "terminal": [
            *_reads("lammer/t1"),
            bc.Grant("write", "lammer/t1/request/+"),
            *_reads("x/y/t2"),
            bc.Grant("write", "x/y/t2/request/+"),
        ],
        # lammer records: reads every table, asks for resends and (lammer authenticate)
        # software authentication at its own name (1.4), publishes integrity alarms and
        # the software status.
        "records": [
            bc.Grant("read", "lammer/t1/#"),
            bc.Grant("write", "lammer/t1/request/resend/records"),
            bc.Grant("write", "lammer/t1/request/authenticate/records"),
            bc.Grant("read", "x/y/t2/#"),
            bc.Grant("write", "x/y/t2/request/resend/records"),
            bc.Grant("write", "x/y/t2/request/authenticate/records"),
            bc.Grant("write", "lammer-floor/integrity/+"),
            bc.Grant("write", "lammer-floor/software/+"),
        ],
    }
    conf = dict(bc.read_conf(bc.render_conf(plan)))
    assert conf["allow_anonymous"] == "false"
    assert conf["set_tcp_nodelay"] == "true"
    assert conf["message_size_limit"] == str(256 * 1024)
    assert conf["persistence"] == "true"
    listeners = [v for k, v in bc.read_conf(bc.render_conf(plan)) if k == "listener"]
    assert listeners == ["1883 127.0.0.1", "8883 0.0.0.0"]


# ---------------------------------------------------------------------------------------
# Hostile and inconsistent inputs


def _problems(tables: list[tuple[str, TableConfig]], tmp_path: Path, **options: Any) -> list[str]:
    with pytest.raises(bc.BrokerConfigError) as info:
        bc.plan_broker(
            [(tmp_path / f"{name}.toml", c) for name, c in tables], out=tmp_path / "out", **options
        )
    assert not (tmp_path / "out").exists()
    return list(info.value.problems)


def test_tables_that_cannot_share_one_broker_are_refused(tmp_path: Path) -> None:
    found = _problems(
        [
            ("a", config_of("t1")),
            ("b", config_of("t2", port=1884)),
            ("c", config_of("t3", port=1884)),
        ],
        tmp_path,
    )
    assert found == [
        "the tables name different brokers in [mqtt] host and port: 127.0.0.1:1883 (t1); "
        "127.0.0.1:1884 (t2, t3). One broker-config serves one broker: give the tables of one "
        "controller, with the same host and port"
    ]
    found = _problems([("a", config_of("t1", host="192.168.1.20"))], tmp_path)
    assert found == [
        "[mqtt] host '192.168.1.20' of t1 is not a loopback address: the daemons and this "
        "broker run on one controller (127.0.0.1); the network listener is --listen"
    ]


def test_duplicate_ids_client_ids_and_nested_base_topics_are_refused(tmp_path: Path) -> None:
    found = _problems(
        [
            ("a", config_of("t1")),
            ("b", config_of("t1", prefix="other")),
            ("c", config_of("t2", client_id="shared")),
            ("d", config_of("t3", client_id="shared")),
            ("e", config_of("x", prefix="lammer/t2")),
        ],
        tmp_path,
    )
    assert f"table id 't1' is given more than once: {tmp_path}/a.toml, {tmp_path}/b.toml" in found
    assert (
        "tables t2, t3 use the same MQTT client id 'shared': each would disconnect the other "
        "([mqtt] client_id)" in found
    )
    assert (
        "table t2's base topic lammer/t2 holds table x's lammer/t2/x: t2's daemon could write "
        "x's state ([mqtt] prefix)" in found
    )
    assert len(found) == 3


def test_ids_that_cannot_name_a_mosquitto_user_or_a_file_are_refused(tmp_path: Path) -> None:
    long_id = "\U0001f3b2" * 64  # 64 characters of 4 bytes: 263 bytes with "lammer-"
    found = _problems([("a", config_of("a:b")), ("b", config_of(long_id))], tmp_path)
    assert found == [
        f"a:b ({tmp_path}/a.toml): table id 'a:b' cannot name a Mosquitto user "
        "(':' separates the user from its hash in passwd)",
        f"{long_id} ({tmp_path}/b.toml): user name 'lammer-{long_id}' is 263 bytes in UTF-8, "
        "more than the 255 a file name (its credentials file) may have",
    ]


def test_tls_in_a_table_config_and_bad_listeners_are_refused(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    found = _problems([("a", config_of("t1", tls={"ca_file": str(ca)}))], tmp_path)
    assert found == [
        f"t1 ({tmp_path}/a.toml): [mqtt.tls] is set, but the daemons reach this broker on "
        "plain loopback: remove [mqtt.tls] (TLS is for the network listener)"
    ]
    for listen, problem in [
        ("127.0.0.1:1883", "--listen 127.0.0.1:1883 is the daemons' listener already"),
        ("0.0.0.0:1883", "--listen 0.0.0.0:1883 would also bind the daemons' listener"),
        ("[::1]:1883", "--listen [::1]:1883 would also bind the daemons' listener"),
        ("0.0.0.0", "--listen: expected HOST:PORT (or [IPv6]:PORT), got '0.0.0.0'"),  # noqa: S104  a refused --listen, not a bind
        ("0.0.0.0:70000", "--listen: port must be between 1 and 65535, got 70000"),
        ("bad host:8883", "--listen: not an IP address or host name: 'bad host'"),
        ("[nope]:8883", "--listen: not an IPv6 address: 'nope'"),
    ]:
        (refused,) = _problems([("a", config_of("t1"))], tmp_path, listen=listen)
        assert refused.startswith(problem), refused


def test_tls_files_are_checked(tmp_path: Path) -> None:
    cert, key, ca = tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "ca.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    key.chmod(0o644)
    found = _problems([("a", config_of("t1"))], tmp_path, tls=(cert, key, ca))
    assert found == [
        f"--tls-key: {key} is readable by every user (mode 0644): chmod o-rwx {key}",
        f"--tls-ca: cannot read {ca}: No such file or directory",
    ]
    key.chmod(0o640)
    ca.write_text("not a certificate")
    found = _problems([("a", config_of("t1"))], tmp_path, tls=(cert, key, ca))
    assert found == [f"--tls-ca: {ca} is not a PEM file holding BEGIN CERTIFICATE"]
    plan = bc.plan_broker(
        [(tmp_path / "a.toml", config_of("t1"))],
        out=tmp_path / "o",
        tls=(cert, key, ca.with_name("c.pem")),
    )
    (network,) = [listener for listener in plan.listeners if listener.purpose == "network"]
    assert str(network.endpoint) == "0.0.0.0:8883"  # the default with TLS


def test_paths_and_broker_user_that_would_break_a_line_are_refused(tmp_path: Path) -> None:
    found = _problems(
        [("a", config_of("t1"))],
        tmp_path,
        data_dir=Path("/var/lib/mosquitto\nallow_anonymous true"),
        broker_user="root\nallow_anonymous true",
    )
    assert found == [
        "--data-dir: must be one line of printable characters without leading or trailing "
        "spaces, got '/var/lib/mosquitto\\nallow_anonymous true'",
        "--broker-user: not a system user name: 'root\\nallow_anonymous true'",
    ]


@pytest.mark.parametrize(
    ("table_id", "prefix"),
    [
        ("t1\ntopic readwrite #", "lammer"),  # a grant of everything, on a line of its own
        ("t1", "lammer\nuser display\ntopic write lammer"),
        ("t1 ", "lammer"),  # Mosquitto trims user names: lammer-t1 would be another user
    ],
)
def test_an_injected_line_is_caught_before_anything_is_written(
    tmp_path: Path, table_id: str, prefix: str
) -> None:
    # daemon.config refuses these; a configuration built around its checks must still not
    # reach a file: every file is read back as Mosquitto reads it before it is written.
    hostile = TableConfig.model_construct(
        table=TableSection.model_construct(id=table_id, game="CRAPS"),
        mqtt=MqttSection.model_construct(prefix=prefix),
    )
    with pytest.raises(ConfigFileError):
        validate_config({"table": {"id": table_id, "game": "CRAPS"}, "mqtt": {"prefix": prefix}})
    plan = bc.plan_broker([(tmp_path / "a.toml", hostile)], out=tmp_path / "out")
    with pytest.raises(bc.BrokerConfigError) as info:
        bc.generate(plan)
    assert any("does not read back" in p for p in info.value.problems), info.value.problems
    assert not (tmp_path / "out" / "acl").exists()
    assert not (tmp_path / "out" / "passwd").exists()


# Table ids and prefixes as daemon.config accepts them: letters, digits, punctuation and
# symbols of any script, but for the characters it refuses (what it refuses is tested in
# tests/daemon/test_config.py).
_ID_CHARS = st.characters(
    whitelist_categories=("L", "M", "N", "P", "S"), blacklist_characters="/+#."
)
_IDS = st.text(_ID_CHARS, min_size=1, max_size=64)
_PREFIXES = (
    st.lists(st.text(_ID_CHARS, min_size=1, max_size=12), min_size=1, max_size=4)
    .map("/".join)
    .filter(lambda prefix: not prefix.startswith("$"))  # MQTT's system topics: refused
)


@pytest.mark.heavy
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(_IDS, min_size=1, max_size=3, unique=True), prefix=_PREFIXES)
def test_any_accepted_ids_and_prefix_read_back_exactly(
    tmp_path: Path, ids: list[str], prefix: str
) -> None:
    tables = [(tmp_path / f"{i}.toml", config_of(t, prefix=prefix)) for i, t in enumerate(ids)]
    # Only what the planner documents is refused: ':' in an id, a name too long for a file.
    if any(":" in t or len(bc.daemon_user(t).encode()) > 255 for t in ids):
        with pytest.raises(bc.BrokerConfigError):
            bc.plan_broker(tables, out=tmp_path / "out")
        return
    plan = bc.plan_broker(tables, out=tmp_path / "out")
    passwords = {u.name: new_password() for u in plan.users}
    # Raises if any file does not mean exactly the plan when read as Mosquitto reads it.
    bc.check_rendered(
        plan, bc.render_conf(plan), bc.render_acl(plan), bc.render_passwd(plan.users, passwords, {})
    )
    for user in plan.users:
        for grant in user.grants:
            assert bc.topic_filter_problem(grant.topic) is None


# ---------------------------------------------------------------------------------------
# The message size limit holds the largest payload a daemon publishes


def test_largest_state_payload_fits_the_limit_with_margin(tmp_path: Path) -> None:
    # link-layer.md: a BODY is at most 240 bytes, so "STATUS,9999,<code>,<text>" leaves 227
    # for code and text; text may hold '"' and '\\', which JSON doubles. At most 32 device
    # codes per device are kept (the rest are one DEVICE_FAULT_OTHER), beside the table's own
    # alarms (DISCONNECTED, MODE_MISMATCH, DECK_FAULT, UNEXPECTED_FRAME, LINK_ERRORS,
    # ROLL_BACKLOG, JOURNAL_FAULT, DISK_LOW, CLOCK_JUMP, DEVICE_FAULT_OTHER), here 300
    # characters each (JOURNAL_FAULT's is at most 277, DISK_LOW's about 160).
    alarms = []
    for i in range(32):
        code = f"{'F' * 95}{chr(65 + i // 26)}{chr(65 + i % 26)}"[:97]
        text = '"\\' * 65  # 130 characters, each escaped
        alarms.append(
            Alarm(
                code=f"DEVICE_FAULT_{code}",
                device="shuffler",
                message=f"the shuffler reports {code}: {text}",
                since=NOW,
            )
        )
    for code in ("DISCONNECTED", "MODE_MISMATCH", "DECK_FAULT", "UNEXPECTED_FRAME",
                 "LINK_ERRORS", "ROLL_BACKLOG", "JOURNAL_FAULT", "DISK_LOW", "CLOCK_JUMP",
                 "DEVICE_FAULT_OTHER"):  # fmt: skip
        alarms.append(Alarm(code=code, device="shuffler", message='"' * 300, since=NOW))
    state = TableState(
        game="UTH",
        devices=(("shuffler", DeviceState(connected=True, faults=(("F" * 97, ""),), mode="UTH")),),
        alarms=tuple(alarms),
    )
    [publication] = [p for p in state_publications(state, table="t" * 64) if p.topic == "state"]
    journal = Journal.open(tmp_path / "j.db")
    try:
        message = journal.append_publish(
            publication.topic, publication.body, retained=publication.retained, ts=NOW
        )
    finally:
        journal.close()
    size = len(message.payload)
    assert 20_000 < size <= bc.LARGEST_PAYLOAD  # the bound the limit is sized from
    assert bc.MESSAGE_SIZE_LIMIT >= 8 * bc.LARGEST_PAYLOAD
    assert bc.MESSAGE_SIZE_LIMIT >= bc.REQUEST_MAX
    # Any topic (65,535 bytes) with any message under the limit fits one packet.
    assert bc.MAX_PACKET_SIZE > bc.MESSAGE_SIZE_LIMIT + 65_535 + 1024


def test_a_config_that_does_not_validate_or_half_the_tls_options_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "broker"
    dotted = tmp_path / "dotted.toml"
    dotted.write_text(table_toml("pit.3"))
    status, lines, err = run_cli(capsys, out, write_table(tmp_path, "t1"), dotted)
    assert status == 2
    assert lines == []
    assert err.splitlines()[:2] == [
        f"{dotted}: 1 problem",
        "  table.id: must not hold '.' or spaces (mqtt-api.md: floor brokers such as NATS "
        "refuse them), got 'pit.3' ('.')",
    ]
    assert not out.exists()
    status, _, err = run_cli(
        capsys, out, write_table(tmp_path, "t1"), extra=("--tls-cert", str(dotted))
    )
    assert status == 2
    assert "--tls-cert, --tls-key and --tls-ca go together: give all three" in err
    assert not out.exists()


def test_every_listener_binds_client_ids_to_user_names(tmp_path: Path) -> None:
    plan = bc.plan_broker(
        [(tmp_path / "a.toml", config_of("t1"))],
        out=tmp_path / "out",
        listen="0.0.0.0:8883",
        displays=["lobby", "pit-2"],
        terminals=["stick_1"],
    )
    conf = bc.read_conf(bc.render_conf(plan))
    listeners = [i for i, (key, _) in enumerate(conf) if key == "listener"]
    assert len(listeners) == 2
    for start in listeners:
        section = dict(conf[start : start + 3])
        assert section["use_username_as_clientid"] == "true"
    users = {u.name: u for u in plan.users}
    # A display of its own reads as display does and asks for resends at its own name
    # (mqtt-api.md 1.4: its own budget at the table), never at display's.
    for name in ("display-lobby", "display-pit-2"):
        own = bc.Grant("write", f"lammer/t1/request/resend/{name}")
        shared = bc.Grant("write", "lammer/t1/request/resend/display")
        assert users[name].grants == tuple(
            own if g == shared else g for g in users["display"].grants
        )
        assert shared in users["display"].grants
    assert users["terminal-stick_1"].grants == users["terminal"].grants


@pytest.mark.parametrize(
    ("option", "names", "problem"),
    [
        ("displays", ["Lobby"], "--display 'Lobby': a name is 1 to 63"),
        ("displays", [""], "--display '': a name is 1 to 63"),
        ("displays", ["a" * 64], "--display 'aaaa"),
        ("displays", ["-x"], "--display '-x': a name"),
        ("displays", ["a b"], "--display 'a b': a name"),
        ("displays", ["a:b"], "--display 'a:b': a name"),
        ("displays", ["a\nuser x"], "--display 'a\\nuser x': a name"),
        ("terminals", ["t1", "t1"], "--terminal 't1' is given twice"),
        ("terminals", ["ü"], "--terminal 'ü': a name"),
    ],
)
def test_device_names_that_cannot_be_users_are_refused(
    tmp_path: Path, option: str, names: list[str], problem: str
) -> None:
    with pytest.raises(bc.BrokerConfigError) as info:
        bc.plan_broker(
            [(tmp_path / "a.toml", config_of("t1"))],
            out=tmp_path / "out",
            displays=names if option == "displays" else (),
            terminals=names if option == "terminals" else (),
        )
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems
