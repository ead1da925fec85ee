"""Release manifests: the components' digests of one lammer release, signed.

A manifest is a JSON object written by ``lammer release manifest``::

    {"format": "lammer-manifest/1", "version": "0.1.0", "digest": "<hex>",
     "components": [{"path": "rules/craps.py", "sha256": "<hex>"}, ...],
     "key": "<key id>", "signature": "<hex>"}

``digest`` is the whole's plain digest (``contract.software.whole_digest``) of
``components``; ``key`` names the signing key (the first 16 hex digits of the SHA-256 of
its 32 raw public bytes); ``signature`` is Ed25519 (RFC 8032, the ``cryptography``
package) over the manifest's canonical JSON without ``signature`` (keys sorted, no spaces,
ASCII). The release holder keeps the private key (PEM, PKCS #8); the floor gets the
public key (PEM, SubjectPublicKeyInfo) and refuses a manifest whose signature does not
verify, or that names a key it does not hold, with a sentence.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from contract.software import Component, whole_digest

FORMAT: Final = "lammer-manifest/1"
MAX_MANIFEST: Final = 4 * 1024 * 1024
"""Bytes of a manifest file read at most (a release lists a few hundred components)."""
_HEX64: Final = re.compile(r"[0-9a-f]{64}")


class ManifestError(ValueError):
    """A manifest or a key that cannot be used; ``str()`` is a sentence for a person."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """A verified manifest: its name (the file's), the release's version, the whole's
    digest, each component's SHA-256 and the key that signed it."""

    name: str
    version: str
    digest: str
    components: Mapping[str, str]
    key: str

    def parts(self) -> tuple[Component, ...]:
        """The components as ``contract.software`` reads them."""
        return tuple(Component(p, d) for p, d in self.components.items())


def key_id(public: Ed25519PublicKey) -> str:
    """The short name of a public key: 16 hex digits of the SHA-256 of its raw bytes."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def generate_key() -> tuple[bytes, bytes]:
    """A new Ed25519 key: its private half (PEM, PKCS #8) and public half (PEM)."""
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The release holder's key from its PEM file. Raises ``ManifestError``."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ManifestError(f"{path}: not a readable private key in PEM ({exc})") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ManifestError(f"{path}: not an Ed25519 key (lammer release keygen makes one)")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An approved public key from its PEM file. Raises ``ManifestError``."""
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: not a readable public key in PEM ({exc})") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ManifestError(f"{path}: not an Ed25519 public key")
    return key


def public_keys(paths: Iterable[Path]) -> dict[str, Ed25519PublicKey]:
    """The approved public keys by key id."""
    keys = (load_public_key(p) for p in paths)
    return {key_id(k): k for k in keys}


def _signed_bytes(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def make_manifest(
    parts: Sequence[Component], version: str, private: Ed25519PrivateKey
) -> dict[str, Any]:
    """The signed manifest of ``parts`` (the components' SHA-256s) for ``version``."""
    body: dict[str, Any] = {
        "format": FORMAT,
        "version": version,
        "digest": whole_digest(parts),
        "components": [{"path": c.path, "sha256": c.digest} for c in parts],
        "key": key_id(private.public_key()),
    }
    return {**body, "signature": private.sign(_signed_bytes(body)).hex()}


def _components(raw: object, name: str) -> dict[str, str]:
    if not isinstance(raw, list) or not raw:
        raise ManifestError(f"manifest {name}: components must be a non-empty list")
    found: dict[str, str] = {}
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"path", "sha256"}:
            raise ManifestError(f"manifest {name}: each component is {{path, sha256}}")
        path, digest = item["path"], item["sha256"]
        if not isinstance(path, str) or not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise ManifestError(f"manifest {name}: a component's sha256 is 64 hex digits")
        if path in found:
            raise ManifestError(f"manifest {name}: component {path} is listed twice")
        found[path] = digest
    return found


def verify_manifest(data: bytes, keys: Mapping[str, Ed25519PublicKey], *, name: str) -> Manifest:
    """The manifest in ``data`` once its signature verifies under one of ``keys`` (by key
    id). Raises ``ManifestError`` with a sentence: not a manifest, signed by a key not
    approved here, a signature that does not verify (changed after signing), or a digest
    that is not its components'."""
    if len(data) > MAX_MANIFEST:
        raise ManifestError(f"manifest {name} is over {MAX_MANIFEST} bytes")
    try:
        manifest = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(f"manifest {name} is not JSON: {exc}") from exc
    fields = {"format", "version", "digest", "components", "key", "signature"}
    if not isinstance(manifest, dict) or set(manifest) != fields:
        raise ManifestError(f"manifest {name} is not a lammer manifest (fields {sorted(fields)})")
    if manifest["format"] != FORMAT:
        raise ManifestError(f"manifest {name}: format {manifest['format']!r}, not {FORMAT!r}")
    key_name, signature = manifest["key"], manifest["signature"]
    public = keys.get(key_name) if isinstance(key_name, str) else None
    if public is None:
        raise ManifestError(
            f"manifest {name} is signed by key {str(key_name)[:40]!r}, which is not one of the "
            f"approved public keys ({', '.join(sorted(keys)) or 'none given'}): refused"
        )
    body = {k: v for k, v in manifest.items() if k != "signature"}
    try:
        public.verify(bytes.fromhex(signature), _signed_bytes(body))
    except (InvalidSignature, ValueError, TypeError) as exc:
        raise ManifestError(
            f"manifest {name}: its signature does not verify under key {key_name}: the file "
            "was changed after it was signed, or another key signed it: refused"
        ) from exc
    parts = _components(manifest["components"], name)
    digest = whole_digest(Component(p, d) for p, d in parts.items())
    if manifest["digest"] != digest or not isinstance(manifest["version"], str):
        raise ManifestError(f"manifest {name}: its digest is not its components' digest")
    return Manifest(
        name=name,
        version=manifest["version"],
        digest=digest,
        components=MappingProxyType(parts),
        key=key_name,
    )


def load_manifest(path: Path, keys: Mapping[str, Ed25519PublicKey]) -> Manifest:
    """``verify_manifest`` on a file, named by its file name."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc}") from exc
    return verify_manifest(data, keys, name=path.name)
