"""The systemd template unit and the udev rules: directives parsed, names consistent,
and ``systemd-analyze verify`` where it exists."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "lammer@.service"
RULES = ROOT / "systemd" / "99-lammer.rules"


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> every value (keys such as DeviceAllow= repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a directive: {raw!r}"
        assert current is not None, f"directive outside a section: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return parse_unit(UNIT.read_text())


def one(unit: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    values = unit[section].get(key, [])
    assert len(values) == 1, f"{key}= appears {len(values)} times"
    return values[0]


def parse_rules(text: str) -> list[dict[str, str]]:
    """Each rule as {KEY: value} (operators dropped; == and += told apart by the key)."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pairs = re.findall(r'([A-Z_]+(?:\{[A-Za-z_]+\})?)\s*(==|\+=|=)\s*"([^"]*)"', line)
        assert pairs, f"not a rule: {raw!r}"
        rules.append({key + ("+" if op == "+=" else ""): value for key, op, value in pairs})
    return rules


def test_service_runs_the_table_of_its_instance(unit: dict[str, dict[str, list[str]]]) -> None:
    service = "Service"
    assert one(unit, service, "Type") == "notify"
    assert one(unit, service, "NotifyAccess") == "main"
    start = one(unit, service, "ExecStart").split()
    assert Path(start[0]).name == "lammer"
    assert start[1:] == ["run", "--config", "/etc/lammer/%i.toml"]
    check = one(unit, service, "ExecStartPre").split()
    assert check[0] == start[0]
    assert check[1:] == ["check-config", "/etc/lammer/%i.toml"]
    assert int(one(unit, service, "WatchdogSec")) > 0
    assert one(unit, service, "Restart") == "on-failure"


def test_service_user_state_and_hardening(unit: dict[str, dict[str, list[str]]]) -> None:
    service = "Service"
    assert one(unit, service, "User") == "lammer"
    assert "DynamicUser" not in unit[service]
    assert "dialout" in one(unit, service, "SupplementaryGroups").split()
    # The journal lives in /var/lib/lammer (StateDirectory), readable by its user only.
    assert one(unit, service, "StateDirectory") == "lammer"
    assert one(unit, service, "StateDirectoryMode") == "0700"
    assert one(unit, service, "UMask") == "0077"
    expected = {
        "ProtectSystem": "strict",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "DevicePolicy": "closed",
        "CapabilityBoundingSet": "",
    }
    assert {key: one(unit, service, key) for key in expected} == expected
    assert "PrivateDevices" not in unit[service]  # it would hide the serial ports


def test_device_allow_names_exactly_the_udev_names(unit: dict[str, dict[str, list[str]]]) -> None:
    allowed = unit["Service"]["DeviceAllow"]
    assert all(value.endswith(" rw") for value in allowed)
    paths = {value.split()[0] for value in allowed if value.startswith("/")}
    symlinks = {"/dev/" + rule["SYMLINK+"] for rule in parse_rules(RULES.read_text())}
    assert paths == symlinks == {"/dev/lammer/shuffler", "/dev/lammer/dice-reader"}
    # Besides the named ports, only the USB serial groups (a replugged adapter).
    groups = {value.split()[0] for value in allowed if not value.startswith("/")}
    assert groups == {"char-ttyUSB", "char-ttyACM"}


def test_udev_rules_match_usb_vendor_product_serial() -> None:
    text = RULES.read_text()
    rules = parse_rules(text)
    assert len(rules) == 2
    for rule in rules:
        assert rule["SUBSYSTEM"] == "tty"
        assert re.fullmatch(r"[0-9a-f]{4}", rule["ATTRS{idVendor}"])
        assert re.fullmatch(r"[0-9a-f]{4}", rule["ATTRS{idProduct}"])
        assert rule["ATTRS{serial}"]
        assert rule["GROUP"] == "dialout"
        assert rule["MODE"] == "0660"
    # Installers are told what to edit, and how to read their adapters' values.
    assert "edit idVendor, idProduct and serial" in text
    assert "udevadm info" in text


def test_example_configs_use_the_udev_names_and_state_directory() -> None:
    names = {"/dev/" + rule["SYMLINK+"] for rule in parse_rules(RULES.read_text())}
    for path in sorted((ROOT / "config").glob("*.toml")):
        data = tomllib.loads(path.read_text())
        device = data.get("shuffler") or data.get("dice_reader")
        assert device is not None, path.name
        assert device["port"] in names, path.name
        assert data["journal"]["path"] == f"/var/lib/lammer/{data['table']['id']}.db"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify checks that ExecStart's program exists: point it at this checkout's lammer.
    lammer = Path(sys.executable).with_name("lammer")
    assert lammer.exists()
    text = UNIT.read_text()
    installed = one(parse_unit(text), "Service", "ExecStart").split()[0]
    instance = tmp_path / "lammer@t1.service"
    instance.write_text(text.replace(installed, str(lammer)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(instance)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip() and "lammer@t1.service" in line
    ]
    assert result.returncode == 0, result.stderr
    assert problems == []  # an unknown directive is only a warning: fail on it too
