"""Configuration files (foundation.config_files): the TOML file's problems as sentences, the
paths it names taken from its folder, a secret file only its owner's."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError, ValidationInfo, field_validator

from foundation.config_files import ConfigProblems, did_you_mean, private_file, read_toml


class _Error(ConfigProblems):
    pass


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "(file): no such file"),
        (b"\xff\xfe", "(file): not UTF-8 text"),
        (b"[table\n", "(file): not valid TOML: "),
    ],
)
def test_a_file_that_cannot_be_read_is_one_sentence(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "c.toml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(_Error) as caught:
        read_toml(path, _Error)
    assert caught.value.path == path
    (found,) = caught.value.problems
    assert found.startswith(problem)
    assert str(caught.value).startswith(f"{path}: 1 problem\n  (file): ")
    with pytest.raises(_Error, match="is a directory"):
        read_toml(tmp_path, _Error)


class _Secret(BaseModel):
    secret: Path

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: Path, info: ValidationInfo) -> Path:
        return private_file(value, info)


def test_a_secret_is_taken_from_the_files_folder_and_must_be_private(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("x\n")
    secret.chmod(0o600)
    found = _Secret.model_validate({"secret": "pw"}, context={"base_dir": tmp_path})
    assert found.secret == secret
    secret.chmod(0o640)
    with pytest.raises(ValidationError, match=f"got mode 0640 .*: chmod 600 {secret}"):
        _Secret.model_validate({"secret": "pw"}, context={"base_dir": tmp_path})
    with pytest.raises(ValidationError, match="no such file"):
        _Secret.model_validate({"secret": "nope"}, context={"base_dir": tmp_path})


def test_an_unknown_key_names_the_closest_known_one() -> None:
    assert did_you_mean("mqtt_prot", ["mqtt_port", "prefix"]) == "; did you mean 'mqtt_port'?"
    assert did_you_mean("zzz", ["mqtt_port", "prefix"]) == ""
