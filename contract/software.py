"""What a table runs, proven: the critical components of the installed lammer and their
digests (mqtt-api.md 1.4; docs/auditors/software-authentication.md).

The components are every file of the installed lammer packages (``PACKAGES``) and their
data, pay tables included, ``__pycache__`` folders and compiled ``.pyc``/``.pyo`` files left
out (Python writes them at will; they are made from the sources listed). Each is named by
its path relative to the folder holding the packages, with ``/`` (``rules/craps.py``,
``rules/data/cover_all.json``), and sorted by that path's UTF-8 bytes.

* **Plain** (``info``'s ``software.digest``, ``lammer verify-install``): each component's
  SHA-256 over its bytes, and the whole, the SHA-256 over the sorted listing written as
  ``sha256sum`` writes it, one ``<hex>  <path>\\n`` line per component (so
  ``sha256sum`` run in the packages' folder and sorted gives the same listing).
* **Seeded** (``request/authenticate``, ``lammer verify-install --seed``, GSA GAT's idea):
  under a seed the verifier chose, each component's ``HMAC-SHA256(seed, path || 0x00 ||
  sha256(file))`` (the 32 raw bytes of the file's SHA-256), and the whole,
  ``HMAC-SHA256(seed, listing)`` with the listing of those HMACs written as above. A
  choice where the spec is silent: the HMAC is over the component's SHA-256, not its
  bytes, so that a floor holding a release manifest (the components' SHA-256s, never the
  files) can compute the answer it expects for any seed; the answer still cannot be
  made ahead of the seed, and the path is inside the HMAC, so two components cannot be
  swapped.

Standard library only: the daemon, the floor's authenticator and the command line read
the files the same way, at the moment they are asked (nothing is cached).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PACKAGES: Final = (
    "bulk",
    "cli",
    "contract",
    "daemon",
    "deploy",
    "display",
    "drivers",
    "foundation",
    "metrics",
    "records",
    "rules",
    "simulators",
)
"""Every lammer package (pyproject's ``[tool.setuptools] packages``; a test holds them
equal)."""

SKIPPED_DIRS: Final = frozenset({"__pycache__"})
SKIPPED_SUFFIXES: Final = (".pyc", ".pyo")

SEED_MIN: Final = 16
SEED_MAX: Final = 64
"""A seed is 16 to 64 bytes (mqtt-api.md 1.4), written in hex."""


class SoftwareError(ValueError):
    """The installed tree cannot be read as components (a package missing, a file
    unreadable), or a seed that is not one; ``str()`` is a sentence."""


@dataclass(frozen=True, slots=True)
class Component:
    """One critical component: its path (``rules/craps.py``) and a hex digest (its SHA-256,
    or its HMAC under a seed)."""

    path: str
    digest: str


def installed_root() -> Path:
    """The folder holding the lammer packages this process imported (site-packages, or a
    source tree in an editable install)."""
    return Path(__file__).resolve().parent.parent


def _sort_key(path: str) -> bytes:
    return path.encode("utf-8")


def _files(root: Path) -> list[str]:
    paths: list[str] = []
    for package in PACKAGES:
        top = root / package
        if not top.is_dir():
            raise SoftwareError(f"{top} is not a folder: no lammer package {package!r} there")
        for folder, dirs, files in os.walk(top, onerror=_raise):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in files:
                if name.endswith(SKIPPED_SUFFIXES):
                    continue
                paths.append((Path(folder) / name).relative_to(root).as_posix())
    return sorted(paths, key=_sort_key)


def _raise(exc: OSError) -> None:
    raise SoftwareError(f"cannot read the installed tree: {exc}") from exc


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def components(root: Path | None = None) -> tuple[Component, ...]:
    """Every critical component under ``root`` (default: this installed lammer) with its
    SHA-256, read now, sorted by path. Raises ``SoftwareError`` with a sentence."""
    root = installed_root() if root is None else root
    found: list[Component] = []
    for rel in _files(root):
        try:
            found.append(Component(rel, file_sha256(root / rel)))
        except OSError as exc:
            raise SoftwareError(f"cannot read component {rel}: {exc}") from exc
    return tuple(found)


def listing(parts: Iterable[Component]) -> bytes:
    """The sorted listing, as ``sha256sum`` writes it: ``<hex>  <path>\\n`` per line."""
    ordered = sorted(parts, key=lambda c: _sort_key(c.path))
    return "".join(f"{c.digest}  {c.path}\n" for c in ordered).encode("utf-8")


def whole_digest(parts: Iterable[Component]) -> str:
    """The plain digest of the whole: SHA-256 over the listing of per-component SHA-256s."""
    return hashlib.sha256(listing(parts)).hexdigest()


def parse_seed(text: str) -> bytes:
    """A seed as the verifier writes it (hex, 16 to 64 bytes). Raises ``SoftwareError``."""
    if not isinstance(text, str) or len(text) % 2:
        raise SoftwareError("seed must be an even number of hex digits")
    try:
        seed = bytes.fromhex(text)
    except ValueError as exc:
        raise SoftwareError("seed must be hex digits (0-9, a-f)") from exc
    if not SEED_MIN <= len(seed) <= SEED_MAX:
        raise SoftwareError(f"seed must be {SEED_MIN} to {SEED_MAX} bytes, got {len(seed)}")
    return seed


def component_hmac(seed: bytes, path: str, sha256_hex: str) -> str:
    """A component's HMAC under ``seed``: ``HMAC-SHA256(seed, path || 0x00 || sha256)``."""
    message = path.encode("utf-8") + b"\0" + bytes.fromhex(sha256_hex)
    return hmac.new(seed, message, hashlib.sha256).hexdigest()


def seeded(parts: Iterable[Component], seed: bytes) -> tuple[tuple[Component, ...], str]:
    """Each component's HMAC under ``seed`` (from its SHA-256) and the whole's HMAC over
    their sorted listing: what a table answers and what a verifier expects."""
    macs = tuple(
        Component(c.path, component_hmac(seed, c.path, c.digest))
        for c in sorted(parts, key=lambda c: _sort_key(c.path))
    )
    return macs, hmac.new(seed, listing(macs), hashlib.sha256).hexdigest()


def first_difference(
    actual: Mapping[str, str], expected: Mapping[str, str]
) -> tuple[str, str] | None:
    """The first component (in the listing's order) that differs between two
    ``{path: digest}``, and how, in words; None when they are the same."""
    for path in sorted(actual.keys() | expected.keys(), key=_sort_key):
        if path not in actual:
            return path, f"{path} is missing (the approved release has it)"
        if path not in expected:
            return path, f"{path} is not part of the approved release"
        if not hmac.compare_digest(actual[path], expected[path]):
            return path, f"{path} differs from the approved release"
    return None
