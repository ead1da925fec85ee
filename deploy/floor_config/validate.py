"""The checks ``plan_floor`` makes of the controllers' declarations and of the files in
``--out``: each appends its problems as sentences, so every one is reported at once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deploy import floor, floor_tls
from deploy.files import foreign_files
from deploy.floor_config.model import GENERATED_BY, Declared


def read_declarations(paths: Sequence[Path], problems: list[str]) -> tuple[Declared, ...]:  # noqa: C901  reads each file, then one independent check per rule
    found: list[Declared] = []
    for path in paths:
        try:
            with path.open("rb") as f:
                data = f.read(floor.DECLARATION_MAX_BYTES + 1)
            declaration = floor.parse_declaration(data.decode("utf-8"))
        except OSError as exc:
            problems.append(f"{path}: cannot read it ({exc.strerror})")
            continue
        except UnicodeDecodeError:
            problems.append(f"{path}: not UTF-8")
            continue
        except floor.FloorError as exc:
            problems.append(f"{path}: {exc}")
            continue
        found.append(Declared(path, declaration))
    by_name: dict[str, list[Declared]] = {}
    by_base: dict[str, list[Declared]] = {}
    for d in found:
        by_name.setdefault(d.declaration.controller, []).append(d)
        for t in d.declaration.tables:
            by_base.setdefault(t.base, []).append(d)
    for name, same in by_name.items():
        if len(same) > 1:
            files = ", ".join(str(d.path) for d in same)
            problems.append(f"controller {name!r} is declared more than once: {files}")
    for base, same in by_base.items():
        if len({d.declaration.controller for d in same}) > 1:
            owners = ", ".join(f"{d.declaration.controller} ({d.path})" for d in same)
            problems.append(
                f"table {base} is declared by more than one controller: {owners}; each "
                "could publish the other's state"
            )
    bases = sorted(by_base)
    for outer in bases:
        for inner in bases:
            if inner.startswith(outer + "/"):
                problems.append(
                    f"table {outer}'s topics hold table {inner}'s: its controller could "
                    f"publish {inner}'s state ([mqtt] prefix)"
                )
    for d in found:
        if d.declaration.tables and escape_problem(d.declaration.to_json()):
            problems.append(f"{d.path}: {escape_problem(d.declaration.to_json())}")
    return tuple(sorted(found, key=lambda d: d.declaration.controller))


def escape_problem(text: str) -> str | None:
    """Why ``text`` cannot be written as a string nats-server and JSON read alike."""
    if any(not c.isprintable() for c in text.replace("\n", "")):
        return "holds a control character"
    return None


def foreign_file_problems(out: Path, nodes: int) -> list[str]:
    paths = [out / f"floor-{index}" / "nats.conf" for index in range(1, max(nodes, 0) + 1)]
    return foreign_files(paths, marker=GENERATED_BY, tool="floor-config")


def ca_problems(ca_cert: Path | None, ca_key: Path | None) -> list[str]:
    """The problems of ``--ca-cert`` and ``--ca-key``: both or neither, each a PEM file of
    its kind, the key readable by its owner only."""
    problems: list[str] = []
    if (ca_cert is None) != (ca_key is None):
        problems.append("--ca-cert and --ca-key go together: the CA's certificate and its key")
    for option, path, marker in (
        ("--ca-cert", ca_cert, "-----BEGIN CERTIFICATE-----"),
        ("--ca-key", ca_key, "PRIVATE KEY-----"),
    ):
        if path is None:
            continue
        try:
            head = path.read_bytes()[:65536].decode("ascii", errors="replace")
        except OSError as exc:
            problems.append(f"{option}: cannot read {path} ({exc.strerror})")
            continue
        if marker not in head:
            problems.append(f"{option}: {path} is not a PEM file holding {marker.strip('-')}")
        elif option == "--ca-key" and (problem := floor_tls.key_problem(path)):
            problems.append(f"--ca-key: {problem}")
    return problems


def path_problems(out: Path, data_dir: Path, install_dir: Path) -> list[str]:
    """The problems of ``--out``, ``--data-dir`` and ``--install-dir``: each a value the node
    files can hold, ``--out`` a directory if it exists."""
    problems: list[str] = []
    for option, path in (
        ("--out", out),
        ("--data-dir", data_dir),
        ("--install-dir", install_dir),
    ):
        if not str(path).strip() or any(not c.isprintable() for c in str(path)):
            problems.append(f"{option}: one line of printable characters, got {str(path)!r}")
        elif escape_problem(str(path)):
            problems.append(f"{option}: {escape_problem(str(path))}")
    if out.exists() and not out.is_dir():
        problems.append(f"--out: {out} is not a directory")
    return problems
