"""The floor's certificates (``lammer floor-config``): a floor CA and one certificate per
node, made with the ``openssl`` command (installed by the Makefile's ``system-deps``; the
project has no X.509 library among its dependencies, and Python's ``ssl`` can use
certificates but not make them).

    DIR/ca.crt               0644   the floor CA: controllers (``broker-config --bridge-ca``)
                                    and ``lammer web`` verify the nodes with it
    DIR/ca/                  0700
    DIR/ca/ca.key            0600   its key, made here unless the operator gives
                                    ``--ca-cert/--ca-key`` (then it is used where it is and
                                    never copied)
    DIR/floor-<i>/node.crt   0644   node i's certificate: its host in subjectAltName, for
                                    the MQTT listener (server) and the routes (server and
                                    client: the nodes verify each other)
    DIR/floor-<i>/node.key   0600

Idempotent, as the rest of floor-config: what exists is kept while it is right (a node
certificate that the CA verifies, that names the node's host, matches its key and is valid
for 30 days more); what is not is made again, and each file's line says why. Keys are
ECDSA P-256; a new key is written 0600 before any byte of it (``replace_file``) and never
logged.

Errors: ``FloorTlsError(DaemonError, ValueError)`` with every problem.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from daemon.errors import DaemonError
from deploy.files import Change, Status, make_dir, replace_file

CA_DAYS: Final = 3650
NODE_DAYS: Final = 825
"""A node certificate's life (the longest a public CA may give; floor-config renews one
that has less than ``RENEW_BEFORE`` left when run again)."""
RENEW_BEFORE: Final = 30 * 86400
OPENSSL_TIMEOUT: Final = 60.0


class FloorTlsError(DaemonError, ValueError):
    """A certificate or key that cannot be used or made; ``problems`` lists every one."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True, slots=True)
class NodeTls:
    """Where one node's certificate and key are."""

    name: str
    host: str
    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class FloorCa:
    """The CA that signs the nodes: its certificate (in ``--out``) and key."""

    cert: Path
    key: Path | None
    given: bool


def openssl(*args: str, stdin: bytes | None = None) -> bytes:
    """Run ``openssl``; its stdout, or ``FloorTlsError`` with its last line of stderr."""
    # By its full path: the child is the openssl PATH names now, and a missing one is a sentence.
    found = shutil.which("openssl")
    if found is None:
        raise FloorTlsError(["openssl is not installed (make setup installs it)"])
    try:
        done = subprocess.run(  # noqa: S603  the openssl found on PATH; arguments are floor-config's own
            [found, *args],
            input=stdin,
            capture_output=True,
            timeout=OPENSSL_TIMEOUT,
            check=False,
        )
    except FileNotFoundError as exc:
        raise FloorTlsError(["openssl is not installed (make setup installs it)"]) from exc
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise FloorTlsError([f"openssl {args[0]}: {' '.join(why) or 'failed'}"])
    return done.stdout


def _public_key(path: Path, *, private: bool) -> bytes:
    if private:
        return openssl("pkey", "-in", str(path), "-pubout")
    return openssl("x509", "-in", str(path), "-noout", "-pubkey")


def _san(host: str) -> str:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"DNS:{host}"
    return f"IP:{host}"


