"""The systemd template unit and the udev rules: directives parsed, names consistent, the
install steps and the instance check run for real, ``systemd-analyze verify`` and
``security`` where they exist, and the daemon under the kernel's W^X
(``MemoryDenyWriteExecute=``)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from deploy.broker import free_port, wait_serving
from display.web.config import load_web_config
from display.web.users import add_user
from tests.conftest import CLI_BOUND_S, Broker
from tests.helpers.systemd_units import exposure, verify, with_this_lammer
from tests.integration.harness import LAMMER, Daemon, Table, _spawn

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "lammer@.service"
RULES = ROOT / "systemd" / "99-lammer.rules"
INSTALL_DOC = ROOT / "docs" / "operators" / "install.md"
"""The operators' installation page, whose steps the unit's header repeats."""


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
    assert start[1:] == ["run", "--config", "/etc/lammer/%i.toml", "--instance", "%i"]
    check = one(unit, service, "ExecStartPre").split()
    assert check[0] == start[0]
    assert check[1:] == ["check-config", "--instance", "%i", "/etc/lammer/%i.toml"]
    assert int(one(unit, service, "WatchdogSec")) > 0
    assert one(unit, service, "Restart") == "on-failure"
    assert one(unit, service, "RestartPreventExitStatus") == "2"  # a refused config
    # /etc/lammer is the unit's (the install steps create it before the first config).
    assert one(unit, service, "ConfigurationDirectory") == "lammer"


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
        "PrivateMounts": "yes",
        "PrivateIPC": "yes",
        "MemoryDenyWriteExecute": "yes",  # test_the_daemon_runs_with_no_writable_code
    }
    assert {key: one(unit, service, key) for key in expected} == expected
    assert "PrivateDevices" not in unit[service]  # it would hide the serial ports


def test_device_allow_names_exactly_the_udev_names(unit: dict[str, dict[str, list[str]]]) -> None:
    allowed = unit["Service"]["DeviceAllow"]
    assert all(value.endswith(" rw") for value in allowed)
    paths = {value.split()[0] for value in allowed if value.startswith("/")}
    symlinks = {"/dev/" + rule["SYMLINK+"] for rule in parse_rules(RULES.read_text())}
    assert (
        paths == symlinks == {"/dev/lammer/shuffler", "/dev/lammer/shoe", "/dev/lammer/dice-reader"}
    )
    # Besides the named ports, only the USB serial groups (a replugged adapter).
    groups = {value.split()[0] for value in allowed if not value.startswith("/")}
    assert groups == {"char-ttyUSB", "char-ttyACM"}


def test_udev_rules_match_usb_vendor_product_serial() -> None:
    text = RULES.read_text()
    rules = parse_rules(text)
    assert len(rules) == 3  # shuffler, shoe, dice reader
    for rule in rules:
        assert rule["SUBSYSTEM"] == "tty"
        assert re.fullmatch(r"[0-9a-f]{4}", rule["ATTRS{idVendor}"])
        assert re.fullmatch(r"[0-9a-f]{4}", rule["ATTRS{idProduct}"])
        assert rule["ATTRS{serial}"]
        assert rule["GROUP"] == "dialout"
        assert rule["MODE"] == "0660"
        assert rule["ENV{ID_MM_DEVICE_IGNORE}"] == "1"  # ModemManager keeps away
    # Installers are told what to edit, how to read their adapters' values, and to reload.
    assert "edit idVendor, idProduct and serial" in text
    assert "udevadm info" in text
    assert "udevadm control --reload" in text


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
    result, problems = verify(with_this_lammer(UNIT, tmp_path / "lammer@t1.service"))
    assert result.returncode == 0, result.stderr
    assert problems == []  # an unknown directive is only a warning: fail on it too


# ---------------------------------------------------------------------------------------
# The installation steps and the instance check, run for real (in a root of the test's own)


def sh_block(text: str, heading: str) -> list[str]:
    """The commands of the first ``sh`` block after ``heading`` in a page of the docs
    (comments dropped)."""
    section = text[text.index(heading) :]
    block = section[section.index("```sh\n") + 6 : section.index("```\n", section.index("```sh"))]
    return [normalize(line) for line in block.splitlines() if line.strip()]


def install_steps(text: str) -> list[str]:
    """The commands of the installation page's block (comments dropped)."""
    return sh_block(text, "## lammer, its unit and the udev rules")


