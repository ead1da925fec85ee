"""foundation.files: a private file replaced whole, or not at all."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from foundation.files import replaced_privately


def test_the_file_is_owner_only_and_replaces_an_earlier_one(tmp_path: Path) -> None:
    path = tmp_path / "record.txt"
    path.write_text("old")
    path.chmod(0o644)
    with replaced_privately(path) as out:
        out.write("new")
        assert path.read_text() == "old"  # not before it is complete
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["record.txt"]


def test_an_interruption_leaves_the_earlier_file_and_no_part(tmp_path: Path) -> None:
    path = tmp_path / "record.txt"
    path.write_text("old")

    def interrupted() -> None:
        with replaced_privately(path) as out:
            out.write("half")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["record.txt"]
