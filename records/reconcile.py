"""``lammer records reconcile``: a table's journal against the store, by seq.

The journal is read through its documented export, ``lammer journal FILE --kind
publish`` (JSON lines, one per published message: ``seq``, ``ts``, ``kind`` and the
record: its ``topic`` under the base topic), in a subprocess: the records never import the
daemon's internals. Only what the store keeps counts: JSON messages of the contract
(``availability`` has no seq; ``request/...`` is never published by a table).

A message the journal still holds in its outbox (not acknowledged by the broker) or set
aside as refused was never sent, and is not counted.

Missing: published by the table, not in the store (nor covered by a recorded gap, which
is listed apart). Extra: in the store for that table, within the journal's seq range, not
published by it (a store that holds what a table never said is the worse failure).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from contract.topics import Topic, is_request
from records.errors import ReportError

_STORED = "SELECT seq FROM message WHERE table_id = %s AND seq BETWEEN %s AND %s"
_GAPS = "SELECT from_seq, to_seq FROM gap WHERE table_id = %s"


@dataclass(slots=True, kw_only=True)
class Reconciliation:
    """One table's journal against the store."""

    table: str
    journal: Path
    published: int
    missing: list[int] = field(default_factory=list)
    in_gaps: list[int] = field(default_factory=list)
    extra: list[int] = field(default_factory=list)


def journal_publications(path: Path, lammer: str | None = None) -> tuple[str, list[int]]:
    """The table id and the seqs of every JSON message the journal published."""
    command = lammer or shutil.which("lammer") or str(Path(sys.executable).parent / "lammer")
    done = subprocess.run(  # noqa: S603  argv is lammer journal and the operator's journal path (no shell)
        [command, "journal", str(path), "--kind", "publish"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise ReportError(f"{path}: lammer journal failed: {done.stderr.strip()}")
    table = ""
    seqs: list[int] = []
    for line in done.stdout.splitlines():
        record: dict[str, Any] = json.loads(line)
        topic = str(record.get("topic", ""))
        if topic == Topic.AVAILABILITY or is_request(topic):
            continue
        if record.get("refused") or not record.get("published", True):
            continue  # never sent (refused by the client) or still in the outbox
        body = record.get("payload")
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                body = None
        if isinstance(body, dict) and isinstance(body.get("table"), str):
            table = table or body["table"]
        seqs.append(int(record["seq"]))
    if not table and seqs:
        raise ReportError(f"{path}: no published message names its table")
    return table, seqs


def reconcile(
    conn: psycopg.Connection[Any], table: str, path: Path, seqs: Iterable[int]
) -> Reconciliation:
    """Compare the seqs a journal published with the store's."""
    published = sorted(set(seqs))
    result = Reconciliation(table=table, journal=path, published=len(published))
    if not published:
        return result
    with conn.transaction():
        stored = {r[0] for r in conn.execute(_STORED, (table, published[0], published[-1]))}
        gaps = conn.execute(_GAPS, (table,)).fetchall()
    mine = set(published)
    for seq in published:
        if seq not in stored:
            if any(a <= seq <= b for a, b in gaps):
                result.in_gaps.append(seq)
            else:
                result.missing.append(seq)
    result.extra = sorted(stored - mine)
    return result


def summary(results: list[Reconciliation]) -> str:
    """One block per table: counts, then the seqs (ranges) missing and extra."""
    lines = []
    for r in results:
        lines.append(
            f"{r.table} ({r.journal}): {r.published} published, {len(r.missing)} missing, "
            f"{len(r.extra)} extra, {len(r.in_gaps)} in recorded gaps"
        )
        if r.missing:
            lines.append(f"  missing: {_ranges(r.missing)}")
        if r.extra:
            lines.append(f"  extra: {_ranges(r.extra)}")
        if r.in_gaps:
            lines.append(f"  in recorded gaps: {_ranges(r.in_gaps)}")
    return "\n".join(lines) + "\n"


def _ranges(seqs: list[int]) -> str:
    out: list[str] = []
    start = prev = seqs[0]
    for seq in [*seqs[1:], None]:
        if seq is not None and seq == prev + 1:
            prev = seq
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if seq is not None:
            start = prev = seq
    return ", ".join(out)