def unit_install_steps(text: str) -> list[str]:
    """The commands of the unit file's header: one a line, ``\\`` continues a line."""
    header = text[text.index("#   install") : text.index("#   check:")]
    commands: list[str] = []
    pending = ""
    for line in header.splitlines()[1:]:
        pending += " " + line.removeprefix("#").strip()
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        commands.append(normalize(pending))
        pending = ""
    return commands


def normalize(command: str) -> str:
    command = re.sub(r"\s+#.*$", "", command)  # the docs: a comment
    command = re.sub(r"\s+\([^)]*\)\s*$", "", command)  # unit header: a note
    return " ".join(command.split())


def test_the_unit_header_gives_the_documented_install_steps() -> None:
    documented = install_steps(INSTALL_DOC.read_text())
    assert unit_install_steps(UNIT.read_text()) == documented
    # Created before the first config is copied in; udev told about the new rules.
    creates = next(
        i for i, c in enumerate(documented) if c.startswith("install -d") and "/etc/lammer" in c
    )
    copies = next(i for i, c in enumerate(documented) if c.endswith("/etc/lammer/poker1.toml"))
    assert creates < copies
    assert any(c.startswith("udevadm control --reload") for c in documented)


def in_root(command: str, root: Path) -> str:
    """A command with /etc in ``root`` and the installed lammer as this checkout's."""
    lammer = str(Path(sys.executable).with_name("lammer"))
    return command.replace("/opt/lammer/bin/lammer", lammer).replace("/etc/", f"{root}/etc/")


def run_steps(script: str) -> subprocess.CompletedProcess[str]:
    """Documented install steps, run by bash from the checkout (the test reads its output)."""
    return subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CLI_BOUND_S,
        check=False,
    )


@pytest.mark.heavy
def test_install_steps_work_on_a_fresh_controller(tmp_path: Path) -> None:
    # The steps that touch only files, in a root where /etc has what systemd and udev
    # give it (no /etc/lammer): they ran `cp config/uth.toml /etc/lammer/...` into nothing.
    root = tmp_path / "root"
    for folder in ("etc/systemd/system", "etc/udev/rules.d"):
        (root / folder).mkdir(parents=True)
    system = ("python3 ", "useradd ", "udevadm ", "systemctl ")
    steps = [in_root(c, root) for c in install_steps(INSTALL_DOC.read_text())]
    script = "set -euo pipefail\n" + "\n".join(c for c in steps if not c.startswith(system))
    result = run_steps(script)
    assert result.returncode == 0, result.stdout + result.stderr
    config = root / "etc" / "lammer" / "poker1.toml"
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o755
    assert stat.S_IMODE(config.stat().st_mode) == 0o644
    assert (root / "etc" / "systemd" / "system" / "lammer@.service").read_text() == UNIT.read_text()
    assert f"{config}: OK" in result.stdout  # the check-config step ran and passed


def unit_commands(
    unit: dict[str, dict[str, list[str]]], instance: str, root: Path
) -> list[list[str]]:
    """ExecStartPre and ExecStart as systemd runs them for ``lammer@<instance>``."""
    return [
        in_root(one(unit, "Service", key).replace("%i", instance), root).split()
        for key in ("ExecStartPre", "ExecStart")
    ]


@pytest.mark.heavy
def test_the_unit_refuses_a_config_of_another_table(
    unit: dict[str, dict[str, list[str]]], tmp_path: Path
) -> None:
    configs = tmp_path / "root" / "etc" / "lammer"
    configs.mkdir(parents=True)
    journal = tmp_path / "poker1.db"
    text = (
        (ROOT / "config" / "uth.toml")
        .read_text()
        .replace("/var/lib/lammer/poker1.db", str(journal))
    )
    (configs / "poker1.toml").write_text(text)
    (configs / "poker2.toml").write_text(text)  # copied for table poker2, never edited
    check, run = unit_commands(unit, "poker2", tmp_path / "root")
    for argv in (check, run):
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=CLI_BOUND_S, check=False
        )
        assert result.returncode == 2, argv
        assert (
            "table.id: is 'poker1', but the systemd instance is 'poker2' (lammer@poker2): "
            "the instance name must be the table id"
        ) in result.stderr
    assert not journal.exists()  # refused before anything was opened
    check, _ = unit_commands(unit, "poker1", tmp_path / "root")
    result = subprocess.run(check, capture_output=True, text=True, timeout=CLI_BOUND_S, check=False)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------------------
