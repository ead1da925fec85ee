"""``lammer records``: every operator mistake is one sentence on stderr and status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LAMMER = str(Path(sys.executable).parent / "lammer")


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (
            ["run", "--db", "x", "--mqtt", "floor1:1884,floor2:99999"],
            "lammer records: --mqtt 'floor1:1884,floor2:99999': must be between 1 and 65535",
        ),
        (
            ["run", "--db", "x", "--mqtt", "floor1,,floor2"],
            "lammer records: --mqtt 'floor1,,floor2': an empty broker",
        ),
        (
            ["run", "--db", "x", "--mqtt-password-file", "/nonexistent/pw"],
            "lammer records: cannot read /nonexistent/pw: No such file or directory",
        ),
        (
            ["run", "--db", "x", "--prefix", "lammer/#"],
            "lammer records: 'lammer/#' is not a topic prefix (levels without + or #)",
        ),
        (
            ["run", "--db", "host=/nonexistent dbname=x", "--mqtt", "127.0.0.1:1"],
            "lammer records: the store cannot be reached",
        ),
        (
            ["reconcile", "--db", "host=/nonexistent dbname=x", "--journal", "/nonexistent.db"],
            "lammer records: the store cannot be reached",
        ),
    ],
)
@pytest.mark.heavy
def test_operator_mistakes(args: list[str], sentence: str) -> None:
    done = subprocess.run(
        [LAMMER, "records", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stderr.startswith(sentence), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
