"""The table configuration (docs/operators/configuration.md), validated with errors naming
the key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.config import TableConfig, load_config, validate_config
from daemon.errors import ConfigFileError
from drivers.settings import DriverSettings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "config").glob("*.toml"))

# The documented example (docs/operators/configuration.md), but for the port; every key
# operators rely on.
ISSUE_EXAMPLE = """
[table]
id = "t1"
game = "UTH"            # CSP FCP LIR MSP TCP UTH BJ CRAPS

[shuffler]
port = "/dev/serial/by-id/usb-x-if00"
baudrate = 115200

[dice_reader]
port = "socket://127.0.0.1:7001"

[mqtt]
host = "127.0.0.1"
port = 1883
prefix = "lammer"

[journal]
path = "/var/lib/lammer/t1.db"

[bonus_craps]
paytable = 1

[bust_bonus]
decks = 6
dealer_hits_soft_17 = false
"""


def write(tmp_path: Path, text: str, name: str = "table.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigFileError) as info:
        load_config(write(tmp_path, text))
    return info.value.problems


def test_issue_example_loads_with_every_key(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ISSUE_EXAMPLE))
    assert config.table.id == "t1"
    assert config.table.game == "UTH"
    assert config.shuffler is not None
    assert config.shuffler.port == "/dev/serial/by-id/usb-x-if00"
    assert config.shuffler.baudrate == 115200
    assert config.dice_reader is not None
    assert config.dice_reader.port == "socket://127.0.0.1:7001"
    assert (config.mqtt.host, config.mqtt.port, config.mqtt.prefix) == ("127.0.0.1", 1883, "lammer")
    assert config.journal_path == Path("/var/lib/lammer/t1.db")
    assert config.bonus_craps.paytable == 1
    assert config.bust_bonus.decks == 6
    assert config.bust_bonus.dealer_hits_soft_17 is False
    assert config.base_topic == "lammer/t1"
    # A UTH table uses neither the dice reader nor the craps and blackjack settings.
    assert sorted(n.split(":")[0] for n in config.notes()) == [
        "bonus_craps",
        "bust_bonus",
        "dice_reader",
    ]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_configs_are_valid(path: Path) -> None:
    config = load_config(path)
    assert config.notes() == []
    if config.table.game == "CRAPS":
        assert config.dice_reader is not None
        assert config.shuffler is None
    else:
        assert config.shuffler is not None
        assert config.dice_reader is None
    # The unit's StateDirectory and the udev rules' names (tests/daemon/test_systemd.py).
    assert config.journal_path.parent == Path("/var/lib/lammer")
    device = config.shuffler or config.dice_reader
    assert device is not None
    assert device.port.startswith("/dev/lammer/")


def test_examples_cover_a_poker_a_craps_and_a_bj_table() -> None:
    games = {tomllib.loads(p.read_text())["table"]["game"] for p in EXAMPLES}
    assert {"CRAPS", "BJ"} <= games
    assert games & {"CSP", "FCP", "LIR", "MSP", "TCP", "UTH"}


def test_defaults(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, '[table]\nid = "t7"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n')
    )
    assert config.client_id == "lammer-t7"
    assert config.journal_path == Path("/var/lib/lammer/t7.db")
    assert config.base_topic == "lammer/t7"
    assert config.mqtt.keepalive == 30
    assert config.mqtt.reconnect_initial <= config.mqtt.reconnect_max
    assert (config.logging.format, config.logging.level) == ("auto", "info")
    assert config.watchdog.enabled
    assert config.bonus_craps.paytable == 1
    assert config.dice_reader is not None
    # link-layer.md: 115200 8N1, no flow control; ACK within 250 ms.
    reader = config.dice_reader
    assert (reader.baudrate, reader.bytesize, reader.parity, reader.stopbits) == (115200, 8, "N", 1)
    assert (reader.rtscts, reader.xonxoff) == (False, False)
    assert reader.ack_deadline == 0.25


def test_reconnects_are_capped_at_5_s_by_default(tmp_path: Path) -> None:
    # After the broker or a device is back, the table is live again within the cap: the
    # displays are stale at most 5 s (it was 30 s for MQTT and 10 s for a device).
    config = load_config(
        write(tmp_path, '[table]\nid = "t7"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n')
    )
    assert (config.mqtt.reconnect_initial, config.mqtt.reconnect_max) == (0.5, 5.0)
    assert config.dice_reader is not None
    settings = config.dice_reader.driver_settings("dice_reader")
    assert (settings.backoff.initial, settings.backoff.maximum) == (0.5, 5.0)
    # The driver's own default (a driver built without a configuration) is the same.
    assert DriverSettings(device="shuffler", url="x").backoff.maximum == 5.0


def test_every_problem_is_listed_with_its_key(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """
[table]
id = "t1"
game = "UHT"
[shuffler]
port = "/dev/ttyUSB0"
baudrat = 9600
[mqtt]
port = 0
keepalive = "30"
[bust_bonus]
decks = 0
""",
    )
    assert len(found) == 5, found
    assert "bust_bonus.decks: must be between 1 and 8, got 0" in found
    assert "mqtt.port: must be between 1 and 65535, got 0" in found
    assert "mqtt.keepalive: must be an integer, got '30'" in found
    assert any(p.startswith("table.game: must be one of") and "'UHT'" in p for p in found)
    assert "shuffler.baudrat: unknown key; did you mean 'baudrate'?" in found


def test_message_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[table]\nid = "t1"\ngame = "UTH"\n')
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert info.value.path == path
    assert str(path) in str(info.value)
    assert info.value.problems == ("shuffler: required for a UTH table",)


@pytest.mark.parametrize("game", ["CSP", "FCP", "LIR", "MSP", "TCP", "UTH", "BJ"])
def test_card_games_need_the_shuffler(tmp_path: Path, game: str) -> None:
    found = problems(tmp_path, f'[table]\nid = "t1"\ngame = "{game}"\n[dice_reader]\nport = "x"\n')
    assert [p for p in found if p.startswith("shuffler:")] == [
        next(p for p in found if p.startswith("shuffler: required for a " + game + " table"))
    ]


def test_craps_needs_the_dice_reader(tmp_path: Path) -> None:
    found = problems(tmp_path, '[table]\nid = "t1"\ngame = "CRAPS"\n[shuffler]\nport = "x"\n')
    assert found == ("dice_reader: required for a CRAPS table",)


def test_unknown_keys_anywhere_are_errors(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        '[table]\nid = "t1"\ngame = "BJ"\ncolour = "red"\n[shuffler]\nport = "x"\n'
        "[bust_bonus]\ndealer_hits_soft17 = true\n[shufler]\nport = 'y'\n",
    )
    assert (
        "bust_bonus.dealer_hits_soft17: unknown key; did you mean 'dealer_hits_soft_17'?" in found
    )
    assert "shufler: unknown key; did you mean 'shuffler'?" in found
    assert any(p.startswith("table.colour: unknown key") for p in found)
    assert len(found) == 3


@given(
    st.builds(
        lambda a, c, b: a + c + b, st.text(max_size=8), st.sampled_from("/+#"), st.text(max_size=8)
    )
)
def test_table_id_with_topic_characters_is_rejected(table_id: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        validate_config({"table": {"id": table_id, "game": "CRAPS"}, "dice_reader": {"port": "x"}})
    assert [p.split(":")[0] for p in info.value.problems] == ["table.id"]


@given(st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True))
def test_plain_table_ids_are_accepted(table_id: str) -> None:
    config = validate_config(
        {"table": {"id": table_id, "game": "CRAPS"}, "dice_reader": {"port": "x"}}
    )
    assert config.base_topic == f"lammer/{table_id}"


def test_empty_table_id_is_rejected() -> None:
    with pytest.raises(ConfigFileError) as info:
        validate_config({"table": {"id": "", "game": "CRAPS"}, "dice_reader": {"port": "x"}})
    assert info.value.problems == ("table.id: must not be empty",)


@pytest.mark.parametrize("table_id", ["t.1", "t 1", "pit.3.t1", ".t1", "t1."])
def test_table_id_with_a_dot_or_space_is_rejected_for_the_floor(table_id: str) -> None:
    # mqtt-api.md "Conventions": one topic level without '.' or spaces (NATS refuses them).
    with pytest.raises(ConfigFileError) as info:
        validate_config({"table": {"id": table_id, "game": "CRAPS"}, "dice_reader": {"port": "x"}})
    (problem,) = info.value.problems
    assert problem.startswith("table.id: must not hold '.' or spaces")
    assert repr(table_id) in problem


@pytest.mark.parametrize(
    ("prefix", "shown"),
    [
        ("lammer\ntopic readwrite lammer", "'\\n', ' '"),  # a line of its own in the broker's ACL
        ("casino.floor1", "'.'"),
        ("lammer\x7f", "'\\x7f'"),
        ("pit 3/lammer", "' '"),
        ("a\tb", "'\\t'"),
    ],
)
def test_prefix_with_a_dot_space_or_control_character_is_rejected(prefix: str, shown: str) -> None:
    data = {"table": {"id": "t1", "game": "CRAPS"}, "dice_reader": {"port": "x"}}
    with pytest.raises(ConfigFileError) as info:
        validate_config({**data, "mqtt": {"prefix": prefix}})
    (problem,) = info.value.problems
    assert problem.startswith("mqtt.prefix: must not hold '.', spaces or control characters")
    assert problem.endswith(f"({shown})")


def test_prefix_is_bounded() -> None:
    data = {"table": {"id": "t1", "game": "CRAPS"}, "dice_reader": {"port": "x"}}
    assert validate_config({**data, "mqtt": {"prefix": "a/" * 63 + "bc"}}).mqtt.prefix
    with pytest.raises(ConfigFileError) as info:
        validate_config({**data, "mqtt": {"prefix": "a" * 129}})
    assert info.value.problems == ("mqtt.prefix: must be at most 128 characters, got 129",)


def test_password_comes_from_a_file_next_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "t1.password").write_text("s3cret\n")
    (tmp_path / "t1.password").chmod(0o600)
    config = load_config(
        write(
            tmp_path,
            '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
            '[mqtt]\nusername = "t1"\npassword_file = "t1.password"\n',
        )
    )
    assert config.mqtt.password_file == tmp_path / "t1.password"
    assert config.mqtt.read_password() == "s3cret"


def test_password_file_problems(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
        '[mqtt]\npassword_file = "missing.password"\n',
    )
    assert set(found) == {
        f"mqtt.password_file: no such file: {tmp_path / 'missing.password'}",
        "mqtt.username: required when mqtt.password_file is set",
    }


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o660])
def test_password_file_others_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    secret = tmp_path / "t1.password"
    secret.write_text("s3cret\n")
    secret.chmod(mode)
    found = problems(
        tmp_path,
        '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
        '[mqtt]\nusername = "lammer-t1"\npassword_file = "t1.password"\n',
    )
    assert found == (
        f"mqtt.password_file: must be readable by its owner only, got mode {mode:04o} "
        f"(group or others may read or write it): chmod 600 {secret}",
    )


@pytest.mark.parametrize(
    ("mode", "size", "problem"),
    [
        (
            0o640,
            32,
            "must be readable by its owner only, got mode 0640 "
            "(group or others may read or write it): chmod 600 {key}",
        ),
        (
            0o604,
            32,
            "must be readable by its owner only, got mode 0604 "
            "(group or others may read or write it): chmod 600 {key}",
        ),
        (0o600, 15, "holds 15 bytes: a key needs 16 or more"),
    ],
)
def test_hmac_key_file_others_may_read_or_too_short_is_refused(
    tmp_path: Path, mode: int, size: int, problem: str
) -> None:
    key = tmp_path / "t1.key"
    key.write_bytes(b"k" * size)
    key.chmod(mode)
    found = problems(
        tmp_path,
        '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
        '[journal]\nhmac_key_file = "t1.key"\n',
    )
    assert found == ("journal.hmac_key_file: " + problem.format(key=key),)


def test_hmac_key_file_of_its_owner_only_is_read(tmp_path: Path) -> None:
    key = tmp_path / "t1.key"
    key.write_bytes(b"0123456789abcdef")
    key.chmod(0o400)
    config = load_config(
        write(
            tmp_path,
            '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
            '[journal]\nhmac_key_file = "t1.key"\n',
        )
    )
    assert config.journal.read_key() == b"0123456789abcdef"


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_password_file_of_its_owner_only_is_accepted(tmp_path: Path, mode: int) -> None:
    secret = tmp_path / "t1.password"
    secret.write_text("s3cret\n")
    secret.chmod(mode)
    config = load_config(
        write(
            tmp_path,
            '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
            '[mqtt]\nusername = "lammer-t1"\npassword_file = "t1.password"\n',
        )
    )
    assert config.mqtt.read_password() == "s3cret"


def test_tls_files_must_exist_and_pair(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("x")
    (tmp_path / "c.crt").write_text("x")
    base = '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n[mqtt.tls]\n'
    config = load_config(write(tmp_path, base + 'ca_file = "ca.pem"\n'))
    assert config.mqtt.tls is not None
    assert config.mqtt.tls.ca_file == tmp_path / "ca.pem"
    found = problems(tmp_path, base + 'ca_file = "nope.pem"\ncert_file = "c.crt"\n')
    assert set(found) == {
        f"mqtt.tls.ca_file: no such file: {tmp_path / 'nope.pem'}",
        "mqtt.tls.key_file: required with mqtt.tls.cert_file",
    }


def test_journal_path_checks(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    base = '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n[journal]\n'
    config = load_config(write(tmp_path, base + 'path = "state/t1.db"\n'))
    assert config.journal_path == tmp_path / "state" / "t1.db"  # created by the journal
    assert problems(tmp_path, base + f'path = "{tmp_path}"\n') == (
        f"journal.path: is a directory, expected a file path: {tmp_path}",
    )
    assert problems(tmp_path, base + 'path = "afile/t1.db"\n') == (
        f"journal.path: {tmp_path / 'afile'} is not a directory",
    )


def test_backoff_cap_not_below_initial(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\nreconnect_initial = 5.0\n'
        "reconnect_max = 1.0\n[mqtt]\nreconnect_initial = 2\nreconnect_max = 1\n",
    )
    assert set(found) == {
        "dice_reader.reconnect_max: must not be less than reconnect_initial (5.0), got 1.0",
        "mqtt.reconnect_max: must not be less than reconnect_initial (2), got 1",
    }


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        ("bust_bonus", "decks", '"6"', "bust_bonus.decks: must be an integer, got '6'"),
        ("bust_bonus", "decks", "9", "bust_bonus.decks: must be between 1 and 8, got 9"),
        (
            "bust_bonus",
            "dealer_hits_soft_17",
            "1",
            "bust_bonus.dealer_hits_soft_17: must be true or false, got 1",
        ),
        ("mqtt", "port", "true", "mqtt.port: must be an integer, got True"),
        (
            "mqtt",
            "prefix",
            '"a/+/b"',
            "mqtt.prefix: must not hold '+', '#' or start with '$', got 'a/+/b'",
        ),
        (
            "mqtt",
            "prefix",
            '"a//b"',
            "mqtt.prefix: must be topic levels separated by single '/', got 'a//b'",
        ),
        ("watchdog", "stall_timeout", "0", "watchdog.stall_timeout: must be greater than 0, got 0"),
        (
            "logging",
            "format",
            '"xml"',
            "logging.format: must be one of 'auto', 'json' or 'console', got 'xml'",
        ),
        ("shuffler", "stopbits", "3", "shuffler.stopbits: must be 1, 1.5 or 2, got 3"),
    ],
)
def test_bad_values(tmp_path: Path, section: str, key: str, value: str, expected: str) -> None:
    shuffler = '[shuffler]\nport = "x"\n' if section != "shuffler" else ""
    text = f'[table]\nid = "t1"\ngame = "BJ"\n{shuffler}[{section}]\n'
    text += 'port = "x"\n' if section == "shuffler" else ""
    assert problems(tmp_path, text + f"{key} = {value}\n") == (expected,)


def test_log_level_is_case_insensitive(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            '[table]\nid = "t1"\ngame = "BJ"\n[shuffler]\nport = "x"\n[logging]\nlevel = "DEBUG"\n',
        )
    )
    assert config.logging.level == "debug"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'[table\nid = "t1"\n', "(file): not valid TOML: "),
        (b"\xff\xfe", "(file): not UTF-8 text"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith(expected)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as info:
        load_config(tmp_path / "none.toml")
    assert info.value.problems == ("(file): no such file",)


def test_json_schema_for_tooling() -> None:
    schema = TableConfig.model_json_schema()
    assert schema["required"] == ["table"]
    assert schema["additionalProperties"] is False
    decks = schema["$defs"]["BustBonusSection"]["properties"]["decks"]
    assert (decks["minimum"], decks["maximum"], decks["default"]) == (1, 8, 6)
    game = schema["$defs"]["TableSection"]["properties"]["game"]
    assert set(game["enum"]) == {"CSP", "FCP", "LIR", "MSP", "TCP", "UTH", "BJ", "CRAPS"}


@pytest.mark.parametrize(
    ("port_line", "expected"),
    [
        ('port = "socket://[::1:5"', "is not a URL"),
        ('port = "socket://host"', "is not socket://host:port"),
        ('port = "rfc2217://host:1"', "not supported"),
        ('port = "/dev/ttyUSB0"\nbaudrate = 1099511627776', "baud rate 1099511627776"),
    ],
)
def test_device_settings_the_driver_refuses_are_config_errors(
    tmp_path: Path, port_line: str, expected: str
) -> None:
    # check-config must refuse what `lammer run` would fail on when it builds the driver.
    found = problems(tmp_path, f'[table]\nid = "c1"\ngame = "CRAPS"\n[dice_reader]\n{port_line}\n')
    assert len(found) == 1
    assert found[0].startswith("dice_reader: ")
    assert expected in found[0]


@pytest.mark.parametrize("value", ["-1", "3600.5", "1e9", '"30"', "nan", "inf"])
def test_floor_resend_outside_0_to_3600_seconds_is_refused(tmp_path: Path, value: str) -> None:
    found = problems(
        tmp_path,
        '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
        f"[mqtt]\nfloor_resend = {value}\n",
    )
    assert len(found) == 1
    assert found[0].startswith("mqtt.floor_resend: "), found


@pytest.mark.parametrize(("value", "seconds"), [("0", 0.0), ("0.5", 0.5), ("3600", 3600.0)])
def test_floor_resend_within_bounds_is_read(tmp_path: Path, value: str, seconds: float) -> None:
    config = load_config(
        write(
            tmp_path,
            '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
            f"[mqtt]\nfloor_resend = {value}\n",
        )
    )
    assert config.mqtt.floor_resend == seconds


def test_floor_resend_defaults_to_30_seconds(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n')
    )
    assert config.mqtt.floor_resend == 30.0


@pytest.mark.parametrize(
    "value", ["0", "-1", "8761", "1.5", '"24"', "true", "nan", "inf", "1e3", "[24]", "{}"]
)
def test_disk_low_hours_outside_1_to_8760_whole_hours_is_refused(
    tmp_path: Path, value: str
) -> None:
    found = problems(
        tmp_path,
        '[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n'
        f"[journal]\ndisk_low_hours = {value}\n",
    )
    assert len(found) == 1
    assert found[0].startswith("journal.disk_low_hours: "), found


@pytest.mark.parametrize(("value", "hours"), [("", 24), ("disk_low_hours = 1", 1),
                                              ("disk_low_hours = 8760", 8760)])  # fmt: skip
def test_disk_low_hours_default_and_bounds(tmp_path: Path, value: str, hours: int) -> None:
    config = load_config(
        write(
            tmp_path,
            f'[table]\nid = "t1"\ngame = "CRAPS"\n[dice_reader]\nport = "x"\n[journal]\n{value}\n',
        )
    )
    assert config.journal.disk_low_hours == hours