# systemd-analyze security, and MemoryDenyWriteExecute= for real


def _offline_security_supported() -> bool:
    if shutil.which("systemd-analyze") is None:
        return False
    probe = subprocess.run(
        ["systemd-analyze", "security", "--help"], capture_output=True, text=True, check=False
    )
    return "--offline" in probe.stdout


@pytest.mark.skipif(not _offline_security_supported(), reason="no systemd-analyze --offline")
def test_systemd_analyze_security_exposure(tmp_path: Path) -> None:
    found, output = exposure(with_this_lammer(UNIT, tmp_path / "lammer@t1.service"))
    assert found, output
    assert float(found.group(1)) <= 1.5  # 1.6 before PrivateMounts= and MemoryDenyWriteExecute=


MDWE_THEN_EXEC = """
import ctypes, mmap, os, sys
prctl = ctypes.CDLL(None, use_errno=True).prctl
# PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN: kept across execve, as systemd's own filter is.
if prctl(65, 1, 0, 0, 0) != 0:
    sys.exit(f"PR_SET_MDWE failed: errno {ctypes.get_errno()}")
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except PermissionError:
    pass
else:
    sys.exit("PR_SET_MDWE did not refuse a writable executable mapping")
os.execv(sys.argv[1], sys.argv[1:])
"""


