"""``lammer demo`` as a user runs it: a real subprocess that starts a broker, three
simulated tables and their daemons, plays a few rounds and prints the final picture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LAMMER = str(Path(sys.executable).parent / "lammer")


def test_demo_plays_rounds_on_three_tables_and_stops_cleanly(tmp_path: Path) -> None:
    workdir = tmp_path / "floor"
    argv = [LAMMER, "demo", "--rounds", "2", "--interval", "0", "--seed", "7"]
    done = subprocess.run(
        [*argv, "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin:/usr/sbin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for table in ("uth-1", "craps-1", "bj-1"):
        assert f"Table {table}" in done.stdout
    assert done.stdout.count("online") >= 3
    # lammer web ran beside them, and its three kinds of page were printed.
    for page in ("/table/uth-1", "/pit", "/stick/craps-1"):
        assert page in done.stdout
    assert '"serving"' in (workdir / "web.log").read_text()
    # Every daemon journaled what it published, and stopped cleanly (offline after SIGTERM).
    for table, topic in (("uth-1", "cover_all/result"), ("bj-1", "bust_bonus/result")):
        export = subprocess.run(
            [LAMMER, "journal", str(workdir / f"{table}.db"), "--kind", "publish"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        rows = [json.loads(line) for line in export.stdout.splitlines()]
        results = {r["payload"]["round_id"] for r in rows if r["topic"] == topic}
        assert len(results) >= 2, f"{table}: {results}"
        seqs = [r["seq"] for r in rows]
        assert seqs == sorted(seqs)
    logs = {p.name: p.read_text() for p in workdir.glob("lammer-*.log")}
    assert len(logs) == 3
    for name, text in logs.items():
        assert '"table stopped"' in text, name
