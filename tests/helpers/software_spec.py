"""A second implementation of the software digests (issue 33), written out from
mqtt-api.md 1.4 and docs/auditors/software-authentication.md with hashlib and hmac only,
nothing of lammer's: what tests check ``contract.software`` and the tables' answers
against."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path


def spec_files(root: Path) -> dict[str, bytes]:
    """Every file of the lammer packages under ``root`` but __pycache__ and .pyc/.pyo."""
    found: dict[str, bytes] = {}
    for package in ("bulk", "cli", "contract", "daemon", "deploy", "display", "drivers",
                    "foundation", "metrics", "records", "rules", "simulators"):  # fmt: skip
        for folder, dirs, files in os.walk(root / package):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = Path(folder, name)
                found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def spec_plain(root: Path) -> tuple[dict[str, str], str]:
    """Per component SHA-256, and SHA-256 over the sorted "<hex>  <path>\\n" listing."""
    each = {p: hashlib.sha256(b).hexdigest() for p, b in spec_files(root).items()}
    lines = "".join(f"{each[p]}  {p}\n" for p in sorted(each, key=str.encode))
    return each, hashlib.sha256(lines.encode()).hexdigest()


def spec_seeded(root: Path, seed: bytes) -> tuple[dict[str, str], str]:
    """Per component HMAC-SHA256(seed, path || 0 || sha256(bytes)), and the HMAC over the
    sorted listing of those."""
    each = {
        p: hmac.new(seed, p.encode() + b"\0" + hashlib.sha256(b).digest(), "sha256").hexdigest()
        for p, b in spec_files(root).items()
    }
    lines = "".join(f"{each[p]}  {p}\n" for p in sorted(each, key=str.encode))
    return each, hmac.new(seed, lines.encode(), "sha256").hexdigest()