def _mdwe_supported() -> bool:
    probe = subprocess.run(
        [sys.executable, "-c", MDWE_THEN_EXEC, "/bin/true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@dataclass
class MdweTable(Table):
    """A table whose daemon runs as under MemoryDenyWriteExecute=yes."""

    def start_daemon(self) -> Daemon:
        log = self.workdir / f"daemon-{len(self.daemons) + 1}.log"
        argv = [sys.executable, "-c", MDWE_THEN_EXEC, LAMMER, "run", "--config"]
        self.daemon = Daemon(_spawn([*argv, str(self.config_path)], log, None), log)
        self.daemons.append(self.daemon)
        return self.daemon


@pytest.mark.skipif(not _mdwe_supported(), reason="the kernel has no PR_SET_MDWE (Linux 6.3+)")
async def test_the_daemon_runs_with_no_writable_code(tmp_path: Path, mosquitto: Broker) -> None:
    # The kernel's W^X for the daemon (prctl PR_SET_MDWE: no mapping both writable and
    # executable, none made executable later), then a craps table end to end.
    table = MdweTable(tmp_path, mosquitto, "CRAPS")
    try:
        await table.start("ROLL,101,1,1\nROLL,102,2,2\nCHECK,103,3,4,ON_CHIPS\nROLL,104,6,1\n")
        await table.wait_for(
            lambda: len(table.recorder.bodies("craps/roll")) >= 3, what="three rolls published"
        )
        assert await table.stop_daemon() == 0
    finally:
        await table.close()


# ---------------------------------------------------------------------------------------
# lammer-web.service: the screens, with the table daemon's hardening

WEB_UNIT = ROOT / "systemd" / "lammer-web.service"
SCREENS_DOC = ROOT / "docs" / "floor" / "screens.md"
"""The screens' page, whose lammer-web steps the web unit's header repeats."""
DEVICE_KEYS = {"DevicePolicy", "DeviceAllow", "SupplementaryGroups", "PrivateDevices"}
"""What the table daemon needs for its serial ports and the screens do not."""
DAEMON_ONLY = {
    "Type", "NotifyAccess", "ExecStartPre", "ExecStart", "TimeoutStartSec", "WatchdogSec",
    "StateDirectory", "StateDirectoryMode",
}  # fmt: skip


def web_install_steps(text: str) -> list[str]:
    """The commands of the screens page's lammer-web block."""
    return sh_block(text, "## `lammer web` under systemd")


def test_the_web_unit_runs_lammer_web_with_the_daemon_s_hardening() -> None:
    daemon = parse_unit(UNIT.read_text())["Service"]
    web = parse_unit(WEB_UNIT.read_text())["Service"]
    start = one({"Service": web}, "Service", "ExecStart").split()
    assert Path(start[0]).name == "lammer"
    assert start[1:] == ["web", "--config", "/etc/lammer/web.toml"]
    assert web["ConfigurationDirectory"] == ["lammer"]
    assert web["User"] == ["lammer"]
    assert web["RestartPreventExitStatus"] == ["2"]
    # Every other directive of the daemon's unit, with the same values.
    for key, values in daemon.items():
        if key in DEVICE_KEYS | DAEMON_ONLY:
            continue
        assert web.get(key) == values, key
    assert web["DevicePolicy"] == ["closed"]
    assert web["PrivateDevices"] == ["yes"]
    assert "DeviceAllow" not in web
    assert "SupplementaryGroups" not in web  # no dialout: no serial port


@pytest.mark.heavy
def test_the_web_unit_header_gives_the_documented_steps_and_they_work(tmp_path: Path) -> None:
    documented = web_install_steps(SCREENS_DOC.read_text())
    assert unit_install_steps(WEB_UNIT.read_text()) == documented
    root = tmp_path / "root"
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    (root / "etc" / "lammer").mkdir(mode=0o755)
    me = f"{os.getuid()}:{os.getgid()}"
    steps = [in_root(c, root).replace("lammer:lammer", me) for c in documented]
    script = "set -euo pipefail\n" + "\n".join(
        c if not c.startswith("/") or " adduser " not in c else f"echo 'a long password' | {c}"
        for c in steps
        if not c.startswith("systemctl ")
    )
    result = run_steps(script)
    assert result.returncode == 0, result.stdout + result.stderr
    users = root / "etc" / "lammer" / "web-users"
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    assert "alice:stick:$argon2id$" in users.read_text()
    assert "pat:pit:$argon2id$" in users.read_text()
    # The example configuration loads, once its password files exist.
    etc = root / "etc" / "lammer"
    (etc / "credentials").mkdir()
    for name in ("display", "terminal"):
        (etc / "credentials" / name).write_text("secret\n")
        (etc / "credentials" / name).chmod(0o600)
    config = load_web_config(etc / "web.toml", {})
    assert config.users == etc / "web-users"
    assert config.attract_seconds == 300


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verify_the_web_unit(tmp_path: Path) -> None:
    result, problems = verify(with_this_lammer(WEB_UNIT, tmp_path / "lammer-web.service"))
    assert result.returncode == 0, result.stderr
    assert problems == []


@pytest.mark.skipif(not _offline_security_supported(), reason="no systemd-analyze --offline")
def test_systemd_analyze_security_of_the_web_unit(tmp_path: Path) -> None:
    found, output = exposure(with_this_lammer(WEB_UNIT, tmp_path / "lammer-web.service"))
    assert found, output
    print(f"systemd-analyze security lammer-web.service: {found.group(1)}")
    assert float(found.group(1)) <= 1.5  # as lammer@.service


@pytest.mark.heavy
@pytest.mark.skipif(not _mdwe_supported(), reason="the kernel has no PR_SET_MDWE (Linux 6.3+)")
def test_lammer_web_serves_and_logs_in_with_no_writable_code(tmp_path: Path) -> None:
    # MemoryDenyWriteExecute=yes for the screens: aiohttp and Argon2id (argon2-cffi) under
    # the kernel's W^X, a page served and a login checked (no broker needed for either).
    users = tmp_path / "users"
    add_user(users, "alice", "a long password")
    port = free_port()
    log = tmp_path / "web.log"
    argv = [sys.executable, "-c", MDWE_THEN_EXEC, LAMMER, "web", "--users", str(users)]
    argv += ["--listen", f"127.0.0.1:{port}", "--mqtt-port", str(free_port())]
    proc = _spawn(argv, log, None)
    try:
        assert wait_serving(proc.pid, "127.0.0.1", port, timeout=120), log.read_text()
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        base = f"http://127.0.0.1:{port}"
        with opener.open(f"{base}/table/t1", timeout=10) as page:
            assert page.status == 200
        with opener.open(f"{base}/api/session", timeout=10) as answer:
            token = json.loads(answer.read())["login_token"]
        login = urllib.request.Request(  # noqa: S310  the test's own http:// server
            f"{base}/api/login",
            data=json.dumps({"user": "alice", "password": "a long password"}).encode(),
            headers={"Content-Type": "application/json", "X-CSRF-Token": token, "Origin": base},
            method="POST",
        )
        with opener.open(login, timeout=30) as answer:
            assert json.loads(answer.read())["roles"] == ["stick"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0, log.read_text()
