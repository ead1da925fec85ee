"""Software authentication (issue 33): the components and digests of ``contract.software``
against a second implementation written out here from mqtt-api.md 1.4 and
docs/auditors/software.md (hashlib and hmac, nothing of lammer's), on a copy of the
installed tree with a pay table and a rules module tampered; signed manifests
(``contract.manifest``) refused with a sentence when their signature or key is wrong; the
floor authenticator's verdicts and its refusal of a replayed answer (``records.authenticate``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from contract.manifest import (
    ManifestError,
    generate_key,
    key_id,
    load_manifest,
    load_private_key,
    make_manifest,
    public_keys,
    verify_manifest,
)
from contract.software import (
    PACKAGES,
    Component,
    SoftwareError,
    components,
    installed_root,
    parse_seed,
    seeded,
    whole_digest,
)
from records.authenticate import Authenticator, judge
from tests.conftest import CLI_BOUND_S
from tests.helpers.software_spec import spec_files, spec_plain, spec_seeded
from tests.integration.harness import LAMMER

SEED = bytes(range(32))
PAY_TABLE = "rules/data/bonus_craps.json"
RULES_MODULE = "rules/craps.py"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the installed lammer's packages (as a lab copies a controller's)."""
    root = tmp_path_factory.mktemp("installed")
    for package in PACKAGES:
        shutil.copytree(
            installed_root() / package,
            root / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    return root


def tampered(tree: Path, tmp_path: Path) -> Path:
    """Another copy with one pay-table byte and one rules line changed."""
    root = tmp_path / "tampered"
    shutil.copytree(tree, root)
    data = root / PAY_TABLE
    data.write_bytes(data.read_bytes().replace(b"30", b"31", 1))
    module = root / RULES_MODULE
    module.write_text(module.read_text() + "\n# edited on the floor\n")
    return root


def test_plain_digests_are_the_spec_s() -> None:
    root = installed_root()
    parts = components(root)
    each, whole = spec_plain(root)
    assert {c.path: c.digest for c in parts} == each
    assert whole_digest(parts) == whole
    paths = [c.path for c in parts]
    assert PAY_TABLE in paths
    assert RULES_MODULE in paths
    assert "display/web/static/app.css" in paths  # the pages' static files
    assert any(p.startswith("records/migrations/") for p in paths)
    assert not any("__pycache__" in p or p.endswith(".pyc") for p in paths)
    assert paths == sorted(paths, key=str.encode)


def test_every_installed_package_is_a_component_package() -> None:
    # pyproject's packages (setuptools' find include patterns) are PACKAGES and the second
    # implementation's: a new package cannot be left out of what is authenticated.
    with (installed_root() / "pyproject.toml").open("rb") as f:
        include = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    declared = {pattern.removesuffix("*") for pattern in include}
    assert declared == set(PACKAGES)
    assert {p.split("/")[0] for p in spec_files(installed_root())} == declared


def test_seeded_digests_are_the_spec_s() -> None:
    root = installed_root()
    macs, whole = seeded(components(root), SEED)
    each, expected = spec_seeded(root, SEED)
    assert {c.path: c.digest for c in macs} == each
    assert whole == expected
    # Another seed, another answer: none can be computed before the seed is known.
    other, other_whole = seeded(components(root), bytes(32))
    assert other_whole != whole
    assert all(a.digest != b.digest for a, b in zip(macs, other, strict=True))


@pytest.mark.heavy  # two trees read and hashed twice each, one copied
def test_a_tampered_pay_table_and_rules_module_change_their_digests_and_the_whole(
    tree: Path, tmp_path: Path
) -> None:
    before = {c.path: c.digest for c in components(tree)}
    root = tampered(tree, tmp_path)
    after = {c.path: c.digest for c in components(root)}
    assert {p for p in before if before[p] != after[p]} == {PAY_TABLE, RULES_MODULE}
    assert whole_digest(components(root)) == spec_plain(root)[1] != spec_plain(tree)[1]
    macs_before, _ = seeded(components(tree), SEED)
    macs_after, _ = seeded(components(root), SEED)
    changed = {a.path for a, b in zip(macs_before, macs_after, strict=True) if a != b}
    assert changed == {PAY_TABLE, RULES_MODULE}


def test_seeds_are_16_to_64_bytes_of_hex() -> None:
    assert parse_seed("ab" * 16) == b"\xab" * 16
    for bad, said in (("ab" * 15, "16 to 64"), ("ab" * 65, "16 to 64"), ("zz" * 16, "hex"),
                      ("abc", "even")):  # fmt: skip
        with pytest.raises(SoftwareError, match=said):
            parse_seed(bad)
    with pytest.raises(SoftwareError, match="no lammer package"):
        components(Path("/nonexistent"))


# -- manifests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory, tree: Path) -> dict[str, Any]:
    """A release key, another key, and the signed manifest of ``tree``."""
    where = tmp_path_factory.mktemp("release")
    for name in ("release", "other"):
        private, public = generate_key()
        (where / f"{name}.key").write_bytes(private)
        (where / f"{name}.pub").write_bytes(public)
    key = load_private_key(where / "release.key")
    manifest = make_manifest(components(tree), "0.1.0", key)
    (where / "approved.json").write_text(json.dumps(manifest))
    return {"dir": where, "manifest": manifest, "key": key}


def test_a_signed_manifest_verifies_under_its_key(release: dict[str, Any], tree: Path) -> None:
    keys = public_keys([release["dir"] / "release.pub"])
    manifest = load_manifest(release["dir"] / "approved.json", keys)
    assert manifest.digest == spec_plain(tree)[1]
    assert manifest.key == key_id(release["key"].public_key()) == release["manifest"]["key"]
    assert dict(manifest.components) == spec_plain(tree)[0]


def test_a_changed_manifest_or_an_unknown_key_is_refused_with_a_sentence(
    release: dict[str, Any],
) -> None:
    keys = public_keys([release["dir"] / "release.pub"])
    forged = json.loads(json.dumps(release["manifest"]))
    entry = next(c for c in forged["components"] if c["path"] == PAY_TABLE)
    entry["sha256"] = hashlib.sha256(b"a pay table that pays more").hexdigest()
    forged["digest"] = whole_digest(Component(c["path"], c["sha256"]) for c in forged["components"])
    with pytest.raises(ManifestError, match=r"signature does not verify under key .*: refused"):
        verify_manifest(json.dumps(forged).encode(), keys, name="forged.json")
    others = public_keys([release["dir"] / "other.pub"])
    with pytest.raises(ManifestError, match="which is not one of the approved public keys"):
        verify_manifest(json.dumps(release["manifest"]).encode(), others, name="approved.json")


@pytest.mark.heavy
def test_the_commands_name_the_tampered_files_and_refuse_a_bad_manifest(
    release: dict[str, Any], tree: Path, tmp_path: Path
) -> None:
    where = release["dir"]
    root = tampered(tree, tmp_path)
    keyed = ["--manifest", str(where / "approved.json"), "--key", str(where / "release.pub")]
    good = subprocess.run(
        [LAMMER, "verify-install", "--root", str(tree), "--json", *keyed],
        capture_output=True, text=True, check=False, timeout=CLI_BOUND_S,
    )  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["approved"] == "approved.json"
    bad = subprocess.run(
        [LAMMER, "verify-install", "--root", str(root), *keyed],
        capture_output=True, text=True, check=False, timeout=CLI_BOUND_S,
    )  # fmt: skip
    assert bad.returncode == 1
    assert f"{RULES_MODULE} differs from the approved release" in bad.stdout
    seeded_out = subprocess.run(
        [LAMMER, "verify-install", "--root", str(root), "--json", "--seed", SEED.hex()],
        capture_output=True, text=True, check=False, timeout=CLI_BOUND_S,
    )  # fmt: skip
    got = json.loads(seeded_out.stdout)
    each, whole = spec_seeded(root, SEED)
    assert got["digest"] == whole
    assert {c["path"]: c["digest"] for c in got["components"]} == each
    refused = subprocess.run(
        [LAMMER, "release", "verify", str(where / "approved.json"), "--key",
         str(where / "other.pub")],
        capture_output=True, text=True, check=False, timeout=CLI_BOUND_S,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "not one of the approved public keys" in refused.stderr


# -- the floor authenticator ----------------------------------------------------------------


def _answer(root: Path, seed: bytes, request_id: str) -> dict[str, Any]:
    """A table's response/authenticate as the spec words it, from the second implementation."""
    each, whole = spec_seeded(root, seed)
    return {
        "table": "t1",
        "request_id": request_id,
        "status": "ok",
        "error": None,
        "seed": seed.hex(),
        "digest": whole,
        "components": [{"path": p, "hmac": each[p]} for p in sorted(each, key=str.encode)],
    }


def test_the_authenticator_approves_names_the_first_difference_and_refuses_a_replay(
    release: dict[str, Any], tree: Path, tmp_path: Path
) -> None:
    keys = public_keys([release["dir"] / "release.pub"])
    manifest = load_manifest(release["dir"] / "approved.json", keys)
    assert judge(_answer(tree, SEED, "r"), SEED, [manifest], "0.1.0").status == "approved"
    verdict = judge(_answer(tampered(tree, tmp_path), SEED, "r"), SEED, [manifest], "0.1.0")
    assert verdict.status == "unknown"
    assert verdict.differs == RULES_MODULE  # before rules/data/ in the listing's order
    assert RULES_MODULE in verdict.message

    auth = Authenticator((manifest,), ("lammer",))
    auth.received("lammer/t1/info", json.dumps({"table": "t1", "version": "0.1.0"}).encode())
    (topic, first), = auth.begin_round()  # fmt: skip
    assert topic == "lammer/t1/request/authenticate/records"
    asked = json.loads(first)
    recorded = _answer(tree, bytes.fromhex(asked["seed"]), asked["request_id"])
    auth.received("lammer/t1/response/authenticate", json.dumps(recorded).encode())
    auth.received("lammer/t1/response/authenticate", json.dumps(recorded).encode())  # QoS 1
    auth.end_round(30)
    assert [body["status"] for _, body in auth.published] == ["approved"]
    assert auth.replays_refused == 0
    auth.published.clear()

    # The next round asks a fresh seed; the recorded answer sent again is refused, as is
    # the same answer under the new request's id, and the table is silent.
    (_, second), = auth.begin_round()  # fmt: skip
    fresh = json.loads(second)
    assert fresh["seed"] != asked["seed"]
    auth.received("lammer/t1/response/authenticate", json.dumps(recorded).encode())
    relabelled = {**recorded, "request_id": fresh["request_id"]}
    auth.received("lammer/t1/response/authenticate", json.dumps(relabelled).encode())
    assert auth.replays_refused == 2
    auth.end_round(30)
    (topic, body), = auth.published  # fmt: skip
    assert topic == "lammer-floor/software/t1"
    assert body["status"] == "silent"
    assert body["table"] == "t1"
