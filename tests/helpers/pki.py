"""Certificates made with openssl for the TLS tests: a CA of the test's own and what it
signs (P-256 keys, two days), the keys 0600."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import CLI_BOUND_S

_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")


def openssl(*args: str, cwd: Path) -> bytes:
    """Run ``openssl`` in ``cwd``; its output (the test fails with openssl's words)."""
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, timeout=CLI_BOUND_S, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def make_ca(where: Path, subject: str, *, name: str = "ca", key_usage: str = "") -> Path:
    """A self-signed CA, ``where/<name>.crt`` and ``<name>.key`` (0600); ``key_usage`` adds
    a critical keyUsage (``keyCertSign``). The certificate's path."""
    where.mkdir(parents=True, exist_ok=True)
    usage = ("-addext", f"keyUsage=critical,{key_usage}") if key_usage else ()
    openssl("req", "-x509", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.crt",
            "-days", "2", "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE",
            *usage, cwd=where)  # fmt: skip
    (where / f"{name}.key").chmod(0o600)
    return where / f"{name}.crt"


def issue(where: Path, name: str, subject: str, extensions: str, *, ca: str = "ca") -> Path:
    """A certificate ``where/<name>.crt`` and its key ``<name>.key`` (0600) signed by the
    CA ``where/<ca>.crt``, with ``extensions`` (an openssl extension file's lines). The
    certificate's path."""
    openssl("req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
            cwd=where)  # fmt: skip
    (where / "ext.cnf").write_text(extensions)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", f"{name}.crt",
            cwd=where)  # fmt: skip
    (where / f"{name}.key").chmod(0o600)
    return where / f"{name}.crt"


@dataclass(frozen=True)
class Pki:
    """A CA made for the test and a broker certificate for 127.0.0.1 signed by it."""

    ca: Path
    cert: Path
    key: Path


def make_pki(where: Path, name: str) -> Pki:
    """A CA named ``name`` and a broker certificate for 127.0.0.1."""
    ca = make_ca(where, f"/CN={name}", key_usage="keyCertSign,cRLSign")
    cert = issue(
        where,
        "broker",
        "/CN=127.0.0.1",
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    return Pki(ca, cert, where / "broker.key")


def operator_ca(where: Path, name: str = "ca") -> tuple[Path, Path]:
    """A CA made outside floor-config (the operator's): its certificate and key (0600)."""
    return make_ca(where, f"/CN=operator {name}", name=name, key_usage="keyCertSign"), (
        where / f"{name}.key"
    )


def make_certificate(where: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for 127.0.0.1 with its key (0600)."""
    ca = make_ca(where, "/CN=pit CA")
    cert = issue(
        where, "web", "/CN=pit", "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n"
    )
    return ca, cert, where / "web.key"


def other_ca(where: Path) -> tuple[Path, Path]:
    """A CA that is not the floor's, and a certificate it signed for 127.0.0.1."""
    ca = make_ca(where, "/CN=not the floor")
    cert = issue(
        where,
        "node",
        "/CN=intruder",
        "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n",
    )
    return ca, cert
