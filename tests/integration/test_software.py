"""Software authentication with real daemons on a real Mosquitto (issue 33).

A table configured with an approved, signed manifest opens when its installed software
matches it, and stays closed (``availability`` ``offline``, ``SOFTWARE`` naming the file)
when it runs from a copy of the installed tree with one pay table changed; the daemon of
that copy is a real ``lammer run`` whose imports come from the copy (``PYTHONPATH`` and
its working folder). A terminal's ``request/authenticate`` is answered with what a
second implementation (tests/contract/test_software.py) computes from the files, and
journaled with who asked; the floor's authenticator, one round, finds the approved table
``approved`` and the tampered one ``unknown`` with the file, on ``lammer-floor/software``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

import records.authenticate
from contract.manifest import (
    generate_key,
    load_manifest,
    load_private_key,
    make_manifest,
    public_keys,
)
from contract.software import PACKAGES, components, installed_root
from records.authenticate import Authenticator, Settings
from records.authenticate import run as authenticate
from tests.conftest import Broker
from tests.helpers.software_spec import spec_plain, spec_seeded
from tests.integration.conftest import MakeTable
from tests.integration.floor import until
from tests.integration.harness import Daemon, Table

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

PAY_TABLE = "rules/data/bonus_craps.json"


@pytest.fixture
def release(tmp_path: Path) -> dict[str, Any]:
    """A release key and the signed manifest of the installed tree, and the ``[software]``
    lines of a table that requires it."""
    private_pem, public_pem = generate_key()
    (tmp_path / "release.pub").write_bytes(public_pem)
    (tmp_path / "release.key").write_bytes(private_pem)
    key = load_private_key(tmp_path / "release.key")
    manifest = make_manifest(components(), "0.1.0", key)
    path = tmp_path / "lammer-0.1.0.json"
    path.write_text(json.dumps(manifest))
    lines = f'[software]\nmanifests = ["{path}"]\npublic_keys = ["{tmp_path / "release.pub"}"]\n'
    return {"path": path, "pub": tmp_path / "release.pub", "manifest": manifest, "config": lines}


def tampered_copy(tmp_path: Path) -> Path:
    """A copy of the installed packages with one pay table's bytes changed (still the same
    pays, so the copy runs: a blank line at its end)."""
    root = tmp_path / "site"
    for package in PACKAGES:
        shutil.copytree(
            installed_root() / package,
            root / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    data = root / PAY_TABLE
    data.write_bytes(data.read_bytes() + b"\n")
    return root


def start_from(table: Table, root: Path) -> Daemon:
    """``lammer run`` of ``table`` with lammer imported from ``root`` (a copy of the
    installed tree), stopped with the table."""
    log = table.workdir / f"daemon-{len(table.daemons) + 1}.log"
    env = {**os.environ, "PYTHONPATH": str(root)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "run", "--config", str(table.config_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=root,
            env=env,
        )
    table.daemon = Daemon(proc, log)
    table.daemons.append(table.daemon)
    return table.daemon


def software_alarm(table: Table) -> dict[str, Any] | None:
    latest = table.recorder.latest("alarms")
    alarms = [] if latest is None else latest["alarms"]
    return next((a for a in alarms if a["code"] == "SOFTWARE"), None)


async def test_a_table_with_a_manifest_opens_on_its_release_and_refuses_a_tampered_one(
    make_table: MakeTable, release: dict[str, Any], tmp_path: Path
) -> None:
    approved = make_table("CRAPS", extra_config=release["config"])
    await approved.start()  # online
    info = await approved.wait_topic("info")
    assert info["contract"] == "1.4"
    assert info["software"]["digest"] == release["manifest"]["digest"]
    assert software_alarm(approved) is None
    [record] = [r for r in approved.journal() if "software" in r]
    software = record["software"]
    assert software["approved"] == release["path"].name
    assert software["digest"] == spec_plain(installed_root())[1]
    assert software["ms"] > 0

    root = tampered_copy(tmp_path)
    table = make_table("CRAPS", extra_config=release["config"])
    await table.recorder.start()
    daemon = start_from(table, root)
    alarm = await table.wait_for(lambda: software_alarm(table), what="the SOFTWARE alarm")
    assert PAY_TABLE in alarm["message"]
    assert alarm["stops_payouts"] is True
    avail = await table.wait_for(lambda: table.recorder.on("availability"), what="availability")
    assert [a.body for a in avail] == ["offline"]  # never online
    info = await table.wait_topic("info")
    assert info["software"]["digest"] == spec_plain(root)[1] != release["manifest"]["digest"]
    said = [e for e in daemon.log_events() if e.get("event", "").startswith("software not")]
    assert said, daemon.log.read_text()[-2000:]
    assert PAY_TABLE in said[0]["problem"]
    # A lab may still authenticate it remotely: requests are answered.
    seed = os.urandom(16)
    answer = await table.request("authenticate", {"operator": "lab", "seed": seed.hex()})
    assert answer["digest"] == spec_seeded(root, seed)[1]


async def test_a_terminal_and_the_floor_authenticate_tables_with_fresh_seeds(
    make_table: MakeTable,
    release: dict[str, Any],
    mosquitto: Broker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = make_table("CRAPS")
    await good.start()
    seed = os.urandom(32)
    answer = await good.request("authenticate", {"operator": "inspector 7", "seed": seed.hex()})
    each, whole = spec_seeded(installed_root(), seed)
    assert answer["status"] == "ok"
    assert answer["seed"] == seed.hex()
    assert answer["digest"] == whole
    assert {c["path"]: c["hmac"] for c in answer["components"]} == each
    [asked] = [r["authenticate"] for r in good.journal() if "authenticate" in r]
    assert asked["operator"] == "inspector 7"
    assert asked["user"] == "terminal"  # the bare request/authenticate is the terminal's
    assert asked["seed"] == seed.hex()
    bad = await good.request("authenticate", {"operator": "x", "seed": "00" * 15})
    assert bad["status"] == "error"
    assert "16 to 64 bytes" in bad["error"]

    other = make_table("CRAPS")  # no manifest of its own: it opens, and the floor sees it
    await other.recorder.start()
    start_from(other, tampered_copy(tmp_path))
    await other.wait_for(other._online, what="the tampered table online")

    # The authenticator asks the tables whose retained info it has when its round begins,
    # after a fixed ``discover`` sleep: on a loaded machine that info can come after it
    # (then a table is not asked, and has no status). The round here begins once both
    # tables' info is in, whenever that is (bounded at DEADLINE); what it finds is unchanged.
    one_round = records.authenticate._round

    async def round_once_both_known(
        client: aiomqtt.Client, auth: Authenticator, answer_within: float
    ) -> None:
        await until(
            lambda: {good.base, other.base} <= auth.tables.keys(),
            "the authenticator knowing both tables",
        )
        await one_round(client, auth, answer_within)

    monkeypatch.setattr(records.authenticate, "_round", round_once_both_known)
    keys = public_keys([release["pub"]])
    settings = Settings(
        host=mosquitto.host,
        port=mosquitto.port,
        user=None,
        password=None,
        prefixes=("lammer",),
        manifests=(load_manifest(release["path"], keys),),
        timeout=30.0,
        discover=0.5,
        client_id=f"auth-{os.getpid()}",
    )
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as pit:
        await pit.subscribe("lammer-floor/software/#", qos=1)
        auth = await authenticate(settings, rounds=1)  # one round
        assert auth.last_status[good.table_id] == "approved"
        assert auth.last_status[other.table_id] == "unknown"
        seen: dict[str, dict[str, Any]] = {}
        async for message in pit.messages:
            body = json.loads(bytes(message.payload))
            seen[body["table"]] = body
            if {good.table_id, other.table_id} <= seen.keys():
                break
    assert seen[good.table_id]["status"] == "approved"
    assert seen[good.table_id]["manifest"] == release["path"].name
    assert seen[other.table_id]["status"] == "unknown"
    assert seen[other.table_id]["differs"] == PAY_TABLE
    assert PAY_TABLE in seen[other.table_id]["message"]
