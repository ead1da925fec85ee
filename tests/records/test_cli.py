"""``lammer records``: every operator mistake is one sentence on stderr and status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI_BOUND_S
from tests.records.conftest import StoreDb

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
        [LAMMER, "records", *args], capture_output=True, text=True, timeout=CLI_BOUND_S, check=False
    )
    assert done.returncode == 2
    assert done.stderr.startswith(sentence), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.heavy
def test_every_report_parameter_is_a_sentence_never_a_traceback(
    store_db: StoreDb, tmp_path: Path
) -> None:
    # Issue 27: --day 9999-12-31 ended in OverflowError (exit 1) on a real store.
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_bytes(b"\xff\xfe areas")
    not_a_table = tmp_path / "areas.toml"
    not_a_table.write_text('areas = "Pit 1"\n')
    cases = [
        (["--day", "9999-12-31"], "9999-12-31 is not a gaming day a report covers"),
        (
            ["--day", "0001-01-01", "--timezone", "Pacific/Kiritimati"],
            "0001-01-01 is not a gaming day a report covers",
        ),
        (["--from", "2026-12-01", "--to", "9999-12-31"], "9999-12-31 is not a gaming day"),
        (["--day", "2026-12-01", "--table", "t1\nt2"], "'t1\\nt2' is not a table id"),
        (["--day", "2026-12-01", "--table", "t" * 5000], f"'{'t' * 64}' is not a table id"),
        (["--day", "2026-12-01", "--big-hit", "0"], "a big hit pays 1 to 1,000,000,000 to 1"),
        (["--day", "2026-12-01", "--big-hit", "9" * 30], "a big hit pays 1 to 1,000,000,000"),
        (["--day", "9" * 5000], "usage:"),
        (["--day", "2026-12-01", "--area", "Pit 1", "--areas", str(bad_toml)], str(bad_toml)),
        (
            ["--day", "2026-12-01", "--area", "Pit 1", "--areas", str(not_a_table)],
            f"{not_a_table}: [areas] is not a table",
        ),
    ]
    for args, sentence in cases:
        done = subprocess.run(
            [LAMMER, "records", "report", "--db", store_db.dsn, *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, (args[:2], done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        text = done.stderr if sentence == "usage:" else done.stderr.removeprefix("lammer records: ")
        assert sentence in text, (args[:2], done.stderr)
        if sentence != "usage:":
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert len(done.stderr) < 400