def key_problem(path: Path) -> str | None:
    """Why the private key ``path`` is not private enough (group or others may use it)."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        return f"{path} may be read by others (mode {mode:04o}): chmod 0600 {path}"
    return None


def _new_key(where: Path) -> Path:
    key = where / "new.key"
    pem = openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    replace_file(key, pem, 0o600, None)
    return key


def floor_ca(
    out: Path,
    cluster: str,
    changes: list[Change],
    *,
    ca_cert: Path | None = None,
    ca_key: Path | None = None,
) -> FloorCa:
    """The CA that signs the nodes: the operator's (``ca_cert``/``ca_key``, its
    certificate copied to ``out/ca.crt``), the one made here before, or a new one."""
    cert = out / "ca.crt"
    if ca_cert is not None and ca_key is not None:
        problems = [p for p in (key_problem(ca_key),) if p]
        if problems:
            raise FloorTlsError([f"--ca-key: {p}" for p in problems])
        if _public_key(ca_cert, private=False) != _public_key(ca_key, private=True):
            raise FloorTlsError([f"--ca-key: {ca_key} is not the key of --ca-cert {ca_cert}"])
        data = openssl("x509", "-in", str(ca_cert))
        old = cert.read_bytes() if cert.exists() else None
        if old != data:
            replace_file(cert, data, 0o644, None)
            changes.append(Change(cert, "created" if old is None else "updated", "--ca-cert"))
        else:
            changes.append(Change(cert, "unchanged", "--ca-cert"))
        return FloorCa(cert, ca_key.absolute(), given=True)
    key = out / "ca" / "ca.key"
    make_dir(key.parent, 0o700, changes, fix_mode=True)
    if cert.exists() and key.exists():
        if problem := key_problem(key):
            raise FloorTlsError([problem])
        if _public_key(cert, private=False) != _public_key(key, private=True):
            raise FloorTlsError(
                [f"{key} is not the key of {cert}: restore the pair, or delete both for a new CA"]
            )
        changes.append(Change(cert, "kept", "floor CA"))
        changes.append(Change(key, "kept", "floor CA key"))
        return FloorCa(cert, key, given=False)
    if cert.exists():
        # The operator's CA from an earlier run: its key stays with the operator.
        changes.append(Change(cert, "kept", "floor CA (no key here: --ca-key signs new nodes)"))
        return FloorCa(cert, None, given=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".ca-") as tmp:
        new_key = _new_key(Path(tmp))
        pem = openssl(
            "req", "-x509", "-new", "-key", str(new_key), "-days", str(CA_DAYS),
            "-subj", f"/CN=lammer floor CA {cluster}",
            "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        os.replace(new_key, key)
        replace_file(cert, pem, 0o644, None)
    changes.append(Change(cert, "created", "new floor CA"))
    changes.append(Change(key, "created", "its key"))
    return FloorCa(cert, key, given=False)


def _node_problem(node: NodeTls, ca: FloorCa) -> str | None:
    """Why node's certificate must be made again, or None to keep it."""
    if not node.cert.exists() or not node.key.exists():
        return "new"
    try:
        openssl("verify", "-CAfile", str(ca.cert), str(node.cert))
    except FloorTlsError:
        return "not signed by the floor CA"
    text = openssl("x509", "-in", str(node.cert), "-noout", "-ext", "subjectAltName")
    names = {n.strip() for n in text.decode().splitlines()[-1].split(",")}
    wanted = _san(node.host).replace("IP:", "IP Address:")
    if wanted not in names:
        return f"does not name {node.host}"
    try:
        openssl("x509", "-in", str(node.cert), "-noout", "-checkend", str(RENEW_BEFORE))
    except FloorTlsError:
        return "expires within 30 days"
    if _public_key(node.cert, private=False) != _public_key(node.key, private=True):
        return "does not match node.key"
    return None


def node_certificates(ca: FloorCa, nodes: Sequence[NodeTls], changes: list[Change]) -> None:
    """Keep each node's certificate while it is right, else make a new key and
    certificate signed by ``ca`` (``FloorTlsError`` when the CA's key is not at hand)."""
    for node in nodes:
        why = _node_problem(node, ca)
        if why is None:
            mode = node.key.stat().st_mode & 0o777
            if mode != 0o600:
                node.key.chmod(0o600)
                changes.append(Change(node.key, "fixed", f"mode {mode:04o} -> 0600, key kept"))
            else:
                changes.append(Change(node.key, "kept"))
            changes.append(Change(node.cert, "kept", f"names {node.host}"))
            continue
        if ca.key is None:
            raise FloorTlsError(
                [f"{node.cert}: {why}, and the CA's key is not here: give --ca-cert and --ca-key"]
            )
        make_dir(node.cert.parent, 0o700, changes, fix_mode=True)
        with tempfile.TemporaryDirectory(dir=node.cert.parent, prefix=".tls-") as tmp:
            key = _new_key(Path(tmp))
            ext = Path(tmp) / "ext.cnf"
            ext.write_text(
                "[v3]\n"
                "basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth,clientAuth\n"
                f"subjectAltName={_san(node.host)}\n"
            )
            csr = openssl("req", "-new", "-key", str(key), "-subj", f"/CN={node.name}")
            pem = openssl(
                "x509", "-req", "-CA", str(ca.cert), "-CAkey", str(ca.key),
                "-set_serial", f"0x{secrets.token_hex(16)}", "-days", str(NODE_DAYS),
                "-extfile", str(ext), "-extensions", "v3",
                stdin=csr,
            )  # fmt: skip
            os.replace(key, node.key)
            replace_file(node.cert, pem, 0o644, None)
        status: Status = "created" if why == "new" else "updated"
        changes.append(Change(node.key, status, "new key"))
        changes.append(Change(node.cert, status, f"{why}: signed for {node.host}"))
