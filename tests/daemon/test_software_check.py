"""The table's check of its installed software at start (``daemon.app.check_software``,
issue 33): approved by a manifest signed with an approved key; a manifest signed by another
key, or changed after signing, is a problem in words (the table stays closed: the
integration test tests/integration/test_software.py runs that with a real daemon); the
``[software]`` section's own checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from contract.manifest import generate_key, load_private_key, make_manifest
from contract.software import components, installed_root
from daemon.app import check_software, seeded_answer
from daemon.config import validate_config
from daemon.errors import ConfigFileError


def _keys(where: Path, name: str) -> Path:
    private, public = generate_key()
    (where / f"{name}.key").write_bytes(private)
    (where / f"{name}.pub").write_bytes(public)
    return where / f"{name}.key"


def _config(manifest: Path, pub: Path) -> Any:
    return validate_config(
        {
            "table": {"id": "t1", "game": "CRAPS"},
            "dice_reader": {"port": "x"},
            "software": {"manifests": [str(manifest)], "public_keys": [str(pub)]},
        }
    )


def test_approved_and_refused_manifests_at_start(tmp_path: Path) -> None:
    key = load_private_key(_keys(tmp_path, "release"))
    _keys(tmp_path, "other")
    manifest = make_manifest(components(), "0.1.0", key)
    path = tmp_path / "lammer-0.1.0.json"
    path.write_text(json.dumps(manifest))
    log = structlog.get_logger("test")

    check = check_software(_config(path, tmp_path / "release.pub"), installed_root(), log)
    assert check.approved == "lammer-0.1.0.json"
    assert check.problem is None
    assert check.digest == manifest["digest"]
    assert check.count == len(manifest["components"])

    check = check_software(_config(path, tmp_path / "other.pub"), installed_root(), log)
    assert check.approved is None
    assert check.problem is not None
    assert "not one of the approved public keys" in check.problem

    changed = {**manifest, "version": "0.1.1"}
    path.write_text(json.dumps(changed))
    check = check_software(_config(path, tmp_path / "release.pub"), installed_root(), log)
    assert check.problem is not None
    assert "signature does not verify" in check.problem


def test_manifests_need_keys_and_existing_files(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text("{}")
    table = {"table": {"id": "t1", "game": "CRAPS"}, "dice_reader": {"port": "x"}}
    with pytest.raises(ConfigFileError, match="without public_keys"):
        validate_config({**table, "software": {"manifests": [str(tmp_path / "m.json")]}})
    with pytest.raises(ConfigFileError, match="no such file"):
        validate_config(
            {**table, "software": {"manifests": ["/nonexistent.json"], "public_keys": []}}
        )
    assert validate_config(table).software.manifests == []


def test_a_seeded_answer_refuses_a_bad_seed_in_words(tmp_path: Path) -> None:
    assert seeded_answer(tmp_path, "ab" * 16) == (
        f"the installed software cannot be read: {tmp_path / 'bulk'} is not a folder: "
        "no lammer package 'bulk' there"
    )
